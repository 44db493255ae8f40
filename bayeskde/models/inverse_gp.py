"""Generative inverse model: a GP on the single-valued forward map, inverted by Bayes.

An inverse problem such as the S-shape (predict t from x = t + 0.3 sin(2 pi t) +
noise) or an arm pose (predict joint angles from markers) is one-to-many from
inputs x to outputs y, but its forward map y -> x is a function. This module
models the forward map with a GP and a density on the outputs,

    x_k = f_k(y) + eps,  f_k ~ GP(0, a^2 phi(K)),  eps ~ N(0, s^2),  k = 1..d_x,
    phi(K) = sum_{i <= d} alpha_i K^(i),  K = exp(-gamma ||y - y'||^2),      (F)

and predicts by Bayes' rule,

    p(y* | x*, D, theta) proportional to p(x* | y*, D, theta) p(y*),          (B)

with p(x* | y*, D, theta) the GP's Gaussian predictive of (F): multimodal in y*
by construction wherever several outputs map to the same input. (F) is a
proper likelihood of all the data (the multi-output GP evidence of X given Y),
so its posterior needs no temperature.

Why this model and not the Twin GP's own conditional density used as a
(generalised) likelihood, exp(-E(y) / tau) / Z: the two candidates were compared
by the held-out log predictive density of y given x on fresh noisy S-shape
points (seeds 0-9, 500 training and 500 held-out points each,
``models/sshape_bayes_eval.py``): (B) averages 1.18 nats a point against 0.69
for the Twin GP density with the published kernel and 0.56 with CV bandwidths
(each at the temperature that maximises its own held-out density), and its 90%
intervals cover 0.90 of the held-out outputs against 0.78 and 0.83. Its
posterior predictive checks pass (replicated x at the observed y, and outputs
drawn from (B) at the training inputs, match the observed marginals; see
``bayeskde demo``), while the Twin GP density needs a fitted temperature. The
comparison is by fresh held-out data, not PSIS-LOO: the two
likelihoods are of different variables (x given y, y given x), so only a
held-out score of the predictive of y given x compares them.

Parameters. The degree d in 1..D of the monomial transform (seed eqs. 14-16)
and the RBF rate gamma on a log-spaced grid of ``n_gamma`` multiples of the
median-heuristic rate are both discrete and summed out exactly (the grid is a
discretised log-uniform prior on gamma); alpha is the top singular vector of
the d x 1 HSIC block C_i = HSIC(K^(i), X_c X_c^T) (seed Theorem 4.1 with the
linear kernel on the GP's targets, so alpha = C_{1..d} / sum C_{1..d} >= 0 and
phi(K) is PSD). The amplitude a^2 and the noise s^2 are continuous
(log-normal priors) and sampled by NUTS.

Cost. :func:`prepare_inverse_gp_data` eigendecomposes every grid Gram once,
O(n_gamma D m^3) time, O(n_gamma D m) memory kept; after that each density
evaluation of the model is O(n_gamma D m) at most, all pairs for every draw
(only the eigenvalues above working precision, typically a few percent). With
``approx="lowrank"`` (:mod:`.inverse_gp_lowrank`) the same spectra come from a
feature map of rank R at O(m R^2) time, no m x m matrix, and the evaluations
cost O(n_gamma D R).
"""

from __future__ import annotations

import math
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import numpyro
import numpyro.distributions as dist
from jax.scipy.special import logsumexp
from jaxtyping import Array, Float

from .._typing import ArrayLike
from .._validation import as_float_array, check_integer, check_key, check_positive
from ..kernels import hsic_stacks, squared_distances
from . import inverse_gp_lowrank as _lowrank
from ._inverse_gp_base import rbf_powers as _rbf_powers

