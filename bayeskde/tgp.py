"""Twin Gaussian Processes (Bo and Sminchisescu 2010): the estimator.

:class:`TwinGP` predicts the output y of a test input x by making the output
kernel of the training set augmented with y resemble the input kernel of the
training set augmented with x, under the KL criterion (eq. (14)) or the HSIC
criterion (eq. (19)); both kernels are RBFs, optionally passed through a learned
polynomial transform (:class:`bayeskde.kernels.transforms.PolynomialKernelTransform`,
Ghosh et al., section 5). The energies, their per-test-point states and the
batched BFGS minimiser are in :mod:`bayeskde.tgp_core`; the S-shape baselines
(:func:`gp_predict`, :func:`weighted_knn_predict`) in :mod:`bayeskde.tgp_baselines`;
the blocked neighbour search in :mod:`bayeskde.tgp_neighbors`. All their public
names are importable from here.

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

import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp
import jax.scipy.linalg as jsl
import numpy as np
from jaxtyping import Array, Float
from sklearn.base import BaseEstimator, clone
from sklearn.utils.validation import check_is_fitted

from ._typing import ArrayLike
from ._validation import (
    as_float_array,
    check_data,
    check_integer,
    check_positive,
    check_same_length,
    warn_once,
)
from .kernels.base import rbf_gram
from .tgp_baselines import cholesky_with_jitter, gp_predict, weighted_knn_predict
from .tgp_core import (
    CRITERIA,
    FORWARD_MODE_MAX_DIM,
    HSICState,
    KLState,
    OutputKernel,
    TGPSolution,
    Whitening,
    _hsic_coupling,
    _hsic_from_kernels,
    _kl_from_kernels,
    _linear_init_weights,
    _value_and_grad,
    _whiten,
    linear_init_weights,
    tgp_hsic_energy,
    tgp_hsic_state,
    tgp_kl_energy,
    tgp_kl_state,
    tgp_minimize,
    truncated_whitening,
)
from .tgp_neighbors import (
    DEFAULT_BLOCK_SIZE,
    check_features,
    nearest_neighbors,
    neighbor_indices,
    top_k_neighbors,
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

# Private helpers that tests and bayeskde.models.tgp reach through this module.
_PRIVATE_REEXPORTS = (_hsic_coupling, _hsic_from_kernels, _kl_from_kernels,
                      _value_and_grad)

INITS = ("linear", "neighbors", "best")


class _Model(NamedTuple):
    """Fitted arrays the compiled prediction needs (static structure kept apart).

    ``K_in`` and ``K_out`` are ``None`` for local models without a transform:
    each neighbourhood's Grams are then built from its points.
    """

    X: Float[Array, "n d_x"]
    Y: Float[Array, "n d_y"]
    K_in: Float[Array, "n n"] | None
    K_out: Float[Array, "n n"] | None
    chol_in: Float[Array, "n n"] | None
    whiten: Float[Array, "n r"] | None
    weights: Float[Array, "d_x1 d_y"]
    ridge: Float[Array, ""]
    out: OutputKernel
    gamma_in: Float[Array, ""]


def _energy(criterion, basis, gegenbauer_lambda, out):
    fn = tgp_kl_energy if criterion == "kl" else tgp_hsic_energy
    return lambda y, s: fn(y, s, out, basis, gegenbauer_lambda)


def _init(model, X_test):
    return model.weights[0][None, :] + X_test @ model.weights[1:]


def _choose_start(energy, y_lin, candidates, state, init):
    """The start of one test point: the lowest-energy candidate.

    ``candidates`` ``(C, d_y)`` are the outputs of the test point's nearest
    training inputs; ``init="best"`` adds the linear start ``y_lin``. Non-finite
    energies never win. Cost: C + 1 energy evaluations.
    """
    if init == "linear":
        return y_lin
    if init == "best":
        candidates = jnp.concatenate([y_lin[None, :], candidates], axis=0)
    E = jax.vmap(lambda y: energy(y, state))(candidates)
    E = jnp.where(jnp.isfinite(E), E, jnp.inf)
    return candidates[jnp.argmin(E)]


# XLA's CPU fusion emitters compile the many small fusions of the optimiser
# loop slowly (S-shape, 500 points: 1.1 s against 0.47 s of CPU time with the
# older emitters, the same run time), so the prediction functions are compiled
# without them on CPU. An XLA that does not know the option, or another
# backend, gets the plain jit.
_CPU_COMPILER_OPTIONS = {"xla_cpu_use_fusion_emitters": False}


class _CPUFastCompileJit:
    """``jax.jit(fun)``, compiled with ``_CPU_COMPILER_OPTIONS`` on CPU."""

    def __init__(self, fun, static_argnames):
        self.raw = fun
        self._plain = jax.jit(fun, static_argnames=static_argnames)
        try:
            self._fast = jax.jit(
                fun, static_argnames=static_argnames,
                compiler_options=_CPU_COMPILER_OPTIONS,
            )
        except TypeError:  # a jax without jit(compiler_options=...)
            self._fast = None
        functools.update_wrapper(self, fun)

    def __call__(self, *args, **kwargs):
        if self._fast is not None and jax.default_backend() == "cpu":
            try:
                return self._fast(*args, **kwargs)
            except Exception as err:  # noqa: BLE001 - only the unknown option
                if "xla_cpu_use_fusion_emitters" not in str(err):
                    raise
                self._fast = None
        return self._plain(*args, **kwargs)

    def _cache_size(self):
        fast = 0 if self._fast is None else self._fast._cache_size()
        return self._plain._cache_size() + fast


def _cpu_fast_compile_jit(static_argnames):
    return functools.partial(_CPUFastCompileJit, static_argnames=static_argnames)


_STATIC = ("criterion", "max_iter", "basis", "gegenbauer_lambda", "init",
           "init_neighbors", "search_block")


def _neighbors(model, X_test, idx, k, search_block):
    """Neighbour indices, nearest first: given, or searched here (blocked)."""
    if idx is not None:
        return idx[:, :k]
    return top_k_neighbors(model.X, X_test, k, search_block)[1]


def _search(X, X_test, k, search_block):
    # Outside the prediction programs: scikit-learn's tree on the CPU backend,
    # the blocked top-k scan (its own jitted program) on accelerators.
    return neighbor_indices(X, X_test, k, search_block)


@_cpu_fast_compile_jit(_STATIC)
def _predict_global(
    model, X_test, k_x, k_xx, tol, idx=None, *, criterion, max_iter, basis,
    gegenbauer_lambda, init, init_neighbors, search_block,
):
    y_lin = _init(model, X_test)
    energy = _energy(criterion, basis, gegenbauer_lambda, model.out)
    # States of all test points at once (one multi-right-hand-side solve); the
    # shared arrays stay unbatched (axis None).
    if criterion == "kl":
        u = jsl.cho_solve((model.chol_in, True), k_x.T).T
        eta = k_xx + model.ridge - jnp.sum(k_x * u, axis=1)
        state = KLState(u, eta, model.Y, model.whiten, model.ridge)
        axes = KLState(0, 0, None, None, None)
    else:
        c, m_nn = jax.vmap(_hsic_coupling, (None, 0, 0))(model.K_in, k_x, k_xx)
        state = HSICState(c, m_nn, model.Y)
        axes = HSICState(0, 0, None)
    if init == "linear":
        y0 = y_lin
    else:
        idx = _neighbors(model, X_test, idx, init_neighbors, search_block)
        start = functools.partial(_choose_start, energy, init=init)
        y0 = jax.vmap(start, (0, 0, axes))(y_lin, model.Y[idx], state)
    solve = functools.partial(tgp_minimize, energy, max_iter=max_iter, tol=tol)
    return jax.vmap(solve, (0, axes))(y0, state)


def _predict_local_impl(
    model, X_test, k_x, k_xx, tol, idx=None, *, criterion, n_neighbors, max_iter,
    basis, gegenbauer_lambda, batch_size, init, init_neighbors, search_block,
):
    y_lin = _init(model, X_test)
    energy = _energy(criterion, basis, gegenbauer_lambda, model.out)
    # Neighbours by Euclidean input distance, as the original TGPKNN.m, nearest
    # first, searched in blocks of training rows (no T x m matrix).
    idx = _neighbors(model, X_test, idx, n_neighbors, search_block)
    eye = jnp.eye(n_neighbors, dtype=X_test.dtype)
    ones = jnp.ones((X_test.shape[0],), X_test.dtype)
    k_xx = ones if k_xx is None else k_xx

    def one(args):
        y_t, idx_t, x_t, kx_t, kxx_t = args
        Xn, Y = model.X[idx_t], model.Y[idx_t]
        if model.K_in is None:  # no transform: the neighbourhood's own Grams
            K = rbf_gram(Xn, Xn, model.gamma_in)
            kx = rbf_gram(x_t[None, :], Xn, model.gamma_in)[0]
        else:
            K = model.K_in[idx_t][:, idx_t]
            kx = kx_t[idx_t]
        if criterion == "kl":
            chol_in = jnp.linalg.cholesky(K + model.ridge * eye)
            G = (rbf_gram(Y, Y, model.out.gamma) if model.K_out is None
                 else model.K_out[idx_t][:, idx_t])
            whiten = _whiten(G + model.ridge * eye)[0]
            state = tgp_kl_state(chol_in, whiten, Y, kx, kxx_t, model.ridge)
        else:
            state = tgp_hsic_state(K, Y, kx, kxx_t)
        y0 = _choose_start(energy, y_t, Y[:init_neighbors], state, init)
        return tgp_minimize(energy, y0, state, max_iter=max_iter, tol=tol)

    # Pad to whole batches (copies of the last test point, cut off below), so
    # lax.map runs one batch shape. (A remainder batch was first suspected of the
    # CPU deadlock that tests/test_runtime.py pins on jaxlib 0.10.)
    n_test = X_test.shape[0]
    bs = min(batch_size, n_test)
    total = -(-n_test // bs) * bs
    xs = jax.tree_util.tree_map(
        lambda a: jnp.concatenate(
            [a, jnp.broadcast_to(a[-1:], (total - n_test, *a.shape[1:]))]),
        (y_lin, idx, X_test, k_x, k_xx))
    sol = jax.lax.map(one, xs, batch_size=bs)
    return jax.tree_util.tree_map(lambda a: a[:n_test], sol)


# The plain jit (XLA's default CPU compiler). Its run-time deadlocks at
# m = 5000 and 10^5 were jaxlib 0.10's batched LAPACK kernels blocking both
# threads of XLA's CPU pool (tests/test_runtime.py), not this program.
_predict_local = jax.jit(
    _predict_local_impl, static_argnames=(*_STATIC, "n_neighbors", "batch_size"))


@functools.lru_cache(maxsize=32)
def _sharded_fn(treedef, n_leaves, has_kx, has_idx, local, static_items):
    """One function object per configuration, so compiled programs are reused."""
    static = dict(static_items)
    impl = _predict_local_impl if local else _predict_global.raw

    def fn(*args):
        model = jax.tree_util.tree_unflatten(treedef, args[:n_leaves])
        tol, X_test, *rest = args[n_leaves:]
        idx = rest.pop() if has_idx else None
        k_x, k_xx = rest if has_kx else (None, None)
        return impl(model, X_test, k_x, k_xx, tol, idx, **static)

    return fn


def tgp_predict_sharded(tgp, X: Float[ArrayLike, "n_test n_features"], mesh=None):
    """Predictions of a fitted :class:`TwinGP` with the test points sharded.

    The test points (and their kernel rows against the training set, where the
    model needs them) are cut into one slice per device of ``mesh`` and each
    device runs the same compiled prediction on its slice; the fitted arrays are
    replicated (:func:`bayeskde.distributed.sharded_batch_map`). Every test point
    is solved independently, so the result equals :meth:`TwinGP.predict` on one
    device. Sets ``tgp.solution_`` like ``predict``.

    Args:
        tgp: a fitted :class:`TwinGP`.
        X: ``(n_test, d_x)`` test inputs (1-D: one feature).
        mesh: a one-axis :class:`jax.sharding.Mesh` (default: all devices).

    Returns:
        ``(n_test, d_y)`` predictions (``(n_test,)`` if fitted on 1-D Y).

    Cost: that of ``predict`` divided over the devices, plus a copy of the fitted
    arrays to each device.
    """
    from .distributed import device_mesh

    return tgp._predict(X, device_mesh() if mesh is None else mesh)


class TwinGP(BaseEstimator):
    """Twin Gaussian Process regression (Bo and Sminchisescu 2010).

    Args:
        criterion: ``"kl"`` (eq. (14)) or ``"hsic"`` (eq. (19)); see
            :mod:`bayeskde.tgp_core` for both energies.
        gamma_x, gamma_y: RBF rates of the input and output kernels,
            k(x, x') = exp(-gamma ||x - x'||^2) (the original code's ``kparam1``,
            ``kparam2``).
        ridge: added to the diagonals of both training Grams (``lambda``), > 0.
        n_neighbors: ``None`` for one global model; else each test point gets a
            local model on its ``n_neighbors`` nearest training inputs
            (Euclidean), factorised per test point.
        transform: an unfitted :class:`PolynomialKernelTransform` (or any object
            with ``fit(K, G)``, ``transform_input``, ``transform_output``,
            ``beta_``, ``basis``, ``lambda_y_``): it is cloned, fitted on
            the base training Grams, and applied to every input and output kernel
            value, training, cross and diagonal.
        max_iter: BFGS iterations per test point.
        tol: BFGS gradient tolerance (infinity norm).
        batch_size: test points whose local models are held at once
            (``n_neighbors`` only); memory O(batch_size n_neighbors^2).
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

    Attributes:
        criterion_, gamma_x_, gamma_y_, ridge_, n_neighbors_, init_: resolved
            settings.
        transform_: the fitted transform, or ``None``.
        init_weights_: ``(d_x + 1, d_y)`` linear-regression start.
        n_samples_fit_, n_features_in_, n_outputs_: training shapes.
        solution_: :class:`TGPSolution` of the last ``predict`` (``start``: the
            chosen starts).
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
        >>> tgp = TwinGP(gamma_x=0.2 * 100, gamma_y=20.0, ridge=1e-3).fit(x, t)
        >>> pred = tgp.predict(np.array([0.1, 0.9]))
        >>> pred.shape
        (2,)
    """

    def __init__(
        self,
        criterion="kl",
        gamma_x=1.0,
        gamma_y=1.0,
        ridge=1e-3,
        n_neighbors=None,
        transform=None,
        max_iter=100,
        tol=1e-6,
        batch_size=256,
        whiten_rtol=None,
        init=None,
        init_neighbors=10,
        search_block_size=DEFAULT_BLOCK_SIZE,
        shard=False,
    ):
        self.criterion = criterion
        self.gamma_x = gamma_x
        self.gamma_y = gamma_y
        self.ridge = ridge
        self.n_neighbors = n_neighbors
        self.transform = transform
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
        if self.criterion not in CRITERIA:
            raise ValueError(
                f"criterion must be one of {CRITERIA}, got {self.criterion!r}"
            )
        if self.init is not None and self.init not in INITS:
            raise ValueError(
                f"init must be None or one of {INITS}, got {self.init!r}"
            )
        gamma_x = check_positive(self.gamma_x, "gamma_x")
        gamma_y = check_positive(self.gamma_y, "gamma_y")
        ridge = check_positive(self.ridge, "ridge")
        check_integer(self.max_iter, "max_iter", minimum=1)
        check_positive(self.tol, "tol")
        check_integer(self.batch_size, "batch_size", minimum=1)
        check_integer(self.search_block_size, "search_block_size", minimum=1)
        X = check_data(X, "X", min_samples=2)
        if isinstance(X, tuple):
            raise TypeError("TwinGP needs numeric X, got strings")
        Y_arr = as_float_array(Y, "Y")
        if Y_arr.ndim not in (1, 2):
            raise ValueError(f"Y must be 1- or 2-dimensional, got shape {Y_arr.shape}")
        self._y_1d = Y_arr.ndim == 1
        Y2 = Y_arr[:, None] if self._y_1d else Y_arr
        check_same_length(X, Y2, "X", "Y")
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
        local_only = self.n_neighbors_ is not None and self.transform is None
        K = G = None
        if not local_only:  # local models without a transform need no Gram
            K = rbf_gram(X, X, gamma_x)
            G = rbf_gram(Y2, Y2, gamma_y)
        out_coef, projector, basis, glam = None, None, "monomial", 0.5
        self.transform_ = None
        if self.transform is not None:
            tr = clone(self.transform).fit(K, G)
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
        if self.criterion == "kl" and self.n_neighbors_ is None:
            eye = jnp.eye(n, dtype=X.dtype)
            chol_in = cholesky_with_jitter(K + ridge * eye, "K_X + ridge I")
            rtol = self.whiten_rtol
            w = truncated_whitening(G, ridge, None if rtol is None else float(rtol))
            whiten, clipped = w.whiten, w.clipped
            self.whiten_rank_ = w.rank
            if clipped:
                warn_once("K_Y + ridge I is not positive definite; eigenvalues "
                          "below eps * max were raised to it")
        dtype = X.dtype
        self.model_ = _Model(
            X, Y2, K, G, chol_in, whiten, _linear_init_weights(X, Y2),
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

    def _input_kernels(self, X):
        k_x = rbf_gram(X, self.model_.X, self.gamma_x_)
        k_xx = jnp.ones((X.shape[0],), X.dtype)
        if self.transform_ is not None:
            k_x = jnp.asarray(self.transform_.transform_input(k_x), X.dtype)
            k_xx = jnp.asarray(self.transform_.transform_input(k_xx), X.dtype)
        return k_x, k_xx

    def _local_in_batches(self, X, k_x, k_xx, tol, idx, static):
        # One compiled call per batch of test points (the last one padded with
        # copies of its last point, so every call has the same shapes), so that
        # memory stays O(batch_size k^2) whatever the number of test points.
        n, bs = X.shape[0], min(int(self.batch_size), X.shape[0])
        parts = []
        for start in range(0, n, bs):
            stop = min(start + bs, n)

            def take(a, start=start, stop=stop):
                if a is None:
                    return None
                b = a[start:stop]
                pad = bs - b.shape[0]
                return b if pad == 0 else jnp.concatenate(
                    [b, jnp.broadcast_to(b[-1:], (pad, *b.shape[1:]))])

            sol = _predict_local(self.model_, take(X), take(k_x), take(k_xx), tol,
                                 take(idx), **static)
            jax.block_until_ready(sol)  # no two runs of the program overlap
            parts.append(jax.tree_util.tree_map(lambda a, m=stop - start: a[:m], sol))
        return jax.tree_util.tree_map(lambda *a: jnp.concatenate(a), *parts)

    def predict(self, X):
        """Predict outputs ``(n_test, d_y)`` (``(n_test,)`` if fitted on 1-D Y)."""
        mesh = None
        if self.shard:
            from .distributed import device_mesh

            mesh = device_mesh()
        return self._predict(X, mesh)

    def _predict(self, X, mesh):
        check_is_fitted(self, "model_")
        X = check_data(X, "X")
        if isinstance(X, tuple):
            raise TypeError("TwinGP needs numeric X, got strings")
        check_features(X, self.n_features_in_, "X")
        X = X.astype(self.model_.X.dtype)
        local = self.n_neighbors_ is not None
        # Local models without a transform form their kernel rows per
        # neighbourhood; everything else needs the rows against all training.
        kernels = () if local and self.model_.K_in is None else self._input_kernels(X)
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
               else _search(self.model_.X, X, k, static["search_block"]))
        if mesh is not None:
            from .distributed import sharded_batch_map

            leaves, treedef = jax.tree_util.tree_flatten(self.model_)
            fn = _sharded_fn(treedef, len(leaves), bool(kernels), idx is not None,
                             local, tuple(sorted(static.items())))
            extra = () if idx is None else (idx,)
            sol = sharded_batch_map(fn, X, *kernels, *extra, mesh=mesh,
                                    broadcast=(*leaves, tol))
        else:
            k_x, k_xx = kernels or (None, None)
            predict = _predict_local if local else _predict_global
            if local:
                sol = self._local_in_batches(X, k_x, k_xx, tol, idx, static)
            else:
                sol = predict(self.model_, X, k_x, k_xx, tol, idx, **static)
        if not bool(jnp.all(jnp.isfinite(sol.y))):
            raise FloatingPointError("TGP prediction is not finite")
        self.solution_ = sol
        y = np.asarray(sol.y)
        return y[:, 0] if self._y_1d else y
