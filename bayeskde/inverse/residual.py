"""Forward noise of the inverse model: Gaussian, or a density of the GP's
leave-one-out residuals.

The forward model (F) of :mod:`bayeskde.inverse` is
x = f(y) + eps with eps ~ N(0, s^2 I): homoscedastic and isotropic. Many
simulators have additive noise that is neither (a crescent, a spike on a slab),
x = g(y) + e with e independent of y. For those the *residual* noise model
keeps the GP's mean and latent variance at one (pair, amplitude, noise) and
replaces the Gaussian by a kernel density of the GP's exact leave-one-out
(LOO) residuals r_i,

    p(x | y, D) = (1/m) sum_i N(x; mu(y) + r_i, h^2 Cov(r) + var_f(y) I),     (R)

with h chosen by the LOO log density of (R) itself on the training pairs.

LOO formulas (fixed hyperparameters). With K = a^2 phi + s^2 I and the kept
spectrum phi = U diag(lambda) U^T (U orthonormal, ``(m, r)``; the low-rank
evidence's phi = F F^T has the same form, U = F V Lambda^(-1/2), so these
are the Woodbury forms and no m x m matrix is needed), the smoother is
S = a^2 phi K^-1 = U diag(c) U^T, c_j = a^2 lambda_j / (a^2 lambda_j + s^2),
and K^-1 = (I - S) / s^2. The GP's prediction of x_i from the other m - 1
points (Rasmussen and Williams 2006, eqs. 5.10-5.12) then has::

    residual  r_i = x_i - E[x_i | x_-i] = (K^-1 X)_i / (K^-1)_ii
                  = (x_i - (S X)_i) / (1 - S_ii),
    variance  sigma_i^2 = 1 / (K^-1)_ii = s^2 / (1 - S_ii),

the variance of the noisy x_i, so the LOO latent variance is
sigma_i^2 - s^2. Cost O(m r d_x) from U, no refit. The tests check both
against m brute-force refits.

LOO densities (what ``noise="auto"`` compares):

* Gaussian: log N(x_i; E[x_i | x_-i], sigma_i^2 I) = log N(r_i; 0, sigma_i^2 I)
  per component, averaged over the predictive's components by their weights.
* residual: log (1/(m-1)) sum_{j != i} N(r_i - r_j; 0, h^2 Cov(r) +
  (sigma_i^2 - s^2) I): (R) at y_i with point i left out (x_i - mu_-i(y_i) =
  r_i; the residuals r_j, j != i, were computed with point i in the data, a
  second-order leak).
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax.scipy.special import logsumexp

__all__ = [
    "ResidualNoise",
    "gp_loo",
    "residual_loo_log_density",
    "fit_residual_noise",
    "residual_log_likelihood",
    "BANDWIDTHS",
]

#: The bandwidth grid of (R): h multiplies the residuals' covariance's square
#: root (48 log-spaced values from 1e-3; Scott's factor m^(-1/(d+4)) is 0.32 for two
#: dimensions and 1,000 points, 0.61 for ten).
BANDWIDTHS = tuple(float(h) for h in np.geomspace(1e-3, 3.0, 48))
_ROWS = 256


class ResidualNoise(NamedTuple):
    """The residual noise model (R) (:func:`fit_residual_noise`).

    ``residuals`` ``(m, d_x)`` the GP's LOO residuals r_i; ``basis``
    ``(d_x, d_x)`` and ``eta`` ``(d_x,)`` the eigenvectors and eigenvalues
    of H = h^2 Cov(r); ``rotated`` = residuals @ basis; ``bandwidth`` h.
    """

    residuals: jax.Array
    basis: jax.Array
    eta: jax.Array
    rotated: jax.Array
    bandwidth: jax.Array


def gp_loo(U, lam, X, amplitude, noise):
    """Exact LOO residuals ``(m, d_x)`` and predictive variances ``(m,)`` of
    the GP with kept spectrum ``U`` ``(m, r)`` (orthonormal columns; zero
    columns allowed), ``lam`` ``(r,)``, centred targets ``X`` ``(m, d_x)``,
    amplitude a^2 and noise s^2 (module docstring). Cost O(m r d_x)."""
    c = amplitude * lam / (amplitude * lam + noise)  # (r,)
    fitted = U @ (c[:, None] * (U.T @ X))
    one_minus = 1.0 - (U * U) @ c  # 1 - S_ii
    one_minus = jnp.maximum(one_minus, jnp.finfo(X.dtype).eps)
    return (X - fitted) / one_minus[:, None], noise / one_minus


def _rotate(residuals, h):
    C = jnp.atleast_2d(jnp.cov(residuals.T))
    eta, V = jnp.linalg.eigh(C)
    eta = jnp.maximum(eta, jnp.finfo(residuals.dtype).tiny)
    return V, h**2 * eta, residuals @ V


@jax.jit
def _loo_rows(rot, eta, extra, idx):
    """log (1/(m-1)) sum_{j != i} N(r_i - r_j; 0, diag(eta) + extra_i I) in
    the rotated basis, for the rows ``idx``."""
    m, d = rot.shape
    s = eta[None] + extra[idx][:, None]  # (b, d)
    diff = rot[idx][:, None, :] - rot[None]  # (b, m, d)
    ll = (-0.5 * jnp.sum(diff**2 / s[:, None], -1)
          - 0.5 * jnp.sum(jnp.log(2 * jnp.pi * s), -1)[:, None])
    ll = jnp.where(jnp.arange(m)[None] == idx[:, None], -jnp.inf, ll)
    return logsumexp(ll, axis=1) - jnp.log(m - 1.0)


def residual_loo_log_density(residuals, latent_var, h):
    """Per training point, the LOO log density of (R) at bandwidth ``h``:
    log (1/(m-1)) sum_{j != i} N(r_i - r_j; 0, h^2 Cov(r) + latent_var_i I).
    ``residuals`` ``(m, d_x)``, ``latent_var`` ``(m,)`` (the LOO latent
    variance sigma_i^2 - s^2). Cost O(m^2 d_x)."""
    residuals = jnp.asarray(residuals)
    V, eta, rot = _rotate(residuals, h)
    m = residuals.shape[0]
    extra = jnp.asarray(latent_var, residuals.dtype)
    out = []
    for i in range(0, m, _ROWS):
        idx = jnp.arange(i, i + _ROWS) % m  # fixed shape: one program
        out.append(np.asarray(_loo_rows(rot, eta, extra, idx)))
    return np.concatenate(out)[:m]


def fit_residual_noise(residuals, latent_var, bandwidths=BANDWIDTHS):
    """(R) with h maximising the mean LOO log density over ``bandwidths``.

    Returns ``(noise, loo)``: the :class:`ResidualNoise` and the per-point
    LOO log densities ``(m,)`` at the chosen h."""
    residuals = jnp.asarray(residuals)
    scores = [residual_loo_log_density(residuals, latent_var, h)
              for h in bandwidths]
    best = int(np.argmax([np.mean(s) for s in scores]))
    h = bandwidths[best]
    V, eta, rot = _rotate(residuals, h)
    dt = residuals.dtype
    return (ResidualNoise(residuals, V, eta, rot, jnp.asarray(h, dt)),
            scores[best])


def residual_log_likelihood(noise: ResidualNoise, mean, var_f, X):
    """log p(x_n | y_c) of (R) for tests ``X`` ``(n, d_x)`` at outputs whose
    GP mean is ``mean`` ``(n_c, d_x)`` and latent variance ``var_f``
    ``(n_c,)``: ``(n, n_c)``. A scan over blocks of residuals holds
    n n_c b d_x numbers at once (b <= 64, fewer for large n n_c).
    Cost O(n n_c m d_x)."""
    n, d = X.shape
    n_c = mean.shape[0]
    m = noise.rotated.shape[0]
    b = int(max(1, min(64, m, 2**22 // max(1, n * n_c * d))))
    pad = -m % b
    rot = jnp.concatenate([noise.rotated,
                           jnp.zeros((pad, d), noise.rotated.dtype)])
    logw = jnp.concatenate([jnp.full((m,), -jnp.log(m), rot.dtype),
                            jnp.full((pad,), -jnp.inf, rot.dtype)])
    s = noise.eta[None] + var_f[:, None]  # (n_c, d)
    base = (X @ noise.basis)[:, None, :] - (mean @ noise.basis)[None]  # (n, n_c, d)
    const = -0.5 * jnp.sum(jnp.log(2 * jnp.pi * s), -1)[None]  # (1, n_c)

    def step(acc, blk):
        r, lw = blk  # (b, d), (b,)
        diff = base[:, :, None, :] - r[None, None]
        ll = -0.5 * jnp.sum(diff**2 / s[None, :, None], -1) + lw[None, None]
        return jnp.logaddexp(acc, logsumexp(ll, axis=-1)), None

    init = jnp.full((n, n_c), -jnp.inf, rot.dtype)
    out, _ = jax.lax.scan(step, init, (rot.reshape(-1, b, d), logw.reshape(-1, b)))
    return out + const