__all__ = [
    "InverseGPPrior",
    "InverseGPData",
    "APPROX",
    "EXACT_MAX_M",
    "resolve_approx",
    "check_lowrank_args",
    "prepare_inverse_gp_data",
    "pair_log_evidence",
    "pair_log_evidence_change",
    "pair_log_joint_host",
    "pair_log_joint",
    "inverse_gp_model",
    "inverse_gp_replicate",
    "InverseGPPoint",
    "inverse_gp_point",
    "inverse_gp_log_density",
]


class InverseGPPrior(NamedTuple):
    """Priors of :func:`inverse_gp_model`.

    Attributes:
        max_degree: the degree support 1..D.
        n_gamma: grid size of the RBF rate (log-uniform prior on the grid).
        gamma_low, gamma_high: grid ends as multiples of the median-heuristic
            rate 1 / median ||y_i - y_j||^2.
        degree_decay: log p(d) = -decay d + const (0: uniform).
        log_amplitude_loc, log_amplitude_scale: Normal prior on log a^2; the
            loc is an offset from the log variance of the targets X.
        log_noise_loc, log_noise_scale: Normal prior on log s^2, loc an offset
            from the same log variance.
    """

    max_degree: int = 3
    n_gamma: int = 24
    gamma_low: float = 0.1
    gamma_high: float = 300.0
    degree_decay: float = 0.0
    log_amplitude_loc: float = 0.0
    log_amplitude_scale: float = 1.5
    log_noise_loc: float = math.log(1e-2)
    log_noise_scale: float = 2.5


class InverseGPData(NamedTuple):
    """The spectral precomputation of :func:`prepare_inverse_gp_data`.

    ``Y`` ``(m, d_y)`` are the inverse problem's outputs (the GP's inputs),
    ``X`` ``(m, d_x)`` its centred inputs (the GP's targets) with mean
    ``x_mean``; ``gammas`` the rate grid and ``alpha`` ``(G, D, D)`` the
    transform weights of every pair. The spectra of the G x D Grams phi(K) are
    kept ragged: eigenvalue ``lam`` and squared projection norm ``q`` =
    ||(U^T X)_j||^2 of every eigenvalue above working precision (m eps
    lambda_max: below it eigh returns rounding noise), with its pair index
    ``segment``; per pair, ``n_rest`` eigenvalues were below and taken as 0,
    with projections ``q_rest``. ``log_pair_prior`` ``(G, D)``; ``x_scale`` the
    log variance of X the priors are centred on. ``lowrank``: ``None`` for the
    exact spectra, else the
    :class:`~bayeskde.models.inverse_gp_lowrank.LowRankBasis` whose feature
    map gave the same fields (:mod:`.inverse_gp_lowrank`).
    """

    Y: Float[Array, "m d_y"]
    X: Float[Array, "m d_x"]
    x_mean: Float[Array, " d_x"]
    gammas: Float[Array, " n_gamma"]
    alpha: Float[Array, "n_gamma n_deg n_deg"]
    lam: Float[Array, " n_kept"]
    q: Float[Array, " n_kept"]
    segment: Array
    n_rest: Float[Array, "n_gamma n_deg"]
    q_rest: Float[Array, "n_gamma n_deg"]
    log_pair_prior: Float[Array, "n_gamma n_deg"]
    x_scale: float
    lowrank: object = None


def _as_2d(a, name):
    arr = as_float_array(a, name)
    arr = arr[:, None] if arr.ndim == 1 else arr
    if arr.ndim != 2:
        raise ValueError(f"{name} must be 1- or 2-dimensional, got shape {arr.shape}")
    return jnp.asarray(arr)


def _alpha(C, degree):
    """Transform weights of every degree 1..D from the HSIC column C (D,)."""
    D = C.shape[0]
    mask = (jnp.arange(D)[None, :] < jnp.arange(1, degree + 1)[:, None])
    w = jnp.maximum(C, 0.0)[None, :] * mask
    tiny = jnp.finfo(C.dtype).tiny
    return w / jnp.maximum(jnp.sum(w, axis=1, keepdims=True), tiny)


