"""Mean-map kernels averaged over the posterior of the Bayesian HMM.

* :func:`posterior_latent_mean_map_gram`: the latent mean map (Mehta and Gray,
  eq. 20) with the posterior of the hidden states integrated over the parameter
  posterior too (embeddings averaged over relabelled draws, or per-draw kernels
  averaged);
* :func:`posterior_generative_mean_map_gram`: the GMMK (eqs. 5-6) / rho = 1 PPK
  (eq. 33) between the posterior predictive distributions of the objects.

References:
    Mehta and Gray, "Generative and Latent Mean Map Kernels", eqs. (5)-(6),
    (20)-(23), (29)-(33).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np
from jax.scipy.special import logsumexp
from jaxtyping import Array, Float

from .._linalg import float_dtype as _float
from .._typing import ArrayLike
from .._validation import check_integer, check_nonnegative, check_positive
from ..hmm import (
    CategoricalEmission,
    HMMParams,
    batch_posteriors,
    pad_sequences,
)
from ..meanmap import (
    LatentFeatures,
    adapt_hmms,
    continuous_emission_gram_exact,
    discrete_latent_features,
    hmm_log_kernel_gram,
    lmmk_gram_from_features,
    state_kernel_matrix,
    symbol_kernel_matrix,
)
from .hmm_relabel import relabel_draws

__all__ = ["posterior_latent_mean_map_gram", "posterior_generative_mean_map_gram"]


def _check_draws(draws):
    if not isinstance(draws, HMMParams):
        raise TypeError(f"draws must be HMMParams, got {type(draws).__name__}")
    shape = np.shape(draws.log_initial)
    if len(shape) != 2 or shape[0] < 1:
        raise ValueError(
            f"draws must have a leading draw axis, log_initial (S, N) with S >= 1, "
            f"got {shape}"
        )
    em = draws.emission
    logs = [draws.log_initial, draws.log_transition]
    if isinstance(em, CategoricalEmission):
        logs.append(em.log_probs)
    else:
        for name, leaf in (("means", em.means), ("covariances", em.covariances)):
            if not np.all(np.isfinite(np.asarray(leaf))):
                raise ValueError(f"draws.emission.{name} contain NaN or inf")
        if not np.all(np.asarray(em.covariances) > 0):
            raise ValueError("draws.emission.covariances must be > 0")
    for leaf in logs:  # log probabilities: -inf (probability 0) is allowed
        a = np.asarray(leaf)
        if np.isnan(a).any() or np.isposinf(a).any():
            raise ValueError("draws contain NaN or +inf log probabilities")
    return shape[0]


def _pad(sequences, name, draws):
    if sequences is None or isinstance(sequences, np.ndarray | jax.Array):
        raise TypeError(f"{name} must be a list of sequences")
    categorical = isinstance(draws.emission, CategoricalEmission)
    n_symbols = draws.emission.log_probs.shape[-1] if categorical else None
    try:
        padded, lengths = pad_sequences(list(sequences), n_symbols=n_symbols)
    except (ValueError, TypeError) as err:
        raise type(err)(f"{name}: {err}") from err
    if categorical != (padded.ndim == 2):
        raise ValueError(
            f"{name}: the draws have {type(draws.emission).__name__}, which needs "
            + ("(T_i,) int symbols" if categorical else "(T_i, D) floats")
        )
    if not categorical and padded.shape[2] != draws.emission.means.shape[-1]:
        raise ValueError(
            f"{name}: sequences have D = {padded.shape[2]}, the draws "
            f"D = {draws.emission.means.shape[-1]}"
        )
    return padded, lengths


def _chunked(draws, chunk):
    """Draws as ``(n_chunks, chunk, ...)`` plus weights ``1/S`` (0 on padding)."""
    s = draws.log_initial.shape[0]
    n_chunks = -(-s // chunk)
    idx = np.minimum(np.arange(n_chunks * chunk), s - 1)
    w = np.where(np.arange(n_chunks * chunk) < s, 1.0 / s, 0.0)
    dtype = draws.log_initial.dtype
    shaped = jax.tree.map(lambda a: a[idx].reshape((n_chunks, chunk) + a.shape[1:]),
                          draws)
    return shaped, jnp.asarray(w.reshape(n_chunks, chunk), dtype)


def _draw_mean(fn, draws, weights, init):
    """``sum_s w_s fn(draw_s)``: ``vmap`` within a chunk, ``scan`` over chunks."""

    def _step(acc, x):
        d, w = x
        out = jax.vmap(fn)(d)
        return jax.tree.map(
            lambda a, o: a + jnp.tensordot(w, o, axes=1), acc, out
        ), None

    total, _ = jax.lax.scan(_step, init, (draws, weights))
    return total


def _lmmk_from_posteriors(pa, pb, L, M, gamma, n_symbols):
    """LMMK (eqs. 22, 29-32) from ``(padded, lengths, gamma, xi)`` of A and B;
    ``L`` the state kernel, ``M`` the symbol kernel (unused for Gaussians)."""
    xa, la, ga, xia = pa
    xb, lb, gb, xib = pb
    if n_symbols is not None:
        fa = discrete_latent_features(ga, xa, xia, la, n_symbols)
        fb = discrete_latent_features(gb, xb, xib, lb, n_symbols)
        return lmmk_gram_from_features(fa, fb, L, M)

    def trans(xi, lengths):
        zero = jnp.zeros(xi.shape[:2] + (1,), xi.dtype)
        return LatentFeatures(zero, xi / jnp.maximum(lengths - 1, 1)[:, None, None])

    one = jnp.eye(1, dtype=ga.dtype)
    k_qq = lmmk_gram_from_features(trans(xia, la), trans(xib, lb), L, one)
    return k_qq + continuous_emission_gram_exact(xa, ga, la, xb, gb, lb, gamma, L)


@partial(jax.jit, static_argnames=("average", "n_symbols", "same"))
def _posterior_lmmk(draws, weights, xa, la, xb, lb, L, M, gamma, *, average,
                    n_symbols, same):
    n_states = L.shape[0]

    def post(p, x, lens):
        q = batch_posteriors(p, x, lens)
        return q.gamma, q.xi

    def zeros(x):
        return (jnp.zeros(x.shape[:2] + (n_states,), weights.dtype),
                jnp.zeros((x.shape[0], n_states, n_states), weights.dtype))

    if average == "features":
        if same:
            ga, xia = _draw_mean(lambda p: post(p, xa, la), draws, weights, zeros(xa))
            gb, xib = ga, xia
        else:
            (ga, xia), (gb, xib) = _draw_mean(
                lambda p: (post(p, xa, la), post(p, xb, lb)), draws, weights,
                (zeros(xa), zeros(xb)))
        return _lmmk_from_posteriors((xa, la, ga, xia), (xb, lb, gb, xib), L, M,
                                     gamma, n_symbols)

    def gram(p):
        ga, xia = post(p, xa, la)
        gb, xib = (ga, xia) if same else post(p, xb, lb)
        return _lmmk_from_posteriors((xa, la, ga, xia), (xb, lb, gb, xib), L, M,
                                     gamma, n_symbols)

    init = jnp.zeros((xa.shape[0], xb.shape[0]), weights.dtype)
    return _draw_mean(gram, draws, weights, init)


def posterior_latent_mean_map_gram(
    draws: HMMParams,
    sequences_A: Sequence[ArrayLike],
    sequences_B: Sequence[ArrayLike] | None = None,
    lam: float = 1.0,
    *,
    average: str = "features",
    gamma: float = 1.0,
    relabel: bool = True,
    chunk: int = 16,
) -> Float[Array, "n_a n_b"]:
    """Latent mean-map kernel averaged over posterior draws of the HMM.

    ``average="features"`` (default): the embedding of a sequence ``x`` is the
    posterior expectation of its clique features under the *joint* posterior of
    the hidden states and the parameters,
    ``mu(x) = E_{theta | D} E_{Y | x, theta} phi(x, Y)``: eq. (20) with
    ``P(Y | x, theta)`` replaced by ``P(Y | x, D) = E_theta P(Y | x, theta)``.
    That is what eq. (20) asks for once ``theta`` is uncertain, and the LMMK is
    the inner product of these averaged embeddings (eq. 22). Because the clique
    features enter linearly, averaging them is averaging the marginals
    ``gamma_t(i)`` and ``xi_t(i, j)`` over draws and using the averages in eqs.
    (29)-(32) (eq. 31 exactly for Gaussian emissions, RBF rate ``gamma``). It
    needs the draws' labels aligned, so ``relabel=True`` first applies
    :func:`relabel_draws`.

    ``average="kernel"``: the mean over draws of each draw's LMMK,
    ``E_theta <mu_theta(x), mu_theta(x')>`` (the inner product of the draws'
    stacked embeddings). It is invariant to the labelling, adds the posterior
    variance of the embeddings to every entry, and costs a Gram per draw.

    Both are positive semi-definite; with every draw equal to one ``theta`` both
    equal the LMMK of ``theta`` (:class:`bayeskde.meanmap.LatentMeanMapKernel`).

    Cost: ``features``: O(S (n_a + n_b) T N^2) for the marginals plus one Gram,
    O(n_a n_b N (N + K)) for symbols, O(n_a n_b T^2 (D + N)) for Gaussians;
    ``kernel``: S Grams. Memory O(chunk (n_a + n_b) T N + n_a n_b).

    Args:
        draws: ``HMMParams`` with a leading axis of ``S`` draws (:func:`hmm_draws`).
        sequences_A: list of ``(T_i,)`` int or ``(T_i, D)`` float sequences.
        sequences_B: second list (default ``sequences_A``).
        lam: ``lambda >= 0`` of the state and symbol kernels ``exp(-lam [i != j])``
            (eqs. 27-32); ``inf`` gives delta kernels.
        average: ``"features"`` or ``"kernel"`` (see above).
        gamma: RBF rate of the observation kernel (Gaussian emissions).
        relabel: align the draws' labels first (``average="features"`` only).
        chunk: draws processed together by ``vmap``.

    Returns:
        ``(n_a, n_b)`` raw kernel matrix (cosine-normalise it for an SVM).

    Raises:
        ValueError / TypeError: bad draws, sequences or options.
    """
    if average not in ("features", "kernel"):
        raise ValueError(f"average must be 'features' or 'kernel', got {average!r}")
    n_draws = _check_draws(draws)
    lam = float(lam)
    lam = lam if lam == math.inf else check_nonnegative(lam, "lam")
    gamma = check_positive(gamma, "gamma")
    chunk = check_integer(chunk, "chunk", minimum=1)
    dtype = _float()
    draws = jax.tree.map(lambda a: jnp.asarray(a, dtype), draws)
    xa, la = _pad(sequences_A, "sequences_A", draws)
    xb, lb = (xa, la) if sequences_B is None else _pad(sequences_B, "sequences_B",
                                                      draws)
    if average == "features" and relabel and n_draws > 1:
        draws, _ = relabel_draws(draws)
    categorical = isinstance(draws.emission, CategoricalEmission)
    n_symbols = int(draws.emission.log_probs.shape[-1]) if categorical else None
    n_states = draws.log_initial.shape[-1]
    L = state_kernel_matrix(n_states, lam).astype(dtype)
    M = symbol_kernel_matrix(n_symbols if categorical else 1, lam).astype(dtype)
    shaped, weights = _chunked(draws, min(chunk, n_draws))
    return _posterior_lmmk(
        shaped, weights, xa, la, xb, lb, L, M, jnp.asarray(gamma, dtype),
        average=average, n_symbols=n_symbols, same=sequences_B is None,
    )


def _stack_objects(draws, padded, lengths, tau):
    """Per-draw, per-object HMMs ``adapt_hmms(theta_s, x)``, flattened to
    ``(S n, ...)`` with the object index fastest."""
    many = jax.vmap(lambda p: adapt_hmms(p, padded, lengths, tau=tau))(draws)
    return jax.tree.map(lambda a: a.reshape((-1,) + a.shape[2:]), many)


def _block_logsumexp(logG, s, n_a, n_b):
    """``log mean_{s, s'} exp(logG[(s, a), (s', b)])``: ``(n_a, n_b)``."""
    blocks = logG.reshape(s, n_a, s, n_b)
    return logsumexp(blocks, axis=(0, 2)) - 2.0 * math.log(s)


def posterior_generative_mean_map_gram(
    draws: HMMParams,
    sequences_A: Sequence[ArrayLike],
    sequences_B: Sequence[ArrayLike] | None = None,
    *,
    length: int = 10,
    kind: str = "ppk",
    gamma: float = 1.0,
    lam: float = math.inf,
    tau: float = 1.0,
    normalize: bool = True,
) -> Float[Array, "n_a n_b"]:
    """GMMK / PPK between the posterior predictive distributions of objects.

    Each posterior draw ``theta_s`` of the pooled HMM gives object ``x`` its own
    HMM ``theta_{x,s}`` by one conjugate (MAP) update towards ``x`` with prior
    strength ``tau`` (:func:`bayeskde.meanmap.adapt_hmms`). Object ``x``'s
    posterior predictive over length-``length`` sequences is the mixture
    ``P_x = (1/S) sum_s P(. | theta_{x,s})``. The mean map is linear in the
    distribution, so the GMMK of eqs. (5)-(6) (or the rho = 1 PPK of eq. 33)
    between two such mixtures is exactly the mean of the ``S x S`` kernels
    between their components: ``K(x, y) = (1/S^2) sum_{s,s'}
    k(theta_{x,s}, theta_{y,s'})``, a positive semi-definite kernel; it is
    computed in log space (``logsumexp`` over the blocks of
    :func:`bayeskde.meanmap.hmm_log_kernel_gram`). Invariant to the labelling.

    Cost: O((S n_a) (S n_b) length N^3) time, O(S^2 n_a n_b) memory: thin the
    draws (S of 5-20 is typical).

    Args:
        draws: ``HMMParams`` with a leading axis of ``S`` draws.
        sequences_A, sequences_B: lists of sequences (B defaults to A).
        length: sequence length of the predictive distributions compared.
        kind: ``"ppk"`` or ``"gmmk"`` (see :func:`bayeskde.meanmap.hmm_log_kernel`).
        gamma: RBF rate (Gaussian ``gmmk``); lam: symbol kernel (categorical).
        tau: prior strength of the per-object update (> 0).
        normalize: cosine-normalise (in log space); otherwise return the raw
            kernel, which can under- or overflow for long ``length``.

    Returns:
        ``(n_a, n_b)`` kernel matrix.
    """
    n_draws = _check_draws(draws)
    length = check_integer(length, "length", minimum=1)
    tau = check_positive(tau, "tau")
    dtype = _float()
    draws = jax.tree.map(lambda a: jnp.asarray(a, dtype), draws)
    xa, la = _pad(sequences_A, "sequences_A", draws)
    objs_a = _stack_objects(draws, xa, la, tau)
    kw = dict(length=length, kind=kind, gamma=gamma, lam=lam)

    def self_log_diag(x, objs):
        # k(x, x) needs only the S x S block of each object with itself.
        n = x.shape[0]
        per = jax.tree.map(lambda a: jnp.swapaxes(
            a.reshape((n_draws, n) + a.shape[1:]), 0, 1), objs)
        blocks = jax.vmap(lambda p: logsumexp(hmm_log_kernel_gram(p, **kw)))(per)
        return blocks - 2.0 * math.log(n_draws)

    if sequences_B is None:
        log_k = _block_logsumexp(hmm_log_kernel_gram(objs_a, **kw), n_draws,
                                 xa.shape[0], xa.shape[0])
        if not normalize:
            return jnp.exp(log_k)
        d = jnp.diagonal(log_k)
        return jnp.exp(log_k - 0.5 * (d[:, None] + d[None, :]))
    xb, lb = _pad(sequences_B, "sequences_B", draws)
    objs_b = _stack_objects(draws, xb, lb, tau)
    log_k = _block_logsumexp(hmm_log_kernel_gram(objs_a, objs_b, **kw), n_draws,
                             xa.shape[0], xb.shape[0])
    if not normalize:
        return jnp.exp(log_k)
    da = self_log_diag(xa, objs_a)
    db = self_log_diag(xb, objs_b)
    return jnp.exp(log_k - 0.5 * (da[:, None] + db[None, :]))
