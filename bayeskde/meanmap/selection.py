"""Choosing a classifier's kernel from the training split alone, and scoring
that choice honestly.

:func:`select_kernel` is the classifier's inner choice: every candidate Gram
and the equal-weight and 1:3 sums of the best candidate of each family scored by
the exact leave-one-out (LOO) squared error of kernel ridge on one-hot codes
(:func:`~bayeskde.meanmap.stacking.loo_ridge_scores`), then the one-standard-
error rule. The minimum LOO error over dozens of options is optimistic on a few
dozen series, so :func:`nested_selection_accuracy` scores the whole procedure
by nested cross-validation (Varma and Simon 2006, "Bias in error estimation when
using cross-validation for model selection"; Cawley and Talbot 2010, JMLR 11):
the choice is made again on each outer training fold, from the Gram matrices'
rows and columns of that fold, and scored on the held-out fold.
:func:`nearest_neighbour_loo_accuracy` is the exact LOO accuracy of a 1-nearest-
neighbour rule, which selects nothing and so is unbiased as it stands.
"""

from __future__ import annotations

import itertools
from typing import NamedTuple

import numpy as np
import scipy.stats
from sklearn.model_selection import StratifiedKFold

from .stacking import RIDGE_ALPHAS, RIDGE_INTERCEPT

__all__ = ["DTW_FALLBACK_LEVEL", "Configuration", "KernelChoice",
           "choose_configuration", "choose_procedure", "mcnemar_p_value",
           "nearest_neighbour_loo_accuracy", "nested_selection_accuracy",
           "nested_selection_outcomes", "outer_folds", "ridge_loo_score",
           "select_kernel"]


# the 1-NN DTW rule replaces the kernel pool only when it is more accurate at
# this level of the one-sided exact McNemar test (the conventional 5%; with one
# standard error of the paired difference, z of about 1, it won on BeetleFly by
# 2 of 20 training series and lost there: docs/ucr.md)
DTW_FALLBACK_LEVEL = 0.05


class KernelChoice(NamedTuple):
    """The result of :func:`select_kernel`.

    Attributes:
        options: every scored option, ``(indices, weights)`` of the candidates.
        results: per option ``(loo_error, loo_accuracy, alpha, loo_error_se)``.
        best: the index of the kept option.
    """

    options: list
    results: list
    best: int


def ridge_loo_score(K, Y, y_idx):
    return _score_many([K], Y, y_idx)[0]


def _score_many(Ks, Y, y_idx):
    """:func:`ridge_loo_score` of several Grams with one batched eigendecomposition (the
    same result as :func:`loo_ridge_scores` per Gram, fewer LAPACK calls)."""
    G = np.stack([0.5 * (K + K.T) for K in Ks]) + RIDGE_INTERCEPT
    s, U = np.linalg.eigh(G)
    s = np.maximum(s, 0.0)
    UtY = np.swapaxes(U, 1, 2) @ Y
    U2 = U * U
    alphas = np.asarray(RIDGE_ALPHAS)
    out = []
    for m in range(len(Ks)):
        # every ridge at once: f (A, n), LOO predictions (A, n, c)
        f = s[m][None, :] / (s[m][None, :] + alphas[:, None])
        F = U[m] @ (f[:, :, None] * UtY[m][None])
        h = np.minimum(f @ U2[m].T, 1 - 1e-12)
        F_loo = (F - h[..., None] * Y[None]) / (1.0 - h)[..., None]
        errs = np.mean((F_loo - Y[None]) ** 2, axis=(1, 2))
        # the first ridge of least error, as a scan over the grid would keep
        k = int(np.argmin(errs))
        per_case = np.mean((F_loo[k] - Y) ** 2, axis=1)
        se = float(per_case.std(ddof=1) / np.sqrt(len(Y))) if len(Y) > 1 else 0.0
        out.append((float(errs[k]), float(np.mean(F_loo[k].argmax(1) == y_idx)),
                    float(alphas[k]), se))
    return out


