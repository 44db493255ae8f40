"""Simulation-based-inference tasks of sbibm (Lueckmann et al. 2021), in JAX.

The eight standard tasks of the benchmark "Benchmarking Simulation-Based
Inference" (Lueckmann, Boelts, Greenberg, Goncalves and Macke, AISTATS 2021,
appendix T), reimplemented from their definitions in sbibm 1.1.0's source
(``sbibm/tasks/<task>/task.py``; sbibm is MIT-licensed; nothing of it is
imported: its package imports torch, and its ODE tasks Julia):

* :func:`two_moons`: theta ~ U(-1, 1)^2; a ~ U(-pi/2, pi/2), r ~ N(0.1,
  0.01^2), p = (r cos a + 0.25, r sin a); x = p + (-|z0|, z1) with
  z = R(-pi/4) theta, so z0 = (theta_0 + theta_1) / sqrt 2 and
  z1 = (theta_1 - theta_0) / sqrt 2. The posterior is two crescents.
* :func:`gaussian_mixture`: theta ~ U(-10, 10)^2, x ~ 0.5 N(theta, I)
  + 0.5 N(theta, 0.01 I) (a scale mixture).
* :func:`gaussian_linear_uniform`: theta ~ U(-1, 1)^10, x ~ N(theta, 0.1 I)
  (covariance 0.1 I: sbibm's precision matrix is (0.1 I)^-1).
* :func:`gaussian_linear`: theta ~ N(0, 0.1 I)^10, x ~ N(theta, 0.1 I); the
  posterior is N(x / 2, 0.05 I).
* :func:`slcp`: theta ~ U(-3, 3)^5; m = (theta_0, theta_1), s1 = theta_2^2,
  s2 = theta_3^2, rho = tanh(theta_4), S = [[s1^2, rho s1 s2], [rho s1 s2,
  s2^2]] + 1e-6 I; x = four iid draws of N(m, S), flattened to
  (x1_0, x1_1, x2_0, ..., x4_1) (8 values).
* :func:`bernoulli_glm`: theta ~ N(0, B^-1)^10 with B = blockdiag(0.5, F^T F),
  F = D^2 + diag(sqrt(j / 9)), j = 0..8, D the 9 x 9 first-difference matrix
  (ones on the diagonal, -1 below it); a stimulus s_t ~ N(0, 1), t = 0..99,
  frozen by ``numpy.random.RandomState(42)`` (float32) and the design
  X[t] = (1, s_t, s_{t-1}, ..., s_{t-8}) (zero before t = 0); spikes
  y_t ~ Bernoulli(sigmoid(X[t] . theta)); x = X^T y (10 values: the spike
  count and the spike-triggered sums at lags 0..8, which are sbibm's
  ``conv1d`` summaries and the GLM's sufficient statistics).
* :func:`sir`: beta ~ LogNormal(log 0.4, 0.5), gamma ~ LogNormal(log 1/8,
  0.2); S' = -beta S I / N, I' = beta S I / N - gamma I, R' = gamma I with
  N = 1e6, (S, I, R)(0) = (N - 1, 1, 0), solved to day 160;
  x_j ~ Binomial(1000, I(t_j) / N) at t_j = 17 j, j = 0..9 (10 values).
* :func:`lotka_volterra`: (alpha, beta, gamma, delta) ~ LogNormal((-0.125,
  -3, -0.125, -3), 0.5); u' = alpha u - beta u v, v' = -gamma v + delta u v,
  (u, v)(0) = (30, 1); x ~ LogNormal(log clip(w, 1e-10, 1e4), 0.1) for
  w = (u(t_0), ..., u(t_9), v(t_0), ..., v(t_9)), t_j = 2.1 j (20 values).

The two ODE tasks (:func:`sir`, :func:`lotka_volterra`) solve their ODE in
NumPy float64 (Dormand-Prince 5(4), every row with its own adaptive steps,
at sbibm's tolerances rtol = atol = 1e-8; sbibm ran Julia's Tsit5 at the same
tolerances), called through ``jax.pure_callback``: their ``simulate`` and
``log_likelihood`` run under ``jit`` and ``vmap`` in both precisions but are
not differentiable. A solve that fails gives a NaN row, as in sbibm.

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
import functools
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
from jax.scipy.special import logsumexp, xlog1py, xlogy
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
    "gaussian_linear",
    "slcp",
    "bernoulli_glm",
    "sir",
    "lotka_volterra",
    "sbi_task",
    "make_sbi_pairs",
    "reference_posterior",
]

SBI_TASKS = ("two_moons", "gaussian_mixture", "gaussian_linear_uniform",
             "gaussian_linear", "slcp", "bernoulli_glm", "sir", "lotka_volterra")
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
# Gaussian linear (uniform): noise covariance 0.1 I; gaussian_linear's prior
# covariance is 0.1 I too.
_GLU_VAR = 0.1
# SLCP: four draws; sbibm adds 1e-6 to the covariance's diagonal.
_SLCP_DRAWS, _SLCP_EPS, _SLCP_BOUND = 4, 1e-6, 3.0
# Bernoulli GLM: 100 time bins, a 9-tap filter, the stimulus' frozen seed.
_GLM_BINS, _GLM_TAPS, _GLM_SEED = 100, 9, 42
# SIR: population, initial state, observation days and Binomial count.
_SIR_N = 1e6
_SIR_U0 = (_SIR_N - 1.0, 1.0, 0.0)
_SIR_TIMES = 17.0 * np.arange(10)
_SIR_COUNT = 1000
_SIR_LOC, _SIR_SCALE = (np.log(0.4), np.log(0.125)), (0.5, 0.2)
# Lotka-Volterra: initial state, observation times (sbibm's 0.1-day grid
# subsampled every 21st point), log-normal noise, the clip of the states.
_LV_U0 = (30.0, 1.0)
_LV_TIMES = 2.1 * np.arange(10)
_LV_SIGMA, _LV_CLIP = 0.1, (1e-10, 1e4)
_LV_LOC, _LV_SCALE = (-0.125, -3.0, -0.125, -3.0), (0.5,) * 4
# The ODE solver (sbibm's DiffEq defaults) and the box of unbounded priors.
_ODE_RTOL = _ODE_ATOL = 1e-8
# The cap: 5x the most steps any of 20,000 prior draws needed (under 2,000).
_ODE_MAX_STEPS = 10_000
_BOX_Z = 4.891638  # the standard normal's 1 - 5e-7 quantile


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


def _check_box(theta, low: float, high: float, task: str):
    """Refuse concrete parameters outside the prior's box [low, high]."""
    if not isinstance(theta, jax.core.Tracer):
        bad = np.flatnonzero(np.any((np.asarray(theta) < low)
                                    | (np.asarray(theta) > high), axis=1))
        if bad.size:
            raise ValueError(
                f"theta must lie in {task}'s prior support [{low:g}, {high:g}]^"
                f"{theta.shape[1]}; row {bad[0]} is {np.asarray(theta)[bad[0]]}")
    return theta


