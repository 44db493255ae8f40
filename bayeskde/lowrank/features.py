"""Finite-dimensional kernel features: Nystroem (with centre selection) and random
Fourier features.

Nystroem (Williams and Seeger 2001): with centres C and K_CC = U S U^T, the map
Phi(x) = k(x, C) U S^{-1/2} gives Phi(x) . Phi(y) = k(x, C) K_CC^+ k(C, y), exact
when C holds all training points. Centres are chosen uniformly, by k-means++ seeding
in the kernel's feature space (Arthur and Vassilvitskii 2007, D^2 sampling with
d^2(x, c) = k(x,x) + k(c,c) - 2 k(x,c)), or by approximate ridge leverage scores
(Alaoui and Mahoney 2015; the estimator of Musco and Musco 2017, eq. (3):
l_i ~ (k_ii - k_iS (K_SS + lam I)^-1 k_Si) / lam from a uniform pilot set S).

Random Fourier features (Rahimi and Recht 2007) for the RBF kernel
exp(-gamma ||x - y||^2): z(x) = sqrt(2/D) cos(W^T x + b), W ~ N(0, 2 gamma I),
b ~ U[0, 2 pi], so E[z(x) . z(y)] = k(x, y).
"""

from __future__ import annotations

import functools
import math
from typing import NamedTuple

import jax
import jax.numpy as jnp
import jax.scipy.linalg as jsl
from jaxtyping import Array, Float, Int

from .._linalg import eps_floor
from .._typing import ArrayLike, float_dtype
from .._validation import as_float_array, check_integer, check_positive
from .blocked import (
    block_map,
    check_apply_args,
    diag_fn,
    gram_fn,
    matmul_core,
    resolve_vector_kernel,
    split_kernel,
)

__all__ = [
    "CENTER_METHODS",
    "select_centers",
    "NystroemMap",
    "nystroem_features",
    "nystroem_transform",
    "RFFMap",
    "rff_map",
    "rff_frequencies",
    "fourier_features",
    "rff_transform",
]

CENTER_METHODS = ("uniform", "kmeans++", "leverage")


def _uniform(key, n, m):
    return jax.random.choice(key, n, (m,), replace=False)


def _kmeanspp(key, spec, theta, X, m):
    diag = diag_fn(spec, theta, X)

    def dist(j):
        kj = gram_fn(spec, theta, X, jax.lax.dynamic_slice_in_dim(X, j, 1))[:, 0]
        return jnp.maximum(diag + diag[j] - 2.0 * kj, 0.0)

    key, sub = jax.random.split(key)
    first = jax.random.randint(sub, (), 0, X.shape[0], dtype=jnp.int32)
    idx = jnp.zeros((m,), jnp.int32).at[0].set(first)

    def _step(i, carry):
        idx, d2, key = carry
        key, sub = jax.random.split(key)
        # D^2 sampling; if every point is already covered, fall back to uniform.
        logits = jnp.where(jnp.sum(d2) > 0, jnp.log(d2), 0.0)
        j = jax.random.categorical(sub, logits).astype(jnp.int32)
        return idx.at[i].set(j), jnp.minimum(d2, dist(j)), key

    return jax.lax.fori_loop(1, m, _step, (idx, dist(first), key))[0]


def _leverage(key, spec, theta, X, m, lam, block_size):
    n = X.shape[0]
    k1, k2 = jax.random.split(key)
    S = X[_uniform(k1, n, m)]
    eye = jnp.eye(m, dtype=X.dtype)
    L = jnp.linalg.cholesky(gram_fn(spec, theta, S, S) + lam * eye)

    def scores(xb):
        Q = jsl.solve_triangular(L, gram_fn(spec, theta, xb, S).T, lower=True)
        return (diag_fn(spec, theta, xb) - jnp.sum(Q * Q, axis=0)) / lam

    lev = block_map(scores, X, block_size)
    logp = jnp.log(jnp.maximum(lev, jnp.finfo(X.dtype).tiny))
    # Sampling without replacement with p ~ lev: Gumbel top-k.
    return jax.lax.top_k(logp + jax.random.gumbel(k2, (n,), X.dtype), m)[1]


@functools.partial(
    jax.jit, static_argnames=("spec", "n_centers", "method", "block_size")
)
def _select_jit(key, spec, theta, X, n_centers, method, lam, block_size):
    if method == "uniform":
        return _uniform(key, X.shape[0], n_centers)
    if method == "kmeans++":
        return _kmeanspp(key, spec, theta, X, n_centers)
    return _leverage(key, spec, theta, X, n_centers, lam, block_size)


