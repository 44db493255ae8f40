"""Kernels between time series: global alignment and truncated signatures.

* :func:`global_alignment_gram`: the (triangular) global alignment kernel of
  Cuturi, Vert, Birkenes and Matsui (2007) in the form of Cuturi (2011),

      k_GA(x, y) = sum_{pi in A(n, m)} prod_{i=1}^{|pi|} kappa(x_{pi_1(i)}, y_{pi_2(i)})

  over all alignments ``pi`` of ``x`` (length ``n``) and ``y`` (length ``m``)
  (Cuturi 2011, eq. (2)), with the local kernel ``kappa = exp(-phi_sigma)``,
  ``phi_sigma(a, b) = ||a - b||^2 / (2 sigma^2) + log(2 - exp(-||a - b||^2 /
  (2 sigma^2)))`` (eq. (4)), which makes ``k_GA`` positive definite, optionally
  multiplied by the triangular weight ``omega(i, j) = (1 - |i - j| / T)_+`` that
  keeps only alignments near the diagonal (section 4.2). It is the sum over the
  lattice paths of the DTW recursion, ``M[i, j] = kappa(x_i, y_j) (M[i-1, j-1] +
  M[i-1, j] + M[i, j-1])`` (eq. (3)), computed in log space along anti-diagonals
  so that every step is one vectorised update over a block of pairs. The
  returned matrix is cosine-normalised in log space, ``exp(log k(x, y) - (log
  k(x, x) + log k(y, y)) / 2)``, which keeps it positive definite and in (0, 1].
* :func:`signature_features` / :func:`truncated_signature_kernel`: the truncated
  signature of a piecewise-linear path, ``S(x) = exp(dx_1) (x) ... (x) exp(dx_n)``
  in the tensor algebra truncated at ``depth`` (Chen's identity; Lyons 1998;
  Kiraly and Oberhauser 2019, "Kernels for sequentially ordered data", JMLR 20,
  section 2, eq. (2)), and the truncated signature kernel ``k(x, y) = sum_{m=0}^M
  <S_m(x), S_m(y)>`` (ibid., definition 4.1 with the tensor kernel of the
  identity map).

Sequences come padded, ``(n, T_max, d)`` with ``(n,)`` lengths; padding never
changes a value: the alignment recursion only reads cells before the true end, and
padded increments of a path are zero (``exp(0)`` is the identity).

Cost: the global alignment Gram of ``n_a x n_b`` pairs of length ``T``: O(n_a n_b
T^2 d) time, O(block T d) memory (no ``T x T`` matrix is formed); the signature
features: O(n T d^M) time and O(n d^M) memory.
"""

from __future__ import annotations

from functools import partial
from math import factorial

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jaxtyping import Array, Float, Int

from .._typing import ArrayLike, float_dtype
from .._validation import check_integer, check_padded_series, check_positive

__all__ = [
    "bucket_length",
    "pad_series",
    "log_global_alignment",
    "global_alignment_gram",
    "gak_sigma",
    "signature_features",
    "signature_dimension",
    "truncated_signature_kernel",
]

DEFAULT_BLOCK_SIZE = 512
"""Sequence pairs per compiled block of the alignment recursion."""

_PAIR_STEP = 64
"""Blocks of fewer pairs than ``block_size`` are padded to a multiple of this."""

_SIGNATURE_TILE = 256
"""Series per compiled call of the signature recursion."""


