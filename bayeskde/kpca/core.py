"""Kernel principal component analysis, the building block of KDE.

The pure functions :func:`kernel_pca` and :func:`kpca_transform` work on Gram
matrices; :class:`bayeskde.KernelPCA` (:mod:`bayeskde.kpca.estimator`) is the
scikit-learn facade that adds kernels by name.

Normalisation. Schölkopf, Smola and Müller (1998), section 4.1, eq. (16), scale the
expansion coefficients so that the feature-space eigenvector
v_n = sum_i a_in (Phi(x_i) - mu) has unit length. Weston et al. (2002), section 3
step 1, write the same condition as 1 = (a_n . V a_n) = lambda_n (a_n . a_n) with
lambda_n the eigenvalue of the centred Gram matrix V itself (the KPCA paper's lambda
is that of V / m, which is why its eq. (16) reads lambda_n (a_n . a_n) = 1 with a
different lambda; both give ||v_n|| = 1). Hence a_n = u_n / sqrt(lambda_n) for the
unit eigenvector u_n of V, and the projection of a training point is
sqrt(lambda_n) u_n: the convention of scikit-learn's ``KernelPCA``.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
from jaxtyping import Array, Float

from .._typing import ArrayLike
from .._validation import check_gram, check_integer

__all__ = [
    "KPCAResult",
    "kernel_pca",
    "kpca_transform",
    "kernel_pca_padded",
    "kpca_transform_padded",
]

class KPCAResult(NamedTuple):
    """Fitted kernel PCA.

    Attributes:
        eigenvalues: ``(n_components,)`` eigenvalues of the centred Gram matrix,
            descending, clipped at zero.
        alphas: ``(n_samples, n_components)`` expansion coefficients with
            ``eigenvalues[n] * alphas[:, n] @ alphas[:, n] = 1`` (zero columns for
            zero eigenvalues, which carry no direction).
        col_means: ``(n_samples,)`` column means of the uncentred training Gram,
            needed to centre test kernels.
        total_mean: ``()`` mean of the uncentred training Gram.
    """

    eigenvalues: Float[Array, " n_components"]
    alphas: Float[Array, "n_samples n_components"]
    col_means: Float[Array, " n_samples"]
    total_mean: Float[Array, ""]


def _kernel_pca_masked(K, w, n, n_components):
    """Kernel PCA of the rows/columns of ``K`` where ``w`` is 1 (the first ``n``).

    Rows where ``w`` is 0 are padding (``bayeskde._linalg.pad_to_multiple``):
    they enter neither the means nor the eigenproblem. The centred matrix is
    zeroed off the real block and its padding diagonal set to ``-(1 + max|Kc_ii|)``,
    so ``eigh`` sees an exactly block-diagonal matrix whose padding eigenvalues
    sort below every real one; the leading ``n_components`` (at most ``n``) are
    the unpadded matrix's, with exactly zero entries on padding rows.
    """
    n = jnp.asarray(n, K.dtype)
    real = w[:, None] * w[None, :]
    col = jnp.sum(K * w[:, None], axis=0) / n  # column means over the real rows
    total = jnp.dot(col, w) / n
    Kc = K - col[None, :] - col[:, None] + total
    Kc = 0.5 * (Kc + Kc.T)  # symmetrise against round-off before eigh
    shift = 1.0 + jnp.max(jnp.abs(jnp.diagonal(Kc)) * w)
    Kc = jnp.where(real > 0, Kc, 0.0) - jnp.diag((1.0 - w) * shift)
    evals, evecs = jnp.linalg.eigh(Kc)
    evals, evecs = evals[::-1][:n_components], evecs[:, ::-1][:, :n_components]
    # Round-off leaves tiny negative eigenvalues on a PSD matrix: clip them (the
    # padding's negative ones become zero with the rest).
    evals = jnp.maximum(evals, 0.0)
    # Deterministic signs: the entry of largest magnitude of each vector is positive.
    idx = jnp.argmax(jnp.abs(evecs), axis=0)
    signs = jnp.sign(evecs[idx, jnp.arange(evecs.shape[1])])
    evecs = evecs * jnp.where(signs == 0, 1.0, signs)[None, :]
    eps = jnp.finfo(K.dtype).eps * jnp.maximum(evals[0], 1.0) * n
    inv_sqrt = jnp.where(evals > eps, 1.0 / jnp.sqrt(jnp.maximum(evals, eps)), 0.0)
    alphas = evecs * inv_sqrt[None, :] * w[:, None]
    return KPCAResult(evals, alphas, col * w, total)


def kernel_pca_eigen(K, n_components):
    w = jnp.ones(K.shape[0], K.dtype)
    return _kernel_pca_masked(K, w, K.shape[0], n_components)


def _transform_masked(result, K_test, w, n):
    n = jnp.asarray(n, K_test.dtype)
    # Test-kernel centring with the training means over real columns only.
    Kc = (
        K_test
        - result.col_means[None, :]
        # A row reduction, not a matrix-vector product: each row's mean is
        # then independent of which other rows share the call.
        - (jnp.sum(K_test * w[None, :], axis=1) / n)[:, None]
        + result.total_mean
    )
    return Kc @ result.alphas


_kernel_pca_jit = jax.jit(kernel_pca_eigen, static_argnames="n_components")


def kernel_pca(
    K: Float[ArrayLike, "n_samples n_samples"], n_components: int | None = None
) -> KPCAResult:
    """Kernel PCA of a Gram matrix (Schölkopf et al. 1998, sec. 4.1; eq. (16)).

    Args:
        K: symmetric PSD ``(n, n)`` Gram matrix (uncentred).
        n_components: number of leading components; ``None`` keeps all ``n``.

    Returns:
        :class:`KPCAResult`.

    Raises:
        ValueError: if ``K`` is not square and finite, or ``n_components > n``.

    Cost: O(n^3) time (one dense ``eigh``), O(n^2) memory.
    """
    K = check_gram(K, "K")
    n = K.shape[0]
    p = n if n_components is None else check_integer(
        n_components, "n_components", minimum=1, maximum=n)
    return _kernel_pca_jit(K, p)


@jax.jit
def kpca_transform(
    result: KPCAResult, K_test: Float[Array, "n_test n_samples"]
) -> Float[Array, "n_test n_components"]:
    """Project new points: (v_n . Phi(x)) with the test-kernel centring.

    ``K_test[t, i] = k(x_t, x_i)`` against the training points; it is centred with
    the training means (Schölkopf et al. 1998, appendix A) before the projection
    sum_i a_in k~(x_t, x_i) (Weston et al. 2002, section 3 step 1).
    Cost: O(n_test n_samples n_components).
    """
    return _transform_masked(result, K_test, jnp.ones(K_test.shape[1], K_test.dtype),
                             K_test.shape[1])


def _row_mask(size, n, dtype):
    return (jnp.arange(size) < n).astype(dtype)


def kernel_pca_padded(
    K: Float[Array, "n_pad n_pad"], n, n_components: int
) -> KPCAResult:
    """Kernel PCA of the leading ``n x n`` block of a padded Gram matrix.

    The trailing rows and columns (``bayeskde._linalg.pad_to_multiple``) are
    padding: they enter neither the centring nor the eigenproblem, so the result
    equals :func:`kernel_pca` of ``K[:n, :n]`` (to round-off) with zero rows
    appended to ``alphas`` and ``col_means``, and, for ``n_components`` above
    ``n``, zero components appended. ``n`` may be traced, so one compiled
    program serves every size padded to the same shape. Jit-safe, unvalidated
    (callers validate). Cost: O(n_pad^3) time, O(n_pad^2) memory.
    """
    return _kernel_pca_masked(K, _row_mask(K.shape[0], n, K.dtype), n, n_components)


def kpca_transform_padded(
    result: KPCAResult, K_test: Float[Array, "n_test n_pad"], n
) -> Float[Array, "n_test n_components"]:
    """:func:`kpca_transform` against a padded training set: only the first ``n``
    columns of ``K_test`` are training points (the rest are ignored). Jit-safe.
    Cost: O(n_test n_pad n_components)."""
    return _transform_masked(result, K_test, _row_mask(K_test.shape[1], n,
                                                       K_test.dtype), n)
