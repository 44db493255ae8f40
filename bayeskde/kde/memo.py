"""A small, bounded memo of output kernel PCAs, shared by the KDE fits of a process.

The output kernel PCA of KDE (Weston et al. 2002, section 3 step 1) depends only
on the training outputs Y and the output kernel, not on the input kernel or the
ridge. A grid search or cross-validation loop refits the same fold with many
input rates and ridges, so :class:`bayeskde.KernelDependencyEstimator` looks its
output eigendecomposition up here first, as scikit-learn's ``RidgeCV`` reuses one
SVD across its alphas.

Safety. An entry is keyed by a content fingerprint (BLAKE2b of the bytes of the
validated array, with its shape and dtype) together with everything else the
value depends on (kernel, parameters, number of components, padded size). A
lookup that matches the key also compares the stored copy of the array with the
new one element by element, so a hit is never stale, even under a hash
collision. Cost of a lookup: one pass over the array's bytes (O(n d)).

Bounds. At most :data:`MAX_ENTRIES` entries and :data:`MAX_BYTES` bytes of
stored arrays, least recently used evicted first; an entry larger than
``MAX_BYTES`` is not stored. ``memoize=False`` on the estimator bypasses the
memo; :func:`clear_memo` empties it.
"""

from __future__ import annotations

import collections
import hashlib
import threading
from typing import Any

import numpy as np

__all__ = ["MAX_ENTRIES", "MAX_BYTES", "fingerprint", "memo_get", "memo_put",
           "clear_memo", "memo_size"]

#: Most entries kept.
MAX_ENTRIES = 4
#: Most bytes of stored arrays (keys' reference copies and values) kept.
MAX_BYTES = 256 * 2**20

_LOCK = threading.Lock()
_STORE: collections.OrderedDict = collections.OrderedDict()


def fingerprint(arr: np.ndarray) -> tuple:
    """A cheap content key of ``arr``: ``(shape, dtype, BLAKE2b-128 of its bytes)``."""
    arr = np.ascontiguousarray(arr)
    digest = hashlib.blake2b(arr.view(np.uint8).reshape(-1), digest_size=16)
    return (arr.shape, arr.dtype.str, digest.hexdigest())


def _nbytes(tree) -> int:
    if isinstance(tree, tuple | list):
        return sum(_nbytes(t) for t in tree)
    return int(getattr(tree, "nbytes", 0))


def memo_get(key: tuple, reference: np.ndarray) -> Any | None:
    """The value stored under ``key`` if its reference array equals ``reference``
    exactly, else ``None``."""
    with _LOCK:
        entry = _STORE.get(key)
        if entry is None:
            return None
        ref, value, _ = entry
        if ref.shape != reference.shape or not np.array_equal(ref, reference):
            return None
        _STORE.move_to_end(key)
        return value


def memo_put(key: tuple, reference: np.ndarray, value: Any) -> None:
    """Store ``value`` under ``key`` with a private copy of ``reference``."""
    ref = np.array(reference, copy=True)
    size = ref.nbytes + _nbytes(value)
    if size > MAX_BYTES:
        return
    with _LOCK:
        _STORE[key] = (ref, value, size)
        _STORE.move_to_end(key)
        while len(_STORE) > MAX_ENTRIES or sum(e[2] for e in _STORE.values()) > (
                MAX_BYTES):
            _STORE.popitem(last=False)


def clear_memo() -> None:
    """Empty the memo (free its arrays)."""
    with _LOCK:
        _STORE.clear()


def memo_size() -> int:
    """Number of entries held."""
    with _LOCK:
        return len(_STORE)
