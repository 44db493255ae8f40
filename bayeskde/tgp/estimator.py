"""Twin Gaussian Processes (Bo and Sminchisescu 2010): the estimator.

:class:`TwinGP` predicts the output y of a test input x by making the output
kernel of the training set augmented with y resemble the input kernel of the
training set augmented with x, under the KL criterion (eq. (14)) or the HSIC
criterion (eq. (19)); both kernels are RBFs, optionally passed through a learned
polynomial transform (:class:`bayeskde.PolynomialKernelTransform`,
Ghosh et al., section 5). The energies, their per-test-point states and the
batched BFGS minimiser are in :mod:`bayeskde.tgp.energy`; the compiled predictions in
:mod:`bayeskde.tgp.predict`; the S-shape baselines in :mod:`bayeskde.tgp.baselines`;
the neighbour search in :mod:`bayeskde.tgp.neighbors`; the tempered predictive
behind :meth:`TwinGP.predict_modes` in :mod:`bayeskde.tgp.modes`.

Starts. The original release starts BFGS from a ridge linear regression. The
HSIC energy E = -2 c^T k_y - M_nn k(y, y) tends to a constant as y leaves the
data (k_y -> 0), so from a start where c^T k_y < 0 descent runs off the data;
the KL energy has the same plateau. ``init="best"`` evaluates the energy at the
linear start and at the outputs of the ``init_neighbors`` nearest training
inputs and starts from the lowest (all test points at once, no Python loop).

Scale. Local models (``n_neighbors``) without a transform never form a training
Gram or a test-by-training kernel matrix: neighbours come from a search blocked
over training rows, and each test point's Grams are built from its neighbours
only, so m = 10^5 training points cost O(m d) memory besides the blocks.
Predictions shard across devices with :func:`tgp_predict_sharded` (or
``TwinGP(shard=True)``), through :func:`bayeskde.distributed.sharded_batch_map`.

References:
    Bo and Sminchisescu (2010), "Twin Gaussian Processes for Structured
    Prediction", IJCV 87, eqs. (14) and (19), section 5 (k-NN TGP).
"""

from __future__ import annotations

import inspect
import warnings
import weakref

import jax
import jax.numpy as jnp
import numpy as np
from sklearn.base import BaseEstimator, clone
from sklearn.utils.validation import check_is_fitted

from .._validation import (
    as_float_array,
    check_choice,
    check_data,
    check_integer,
    check_nonnegative,
    check_positive,
    check_same_length,
    check_squared_range,
    is_string_data,
    warn_once,
)
from ..kernels.polynomial_transform import PolynomialKernelTransform
from ..kernels.standard import median_gamma, rbf_gram
from ..kernels.transforms import BASES
from .baselines import gp_predict, weighted_knn_predict
from .batch import check_tgp_test_inputs
from .energy import (
    CRITERIA,
    FORWARD_MODE_MAX_DIM,
    HSICState,
    KLState,
    OutputKernel,
    TGPSolution,
    tgp_hsic_energy,
    tgp_hsic_state,
    tgp_kl_energy,
    tgp_kl_state,
    tgp_minimize,
)
from .fitting import (
    Whitening,
    fit_rbf,
    input_factor,
    linear_init_weights,
    linear_init_weights_jit,
    truncated_whitening,
)
from .modes import Modes, tgp_modes
from .neighbors import (
    DEFAULT_BLOCK_SIZE,
    nearest_neighbors,
)
from .predict import (
    INITS,
    TGPModel,
    predict_global,
    predict_local,
    search,
    sharded_fn,
    tgp_predict_sharded,
)

__all__ = [
    "CRITERIA",
    "INITS",
    "FORWARD_MODE_MAX_DIM",
    "OutputKernel",
    "KLState",
    "HSICState",
    "TGPSolution",
    "tgp_kl_state",
    "tgp_hsic_state",
    "tgp_kl_energy",
    "tgp_hsic_energy",
    "tgp_minimize",
    "Whitening",
    "truncated_whitening",
    "linear_init_weights",
    "gp_predict",
    "weighted_knn_predict",
    "nearest_neighbors",
    "tgp_predict_sharded",
    "TwinGP",
]

