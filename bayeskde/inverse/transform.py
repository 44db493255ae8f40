"""A transform of the inverse model's inputs x, chosen by leave-one-out evidence.

The forward model (F) of :mod:`bayeskde.inverse` and its noise models describe
x' = t(x), applied elementwise, in place of x. By the change of variables

    p(x | y, D) = p(t(x) | y, D) |det dt/dx|,      log |det dt/dx| = J(x),    (T)

and J(x) does not depend on y, so for one test input the posterior over y is
the one of t(x): the transform acts only through the model it makes fit.
Simulators with multiplicative noise (sbibm's lotka_volterra draws its
observations from a log-normal around the ODE's populations) are
homoscedastic and Gaussian in log x and neither in x. The candidates are

    "none":  t(x) = x,       J(x) = 0,
    "log":   t(x) = log x,   J(x) = -sum_j log x_j     (every x > 0),

and ``"auto"`` fits both where every training x is positive and keeps the one
of higher mean leave-one-out log density of x itself (Box and Cox 1964's
choice of a transform by likelihood, here on the held-out density, Jacobian
included):

    score(t) = (1/m) sum_i [log p(t(x_i) | y_i, D_-i) + J(x_i)],              (S)

log p(t(x_i) | y_i, D_-i) the forward noise's own leave-one-out density
(:class:`~.noise.ForwardNoise`: the Gaussian's exact LOO, the residual
density's LOO, or the heteroscedastic model's K-fold held-out density, the
one the fit's noise choice kept). Cost: twice the fit where it compares.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from .._validation import as_float_array

__all__ = [
    "TRANSFORMS",
    "InputTransform",
    "check_transform",
    "apply_transform",
    "all_positive",
    "log_jacobian",
    "transform_score",
]

#: The transforms ``fit_inverse_gp(transform=...)`` accepts.
TRANSFORMS = ("auto", "none", "log")


class InputTransform(NamedTuple):
    """The transform a fit applies to x (:func:`fit_inverse_gp`).

    Attributes:
        kind: ``"none"`` or ``"log"``.
        requested: what was asked (one of :data:`TRANSFORMS`).
        scores: score (S) of each candidate that was fitted (``{}`` when
            nothing was compared).
    """

    kind: str = "none"
    requested: str = "none"
    scores: dict | None = None


def check_transform(transform) -> str:
    """``transform`` if it is one of :data:`TRANSFORMS`, else a ValueError."""
    if not isinstance(transform, str) or transform not in TRANSFORMS:
        raise ValueError(f"transform must be one of {TRANSFORMS}, got {transform!r}")
    return transform


def apply_transform(kind: str, X, name: str = "X"):
    """t(X) of (T) for ``kind`` ``"none"`` (``X`` itself, as given: the
    fit's own checks follow) or ``"log"`` (a float64 array; every entry must
    be finite and positive, a ValueError names the array otherwise)."""
    if kind == "none":
        return X
    if kind != "log":
        raise ValueError(f"kind must be 'none' or 'log', got {kind!r}")
    X = np.asarray(as_float_array(X, name), np.float64)
    if not np.all(X > 0):
        raise ValueError(f"{name} has entries <= 0 ({int(np.sum(X <= 0))} of "
                         f"{X.size}), but the fit modelled log x: every input "
                         "must be positive")
    return np.log(X)


def all_positive(X) -> bool:
    """Whether ``X`` is a finite numeric array with every entry > 0 (where
    ``"auto"`` compares the log; anything else is left to the fit's checks)."""
    try:
        X = np.asarray(X, np.float64)
    except (TypeError, ValueError):
        return False
    return bool(X.size) and bool(np.all(np.isfinite(X))) and bool(np.all(X > 0))


def log_jacobian(kind: str, X) -> np.ndarray:
    """J(x) of (T) per row of ``X`` ``(n, d_x)``: ``(n,)``."""
    X = np.asarray(X, np.float64)
    X = X.reshape(X.shape[0], -1)
    if kind == "none":
        return np.zeros(X.shape[0])
    return -np.sum(np.log(X), axis=1)


def transform_score(kind: str, noise, X) -> float:
    """Score (S) of a fit on t(X): the mean leave-one-out log density of its
    forward noise (the kind it kept) plus the mean Jacobian."""
    loo = {"gaussian": noise.loo_gaussian, "residual": noise.loo_residual,
           "heteroscedastic": noise.loo_heteroscedastic}[noise.kind]
    return float(loo) + float(np.mean(log_jacobian(kind, X)))
