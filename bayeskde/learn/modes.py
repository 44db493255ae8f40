"""Top-k modes of discrete predictive distributions, with their masses.

A multimodal predictive (an inverse problem's branches, a pose's mirror
images) is summarised by a few hypotheses with probabilities instead of one
averaged point. :func:`top_k_modes` works on any weighted candidate set: a grid
with a density times cell volume, or importance-weighted draws.
"""

from __future__ import annotations

from functools import partial
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from .._validation import as_float_array, check_integer, check_positive
from ..models.tgp import (
    TGPEnergyBatch,
    batch_energy_many,
    point_energy,
    tgp_energy_batch,
)
from ..tgp import tgp_minimize
from .kernel_hyper import _box, calibrate_temperature

__all__ = ["top_k_modes", "Modes", "tgp_modes"]


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


class Modes(NamedTuple):
    """Top-k hypotheses of a predictive distribution.

    Attributes:
        modes: ``(n_test, k, d_y)`` (or, for candidate outputs that are not
            vectors, ``n_test`` lists of k outputs), highest mass first.
        masses: ``(n_test, k)`` their posterior masses.
        temperature: the temperature the masses were computed at.
    """

    modes: object
    masses: np.ndarray
    temperature: float


@partial(jax.jit, static_argnames="static")
def _tgp_descend(Y0, A, B, outputs, whiten, ridge, out, tol, static):
    """BFGS from every start ``Y0 (n_test, S, d_y)`` of every test point."""
    batch = TGPEnergyBatch(A, B, outputs, whiten, ridge, out, static)

    def energy(y, j_state):
        return point_energy(y, j_state, batch)

    def one(y0, a, b):
        sol = tgp_minimize(energy, y0, (a, b), 200, tol)
        return sol.y, sol.energy

    def per_point(y0s, a, b):
        return jax.vmap(one, (0, None, None))(y0s, a, b)

    return jax.vmap(per_point)(Y0, A, B)


@partial(jax.jit, static_argnames="static")
def _tgp_hessians(Y, A, B, outputs, whiten, ridge, out, static):
    batch = TGPEnergyBatch(A, B, outputs, whiten, ridge, out, static)

    def one(y, a, b):
        return jax.hessian(point_energy)(y, (a, b), batch)

    return jax.vmap(jax.vmap(one, (0, None, None)))(Y, A, B)


