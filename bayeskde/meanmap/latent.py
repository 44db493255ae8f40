"""Latent mean-map kernel (LMMK) on hidden Markov models: exact forms and feature maps.

An HMM's maximal cliques are ``(x_t, q_t)`` (``T`` instances) and ``(q_t, q_{t+1})``
(``T - 1`` instances). The latent mean map of a clique (eq. 20) averages the
clique's feature map over its instances under the posterior of the hidden states,
and the LMMK (eqs. 22-23) sums the clique-wise inner products. With the product
clique kernels of eqs. (27)-(28) and the state kernel ``l(i, j) = exp(-lam [i !=
j])`` (matrix ``L_N``), everything is a function of the smoothed marginals
``gamma_t(i)`` (eq. 25) and the pairwise marginals ``xi_t(i, j)`` (eq. 26):

* emission clique: ``v_xq = (1 / (T T')) sum_{s,t} k(x_s, x'_t) gamma_s^T L_N
  gamma'_t`` (eq. 31); in feature form ``<Psi, L_N Psi' M>`` with the
  per-sequence matrix ``Psi = (1/T) sum_t gamma_t phi(x_t)^T`` of shape ``(N, F)``
  (eq. 30) and ``M`` the metric of the feature space: for symbols ``phi`` is the
  1-of-K code, ``Psi`` the posterior expected (state, symbol) counts
  ``gamma_(a)(i) / T`` and ``M = L_K = exp(-lam [a != b])`` (eq. 29); for
  continuous data ``phi`` is an explicit (random Fourier or Taylor) map of the RBF
  and ``M = I``;
* transition clique: ``v_qq = <xi_bar, L_N xi_bar' L_N>`` with
  ``xi_bar = (1 / (T - 1)) sum_t xi_t`` (eq. 32).

The extracted eqs. (30)-(31) weight the matched-state term by ``1 + e^-lam``
(their second sum runs over all ``j``), unlike eq. (29) and eq. (32), whose
off-state sums exclude ``j = i``. We follow eqs. (27)-(29): ``L_N`` has ones on
its diagonal in every clique, so the kernel is one product kernel throughout.

Length-1 sequences have no transition-clique instances: their transition mean map
is the zero vector (the mean of an empty set of features is taken as 0), so they
contribute nothing to ``v_qq``; the kernel stays positive semi-definite.

Costs for ``n`` sequences of length ``T``, ``N`` states, ``F`` features: feature
maps O(n T N F), Gram O(n^2 N F) (plus O(n N F (N + F)) for the metrics); the
exact continuous form is O(n^2 T^2 (D + N)).

References:
    Mehta and Gray, "Generative and Latent Mean Map Kernels", eqs. (20)-(32).
    Rahimi and Recht (2007), random Fourier features; Steinwart and Christmann
    (2008), Theorem 4.6 (Taylor feature map of the Gaussian kernel).
"""

from __future__ import annotations

import math
from functools import partial
from typing import NamedTuple

import jax
import jax.numpy as jnp
from jaxtyping import Array, Float, Int

from ..kernels.standard import rbf_gram
from ..lowrank.features import fourier_features, rff_frequencies
from .closed_forms import symbol_kernel_matrix

__all__ = [
    "LatentFeatures",
    "discrete_latent_features",
    "continuous_latent_features",
    "lmmk_gram_from_features",
    "lmmk_diag_from_features",
    "continuous_emission_gram_exact",
    "rff_frequencies",
    "taylor_map",
    "taylor_dimension",
    "state_kernel_matrix",
    "relative_frobenius_error",
]


class LatentFeatures(NamedTuple):
    """Per-sequence latent mean maps of the two HMM clique types.

    Attributes:
        emission: ``(n, N, F)``: ``(1/T) sum_t gamma_t(i) phi(x_t)`` (eq. 30); for
            symbols ``F = K`` and it holds ``gamma_(a)(i) / T`` (eq. 29).
        transition: ``(n, N, N)``: ``xi_bar = xi / (T - 1)`` (eq. 32), zero for
            ``T = 1``.
    """

    emission: Array
    transition: Array


def state_kernel_matrix(n_states: int, lam: float) -> Float[Array, "n n"]:
    """``L_N[i, j] = exp(-lam [i != j])``, the latent-state kernel of eqs. (27)-(29)."""
    return symbol_kernel_matrix(n_states, lam)


def _transition_means(xi, lengths):
    denom = jnp.maximum(lengths - 1, 1).astype(xi.dtype)
    return xi / denom[:, None, None]


