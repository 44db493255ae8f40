"""Running bayeskde on several devices or hosts with ``jax.sharding``.

Data-parallel helpers over a one-axis :class:`jax.sharding.Mesh`: the leading
(batch) axis is cut into one slice per device with
``NamedSharding(mesh, PartitionSpec(axis))`` and each device runs the same
program on its slice (``jax.shard_map``). A batch whose length is not a multiple
of the device count is padded with copies of its last item, and the padding is cut
from the result, so results equal the single-device ones.

- :func:`sharded_gram`: a kernel matrix K(X, Z) sharded by row blocks of X (each
  device forms its rows; blocked further with ``block_size``).
- :func:`sharded_batch_map`: any batched function ``fn(*arrays)`` (predictions
  of a fitted KDE or Twin GP on test points, kernel rows, ...) over the devices.
- :func:`sharded_hmm_posteriors`: ``jax.vmap`` of the public
  :func:`bayeskde.hmm.forward_backward` over a padded batch of sequences,
  sequences sharded across devices.
- MCMC chains: :func:`bayeskde.infer.run_nuts` hands ``chain_method="parallel"``
  to NumPyro (one chain per device, ``pmap``) whenever
  ``jax.local_device_count() >= num_chains`` and ``"vectorized"`` otherwise, so
  chains spread over devices without anything from this module.

Multi-host launch. Start the same script once per host (process); before any
other JAX call each process runs::

    from bayeskde.distributed import initialize_distributed
    initialize_distributed(coordinator_address="10.0.0.1:1234",
                           num_processes=4, process_id=RANK)

(on SLURM, Open MPI or Cloud TPU the three arguments are detected and may be
left out). Afterwards ``jax.devices()`` lists the devices of every host and
:func:`device_mesh` spans all of them; each process passes the same global
arrays (for instance the same seed-generated data). A result sharded over all
hosts is not addressable from one process: read it back with
``jax.experimental.multihost_utils.process_allgather(out, tiled=True)``. The
test suite runs this launch as two processes on one machine (2 fake devices
each, coordinator on localhost, Gloo collectives) and checks Grams, HMM
posteriors and batched predictions against one device
(``tests/test_distributed.py::test_two_processes_equal_one``).
To try the code on one CPU, fake devices with
``XLA_FLAGS=--xla_force_host_platform_device_count=8`` set before JAX starts.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P
from jaxtyping import Array, Float

from ._typing import ArrayLike
from ._validation import check_integer
from .hmm import HMMPosterior, forward_backward
from .lowrank.blocked import (
    _check_pair,
    gram_fn,
    pad_rows,
    resolve_vector_kernel,
    split_kernel,
)

__all__ = [
    "device_mesh",
    "sharded_batch_map",
    "sharded_gram",
    "sharded_hmm_posteriors",
    "initialize_distributed",
]

AXIS = "batch"


def device_mesh(devices=None, axis_name: str = AXIS) -> Mesh:
    """A one-axis mesh over ``devices`` (default: all of ``jax.devices()``)."""
    devs = np.asarray(jax.devices() if devices is None else list(devices))
    if devs.size == 0:
        raise ValueError("devices is empty; need at least one device")
    return Mesh(devs.reshape(-1), (axis_name,))


def _pad(x, total):
    n = x.shape[0]
    if total == n:
        return x
    return jnp.concatenate([x, jnp.broadcast_to(x[-1:], (total - n,) + x.shape[1:])])


@functools.lru_cache(maxsize=64)
def _compiled(fn, mesh, axis_name, n_broadcast, n_args):
    specs = (P(),) * n_broadcast + (P(axis_name),) * n_args
    return jax.jit(jax.shard_map(
        fn, mesh=mesh, in_specs=specs, out_specs=P(axis_name), check_vma=False))


def sharded_batch_map(
    fn: Callable, *arrays: ArrayLike, mesh: Mesh | None = None, broadcast=()
):
    """Apply a batched ``fn`` with the leading axis of every array sharded.

    Args:
        fn: a jit-able function ``fn(*broadcast, *arrays)`` that maps a batch of
            rows to outputs with the same leading batch axis (a pytree of them);
            it must treat rows independently (padding rows are cut off). Pass the
            same function object again to reuse the compiled program.
        *arrays: arrays with a common leading length ``n >= 1``, sharded.
        mesh: a one-axis mesh (default :func:`device_mesh`).
        broadcast: arrays every device receives whole (parameters, centres).

    Returns:
        ``fn(*broadcast, *arrays)`` computed device-parallel, leading length
        ``n``.

    Raises:
        ValueError: no arrays, differing leading lengths, a multi-axis mesh.

    Cost: that of ``fn`` split over the devices, plus one pad and copy.

    Examples:
        >>> import jax.numpy as jnp
        >>> out = sharded_batch_map(jnp.multiply, jnp.arange(5.0),
        ...                         broadcast=(jnp.asarray(2.0),))
        >>> out.tolist()
        [0.0, 2.0, 4.0, 6.0, 8.0]
    """
    if not arrays:
        raise ValueError("sharded_batch_map needs at least one array")
    mesh = device_mesh() if mesh is None else mesh
    if len(mesh.axis_names) != 1:
        raise ValueError(f"mesh must have one axis, got {mesh.axis_names}")
    arrs = [jnp.asarray(a) for a in arrays]
    lengths = {a.shape[0] if a.ndim else None for a in arrs}
    if len(lengths) != 1 or None in lengths or 0 in lengths:
        raise ValueError(
            "arrays must share a leading batch length >= 1, got shapes "
            f"{[a.shape for a in arrs]}"
        )
    n = lengths.pop()
    d = mesh.size
    total = -(-n // d) * d
    axis = mesh.axis_names[0]
    sharding = NamedSharding(mesh, P(axis))
    padded = [jax.device_put(_pad(a, total), sharding) for a in arrs]
    consts = [jax.device_put(jnp.asarray(b), NamedSharding(mesh, P()))
              for b in broadcast]
    out = _compiled(fn, mesh, axis, len(consts), len(arrs))(*consts, *padded)
    if total == n:
        return out
    return jax.tree_util.tree_map(lambda o: o[:n], out)


@functools.lru_cache(maxsize=16)
def _gram_block_fn(spec, block_size):
    def fn(theta, Z, X):
        if block_size is None or block_size >= X.shape[0]:
            return gram_fn(spec, theta, X, Z)
        Xb, _ = pad_rows(X, block_size)
        out = jax.lax.map(lambda xb: gram_fn(spec, theta, xb, Z), Xb)
        return out.reshape(-1, Z.shape[0])[: X.shape[0]]
    return fn


def sharded_gram(
    kernel,
    X: Float[ArrayLike, "n_x n_features"],
    Z: Float[ArrayLike, "n_z n_features_z"] | None = None,
    *,
    params=None,
    mesh: Mesh | None = None,
    block_size: int | None = None,
) -> Float[Array, "n_x n_z"]:
    """Kernel matrix K(X, Z) with its rows sharded over the devices of ``mesh``.

    Args:
        kernel, params: a vector kernel (``"rbf"``, ``"polynomial"``,
            ``"linear"``, ``"regression"``).
        X: ``(n_x, d)``; Z: ``(n_z, d)`` or ``None`` for Z = X (replicated).
        mesh: a one-axis mesh (default: all devices).
        block_size: rows each device forms at once (``None``: its whole slice).

    Returns:
        ``(n_x, n_z)``; when ``n_x`` is a multiple of the device count its rows
        stay sharded, ``NamedSharding(mesh, P(axis))``.

    Raises:
        ValueError: as :func:`bayeskde.lowrank.blocked_gram`.

    Cost: O(n_x n_z d / D) time per device, O(n_x n_z / D) memory per device.
    """
    k = resolve_vector_kernel(kernel, params)
    X, Z = _check_pair(X, Z)
    bs = None if block_size is None else check_integer(block_size, "block_size")
    spec, theta = split_kernel(k)
    return sharded_batch_map(
        _gram_block_fn(spec, bs), X, mesh=mesh, broadcast=(theta, Z))


def _hmm_batch(log_initial, log_transition, log_likelihoods, mask):
    return jax.vmap(
        lambda ll, mk: forward_backward(log_initial, log_transition, ll, mask=mk)
    )(log_likelihoods, mask)


def sharded_hmm_posteriors(
    log_initial: Float[ArrayLike, " num_states"],
    log_transition: Float[ArrayLike, "num_states num_states"],
    log_likelihoods: Float[ArrayLike, "*dims"],
    *,
    mask: ArrayLike | None = None,
    mesh: Mesh | None = None,
) -> HMMPosterior:
    """Forward-backward on a batch of padded sequences, sequences over devices.

    Args:
        log_initial: ``(N,)``; log_transition: ``(N, N)`` (shared by the batch).
        log_likelihoods: ``(B, T, N)`` per-sequence log p(x_t | q_t).
        mask: optional ``(B, T)`` bool, False on padded steps.
        mesh: a one-axis mesh (default: all devices).

    Returns:
        :class:`bayeskde.hmm.HMMPosterior` with a leading batch axis:
        ``gamma`` ``(B, T, N)``, ``xi`` ``(B, N, N)``, ``log_likelihood`` ``(B,)``.

    Raises:
        ValueError: inconsistent shapes or NaN, or probabilities that do not sum
            to one (checked once on the first sequence with
            :func:`bayeskde.hmm.forward_backward`).

    Cost: O(B T N^2 / D) time per device, O(B T N / D) memory per device.
    """
    li = jnp.asarray(log_initial)
    lt = jnp.asarray(log_transition)
    ll = jnp.asarray(log_likelihoods)
    if ll.ndim != 3 or ll.shape[0] < 1:
        raise ValueError(
            f"log_likelihoods must be (B, T, N) with B >= 1, got shape {ll.shape}"
        )
    if np.isnan(np.asarray(ll)).any():
        raise ValueError("log_likelihoods contains NaN")
    mk = jnp.ones(ll.shape[:2], bool) if mask is None else jnp.asarray(mask, bool)
    if mk.shape != ll.shape[:2]:
        raise ValueError(
            f"mask must have shape {ll.shape[:2]} (B, T), got {mk.shape}"
        )
    # The public function validates parameters and shapes on one sequence.
    forward_backward(li, lt, ll[0], mask=mk[0])
    return sharded_batch_map(_hmm_batch, ll, mk, mesh=mesh, broadcast=(li, lt))


def initialize_distributed(
    coordinator_address: str | None = None,
    num_processes: int | None = None,
    process_id: int | None = None,
    local_device_ids=None,
    **kwargs,
) -> dict:
    """Join a multi-host run: a thin wrapper over ``jax.distributed.initialize``.

    Call it once per process before any other JAX call (see the module docstring
    for the launch). Arguments left ``None`` are detected from the cluster
    environment (SLURM, Open MPI, Cloud TPU).

    Returns:
        ``{"process_index", "process_count", "local_device_count",
        "device_count"}`` after initialisation.
    """
    if num_processes is not None:
        check_integer(num_processes, "num_processes", minimum=1)
    if process_id is not None:
        check_integer(process_id, "process_id", minimum=0,
                      maximum=None if num_processes is None else num_processes - 1)
    jax.distributed.initialize(
        coordinator_address=coordinator_address,
        num_processes=num_processes,
        process_id=process_id,
        local_device_ids=local_device_ids,
        **kwargs,
    )
    return {
        "process_index": jax.process_index(),
        "process_count": jax.process_count(),
        "local_device_count": jax.local_device_count(),
        "device_count": jax.device_count(),
    }
