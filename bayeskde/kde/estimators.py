"""Kernel Dependency Estimation (Weston et al. 2002) and its k-NN baseline.

KDE learns a map between general objects in three steps (section 3):

1. kernel PCA of the output Gram matrix L, giving p directions v_n in output
   feature space and training targets (v_n . Phi(y_i));
2. kernel ridge regression from the input kernel onto all p targets with one
   factorisation, f_n(x) = sum_i beta_in k(x_i, x) (eq. (6));
3. a pre-image y(x) = argmin_y ||(v_n . Phi(y))_n - (f_n(x))_n|| (see
   :mod:`bayeskde.kde.preimage`).

Ridge convention. The paper minimises (1/m) sum_i (y_i - w . Phi(x_i))^2 +
gamma ||w||^2, whose dual solution is beta = (K + m gamma I)^-1 y; ``ridge`` is the
paper's gamma, so the grid {1e-4, ..., 1e1} of section 4 means what it meant there.

The pure functions live in :mod:`bayeskde.kde.core`; these estimators are
scikit-learn facades over them. Model selection by
cross-validation lives in :mod:`bayeskde.kde.cv`.
"""

from __future__ import annotations

import functools
import math

import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float
from sklearn.utils.validation import check_is_fitted

from .._validation import (
    as_float_array,
    check_choice,
    check_data,
    check_integer,
    check_key,
    check_nonnegative,
    check_positive,
    check_same_length,
)
from ..kpca.approximate import lowrank_kpca_transform, nystroem_kpca
from ..kpca.core import kernel_pca, kpca_transform
from ..lowrank import (
    CENTER_METHODS,
    falkon,
    krr_predict,
    nystroem_krr,
    select_centers,
)
from ..lowrank.blocked import resolve_vector_kernel
from .base import DependencyBase, check_kind, make_kernels
from .core import (
    LowRankKDEFit,
)
from .padded import (
    fit_padded,
    pad_host,
    predict_padded,
    transform_padded,
    unpad_fit,
)
from .preimage import fixed_point_preimage, nearest_candidates

__all__ = [
    "SOLVERS",
    "KernelDependencyEstimator",
    "KNNDependencyEstimator",
]

PREIMAGES = ("candidates", "linear", "fixed_point")
#: ``solver`` values of :class:`KernelDependencyEstimator`.
SOLVERS = ("exact", "nystroem", "falkon")


@functools.partial(jax.jit, static_argnames="k")
def _nearest(train_diag, K_test, k):
    # top_k is O(m k) per row, against O(m log m) for a full argsort.
    return jax.lax.top_k(2.0 * K_test - train_diag[None, :], k)[1]


