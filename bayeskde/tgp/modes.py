"""The tempered Twin GP predictive: its temperature and its top-k modes.

A Twin GP (Bo and Sminchisescu 2010) predicts by minimising an energy E(y) over
the output y of each test input: the KL energy (eq. 14) or the HSIC energy
(eq. 19) of :mod:`bayeskde.tgp.energy`. Where the inverse map is multivalued
(the S-shape, a pose's mirror images) E has several minima and one minimiser
hides the others. Read as an energy, E defines the tempered predictive

    p(y | x) proportional to exp(-E(y) / tau) on the box B of outputs,   (P)

with a uniform prior on B (the training outputs' range widened by ``margin`` on
each side).

The temperature. E is not a log density (at tau = 1 the S-shape KL energy
varies by under one nat over the whole output range, so (P) would be nearly
flat), so :func:`calibrate_temperature` chooses tau by a stated rule: the tau
that maximises the held-out log predictive density of (P) on a validation split
of the training data, sum_v [-E_v(y_v) / tau - log Z_v(tau)],
Z_v(tau) = int_B exp(-E_v(y) / tau) dy (empirical Bayes for the one scale
parameter the energy lacks). Z is computed by the midpoint rule on a grid for
d_y <= 2 and by Monte Carlo over B otherwise.

The modes. :func:`tgp_modes` (and :meth:`bayeskde.tgp.TwinGP.predict_modes`)
summarise (P) per test point by its k modes of highest mass; NUTS sampling of
(P) is :func:`bayeskde.models.sample_tgp_predictive`.
"""

from __future__ import annotations

from functools import partial
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from sklearn.base import clone
from sklearn.utils.validation import check_is_fitted

from .._modes import top_k_modes
from .._validation import (
    as_float_array,
    check_integer,
    check_key,
    check_nonnegative,
    check_positive,
)
from .batch import (
    TGPEnergyBatch,
    batch_energy,
    batch_energy_many,
    check_tgp_test_inputs,
    point_energy,
    tgp_energy_batch,
)
from .energy import tgp_minimize

__all__ = [
    "Modes",
    "calibrate_temperature",
    "energies_at",
    "output_box",
    "tgp_grid_log_probs",
    "tgp_modes",
]


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


def output_box(Y, margin):
    """The training outputs' box widened by ``margin`` times its range on each
    side: ``(lower, upper)``."""
    Y = np.asarray(Y)
    Y = Y[:, None] if Y.ndim == 1 else Y
    lo, hi = Y.min(axis=0), Y.max(axis=0)
    pad = margin * (hi - lo)
    return lo - pad, hi + pad


def _log_normaliser_points(key, lower, upper, n_points):
    """Quadrature (d_y <= 2, midpoint rule) or Monte Carlo points over the box."""
    d = len(lower)
    vol = float(np.prod(upper - lower))
    if d <= 2:
        per = int(round(n_points ** (1.0 / d)))
        axes = [lo + (np.arange(per) + 0.5) * (hi - lo) / per
                for lo, hi in zip(lower, upper, strict=True)]
        pts = np.stack(np.meshgrid(*axes, indexing="ij"), -1).reshape(-1, d)
    else:
        u = np.asarray(jax.random.uniform(key, (n_points, d)))
        pts = lower + u * (upper - lower)
    return pts, np.log(vol / len(pts))


def energies_at(batch, points):
    """(n_test, n_points) energies of every test point at shared points."""
    n_test = batch.a.shape[0]
    pts = jnp.asarray(points, batch.outputs.dtype)
    Ys = jnp.broadcast_to(pts[:, None, :], (pts.shape[0], n_test, pts.shape[1]))
    return np.asarray(batch_energy_many(batch, Ys)).T


