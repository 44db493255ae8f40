"""Emission models of an HMM as parameter NamedTuples, and their log likelihoods.

The inference routines never see these: they take ``log_likelihoods`` of shape
``(num_timesteps, num_states)``, which the functions here compute from an emission's
parameters and one observation sequence.

- :class:`CategoricalEmission`: ``log_probs[i, m] = log P(x_t = m | q_t = i)``.
- :class:`GaussianEmission`: ``x_t | q_t = i ~ N(means[i], covariances[i])``, with
  full ``(N, D, D)`` or diagonal ``(N, D)`` covariances (told apart by their rank).
"""

from __future__ import annotations

import math
from typing import NamedTuple

import jax
import jax.numpy as jnp
from jax import lax
from jaxtyping import Array, Float, Int

from .._typing import ArrayLike

__all__ = [
    "CategoricalEmission",
    "GaussianEmission",
    "categorical_log_likelihoods",
    "gaussian_log_likelihoods",
    "emission_log_likelihoods",
]


class CategoricalEmission(NamedTuple):
    """Discrete observations over ``M`` symbols.

    Attributes:
        log_probs: ``(num_states, num_symbols)`` log emission probabilities; each
            row's probabilities sum to one.
    """

    log_probs: Float[Array, "num_states num_symbols"]


class GaussianEmission(NamedTuple):
    """Continuous observations in ``D`` dimensions, one Gaussian per state.

    Attributes:
        means: ``(num_states, num_features)``.
        covariances: ``(num_states, num_features, num_features)`` full covariances,
            or ``(num_states, num_features)`` diagonal variances.
    """

    means: Float[Array, "num_states num_features"]
    covariances: (
        Float[Array, "num_states num_features num_features"]
        | Float[Array, "num_states num_features"]
    )


def categorical_log_likelihoods(
    emission: CategoricalEmission, obs: Int[ArrayLike, " num_timesteps"]
) -> Float[Array, "num_timesteps num_states"]:
    """``log P(x_t | q_t = i)`` for a symbol sequence.

    Cost: O(T N) time and memory (a gather).

    Args:
        emission: the categorical emission parameters.
        obs: ``(T,)`` integer symbols in ``[0, num_symbols)``; out-of-range symbols
            are not checked here (jit-safe); :func:`~bayeskde.hmm.pad_sequences`
            checks them.

    Returns:
        ``(T, num_states)`` log likelihoods.

    Examples:
        >>> import jax.numpy as jnp
        >>> em = CategoricalEmission(jnp.log(jnp.array([[0.9, 0.1], [0.2, 0.8]])))
        >>> categorical_log_likelihoods(em, jnp.array([0, 1])).shape
        (2, 2)
    """
    return jnp.take(emission.log_probs, jnp.asarray(obs), axis=1).T


def gaussian_log_likelihoods(
    emission: GaussianEmission, obs: Float[ArrayLike, "num_timesteps num_features"]
) -> Float[Array, "num_timesteps num_states"]:
    """Gaussian log densities ``log N(x_t; means[i], covariances[i])``.

    Full covariances go through their Cholesky factors (a triangular solve, never an
    inverse); diagonal ones through their variances. (The batched recursions of
    :mod:`bayeskde.hmm.learning` use the feature-major twin
    :func:`gaussian_log_density_fn` inside their scans.)

    Cost: O(N D^3 + T N D^2) time for full covariances, O(T N D) for diagonal ones;
    O(T N D) memory.

    Args:
        emission: the Gaussian emission parameters.
        obs: ``(T, D)`` observations.

    Returns:
        ``(T, num_states)`` log densities.

    Examples:
        >>> import jax.numpy as jnp
        >>> em = GaussianEmission(jnp.zeros((2, 1)), jnp.ones((2, 1)))
        >>> gaussian_log_likelihoods(em, jnp.zeros((3, 1))).shape
        (3, 2)
    """
    return _gaussian_log_density_rows(emission)(jnp.asarray(obs))


