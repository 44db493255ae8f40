"""The gap-weighted string subsequence kernel as one compiled dynamic program.

For strings ``s`` and ``t`` and a subsequence length ``q``,

    K_q(s, t) = sum_{u in Sigma^q} sum_{i: s[i] = u} sum_{j: t[j] = u}
                lam^(l(i) + l(j)),        l(i) = i_q - i_1 + 1,

where ``i`` and ``j`` run over increasing index tuples (Weston et al. 2002, eq. (4);
Lodhi et al. 2002, section 3). ``mode="exact"`` gives ``K_r``, ``mode="sum"``
gives ``K_1 + ... + K_r``; both come out of the same pass, which computes every
length ``1..r`` at once. ``mode="mean"`` averages the separately normalised
``K_1, ..., K_r``: with a small decay (the paper's ``lam = 0.01``) the raw sum is
dominated by ``K_1``, a bag of letters, whereas the mean gives every length the
same weight.

The pass is Lodhi et al.'s O(r |s| |t|) recursion with the auxiliary ``K''``
(2002, section 3.1), run for a block of string pairs at a time: ``lax.scan`` over the
positions of ``s``, an inner ``lax.scan`` over the positions of ``t``. Strings are
padded with the code ``-1``, which never matches, so padding contributes nothing and
needs no length masks.

The block is batched by hand rather than by ``vmap`` of a per-pair recursion: with
``vmap`` the batch axis leads and the level axis (size ``r``) trails, and the
scans ran 2-3 times slower on CPU than with levels leading and pairs trailing, where
each scan step is one contiguous elementwise pass over the block. The public
functions take Python strings, so they cannot be jitted; the jitted entry point is
the block function, compiled once per (block size, longest string, ``r``, dtype).

References:
    Lodhi, Saunders, Shawe-Taylor, Cristianini and Watkins (2002), "Text
    classification using string kernels", JMLR 2, 419-444, section 3.
    Weston, Chapelle, Elisseeff, Schölkopf and Vapnik (2002), "Kernel Dependency
    Estimation", NIPS 15, eq. (4) and section 4.1.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jaxtyping import Array, Float, Int

from .._linalg import float_dtype as _float_dtype
from .._validation import check_integer, check_positive
from .algebra import normalize_kernel

__all__ = ["encode_strings", "subsequence_kernel", "subsequence_diag"]

_MODES = ("sum", "exact", "mean")
_PAD = -1

DEFAULT_BLOCK_SIZE = 2048
"""String pairs per compiled block: large enough to amortise the per-step loop
overhead, small enough that the DP state (``block * max_len * r`` floats) stays in
cache."""


# --------------------------------------------------------------------------- encoding


def _check_strings(data, name: str) -> tuple[str, ...]:
    if isinstance(data, str):
        raise TypeError(
            f"{name} must be a list or tuple of strings, got a single str; "
            f"wrap it in a list: [{data!r}]"
        )
    if not isinstance(data, Sequence):
        raise TypeError(
            f"{name} must be a list or tuple of strings, got {type(data).__name__}"
        )
    for i, item in enumerate(data):
        if not isinstance(item, str):
            raise TypeError(
                f"{name} must hold only str, got {type(item).__name__} at index {i}"
            )
    if len(data) == 0:
        raise ValueError(f"{name} is empty; need at least one string")
    return tuple(data)


def _encode(strings, alphabet):
    """NumPy encoding: codes ``(n, max_len)`` padded with -1, lengths, alphabet."""
    lengths = np.fromiter((len(s) for s in strings), np.int64, len(strings))
    points = np.frombuffer("".join(strings).encode("utf-32-le"), np.uint32)
    if alphabet is None:
        table, flat = np.unique(points, return_inverse=True)
    else:
        table = np.fromiter((ord(c) for c in alphabet), np.uint32, len(alphabet))
        present, first = np.unique(points, return_index=True)
        unseen = ~np.isin(present, table)
        # Fresh codes in order of first appearance: they match themselves only.
        table = np.concatenate([table, present[unseen][np.argsort(first[unseen])]])
        order = np.argsort(table)
        flat = order[np.searchsorted(table, points, sorter=order)]
    width = int(lengths.max(initial=0))
    codes = np.full((len(strings), width), _PAD, np.int32)
    rows = np.repeat(np.arange(len(strings)), lengths)
    cols = np.arange(points.size) - np.repeat(np.cumsum(lengths) - lengths, lengths)
    codes[rows, cols] = flat
    return codes, lengths.astype(np.int32), tuple(chr(c) for c in table)


def _check_alphabet(alphabet) -> tuple[str, ...]:
    symbols = tuple(alphabet)
    for c in symbols:
        if not isinstance(c, str) or len(c) != 1:
            raise ValueError(f"alphabet symbols must be single characters, got {c!r}")
    if len(set(symbols)) != len(symbols):
        raise ValueError("alphabet contains repeated symbols")
    return symbols


def encode_strings(
    strings: Sequence[str], alphabet: Sequence[str] | None = None
) -> tuple[Int[Array, "n_strings max_len"], Int[Array, " n_strings"], tuple[str, ...]]:
    """Encode strings as padded integer codes.

    Args:
        strings: the strings (a list or tuple of ``str``).
        alphabet: the symbols, code ``c`` standing for ``alphabet[c]``. ``None``
            (default) uses the sorted set of characters in ``strings``. Characters
            missing from a given alphabet get fresh codes ``len(alphabet), ...`` in
            order of first appearance and are appended to the returned alphabet:
            they match themselves and nothing in the given alphabet.

    Returns:
        ``codes`` of shape ``(n_strings, max_len)`` (int32, ``-1`` after each
        string's end), ``lengths`` of shape ``(n_strings,)`` and the alphabet
        actually used (a tuple of characters).

    Raises:
        TypeError: if ``strings`` is a single ``str`` or holds a non-``str``.
        ValueError: if ``strings`` is empty or ``alphabet`` has repeated or
            multi-character symbols.

    Examples:
        >>> codes, lengths, alphabet = encode_strings(["cab", "a"])
        >>> codes.tolist(), lengths.tolist(), alphabet
        ([[2, 0, 1], [0, -1, -1]], [3, 1], ('a', 'b', 'c'))
    """
    strings = _check_strings(strings, "strings")
    if alphabet is not None:
        alphabet = _check_alphabet(alphabet)
    codes, lengths, alphabet = _encode(strings, alphabet)
    return jnp.asarray(codes), jnp.asarray(lengths), alphabet


# ------------------------------------------------------------------ dynamic program


def _levels(
    s_codes: Int[Array, "max_len block"],
    t_codes: Int[Array, "max_len block"],
    lam: Float[Array, ""],
    r: int,
) -> Float[Array, "n_levels block"]:
    """K_1..K_r for a block of pairs (column ``p`` of ``s_codes``/``t_codes``).

    Lodhi et al. (2002), section 3.1, with ``P_i[j, k] = K'_i(s[:j], t[:k])`` and
    ``E_i[j, k] = lam^2 [s_j = t_k] P_{i-1}[j, k]`` (``P_0 = 1``):

        K_i                  = sum_{j,k} E_i[j, k]
        K''_i(s[:j+1], t[:k+1]) = lam K''_i(s[:j+1], t[:k]) + E_i[j, k]
        P_i[j + 1, k]          = lam P_i[j, k] + K''_i(s[:j+1], t[:k]).

    The outer scan walks ``j`` carrying the row ``P_1..P_{r-1}[j, :]``; the inner
    scan walks ``k`` carrying ``K''`` and the running sums ``K``. Levels lead and
    pairs trail every array, so each step is one contiguous elementwise pass.
    """
    dtype = lam.dtype
    block = t_codes.shape[1]
    lam2 = lam * lam
    ones = jnp.ones((1, block), dtype)

    def _row_step(carry, s_j):
        prow, k_sum = carry  # (max_len, r-1, block): P_i[j, k]; (r, block)

        def _cell_step(cell, x):
            kpp, k_sum = cell  # (r-1, block): K''_i(s[:j+1], t[:k])
            p_k, t_k = x
            match = jnp.where((s_j == t_k) & (t_k >= 0), lam2, 0.0).astype(dtype)
            e = match[None] * jnp.concatenate([ones, p_k])  # E_1..E_r at (j, k)
            return (lam * kpp + e[:-1], k_sum + e), lam * p_k + kpp

        kpp0 = jnp.zeros((r - 1, block), dtype)
        (_, k_sum), prow = lax.scan(_cell_step, (kpp0, k_sum), (prow, t_codes))
        return (prow, k_sum), None

    init = (
        jnp.zeros((t_codes.shape[0], r - 1, block), dtype),
        jnp.zeros((r, block), dtype),
    )
    (_, k_sum), _ = lax.scan(_row_step, init, s_codes)
    return k_sum


@partial(jax.jit, static_argnames=("r",))
def _block_kernel(
    s_codes: Int[Array, "block max_len"],
    t_codes: Int[Array, "block max_len"],
    lam: Float[Array, ""],
    weights: Float[Array, " n_levels"],
    *,
    r: int,
) -> Float[Array, " block"]:
    """sum_q weights[q] K_{q+1}(s_p, t_p) for each pair ``p`` of a block.

    The jitted core: one compilation per (block size, max_len, r, dtype); ``lam``
    and ``weights`` (which select ``mode``) are traced, so changing them does not
    recompile.
    """
    levels = _levels(s_codes.T, t_codes.T, lam, r)
    return jnp.sum(weights[:, None] * levels, axis=0)


def _upper_pairs(n: int):
    """Map ``(start, stop)`` to the rows/cols of upper-triangle pairs, row-major."""
    i = np.arange(n)
    row_start = i * n - i * (i - 1) // 2

    def pairs(start, stop):
        flat = np.arange(start, stop)
        rows = np.searchsorted(row_start, flat, side="right") - 1
        return rows, rows + flat - row_start[rows]

    return pairs


def _grid_pairs(n_b: int, col_offset: int):
    def pairs(start, stop):
        rows, cols = np.divmod(np.arange(start, stop), n_b)
        return rows, cols + col_offset

    return pairs


def _self_pairs(offset: int):
    def pairs(start, stop):
        idx = np.arange(start + offset, stop + offset)
        return idx, idx

    return pairs


def _segment_indices(segments, start, stop):
    rows, cols, offset = [], [], 0
    for count, pairs in segments:
        lo, hi = max(start, offset), min(stop, offset + count)
        if lo < hi:
            seg_rows, seg_cols = pairs(lo - offset, hi - offset)
            rows.append(seg_rows)
            cols.append(seg_cols)
        offset += count
    return np.concatenate(rows), np.concatenate(cols)


def _stream(codes, segments, lam, weights, r, block_size, in_flight=4):
    """Kernel values of the pairs of ``segments``, streamed through ``_block_kernel``.

    ``segments`` is a list of ``(count, pairs)`` with ``pairs(start, stop)`` giving
    the rows of ``codes`` of the segment's pairs ``start:stop``. All segments share
    one stream of equal blocks, hence one compiled shape. A problem smaller than
    ``block_size`` pairs uses the next power of two instead, so tiny Gram matrices
    of long strings do not pay for a full padded block (at most
    ``log2(block_size) + 1`` shapes per string length).
    """
    total = sum(count for count, _ in segments)
    block = min(block_size, 1 << max(total - 1, 0).bit_length())
    values = np.empty(total, lam.dtype)
    pending = []  # asynchronous dispatch: gather the next block while one runs

    def collect():
        begin, out = pending.pop(0)
        values[begin : begin + block] = np.asarray(out)[: total - begin]

    for begin in range(0, total, block):
        rows, cols = _segment_indices(segments, begin, min(begin + block, total))
        s = np.full((block, codes.shape[1]), _PAD, np.int32)
        t = np.full((block, codes.shape[1]), _PAD, np.int32)
        s[: rows.size] = codes[rows]
        t[: cols.size] = codes[cols]
        # NumPy in, not jnp.asarray: the jit's own transfer is ~10x cheaper per call.
        # Fresh arrays per block, since a pending computation may still read them.
        out = _block_kernel(s, t, lam, weights, r=r)
        pending.append((begin, out))
        if len(pending) > in_flight:
            collect()
    while pending:
        collect()
    return values


def _pad_codes(*codes):
    """Stack code arrays, padded to a common width of at least 1."""
    width = max(1, *(c.shape[1] for c in codes))
    return np.concatenate([
        np.pad(c, ((0, 0), (0, width - c.shape[1])), constant_values=_PAD)
        for c in codes
    ])


def _prepare(A, B, r, lam, mode, block_size):
    r = check_integer(r, "r", minimum=1)
    lam = check_positive(lam, "lam")
    if lam > 1:
        raise ValueError(f"lam must be in (0, 1], got {lam}")
    if mode not in _MODES:
        raise ValueError(f"mode must be one of {_MODES}, got {mode!r}")
    block_size = check_integer(block_size, "block_size", minimum=1)
    A = _check_strings(A, "A")
    B = None if B is None else _check_strings(B, "B")
    dtype = _float_dtype()
    weights = np.ones(r) if mode == "sum" else np.eye(r)[-1]
    return A, B, r, jnp.asarray(lam, dtype), jnp.asarray(weights, dtype), block_size


@jax.jit
def _symmetrize(K: Float[Array, "n n"]) -> Float[Array, "n n"]:
    # Scaling rows then columns rounds k_ij and k_ji differently; average them so
    # a symmetric Gram matrix comes out exactly symmetric.
    return 0.5 * (K + K.T)


def _normalised_diag(diag):
    # Same threshold as normalize_kernel: featureless strings get 0, the rest 1.
    return (diag > np.finfo(diag.dtype).tiny).astype(diag.dtype)


def _mean_mode(fn, A, B, r, lam, normalize, block_size):
    """(1/r) sum_q of the normalised exact-length kernels, optionally renormalised."""
    _prepare(A, B, r, lam, "mean", block_size)  # validate once, before r passes
    args = (A,) if fn is subsequence_diag else (A, B)
    parts = [
        fn(*args, r=q, lam=lam, mode="exact", normalize=True, block_size=block_size)
        for q in range(1, r + 1)
    ]
    K = sum(parts) / r
    if not normalize:
        return K
    if fn is subsequence_diag:
        return jnp.asarray(_normalised_diag(np.asarray(K)))
    da = subsequence_diag(A, r=r, lam=lam, mode="mean", normalize=False,
                          block_size=block_size)
    db = da if B is None else subsequence_diag(
        B, r=r, lam=lam, mode="mean", normalize=False, block_size=block_size)
    K = normalize_kernel(K, da, db)
    return _symmetrize(K) if B is None else K


# ------------------------------------------------------------------------ public API


def subsequence_kernel(
    A: Sequence[str],
    B: Sequence[str] | None = None,
    *,
    r: int = 3,
    lam: float = 0.5,
    mode: str = "mean",
    normalize: bool = True,
    block_size: int = DEFAULT_BLOCK_SIZE,
) -> Float[Array, "n_a n_b"]:
    """Gram matrix of the gap-weighted subsequence kernel (Weston et al. 2002, eq. (4)).

    ``mode="exact"`` gives ``K_r(s, t)``: the sum over common subsequences ``u`` of
    length ``r`` of ``lam^(l(i) + l(j))`` over every occurrence ``s[i] = u``,
    ``t[j] = u``, with ``l(i) = i_r - i_1 + 1`` the span of the occurrence.
    ``mode="sum"`` gives ``K_1 + ... + K_r``. With ``normalize=True`` the result is
    ``k(s, t) / sqrt(k(s, s) k(t, t))`` (Weston et al. 2002, section 4.1).

    A string with no subsequence of the required length (shorter than ``r`` for
    ``"exact"``, the empty string for ``"sum"``) has no features: ``k(s, s) = 0``,
    and normalisation sets its whole row and column to 0, *including its diagonal
    entry* (0, not 1), which keeps the matrix positive semi-definite. Self-
    similarities that underflow to 0 (tiny ``lam`` with long ``r`` in float32) are
    treated the same way.

    The pairs (and, for a normalised cross Gram matrix, the self-pairs) are
    processed ``block_size`` at a time by one jitted dynamic program, compiled
    once per (block size, longest string, ``r``, dtype); ``lam`` and ``mode``
    changes do not recompile. Fewer pairs than ``block_size`` use the next power
    of two as block size. The dtype is JAX's default float (float32, or float64
    under ``JAX_ENABLE_X64=1``); ``lam^(2 span)`` may underflow to 0, which only
    drops negligible terms.

    Cost: Lodhi et al.'s recursion costs O(r |s| |t|) per pair, so
    O(r n_a n_b L^2) time with L the longest string (every string is padded to
    L); with ``B=None`` only the n(n+1)/2 pairs of the upper triangle are
    computed. Memory: O(block_size r L) for the DP state; the host holds the
    n_a x n_b result and the vector of computed pair values.

    Args:
        A: a list or tuple of ``n_a`` strings.
        B: a list or tuple of ``n_b`` strings; ``None`` for the symmetric Gram
            matrix of ``A``.
        r: the subsequence length (``mode="exact"``) or the longest one summed
            (``mode="sum"``); a positive integer.
        lam: the gap decay, ``0 < lam <= 1``.
        mode: ``"mean"`` (default: the average of the normalised kernels of
            lengths ``1..r``; costs ``r`` passes; every length weighs the same,
            the reading that separates the paper's strings at its small decay),
            ``"sum"`` (lengths ``1..r``, dominated by length 1 when ``lam`` is
            small) or ``"exact"`` (length ``r`` only). A string shorter than ``r`` has
            features at its own lengths only, so its unnormalised ``"mean"``
            self-similarity is ``len / r``.
        normalize: divide by ``sqrt(k(s, s) k(t, t))``.
        block_size: string pairs per compiled block; bounds the working memory.

    Returns:
        The ``(n_a, n_b)`` Gram matrix (``n_b = n_a`` when ``B`` is ``None``).

    Raises:
        TypeError: if ``A`` or ``B`` is a single ``str``, not a sequence, or
            holds a non-``str`` item; if ``r`` or ``block_size`` is not an integer.
        ValueError: if ``A`` or ``B`` is empty, ``r < 1``, ``lam`` is not in
            ``(0, 1]`` (NaN included), ``mode`` is unknown or ``block_size < 1``.

    Examples:
        Only ``"ca"`` is shared by ``"cat"`` and ``"car"`` at length 2, with span 2
        in each, so K_2 = lam^4 (Lodhi et al.'s 2002 worked example):

        >>> K = subsequence_kernel(["cat", "car"], r=2, lam=0.5, mode="exact",
        ...                        normalize=False)
        >>> float(K[0, 1])
        0.0625
        >>> K = subsequence_kernel(["cat", "car", "x"], r=2, mode="exact")
        >>> [round(float(v), 6) for v in K.diagonal()]
        [1.0, 1.0, 0.0]

    References:
        Lodhi et al. (2002), JMLR 2, section 3.1; Weston et al. (2002), eq. (4).
    """
    if mode == "mean":
        return _mean_mode(subsequence_kernel, A, B, r, lam, normalize, block_size)
    symmetric = B is None or B is A
    A, B, r, lam, weights, block_size = _prepare(A, B, r, lam, mode, block_size)
    n_a = len(A)
    codes_a, _, alphabet = _encode(A, None)
    if symmetric:
        codes = _pad_codes(codes_a)
        values = _stream(
            codes, [(n_a * (n_a + 1) // 2, _upper_pairs(n_a))], lam, weights, r,
            block_size,
        )
        K = np.zeros((n_a, n_a), values.dtype)
        offset = 0
        for i in range(n_a):  # the upper triangle, row by row
            K[i, i:] = values[offset : offset + n_a - i]
            offset += n_a - i
        K = K + np.triu(K, 1).T
        diag_a = diag_b = np.diagonal(K).copy()
    else:
        n_b = len(B)
        codes_b, _, _ = _encode(B, alphabet)  # B's unseen symbols get fresh codes
        codes = _pad_codes(codes_a, codes_b)
        segments = [(n_a * n_b, _grid_pairs(n_b, n_a))]
        if normalize:  # self-similarities ride in the same stream of blocks
            segments += [(n_a, _self_pairs(0)), (n_b, _self_pairs(n_a))]
        values = _stream(codes, segments, lam, weights, r, block_size)
        K = values[: n_a * n_b].reshape(n_a, n_b)
        diag_a = values[n_a * n_b : n_a * n_b + n_a]
        diag_b = values[n_a * n_b + n_a :]
    K = jnp.asarray(K)
    if not normalize:
        return K
    K = normalize_kernel(K, jnp.asarray(diag_a), jnp.asarray(diag_b))
    return _symmetrize(K) if symmetric else K


def subsequence_diag(
    A: Sequence[str],
    *,
    r: int = 3,
    lam: float = 0.5,
    mode: str = "mean",
    normalize: bool = True,
    block_size: int = DEFAULT_BLOCK_SIZE,
) -> Float[Array, " n_a"]:
    """Self-similarities ``k(s, s)`` of the subsequence kernel, without the Gram matrix.

    Same definition and arguments as :func:`subsequence_kernel`. Normalised, the
    value is 1 for a string with features and 0 for a featureless one (shorter than
    ``r`` in ``"exact"`` mode, empty in ``"sum"`` mode), matching the diagonal of
    the normalised Gram matrix.

    Cost: O(r n_a L^2) time, O(block_size r L) memory.

    Returns:
        The ``(n_a,)`` vector of ``k(s, s)``.

    Raises:
        TypeError, ValueError: as :func:`subsequence_kernel`.

    Examples:
        >>> subsequence_diag(["ab", "a"], r=2, lam=0.5, mode="exact",
        ...                  normalize=False).tolist()
        [0.0625, 0.0]
        >>> subsequence_diag(["ab", "a"], r=2, mode="exact").tolist()
        [1.0, 0.0]
    """
    if mode == "mean":
        return _mean_mode(subsequence_diag, A, None, r, lam, normalize, block_size)
    A, _, r, lam, weights, block_size = _prepare(A, None, r, lam, mode, block_size)
    codes = _pad_codes(_encode(A, None)[0])
    diag = _stream(codes, [(len(A), _self_pairs(0))], lam, weights, r, block_size)
    return jnp.asarray(_normalised_diag(diag) if normalize else diag)
