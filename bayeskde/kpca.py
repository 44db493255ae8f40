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

import math
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float
from sklearn.base import BaseEstimator, TransformerMixin
from sklearn.utils.validation import check_is_fitted

from ._typing import ArrayLike
from ._validation import as_float_array, check_data, check_integer
from .kernels.algebra import center_kernel
from .kernels.registry import make_kernel

__all__ = ["KPCAResult", "kernel_pca", "kpca_transform", "KernelPCA", "EIGENSOLVERS"]

#: ``eigensolver`` values of :class:`KernelPCA`.
EIGENSOLVERS = ("exact", "randomized", "nystroem")


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
        eigensolver: ``"exact"`` (dense ``eigh``, O(n^3)), ``"randomized"`` (Halko
            et al. 2011 on the centred Gram, applied blockwise for vector kernels;
            needs ``n_components``) or ``"nystroem"`` (PCA of Nystroem features on
            ``n_centers`` centres; vector kernels only). See
            :mod:`bayeskde.lowrank.eigen`.
        n_centers: Nystroem centres M (``None``: min(n, ceil(5 sqrt(n)))).
        centers: centre selection, ``"uniform"``, ``"kmeans++"`` or ``"leverage"``.
        n_oversamples, n_iter: sketch oversampling and power iterations of
            ``"randomized"``.
        block_size: rows of a kernel block formed at once (``None``: whole).
        key: ``jax.random`` key for the randomised paths (keyword-only);
            ``None`` means ``jax.random.key(0)``.

    Attributes:
        eigenvalues_, alphas_: see :class:`KPCAResult`. With
            ``eigensolver="nystroem"``, ``alphas_`` are the ``(n_centers,
            n_components)`` coefficients over the centres
            (:class:`bayeskde.lowrank.LowRankKPCA` ``coef``).
        kernel_: the resolved :class:`bayeskde.kernels.Kernel`.
        X_fit_: the training data (needed to evaluate test kernels).
        eigensolver_, n_centers_: the resolved solver and number of centres
            (``None`` unless ``"nystroem"``).

    Examples:
        >>> import numpy as np
        >>> X = np.random.default_rng(0).normal(size=(20, 3))
        >>> kpca = KernelPCA(2, kernel="rbf", kernel_params={"gamma": 0.5})
        >>> kpca.fit_transform(X).shape
        (20, 2)
    """

    def __init__(
        self,
        n_components=None,
        kernel="rbf",
        kernel_params=None,
        eigensolver="exact",
        n_centers=None,
        centers="uniform",
        n_oversamples=10,
        n_iter=2,
        block_size=None,
        *,
        key=None,
    ):
        self.n_components = n_components
        self.kernel = kernel
        self.kernel_params = kernel_params
        self.eigensolver = eigensolver
        self.n_centers = n_centers
        self.centers = centers
        self.n_oversamples = n_oversamples
        self.n_iter = n_iter
        self.block_size = block_size
        self.key = key

    def _gram(self, X, Y=None):
        if self.kernel_.precomputed:
            return as_float_array(X, "X", ndim=2)
        return self.kernel_.gram(X, Y)

    def fit(self, X, y=None):
        """Fit on data ``X`` (array, list of strings, or a Gram matrix)."""
        if self.eigensolver not in EIGENSOLVERS:
            raise ValueError(
                f"eigensolver must be one of {EIGENSOLVERS}, got {self.eigensolver!r}"
            )
        self.kernel_ = make_kernel(self.kernel, self.kernel_params)
        self.eigensolver_, self.n_centers_ = self.eigensolver, None
        if self.eigensolver != "exact":
            return self._fit_approx(X)
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

    def _fit_approx(self, X):
        """The ``"randomized"`` and ``"nystroem"`` eigensolvers."""
        # Imported here: bayeskde.lowrank.eigen imports this module.
        from .lowrank import (
            CENTER_METHODS,
            LOWRANK_KERNELS,
            nystroem_kpca,
            randomized_kpca,
            select_centers,
        )

        key = jax.random.key(0) if self.key is None else self.key
        bs = None if self.block_size is None else check_integer(
            self.block_size, "block_size", minimum=1)
        vector = self.kernel_.name in LOWRANK_KERNELS and (
            "rbf_sigma" not in self.kernel_.params)
        if self.eigensolver == "nystroem":
            if not vector:
                raise ValueError(
                    f"eigensolver='nystroem' needs one of {LOWRANK_KERNELS}, got "
                    f"{self.kernel_.name!r}"
                )
            if self.centers not in CENTER_METHODS:
                raise ValueError(
                    f"centers must be one of {CENTER_METHODS}, got {self.centers!r}"
                )
            X = check_data(X, "X", min_samples=2)
            if isinstance(X, tuple):
                raise ValueError("eigensolver='nystroem' needs a numeric array X")
            n = X.shape[0]
            m = (min(n, math.ceil(5 * math.sqrt(n))) if self.n_centers is None
                 else check_integer(self.n_centers, "n_centers", minimum=1,
                                    maximum=n))
            p = None if self.n_components is None else check_integer(
                self.n_components, "n_components", minimum=1, maximum=m)
            idx = select_centers(key, X, m, method=self.centers, kernel=self.kernel_,
                                 block_size=bs)
            res = nystroem_kpca(self.kernel_, X, X[idx], p, block_size=bs)
            if p is None:
                # As the exact path: drop components with a round-off eigenvalue.
                lam = res.eigenvalues
                eps = jnp.finfo(lam.dtype).eps * jnp.maximum(lam[0], 1.0) * n
                keep = max(int(jnp.sum(lam > eps)), 1)
                res = res._replace(eigenvalues=res.eigenvalues[:keep],
                                   coef=res.coef[:, :keep], offset=res.offset[:keep])
            self.X_fit_, self.n_centers_, self.center_indices_ = X, m, np.asarray(idx)
            self.result_, self.eigenvalues_ = res, res.eigenvalues
            self.alphas_ = res.coef
            return self
        if self.n_components is None:
            raise ValueError("eigensolver='randomized' needs n_components, got None")
        if self.kernel_.precomputed:
            K = as_float_array(X, "X", ndim=2)
            if K.shape[0] != K.shape[1]:
                raise ValueError(
                    f"a precomputed X must be a square Gram matrix, got {K.shape}"
                )
            self.X_fit_ = None
        else:
            self.X_fit_ = check_data(X, "X", min_samples=2)
        n = K.shape[0] if self.X_fit_ is None else len(self.X_fit_)
        p = check_integer(self.n_components, "n_components", minimum=1, maximum=n)
        if self.X_fit_ is not None and vector and not isinstance(self.X_fit_, tuple):
            res = randomized_kpca(key, self.kernel_, self.X_fit_, p,
                                  n_oversamples=self.n_oversamples, n_iter=self.n_iter,
                                  block_size=bs)
        else:  # strings, callables, precomputed: the Gram matrix is needed anyway
            if self.X_fit_ is not None:
                K = self._gram(self.X_fit_)
            res = randomized_kpca(key, "precomputed", K, p,
                                  n_oversamples=self.n_oversamples, n_iter=self.n_iter)
        self.result_, self.eigenvalues_, self.alphas_ = res, res.eigenvalues, res.alphas
        return self

    def transform(self, X):
        """Project ``X`` onto the fitted components: ``(n_test, n_components)``."""
        check_is_fitted(self, "result_")
        if self.eigensolver_ == "nystroem":
            from .lowrank import lowrank_kpca_transform  # (import cycle, see fit)

            X = check_data(X, "X")
            if isinstance(X, tuple) or X.shape[1] != self.X_fit_.shape[1]:
                raise ValueError(
                    f"X must be a numeric array with {self.X_fit_.shape[1]} features"
                )
            return lowrank_kpca_transform(self.kernel_, self.result_, X,
                                          block_size=self.block_size)
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