def _spectra_one(D2, L, X, gamma, degree):
    K_stack = _rbf_powers(D2, gamma, degree)
    alpha = _alpha(hsic_stacks(K_stack, L[None])[:, 0], degree)  # (D, D)

    def one(a):
        lam, U = jnp.linalg.eigh(jnp.tensordot(a, K_stack, 1))
        return jnp.maximum(lam, 0.0), U.T @ X

    lam, proj = jax.lax.map(one, alpha)
    return alpha, lam, proj


def _median_rate(D2):
    d2 = np.asarray(D2)[np.triu_indices(D2.shape[0], 1)]
    pos = d2[d2 > 0]
    return 1.0 / float(np.median(pos)) if pos.size else 1.0


#: Training sizes up to which ``approx="auto"`` keeps the exact spectra, by the
#: feature map the low-rank path would use (one output: HSGP; more: Nystroem).
#: Measured crossover of fit + predict time on the S-shape
#: (``bench/scale_bayes.py --method quadrature``, 2 shared cores, load 5-7):
#: exact 258 s and HSGP 67 s at m = 500, 574 s and 57 s at m = 1000, the pair
#: posteriors 1e-5 apart in total variation and CRPS equal to 4 digits. The
#: HSGP path is the faster already at 500; the exact path is kept up to there
#: (the paper's size, issue 25's yardstick) since it is the reference. The
#: Nystroem limit (several outputs) is not measured: its pair eigenproblems
#: are (D M)^2 with M up to 1024, as large as the exact ones at m = 2000.
EXACT_MAX_M = {"hsgp": 500, "nystroem": 2000}
#: The evidence approximations of :func:`prepare_inverse_gp_data`.
APPROX = ("auto", "exact", "lowrank")
#: The median-heuristic rate uses all pairs of up to this many evenly spaced
#: rows (every row up to that size; an m x m distance matrix is what the
#: low-rank path avoids).
MEDIAN_ROWS = 2000


def resolve_approx(approx, m: int, rank=None, d_y: int = 1) -> str:
    """``"exact"`` or ``"lowrank"`` for ``approx`` at m training points with
    d_y outputs: ``"auto"`` is exact up to :data:`EXACT_MAX_M` points (by the
    feature map d_y selects) unless a ``rank`` is given, low rank otherwise.

    Raises:
        ValueError: ``approx`` not one of :data:`APPROX`.
    """
    if not isinstance(approx, str) or approx not in APPROX:
        raise ValueError(f"approx must be one of {APPROX}, got {approx!r}")
    if approx == "auto":
        limit = EXACT_MAX_M[_lowrank.default_features(d_y)]
        return "lowrank" if (m > limit or rank is not None) else "exact"
    return approx


def check_lowrank_args(approx, rank, features, m: int, d_y: int):
    """Validate ``rank`` and ``features`` for the resolved ``approx``; returns
    ``(rank, features)`` with the defaults filled in for the low-rank path.

    Raises:
        ValueError: a rank with ``approx="exact"``, a rank below 1 (or above m
            for Nystroem), an unknown ``features`` or HSGP for d_y > 1.
        TypeError: a rank that is not an integer.
    """
    if approx == "exact":
        if rank is not None:
            raise ValueError(f"rank is for approx='lowrank' or 'auto', got "
                             f"rank={rank!r} with approx='exact'")
        return None, None
    if not isinstance(features, str) or features not in _lowrank.FEATURES:
        raise ValueError(f"features must be one of {_lowrank.FEATURES}, got "
                         f"{features!r}")
    features = _lowrank.default_features(d_y) if features == "auto" else features
    if features == "hsgp" and d_y != 1:
        raise ValueError(f"features='hsgp' serves one output dimension, got "
                         f"d_y = {d_y}; use features='nystroem'")
    if rank is None:
        return _lowrank.default_rank(m, features), features
    rank = check_integer(rank, "rank", minimum=1,
                         maximum=m if features == "nystroem" else None)
    return rank, features


