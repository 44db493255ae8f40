"""The sbibm tasks with closed-form simulators (Lueckmann et al. 2021,
appendix T), from their definitions in sbibm 1.1.0's source
(``sbibm/tasks/<task>/task.py``):

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

Simulation and the likelihood are O(n * dim_data), jitted JAX.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import numpyro.distributions as dist
from jax.scipy.special import logsumexp
from jaxtyping import Array, Float

from ..._typing import ArrayLike
from ..._validation import check_key
from .base import (
    BOX_Z,
    LOG_2PI,
    SBITask,
    check_box,
    check_theta,
    check_x,
    make_task,
    normal_logpdf,
)

__all__ = [
    "two_moons",
    "gaussian_mixture",
    "gaussian_linear_uniform",
    "gaussian_linear",
    "slcp",
]

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
    theta = check_theta(theta, 2)
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
    theta = check_theta(theta, 2)
    x = check_x(x, theta, 2)
    p = x - _moons_shift(theta)
    u, v = p[:, 0] - _BASE_OFFSET, p[:, 1]
    r = jnp.sqrt(u * u + v * v)
    safe_r = jnp.where(u > 0, r, 1.0)
    ll = (normal_logpdf(safe_r - _R_LOC, _R_SCALE**2) - jnp.log(jnp.pi)
          - jnp.log(safe_r))
    return jnp.where(u > 0, ll, -jnp.inf)


# --- Gaussian mixture ----------------------------------------------------------

def _gaussian_mixture_simulate(
    key, theta: Float[ArrayLike, "..."]
) -> Float[Array, "n_samples n_data"]:
    key = check_key(key)
    theta = check_theta(theta, 2)
    n, dt = theta.shape[0], theta.dtype
    k_c, k_e = jax.random.split(key)
    narrow = jax.random.bernoulli(k_c, 0.5, (n, 1))
    scale = jnp.where(narrow, _MIX_SCALES[1], _MIX_SCALES[0]).astype(dt)
    return theta + scale * jax.random.normal(k_e, theta.shape, dt)


def _gaussian_mixture_log_likelihood(
    theta: Float[ArrayLike, "..."], x: Float[ArrayLike, "..."]
) -> Float[Array, " n_samples"]:
    theta = check_theta(theta, 2)
    x = check_x(x, theta, 2)
    z = x - theta
    comps = jnp.stack([jnp.sum(normal_logpdf(z, s**2), axis=-1)
                       for s in _MIX_SCALES], axis=-1)
    return logsumexp(comps, axis=-1) + jnp.log(0.5)


# --- Gaussian linear uniform ---------------------------------------------------

def _glu_simulate(
    key, theta: Float[ArrayLike, "..."]
) -> Float[Array, "n_samples n_data"]:
    key = check_key(key)
    theta = check_theta(theta, 10)
    return theta + jnp.sqrt(_GLU_VAR) * jax.random.normal(key, theta.shape,
                                                           theta.dtype)


def _glu_log_likelihood(
    theta: Float[ArrayLike, "..."], x: Float[ArrayLike, "..."]
) -> Float[Array, " n_samples"]:
    theta = check_theta(theta, 10)
    x = check_x(x, theta, 10)
    return jnp.sum(normal_logpdf(x - theta, _GLU_VAR), axis=-1)


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
                                                          + LOG_2PI)


def _slcp_simulate(
    key, theta: Float[ArrayLike, "..."]
) -> Float[Array, "n_samples n_data"]:
    key = check_key(key)
    theta = check_box(check_theta(theta, 5), -_SLCP_BOUND, _SLCP_BOUND, "slcp")
    return _slcp_draw(key, theta)


def _slcp_log_likelihood(
    theta: Float[ArrayLike, "..."], x: Float[ArrayLike, "..."]
) -> Float[Array, " n_samples"]:
    theta = check_box(check_theta(theta, 5), -_SLCP_BOUND, _SLCP_BOUND, "slcp")
    return _slcp_ll(theta, check_x(x, theta, 2 * _SLCP_DRAWS))



# --- the tasks --------------------------------------------------------------------

def two_moons() -> SBITask:
    """sbibm's ``two_moons`` (module docstring; Lueckmann et al. 2021, appendix T).

    Examples:
        >>> task = two_moons()
        >>> task.dim_parameters, task.observations.shape
        (2, (10, 2))
        >>> task.simulate(jax.random.key(0), jnp.zeros((3, 2))).shape
        (3, 2)
    """
    return make_task("two_moons", 1.0, 2, _two_moons_simulate,
                     _two_moons_log_likelihood)


def gaussian_mixture() -> SBITask:
    """sbibm's ``gaussian_mixture`` (module docstring; Lueckmann et al. 2021,
    appendix T, after Sisson et al. 2007)."""
    return make_task("gaussian_mixture", 10.0, 2, _gaussian_mixture_simulate,
                     _gaussian_mixture_log_likelihood)


def gaussian_linear_uniform() -> SBITask:
    """sbibm's ``gaussian_linear_uniform`` (module docstring; Lueckmann et al.
    2021, appendix T)."""
    return make_task("gaussian_linear_uniform", 1.0, 10, _glu_simulate,
                     _glu_log_likelihood)


def gaussian_linear() -> SBITask:
    """sbibm's ``gaussian_linear`` (module docstring; Lueckmann et al. 2021,
    appendix T): prior N(0, 0.1 I), simulator N(theta, 0.1 I) in 10-D."""
    dt = jnp.result_type(float)
    sd = np.sqrt(_GLU_VAR)
    prior = dist.Normal(jnp.zeros(10, dt), jnp.full(10, sd, dt)).to_event(1)
    box = (np.full(10, -BOX_Z * sd), np.full(10, BOX_Z * sd))
    return make_task("gaussian_linear", None, 10, _glu_simulate, _glu_log_likelihood,
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
    return make_task("slcp", _SLCP_BOUND, 5, _slcp_simulate, _slcp_log_likelihood)


