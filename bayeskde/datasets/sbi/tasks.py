"""The sbibm tasks by name (:data:`SBI_TASKS`, :func:`sbi_task`) and a
simulation budget drawn from one (:func:`make_sbi_pairs`)."""

from __future__ import annotations

import jax
import numpy as np

from ..._validation import check_integer, check_key
from .analytic import (
    gaussian_linear,
    gaussian_linear_uniform,
    gaussian_mixture,
    slcp,
    two_moons,
)
from .base import SBIPairs, SBITask
from .glm import bernoulli_glm
from .ode import lotka_volterra, sir

__all__ = ["SBI_TASKS", "sbi_task", "make_sbi_pairs", "check_task_name"]

SBI_TASKS = ("two_moons", "gaussian_mixture", "gaussian_linear_uniform",
             "gaussian_linear", "slcp", "bernoulli_glm", "sir", "lotka_volterra")
"""The sbibm tasks implemented here."""

_BUILDERS = {"two_moons": two_moons, "gaussian_mixture": gaussian_mixture,
             "gaussian_linear_uniform": gaussian_linear_uniform,
             "gaussian_linear": gaussian_linear, "slcp": slcp,
             "bernoulli_glm": bernoulli_glm, "sir": sir,
             "lotka_volterra": lotka_volterra}


def check_task_name(name, arg: str = "name") -> str:
    """``name`` if it is one of :data:`SBI_TASKS`; else the error a user sees."""
    if not isinstance(name, str):
        raise TypeError(f"{arg} must be a task name, a str among {SBI_TASKS}; got "
                        f"{type(name).__name__} {name!r}")
    if name not in _BUILDERS:
        raise ValueError(f"{arg} must be a task name, one of {SBI_TASKS}; got "
                         f"{name!r}")
    return name


def sbi_task(name: str) -> SBITask:
    """The task called ``name`` (one of :data:`SBI_TASKS`).

    Raises:
        ValueError: an unknown name.
        TypeError: a name that is not a str (a list of names, say).
    """
    return _BUILDERS[check_task_name(name)]()


def make_sbi_pairs(key: jax.Array, task, num_simulations: int
                   ) -> SBIPairs:
    """A simulation budget: ``num_simulations`` parameters from the task's
    prior, each simulated once. Float64 NumPy arrays (drawn in the working
    precision); the same key gives the same pairs. O(num_simulations).

    Examples:
        >>> pairs = make_sbi_pairs(jax.random.key(0), two_moons(), 100)
        >>> pairs.theta.shape, pairs.x.shape
        ((100, 2), (100, 2))
    """
    key = check_key(key)
    if not isinstance(task, SBITask):
        raise TypeError(f"task must be an SBITask (e.g. two_moons()), got "
                        f"{type(task).__name__}")
    n = check_integer(num_simulations, "num_simulations", minimum=1)
    k_theta, k_x = jax.random.split(key)
    # NumPyro's Normal/LogNormal add a (d,) location to (n, d) noise.
    with jax.numpy_rank_promotion("allow"):
        theta = task.prior.sample(k_theta, (n,))
    x = task.simulate(k_x, theta)
    return SBIPairs(np.asarray(theta, np.float64), np.asarray(x, np.float64))
