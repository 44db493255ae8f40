"""Kernel components between sequences for :class:`SequenceKernelClassifier`.

Each component is fitted on the training sequences and then gives the training
Gram matrix and the cross matrix of new sequences against the training ones, all
on one scale so that they can be summed: cosine-normalised (unit diagonal), or,
for the window kernel, a unit mean diagonal on the training series:

* ``"gak"``: the global alignment kernel (:func:`bayeskde.kernels.sequence.
  global_alignment_gram`, Cuturi 2011) with bandwidth ``sigma_scale`` times
  Cuturi's median rule;
* ``"signature"``: an RBF kernel on the standardised truncated signatures
  (:func:`bayeskde.kernels.sequence.signature_features`) of the path ``(t, x_t)``
  started at the origin (a basepoint, so the level is seen), the rate
  ``gamma_scale`` times the median heuristic;
* ``"window"``: the window mean-map kernel (:mod:`bayeskde.kernels.windows`):
  each series as the distribution of its dilated windows of 9 frames, compared by
  the mean embedding of that distribution under step features of window
  projections (Smola et al. 2007, eq. (1); MiniRocket's PPV features are this
  embedding), standardised per feature with the training mean and deviation,
  then a linear kernel divided by the number of features; on the series
  (``representation="raw"``), their first differences (``"diff"``) or the sum of
  both; it reads the series at full length (no PAA: spikes survive);
* ``"lmmk"``: the latent mean-map kernel (Mehta and Gray, eqs. (22), (30)) of one
  HMM fitted on all training sequences, by EM (``hmm="em"``) or by variational
  Bayes (``hmm="bayes"``, :mod:`bayeskde.meanmap.variational`: the clique features
  averaged over the parameter posterior too), with random Fourier features of
  the observation RBF, optionally through the RBF map of eq. (24) (``nu``).
  The Bayesian kernel averages over the posterior's modes: ``vb_restarts``
  variational fits per number of states in ``n_states`` (an int or a tuple),
  each started from its own EM run (the first from the EM fit of ``hmm="em"``),
  and ``k = sum_m w_m k_m / sqrt(k_m(x, x) k_m(y, y))``. ``mode_weighting``
  says how ``w`` is chosen: ``"stacking"`` passes the modes' training Grams to
  a ``weigh`` function the caller supplies (the classifier's: the simplex
  weights of least leave-one-out error, :func:`~bayeskde.meanmap.stacking.
  stacking_weights`; Yao, Vehtari and Gelman 2022), ``"elbo"`` takes ``w =
  softmax(ELBO)`` (:func:`~bayeskde.meanmap.mode_weights`): the expected
  cosine-normalised kernel under the mixture ``sum_m w_m q_m(theta)``.

The other components read the same preprocessed frames: each series shortened to at
most ``max_length`` frames by piecewise aggregate approximation (the mean of equal
stretches; a series' length relative to the others is kept) and, with
``derivative = w > 0``, its first differences times ``w`` appended as channels
(derivative DTW's idea: shape, not level).
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np

from ..hmm import batch_posteriors, fit_hmm
from ..kernels.sequence import (
    bucket_length,
    gak_sigma,
    global_alignment_gram,
    pad_series,
    signature_features,
)
from ..kernels.standard import median_gamma
from ..kernels.windows import fit_window_map, window_mean_embedding
from .latent import (
    LatentFeatures,
    continuous_latent_features,
    lmmk_diag_from_features,
    lmmk_gram_from_features,
    rff_frequencies,
    state_kernel_matrix,
)
from .variational import (
    VariationalHMM,
    fit_variational_hmm,
    mode_weights,
    variational_elbo,
    variational_posteriors,
)

__all__ = ["FAMILIES", "MODE_WEIGHTINGS", "preprocess", "make_component",
           "window_sum"]

FAMILIES = ("window", "gak", "signature", "lmmk")
# how the Bayesian HMM kernel weights its variational modes
MODE_WEIGHTINGS = ("stacking", "elbo")


def _paa(x: np.ndarray, m: int) -> np.ndarray:
    T = x.shape[0]
    if T <= m:
        return x
    # T > m: every stretch holds at least one frame
    edges = np.floor(np.linspace(0, T, m + 1)).astype(int)
    counts = np.diff(edges).reshape((-1,) + (1,) * (x.ndim - 1))
    return np.add.reduceat(x, edges[:-1], axis=0) / counts


def preprocess(sequences, max_length: int | None, derivative: float,
               t_ref: int | None = None):
    """PAA to at most ``max_length`` (lengths scaled by ``t_ref``, default the
    longest series; a component passes its training set's longest, so that
    new series of other lengths are shortened by the same factor), then
    ``[x, w * diff(x)]``; returns the padded ``(n, T, d')`` array and lengths."""
    t_max = max(len(s) for s in sequences) if t_ref is None else t_ref
    out = []
    for s in sequences:
        if max_length is not None and t_max > max_length:
            s = _paa(s, max(1, math.ceil(len(s) * max_length / t_max)))
        if derivative > 0:
            d = np.diff(s, axis=0, prepend=s[:1]) if len(s) > 1 else np.zeros_like(s)
            s = np.concatenate([s, derivative * d], axis=1)
        out.append(s)
    return pad_series(out)


def _t_ref(comp, sequences):
    """The longest training length, set on the first (fitting) call."""
    if not hasattr(comp, "t_ref_"):
        comp.t_ref_ = max(len(s) for s in sequences)
    return comp.t_ref_


def _normalise(K, da, db):
    return K / np.sqrt(np.outer(np.maximum(da, 1e-300), np.maximum(db, 1e-300)))


class _GAK:
    family = "gak"

    def __init__(self, sigma_scale, derivative, max_length, block_size):
        self.sigma_scale, self.derivative = sigma_scale, derivative
        self.max_length, self.block_size = max_length, block_size

    def fit(self, sequences):
        self.X_, self.lengths_ = preprocess(sequences, self.max_length,
                                            self.derivative, _t_ref(self, sequences))
        self.sigma_ = self.sigma_scale * gak_sigma(self.X_, self.lengths_)
        self.K_ = global_alignment_gram(self.X_, sigma=self.sigma_,
                                        lengths_a=self.lengths_,
                                        block_size=self.block_size)
        return self

    def cross(self, sequences):
        X, lengths = preprocess(sequences, self.max_length, self.derivative,
                                _t_ref(self, sequences))
        if X.shape[2] != self.X_.shape[2]:
            raise ValueError(f"X has d = {X.shape[2]}, fit saw {self.X_.shape[2]}")
        return global_alignment_gram(X, self.X_, sigma=self.sigma_, lengths_a=lengths,
                                     lengths_b=self.lengths_,
                                     block_size=self.block_size)


class _Signature:
    family = "signature"

    def __init__(self, depth, gamma_scale, derivative, max_length):
        self.depth, self.gamma_scale = depth, gamma_scale
        self.derivative, self.max_length = derivative, max_length

    def _features(self, sequences):
        X, lengths = preprocess(sequences, self.max_length, self.derivative,
                                _t_ref(self, sequences))
        n, T, _ = X.shape
        # time channel over each series' own span, and the basepoint 0
        t = np.arange(T)[None, :] / np.maximum(lengths[:, None] - 1, 1)
        path = np.concatenate([np.minimum(t, 1.0)[..., None], X], axis=2)
        path = np.concatenate([np.zeros((n, 1, path.shape[2])), path], axis=1)
        return np.asarray(signature_features(path, lengths + 1, depth=self.depth),
                          dtype=np.float64)

    def fit(self, sequences):
        S = self._features(sequences)
        self.mean_, self.scale_ = S.mean(axis=0), S.std(axis=0)
        self.scale_[self.scale_ < 1e-12] = 1.0
        self.S_ = (S - self.mean_) / self.scale_
        self.gamma_ = self.gamma_scale * median_gamma(self.S_)
        self.K_ = self._rbf(self.S_)
        return self

    def _rbf(self, S):
        sq = (np.sum(S**2, 1)[:, None] + np.sum(self.S_**2, 1)[None, :]
              - 2 * S @ self.S_.T)
        return np.exp(-self.gamma_ * np.maximum(sq, 0.0))

    def cross(self, sequences):
        S = self._features(sequences)
        if S.shape[1] != self.S_.shape[1]:
            raise ValueError("X has another number of channels than fit saw")
        return self._rbf((S - self.mean_) / self.scale_)


class _LMMK:
    family = "lmmk"

    def __init__(self, n_states, hmm, derivative, max_length, nu, n_features,
                 n_iter, n_restarts, key, concentration=1.0, prior_strength=1e-2,
                 vb_iter=30, vb_restarts=4, mode_weighting="elbo"):
        if mode_weighting not in MODE_WEIGHTINGS:
            raise ValueError(f"mode_weighting must be one of {MODE_WEIGHTINGS}, got "
                             f"{mode_weighting!r}")
        self.n_states, self.hmm, self.derivative = n_states, hmm, derivative
        self.max_length, self.nu, self.n_features = max_length, nu, n_features
        self.n_iter, self.n_restarts, self.key = n_iter, n_restarts, key
        self.concentration, self.prior_strength = concentration, prior_strength
        self.vb_iter, self.vb_restarts = vb_iter, vb_restarts
        self.mode_weighting = mode_weighting

    def _posteriors(self, X, lengths, q):
        if self.hmm == "bayes":
            return variational_posteriors(q, jnp.asarray(X), jnp.asarray(lengths))
        post = batch_posteriors(self.params_, X, lengths)
        return post.gamma, post.xi

    def _features(self, sequences):
        """One :class:`LatentFeatures` per kept mode (one for EM), and the
        number of sequences: the features are computed in tiles of a power of
        two up to 256 sequences of a bucketed length and kept padded (rows past
        the count repeat the first sequence), so the compiled posteriors,
        features and Gram blocks serve data sets of any size."""
        X, lengths = preprocess(sequences, self.max_length, self.derivative,
                                _t_ref(self, sequences))
        n = X.shape[0]
        X = np.concatenate([X, np.repeat(X[:, -1:], bucket_length(X.shape[1])
                                         - X.shape[1], axis=1)], axis=1)
        rows = np.concatenate([np.arange(n), np.zeros(-n % _tile(n), np.int64)])
        out = []
        for q in self.modes_:
            parts = []
            for i in range(0, len(rows), _tile(n)):
                Xi = jnp.asarray(X[rows[i:i + _tile(n)]], self.dtype_)
                Li = jnp.asarray(lengths[rows[i:i + _tile(n)]])
                gamma, xi = self._posteriors(Xi, Li, q)
                parts.append(continuous_latent_features(gamma, Xi, xi, Li,
                                                        self.rbf_gamma_, self.omega_,
                                                        kind="rff"))
            out.append(parts[0] if len(parts) == 1 else LatentFeatures(
                *(jnp.concatenate(p) for p in zip(*parts, strict=True))))
        return out, n

    def _fit_modes(self, key, cases, X, lengths):
        """EM (``hmm="em"``); or ``vb_restarts`` variational fits per number of
        states, each started from its own EM run, with their ELBOs."""
        if self.hmm == "em":
            self.params_ = fit_hmm(key, cases, self.n_states, emission="gaussian",
                                   n_iter=self.n_iter, n_restarts=self.n_restarts,
                                   pad_batch=_batch_bucket(len(cases))).params
            self.dtype_ = self.params_.emission.means.dtype
            self.modes_, self.mode_weights_ = [self.params_], np.ones(1)
            return
        modes, elbos = [], []
        grid = self.n_states if isinstance(self.n_states, tuple) else (self.n_states,)
        runs = [(n, r) for n in grid for r in range(self.vb_restarts)]
        # the first run starts from the EM fit hmm="em" makes with this key
        keys = [key, *jax.random.split(key, len(runs) - 1)]
        for (n_states, _), k in zip(runs, keys, strict=True):
            params = fit_hmm(k, cases, n_states, emission="gaussian",
                             n_iter=self.n_iter, n_restarts=self.n_restarts,
                             pad_batch=_batch_bucket(len(cases))).params
            self.dtype_ = params.emission.means.dtype
            Xj, Lj = jnp.asarray(X, self.dtype_), jnp.asarray(lengths)
            q = fit_variational_hmm(params, Xj, Lj, n_iter=self.vb_iter,
                                    concentration=self.concentration,
                                    prior_strength=self.prior_strength)
            modes.append(q)
            elbos.append(float(variational_elbo(
                q, Xj, Lj, concentration=self.concentration,
                prior_strength=self.prior_strength)))
        self.elbos_ = np.asarray(elbos)
        self.modes_ = modes
        self.mode_weights_ = mode_weights(self.elbos_)

    def fit(self, sequences, weigh=None):
        """Fit on ``sequences``. With ``hmm="bayes"`` and ``mode_weighting=
        "stacking"``, ``weigh`` maps the modes' cosine-normalised training
        Grams ``(M, n, n)`` to their weights ``(M,)`` on the simplex (it is where
        the labels enter; the classifier passes its LOO stacking)."""
        if (self.hmm == "bayes" and self.mode_weighting == "stacking"
                and weigh is None):
            raise ValueError("mode_weighting='stacking' needs weigh, a function of "
                             "the modes' training Grams (the classifier supplies "
                             "one from the labels)")
        X, lengths = preprocess(sequences, self.max_length, self.derivative,
                                _t_ref(self, sequences))
        k_fit, k_rff = jax.random.split(self.key)
        cases = [x[:n] for x, n in zip(X, lengths, strict=True)]
        self._fit_modes(k_fit, cases, X, lengths)
        stacking = self.hmm == "bayes" and self.mode_weighting == "stacking"
        if not stacking:
            self._keep(self.mode_weights_, ("modes_",))
        frames = np.concatenate(cases)
        self.rbf_gamma_ = jnp.asarray(median_gamma(frames[:: max(1, len(frames)
                                                                 // 2000)]),
                                      self.dtype_)
        self.omega_ = rff_frequencies(k_rff, X.shape[2], self.n_features,
                                      float(self.rbf_gamma_))
        self.state_kernels_ = [state_kernel_matrix(_n_states(q), math.inf)
                               for q in self.modes_]
        self.f_, self.n_train_ = self._features(sequences)
        self.d_ = self._diags(self.f_)
        grams = self._grams(self.f_, self.d_, self.n_train_)
        if stacking:
            w = np.asarray(weigh(np.stack(grams)), np.float64)
            if w.shape != (len(grams),) or np.any(w < 0) or not np.isclose(
                    w.sum(), 1.0):
                raise ValueError(f"weigh must return {len(grams)} non-negative "
                                 f"weights summing to one, got {w!r}")
            grams = [grams[i] for i in self._keep(
                w, ("modes_", "state_kernels_", "f_", "d_"))]
        self.K_ = self._map(sum(w * K for w, K in zip(self.mode_weights_, grams,
                                                       strict=True)))
        return self

    def _keep(self, w, names):
        """Keep the modes of non-zero weight ``w`` in the per-mode lists
        ``names`` (cross() need not compute the others), with ``w``
        renormalised on them; returns their indices."""
        keep = np.flatnonzero(w > 1e-12)
        if self.hmm == "bayes":
            self.all_mode_weights_ = np.asarray(w, np.float64)
            self.q_ = self.modes_[int(np.argmax(w))]
        self.mode_weights_ = w[keep] / w[keep].sum()
        for name in names:
            setattr(self, name, [getattr(self, name)[i] for i in keep])
        return keep

    def _grams(self, fs, ds, n):
        """The cosine-normalised kernel of each mode against the training set,
        ``(n, n_train)``, from padded features and diagonals, one row tile at a
        time (one compiled shape)."""
        out = []
        for f, d, f0, d0, L in zip(fs, ds, self.f_, self.d_, self.state_kernels_,
                                   strict=True):
            t, rows = _tile(n), f.emission.shape[0]
            blocks = [f] if rows == t else [
                LatentFeatures(f.emission[i:i + t], f.transition[i:i + t])
                for i in range(0, rows, t)]
            K = np.concatenate([np.asarray(lmmk_gram_from_features(b, f0, L, None),
                                           np.float64) for b in blocks])
            out.append(_normalise(K[:n, :self.n_train_], d[:n], d0[:self.n_train_]))
        return out

    def _mixture(self, fs, ds, n):
        """``sum_m w_m`` of the cosine-normalised kernels of the modes."""
        return sum(w * K for w, K in zip(self.mode_weights_, self._grams(fs, ds, n),
                                         strict=True))

    def _map(self, K):
        return K if self.nu is None else np.exp(-self.nu * np.maximum(2 - 2 * K, 0))

    def cross(self, sequences):
        fs, n = self._features(sequences)
        return self._map(self._mixture(fs, self._diags(fs), n))

    def _diags(self, fs):
        return [np.asarray(lmmk_diag_from_features(f, L, None), np.float64)
                for f, L in zip(fs, self.state_kernels_, strict=True)]

    def with_nu(self, nu):
        """A copy sharing the fitted HMM and features, another ``nu``."""
        other = _LMMK.__new__(_LMMK)
        other.__dict__.update(self.__dict__)
        other.nu = nu
        base = self.K_ if self.nu is None else None
        if base is None:
            raise ValueError("with_nu needs a component fitted with nu=None")
        other.K_ = other._map(base)
        return other


_TILE = 256
"""Sequences per compiled call of the HMM kernel's posteriors and features."""


def _tile(n):
    """A power of two up to :data:`_TILE` that holds ``n`` sequences."""
    return min(_TILE, 1 << (n - 1).bit_length())


def _batch_bucket(n):
    """The EM fit's batch: ``n`` sequences padded with empty ones to a power of
    two, at least 16, so that training sets of nearby sizes share one compiled
    EM program (in a fresh process about 5 s of compilation per number of
    states against 0.1 s of EM on a few dozen series; at most twice the EM
    work)."""
    return max(16, 1 << (n - 1).bit_length())


def _n_states(params):
    return (params.initial if isinstance(params, VariationalHMM)
            else params.log_initial).shape[0]


def _differences(sequences):
    return [np.diff(s, axis=0) if len(s) > 1 else np.zeros_like(s)
            for s in sequences]


class _Window:
    family = "window"

    def __init__(self, representation, n_features, key):
        self.representation, self.n_features, self.key = (representation, n_features,
                                                          key)

    def _series(self, sequences):
        if self.representation == "diff":
            return _differences(sequences)
        if self.representation == "padded":
            # zero-padded (or cut) to the training set's longest length, as
            # MiniRocket reads a ragged set: the length becomes part of the shape
            T = _t_ref(self, sequences)
            return [np.concatenate([s[:T], np.zeros((max(T - len(s), 0),
                                                     s.shape[1]))]) for s in sequences]
        return sequences

    def _embed(self, sequences):
        X, lengths = pad_series(self._series(sequences))
        return np.asarray(window_mean_embedding(X, lengths, self.map_), np.float64)

    def fit(self, sequences):
        X, lengths = pad_series(self._series(sequences))
        self.map_ = fit_window_map(self.key, X, lengths, n_features=self.n_features)
        F = np.asarray(window_mean_embedding(X, lengths, self.map_), np.float64)
        self.mean_, self.scale_ = F.mean(axis=0), F.std(axis=0)
        self.scale_[self.scale_ < 1e-12] = 1.0
        self.F_ = (F - self.mean_) / self.scale_
        return self

    @property
    def K_(self):
        """The training Gram ``F F^T / p``, formed on first use: on a large set
        the classifier chooses on a subset (:meth:`sub_gram`) and forms only the
        kept component's ``n x n`` Gram."""
        if getattr(self, "_K", None) is None:
            self._K = self.F_ @ self.F_.T / self.F_.shape[1]
        return self._K

    def sub_gram(self, idx):
        """The training Gram's rows and columns ``idx``."""
        F = self.F_[idx]
        return F @ F.T / F.shape[1]

    def cross(self, sequences):
        F = (self._embed(sequences) - self.mean_) / self.scale_
        return F @ self.F_.T / self.F_.shape[1]


class _WindowSum:
    """``(K_raw + w K_diff) / (1 + w)`` from two fitted window components."""

    family = "window"
    representation = "both"

    def __init__(self, raw, diff, weight=1.0):
        self.raw, self.diff, self.derivative = raw, diff, weight

    @property
    def K_(self):
        return (self.raw.K_ + self.derivative * self.diff.K_) / (1.0 + self.derivative)

    def sub_gram(self, idx):
        """The training Gram's rows and columns ``idx``."""
        return (self.raw.sub_gram(idx) + self.derivative * self.diff.sub_gram(idx)
                ) / (1.0 + self.derivative)

    def cross(self, sequences):
        return (self.raw.cross(sequences) + self.derivative * self.diff.cross(
            sequences)) / (1.0 + self.derivative)


def window_sum(raw, diff, weight=1.0):
    """The ``"both"`` window component from fitted ``"raw"`` and ``"diff"`` ones."""
    return _WindowSum(raw, diff, weight)


def make_component(family: str, **kw):
    """The component of ``family`` (one of :data:`FAMILIES`) with options ``kw``.

    Raises:
        ValueError: an ``"lmmk"`` ``mode_weighting`` not in
            :data:`MODE_WEIGHTINGS`.
    """
    cls = {"window": _Window, "gak": _GAK, "signature": _Signature,
           "lmmk": _LMMK}[family]
    return cls(**kw)