def calibrate_temperature(
    key: jax.Array, tgp, X, Y, *, validation_fraction: float = 0.2,
    temperatures=None, margin: float = 0.1, n_points: int = 400,
) -> tuple[float, dict]:
    """The temperature tau of (P) (:mod:`bayeskde.tgp.modes`) that maximises the
    held-out log predictive density on a random validation split.

    ``tgp`` is a global :class:`bayeskde.tgp.TwinGP` (fitted or not: a clone of
    it is fitted on the kept points). Returns ``(tau, details)`` with the grid
    and its mean held-out log density.
    Cost: one TGP fit on the kept points and ``n_points`` energy evaluations per
    validation point.
    """
    X = as_float_array(X, "X")
    Y = as_float_array(Y, "Y")
    X = X[:, None] if X.ndim == 1 else X
    Y = Y[:, None] if Y.ndim == 1 else Y
    if not 0.0 < validation_fraction < 1.0:
        raise ValueError(
            f"validation_fraction must be in (0, 1), got {validation_fraction}"
        )
    n = X.shape[0]
    n_val = max(1, int(round(validation_fraction * n)))
    if n - n_val < 3:
        raise ValueError(f"too few points ({n}) to hold out a validation split")
    k1, k2 = jax.random.split(key)
    perm = np.asarray(jax.random.permutation(k1, n))
    val, keep = perm[:n_val], perm[n_val:]
    taus = np.geomspace(1e-4, 1e1, 51) if temperatures is None else np.asarray(
        temperatures, float)
    if taus.ndim != 1 or taus.size == 0 or not np.all(taus > 0):
        raise ValueError("temperatures must be a non-empty 1-D array of values > 0")
    model = clone(tgp).fit(X[keep], Y[keep])
    batch = tgp_energy_batch(model, jnp.asarray(X[val]))
    lower, upper = output_box(Y, margin)
    pts, log_cell = _log_normaliser_points(k2, lower, upper, n_points)
    E_grid = energies_at(batch, pts)  # (n_val, n_points)
    E_true = np.asarray(batch_energy(batch, jnp.asarray(Y[val], batch.outputs.dtype)))
    scores = []
    for tau in taus:
        a = -E_grid / tau
        amax = a.max(axis=1, keepdims=True)
        log_z = amax[:, 0] + np.log(np.exp(a - amax).sum(axis=1)) + log_cell
        scores.append(float(np.mean(-E_true / tau - log_z)))
    best = float(taus[int(np.argmax(scores))])
    return best, {"temperatures": taus.tolist(), "heldout_log_density": scores}


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
    to exp(-E(y) / tau) (eq. (P) of :mod:`bayeskde.tgp.modes`; E the KL
    energy, Bo and Sminchisescu 2010 eq. 14, or HSIC, eq. 19) per test point.

    Outputs of dimension <= 2: E on a grid of ``n_grid`` points over the
    training outputs' box widened by ``margin`` gives the predictive's mass
    (midpoint rule); ``bayeskde._modes.top_k_modes`` finds the k regions of
    highest mass, each mode is its region's most probable grid point and its
    mass that of the grid points nearest to it. (The predictive's modes are not
    the energy's local minima: on the S-shape the tempered density has three
    regions of mass where E has one minimum.) Above: local minima of E by
    BFGS (:func:`bayeskde.tgp.tgp_minimize`) from the outputs of the
    ``n_starts`` nearest training inputs; minima closer than ``radius`` are
    merged (the lower kept), and each minimum's mass is its Laplace
    approximation exp(-E / tau) (2 pi)^(d/2) det(H / tau)^(-1/2), normalised
    over the minima found.

    Every argument is checked before any work (the calibration of tau
    included). :meth:`bayeskde.tgp.TwinGP.predict_modes` is this function.

    Args:
        tgp: a fitted global :class:`bayeskde.tgp.TwinGP` (``n_neighbors=None``).
        X_test: ``(n_test, d_x)`` test inputs (1-D: one feature per point).
        k: number of modes.
        temperature: tau; ``None`` calibrates it by
            :func:`calibrate_temperature` on the training data (held-out log
            density of a 20% split, with ``key``, default ``key(0)``).
        n_grid: grid points (d_y <= 2).
        n_starts: BFGS starts per test point (d_y > 2).
        margin: the grid box's widening on each side, a fraction of the
            outputs' range (d_y <= 2; the calibration keeps its default).
        radius: merge radius in output units (default: 0.1 of the outputs'
            mean range for the Laplace path; the grid path uses it for
            ``bayeskde._modes.top_k_modes``).
        key: PRNG key of the calibration's split.

    Returns:
        :class:`Modes`: ``modes`` ``(n_test, k, d_y)`` (also for a TwinGP fitted
        on 1-D outputs), ``masses`` ``(n_test, k)`` highest first (when fewer
        than k separated modes carry mass, the rest repeat the first with mass
        0), and ``temperature``.

    Raises:
        sklearn.exceptions.NotFittedError: an unfitted ``tgp`` (a ValueError).
        ValueError: a local TwinGP, ``k < 1``, ``temperature <= 0``, bad
            ``n_grid``, ``n_starts``, ``margin`` or ``radius``; ``X_test`` with
            NaN/inf or the wrong number of features.
        TypeError: ``X_test`` that is not numeric.

    Cost: O(n_test n_grid N^2) for the grid path plus BFGS, O(n_test n_starts
    N^2) per BFGS iteration for the Laplace path; calibrating tau adds a fit on
    80% of the training data and 400 energy evaluations per held-out point.
    """
    check_is_fitted(tgp, "model_")
    if getattr(tgp, "n_neighbors_", None) is not None:
        raise ValueError(
            "the tempered predictive needs a global TwinGP (n_neighbors=None)"
        )
    k = check_integer(k, "k", minimum=1)
    tau = None if temperature is None else check_positive(temperature, "temperature")
    n_grid = check_integer(n_grid, "n_grid", minimum=2)
    n_starts = check_integer(n_starts, "n_starts", minimum=1)
    margin = check_nonnegative(margin, "margin")
    key = check_key(key, allow_none=True)
    X_test = check_tgp_test_inputs(tgp, X_test, "X_test")
    model = tgp.model_
    Y = np.asarray(model.Y, float)
    if radius is None:
        radius = 0.1 * float(np.mean(Y.max(axis=0) - Y.min(axis=0)))
    radius = check_positive(radius, "radius")
    if tau is None:
        key = jax.random.key(0) if key is None else key
        tau, _ = calibrate_temperature(key, tgp, np.asarray(model.X), Y)
    batch = tgp_energy_batch(tgp, X_test)
    dt = batch.outputs.dtype
    d = Y.shape[1]
    tol = jnp.sqrt(jnp.finfo(dt).eps)
    args = (*batch[2:-1], tol)
    if d <= 2:
        grid, _ = _log_normaliser_points(None, *output_box(Y, margin), n_grid)
        Ys = jnp.broadcast_to(jnp.asarray(grid, dt)[:, None, :],
                              (len(grid), X_test.shape[0], d))
        a = -np.asarray(batch_energy_many(batch, Ys), float).T / tau
        p = np.exp(a - a.max(axis=1, keepdims=True))
        modes, masses = top_k_modes(grid, p, k, radius)
        return Modes(modes, masses, float(tau))
    Xtr = np.asarray(model.X, float)
    Xte = np.asarray(X_test, float)
    d2 = np.sum((Xte[:, None, :] - Xtr[None]) ** 2, axis=-1)
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


def tgp_grid_log_probs(
    tgp, X_test, grid, temperature: float
) -> np.ndarray:
    """The tempered Twin GP predictive (P) on a shared output grid:
    ``(n_test, n_grid)`` log probabilities, each row normalised (the grid's
    cells are taken equal). Cost O(n_test n_grid N).
    """
    temperature = check_positive(temperature, "temperature")
    X_test = as_float_array(X_test, "X_test")
    X_test = X_test[:, None] if X_test.ndim == 1 else X_test
    grid = np.asarray(as_float_array(grid, "grid"))
    grid = grid[:, None] if grid.ndim == 1 else grid
    a = -energies_at(tgp_energy_batch(tgp, X_test), grid) / temperature
    a = a - a.max(axis=1, keepdims=True)
    return a - np.log(np.exp(a).sum(axis=1, keepdims=True))
