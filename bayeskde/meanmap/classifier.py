"""``SequenceKernelClassifier``: sequences in, labels out, kernels learned.

The estimator builds a set of candidate kernels between the training sequences
(:mod:`bayeskde.meanmap.sequence_kernels`: the window mean map, global
alignment, truncated signatures, HMM latent mean maps by EM or variational
Bayes), scores each by the
exact leave-one-out error of kernel ridge regression on the one-hot codes (one
eigendecomposition per kernel gives the LOO residuals for every ridge value;
Rifkin and Lippert 2007, "Notes on regularized least squares", eq. (4)), then
scores equal-weight and 1:3 sums of the best kernel of each family the same way
("a sum learned from the data"), and keeps the best by the one-standard-error
rule (the fewest kernels among the options within one standard error of the
smallest LOO squared error; LOO accuracy is reported). It then classifies with
kernel ridge regression (``method="ridge"``: regularised least-squares
classification, Rifkin 2002, on ``K + 1`` so that it has an intercept, with
probabilities from a softmax whose temperature minimises the LOO log loss) or an
SVM on the precomputed kernel (``method="svm"``, C by stratified 5-fold CV).

The variational Bayesian HMM kernel (``hmm="bayes"``) is a weighted sum of the
cosine-normalised kernels of several variational fits (modes of the posterior
that do not mix). With ``mode_weighting="stacking"`` the weights are those of
:func:`stacking_weights`: the point of a simplex grid whose summed kernel has
the least exact LOO error, the stacking of non-mixing modes of Yao, Vehtari and
Gelman (2022), with the classifier's LOO squared error of kernel ridge as the
held-out score; ``"elbo"`` (the default) weights them by ``softmax(ELBO)``.

Which pool of candidates the choice runs over is itself chosen by an honest
estimate (``selection="nested"``, the default; :mod:`bayeskde.meanmap.
selection`): the window family alone, every family, or the 1-nearest-neighbour
DTW rule (:func:`~bayeskde.meanmap.dtw.dtw_distances`, full window, on the
series after PAA; the archive's reference classifier, kept as a fallback so the
classifier is not far below it). The two kernel pools are scored by the
accuracy of nested cross-validation (the LOO choice above made again on each
outer training fold: leave-one-out up to 30 series, else 10-fold stratified),
the DTW rule by its exact LOO accuracy (it selects nothing); the better kernel
pool wins (ties by the nested squared error, then to the window pool), and the
DTW rule replaces it only when it is more accurate on the same series at the 5%
level of a one-sided exact McNemar test. The minimum LOO error
over dozens of kernels is optimistic on a few dozen series; the nested
estimate is not, because the choice it scores is made without the held-out
series.

Nothing is chosen from the test data: states, families, widths, derivative
weights, the modes' weights, the sum, the pool and the ridge all come from the
training sequences.
"""

from __future__ import annotations

from collections.abc import Sequence

import jax
import numpy as np
import scipy.linalg
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.model_selection import StratifiedKFold
from sklearn.preprocessing import LabelEncoder
from sklearn.svm import SVC
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import check_array, check_is_fitted, column_or_1d

from .._validation import check_integer, check_key, check_positive
from .candidates import (
    candidate_families,
    candidate_specs,
    component_gram,
    describe_component,
    dtw_fallback,
    fit_candidates,
)
from .selection import choose_configuration
from .sequence_kernels import MODE_WEIGHTINGS
from .stacking import (
    RIDGE_INTERCEPT,
    StackingWeights,
    loo_ridge_scores,
    simplex_grid,
    stacking_weights,
)

__all__ = ["SequenceKernelClassifier", "StackingWeights", "loo_ridge_scores",
           "simplex_grid", "stacking_weights"]

def _one_hot(y_idx, n_classes):
    Y = -np.ones((len(y_idx), n_classes))
    Y[np.arange(len(y_idx)), y_idx] = 1.0
    return Y


