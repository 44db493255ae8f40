"""The inverse model's data: its kernel prior, and the spectral precomputation
every posterior algorithm reads.

The model (:mod:`bayeskde.inverse`, eq. (F)) is a GP on the forward map
y -> x with kernel phi(K) (:mod:`.kernel`). :func:`prepare_inverse_gp_data`
validates the data and computes, for every (rate, degree) pair of the prior's
grid, the spectrum of phi(K) and the squared projections of the centred
targets on it: that is all the evidence (:mod:`.evidence`) needs, so a
density evaluation costs O(n_kept) <= O(n_gamma D m).

Parameters. The degree d in 1..D of the monomial transform (seed eqs. 14-16)
and the RBF rate gamma on a log-spaced grid of ``n_gamma`` multiples of the
median-heuristic rate are both discrete and summed out exactly (the grid is a
discretised log-uniform prior on gamma); alpha is the top singular vector of
the d x 1 HSIC block C_i = HSIC(K^(i), X_c X_c^T) (seed Theorem 4.1 with the
linear kernel on the GP's targets, so alpha = C_{1..d} / sum C_{1..d} >= 0 and
phi(K) is PSD). The amplitude a^2 and the noise s^2 are continuous
(log-normal priors).

Cost. The exact path eigendecomposes every grid Gram once, O(n_gamma D m^3)
time, O(n_gamma D m) memory kept. With ``approx="lowrank"``
(:mod:`~bayeskde.inverse.lowrank`)
the same spectra come from a feature map of rank R at O(m R^2) time, no m x m
matrix. :func:`pair_spectrum` gives one pair's kept eigenvectors for the
predictive and the replicates (exact, or in feature form), memoised.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax.scipy.special import logsumexp
from jaxtyping import Array, Float

from .._typing import ArrayLike
from .._validation import as_float_array, check_integer, check_key, check_positive
from ..kernels import squared_distances
from . import lowrank
from .kernel import (
    grid_spectra,
    kept_eigenvalues,
    median_rate,
    pair_eigensystem,
    transform_weights,
)

__all__ = [
    "InverseGPPrior",
    "InverseGPData",
    "APPROX",
    "EXACT_MAX_M",
    "as_2d",
    "check_prior",
    "resolve_approx",
    "check_lowrank_args",
    "prepare_inverse_gp_data",
    "Memo",
    "pair_spectrum",
]


class InverseGPPrior(NamedTuple):
    """The kernel prior of :func:`bayeskde.inverse.inverse_gp_model`.

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
    :class:`~bayeskde.inverse.LowRankBasis` whose feature
    map gave the same fields (:mod:`~bayeskde.inverse.lowrank`).
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


def as_2d(a, name):
    """``a`` as a float 2-D array (a 1-D one as one column)."""
    if a is None:
        raise TypeError(f"{name} must be an array of shape (m, d) (1-D allowed), "
                        "got None")
    arr = as_float_array(a, name)
    arr = arr[:, None] if arr.ndim == 1 else arr
    if arr.ndim != 2:
        raise ValueError(f"{name} must be 1- or 2-dimensional, got shape {arr.shape}")
    return jnp.asarray(arr)


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
        limit = EXACT_MAX_M[lowrank.default_features(d_y)]
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
    if not isinstance(features, str) or features not in lowrank.FEATURES:
        raise ValueError(f"features must be one of {lowrank.FEATURES}, got "
                         f"{features!r}")
    features = lowrank.default_features(d_y) if features == "auto" else features
    if features == "hsgp" and d_y != 1:
        raise ValueError(f"features='hsgp' serves one output dimension, got "
                         f"d_y = {d_y}; use features='nystroem'")
    if rank is None:
        return lowrank.default_rank(m, features), features
    rank = check_integer(rank, "rank", minimum=1,
                         maximum=m if features == "nystroem" else None)
    return rank, features