def _check_positive(theta, task: str):
    """Refuse concrete non-positive rates (outside a log-normal prior's support)."""
    if not isinstance(theta, jax.core.Tracer):
        bad = np.flatnonzero(np.any(np.asarray(theta) <= 0, axis=1))
        if bad.size:
            raise ValueError(
                f"theta must be positive (the support of {task}'s log-normal "
                f"prior); row {bad[0]} is {np.asarray(theta)[bad[0]]}")
    return theta


# --- SLCP ------------------------------------------------------------------------

def _slcp_moments(theta):
    """The mean (n, 2), the covariance's entries and its determinant, each (n,);
    the determinant from s1^2 s2^2 (1 - rho^2) with 1 - rho^2 = 1 / cosh^2,
    which does not cancel as c11 c22 - c12^2 does for |rho| near 1."""
    s1, s2 = theta[:, 2] ** 2, theta[:, 3] ** 2
    rho = jnp.tanh(theta[:, 4])
    c11, c22, c12 = s1 * s1 + _SLCP_EPS, s2 * s2 + _SLCP_EPS, rho * s1 * s2
    det = (s1 * s2 / jnp.cosh(theta[:, 4])) ** 2 + _SLCP_EPS * (
        s1 * s1 + s2 * s2 + _SLCP_EPS)
    return theta[:, :2], c11, c22, c12, det


