"""The protocols of Weston et al. (2002), section 4: the paper's grids and nested CV.

The outer loop of the paper's experiments selects (width, ridge) by inner five-fold
CV on each outer training fold, then predicts the outer test fold; the functions
here do one outer fold on precomputed Grams, reusing :func:`bayeskde.kde.kde_cv_losses`.
"""

from __future__ import annotations

import numpy as np

from ..kde.cv import PAPER_RIDGES, PAPER_SIGMAS, kde_cv_losses, knn_cv_losses
from ..kde.estimators import KernelDependencyEstimator, KNNDependencyEstimator

__all__ = [
    "PAPER_SIGMAS",
    "PAPER_RIDGES",
    "select_and_predict_kde",
    "select_and_predict_knn",
]



def _block(M, rows, cols):
    return M[rows][:, cols]


def select_and_predict_kde(
    K_grid, L, train, test, ridges, inner_folds, loss=None
) -> tuple[np.ndarray, dict]:
    """Inner-CV model selection for KDE on ``train``, then predict ``test``.

    Args:
        K_grid: ``(n_params, n, n)`` input Grams over all n examples.
        L: ``(n, n)`` output Gram over all examples.
        train, test: outer-fold index arrays.
        ridges: ridge grid (the paper's gamma; the system is K + m gamma I).
        inner_folds: number of contiguous inner folds or explicit index pairs
            relative to ``train``.
        loss: optional ``(n, n)`` loss matrix for the selection; default the
            kernel-induced loss of ``L``.

    Returns:
        ``(pred, info)``: ``pred`` holds, for each test example, the index (into
        all n examples) of the training output chosen as pre-image; ``info`` the
        selected grid index, ridge, its inner-CV loss and the whole inner-CV
        loss surface ``mean_loss`` (settings x ridges).
    """
    train, test = np.asarray(train), np.asarray(test)
    K_tr = K_grid[:, train][:, :, train]
    cv = kde_cv_losses(
        K_tr, _block(L, train, train), ridges, inner_folds,
        loss=None if loss is None else _block(loss, train, train),
    )
    gi, ri = cv.best
    est = KernelDependencyEstimator(
        "precomputed", None, "precomputed", None, ridge=float(ridges[ri])
    ).fit(K_tr[gi], _block(L, train, train))
    idx = np.asarray(est.predict(_block(K_grid[gi], test, train)))
    info = {"param_index": gi, "ridge": float(ridges[ri]),
            "inner_cv_loss": float(cv.mean_loss[gi, ri]),
            "mean_loss": cv.mean_loss.tolist()}
    return train[idx], info


def select_and_predict_knn(
    K, L, train, test, ks, inner_folds, loss=None
) -> tuple[np.ndarray, dict]:
    """Inner-CV choice of k for the general-output k-NN, then predict ``test``.

    ``K`` is any input Gram whose feature-space distance ranks neighbours (for an
    RBF or RBF-mapped kernel the ranking does not depend on the width). Returns
    ``(pred, info)`` as :func:`select_and_predict_kde`.
    """
    train, test = np.asarray(train), np.asarray(test)
    K_tr = _block(K, train, train)
    cv = knn_cv_losses(
        K_tr, _block(L, train, train), ks, inner_folds,
        loss=None if loss is None else _block(loss, train, train),
    )
    k = int(ks[cv.best[1]])
    est = KNNDependencyEstimator(
        k, "precomputed", None, "precomputed", None
    ).fit(K_tr, _block(L, train, train))
    idx = np.asarray(est.predict(_block(K, test, train)))
    return train[idx], {"k": k, "inner_cv_loss": float(cv.mean_loss[0, cv.best[1]]),
                        "mean_loss": cv.mean_loss[0].tolist()}
