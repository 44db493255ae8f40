"""The sbibm tasks defined by an ODE (Lueckmann et al. 2021, appendix T), from
their definitions in sbibm 1.1.0's source (``sbibm/tasks/<task>/task.py``):

* :func:`sir`: beta ~ LogNormal(log 0.4, 0.5), gamma ~ LogNormal(log 1/8,
  0.2); S' = -beta S I / N, I' = beta S I / N - gamma I, R' = gamma I with
  N = 1e6, (S, I, R)(0) = (N - 1, 1, 0), solved to day 160;
  x_j ~ Binomial(1000, I(t_j) / N) at t_j = 17 j, j = 0..9 (10 values).
* :func:`lotka_volterra`: (alpha, beta, gamma, delta) ~ LogNormal((-0.125,
  -3, -0.125, -3), 0.5); u' = alpha u - beta u v, v' = -gamma v + delta u v,
  (u, v)(0) = (30, 1); x ~ LogNormal(log clip(w, 1e-10, 1e4), 0.1) for
  w = (u(t_0), ..., u(t_9), v(t_0), ..., v(t_9)), t_j = 2.1 j (20 values).

Both solve their ODE with SciPy's ``solve_ivp`` (DOP853 in float64, at
sbibm's tolerances rtol = atol = 1e-8; sbibm ran Julia's Tsit5 at the same
tolerances), the rows stacked 1,000 at a time into one system whose right-hand
side is vectorised over rows, called through ``jax.pure_callback``: their
``simulate`` and ``log_likelihood`` run under ``jit`` and ``vmap`` in both
precisions but are not differentiable. A solve that fails gives a NaN row, as
in sbibm. The rows of a stack share its steps, so a row's states move within
the solver's error with the rows beside it (2.5e-6 relative measured between
one call of 16 lotka_volterra rows and two of 8); the same rows and key give
the same draws.

Why stacks of 1,000 (CPU seconds on one core, prior draws, against the
hand-written vectorised Dormand-Prince 5(4) this replaced, each row with its
own steps): sir 0.02 s per 1,000 simulations and 0.23 s per 10,000 (before:
0.12 s, 0.62 s); lotka_volterra 0.12 s and 1.2 s (before: 0.22 s, 0.89 s).
One stack of all 10,000 rows is faster still (sir 0.16 s, lotka_volterra
0.85 s), but its steps are shared: one stiff row (sir with beta = 1e12) made
it crawl to its cap and cost 27 s, against 1.9 s in stacks of 1,000. Against
the old solver the trajectories differ by at most 1.6e-6 (relative) at the
true parameters and 100 reference draws of observation 1, and by at most
4.3e-7 relative to max(|u|, 1) at 10,000 sir prior draws; in the tails of
lotka_volterra's prior, where the populations fall to near zero, both are
far from a per-row solve at rtol = 1e-13, the old one further.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
from jax.scipy.special import xlog1py, xlogy
from jaxtyping import Array, Float
from scipy.integrate import solve_ivp

from ..._typing import ArrayLike
from ..._validation import check_key
from .base import (
    SBITask,
    check_positive,
    check_theta,
    check_x,
    log_normal_prior,
    make_task,
    normal_logpdf,
)

__all__ = ["sir", "lotka_volterra"]

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
# The ODE solver: sbibm's DiffEq tolerances; rows solved together per stack;
# the cap on right-hand-side evaluations of one stack, per task 10x what a stack
# of 20,000 prior draws needed (sir 1,000, lotka_volterra 5,900). The cap stops
# a stiff row, which an explicit method would crawl through.
_ODE_RTOL = _ODE_ATOL = 1e-8
_ODE_CHUNK = 1000
_SIR_MAX_EVALS, _LV_MAX_EVALS = 10_000, 60_000


class _OverBudget(Exception):
    """A solve needed more right-hand sides than its cap."""


def _solve_stack(rhs, u0, times, p, max_evals) -> np.ndarray | None:
    """States ``(m, len(times), k)`` of the m rows of ``p`` solved as one
    stacked system; ``None`` if the solve failed or is not finite."""
    m, k = p.shape[0], len(u0)
    calls = 0

    def fun(t, y):
        nonlocal calls
        calls += 1
        if calls > max_evals:
            raise _OverBudget
        return rhs(y.reshape(m, k), p).ravel()

    try:
        with np.errstate(all="ignore"):
            sol = solve_ivp(fun, (times[0], times[-1]),
                            np.tile(np.asarray(u0, np.float64), m),
                            method="DOP853", t_eval=times, rtol=_ODE_RTOL,
                            atol=_ODE_ATOL)
    except _OverBudget:
        return None
    if sol.status != 0 or not np.all(np.isfinite(sol.y)):
        return None
    return sol.y.reshape(m, k, len(times)).transpose(0, 2, 1)


def _solve_ode(rhs, u0, times, p, max_evals) -> np.ndarray:
    """States ``(n, len(times), k)`` of u' = rhs(u, p) from u(0) = u0 for each
    row of ``p`` (n, n_params), float64, ``times[0] == 0``.

    SciPy's ``solve_ivp`` (DOP853, rtol = atol = 1e-8, ``t_eval`` at the
    observation times) on stacks of ``_ODE_CHUNK`` rows, each stack one system
    whose right-hand side is evaluated vectorised over its rows. A stack's
    steps are shared (it steps as its fastest row needs; its error norm is the
    RMS over its rows). A stack that fails (a step below SciPy's floor, more
    than ``max_evals`` right-hand sides, a non-finite state) is split in
    halves and each half solved again, down to single rows; a single row that
    fails is NaN. Stacks of 1,000 rather than one of all rows bound what one
    stiff row costs (module docstring).
    """
    out = np.full((p.shape[0], len(times), len(u0)), np.nan)
    pending = [np.arange(s, min(s + _ODE_CHUNK, p.shape[0]))
               for s in range(0, p.shape[0], _ODE_CHUNK)][::-1]
    while pending:
        rows = pending.pop()
        states = _solve_stack(rhs, u0, times, p[rows], max_evals)
        if states is not None:
            out[rows] = states
        elif rows.size > 1:
            pending += [rows[rows.size // 2:], rows[: rows.size // 2]]
    return out


def _ode_states(rhs, u0, times, theta, max_evals):
    """:func:`_solve_ode` at ``theta`` (..., n_params) through
    ``jax.pure_callback`` (jit- and vmap-safe, not differentiable), returned
    in ``theta``'s dtype, shape (..., len(times), len(u0))."""

    def solve(th):
        th = np.asarray(th, np.float64)
        flat = th.reshape(-1, th.shape[-1])
        states = _solve_ode(rhs, u0, times, flat, max_evals)
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
    infected = _ode_states(_sir_rhs, _SIR_U0, _SIR_TIMES, theta,
                           _SIR_MAX_EVALS)[..., 1]
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
    return _sir_draw(key, check_positive(check_theta(theta, 2), "sir"))