def _one_standard_error(results, sizes):
    """The one-standard-error rule (Breiman et al. 1984; Hastie, Tibshirani and
    Friedman 2009, section 7.10): among the options whose LOO error is within
    one standard error of the smallest, the one of fewest kernels, then the
    smallest error. With a few dozen series the minimum over ~40 options is
    optimistic; on ArrowHead (36 series) it picked a three-kernel sum with LOO
    accuracy 0.94 that scored 0.77 on the test split."""
    errs = np.array([r[0] for r in results])
    j = int(np.argmin(errs))
    near = np.flatnonzero(errs <= errs[j] + results[j][3])
    return int(min(near, key=lambda i: (sizes[i], errs[i])))


def select_kernel(grams, families, Y, y_idx, *, combine=True, scores=None,
                  sizes=None):
    """The classifier's choice of kernel by exact LOO kernel ridge.

    Args:
        grams: list of ``(n, n)`` candidate training Grams (one scale).
        families: each candidate's family name; sums are formed from the best
            candidate of each family.
        Y: ``(n, c)`` one-hot codes in {-1, 1}; ``y_idx`` ``(n,)`` class indices.
        combine: also score the sums.
        scores: the single candidates' results if already computed.
        sizes: how many kernels each candidate is (default 1 each; the window
            kernel of a series and of its differences summed is 2): the one-
            standard-error rule counts an option's kernels by them.

    Returns:
        :class:`KernelChoice`. Cost: one ``n x n`` eigendecomposition per option.
    """
    if scores is None:
        scores = _score_many(grams, Y, y_idx)
    best_of = {}
    for i, (err, _, _, _) in enumerate(scores):
        fam = families[i]
        if fam not in best_of or err < scores[best_of[fam]][0]:
            best_of[fam] = i
    options = [((i,), (1.0,)) for i in range(len(grams))]
    if combine and len(best_of) > 1:
        idx = sorted(best_of.values())
        for r in range(2, len(idx) + 1):
            for sub in itertools.combinations(idx, r):
                options.append((sub, (1.0 / r,) * r))
                if r == 2:
                    options += [(sub, (0.25, 0.75)), (sub, (0.75, 0.25))]
    sums = [sum(wi * grams[i] for i, wi in zip(sub, w, strict=True))
            for sub, w in options if len(sub) > 1]
    summed = iter(_score_many(sums, Y, y_idx) if sums else [])
    results = [scores[sub[0]] if len(sub) == 1 else next(summed)
               for sub, _ in options]
    sizes = [1] * len(grams) if sizes is None else list(sizes)
    best = _one_standard_error(results, [sum(sizes[i] for i in sub)
                                         for sub, _ in options])
    return KernelChoice(options, results, best)


def outer_folds(y_idx, key_seed: int, max_loo: int = 30, n_folds: int = 10):
    """Outer folds of the nested CV: leave-one-out up to ``max_loo`` series,
    else ``n_folds``-fold stratified (fewer where a class is smaller; shuffled
    with ``key_seed``). Returns a list of ``(train, test)`` index arrays."""
    n = len(y_idx)
    if n <= max_loo:
        idx = np.arange(n)
        return [(np.delete(idx, i), idx[i:i + 1]) for i in range(n)]
    k = int(max(2, min(n_folds, np.bincount(y_idx).max())))
    cv = StratifiedKFold(k, shuffle=True, random_state=key_seed)
    import warnings

    with warnings.catch_warnings():  # classes smaller than k: sklearn warns
        warnings.simplefilter("ignore", UserWarning)
        return list(cv.split(np.zeros(n), y_idx))


