"""Kernel PCA without an n x n eigendecomposition: Nystroem and randomised.

Both keep :mod:`bayeskde.kpca`'s normalisation: eigenvalues are those of the
centred Gram matrix V itself, the feature-space directions v_n have unit length
(lambda_n (a_n . a_n) = 1, Weston et al. 2002 section 3 step 1; Schölkopf et al.
1998 eq. (16)), and the sign of each component makes its largest-magnitude
training projection positive.

- :func:`nystroem_kpca`: PCA of the centred Nystroem features Phi (``n x M``):
  eigh of the M x M scatter Phi_c^T Phi_c = W^T K_nM^T H K_nM W, whose
  eigenvalues equal those of the centred approximate Gram Phi_c Phi_c^T. A
  point projects as (Phi(x) - mean Phi) . v_n = k(x, C) @ coef - offset, O(M)
  per point and component. With all points as centres it is exact KPCA.
- :func:`randomized_kpca`: Halko, Martinsson and Tropp (2011), Algorithm 4.4
  (randomised range finder with q power iterations, QR between them) and
  Algorithm 5.3 (direct eigendecomposition of Q^T V Q), applied to the centred
  Gram through blocked products V W = H K H W, so K is never held. It returns a
  :class:`bayeskde.kpca.KPCAResult`, usable with :func:`bayeskde.kpca.kpca_transform`.
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp
from jaxtyping import Array, Float

from .._typing import ArrayLike
from .._validation import as_float_array, check_gram, check_integer
from ..lowrank.blocked import (
    check_apply_args,
    matmul_core,
    resolve_vector_kernel,
    split_kernel,
)
from ..lowrank.features import nystroem_normalizer
from ..lowrank.krr import feature_scatter
from .core import KPCAResult

__all__ = [
    "LowRankKPCA",
    "nystroem_kpca",
    "lowrank_kpca_transform",
    "randomized_kpca",
]


class LowRankKPCA(NamedTuple):
    """Kernel PCA in Nystroem coordinates: projection(x) = k(x, centers) @ coef -
    offset.

    Attributes:
        eigenvalues: ``(p,)`` eigenvalues of the centred approximate Gram,
            descending, clipped at zero.
        centers: ``(M, d)`` centres.
        coef: ``(M, p)`` W v_n (W the Nystroem normaliser, v_n unit eigenvectors of
            the centred feature scatter).
        offset: ``(p,)`` mean feature projected, mean_i Phi(x_i) . v_n.
    """

    eigenvalues: Float[Array, " n_components"]
    centers: Float[Array, "n_centers n_features"]
    coef: Float[Array, "n_centers n_components"]
    offset: Float[Array, " n_components"]


def _fix_signs(P):
    """+1/-1 per column making the largest-magnitude entry of P positive."""
    idx = jnp.argmax(jnp.abs(P), axis=0)
    s = jnp.sign(P[idx, jnp.arange(P.shape[1])])
    return jnp.where(s == 0, 1.0, s).astype(P.dtype)


@functools.partial(
    jax.jit, static_argnames=("spec", "n_components", "block_size")
)
def _nystroem_kpca_jit(spec, theta, X, C, n_components, block_size):
    n = X.shape[0]
    W = nystroem_normalizer(spec, theta, C)
    # Scatter and mean of the features Phi = K_nM W, accumulated blockwise.
    S, mu = feature_scatter(spec, theta, X, C, W,
                            jnp.full((n, 1), 1.0 / n, X.dtype), block_size)
    mu = mu[:, 0]
    Sc = S - n * jnp.outer(mu, mu)
    Sc = 0.5 * (Sc + Sc.T)
    evals, V = jnp.linalg.eigh(Sc)
    evals, V = evals[::-1][:n_components], V[:, ::-1][:, :n_components]
    evals = jnp.maximum(evals, 0.0)  # round-off leaves tiny negatives
    coef = W @ V
    offset = mu @ V
    proj = matmul_core(spec, theta, X, C, coef, block_size) - offset[None, :]
    s = _fix_signs(proj)
    return LowRankKPCA(evals, C, coef * s[None, :], offset * s)


def nystroem_kpca(
    kernel,
    X: Float[ArrayLike, "n_samples n_features"],
    centers: Float[ArrayLike, "n_centers n_features_c"],
    n_components: int | None = None,
    *,
    params=None,
    block_size: int | None = None,
) -> LowRankKPCA:
    """Kernel PCA of X through the Nystroem features on ``centers``.

    Args:
        kernel, params: a vector kernel (``"rbf"``, ``"polynomial"``, ``"linear"``).
        X: ``(n, d)`` data; centers: ``(M, d)``.
        n_components: p <= M; ``None`` keeps M.
        block_size: rows of K(X, C) formed at once; ``None`` forms it whole.

    Returns:
        :class:`LowRankKPCA`.

    Raises:
        ValueError: shape mismatches, NaN/inf, ``n_components`` out of range.

    Cost: O(n M (d + M) + M^3) time; O(M^2 + block_size M) memory with
    ``block_size``.
    """
    k = resolve_vector_kernel(kernel, params)
    X = as_float_array(X, "X", ndim=2)
    C = as_float_array(centers, "centers", ndim=2)
    if C.shape[1] != X.shape[1]:
        raise ValueError(
            f"centers must have {X.shape[1]} features (as X), got shape {C.shape}"
        )
    m = C.shape[0]
    p = m if n_components is None else check_integer(
        n_components, "n_components", minimum=1, maximum=m)
    bs = None if block_size is None else check_integer(block_size, "block_size")
    spec, theta = split_kernel(k)
    return _nystroem_kpca_jit(spec, theta, X, C, p, bs)


_matmul_jit = jax.jit(matmul_core, static_argnames=("spec", "block_size"))


def lowrank_kpca_transform(
    kernel,
    result: LowRankKPCA,
    X: Float[ArrayLike, "n_test n_features"],
    *,
    params=None,
    block_size: int | None = None,
) -> Float[Array, "n_test n_components"]:
    """Project new points on a :class:`LowRankKPCA`: ``(n_test, p)``.

    Cost: O(n_test M (d + p)) time, O(block_size M) memory.
    """
    spec, theta, X, bs = check_apply_args(kernel, params, X, result.centers,
                                          block_size)
    return _matmul_jit(spec, theta, X, result.centers, result.coef, bs) - \
        result.offset[None, :]


def _centred_op(apply):
    """V w = H K H w for the centring matrix H = I - 11^T / n."""
    def op(Wm):
        Wc = Wm - jnp.mean(Wm, axis=0, keepdims=True)
        KW = apply(Wc)
        return KW - jnp.mean(KW, axis=0, keepdims=True)
    return op


def _randomized_core(key, apply, col_means, n, dtype, n_components, width, n_iter):
    op = _centred_op(apply)
    Q = jnp.linalg.qr(op(jax.random.normal(key, (n, width), dtype)))[0]
    for _ in range(n_iter):
        Q = jnp.linalg.qr(op(Q))[0]
    B = Q.T @ op(Q)
    evals, U = jnp.linalg.eigh(0.5 * (B + B.T))
    evals = jnp.maximum(evals[::-1][:n_components], 0.0)
    U = Q @ U[:, ::-1][:, :n_components]
    U = U * _fix_signs(U)[None, :]
    eps = jnp.finfo(dtype).eps * jnp.maximum(evals[0], 1.0) * n
    inv_sqrt = jnp.where(evals > eps, 1.0 / jnp.sqrt(jnp.maximum(evals, eps)), 0.0)
    return KPCAResult(evals, U * inv_sqrt[None, :], col_means, jnp.mean(col_means))


@functools.partial(
    jax.jit,
    static_argnames=("spec", "n_components", "width", "n_iter", "block_size"),
)
def _randomized_kernel_jit(key, spec, theta, X, n_components, width, n_iter,
                           block_size):
    n = X.shape[0]

    def apply(Wm):
        return matmul_core(spec, theta, X, X, Wm, block_size)

    col = apply(jnp.full((n, 1), 1.0 / n, X.dtype))[:, 0]
    return _randomized_core(key, apply, col, n, X.dtype, n_components, width,
                            n_iter)


@functools.partial(jax.jit, static_argnames=("n_components", "width", "n_iter"))
def _randomized_gram_jit(key, K, n_components, width, n_iter):
    n = K.shape[0]
    return _randomized_core(
        key, lambda Wm: K @ Wm, jnp.mean(K, axis=0), n, K.dtype, n_components,
        width, n_iter)


def randomized_kpca(
    key: jax.Array,
    kernel,
    X: Float[ArrayLike, "n_samples n_cols"],
    n_components: int,
    *,
    params=None,
    n_oversamples: int = 10,
    n_iter: int = 2,
    block_size: int | None = None,
) -> KPCAResult:
    """Kernel PCA by a randomised eigensolver on the centred Gram (Halko et al.
    2011, Algorithms 4.4 and 5.3).

    Args:
        key: a ``jax.random`` key (the Gaussian test matrix).
        kernel, params: a vector kernel, or ``"precomputed"`` (then X is the
            ``(n, n)`` Gram matrix).
        X: ``(n, d)`` data or the Gram matrix.
        n_components: p in ``[1, n]``.
        n_oversamples: extra columns of the sketch (l = p + n_oversamples, at most
            n).
        n_iter: power iterations q (each one more pass over K).
        block_size: rows of K formed at once (kernels only); ``None`` forms K.

    Returns:
        :class:`bayeskde.kpca.KPCAResult` (alphas over the training points).

    Raises:
        ValueError: bad shapes, NaN/inf, out-of-range integers.

    Cost: O((q + 2) n^2 (d + l)) time for a kernel (O((q + 2) n^2 l) for a Gram),
    O(n l + block_size n) memory.
    """
    p_n = "precomputed"
    if isinstance(kernel, str) and kernel == p_n:
        K = check_gram(X, "X", what="a square Gram matrix (kernel='precomputed')")
        n = K.shape[0]
    else:
        k = resolve_vector_kernel(kernel, params)
        X = as_float_array(X, "X", ndim=2)
        n = X.shape[0]
    p = check_integer(n_components, "n_components", minimum=1, maximum=n)
    over = check_integer(n_oversamples, "n_oversamples", minimum=0)
    q = check_integer(n_iter, "n_iter", minimum=0)
    width = min(n, p + over)
    if isinstance(kernel, str) and kernel == p_n:
        return _randomized_gram_jit(key, K, p, width, q)
    bs = None if block_size is None else check_integer(block_size, "block_size")
    spec, theta = split_kernel(k)
    return _randomized_kernel_jit(key, spec, theta, X, p, width, q, bs)
