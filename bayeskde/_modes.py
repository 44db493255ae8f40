"""Top-k modes of a discrete predictive distribution, with their masses.

A multimodal predictive (an inverse problem's branches, a pose's mirror
images) is summarised by a few hypotheses with probabilities instead of one
averaged point. :func:`top_k_modes` works on any weighted candidate set: a grid
with a density times cell volume, or importance-weighted draws. It sits below
the subpackages that use it (the Twin GP's tempered predictive,
:mod:`bayeskde.tgp.modes`; the inverse GP, :mod:`bayeskde.inverse`)
and is used through those two.
"""

from __future__ import annotations

import numpy as np

from ._validation import as_float_array, check_integer, check_positive

__all__ = ["top_k_modes"]


def _sq_dist_to(Z, points):
    """(n, n_c) squared distances from each row's ``points`` (n, d) to the
    candidates ``Z`` ((1 or n), n_c, d)."""
    return np.sum((Z - points[:, None, :]) ** 2, axis=-1)


def _box_sums(P, shape, half):
    """Sums of P (n, prod(shape)) over the boxes of half-widths ``half`` cells
    around every grid cell, by cumulative sums along each axis: O(n n_c d)."""
    n = P.shape[0]
    S = P.reshape(n, *shape)
    for ax, h in enumerate(half, start=1):
        c = np.cumsum(S, axis=ax)
        pad = [(0, 0)] * S.ndim
        pad[ax] = (1, 0)
        c = np.pad(c, pad)
        size = S.shape[ax]
        hi = np.minimum(np.arange(size) + h + 1, size)
        lo = np.maximum(np.arange(size) - h, 0)
        S = np.take(c, hi, axis=ax) - np.take(c, lo, axis=ax)
    return S.reshape(n, -1)


def _ball_sums(Z, P, radius, block=16):
    """Mass within ``radius`` of every candidate, per test row, for per-row
    candidates Z (n, n_c, d): blocks of rows, O(n n_c^2 d) time and
    O(block n_c^2) memory."""
    out = np.empty_like(P)
    for i in range(0, P.shape[0], block):
        z = Z[i:i + block]
        d2 = np.sum((z[:, :, None, :] - z[:, None, :, :]) ** 2, axis=-1)
        out[i:i + block] = np.einsum("nc,ncb->nb", P[i:i + block],
                                     (d2 <= radius**2).astype(P.dtype))
    return out


