"""What every sbibm task shares: the :class:`SBITask` record, the simulation
budget :class:`SBIPairs`, the argument checks of ``simulate`` and
``log_likelihood``, and the shipped files (observations, true parameters,
reference draws) in ``bayeskde/datasets/data/sbibm/``.

The checks refuse concrete bad input (NaN/inf, wrong shapes, parameters outside
a bounded support) and let tracers through, so the tasks' functions run under
``jit`` and ``vmap``.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import numpyro.distributions as dist

from ..._validation import as_float_array

__all__ = [
    "SBIBM_VERSION",
    "SBITask",
    "SBIPairs",
    "DATA_DIR",
    "BOX_Z",
    "LOG_2PI",
    "check_theta",
    "check_x",
    "check_box",
    "check_positive",
    "normal_logpdf",
    "read_csv",
    "make_task",
    "log_normal_prior",
]

SBIBM_VERSION = "1.1.0"
"""The sbibm release whose observations and reference posteriors are used."""

DATA_DIR = Path(__file__).parent.parent / "data" / "sbibm"
"""The shipped sbibm files (with their attribution)."""

BOX_Z = 4.891638
"""The standard normal's 1 - 5e-7 quantile: the half-width, in standard
deviations, of an unbounded prior's box."""

LOG_2PI = float(np.log(2 * np.pi))


class SBITask(NamedTuple):
    """A simulation-based-inference task.

    Attributes:
        name: sbibm's name of the task.
        prior: the prior over parameters, a NumPyro distribution over
            ``(dim_parameters,)`` (``Uniform(low, high).to_event(1)``,
            ``Normal``, ``MultivariateNormal`` or ``LogNormal``, as in sbibm);
            pass it as ``output_prior`` of :class:`bayeskde.InverseGPRegressor`.
        low, high: ``(dim_parameters,)`` the prior's box: its support where
            the prior is uniform; otherwise the box of each marginal's
            quantiles 5e-7 and 1 - 5e-7 (a search region holding all but about
            1e-6 of each marginal's mass, not the support).
        simulate: ``simulate(key, theta)``: ``(n, dim_parameters)`` parameters
            to ``(n, dim_data)`` simulated data, one independent draw per row.
            Parameters outside a bounded support (the slcp box, non-positive
            rates of sir and lotka_volterra) are refused where concrete, here
            and by ``log_likelihood``.
        log_likelihood: ``log_likelihood(theta, x)``: the exact
            log p(x | theta) ``(n,)`` for parameters ``(n, dim_parameters)``
            and data ``(dim_data,)`` (one observation) or ``(n, dim_data)``
            (for sir a log probability mass, for bernoulli_glm see there).
        observations: ``(10, dim_data)`` sbibm's observations 1..10 (row i is
            observation i + 1).
        true_parameters: ``(10, dim_parameters)`` the parameters that
            generated them.
    """

    name: str
    prior: dist.Distribution
    low: np.ndarray
    high: np.ndarray
    simulate: Callable
    log_likelihood: Callable
    observations: np.ndarray
    true_parameters: np.ndarray

    @property
    def dim_parameters(self) -> int:
        return int(self.low.shape[0])

    @property
    def dim_data(self) -> int:
        return int(self.observations.shape[1])


class SBIPairs(NamedTuple):
    """A simulation budget (:func:`~bayeskde.datasets.make_sbi_pairs`).

    Attributes:
        theta: ``(num_simulations, dim_parameters)`` prior draws.
        x: ``(num_simulations, dim_data)`` one simulation of each.
    """

    theta: np.ndarray
    x: np.ndarray


def _numeric(a, name: str):
    """``a`` as a finite float JAX array of the working precision, refused by
    :func:`~bayeskde._validation.as_float_array` (non-numeric, empty, NaN/inf)
    where concrete; tracers pass through unchecked."""
    if isinstance(a, jax.core.Tracer):
        return a
    return as_float_array(a, name)