def select_centers(
    key: jax.Array,
    X: Float[ArrayLike, "n_samples n_features"],
    n_centers: int,
    *,
    method: str = "uniform",
    kernel="rbf",
    params=None,
    ridge: float = 1e-3,
    block_size: int | None = None,
) -> Int[Array, " n_centers"]:
    """Indices of ``n_centers`` distinct Nystroem centres among the rows of X.

    Args:
        key: a ``jax.random`` key.
        X: ``(n, d)`` data.
        n_centers: M in ``[1, n]``.
        method: ``"uniform"``, ``"kmeans++"`` (D^2 seeding in feature space) or
            ``"leverage"`` (approximate ridge leverage scores at
            lam = n * ridge, the regularisation of KDE's system K + n ridge I).
        kernel, params: a vector kernel (see ``LOWRANK_KERNELS``).
        ridge: the ridge for ``"leverage"``, > 0.
        block_size: rows per block for the leverage scores.

    Returns:
        ``(n_centers,)`` int indices (distinct for uniform and leverage; k-means++
        repeats only when all points are already covered).

    Raises:
        ValueError: bad ``method``, ``n_centers`` out of range, NaN in X.

    Cost: uniform O(n); k-means++ O(n M d) time, O(n) memory; leverage
    O(n M (d + M)) time, O(M^2 + block_size M) memory.
    """
    if method not in CENTER_METHODS:
        raise ValueError(f"method must be one of {CENTER_METHODS}, got {method!r}")
    X = as_float_array(X, "X", ndim=2)
    # Only the selection uses the kernel: a "median" rate is resolved on X.
    k = resolve_vector_kernel(kernel, params, data=X)
    m = check_integer(n_centers, "n_centers", minimum=1, maximum=X.shape[0])
    lam = check_positive(ridge, "ridge") * X.shape[0]
    bs = None if block_size is None else check_integer(block_size, "block_size")
    spec, theta = split_kernel(k)
    return _select_jit(key, spec, theta, X, m, method, lam, bs)


class NystroemMap(NamedTuple):
    """Nystroem feature map Phi(x) = k(x, C) @ normalizer.

    Attributes:
        centers: ``(M, d)`` centres C.
        normalizer: ``(M, M)`` U S^{-1/2} from K_CC = U S U^T (zero columns for
            eigenvalues below round-off, the pseudo-inverse).
    """

    centers: Float[Array, "n_centers n_features"]
    normalizer: Float[Array, "n_centers n_centers"]


#: Relative eigenvalue floor of K_MM: directions below it are round-off. eps M
#: (Falkon's jitter), but at least 100 eps: in float32 a smaller floor lets the
#: squared system K_nM^T K_nM lose every digit on near-duplicate centres.
rel_floor = eps_floor


def normalizer_from_gram(Kcc):
    """U S^{-1/2} from K_CC = U S U^T, near-zero eigenvalues dropped (the
    pseudo-inverse square root). Cost O(M^3)."""
    s, U = jnp.linalg.eigh(Kcc)
    thr = rel_floor(Kcc.dtype, Kcc.shape[0]) * jnp.maximum(s[-1], 1e-30)
    inv = jnp.where(s > thr, 1.0 / jnp.sqrt(jnp.maximum(s, thr)), 0.0)
    return U * inv[None, :]


def damped_normalizer(Kcc):
    """U (S + delta)^{-1/2} from K_CC = U S U^T with delta = 100 eps mean(diag K_CC):
    every direction kept, the near-null ones damped rather than dropped.

    Ridge regression on the features K(X, C) U (S + delta)^{-1/2} is the Nystroem
    system (*) of :mod:`bayeskde.lowrank.krr` with K_CC + delta I in the penalty.
    Dropping the directions below ``rel_floor`` instead (the pseudo-inverse of
    :func:`normalizer_from_gram`) throws away what the data say along them: in
    float32 on ``bench/scale.py``'s problem (m = 10^4, M = 1000) it kept 350 of
    1000 directions and the test loss rose 2.5-fold, while this stays within
    0.1% of float64. Cost O(M^3)."""
    s, U = jnp.linalg.eigh(Kcc)
    eps = float(jnp.finfo(Kcc.dtype).eps)
    delta = 100.0 * eps * jnp.maximum(jnp.mean(jnp.diagonal(Kcc)), 1e-30)
    return U / jnp.sqrt(jnp.maximum(s, 0.0) + delta)[None, :]


def nystroem_normalizer(spec, theta, C):
    """:func:`normalizer_from_gram` of the kernel on the centres C."""
    return normalizer_from_gram(gram_fn(spec, theta, C, C))


_normalizer_jit = jax.jit(nystroem_normalizer, static_argnames="spec")


