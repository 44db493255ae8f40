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

Both solve their ODE in NumPy float64 (Dormand-Prince 5(4), every row with its
own adaptive steps, at sbibm's tolerances rtol = atol = 1e-8; sbibm ran Julia's
Tsit5 at the same tolerances), called through ``jax.pure_callback``: their
``simulate`` and ``log_likelihood`` run under ``jit`` and ``vmap`` in both
precisions but are not differentiable. A solve that fails gives a NaN row, as
in sbibm.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
from jax.scipy.special import xlog1py, xlogy
from jaxtyping import Array, Float

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
# The ODE solver (sbibm's DiffEq defaults).
_ODE_RTOL = _ODE_ATOL = 1e-8
# The cap: 5x the most steps any of 20,000 prior draws needed (under 2,000).
_ODE_MAX_STEPS = 10_000


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

    The ODE runs in NumPy float64 (Dormand-Prince 5(4), rtol = atol = 1e-8 as
    sbibm's Julia Tsit5) behind ``jax.pure_callback``: ``simulate`` and
    ``log_likelihood`` work under ``jit``/``vmap`` but not ``grad``. Cost
    (one core, prior draws): about 0.15 s of CPU per 1,000 simulations, 0.8 s
    per 10,000 (the solves are vectorised over rows). ``log_likelihood`` is
    the Binomial log probability mass (-inf unless every count is an integer
    in 0..1000); NaN where the solve failed.
    """
    prior, box = log_normal_prior(_SIR_LOC, _SIR_SCALE)
    return make_task("sir", None, 2, _sir_simulate, _sir_log_likelihood, prior, box)


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
    prior, box = log_normal_prior(_LV_LOC, _LV_SCALE)
    return make_task("lotka_volterra", None, 4, _lv_simulate, _lv_log_likelihood,
                     prior, box)