def nested_selection_outcomes(grams, families, Y, y_idx, folds, *, combine=True,
                              sizes=None):
    """Per-series outcomes of nested cross-validation of :func:`select_kernel`
    followed by kernel ridge: on each outer fold the kernel, the sum and the
    ridge are chosen again from the fold's training rows, then the held-out
    rows are predicted.

    Returns:
        ``(correct, squared_error)``, ``(n,)`` arrays, NaN for a series no
        rule could classify (its class absent from the fold's training rows,
        e.g. the one series of its class under leave-one-out) and for the
        folds whose training rows hold one class. Cost: per fold, one
        eigendecomposition per option.
    """
    n, n_classes = Y.shape
    correct, sq = np.full(n, np.nan), np.full(n, np.nan)
    for tr, te in folds:
        if len(np.unique(y_idx[tr])) < 2:
            continue
        Ytr = Y[tr]
        # a class absent from the fold keeps its -1 column: predicted -1
        sub = [K[np.ix_(tr, tr)] for K in grams]
        ch = select_kernel(sub, families, Ytr, y_idx[tr], combine=combine,
                           sizes=sizes)
        idx, w = ch.options[ch.best]
        alpha = ch.results[ch.best][2]
        K = sum(wi * grams[i] for i, wi in zip(idx, w, strict=True)) + RIDGE_INTERCEPT
        coef = np.linalg.solve(K[np.ix_(tr, tr)] + alpha * np.eye(len(tr)), Ytr)
        F = K[np.ix_(te, tr)] @ coef
        seen = np.isin(y_idx[te], y_idx[tr])
        correct[te] = np.where(seen, F.argmax(1) == y_idx[te], np.nan)
        sq[te] = np.where(seen, np.sum((F - Y[te]) ** 2, axis=1) / n_classes, np.nan)
    return correct, sq


def nested_selection_accuracy(grams, families, Y, y_idx, folds, *, combine=True,
                              sizes=None):
    """Nested-CV accuracy and squared error of :func:`select_kernel` followed by
    kernel ridge (:func:`nested_selection_outcomes`, averaged over the series
    scored: those whose class has another series in their fold's training rows).

    Returns:
        ``(accuracy, squared_error)``; ``(0, 0)`` when no series is scored.
    """
    correct, sq = nested_selection_outcomes(grams, families, Y, y_idx, folds,
                                            combine=combine, sizes=sizes)
    scored = ~np.isnan(correct)
    if not scored.any():
        return 0.0, 0.0
    return float(np.mean(correct[scored])), float(np.mean(sq[scored]))


def nearest_neighbour_loo_accuracy(D, y_idx):
    """Exact LOO accuracy of the 1-nearest-neighbour rule on a training distance
    matrix ``D (n, n)`` (each series' nearest other series; ties to the first)."""
    return float(np.mean(_nearest_neighbour_loo_correct(D, y_idx)))


def _nearest_neighbour_loo_correct(D, y_idx):
    D = np.array(D, dtype=np.float64)
    np.fill_diagonal(D, np.inf)
    return y_idx[np.argmin(D, axis=1)] == y_idx


def choose_procedure(grams, families, Y, y_idx, seed, D=None, *, nested=True,
                     combine=True, sizes=None):
    """The classifier's choice of pool: the LOO choice over the window family
    alone (``"window"``), over every candidate (``"all"``), or the 1-NN rule on
    the distances ``D`` (``"dtw"``).

    The two kernel pools are compared by their nested-CV accuracy over the
    series some rule could classify (those whose class has another training
    series in the fold)
    (:func:`nested_selection_outcomes`, folds :func:`outer_folds` shuffled by
    ``seed``), equal accuracies by the nested squared error (a proper score of
    the same predictions, finer than the count of errors on a few dozen
    series), then the simpler pool. The 1-NN rule is the fallback: it replaces
    the better pool only when its exact LOO predictions are more accurate than
    the pool's nested ones at the level :data:`DTW_FALLBACK_LEVEL` of the
    one-sided exact McNemar test on the same series (:func:`mcnemar_p_value`):
    the choice among procedures is itself a comparison of noisy estimates, and
    on 20 series a difference of two errors is within the noise of either. With
    ``nested=False`` or nothing to choose, ``"all"`` (or ``"dtw"`` when there
    are no Grams).

    Returns:
        ``(pools, procedure, scores)``: each kernel pool's candidate indices,
        the chosen name, and the accuracies scored (empty when none was).
    """
    pools = {"window": [i for i, f in enumerate(families) if f == "window"],
             "all": list(range(len(grams)))}
    if len(pools["window"]) in (0, len(grams)):
        del pools["window"]
    if not grams:
        return {}, "dtw", {"dtw": nearest_neighbour_loo_accuracy(D, y_idx)}
    if not nested or (len(pools) == 1 and D is None):
        return pools, "all", {}
    folds = outer_folds(y_idx, seed)
    sizes = [1] * len(grams) if sizes is None else list(sizes)
    outcomes = {name: nested_selection_outcomes(
        [grams[i] for i in pool], [families[i] for i in pool], Y, y_idx, folds,
        combine=combine, sizes=[sizes[i] for i in pool])
        for name, pool in pools.items()}
    scored = ~np.isnan(outcomes["all"][0])
    scores = {name: float(np.mean(c[scored])) if scored.any() else 0.0
              for name, (c, _) in outcomes.items()}
    errors = {name: float(np.mean(e[scored])) if scored.any() else 0.0
              for name, (_, e) in outcomes.items()}
    order = [p for p in ("window", "all") if p in scores]
    best = max(order, key=lambda p: (scores[p], -errors[p], -order.index(p)))
    if D is not None:
        hit = _nearest_neighbour_loo_correct(D, y_idx)
        scores["dtw"] = float(np.mean(hit[scored])) if scored.any() else 0.0
        if mcnemar_p_value(hit[scored], outcomes[best][0][scored] > 0.5) < (
                DTW_FALLBACK_LEVEL):
            best = "dtw"
    return pools, best, scores