@jax.jit
def _slcp_draw(key, theta):
    m, c11, _, c12, det = _slcp_moments(theta)
    # The covariance's Cholesky factor [[l11, 0], [l21, l22]].
    l11 = jnp.sqrt(c11)
    l21, l22 = c12 / l11, jnp.sqrt(det / c11)
    z = jax.random.normal(key, (theta.shape[0], _SLCP_DRAWS, 2), theta.dtype)
    x0 = m[:, None, 0] + l11[:, None] * z[..., 0]
    x1 = m[:, None, 1] + l21[:, None] * z[..., 0] + l22[:, None] * z[..., 1]
    return jnp.stack([x0, x1], axis=-1).reshape(theta.shape[0], 2 * _SLCP_DRAWS)


@jax.jit
def _slcp_ll(theta, x):
    x = x.reshape(-1, _SLCP_DRAWS, 2)
    m, c11, c22, c12, det = _slcp_moments(theta)
    d0, d1 = x[..., 0] - m[:, None, 0], x[..., 1] - m[:, None, 1]
    quad = (c22[:, None] * d0 * d0 - 2 * c12[:, None] * d0 * d1
            + c11[:, None] * d1 * d1) / det[:, None]
    return -0.5 * jnp.sum(quad, axis=-1) - _SLCP_DRAWS * (0.5 * jnp.log(det)
                                                          + _LOG_2PI)


def _slcp_simulate(
    key, theta: Float[ArrayLike, "..."]
) -> Float[Array, "n_samples n_data"]:
    key = check_key(key)
    theta = _check_box(_check_theta(theta, 5), -_SLCP_BOUND, _SLCP_BOUND, "slcp")
    return _slcp_draw(key, theta)


def _slcp_log_likelihood(
    theta: Float[ArrayLike, "..."], x: Float[ArrayLike, "..."]
) -> Float[Array, " n_samples"]:
    theta = _check_box(_check_theta(theta, 5), -_SLCP_BOUND, _SLCP_BOUND, "slcp")
    return _slcp_ll(theta, _check_x(x, theta, 2 * _SLCP_DRAWS))


# --- Bernoulli GLM ---------------------------------------------------------------

@functools.cache
def _glm_design() -> np.ndarray:
    """sbibm's design (100, 10): an offset column and the stimulus at lags
    0..8, the stimulus frozen as sbibm froze it (``RandomState(42)``, float32;
    identical to the wheel's ``design_matrix.pt``)."""
    s = np.random.RandomState(_GLM_SEED).randn(_GLM_BINS).astype(np.float32)
    X = np.zeros((_GLM_BINS, _GLM_TAPS + 1))
    X[:, 0] = 1.0
    for lag in range(_GLM_TAPS):
        X[lag:, lag + 1] = s[:_GLM_BINS - lag]
    return X


def _glm_prior_precision() -> np.ndarray:
    """B: 0.5 for the offset, F^T F for the filter (smooth: second differences)."""
    M = _GLM_TAPS
    D = np.eye(M) - np.eye(M, k=-1)
    F = D @ D + np.diag(np.sqrt(np.arange(M) / M))
    B = np.zeros((M + 1, M + 1))
    B[0, 0] = 0.5
    B[1:, 1:] = F.T @ F
    return B


@jax.jit
def _glm_draw(key, theta):
    X = jnp.asarray(_glm_design(), theta.dtype)
    psi = theta @ X.T
    spikes = jax.random.uniform(key, psi.shape, theta.dtype) < jax.nn.sigmoid(psi)
    return spikes.astype(theta.dtype) @ X


@jax.jit
def _glm_ll(theta, x):
    # x = X^T y is sufficient: log p(y | theta) = theta . x - sum softplus(X
    # theta), and y -> X^T y is one-to-one for a stimulus in general position,
    # so this is also log p(x | theta) at every summary a spike train gives.
    X = jnp.asarray(_glm_design(), theta.dtype)
    return (jnp.sum(theta * x, axis=-1)
            - jnp.sum(jax.nn.softplus(theta @ X.T), axis=-1))


