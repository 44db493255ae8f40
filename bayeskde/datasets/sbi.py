"""Simulation-based-inference tasks of sbibm (Lueckmann et al. 2021), in JAX.

Three tasks of the benchmark "Benchmarking Simulation-Based Inference"
(Lueckmann, Boelts, Greenberg, Goncalves and Macke, AISTATS 2021, appendix
T), reimplemented from their definitions (sbibm 1.1.0 is MIT-licensed;
nothing of it is imported: its package imports torch):

* :func:`two_moons`: theta ~ U(-1, 1)^2; a ~ U(-pi/2, pi/2), r ~ N(0.1,
  0.01^2), p = (r cos a + 0.25, r sin a); x = p + (-|z0|, z1) with
  z = R(-pi/4) theta, so z0 = (theta_0 + theta_1) / sqrt 2 and
  z1 = (theta_1 - theta_0) / sqrt 2. The posterior is two crescents.
* :func:`gaussian_mixture`: theta ~ U(-10, 10)^2, x ~ 0.5 N(theta, I)
  + 0.5 N(theta, 0.01 I) (a scale mixture).
* :func:`gaussian_linear_uniform`: theta ~ U(-1, 1)^10, x ~ N(theta, 0.1 I)
  (covariance 0.1 I: sbibm's precision matrix is (0.1 I)^-1).

Each is an :class:`SBITask`: its prior as a NumPyro distribution (and as a
box), ``simulate(key, theta)``, the exact ``log_likelihood(theta, x)``, and
sbibm's 10 observations with the parameters that generated them (shipped with
attribution in ``data/sbibm/``). :func:`make_sbi_pairs` draws a simulation
budget (theta from the prior, x from the simulator).

Reference posteriors (10,000 draws per observation) are read by
:func:`reference_posterior` from the sbibm 1.1.0 wheel, which the caller
downloads (``pip download --no-deps sbibm==1.1.0 -d DIR``); only the first
1,000 draws of observation 1 of each task ship with bayeskde, for the tests.

Randomness comes only from an explicit ``jax.random`` key, the first
positional argument: the same key gives the same draws (in a given precision).
"""

from __future__ import annotations

import bz2
import io
import os
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import numpyro.distributions as dist
from jax.scipy.special import logsumexp
from jaxtyping import Array, Float

from .._typing import ArrayLike
from .._validation import as_float_array, check_integer, check_key

__all__ = [
    "SBI_TASKS",
    "SBIBM_VERSION",
    "SBITask",
    "SBIPairs",
    "two_moons",
    "gaussian_mixture",
    "gaussian_linear_uniform",
    "sbi_task",
    "make_sbi_pairs",
    "reference_posterior",
]

SBI_TASKS = ("two_moons", "gaussian_mixture", "gaussian_linear_uniform")
"""The sbibm tasks implemented here."""

SBIBM_VERSION = "1.1.0"
"""The sbibm release whose observations and reference posteriors are used."""

_DATA = Path(__file__).parent / "data" / "sbibm"
_GET_WHEEL = (f"pip download --no-deps sbibm=={SBIBM_VERSION} -d "
              "~/.cache/bayeskde/sbibm")
_LOG_2PI = float(np.log(2 * np.pi))

# Two moons (sbibm's simulator_params).
_A_HALF = np.pi / 2
_BASE_OFFSET, _R_LOC, _R_SCALE = 0.25, 0.1, 0.01
# Gaussian mixture: equal weights, standard deviations 1 and 0.1.
_MIX_SCALES = (1.0, 0.1)
# Gaussian linear uniform: covariance 0.1 I.
_GLU_VAR = 0.1


class SBITask(NamedTuple):
    """A simulation-based-inference task.

    Attributes:
        name: sbibm's name of the task.
        prior: the prior over parameters, a NumPyro distribution over
            ``(dim_parameters,)`` (``Uniform(low, high).to_event(1)``); pass it
            as ``output_prior`` of :class:`bayeskde.InverseGPRegressor`.
        low, high: ``(dim_parameters,)`` the prior's box.
        simulate: ``simulate(key, theta)``: ``(n, dim_parameters)`` parameters
            to ``(n, dim_data)`` simulated data, one independent draw per row.
        log_likelihood: ``log_likelihood(theta, x)``: the exact
            log p(x | theta) ``(n,)`` for parameters ``(n, dim_parameters)``
            and data ``(dim_data,)`` (one observation) or ``(n, dim_data)``.
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
    """A simulation budget (:func:`make_sbi_pairs`).

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


def _check_theta(theta, d: int, name: str = "theta"):
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


def _check_x(x, theta, d: int):
    """Data ``(d,)`` (broadcast to every row of theta) or ``(n, d)``."""
    x = jnp.asarray(_numeric(x, "x"), theta.dtype)
    if x.ndim == 1:
        x = x[None, :]
    if x.ndim != 2 or x.shape[1] != d or x.shape[0] not in (1, theta.shape[0]):
        raise ValueError(f"x must have shape ({d},) or ({theta.shape[0]}, {d}), "
                         f"got {x.shape}")
    return jnp.broadcast_to(x, (theta.shape[0], d))


