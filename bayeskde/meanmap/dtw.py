"""Dynamic time warping distances between padded batches of sequences.

The 1-nearest-neighbour DTW classifier is the archive's reference (Dau et al.
2019, "The UCR time series archive"), and :class:`SequenceKernelClassifier`
keeps it as a fallback beside its kernels. ``D(x, y) = min over warping paths
of sum (x_i - y_j)^2`` (Sakoe and Chiba 1978; squared Euclidean local cost, as
the archive's and aeon's DTW), computed along anti-diagonals of the cost matrix
with a ``lax.scan`` over the diagonals and ``vmap``-free blocks of pairs, the
scheme of :func:`bayeskde.kernels.sequence.global_alignment_gram` with ``min``
in place of ``logsumexp``: no ``T x T`` matrix is stored.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jaxtyping import Float, Int

from .._typing import ArrayLike, float_dtype
from .._validation import check_integer, check_padded_series
from ..kernels.sequence import bucket_length
from .sequence_kernels import preprocess

__all__ = ["NearestNeighbourDTW", "dtw_distances"]


def _dtw_block(xs, nx, ys, ny, radius):
    """DTW of a block of pairs ``xs (P, T1, d)``, ``ys (P, T2, d)`` with true
    lengths ``nx``, ``ny`` and Sakoe-Chiba radius ``radius (P,)`` (cells with
    ``|i - j| > radius`` are excluded). State: the last two anti-diagonals,
    indexed by the row ``i``."""
    P, T1, _ = xs.shape
    T2 = ys.shape[1]
    dtype = xs.dtype
    inf = jnp.array(jnp.inf, dtype)
    rows = jnp.arange(T1)

    def _shift(v, fill):
        return jnp.concatenate([jnp.broadcast_to(fill, (P, 1)), v[:, :-1]], axis=1)

    def _step(carry, s):
        prev1, prev2, out = carry
        cols = s - rows
        valid = (cols >= 0) & (cols < T2)
        y_at = jnp.take(ys, jnp.clip(cols, 0, T2 - 1), axis=1)
        cost = jnp.sum((xs - y_at) ** 2, axis=-1)
        inband = jnp.abs(rows[None, :] - cols[None, :]) <= radius[:, None]
        origin = jnp.where(s == 0, jnp.zeros((), dtype), inf)
        best = jnp.minimum(jnp.minimum(_shift(prev1, inf), prev1),
                           _shift(prev2, origin))
        new = jnp.where(valid[None, :] & inband, cost + best, inf)
        end = s == nx + ny - 2
        out = jnp.where(end, jnp.take_along_axis(new, (nx - 1)[:, None], 1)[:, 0],
                        out)
        return (new, prev1, out), None

    init = (jnp.full((P, T1), inf), jnp.full((P, T1), inf), jnp.full((P,), inf))
    (_, _, out), _ = lax.scan(_step, init, jnp.arange(T1 + T2 - 1))
    return out


@jax.jit
def _dtw_pairs(xs, nx, ys, ny, radius):
    # a band narrower than the length difference admits no path: widen it
    r = jnp.maximum(radius, jnp.abs(nx - ny))
    return _dtw_block(xs, nx, ys, ny, r)


def dtw_distances(
    A: Float[ArrayLike, "n_a t_a d"],
    B: Float[ArrayLike, "n_b t_b d"] | None = None,
    *,
    lengths_a: Int[ArrayLike, " n_a"] | None = None,
    lengths_b: Int[ArrayLike, " n_b"] | None = None,
    window: float | None = None,
    block_size: int = 512,
) -> np.ndarray:
    """DTW distances between all pairs of two padded batches of sequences.

    Args:
        A, B: padded sequences ``(n, T_max, d)`` (``B`` defaults to ``A``; then
            only the upper triangle is computed and the diagonal is 0).
        lengths_a, lengths_b: true lengths (default: all ``T_max``).
        window: Sakoe-Chiba radius as a fraction of the longer padded length
            (``None`` or 1: unconstrained). A pair whose lengths differ by more
            than the radius gets the radius ``|n_x - n_y|``.
        block_size: pairs per compiled block (one compiled shape).

    Returns:
        ``(n_a, n_b)`` float64 NumPy array of the summed squared local costs
        along the best warping path.

    Raises:
        ValueError / TypeError: bad shapes, NaN/inf, lengths out of range, a
            ``window`` outside ``(0, 1]`` or a bad ``block_size``.

    Cost: O(n_a n_b T_a T_b d) time, O(block_size (T_a + T_b) d) memory.

    Examples:
        >>> import numpy as np
        >>> x = np.array([[0.0, 1.0, 2.0]])[:, :, None]
        >>> y = np.array([[0.0, 0.0, 1.0, 2.0]])[:, :, None]
        >>> float(dtw_distances(x, y)[0, 0])
        0.0
    """
    block_size = check_integer(block_size, "block_size", minimum=1)
    XA, la = check_padded_series(A, lengths_a, "A")
    sym = B is None
    XB, lb = (XA, la) if sym else check_padded_series(B, lengths_b, "B")
    if XA.shape[2] != XB.shape[2]:
        raise ValueError(
            f"A and B must have the same d, got {XA.shape[2]} and {XB.shape[2]}")
    if window is not None and (isinstance(window, bool) or not isinstance(
            window, int | float) or not 0 < window <= 1):
        raise ValueError(f"window must be None or a fraction in (0, 1], got "
                         f"{window!r}")
    T = max(XA.shape[1], XB.shape[1])
    radius = T if window is None else int(np.ceil(window * T))
    na, nb = XA.shape[0], XB.shape[0]
    if sym:
        ia, ib = np.triu_indices(na, k=1)
    else:
        ia, ib = (g.ravel() for g in np.meshgrid(np.arange(na), np.arange(nb),
                                                 indexing="ij"))
    out = np.zeros((na, nb))
    if len(ia) == 0:
        return out
    # the pairs of a block gathered here, a power of two of them from 64 up to
    # block_size (at most twice the pairs: a small training set's distances
    # cost less than compiling a program for its own count), the length
    # bucketed: a few compiled programs serve data sets of any size and of
    # nearby lengths
    dtype = float_dtype()
    Tb = bucket_length(T)
    XA, XB = _pad_time_to(XA, Tb, dtype), _pad_time_to(XB, Tb, dtype)
    bs = min(block_size, max(64, 1 << (len(ia) - 1).bit_length()))
    vals = np.empty(len(ia))
    r = jnp.full((bs,), radius, jnp.int32)
    for start in range(0, len(ia), bs):
        a = ia[start:start + bs]
        b = ib[start:start + bs]
        k = len(a)
        a = np.concatenate([a, np.repeat(a[:1], bs - k)])
        b = np.concatenate([b, np.repeat(b[:1], bs - k)])
        vals[start:start + k] = np.asarray(_dtw_pairs(
            XA[a], jnp.asarray(la[a], jnp.int32), XB[b],
            jnp.asarray(lb[b], jnp.int32), r))[:k]
    out[ia, ib] = vals
    if sym:
        out[ib, ia] = vals
    return out


def _pad_time_to(X, T, dtype):
    """``X`` as ``dtype``, padded along time to ``T`` frames with zeros (never
    read: the recursion ends at each pair's lengths)."""
    return np.pad(np.asarray(X, dtype), ((0, 0), (0, T - X.shape[1]), (0, 0)))


class NearestNeighbourDTW:
    """The 1-nearest-neighbour DTW rule as a component of
    :class:`~bayeskde.meanmap.SequenceKernelClassifier`: full-window DTW on the
    series after PAA to ``max_length`` frames (by the training set's longest
    length); ``D_`` holds the training distances and ``cross`` gives distances
    of new series to the training ones, not a kernel."""

    family = "dtw"

    def __init__(self, max_length, block_size):
        self.max_length, self.block_size = max_length, block_size

    def fit(self, sequences):
        self.t_ref_ = max(len(s) for s in sequences)
        self.X_, self.lengths_ = preprocess(sequences, self.max_length, 0.0,
                                            self.t_ref_)
        self.D_ = dtw_distances(self.X_, lengths_a=self.lengths_,
                                block_size=self.block_size)
        return self

    def cross(self, sequences):
        X, lengths = preprocess(sequences, self.max_length, 0.0, self.t_ref_)
        return dtw_distances(X, self.X_, lengths_a=lengths, lengths_b=self.lengths_,
                             block_size=self.block_size)