def _glm_simulate(
    key, theta: Float[ArrayLike, "..."]
) -> Float[Array, "n_samples n_data"]:
    key = check_key(key)
    return _glm_draw(key, _check_theta(theta, _GLM_TAPS + 1))


def _glm_log_likelihood(
    theta: Float[ArrayLike, "..."], x: Float[ArrayLike, "..."]
) -> Float[Array, " n_samples"]:
    theta = _check_theta(theta, _GLM_TAPS + 1)
    return _glm_ll(theta, _check_x(x, theta, _GLM_TAPS + 1))


# --- ODE tasks -------------------------------------------------------------------

# Dormand-Prince 5(4) (Hairer, Norsett and Wanner, "Solving ODEs I", table
# 5.2): stage coefficients, the 5th-order weights (first same as last: the
# seventh stage is f at the new state) and the 5th-minus-4th error weights.
_DP_A = (
    (1 / 5,),
    (3 / 40, 9 / 40),
    (44 / 45, -56 / 15, 32 / 9),
    (19372 / 6561, -25360 / 2187, 64448 / 6561, -212 / 729),
    (9017 / 3168, -355 / 33, 46732 / 5247, 49 / 176, -5103 / 18656),
    (35 / 384, 0.0, 500 / 1113, 125 / 192, -2187 / 6784, 11 / 84),
)
_DP_E = (71 / 57600, 0.0, -71 / 16695, 71 / 1920, -17253 / 339200, 22 / 525,
         -1 / 40)


def _rms(a):
    return np.sqrt(np.mean(a * a, axis=1))


def _solve_ode(rhs, u0, times, p, rtol=_ODE_RTOL, atol=_ODE_ATOL,
               max_steps=_ODE_MAX_STEPS) -> np.ndarray:
    """States ``(n, len(times), k)`` of u' = rhs(u, p) from u(0) = u0 for each
    row of ``p`` (n, n_params), float64, ``times[0] == 0``.

    Dormand-Prince 5(4) with each row's own step, sbibm's error norm (the RMS
    of err / (atol + rtol max(|u|, |u_new|))) and steps cut to land on the
    observation times. Rows still running are compressed after each step, so
    the cost is the sum over rows of their step counts (times 7 right-hand
    sides), vectorised. A row that needs a step below 1e-12 t, produces NaN or
    exceeds ``max_steps`` is NaN.
    """
    n, k = p.shape[0], len(u0)
    out = np.full((n, len(times), k), np.nan)
    out[:, 0] = u0
    rows, t, nxt = np.arange(n), np.zeros(n), np.ones(n, int)
    y = np.tile(np.asarray(u0, np.float64), (n, 1))
    f = rhs(y, p)
    # Hairer's first guess: 1% of |u| / |u'| in the error norm's scale.
    d0 = _rms(y / (atol + rtol * np.abs(y)))
    d1 = _rms(f / (atol + rtol * np.abs(y)))
    h = np.where(d1 > 1e-5, 0.01 * d0 / np.maximum(d1, 1e-300), 1e-6)
    for _ in range(max_steps):
        if rows.size == 0:
            break
        t_to = times[nxt]
        # Stretch a step by up to 1% to land on t_to rather than leave a sliver.
        hh = np.where(t + 1.01 * h >= t_to, t_to - t, h)
        ks = [f]
        for a_row in _DP_A:
            inc = sum(a * kj for a, kj in zip(a_row, ks, strict=False) if a)
            ks.append(rhs(y + hh[:, None] * inc, p))
        y_new = y + hh[:, None] * sum(
            a * kj for a, kj in zip(_DP_A[-1], ks, strict=False) if a)
        err = hh[:, None] * sum(e * kj for e, kj in zip(_DP_E, ks, strict=True)
                                if e)
        with np.errstate(invalid="ignore", over="ignore"):
            en = _rms(err / (atol + rtol * np.maximum(np.abs(y), np.abs(y_new))))
        en = np.where(np.isfinite(en) & np.all(np.isfinite(y_new), axis=1), en,
                      np.inf)
        ok = en <= 1.0
        landed = ok & (hh >= t_to - t)
        t = np.where(landed, t_to, np.where(ok, t + hh, t))
        y = np.where(ok[:, None], y_new, y)
        f = np.where(ok[:, None], ks[-1], f)
        out[rows[landed], nxt[landed]] = y[landed]
        nxt = nxt + landed
        with np.errstate(divide="ignore"):
            fac = np.clip(0.9 * en ** -0.2, 0.2, 10.0)
        h_next = hh * np.where(ok, fac, np.minimum(fac, 1.0))
        # A step cut short to land is no reason to shrink the next one.
        h = np.where(landed, np.maximum(h_next, h), h_next)
        failed = h < 1e-12 * np.maximum(t, 1.0)
        out[rows[failed]] = np.nan
        live = ~failed & (nxt < len(times))
        rows, t, nxt, y, f, h, p = (a[live] for a in (rows, t, nxt, y, f, h, p))
    out[rows] = np.nan
    return out


