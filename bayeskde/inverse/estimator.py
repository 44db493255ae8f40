"""The scikit-learn facade of the generative inverse model."""

from __future__ import annotations

import hashlib

import jax
import numpy as np
from sklearn.base import BaseEstimator, RegressorMixin
from sklearn.exceptions import NotFittedError

from .._validation import as_float_array, check_integer, check_key
from ..tgp.modes import Modes
from .fit import fit_inverse_gp
from .predictive import (
    InverseGPPredictive,
    inverse_gp_predictive,
    predictive_log_density,
)
from .sample import inverse_gp_sample

__all__ = ["InverseGPRegressor"]


def _estimator_X(X, what: str, n_features: int | None = None):
    """scikit-learn's conventions for the estimator's ``X``: 2-D ``(n, d_x)``
    (a 1-D array is refused with scikit-learn's wording, as its own
    regressors do; the pure functions accept it as one feature), and at
    predict time the number of features seen in fit."""
    if X is None:
        raise ValueError(f"InverseGPRegressor.{what}: X is None; expected an "
                         "array of shape (n, d_x)")
    shape = np.shape(X) if hasattr(X, "shape") else np.asarray(X).shape
    ndim = len(shape)
    if ndim != 2:
        raise ValueError(
            f"InverseGPRegressor.{what}: expected a 2-D X of shape (n, d_x), got "
            f"{ndim} dimension(s). Reshape your data either using "
            "array.reshape(-1, 1) if your data has a single feature or "
            "array.reshape(1, -1) if it contains a single sample.")
    if shape[1] == 0:
        raise ValueError(f"InverseGPRegressor.{what}: found array with 0 feature(s) "
                         f"(shape={shape}) while a minimum of 1 is required.")
    if n_features is not None and shape[1] != n_features:
        raise ValueError(f"X has {shape[1]} features, but InverseGPRegressor "
                         f"is expecting {n_features} features as input.")
    return as_float_array(X, "X")


