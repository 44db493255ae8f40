"""Proper scores of predictive distributions and multi-hypothesis errors.

A predictive distribution of a scalar output is given in one of three forms:

* Gaussian: mean and standard deviation per test point
  (:func:`crps_gaussian`, :func:`log_density_gaussian`);
* samples ``(n_test, n_samples)`` (:func:`crps_samples`);
* a discrete distribution: support points and probabilities per test point,
  e.g. a density evaluated on a grid and multiplied by the cell width
  (:func:`crps_discrete`, :func:`log_density_grid`, :func:`pit_discrete`,
  :func:`interval_discrete`, :func:`coverage_discrete`).

Samples are the discrete form with equal weights, so every score has one
definition. All scores are per test point (average them yourself) and
negatively oriented where they are losses (CRPS, best-of-k error).

A multivariate sample against a reference sample: :func:`c2st`, the classifier
two-sample test by which sbibm scores simulation-based inference.

References: Gneiting and Raftery (2007), "Strictly proper scoring rules,
prediction, and estimation", eqs. (20)-(21) (CRPS = E|X - y| - E|X - X'| / 2)
and the Gaussian closed form of section 4.2.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from jax.scipy.special import logsumexp
from jax.scipy.stats import norm
from jaxtyping import Array, Float

from ._typing import ArrayLike
from ._validation import (
    as_float_array,
    check_choice,
    check_finite,
    check_integer,
)

__all__ = [
    "crps_gaussian",
    "log_density_gaussian",
    "crps_discrete",
    "crps_samples",
    "log_density_grid",
    "pit_discrete",
    "interval_discrete",
    "coverage_discrete",
    "best_of_k_error",
    "c2st",
]


def _check_same_rows(a, b, name_a, name_b):
    if a.shape[0] != b.shape[0]:
        raise ValueError(
            f"{name_a} and {name_b} must have the same number of test points, got "
            f"{a.shape[0]} and {b.shape[0]}"
        )


def _observations(y, n_test, name="y"):
    """``y`` as a finite ``(n_test,)`` array (a ``(n_test, 1)`` column is
    accepted), refused with its shape otherwise."""
    y = as_float_array(y, name)
    if y.ndim == 2 and y.shape[1] == 1:
        y = y[:, 0]
    if y.ndim != 1 or y.shape[0] != n_test:
        raise ValueError(
            f"{name} must have shape ({n_test},) (one observation per test point), "
            f"got {y.shape}")
    return y


def _gaussian(mean, sd, y):
    """mean, sd and y as finite arrays of y's shape (mean and sd may be scalars);
    sd > 0 everywhere."""
    y = as_float_array(y, "y")
    mean, sd = as_float_array(mean, "mean"), as_float_array(sd, "sd")
    for a, n in ((mean, "mean"), (sd, "sd")):
        if a.shape not in ((), y.shape):
            raise ValueError(
                f"{n} must have y's shape {y.shape} (or be a scalar), got {a.shape}")
    if not bool(jnp.all(sd > 0)):
        bad = np.flatnonzero(~(np.asarray(sd).reshape(-1) > 0))[:5].tolist()
        raise ValueError(f"sd must be > 0 everywhere; not at flat index {bad}")
    return mean, sd, y


def crps_gaussian(
    mean: Float[ArrayLike, " n_test"], sd: Float[ArrayLike, " n_test"],
    y: Float[ArrayLike, " n_test"],
) -> Float[Array, " n_test"]:
    """CRPS of N(mean, sd^2) at y, in closed form (Gneiting and Raftery 2007,
    section 4.2): sd [z (2 Phi(z) - 1) + 2 phi(z) - 1 / sqrt(pi)], z = (y - mean)
    / sd. O(n_test).

    Raises:
        ValueError: a non-positive ``sd``; ``mean`` or ``sd`` of another shape
            than ``y`` (scalars are broadcast); NaN/inf; empty arrays.
        TypeError: non-numeric input.
    """
    mean, sd, y = _gaussian(mean, sd, y)
    z = (y - mean) / sd
    return sd * (z * (2.0 * norm.cdf(z) - 1.0) + 2.0 * norm.pdf(z)
                 - 1.0 / jnp.sqrt(jnp.pi))


def log_density_gaussian(
    mean: Float[ArrayLike, " n_test"], sd: Float[ArrayLike, " n_test"],
    y: Float[ArrayLike, " n_test"],
) -> Float[Array, " n_test"]:
    """log N(y; mean, sd^2) per test point. O(n_test).

    Raises:
        ValueError, TypeError: as :func:`crps_gaussian`.
    """
    mean, sd, y = _gaussian(mean, sd, y)
    return norm.logpdf(y, mean, sd)


@jax.jit
def _crps_sorted(z, p, y):
    # z (n, S) sorted ascending, p (n, S) probabilities summing to one per row.
    # E|X - X'| = 2 int F (1 - F) dz for a step CDF F (Gneiting and Raftery
    # 2007, eq. 21); O(S) per row instead of the O(S^2) pair sum.
    F = jnp.cumsum(p, axis=1)[:, :-1]
    gaps = jnp.diff(z, axis=1)
    e_xx = 2.0 * jnp.sum(gaps * F * (1.0 - F), axis=1)
    e_xy = jnp.sum(p * jnp.abs(z - y[:, None]), axis=1)
    return e_xy - 0.5 * e_xx


def _discrete(support, probs, y):
    """Validated (support, probs, y), sorted by support, probs normalised per
    row; ``y=None`` stands for no observations (zeros)."""
    probs = as_float_array(probs, "probs")
    if probs.ndim != 2:
        raise ValueError(f"probs must be 2-D (n_test, n_support), got {probs.shape}")
    y = (jnp.zeros(probs.shape[0], probs.dtype) if y is None
         else _observations(y, probs.shape[0]))
    support = as_float_array(support, "support")
    if support.shape not in ((probs.shape[1],), probs.shape):
        raise ValueError(
            f"support must have shape ({probs.shape[1]},) (shared) or {probs.shape} "
            f"(per test point), matching probs {probs.shape}; got {support.shape}"
        )
    support = jnp.broadcast_to(support, probs.shape)
    if bool(jnp.any(probs < 0)):
        raise ValueError("probs must be non-negative")
    total = jnp.sum(probs, axis=1, keepdims=True)
    if not bool(jnp.all(total > 0)):
        rows = np.flatnonzero(~(np.asarray(total)[:, 0] > 0))
        raise ValueError(
            f"probs must have positive mass in every row; row(s) "
            f"{rows[:5].tolist()}{' ...' if len(rows) > 5 else ''} sum to zero "
            f"(or underflow {probs.dtype})")
    probs = probs / total
    order = jnp.argsort(support, axis=1)
    return (jnp.take_along_axis(support, order, 1),
            jnp.take_along_axis(probs, order, 1), y.astype(probs.dtype))


def crps_discrete(
    support: Float[ArrayLike, "..."], probs: Float[ArrayLike, "n_test n_support"],
    y: Float[ArrayLike, " n_test"],
) -> Float[Array, " n_test"]:
    """CRPS of the discrete distribution sum_s p_s delta(z_s) at y:
    E|X - y| - E|X - X'| / 2 (Gneiting and Raftery 2007, eq. 21).

    Args:
        support: ``(n_support,)`` shared points (a grid) or ``(n_test,
            n_support)`` per test point.
        probs: ``(n_test, n_support)`` non-negative weights (normalised here).
        y: ``(n_test,)`` observations.

    For a density on a uniform grid pass density times cell width; the score is
    then the CRPS of the grid-discretised predictive, within O(cell width) of
    the continuous one. Cost O(n_test n_support log n_support).

    Raises:
        ValueError: ``probs`` not 2-D, negative, or with a row of zero mass;
            ``support`` not ``(n_support,)`` or ``(n_test, n_support)``; ``y``
            not ``(n_test,)``; NaN/inf or empty arrays. The same holds for
            :func:`pit_discrete`, :func:`interval_discrete` and
            :func:`coverage_discrete`.
        TypeError: non-numeric input.
    """
    return _crps_sorted(*_discrete(support, probs, y))


def crps_samples(
    samples: Float[ArrayLike, "n_test n_samples"], y: Float[ArrayLike, " n_test"]
) -> Float[Array, " n_test"]:
    """CRPS of the empirical distribution of ``samples`` per test point
    (:func:`crps_discrete` with equal weights). O(n_test S log S)."""
    samples = jnp.asarray(as_float_array(samples, "samples"))
    if samples.ndim != 2:
        raise ValueError(f"samples must be 2-D (n_test, n_samples), got "
                         f"{samples.shape}")
    return crps_discrete(samples, jnp.ones_like(samples), y)


def log_density_grid(
    grid: Float[ArrayLike, " n_grid"], log_density: Float[ArrayLike, "n_test n_grid"],
    y: Float[ArrayLike, " n_test"],
) -> Float[Array, " n_test"]:
    """log p(y) of a density tabulated on a uniform 1-D grid, normalised here so
    that sum p dz = 1 (midpoint rule) and read at y by linear
    interpolation of the density; -inf outside the grid. O(n_test n_grid).

    Raises:
        ValueError: a grid that is not 1-D, has fewer than 2 points or is not
            increasing and uniform; ``log_density`` not ``(n_test, n_grid)``,
            holding NaN or +inf, or with a row that is -inf everywhere (no
            mass); ``y`` not ``(n_test,)`` or not finite.
        TypeError: non-numeric input.
    """
    grid = as_float_array(grid, "grid", ndim=1)
    if grid.shape[0] < 2:
        raise ValueError(f"grid needs at least 2 points, got {grid.shape[0]}")
    gaps = np.diff(np.asarray(grid, np.float64))
    dz = (float(grid[-1]) - float(grid[0])) / (grid.shape[0] - 1)
    # Uniform up to the rounding of a linspace in the working dtype.
    if not (np.all(gaps > 0) and np.max(np.abs(gaps - dz)) <= 1e-2 * dz):
        raise ValueError("grid must be increasing with uniform spacing (the "
                         "normalisation is the midpoint rule), got gaps from "
                         f"{gaps.min():.3g} to {gaps.max():.3g}")
    try:
        logd = np.asarray(log_density)
    except Exception as err:
        raise TypeError("log_density must be array-like, got "
                        f"{type(log_density).__name__}") from err
    if logd.dtype.kind not in "biuf":
        raise TypeError(
            f"log_density must hold numbers, got an array of dtype {logd.dtype}")
    if logd.ndim != 2 or logd.shape[1] != grid.shape[0]:
        raise ValueError(f"log_density must have shape (n_test, {grid.shape[0]}), "
                         f"got {logd.shape}")
    if np.any(np.isnan(logd) | (logd == np.inf)):
        raise ValueError("log_density must not contain NaN or +inf")
    if logd.shape[0] == 0:
        raise ValueError("log_density is empty (shape (0, n_grid)); need at least "
                         "one test point")
    empty = ~np.any(np.isfinite(logd), axis=1)  # -inf (zero density) allowed
    if np.any(empty):
        raise ValueError(f"log_density row(s) {np.flatnonzero(empty)[:5].tolist()} "
                         "are -inf everywhere (no mass to normalise)")
    logd = np.asarray(logd, grid.dtype)
    if np.any(logd == np.inf):
        raise ValueError(f"log_density overflows {logd.dtype} (values above "
                         f"{float(np.finfo(logd.dtype).max):.3g})")
    logd = jnp.asarray(logd)
    y = _observations(y, logd.shape[0])
    logd = logd - (logsumexp(logd, axis=1, keepdims=True) + jnp.log(dz))
    dens = jax.vmap(lambda yy, d: jnp.interp(yy, grid, jnp.exp(d), left=0.0,
                                             right=0.0))(y, logd)
    return jnp.log(dens)


def pit_discrete(
    support: Float[ArrayLike, "..."], probs: Float[ArrayLike, "n_test n_support"],
    y: Float[ArrayLike, " n_test"],
) -> Float[Array, " n_test"]:
    """Probability integral transform F(y) = P(X <= y) per test point (uniform
    on [0, 1] for a calibrated predictive, up to the discreteness of the
    support). O(n_test n_support)."""
    z, p, y = _discrete(support, probs, y)
    return jnp.sum(p * (z <= y[:, None]), axis=1)


def interval_discrete(
    support: Float[ArrayLike, "..."], probs: Float[ArrayLike, "n_test n_support"],
    level: float = 0.9,
) -> tuple[Float[Array, " n_test"], Float[Array, " n_test"]]:
    """The central ``level`` interval [q_(1-level)/2, q_(1+level)/2] per test
    point; a quantile q_a is the smallest support point with F >= a.
    O(n_test n_support log n_support)."""
    level = _check_level(level)
    z, p, _ = _discrete(support, probs, None)
    F = jnp.cumsum(p, axis=1)

    def quantile(a):
        idx = jnp.argmax(F >= a - 1e-7, axis=1)
        return jnp.take_along_axis(z, idx[:, None], 1)[:, 0]

    return quantile((1.0 - level) / 2.0), quantile((1.0 + level) / 2.0)


def _check_level(level):
    level = check_finite(level, "level")
    if not 0.0 < level < 1.0:
        raise ValueError(f"level must be in (0, 1), got {level}")
    return level


def coverage_discrete(
    support: Float[ArrayLike, "..."], probs: Float[ArrayLike, "n_test n_support"],
    y: Float[ArrayLike, " n_test"], level: float = 0.9,
) -> Float[Array, " n_test"]:
    """1.0 where y lies in the central ``level`` interval
    (:func:`interval_discrete`), else 0.0; its mean is the empirical coverage."""
    level = _check_level(level)
    z, p, y = _discrete(support, probs, y)
    lo, hi = interval_discrete(z, p, level)
    return ((lo <= y) & (y <= hi)).astype(lo.dtype)


def best_of_k_error(
    hypotheses: Float[ArrayLike, "..."], y: Float[ArrayLike, "..."]
) -> Float[Array, " n_test"]:
    """min over the k hypotheses of the Euclidean error ||h - y|| per test point
    (the oracle error of a multi-hypothesis predictor). 1-D outputs may be given
    as ``(n_test, k)`` and ``(n_test,)``. O(n_test k d)."""
    h = jnp.asarray(as_float_array(hypotheses, "hypotheses"))
    y = jnp.asarray(as_float_array(y, "y"), h.dtype)
    if h.ndim == 2:
        h = h[..., None]
    if y.ndim == 1:
        y = y[:, None]
    if h.ndim != 3 or y.ndim != 2 or h.shape[2] != y.shape[1]:
        raise ValueError(f"hypotheses (n_test, k, d) and y (n_test, d) disagree: "
                         f"{h.shape} and {y.shape}")
    _check_same_rows(h, y, "hypotheses", "y")
    return jnp.min(jnp.linalg.norm(h - y[:, None, :], axis=-1), axis=1)


def c2st(
    reference: Float[ArrayLike, "..."], samples: Float[ArrayLike, "..."], *,
    seed: int = 1, n_folds: int = 5, scoring: str = "accuracy", z_score: bool = True,
) -> float:
    """Classifier two-sample test: the cross-validated accuracy of a classifier
    telling ``samples`` from ``reference`` (0.5: indistinguishable, 1: apart),
    computed as sbibm 1.1.0's ``sbibm.metrics.c2st`` does (Lueckmann et al.
    2021, section 3; Lopez-Paz and Oquab 2017): both sets z-scored by the
    reference's mean and standard deviation (ddof 1, as ``torch.std``), in
    float32 as sbibm's tensors are; scikit-learn's
    ``MLPClassifier(hidden_layer_sizes=(10 d, 10 d), activation="relu",
    solver="adam", max_iter=10000, random_state=seed)`` (no early stopping);
    ``n_folds``-fold ``KFold(shuffle=True, random_state=seed)``; the mean
    fold score. Pass the reference first: sbibm scores
    ``c2st(reference, algorithm_samples)``.

    Args:
        reference: ``(n_reference, d)`` draws of the reference distribution.
        samples: ``(n_samples, d)`` draws to score.
        seed: scikit-learn's ``random_state`` of the classifier and folds
            (sbibm's default 1).
        n_folds: folds of the cross-validation.
        scoring: a scikit-learn scorer name (``"roc_auc"`` gives sbibm's
            ``c2st_auc``).
        z_score: standardise by the reference first.

    Returns:
        The mean fold score, a Python float.

    Raises:
        ValueError: arrays that are not 2-D, that disagree in width, hold
            NaN/inf, have fewer rows than ``n_folds``, or (with ``z_score``) a
            reference column of zero spread; a ``seed`` outside [0, 2^32 - 1];
            an unknown ``scoring`` name; ``z_score`` not a bool.
        TypeError: non-numeric arrays, a non-integer ``seed`` or ``n_folds``,
            a ``scoring`` that is not a str.

    Cost: training the MLP n_folds times on (n_reference + n_samples) rows,
    O(epochs (n_reference + n_samples) d^2) time; about a minute per call at
    10,000 vs 10,000 in 10 dimensions on one core.
    """
    from sklearn.model_selection import KFold, cross_val_score
    from sklearn.neural_network import MLPClassifier

    seed = check_integer(seed, "seed", minimum=0, maximum=2**32 - 1)
    check_choice(z_score, "z_score", (True, False))
    if not isinstance(scoring, str):
        raise TypeError(f"scoring must be a scikit-learn scorer name (a str), got "
                        f"{type(scoring).__name__} {scoring!r}")
    from sklearn.metrics import get_scorer_names

    if scoring not in get_scorer_names():
        raise ValueError(f"scoring must be a scikit-learn scorer name such as "
                         f"'accuracy' or 'roc_auc', got {scoring!r}")
    ref = np.asarray(as_float_array(reference, "reference", ndim=2), np.float32)
    smp = np.asarray(as_float_array(samples, "samples", ndim=2), np.float32)
    if ref.shape[1] != smp.shape[1]:
        raise ValueError(f"reference and samples must have the same number of "
                         f"features, got {ref.shape[1]} and {smp.shape[1]}")
    n_folds = check_integer(n_folds, "n_folds", minimum=2)
    for arr, name in ((ref, "reference"), (smp, "samples")):
        if arr.shape[0] < n_folds:
            raise ValueError(f"{name} needs at least n_folds={n_folds} rows, got "
                             f"{arr.shape[0]}")
    if z_score:
        mean, sd = ref.mean(axis=0), ref.std(axis=0, ddof=1)
        if not np.all(sd > 0):
            raise ValueError(f"reference has zero spread in feature(s) "
                             f"{np.flatnonzero(~(sd > 0)).tolist()}; cannot "
                             f"z-score (pass z_score=False)")
        ref, smp = (ref - mean) / sd, (smp - mean) / sd
    d = ref.shape[1]
    clf = MLPClassifier(activation="relu", hidden_layer_sizes=(10 * d, 10 * d),
                        max_iter=10000, solver="adam", random_state=seed)
    data = np.concatenate([ref, smp])
    target = np.concatenate([np.zeros(ref.shape[0]), np.ones(smp.shape[0])])
    folds = KFold(n_splits=n_folds, shuffle=True, random_state=seed)
    return float(np.mean(cross_val_score(clf, data, target, cv=folds,
                                         scoring=scoring)))