def prepare_inverse_gp_data(
    Y: Float[ArrayLike, "m_y ..."], X: Float[ArrayLike, "m_x ..."],
    prior: InverseGPPrior | None = None, *, approx="auto", rank=None,
    features="auto",
    key: jax.Array | None = None, progress_bar: bool = False,
) -> InverseGPData:
    """Validate the outputs ``Y`` (the GP's inputs) and inputs ``X`` (its
    targets), and compute the spectra of phi(K) at every grid rate and degree.

    Args:
        Y, X: ``(m, d_y)`` and ``(m, d_x)`` (1-D allowed).
        prior: :class:`InverseGPPrior`.
        approx: ``"exact"`` (eigendecompose every m x m Gram), ``"lowrank"``
            (a feature map of rank ``rank``, :mod:`.inverse_gp_lowrank`: the
            same fields by Woodbury and the determinant lemma) or ``"auto"``
            (exact up to :data:`EXACT_MAX_M` points, :func:`resolve_approx`).
        rank: HSGP basis functions (>= 1) or Nystroem centres (in [1, m]);
            default :func:`~.inverse_gp_lowrank.default_rank` (the data-driven
            choice is :func:`bayeskde.learn.fit_inverse_gp`'s).
        features: ``"auto"``, ``"hsgp"`` (d_y = 1) or ``"nystroem"``.
        key: PRNG key of the Nystroem centres (default ``key(0)``).
        progress_bar: tqdm bars over the low-rank data pass and the pairs.

    Raises:
        ValueError: NaN/inf, mismatched rows, fewer than 3 points, constant X,
            bad prior fields, bad ``approx``, ``rank`` or ``features``.

    Cost: exact O(n_gamma D m^3) time, O(D m^2) working memory; low rank
    O(m J^2) (hsgp) or O(n_gamma m (D M)^2) (nystroem) plus O(n_gamma D R^3),
    O(n_gamma R^2 + 8192 R) memory, no m x m matrix.
    """
    prior = InverseGPPrior() if prior is None else prior
    check_prior(prior)
    Y, X = _as_2d(Y, "Y"), _as_2d(X, "X")
    if Y.shape[0] != X.shape[0]:
        raise ValueError(f"X and Y must have the same number of rows, got "
                         f"{X.shape[0]} and {Y.shape[0]}")
    if Y.shape[0] < 3:
        raise ValueError(
            f"need at least 3 training points, got n_samples = {Y.shape[0]}")
    if not np.any(np.std(np.asarray(X), axis=0) > 0):
        raise ValueError("X is constant: the forward GP has nothing to explain")
    m, D = Y.shape[0], prior.max_degree
    approx = resolve_approx(approx, m, rank, Y.shape[1])
    rank, features = check_lowrank_args(approx, rank, features, m, Y.shape[1])
    x_mean = jnp.mean(X, axis=0)
    Xc = X - x_mean[None, :]
    # The spectra in float64 whatever the working precision: the evidence needs
    # eigenvalues down to the noise level s^2 / a^2 (1e-4 on the arm), far below
    # float32's resolution m eps lambda_max (1e-2 there), and float32 spectra
    # moved the arm's posterior to another kernel.
    Y64, X64 = np.asarray(Y, np.float64), np.asarray(Xc, np.float64)
    sub = Y64[np.unique(np.linspace(0, m - 1, min(m, MEDIAN_ROWS)).round()
                        .astype(int))]
    with jax.enable_x64(True):
        D2s = np.asarray(squared_distances(jnp.asarray(sub), jnp.asarray(sub)))
    gammas = _median_rate(D2s) * np.geomspace(prior.gamma_low, prior.gamma_high,
                                              prior.n_gamma)
    basis = None
    if approx == "exact":
        with jax.enable_x64(True):
            Yj, Xj = jnp.asarray(Y64), jnp.asarray(X64)
            D2 = squared_distances(Yj, Yj)
            alpha, lam, proj = jax.lax.map(
                lambda g: _spectra_one(D2, Xj @ Xj.T, Xj, g, D), jnp.asarray(gammas))
            alpha, lam, proj = (np.asarray(a) for a in (alpha, lam, proj))
        lam = lam.reshape(-1, m)  # (G D, m)
        q = np.sum(proj**2, axis=-1).reshape(lam.shape)
        kept = lam > m * np.finfo(lam.dtype).eps * lam.max(axis=1, keepdims=True)
        seg = np.broadcast_to(np.arange(lam.shape[0])[:, None], lam.shape)[kept]
        q_rest = np.where(kept, 0.0, q).sum(axis=1)
        lam, q, n_kept = lam[kept], q[kept], kept.sum(axis=1)
    else:
        key = jax.random.key(0) if key is None else check_key(key)
        basis = _lowrank.lowrank_statistics(key, Y64, X64, gammas, D, rank,
                                            features, progress_bar=progress_bar)
        with jax.enable_x64(True):
            alpha = np.asarray(jax.vmap(lambda c: _alpha(c, D))(
                jnp.asarray(_lowrank.lowrank_hsic(basis, gammas, D))))
        spectra = _lowrank.lowrank_pair_spectra(basis, alpha, gammas,
                                                progress_bar=progress_bar)
        n_kept = np.array([len(lp) for lp, _ in spectra])
        seg = np.repeat(np.arange(len(spectra)), n_kept)
        lam = np.concatenate([lp for lp, _ in spectra])
        q = np.concatenate([qp for _, qp in spectra])
        q_rest = np.maximum(basis.x_sq - np.bincount(seg, q, len(spectra)), 0.0)
    shape = (prior.n_gamma, D)
    deg = jnp.arange(1, D + 1, dtype=X.dtype)
    logits = jnp.broadcast_to(-prior.degree_decay * deg, shape)
    dt = X.dtype
    return InverseGPData(
        Y, Xc, x_mean, jnp.asarray(gammas, dt), jnp.asarray(alpha, dt),
        jnp.asarray(lam, dt), jnp.asarray(q, dt), jnp.asarray(seg),
        jnp.asarray((m - n_kept).reshape(shape), dt),
        jnp.asarray(q_rest.reshape(shape), dt),
        logits - logsumexp(logits), float(np.log(np.mean(np.asarray(Xc) ** 2))),
        basis)


