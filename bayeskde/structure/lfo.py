"""Leave-future-out scores of a structure posterior on its own training series.

A forecast is judged on what comes after the data, so the transform of ``y``
that the GP models (``y`` or ``log y``) is chosen by how well each fitted
posterior forecasts the end of the training series from its beginning: the
leave-future-out (LFO) expected log predictive density of Bürkner, Gabry and
Vehtari (2020, eq. 3 with one origin, M-step-ahead)::

    elpd_LFO = sum_{i = k+1}^{n} log p(y_i | y_{1:k}),   k = n - h,

the last ``h`` training points (by time) predicted from the ones before them,
each by the mixture's marginal predictive in ``y``'s units (a log-normal
mixture's density includes the Jacobian ``-log y_i``), so scores of ``y`` and
``log y`` fits compare. The marginal likelihood instead scores every point from
the ones before it one step ahead (``log p(y) = sum_i log p(y_i | y_{<i})``),
and on a long smooth series it can prefer the transform that predicts the next
month best and extrapolates a year worse (Mauna Loa, UKgas: ``docs/structure.md``).

Approximation (stated): the structure masses, the parameter modes and the
mixture weights are the full fit's, not refitted on ``y_{1:k}`` (Bürkner et al.
refit or importance-weight; a refit would double the fit's cost), so the
parameters have seen the block they predict. Both transforms share that leak;
the score compares how their kernels extrapolate ``h`` steps.

Cost: O(C (k^3 + k^2 h)) for ``C`` mixture components.
"""

from __future__ import annotations

import numpy as np

from .posterior import StructurePosterior
from .predictive import mixture_log_density, mixture_predictive

__all__ = ["LFO_FRACTION", "lfo_horizon", "lfo_log_score"]

#: The share of the training series held out by the leave-future-out score, as
#: the benchmark forecasts the last 10% of each series (fixed a priori, not
#: tuned).
LFO_FRACTION = 0.1


def lfo_horizon(n: int, fraction: float = LFO_FRACTION) -> int:
    """``h = max(1, round(fraction n))``, at most ``n - 3`` (three points left
    to condition on)."""
    return int(min(max(1, round(fraction * n)), n - 3))


def lfo_log_score(post: StructurePosterior, t, y,
                  fraction: float = LFO_FRACTION) -> float:
    """``elpd_LFO`` of ``post`` on its training series (module docstring).

    Args:
        post: a fitted posterior whose ``transform`` is set (``"none"`` or
            ``"log"``) and whose ``tau``, ``z`` are ``t``, ``y`` mapped.
        t: ``(n,)`` the training times, in the order of the fit.
        y: ``(n,)`` the training observations (the user's units).
        fraction: the share ``h / n`` of the series predicted
            (:func:`lfo_horizon`).

    Returns:
        ``sum_i log p(y_i | y_{1:k})`` over the last ``h`` points by time
        (``-inf`` if a density underflows).
    """
    t = np.asarray(t, np.float64)
    y = np.asarray(y, np.float64)
    n = t.shape[0]
    h = lfo_horizon(n, fraction)
    order = np.argsort(t, kind="stable")
    past, future = order[:n - h], order[n - h:]
    cut = post._replace(tau=np.asarray(post.tau)[past], z=np.asarray(post.z)[past])
    pred = mixture_predictive(cut, t[future])
    return float(np.sum(np.asarray(mixture_log_density(pred, y[future]))))