def _ode_states(rhs, u0, times, theta):
    """:func:`_solve_ode` at ``theta`` (..., n_params) through
    ``jax.pure_callback`` (jit- and vmap-safe, not differentiable), returned
    in ``theta``'s dtype, shape (..., len(times), len(u0))."""

    def solve(th):
        th = np.asarray(th, np.float64)
        flat = th.reshape(-1, th.shape[-1])
        states = _solve_ode(rhs, u0, times, flat)
        return states.reshape(th.shape[:-1] + states.shape[1:]).astype(dtype)

    dtype = theta.dtype
    shape = jax.ShapeDtypeStruct(theta.shape[:-1] + (len(times), len(u0)), dtype)
    return jax.pure_callback(solve, shape, theta, vmap_method="broadcast_all")


def _sir_rhs(u, p):
    infect = p[:, :1] * u[:, :1] * u[:, 1:2] / _SIR_N
    recover = p[:, 1:] * u[:, 1:2]
    return np.concatenate([-infect, infect - recover, recover], axis=1)


def _sir_probs(theta):
    """I(t_j) / N clipped to [0, 1] (n, 10); NaN rows where the solve failed."""
    infected = _ode_states(_sir_rhs, _SIR_U0, _SIR_TIMES, theta)[..., 1]
    return jnp.clip(infected / _SIR_N, 0.0, 1.0)


@jax.jit
def _sir_draw(key, theta):
    probs = _sir_probs(theta)
    ok = jnp.isfinite(probs)
    draws = jax.random.binomial(key, _SIR_COUNT, jnp.where(ok, probs, 0.5),
                                dtype=theta.dtype)
    return jnp.where(ok, draws, jnp.nan)


@functools.cache
def _log_binomial_coefficients() -> np.ndarray:
    """log C(1000, k), k = 0..1000, in float64 (a table: float32 gammaln of
    1001 would lose about 1e-3 absolute)."""
    from math import lgamma

    c = _SIR_COUNT
    return np.array([lgamma(c + 1) - lgamma(j + 1) - lgamma(c - j + 1)
                     for j in range(c + 1)])


@jax.jit
def _sir_ll(theta, x):
    # A log probability mass: -inf unless every x_j is an integer in 0..1000.
    p = _sir_probs(theta)
    count = jnp.asarray(_SIR_COUNT, theta.dtype)
    valid = (x == jnp.round(x)) & (x >= 0) & (x <= count)
    k = jnp.clip(jnp.round(x), 0, _SIR_COUNT).astype(jnp.int32)
    log_c = jnp.asarray(_log_binomial_coefficients(), theta.dtype)[k]
    ll = log_c + xlogy(x, p) + xlog1py(count - x, -p)
    return jnp.sum(jnp.where(valid, ll, -jnp.inf), axis=-1)


def _sir_simulate(
    key, theta: Float[ArrayLike, "..."]
) -> Float[Array, "n_samples n_data"]:
    key = check_key(key)
    return _sir_draw(key, _check_positive(_check_theta(theta, 2), "sir"))


def _sir_log_likelihood(
    theta: Float[ArrayLike, "..."], x: Float[ArrayLike, "..."]
) -> Float[Array, " n_samples"]:
    theta = _check_positive(_check_theta(theta, 2), "sir")
    return _sir_ll(theta, _check_x(x, theta, len(_SIR_TIMES)))