def check_prior(prior: InverseGPPrior) -> None:
    """Raise ValueError for an invalid :class:`InverseGPPrior`."""
    if not isinstance(prior, InverseGPPrior):
        raise TypeError(f"prior must be an InverseGPPrior, got {type(prior)}")
    check_integer(prior.max_degree, "max_degree", minimum=1)
    check_integer(prior.n_gamma, "n_gamma", minimum=1)
    check_positive(prior.gamma_low, "gamma_low")
    check_positive(prior.gamma_high, "gamma_high")
    if not prior.gamma_high >= prior.gamma_low:
        raise ValueError("gamma_high must be >= gamma_low")
    check_positive(prior.log_amplitude_scale, "log_amplitude_scale")
    check_positive(prior.log_noise_scale, "log_noise_scale")


def pair_log_evidence(
    data: InverseGPData, amplitude: Float[Array, "*pairs"],
    noise: Float[Array, "*pairs"],
) -> Float[Array, "n_gamma n_deg"]:
    """log p(X | Y, gamma, d, a^2, s^2) of (F) for every grid pair, from the
    spectra: with v = a^2 lambda + s^2 (lambda = 0 for the eigenvalues below
    working precision),

        -(d_x / 2) sum_j log v_j - (1/2) sum_{j,k} (U^T X)_jk^2 / v_j
        - (m d_x / 2) log 2 pi.

    ``amplitude`` and ``noise`` are scalars shared by every pair or
    ``(n_gamma, D)`` arrays, one value per pair.

    Cost O(n_kept) <= O(n_gamma D m).
    """
    m, d_x = data.X.shape
    shape = data.n_rest.shape
    amplitude, noise = jnp.asarray(amplitude), jnp.asarray(noise)
    if amplitude.ndim or noise.ndim:
        amp = jnp.broadcast_to(amplitude, shape).reshape(-1)[data.segment]
        v = amp * data.lam + jnp.broadcast_to(noise, shape).reshape(-1)[data.segment]
    else:
        v = amplitude * data.lam + noise

    logdet = _per_pair(data, jnp.log(v)) + data.n_rest * jnp.log(noise)
    quad = _per_pair(data, data.q / v) + data.q_rest / noise
    return (-0.5 * d_x * logdet - 0.5 * quad
            - 0.5 * m * d_x * jnp.log(2.0 * jnp.pi))


