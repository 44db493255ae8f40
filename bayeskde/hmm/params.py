"""HMM parameters as a pytree, and sampling sequences from them."""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
from jax import lax
from jaxtyping import Array, Float, Int

from .._validation import check_integer, check_key
from .emissions import CategoricalEmission, GaussianEmission

__all__ = ["HMMParams", "HMMSample", "sample_hmm"]


class HMMParams(NamedTuple):
    """Parameters of an HMM (a pytree; the emission's type carries its structure).

    Attributes:
        log_initial: ``(N,)`` log initial state probabilities.
        log_transition: ``(N, N)`` log transition probabilities, rows sum to one.
        emission: :class:`~bayeskde.hmm.CategoricalEmission` or
            :class:`~bayeskde.hmm.GaussianEmission`.
    """

    log_initial: Float[Array, " num_states"]
    log_transition: Float[Array, "num_states num_states"]
    emission: CategoricalEmission | GaussianEmission


class HMMSample(NamedTuple):
    """Sequences drawn by :func:`sample_hmm`.

    Attributes:
        states: ``(n_sequences, length)`` int hidden states.
        observations: ``(n_sequences, length)`` int symbols or
            ``(n_sequences, length, D)`` vectors.
    """

    states: Int[Array, "n_sequences length"]
    observations: Int[Array, "n_sequences length"] | Float[
        Array, "n_sequences length num_features"
    ]



def _sample_one(key, params, length):
    k_states, k_obs = jax.random.split(key)
    keys = jax.random.split(k_states, length)
    first = jax.random.categorical(keys[0], params.log_initial)

    def _step(state, k):
        nxt = jax.random.categorical(k, params.log_transition[state])
        return nxt, nxt

    _, rest = lax.scan(_step, first, keys[1:])
    states = jnp.concatenate([first[None], rest])
    em = params.emission
    if isinstance(em, CategoricalEmission):
        obs = jax.random.categorical(k_obs, em.log_probs[states])
        return states, obs
    z = jax.random.normal(k_obs, (length, em.means.shape[-1]), em.means.dtype)
    if em.covariances.ndim == 2:
        noise = z * jnp.sqrt(em.covariances[states])
    else:
        chol = jnp.linalg.cholesky(em.covariances)[states]
        noise = jnp.einsum("tde,te->td", chol, z)
    return states, em.means[states] + noise


_sample_jit = jax.jit(
    lambda key, params, n, length: jax.vmap(_sample_one, in_axes=(0, None, None))(
        jax.random.split(key, n), params, length
    ),
    static_argnums=(2, 3),
)


def sample_hmm(
    key: Array, params: HMMParams, n_sequences: int, length: int
) -> HMMSample:
    """Draw ``n_sequences`` sequences of ``length`` steps from an HMM.

    Cost: O(n_sequences * length * (N + D^2)) time.

    Args:
        key: PRNG key.
        params: the HMM.
        n_sequences: number of sequences.
        length: steps per sequence.

    Returns:
        :class:`HMMSample` with ``states`` and ``observations``.

    Examples:
        >>> import jax, jax.numpy as jnp
        >>> p = HMMParams(jnp.log(jnp.array([0.5, 0.5])),
        ...               jnp.log(jnp.array([[0.9, 0.1], [0.1, 0.9]])),
        ...               CategoricalEmission(jnp.log(jnp.array([[0.9, 0.1],
        ...                                                     [0.1, 0.9]]))))
        >>> sample_hmm(jax.random.key(0), p, 3, 5).observations.shape
        (3, 5)
    """
    key = check_key(key, "key")
    n_sequences = check_integer(n_sequences, "n_sequences", minimum=1)
    length = check_integer(length, "length", minimum=1)
    states, obs = _sample_jit(key, params, n_sequences, length)
    return HMMSample(states, obs)