def _lv_rhs(u, p):
    prey, pred = u[:, :1], u[:, 1:]
    return np.concatenate([p[:, :1] * prey - p[:, 1:2] * prey * pred,
                           -p[:, 2:3] * pred + p[:, 3:] * prey * pred], axis=1)


def _lv_log_means(theta):
    """log clip(w, 1e-10, 1e4) (n, 20): prey at the 10 times, then predators."""
    states = _ode_states(_lv_rhs, _LV_U0, _LV_TIMES, theta)
    w = jnp.swapaxes(states, -1, -2).reshape(theta.shape[0], 2 * len(_LV_TIMES))
    return jnp.log(jnp.clip(w, *_LV_CLIP))


@jax.jit
def _lv_draw(key, theta):
    loc = _lv_log_means(theta)
    return jnp.exp(loc + _LV_SIGMA * jax.random.normal(key, loc.shape,
                                                         theta.dtype))


def _lv_simulate(
    key, theta: Float[ArrayLike, "..."]
) -> Float[Array, "n_samples n_data"]:
    key = check_key(key)
    return _lv_draw(key, _check_positive(_check_theta(theta, 4),
                                         "lotka_volterra"))


def _lv_log_likelihood(
    theta: Float[ArrayLike, "..."], x: Float[ArrayLike, "..."]
) -> Float[Array, " n_samples"]:
    theta = _check_positive(_check_theta(theta, 4), "lotka_volterra")
    return _lv_ll(theta, _check_x(x, theta, 2 * len(_LV_TIMES)))


@jax.jit
def _lv_ll(theta, x):
    loc = _lv_log_means(theta)
    log_x = jnp.log(jnp.where(x > 0, x, 1.0))
    ll = _normal_logpdf(log_x - loc, _LV_SIGMA**2) - log_x
    return jnp.sum(jnp.where(x > 0, ll, -jnp.inf), axis=-1)


# --- tasks ---------------------------------------------------------------------

def _read_csv(path: Path) -> np.ndarray:
    return np.atleast_2d(np.loadtxt(path, delimiter=",", skiprows=1))


def _task(name, bound, d, simulate, log_likelihood, prior=None, box=None
          ) -> SBITask:
    """A task with a uniform prior on [-bound, bound]^d, or with ``prior`` and
    its quantile ``box`` (low, high)."""
    if prior is None:
        low, high = np.full(d, -bound), np.full(d, bound)
        dt = jnp.result_type(float)
        prior = dist.Uniform(jnp.asarray(low, dt), jnp.asarray(high, dt)
                             ).to_event(1)
    else:
        low, high = box
    obs = _read_csv(_DATA / f"{name}_observations.csv")[:, 1:]
    true = _read_csv(_DATA / f"{name}_true_parameters.csv")[:, 1:]
    return SBITask(name, prior, low, high, simulate, log_likelihood, obs, true)


def _log_normal_prior(loc, scale):
    """LogNormal(loc, scale).to_event(1) and its quantile box."""
    dt = jnp.result_type(float)
    loc, scale = np.asarray(loc, np.float64), np.asarray(scale, np.float64)
    prior = dist.LogNormal(jnp.asarray(loc, dt), jnp.asarray(scale, dt)
                           ).to_event(1)
    return prior, (np.exp(loc - _BOX_Z * scale), np.exp(loc + _BOX_Z * scale))


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


def gaussian_linear() -> SBITask:
    """sbibm's ``gaussian_linear`` (module docstring; Lueckmann et al. 2021,
    appendix T): prior N(0, 0.1 I), simulator N(theta, 0.1 I) in 10-D."""
    dt = jnp.result_type(float)
    sd = np.sqrt(_GLU_VAR)
    prior = dist.Normal(jnp.zeros(10, dt), jnp.full(10, sd, dt)).to_event(1)
    box = (np.full(10, -_BOX_Z * sd), np.full(10, _BOX_Z * sd))
    return _task("gaussian_linear", None, 10, _glu_simulate, _glu_log_likelihood,
                 prior, box)


