"""sbibm's ``bernoulli_glm`` (Lueckmann et al. 2021, appendix T), from its
definition in sbibm 1.1.0's source (``sbibm/tasks/bernoulli_glm/task.py``).

theta ~ N(0, B^-1)^10 with B = blockdiag(0.5, F^T F), F = D^2 + diag(sqrt(j /
9)), j = 0..8, D the 9 x 9 first-difference matrix (ones on the diagonal, -1
below it); a stimulus s_t ~ N(0, 1), t = 0..99, frozen by
``numpy.random.RandomState(42)`` (float32) and the design X[t] = (1, s_t,
s_{t-1}, ..., s_{t-8}) (zero before t = 0); spikes y_t ~ Bernoulli(sigmoid(X[t]
. theta)); x = X^T y (10 values: the spike count and the spike-triggered sums at
lags 0..8, which are sbibm's ``conv1d`` summaries and the GLM's sufficient
statistics).
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
import numpyro.distributions as dist
from jaxtyping import Array, Float

from ..._typing import ArrayLike
from ..._validation import check_key
from .base import BOX_Z, SBITask, check_theta, check_x, make_task

__all__ = ["bernoulli_glm"]

# 100 time bins, a 9-tap filter, the stimulus' frozen seed.
_GLM_BINS, _GLM_TAPS, _GLM_SEED = 100, 9, 42


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
    return _glm_draw(key, check_theta(theta, _GLM_TAPS + 1))


def _glm_log_likelihood(
    theta: Float[ArrayLike, "..."], x: Float[ArrayLike, "..."]
) -> Float[Array, " n_samples"]:
    theta = check_theta(theta, _GLM_TAPS + 1)
    return _glm_ll(theta, check_x(x, theta, _GLM_TAPS + 1))



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
    return make_task("bernoulli_glm", None, _GLM_TAPS + 1, _glm_simulate,
                     _glm_log_likelihood, prior, (-BOX_Z * sd, BOX_Z * sd))