def _per_pair(data, a):
    shape = data.n_rest.shape
    return jax.ops.segment_sum(a, data.segment, shape[0] * shape[1]).reshape(shape)


def pair_log_evidence_change(
    data: InverseGPData, log_amplitude0: Float[Array, "n_gamma n_deg"],
    log_noise0: Float[Array, "n_gamma n_deg"],
    log_amplitude: Float[Array, "n_gamma n_deg"],
    log_noise: Float[Array, "n_gamma n_deg"],
) -> Float[Array, "n_gamma n_deg"]:
    """log p(X | Y, p, a^2, s^2) - log p(X | Y, p, a0^2, s0^2) of every pair p,
    in a form whose rounding error is relative to the change, not to the
    evidence (u = log a^2, v = log s^2, one value per pair).

    :func:`pair_log_evidence` is a sum of O(m d_x) terms whose total reaches
    1e5 at m = 1e5, so in float32 its value carries an absolute error of about
    1e-2 nats, larger than the differences a quadrature grid resolves. Here,
    with w0 = a0^2 lambda + s0^2 and dw = a0^2 expm1(u - u0) lambda
    + s0^2 expm1(v - v0) (so w = w0 + dw exactly in real arithmetic), it is::

        -(d_x / 2) [sum_j log1p(dw_j / w0_j) + n_rest (v - v0)]
        - (1/2) [-sum_j q_j dw_j / (w0_j (w0_j + dw_j))
                 + q_rest e^{-v0} expm1(v0 - v)],

    each term small where the change is small, so the error of the sum is
    relative to the change. Cost O(n_kept).
    """
    d_x = data.X.shape[1]
    seg = data.segment

    def each(a):
        return a.reshape(-1)[seg]

    a0, s0 = jnp.exp(log_amplitude0), jnp.exp(log_noise0)
    da = a0 * jnp.expm1(log_amplitude - log_amplitude0)
    ds = s0 * jnp.expm1(log_noise - log_noise0)
    w0 = each(a0) * data.lam + each(s0)
    dw = each(da) * data.lam + each(ds)
    logdet = (_per_pair(data, jnp.log1p(dw / w0))
              + data.n_rest * (log_noise - log_noise0))
    quad = (-_per_pair(data, data.q * dw / (w0 * (w0 + dw)))
            + data.q_rest * jnp.exp(-log_noise0) * jnp.expm1(log_noise0 - log_noise))
    return -0.5 * d_x * logdet - 0.5 * quad


