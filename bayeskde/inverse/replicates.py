"""Replicates of the inverse model's inputs X at the training outputs Y: from
the posterior predictive (for posterior predictive checks) and from the model.

For one posterior draw (a^2, s^2) the pair (gamma, d) is drawn from its
conditional posterior softmax(pair_log_joint), then with phi(K) = U diag(l) U^T
(the kept eigenvectors) and v = a^2 l + s^2 the GP posterior at the training
points has mean U diag(a^2 l / v) U^T X and covariance U diag(a^2 l s^2 / v)
U^T, so

    f = U c,  c = (a^2 l / v) U^T X + sqrt(a^2 l s^2 / v) z,
    x_rep = f + s eps + x_mean,  z, eps ~ N(0, I)                        (P)

(Rasmussen and Williams 2006, eqs. (2.23)-(2.24) in the eigenbasis). The
exact and low-rank paths share the pair draw, the coefficients and the noise;
they differ only in how f = U c is formed. :func:`simulate` draws from the
model itself (the pair from its prior, f from the GP prior,

    f = U c,  c = sqrt(a^2 l) z,                                           (Q)

then the same noise), the simulator of the observed site of
:func:`~bayeskde.inverse.inverse_gp_model`.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Float

from .._typing import ArrayLike
from .data import InverseGPData, Memo, pair_spectrum
from .lowrank import apply_features_rows

__all__ = [
    "replicates",
    "simulate",
    "exact_replicates",
    "lowrank_replicates",
    "replicate_pairs",
    "replicate_coefficients",
    "replicate_noise",
]


def replicates(
    key: jax.Array, data: InverseGPData, amplitude: Float[ArrayLike, " n_draws"],
    noise: Float[ArrayLike, " n_draws"],
    pair_log_joint: Float[ArrayLike, "n_draws ..."], memo: Memo | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Replicates (P) of X, one per draw, by the exact or the low-rank path
    as ``data`` was prepared. Returns ``(x_rep (n, m, d_x), pair (n,))``, the
    pair flat g D + (d - 1)."""
    run = exact_replicates if data.lowrank is None else lowrank_replicates
    return run(key, data, amplitude, noise, pair_log_joint, memo)


