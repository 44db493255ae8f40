"""Fisher kernel on HMMs: the baseline of the latent mean-map kernel.

The Fisher score of a sequence is ``U_x = grad_theta log p(x | theta)`` at the fitted
parameters (Jaakkola and Haussler 1999), taken here by ``jax.grad`` through the
scaled forward algorithm (``bayeskde.hmm.forward_filter``) with respect to every
leaf of ``HMMParams``: ``log_initial``, ``log_transition`` and the emission
parameters (log emission probabilities; or means and (co)variances). The
log-probabilities are differentiated as free coordinates (no sum-to-one
constraint), so the scores are the posterior expected counts:
``d/d log A_ij = sum_t xi_t(i, j)``, ``d/d log B_ia = sum_{t: x_t = a}
gamma_t(i)``, ``d/d log pi_i = gamma_1(i)``. The Fisher kernel is
``U_x^T I^-1 U_y`` with ``I`` the identity (the "plain" Fisher kernel) or the
empirical Fisher information ``(1/n) sum_x U_x U_x^T`` (ridged).

Relation to the LMMK (seed, after eq. 32): as ``lam -> inf`` both ``L_N`` and
``L_K`` become identities and the LMMK on symbols is
``<C/T, C'/T'> + <xi/(T-1), xi'/(T'-1)>``: the plain Fisher kernel restricted
to the emission and transition coordinates with each clique's score divided by its
number of instances. :func:`length_normalised_fisher_kernel` computes that form
from the autodiff scores; the tests check the two agree.

A transition matrix with exact zeros makes the forward algorithm's log-space
fallback differentiate ``log 0``; scores are then NaN and
:func:`fisher_scores` raises.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import jax.scipy.linalg as jsl
import numpy as np
from jax.flatten_util import ravel_pytree
from jaxtyping import Array, Bool, Float

from .._typing import ArrayLike
from .._validation import as_float_array, check_nonnegative
from ..hmm import (
    CategoricalEmission,
    HMMParams,
    emission_log_likelihoods,
    forward_filter,
    pad_sequences,
)

__all__ = [
    "FisherScores",
    "hmm_log_likelihood",
    "fisher_scores",
    "empirical_fisher_information",
    "fisher_kernel",
    "length_normalised_fisher_kernel",
]


class FisherScores(NamedTuple):
    """Fisher scores of a batch of sequences.

    Attributes:
        scores: ``(n, P)`` flattened gradients of ``log p(x | theta)``.
        lengths: ``(n,)`` sequence lengths.
        blocks: ``HMMParams`` of ``(start, stop)`` column ranges of each parameter
            leaf in ``scores`` (static Python ints).
    """

    scores: Array
    lengths: Array
    blocks: HMMParams


def hmm_log_likelihood(
    params: HMMParams, obs: Array, mask: Bool[Array, " t"] | None = None
) -> Float[Array, ""]:
    """``log p(x | params)`` by the forward algorithm; differentiable in params."""
    log_lik = emission_log_likelihoods(params.emission, obs)
    return forward_filter(
        params.log_initial, params.log_transition, log_lik, mask=mask
    ).log_likelihood


@jax.jit
def _batch_scores(params, padded, mask):
    flat, unravel = ravel_pytree(params)

    def score(x, m):
        return jax.grad(lambda f: hmm_log_likelihood(unravel(f), x, m))(flat)

    return jax.vmap(score)(padded, mask)


def _blocks(params):
    leaves, treedef = jax.tree_util.tree_flatten(params)
    out, start = [], 0
    for leaf in leaves:
        out.append((start, start + int(np.size(leaf))))
        start += int(np.size(leaf))
    return jax.tree_util.tree_unflatten(treedef, out)


def fisher_scores(params: HMMParams, sequences) -> FisherScores:
    """Fisher scores of sequences under a fitted HMM, by ``jax.grad``.

    Args:
        params: ``bayeskde.hmm.HMMParams``.
        sequences: list of ``(T_i,)`` int or ``(T_i, D)`` float arrays, checked
            as by :func:`~bayeskde.hmm.pad_sequences` with the HMM's alphabet;
            length-1 sequences have zero transition scores.

    Returns:
        :class:`FisherScores`. Cost O(n T N^2) time (one forward pass and its
        adjoint per sequence), O(n T N) memory.

    Raises:
        ValueError: bad sequences (empty, NaN, ragged D, symbols outside the
            alphabet, the wrong kind or D for the emission), or a score that is
            not finite (zero transition probabilities).
    """
    categorical = isinstance(params.emission, CategoricalEmission)
    n_symbols = params.emission.log_probs.shape[1] if categorical else None
    padded, lengths = pad_sequences(sequences, n_symbols=n_symbols)
    if categorical != (padded.ndim == 2):
        raise ValueError(
            f"sequences must be (T_i,) symbols for a {type(params.emission).__name__}"
            if categorical else
            "sequences must be (T_i, D) vectors for a GaussianEmission"
        )
    if not categorical and padded.shape[2] != params.emission.means.shape[1]:
        raise ValueError(
            f"sequences have D = {padded.shape[2]}, the HMM's Gaussians "
            f"D = {params.emission.means.shape[1]}"
        )
    mask = jnp.arange(padded.shape[1])[None, :] < jnp.asarray(lengths)[:, None]
    scores = _batch_scores(params, padded, mask)
    if not bool(jnp.all(jnp.isfinite(scores))):
        raise ValueError(
            "Fisher scores are not finite; the HMM probably has zero transition or "
            "initial probabilities (smooth them, e.g. add 1e-6 and renormalise)"
        )
    return FisherScores(scores, jnp.asarray(lengths), _blocks(params))


def empirical_fisher_information(
    scores: Float[ArrayLike, "n p"], *, ridge: float = 1e-6
) -> Float[Array, "p p"]:
    """``(1/n) sum_x U_x U_x^T + ridge * mean(diag) I``: the empirical Fisher
    information of training scores, ridged because the free log-probability
    coordinates make it singular. Cost O(n P^2)."""
    ridge = check_nonnegative(ridge, "ridge")
    U = as_float_array(scores, "scores", ndim=2)
    info = U.T @ U / U.shape[0]
    scale = jnp.maximum(jnp.mean(jnp.diagonal(info)), jnp.finfo(info.dtype).tiny)
    return info + ridge * scale * jnp.eye(info.shape[0], dtype=info.dtype)


@jax.jit
def _whitened_gram(Ua, Ub, info):
    chol = jnp.linalg.cholesky(info)
    Za = jsl.solve_triangular(chol, Ua.T, lower=True)
    Zb = jsl.solve_triangular(chol, Ub.T, lower=True)
    return Za.T @ Zb


def fisher_kernel(
    scores_a: Float[ArrayLike, "n_a p"],
    scores_b: Float[ArrayLike, "n_b p"] | None = None,
    information: Float[ArrayLike, "p p"] | None = None,
) -> Float[Array, "n_a n_b"]:
    """Fisher kernel ``U_a I^-1 U_b^T`` (Jaakkola and Haussler 1999).

    Args:
        scores_a, scores_b: ``(n, P)`` score matrices (``fisher_scores(...).scores``).
        information: ``(P, P)`` positive definite information matrix (e.g.
            :func:`empirical_fisher_information` of training scores), or ``None``
            for the identity (the plain Fisher kernel).

    Returns:
        ``(n_a, n_b)`` Gram matrix; cost O(P^3 + (n_a + n_b) P^2 + n_a n_b P).
    """
    Ua = as_float_array(scores_a, "scores_a", ndim=2)
    Ub = Ua if scores_b is None else as_float_array(scores_b, "scores_b", ndim=2)
    if information is None:
        return Ua @ Ub.T
    info = as_float_array(information, "information", ndim=2)
    return _whitened_gram(Ua, Ub, info)


def length_normalised_fisher_kernel(
    fa: FisherScores, fb: FisherScores | None = None
) -> Float[Array, "n_a n_b"]:
    """Plain Fisher kernel on the transition and emission-log-probability scores,
    each divided by its number of clique instances (``T - 1`` and ``T``): the
    ``lam -> inf`` limit of the LMMK on symbol sequences (see module docstring).
    Length-1 sequences have zero transition scores."""
    fb = fa if fb is None else fb
    if not hasattr(fa.blocks.emission, "log_probs"):
        raise ValueError("the LMMK relation holds for categorical emissions")

    def parts(f):
        t0, t1 = f.blocks.log_transition
        e0, e1 = f.blocks.emission.log_probs
        T = f.lengths.astype(f.scores.dtype)[:, None]
        trans = f.scores[:, t0:t1] / jnp.maximum(T - 1.0, 1.0)
        emis = f.scores[:, e0:e1] / T
        return trans, emis

    ta, ea = parts(fa)
    tb, eb = parts(fb)
    return ta @ tb.T + ea @ eb.T
