"""Kernel principal component analysis, the building block of KDE.

The pure functions :func:`kernel_pca` and :func:`kpca_transform` work on Gram
matrices; :class:`KernelPCA` is the scikit-learn facade that adds kernels by name.

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
from sklearn.base import BaseEstimator, TransformerMixin
from sklearn.utils.validation import check_is_fitted

from ._typing import ArrayLike
from ._validation import as_float_array, check_data, check_integer
from .kernels.algebra import center_kernel
from .kernels.registry import make_kernel

__all__ = ["KPCAResult", "kernel_pca", "kpca_transform", "KernelPCA"]


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
    K = as_float_array(K, "K", ndim=2)
    n = K.shape[0]
    if K.shape != (n, n):
        raise ValueError(f"K must be square, got shape {K.shape}")
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


class KernelPCA(TransformerMixin, BaseEstimator):
    """Kernel PCA as a scikit-learn transformer.

    Args:
        n_components: number of components; ``None`` keeps those with non-zero
            eigenvalue.
        kernel: a kernel name (see :data:`bayeskde.kernels.KERNEL_NAMES`), a
            callable ``k(A, B)`` or ``"precomputed"`` (then ``X`` is a Gram matrix
            in ``fit`` and a ``(n_test, n_train)`` cross-kernel in ``transform``).
        kernel_params: parameters of a named kernel.

    Attributes:
        eigenvalues_, alphas_: see :class:`KPCAResult`.
        kernel_: the resolved :class:`bayeskde.kernels.Kernel`.
        X_fit_: the training data (needed to evaluate test kernels).

    Examples:
        >>> import numpy as np
        >>> X = np.random.default_rng(0).normal(size=(20, 3))
        >>> kpca = KernelPCA(2, kernel="rbf", kernel_params={"gamma": 0.5})
        >>> kpca.fit_transform(X).shape
        (20, 2)
    """

    def __init__(self, n_components=None, kernel="rbf", kernel_params=None):
        self.n_components = n_components
        self.kernel = kernel
        self.kernel_params = kernel_params

    def _gram(self, X, Y=None):
        if self.kernel_.precomputed:
            return as_float_array(X, "X", ndim=2)
        return self.kernel_.gram(X, Y)

    def fit(self, X, y=None):
        """Fit on data ``X`` (array, list of strings, or a Gram matrix)."""
        self.kernel_ = make_kernel(self.kernel, self.kernel_params)
        if self.kernel_.precomputed:
            K = as_float_array(X, "X", ndim=2)
            if K.shape[0] != K.shape[1]:
                raise ValueError(
                    f"a precomputed X must be a square Gram matrix, got {K.shape}"
                )
            self.X_fit_ = None
        else:
            self.X_fit_ = check_data(X, "X", min_samples=2)
            K = self._gram(self.X_fit_)
        n = K.shape[0]
        if self.n_components is not None:
            check_integer(self.n_components, "n_components", minimum=1, maximum=n)
        res = kernel_pca(K, self.n_components)
        if self.n_components is None:
            # Components with a zero eigenvalue carry no direction: drop them.
            keep = max(int(jnp.sum(jnp.any(res.alphas != 0, axis=0))), 1)
            res = res._replace(
                eigenvalues=res.eigenvalues[:keep], alphas=res.alphas[:, :keep]
            )
        self.result_ = res
        self.eigenvalues_ = res.eigenvalues
        self.alphas_ = res.alphas
        return self

    def transform(self, X):
        """Project ``X`` onto the fitted components: ``(n_test, n_components)``."""
        check_is_fitted(self, "result_")
        if self.kernel_.precomputed:
            K = as_float_array(X, "X", ndim=2)
            if K.shape[1] != self.alphas_.shape[0]:
                raise ValueError(
                    f"precomputed X must have {self.alphas_.shape[0]} columns (one per "
                    f"training point), got shape {K.shape}"
                )
        else:
            X = check_data(X, "X")
            if isinstance(X, tuple) != isinstance(self.X_fit_, tuple):
                raise TypeError("X must be of the kind (strings or arrays) seen in fit")
            if not isinstance(X, tuple) and X.shape[1] != self.X_fit_.shape[1]:
                raise ValueError(
                    f"X has {X.shape[1]} features, but KernelPCA was fitted with "
                    f"{self.X_fit_.shape[1]}"
                )
            K = self._gram(X, self.X_fit_)
        return kpca_transform(self.result_, K)

    def fit_transform(self, X, y=None):
        """Fit, then project the training data (equals ``fit(X).transform(X)``)."""
        return self.fit(X).transform(X)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.pairwise = self.kernel == "precomputed"
        return tags
