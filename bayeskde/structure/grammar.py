"""The grammar of kernel expressions and its prior over structures.

A structure is a sum of *terms*, each term a variance times a product of base
kernels of :mod:`bayeskde.kernels.composable`, plus a constant (the level) and
Gaussian noise, which every structure carries::

    k(t, t') = c + sum_{j in S} v_j prod_{b in term_j} k_b(t, t'),   y = f + eps.

The vocabulary of terms is fixed for a fit (default :data:`DEFAULT_TERMS`: ``LIN``,
``SE``, ``PER``, ``RQ``, ``OU``, ``LIN*SE``, ``LIN*PER``, ``PER*SE``: sums of
products of depth 2), and a structure is a subset ``S`` of it with ``|S| <=
max_terms``, so the structures are enumerated exactly: ``sum_{k=0}^{K} C(T, k)``
of them (93 for the eight default terms and ``K = 3``).

Prior over structures (a probabilistic grammar with stated penalties): each term
``j`` of the vocabulary enters independently with probability
``q_j = inclusion ** f_j``, ``f_j`` its number of factors, and the distribution is
renormalised over the bounded set ``|S| <= max_terms``::

    log P(S) = sum_{j in S} log q_j + sum_{j not in S} log(1 - q_j) - log Z_K.

With ``inclusion = 0.3`` a one-factor term costs ``log(0.7 / 0.3) = 0.85`` nats
against leaving it out and a two-factor term ``log(0.91 / 0.09) = 2.31`` nats (the
depth penalty); the marginal likelihood adds its own Occam factor on top.

A term is written as the names of its factors joined by ``*`` (``"PER*SE"``); the
base kernels and their parameters are in :data:`BASE_KERNELS`. Building a
kernel from parameter values (:func:`term_kernel`) is the only place base kernels
are instantiated; their formulas live in :mod:`bayeskde.kernels.composable`.
"""

from __future__ import annotations

import itertools
from typing import NamedTuple

import numpy as np

from ..kernels.composable import (
    Constant,
    Exponential,
    Kernel,
    Linear,
    Periodic,
    RationalQuadratic,
    SquaredExponential,
)

__all__ = [
    "BASE_KERNELS",
    "DEFAULT_TERMS",
    "Grammar",
    "ParamSpec",
    "make_grammar",
    "parse_term",
    "term_kernel",
    "structure_log_prior",
]


class ParamSpec(NamedTuple):
    """One parameter of a base kernel: its name, whether it is positive (fitted on
    the log scale) and its role, which sets its prior (:mod:`.priors`):
    ``"lengthscale"``, ``"period"``, ``"periodic_scale"``, ``"alpha"``,
    ``"location"`` or ``"variance"``."""

    name: str
    positive: bool
    role: str


#: Base kernels by name: the composable class and its parameters in the order its
#: constructor takes them.
BASE_KERNELS: dict[str, tuple[type[Kernel], tuple[ParamSpec, ...]]] = {
    "LIN": (Linear, (ParamSpec("offset", False, "location"),)),
    "SE": (SquaredExponential, (ParamSpec("scale", True, "lengthscale"),)),
    "PER": (Periodic, (ParamSpec("scale", True, "periodic_scale"),
                       ParamSpec("period", True, "period"))),
    "RQ": (RationalQuadratic, (ParamSpec("scale", True, "lengthscale"),
                               ParamSpec("alpha", True, "alpha"))),
    "OU": (Exponential, (ParamSpec("scale", True, "lengthscale"),)),
}

#: The default vocabulary of terms: every base kernel alone and the three
#: products of AutoGP's and the Automatic Statistician's typical forecasts
#: (a trend times a smooth or periodic pattern, a periodic pattern that drifts).
#: ``OU`` (Matern-1/2) is the GP twin of the local-level and AR(1) models that
#: exponential smoothing and ARIMA extrapolate (the Nile's textbook model,
#: Durbin and Koopman 2012, ch. 2): every smooth kernel's forecast follows the
#: curvature of the last stretch, the OU's holds the last level.
DEFAULT_TERMS: tuple[str, ...] = ("LIN", "SE", "PER", "RQ", "OU", "LIN*SE",
                                  "LIN*PER", "PER*SE")


def parse_term(term: str) -> tuple[str, ...]:
    """``"PER*SE"`` -> ``("PER", "SE")``: the factor names, checked.

    Raises:
        TypeError: ``term`` is not a string.
        ValueError: an unknown or repeated base kernel name.
    """
    if not isinstance(term, str):
        raise TypeError(f"terms must hold strings like 'PER*SE', got {term!r}")
    factors = tuple(f.strip().upper() for f in term.split("*"))
    unknown = [f for f in factors if f not in BASE_KERNELS]
    if unknown or not factors:
        raise ValueError(f"terms: {term!r} names unknown base kernels {unknown}; "
                         f"known: {sorted(BASE_KERNELS)}")
    if len(set(factors)) != len(factors):
        raise ValueError(f"terms: {term!r} repeats a base kernel")
    return factors


