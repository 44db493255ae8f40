"""Top-k modes of a discrete predictive distribution, with their masses.

A multimodal predictive (an inverse problem's branches, a pose's mirror
images) is summarised by a few hypotheses with probabilities instead of one
averaged point. :func:`top_k_modes` works on any weighted candidate set: a grid
with a density times cell volume, or importance-weighted draws. It sits below
the subpackages that use it (the Twin GP's tempered predictive,
:mod:`bayeskde.tgp.modes`; the inverse GP, :mod:`bayeskde.learn.inverse_gp`)
and is public as :func:`bayeskde.learn.top_k_modes`.
"""

from __future__ import annotations

import numpy as np

from ._validation import as_float_array, check_integer, check_positive

__all__ = ["top_k_modes"]


def top_k_modes(
    support, probs, k: int, radius: float
) -> tuple[np.ndarray, np.ndarray]:
    """The ``k`` modes of highest mass of sum_c p_c delta(z_c) per test point.

    Greedy mode seeking: the next mode is found at the candidate with the most
    mass within ``radius`` among those farther than 2 ``radius`` from the
    modes already chosen, and placed at the most probable candidate of that
    neighbourhood (not its mean, which two close branches would pull apart). Each
    mode's mass is the total probability of the candidates nearest to it (the
    k modes partition the support); modes are returned by decreasing mass.
    When fewer than k separated regions carry mass, the remaining modes have
    mass 0 and repeat the first mode.

    Args:
        support: ``(n_c, d)`` (or ``(n_c,)``) candidate outputs shared by all
            test points.
        probs: ``(n_test, n_c)`` non-negative weights (normalised here).
        k: number of modes.
        radius: neighbourhood radius (Euclidean, in output units).

    Returns:
        ``(modes, masses)``: ``(n_test, k, d)`` and ``(n_test, k)``.

    Raises:
        ValueError: shapes that disagree, negative weights, ``k < 1`` or
            ``radius <= 0``.

    Cost: O(n_c^2 d) for the neighbourhoods plus O(k n_test n_c d).
    """
    k = check_integer(k, "k", minimum=1)
    radius = check_positive(radius, "radius")
    Z = np.asarray(as_float_array(support, "support"), float)
    Z = Z[:, None] if Z.ndim == 1 else Z
    P = np.asarray(as_float_array(probs, "probs"), float)
    if P.ndim != 2 or P.shape[1] != Z.shape[0]:
        raise ValueError(f"probs must have shape (n_test, {Z.shape[0]}), got "
                         f"{P.shape}")
    if np.any(P < 0):
        raise ValueError("probs must be non-negative")
    P = P / P.sum(axis=1, keepdims=True)
    d2 = np.sum((Z[:, None, :] - Z[None, :, :]) ** 2, axis=-1)
    near = (d2 <= radius**2).astype(float)  # (n_c, n_c)
    local = P @ near  # mass within radius of each candidate
    n = P.shape[0]
    rows = np.arange(n)
    modes = np.empty((n, k, Z.shape[1]))
    allowed = np.ones_like(P, dtype=bool)
    for j in range(k):
        score = np.where(allowed, local, -1.0)
        c = np.argmax(score, axis=1)
        empty = score[rows, c] <= 0.0
        w = P * near[c]  # (n, n_c) mass in the neighbourhood of c
        centre = Z[np.argmax(w, axis=1)]
        modes[:, j] = np.where(empty[:, None], modes[:, 0] if j else centre, centre)
        allowed &= d2[c] > (2 * radius) ** 2
        if j and np.any(empty):
            modes[empty, j] = modes[empty, 0]
    # Masses: each candidate goes to its nearest distinct mode.
    dist = np.sum((Z[None, None, :, :] - modes[:, :, None, :]) ** 2, axis=-1)
    dup = np.zeros((n, k), dtype=bool)
    for j in range(1, k):
        dup[:, j] = np.any(np.all(modes[:, :j] == modes[:, j:j + 1], axis=-1), axis=1)
    dist = np.where(dup[:, :, None], np.inf, dist)
    owner = np.argmin(dist, axis=1)  # (n, n_c)
    masses = np.stack([np.sum(P * (owner == j), axis=1) for j in range(k)], axis=1)
    order = np.argsort(-masses, axis=1, kind="stable")
    return (np.take_along_axis(modes, order[:, :, None], 1),
            np.take_along_axis(masses, order, 1))
