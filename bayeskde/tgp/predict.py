"""Compiled Twin GP predictions: starts, global and local (k-NN) solves, sharding.

Every test point is solved independently by the batched BFGS of
:mod:`bayeskde.tgp.energy`; global models share one training Gram, local models
(Bo and Sminchisescu 2010, section 5) build each test point's Grams from its
nearest training points. :func:`tgp_predict_sharded` splits the test points over
devices through :func:`bayeskde.distributed.sharded_batch_map`.
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp
from jaxtyping import Array, Float

from .._typing import ArrayLike
from ..cache import quick_jit
from ..kernels.standard import rbf_gram
from .energy import (
    STATE_DTYPE,
    HSICState,
    KLState,
    OutputKernel,
    hsic_coupling,
    tgp_hsic_energy,
    tgp_hsic_state,
    tgp_kl_energy,
    tgp_kl_state,
    tgp_minimize,
)
from .fitting import whiten_gram
from .neighbors import (
    neighbor_indices,
)

__all__ = ["INITS", "tgp_predict_sharded"]

INITS = ("linear", "neighbors", "best")


class TGPModel(NamedTuple):
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


# The optimiser loop's many small fusions compile slowly with XLA's CPU fusion
# emitters (S-shape, 500 points: 1.1 s against 0.47 s of CPU time with the older
# emitters, the same run time), so the global prediction is compiled with
# :data:`bayeskde.cache.CPU_COMPILE_OPTIONS` on CPU (:func:`quick_jit`).
_STATIC = ("criterion", "max_iter", "basis", "gegenbauer_lambda", "init",
           "init_neighbors", "search_block")


def _neighbors(model, X_test, idx, k, search_block):
    """The first ``k`` neighbour indices, nearest first (searched by the caller
    with :func:`search`, outside the compiled program)."""
    return idx[:, :k]


def search(X, X_test, k, search_block):
    # Outside the prediction programs: scikit-learn's tree on the CPU backend,
    # the blocked top-k scan (its own jitted program) on accelerators.
    return neighbor_indices(X, X_test, k, search_block)


@quick_jit(static_argnames=_STATIC)
def predict_global(
    model, X_test, k_x, k_xx, tol, idx=None, *, criterion, max_iter, basis,
    gegenbauer_lambda, init, init_neighbors, search_block,
):
    y_lin = _init(model, X_test)
    energy = _energy(criterion, basis, gegenbauer_lambda, model.out)
    if k_x is None:  # RBF input kernel without a transform: evaluated here
        # in the state's precision for KL (STATE_DTYPE), as the fit's factor
        hi = STATE_DTYPE if criterion == "kl" else X_test.dtype
        k_x = rbf_gram(X_test.astype(hi), model.X.astype(hi),
                       model.gamma_in.astype(hi))
        k_xx = jnp.ones((X_test.shape[0],), hi)
    # States of all test points at once (one multi-right-hand-side solve under
    # vmap); the shared arrays stay unbatched (axis None).
    if criterion == "kl":
        state = jax.vmap(tgp_kl_state, (None, None, None, 0, 0, None),
                         KLState(0, 0, None, None, None))(
            model.chol_in, model.whiten, model.Y, k_x, k_xx, model.ridge)
        axes = KLState(0, 0, None, None, None)
    else:
        c, m_nn = jax.vmap(hsic_coupling, (None, 0, 0))(model.K_in, k_x, k_xx)
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
        # KL's input side in the state's precision (STATE_DTYPE), HSIC's not.
        hi = STATE_DTYPE if criterion == "kl" else Xn.dtype
        if model.K_in is None:  # no transform: the neighbourhood's own Grams
            Xh, gh = Xn.astype(hi), model.gamma_in.astype(hi)
            K = rbf_gram(Xh, Xh, gh)
            kx = rbf_gram(x_t[None, :].astype(hi), Xh, gh)[0]
        else:
            K = model.K_in[idx_t][:, idx_t]
            kx = kx_t[idx_t]
        if criterion == "kl":
            chol_in = jnp.linalg.cholesky(
                K.astype(hi) + model.ridge.astype(hi) * eye.astype(hi))
            G = (rbf_gram(Y, Y, model.out.gamma) if model.K_out is None
                 else model.K_out[idx_t][:, idx_t])
            whiten = whiten_gram(G + model.ridge * eye)[0]
            state = tgp_kl_state(chol_in, whiten, Y, kx, kxx_t, model.ridge)
        else:
            state = tgp_hsic_state(K.astype(Y.dtype), Y, kx.astype(Y.dtype), kxx_t)
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
predict_local = jax.jit(
    _predict_local_impl, static_argnames=(*_STATIC, "n_neighbors", "batch_size"))


@functools.lru_cache(maxsize=32)
def sharded_fn(treedef, n_leaves, has_kx, has_idx, local, static_items):
    """One function object per configuration, so compiled programs are reused."""
    static = dict(static_items)
    impl = _predict_local_impl if local else predict_global.__wrapped__

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
    device. Like ``predict``, it writes nothing to ``tgp``.

    Args:
        tgp: a fitted :class:`TwinGP`.
        X: ``(n_test, d_x)`` test inputs (1-D: one feature).
        mesh: a one-axis :class:`jax.sharding.Mesh` (default: all devices).

    Returns:
        ``(n_test, d_y)`` predictions (``(n_test,)`` if fitted on 1-D Y).

    Cost: that of ``predict`` divided over the devices, plus a copy of the fitted
    arrays to each device.
    """
    from ..distributed import device_mesh

    return tgp._predict(X, device_mesh() if mesh is None else mesh)
