"""Kernel-matrix algebra: centring, normalisation, alignment, HSIC and distance maps.

All functions are pure and jit-compiled; they take Gram matrices (and, where a
test set is involved, the diagonals ``k(x, x)``) and never see data objects.

References:
    Weston et al. (2002), "Kernel Dependency Estimation", eq. (5) and section 4.1.
    Schölkopf, Smola and Müller (1998), "Nonlinear component analysis as a kernel
    eigenvalue problem", section 4.1 and appendix A (centring in feature space).
    Cristianini, Kandola, Elisseeff and Shawe-Taylor (2001), kernel alignment.
    Cortes, Mohri and Rostamizadeh (2012), centred alignment.
    Gretton, Bousquet, Smola and Schölkopf (2005), HSIC (biased estimator).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float

from .._typing import ArrayLike
from .._validation import (
    as_float_array,
    check_finite_result,
    check_gram,
    check_positive,
)

__all__ = [
    "center_kernel",
    "center_cross_kernel",
    "center_diagonal",
    "normalize_kernel",
    "frobenius",
    "alignment",
    "centered_alignment",
    "hsic",
    "hsic_stacks",
    "distance_to_kernel",
    "kernel_rbf_map",
    "kernel_distances",
    "median_heuristic",
]


def _check_square(K, name="K"):
    return check_gram(K, name)


def _concrete(*arrays) -> bool:
    return not any(isinstance(a, jax.core.Tracer) for a in arrays)


@jax.jit
def _center_kernel(K):
    row = jnp.mean(K, axis=0)
    return K - row[None, :] - jnp.mean(K, axis=1)[:, None] + jnp.mean(row)


def center_kernel(K: Float[ArrayLike, "n n"]) -> Float[Array, "n n"]:
    """Centre a training Gram matrix in feature space: H K H with H = I - 11^T / n.

    Implemented by row/column means (O(n^2)) instead of two matrix products.
    Schölkopf et al. (1998), eq. (A.1); Weston et al. (2002), section 3 step 1.
    Jit-safe; on concrete input ``K`` is checked (square, finite).

    Raises:
        ValueError / TypeError: ``K`` is not a finite square numeric matrix.
    """
    if _concrete(K):
        K = check_gram(K, "K")
    return _center_kernel(K)


@jax.jit
def center_cross_kernel(
    K_test: Float[Array, "n_test n_train"], K_train: Float[Array, "n_train n_train"]
) -> Float[Array, "n_test n_train"]:
    """Centre test-versus-training kernel values with the training mean.

    Returns <Phi(x) - mu, Phi(x_i) - mu> with mu the training feature mean:
    K_test - 1_t K_train / n - K_test 1_n 1_n^T / n + 1_t 1_n^T mean(K_train).
    Schölkopf et al. (1998), appendix A, eq. (A.2).
    """
    col = jnp.mean(K_train, axis=0)
    return (
        K_test
        - col[None, :]
        - jnp.mean(K_test, axis=1)[:, None]
        + jnp.mean(col)
    )


@jax.jit
def center_diagonal(
    diag_test: Float[Array, " n_test"],
    K_test: Float[Array, "n_test n_train"],
    K_train: Float[Array, "n_train n_train"],
) -> Float[Array, " n_test"]:
    """Centred self-similarities ||Phi(x) - mu||^2 of test points."""
    return diag_test - 2.0 * jnp.mean(K_test, axis=1) + jnp.mean(K_train)


def normalize_kernel(
    K: Float[ArrayLike, "n_a n_b"],
    diag_a: Float[ArrayLike, " n_a"],
    diag_b: Float[ArrayLike, " n_b"],
) -> Float[Array, "n_a n_b"]:
    """Cosine normalisation k(x, y) / sqrt(k(x, x) k(y, y)).

    Points with ``k(x, x) = 0`` (no features, e.g. a string shorter than the
    subsequence length) have no direction; their normalised row is 0, which keeps
    the matrix positive semi-definite. Jit-safe; on concrete input the shapes
    are checked, the values must be finite and the self-similarities >= 0.

    Raises:
        ValueError / TypeError: mismatched shapes, NaN/inf, a negative diagonal.
    """
    if _concrete(K, diag_a, diag_b):
        K = as_float_array(K, "K", ndim=2, allow_empty=True)
        diag_a = as_float_array(diag_a, "diag_a", ndim=1, allow_empty=True)
        diag_b = as_float_array(diag_b, "diag_b", ndim=1, allow_empty=True)
        if diag_a.shape[0] != K.shape[0] or diag_b.shape[0] != K.shape[1]:
            raise ValueError(
                f"diag_a and diag_b must have shapes ({K.shape[0]},) and "
                f"({K.shape[1]},) for K of shape {K.shape}, got {diag_a.shape} and "
                f"{diag_b.shape}")
        for name, d in (("diag_a", diag_a), ("diag_b", diag_b)):
            if d.size and float(jnp.min(d)) < 0:
                raise ValueError(
                    f"{name} holds self-similarities k(x, x), which are >= 0; got "
                    f"{float(jnp.min(d)):.3g}")
        return check_finite_result(_normalize_kernel(K, diag_a, diag_b), "K",
                                   "normalised kernel")
    return _normalize_kernel(K, diag_a, diag_b)


@jax.jit
def _normalize_kernel(K, diag_a, diag_b):
    tiny = jnp.finfo(K.dtype).tiny
    inv_a = jnp.where(diag_a > tiny, 1.0 / jnp.sqrt(jnp.maximum(diag_a, tiny)), 0.0)
    inv_b = jnp.where(diag_b > tiny, 1.0 / jnp.sqrt(jnp.maximum(diag_b, tiny)), 0.0)
    return K * inv_a[:, None] * inv_b[None, :]


@jax.jit
def frobenius(K1: Float[Array, "n m"], K2: Float[Array, "n m"]) -> Float[Array, ""]:
    """Frobenius inner product <K1, K2>_F = sum_ij K1_ij K2_ij."""
    return jnp.sum(K1 * K2)


@jax.jit
def _alignment(K1, K2):
    return frobenius(K1, K2) / jnp.sqrt(frobenius(K1, K1) * frobenius(K2, K2))



def alignment(
    K1: Float[ArrayLike, "n1 m1"], K2: Float[ArrayLike, "n2 m2"]
) -> Float[Array, ""]:
    """Kernel alignment A(K1, K2) = <K1, K2>_F / sqrt(<K1, K1>_F <K2, K2>_F).

    Cristianini et al. (2001); used by Weston et al. (2002), section 4.3.
    """
    K1 = _check_square(K1, "K1")
    K2 = _check_square(K2, "K2")
    if K1.shape != K2.shape:
        raise ValueError(f"K1 and K2 must match, got {K1.shape} and {K2.shape}")
    return _alignment(K1, K2)


def centered_alignment(K1, K2) -> Float[Array, ""]:
    """Centred alignment (Cortes et al. 2012): the alignment of H K1 H and H K2 H."""
    K1 = _check_square(K1, "K1")
    K2 = _check_square(K2, "K2")
    if K1.shape != K2.shape:
        raise ValueError(f"K1 and K2 must match, got {K1.shape} and {K2.shape}")
    return _alignment(_center_kernel(K1), _center_kernel(K2))


def hsic_stacks(K_stack, G_stack):
    """C_ij = (m - 1)^-2 <H K^(i) H, G^(j)>_F for stacks of Grams: the one HSIC.

    The jit-safe, differentiable core (no validation) of :func:`hsic` and
    :func:`bayeskde.kernels.hsic_matrix`, used as it is inside NumPyro models.
    Each K^(i) is centred once by means (O(m^2)); tr(K H G H) = <H K H, G>_F.
    Gretton et al. (2005), the biased estimator. Cost O(d_x d_y m^2).
    """
    m = K_stack.shape[-1]
    centred = jax.vmap(_center_kernel)(K_stack)
    C = jnp.einsum(
        "iab,jab->ij", centred, G_stack, precision=jax.lax.Precision.HIGHEST
    )
    return C / (m - 1) ** 2


@jax.jit
def _hsic(K, L):
    return hsic_stacks(K[None], L[None])[0, 0]


def hsic(
    K: Float[ArrayLike, "n1 m1"], L: Float[ArrayLike, "n2 m2"]
) -> Float[Array, ""]:
    """Biased HSIC estimator (m - 1)^-2 tr(K H L H) (Gretton et al. 2005).

    Cost: O(m^2) time and memory.

    Raises:
        ValueError: for non-square, mismatched or fewer than 2-sample matrices.
    """
    K = _check_square(K, "K")
    L = _check_square(L, "L")
    if K.shape != L.shape:
        raise ValueError(f"K and L must match, got {K.shape} and {L.shape}")
    if K.shape[0] < 2:
        raise ValueError("HSIC needs at least 2 samples")
    return _hsic(K, L)


@jax.jit
def _distance_to_kernel(D, c):
    D2 = D * D
    row = D2 @ c  # sum_p c_p D_ip^2
    return -0.5 * (D2 - row[:, None] - row[None, :] + c @ row)


def distance_to_kernel(
    D: Float[ArrayLike, "n1 n2"], c: Float[ArrayLike, " n3"] | None = None
) -> Float[Array, "n1 n1"]:
    """Embed a distance matrix as a kernel, Weston et al. (2002) eq. (5).

    l_ij = -1/2 (D_ij^2 - sum_p c_p D_ip^2 - sum_q c_q D_qj^2 + sum_pq c_p c_q D_pq^2)
    (Schölkopf and Smola 2002, Prop. 2.27), i.e. the point ``sum_i c_i x_i`` is the
    origin. With ``c = 1/n`` (the default) it is classical multidimensional scaling.

    Args:
        D: symmetric ``(n, n)`` matrix of distances (not squared), zero diagonal.
        c: weights summing to one; default uniform.

    Raises:
        ValueError: if ``D`` is not square/symmetric or ``c`` does not sum to one.
    """
    D = _check_square(D, "D")
    if not np.allclose(np.asarray(D), np.asarray(D).T):
        raise ValueError("D must be symmetric")
    n = D.shape[0]
    c = jnp.full((n,), 1.0 / n, D.dtype) if c is None else as_float_array(
        c, "c", ndim=1)
    if c.shape != (n,):
        raise ValueError(f"c must have shape ({n},), got {c.shape}")
    if abs(float(jnp.sum(c)) - 1.0) > 1e-6:
        raise ValueError(f"c must sum to 1, got {float(jnp.sum(c))}")
    return _distance_to_kernel(D, c)


@jax.jit
def kernel_distances(
    K: Float[Array, "n_a n_b"],
    diag_a: Float[Array, " n_a"],
    diag_b: Float[Array, " n_b"],
) -> Float[Array, "n_a n_b"]:
    """Squared feature-space distances k(x,x) + k(y,y) - 2 k(x,y), clipped at 0."""
    return jnp.maximum(diag_a[:, None] + diag_b[None, :] - 2.0 * K, 0.0)


@jax.jit
def rbf_map_of_distances(K, diag_a, diag_b, sigma):
    return jnp.exp(-kernel_distances(K, diag_a, diag_b) / (2.0 * sigma * sigma))


def kernel_rbf_map(
    K: Float[ArrayLike, "n_a n_b"],
    diag_a: Float[ArrayLike, " n_a"],
    diag_b: Float[ArrayLike, " n_b"],
    sigma: float,
) -> Float[Array, "n_a n_b"]:
    """RBF map on top of any kernel: exp(-(k(x,x) + k(y,y) - 2 k(x,y)) / (2 sigma^2)).

    Weston et al. (2002), section 4.1; the same map is eq. (24) of the latent
    mean-map kernel paper. The result is a kernel whenever ``k`` is one.
    """
    sigma = check_positive(sigma, "sigma")
    return rbf_map_of_distances(K, diag_a, diag_b, sigma)


def median_heuristic(X=None, *, K=None, max_samples: int = 2000) -> float:
    """Median pairwise distance: the usual default RBF width sigma.

    Give either data ``X`` (Euclidean distances) or a Gram matrix ``K``
    (feature-space distances). At most ``max_samples`` points (the first ones) are
    used, so the cost is O(min(n, max_samples)^2).

    Returns:
        sigma > 0; convert with :func:`bayeskde.kernels.sigma_to_gamma`.

    Raises:
        ValueError: if neither or both inputs are given, or all points coincide.
    """
    from .._validation import check_data, check_squared_range
    from .standard import squared_distances

    if (X is None) == (K is None):
        raise ValueError("give exactly one of X or K")
    if K is None:
        name = "X"
        X = check_data(X, "X")
        if isinstance(X, tuple):
            raise TypeError("X must be a numeric array; for strings pass K")
        X = check_squared_range(X, "X")[:max_samples]
        d2 = squared_distances(X, X)
    else:
        name = "K"
        K = _check_square(K, "K")[:max_samples, :max_samples]
        d = jnp.diagonal(K)
        d2 = kernel_distances(K, d, d)
    n = d2.shape[0]
    iu = np.triu_indices(n, k=1)
    if len(iu[0]) == 0:
        raise ValueError(
            f"{name} has {n} point(s); the median heuristic needs at least 2")
    med = float(np.median(np.sqrt(np.asarray(d2, np.float64)[iu])))
    if not np.isfinite(med):
        raise ValueError(f"the pairwise distances of {name} overflow {d2.dtype}")
    if med <= 0:
        raise ValueError(
            f"all points of {name} coincide: the median distance is 0")
    return med
