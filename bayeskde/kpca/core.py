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
from ..kernels.algebra import center_kernel

__all__ = ["KPCAResult", "kernel_pca", "kpca_transform"]

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


def _kernel_pca(K, n_components):
    Kc = center_kernel(K)
    Kc = 0.5 * (Kc + Kc.T)  # symmetrise against round-off before eigh
    evals, evecs = jnp.linalg.eigh(Kc)
    evals, evecs = evals[::-1][:n_components], evecs[:, ::-1][:, :n_components]
    # Round-off leaves tiny negative eigenvalues on a PSD matrix: clip them.
    evals = jnp.maximum(evals, 0.0)
    # Deterministic signs: the entry of largest magnitude of each vector is positive.
    idx = jnp.argmax(jnp.abs(evecs), axis=0)
    signs = jnp.sign(evecs[idx, jnp.arange(evecs.shape[1])])
    evecs = evecs * jnp.where(signs == 0, 1.0, signs)[None, :]
    eps = jnp.finfo(K.dtype).eps * jnp.maximum(evals[0], 1.0) * K.shape[0]
    inv_sqrt = jnp.where(evals > eps, 1.0 / jnp.sqrt(jnp.maximum(evals, eps)), 0.0)
    alphas = evecs * inv_sqrt[None, :]
    col = jnp.mean(K, axis=0)
    return KPCAResult(evals, alphas, col, jnp.mean(col))


_kernel_pca_jit = jax.jit(_kernel_pca, static_argnames="n_components")


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
    Kc = (
        K_test
        - result.col_means[None, :]
        - jnp.mean(K_test, axis=1)[:, None]
        + result.total_mean
    )
    return Kc @ result.alphas
