"""Generative mean-map and probability product kernels between HMMs.

Each object (sequence) gets its own HMM; the kernel between two objects is the
GMMK (eqs. 5-6) or the rho = 1 probability product kernel (eq. 33) of their HMMs
over sequences of a fixed length, computed by the joint-state forward recursion of
:func:`bayeskde.meanmap.log_hmm_product_kernel`.

Per-object HMMs: fitting a separate HMM by EM to every short sequence is slow and
over-fits, so :func:`adapt_hmms` takes one MAP-style EM step from a pooled HMM:
``theta_x`` is proportional to the posterior expected counts of ``x`` under the
pooled HMM plus ``tau`` times the pooled probabilities (a Dirichlet prior centred
on the pooled HMM with strength ``tau`` per row; Gaussian means likewise, the
covariances stay pooled). With ``tau -> inf`` every object gets the pooled HMM.
This is the "posterior predictive of each object" of the design's Bayesian layer
in its simplest, conjugate form.

References:
    Mehta and Gray, eqs. (5)-(6), (33). Jebara, Kondor and Howard (2004),
    "Probability product kernels", section 4.3 (HMMs).
"""

from __future__ import annotations

from functools import partial

import jax
import jax.numpy as jnp
from jaxtyping import Array, Float

from .._typing import float_dtype
from .._validation import check_nonnegative, check_positive
from ..hmm import (
    CategoricalEmission,
    GaussianEmission,
    HMMParams,
    batch_posteriors,
)
from .closed_forms import (
    log_gaussian_gmmk_core,
    log_gaussian_ppk_core,
    log_hmm_product_kernel_core,
)

__all__ = [
    "emission_pair_log_kernel",
    "hmm_log_kernel",
    "hmm_log_kernel_gram",
    "adapt_hmms",
    "log_kernel_normalize",
]

KINDS = ("ppk", "gmmk")


def _full_covariances(cov):
    return jax.vmap(jnp.diag)(cov) if cov.ndim == 2 else cov


def emission_pair_log_kernel(
    em1, em2, *, kind: str = "ppk", gamma=1.0, symbol_kernel=None
) -> Float[Array, "n1 n2"]:
    """``log E_{x ~ b_i, y ~ b'_j} k(x, y)`` for all state pairs.

    ``kind="ppk"``: ``k`` is the Dirac kernel, i.e. ``log int b_i b'_j`` (eq. 33,
    rho = 1). ``kind="gmmk"``: ``k`` is the RBF with rate ``gamma`` (Gaussian
    emissions, closed form of eq. 5) or ``symbol_kernel`` ``L`` (categorical:
    ``log b_i^T L b'_j``).
    """
    if isinstance(em1, CategoricalEmission):
        p1, p2 = jnp.exp(em1.log_probs), jnp.exp(em2.log_probs)
        if kind == "gmmk":
            p2 = p2 @ symbol_kernel.T
        return jnp.log(p1 @ p2.T)
    S1 = _full_covariances(em1.covariances)
    S2 = _full_covariances(em2.covariances)
    if kind == "gmmk":
        fn = lambda m1, s1, m2, s2: log_gaussian_gmmk_core(m1, s1, m2, s2, gamma)  # noqa: E731
    else:
        fn = lambda m1, s1, m2, s2: log_gaussian_ppk_core(m1, s1, m2, s2, 1.0)  # noqa: E731
    inner = jax.vmap(fn, in_axes=(None, None, 0, 0))
    return jax.vmap(inner, in_axes=(0, 0, None, None))(em1.means, S1, em2.means, S2)


@partial(jax.jit, static_argnames=("length", "kind"))
def _hmm_log_kernel(p1, p2, gamma, symbol_kernel, *, length, kind):
    log_pair = emission_pair_log_kernel(
        p1.emission, p2.emission, kind=kind, gamma=gamma, symbol_kernel=symbol_kernel
    )
    mask = jnp.ones((length - 1,), bool)
    return log_hmm_product_kernel_core(
        p1.log_initial, p1.log_transition, p2.log_initial, p2.log_transition,
        log_pair, mask,
    )


def _resolve(p, kind, gamma, lam, length):
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {KINDS}, got {kind!r}")
    length = int(length)
    if length < 1:
        raise ValueError(f"length must be >= 1, got {length}")
    gamma = check_positive(gamma, "gamma")
    lam = check_nonnegative(lam, "lam") if lam != float("inf") else lam
    dtype = float_dtype()
    if isinstance(p.emission, CategoricalEmission):
        k = p.emission.log_probs.shape[-1]
        off = jnp.exp(-jnp.asarray(lam, dtype))
        L = (1.0 - off) * jnp.eye(k, dtype=dtype) + off
    else:
        L = jnp.eye(1, dtype=dtype)
    return length, jnp.asarray(gamma, dtype), L