def simulate(
    key: jax.Array, data: InverseGPData, amplitude: Float[ArrayLike, " n_draws"],
    noise: Float[ArrayLike, " n_draws"], memo: Memo | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Draws of X from the model (F) at the training outputs Y, one per
    (a^2, s^2): the pair from its prior p(gamma, d), then f ~ GP(0, a^2
    phi(K)) at Y and x = f + s eps + x_mean, i.e. f = U c with
    c = sqrt(a^2 l) z (Q) (the directions below the kept-eigenvalue rule get
    no latent variance, as in the evidence). The generative draw whose density
    is :class:`~.evidence.SpectralGPEvidence`'s ``log_prob``: prior-predictive
    simulation and simulation-based calibration. Returns ``(x (n, m, d_x),
    pair (n,))``. Cost as :func:`replicates`."""
    n = np.size(amplitude)
    lj = np.broadcast_to(np.asarray(data.log_pair_prior, np.float64).reshape(-1),
                         (n, data.log_pair_prior.size))
    run = exact_replicates if data.lowrank is None else lowrank_replicates
    return run(key, data, amplitude, noise, lj, memo, prior=True)


def exact_replicates(
    key: jax.Array, data: InverseGPData, amplitude: Float[ArrayLike, " n_draws"],
    noise: Float[ArrayLike, " n_draws"],
    pair_log_joint: Float[ArrayLike, "n_draws ..."], memo: Memo | None = None,
    prior: bool = False,
) -> tuple[np.ndarray, np.ndarray]:
    """Posterior predictive replicates of X at the training outputs for an
    exact :class:`~.data.InverseGPData`, one per draw (eq. (P) of the module
    docstring).

    The pairs are drawn first, so each distinct pair is eigendecomposed once
    (and memoised in ``memo``, the fit's, which the predictive then reuses)
    rather than once per draw: at m = 1,000 with 100 draws of a concentrated
    pair posterior this is one eigendecomposition in place of 100 (15 s of
    the 10-parameter sbibm task's fit, measured). The directions whose
    eigenvalue is below working precision (the ones
    the kept-eigenvalue rule drops) get f's mean and variance zero, as their
    a^2 l / v is.

    ``prior=True``: the model's own draws (Q) instead (:func:`simulate`;
    ``pair_log_joint`` then holds the pairs' prior).

    Returns ``(x_rep (n, m, d_x), pair (n,))``, the pair flat g D + (d - 1).
    Cost O(m^3) per distinct pair drawn plus O(n m r d_x).
    """
    amplitude, noise, pairs, k_f, k_e = replicate_pairs(key, amplitude, noise,
                                                        pair_log_joint)
    D = data.alpha.shape[1]
    m, d_x = data.X.shape
    f = np.zeros((len(amplitude), m, d_x))
    for p in np.unique(pairs):
        lam, U, proj = pair_spectrum(data, int(p) // D, int(p) % D, memo)
        idx = np.flatnonzero(pairs == p)
        c = replicate_coefficients(jax.random.fold_in(k_f, int(p)), lam, proj,
                                   amplitude[idx], noise[idx], prior=prior)
        f[idx] = np.einsum("mr,krx->kmx", U, c)
    x = f + replicate_noise(k_e, noise, m, d_x) + np.asarray(data.x_mean, np.float64)
    return x.astype(data.X.dtype), pairs


def lowrank_replicates(
    key: jax.Array, data, amplitude: Float[ArrayLike, " n_draws"],
    noise: Float[ArrayLike, " n_draws"],
    pair_log_joint: Float[ArrayLike, "n_draws ..."], memo: Memo | None = None,
    prior: bool = False,
) -> tuple[np.ndarray, np.ndarray]:
    """Posterior predictive replicates of X at the training outputs for a
    low-rank :class:`~.data.InverseGPData`, one per draw (eq. (P)), with
    f = U c formed as f = phi_raw(Y) (coef Lambda^{-1} c), without U.

    ``prior=True``: the model's own draws (Q) (:func:`simulate`).

    Returns ``(x_rep (n, m, d_x), pair (n,))``, the pair flat g D + (d - 1).
    Cost O(m R n d_x) for n draws (Nystroem: per rate drawn)."""
    basis = data.lowrank
    amplitude, noise, pairs, k_f, k_e = replicate_pairs(key, amplitude, noise,
                                                        pair_log_joint)
    n = len(amplitude)
    alpha = np.asarray(data.alpha, np.float64)
    gammas = np.asarray(data.gammas, np.float64)
    D = alpha.shape[1]
    m, d_x = data.X.shape
    dt = data.X.dtype
    R_shape = (basis.rank,) if basis.kind == "hsgp" else (D, basis.centres.shape[0])
    coef_all = {}
    for p in np.unique(pairs):
        g, d = divmod(int(p), D)
        lam, coef, proj = pair_spectrum(data, g, d, memo)
        idx = np.flatnonzero(pairs == p)
        c = replicate_coefficients(jax.random.fold_in(k_f, int(p)), lam, proj,
                                   amplitude[idx], noise[idx], prior=prior)
        group = 0 if basis.kind == "hsgp" else g
        acc = coef_all.setdefault(group, np.zeros((*R_shape, n, d_x)))
        acc[..., idx, :] += np.einsum("...r,krx->...kx", coef / lam, c)
    f = np.zeros((m, n, d_x))
    anchors = jnp.asarray(basis.centres if basis.kind == "nystroem"
                          else np.zeros((1, 1)), dt)
    for g, C in coef_all.items():
        f += apply_features_rows(
            basis, anchors, jnp.asarray(gammas[g], dt), D,
            jnp.asarray(C.reshape(*R_shape, n * d_x), dt),
            np.asarray(data.Y, dt)).reshape(m, n, d_x)
    x = (np.transpose(f, (1, 0, 2)) + replicate_noise(k_e, noise, m, d_x)
         + np.asarray(data.x_mean, np.float64))
    return x.astype(dt), pairs


def replicate_pairs(key, amplitude, noise, pair_log_joint):
    """The shared first step of the replicates (exact and low rank): each
    draw's pair from its conditional posterior. Returns ``(amplitude, noise,
    pairs, k_f, k_e)``, the first two float64 ``(n,)``, the keys of the
    latent and noise parts."""
    amplitude = np.asarray(amplitude, np.float64).reshape(-1)
    noise = np.asarray(noise, np.float64).reshape(-1)
    k_pair, k_f, k_e = jax.random.split(key, 3)
    lj = jnp.asarray(np.asarray(pair_log_joint, np.float64)
                     .reshape(len(amplitude), -1))
    pairs = np.asarray(jax.random.categorical(k_pair, lj, axis=-1))
    return amplitude, noise, pairs, k_f, k_e


def replicate_coefficients(key, lam, proj, amplitude, noise, prior=False):
    """f's coefficients on one pair's eigenvectors for the draws of that pair:
    c = (a^2 l / v) U^T X + sqrt(a^2 l s^2 / v) z, v = a^2 l + s^2 (the GP
    posterior, eq. (P)), or with ``prior`` c = sqrt(a^2 l) z (eq. (Q)),
    ``(n_p, r, d_x)``."""
    al = amplitude[:, None] * lam[None]
    v = al + noise[:, None]
    z = np.asarray(jax.random.normal(key, (len(amplitude), *proj.shape)),
                   np.float64)
    if prior:
        return np.sqrt(al)[..., None] * z
    return ((al / v)[..., None] * proj[None]
            + np.sqrt(al * noise[:, None] / v)[..., None] * z)


def replicate_noise(key, noise, m, d_x):
    """The replicates' observation noise s eps, ``(n, m, d_x)``."""
    return np.sqrt(noise)[:, None, None] * np.asarray(
        jax.random.normal(key, (len(noise), m, d_x)), np.float64)