@partial(jax.jit, static_argnames="n_symbols")
def discrete_latent_features(
    gamma: Float[Array, "n t_max n_states"],
    obs: Int[Array, "n t_max"],
    xi: Float[Array, "n n_states n_states"],
    lengths: Int[Array, " n"],
    n_symbols: int,
) -> LatentFeatures:
    """Posterior expected clique counts of symbol sequences (eqs. 29, 32).

    ``gamma`` must be zero on padding (as ``bayeskde.hmm.batch_posteriors``
    returns it). Cost O(n T N K).
    """
    onehot = jax.nn.one_hot(obs, n_symbols, dtype=gamma.dtype)
    counts = jnp.einsum("btn,btk->bnk", gamma, onehot)
    emission = counts / lengths.astype(gamma.dtype)[:, None, None]
    return LatentFeatures(emission, _transition_means(xi, lengths))


@partial(jax.jit, static_argnames=("kind", "order"))
def continuous_latent_features(
    gamma: Float[Array, "n t_max n_states"],
    X: Float[Array, "n t_max d"],
    xi: Float[Array, "n n_states n_states"],
    lengths: Int[Array, " n"],
    rbf_gamma: Float[Array, ""],
    omega: Float[Array, "d m"] | None = None,
    *,
    kind: str = "rff",
    order: int = 3,
) -> LatentFeatures:
    """Explicit latent mean maps of continuous sequences (eq. 30).

    ``kind="rff"`` uses :func:`bayeskde.lowrank.fourier_features` with
    frequencies ``omega``;
    ``kind="taylor"`` uses :func:`taylor_map` of the given ``order``. ``gamma``
    must be zero on padding. Cost O(n T N F) plus the map's cost.

    Random Fourier features are computed in float32 whatever the input dtype
    (the result is returned in ``gamma``'s dtype): their Monte Carlo error,
    O(m^-1/2) relative (about 0.05 for m = 64, measured against the exact
    kernel in ``bench/hmm.py``), dwarfs float32 rounding (~1e-6 relative after
    the sum over ``T``), and the ``n T m`` sines and cosines, which dominate the
    whole Gram matrix, cost 2.5x as much in float64 (measured on 1,000 x 200
    steps, m = 64). The Gram matrix built from the features stays an exact inner
    product, hence positive semi-definite. The Taylor map keeps the input dtype:
    its truncation error can be far below float32 resolution.
    """
    if kind == "rff":
        low = jnp.float32

        def feature_map(x):
            return fourier_features(x.astype(low), omega.astype(low))
    elif kind == "taylor":
        low = gamma.dtype

        def feature_map(x):
            return taylor_map(x, rbf_gamma, order)
    else:
        raise ValueError(f"kind must be 'rff' or 'taylor', got {kind!r}")

    # Sequences in chunks of 32: the (chunk, T, F) feature maps stay small instead
    # of one (n, T, F) array (819 MB for 1,000 x 200 steps x 512 RFF in float64).
    def _one(args):
        g, x = args
        return g.astype(low).T @ feature_map(x)

    emission = jax.lax.map(_one, (gamma, X), batch_size=32).astype(gamma.dtype)
    emission = emission / lengths.astype(gamma.dtype)[:, None, None]
    return LatentFeatures(emission, _transition_means(xi, lengths))


def _apply_metrics(state_kernel, emission, feature_metric):
    if feature_metric is None:
        return jnp.einsum("nm,bmf->bnf", state_kernel, emission)
    return jnp.einsum("nm,bmf,fg->bng", state_kernel, emission, feature_metric)


@jax.jit
def lmmk_gram_from_features(
    fa: LatentFeatures,
    fb: LatentFeatures,
    state_kernel: Float[Array, "n_states n_states"],
    feature_metric: Float[Array, "f f"] | None,
) -> Float[Array, "n_a n_b"]:
    """LMMK Gram matrix ``v_xq + v_qq`` from latent mean maps (eqs. 22, 29-32).

    ``feature_metric`` is ``L_K`` for symbols and the identity for explicit RBF
    features; ``None`` stands for the identity and skips its ``F x F`` product.
    Cost O(n_b N F (N + F) + n_a n_b N (F + N)) (no ``F^2`` term with ``None``).
    """
    eb = _apply_metrics(state_kernel, fb.emission, feature_metric)
    tb = jnp.einsum("ik,bkl,jl->bij", state_kernel, fb.transition, state_kernel)
    na, nb = fa.emission.shape[0], eb.shape[0]
    k_xq = fa.emission.reshape(na, -1) @ eb.reshape(nb, -1).T
    k_qq = fa.transition.reshape(na, -1) @ tb.reshape(nb, -1).T
    return k_xq + k_qq