def _as_sequences(X, name="X"):
    """A list of ``(T_i, d)`` float64 arrays from a list of sequences, a 2-D
    ``(n, T)`` array (univariate) or a 3-D ``(n, T, d)`` array."""
    if not isinstance(X, list | tuple | str):
        if str(getattr(X, "dtype", "")) == "object" and getattr(X, "ndim", 0) == 1:
            X = list(X)  # a ragged array of sequences
        else:
            arr = check_array(X, accept_sparse=False, allow_nd=True, dtype=np.float64,
                              input_name=name)
            if arr.ndim not in (2, 3):
                raise ValueError(f"{name} must be a (n, T) or (n, T, d) array, got "
                                 f"shape {arr.shape}")
            X = list(arr[:, :, None] if arr.ndim == 2 else arr)
    if isinstance(X, str) or not isinstance(X, Sequence):
        raise TypeError(f"{name} must be a list of sequences or an array, got "
                        f"{type(X).__name__}")
    if len(X) == 0:
        raise ValueError(f"{name} is empty; need at least one sequence")
    out = []
    for i, s in enumerate(X):
        a = np.asarray(s)
        if a.dtype == object or not (np.issubdtype(a.dtype, np.number)
                                     or a.dtype == bool) or np.iscomplexobj(a):
            raise TypeError(f"{name}[{i}] must hold real numbers, got {a.dtype}")
        a = a.astype(np.float64)
        if a.ndim == 1:
            a = a[:, None]
        if a.ndim != 2 or a.shape[0] == 0 or a.shape[1] == 0:
            raise ValueError(f"{name}[{i}] must be a non-empty (T,) or (T, d) "
                             f"sequence, got shape {a.shape}")
        if not np.all(np.isfinite(a)):
            raise ValueError(f"{name}[{i}] contains NaN or inf")
        out.append(a)
    dims = {a.shape[1] for a in out}
    if len(dims) > 1:
        raise ValueError(f"{name}: sequences have different d: {sorted(dims)}")
    return out


def _is_table(X):
    return not isinstance(X, list | tuple) and getattr(X, "ndim", 0) == 2


def _znorm(seqs):
    out = []
    for s in seqs:
        sd = s.std(axis=0)
        out.append((s - s.mean(axis=0)) / np.where(sd > 1e-8, sd, 1.0))
    return out


