"""Data scales and the prior over each structure's parameters.

Time is mapped to ``tau = (t - t_min) / span`` in [0, 1] and the outputs are
standardised, ``z = (y - mean) / sd``; the priors below live on that scale and are
chosen from the data's spacing ``delta`` (the median gap between consecutive
distinct times, ``delta_tau = delta / span``) and span, as the package's other
defaults are. Every parameter has a normal prior on its unconstrained value
``u`` (its log for positive parameters, so those are log-normal)::

    lengthscale (SE, RQ)  log l ~ N((log(2 delta_tau) + log 2) / 2,
                                    (log 2 - log(2 delta_tau)) / 4)
    period (PER)          log p ~ N((log(2 delta_tau) + log 0.5) / 2,
                                    (log 0.5 - log(2 delta_tau)) / 4)
    periodic scale        log l ~ N(0, 1)
    RQ alpha              log a ~ N(0, 1)
    LIN offset            c ~ N(0.5, 1)
    term variance         log v ~ N(log 0.5, 1.5)
    constant variance     log c ~ N(0, 2)
    noise variance        log s2 ~ N(log 0.05, 2)

so a length scale lies between two spacings and twice the span and a period
between two spacings and half the span with prior probability 0.95 (plus or minus
two standard deviations). The noise variance has a floor of ``10 n eps`` (eps of
the working dtype) so that the Gram matrix stays factorisable in float32.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from .grammar import Grammar

__all__ = ["DataScales", "ParameterPrior", "data_scales", "parameter_prior"]


class DataScales(NamedTuple):
    """The affine maps between the user's units and the fit's.

    Attributes:
        t_min: the smallest training time.
        span: ``max t - min t`` (> 0).
        delta: the median gap between consecutive distinct training times.
        y_mean: the training outputs' mean.
        y_sd: the training outputs' standard deviation (1 if they are constant).
    """

    t_min: float
    span: float
    delta: float
    y_mean: float
    y_sd: float


class ParameterPrior(NamedTuple):
    """Normal priors on the unconstrained parameter vector ``u``.

    Attributes:
        loc: ``(num_params,)`` prior means.
        scale: ``(num_params,)`` prior standard deviations.
    """

    loc: np.ndarray
    scale: np.ndarray


def data_scales(t: np.ndarray, y: np.ndarray) -> DataScales:
    """The scales of validated 1-D ``t`` and ``y`` (module docstring).

    Raises:
        ValueError: fewer than two distinct times.
    """
    t = np.asarray(t, np.float64)
    y = np.asarray(y, np.float64)
    distinct = np.unique(t)
    if distinct.size < 2:
        raise ValueError(f"t needs at least two distinct times, got {distinct.size}")
    sd = float(np.std(y))
    return DataScales(float(distinct[0]), float(distinct[-1] - distinct[0]),
                      float(np.median(np.diff(distinct))), float(np.mean(y)),
                      sd if sd > 0 else 1.0)


def parameter_prior(grammar: Grammar, scales: DataScales) -> ParameterPrior:
    """The prior of every parameter of ``grammar``'s layout, from the data
    (module docstring).

    Args:
        grammar: from :func:`~bayeskde.structure.make_grammar`.
        scales: from :func:`data_scales`.

    Returns:
        A :class:`ParameterPrior` on the unconstrained scale.
    """
    d = scales.delta / scales.span
    lo_l, hi_l = np.log(2 * d), np.log(2.0)
    lo_p, hi_p = np.log(2 * d), np.log(0.5)
    table = {
        "lengthscale": ((lo_l + hi_l) / 2, (hi_l - lo_l) / 4),
        "period": ((lo_p + hi_p) / 2, max((hi_p - lo_p) / 4, 0.25)),
        "periodic_scale": (0.0, 1.0),
        "alpha": (0.0, 1.0),
        "location": (0.5, 1.0),
        "variance": (np.log(0.5), 1.5),
        "noise": (np.log(0.05), 2.0),
    }
    loc = np.array([table[r][0] for r in grammar.param_roles])
    scale = np.array([table[r][1] for r in grammar.param_roles])
    loc[0], scale[0] = 0.0, 2.0  # the constant (level)
    return ParameterPrior(loc, scale)
