"""The kernel formula the inverse model's exact and low-rank paths share.

A private layer below :mod:`.inverse_gp` and :mod:`.inverse_gp_lowrank`, so
that neither imports the other's internals (the two import in one direction
only: :mod:`.inverse_gp` uses :mod:`.inverse_gp_lowrank`).
"""

from __future__ import annotations

import jax.numpy as jnp

__all__ = ["rbf_powers"]


def rbf_powers(D2, gamma, degree):
    """``(degree, *D2.shape)`` Hadamard powers K^(i) = exp(-i gamma D2),
    i = 1..degree, of the RBF with rate gamma on squared distances D2: the
    i-th power of an RBF is the RBF at rate i gamma (the monomial basis of
    the transform phi(K), :mod:`.inverse_gp` eq. (F))."""
    powers = jnp.arange(1, degree + 1, dtype=D2.dtype)
    return jnp.exp(-gamma * powers[:, None, None] * D2[None])