class InverseGPRegressor(RegressorMixin, BaseEstimator):
    """scikit-learn facade of the generative inverse model.

    ``fit(X, Y)`` runs :func:`~.fit.fit_inverse_gp`; ``predict(X)`` returns
    the mode of highest posterior mass per test point, ``predict_modes(X, k)``
    the top-k modes and their masses as a :class:`bayeskde.tgp.Modes`,
    ``predict_distribution(X)`` the full
    :class:`~.predictive.InverseGPPredictive`, ``sample(X, num_samples,
    key=...)`` draws ``(n_test, num_samples, d_y)`` of the model-averaged
    predictive, and ``score(X, Y)`` the mean log predictive density
    log p(y_i | x_i, D) of held-out pairs (a proper score: higher is better;
    the R^2 of one mode would misjudge a multimodal predictive). ``prior`` is
    the kernel prior (:class:`~.data.InverseGPPrior`), ``output_prior`` the
    prior over outputs p(y) (``None``: data-driven; ``"uniform"``, ``"kde"``,
    a box ``(low, high)`` or a NumPyro distribution; see
    :func:`~.output_prior.resolve_output_prior`). ``n_grid`` is per output
    dimension; ``num_draws`` the posterior draws the predictive averages over.
    ``approx`` and ``rank`` select the exact or low-rank evidence
    (:func:`~.fit.fit_inverse_gp`); ``fit_.approx`` and ``fit_.rank`` say
    which ran.
    ``method`` defaults to ``"quadrature"``: the posterior over (log amplitude,
    log noise) is two-dimensional per (rate, degree) pair, so adaptive
    quadrature gives independent draws of it, where NUTS's chains stay in one
    pair each when pairs of different amplitudes share the mass (R-hat 1.54 on
    ``models/pose_tgp.py``'s arm); ``"nuts"`` is kept for its diagnostics.
    ``X`` is 2-D ``(m, d_x)`` as in scikit-learn (``x[:, None]`` for one
    feature); ``Y`` may be 1-D.

    ``noise`` is the forward noise (:func:`~.noise.choose_forward_noise`):
    ``"auto"`` (default) keeps the model's Gaussian noise unless a kernel
    density of the GP's leave-one-out residuals has a higher leave-one-out
    log density of the training inputs given their outputs (by more than two
    standard errors); ``"gaussian"``, ``"residual"`` force one. ``fit_.noise``
    says which was chosen and the scores. ``input_transform`` (not
    ``transform``: scikit-learn reads that name as a transformer's method) is
    the ``transform`` of :func:`~.fit.fit_inverse_gp`, what the model
    describes in place of x (:mod:`~.transform`): ``"auto"`` (default) fits
    x and log x where every training input is positive and keeps the one of
    higher leave-one-out density of x; ``fit_.transform`` says which.
    ``sample`` draws by the grid for one or two outputs and above by the
    Laplace importance sampler, with NUTS for the test inputs whose
    effective sample size is low (:func:`~.sample.inverse_gp_sample`).

    Example (``X`` ``(m, d_x)``, ``Y`` ``(m, d_y)``, ``X_new`` ``(n, d_x)``)::

        reg = InverseGPRegressor(key=jax.random.key(0)).fit(X, Y)
        reg.predict_modes(X_new, 2).modes        # (n, 2, d_y)
        reg.sample(X_new, 500, key=jax.random.key(1)).shape   # (n, 500, d_y)
    """

    def __init__(self, prior=None, *, key=None, output_prior=None,
                 method="quadrature",
                 approx="auto", rank=None, num_warmup=500, num_samples=500,
                 num_chains=4, mode="average", num_draws=100, n_grid=None,
                 noisy_inputs=True, progress_bar=False, noise="auto",
                 input_transform="auto"):
        self.prior = prior
        self.key = key
        self.output_prior = output_prior
        self.method = method
        self.approx = approx
        self.rank = rank
        self.num_warmup = num_warmup
        self.num_samples = num_samples
        self.num_chains = num_chains
        self.mode = mode
        self.num_draws = num_draws
        self.n_grid = n_grid
        self.noisy_inputs = noisy_inputs
        self.progress_bar = progress_bar
        self.noise = noise
        self.input_transform = input_transform

    def fit(self, X, Y):
        if Y is None:
            raise ValueError("InverseGPRegressor requires y to be passed, but the "
                             "target y is None")
        X = _estimator_X(X, "fit")
        Y = as_float_array(Y, "Y")
        key = jax.random.key(0) if self.key is None else check_key(self.key)
        self.fit_ = fit_inverse_gp(
            key, X, Y, self.prior, method=self.method, approx=self.approx,
            rank=self.rank, num_warmup=self.num_warmup,
            num_samples=self.num_samples, num_chains=self.num_chains,
            progress_bar=self.progress_bar, noise=self.noise,
            transform=self.input_transform)
        self.n_outputs_ = self.fit_.data.Y.shape[1]
        self.n_features_in_ = self.fit_.data.X.shape[1]
        return self

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.target_tags.required = True
        tags.target_tags.multi_output = True
        # score is a mean log density, not an R^2: scikit-learn's bar of 0.5
        # for an R^2 does not apply to it
        tags.regressor_tags.poor_score = True
        return tags

    def _check_fitted(self):
        if not hasattr(self, "fit_"):
            raise NotFittedError("InverseGPRegressor is not fitted yet; call fit")

    def _tag(self, X):
        """The key of ``X`` with the predictive's settings."""
        return (hashlib.sha1(np.asarray(X).tobytes()).hexdigest(), np.shape(X),
                repr((self.mode, self.num_draws, self.n_grid, self.output_prior,
                      self.noisy_inputs)))

    def predict_distribution(self, X, k: int = 3) -> InverseGPPredictive:
        """The predictive p(y* | x*, D) of every row of ``X``
        (:func:`~.predictive.inverse_gp_predictive`, its top ``k`` modes
        refined). The last one is memoised in ``fit_.memo`` (a pure function
        of the fit, ``X`` and the settings): ``predict_modes`` then ``sample``
        on the same ``X`` compute it once."""
        self._check_fitted()
        X = _estimator_X(X, "predict", self.n_features_in_)
        return self.fit_.memo.last("predictive", (self._tag(X), k), lambda: (
            inverse_gp_predictive(
                self.fit_, X, mode=self.mode, num_draws=self.num_draws,
                n_grid=self.n_grid, k=k, output_prior=self.output_prior,
                noisy_inputs=self.noisy_inputs)))

    def predict_modes(self, X, k: int = 2) -> Modes:
        """The top-k modes ``(n, k, d_y)`` and masses ``(n, k)``, highest mass
        first, as a :class:`bayeskde.tgp.Modes` (temperature 1: the masses
        are the posterior's own); the modes are sought among 3 or more (so that
        the first is the same for every k)."""
        pred = self.predict_distribution(X, max(check_integer(k, "k"), 3))
        return Modes(pred.modes[:, :k], pred.mode_masses[:, :k], 1.0)

    def predict(self, X):
        out = self.predict_modes(X, 1).modes[:, 0, :]
        return out[:, 0] if self.n_outputs_ == 1 else out

    def sample(self, X, num_samples: int = 1000, *, key=None) -> np.ndarray:
        """``(n_test, num_samples, d_y)`` draws of p(y* | x*, D)
        (:func:`~.sample.inverse_gp_sample`: the grid for d_y <= 2, its most
        probable cells refined 8-fold per dimension; above two outputs an
        importance resample of the Laplace-mixture stage, whose weights carry
        the modes' masses); ``key`` defaults to ``key(1)``."""
        self._check_fitted()
        X = _estimator_X(X, "sample", self.n_features_in_)
        key = jax.random.key(1) if key is None else check_key(key)
        # draws need the predictive's candidates and probabilities, not its
        # modes: the one predict_modes memoised for this X (any k), or one
        # computed without refining the modes
        held = self.fit_.memo.peek("predictive")
        pred = held[1] if held is not None and held[0][0] == self._tag(X) else None
        if pred is not None:
            return inverse_gp_sample(key, self.fit_, X, num_samples,
                                     predictive=pred)
        return inverse_gp_sample(
            key, self.fit_, X, num_samples, mode=self.mode,
            num_draws=self.num_draws, n_grid=self.n_grid,
            output_prior=self.output_prior, noisy_inputs=self.noisy_inputs)

    def score(self, X, y, sample_weight=None) -> float:
        """The mean log predictive density (1/n) sum_i log p(y_i | x_i, D) of
        the pairs ``(X, y)`` under the predictive
        (:func:`~.predictive.predictive_log_density`, normalised): a proper
        scoring rule, higher is better. ``sample_weight`` weights the mean.
        Cost: one predictive of ``X`` plus n density evaluations."""
        pred = self.predict_distribution(X)
        X = _estimator_X(X, "score", self.n_features_in_)
        Y = as_float_array(y, "y")
        Y = Y[:, None] if Y.ndim == 1 else Y
        if Y.shape != (X.shape[0], self.n_outputs_):
            raise ValueError(f"y must have shape ({X.shape[0]}, {self.n_outputs_}) "
                             f"(or ({X.shape[0]},) for one output), got {Y.shape}")
        lp = predictive_log_density(pred, Y[:, None, :], X, normalized=True)[:, 0]
        w = None if sample_weight is None else as_float_array(
            sample_weight, "sample_weight", ndim=1)
        return float(np.average(lp, weights=w))
