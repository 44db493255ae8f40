"""Kernel Dependency Estimation as pure functions on Gram matrices.

Weston et al. (2002), section 3: output kernel PCA (step 1), one ridge solve onto
all p component targets (eq. (6), step 2); the pre-image (step 3) lives in
:mod:`bayeskde.kde.preimage`.

Ridge convention. The paper minimises (1/m) sum_i (y_i - w . Phi(x_i))^2 +
gamma ||w||^2, whose dual solution is beta = (K + m gamma I)^-1 y; ``ridge`` is the
paper's gamma, so the grid {1e-4, ..., 1e1} of section 4 means what it meant there.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import jax.scipy.linalg as jsl
from jaxtyping import Array, Float

from .._linalg import cholesky_with_jitter
from .._typing import ArrayLike
from .._validation import (
    as_float_array,
    check_data,
    check_same_length,
)
from ..kernels.registry import make_kernel
from ..kpca.approximate import LowRankKPCA
from ..kpca.core import KPCAResult, kernel_pca, kpca_transform
from ..lowrank import (
    KRRFit,
)

__all__ = [
    "KDEFit",
    "LowRankKDEFit",
    "fit_kde",
    "predict_kde_features",
    "ridge_solve",
    "ridge_solve_padded",
    "kernel_loss",
]


class KDEFit(NamedTuple):
    """A fitted KDE in Gram-matrix form.

    Attributes:
        kpca: the output kernel PCA (:class:`bayeskde.kpca.KPCAResult`).
        coef: ``(n_samples, n_components)`` dual ridge coefficients beta.
        train_proj: ``(n_samples, n_components)`` training targets (v_n . Phi(y_i)).
    """

    kpca: KPCAResult
    coef: Float[Array, "n_samples n_components"]
    train_proj: Float[Array, "n_samples n_components"]


class LowRankKDEFit(NamedTuple):
    """A KDE fitted on Nystroem subspaces (``solver="nystroem"`` or ``"falkon"``).

    Attributes:
        kpca: output kernel PCA by Nystroem
            (:class:`bayeskde.lowrank.LowRankKPCA`).
        krr: the ridge fit onto all components (:class:`bayeskde.lowrank.KRRFit`),
            f(x) = k(x, input centres) @ krr.coef.
        train_proj: ``(n_samples, n_components)`` training targets.
    """

    kpca: LowRankKPCA
    krr: KRRFit
    train_proj: Float[Array, "n_samples n_components"]


def _ridge_masked(K, T, lam, w, n):
    # Padding rows/columns (w = 0) are decoupled by an identity block, and T is
    # zero there, so B is exactly zero on them and the real block is the
    # unpadded system (K + n lam I).
    real = w[:, None] * w[None, :]
    n = jnp.asarray(n, K.dtype)
    A = jnp.where(real > 0, K, 0.0) + jnp.diag(lam * n * w + (1.0 - w))
    c = jsl.cho_factor(A, lower=True)
    B = jsl.cho_solve(c, T * w[:, None])
    # The finiteness check in the same program: in a fresh process each small
    # op outside it would compile on its own.
    return B, jnp.all(jnp.isfinite(B))


@jax.jit
def _ridge_solve(K, T, lam):
    n = K.shape[0]
    return _ridge_masked(K, T, lam, jnp.ones(n, K.dtype), n)


def ridge_solve_padded(
    K: Float[Array, "n_pad n_pad"], T: Float[Array, "n_pad p"], ridge, n
) -> tuple[Float[Array, "n_pad p"], Array]:
    """:func:`ridge_solve` on the leading ``n x n`` block of a padded system.

    Rows and columns from ``n`` on are padding (``bayeskde._linalg``): they get an
    identity block and a zero right-hand side, so the solution is the unpadded
    one with exact zero rows appended. ``n`` may be traced (one program per
    padded shape). Returns ``(B, all_finite)``; a non-finite ``B`` (an
    indefinite system) is for the caller to re-solve with jitter. Jit-safe,
    unvalidated. Cost: O(n_pad^3 + n_pad^2 p).
    """
    w = (jnp.arange(K.shape[0]) < n).astype(K.dtype)
    return _ridge_masked(K, T, ridge, w, n)


def ridge_solve(
    K: Float[ArrayLike, "n n"], T: Float[ArrayLike, "n p"], ridge: float
) -> Float[Array, "n p"]:
    """Solve (K + n ridge I) B = T by one Cholesky factorisation for all p columns.

    An indefinite or singular system (a non-PSD user kernel, ridge 0) makes the
    Cholesky factor NaN; the package's jitter policy then applies
    (:func:`bayeskde._linalg.cholesky_with_jitter`: growing diagonal shifts, one
    warning, a bounded number of tries). Cost: O(n^3 + n^2 p).
    """
    K = as_float_array(K, "K", ndim=2)
    T = as_float_array(T, "T", ndim=2)
    B, finite = _ridge_solve(K, T, ridge)
    if bool(finite):
        return B
    n = K.shape[0]
    L = cholesky_with_jitter(K, "the kernel ridge system K + m ridge I",
                             shift=ridge * n)
    return jsl.cho_solve((L, True), T)


def fit_kde(
    K: Float[ArrayLike, "n n"],
    L: Float[ArrayLike, "n n"],
    ridge: float,
    n_components: int | None = None,
) -> KDEFit:
    """Fit KDE from the input Gram ``K`` and output Gram ``L`` (section 3, steps 1-2).

    Cost: O(n^3) time (one ``eigh`` of L, one Cholesky of K), O(n^2) memory.
    """
    kp = kernel_pca(L, n_components)
    T = kpca_transform(kp, L)
    return KDEFit(kp, ridge_solve(K, T, ridge), T)


@jax.jit
def predict_kde_features(
    fit: KDEFit, K_test: Float[Array, "n_test n_samples"]
) -> Float[Array, "n_test n_components"]:
    """Predicted projections f_n(x) = sum_i beta_in k(x_i, x), eq. (6)."""
    return K_test @ fit.coef


def kernel_loss(kernel, Y_true, Y_pred, params=None) -> Float[Array, " n"]:
    """Per-sample kernel-induced loss ||Phi(y) - Phi(y_hat)||^2.

    l(y,y) + l(y_hat,y_hat) - 2 l(y, y_hat): with the delta kernel (2) it is the
    0-1 loss; with an RBF kernel 2 - 2 exp(-gamma ||y - y_hat||^2) (footnote 1).

    Args:
        kernel: a kernel name, callable or :class:`bayeskde.kernels.Kernel`.
        Y_true, Y_pred: same number of outputs (arrays or lists of strings).
        params: parameters of a named kernel.
    """
    k = make_kernel(kernel, params)
    Y_true = check_data(Y_true, "Y_true")
    Y_pred = check_data(Y_pred, "Y_pred")
    check_same_length(Y_true, Y_pred, "Y_true", "Y_pred")
    cross = jnp.diagonal(k.gram(Y_true, Y_pred))
    return jnp.maximum(k.diag(Y_true) + k.diag(Y_pred) - 2.0 * cross, 0.0)
