"""Posterior draws of the Bayesian HMM as parameters, and label switching.

The likelihood of :func:`bayeskde.models.bayesian_hmm_model` is invariant to
permuting the states, so with exchangeable priors the posterior has ``N!``
symmetric modes. :func:`relabel_draws` / :func:`relabel_samples` permute every
draw's states to match a reference by the Hungarian algorithm
(``scipy.optimize.linear_sum_assignment``) on the distance between emission
distributions, re-estimating the reference as the mean of the aligned draws
(Stephens 2000, Celeux 1998).

References:
    M. Stephens (2000), "Dealing with label switching in mixture models",
    JRSS B 62(4).
"""

from __future__ import annotations

from collections.abc import Mapping

import jax
import jax.numpy as jnp
import numpy as np
from scipy.optimize import linear_sum_assignment

from .._validation import check_integer
from ..hmm import (
    CategoricalEmission,
    GaussianEmission,
    HMMParams,
)

__all__ = ["hmm_draws", "relabel_draws", "relabel_samples"]


def hmm_draws(samples: Mapping) -> HMMParams:
    """Posterior draws as one :class:`~bayeskde.hmm.HMMParams` with a draw axis.

    Args:
        samples: ``mcmc.get_samples()`` (or with ``group_by_chain=True``): the
            sites of :func:`bayesian_hmm_model` with any leading axes, which are
            flattened into one axis of ``S`` draws.

    Returns:
        ``HMMParams`` whose leaves have a leading axis ``S`` (log probabilities,
        diagonal Gaussian variances).
    """
    n = np.shape(samples["initial"])[-1]
    flat = {k: jnp.asarray(v).reshape((-1,) + np.shape(v)[-(1 if k == "initial"
                                                              else 2):])
            for k, v in samples.items()
            if k in ("initial", "transition", "emission_probs", "emission_mean",
                     "emission_var")}
    if flat["transition"].shape[-2:] != (n, n):
        raise ValueError("samples['transition'] must end in (N, N)")
    if "emission_probs" in flat:
        em = CategoricalEmission(jnp.log(flat["emission_probs"]))
    else:
        em = GaussianEmission(flat["emission_mean"], flat["emission_var"])
    return HMMParams(jnp.log(flat["initial"]), jnp.log(flat["transition"]), em)


def _emission_table(em):
    """Per-state coordinates of the emission distributions, ``(S, N, F)``."""
    if isinstance(em, CategoricalEmission):
        return np.exp(np.asarray(em.log_probs, np.float64))
    means = np.asarray(em.means, np.float64)
    sds = np.sqrt(np.asarray(em.covariances, np.float64))
    # Means in units of the draws' typical sd, and log sds: a Hellinger-like
    # distance that does not depend on the data's scale.
    scale = np.median(sds, axis=(0, 1), keepdims=True)
    return np.concatenate([means / scale, np.log(sds)], axis=-1)


def _permute(params: HMMParams, perms) -> HMMParams:
    perms = jnp.asarray(perms)
    take = jax.vmap(lambda a, p: a[p])
    trans = jax.vmap(lambda a, p: a[p][:, p])(params.log_transition, perms)
    em = jax.tree.map(lambda a: take(a, perms), params.emission)
    return HMMParams(take(params.log_initial, perms), trans, em)


def relabel_draws(
    draws: HMMParams, reference: HMMParams | None = None, *, n_iter: int = 3
) -> tuple[HMMParams, np.ndarray]:
    """Undo label switching: permute each draw's states to match a reference.

    For every draw the permutation minimising the summed squared distance between
    its states' emission distributions and the reference's is found by the
    Hungarian algorithm. Without a reference, the first draw starts it and the
    mean of the aligned draws replaces it ``n_iter`` times (Stephens 2000).
    Emission-based matching assumes the states' emissions differ; when two
    states emit alike the labelling is not identified by them.

    Cost: O(n_iter S (N^2 F + N^3)) on the host.

    Args:
        draws: ``HMMParams`` with a leading draw axis (:func:`hmm_draws`).
        reference: an un-batched ``HMMParams`` (e.g. the EM fit) to match.
        n_iter: reference re-estimation passes when ``reference`` is None.

    Returns:
        ``(aligned_draws, perms)``; ``perms`` ``(S, N)`` with
        ``aligned[s] state i = draws[s] state perms[s, i]``.
    """
    n_iter = check_integer(n_iter, "n_iter", minimum=1)
    table = _emission_table(draws.emission)
    if reference is not None:
        ref = _emission_table(jax.tree.map(lambda a: a[None], reference.emission))[0]
        n_iter = 1
    else:
        ref = table[0]
    n_draws, n_states = table.shape[:2]
    perms = np.tile(np.arange(n_states), (n_draws, 1))
    for _ in range(n_iter):
        cost = np.sum((table[:, None, :, :] - ref[None, :, None, :]) ** 2, -1)
        for s in range(n_draws):
            # cost[s, j, i]: reference state j vs draw state i
            _, perms[s] = linear_sum_assignment(cost[s])
        ref = np.mean(np.take_along_axis(table, perms[:, :, None], axis=1), axis=0)
    return _permute(draws, perms), perms


def relabel_samples(samples: Mapping, reference: HMMParams | None = None) -> dict:
    """:func:`relabel_draws` on a dict of sites with any leading axes.

    Sites of :func:`bayeskde.models.bayesian_hmm_model` are permuted along their
    state axes; other entries are passed through. Use it on
    ``mcmc.get_samples(group_by_chain=True)`` before diagnostics.

    Returns:
        A new dict; nothing passed in is mutated.
    """
    lead = np.shape(samples["initial"])[:-1]
    _, perms = relabel_draws(hmm_draws(samples), reference)
    perms = perms.reshape(lead + perms.shape[-1:])
    out = dict(samples)
    for name, value in samples.items():
        if name not in ("initial", "transition", "emission_probs", "emission_mean",
                        "emission_var"):
            continue
        a = np.asarray(value)
        ax = len(lead)
        p = perms.reshape(perms.shape + (1,) * (a.ndim - ax - 1))
        a = np.take_along_axis(a, p, axis=ax)
        if name == "transition":
            a = np.take_along_axis(a, perms[..., None, :], axis=ax + 1)
        out[name] = a
    return out