class SequenceKernelClassifier(ClassifierMixin, BaseEstimator):
    """Classifier over sequences with kernels chosen from the training data.

    Args:
        kernels: ``"auto"`` (the window family, and ``"gak"``, ``"signature"``,
            ``"lmmk"`` when the training set is within ``budget``, and the 1-NN
            DTW fallback within ``dtw_budget``) or a tuple of family names
            (always all scored; ``"dtw"`` names the 1-NN DTW rule, alone or as a
            fallback beside kernels).
        hmm: ``"em"`` (Baum-Welch) or ``"bayes"`` (variational Bayesian HMM) for
            the ``"lmmk"`` family.
        mode_weighting: with ``hmm="bayes"``, how the kernels of the four
            variational fits per number of states are weighted: ``"elbo"``
            (default; ``softmax(ELBO)``, :func:`~bayeskde.meanmap.mode_weights`)
            or ``"stacking"`` (:func:`stacking_weights`, by LOO error on the
            training split; its LOO error is optimistic, since the weights are
            chosen by it: a nested LOO on the six UCR sets of docs/ucr.md
            found it worse than the ELBO weights on three, better on two).
            Ignored with ``hmm="em"``.
        n_states: HMM states, an int or ``"auto"`` (4 and 8, chosen by LOO).
        derivative: weight of the first-difference channels, a float or
            ``"auto"`` (0, 1 and 3 for the alignment kernel; 0 and 1 for the
            signatures; 1 for the HMM; the window kernel of the series, of
            their differences, their sum, and, when the training lengths vary,
            of the series zero-padded to the longest). A fixed ``w`` gives the window
            kernel of the series (``w = 0``) or ``(K_raw + w K_diff) / (1 + w)``.
        max_length: series are shortened to at most this many frames by
            piecewise aggregate approximation (None: never).
        normalize: ``"none"`` (default: the archive's series are z-normalised
            already, and per-series scaling of short multivariate series can
            remove the signal) or ``"zscore"`` (per series and channel).
        method: ``"ridge"`` (kernel ridge on one-hot codes) or ``"svm"``.
        combine: also score sums of the best kernel of each family.
        n_features: random Fourier frequencies of the HMM kernel.
        window_features: about how many step features the window kernel has.
        block_size: sequence pairs per compiled block of the alignment kernel.
        budget: with ``kernels="auto"``, the alignment, signature and HMM
            families are scored only when ``n^2 T^2 <= budget`` (``n`` training
            series, ``T`` their longest length after PAA; None: always). The
            alignment Gram is O(n^2 T^2) per bandwidth and the window kernel
            O(n T) per feature, so on large sets the window kernel alone is
            scored: the default 5e7 keeps every family on ArrowHead (2.1e7),
            BasicMotions (1.6e7), GunPoint (4.1e7) and ItalyPowerDemand (2.6e6)
            and the window family alone on ACSF1 (1.6e8) and OSULeaf (6.6e8),
            where it was the LOO choice among all families anyway (docs/ucr.md).
        selection: ``"nested"`` (default: the pool -- window family, every
            family, or 1-NN DTW -- chosen by nested-CV accuracy, module notes)
            or ``"loo"`` (the LOO choice over every candidate, no DTW; the
            behaviour before issue 43).
        dtw_budget: with ``kernels="auto"`` and ``selection="nested"``, the
            DTW fallback is scored when ``n^2 T^2 <= dtw_budget`` (T after PAA;
            None: never). 1e9 is about 250 series of 128 frames.
        max_select: with more training series than this, the kernel, the sum
            and the ridge are chosen on a stratified random subset of this many
            (the LOO choice takes an ``n x n`` eigendecomposition per option,
            O(n^3): ten minutes and more at ``n`` = 8,926) and the kept kernel's
            ridge is then fitted on every series (one Cholesky solve); only the
            kept kernel's ``n x n`` Gram is formed. None: always all series.
        key: ``jax.random`` key (HMM restarts, Fourier features, the outer
            folds, the selection subset); None means ``jax.random.key(0)``.

    Attributes (after ``fit``):
        classes_, n_channels_ (``d``), n_features_in_ (a 2-D array's
        columns, scikit-learn's convention), selected_ (the chosen components'
        settings and weights), loo_accuracy_, loo_error_, alpha_, scores_ (every
        candidate's LOO error and accuracy), C_ (svm), selection_rows_ (the
        training series the choice was made on; None: all, see
        ``max_select``), procedure_ (``"window"``, ``"all"`` or ``"dtw"``),
        procedure_scores_ (each pool's nested-CV accuracy and the DTW rule's
        LOO accuracy; empty when nothing was to be chosen).

    Cost: the alignment kernel dominates, O(n^2 T^2 d) per bandwidth on the
    training set and O(m n T^2 d) to predict m sequences (T after PAA); the
    HMM kernel is O(n T N (N + F)) plus the EM fit; selection O(s^3) per
    candidate (``s = min(n, max_select)``), times the number of outer folds
    (at most 30) for the nested choice of pool, then O(n^3 / 3) for the kept
    kernel's ridge when ``n > max_select``; the DTW fallback O(n^2 T^2) to fit
    and O(m n T^2) to predict. Memory O(n^2) per candidate Gram (the window
    kernel's O(n p) features and only the kept ``n x n`` Gram past
    ``max_select``).

    Examples:
        >>> import numpy as np
        >>> rng = np.random.default_rng(0)
        >>> t = np.linspace(0, 1, 30)
        >>> X = np.stack([np.sin(2 * np.pi * (1 + c) * t) + 0.1 * rng.normal(size=30)
        ...               for c in (0, 1) * 8])
        >>> y = np.array([0, 1] * 8)
        >>> clf = SequenceKernelClassifier(kernels=("gak",)).fit(X, y)
        >>> clf.predict(X[:4]).tolist()
        [0, 1, 0, 1]
    """

    def __init__(self, kernels="auto", *, hmm="em", mode_weighting="elbo",
                 n_states="auto",
                 derivative="auto", max_length=128, normalize="none",
                 method="ridge", combine=True, n_features=64,
                 window_features=10_000, block_size=512, budget=5e7,
                 selection="nested", dtw_budget=1e9, max_select=2048, key=None):
        self.kernels = kernels
        self.hmm = hmm
        self.mode_weighting = mode_weighting
        self.n_states = n_states
        self.derivative = derivative
        self.max_length = max_length
        self.normalize = normalize
        self.method = method
        self.combine = combine
        self.n_features = n_features
        self.window_features = window_features
        self.block_size = block_size
        self.budget = budget
        self.selection = selection
        self.dtw_budget = dtw_budget
        self.max_select = max_select
        self.key = key

    # ------------------------------------------------------------ options
    def _families(self, n=None, t_max=None):
        return candidate_families(self.kernels, n, t_max, budget=self.budget,
                                  max_length=self.max_length)

    def _check_options(self):
        if self.hmm not in ("em", "bayes"):
            raise ValueError(f"hmm must be 'em' or 'bayes', got {self.hmm!r}")
        if self.mode_weighting not in MODE_WEIGHTINGS:
            raise ValueError(f"mode_weighting must be one of {MODE_WEIGHTINGS}, got "
                             f"{self.mode_weighting!r}")
        if self.method not in ("ridge", "svm"):
            raise ValueError(f"method must be 'ridge' or 'svm', got {self.method!r}")
        if self.normalize not in ("none", "zscore"):
            raise ValueError(
                f"normalize must be 'none' or 'zscore', got {self.normalize!r}")
        if self.combine not in (True, False):
            raise ValueError(f"combine must be True or False, got {self.combine!r}")
        if self.max_length is not None:
            check_integer(self.max_length, "max_length", minimum=2)
        check_integer(self.n_features, "n_features", minimum=1)
        check_integer(self.window_features, "window_features", minimum=1,
                      maximum=10**6)
        check_integer(self.block_size, "block_size", minimum=1)
        if self.budget is not None:
            check_positive(self.budget, "budget")
        if self.selection not in ("nested", "loo"):
            raise ValueError(f"selection must be 'nested' or 'loo', got "
                             f"{self.selection!r}")
        if self.dtw_budget is not None:
            check_positive(self.dtw_budget, "dtw_budget")
        if self.max_select is not None:
            check_integer(self.max_select, "max_select", minimum=2)
        if self.n_states != "auto":
            check_integer(self.n_states, "n_states", minimum=1, maximum=64)
        if self.derivative != "auto":
            w = self.derivative
            if isinstance(w, bool) or not isinstance(w, int | float) or not (
                    np.isfinite(w) and w >= 0):
                raise ValueError(f"derivative must be 'auto' or a float >= 0, got "
                                 f"{w!r}")
        key = check_key(self.key, "key", allow_none=True)
        return jax.random.key(0) if key is None else key

    # ---------------------------------------------------------------- fit
    def fit(self, X, y):
        """Fit on ``X`` (sequences) and labels ``y``; returns ``self``.

        Raises:
            ValueError / TypeError: empty or non-finite sequences, mixed ``d``,
                a ``y`` of another length or fewer than two classes, bad options.
        """
        key = self._check_options()
        seqs = _as_sequences(X)
        if y is None:
            raise ValueError("SequenceKernelClassifier requires y to be passed, but "
                             "the target y is None")
        y = np.asarray(y)
        if y.ndim == 2 and y.shape[1] == 1:
            y = column_or_1d(y, warn=True)
        if y.ndim != 1 or len(y) != len(seqs):
            raise ValueError(f"y must be 1-D with one label per sequence "
                             f"({len(seqs)}), got shape {y.shape}")
        check_classification_targets(y)
        self._le = LabelEncoder().fit(y)
        self.classes_ = self._le.classes_
        if len(self.classes_) < 2:
            raise ValueError(f"y has {len(self.classes_)} class; need at least 2")
        y_idx = self._le.transform(y)
        self.n_channels_ = seqs[0].shape[1]
        if _is_table(X):
            # scikit-learn's convention for a 2-D array: its columns (the length)
            self.n_features_in_ = np.shape(X)[1]
        if self.normalize == "zscore":
            seqs = _znorm(seqs)
        Y = _one_hot(y_idx, len(self.classes_))
        # the series the choice is made on (all of them up to max_select)
        rows = self.selection_rows_ = self._selection_rows(y_idx, key)
        Ys, ys = (Y, y_idx) if rows is None else (Y[rows], y_idx[rows])
        t_max = max(len(s) for s in seqs)
        ragged = min(len(s) for s in seqs) < t_max
        specs = candidate_specs(
            self._families(len(seqs), t_max), key, self.n_channels_,
            derivative=self.derivative, ragged=ragged, max_length=self.max_length,
            window_features=self.window_features, block_size=self.block_size,
            n_states=self.n_states, hmm=self.hmm, n_features=self.n_features,
            mode_weighting=self.mode_weighting)
        comps, fams, scores, sizes = fit_candidates(specs, seqs, Y, rows)
        dtw = dtw_fallback(seqs, t_max, kernels=self.kernels,
                           nested=self.selection == "nested",
                           dtw_budget=self.dtw_budget, max_length=self.max_length,
                           block_size=self.block_size)
        seed = int(jax.random.randint(jax.random.fold_in(key, 7), (), 0, 2**31 - 1))
        D = None if dtw is None else (dtw.D_ if rows is None
                                      else dtw.D_[np.ix_(rows, rows)])
        grams = [component_gram(c, rows) for c in comps]
        config = choose_configuration(grams, fams, Ys, ys, seed, D,
                                      nested=self.selection == "nested",
                                      combine=self.combine, sizes=sizes, scores=scores)
        del grams
        self.procedure_, self.procedure_scores_ = (config.procedure,
                                                   config.procedure_scores)
        if self.procedure_ == "dtw":
            self.components_, self.weights_ = [dtw], np.ones(1)
            self.selected_ = [dict(describe_component(dtw), weight=1.0)]
            self.loo_accuracy_ = self.procedure_scores_["dtw"]
            self.loo_error_, self.alpha_, self.scores_ = float("nan"), None, []
            d_nn = np.where(np.eye(len(y_idx), dtype=bool), np.inf, dtw.D_).min(1)
            self._dtw_scale = float(np.median(d_nn)) or 1.0
            self._y_idx = y_idx
            return self
        options, results = config.options, config.results
        sub, w = options[config.best]
        self.loo_error_, self.loo_accuracy_, self.alpha_, _ = results[config.best]
        self.components_ = [comps[i] for i in sub]
        self.weights_ = np.asarray(w)
        self.selected_ = [dict(describe_component(comps[i]), weight=wi)
                          for i, wi in zip(sub, w, strict=True)]
        self.scores_ = [dict(describe_component(comps[sub[0]]) if len(sub) == 1 else
                             {"sum": [describe_component(comps[i]) for i in sub],
                              "weights": list(w)}, loo_error=r[0], loo_accuracy=r[1],
                             loo_error_se=r[3])
                        for (sub, w), r in zip(options, results, strict=True)]
        K = sum(wi * c.K_ for c, wi in zip(self.components_, self.weights_,
                                           strict=True))
        self._fit_final(K, Y, y_idx, key, rows)
        return self

    def _selection_rows(self, y_idx, key):
        """None, or a stratified random subset of ``max_select`` series (each
        class keeps its share, at least one series)."""
        n = len(y_idx)
        if self.max_select is None or n <= self.max_select:
            return None
        rng = np.random.default_rng(int(jax.random.randint(
            jax.random.fold_in(key, 11), (), 0, 2**31 - 1)))
        classes = np.unique(y_idx)
        take = {c: max(1, int(round(self.max_select * np.mean(y_idx == c))))
                for c in classes}
        rows = np.concatenate([rng.choice(np.flatnonzero(y_idx == c), min(
            take[c], int(np.sum(y_idx == c))), replace=False) for c in classes])
        return np.sort(rows)

    def _fit_final(self, K, Y, y_idx, key, rows=None):
        n = len(y_idx)
        if self.method == "ridge":
            K = K + RIDGE_INTERCEPT
            A = K + self.alpha_ * np.eye(n)
            if rows is None:
                self.dual_coef_ = np.linalg.solve(A, Y)
                _, preds = loo_ridge_scores(K, Y, [self.alpha_])
                self.temperature_ = _fit_temperature(preds[0], y_idx)
                return
            del K
            try:  # K + 1 + alpha I is positive definite: Cholesky, n^3 / 3
                self.dual_coef_ = scipy.linalg.solve(A, Y, assume_a="pos",
                                                     overwrite_a=True)
            except np.linalg.LinAlgError:
                self.dual_coef_ = np.linalg.solve(A, Y)
            # the softmax temperature from the LOO predictions on the subset
            # the choice was made on (an n x n eigendecomposition is what the
            # subset avoids)
            Ks = sum(wi * component_gram(c, rows) for c, wi in zip(
                self.components_, self.weights_, strict=True)) + RIDGE_INTERCEPT
            _, preds = loo_ridge_scores(Ks, Y[rows], [self.alpha_])
            self.temperature_ = _fit_temperature(preds[0], y_idx[rows])
            return
        counts = np.bincount(y_idx)
        folds = int(min(5, counts.min()))
        grid = (0.1, 1.0, 10.0, 100.0)
        if folds >= 2:
            seed = int(jax.random.randint(key, (), 0, 2**31 - 1))
            cv = StratifiedKFold(folds, shuffle=True, random_state=seed)
            acc = np.zeros(len(grid))
            for tr, te in cv.split(np.zeros(n), y_idx):
                if len(np.unique(y_idx[tr])) < 2:
                    continue
                for j, C in enumerate(grid):
                    m = SVC(C=C, kernel="precomputed").fit(K[np.ix_(tr, tr)], y_idx[tr])
                    acc[j] += np.sum(m.predict(K[np.ix_(te, tr)]) == y_idx[te])
            self.C_ = grid[int(np.argmax(acc))]
        else:
            self.C_ = 1.0
        self.svm_ = SVC(C=self.C_, kernel="precomputed", probability=True,
                        random_state=0).fit(K, y_idx)

    # ------------------------------------------------------------ predict
    def _cross(self, X):
        check_is_fitted(self, "components_")
        seqs = _as_sequences(X)
        if hasattr(self, "n_features_in_") and _is_table(X) and (
                np.shape(X)[1] != self.n_features_in_):
            raise ValueError(
                f"X has {np.shape(X)[1]} features, but SequenceKernelClassifier is "
                f"expecting {self.n_features_in_} features as input (a 2-D array's "
                f"columns are time steps; pass a list for other lengths)")
        if seqs[0].shape[1] != self.n_channels_:
            raise ValueError(f"X has d = {seqs[0].shape[1]} channels, the classifier "
                             f"was fitted with d = {self.n_channels_}")
        if self.normalize == "zscore":
            seqs = _znorm(seqs)
        return sum(w * c.cross(seqs) for c, w in zip(self.components_, self.weights_,
                                                     strict=True))

    def decision_function(self, X):
        """Scores ``(n,)`` (two classes: positive means ``classes_[1]``) or
        ``(n, n_classes)``."""
        Kt = self._cross(X)
        if self.procedure_ == "dtw":
            F = self._dtw_scores(Kt)
        elif self.method == "ridge":
            F = (Kt + RIDGE_INTERCEPT) @ self.dual_coef_
        else:
            return self.svm_.decision_function(Kt)
        return F[:, 1] - F[:, 0] if len(self.classes_) == 2 else F

    def predict_proba(self, X):
        """Class probabilities ``(n, n_classes)``."""
        Kt = self._cross(X)
        if self.procedure_ == "dtw":
            return _softmax(self._dtw_scores(Kt))
        if self.method == "svm":
            return self.svm_.predict_proba(Kt)
        return _softmax(self.temperature_ * ((Kt + RIDGE_INTERCEPT) @ self.dual_coef_))

    def predict(self, X):
        """Predicted labels ``(n,)``."""
        Kt = self._cross(X)
        if self.procedure_ == "dtw":
            return self.classes_[np.argmax(self._dtw_scores(Kt), axis=1)]
        if self.method == "svm":
            return self.classes_[self.svm_.predict(Kt)]
        scores = (Kt + RIDGE_INTERCEPT) @ self.dual_coef_
        return self.classes_[np.argmax(scores, axis=1)]

    def _dtw_scores(self, D):
        """Minus each class's nearest DTW distance over the median training
        nearest-neighbour distance ``(m, n_classes)``: argmax is the 1-NN rule."""
        out = np.full((D.shape[0], len(self.classes_)), -np.inf)
        for c in range(len(self.classes_)):
            out[:, c] = -D[:, self._y_idx == c].min(axis=1) / self._dtw_scale
        return out

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.allow_nan = False
        tags.non_deterministic = False
        return tags


def _softmax(Z):
    Z = Z - Z.max(axis=1, keepdims=True)
    E = np.exp(Z)
    return E / E.sum(axis=1, keepdims=True)


def _fit_temperature(F_loo, y_idx):
    """The softmax temperature minimising the LOO log loss, on a log grid."""
    grid = 10.0 ** np.linspace(-1, 2.5, 36)
    losses = [-np.mean(np.log(np.maximum(_softmax(t * F_loo)[np.arange(len(y_idx)),
                                                           y_idx], 1e-300)))
              for t in grid]
    return float(grid[int(np.argmin(losses))])
