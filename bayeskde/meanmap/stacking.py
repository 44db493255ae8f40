"""Exact leave-one-out kernel ridge and the stacking of kernels by it.

The selection criterion of :class:`~bayeskde.meanmap.SequenceKernelClassifier`:
the exact leave-one-out squared error of kernel ridge regression on one-hot
codes (Rifkin and Lippert 2007, eq. (4)) with an intercept, and the stacking
weights of several kernels (the modes of a Bayesian HMM's posterior) that
minimise it (Yao, Vehtari and Gelman 2022).
"""

from __future__ import annotations

import itertools
from typing import NamedTuple

import numpy as np

from .._validation import check_integer

__all__ = ["StackingWeights", "loo_ridge_scores", "simplex_grid", "stacking_weights"]

# down to 1e-6: the window kernel has ~10^4 features and fewer series, and
# interpolates best with a small ridge (RidgeClassifierCV's 1e-3 on the unscaled
# features of MiniRocket is 1e-7 on K / p)
RIDGE_ALPHAS = 10.0 ** np.arange(-8.0, 2.5, 0.5)
# the ridge is fitted on K + c 1 1^T: a (weakly penalised) intercept. Without it
# the one-hot codes' mean (-1 + 2 / n_classes) must be fitted through K, which a
# kernel on standardised (centred) features cannot do; on ACSF1 (10 classes) the
# window kernel's test accuracy went from 0.68 to 0.91 with it
RIDGE_INTERCEPT = 1.0


def loo_ridge_scores(K: np.ndarray, Y: np.ndarray, alphas=RIDGE_ALPHAS):
    """Exact leave-one-out predictions of kernel ridge regression for each ridge.

    With ``K = U diag(s) U^T`` and ``H = K (K + a I)^-1``, the LOO prediction of
    point ``i`` is ``(f_i - H_ii y_i) / (1 - H_ii)`` (Rifkin and Lippert 2007,
    eq. (4)). Cost: one O(n^3) eigendecomposition, then O(n^2 c) per ridge.

    Returns:
        ``(errors, predictions)``: the mean squared LOO error per ridge ``(A,)``
        and the LOO predictions ``(A, n, c)``.
    """
    s, U = np.linalg.eigh(0.5 * (K + K.T))
    s = np.maximum(s, 0.0)
    UtY = U.T @ Y
    errors, preds = [], []
    for a in alphas:
        f = s / (s + a)
        F = U @ (f[:, None] * UtY)
        h = np.minimum(np.einsum("ij,j,ij->i", U, f, U), 1 - 1e-12)
        F_loo = (F - h[:, None] * Y) / (1.0 - h)[:, None]
        errors.append(np.mean((F_loo - Y) ** 2))
        preds.append(F_loo)
    return np.asarray(errors), np.asarray(preds)


class StackingWeights(NamedTuple):
    """The result of :func:`stacking_weights`.

    Attributes:
        weights: ``(M,)`` the chosen point of the simplex.
        loo_error: the LOO squared error of its summed kernel (best ridge).
        grid: ``(G, M)`` every point scored, in the order scored.
        grid_errors: ``(G,)`` their LOO errors.
    """

    weights: np.ndarray
    loo_error: float
    grid: np.ndarray
    grid_errors: np.ndarray


