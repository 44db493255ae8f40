"""A kernel matrix with its rows sharded over devices."""

from __future__ import annotations

import functools

import jax
from jax.sharding import Mesh
from jaxtyping import Array, Float

from .._linalg import pad_rows
from .._typing import ArrayLike
from .._validation import check_integer
from ..distributed import sharded_batch_map
from .blocked import check_pair, gram_fn, resolve_vector_kernel, split_kernel

__all__ = ["sharded_gram"]


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
    X, Z = check_pair(X, Z)
    bs = None if block_size is None else check_integer(block_size, "block_size")
    spec, theta = split_kernel(k)
    return sharded_batch_map(
        _gram_block_fn(spec, bs), X, mesh=mesh, broadcast=(theta, Z))