@jax.jit
def lmmk_diag_from_features(
    f: LatentFeatures,
    state_kernel: Float[Array, "n_states n_states"],
    feature_metric: Float[Array, "f f"] | None,
) -> Float[Array, " n"]:
    """Self-similarities ``k(x, x)`` of the LMMK, O(n N F (N + F));
    ``feature_metric=None`` is the identity."""
    e2 = _apply_metrics(state_kernel, f.emission, feature_metric)
    t2 = jnp.einsum("ik,bkl,jl->bij", state_kernel, f.transition, state_kernel)
    return jnp.sum(f.emission * e2, axis=(1, 2)) + jnp.sum(f.transition * t2,
                                                           axis=(1, 2))


def pair_emission_exact(xa, ga, la, xb, gb, lb, rbf_gamma, state_kernel):
    weights = ga @ state_kernel @ gb.T  # zero rows/columns on padding
    return jnp.sum(rbf_gram(xa, xb, rbf_gamma) * weights) / (la * lb)


@jax.jit
def continuous_emission_gram_exact(
    Xa: Float[Array, "n_a ta d"],
    Ga: Float[Array, "n_a ta n_states"],
    La: Int[Array, " n_a"],
    Xb: Float[Array, "n_b tb d"],
    Gb: Float[Array, "n_b tb n_states"],
    Lb: Int[Array, " n_b"],
    rbf_gamma: Float[Array, ""],
    state_kernel: Float[Array, "n_states n_states"],
) -> Float[Array, "n_a n_b"]:
    """Exact continuous emission-clique LMMK, eq. (31): O(n_a n_b T^2 (D + N)).

    Rows are computed one at a time (``lax.map``) so memory is O(n_b T^2).
    """
    La = La.astype(Xa.dtype)
    Lb = Lb.astype(Xa.dtype)

    def row(args):
        xa, ga, la = args
        return jax.vmap(
            lambda xb, gb, lb: pair_emission_exact(
                xa, ga, la, xb, gb, lb, rbf_gamma, state_kernel
            )
        )(Xb, Gb, Lb)

    return jax.lax.map(row, (Xa, Ga, La))


def taylor_dimension(dim: int, order: int) -> int:
    """Number of features of :func:`taylor_map`: ``sum_{k<=order} dim^k``."""
    return sum(dim**k for k in range(order + 1))


def taylor_map(
    x: Float[Array, "t d"], gamma: float | Float[Array, ""], order: int
) -> Float[Array, "t f"]:
    """Truncated Taylor feature map of ``exp(-gamma ||x - y||^2)``.

    ``k(x, y) = e^{-gamma |x|^2} e^{-gamma |y|^2} sum_k (2 gamma)^k (x . y)^k / k!``
    and ``(x . y)^k = <x^{(x)k}, y^{(x)k}>``; keeping ``k <= order`` gives
    ``sum_k D^k`` features whose inner product underestimates the kernel by the
    tail ``sum_{k > order}``, at most ``e^{-gamma(|x| - |y|)^2}
    (2 gamma |x||y|)^{p+1} / (p+1)! * e^{2 gamma |x||y|}`` (Steinwart and
    Christmann 2008, Theorem 4.6). Useful for small ``D`` and ``gamma |x|^2``.
    """
    t, d = x.shape
    scale = jnp.exp(-gamma * jnp.sum(x * x, axis=-1))
    blocks = [jnp.ones((t, 1), x.dtype)]
    power = jnp.ones((t, 1), x.dtype)
    for k in range(1, order + 1):
        power = (power[:, :, None] * x[:, None, :]).reshape(t, d**k)
        coef = jnp.sqrt((2.0 * gamma) ** k / math.factorial(k)).astype(x.dtype)
        blocks.append(coef * power)
    return scale[:, None] * jnp.concatenate(blocks, axis=1)


def relative_frobenius_error(
    K_exact: Float[Array, "n m"], K_approx: Float[Array, "n m"]
) -> Float[Array, ""]:
    """``||K_approx - K_exact||_F / ||K_exact||_F``: the feature maps' error."""
    return jnp.linalg.norm(K_approx - K_exact) / jnp.linalg.norm(K_exact)
