"""The inverse model's predictive as a mixture over (pair, draw) components.

:mod:`bayeskde.models.inverse_gp` defines the forward GP (F) and Bayes' rule (B),

    p(y* | x*, D) proportional to p(y*) sum_c w_c N(x*; mu_c(y*), v_c(y*) I),

where a component c = (pair (gamma, d), draw s of (a^2, s^2)) has weight
w_c = p(pair | a_s^2, s_s^2, D) / S (the pairs Rao-Blackwellised, the draws
equally weighted) and mu_c, v_c are the GP predictive mean and variance of pair
(gamma, d) at the draw's amplitude and noise. This module holds that mixture
(:class:`InverseGPMixture`) and evaluates it at any set of outputs, shared by
all test inputs (a grid) or one set per test input (importance particles).

Per pair, phi(K) = U diag(lambda) U^T with U the eigenvectors whose eigenvalue
is above working precision (m eps lambda_max; the same set the evidence keeps,
:func:`~bayeskde.models.inverse_gp.prepare_inverse_gp_data`). With
A = k(y)^T U and v_j = a^2 lambda_j + s^2 the predictive of (F) is

    mu(y) = a^2 A diag(1/v) U^T X + x_mean,
    var_f(y) = a^2 sum(alpha) - a^2 sum_j A_j^2 / v_j,                    (M)

The directions left out have lambda_j below rounding, and |A_j| <= sqrt(k(y, y)
lambda_j) (Cauchy-Schwarz in the feature space), so they are the directions the
evidence also treats as pure noise; leaving them out makes (M) the posterior of
the numerically resolved part of the kernel, at O(m r) per output for the r kept
eigenvectors instead of O(m^2).
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax.scipy.special import logsumexp
from jaxtyping import Array, Float

from .._typing import ArrayLike
from ..kernels import squared_distances
from ._inverse_gp_base import rbf_powers as _rbf_powers
from .inverse_gp import InverseGPData, _as_2d
from .inverse_gp_lowrank import (
    feature_projections,
    lowrank_pair_spectrum,
    replicate_coefficients,
    replicate_noise,
    replicate_pairs,
)
from .inverse_noise import residual_log_likelihood

__all__ = [
    "InverseGPMixture",
    "inverse_gp_mixture",
    "mixture_moments",
    "mixture_log_likelihood",
    "mixture_log_likelihood_each",
    "inverse_gp_log_probs",
    "exact_replicates",
]


class InverseGPMixture(NamedTuple):
    """The predictive's components (:func:`inverse_gp_mixture`).

    Per pair used (P of them): ``U`` ``(P, m, r)``, ``lam`` ``(P, r)`` and
    ``proj`` = U^T X ``(P, r, d_x)``, the kept eigenvectors zero-padded to the
    largest count r (a zero column adds nothing to (M)); ``alpha`` ``(P, D)``
    and ``gamma`` ``(P,)`` the pair's kernel. Per component (C of them):
    ``pair`` ``(C,)`` its pair, ``amplitude`` and ``noise`` ``(C,)`` its draw,
    ``log_w`` ``(C,)`` its log weight (logsumexp 0).

    A low-rank fit (``data.lowrank`` set, :mod:`.inverse_gp_lowrank`) keeps
    the same fields in feature form: ``U`` the pairs' maps from raw features
    to A = k(y)^T U (``(P, J, r)`` HSGP, ``(P, D, M, r)`` Nystroem), ``Y`` the
    map's anchors (the Nystroem centres; for HSGP the box centre ``(1, 1)``)
    and ``basis`` the static
    :class:`~bayeskde.models.inverse_gp_lowrank.LowRankBasis` (``None``
    exact): evaluating it at an output costs O(P R r), independent of m.

    ``noise_model``: ``None`` for the model's Gaussian noise N(0, s^2 I), or a
    :class:`~bayeskde.models.inverse_noise.ResidualNoise`: the noise of noisy
    test inputs is then the kernel density (R) of the GP's leave-one-out
    residuals (:mod:`bayeskde.models.inverse_noise`; the predictive builds it
    with one component, the MAP). Test inputs without noise
    (``test_noise`` 0) keep N(mu, var_f I) either way.
    """

    Y: Float[Array, "m d_y"]
    U: Float[Array, "n_pairs ..."]
    lam: Float[Array, "n_pairs r"]
    proj: Float[Array, "n_pairs r d_x"]
    alpha: Float[Array, "n_pairs n_deg"]
    gamma: Float[Array, " n_pairs"]
    pair: Array
    amplitude: Float[Array, " n_comp"]
    noise: Float[Array, " n_comp"]
    log_w: Float[Array, " n_comp"]
    x_mean: Float[Array, " d_x"]
    basis: object = None
    noise_model: object = None


def _pair_spectrum(data, g, d, cache):
    """Kept eigenpairs of pair (g, d) and U^T X, float64, memoised in
    ``cache`` (a dict; the fit's, so repeated predictions pay once). A low-rank
    fit gives them in feature form
    (:func:`~.inverse_gp_lowrank.lowrank_pair_spectrum`: the map from raw
    features to A in place of U)."""
    if cache is not None and (g, d) in cache:
        return cache[(g, d)]
    if data.lowrank is not None:
        out = lowrank_pair_spectrum(data.lowrank, np.asarray(data.alpha, np.float64),
                                    np.asarray(data.gammas, np.float64), g, d)
        if cache is not None:
            cache[(g, d)] = out
        return out
    m = data.Y.shape[0]
    Y = np.asarray(data.Y, np.float64)
    sq = np.sum(Y**2, axis=1)
    D2 = np.maximum(sq[:, None] + sq[None, :] - 2.0 * Y @ Y.T, 0.0)
    E = np.exp(-float(data.gammas[g]) * D2)
    alpha = np.asarray(data.alpha[g, d], np.float64)
    K = sum(a * E ** (i + 1) for i, a in enumerate(alpha) if a != 0.0)
    lam, U = np.linalg.eigh(K)
    ok = lam > m * np.finfo(np.float64).eps * lam.max()
    out = (lam[ok], U[:, ok], U[:, ok].T @ np.asarray(data.X, np.float64))
    if cache is not None:
        cache[(g, d)] = out
    return out


def exact_replicates(
    key: jax.Array, data: InverseGPData, amplitude: Float[ArrayLike, " n_draws"],
    noise: Float[ArrayLike, " n_draws"],
    pair_log_joint: Float[ArrayLike, "n_draws ..."], cache: dict | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Posterior predictive replicates of X at the training outputs for an
    exact :class:`~bayeskde.models.InverseGPData`, one per draw: the pair from
    its conditional posterior, then, as
    :func:`~bayeskde.models.inverse_gp_replicate` (phi(K) = U diag(l) U^T,
    v = a^2 l + s^2), f = U c with c = (a^2 l / v) U^T X + sqrt(a^2 l s^2 / v) z
    and x_rep = f + s eps + x_mean.

    The pairs are drawn first, so each distinct pair is eigendecomposed once
    (and memoised in ``cache``, the fit's, which the predictive then reuses)
    rather than once per draw: at m = 1,000 with 100 draws of a concentrated
    pair posterior this is one eigendecomposition in place of 100 (15 s of
    the 10-parameter sbibm task's fit, measured). The directions whose
    eigenvalue is below working precision (the ones
    :func:`_pair_spectrum` drops) get f's mean and variance zero, as their
    a^2 l / v is.

    Returns ``(x_rep (n, m, d_x), pair (n,))``, the pair flat g D + (d - 1).
    Cost O(m^3) per distinct pair drawn plus O(n m r d_x).
    """
    amplitude, noise, pairs, k_f, k_e = replicate_pairs(key, amplitude, noise,
                                                        pair_log_joint)
    D = data.alpha.shape[1]
    m, d_x = data.X.shape
    f = np.zeros((len(amplitude), m, d_x))
    for p in np.unique(pairs):
        lam, U, proj = _pair_spectrum(data, int(p) // D, int(p) % D, cache)
        idx = np.flatnonzero(pairs == p)
        c = replicate_coefficients(jax.random.fold_in(k_f, int(p)), lam, proj,
                                   amplitude[idx], noise[idx])
        f[idx] = np.einsum("mr,krx->kmx", U, c)
    x = f + replicate_noise(k_e, noise, m, d_x) + np.asarray(data.x_mean, np.float64)
    return x.astype(data.X.dtype), pairs


def _components(w, max_components):
    """(draw, pair) components and their weights from the per-draw pair
    posteriors ``w`` ``(S, n_pairs)``: all of them where they are at most
    ``max_components``, else a systematic resample (equal weights, duplicates
    merged): an unbiased Monte Carlo estimate of the model average."""
    W = (w / w.shape[0]).ravel()
    nz = np.flatnonzero(W > 0)
    if len(nz) <= max_components:
        return nz, W[nz] / W[nz].sum()
    cdf = np.cumsum(W)
    u = (np.arange(max_components) + 0.5) / max_components * cdf[-1]
    pick = np.minimum(np.searchsorted(cdf, u), len(W) - 1)
    uniq, count = np.unique(pick, return_counts=True)
    return uniq, count / max_components


def inverse_gp_mixture(
    data: InverseGPData,
    amplitude: Float[ArrayLike, " n_draws"],
    noise: Float[ArrayLike, " n_draws"],
    pair_log_joint: Float[ArrayLike, "n_draws ..."],
    max_components: int = 256,
    cache: dict | None = None,
) -> InverseGPMixture:
    """The components of (B) for the draws given.

    Per draw s the pairs are weighted by their conditional posterior
    softmax(pair_log_joint_s) (Rao-Blackwellised); all (draw, pair) components
    are kept when there are at most ``max_components`` with positive weight,
    else ``max_components`` are drawn by systematic resampling (the S-shape's
    posterior spreads over about 20 pairs: 100 draws make 2,000 components,
    and 256 resampled ones change its predictive's log density by about 1e-3).
    ``cache`` memoises the pairs' eigendecompositions.

    Cost O(P m^3) for the P pairs used (one eigendecomposition each, once per
    cache), O(P m r) memory.
    """
    amplitude = np.asarray(amplitude, float).reshape(-1)
    noise = np.asarray(noise, float).reshape(-1)
    lj = np.asarray(pair_log_joint, float)
    lj = lj.reshape(lj.shape[0], -1)
    if not (len(amplitude) == len(noise) == lj.shape[0]) or len(amplitude) == 0:
        raise ValueError("amplitude, noise and pair_log_joint need one row per "
                         "draw, and at least one draw")
    if not (np.all(np.isfinite(amplitude)) and np.all(np.isfinite(noise))
            and np.all(amplitude > 0) and np.all(noise > 0)):
        raise ValueError("amplitude and noise must be finite and positive")
    w = np.exp(lj - lj.max(axis=1, keepdims=True))
    w /= w.sum(axis=1, keepdims=True)  # (S, G D) conditional pair posteriors
    flat, weight = _components(w, max_components)
    draw, pair_flat = np.divmod(flat, w.shape[1])
    pairs, comp_pair = np.unique(pair_flat, return_inverse=True)
    D = data.alpha.shape[1]
    parts = [_pair_spectrum(data, int(p // D), int(p % D), cache) for p in pairs]
    r = max(len(a[0]) for a in parts)
    P, d_x = len(pairs), data.X.shape[1]
    U = np.zeros((P, *parts[0][1].shape[:-1], r))  # (P, m, r); low rank: coef
    lam = np.zeros((P, r))
    proj = np.zeros((P, r, d_x))
    for i, (lp, Up, pp) in enumerate(parts):
        n = len(lp)
        lam[i, :n], U[i, ..., :n], proj[i, :n] = lp, Up, pp
    alpha = np.asarray(data.alpha).reshape(-1, D)[pairs]
    gamma = np.asarray(data.gammas)[pairs // D]
    dt = data.X.dtype
    basis = data.lowrank
    anchors = (data.Y if basis is None else basis.centres if basis.kind == "nystroem"
               else np.full((1, data.Y.shape[1]), basis.box_centre))
    return InverseGPMixture(
        jnp.asarray(anchors, dt), jnp.asarray(U, dt), jnp.asarray(lam, dt),
        jnp.asarray(proj, dt), jnp.asarray(alpha, dt), jnp.asarray(gamma, dt),
        jnp.asarray(comp_pair),
        jnp.asarray(amplitude[draw], dt), jnp.asarray(noise[draw], dt),
        jnp.asarray(np.log(weight), dt), data.x_mean, basis)


def _projections(mix, outputs):
    """A = k(y)^T U of every pair at ``outputs``: (P, n_c, r)."""
    if mix.basis is not None:
        return feature_projections(mix, outputs)
    d2 = squared_distances(outputs, mix.Y)  # (n_c, m)
    D = mix.alpha.shape[1]

    def per_pair(pair):
        alpha, gamma, U = pair
        return jnp.tensordot(alpha, _rbf_powers(d2, gamma, D), 1) @ U

    return jax.lax.map(per_pair, (mix.alpha, mix.gamma, mix.U))


def _component_moments(mix, A_all, c):
    """(M) of component c from the pairs' projections: mean (n_c, d_x),
    latent variance (n_c,)."""
    p = mix.pair[c]
    amp, s2 = mix.amplitude[c], mix.noise[c]
    A = A_all[p]
    inv_v = 1.0 / (amp * mix.lam[p] + s2)  # (r,)
    mean = amp * A @ (mix.proj[p] * inv_v[:, None]) + mix.x_mean[None, :]
    var_f = amp * jnp.sum(mix.alpha[p]) - amp**2 * (A**2) @ inv_v
    return mean, var_f


def _log_likelihood(mix, A_all, X, test_noise):
    """log sum_c w_c N(x; mu_c, v_c I) for (n, d_x) tests at the n_c outputs
    whose projections are ``A_all`` (scan over components) -> (n, n_c)."""
    d_x = X.shape[1]
    x2 = jnp.sum(X**2, axis=1)[:, None]

    def _step(acc, c):
        mu, vf = _component_moments(mix, A_all, c)
        s2 = mix.noise[c]
        # var_f >= 0 in exact arithmetic; the floor keeps rounding from flipping it.
        var = jnp.maximum(vf, 1e-6 * s2) + test_noise * s2
        r2 = x2 - 2.0 * X @ mu.T + jnp.sum(mu**2, axis=1)[None, :]
        ll = -0.5 * jnp.maximum(r2, 0.0) / var[None] - 0.5 * d_x * jnp.log(
            2 * jnp.pi * var)[None]
        if mix.noise_model is not None:
            ll = jnp.where(test_noise > 0, residual_log_likelihood(
                mix.noise_model, mu, jnp.maximum(vf, 0.0), X), ll)
        return jnp.logaddexp(acc, ll + mix.log_w[c]), None

    init = jnp.full((X.shape[0], A_all.shape[1]), -jnp.inf, A_all.dtype)
    out, _ = jax.lax.scan(_step, init, jnp.arange(mix.log_w.shape[0]))
    return out


def mixture_moments(
    mix: InverseGPMixture, outputs: Float[Array, "n_c d_y"],
) -> tuple[Float[Array, "n_comp n_c d_x"], Float[Array, "n_comp n_c"]]:
    """GP predictive means and latent variances (M) of every component at
    ``outputs``. Cost O(n_c (P m r + C r d_x)) time, O(C n_c d_x) memory."""
    A_all = _projections(mix, outputs)
    return jax.vmap(lambda c: _component_moments(mix, A_all, c))(
        jnp.arange(mix.log_w.shape[0]))


@jax.jit
def mixture_log_likelihood(
    mix: InverseGPMixture, outputs: Float[Array, "n_c d_y"],
    X_test: Float[Array, "n_test d_x"], test_noise: Float[Array, ""],
) -> Float[Array, "n_test n_c"]:
    """log p(x*_i | y_c, D) = log sum_comp w N(x*_i; mu(y_c), var(y_c)) for every
    test input and output shared by all (a grid). ``test_noise`` 1: x* carries
    the training noise; 0: x* = f(y*) exactly. Cost O(n_c (P m r + C r d_x) +
    C n_test n_c d_x) time, O(P n_c r + n_test n_c) memory."""
    return _log_likelihood(mix, _projections(mix, outputs), X_test, test_noise)


@jax.jit
def mixture_log_likelihood_each(
    mix: InverseGPMixture, outputs: Float[Array, "n_test n_c d_y"],
    X_test: Float[Array, "n_test d_x"], test_noise: Float[Array, ""],
) -> Float[Array, "n_test n_c"]:
    """:func:`mixture_log_likelihood` with a set of outputs per test input
    (importance particles): row i is log p(x*_i | y_ic, D). Differentiable in
    the outputs. Cost O(n_test n_c (P m r + C r d_x))."""

    def one(y, x):
        return _log_likelihood(mix, _projections(mix, y), x[None], test_noise)[0]

    return jax.lax.map(lambda a: one(*a), (outputs, X_test),
                       batch_size=min(8, outputs.shape[0]))


def inverse_gp_log_probs(
    data: InverseGPData,
    amplitude: Float[ArrayLike, " n_draws"],
    noise: Float[ArrayLike, " n_draws"],
    pair_log_joint: Float[ArrayLike, "n_draws ..."],
    candidates: Float[ArrayLike, "n_c d_y"],
    X_test: Float[ArrayLike, "n_test d_x"],
    log_prior_candidates: Float[ArrayLike, " n_c"] | None = None,
    max_components: int = 256,
    noisy_inputs: bool = True,
) -> Float[Array, "n_test n_c"]:
    """Posterior predictive (B) on a candidate set, averaged over draws.

    The candidates are a grid over the output box (``log_prior_candidates`` =
    log p(y) + log cell volume) or draws from p(y), e.g. the training outputs,
    with ``log_prior_candidates`` zero (importance sampling with p(y) as
    proposal). The components are those of :func:`inverse_gp_mixture`
    (``max_components``).
    ``noisy_inputs=False`` conditions on x* = f(y*) exactly (test inputs
    observed without noise, as in the S-shape benchmark's test grid): the
    predictive variance of x* is then the GP's latent variance alone.

    Returns:
        ``(n_test, n_c)`` log probabilities of the candidates, each row
        normalised (logsumexp = 0).

    Cost: :func:`inverse_gp_mixture` plus :func:`mixture_log_likelihood`.
    """
    mix = inverse_gp_mixture(data, amplitude, noise, pair_log_joint,
                             max_components)
    dtype = data.X.dtype
    cand = _as_2d(candidates, "candidates").astype(dtype)
    X_test = _as_2d(X_test, "X_test").astype(dtype)
    if cand.shape[1] != data.Y.shape[1] or X_test.shape[1] != data.X.shape[1]:
        raise ValueError("candidates / X_test have the wrong number of columns")
    lpc = (jnp.zeros(cand.shape[0], dtype) if log_prior_candidates is None
           else jnp.asarray(log_prior_candidates, dtype).reshape(-1))
    out = mixture_log_likelihood(mix, cand, X_test,
                                 jnp.asarray(float(noisy_inputs), dtype))
    out = out + lpc[None, :]
    return out - logsumexp(out, axis=1, keepdims=True)