def check_theta(theta, d: int, name: str = "theta"):
    """``theta`` as a JAX array ``(n, d)``, n >= 1; NaN/inf refused where
    concrete (the check is skipped under ``jit``, where values are not known)."""
    if not isinstance(theta, jax.core.Tracer):
        if np.ndim(theta) == 2 and np.shape(theta)[0] == 0:
            raise ValueError(f"{name} is empty (shape {np.shape(theta)}); need at "
                             "least one row")
        theta = _numeric(theta, name)
    if not jnp.issubdtype(theta.dtype, jnp.floating):
        theta = theta.astype(jnp.result_type(float))
    if theta.ndim != 2 or theta.shape[1] != d:
        raise ValueError(f"{name} must have shape (n, {d}), got {theta.shape}")
    return theta


def check_x(x, theta, d: int):
    """Data ``(d,)`` (broadcast to every row of theta) or ``(n, d)``."""
    x = jnp.asarray(_numeric(x, "x"), theta.dtype)
    if x.ndim == 1:
        x = x[None, :]
    if x.ndim != 2 or x.shape[1] != d or x.shape[0] not in (1, theta.shape[0]):
        raise ValueError(f"x must have shape ({d},) or ({theta.shape[0]}, {d}), "
                         f"got {x.shape}")
    return jnp.broadcast_to(x, (theta.shape[0], d))


def check_box(theta, low: float, high: float, task: str):
    """Refuse concrete parameters outside the prior's box [low, high]."""
    if not isinstance(theta, jax.core.Tracer):
        bad = np.flatnonzero(np.any((np.asarray(theta) < low)
                                    | (np.asarray(theta) > high), axis=1))
        if bad.size:
            raise ValueError(
                f"theta must lie in {task}'s prior support [{low:g}, {high:g}]^"
                f"{theta.shape[1]}; row {bad[0]} is {np.asarray(theta)[bad[0]]}")
    return theta


def check_positive(theta, task: str):
    """Refuse concrete non-positive rates (outside a log-normal prior's support)."""
    if not isinstance(theta, jax.core.Tracer):
        bad = np.flatnonzero(np.any(np.asarray(theta) <= 0, axis=1))
        if bad.size:
            raise ValueError(
                f"theta must be positive (the support of {task}'s log-normal "
                f"prior); row {bad[0]} is {np.asarray(theta)[bad[0]]}")
    return theta


def normal_logpdf(z, var):
    """log N(z; 0, var), elementwise."""
    return -0.5 * (z * z / var + jnp.log(var) + LOG_2PI)


def read_csv(path: Path) -> np.ndarray:
    """A shipped sbibm CSV (one header line) as a 2-D float64 array."""
    return np.atleast_2d(np.loadtxt(path, delimiter=",", skiprows=1))


def make_task(name, bound, d, simulate, log_likelihood, prior=None, box=None
              ) -> SBITask:
    """A task with a uniform prior on [-bound, bound]^d, or with ``prior`` and
    its quantile ``box`` (low, high); its observations and true parameters read
    from :data:`DATA_DIR`."""
    if prior is None:
        low, high = np.full(d, -bound), np.full(d, bound)
        dt = jnp.result_type(float)
        prior = dist.Uniform(jnp.asarray(low, dt), jnp.asarray(high, dt)
                             ).to_event(1)
    else:
        low, high = box
    obs = read_csv(DATA_DIR / f"{name}_observations.csv")[:, 1:]
    true = read_csv(DATA_DIR / f"{name}_true_parameters.csv")[:, 1:]
    return SBITask(name, prior, low, high, simulate, log_likelihood, obs, true)


def log_normal_prior(loc, scale):
    """LogNormal(loc, scale).to_event(1) and its quantile box."""
    dt = jnp.result_type(float)
    loc, scale = np.asarray(loc, np.float64), np.asarray(scale, np.float64)
    prior = dist.LogNormal(jnp.asarray(loc, dt), jnp.asarray(scale, dt)
                           ).to_event(1)
    return prior, (np.exp(loc - BOX_Z * scale), np.exp(loc + BOX_Z * scale))
