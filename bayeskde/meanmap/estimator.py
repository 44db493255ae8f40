"""``LatentMeanMapKernel``: the scikit-learn-style facade of the latent mean map.

``fit`` fits one HMM on the training sequences by Baum-Welch
(``bayeskde.hmm.fit_hmm``) or takes a fitted ``HMMParams``; ``gram`` runs
forward-backward on a whole padded batch in one compiled call, forms each
sequence's latent mean maps and returns the LMMK matrix (eqs. 22-32), optionally
through the RBF map of eq. (24).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import jax
import jax.numpy as jnp
import numpy as np
from sklearn.base import BaseEstimator
from sklearn.exceptions import NotFittedError

from .._typing import float_dtype
from .._validation import (
    check_choice,
    check_integer,
    check_key,
    check_nonnegative,
    check_positive,
)
from ..hmm import CategoricalEmission, HMMParams, batch_posteriors, fit_hmm
from ..hmm import pad_sequences as _pad
from ..kernels import kernel_rbf_map, normalize_kernel
from ..kernels.standard import median_gamma
from .closed_forms import symbol_kernel_matrix
from .latent import (
    LatentFeatures,
    continuous_emission_gram_exact,
    continuous_latent_features,
    discrete_latent_features,
    lmmk_diag_from_features,
    lmmk_gram_from_features,
    pair_emission_exact,
    rff_frequencies,
    state_kernel_matrix,
    taylor_dimension,
)

__all__ = ["LatentMeanMapKernel"]

FEATURE_MAPS = ("exact", "rff", "taylor")


@jax.jit
def _exact_diag(X, G, L, rbf_gamma, state_kernel):
    L = L.astype(X.dtype)
    return jax.vmap(
        lambda x, g, n: pair_emission_exact(x, g, n, x, g, n, rbf_gamma, state_kernel)
    )(X, G, L)


def _median_frame_gamma(sequences, means, max_samples: int = 2000) -> float:
    """Median-heuristic rate of the observation RBF: on at most ``max_samples``
    frames spread evenly over all training frames, or on the emission means."""
    if sequences is None:
        return median_gamma(np.asarray(means))
    frames = np.concatenate([np.asarray(s, dtype=np.float64).reshape(
        len(s), -1) for s in sequences])
    step = max(1, -(-frames.shape[0] // max_samples))
    return median_gamma(frames[::step])


class LatentMeanMapKernel(BaseEstimator):
    """Latent mean-map kernel between sequences under one fitted HMM.

    Args:
        n_states: number of hidden states N of the HMM.
        emission: ``"categorical"`` (``(T_i,)`` int symbols) or ``"gaussian"``
            (``(T_i, D)`` floats).
        lam: ``lambda >= 0`` of the state and symbol kernels
            ``exp(-lam [i != j])`` (eqs. 27-32); ``float("inf")`` gives the delta
            kernels (the Fisher-like limit).
        key: ``jax.random`` key (EM restarts, random Fourier features).
        gamma: RBF rate of the observation kernel for Gaussian emissions, or
            ``"median"`` (default): the median heuristic on the training
            observations, gamma = 1 / (2 m^2) with m the median distance between
            distinct frames among at most 2000 spread evenly over all training
            frames (:func:`bayeskde.kernels.standard.median_gamma`); when
            ``fit`` gets ``params`` and no sequences, on the emission means.
        covariance: ``"diag"`` or ``"full"`` Gaussian emissions.
        n_symbols: alphabet size (default: the largest training symbol + 1).
        feature_map: continuous case only: ``"exact"`` (eq. 31, O(n^2 T^2)),
            ``"rff"`` (random Fourier features, ``2 * n_features`` of them) or
            ``"taylor"`` (truncated Taylor map of order ``taylor_order``).
        n_features: number of random frequencies for ``"rff"``.
        taylor_order: truncation order for ``"taylor"``.
        nu: if given, return the RBF map ``exp(-nu (K_ii - 2 K_ij + K_jj))`` of
            eq. (24) instead of the LMMK.
        normalize: cosine-normalise the returned matrix.
        n_iter, n_restarts, tol: passed to ``fit_hmm``.

    Attributes (after ``fit``):
        params_: the HMM used; n_symbols_ / n_features_in_; omega_ (RFF
        frequencies or ``None``); lam_, gamma_, nu_.

    Cost: ``gram`` on n sequences of length T: O(n T N^2) forward-backward,
    O(n T N F) latent features, O(n^2 N (N + F)) for the matrix (F = K symbols or
    the number of features); ``"exact"`` continuous: O(n^2 T^2 (D + N)).

    Examples:
        >>> import jax, numpy as np
        >>> seqs = [np.array([0, 2, 2, 1, 0, 1, 2, 0]), np.array([1, 0, 2, 2, 1]),
        ...         np.array([2]), np.array([0, 0, 1, 2, 1, 1, 0]), np.array([2, 1, 0])]
        >>> k = LatentMeanMapKernel(2, lam=1.0, key=jax.random.key(0), n_iter=5,
        ...                         n_restarts=1)
        >>> K = k.fit(seqs).gram(seqs)
        >>> K.shape
        (5, 5)
    """

    def __init__(
        self,
        n_states: int = 3,
        emission: str = "categorical",
        lam: float = 1.0,
        *,
        key=None,
        gamma: float | str = "median",
        covariance: str = "diag",
        n_symbols: int | None = None,
        feature_map: str = "exact",
        n_features: int = 256,
        taylor_order: int = 4,
        nu: float | None = None,
        normalize: bool = False,
        n_iter: int = 100,
        n_restarts: int = 3,
        tol: float = 1e-6,
    ):
        self.n_states = n_states
        self.emission = emission
        self.lam = lam
        self.key = key
        self.gamma = gamma
        self.covariance = covariance
        self.n_symbols = n_symbols
        self.feature_map = feature_map
        self.n_features = n_features
        self.taylor_order = taylor_order
        self.nu = nu
        self.normalize = normalize
        self.n_iter = n_iter
        self.n_restarts = n_restarts
        self.tol = tol

    # ------------------------------------------------------------------ fit
    def _check_options(self):
        check_integer(self.n_states, "n_states", minimum=1)
        if self.emission not in ("categorical", "gaussian"):
            raise ValueError(
                f"emission must be 'categorical' or 'gaussian', got {self.emission!r}"
            )
        if self.feature_map not in FEATURE_MAPS:
            raise ValueError(
                f"feature_map must be one of {FEATURE_MAPS}, got {self.feature_map!r}"
            )
        lam = self.lam
        if not (isinstance(lam, float) and lam == math.inf):
            lam = check_nonnegative(lam, "lam")
        nu = None if self.nu is None else check_positive(self.nu, "nu")
        check_key(self.key, "key")
        check_choice(self.normalize, "normalize", (True, False))
        gamma = self.gamma if isinstance(self.gamma, str) and (
            self.gamma == "median") else check_positive(self.gamma, "gamma")
        return lam, gamma, nu

    def fit(self, sequences: Sequence | None, params: HMMParams | None = None):
        """Fit the HMM on ``sequences`` (or adopt ``params``) and return ``self``.

        Args:
            sequences: list of ``(T_i,)`` int or ``(T_i, D)`` float arrays; may be
                ``None`` when ``params`` is given.
            params: a fitted ``bayeskde.hmm.HMMParams`` to use instead of EM.

        Raises:
            ValueError / TypeError: empty list or sequences, NaN, ragged feature
                dimensions, symbols outside ``[0, n_symbols)``, a data kind that
                does not match ``emission``, or bad options.
        """
        self.lam_, self.gamma_, self.nu_ = self._check_options()
        k_fit, k_rff = jax.random.split(self.key)
        categorical = self.emission == "categorical"
        if params is not None:
            if isinstance(params.emission, CategoricalEmission) != categorical:
                raise ValueError(
                    f"params has {type(params.emission).__name__} but emission="
                    f"{self.emission!r}"
                )
            if params.log_initial.shape[0] != self.n_states:
                raise ValueError(
                    f"params has {params.log_initial.shape[0]} states, n_states="
                    f"{self.n_states}"
                )
            dtype = float_dtype()
            self.params_ = jax.tree.map(lambda a: jnp.asarray(a, dtype), params)
        else:
            if sequences is None:
                raise ValueError("sequences is None and no params were given")
            self.params_ = fit_hmm(
                k_fit, list(sequences), self.n_states, emission=self.emission,
                covariance=self.covariance, n_symbols=self.n_symbols,
                n_iter=self.n_iter, tol=self.tol, n_restarts=self.n_restarts,
            ).params
        em = self.params_.emission
        if categorical:
            self.n_symbols_ = int(em.log_probs.shape[1])
            self.n_features_in_ = None
        else:
            self.n_symbols_ = None
            self.n_features_in_ = int(em.means.shape[1])
        if self.gamma_ == "median":
            self.gamma_ = 1.0 if categorical else _median_frame_gamma(
                sequences, em.means)
        self.omega_ = None
        if not categorical and self.feature_map == "rff":
            m = check_integer(self.n_features, "n_features", minimum=1)
            self.omega_ = rff_frequencies(k_rff, self.n_features_in_, m, self.gamma_)
        if not categorical and self.feature_map == "taylor":
            order = check_integer(self.taylor_order, "taylor_order", minimum=0)
            if taylor_dimension(self.n_features_in_, order) > 100_000:
                raise ValueError("taylor_order too large for this dimension")
        self.state_kernel_ = state_kernel_matrix(self.n_states, self.lam_)
        if categorical:
            self.feature_metric_ = symbol_kernel_matrix(self.n_symbols_, self.lam_)
        return self

    # ----------------------------------------------------------------- gram
    def _check_fitted(self):
        if not hasattr(self, "params_"):
            raise NotFittedError("LatentMeanMapKernel is not fitted; call fit first")

    def _pad(self, sequences, name):
        if sequences is None or isinstance(sequences, np.ndarray | jax.Array):
            raise TypeError(f"{name} must be a list of sequences")
        try:
            padded, lengths = _pad(list(sequences), n_symbols=self.n_symbols_)
        except (ValueError, TypeError) as err:
            raise type(err)(f"{name}: {err}") from err
        if self.emission == "categorical" and padded.ndim != 2:
            raise ValueError(f"{name}: emission='categorical' needs (T_i,) symbols")
        if self.emission == "gaussian":
            if padded.ndim != 3:
                raise ValueError(f"{name}: emission='gaussian' needs (T_i, D) floats")
            if padded.shape[2] != self.n_features_in_:
                raise ValueError(
                    f"{name}: sequences have D = {padded.shape[2]}, the HMM was fit "
                    f"with D = {self.n_features_in_}"
                )
        return padded, lengths

    def _prepare(self, sequences, name):
        padded, lengths = self._pad(sequences, name)
        post = batch_posteriors(self.params_, padded, lengths)
        if self.emission == "categorical":
            f = discrete_latent_features(
                post.gamma, padded, post.xi, lengths, self.n_symbols_
            )
            return f, self.feature_metric_, None
        if self.feature_map == "exact":
            zero = jnp.zeros((padded.shape[0], self.n_states, 1), padded.dtype)
            f = LatentFeatures(zero, post.xi / jnp.maximum(lengths - 1, 1)[:, None,
                                                                            None])
            return f, jnp.eye(1, dtype=padded.dtype), (padded, post.gamma, lengths)
        g = jnp.asarray(self.gamma_, padded.dtype)
        f = continuous_latent_features(
            post.gamma, padded, post.xi, lengths, g, self.omega_,
            kind=self.feature_map, order=int(self.taylor_order),
        )
        return f, None, None  # identity metric on explicit RBF features

    def features(self, sequences: Sequence) -> LatentFeatures:
        """Latent mean maps of ``sequences`` (not for exact continuous kernels)."""
        self._check_fitted()
        if self.emission == "gaussian" and self.feature_map == "exact":
            raise ValueError("feature_map='exact' has no explicit features")
        return self._prepare(sequences, "sequences")[0]

    def _diag(self, f, metric, exact):
        d = lmmk_diag_from_features(f, self.state_kernel_, metric)
        if exact is not None:
            g = jnp.asarray(self.gamma_, d.dtype)
            d = d + _exact_diag(*exact, g, self.state_kernel_)
        return d

    def _raw(self, A, B):
        fa, metric, exa = self._prepare(A, "A")
        fb, _, exb = (fa, metric, exa) if B is None else self._prepare(B, "B")
        K = lmmk_gram_from_features(fa, fb, self.state_kernel_, metric)
        if exa is not None:
            g = jnp.asarray(self.gamma_, K.dtype)
            K = K + continuous_emission_gram_exact(*exa, *exb, g, self.state_kernel_)
        da = self._diag(fa, metric, exa)
        db = da if B is None else self._diag(fb, metric, exb)
        return K, da, db

    def gram(self, A: Sequence, B: Sequence | None = None) -> jax.Array:
        """LMMK matrix between the sequences of ``A`` and ``B`` (default ``A``).

        Returns:
            ``(len(A), len(B))`` matrix (eq. 22; eq. 24 with ``nu``; cosine
            normalised with ``normalize=True``).
        """
        self._check_fitted()
        K, da, db = self._raw(A, B)
        if self.nu_ is not None:
            sigma = 1.0 / math.sqrt(2.0 * self.nu_)
            K = kernel_rbf_map(K, da, db, sigma)
            da = jnp.ones_like(da)
            db = jnp.ones_like(db)
        if self.normalize:
            K = normalize_kernel(K, da, db)
        return K

    def diag(self, A: Sequence) -> jax.Array:
        """Self-similarities ``k(x, x)`` (before ``nu`` and normalisation)."""
        self._check_fitted()
        return self._diag(*self._prepare(A, "A"))
