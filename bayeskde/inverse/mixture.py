"""The inverse model's predictive as a mixture over (pair, draw) components.

:mod:`bayeskde.inverse` defines the forward GP (F) and Bayes' rule (B),

    p(y* | x*, D) proportional to p(y*) sum_c w_c N(x*; mu_c(y*), v_c(y*) I),

where a component c = (pair (gamma, d), draw s of (a^2, s^2)) has weight
w_c = p(pair | a_s^2, s_s^2, D) / S (the pairs Rao-Blackwellised, the draws
equally weighted) and mu_c, v_c are the GP predictive mean and variance of pair
(gamma, d) at the draw's amplitude and noise. This module holds that mixture
(:class:`InverseGPMixture`) and evaluates it at any set of outputs, shared by
all test inputs (a grid) or one set per test input (importance particles).

Per pair, phi(K) = U diag(lambda) U^T with U the eigenvectors whose eigenvalue
is above working precision (m eps lambda_max; the same set the evidence keeps,
:func:`~.data.prepare_inverse_gp_data`). With
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
from jaxtyping import Array, Float

from .._typing import ArrayLike
from .._validation import check_integer
from ..kernels import squared_distances
from .data import InverseGPData, Memo, pair_spectrum
from .heteroscedastic import HeteroscedasticNoise, heteroscedastic_log_likelihood
from .kernel import rbf_powers
from .lowrank import feature_projections
from .residual import ResidualNoise, residual_log_likelihood

__all__ = [
    "NOISE_FLOOR",
    "noise_floor",
    "InverseGPMixture",
    "inverse_gp_mixture",
    "projections",
    "component_moments",
    "component_log_likelihood",
    "mixture_moments",
    "mixture_log_likelihood",
    "mixture_log_likelihood_each",
    "blocked_log_likelihood",
    "posterior_draws",
    "fit_mixture",
]


class InverseGPMixture(NamedTuple):
    """The predictive's components (:func:`inverse_gp_mixture`).

    Per pair used (P of them): ``U`` ``(P, m, r)``, ``lam`` ``(P, r)`` and
    ``proj`` = U^T X ``(P, r, d_x)``, the kept eigenvectors zero-padded to the
    largest count r (a zero column adds nothing to (M)); ``alpha`` ``(P, D)``
    and ``gamma`` ``(P,)`` the pair's kernel. Per component (C of them):
    ``pair`` ``(C,)`` its pair, ``amplitude`` and ``noise`` ``(C,)`` its draw,
    ``log_w`` ``(C,)`` its log weight (logsumexp 0).

    A low-rank fit (``data.lowrank`` set, :mod:`~bayeskde.inverse.lowrank`) keeps
    the same fields in feature form: ``U`` the pairs' maps from raw features
    to A = k(y)^T U (``(P, J, r)`` HSGP, ``(P, D, M, r)`` Nystroem), ``Y`` the
    map's anchors (the Nystroem centres; for HSGP the box centre ``(1, 1)``)
    and ``basis`` the static
    :class:`~bayeskde.inverse.LowRankBasis` (``None``
    exact): evaluating it at an output costs O(P R r), independent of m.

    ``noise_model``: ``None`` for the model's Gaussian noise N(0, s^2 I), a
    :class:`~bayeskde.inverse.ResidualNoise`: the noise of noisy
    test inputs is then the kernel density (R) of the GP's leave-one-out
    residuals (:mod:`.residual`), or a
    :class:`~bayeskde.inverse.HeteroscedasticNoise`: the covariance function
    (H) of :mod:`.heteroscedastic`; the predictive builds either with one
    component, the MAP. Test inputs without noise (``test_noise`` 0) keep
    N(mu, var_f I) whatever the noise.
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


#: The predictive's noise floor in units of the working precision's epsilon
#: times a^2 lambda_max (:func:`noise_floor`).
NOISE_FLOOR = 1.0


