"""Forward-backward on a batch of sequences sharded over devices."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh
from jaxtyping import Float

from .._typing import ArrayLike
from ..distributed import sharded_batch_map
from .inference import HMMPosterior, forward_backward

__all__ = ["sharded_hmm_posteriors"]


def _hmm_batch(log_initial, log_transition, log_likelihoods, mask):
    return jax.vmap(
        lambda ll, mk: forward_backward(log_initial, log_transition, ll, mask=mk)
    )(log_likelihoods, mask)


def sharded_hmm_posteriors(
    log_initial: Float[ArrayLike, " num_states"],
    log_transition: Float[ArrayLike, "num_states num_states"],
    log_likelihoods: Float[ArrayLike, "*dims"],
    *,
    mask: ArrayLike | None = None,
    mesh: Mesh | None = None,
) -> HMMPosterior:
    """Forward-backward on a batch of padded sequences, sequences over devices.

    Args:
        log_initial: ``(N,)``; log_transition: ``(N, N)`` (shared by the batch).
        log_likelihoods: ``(B, T, N)`` per-sequence log p(x_t | q_t).
        mask: optional ``(B, T)`` bool, False on padded steps.
        mesh: a one-axis mesh (default: all devices).

    Returns:
        :class:`bayeskde.hmm.HMMPosterior` with a leading batch axis:
        ``gamma`` ``(B, T, N)``, ``xi`` ``(B, N, N)``, ``log_likelihood`` ``(B,)``.

    Raises:
        ValueError: inconsistent shapes or NaN, or probabilities that do not sum
            to one (checked once on the first sequence with
            :func:`bayeskde.hmm.forward_backward`).

    Cost: O(B T N^2 / D) time per device, O(B T N / D) memory per device.
    """
    li = jnp.asarray(log_initial)
    lt = jnp.asarray(log_transition)
    ll = jnp.asarray(log_likelihoods)
    if ll.ndim != 3 or ll.shape[0] < 1:
        raise ValueError(
            f"log_likelihoods must be (B, T, N) with B >= 1, got shape {ll.shape}"
        )
    if np.isnan(np.asarray(ll)).any():
        raise ValueError("log_likelihoods contains NaN")
    mk = jnp.ones(ll.shape[:2], bool) if mask is None else jnp.asarray(mask, bool)
    if mk.shape != ll.shape[:2]:
        raise ValueError(
            f"mask must have shape {ll.shape[:2]} (B, T), got {mk.shape}"
        )
    # The public function validates parameters and shapes on one sequence.
    forward_backward(li, lt, ll[0], mask=mk[0])
    return sharded_batch_map(_hmm_batch, ll, mk, mesh=mesh, broadcast=(li, lt))
