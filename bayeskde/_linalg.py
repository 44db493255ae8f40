"""Numerical helpers shared by the whole package: the working float dtype, the one
round-off floor, the one jittered Cholesky, and padding rows to a multiple (with
the size buckets that keep the number of compiled programs small).

Jitter policy (used by every ridge or GP solve in the package). A symmetric
positive semi-definite ``A`` is factorised as it is; if the factor is not finite,
the diagonal is shifted by ``jitter = n eps (max|A_ii| + 1)``, the backward error
of a Cholesky factorisation in floating point (Golub and Van Loan, *Matrix
Computations*, section 4.2.6): below it a shift is round-off. The shift grows
x10 per retry while it stays below ``MAX_RELATIVE_JITTER (max|A_ii| + 1)`` (a larger
shift would change the problem, not its round-off), with one warning per matrix
name; that is at most log10(MAX_RELATIVE_JITTER / (n eps)) tries (15 in float64),
and a matrix holding NaN or inf is refused at once, so no input can loop.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from ._typing import float_dtype
from ._validation import warn_once

__all__ = [
    "float_dtype",
    "eps_floor",
    "cholesky_with_jitter",
    "MAX_RELATIVE_JITTER",
    "pad_to_multiple",
    "pad_rows",
    "bucket_multiple",
]

#: The largest diagonal shift :func:`cholesky_with_jitter` adds, relative to the
#: matrix's scale ``max|A_ii| + 1``.
MAX_RELATIVE_JITTER = 1e-1


def eps_floor(dtype, n: int) -> float:
    """Relative round-off floor of an ``n x n`` symmetric eigenproblem in ``dtype``:
    ``max(n eps, 100 eps)`` (the larger term keeps float32 squared systems sane)."""
    eps = float(jnp.finfo(dtype).eps)
    return max(eps * n, 100.0 * eps)


@jax.jit
def cholesky_try(A, shift):
    """One compiled program: the factor of ``A + shift I``, the scale
    max|diag|, and whether the matrix and its factor are finite."""
    A = A + shift * jnp.eye(A.shape[0], dtype=A.dtype)
    L = jnp.linalg.cholesky(A)
    return (L, jnp.max(jnp.abs(jnp.diagonal(A))), jnp.all(jnp.isfinite(A)),
            jnp.all(jnp.isfinite(L)))


def cholesky_with_jitter(A, name: str, shift: float = 0.0):
    """Lower Cholesky factor of ``A + shift I``, with the package's jitter policy
    (above).

    Args:
        A: ``(n, n)`` symmetric positive semi-definite matrix.
        name: how the matrix is named in the warning and the error, in the user's
            terms (e.g. ``"K_X + ridge I"``).
        shift: a diagonal shift that is part of the problem (a ridge), added
            inside the compiled factorisation.

    Raises:
        ValueError: ``A`` holds NaN or inf (for example a kernel whose squared
            distances overflowed).
        numpy.linalg.LinAlgError: still not positive definite with a shift of
            ``MAX_RELATIVE_JITTER`` times its scale.

    Cost: O(n^3) per try, one compiled program per matrix size.
    """
    A = jnp.asarray(A)
    n = A.shape[0]
    if n == 0:
        return jnp.linalg.cholesky(A)
    L, diag_max, finite, ok = cholesky_try(A, jnp.asarray(shift, A.dtype))
    diag_max = float(diag_max)
    if not np.isfinite(diag_max) or not bool(finite):
        raise ValueError(
            f"{name} contains NaN or inf; check the data and the kernel parameters "
            f"(finite in {A.dtype}?)"
        )
    scale = diag_max + 1.0
    jitter = n * float(jnp.finfo(A.dtype).eps) * scale
    while not bool(ok):
        if jitter > MAX_RELATIVE_JITTER * scale:
            raise np.linalg.LinAlgError(
                f"{name} is not positive definite (a diagonal shift up to "
                f"{jitter / 10:.2e} did not help)")
        warn_once(f"{name} is ill-conditioned; adding jitter to the diagonal")
        L, _, _, ok = cholesky_try(A, jnp.asarray(shift + jitter, A.dtype))
        jitter *= 10.0
    return L


def pad_to_multiple(x, multiple: int):
    """Pad the leading axis of ``x`` to a multiple of ``multiple`` with copies of
    its last row (jit-safe: shapes are static). Returns ``(padded, n)``.

    A NumPy array is padded on the host with NumPy (no device program per shape);
    anything else with ``jax.numpy``.
    """
    n = x.shape[0]
    total = -(-n // multiple) * multiple
    if total == n:
        return x, n
    xp = np if isinstance(x, np.ndarray) else jnp
    pad = xp.broadcast_to(x[-1:], (total - n,) + x.shape[1:])
    return xp.concatenate([x, pad]), n


def bucket_multiple(n: int, per_octave: int = 8, minimum: int = 8) -> int:
    """The multiple that puts ``n`` rows into a size bucket:
    ``max(minimum, 2^floor(log2 n) / per_octave)``.

    ``pad_to_multiple(x, bucket_multiple(len(x)))`` maps every size to one of
    ``per_octave`` buckets per power of two (and multiples of ``minimum`` below
    ``minimum * per_octave``), adding at most ``1 / per_octave`` of the rows.
    Programs compiled for a padded shape then serve every size in its bucket
    (a cross-validation loop's folds, a data set of a nearby size).

    Examples:
        >>> [bucket_multiple(n) for n in (5, 240, 241, 300)]
        [8, 16, 16, 32]
        >>> pad_to_multiple(np.zeros((241, 2)), bucket_multiple(241))[0].shape
        (256, 2)
    """
    if n < 1:
        return minimum
    return max(minimum, (1 << (int(n).bit_length() - 1)) // per_octave)


def pad_rows(X, block_size: int):
    """Rows of ``X`` padded to whole blocks: ``(n_blocks, block_size, ...)`` and a
    0/1 ``(n_blocks, block_size)`` mask that is 1 on real rows."""
    n = X.shape[0]
    Xp, _ = pad_to_multiple(X, block_size)
    nb = Xp.shape[0] // block_size
    mask = (jnp.arange(nb * block_size) < n).astype(X.dtype)
    return Xp.reshape((nb, block_size) + X.shape[1:]), mask.reshape(nb, block_size)