class Grammar(NamedTuple):
    """The enumerated structure space and the layout of the parameter vector.

    The parameter vector ``u`` (unconstrained: logs of positive parameters) holds
    the constant's variance (index 0), the noise variance (index 1), then per
    term its variance followed by its factors' parameters.

    Attributes:
        terms: the vocabulary, each a tuple of factor names.
        masks: ``(num_structures, num_terms)`` 0/1 array; row ``s`` marks the
            terms of structure ``s`` (row 0 is the empty structure, constant plus
            noise).
        log_prior: ``(num_structures,)`` log P(S), normalised.
        param_names: ``(num_params,)`` names like ``"PER*SE/PER.period"``.
        param_roles: ``(num_params,)`` roles (see :class:`ParamSpec`).
        param_positive: ``(num_params,)`` bool, fitted on the log scale.
        param_term: ``(num_params,)`` index of the term owning each parameter
            (-1 for the constant and the noise).
        inclusion: the grammar's inclusion probability ``q``.
        max_terms: the bound ``K`` on the number of terms.
    """

    terms: tuple[tuple[str, ...], ...]
    masks: np.ndarray
    log_prior: np.ndarray
    param_names: tuple[str, ...]
    param_roles: tuple[str, ...]
    param_positive: np.ndarray
    param_term: np.ndarray
    inclusion: float
    max_terms: int


def structure_log_prior(masks: np.ndarray, terms, inclusion: float) -> np.ndarray:
    """log P(S) of the grammar (module docstring), normalised over ``masks``.

    Args:
        masks: ``(num_structures, num_terms)`` 0/1.
        terms: the vocabulary (tuples of factor names).
        inclusion: ``q`` in (0, 1).

    Returns:
        ``(num_structures,)`` log probabilities that sum (in probability) to one.
    """
    q = np.array([inclusion ** len(f) for f in terms])
    lp = masks @ np.log(q) + (1 - masks) @ np.log1p(-q)
    return lp - np.logaddexp.reduce(lp)


def make_grammar(terms=DEFAULT_TERMS, max_terms: int = 3,
                 inclusion: float = 0.3) -> Grammar:
    """Enumerate every structure of at most ``max_terms`` distinct terms.

    Args:
        terms: the vocabulary, strings like ``"PER*SE"``.
        max_terms: the bound ``K`` on the number of terms in a sum.
        inclusion: the grammar's inclusion probability ``q`` in (0, 1).

    Returns:
        A :class:`Grammar` with ``sum_{k<=K} C(T, k)`` structures.

    Raises:
        ValueError: unknown or repeated terms, ``max_terms`` outside
            ``[1, len(terms)]``, ``inclusion`` outside (0, 1).

    Examples:
        >>> g = make_grammar(("LIN", "PER*SE"), max_terms=2)
        >>> g.masks.tolist()
        [[0, 0], [1, 0], [0, 1], [1, 1]]
        >>> round(float(np.exp(g.log_prior).sum()), 6)
        1.0
    """
    if isinstance(terms, str) or not hasattr(terms, "__iter__"):
        raise TypeError(f"terms must be a sequence of strings, got {terms!r}")
    parsed = tuple(parse_term(t) for t in terms)
    if not parsed:
        raise ValueError("terms is empty; give at least one term such as 'SE'")
    if len({tuple(sorted(p)) for p in parsed}) != len(parsed):
        raise ValueError(f"terms repeats a term: {list(terms)}")
    if isinstance(max_terms, bool) or not isinstance(max_terms, int | np.integer):
        raise TypeError(f"max_terms must be an integer, got {max_terms!r}")
    if not 1 <= max_terms <= len(parsed):
        raise ValueError(f"max_terms must lie in [1, {len(parsed)}] (the number "
                         f"of terms), got {max_terms}")
    if not (isinstance(inclusion, float | int) and 0.0 < inclusion < 1.0):
        raise ValueError(f"inclusion must lie in (0, 1), got {inclusion!r}")
    rows = [np.zeros(len(parsed), int)]
    for k in range(1, max_terms + 1):
        for chosen in itertools.combinations(range(len(parsed)), k):
            row = np.zeros(len(parsed), int)
            row[list(chosen)] = 1
            rows.append(row)
    masks = np.stack(rows)
    names = ["constant.variance", "noise.variance"]
    roles = ["variance", "noise"]
    positive = [True, True]
    owner = [-1, -1]
    for j, factors in enumerate(parsed):
        label = "*".join(factors)
        names.append(f"{label}/variance")
        roles.append("variance")
        positive.append(True)
        owner.append(j)
        for f in factors:
            for spec in BASE_KERNELS[f][1]:
                names.append(f"{label}/{f}.{spec.name}")
                roles.append(spec.role)
                positive.append(spec.positive)
                owner.append(j)
    return Grammar(parsed, masks, structure_log_prior(masks, parsed, inclusion),
                   tuple(names), tuple(roles), np.array(positive),
                   np.array(owner), float(inclusion), int(max_terms))


def term_kernel(factors: tuple[str, ...], variance, values) -> Kernel:
    """``Constant(variance) * k_1 * ... * k_m`` for a term's factors.

    Args:
        factors: the factor names, e.g. ``("PER", "SE")``.
        variance: the term's variance.
        values: the factors' parameters in natural units, in the order of
            :data:`BASE_KERNELS` (a sequence of scalars, possibly traced).

    Returns:
        A composable kernel.
    """
    kernel: Kernel = Constant(variance)
    i = 0
    for f in factors:
        cls, specs = BASE_KERNELS[f]
        kernel = kernel * cls(*values[i:i + len(specs)])
        i += len(specs)
    return kernel