def noise_floor(amplitude, lam_max, dtype):
    """The least noise variance s^2 the predictive uses at working precision
    ``dtype``: ``NOISE_FLOOR`` eps a^2 lambda_max, per component. The
    predictive mean filters the projections A_j = k(y)^T u_j by
    1 / (lambda_j + s^2 / a^2); A_j carries a rounding error of about eps
    times its scale, so where the posterior's noise lies far below
    eps a^2 lambda_max (a deterministic simulator: s^2 about 1e-11 on a
    noise-free arm, where float32's eps a^2 lambda_max is about 1e-4) the
    filter amplifies rounding by up to lambda_max a^2 / s^2 and the mean is
    noise. The floor caps that amplification at 1 / (NOISE_FLOOR eps), and
    the floored noise, at the precision's resolution, carries the rest of the
    uncertainty. Measured in float32 (top mode's re-simulation error, median
    over test points, Laplace sampler): a noise-free three-joint arm
    (m = 150) 0.47 without the floor, 0.0021 / 0.0040 / 0.0052 at 0.1 / 0.3 /
    1; the four-joint arm (m = 500, mean) 1.39 without, 0.087 / 0.011 / 0.013:
    1 is the value that serves both. In float64 the floor (2e-16 a^2
    lambda_max) is below any simulator's noise and changes nothing measured."""
    eps = float(np.finfo(np.dtype(dtype)).eps)
    return NOISE_FLOOR * eps * np.asarray(amplitude) * np.asarray(lam_max)


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
    memo: Memo | None = None,
) -> InverseGPMixture:
    """The components of (B) for the draws given.

    Per draw s the pairs are weighted by their conditional posterior
    softmax(pair_log_joint_s) (Rao-Blackwellised); all (draw, pair) components
    are kept when there are at most ``max_components`` with positive weight,
    else ``max_components`` are drawn by systematic resampling (the S-shape's
    posterior spreads over about 20 pairs: 100 draws make 2,000 components,
    and 256 resampled ones change its predictive's log density by about 1e-3).
    ``memo`` memoises the pairs' eigendecompositions.

    Cost O(P m^3) for the P pairs used (one eigendecomposition each, once per
    memo), O(P m r) memory.
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
    parts = [pair_spectrum(data, int(p // D), int(p % D), memo) for p in pairs]
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
    amp_c, noise_c = amplitude[draw], noise[draw]
    floor = noise_floor(amp_c, lam[comp_pair].max(axis=1), dt)
    noise_c = np.maximum(noise_c, floor)
    basis = data.lowrank
    anchors = (data.Y if basis is None else basis.centres if basis.kind == "nystroem"
               else np.full((1, data.Y.shape[1]), basis.box_centre))
    return InverseGPMixture(
        jnp.asarray(anchors, dt), jnp.asarray(U, dt), jnp.asarray(lam, dt),
        jnp.asarray(proj, dt), jnp.asarray(alpha, dt), jnp.asarray(gamma, dt),
        jnp.asarray(comp_pair),
        jnp.asarray(amp_c, dt), jnp.asarray(noise_c, dt),
        jnp.asarray(np.log(weight), dt), data.x_mean, basis)


def projections(mix: InverseGPMixture, outputs: Float[Array, "n_c d_y"]
                ) -> Float[Array, "n_pairs n_c r"]:
    """A = k(y)^T U of every pair at ``outputs``: (P, n_c, r) (in feature form
    for a low-rank fit, :func:`~.lowrank.feature_projections`)."""
    if mix.basis is not None:
        return feature_projections(mix, outputs)
    d2 = squared_distances(outputs, mix.Y)  # (n_c, m)
    D = mix.alpha.shape[1]

    def per_pair(pair):
        alpha, gamma, U = pair
        return jnp.tensordot(alpha, rbf_powers(d2, gamma, D), 1) @ U

    return jax.lax.map(per_pair, (mix.alpha, mix.gamma, mix.U))


def component_moments(mix: InverseGPMixture, A_all, c):
    """(M) of component c from the pairs' projections ``A_all`` (P, n_c, r):
    mean ``(n_c, d_x)`` and latent variance ``(n_c,)``. The one definition of
    the GP predictive; the dense and filtered evaluators
    (:mod:`.evaluators`) are factorisations of it, tested against it."""
    p = mix.pair[c]
    amp, s2 = mix.amplitude[c], mix.noise[c]
    A = A_all[p]
    inv_v = 1.0 / (amp * mix.lam[p] + s2)  # (r,)
    mean = amp * A @ (mix.proj[p] * inv_v[:, None]) + mix.x_mean[None, :]
    var_f = amp * jnp.sum(mix.alpha[p]) - amp**2 * (A**2) @ inv_v
    return mean, var_f


def component_log_likelihood(
    mean: Float[Array, "n_c d_x"], var_f: Float[Array, " n_c"],
    noise: Float[Array, ""], X: Float[Array, "n d_x"], test_noise,
    noise_model: ResidualNoise | HeteroscedasticNoise | None = None,
    outputs: Float[Array, "n_c d_y"] | None = None,
) -> Float[Array, "n n_c"]:
    """log p(x_i | y_j, component) for tests ``X`` at outputs whose component
    moments (M) are ``mean``, ``var_f``, at the component's noise s^2: the one
    likelihood every evaluator (grid scan, importance, Langevin, NUTS) calls.

    Gaussian: N(x; mu, (max(var_f, 1e-6 s^2) + test_noise s^2) I); var_f >= 0
    in exact arithmetic and the floor keeps rounding from flipping it. With a
    residual ``noise_model`` (R) and noisy test inputs (``test_noise`` > 0)
    the kernel density of the residuals replaces the Gaussian
    (:func:`~.residual.residual_log_likelihood`); with a covariance function
    (H) the Gaussian N(x; mu, Sigma(y) + var_f I) at the ``outputs`` y
    (:func:`~.heteroscedastic.heteroscedastic_log_likelihood`). Cost
    O(n n_c d_x) (Gaussian), O(n n_c m d_x) (residual), O(n_c (F Q + d_x^3)
    + n n_c d_x^2) (covariance function)."""
    d_x = X.shape[-1]
    var = jnp.maximum(var_f, 1e-6 * noise) + test_noise * noise
    r2 = jnp.sum((X[:, None, :] - mean[None]) ** 2, axis=-1)
    ll = -0.5 * r2 / var[None] - 0.5 * d_x * jnp.log(2 * jnp.pi * var)[None]
    if isinstance(noise_model, HeteroscedasticNoise):
        if outputs is None:
            raise ValueError("a covariance function (H) needs the outputs")
        ll = jnp.where(test_noise > 0, heteroscedastic_log_likelihood(
            noise_model, outputs, mean, var_f, X), ll)
    elif noise_model is not None:
        ll = jnp.where(test_noise > 0, residual_log_likelihood(
            noise_model, mean, jnp.maximum(var_f, 0.0), X), ll)
    return ll


def _log_likelihood(mix, A_all, X, test_noise, outputs):
    """log sum_c w_c p(x | y, c) for (n, d_x) tests at the n_c ``outputs``
    whose projections are ``A_all`` (a scan over components) -> (n, n_c)."""

    def _step(acc, c):
        mu, vf = component_moments(mix, A_all, c)
        ll = component_log_likelihood(mu, vf, mix.noise[c], X, test_noise,
                                      mix.noise_model, outputs)
        return jnp.logaddexp(acc, ll + mix.log_w[c]), None

    init = jnp.full((X.shape[0], A_all.shape[1]), -jnp.inf, A_all.dtype)
    out, _ = jax.lax.scan(_step, init, jnp.arange(mix.log_w.shape[0]))
    return out


def mixture_moments(
    mix: InverseGPMixture, outputs: Float[Array, "n_c d_y"],
) -> tuple[Float[Array, "n_comp n_c d_x"], Float[Array, "n_comp n_c"]]:
    """GP predictive means and latent variances (M) of every component at
    ``outputs``. Cost O(n_c (P m r + C r d_x)) time, O(C n_c d_x) memory."""
    A_all = projections(mix, outputs)
    return jax.vmap(lambda c: component_moments(mix, A_all, c))(
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
    return _log_likelihood(mix, projections(mix, outputs), X_test, test_noise,
                           outputs)


@jax.jit
def mixture_log_likelihood_each(
    mix: InverseGPMixture, outputs: Float[Array, "n_test n_c d_y"],
    X_test: Float[Array, "n_test d_x"], test_noise: Float[Array, ""],
) -> Float[Array, "n_test n_c"]:
    """:func:`mixture_log_likelihood` with a set of outputs per test input
    (importance particles): row i is log p(x*_i | y_ic, D). Differentiable in
    the outputs. Cost O(n_test n_c (P m r + C r d_x))."""

    def one(y, x):
        return _log_likelihood(mix, projections(mix, y), x[None], test_noise, y)[0]

    return jax.lax.map(lambda a: one(*a), (outputs, X_test),
                       batch_size=min(8, outputs.shape[0]))


#: Test inputs per likelihood program (:func:`blocked_log_likelihood`).
TEST_BLOCK = 256
#: Candidates (grid cells, seeds) per likelihood program.
CELL_BLOCK = 1024
#: Most numbers of the pairs' projections held by one likelihood program
#: (2^25: 256 MiB in float64).
BLOCK_NUMBERS = 2**25


def _cell_block(mix, n_c):
    """Candidates per likelihood program: at most :data:`CELL_BLOCK`, fewer
    where the pairs' projections of a block (P x block x r numbers) would
    pass :data:`BLOCK_NUMBERS` (a power of two, >= 16)."""
    P, r = mix.lam.shape
    bc = CELL_BLOCK
    while bc > 16 and P * bc * r > BLOCK_NUMBERS:
        bc //= 2
    return min(bc, n_c)


def blocked_log_likelihood(mix: InverseGPMixture, cand, X, test_noise
                           ) -> np.ndarray:
    """:func:`mixture_log_likelihood` over blocks of test inputs and of
    candidates of fixed sizes (one compiled program; the projections of a
    block of candidates, P x block x r <= 2^25 numbers, are all that is held
    at once, so a fine grid over many pairs does not need P n_c r memory).
    ``(n, n_c)``, NumPy."""
    n, n_c = X.shape[0], cand.shape[0]
    b = min(TEST_BLOCK, n)
    bc = _cell_block(mix, n_c)
    pad_c = -n_c % bc
    if pad_c:
        cand = jnp.concatenate([cand, jnp.repeat(cand[-1:], pad_c, axis=0)])
    rows = []
    for i in range(0, n, b):
        blk = X[i:i + b]
        pad = b - blk.shape[0]
        if pad:
            blk = jnp.concatenate([blk, jnp.repeat(blk[-1:], pad, axis=0)])
        cols = [np.asarray(mixture_log_likelihood(mix, cand[j:j + bc], blk,
                                                  test_noise))
                for j in range(0, cand.shape[0], bc)]
        rows.append(np.concatenate(cols, axis=1)[:b - pad, :n_c])
    return np.concatenate(rows)


def posterior_draws(fit, mode: str, num_draws: int):
    """``(amplitude, noise, pair_log_joint)`` of the draws the predictive
    averages over: ``mode="average"`` the fit's posterior draws evenly thinned
    to ``num_draws``, ``"map"`` its MAP draw with its MAP pair only."""
    post = fit.idata.posterior
    amp = np.asarray(post["amplitude"]).reshape(-1)
    noi = np.asarray(post["noise"]).reshape(-1)
    lj = np.asarray(post["pair_log_joint"]).reshape(len(amp), -1)
    if mode == "map":
        g, d = fit.map_params["pair_index"]
        D = lj.shape[1] // len(np.asarray(fit.data.gammas))
        one = np.full((1, lj.shape[1]), -np.inf)
        one[0, g * D + d] = 0.0
        return (np.array([fit.map_params["amplitude"]]),
                np.array([fit.map_params["noise"]]), one)
    num_draws = check_integer(num_draws, "num_draws", minimum=1)
    rows = np.linspace(0, len(amp) - 1, min(num_draws, len(amp))).round().astype(int)
    return amp[rows], noi[rows], lj[rows]


def fit_mixture(fit, mode: str, num_draws: int) -> InverseGPMixture:
    """The predictive's mixture of a fit: its components by ``mode`` and
    ``num_draws`` under the Gaussian noise; the MAP component with the
    residual density (R) or the covariance function (H) attached where
    ``fit.noise`` chose it (:func:`~bayeskde.inverse.choose_forward_noise`)."""
    noise = fit.noise
    model = None if noise is None else {
        "residual": noise.residual,
        "heteroscedastic": noise.heteroscedastic}.get(noise.kind)
    mix = inverse_gp_mixture(fit.data, *posterior_draws(
        fit, "map" if model is not None else mode, num_draws), memo=fit.memo)
    return mix if model is None else mix._replace(noise_model=model)
