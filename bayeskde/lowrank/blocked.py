"""Blocked Gram-matrix products: K(X, Z) @ V without holding K(X, Z).

Where only products with a Gram matrix are needed (conjugate gradients, randomised
eigensolvers, the diagonal, column means), the rows of X are cut into blocks of
``block_size``; each block's kernel is formed, used and dropped inside a
``lax.map`` / ``lax.scan``, so memory is O(block_size n_z) instead of O(n_x n_z).
``block_size=None`` forms the whole matrix at once (fastest when it fits).

Kernels are the vector kernels of :mod:`bayeskde.kernels.standard` resolved by
:func:`bayeskde.kernels.registry.make_kernel`: ``"rbf"``, ``"polynomial"``,
``"linear"`` and ``"regression"``. Internally a kernel is split into a static part
(name, polynomial degree) and a dynamic parameter vector, so a new ``gamma`` does
not recompile.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
from jaxtyping import Array, Float

from .._linalg import pad_rows
from .._typing import ArrayLike
from .._validation import as_float_array, check_integer
from ..kernels.registry import Kernel, make_kernel
from ..kernels.standard import VECTOR_KERNELS, diag_fn, gram_fn, split_params

__all__ = [
    "LOWRANK_KERNELS",
    "resolve_vector_kernel",
    "blocked_gram",
    "blocked_matmul",
    "blocked_rmatmul",
    "blocked_diag",
    "blocked_col_means",
]

#: Kernels with a jit-friendly closed form that the low-rank paths accept.
LOWRANK_KERNELS = VECTOR_KERNELS


def resolve_vector_kernel(kernel, params=None, name: str = "kernel", *,
                          data=None) -> Kernel:
    """Resolve ``kernel`` (name + params, or a :class:`Kernel`) to a vector kernel.

    ``data``: where given, a ``"median"`` parameter is resolved on it
    (:meth:`bayeskde.kernels.Kernel.fit`); otherwise it must already be a number.

    Raises:
        ValueError: if the kernel is not one of :data:`LOWRANK_KERNELS` or carries
            the ``rbf_sigma`` map (which needs the base kernel's diagonal).
    """
    if callable(kernel) and not isinstance(kernel, Kernel | str):
        raise ValueError(
            f"{name} must be one of {LOWRANK_KERNELS} for the low-rank paths, got a "
            "callable"
        )
    k = make_kernel(kernel, params)
    if data is not None and k.name in LOWRANK_KERNELS:
        k = k.fit(data)
    if k.name not in LOWRANK_KERNELS or "rbf_sigma" in k.params:
        raise ValueError(
            f"{name} must be one of {LOWRANK_KERNELS} (without rbf_sigma) for the "
            f"low-rank paths, got {k.name!r}"
        )
    return k


def split_kernel(k: Kernel):
    """(static spec, dynamic theta) of a resolved vector kernel
    (:func:`bayeskde.kernels.standard.split_params`)."""
    return split_params(k.name, k.params)


def scan_sum(fn, init, blocks):
    """sum_b fn(*block_b) over pre-blocked arrays (leading axis: blocks) by a
    ``lax.scan``; ``init`` is the zero of fn's output pytree."""
    def _step(acc, blk):
        return jax.tree.map(jnp.add, acc, fn(*blk)), None

    return jax.lax.scan(_step, init, blocks)[0]


def block_sum(fn, init, block_size, *rows):
    """sum over row blocks of ``fn(mask, *row_blocks)``: the rows of every array in
    ``rows`` are cut into blocks of ``block_size`` (padded; ``mask`` is 1 on real
    rows, 0 on padding, for ``fn`` to apply). Memory: one block's intermediates."""
    mask = pad_rows(rows[0], block_size)[1]
    return scan_sum(fn, init, (mask, *(pad_rows(r, block_size)[0] for r in rows)))


def block_map(fn, X, block_size):
    """``fn(X)`` computed block by block of rows (a ``lax.map``); ``fn`` must act
    on rows independently. ``block_size=None`` (or >= n) applies it at once."""
    if block_size is None or block_size >= X.shape[0]:
        return fn(X)
    out = jax.lax.map(fn, pad_rows(X, block_size)[0])
    return out.reshape((-1,) + out.shape[2:])[: X.shape[0]]


def matmul_core(spec, theta, X, Z, V, block_size):
    """K(X, Z) @ V, blocked over the rows of X (unvalidated core)."""
    return block_map(lambda xb: gram_fn(spec, theta, xb, Z) @ V, X, block_size)


def rmatmul_core(spec, theta, X, Z, U, block_size):
    """K(X, Z)^T @ U accumulated over row blocks of X (unvalidated core)."""
    if block_size is None or block_size >= X.shape[0]:
        return gram_fn(spec, theta, X, Z).T @ U

    def fn(mb, xb, ub):
        return gram_fn(spec, theta, xb, Z).T @ (mb[:, None] * ub)

    acc0 = jnp.zeros((Z.shape[0], U.shape[1]), U.dtype)
    return block_sum(fn, acc0, block_size, X, U)


@functools.partial(jax.jit, static_argnames=("spec", "block_size"))
def _gram_jit(spec, theta, X, Z, block_size):
    return block_map(lambda xb: gram_fn(spec, theta, xb, Z), X, block_size)


_matmul_jit = jax.jit(matmul_core, static_argnames=("spec", "block_size"))
_rmatmul_jit = jax.jit(rmatmul_core, static_argnames=("spec", "block_size"))


def _check_block(block_size):
    return None if block_size is None else check_integer(
        block_size, "block_size", minimum=1)


def check_apply_args(kernel, params, X, centers, block_size):
    """Validate (kernel, X, block_size) for evaluating a fit on the rows of X
    against its ``centers``: ``(spec, theta, X, block_size)``."""
    k = resolve_vector_kernel(kernel, params)
    X = as_float_array(X, "X", ndim=2)
    if X.shape[1] != centers.shape[1]:
        raise ValueError(
            f"X must have {centers.shape[1]} features (as the centres), got shape "
            f"{X.shape}"
        )
    spec, theta = split_kernel(k)
    return spec, theta, X, _check_block(block_size)


def check_pair(X, Z):
    X = as_float_array(X, "X", ndim=2)
    Z = X if Z is None else as_float_array(Z, "Z", ndim=2)
    if X.shape[1] != Z.shape[1]:
        raise ValueError(
            f"X and Z must have the same number of features, got {X.shape[1]} and "
            f"{Z.shape[1]}"
        )
    return X, Z


def blocked_gram(
    kernel,
    X: Float[ArrayLike, "n_x n_features"],
    Z: Float[ArrayLike, "n_z n_features_z"] | None = None,
    *,
    params=None,
    block_size: int | None = None,
) -> Float[Array, "n_x n_z"]:
    """The Gram matrix K(X, Z) built block by block of rows (peak memory of the
    kernel evaluation O(block_size n_z) besides the output).

    Cost: O(n_x n_z d) time, O(n_x n_z) memory for the result.
    """
    k = resolve_vector_kernel(kernel, params)
    X, Z = check_pair(X, Z)
    spec, theta = split_kernel(k)
    return _gram_jit(spec, theta, X, Z, _check_block(block_size))


def blocked_matmul(
    kernel,
    X: Float[ArrayLike, "n_x n_features"],
    Z: Float[ArrayLike, "n_z n_features_z"],
    V: Float[ArrayLike, "n_z_v n_cols"],
    *,
    params=None,
    block_size: int | None = None,
) -> Float[Array, "n_x n_cols"]:
    """K(X, Z) @ V without forming K(X, Z) (a ``lax.map`` over row blocks).

    Args:
        kernel, params: a vector kernel (see :data:`LOWRANK_KERNELS`).
        X: ``(n_x, d)``; Z: ``(n_z, d)``; V: ``(n_z, c)``.
        block_size: rows of X per block; ``None`` forms K(X, Z) at once.

    Returns:
        ``(n_x, c)``.

    Raises:
        ValueError: on mismatched shapes, NaN/inf, a non-vector kernel or a
            block_size < 1.

    Cost: O(n_x n_z (d + c)) time, O(block_size n_z + n_x c) memory.

    Examples:
        >>> import numpy as np
        >>> X = np.eye(3)
        >>> V = np.ones((3, 1))
        >>> np.asarray(blocked_matmul("linear", X, X, V, block_size=2)).ravel().tolist()
        [1.0, 1.0, 1.0]
    """
    k = resolve_vector_kernel(kernel, params)
    X, Z = check_pair(X, Z)
    V = as_float_array(V, "V", ndim=2)
    if V.shape[0] != Z.shape[0]:
        raise ValueError(f"V must have {Z.shape[0]} rows (one per row of Z), got "
                         f"shape {V.shape}")
    spec, theta = split_kernel(k)
    return _matmul_jit(spec, theta, X, Z, V, _check_block(block_size))


def blocked_rmatmul(
    kernel,
    X: Float[ArrayLike, "n_x n_features"],
    Z: Float[ArrayLike, "n_z n_features_z"],
    U: Float[ArrayLike, "n_x_u n_cols"],
    *,
    params=None,
    block_size: int | None = None,
) -> Float[Array, "n_z n_cols"]:
    """K(X, Z)^T @ U, accumulated over row blocks of X by a ``lax.scan``.

    Cost: O(n_x n_z (d + c)) time, O(block_size n_z + n_z c) memory.
    """
    k = resolve_vector_kernel(kernel, params)
    X, Z = check_pair(X, Z)
    U = as_float_array(U, "U", ndim=2)
    if U.shape[0] != X.shape[0]:
        raise ValueError(f"U must have {X.shape[0]} rows (one per row of X), got "
                         f"shape {U.shape}")
    spec, theta = split_kernel(k)
    return _rmatmul_jit(spec, theta, X, Z, U, _check_block(block_size))


def blocked_diag(
    kernel, X: Float[ArrayLike, "n_x n_features"], *, params=None
) -> Float[Array, " n_x"]:
    """k(x_i, x_i) for every row, O(n d) time and O(n) memory (no Gram)."""
    k = resolve_vector_kernel(kernel, params)
    X = as_float_array(X, "X", ndim=2)
    spec, theta = split_kernel(k)
    return diag_fn(spec, theta, X)


def blocked_col_means(
    kernel,
    X: Float[ArrayLike, "n_x n_features"],
    *,
    params=None,
    block_size: int | None = None,
) -> Float[Array, " n_x"]:
    """Column means of K(X, X) (for KPCA centring), O(n^2 d) time, blocked memory."""
    k = resolve_vector_kernel(kernel, params)
    X = as_float_array(X, "X", ndim=2)
    spec, theta = split_kernel(k)
    ones = jnp.full((X.shape[0], 1), 1.0 / X.shape[0], X.dtype)
    return _rmatmul_jit(spec, theta, X, X, ones, _check_block(block_size))[:, 0]