def tgp_modes(
    tgp, X_test, k: int = 2, *, temperature: float | None = None,
    n_grid: int = 400, n_starts: int = 8, margin: float = 0.1,
    radius: float | None = None, key: jax.Array | None = None,
) -> Modes:
    """The top-k modes of the tempered Twin GP predictive p(y | x) proportional
    to exp(-E(y) / tau) (eq. (P) of :mod:`bayeskde.models.tgp`; E the KL
    energy, Bo and Sminchisescu 2010 eq. 14, or HSIC, eq. 19) per test point.

    Outputs of dimension <= 2: E on a grid of ``n_grid`` points over the
    training outputs' box widened by ``margin`` gives the predictive's mass
    (midpoint rule); :func:`top_k_modes` finds the k regions of highest mass,
    each mode is its region's most probable grid point and its mass that of
    the grid points nearest to it. (The predictive's modes are not the
    energy's local minima: on the S-shape the tempered density has three
    regions of mass where E has one minimum.) Above: local minima of E by
    BFGS (:func:`bayeskde.tgp.tgp_minimize`) from the outputs of the
    ``n_starts`` nearest training inputs; minima closer than ``radius`` are
    merged (the lower kept), and each minimum's mass is its Laplace
    approximation exp(-E / tau) (2 pi)^(d/2) det(H / tau)^(-1/2), normalised
    over the minima found.

    Args:
        tgp: a fitted global :class:`bayeskde.TwinGP` (``n_neighbors=None``).
        X_test: ``(n_test, d_x)`` test inputs.
        k: number of modes.
        temperature: tau; ``None`` calibrates it by
            :func:`bayeskde.learn.calibrate_temperature` on the training data
            (held-out log density of a 20% split).
        radius: merge radius in output units (default: 0.1 of the outputs'
            mean range for the Laplace path; the grid path uses it for
            :func:`top_k_modes`).

    Raises:
        ValueError: a local TwinGP, bad ``k``, ``n_grid``, ``n_starts``.

    Cost: O(n_test n_grid N^2) for the grid path plus BFGS, O(n_test n_starts
    N^2) per BFGS iteration for the Laplace path.
    """
    k = check_integer(k, "k", minimum=1)
    model = tgp.model_ if hasattr(tgp, "model_") else None
    if model is None:
        raise ValueError("tgp is not fitted; call fit first")
    Y = np.asarray(model.Y, float)
    if temperature is None:
        key = jax.random.key(0) if key is None else key
        temperature, _ = calibrate_temperature(key, tgp, np.asarray(model.X), Y)
    tau = check_positive(temperature, "temperature")
    X_test = as_float_array(X_test, "X_test")
    X_test = X_test[:, None] if X_test.ndim == 1 else X_test
    batch = tgp_energy_batch(tgp, X_test)
    dt = batch.outputs.dtype
    d = Y.shape[1]
    if radius is None:
        radius = 0.1 * float(np.mean(Y.max(axis=0) - Y.min(axis=0)))
    radius = check_positive(radius, "radius")
    tol = jnp.sqrt(jnp.finfo(dt).eps)
    args = (*batch[2:-1], tol)
    if d <= 2:
        n_grid = check_integer(n_grid, "n_grid", minimum=2)
        lower, upper = _box(Y, margin)
        per = int(round(n_grid ** (1.0 / d)))
        axes = [lo + (np.arange(per) + 0.5) * (hi - lo) / per
                for lo, hi in zip(lower, upper, strict=True)]
        grid = np.stack(np.meshgrid(*axes, indexing="ij"), -1).reshape(-1, d)
        Ys = jnp.broadcast_to(jnp.asarray(grid, dt)[:, None, :],
                              (len(grid), X_test.shape[0], d))
        a = -np.asarray(batch_energy_many(batch, Ys), float).T / tau
        p = np.exp(a - a.max(axis=1, keepdims=True))
        modes, masses = top_k_modes(grid, p, k, radius)
        return Modes(modes, masses, float(tau))
    n_starts = check_integer(n_starts, "n_starts", minimum=1)
    Xtr = np.asarray(model.X, float)
    d2 = np.sum((X_test[:, None, :] - Xtr[None]) ** 2, axis=-1)
    near = np.argsort(d2, axis=1)[:, :min(n_starts, len(Xtr))]
    ys, E = _tgp_descend(jnp.asarray(Y[near], dt), batch.a, batch.b, *args,
                         static=batch.static)
    ys, E = np.asarray(ys, float), np.asarray(E, float)
    H = np.asarray(_tgp_hessians(jnp.asarray(ys, dt), batch.a, batch.b,
                                 *batch[2:-1], static=batch.static), float)
    sign, logdet = np.linalg.slogdet(H / tau)
    log_w = np.where(sign > 0, -E / tau - 0.5 * logdet, -np.inf)
    return Modes(*_merge_minima(ys, E, log_w, k, radius), float(tau))


def _merge_minima(ys, E, log_w, k, radius):
    """Per test point: distinct minima (lowest energy kept within ``radius``),
    their normalised Laplace masses, the k heaviest."""
    n, S, d = ys.shape
    modes, masses = np.empty((n, k, d)), np.zeros((n, k))
    for i in range(n):
        kept, w = [], []
        for s in np.argsort(E[i]):
            close = [j for j, y in enumerate(kept)
                     if np.sum((y - ys[i, s]) ** 2) <= radius**2]
            if close:  # the same basin, reached again from another start
                continue
            kept.append(ys[i, s])
            w.append(log_w[i, s])
        w = np.asarray(w)
        p = np.exp(w - w.max()) if np.isfinite(w.max()) else np.ones_like(w)
        p /= p.sum()
        order = np.argsort(-p, kind="stable")[:k]
        for j in range(k):
            if j < len(order):
                modes[i, j], masses[i, j] = kept[order[j]], p[order[j]]
            else:  # fewer distinct minima than k: repeat the first, mass 0
                modes[i, j] = kept[order[0]]
    return modes, masses