def pair_log_joint_host(
    data: InverseGPData, amplitude: np.ndarray, noise: np.ndarray,
) -> np.ndarray:
    """:func:`pair_log_joint` evaluated in float64 with NumPy, whatever JAX's
    precision: the anchor that :func:`pair_log_evidence_change` is added to
    (``amplitude`` and ``noise`` ``(n_gamma, D)`` arrays). Cost O(n_kept)."""
    shape = data.n_rest.shape
    n_pairs = shape[0] * shape[1]
    m, d_x = data.X.shape
    seg = np.asarray(data.segment)
    lam, q = (np.asarray(a, np.float64) for a in (data.lam, data.q))
    amp = np.broadcast_to(np.asarray(amplitude, np.float64), shape).reshape(-1)
    noi = np.broadcast_to(np.asarray(noise, np.float64), shape).reshape(-1)
    w = amp[seg] * lam + noi[seg]
    n_rest = np.asarray(data.n_rest, np.float64).reshape(-1)
    q_rest = np.asarray(data.q_rest, np.float64).reshape(-1)
    logdet = np.bincount(seg, np.log(w), n_pairs) + n_rest * np.log(noi)
    quad = np.bincount(seg, q / w, n_pairs) + q_rest / noi
    ev = -0.5 * d_x * logdet - 0.5 * quad - 0.5 * m * d_x * np.log(2.0 * np.pi)
    return ev.reshape(shape) + np.asarray(data.log_pair_prior, np.float64)


def pair_log_joint(
    data: InverseGPData, amplitude: Float[Array, "*pairs"],
    noise: Float[Array, "*pairs"],
) -> Float[Array, "n_gamma n_deg"]:
    """log p(gamma, d) + log p(X | Y, gamma, d, a^2, s^2) for every grid pair
    (:func:`pair_log_evidence` plus the pairs' prior): the conditional
    posterior of the pairs given (a^2, s^2) up to a constant."""
    return data.log_pair_prior + pair_log_evidence(data, amplitude, noise)


def inverse_gp_model(data: InverseGPData, prior: InverseGPPrior) -> None:
    """NumPyro model of (F) with (gamma, d) summed out.

    Sites: latent ``log_amplitude``, ``log_noise``; deterministic
    ``amplitude``, ``noise``, ``pair_log_joint`` ``(n_gamma, D)`` (normalise
    it per draw for the conditional posterior of the pairs); factor
    ``marginal``.
    """
    log_a = numpyro.sample("log_amplitude", dist.Normal(
        data.x_scale + prior.log_amplitude_loc, prior.log_amplitude_scale))
    log_s = numpyro.sample("log_noise", dist.Normal(
        data.x_scale + prior.log_noise_loc, prior.log_noise_scale))
    a = numpyro.deterministic("amplitude", jnp.exp(log_a))
    s = numpyro.deterministic("noise", jnp.exp(log_s))
    lj = numpyro.deterministic("pair_log_joint", pair_log_joint(data, a, s))
    numpyro.factor("marginal", logsumexp(lj))


def inverse_gp_replicate(
    key: jax.Array, data: InverseGPData, amplitude: Float[Array, ""],
    noise: Float[Array, ""], pair_log_joint: Float[Array, "n_gamma n_deg"],
) -> tuple[Float[Array, "m d_x"], Array]:
    """One posterior predictive replicate of the training inputs X at the
    observed outputs Y: the pair drawn from its conditional posterior, then
    f ~ p(f | X, Y, theta) (the GP posterior at the training points) and
    x_rep = f + eps, column by column. With phi(K) = U diag(l) U^T and
    v = a^2 l + s^2, the posterior of f has mean U diag(a^2 l / v) U^T X and
    covariance U diag(a^2 l s^2 / v) U^T.

    Returns ``(x_rep, pair)`` with the flat pair index g D + (d - 1).
    Cost O(m^3) (one eigendecomposition of the drawn pair).
    """
    k_pair, k_f, k_e = jax.random.split(key, 3)
    pair = jax.random.categorical(k_pair, pair_log_joint.reshape(-1))
    D = data.alpha.shape[1]
    g, d = pair // D, pair % D
    K_stack = _rbf_powers(squared_distances(data.Y, data.Y), data.gammas[g], D)
    lam, U = jnp.linalg.eigh(jnp.tensordot(data.alpha[g, d], K_stack, 1))
    al = amplitude * jnp.maximum(lam, 0.0)
    v = al + noise
    z = jax.random.normal(k_f, data.X.shape, data.X.dtype)
    coef = (al / v)[:, None] * (U.T @ data.X) + jnp.sqrt(al * noise / v)[:, None] * z
    eps = jnp.sqrt(noise) * jax.random.normal(k_e, data.X.shape, data.X.dtype)
    return U @ coef + eps + data.x_mean[None, :], pair


