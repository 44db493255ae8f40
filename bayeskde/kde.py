"""Kernel Dependency Estimation (Weston et al. 2002) and its k-NN baseline.

KDE learns a map between general objects in three steps (section 3):

1. kernel PCA of the output Gram matrix L, giving p directions v_n in output
   feature space and training targets (v_n . Phi(y_i));
2. kernel ridge regression from the input kernel onto all p targets with one
   factorisation, f_n(x) = sum_i beta_in k(x_i, x) (eq. (6));
3. a pre-image y(x) = argmin_y ||(v_n . Phi(y))_n - (f_n(x))_n|| (see
   :mod:`bayeskde.preimage`).

Ridge convention. The paper minimises (1/m) sum_i (y_i - w . Phi(x_i))^2 +
gamma ||w||^2, whose dual solution is beta = (K + m gamma I)^-1 y; ``ridge`` is the
paper's gamma, so the grid {1e-4, ..., 1e1} of section 4 means what it meant there.

The pure functions :func:`fit_kde` and :func:`predict_kde_features` work on Gram
matrices; the estimators are scikit-learn facades. Model selection by
cross-validation lives in :mod:`bayeskde.kde_cv`.
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp
import jax.scipy.linalg as jsl
import numpy as np
from jaxtyping import Array, Float
from sklearn.base import BaseEstimator
from sklearn.utils.validation import check_is_fitted

from ._typing import ArrayLike
from ._validation import (
    as_float_array,
    check_data,
    check_integer,
    check_nonnegative,
    check_same_length,
    warn_once,
)
from .kernels.registry import make_kernel
from .kpca import KPCAResult, kernel_pca, kpca_transform
from .preimage import fixed_point_preimage, linear_preimage, nearest_candidates

__all__ = [
    "KDEFit",
    "fit_kde",
    "predict_kde_features",
    "ridge_solve",
    "kernel_loss",
    "KernelDependencyEstimator",
    "KNNDependencyEstimator",
]

PREIMAGES = ("candidates", "linear", "fixed_point")


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


@jax.jit
def _ridge_solve(K, T, lam):
    n = K.shape[0]
    A = K + lam * n * jnp.eye(n, dtype=K.dtype)
    c = jsl.cho_factor(A, lower=True)
    return jsl.cho_solve(c, T)


def ridge_solve(
    K: Float[ArrayLike, "n n"], T: Float[ArrayLike, "n p"], ridge: float
) -> Float[Array, "n p"]:
    """Solve (K + n ridge I) B = T by one Cholesky factorisation for all p columns.

    An indefinite or singular system (a non-PSD user kernel, ridge 0) makes the
    Cholesky factor NaN; jitter of growing size is then added, with a warning.
    Cost: O(n^3 + n^2 p).
    """
    K = as_float_array(K, "K", ndim=2)
    T = as_float_array(T, "T", ndim=2)
    B = _ridge_solve(K, T, ridge)
    jitter = 1e-10 * float(jnp.max(jnp.abs(jnp.diagonal(K))) + 1.0)
    while not bool(jnp.all(jnp.isfinite(B))):
        if jitter > 1e3:
            raise np.linalg.LinAlgError("kernel ridge system is not positive definite")
        warn_once(
            "kernel ridge system is ill-conditioned; adding jitter to the diagonal"
        )
        B = _ridge_solve(K + jitter * jnp.eye(K.shape[0], dtype=K.dtype), T, ridge)
        jitter *= 100.0
    return B


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


@functools.partial(jax.jit, static_argnames="k")
def _nearest(train_diag, K_test, k):
    # top_k is O(m k) per row, against O(m log m) for a full argsort.
    return jax.lax.top_k(2.0 * K_test - train_diag[None, :], k)[1]


def _check_kind(X, X_fit, name):
    if isinstance(X, tuple) != isinstance(X_fit, tuple):
        raise TypeError(f"{name} must be of the kind (strings or arrays) seen in fit")
    if not isinstance(X, tuple) and X.shape[1] != X_fit.shape[1]:
        raise ValueError(
            f"{name} has {X.shape[1]} features, but the estimator was fitted with "
            f"{X_fit.shape[1]}"
        )


class _DependencyBase(BaseEstimator):
    """Shared input/output handling of the dependency estimators."""

    def _setup(self, X, Y):
        self.input_kernel_ = make_kernel(self.input_kernel, self.input_kernel_params)
        self.output_kernel_ = make_kernel(
            self.output_kernel, self.output_kernel_params
        )
        if self.input_kernel_.precomputed:
            K = as_float_array(X, "X", ndim=2)
            if K.shape[0] != K.shape[1]:
                raise ValueError(f"precomputed X must be square, got shape {K.shape}")
            self.X_fit_ = None
        else:
            self.X_fit_ = check_data(X, "X", min_samples=2)
            K = None
        if self.output_kernel_.precomputed:
            L = as_float_array(Y, "Y", ndim=2)
            if L.shape[0] != L.shape[1]:
                raise ValueError(f"precomputed Y must be square, got shape {L.shape}")
            self.Y_fit_ = None
            self._y_out = None
        else:
            self.Y_fit_ = check_data(Y, "Y", min_samples=2)
            # Outputs are returned as given (ints stay ints, 1-D stays 1-D).
            self._y_out = (
                list(self.Y_fit_) if isinstance(self.Y_fit_, tuple) else np.array(Y)
            )
            L = self.output_kernel_.gram(self.Y_fit_)
        n_x = K.shape[0] if K is not None else len(self.X_fit_)
        n_y = L.shape[0]
        if n_x != n_y:
            raise ValueError(
                f"X and Y must have the same number of samples, got {n_x} and {n_y}"
            )
        if K is None:
            K = self.input_kernel_.gram(self.X_fit_)
        return K, L

    #: Test rows whose cross-kernel is held at once: predict streams blocks of
    #: this many rows, so memory is O(batch_size m), not O(n_test m).
    batch_size = 4096

    def _validate_test(self, X):
        check_is_fitted(self, "n_samples_fit_")
        if self.input_kernel_.precomputed:
            K = as_float_array(X, "X", ndim=2)
            if K.shape[1] != self.n_samples_fit_:
                raise ValueError(
                    f"precomputed X must have {self.n_samples_fit_} columns, got "
                    f"shape {K.shape}"
                )
            return K
        X = check_data(X, "X")
        _check_kind(X, self.X_fit_, "X")
        return X

    def _cross_kernels(self, X):
        """Yield the test-versus-training kernel block by block of test rows."""
        X = self._validate_test(X)
        n = len(X) if isinstance(X, tuple) else X.shape[0]
        for start in range(0, n, self.batch_size):
            block = X[start : start + self.batch_size]
            yield (
                block if self.input_kernel_.precomputed
                else self.input_kernel_.gram(block, self.X_fit_)
            )

    def _outputs(self, idx):
        idx = np.asarray(idx)
        if self._cand_out is not None:
            src = self._cand_out
        elif self._y_out is None:
            return idx  # precomputed outputs: indices of the training outputs
        else:
            src = self._y_out
        if isinstance(src, list):
            return [src[i] for i in idx]
        return src[idx]

    def _setup_candidates(self, fitted_kpca, L):
        """Projections of the candidate outputs (training outputs by default)."""
        self._cand_out = None
        if self.candidates is None:
            return kpca_transform(fitted_kpca, L)
        if self.output_kernel_.precomputed:
            C = as_float_array(self.candidates, "candidates", ndim=2)
            if C.shape[1] != L.shape[0]:
                raise ValueError(
                    "with a precomputed output kernel, candidates must be the "
                    f"(n_candidates, {L.shape[0]}) kernel against the training outputs"
                )
            return kpca_transform(fitted_kpca, C)
        C = check_data(self.candidates, "candidates")
        _check_kind(C, self.Y_fit_, "candidates")
        self._cand_out = (
            list(C) if isinstance(C, tuple) else np.array(self.candidates)
        )
        return kpca_transform(fitted_kpca, self.output_kernel_.gram(C, self.Y_fit_))

    def score(self, X, Y):
        """Minus the mean kernel-induced output loss (higher is better)."""
        if self.output_kernel_.precomputed:
            raise TypeError("score needs output objects, not a precomputed kernel")
        return -float(jnp.mean(kernel_loss(self.output_kernel_, Y, self.predict(X))))


class KernelDependencyEstimator(_DependencyBase):
    """Kernel Dependency Estimation (Weston, Chapelle, Elisseeff, Schölkopf, Vapnik
    2002): output KPCA, kernel ridge regression onto every component, pre-image.

    Args:
        input_kernel, input_kernel_params: the input kernel k, by name with a params
            dict (e.g. ``"rbf", {"sigma": 1.0}``), a callable ``k(A, B)``, or
            ``"precomputed"`` (then X is the Gram matrix in fit and the
            ``(n_test, n_train)`` cross-kernel in predict).
        output_kernel, output_kernel_params: the output kernel l, which defines
            the loss ||Phi(y) - Phi(y')||^2. With ``"precomputed"`` Y is the output
            Gram matrix and ``predict`` returns indices of training outputs.
        n_components: number p of output principal components; ``None`` keeps all
            with non-zero eigenvalue.
        ridge: the paper's ridge gamma (the system solved is K + m gamma I).
        preimage: ``"candidates"`` (closest candidate in the projection space, the
            paper's choice), ``"linear"`` (explicit, for the linear/regression
            output kernel) or ``"fixed_point"`` (RBF output kernel on vectors).
        candidates: the candidate outputs; ``None`` means the training outputs.
        fixed_point_iter: iterations of the fixed-point pre-image.

    Attributes:
        input_kernel_, output_kernel_: resolved kernels with their parameters.
        fit_: :class:`KDEFit`.
        n_samples_fit_: number of training pairs.

    Cost: fit O(m^3) time and O(m^2) memory; predict O(t m (d + p) + t c p) for
    t test points and c candidates.

    Examples:
        >>> import numpy as np
        >>> X = np.linspace(0, 1, 30)[:, None]; Y = np.sin(3 * X)
        >>> kde = KernelDependencyEstimator("rbf", {"gamma": 10.0}, "linear",
        ...     preimage="linear", ridge=1e-4).fit(X, Y)
        >>> float(np.abs(kde.predict(X) - Y).max()) < 0.05
        True
    """

    def __init__(
        self,
        input_kernel="rbf",
        input_kernel_params=None,
        output_kernel="rbf",
        output_kernel_params=None,
        n_components=None,
        ridge=1e-3,
        preimage="candidates",
        candidates=None,
        fixed_point_iter=100,
    ):
        self.input_kernel = input_kernel
        self.input_kernel_params = input_kernel_params
        self.output_kernel = output_kernel
        self.output_kernel_params = output_kernel_params
        self.n_components = n_components
        self.ridge = ridge
        self.preimage = preimage
        self.candidates = candidates
        self.fixed_point_iter = fixed_point_iter

    def fit(self, X, Y):
        """Fit on pairs (X, Y); X and Y may be arrays or lists of strings."""
        ridge = check_nonnegative(self.ridge, "ridge")
        if self.preimage not in PREIMAGES:
            raise ValueError(
                f"preimage must be one of {PREIMAGES}, got {self.preimage!r}"
            )
        K, L = self._setup(X, Y)
        n = K.shape[0]
        if self.n_components is not None:
            check_integer(self.n_components, "n_components", minimum=1, maximum=n)
        name = self.output_kernel_.name
        if self.preimage == "linear" and name not in ("linear", "regression"):
            raise ValueError(
                "preimage='linear' needs output_kernel 'linear' or 'regression', "
                f"got {name!r}"
            )
        if self.preimage == "fixed_point" and (
            name != "rbf" or "rbf_sigma" in self.output_kernel_.params
        ):
            raise ValueError(
                f"preimage='fixed_point' needs output_kernel 'rbf', got {name!r}"
            )
        self.ridge_ = ridge
        self.fit_ = fit_kde(K, L, ridge, self.n_components)
        self.candidate_proj_ = self._setup_candidates(self.fit_.kpca, L)
        self.n_samples_fit_ = n
        return self

    def predict_features(self, X) -> Float[Array, "n_test n_components"]:
        """The predicted output projections (f_1(x), ..., f_p(x))."""
        return jnp.concatenate(
            [predict_kde_features(self.fit_, K) for K in self._cross_kernels(X)]
        )

    def _predict_block(self, K_test):
        F = predict_kde_features(self.fit_, K_test)
        if self.preimage == "linear":
            return np.asarray(linear_preimage(self.fit_.kpca, F, self.Y_fit_)), None
        idx = nearest_candidates(F, self.candidate_proj_)
        if self.preimage == "candidates":
            return np.asarray(idx), None
        cands = (
            self.Y_fit_ if self._cand_out is None
            else jnp.asarray(self._cand_out, self.Y_fit_.dtype).reshape(
                len(self._cand_out), -1)
        )
        res = fixed_point_preimage(
            self.fit_.kpca, F, self.Y_fit_, cands[idx],
            self.output_kernel_.params["gamma"], int(self.fixed_point_iter),
        )
        return np.asarray(res.preimages), np.asarray(res.used_fallback)

    def predict(self, X):
        """Predict outputs of the training outputs' kind (array or list of strings).

        With ``preimage="fixed_point"`` the attribute ``fixed_point_fallback_``
        marks the test points where the best candidate was kept.
        """
        parts = [self._predict_block(K) for K in self._cross_kernels(X)]
        out = np.concatenate([p for p, _ in parts])
        if self.preimage == "candidates":
            return self._outputs(out)
        if self.preimage == "fixed_point":
            self.fixed_point_fallback_ = np.concatenate([f for _, f in parts])
        return out


class KNNDependencyEstimator(_DependencyBase):
    """The k-nearest-neighbour baseline for general outputs (Weston et al. 2002,
    section 4.1).

    Neighbours are found by distance in input feature space,
    k(x,x) + k(x_i,x_i) - 2k(x,x_i). With ``n_neighbors = 1`` the neighbour's output
    is returned; otherwise the neighbours' outputs are averaged in output feature
    space and the pre-image is the candidate (by default training output) closest
    to that average.

    Args: as :class:`KernelDependencyEstimator`, plus ``n_neighbors``.

    Cost: predict O(t m) kernel evaluations plus O(t c) for the pre-image.
    """

    def __init__(
        self,
        n_neighbors=1,
        input_kernel="rbf",
        input_kernel_params=None,
        output_kernel="rbf",
        output_kernel_params=None,
        candidates=None,
    ):
        self.n_neighbors = n_neighbors
        self.input_kernel = input_kernel
        self.input_kernel_params = input_kernel_params
        self.output_kernel = output_kernel
        self.output_kernel_params = output_kernel_params
        self.candidates = candidates

    def fit(self, X, Y):
        """Store the training pairs and the output Gram matrix."""
        K, L = self._setup(X, Y)
        n = K.shape[0]
        self.n_neighbors_ = check_integer(
            self.n_neighbors, "n_neighbors", minimum=1, maximum=n
        )
        self.L_ = L
        self.train_diag_ = jnp.diagonal(K)
        # Full-rank output "KPCA": projections = centred feature coordinates.
        self.kpca_ = kernel_pca(L)
        self.candidate_proj_ = self._setup_candidates(self.kpca_, L)
        self.train_proj_ = kpca_transform(self.kpca_, L)
        self.n_samples_fit_ = n
        return self

    def kneighbors(self, X):
        """Indices ``(n_test, n_neighbors)`` of the nearest training inputs.

        Ranks by k(x_i, x_i) - 2 k(x, x_i): the test point's own k(x, x) is the
        same for every neighbour, so precomputed cross-kernels suffice.
        """
        return np.concatenate([
            np.asarray(_nearest(self.train_diag_, K, self.n_neighbors_))
            for K in self._cross_kernels(X)
        ])

    def predict(self, X):
        """Predict outputs of the training outputs' kind."""
        nb = self.kneighbors(X)
        if self.n_neighbors_ == 1 and self.candidates is None:
            return self._outputs(nb[:, 0])
        mean_proj = jnp.mean(self.train_proj_[nb], axis=1)
        return self._outputs(nearest_candidates(mean_proj, self.candidate_proj_))