class KernelDependencyEstimator(DependencyBase):
    """Kernel Dependency Estimation (Weston, Chapelle, Elisseeff, Schölkopf, Vapnik
    2002): output KPCA, kernel ridge regression onto every component, pre-image.

    Args:
        input_kernel, input_kernel_params: the input kernel k, by name with a params
            dict (e.g. ``"rbf", {"sigma": 1.0}``), a callable ``k(A, B)``, or
            ``"precomputed"`` (then X is the Gram matrix in fit and the
            ``(n_test, n_train)`` cross-kernel in predict). Defaults: ``"rbf"``
            with ``gamma="median"``, the median heuristic on the training inputs
            (outputs for the output kernel), gamma = 1 / (2 m^2) with m the
            median distance between distinct rows; the resolved value is in
            ``input_kernel_.params`` / ``output_kernel_.params``. The string
            kernel defaults to ``r=3, lam=0.5, mode="mean"``
            (:mod:`bayeskde.kernels.registry` lists every default's rule).
        output_kernel, output_kernel_params: the output kernel l, which defines
            the loss ||Phi(y) - Phi(y')||^2. With ``"precomputed"`` Y is the output
            Gram matrix and ``predict`` returns indices of training outputs.
        n_components: number p of output principal components; ``None`` keeps all
            with non-zero eigenvalue (at most ``n_centers`` for the low-rank
            solvers).
        ridge: the paper's ridge gamma (the system solved is K + m gamma I).
        preimage: ``"candidates"`` (closest candidate in the projection space, the
            paper's choice), ``"linear"`` (explicit, for the linear/regression
            output kernel) or ``"fixed_point"`` (RBF output kernel on vectors).
        candidates: the candidate outputs; ``None`` means the training outputs.
        fixed_point_iter: iterations of the fixed-point pre-image.
        solver: ``"exact"`` (the paper's O(m^3) path), ``"nystroem"`` (output
            KPCA and ridge regression on Nystroem subspaces, solved directly) or
            ``"falkon"`` (the same output KPCA; the ridge system by Falkon's
            preconditioned conjugate gradients, Rudi et al. 2017). The low-rank
            solvers need vector kernels (``"rbf"``, ``"polynomial"``, ``"linear"``,
            ``"regression"``) and ``preimage`` ``"candidates"`` or ``"linear"``;
            see :mod:`bayeskde.lowrank`.
        n_centers: Nystroem centres M for the input and the output side; ``None``
            means min(m, ceil(5 sqrt(m))).
        centers: how centres are chosen: ``"uniform"``, ``"kmeans++"`` or
            ``"leverage"`` (approximate ridge leverage scores at the fit's ridge).
        block_size: rows of a kernel block formed at once by the low-rank
            solvers (``None``: whole m x M matrices).
        max_iter: most conjugate-gradient iterations of ``"falkon"``.
        key: ``jax.random`` key for the centre selection (keyword-only);
            ``None`` means ``jax.random.key(0)``.
        memoize: reuse the output kernel PCA of an earlier exact fit in this
            process on identical outputs with the same output kernel and
            ``n_components`` (keyword-only; :mod:`bayeskde.kde.memo`: a bounded
            LRU keyed by a content fingerprint, every hit checked element by
            element). A grid search over input kernels and ridges then pays the
            output ``eigh`` once per training set. ``False`` always recomputes.

    Attributes:
        input_kernel_, output_kernel_: resolved kernels with their parameters.
        fit_: :class:`KDEFit`, or :class:`LowRankKDEFit` for the low-rank solvers.
        n_samples_fit_: number of training pairs.
        n_features_in_: number of input features (Gram columns for
            ``"precomputed"``; not set for string inputs).
        solver_, n_centers_, centers_: the resolved solver, number of centres
            (``None`` for ``"exact"``) and centre method.
        input_center_indices_, output_center_indices_: the training rows used as
            centres (low-rank solvers).

    Cost: fit O(m^3) time and O(m^2) memory; predict O(t m (d + p) + t c p) for
    t test points and c candidates. The exact solver runs three compiled
    programs (:mod:`bayeskde.kde.padded`): training, candidate and test sizes
    are padded to size buckets (at most 1/8 more rows), so nearby sizes reuse
    them, and the output ``eigh`` is skipped when ``memoize`` finds it.
    Low-rank: fit O(m M (d + M + p) + M^3)
    (``"nystroem"``) or O(s m M (d + p) + M^3) for s CG iterations
    (``"falkon"``), memory O(M^2 + block_size M + m p); predict O(t M (d + p)).

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
        solver="exact",
        n_centers=None,
        centers="uniform",
        block_size=None,
        max_iter=100,
        *,
        key=None,
        memoize=True,
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
        self.solver = solver
        self.n_centers = n_centers
        self.centers = centers
        self.block_size = block_size
        self.max_iter = max_iter
        self.key = key
        self.memoize = memoize

    def fit(self, X, Y):
        """Fit on pairs (X, Y); X and Y may be arrays or lists of strings."""
        ridge = check_nonnegative(self.ridge, "ridge")
        check_choice(self.preimage, "preimage", PREIMAGES)
        check_choice(self.solver, "solver", SOLVERS)
        self.fixed_point_iter_ = check_integer(
            self.fixed_point_iter, "fixed_point_iter", minimum=1)
        check_key(self.key, "key", allow_none=True)
        if self.solver != "exact":
            return self._fit_lowrank(X, Y)
        self.solver_, self.n_centers_, self.centers_ = "exact", None, None
        K, L = self._setup(X, Y, lazy=True)
        n = K.shape[0] if K is not None else len(self.X_fit_)
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
        self._padded = fit_padded(
            self.input_kernel_, self.output_kernel_, self.X_fit_, self.Y_fit_, K, L,
            ridge, self.n_components, bool(self.memoize))
        self._fit_state = {"padded": self._padded, "fit": None}
        self.candidate_proj_ = self._padded_candidates(n)
        self.n_samples_fit_ = n
        return self

    @property
    def fit_(self):
        # Documented under the class's Attributes (a docstring here would make
        # autodoc describe it twice). The exact solver keeps the padded fit and
        # cuts the unpadded KDEFit from it on first access.
        state = self.__dict__.get("_fit_state")
        if state is None:
            raise AttributeError("fit_")
        if state["fit"] is None:
            state["fit"] = unpad_fit(state["padded"])
        return state["fit"]

    @fit_.setter
    def fit_(self, value):
        self._fit_state = {"padded": None, "fit": value}

    @property
    def candidate_proj_(self):
        """Projections of the candidate outputs (the training projections when
        ``candidates`` is ``None``)."""
        if "_candidate_proj" not in self.__dict__:
            raise AttributeError("candidate_proj_")
        proj = self._candidate_proj
        return self.fit_.train_proj if proj is None else proj

    @candidate_proj_.setter
    def candidate_proj_(self, value):
        self._candidate_proj = value

    def _padded_candidates(self, n):
        """Candidate projections: public (real rows and components) and, for
        user candidates, padded for the predict program (``_cand_padded``)."""
        self._cand_out, self._cand_padded = None, None
        if self.candidates is None:
            return None  # the training projections (fit_.train_proj)
        if self.output_kernel_.precomputed:
            G = as_float_array(self.candidates, "candidates", ndim=2)
            if G.shape[1] != n:
                raise ValueError(
                    "with a precomputed output kernel, candidates must be the "
                    f"(n_candidates, {n}) kernel against the training outputs"
                )
        else:
            C = check_data(self.candidates, "candidates")
            check_kind(C, self.Y_fit_, "candidates")
            self._cand_out = (
                list(C) if isinstance(C, tuple) else np.array(self.candidates))
            G = self.output_kernel_.gram(C, self.Y_fit_)
        proj = transform_padded(self._padded, G)
        self._cand_padded = (proj, G.shape[0])
        return jnp.asarray(
            np.asarray(proj)[: G.shape[0], : self._padded.n_components])

    def _engine(self, X, preimage):
        """Run the exact predict program block by block of test rows."""
        X = self._validate_test(X)
        cand = self._cand_padded if preimage == "candidates" else None
        outs = []
        for start in range(0, len(X) if isinstance(X, tuple) else X.shape[0],
                           self.batch_size):
            block = X[start : start + self.batch_size]
            out, finite = predict_padded(self._padded, self.input_kernel_, block,
                                         preimage, self.X_fit_, *(cand or ()))
            if not finite:  # the kernel's own overflow message
                self.input_kernel_.gram(block, self.X_fit_)
                raise ValueError("the test-versus-training kernel is not finite")
            outs.append(out)
        return np.concatenate(outs)

    def _fit_lowrank(self, X, Y):
        """Nystroem output KPCA + Nystroem/Falkon ridge (see ``solver``)."""
        ridge = check_positive(self.ridge, f"ridge (solver={self.solver!r})")
        if self.preimage == "fixed_point":
            raise ValueError(
                f"solver={self.solver!r} supports preimage 'candidates' or "
                "'linear', got 'fixed_point'"
            )
        check_choice(self.centers, "centers", CENTER_METHODS)
        kin, kout = make_kernels(self)
        kin = resolve_vector_kernel(kin, None, "input_kernel")
        kout = resolve_vector_kernel(kout, None, "output_kernel")
        if self.preimage == "linear" and kout.name not in ("linear", "regression"):
            raise ValueError(
                "preimage='linear' needs output_kernel 'linear' or 'regression', "
                f"got {kout.name!r}"
            )
        Xa = check_data(X, "X", min_samples=2, allow_1d=False)
        Ya = check_data(Y, "Y", min_samples=2)
        for arr, name in ((Xa, "X"), (Ya, "Y")):
            if isinstance(arr, tuple):
                raise ValueError(
                    f"solver={self.solver!r} needs numeric arrays for {name}, got "
                    "strings"
                )
        check_same_length(Xa, Ya, "X", "Y")
        self.input_kernel_, self.output_kernel_ = kin.fit(Xa), kout.fit(Ya)
        self.n_features_in_ = Xa.shape[1]
        n = Xa.shape[0]
        m = (min(n, math.ceil(5 * math.sqrt(n))) if self.n_centers is None
             else check_integer(self.n_centers, "n_centers", minimum=1, maximum=n))
        p = None if self.n_components is None else check_integer(
            self.n_components, "n_components", minimum=1, maximum=m)
        bs = None if self.block_size is None else check_integer(
            self.block_size, "block_size", minimum=1)
        iters = check_integer(self.max_iter, "max_iter", minimum=1)
        key = jax.random.key(0) if self.key is None else self.key
        k_in, k_out = jax.random.split(key)
        kin, kout = self.input_kernel_, self.output_kernel_
        out_idx = select_centers(k_out, Ya, m, method=self.centers, kernel=kout,
                                 ridge=ridge, block_size=bs)
        in_idx = select_centers(k_in, Xa, m, method=self.centers, kernel=kin,
                                ridge=ridge, block_size=bs)
        kp = nystroem_kpca(kout, Ya, Ya[out_idx], p, block_size=bs)
        if p is None:
            # Components with a zero eigenvalue carry no direction (a linear
            # output kernel on q outputs has q): do not regress onto them.
            lam = kp.eigenvalues
            keep = max(int(jnp.sum(lam > jnp.finfo(lam.dtype).eps
                                   * jnp.maximum(lam[0], 1.0) * n)), 1)
            kp = kp._replace(eigenvalues=lam[:keep], coef=kp.coef[:, :keep],
                             offset=kp.offset[:keep])
        T = lowrank_kpca_transform(kout, kp, Ya, block_size=bs)
        if self.solver == "falkon":
            krr = falkon(kin, Xa, T, Xa[in_idx], ridge, block_size=bs,
                         max_iter=iters)
        else:
            krr = nystroem_krr(kin, Xa, T, Xa[in_idx], ridge, block_size=bs)
        self.X_fit_, self.Y_fit_ = Xa, Ya
        self._y_out = np.array(Y)
        self.ridge_ = ridge
        self.solver_, self.n_centers_, self.centers_ = self.solver, m, self.centers
        self.input_center_indices_ = np.asarray(in_idx)
        self.output_center_indices_ = np.asarray(out_idx)
        self.fit_ = LowRankKDEFit(kp, krr, T)
        if self.preimage == "linear":
            # sum_i g_i y_i with the training weights a_n = T[:, n] / lambda_n
            # (feature_weights in bayeskde.kde.preimage): mean(Y) + F Lambda^-1 T^T Yc.
            lam = kp.eigenvalues
            eps = jnp.finfo(T.dtype).eps * jnp.maximum(lam[0], 1.0) * n
            inv = jnp.where(lam > eps, 1.0 / jnp.maximum(lam, eps), 0.0)
            Ymean = jnp.mean(Ya, axis=0)
            self._linear_map = (Ymean, inv[:, None] * (T.T @ (Ya - Ymean[None, :])))
        self._cand_out = None
        if self.candidates is None:
            self.candidate_proj_ = T
        else:
            C = check_data(self.candidates, "candidates")
            check_kind(C, Ya, "candidates")
            self._cand_out = np.array(self.candidates)
            self.candidate_proj_ = lowrank_kpca_transform(kout, kp, C, block_size=bs)
        self.n_samples_fit_ = n
        return self

    def _lowrank_features(self, X):
        """Predicted projections, block by block of test rows (low-rank solvers)."""
        X = self._validate_test(X)
        bs = self.block_size
        for start in range(0, X.shape[0], self.batch_size):
            yield krr_predict(self.input_kernel_, self.fit_.krr,
                              X[start : start + self.batch_size], block_size=bs)

    def predict_features(self, X) -> Float[Array, "n_test n_components"]:
        """The predicted output projections (f_1(x), ..., f_p(x))."""
        if getattr(self, "solver_", "exact") != "exact":
            return jnp.concatenate(list(self._lowrank_features(X)))
        check_is_fitted(self, "n_samples_fit_")
        return jnp.asarray(self._engine(X, "features"))

    def _predict_block(self, F):
        """Fixed-point pre-images from the predicted projections of one block
        (rows padded to their size bucket, so block sizes share programs)."""
        b = F.shape[0]
        F = jnp.asarray(pad_host(F))
        idx = np.asarray(nearest_candidates(F, self.candidate_proj_))
        dtype = np.dtype(self.Y_fit_.dtype)
        cands = (
            np.asarray(self.Y_fit_) if self._cand_out is None
            else np.asarray(self._cand_out, dtype).reshape(len(self._cand_out), -1)
        )
        res = fixed_point_preimage(
            self.fit_.kpca, F, self.Y_fit_, jnp.asarray(cands[idx]),
            self.output_kernel_.params["gamma"], self.fixed_point_iter_,
        )
        return np.asarray(res.preimages)[:b], np.asarray(res.used_fallback)[:b]

    def predict(self, X):
        """Predict outputs of the training outputs' kind (array or list of strings).

        With ``preimage="fixed_point"`` the attribute ``fixed_point_fallback_``
        marks the test points where the best candidate was kept.
        """
        if getattr(self, "solver_", "exact") != "exact":
            outs = []
            for F in self._lowrank_features(X):
                if self.preimage == "linear":
                    mean, G = self._linear_map
                    outs.append(np.asarray(mean[None, :] + F @ G))
                else:
                    outs.append(np.asarray(nearest_candidates(F,
                                                              self.candidate_proj_)))
            out = np.concatenate(outs)
            return self._outputs(out) if self.preimage == "candidates" else out
        if self.preimage != "fixed_point":
            check_is_fitted(self, "n_samples_fit_")
            out = self._engine(X, self.preimage)
            return self._outputs(out) if self.preimage == "candidates" else out
        check_is_fitted(self, "n_samples_fit_")
        F = self._engine(X, "features")
        parts = [self._predict_block(F[start : start + self.batch_size])
                 for start in range(0, F.shape[0], self.batch_size)]
        self.fixed_point_fallback_ = np.concatenate([f for _, f in parts])
        return np.concatenate([p for p, _ in parts])


    def predict_modes(self, X, k: int = 2, temperature: float | None = None):
        """The k most probable candidate outputs per test point, with masses.

        The pre-image distance of step 3 read as an energy: with the predicted
        projections g(x) = (f_n(x))_n (eq. (6)) and the candidates' projections
        t_c, p(c | x) = softmax_c(-||g(x) - t_c||^2 / tau), i.e. Gaussian noise
        N(0, (tau / 2) I_p) on the p projections and a uniform prior over the
        candidates. Candidates with identical projections are pooled (so a
        repeated output can outweigh the nearest one); as tau -> 0 the first
        mode is the ``"candidates"`` pre-image. ``temperature=None`` estimates
        tau / 2 by maximum likelihood of that Gaussian on held-out pairs: the
        mean squared residual per component of a fit on a random 80% of the
        training pairs (same kernels and ridge), on the other 20%.

        Returns:
            :class:`bayeskde.tgp.modes.Modes` (the result of every
            ``predict_modes``; it unpacks as ``(modes, masses, temperature)``):
            ``modes`` as ``predict`` returns outputs, ``k`` per test point
            (``(n_test, k, ...)`` arrays, or lists of ``k`` outputs), ``masses``
            ``(n_test, k)``, highest first, and the ``temperature`` tau used.

        Raises:
            ValueError: ``k < 1``, ``temperature <= 0``, or ``temperature=None``
                with a precomputed kernel (the held-out fit needs the data).

        Cost: O(t c p) for t test points and c candidates, plus one fit on 80%
        of the data when tau is estimated.
        """
        k = check_integer(k, "k", minimum=1)
        check_is_fitted(self, "n_samples_fit_")
        tau = (self._mode_temperature() if temperature is None
               else check_positive(temperature, "temperature"))
        F = np.asarray(self.predict_features(X), float)
        T = np.asarray(self.candidate_proj_, float)
        _, first, group = np.unique(T, axis=0, return_index=True,
                                    return_inverse=True)
        d2 = np.maximum(np.sum(F * F, 1)[:, None] - 2 * F @ T.T
                        + np.sum(T * T, 1)[None, :], 0.0)
        a = -d2 / tau
        p = np.exp(a - a.max(axis=1, keepdims=True))
        p /= p.sum(axis=1, keepdims=True)
        pooled = np.zeros((len(F), len(first)))
        np.add.at(pooled.T, group.ravel(), p.T)
        top = np.argsort(-pooled, axis=1, kind="stable")[:, :k]
        masses = np.take_along_axis(pooled, top, axis=1)
        out = self._outputs(first[top].ravel())
        if isinstance(out, list):
            modes = [out[i * top.shape[1]:(i + 1) * top.shape[1]]
                     for i in range(len(F))]
        else:
            modes = np.asarray(out).reshape(*top.shape, *np.shape(out)[1:])
        # The one result type of every predict_modes lives with the Twin GP's
        # modes; imported here, at call time, since kde/ sits below tgp/.
        from ..tgp.modes import Modes

        return Modes(modes=modes, masses=masses, temperature=float(tau))

    def _mode_temperature(self) -> float:
        """tau of :meth:`predict_modes` from a held-out 20% (see there)."""
        from sklearn.base import clone

        if self.input_kernel_.precomputed or self.output_kernel_.precomputed:
            raise ValueError("pass temperature= with a precomputed kernel: "
                             "estimating it refits on part of the raw data")
        m = self.n_samples_fit_
        if m < 5:
            raise ValueError(f"need at least 5 training pairs to estimate the "
                             f"temperature, got {m}; pass temperature=")
        perm = np.random.default_rng(0).permutation(m)
        val, keep = perm[: max(1, m // 5)], perm[max(1, m // 5):]

        def take(A, idx):
            return [A[i] for i in idx] if isinstance(A, list | tuple) else (
                np.asarray(A)[idx])

        params = {"candidates": take(self._y_out, val), "memoize": False}
        if isinstance(self.input_kernel, str):
            params["input_kernel_params"] = dict(self.input_kernel_.params)
        if isinstance(self.output_kernel, str):
            params["output_kernel_params"] = dict(self.output_kernel_.params)
        sub = clone(self).set_params(**params).fit(
            take(self.X_fit_, keep), take(self._y_out, keep))
        R = (np.asarray(sub.predict_features(take(self.X_fit_, val)), float)
             - np.asarray(sub.candidate_proj_, float))
        return float(2.0 * np.mean(R * R))


class KNNDependencyEstimator(DependencyBase):
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