def bucket_length(n: int) -> int:
    """``n`` rounded up to a multiple of ``max(8, 2^(bit_length(n) - 4))``: at
    most 1/8 more and few distinct values (multiples of 8 below 128, 16 up to
    256, ...), so that the padded arrays of data sets of nearby lengths share
    one compiled program (and the persistent compilation cache serves a set
    from another's entry).

    Examples:
        >>> [bucket_length(n) for n in (1, 24, 80, 128, 131, 345, 1460)]
        [8, 24, 80, 128, 144, 352, 1536]
    """
    n = check_integer(n, "n", minimum=1)
    step = max(8, 1 << max(n.bit_length() - 4, 0))
    return -(-n // step) * step


def _pad_time_to(X, T):
    """``(n, t, d)`` padded along time to ``T >= t`` by repeating the last frame
    (never read past each length)."""
    extra = T - X.shape[1]
    return np.concatenate([X, np.repeat(X[:, -1:], extra, axis=1)], axis=1) if (
        extra > 0) else X


def pad_series(X) -> tuple[np.ndarray, np.ndarray]:
    """Pad a list of ``(T_i,)`` or ``(T_i, d)`` cases into ``(n, T_max, d)``.

    Padding repeats each case's last frame (so finite differences and path
    increments vanish there); a case must be non-empty and finite.

    Raises:
        ValueError: no cases, an empty or non-finite case, unequal ``d``.
    """
    cases = [np.asarray(x, dtype=np.float64) for x in X]
    if not cases:
        raise ValueError("X is empty; need at least one case")
    cases = [c[:, None] if c.ndim == 1 else c for c in cases]
    dims = {c.shape[1] if c.ndim == 2 else None for c in cases}
    if len(dims) != 1 or None in dims:
        raise ValueError(f"X cases must be (T_i, d) with one d, got d in {dims}")
    lengths = np.array([len(c) for c in cases])
    if lengths.min() < 1:
        raise ValueError(f"X case {int(np.argmin(lengths))} is empty")
    out = np.empty((len(cases), lengths.max(), dims.pop()))
    for i, c in enumerate(cases):
        if not np.all(np.isfinite(c)):
            raise ValueError(f"X case {i} contains NaN or inf")
        out[i, : len(c)] = c
        out[i, len(c):] = c[-1]
    return out, lengths


# --------------------------------------------------------------- global alignment


def _log_local_kernel(sq, inv_two_sigma2):
    """``-phi_sigma`` of Cuturi (2011), eq. (4), from squared distances."""
    a = sq * inv_two_sigma2
    return -(a + jnp.log(2.0 - jnp.exp(-a)))


def _log_gak_block(xs, nx, ys, ny, inv_two_sigma2, triangular):
    """``log k_GA`` for a block of pairs: ``xs (P, T1, d)``, ``ys (P, T2, d)``.

    The state is two anti-diagonals of ``log M`` indexed by the row ``i``: cell
    ``(i, j)`` of diagonal ``s = i + j`` needs ``(i-1, j)`` and ``(i, j-1)`` from
    diagonal ``s - 1`` and ``(i-1, j-1)`` from ``s - 2``; the virtual origin
    ``M[-1, -1] = 1`` enters at ``s = 0``.
    """
    P, T1, _ = xs.shape
    T2 = ys.shape[1]
    dtype = xs.dtype
    neg = jnp.array(-jnp.inf, dtype)
    rows = jnp.arange(T1)
    band = jnp.asarray(triangular, dtype)

    def _shift(v, fill):
        return jnp.concatenate([jnp.broadcast_to(fill, (P, 1)), v[:, :-1]], axis=1)

    def _step(carry, s):
        prev1, prev2, out = carry
        cols = s - rows
        valid = (cols >= 0) & (cols < T2)
        y_at = jnp.take(ys, jnp.clip(cols, 0, T2 - 1), axis=1)
        sq = jnp.sum((xs - y_at) ** 2, axis=-1)
        logk = _log_local_kernel(sq, inv_two_sigma2)
        weight = 1.0 - jnp.abs(rows - cols).astype(dtype) / jnp.maximum(band, 1.0)
        logw = jnp.where(weight > 0, jnp.log(jnp.maximum(weight, 1e-30)), neg)
        logk = logk + jnp.where(band > 0, logw, 0.0)[None, :]
        origin = jnp.where(s == 0, jnp.zeros((), dtype), neg)
        terms = jnp.stack([_shift(prev1, neg), prev1, _shift(prev2, origin)])
        top = jnp.max(terms, axis=0)
        safe = jnp.where(jnp.isfinite(top), top, 0.0)
        lse = safe + jnp.log(jnp.sum(jnp.exp(terms - safe[None]), axis=0))
        new = jnp.where(valid[None, :], logk + jnp.where(jnp.isfinite(top), lse,
                                                           neg), neg)
        end = s == nx + ny - 2
        out = jnp.where(end, jnp.take_along_axis(new, (nx - 1)[:, None], 1)[:, 0],
                        out)
        return (new, prev1, out), None

    init = (jnp.full((P, T1), neg), jnp.full((P, T1), neg), jnp.full((P,), neg))
    (_, _, out), _ = lax.scan(_step, init, jnp.arange(T1 + T2 - 1))
    return out


_log_gak_pairs = jax.jit(_log_gak_block)


def _pairs_log_gak(XA, la, XB, lb, ia, ib, inv, tri, block_size):
    """``log k_GA`` of the pairs ``(ia[k], ib[k])`` in blocks of one shape: the
    pairs of a block are gathered here (not inside the compiled program), the
    number per block is a multiple of 64 up to ``block_size`` and the length a
    :func:`bucket_length`, so the program depends on neither data set size."""
    out = np.empty(len(ia), dtype=np.float64)
    if len(ia) == 0:
        return out
    T = bucket_length(max(XA.shape[1], XB.shape[1]))
    dtype = float_dtype()
    XA = _pad_time_to(np.asarray(XA, dtype), T)
    XB = _pad_time_to(np.asarray(XB, dtype), T)
    bs = min(block_size, -(-len(ia) // _PAIR_STEP) * _PAIR_STEP)
    for start in range(0, len(ia), bs):
        a, b = ia[start:start + bs], ib[start:start + bs]
        k = len(a)
        a = np.concatenate([a, np.repeat(a[:1], bs - k)])
        b = np.concatenate([b, np.repeat(b[:1], bs - k)])
        vals = _log_gak_pairs(XA[a], jnp.asarray(la[a], jnp.int32), XB[b],
                              jnp.asarray(lb[b], jnp.int32), inv, tri)
        out[start:start + k] = np.asarray(vals)[:k]
    return out


def log_global_alignment(
    A: Float[ArrayLike, "n_a t_a d"],
    B: Float[ArrayLike, "n_b t_b d"] | None = None,
    *,
    sigma: float,
    triangular: int = 0,
    lengths_a: Int[ArrayLike, " n_a"] | None = None,
    lengths_b: Int[ArrayLike, " n_b"] | None = None,
    block_size: int = DEFAULT_BLOCK_SIZE,
) -> np.ndarray:
    """Unnormalised ``log k_GA`` between all pairs (Cuturi 2011, eqs. (2)-(4)).

    Args:
        A, B: padded sequences ``(n, T_max, d)`` (``B`` defaults to ``A``; then
            only the upper triangle is computed).
        sigma: bandwidth of the local kernel, > 0.
        triangular: ``T`` of the triangular weight ``(1 - |i - j| / T)_+``;
            0 (default) keeps every alignment.
        lengths_a, lengths_b: true lengths (default: all ``T_max``).
        block_size: pairs per compiled block.

    Returns:
        ``(n_a, n_b)`` float64 NumPy array of log kernel values (``-inf`` where
        the triangular band admits no alignment).

    Raises:
        ValueError / TypeError: bad shapes, NaN/inf, lengths out of range, or
            a non-positive ``sigma``.
    """
    sigma = check_positive(sigma, "sigma")
    tri = check_integer(triangular, "triangular", minimum=0)
    block_size = check_integer(block_size, "block_size", minimum=1)
    XA, la = check_padded_series(A, lengths_a, "A")
    sym = B is None
    XB, lb = (XA, la) if sym else check_padded_series(B, lengths_b, "B")
    if XA.shape[2] != XB.shape[2]:
        raise ValueError(
            f"A and B must have the same d, got {XA.shape[2]} and {XB.shape[2]}")
    na, nb = XA.shape[0], XB.shape[0]
    if sym:
        ia, ib = np.triu_indices(na)
    else:
        ia, ib = (g.ravel() for g in np.meshgrid(np.arange(na), np.arange(nb),
                                                 indexing="ij"))
    dtype = float_dtype()
    inv = jnp.asarray(1.0 / (2.0 * sigma**2), dtype)
    vals = _pairs_log_gak(XA, la, XB, lb, ia, ib, inv, jnp.asarray(tri, dtype),
                          block_size)
    L = np.empty((na, nb))
    L[ia, ib] = vals
    if sym:
        L[ib, ia] = vals
    return L


def global_alignment_gram(
    A: Float[ArrayLike, "n_a t_a d"],
    B: Float[ArrayLike, "n_b t_b d"] | None = None,
    *,
    sigma: float,
    triangular: int = 0,
    lengths_a: Int[ArrayLike, " n_a"] | None = None,
    lengths_b: Int[ArrayLike, " n_b"] | None = None,
    block_size: int = DEFAULT_BLOCK_SIZE,
    return_diag: bool = False,
):
    """Cosine-normalised global alignment kernel matrix (Cuturi 2011).

    ``K[i, j] = exp(log k(a_i, b_j) - (log k(a_i, a_i) + log k(b_j, b_j)) / 2)``;
    the normalisation is done in log space, where ``k_GA`` of long series does not
    overflow. Cost O(n_a n_b T^2 d) time, O(block_size T d) memory.

    Args:
        A, B, sigma, triangular, lengths_a, lengths_b, block_size: as for
            :func:`log_global_alignment`.
        return_diag: also return the self log kernels ``(log k(a, a), log k(b, b))``.

    Returns:
        ``(n_a, n_b)`` NumPy array in ``[0, 1]`` (and the diagonals).

    Examples:
        >>> import numpy as np
        >>> x = np.sin(np.linspace(0, 3, 20))[None, :, None]
        >>> K = global_alignment_gram(np.concatenate([x, x[:, ::-1]]), sigma=1.0)
        >>> K.shape, float(K[0, 0])
        ((2, 2), 1.0)
    """
    kw = dict(sigma=sigma, triangular=triangular, block_size=block_size)
    if B is None:
        L = log_global_alignment(A, lengths_a=lengths_a, **kw)
        da = db = np.diag(L).copy()
    else:
        L = log_global_alignment(A, B, lengths_a=lengths_a, lengths_b=lengths_b, **kw)
        da = _self_log_gak(A, lengths_a, kw)
        db = _self_log_gak(B, lengths_b, kw)
    K = np.exp(np.minimum(L - 0.5 * (da[:, None] + db[None, :]), 0.0))
    return (K, (da, db)) if return_diag else K


def _self_log_gak(X, lengths, kw):
    Xc, lc = check_padded_series(X, lengths, "A")
    dtype = float_dtype()
    idx = np.arange(Xc.shape[0])
    inv = jnp.asarray(1.0 / (2.0 * check_positive(kw["sigma"], "sigma") ** 2), dtype)
    tri = check_integer(kw["triangular"], "triangular", minimum=0)
    return _pairs_log_gak(Xc, lc, Xc, lc, idx, idx, inv, jnp.asarray(tri, dtype),
                          check_integer(kw["block_size"], "block_size"))


def gak_sigma(
    X: Float[ArrayLike, "n t_max d"],
    lengths: Int[ArrayLike, " n"] | None = None,
    *,
    max_samples: int = 2000,
    seed: int = 0,
) -> float:
    """Cuturi's (2011, section 4.4) bandwidth: median distance between frames of
    different series times the square root of the median length.

    The median runs over at most ``max_samples`` random frame pairs (NumPy
    generator ``seed``). Cost O(max_samples d).
    """
    Xc, lc = check_padded_series(X, lengths, "X")
    rng = np.random.default_rng(seed)
    n = Xc.shape[0]
    i, j = rng.integers(0, n, max_samples), rng.integers(0, n, max_samples)
    ti = (rng.random(max_samples) * lc[i]).astype(int)
    tj = (rng.random(max_samples) * lc[j]).astype(int)
    d = np.linalg.norm(Xc[i, ti] - Xc[j, tj], axis=-1)
    med = float(np.median(d[d > 0])) if np.any(d > 0) else 1.0
    return med * float(np.sqrt(np.median(lc)))


# --------------------------------------------------------------------- signatures


def signature_dimension(d: int, depth: int) -> int:
    """Number of signature coordinates of levels ``1..depth``: ``sum_m d^m``."""
    return sum(d**m for m in range(1, depth + 1))


def _tensor_exp(delta, depth):
    """Levels ``1..depth`` of ``exp(delta) = sum_k delta^{(x) k} / k!``, flattened."""
    out, cur = [], jnp.ones(delta.shape[:-1] + (1,), delta.dtype)
    for k in range(1, depth + 1):
        cur = (cur[..., :, None] * delta[..., None, :]).reshape(
            delta.shape[:-1] + (-1,))
        out.append(cur / factorial(k))
    return out


def _chen_step(levels, delta, depth):
    """``S (x) exp(delta)`` truncated at ``depth``: level ``m`` is ``sum_{j=0}^m
    S_{m-j} (x) delta^{(x) j} / j!`` (Chen's identity)."""
    powers = _tensor_exp(delta, depth)
    new = []
    for m in range(1, depth + 1):
        acc = levels[m - 1] + powers[m - 1]
        for j in range(1, m):
            left, right = levels[m - j - 1], powers[j - 1]
            acc = acc + (left[..., :, None] * right[..., None, :]).reshape(
                left.shape[:-1] + (-1,))
        new.append(acc)
    return new


@partial(jax.jit, static_argnames="depth")
def _signature_batch(X, lengths, depth):
    steps = jnp.arange(X.shape[1] - 1)
    inc = X[:, 1:] - X[:, :-1]
    inc = jnp.where((steps[None, :] < lengths[:, None] - 1)[..., None], inc, 0.0)
    n, d = X.shape[0], X.shape[2]
    init = [jnp.zeros((n, d**m), X.dtype) for m in range(1, depth + 1)]

    def _step(levels, delta):
        return _chen_step(levels, delta, depth), None

    levels, _ = lax.scan(_step, init, jnp.swapaxes(inc, 0, 1))
    return jnp.concatenate(levels, axis=1)


def signature_features(
    X: Float[ArrayLike, "n t_max d"],
    lengths: Int[ArrayLike, " n"] | None = None,
    *,
    depth: int = 3,
) -> Float[Array, "n n_features"]:
    """Truncated signatures (levels ``1..depth``) of piecewise-linear paths.

    Level ``m`` is the flattened ``d^m`` tensor ``int_{t_1 < ... < t_m} dx_{t_1}
    (x) ... (x) dx_{t_m}``, computed by Chen's identity, one ``exp`` of each
    increment at a time (Kiraly and Oberhauser 2019, section 2). Level 0 (the
    constant 1) is left out. Augmentations (time, basepoint, first differences)
    are the caller's choice: a path's signature is invariant to
    reparametrisation and to translation.

    Cost: O(n T d^depth) time, O(n d^depth) memory.

    Returns:
        ``(n, signature_dimension(d, depth))`` array.
    """
    depth = check_integer(depth, "depth", minimum=1, maximum=12)
    Xc, lc = check_padded_series(X, lengths, "X")
    if signature_dimension(Xc.shape[2], depth) > 2_000_000:
        raise ValueError(
            f"depth={depth} with d={Xc.shape[2]} gives "
            f"{signature_dimension(Xc.shape[2], depth)} features; lower depth")
    if Xc.shape[1] == 1:
        return jnp.zeros((Xc.shape[0], signature_dimension(Xc.shape[2], depth)),
                         Xc.dtype)
    # tiles of one shape (a power of two up to 256 series, a bucketed length):
    # data sets of other sizes reuse the compiled recursion
    n = Xc.shape[0]
    tile = min(_SIGNATURE_TILE, 1 << (n - 1).bit_length())
    Xc = _pad_time_to(Xc, bucket_length(Xc.shape[1]))
    rows = np.concatenate([np.arange(n), np.zeros(-n % tile, np.int64)])
    out = [_signature_batch(jnp.asarray(Xc[rows[i:i + tile]]),
                            jnp.asarray(lc[rows[i:i + tile]]), depth)
           for i in range(0, len(rows), tile)]
    return jnp.concatenate(out)[:n]


def truncated_signature_kernel(
    A: Float[ArrayLike, "n_a t_a d"],
    B: Float[ArrayLike, "n_b t_b d"] | None = None,
    *,
    depth: int = 3,
    lengths_a: Int[ArrayLike, " n_a"] | None = None,
    lengths_b: Int[ArrayLike, " n_b"] | None = None,
) -> Float[Array, "n_a n_b"]:
    """``k(x, y) = 1 + sum_{m=1}^{depth} <S_m(x), S_m(y)>`` (Kiraly and
    Oberhauser 2019, definition 4.1, with the linear static kernel).

    Cost: O((n_a + n_b) T d^depth + n_a n_b d^depth).
    """
    Sa = signature_features(A, lengths_a, depth=depth)
    Sb = Sa if B is None else signature_features(B, lengths_b, depth=depth)
    return 1.0 + Sa @ Sb.T