# The deprecated ``TwinGP.solution_``: the last solution of each estimator, kept
# outside the estimator (``predict`` leaves its state unchanged).
_LAST_SOLUTION: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _resolve_transform(value):
    """``kernel_transform`` as an unfitted transform object or ``None``."""
    if value is None:
        return None
    if isinstance(value, str):
        if value not in BASES:
            raise ValueError(
                f"kernel_transform must be None, a basis name {BASES} or an "
                f"unfitted transform object, got {value!r}")
        return PolynomialKernelTransform(basis=value)
    missing = [a for a in ("fit", "get_params") if not hasattr(value, a)]
    if missing:
        raise TypeError(
            f"kernel_transform must be None, a basis name {BASES} or an unfitted "
            f"transform object with fit and get_params (a "
            f"PolynomialKernelTransform), got {type(value).__name__} {value!r}")
    return value


class TwinGP(BaseEstimator):
    """Twin Gaussian Process regression (Bo and Sminchisescu 2010).

    Args:
        criterion: ``"kl"`` (eq. (14)) or ``"hsic"`` (eq. (19)); see
            :mod:`bayeskde.tgp.energy` for both energies.
        gamma_x, gamma_y: RBF rates of the input and output kernels,
            k(x, x') = exp(-gamma ||x - x'||^2) (the original code's ``kparam1``,
            ``kparam2``), or ``"median"`` (default): the median heuristic on the
            training inputs / outputs, gamma = 1 / (2 m^2) with m the median
            distance between distinct rows
            (:func:`bayeskde.kernels.standard.median_gamma`). The HSIC
            criterion needs narrower kernels than KL: its energy is the output
            density of the training outputs weighted by the centred input kernel
            (eq. (19)), so its minimiser is a kernel-weighted mode, biased by
            the kernels' widths, where KL's weights K^-1 k_x undo the input
            kernel's smoothing. 3-fold CV chose gamma_x = 200, gamma_y = 80 for
            HSIC on the S-shape (20 and 5 for KL) and 64 and 16 times the median
            heuristic on the planar arm (``models/pose_tgp.py``, 4 and 4 for KL).
        ridge: added to the diagonals of both training Grams (``lambda``), > 0.
        n_neighbors: ``None`` for one global model; else each test point gets a
            local model on its ``n_neighbors`` nearest training inputs
            (Euclidean), factorised per test point.
        kernel_transform: an unfitted :class:`PolynomialKernelTransform` (or any object
            with ``fit(K, G)``, ``transform_input``, ``transform_output``,
            ``beta_``, ``basis``, ``lambda_y_``): it is cloned, fitted on
            the base training Grams, and applied to every input and output kernel
            value, training, cross and diagonal. A basis name (``"monomial"``,
            ``"gegenbauer"``) stands for ``PolynomialKernelTransform(basis=name)``
            with its default degrees; ``None`` (default): no transform.
        max_iter: BFGS iterations per test point.
        tol: BFGS gradient tolerance (infinity norm).
        batch_size: test points solved by one compiled program. Every batch has
            this many rows (the last one padded with copies of its last point),
            so a test point's prediction is the same bitwise whatever the other
            test points of the call (scikit-learn's subset invariance); local
            models hold batch_size neighbourhoods at once, memory
            O(batch_size n_neighbors^2).
        whiten_rtol: relative eigenvalue threshold of the global KL model's
            low-rank G^-1 (:func:`truncated_whitening`: k_y^T G^-1 k_y changes
            by at most whiten_rtol k(y, y)); ``None`` is sqrt(eps), 0 is exact.
        init: BFGS start. ``"linear"``: the ridge linear regression of the
            original release. ``"neighbors"``: of the outputs of the
            ``init_neighbors`` nearest training inputs, the one with the lowest
            energy. ``"best"``: the lowest-energy of those and the linear start.
            ``None`` (default): ``"linear"`` for KL, ``"best"`` for HSIC, whose
            energy drifts off the data from the linear start (module docstring).
        init_neighbors: candidate starts from the nearest training inputs (at
            most ``n_neighbors`` with local models).
        search_block_size: training rows per block of the blocked neighbour
            search, used on accelerators (on the CPU backend the search is
            scikit-learn's tree; :func:`nearest_neighbors`).
        shard: predict with the test points sharded over all devices
            (:func:`tgp_predict_sharded`).
        transform: deprecated keyword name of ``kernel_transform`` (a
            ``FutureWarning``; scikit-learn reads an attribute named
            ``transform`` as the transformer API).

    Attributes:
        criterion_, gamma_x_, gamma_y_, ridge_, n_neighbors_, init_: resolved
            settings.
        transform_: the fitted transform, or ``None``.
        init_weights_: ``(d_x + 1, d_y)`` linear-regression start.
        n_samples_fit_, n_features_in_, n_outputs_: training shapes.
        solution_: deprecated (a ``FutureWarning``): the :class:`TGPSolution`
            of the last ``predict``, kept outside the estimator's state; use
            :meth:`solve`, which returns it.
        whiten_rank_: columns kept in the KL model's G^-1 factor (global KL
            model only, else ``None``).

    Cost: global models: fit O(N^3) (a Cholesky factorisation and an ``eigh``),
    O(N^2) memory; predict O(T N^2) for the test states plus O(T N r I) for T
    test points, I energy evaluations each and the r kept whitening columns (KL)
    or O(T N I) (HSIC). Local models with k neighbours: fit O(N d) (no Gram
    without a transform); predict O(T N d) for the blocked search plus
    O(T (k^3 + k^2 I)), memory O(N d + T (k + block) + batch_size k^2). Starts
    other than ``"linear"`` add ``init_neighbors`` + 1 energy evaluations per
    test point.

    Examples:
        >>> import numpy as np
        >>> t = np.linspace(0, 1, 60); x = t + 0.3 * np.sin(2 * np.pi * t)
        >>> tgp = TwinGP(gamma_x=20.0, gamma_y=20.0, ridge=1e-3).fit(x, t)
        >>> pred = tgp.predict(np.array([0.1, 0.9]))
        >>> pred.shape
        (2,)
    """

    def __init__(
        self,
        criterion="kl",
        gamma_x="median",
        gamma_y="median",
        ridge=1e-3,
        n_neighbors=None,
        kernel_transform=None,
        max_iter=100,
        tol=1e-6,
        batch_size=256,
        whiten_rtol=None,
        init=None,
        init_neighbors=10,
        search_block_size=DEFAULT_BLOCK_SIZE,
        shard=False,
        **kwargs,
    ):
        # ``transform`` is the deprecated name of ``kernel_transform``; it is
        # taken from **kwargs (hidden from the signature below) because an
        # attribute named ``transform`` makes scikit-learn see a transformer.
        unknown = sorted(set(kwargs) - {"transform"})
        if unknown:
            raise TypeError(f"TwinGP got unexpected keyword argument(s) {unknown}")
        if "transform" in kwargs:
            warnings.warn(
                "TwinGP(transform=...) is deprecated and will be removed; use "
                "kernel_transform=...", FutureWarning, stacklevel=2)
            if kernel_transform is not None:
                raise TypeError("give kernel_transform only, not also transform")
            kernel_transform = kwargs["transform"]
        self.criterion = criterion
        self.gamma_x = gamma_x
        self.gamma_y = gamma_y
        self.ridge = ridge
        self.n_neighbors = n_neighbors
        self.kernel_transform = kernel_transform
        self.max_iter = max_iter
        self.tol = tol
        self.batch_size = batch_size
        self.whiten_rtol = whiten_rtol
        self.init = init
        self.init_neighbors = init_neighbors
        self.search_block_size = search_block_size
        self.shard = shard

    def fit(self, X, Y):
        """Fit on inputs ``X`` ``(n, d_x)`` and outputs ``Y`` ``(n, d_y)``/``(n,)``."""
        if Y is None:
            raise ValueError(
                "TwinGP requires y to be passed, but the target y is None")
        check_choice(self.criterion, "criterion", CRITERIA)
        check_choice(self.init, "init", (None, *INITS))
        ridge = check_positive(self.ridge, "ridge")
        check_integer(self.max_iter, "max_iter", minimum=1)
        check_positive(self.tol, "tol")
        check_integer(self.batch_size, "batch_size", minimum=1)
        check_integer(self.search_block_size, "search_block_size", minimum=1)
        check_choice(self.shard, "shard", (True, False))
        rtol = (None if self.whiten_rtol is None
                else check_nonnegative(self.whiten_rtol, "whiten_rtol"))
        X = check_data(X, "X", min_samples=2)
        if isinstance(X, tuple):
            raise TypeError("TwinGP needs numeric X, got strings")
        if isinstance(Y, str) or is_string_data(Y):
            raise TypeError("TwinGP needs numeric Y, got strings")
        Y_arr = as_float_array(Y, "Y")
        if Y_arr.ndim not in (1, 2):
            raise ValueError(f"Y must be 1- or 2-dimensional, got shape {Y_arr.shape}")
        self._y_1d = Y_arr.ndim == 1
        Y2 = Y_arr[:, None] if self._y_1d else Y_arr
        check_same_length(X, Y2, "X", "Y")
        check_squared_range(X, "X")
        check_squared_range(Y2, "Y")
        gamma_x = (median_gamma(X) if self.gamma_x == "median" and isinstance(
            self.gamma_x, str) else check_positive(self.gamma_x, "gamma_x"))
        gamma_y = (median_gamma(Y2) if self.gamma_y == "median" and isinstance(
            self.gamma_y, str) else check_positive(self.gamma_y, "gamma_y"))
        n = X.shape[0]
        self.n_neighbors_ = (
            None if self.n_neighbors is None
            else check_integer(self.n_neighbors, "n_neighbors", minimum=2, maximum=n)
        )
        self.init_ = self.init or ("linear" if self.criterion == "kl" else "best")
        self.init_neighbors_ = check_integer(
            self.init_neighbors, "init_neighbors", minimum=1,
            maximum=n if self.n_neighbors_ is None else self.n_neighbors_,
        )
        kernel_transform = _resolve_transform(self.kernel_transform)
        local_only = (self.n_neighbors_ is not None
                      and kernel_transform is None)
        K = G = pre = None
        global_kl = self.criterion == "kl" and self.n_neighbors_ is None
        if not local_only and kernel_transform is None:
            # Grams, factor, whitening and starts in one compiled program.
            pre = fit_rbf(X, Y2, gamma_x, gamma_y, ridge, global_kl, rtol)
            K, G = pre.K, pre.G
        elif not local_only:  # local models without a transform need no Gram
            K = rbf_gram(X, X, gamma_x)
            G = rbf_gram(Y2, Y2, gamma_y)
        out_coef, projector, basis, glam = None, None, "monomial", 0.5
        self.transform_ = None
        if kernel_transform is not None:
            tr = clone(kernel_transform).fit(K, G)
            K = jnp.asarray(tr.transform_input(K), X.dtype)
            G = jnp.asarray(tr.transform_output(G), X.dtype)
            out_coef = jnp.asarray(tr.beta_, X.dtype)
            basis, glam = tr.basis, float(tr.lambda_y_)
            projector = getattr(tr, "output_projector_", None)
            if projector is not None:
                # Zero columns leave the projection unchanged; padding the
                # width to a multiple of 16 lets fits whose numbers of clipped
                # eigenvalues differ share one compiled prediction.
                pad = -projector.shape[1] % 16
                projector = jnp.pad(jnp.asarray(projector, X.dtype), ((0, 0), (0, pad)))
            if projector is not None and self.n_neighbors_ is not None:
                raise ValueError(
                    "n_neighbors needs a PSD output transform: this transform's "
                    "output Gram was projected onto the PSD cone over all "
                    "training points (use degree_y=1 or the monomial basis)"
                )
            self.transform_ = tr
        self._static = {"basis": basis, "gegenbauer_lambda": glam}
        chol_in = whiten = None
        self.whiten_rank_ = None
        if global_kl:
            if pre is None:
                chol_in = input_factor(K, ridge)
                w = truncated_whitening(G, ridge, rtol)
            else:
                chol_in, w = pre.chol_in, pre.whitening
            whiten, clipped = w.whiten, w.clipped
            self.whiten_rank_ = w.rank
            if clipped:
                warn_once("K_Y + ridge I is not positive definite; eigenvalues "
                          "below eps * max were raised to it")
        dtype = X.dtype
        if chol_in is not None:
            # a NumPy float64 array: a JAX float64 array made under
            # jax.enable_x64 comes back float32 from a pickle in a float32
            # process, and the states it feeds would move by 1e-3
            chol_in = np.asarray(chol_in, np.float64)
        self.model_ = TGPModel(
            X, Y2, K, G, chol_in, whiten,
            linear_init_weights_jit(X, Y2) if pre is None else pre.weights,
            jnp.asarray(ridge, dtype),
            OutputKernel(jnp.asarray(gamma_y, dtype), out_coef, projector),
            jnp.asarray(gamma_x, dtype),
        )
        self.criterion_, self.gamma_x_, self.gamma_y_ = self.criterion, gamma_x, gamma_y
        self.ridge_ = ridge
        self.init_weights_ = self.model_.weights
        self.n_samples_fit_, self.n_features_in_ = X.shape
        self.n_outputs_ = Y2.shape[1]
        return self

    # The public signature: without the **kwargs that carry the deprecated name
    # (scikit-learn's get_params/set_params read the signature).
    __init__.__signature__ = inspect.signature(__init__).replace(parameters=[
        p for p in inspect.signature(__init__).parameters.values()
        if p.kind is not inspect.Parameter.VAR_KEYWORD])

    def _input_kernels(self, X):
        k_x = rbf_gram(X, self.model_.X, self.gamma_x_)
        k_xx = jnp.asarray(np.ones((X.shape[0],), X.dtype))  # no device program
        if self.transform_ is not None:
            k_x = jnp.asarray(self.transform_.transform_input(k_x), X.dtype)
            k_xx = jnp.asarray(self.transform_.transform_input(k_xx), X.dtype)
        return k_x, k_xx

    def predict(self, X):
        """Predict outputs ``(n_test, d_y)`` (``(n_test,)`` if fitted on 1-D Y).

        Nothing is written to the estimator; :meth:`solve` returns the same
        predictions with the optimiser's diagnostics.
        """
        y = np.asarray(self.solve(X).y)
        return y[:, 0] if self._y_1d else y

    def solve(self, X) -> TGPSolution:
        """Minimise the energy of every test point: predictions and diagnostics.

        Args:
            X: ``(n_test, d_x)`` test inputs (1-D: one feature per point).

        Returns:
            :class:`TGPSolution` with ``y`` ``(n_test, d_y)`` (also when fitted
            on 1-D outputs), the energies, BFGS status and iterations, and the
            starts.

        Raises:
            sklearn.exceptions.NotFittedError: before ``fit``.
            FloatingPointError: a prediction that is not finite.

        Cost: that of :meth:`predict` (class docstring).
        """
        mesh = None
        if self.shard:
            from ..distributed import device_mesh

            mesh = device_mesh()
        return self._solve(X, mesh)

    @property
    def solution_(self) -> TGPSolution:
        warnings.warn(
            "TwinGP.solution_ is deprecated and will be removed; use "
            "TwinGP.solve(X), which returns the TGPSolution", FutureWarning,
            stacklevel=2)
        try:
            return _LAST_SOLUTION[self]
        except KeyError:
            raise AttributeError(
                "TwinGP has no solution_ before predict (deprecated: use "
                "TwinGP.solve(X))") from None

    def _predict(self, X, mesh):
        y = np.asarray(self._solve(X, mesh).y)
        return y[:, 0] if self._y_1d else y

    def _solve(self, X, mesh):
        check_is_fitted(self, "model_")
        X = check_tgp_test_inputs(self, X)
        # Every compiled call sees batch_size rows (the last batch padded with
        # copies of its last point, cut off below): a test point's prediction
        # then comes from the same program whatever else is in the call, so it
        # does not depend on the other rows (with one program per n_test,
        # batched and one-row XLA programs round differently, and float32
        # BFGS amplified that to 5% on scikit-learn's subset-invariance check).
        n, bs = X.shape[0], int(self.batch_size)
        parts = []
        for start in range(0, n, bs):
            stop = min(start + bs, n)
            chunk = X[start:stop]
            if stop - start < bs:
                chunk = jnp.concatenate(
                    [chunk, jnp.broadcast_to(chunk[-1:], (bs - (stop - start),
                                                          X.shape[1]))])
            # jax.enable_x64: the KL states in float64 whatever the working
            # precision (STATE_DTYPE); the rest stays in X's dtype.
            with jax.enable_x64(True):
                sol = self._solve_batch(chunk, mesh)
            jax.block_until_ready(sol)  # no two runs of the program overlap
            parts.append(jax.tree_util.tree_map(lambda a, m=stop - start: a[:m],
                                                sol))
        sol = (parts[0] if len(parts) == 1 else
               jax.tree_util.tree_map(lambda *a: jnp.concatenate(a), *parts))
        if not np.all(np.isfinite(np.asarray(sol.y))):
            raise FloatingPointError("TGP prediction is not finite")
        _LAST_SOLUTION[self] = sol  # the deprecated solution_ only
        return sol

    def _solve_batch(self, X, mesh):
        """The solution of one batch of ``batch_size`` validated test points."""
        local = self.n_neighbors_ is not None
        # Local models without a transform form their kernel rows per
        # neighbourhood; everything else needs the rows against all training.
        # The plain global model evaluates them inside its compiled program.
        inline = (not local and mesh is None and self.transform_ is None)
        kernels = (() if (local and self.model_.K_in is None) or inline
                   else self._input_kernels(X))
        tol = jnp.asarray(self.tol, X.dtype)
        static = dict(
            criterion=self.criterion_, max_iter=int(self.max_iter),
            init=self.init_, init_neighbors=self.init_neighbors_,
            search_block=min(int(self.search_block_size), self.n_samples_fit_),
            **self._static,
        )
        if local:
            static.update(n_neighbors=self.n_neighbors_,
                          batch_size=int(self.batch_size))
        k = self.n_neighbors_ if local else self.init_neighbors_
        # Neighbours searched once, before the compiled programs (on CPU by
        # scikit-learn's tree), and sharded with the test points on a mesh.
        idx = (None if not local and self.init_ == "linear"
               else search(self.model_.X, X, k, static["search_block"]))
        if mesh is not None:
            from ..distributed import sharded_batch_map

            leaves, treedef = jax.tree_util.tree_flatten(self.model_)
            fn = sharded_fn(treedef, len(leaves), bool(kernels), idx is not None,
                             local, tuple(sorted(static.items())))
            extra = () if idx is None else (idx,)
            return sharded_batch_map(fn, X, *kernels, *extra, mesh=mesh,
                                     broadcast=(*leaves, tol))
        k_x, k_xx = kernels or (None, None)
        predict = predict_local if local else predict_global
        return predict(self.model_, X, k_x, k_xx, tol, idx, **static)

    def predict_modes(
        self, X, k: int = 2, *, temperature: float | None = None,
        n_grid: int = 400, n_starts: int = 8, margin: float = 0.1,
        radius: float | None = None, key: jax.Array | None = None,
    ) -> Modes:
        """The top-k modes of the tempered predictive per test point, with masses.

        ``predict`` returns one minimiser of the energy E(y), the KL energy
        (Bo and Sminchisescu 2010, eq. (14)) or the HSIC energy (eq. (19)).
        Where the inverse map is multivalued (S-shape, a pose's mirror images)
        E has several minima and that one hides the others. Read as an energy,
        E defines the tempered predictive

            p(y | x) proportional to exp(-E(y) / tau)

        on the box of training outputs widened by ``margin``, and this method
        returns its k modes of highest mass. Outputs of dimension <= 2: the
        masses of a midpoint grid of ``n_grid`` points, split into the k
        separated regions of highest mass (each mode the most probable grid
        point of its region, its mass that of the grid points nearest to it).
        Above: the minima of E found by BFGS from the outputs of the ``n_starts``
        nearest training inputs, with Laplace masses exp(-E / tau)
        det(H / tau)^(-1/2), normalised over the minima found. This is
        :func:`bayeskde.tgp.tgp_modes`
        applied to this estimator.

        Args:
            X: ``(n_test, d_x)`` test inputs (1-D: one feature per point).
            k: number of modes.
            temperature: tau > 0; ``None`` chooses it by
                :func:`bayeskde.tgp.calibrate_temperature`: the tau of highest
                held-out log density of the predictive on a random 20% of the
                training pairs (split by ``key``, default ``key(0)``).
            n_grid: grid points (d_y <= 2).
            n_starts: BFGS starts per test point (d_y > 2).
            margin: the grid box's widening on each side, a fraction of the
                outputs' range.
            radius: modes closer than this (output units) are one mode
                (default 0.1 of the outputs' mean range).
            key: PRNG key of the calibration's split.

        Returns:
            :class:`bayeskde.tgp.Modes`: ``modes`` ``(n_test, k, d_y)`` (also
            when fitted on 1-D outputs), ``masses`` ``(n_test, k)`` highest
            first, summing to at most 1 (when fewer than k separated modes carry
            mass, the rest repeat the first with mass 0), and the
            ``temperature`` used.

        Raises:
            sklearn.exceptions.NotFittedError: before ``fit``.
            ValueError: a local model (``n_neighbors`` set: the predictive needs
                the global model's energy), ``k < 1``, ``temperature <= 0``,
                bad ``n_grid``, ``n_starts``, ``margin`` or ``radius``, ``X``
                with NaN/inf or the wrong number of features.
            TypeError: ``X`` that is not numeric.

        Cost: O(T N^2) for the T test points' energy states, then O(N r) per
        energy evaluation (KL with the r kept whitening columns; O(N) HSIC):
        ``n_grid`` per test point on the grid, or ``n_starts`` BFGS runs and
        their Hessians (O(N^2 d_y^2) each) per test point; choosing tau adds a
        fit on 80% of the training pairs and 400 energy evaluations per
        held-out pair.

        Examples:
            >>> import numpy as np
            >>> t = np.linspace(0, 1, 60); x = t + 0.3 * np.sin(2 * np.pi * t)
            >>> tgp = TwinGP(gamma_x=20.0, gamma_y=20.0, ridge=1e-3).fit(x, t)
            >>> res = tgp.predict_modes(np.array([0.1, 0.5]), k=2,
            ...                         temperature=0.05, n_grid=100)
            >>> res.modes.shape, res.masses.shape
            ((2, 2, 1), (2, 2))
            >>> bool(np.all(res.masses[:, 0] >= res.masses[:, 1]))
            True
        """
        check_is_fitted(self, "model_")
        X = check_tgp_test_inputs(self, X)  # errors name X, as predict's do
        return tgp_modes(self, X, k, temperature=temperature, n_grid=n_grid,
                         n_starts=n_starts, margin=margin, radius=radius, key=key)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.target_tags.required = True
        tags.target_tags.single_output = False
        return tags