def nystroem_features(
    kernel, centers: Float[ArrayLike, "n_centers n_features"], *, params=None
) -> NystroemMap:
    """The Nystroem map of ``kernel`` on the given centres.

    Cost: O(M^2 d + M^3) time, O(M^2) memory.

    Examples:
        >>> import numpy as np
        >>> X = np.random.default_rng(0).normal(size=(5, 2))
        >>> rbf = {"gamma": 1.0}  # a "median" rate must be resolved first
        >>> Phi = nystroem_transform("rbf", nystroem_features("rbf", X, params=rbf), X,
        ...                          params=rbf)
        >>> bool(np.allclose(Phi @ Phi.T, np.exp(-((X[:, None] - X) ** 2).sum(-1)),
        ...                  atol=1e-4))
        True
    """
    k = resolve_vector_kernel(kernel, params)
    C = as_float_array(centers, "centers", ndim=2)
    spec, theta = split_kernel(k)
    return NystroemMap(C, _normalizer_jit(spec, theta, C))


_matmul_jit = jax.jit(matmul_core, static_argnames=("spec", "block_size"))


def nystroem_transform(
    kernel,
    nmap: NystroemMap,
    X: Float[ArrayLike, "n_samples n_features_x"],
    *,
    params=None,
    block_size: int | None = None,
) -> Float[Array, "n_samples n_centers"]:
    """Nystroem features ``(n, M)`` of the rows of X (blocked over rows).

    Cost: O(n M (d + M)) time, O(block_size M + n M) memory.
    """
    spec, theta, X, bs = check_apply_args(kernel, params, X, nmap.centers,
                                          block_size)
    return _matmul_jit(spec, theta, X, nmap.centers, nmap.normalizer, bs)


class RFFMap(NamedTuple):
    """Random Fourier feature map of the RBF kernel (:func:`fourier_features`).

    Attributes:
        weights: ``(d, D / 2)`` frequencies omega, N(0, 2 gamma) entries; the map
            has D features, a cosine and a sine per frequency.
    """

    weights: Float[Array, "n_features n_frequencies"]


def rff_frequencies(
    key: jax.Array, dim: int, n_frequencies: int, gamma: float, dtype=None
) -> Float[Array, "dim n_frequencies"]:
    """Frequencies ``omega ~ N(0, 2 gamma I)``, so that
    ``E cos(omega . (x - y)) = exp(-gamma ||x - y||^2)`` (Rahimi and Recht 2007)."""
    dtype = float_dtype() if dtype is None else dtype
    scale = math.sqrt(2.0 * float(gamma))
    return scale * jax.random.normal(key, (dim, n_frequencies), dtype)


def fourier_features(
    x: Float[Array, "t d"], omega: Float[Array, "d m"]
) -> Float[Array, "t f"]:
    """The random Fourier feature map ``[cos(x omega), sin(x omega)] / sqrt(m)``.

    The inner product of two maps is the Monte Carlo mean of
    ``cos(omega . (x - y))`` over the ``m`` frequencies: an unbiased estimate of the
    RBF with error O(m^-1/2); ``F = 2 m`` features. Pairing the cosine with the
    sine (instead of a random phase, Rahimi and Recht 2007, Algorithm 1) removes
    the phase's variance. The package's one random-feature map. Jit-safe.
    """
    z = x @ omega
    m = omega.shape[1]
    return jnp.concatenate([jnp.cos(z), jnp.sin(z)], axis=-1) / jnp.sqrt(
        jnp.asarray(m, x.dtype)
    )


def rff_map(
    key: jax.Array, n_features: int, n_components: int, *, gamma: float = 1.0
) -> RFFMap:
    """Draw a random Fourier feature map with ``n_components`` features for the RBF
    kernel exp(-gamma ||x - y||^2): ``n_components / 2`` frequencies, a cosine and
    a sine each (:func:`fourier_features`).

    The Monte Carlo error of a Gram entry is O(1/sqrt(D)) (each term of the mean
    lies in [-1, 1]).

    Raises:
        ValueError: ``n_features`` < 1, ``n_components`` not a positive even
            number, ``gamma <= 0``.

    Cost: O(d D) time and memory.
    """
    d = check_integer(n_features, "n_features", minimum=1)
    D = check_integer(n_components, "n_components", minimum=2)
    if D % 2:
        raise ValueError(
            "n_components must be even (a cosine and a sine per frequency), got "
            f"{D}")
    gamma = check_positive(gamma, "gamma")
    return RFFMap(rff_frequencies(key, d, D // 2, gamma))


@jax.jit
def _rff(W, X):
    return fourier_features(X, W)


def rff_transform(
    rmap: RFFMap, X: Float[ArrayLike, "n_samples n_features_x"]
) -> Float[Array, "n_samples n_components"]:
    """Random Fourier features ``(n, D)`` of the rows of X. Cost O(n d D)."""
    X = as_float_array(X, "X", ndim=2)
    if X.shape[1] != rmap.weights.shape[0]:
        raise ValueError(
            f"X must have {rmap.weights.shape[0]} features, got shape {X.shape}"
        )
    return _rff(rmap.weights, X)