def hmm_log_kernel(
    params1: HMMParams,
    params2: HMMParams,
    length: int,
    *,
    kind: str = "ppk",
    gamma: float = 1.0,
    lam: float = float("inf"),
) -> Float[Array, ""]:
    """Log GMMK / PPK between two HMMs over length-``length`` sequences.

    ``kind="gmmk"`` uses the RBF ``exp(-gamma sum_t ||x_t - y_t||^2)`` on the
    concatenated Gaussian sequences, or ``prod_t exp(-lam [x_t != y_t])`` on
    symbols (``lam = inf``: the delta kernel, where GMMK and rho = 1 PPK agree).
    Cost O(T N1 N2 (N1 + N2)).
    """
    length, g, L = _resolve(params1, kind, gamma, lam, length)
    return _hmm_log_kernel(params1, params2, g, L, length=length, kind=kind)


@partial(jax.jit, static_argnames=("length", "kind"))
def _hmm_log_kernel_gram(pa, pb, gamma, L, *, length, kind):
    def row(p1):
        return jax.vmap(
            lambda p2: _hmm_log_kernel(p1, p2, gamma, L, length=length, kind=kind)
        )(pb)

    return jax.lax.map(row, pa)


def hmm_log_kernel_gram(
    params_a: HMMParams,
    params_b: HMMParams | None = None,
    length: int = 10,
    *,
    kind: str = "ppk",
    gamma: float = 1.0,
    lam: float = float("inf"),
) -> Float[Array, "n_a n_b"]:
    """Log kernel matrix between two batches of HMMs (leaves with a leading axis,
    as :func:`adapt_hmms` returns them). Cost O(n_a n_b T N^3)."""
    params_b = params_a if params_b is None else params_b
    length, g, L = _resolve(params_a, kind, gamma, lam, length)
    return _hmm_log_kernel_gram(params_a, params_b, g, L, length=length, kind=kind)


@jax.jit
def log_kernel_normalize(
    log_K: Float[Array, "n_a n_b"],
    log_diag_a: Float[Array, " n_a"],
    log_diag_b: Float[Array, " n_b"],
) -> Float[Array, "n_a n_b"]:
    """Cosine normalisation done in log space: ``exp(log K_ab - (log K_aa +
    log K_bb) / 2)`` (the raw HMM kernels under- or overflow for long T)."""
    return jnp.exp(log_K - 0.5 * (log_diag_a[:, None] + log_diag_b[None, :]))


def _normalise_rows(counts):
    return jnp.log(counts / jnp.sum(counts, axis=-1, keepdims=True))


@jax.jit
def _adapt(params, padded, lengths, tau):
    post = batch_posteriors(params, padded, lengths)
    pi = jnp.exp(params.log_initial)
    A = jnp.exp(params.log_transition)
    log_pi = _normalise_rows(post.gamma[:, 0, :] + tau * pi[None, :])
    log_A = _normalise_rows(post.xi + tau * A[None])
    em = params.emission
    if isinstance(em, CategoricalEmission):
        B = jnp.exp(em.log_probs)
        onehot = jax.nn.one_hot(padded, B.shape[1], dtype=B.dtype)
        counts = jnp.einsum("btn,btk->bnk", post.gamma, onehot)
        emission = CategoricalEmission(_normalise_rows(counts + tau * B[None]))
    else:
        occ = jnp.sum(post.gamma, axis=1)  # (n, N)
        sums = jnp.einsum("btn,btd->bnd", post.gamma, padded)
        means = (sums + tau * em.means[None]) / (occ + tau)[..., None]
        cov = jnp.broadcast_to(em.covariances, means.shape[:1] + em.covariances.shape)
        emission = GaussianEmission(means, cov)
    return HMMParams(log_pi, log_A, emission)


def adapt_hmms(
    params: HMMParams, padded: Array, lengths: Array, *, tau: float = 1.0
) -> HMMParams:
    """One MAP EM step from the pooled HMM for every sequence (see module doc).

    Args:
        params: pooled HMM.
        padded, lengths: from ``bayeskde.hmm.pad_sequences``.
        tau: prior strength (> 0) in pseudo-observations per row.

    Returns:
        ``HMMParams`` whose leaves have a leading axis of size n. Cost
        O(n T N (N + K)).
    """
    tau = check_positive(tau, "tau")
    return _adapt(params, padded, lengths, jnp.asarray(tau, float_dtype()))