def slcp() -> SBITask:
    """sbibm's ``slcp`` ("simple likelihood, complex posterior"; module
    docstring; Lueckmann et al. 2021, appendix T, after Papamakarios et al.
    2019). The information about theta_2..theta_4 sits in the covariance of
    the four draws.

    Examples:
        >>> slcp().simulate(jax.random.key(0), jnp.ones((3, 5))).shape
        (3, 8)
    """
    return _task("slcp", _SLCP_BOUND, 5, _slcp_simulate, _slcp_log_likelihood)


def bernoulli_glm() -> SBITask:
    """sbibm's ``bernoulli_glm`` (module docstring; Lueckmann et al. 2021,
    appendix T): a Bernoulli GLM with a 9-tap filter on a frozen white-noise
    stimulus, observed through its 10 sufficient statistics X^T y.

    The design is sbibm's exactly (the same float32 stimulus from
    ``RandomState(42)``; bit-identical to the wheel's ``design_matrix.pt``).
    ``log_likelihood`` is theta . x - sum_t softplus(X[t] . theta): the spike
    train's log likelihood, which depends on y only through x = X^T y. It is
    log p(x | theta) (a probability mass) at summaries that a spike train
    gives, since y -> X^T y is one-to-one for a stimulus in general position;
    at other x it is that formula, not a density. The posterior it gives is the
    raw spike train's, which sbibm's reference samples (Polya-Gamma MCMC).
    Simulation: O(n * 100 * 10).
    """
    B = _glm_prior_precision()
    dt = jnp.result_type(float)
    prior = dist.MultivariateNormal(jnp.zeros(_GLM_TAPS + 1, dt),
                                    precision_matrix=jnp.asarray(B, dt))
    sd = np.sqrt(np.diag(np.linalg.inv(B)))
    return _task("bernoulli_glm", None, _GLM_TAPS + 1, _glm_simulate,
                 _glm_log_likelihood, prior, (-_BOX_Z * sd, _BOX_Z * sd))


def sir() -> SBITask:
    """sbibm's ``sir`` epidemic (module docstring; Lueckmann et al. 2021,
    appendix T): theta = (contact rate beta, recovery rate gamma).

    The ODE runs in NumPy float64 (Dormand-Prince 5(4), rtol = atol = 1e-8 as
    sbibm's Julia Tsit5) behind ``jax.pure_callback``: ``simulate`` and
    ``log_likelihood`` work under ``jit``/``vmap`` but not ``grad``. Cost
    (one core, prior draws): about 0.15 s of CPU per 1,000 simulations, 0.8 s
    per 10,000 (the solves are vectorised over rows). ``log_likelihood`` is
    the Binomial log probability mass (-inf unless every count is an integer
    in 0..1000); NaN where the solve failed.
    """
    prior, box = _log_normal_prior(_SIR_LOC, _SIR_SCALE)
    return _task("sir", None, 2, _sir_simulate, _sir_log_likelihood, prior, box)


def lotka_volterra() -> SBITask:
    """sbibm's ``lotka_volterra`` predator-prey task (module docstring;
    Lueckmann et al. 2021, appendix T): theta = (alpha, beta, gamma, delta).

    The ODE runs in NumPy float64 (Dormand-Prince 5(4), rtol = atol = 1e-8 as
    sbibm's Julia Tsit5) behind ``jax.pure_callback``: ``simulate`` and
    ``log_likelihood`` work under ``jit``/``vmap`` but not ``grad``. Cost
    (one core, prior draws): about 0.3 s of CPU per 1,000 simulations, 1 s
    per 10,000 (the solves are vectorised over rows; the slowest prior draws
    need under 2,000 steps). ``log_likelihood``: NaN where the solve failed.
    """
    prior, box = _log_normal_prior(_LV_LOC, _LV_SCALE)
    return _task("lotka_volterra", None, 4, _lv_simulate, _lv_log_likelihood,
                 prior, box)


_BUILDERS = {"two_moons": two_moons, "gaussian_mixture": gaussian_mixture,
             "gaussian_linear_uniform": gaussian_linear_uniform,
             "gaussian_linear": gaussian_linear, "slcp": slcp,
             "bernoulli_glm": bernoulli_glm, "sir": sir,
             "lotka_volterra": lotka_volterra}


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
    # NumPyro's Normal/LogNormal add a (d,) location to (n, d) noise.
    with jax.numpy_rank_promotion("allow"):
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
