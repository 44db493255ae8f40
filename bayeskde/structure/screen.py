"""A first pass that screens the grammar's structures on a long series.

The exact enumeration fits every structure (93 with the default grammar) at a
cost cubic in ``n``; above a few hundred points that is many minutes. A long
series is therefore fitted in two passes:

1. every structure on the last ``points`` observations by time (default 64),
   in the full series' units (its ``tau``, standardisation and prior), so that
   the modes carry over; this is the exact enumeration of
   :func:`~bayeskde.structure.structure_posterior`, on a window;
2. the structures of largest first-pass mass, in order, until they hold
   ``mass`` (0.999) of it, at most ``keep`` (8), on the whole series, each from
   its first-pass best mode (the window's mode is not the whole series'
   mode: a third of the steps left a structure's Hessian indefinite in the
   tests, so the second pass takes as many steps as the first).

The returned posterior is exact over the kept structures (their evidences are
the whole series' Laplace evidences, their prior renormalised over them) and
puts no mass on the screened-out ones: that is the approximation, stated in
its ``screen`` field (the first pass's mass on the kept structures). The window
keeps every period up to half its length (32 months at monthly steps) and the
recent level and slope; a structure that only the whole span reveals (a cycle
longer than the window) can be screened out.

Cost: the first pass is the enumeration at ``n = points`` (the cost of a short
series), the second at most ``keep`` fits at ``n``: O(keep num_steps n^3)
instead of O(num_fits num_steps n^3) (223 fits with the default grammar).
"""

from __future__ import annotations

import jax
import numpy as np

from .grammar import Grammar
from .posterior import StructurePosterior, structure_posterior
from .priors import DataScales, ParameterPrior

__all__ = ["SCREEN_ABOVE", "SCREEN_POINTS", "screen_window", "screened_posterior"]

#: Series longer than this are screened by default
#: (:func:`~bayeskde.structure.fit_structure_gp`'s ``screen_above``).
SCREEN_ABOVE = 300
#: The first pass's window: the last this many observations by time.
SCREEN_POINTS = 64


def screen_window(t, points: int = SCREEN_POINTS) -> np.ndarray:
    """Indices of the last ``points`` observations of ``t`` by time, in time
    order."""
    order = np.argsort(np.asarray(t, np.float64), kind="stable")
    return order[-points:]


def screened_posterior(
    key: jax.Array, tau, z, grammar: Grammar, prior: ParameterPrior,
    scales: DataScales, *, num_starts: int = 3, num_steps: int = 60,
    num_warm_starts: int = 2, points: int = SCREEN_POINTS, keep: int = 8,
    mass: float = 0.999, first: StructurePosterior | None = None,
) -> StructurePosterior:
    """The two-pass posterior of a long series (module docstring).

    Args:
        key: a ``jax.random`` key (the first pass's random starts).
        tau: ``(n,)`` times mapped to [0, 1] by ``scales``.
        z: ``(n,)`` outputs standardised by ``scales``.
        grammar, prior, scales: as for
            :func:`~bayeskde.structure.structure_posterior`.
        num_starts, num_warm_starts: the first pass's starts.
        num_steps: L-BFGS steps of every fit.
        points: the first pass's window.
        keep: the most structures kept.
        mass: the first-pass mass the kept structures reach.
        first: the first pass, if already fitted (the window's posterior).

    Returns:
        A :class:`~bayeskde.structure.StructurePosterior` over the kept
        structures (its ``grammar``), with ``screen`` set.
    """
    tau = np.asarray(tau, np.float64)
    z = np.asarray(z, np.float64)
    if first is None:
        window = screen_window(tau, points)
        first = structure_posterior(key, tau[window], z[window], grammar, prior,
                                    scales, num_starts=num_starts,
                                    num_steps=num_steps,
                                    num_warm_starts=num_warm_starts)
    ranked = np.argsort(-first.probabilities, kind="stable")
    cumulative = np.cumsum(first.probabilities[ranked])
    count = min(int(np.searchsorted(cumulative, mass)) + 1, keep, ranked.size)
    kept = np.sort(ranked[:count])
    init = np.empty((count, 1, prior.loc.size))
    for row, s in enumerate(kept):
        comps = np.flatnonzero(first.component_structure == s)
        if comps.size:
            best = comps[np.argmax(first.component_log_weight[comps])]
            init[row, 0] = first.component_u[best]
        else:  # no finite mode on the window: the prior means
            init[row, 0] = prior.loc
    log_prior = grammar.log_prior[kept]
    sub = grammar._replace(masks=grammar.masks[kept],
                           log_prior=log_prior - np.logaddexp.reduce(log_prior))
    post = structure_posterior(key, tau, z, sub, prior, scales,
                               num_steps=num_steps, init=init)
    return post._replace(screen={
        "points": int(first.tau.shape[0]), "structures": int(len(grammar.masks)),
        "kept": int(count), "mass_kept": float(first.probabilities[kept].sum())})
