"""Running bayeskde on several devices or hosts with ``jax.sharding``.

Data-parallel helpers over a one-axis :class:`jax.sharding.Mesh`: the leading
(batch) axis is cut into one slice per device with
``NamedSharding(mesh, PartitionSpec(axis))`` and each device runs the same
program on its slice (``jax.shard_map``). A batch whose length is not a multiple
of the device count is padded with copies of its last item, and the padding is cut
from the result, so results equal the single-device ones.

- :func:`sharded_batch_map`: any batched function ``fn(*arrays)`` (predictions
  of a fitted KDE or Twin GP on test points, kernel rows, ...) over the devices.
  It knows no algorithm; the sharded Gram
  (:func:`bayeskde.lowrank.sharded_gram`), the sharded HMM posteriors
  (:func:`bayeskde.hmm.sharded_hmm_posteriors`) and the sharded Twin GP
  (:func:`bayeskde.tgp.tgp_predict_sharded`) are built on it in their packages.
- :func:`sharded_sum`: a sum over data rows (sufficient statistics such as
  Phi^T Phi and Phi^T x) with the rows sharded over the devices and streamed
  in chunks, so that only one chunk is ever on the devices (the inverse
  model's low-rank statistics,
  :func:`bayeskde.inverse.lowrank.lowrank_statistics`, use it).
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
posteriors, batched predictions and the inverse model's streamed low-rank
statistics (:func:`sharded_sum`) against one device
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

from ._linalg import pad_to_multiple
from ._typing import ArrayLike
from ._validation import check_integer

__all__ = [
    "device_mesh",
    "sharded_batch_map",
    "sharded_sum",
    "initialize_distributed",
]

AXIS = "batch"
#: Rows each device sums at once in :func:`sharded_sum`.
CHUNK_ROWS = 8192


def device_mesh(devices=None, axis_name: str = AXIS) -> Mesh:
    """A one-axis mesh over ``devices`` (default: all of ``jax.devices()``)."""
    devs = np.asarray(jax.devices() if devices is None else list(devices))
    if devs.size == 0:
        raise ValueError("devices is empty; need at least one device")
    return Mesh(devs.reshape(-1), (axis_name,))


@functools.lru_cache(maxsize=64)
def _compiled(fn, mesh, axis_name, n_broadcast, n_args):
    specs = (P(),) * n_broadcast + (P(axis_name),) * n_args
    return jax.jit(jax.shard_map(
        fn, mesh=mesh, in_specs=specs, out_specs=P(axis_name), check_vma=False))


def _batch_arrays(mesh, arrs):
    """The mesh (default: every device; one axis) and the arrays' shared
    leading batch length (>= 1), checked."""
    mesh = device_mesh() if mesh is None else mesh
    if len(mesh.axis_names) != 1:
        raise ValueError(f"mesh must have one axis, got {mesh.axis_names}")
    lengths = {a.shape[0] if a.ndim else None for a in arrs}
    if len(lengths) != 1 or None in lengths or 0 in lengths:
        raise ValueError(
            "arrays must share a leading batch length >= 1, got shapes "
            f"{[a.shape for a in arrs]}"
        )
    return mesh, arrs, lengths.pop()


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
    mesh, arrs, n = _batch_arrays(mesh, [jnp.asarray(a) for a in arrays])
    d = mesh.size
    total = -(-n // d) * d
    axis = mesh.axis_names[0]
    sharding = NamedSharding(mesh, P(axis))
    padded = [jax.device_put(pad_to_multiple(a, d)[0], sharding) for a in arrs]
    consts = [jax.device_put(jnp.asarray(b), NamedSharding(mesh, P()))
              for b in broadcast]
    out = _compiled(fn, mesh, axis, len(consts), len(arrs))(*consts, *padded)
    if total == n:
        return out
    return jax.tree_util.tree_map(lambda o: o[:n], out)


@functools.lru_cache(maxsize=64)
def _compiled_sum(fn, mesh, axis_name, n_broadcast, n_args):
    specs = (P(),) * n_broadcast + (P(axis_name),) * (n_args + 1)

    def body(*args):
        return jax.tree.map(lambda s: jax.lax.psum(s, axis_name), fn(*args))

    return jax.jit(jax.shard_map(
        body, mesh=mesh, in_specs=specs, out_specs=P(), check_vma=False))


def sharded_sum(
    fn: Callable, *arrays: ArrayLike, mesh: Mesh | None = None, broadcast=(),
    chunk_rows: int = CHUNK_ROWS, progress_bar: bool = False,
    desc: str = "chunks",
):
    """Sum ``fn`` over the rows of ``arrays``: rows sharded over the devices of
    ``mesh`` and streamed in chunks of ``chunk_rows`` rows a device.

    Each chunk of ``n_dev * b`` rows (b = min(chunk_rows, ceil(n / n_dev))) is
    put on the devices with its rows split ``NamedSharding(mesh, P(axis))``;
    every device computes ``fn(*broadcast, *blocks, mask)`` on its b rows and
    the per-device sums are added by ``psum``; the chunks' sums are added on
    the host in float64. The last chunk is padded with zero rows whose
    ``mask`` is 0, so ``fn`` must weight every row's contribution by ``mask``
    (``(b,)``, 1 on real rows). Under ``jax.distributed`` every process passes
    the same global arrays and receives the same (replicated) sums.

    Args:
        fn: jit-able ``fn(*broadcast, *blocks, mask)`` returning a pytree of
            arrays, the sum of its rows' contributions. Pass the same function
            object again to reuse the compiled program.
        *arrays: arrays with a common leading length ``n >= 1`` (kept on the
            host; one chunk at a time goes to the devices).
        mesh: a one-axis mesh (default :func:`device_mesh`).
        broadcast: arrays every device receives whole (centres, weights).
        chunk_rows: rows a device takes per chunk (its working memory).
        progress_bar, desc: a tqdm bar over the chunks (when more than one).

    Returns:
        The pytree of ``fn``'s sums over all rows, as float64 NumPy arrays.

    Raises:
        ValueError: no arrays, differing leading lengths, a multi-axis mesh, a
            ``chunk_rows`` below 1.

    Cost: that of ``fn`` over n rows split over the devices; device memory
    that of ``fn`` on ``chunk_rows`` rows plus the broadcast arrays; host
    memory the arrays.

    Examples:
        >>> import numpy as np
        >>> x = np.arange(10.0)[:, None]
        >>> out = sharded_sum(lambda xb, w: (xb[:, 0] * w) @ xb[:, 0], x,
        ...                   chunk_rows=3)
        >>> float(out)
        285.0
    """
    if not arrays:
        raise ValueError("sharded_sum needs at least one array")
    chunk_rows = check_integer(chunk_rows, "chunk_rows", minimum=1)
    mesh, arrs, n = _batch_arrays(mesh, [np.asarray(a) for a in arrays])
    d = mesh.size
    b = min(chunk_rows, -(-n // d))
    step = b * d
    axis = mesh.axis_names[0]
    rows = NamedSharding(mesh, P(axis))
    consts = [jax.device_put(jnp.asarray(c), NamedSharding(mesh, P()))
              for c in broadcast]
    prog = _compiled_sum(fn, mesh, axis, len(consts), len(arrs))
    starts = range(0, n, step)
    if progress_bar and len(starts) > 1:
        from tqdm.auto import tqdm

        starts = tqdm(starts, desc=desc, leave=False)
    total = None
    for i in starts:
        k = min(step, n - i)
        blocks = [a[i:i + k] for a in arrs]
        mask = np.ones(k, blocks[0].dtype if blocks[0].dtype.kind == "f"
                       else np.float64)
        if k < step:
            blocks = [np.concatenate([a, np.zeros((step - k, *a.shape[1:]), a.dtype)])
                      for a in blocks]
            mask = np.concatenate([mask, np.zeros(step - k, mask.dtype)])
        out = prog(*consts, *(jax.device_put(a, rows) for a in (*blocks, mask)))
        out = jax.tree.map(lambda a: np.asarray(a, np.float64), out)
        total = out if total is None else jax.tree.map(np.add, total, out)
    return total


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
