"""The inverse model's evidence approximation for a fit: exact or low rank,
with the low-rank map's rank chosen from the data.

:func:`prepare_for_fit` resolves ``approx`` (``"auto"``: exact up to
:data:`~.data.EXACT_MAX_M` training points) and, for the
low-rank evidence (:mod:`~bayeskde.inverse.lowrank`) without a rank
given, grows the rank from
:func:`~.lowrank.default_rank` until the evidence
error indicator at the pairs that hold the posterior mass is below
:data:`RANK_TOL` nats, or the rank reaches :data:`MAX_AUTO_RANK`. Each step
at least doubles it; for HSGP features it jumps straight to the smallest basis
whose captured spectrum meets the tolerance at the current modes
(:func:`~.lowrank.hsgp_tail_indicator`: the
variance beyond J functions is known from the kernel's spectral density, with
no data pass), so a wide kernel keeps a small basis and a narrow one gets the
basis it needs in one more pass. The
indicator of a pair at its mode (a^2, s^2) is

    (d_x / 2) (a^2 / s^2) |tr phi(K) - tr Phi Phi^T|,

the first-order change of (d_x / 2) log det(a^2 K + s^2 I) when the kernel
loses that much trace, an upper bound on the log-determinant error for
Nystroem (its kernel is below the exact one, so every eigenvalue is), and for
HSGP the same with the variance beyond the basis (the box's boundary bias is
not in it). The pairs' modes and their masses come from step 1 of the
quadrature (:func:`~.quadrature.pair_modes`), at the current rank.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import numpy as np

from .data import (
    InverseGPData,
    InverseGPPrior,
    as_2d,
    check_lowrank_args,
    prepare_inverse_gp_data,
    resolve_approx,
)
from .lowrank import hsgp_tail_indicator
from .quadrature import pair_modes

__all__ = ["MAX_AUTO_RANK", "RANK_TOL", "RankReport", "rank_error_bound",
           "prepare_for_fit"]

#: Largest rank the data-driven choice tries (HSGP functions / centres).
MAX_AUTO_RANK = 1024
#: Indicator (nats) below which the data-driven rank stops growing.
RANK_TOL = 0.1


class RankReport(NamedTuple):
    """How the low-rank evidence's rank was chosen (:func:`prepare_for_fit`).

    Attributes:
        features: ``"hsgp"`` or ``"nystroem"``.
        rank: the rank used (HSGP functions or Nystroem centres).
        tried: every rank tried, in order.
        error_bound: per rank tried, the largest indicator (module docstring)
            over the pairs holding at least 1e-3 of the mass at their modes.
        chosen_by: ``"data"`` or ``"user"``.
        n_kept: the largest number of eigenvalues a pair kept (r <= rank).
        captured: the smallest fraction of the kernel's trace,
            1 - residual / (m sum_i alpha_i), that the map captures over the
            pairs holding at least 1e-3 of the mass (HSGP: the residual is
            the variance beyond the basis, the box's bias not in it).
    """

    features: str
    rank: int
    tried: tuple
    error_bound: tuple
    chosen_by: str
    n_kept: int
    captured: float


def _heavy_ratio(data, prior):
    """Each pair's a^2 / s^2 at its mode, zero for the pairs below 1e-3 of
    the mass at their modes: ``(n_gamma, D)``."""
    u, v, J = pair_modes(data, prior)
    w = np.exp(J - J.max())
    w /= w.sum()
    return np.where(w >= 1e-3, np.exp(u - v), 0.0)


def rank_error_bound(data: InverseGPData, prior: InverseGPPrior) -> float:
    """The largest evidence-error indicator of a low-rank ``data`` over the
    pairs holding at least 1e-3 of the mass (module docstring). Cost: step 1
    of the quadrature, about 3,500 evaluations of every pair's log joint."""
    return _bound(data, _heavy_ratio(data, prior))


def _bound(data, ratio):
    return float(np.max(0.5 * data.X.shape[1] * ratio
                        * np.abs(data.lowrank.trace_residual)))


def _captured(data, ratio):
    basis = data.lowrank
    total = basis.n * np.asarray(data.alpha, np.float64).sum(-1)
    frac = 1.0 - np.abs(basis.trace_residual) / np.maximum(total, 1e-300)
    return float(np.min(np.where(ratio > 0, frac, 1.0)))


def _next_rank(data, ratio, r, cap):
    """At least twice ``r``; for HSGP the smallest basis whose indicator at
    the current modes is below RANK_TOL / 2, where larger."""
    nxt = 2 * r
    basis = data.lowrank
    if basis.kind == "hsgp":
        ind = hsgp_tail_indicator(basis, np.asarray(data.alpha, np.float64),
                                  np.asarray(data.gammas, np.float64), ratio,
                                  data.X.shape[1])
        ok = np.flatnonzero(ind <= 0.5 * RANK_TOL)
        nxt = max(nxt, int(ok[0]) if ok.size else cap)
    return min(nxt, cap)


def _report(data, tried, bounds, by, ratio):
    counts = np.bincount(np.asarray(data.segment), minlength=data.n_rest.size)
    return RankReport(data.lowrank.kind, data.lowrank.rank, tuple(tried),
                      tuple(bounds), by, int(counts.max()),
                      _captured(data, ratio))


def prepare_for_fit(
    key: jax.Array, X, Y, prior: InverseGPPrior, approx="auto", rank=None,
    progress_bar: bool = False,
) -> tuple[InverseGPData, RankReport | None]:
    """The model's data for :func:`~bayeskde.inverse.fit_inverse_gp` and, for
    the low-rank evidence, its :class:`RankReport` (``None`` exact).

    Raises:
        ValueError: bad ``approx`` or ``rank`` (or data, from
            :func:`~.data.prepare_inverse_gp_data`).
        TypeError: a rank that is not an integer.

    Cost: exact O(n_gamma D m^3); low rank that of
    :func:`~.data.prepare_inverse_gp_data` per rank tried (at most
    log2(MAX_AUTO_RANK / 32) + 1 of them, the last dominating).
    """
    X, Y = as_2d(X, "X"), as_2d(Y, "Y")
    m, d_y = Y.shape
    approx = resolve_approx(approx, m, rank, d_y)
    r, features = check_lowrank_args(approx, rank, "auto", m, d_y)
    if approx == "exact":
        return prepare_inverse_gp_data(key, X, Y, prior, approx="exact"), None
    k_c = jax.random.fold_in(key, 2)
    cap = max(r, min(MAX_AUTO_RANK, m) if features == "nystroem" else MAX_AUTO_RANK)
    tried, bounds = [], []
    while True:
        data = prepare_inverse_gp_data(k_c, X, Y, prior, approx="lowrank", rank=r,
                                       features=features,
                                       progress_bar=progress_bar)
        tried.append(r)
        ratio = _heavy_ratio(data, prior)
        bounds.append(_bound(data, ratio))
        if rank is not None or bounds[-1] <= RANK_TOL or r >= cap:
            break
        r = _next_rank(data, ratio, r, cap)
    return data, _report(data, tried, bounds,
                         "user" if rank is not None else "data", ratio)