def _normal_logpdf(z, var):
    return -0.5 * (z * z / var + jnp.log(var) + _LOG_2PI)


# --- two moons -----------------------------------------------------------------

def _moons_shift(theta):
    """(-|z0|, z1) with z = R(-pi/4) theta: the parameter-dependent offset."""
    z0 = (theta[:, 0] + theta[:, 1]) / jnp.sqrt(2.0)
    z1 = (theta[:, 1] - theta[:, 0]) / jnp.sqrt(2.0)
    return jnp.stack([-jnp.abs(z0), z1], axis=-1)


def _two_moons_simulate(
    key, theta: Float[ArrayLike, "..."]
) -> Float[Array, "n_samples n_data"]:
    key = check_key(key)
    theta = _check_theta(theta, 2)
    n, dt = theta.shape[0], theta.dtype
    k_a, k_r = jax.random.split(key)
    a = jax.random.uniform(k_a, (n,), dt, -_A_HALF, _A_HALF)
    r = _R_LOC + _R_SCALE * jax.random.normal(k_r, (n,), dt)
    p = jnp.stack([r * jnp.cos(a) + _BASE_OFFSET, r * jnp.sin(a)], axis=-1)
    return p + _moons_shift(theta)


def _two_moons_log_likelihood(
    theta: Float[ArrayLike, "..."], x: Float[ArrayLike, "..."]
) -> Float[Array, " n_samples"]:
    # p = (r cos a + 0.25, r sin a) with a uniform on (-pi/2, pi/2): in polar
    # coordinates about (0.25, 0) the density is N(r; 0.1, 0.01^2) / (pi r) on
    # the right half-plane (u > 0). sbibm's own _likelihood keeps only the
    # N(r) factor; its reference posteriors are exact draws, which this
    # density (the exact one) reproduces.
    theta = _check_theta(theta, 2)
    x = _check_x(x, theta, 2)
    p = x - _moons_shift(theta)
    u, v = p[:, 0] - _BASE_OFFSET, p[:, 1]
    r = jnp.sqrt(u * u + v * v)
    safe_r = jnp.where(u > 0, r, 1.0)
    ll = (_normal_logpdf(safe_r - _R_LOC, _R_SCALE**2) - jnp.log(jnp.pi)
          - jnp.log(safe_r))
    return jnp.where(u > 0, ll, -jnp.inf)


# --- Gaussian mixture ----------------------------------------------------------

def _gaussian_mixture_simulate(
    key, theta: Float[ArrayLike, "..."]
) -> Float[Array, "n_samples n_data"]:
    key = check_key(key)
    theta = _check_theta(theta, 2)
    n, dt = theta.shape[0], theta.dtype
    k_c, k_e = jax.random.split(key)
    narrow = jax.random.bernoulli(k_c, 0.5, (n, 1))
    scale = jnp.where(narrow, _MIX_SCALES[1], _MIX_SCALES[0]).astype(dt)
    return theta + scale * jax.random.normal(k_e, theta.shape, dt)


def _gaussian_mixture_log_likelihood(
    theta: Float[ArrayLike, "..."], x: Float[ArrayLike, "..."]
) -> Float[Array, " n_samples"]:
    theta = _check_theta(theta, 2)
    x = _check_x(x, theta, 2)
    z = x - theta
    comps = jnp.stack([jnp.sum(_normal_logpdf(z, s**2), axis=-1)
                       for s in _MIX_SCALES], axis=-1)
    return logsumexp(comps, axis=-1) + jnp.log(0.5)


# --- Gaussian linear uniform ---------------------------------------------------

def _glu_simulate(
    key, theta: Float[ArrayLike, "..."]
) -> Float[Array, "n_samples n_data"]:
    key = check_key(key)
    theta = _check_theta(theta, 10)
    return theta + jnp.sqrt(_GLU_VAR) * jax.random.normal(key, theta.shape,
                                                           theta.dtype)


def _glu_log_likelihood(
    theta: Float[ArrayLike, "..."], x: Float[ArrayLike, "..."]
) -> Float[Array, " n_samples"]:
    theta = _check_theta(theta, 10)
    x = _check_x(x, theta, 10)
    return jnp.sum(_normal_logpdf(x - theta, _GLU_VAR), axis=-1)


# --- tasks ---------------------------------------------------------------------

def _read_csv(path: Path) -> np.ndarray:
    return np.atleast_2d(np.loadtxt(path, delimiter=",", skiprows=1))


def _task(name, bound, d, simulate, log_likelihood) -> SBITask:
    low, high = np.full(d, -bound), np.full(d, bound)
    dt = jnp.result_type(float)
    prior = dist.Uniform(jnp.asarray(low, dt), jnp.asarray(high, dt)).to_event(1)
    obs = _read_csv(_DATA / f"{name}_observations.csv")[:, 1:]
    true = _read_csv(_DATA / f"{name}_true_parameters.csv")[:, 1:]
    return SBITask(name, prior, low, high, simulate, log_likelihood, obs, true)


