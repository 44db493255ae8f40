"""The scikit-learn kernel PCA estimator over the exact and approximate solvers."""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
from sklearn.base import BaseEstimator, TransformerMixin
from sklearn.utils.validation import check_is_fitted

from .._typing import float_dtype
from .._validation import (
    as_float_array,
    check_choice,
    check_data,
    check_gram,
    check_integer,
    check_key,
    check_n_features,
    check_params_dict,
)
from ..kernels.registry import make_kernel
from ..lowrank import CENTER_METHODS, LOWRANK_KERNELS, select_centers
from .approximate import lowrank_kpca_transform, nystroem_kpca, randomized_kpca
from .core import kernel_pca, kpca_transform

__all__ = ["KernelPCA", "EIGENSOLVERS"]

#: ``eigensolver`` values of :class:`KernelPCA`.
EIGENSOLVERS = ("exact", "randomized", "nystroem")


class KernelPCA(TransformerMixin, BaseEstimator):
    """Kernel PCA as a scikit-learn transformer.

    Args:
        n_components: number of components; ``None`` keeps those with non-zero
            eigenvalue.
        kernel: a kernel name (see :data:`bayeskde.kernels.KERNEL_NAMES`), a
            callable ``k(A, B)`` or ``"precomputed"`` (then ``X`` is a Gram matrix
            in ``fit`` and a ``(n_test, n_train)`` cross-kernel in ``transform``).
        kernel_params: parameters of a named kernel. The RBF rate defaults to
            ``gamma="median"`` (the median heuristic on the training data,
            resolved in ``fit`` and stored in ``kernel_.params``).
        eigensolver: ``"exact"`` (dense ``eigh``, O(n^3)), ``"randomized"`` (Halko
            et al. 2011 on the centred Gram, applied blockwise for vector kernels;
            needs ``n_components``) or ``"nystroem"`` (PCA of Nystroem features on
            ``n_centers`` centres; vector kernels only). See
            :mod:`bayeskde.kpca.approximate`.
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
            (:class:`bayeskde.kpca.LowRankKPCA` ``coef``).
        kernel_: the resolved :class:`bayeskde.kernels.Kernel`.
        n_features_in_: number of features of the training data (Gram columns
            for ``"precomputed"``; not set for strings).
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
        check_choice(self.eigensolver, "eigensolver", EIGENSOLVERS)
        check_key(self.key, "key", allow_none=True)
        self.kernel_ = make_kernel(
            self.kernel, check_params_dict(self.kernel_params, "kernel_params"))
        self.eigensolver_, self.n_centers_ = self.eigensolver, None
        if self.eigensolver != "exact":
            return self._fit_approx(X)
        if self.kernel_.precomputed:
            K = check_gram(X, "X", what="a square Gram matrix (kernel='precomputed')")
            self.X_fit_ = None
        else:
            self.X_fit_ = check_data(X, "X", min_samples=2, allow_1d=False)
            self.kernel_ = self.kernel_.fit(self.X_fit_)
            K = self._gram(self.X_fit_)
        self._set_n_features(K if self.X_fit_ is None else self.X_fit_)
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
            check_choice(self.centers, "centers", CENTER_METHODS)
            X = check_data(X, "X", min_samples=2, allow_1d=False)
            if isinstance(X, tuple):
                raise ValueError("eigensolver='nystroem' needs a numeric array X")
            self.kernel_ = self.kernel_.fit(X)
            self.n_features_in_ = X.shape[1]
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
            K = check_gram(X, "X", what="a square Gram matrix (kernel='precomputed')")
            self.X_fit_ = None
        else:
            self.X_fit_ = check_data(X, "X", min_samples=2, allow_1d=False)
            self.kernel_ = self.kernel_.fit(self.X_fit_)
        self._set_n_features(K if self.X_fit_ is None else self.X_fit_)
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

    def _set_n_features(self, X):
        if not isinstance(X, tuple):
            self.n_features_in_ = X.shape[1]

    def transform(self, X):
        """Project ``X`` onto the fitted components: ``(n_test, n_components)``.

        The result is a NumPy array (as every scikit-learn transformer returns)
        of the working dtype (float64 with ``JAX_ENABLE_X64=1``, else float32),
        whatever the input's dtype.
        """
        check_is_fitted(self, "result_")
        if self.eigensolver_ == "nystroem":
            X = check_data(X, "X", allow_1d=False)
            if isinstance(X, tuple):
                raise ValueError(
                    f"X must be a numeric array with {self.X_fit_.shape[1]} features"
                )
            check_n_features(X, self.X_fit_.shape[1], "X", owner="KernelPCA")
            return np.asarray(lowrank_kpca_transform(
                self.kernel_, self.result_, X, block_size=self.block_size))
        if self.kernel_.precomputed:
            K = as_float_array(X, "X", ndim=2)
            if K.shape[1] != self.alphas_.shape[0]:
                raise ValueError(
                    f"precomputed X must have {self.alphas_.shape[0]} columns (one per "
                    f"training point), got shape {K.shape}"
                )
        else:
            X = check_data(X, "X", allow_1d=False)
            if isinstance(X, tuple) != isinstance(self.X_fit_, tuple):
                raise TypeError("X must be of the kind (strings or arrays) seen in fit")
            if not isinstance(X, tuple):
                check_n_features(X, self.X_fit_.shape[1], "X", owner="KernelPCA")
            K = self._gram(X, self.X_fit_)
        return np.asarray(kpca_transform(self.result_, K))

    def fit_transform(self, X, y=None):
        """Fit, then project the training data (equals ``fit(X).transform(X)``)."""
        return self.fit(X).transform(X)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.pairwise = self.kernel == "precomputed"
        # Outputs have the working dtype: float64 in gives float64 out when
        # x64 is on; under float32 JAX every input is computed in float32.
        tags.transformer_tags.preserves_dtype = [np.dtype(float_dtype()).name]
        return tags