def _sir_log_likelihood(
    theta: Float[ArrayLike, "..."], x: Float[ArrayLike, "..."]
) -> Float[Array, " n_samples"]:
    theta = check_positive(check_theta(theta, 2), "sir")
    return _sir_ll(theta, check_x(x, theta, len(_SIR_TIMES)))


def _lv_rhs(u, p):
    prey, pred = u[:, :1], u[:, 1:]
    return np.concatenate([p[:, :1] * prey - p[:, 1:2] * prey * pred,
                           -p[:, 2:3] * pred + p[:, 3:] * prey * pred], axis=1)


def _lv_log_means(theta):
    """log clip(w, 1e-10, 1e4) (n, 20): prey at the 10 times, then predators."""
    states = _ode_states(_lv_rhs, _LV_U0, _LV_TIMES, theta, _LV_MAX_EVALS)
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
    return _lv_draw(key, check_positive(check_theta(theta, 4),
                                         "lotka_volterra"))


def _lv_log_likelihood(
    theta: Float[ArrayLike, "..."], x: Float[ArrayLike, "..."]
) -> Float[Array, " n_samples"]:
    theta = check_positive(check_theta(theta, 4), "lotka_volterra")
    return _lv_ll(theta, check_x(x, theta, 2 * len(_LV_TIMES)))


@jax.jit
def _lv_ll(theta, x):
    loc = _lv_log_means(theta)
    log_x = jnp.log(jnp.where(x > 0, x, 1.0))
    ll = normal_logpdf(log_x - loc, _LV_SIGMA**2) - log_x
    return jnp.sum(jnp.where(x > 0, ll, -jnp.inf), axis=-1)



# --- the tasks --------------------------------------------------------------------

def sir() -> SBITask:
    """sbibm's ``sir`` epidemic (module docstring; Lueckmann et al. 2021,
    appendix T): theta = (contact rate beta, recovery rate gamma).

    The ODE runs in SciPy's ``solve_ivp`` (DOP853, float64, rtol = atol =
    1e-8 as sbibm's Julia Tsit5) behind ``jax.pure_callback``: ``simulate``
    and ``log_likelihood`` work under ``jit``/``vmap`` but not ``grad``. Cost
    (one core, prior draws): about 0.02 s of CPU per 1,000 simulations, 0.23 s
    per 10,000 (rows stacked into one system). ``log_likelihood`` is
    the Binomial log probability mass (-inf unless every count is an integer
    in 0..1000); NaN where the solve failed.
    """
    prior, box = log_normal_prior(_SIR_LOC, _SIR_SCALE)
    return make_task("sir", None, 2, _sir_simulate, _sir_log_likelihood, prior, box)


def lotka_volterra() -> SBITask:
    """sbibm's ``lotka_volterra`` predator-prey task (module docstring;
    Lueckmann et al. 2021, appendix T): theta = (alpha, beta, gamma, delta).

    The ODE runs in SciPy's ``solve_ivp`` (DOP853, float64, rtol = atol =
    1e-8 as sbibm's Julia Tsit5) behind ``jax.pure_callback``: ``simulate``
    and ``log_likelihood`` work under ``jit``/``vmap`` but not ``grad``. Cost
    (one core, prior draws): about 0.12 s of CPU per 1,000 simulations, 1.2 s
    per 10,000 (rows stacked into one system). ``log_likelihood``: NaN where
    the solve failed.
    """
    prior, box = log_normal_prior(_LV_LOC, _LV_SCALE)
    return make_task("lotka_volterra", None, 4, _lv_simulate, _lv_log_likelihood,
                     prior, box)