class InverseGPPoint(NamedTuple):
    """One pair's GP posterior in the form :func:`inverse_gp_log_density`
    evaluates at any output y (:func:`inverse_gp_point`).

    ``U``, ``v`` the eigenvectors of phi(K) and a^2 lambda + s^2; ``proj`` =
    U^T X; ``alpha``, ``gamma`` the pair's kernel; ``bandwidth`` the
    per-dimension bandwidths of the Gaussian KDE of the training outputs used
    as p(y).
    """

    Y: Float[Array, "m d_y"]
    U: Float[Array, "m m"]
    v: Float[Array, " m"]
    proj: Float[Array, "m d_x"]
    alpha: Float[Array, " n_deg"]
    gamma: Float[Array, ""]
    amplitude: Float[Array, ""]
    noise: Float[Array, ""]
    x_mean: Float[Array, " d_x"]
    bandwidth: Float[Array, " d_y"]


def inverse_gp_point(
    data: InverseGPData, pair: tuple[int, int], amplitude: float, noise: float,
    bandwidth: Float[ArrayLike, " d_y"],
) -> InverseGPPoint:
    """Precompute pair ``(g, d)`` at ``(amplitude, noise)`` for
    :func:`inverse_gp_log_density`. Cost O(m^3)."""
    g, d = pair
    dt = data.X.dtype
    alpha = data.alpha[g, d]
    K = jnp.tensordot(alpha, _rbf_powers(squared_distances(data.Y, data.Y),
                                         data.gammas[g], alpha.shape[0]), 1)
    lam, U = jnp.linalg.eigh(K)
    amp, noi = jnp.asarray(amplitude, dt), jnp.asarray(noise, dt)
    return InverseGPPoint(data.Y, U, amp * jnp.maximum(lam, 0.0) + noi,
                          U.T @ data.X, alpha, data.gammas[g],
                          amp, noi, data.x_mean, jnp.asarray(bandwidth, dt))


def inverse_gp_log_density(
    y: Float[Array, " d_y"], x: Float[Array, " d_x"], point: InverseGPPoint,
    test_noise: float | Float[Array, ""] = 1.0,
) -> Float[Array, ""]:
    """log p(x | y, D, theta) + log p(y) + const at one output y: the log of
    (B) before normalisation over y, with p(x | y, D, theta) the GP predictive
    of the pair in ``point`` and p(y) the Gaussian KDE of the training outputs
    with ``point.bandwidth``. ``test_noise`` 1: x carries the training noise;
    0: x = f(y) exactly (see :func:`inverse_gp_log_probs`). Differentiable in y.
    Cost O(m^2 + m d_x)."""
    d2 = jnp.sum((point.Y - y[None, :]) ** 2, axis=1)
    k = jnp.tensordot(point.alpha, _rbf_powers(d2[None], point.gamma,
                                               point.alpha.shape[0])[:, 0], 1)
    A = point.U.T @ k  # (m,)
    amp = point.amplitude
    mean = amp * A @ (point.proj / point.v[:, None]) + point.x_mean
    var_f = amp * jnp.sum(point.alpha) - amp**2 * jnp.sum(A**2 / point.v)
    var = jnp.maximum(var_f, 1e-6 * point.noise) + test_noise * point.noise
    ll = -0.5 * jnp.sum((x - mean) ** 2) / var - 0.5 * x.shape[0] * jnp.log(var)
    z = (point.Y - y[None, :]) / point.bandwidth[None, :]
    return ll + logsumexp(-0.5 * jnp.sum(z * z, axis=1))