def mcnemar_p_value(a_correct, b_correct):
    """One-sided exact McNemar test that rule ``a`` is more accurate than rule
    ``b`` on the same series (McNemar 1947; Dietterich 1998, "Approximate
    statistical tests for comparing supervised classification learning
    algorithms"): with ``m`` series that only ``a`` gets right and ``k`` that only
    ``b`` does, ``P(X >= m)`` for ``X ~ Binomial(m + k, 1/2)``; 1.0 when ``m <=
    k``."""
    a, b = np.asarray(a_correct, bool), np.asarray(b_correct, bool)
    m, k = int(np.sum(a & ~b)), int(np.sum(~a & b))
    if m <= k:
        return 1.0
    return float(scipy.stats.binom.sf(m - 1, m + k, 0.5))


class Configuration(NamedTuple):
    """The result of :func:`choose_configuration`.

    Attributes:
        procedure: ``"window"``, ``"all"`` or ``"dtw"``.
        procedure_scores: each pool's nested-CV accuracy and the DTW rule's LOO
            accuracy (empty when nothing was to be chosen).
        options: every option the inner choice scored, ``(indices, weights)``
            into the candidates (empty for ``"dtw"``).
        results: per option ``(loo_error, loo_accuracy, alpha, loo_error_se)``.
        best: the index of the kept option (-1 for ``"dtw"``).
    """

    procedure: str
    procedure_scores: dict
    options: list
    results: list
    best: int


def choose_configuration(grams, families, Y, y_idx, seed, D=None, *, nested=True,
                         combine=True, sizes=None, scores=None):
    """The classifier's whole choice for one data set: the pool
    (:func:`choose_procedure`), then, unless the 1-NN rule won, the kernel,
    the sum and the ridge by :func:`select_kernel` over that pool.

    Args:
        grams: the candidates' ``(n, n)`` training Grams; ``families`` their
            family names; ``Y (n, c)`` one-hot codes in {-1, 1}; ``y_idx (n,)``.
        seed: shuffles the outer folds; ``D (n, n)``: the 1-NN rule's training
            distances (None: no fallback).
        scores: the single candidates' LOO results if already computed;
            ``sizes``: their kernel counts for the one-standard-error rule.

    Returns:
        :class:`Configuration`. Cost: :func:`choose_procedure`'s, then one
        eigendecomposition per option of the kept pool.
    """
    pools, procedure, pscores = choose_procedure(
        grams, families, Y, y_idx, seed, D, nested=nested, combine=combine,
        sizes=sizes)
    if procedure == "dtw":
        return Configuration("dtw", pscores, [], [], -1)
    pool = pools.get(procedure, pools["all"])
    sizes = [1] * len(grams) if sizes is None else list(sizes)
    choice = select_kernel([grams[i] for i in pool], [families[i] for i in pool],
                           Y, y_idx, combine=combine,
                           scores=None if scores is None else [scores[i] for i in pool],
                           sizes=[sizes[i] for i in pool])
    options = [(tuple(pool[i] for i in sub), w) for sub, w in choice.options]
    return Configuration(procedure, pscores, options, choice.results, choice.best)