def top_k_modes(
    support, probs, k: int, radius: float, *, grid_shape=None,
) -> tuple[np.ndarray, np.ndarray]:
    """The ``k`` modes of highest mass of sum_c p_c delta(z_c) per test point.

    Greedy mode seeking: the next mode is seeded at the candidate c with the
    most mass within ``radius`` among those farther than 2 ``radius`` from
    every mode and ``radius`` from every earlier seed, and placed at the most
    probable candidate within ``radius`` of c that is farther than ``radius``
    from the earlier modes (not the neighbourhood's mean, which two close
    branches would pull apart). Two branches closer than 2 ``radius`` are
    thereby still told apart when a seed falls between them. Each
    mode's mass is the total probability of the candidates nearest to it (the
    k modes partition the support); modes are returned by decreasing mass.
    When fewer than k separated regions carry mass, the remaining modes have
    mass 0 and repeat the first mode.

    Args:
        support: ``(n_c, d)`` (or ``(n_c,)``) candidate outputs shared by all
            test points, or ``(n_test, n_c, d)``, one set per test point
            (importance particles).
        probs: ``(n_test, n_c)`` non-negative weights (normalised here).
        k: number of modes.
        radius: neighbourhood radius (Euclidean, in output units).
        grid_shape: for a shared support that is a regular grid (C order,
            ``prod(grid_shape) == n_c``), the neighbourhood masses are box
            sums of half-width ``radius`` per axis, by cumulative sums.

    Returns:
        ``(modes, masses)``: ``(n_test, k, d)`` and ``(n_test, k)``.

    Raises:
        ValueError: shapes that disagree, negative weights, ``k < 1`` or
            ``radius <= 0``.

    Cost: never an n_c x n_c matrix. Grid: O(n_test n_c (d + k d)). Other
    shared supports: the neighbourhood masses in blocks of 256 candidates,
    O(n_test n_c^2 + n_c^2 d) time, O(n_c (n_test + 256)) memory. Per-test
    supports: O(n_test n_c^2 d) time in blocks of 16 test points.
    """
    k = check_integer(k, "k", minimum=1)
    radius = check_positive(radius, "radius")
    Z = np.asarray(as_float_array(support, "support"), float)
    Z = Z[:, None] if Z.ndim == 1 else Z
    P = np.asarray(as_float_array(probs, "probs"), float)
    per_row = Z.ndim == 3
    n_c = Z.shape[-2]
    if P.ndim != 2 or P.shape[1] != n_c or (per_row and Z.shape[0] != P.shape[0]):
        raise ValueError(f"probs must have shape (n_test, {n_c}) matching the "
                         f"support {Z.shape}, got {P.shape}")
    if np.any(P < 0) or not np.all(np.isfinite(P)):
        raise ValueError("probs must be finite and non-negative")
    P = P / np.maximum(P.sum(axis=1, keepdims=True), np.finfo(float).tiny)
    n = P.shape[0]
    rows = np.arange(n)
    Zb = Z if per_row else Z[None]
    if per_row:
        local = _ball_sums(Z, P, radius)
    elif grid_shape is not None:
        shape = tuple(int(s) for s in grid_shape)
        if int(np.prod(shape)) != n_c or len(shape) != Z.shape[1]:
            raise ValueError(f"grid_shape {shape} does not match the support "
                             f"{Z.shape}")
        cell = [(np.ptp(Z[:, j]) / max(s - 1, 1)) or 1.0
                for j, s in enumerate(shape)]
        local = _box_sums(P, shape, [int(radius // c) for c in cell])
    else:
        local = np.empty_like(P)
        for i in range(0, n_c, 256):
            d2 = np.sum((Z[:, None, :] - Z[None, i:i + 256, :]) ** 2, axis=-1)
            local[:, i:i + 256] = P @ (d2 <= radius**2).astype(float)
    modes = np.empty((n, k, Z.shape[-1]))
    allowed = np.ones_like(P, dtype=bool)  # may seed a new mode
    free = np.ones_like(P, dtype=bool)  # farther than radius from every mode
    for j in range(k):
        score = np.where(allowed, local, -1.0)
        c = np.argmax(score, axis=1)
        empty = score[rows, c] <= 0.0
        d2c = _sq_dist_to(Zb, Zb[rows if per_row else 0, c])
        w = P * ((d2c <= radius**2) & free)  # the neighbourhood of c, unclaimed
        best = np.argmax(w, axis=1)
        empty |= w[rows, best] <= 0.0
        centre = Zb[rows if per_row else 0, best]
        modes[:, j] = np.where(empty[:, None], modes[:, 0] if j else centre, centre)
        d2m = _sq_dist_to(Zb, centre)
        free &= d2m > radius**2
        allowed &= (d2m > (2 * radius) ** 2) & (d2c > radius**2)
        if j and np.any(empty):
            modes[empty, j] = modes[empty, 0]
    # Masses: each candidate goes to its nearest distinct mode (ties to the
    # heavier mode: the partition is recomputed in the final order).
    for _ in range(2):
        masses = _partition(Zb, P, modes)
        order = np.argsort(-masses, axis=1, kind="stable")
        modes = np.take_along_axis(modes, order[:, :, None], 1)
    return modes, np.take_along_axis(masses, order, 1)


def _partition(Zb, P, modes):
    n, k = modes.shape[:2]
    dist = np.stack([_sq_dist_to(Zb, modes[:, j]) for j in range(k)], axis=1)
    dup = np.zeros((n, k), dtype=bool)
    for j in range(1, k):
        dup[:, j] = np.any(np.all(modes[:, :j] == modes[:, j:j + 1], axis=-1), axis=1)
    dist = np.where(dup[:, :, None], np.inf, dist)
    owner = np.argmin(dist, axis=1)  # (n, n_c)
    return np.stack([np.sum(P * (owner == j), axis=1) for j in range(k)], axis=1)