def two_moons() -> SBITask:
    """sbibm's ``two_moons`` (module docstring; Lueckmann et al. 2021, appendix T).

    Examples:
        >>> task = two_moons()
        >>> task.dim_parameters, task.observations.shape
        (2, (10, 2))
        >>> task.simulate(jax.random.key(0), jnp.zeros((3, 2))).shape
        (3, 2)
    """
    return _task("two_moons", 1.0, 2, _two_moons_simulate,
                 _two_moons_log_likelihood)


def gaussian_mixture() -> SBITask:
    """sbibm's ``gaussian_mixture`` (module docstring; Lueckmann et al. 2021,
    appendix T, after Sisson et al. 2007)."""
    return _task("gaussian_mixture", 10.0, 2, _gaussian_mixture_simulate,
                 _gaussian_mixture_log_likelihood)


def gaussian_linear_uniform() -> SBITask:
    """sbibm's ``gaussian_linear_uniform`` (module docstring; Lueckmann et al.
    2021, appendix T)."""
    return _task("gaussian_linear_uniform", 1.0, 10, _glu_simulate,
                 _glu_log_likelihood)


_BUILDERS = {"two_moons": two_moons, "gaussian_mixture": gaussian_mixture,
             "gaussian_linear_uniform": gaussian_linear_uniform}


def _check_name(name, arg: str = "name") -> str:
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
    return _BUILDERS[_check_name(name)]()


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
    theta = task.prior.sample(k_theta, (n,))
    x = task.simulate(k_x, theta)
    return SBIPairs(np.asarray(theta, np.float64), np.asarray(x, np.float64))


def _wheel_in(folder: Path) -> Path | None:
    found = sorted(folder.glob(f"sbibm-{SBIBM_VERSION}-*.whl"))
    return found[0] if found else None


def _read_reference(source, name: str, num_observation: int) -> np.ndarray:
    member = (f"sbibm/tasks/{name}/files/num_observation_{num_observation}/"
              "reference_posterior_samples.csv.bz2")
    path = Path(source).expanduser()
    how = (f"get the wheel with `{_GET_WHEEL}` and pass its path (or that "
           "folder) as source")
    if path.is_dir():
        unpacked = path / member
        if unpacked.is_file():
            raw = unpacked.read_bytes()
        else:
            wheel = _wheel_in(path)
            if wheel is None:
                raise FileNotFoundError(
                    f"no sbibm-{SBIBM_VERSION} wheel and no unpacked {member} in "
                    f"{path}; {how}")
            path = wheel
    if path.is_file():
        try:
            with zipfile.ZipFile(path) as zf:
                raw = zf.read(member)
        except (zipfile.BadZipFile, KeyError) as err:
            raise FileNotFoundError(
                f"{path} is not an sbibm {SBIBM_VERSION} wheel holding {member} "
                f"({err}); {how}") from err
    elif not path.is_dir():
        raise FileNotFoundError(f"sbibm source {path} does not exist; {how}")
    text = bz2.decompress(raw).decode()
    return np.atleast_2d(np.loadtxt(io.StringIO(text), delimiter=",", skiprows=1))


def reference_posterior(name: str, num_observation: int = 1, *, source=None
                        ) -> np.ndarray:
    """sbibm's reference posterior draws ``(n_ref, dim_parameters)`` (float64)
    of observation ``num_observation`` (1..10) of task ``name``.

    Args:
        name: one of :data:`SBI_TASKS`.
        num_observation: 1..10.
        source: ``None``: the 1,000 draws of observation 1 shipped with
            bayeskde (the first 1,000 of sbibm's 10,000). Otherwise a path to
            the sbibm 1.1.0 wheel, to a folder holding it, or to an unpacked
            wheel (a folder with ``sbibm/tasks/...``): all 10,000 draws.

    Raises:
        ValueError: an unknown task or observation number, or
            ``source=None`` with an observation other than 1.
        TypeError: a ``name`` that is not a str, a non-integer
            ``num_observation``, a ``source`` that is not a path.
        FileNotFoundError: ``source`` does not hold the file (the message says
            how to get the wheel: ``pip download --no-deps sbibm==1.1.0 -d
            DIR``).

    Examples:
        >>> reference_posterior("two_moons").shape
        (1000, 2)
    """
    name = _check_name(name)
    i = check_integer(num_observation, "num_observation", minimum=1, maximum=10)
    if source is None:
        if i != 1:
            raise ValueError(
                f"only observation 1's reference (1,000 draws) ships with "
                f"bayeskde, got num_observation={i}; for the full references "
                f"run `{_GET_WHEEL}` and pass source=<that wheel or folder>")
        return _read_csv(_DATA / f"{name}_reference_1.csv")
    if not isinstance(source, str | os.PathLike):
        raise TypeError(f"source must be None or a path (str or os.PathLike) to "
                        f"the sbibm {SBIBM_VERSION} wheel or a folder, got "
                        f"{type(source).__name__} {source!r}")
    return _read_reference(source, name, i)
