"""What the dependency estimators share: kernels from their arguments, the
validation of training and test data, candidate outputs and the score.

:class:`bayeskde.KernelDependencyEstimator` and
:class:`bayeskde.KNNDependencyEstimator` (Weston et al. 2002) both derive from
:class:`DependencyBase`.
"""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np
from sklearn.base import BaseEstimator
from sklearn.utils.validation import check_is_fitted

from .._validation import (
    as_float_array,
    check_data,
    check_gram,
    check_n_features,
    check_params_dict,
    check_same_length,
)
from ..kernels.registry import make_kernel
from ..kpca.core import kpca_transform
from .core import kernel_loss
from .padded import vector_spec

__all__ = ["DependencyBase", "check_kind", "make_kernels"]


def check_kind(X, X_fit, name, owner="the estimator"):
    if isinstance(X, tuple) != isinstance(X_fit, tuple):
        raise TypeError(f"{name} must be of the kind (strings or arrays) seen in fit")
    if not isinstance(X, tuple):
        check_n_features(X, X_fit.shape[1], name, owner=owner)


def _in_engine(kernel, data) -> bool:
    """Whether the exact engine evaluates ``kernel`` on ``data`` itself."""
    return not isinstance(data, tuple) and vector_spec(kernel)[0] is not None


def make_kernels(est):
    kin = make_kernel(est.input_kernel, check_params_dict(
        est.input_kernel_params, "input_kernel_params"))
    kout = make_kernel(est.output_kernel, check_params_dict(
        est.output_kernel_params, "output_kernel_params"))
    return kin, kout


class DependencyBase(BaseEstimator):
    """Shared input/output handling of the dependency estimators."""

    def _setup(self, X, Y, lazy=False):
        """Validate the data, resolve both kernels; the Gram matrices, except
        (``lazy``) those of kernels the exact engine evaluates itself (``None``)."""
        self.input_kernel_, self.output_kernel_ = make_kernels(self)
        if self.input_kernel_.precomputed:
            K = check_gram(X, "X", what="a square Gram matrix (kernel='precomputed')")
            self.X_fit_ = None
            self.n_features_in_ = K.shape[1]
        else:
            self.X_fit_ = check_data(X, "X", min_samples=2, allow_1d=False)
            K = None
            if not isinstance(self.X_fit_, tuple):
                self.n_features_in_ = self.X_fit_.shape[1]
            self.input_kernel_ = self.input_kernel_.fit(self.X_fit_)
        if self.output_kernel_.precomputed:
            L = check_gram(Y, "Y", what="a square Gram matrix (kernel='precomputed')")
            self.Y_fit_ = None
            self._y_out = None
        else:
            self.Y_fit_ = check_data(Y, "Y", min_samples=2)
            # Outputs are returned as given (ints stay ints, 1-D stays 1-D).
            self._y_out = (
                list(self.Y_fit_) if isinstance(self.Y_fit_, tuple) else np.array(Y)
            )
            self.output_kernel_ = self.output_kernel_.fit(self.Y_fit_)
            L = None
        n_x = K.shape[0] if K is not None else len(self.X_fit_)
        n_y = L.shape[0] if L is not None else len(self.Y_fit_)
        if n_x != n_y:
            raise ValueError(
                f"X and Y must have the same number of samples, got {n_x} and {n_y}"
            )
        if L is None and not (lazy and _in_engine(self.output_kernel_, self.Y_fit_)):
            L = self.output_kernel_.gram(self.Y_fit_)
        if K is None and not (lazy and _in_engine(self.input_kernel_, self.X_fit_)):
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
        X = check_data(X, "X", allow_1d=False)
        check_kind(X, self.X_fit_, "X", owner=type(self).__name__)
        return X

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.pairwise = self.input_kernel == "precomputed"
        return tags

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
        check_kind(C, self.Y_fit_, "candidates")
        self._cand_out = (
            list(C) if isinstance(C, tuple) else np.array(self.candidates)
        )
        return kpca_transform(fitted_kpca, self.output_kernel_.gram(C, self.Y_fit_))

    def score(self, X, y):
        """Minus the mean kernel-induced output loss of predicting ``y`` from ``X``
        (higher is better); ``y`` is named as scikit-learn's scorers pass it."""
        check_is_fitted(self, "n_samples_fit_")
        if self.output_kernel_.precomputed:
            raise TypeError("score needs output objects, not a precomputed kernel")
        pred = self.predict(X)
        Y = check_data(y, "y")
        check_kind(Y, self.Y_fit_, "y")
        check_same_length(X, Y, "X", "y")
        return -float(jnp.mean(kernel_loss(self.output_kernel_, Y, pred)))