def _gaussian_log_density_rows(emission):
    """``obs (K, D) -> (K, N)`` log densities by the direct Mahalanobis form.

    In this row-major layout the direct form measured fastest (the whitened
    feature-major form of :func:`gaussian_log_density_fn`, transposed in and out,
    took 2.6x as long on 200,000 x 3 observations and 8 states).
    """
    means, covs = emission.means, emission.covariances
    num_features = means.shape[-1]
    const = -0.5 * num_features * math.log(2.0 * math.pi)
    if covs.ndim == 2:
        precision = 1.0 / covs
        logdet = jnp.sum(jnp.log(covs), axis=-1)

        def _maha(obs):
            diff = obs[:, None, :] - means[None, :, :]  # (K, N, D)
            return jnp.sum(diff**2 * precision[None], axis=-1)
    else:
        chol = jnp.linalg.cholesky(covs)  # (N, D, D)
        logdet = 2.0 * jnp.sum(jnp.log(jnp.diagonal(chol, axis1=-2, axis2=-1)), -1)

        def _state(c, d):  # c: (D, D), d: (K, D)
            z = jax.scipy.linalg.solve_triangular(c, d.T, lower=True)
            return jnp.sum(z**2, axis=0)

        def _maha(obs):
            diff = obs[:, None, :] - means[None, :, :]  # (K, N, D)
            return jax.vmap(_state, in_axes=(0, 1), out_axes=1)(chol, diff)

    return lambda obs: const - 0.5 * (logdet[None, :] + _maha(obs))


def gaussian_log_density_fn(emission):
    """``obs (D, K) -> (N, K)`` log densities, feature-major, with the per-state
    factors computed once, outside the returned function, so that a scan can call
    it on one step of a batch at a time.

    Layout and form were chosen by measurement (``bench/hmm.py``, 1,000 x 200 x 8
    states, D = 3, diagonal; the forward-backward around it included): the
    observations enter feature-major ``(D, K)`` so that every operation runs along
    the long batch axis (an earlier ``(K, N, D)`` difference with D = 3 innermost
    was 1.7x slower in float64 and 6-10x in float32), and the Mahalanobis term is
    ``||W_i x - W_i mu_i||^2``: one broadcast product (diagonal) or one
    ``(N D, D) @ (D, K)`` product (full) for all states, instead of N triangular
    solves per step. The expansion ``x^2 a + x b + c`` was as fast but cancels
    catastrophically in float32 when ``||mu_i||^2 / var`` is large; here the
    error of ``W_i x - W_i mu_i`` is only linear in ``|x| / sigma``, and the data
    are first centred on the mean of the state means, so that a common offset of
    the data costs no precision.
    """
    means, covs = emission.means, emission.covariances
    num_states, num_features = means.shape
    const = -0.5 * num_features * math.log(2.0 * math.pi)
    centre = jnp.mean(means, axis=0)
    centred = means - centre[None]
    if covs.ndim == 2:
        scale = lax.rsqrt(covs)  # (N, D)
        logdet = jnp.sum(jnp.log(covs), axis=-1)
        offset = centred * scale

        def _whiten(x):  # (D, K) -> (N, D, K)
            return x[None] * scale[:, :, None] - offset[:, :, None]
    else:
        chol = jnp.linalg.cholesky(covs)  # (N, D, D)
        logdet = 2.0 * jnp.sum(jnp.log(jnp.diagonal(chol, axis1=-2, axis2=-1)), -1)
        eye = jnp.eye(num_features, dtype=chol.dtype)
        # W_i = L_i^{-1}: one triangular solve per state, once per call.
        white = jax.vmap(
            lambda c: jax.scipy.linalg.solve_triangular(c, eye, lower=True)
        )(chol)
        offset = jnp.einsum("nde,ne->nd", white, centred)
        stacked = white.reshape(num_states * num_features, num_features)

        def _whiten(x):
            z = (stacked @ x).reshape(num_states, num_features, -1)
            return z - offset[:, :, None]

    level = const - 0.5 * logdet

    def _log_density(obs):
        z = _whiten(obs - centre[:, None])
        return level[:, None] - 0.5 * jnp.sum(z * z, axis=1)

    return _log_density


def emission_log_likelihoods(
    emission: CategoricalEmission | GaussianEmission, obs: ArrayLike
) -> Float[Array, "num_timesteps num_states"]:
    """Dispatch to :func:`categorical_log_likelihoods` or
    :func:`gaussian_log_likelihoods` by the emission's type.

    Raises:
        TypeError: for any other emission type.
    """
    if isinstance(emission, CategoricalEmission):
        return categorical_log_likelihoods(emission, obs)
    if isinstance(emission, GaussianEmission):
        return gaussian_log_likelihoods(emission, obs)
    raise TypeError(
        "emission must be a CategoricalEmission or a GaussianEmission, got "
        f"{type(emission).__name__}"
    )