def prepare_inverse_gp_data(
    key: jax.Array, X: Float[ArrayLike, "m_x ..."], Y: Float[ArrayLike, "m_y ..."],
    prior: InverseGPPrior | None = None, *, approx="auto", rank=None,
    features="auto", progress_bar: bool = False,
) -> InverseGPData:
    """Validate the inputs ``X`` (the forward GP's targets) and outputs ``Y``
    (its inputs), and compute the spectra of phi(K) at every grid rate and
    degree.

    Args:
        key: PRNG key of the Nystroem centres (unused by the exact path and
            HSGP, still checked).
        X, Y: ``(m, d_x)`` and ``(m, d_y)`` (1-D allowed).
        prior: :class:`InverseGPPrior`.
        approx: ``"exact"`` (eigendecompose every m x m Gram), ``"lowrank"``
            (a feature map of rank ``rank``, :mod:`~bayeskde.inverse.lowrank`: the
            same fields by Woodbury and the determinant lemma) or ``"auto"``
            (exact up to :data:`EXACT_MAX_M` points, :func:`resolve_approx`).
        rank: HSGP basis functions (>= 1) or Nystroem centres (in [1, m]);
            default :func:`~.inverse_gplowrank.default_rank` (the data-driven
            choice is :func:`bayeskde.inverse.fit_inverse_gp`'s).
        features: ``"auto"``, ``"hsgp"`` (d_y = 1) or ``"nystroem"``.
        progress_bar: tqdm bars over the low-rank data pass and the pairs.

    Raises:
        ValueError: NaN/inf, mismatched rows, fewer than 3 points, constant X
            or Y, bad prior fields, bad ``approx``, ``rank`` or ``features``.
        TypeError: a key that is not a PRNG key, ``X`` or ``Y`` None.

    Cost: exact O(n_gamma D m^3) time, O(D m^2) working memory; low rank
    O(m J^2) (hsgp) or O(n_gamma m (D M)^2) (nystroem) plus O(n_gamma D R^3),
    O(n_gamma R^2 + 8192 R) memory, no m x m matrix.
    """
    key = check_key(key)
    prior = InverseGPPrior() if prior is None else prior
    check_prior(prior)
    X, Y = as_2d(X, "X"), as_2d(Y, "Y")
    if Y.shape[0] != X.shape[0]:
        raise ValueError(f"X and Y must have the same number of rows, got "
                         f"{X.shape[0]} and {Y.shape[0]}")
    if Y.shape[0] < 3:
        raise ValueError(
            f"need at least 3 training points, got n_samples = {Y.shape[0]}")
    if not np.any(np.std(np.asarray(X), axis=0) > 0):
        raise ValueError("X is constant: the forward GP has nothing to explain")
    if not np.any(np.ptp(np.asarray(Y), axis=0) > 0):
        raise ValueError("Y is constant: every training output is the same, so "
                         "the forward map has no inputs to vary over")
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
    gammas = median_rate(D2s) * np.geomspace(prior.gamma_low, prior.gamma_high,
                                              prior.n_gamma)
    basis = None
    if approx == "exact":
        with jax.enable_x64(True):
            Yj, Xj = jnp.asarray(Y64), jnp.asarray(X64)
            D2 = squared_distances(Yj, Yj)
            alpha, lam, proj = jax.lax.map(
                lambda g: grid_spectra(D2, Xj @ Xj.T, Xj, g, D), jnp.asarray(gammas))
            alpha, lam, proj = (np.asarray(a) for a in (alpha, lam, proj))
        lam = lam.reshape(-1, m)  # (G D, m)
        q = np.sum(proj**2, axis=-1).reshape(lam.shape)
        kept = np.stack([kept_eigenvalues(row, m) for row in lam])
        seg = np.broadcast_to(np.arange(lam.shape[0])[:, None], lam.shape)[kept]
        q_rest = np.where(kept, 0.0, q).sum(axis=1)
        lam, q, n_kept = lam[kept], q[kept], kept.sum(axis=1)
    else:
        basis = lowrank.lowrank_statistics(key, Y64, X64, gammas, D, rank,
                                            features, progress_bar=progress_bar)
        with jax.enable_x64(True):
            alpha = np.asarray(jax.vmap(lambda c: transform_weights(c, D))(
                jnp.asarray(lowrank.lowrank_hsic(basis, gammas, D))))
        spectra = lowrank.lowrank_pair_spectra(basis, alpha, gammas,
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




class Memo:
    """A memo of pure functions of a fit: the pairs' spectra keyed by
    ``(g, d)`` (:func:`pair_spectrum`) and the last value of each ``kind``
    (:meth:`last`: the estimator's last predictive). Its contents are
    functions of the fit's data and the keys, never state a result depends
    on: a fit holds one so that every prediction from it pays each pair's
    eigendecomposition once."""

    def __init__(self):
        self._store = {}
        self._last = {}

    def get(self, key, compute):
        """The value of ``key``, computed by ``compute()`` the first time."""
        if key not in self._store:
            self._store[key] = compute()
        return self._store[key]

    def last(self, kind: str, key, compute):
        """The value of ``key`` if it is the last one of ``kind`` computed,
        else ``compute()``, which becomes the last one (one per kind)."""
        held = self._last.get(kind)
        if held is None or held[0] != key:
            held = (key, compute())
            self._last[kind] = held
        return held[1]

    def peek(self, kind: str):
        """``(key, value)`` of the last value of ``kind``, or ``None``."""
        return self._last.get(kind)

    def __len__(self):
        return len(self._store)

    def __repr__(self):
        return f"Memo({len(self._store)} spectra)"


def pair_spectrum(data: InverseGPData, g: int, d: int,
                  memo: Memo | None = None):
    """Kept eigenpairs of pair (g, d) and U^T X, float64, memoised in
    ``memo``: ``(lam (r,), U (m, r), proj (r, d_x))``
    (:func:`~.kernel.pair_eigensystem`). A low-rank fit gives them in feature
    form (:func:`~.lowrank.lowrank_pair_spectrum`: the map from raw features
    to A = k(y)^T U in place of U). Cost O(m^3) exact, O(R^3) low rank."""
    def compute():
        if data.lowrank is not None:
            return lowrank.lowrank_pair_spectrum(
                data.lowrank, np.asarray(data.alpha, np.float64),
                np.asarray(data.gammas, np.float64), g, d)
        return pair_eigensystem(data.Y, data.X, data.alpha[g, d], data.gammas[g])

    return compute() if memo is None else memo.get((g, d), compute)