def simplex_grid(n_weights: int, step: float = 0.25) -> np.ndarray:
    """The points of the simplex ``{w >= 0, sum w = 1}`` in ``R^n_weights`` whose
    coordinates are multiples of ``step`` (``1 / step`` an integer): ``C(k + M -
    1, M - 1)`` points for ``k = 1 / step``, 35 for ``M = 4, step = 1/4``. Ordered
    by the number of non-zero weights (the vertices, the single modes, first),
    then lexicographically.

    Raises:
        ValueError: ``n_weights < 1`` or ``1 / step`` not a positive integer.
    """
    n_weights = check_integer(n_weights, "n_weights", minimum=1)
    k = round(1.0 / step) if isinstance(step, int | float) and step > 0 else 0
    if not (k >= 1 and np.isclose(k * step, 1.0)):
        raise ValueError(f"step must be 1/k for an integer k >= 1, got {step!r}")
    # stars and bars: the k units spread over the M coordinates
    pts = []
    for bars in itertools.combinations(range(k + n_weights - 1), n_weights - 1):
        edges = (-1, *bars, k + n_weights - 1)
        pts.append([b - a - 1 for a, b in itertools.pairwise(edges)])
    pts = sorted(pts, key=lambda p: (sum(c > 0 for c in p), [-c for c in p]))
    return np.asarray(pts, np.float64) / k


def stacking_weights(grams, Y, *, step: float = 0.25, alphas=RIDGE_ALPHAS,
                     intercept: float = RIDGE_INTERCEPT) -> StackingWeights:
    """Stacking weights of ``M`` kernels by exact leave-one-out kernel ridge.

    Stacking of the modes of a posterior that do not mix (Yao, Vehtari and
    Gelman 2022, "Stacking for non-mixing Bayesian computations: the curse and
    blessing of multimodal posteriors", JMLR 23), after the stacking of
    predictive distributions (Yao, Vehtari, Simpson and Gelman 2018, "Using
    stacking to average Bayesian predictive distributions", Bayesian Analysis
    13): the weights on the simplex that optimise a held-out score of the
    combined prediction, here the exact LOO squared error of kernel ridge on
    the one-hot codes ``Y`` with the kernel ``sum_m w_m K_m + c`` (Rifkin and
    Lippert 2007, eq. (4); the best ridge on ``alphas``), the criterion
    :class:`SequenceKernelClassifier` selects by. Combining kernels is the
    mean-map counterpart of mixing the modes' predictive distributions: the
    expected kernel under ``sum_m w_m q_m(theta)``. The weights minimise over
    :func:`simplex_grid` ``(M, step)``: the error is not convex in ``w`` (the
    minimum over ridges; the ``(1 - H_ii)^-1`` factors), so a gradient method
    could stop at a local optimum, while an exhaustive coarse grid finds the
    optimum at its resolution and holds the single modes (its vertices). Ties
    go to the first point, the fewest modes. The returned ``loo_error`` is
    optimistic, since the weights are chosen by it: on the UCR sets of
    docs/ucr.md a nested LOO found stacking worse than the ELBO weights on
    three of six. Cost: one ``n x n`` eigendecomposition per grid point.

    Args:
        grams: ``(M, n, n)`` training kernels (on one scale: cosine-normalised).
        Y: ``(n, c)`` one-hot codes in {-1, 1}.
        step: grid spacing, ``1 / k``.
        alphas: ridges scored per point.
        intercept: the constant ``c`` added to the kernel.

    Returns:
        :class:`StackingWeights`.

    Raises:
        ValueError: ``grams`` not ``(M, n, n)`` with ``Y`` of ``n`` rows, or a bad
            ``step``.
    """
    grams = np.asarray(grams, np.float64)
    Y = np.asarray(Y, np.float64)
    if grams.ndim != 3 or grams.shape[1] != grams.shape[2] or grams.shape[0] < 1 \
            or Y.ndim != 2 or Y.shape[0] != grams.shape[1]:
        raise ValueError(f"grams must be (M, n, n) and Y (n, c), got "
                         f"{grams.shape} and {Y.shape}")
    grid = simplex_grid(grams.shape[0], step)
    errors = np.array([loo_ridge_scores(np.tensordot(w, grams, 1) + intercept, Y,
                                        alphas)[0].min() for w in grid])
    j = int(np.argmin(errors))
    return StackingWeights(grid[j], float(errors[j]), grid, errors)


def stacked_gram(grams, Y):
    return stacking_weights(grams, Y).weights
