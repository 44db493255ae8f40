"""Blocked k-nearest-neighbour search for Twin GP local models and starts.

The local Twin GP of Bo and Sminchisescu (2010, section 5; the original
``TGPKNN.m``) fits one model per test point on its k nearest training inputs
(Euclidean). With m = 10^5 training points and thousands of test points the
full test-by-training distance matrix does not fit in memory, so
:func:`nearest_neighbors` scans the training set in row blocks: each block's
distances to every query are formed, their k smallest kept with
``jax.lax.top_k``, and merged with the best k so far (a ``lax.scan`` over the
blocks). Memory O(n_query (k + block_size)), never O(n_query m).

References:
    Bo and Sminchisescu (2010), "Twin Gaussian Processes for Structured
    Prediction", IJCV 87, section 5 (k-nearest-neighbour TGP).
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float, Int

from .._typing import ArrayLike
from .._validation import check_data, check_integer
from ..kernels.standard import squared_distances

__all__ = [
    "DEFAULT_BLOCK_SIZE",
    "nearest_neighbors",
    "neighbor_indices",
]

_METHODS = ("auto", "tree", "blocked")

DEFAULT_BLOCK_SIZE = 4096
"""Training rows whose distances to all queries are held at once."""


def check_features(X, n_features, name):
    """Raise unless ``X`` has ``n_features`` columns (the training inputs')."""
    if X.shape[1] != n_features:
        raise ValueError(
            f"{name} has {X.shape[1]} features, but {n_features} were expected "
            "(the training inputs')"
        )


def _merge(best, new):
    """The k largest of two (values, indices) sets; ties keep ``best`` first."""
    k = best[0].shape[1]
    vals = jnp.concatenate([best[0], new[0]], axis=1)
    idx = jnp.concatenate([best[1], new[1]], axis=1)
    top, pos = jax.lax.top_k(vals, k)
    return top, jnp.take_along_axis(idx, pos, axis=1)


def top_k_neighbors(X_train, X_query, k, block_size):
    """Indices ``(n_query, k)`` of the k nearest training rows, nearest first.

    Not jitted (called inside the compiled predictions); see
    :func:`nearest_neighbors`. Returns (negated squared distances, indices).
    """
    m = X_train.shape[0]
    if block_size >= m:
        return jax.lax.top_k(-squared_distances(X_query, X_train), k)
    n_blocks = -(-m // block_size)
    pad = n_blocks * block_size - m
    Xp = jnp.concatenate(
        [X_train, jnp.zeros((pad, X_train.shape[1]), X_train.dtype)]
    ).reshape(n_blocks, block_size, X_train.shape[1])
    kb = min(k, block_size)
    cols = jnp.arange(block_size, dtype=jnp.int32)

    def _step(best, block):
        xb, start = block
        neg = -squared_distances(X_query, xb)
        neg = jnp.where((start + cols < m)[None, :], neg, -jnp.inf)  # padding rows
        vals, pos = jax.lax.top_k(neg, kb)
        return _merge(best, (vals, pos + start)), None

    n_query = X_query.shape[0]
    init = (
        jnp.full((n_query, k), -jnp.inf, X_query.dtype),
        jnp.zeros((n_query, k), jnp.int32),
    )
    starts = jnp.arange(n_blocks, dtype=jnp.int32) * block_size
    best, _ = jax.lax.scan(_step, init, (Xp, starts))
    return best


@functools.partial(jax.jit, static_argnames=("k", "block_size"))
def _nearest(X_train, X_query, k, block_size):
    neg, idx = top_k_neighbors(X_train, X_query, k, block_size)
    return -neg, idx


def _tree_neighbors(X_train, X_query, k):
    """scikit-learn's k nearest (float64 on the host), nearest first, ties to
    the lower training index: (squared distances, indices) as NumPy arrays."""
    from sklearn.neighbors import NearestNeighbors

    Xt = np.asarray(X_train, np.float64)
    dist, idx = NearestNeighbors(n_neighbors=k).fit(Xt).kneighbors(
        np.asarray(X_query, np.float64))
    order = np.lexsort((idx, dist), axis=-1)
    dist = np.take_along_axis(dist, order, axis=1)
    return dist * dist, np.take_along_axis(idx, order, axis=1)


def _resolve_method(method):
    if method not in _METHODS:
        raise ValueError(f"method must be one of {_METHODS}, got {method!r}")
    if method == "auto":
        return "tree" if jax.default_backend() == "cpu" else "blocked"
    return method


def neighbor_indices(X_train, X_query, k, block_size, method="auto"):
    """Indices ``(n_query, k)`` of the k nearest training rows (validated
    arrays; the core of :func:`nearest_neighbors` used by :class:`TwinGP`)."""
    if _resolve_method(method) == "tree":
        return jnp.asarray(_tree_neighbors(X_train, X_query, k)[1], jnp.int32)
    return _nearest(X_train, X_query, k, block_size)[1]


def nearest_neighbors(
    X_train: Float[ArrayLike, "n_samples ..."],
    X_query: Float[ArrayLike, "n_query ..."],
    n_neighbors: int,
    *,
    block_size: int = DEFAULT_BLOCK_SIZE,
    method: str = "auto",
) -> tuple[Float[Array, "n_query k"], Int[Array, "n_query k"]]:
    """The ``n_neighbors`` nearest training inputs of each query.

    Euclidean distance, as the original ``TGPKNN.m``. ``method="blocked"`` scans
    the training rows ``block_size`` at a time and merges each block's k best
    into a running top k, so the result equals ``jax.lax.top_k`` on the full
    distance matrix (ties go to the lower training index) without holding it.
    ``method="tree"`` asks scikit-learn's ``NearestNeighbors`` (float64, on the
    host; ties also to the lower index). ``"auto"``: the tree on the CPU
    backend, the blocked scan on accelerators (module docstring).

    Args:
        X_train: ``(m, d)`` training inputs (1-D: one feature).
        X_query: ``(n_query, d)`` queries.
        n_neighbors: k, 1 <= k <= m.
        block_size: training rows per block (>= 1); ``>= m`` is one block.
        method: ``"auto"``, ``"tree"`` or ``"blocked"``.

    Returns:
        ``(squared distances, indices)``, each ``(n_query, k)``, nearest first.

    Raises:
        ValueError: k out of range, feature mismatch, NaN/inf, block_size < 1,
            an unknown method.

    Cost: blocked O(n_query m (d + log k)) time, O(n_query (k + block_size))
    memory; tree O(m log m) to build and about O(k log m) per query in low d.

    Examples:
        >>> import numpy as np
        >>> d2, idx = nearest_neighbors(np.arange(10.0), np.array([2.2, 7.9]), 2,
        ...                             block_size=3, method="blocked")
        >>> idx.tolist()
        [[2, 3], [8, 7]]
    """
    X_train = check_data(X_train, "X_train")
    X_query = check_data(X_query, "X_query")
    check_features(X_query, X_train.shape[1], "X_query")
    k = check_integer(n_neighbors, "n_neighbors", minimum=1, maximum=X_train.shape[0])
    bs = check_integer(block_size, "block_size", minimum=1)
    if _resolve_method(method) == "tree":
        d2, idx = _tree_neighbors(X_train, X_query, k)
        return jnp.asarray(d2, X_query.dtype), jnp.asarray(idx, jnp.int32)
    return _nearest(X_train, X_query, k, min(bs, X_train.shape[0]))
