"""The inverse model's kernel: the learned polynomial transform of an RBF.

The forward GP (F) of :mod:`bayeskde.inverse` has the covariance

    phi(K) = sum_{i <= d} alpha_i K^(i),  K = exp(-gamma ||y - y'||^2),

the monomial transform of the seed paper on learned polynomial kernel
transformations (its eqs. 14-16) with the weights alpha of its Theorem 4.1.
The i-th Hadamard power of an RBF is the RBF at rate i gamma, so the basis
K^(i) is :func:`rbf_powers`: the monomial basis of
:func:`bayeskde.kernels.transforms.polynomial_basis` (any Gram matrix, K ** i)
specialised to the RBF, where exp(-i gamma D2) keeps full relative precision in
the tails that K ** i would underflow, and where the spectral density of each
power is known (the low-rank features). Everything in the subpackage that needs phi(K),
its weights, the median-heuristic rate or a pair's eigensystem calls this
module; nothing re-derives them.

The kept-eigenvalue rule (:func:`kept_eigenvalues`), once for every spectrum
the model computes: an eigenvalue of a symmetric n x n matrix computed with
a backward-stable eigensolver in precision eps carries an absolute error of
about n eps lambda_max (Golub and Van Loan 2013, sec. 8.1.2: |delta lambda| <=
||E||_2 with ||E||_2 = O(n eps ||A||_2)), so an eigenvalue below that bound is
indistinguishable from zero and its eigenvector from rounding noise. The
exact path keeps lambda > m eps lambda_max of the m x m Gram; the low-rank
path's R x R capacitance problem max(m, R) eps lambda_max (its eigenvalues
stand for those of the m x m Gram, whose rounding floor is the larger);
vectors formed in working precision from features (``bound`` 10, the
low-rank training basis of :mod:`bayeskde.inverse.noise`) keep columns whose
relative rounding error eps lambda_max / lambda is below 10%.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float

from ..kernels import hsic_stacks, squared_distances

__all__ = [
    "rbf_powers",
    "transform_weights",
    "median_rate",
    "kept_eigenvalues",
    "transform_gram",
    "grid_spectra",
    "pair_eigensystem",
    "rbf_spectral_density",
    "transform_spectral_density",
    "hsgp_frequencies",
    "hsgp_eigenfunctions",
]


def rbf_powers(
    D2: Float[Array, "..."], gamma, degree: int,
) -> Float[Array, "n_deg ..."]:
    """``(degree, *D2.shape)`` Hadamard powers K^(i) = exp(-i gamma D2),
    i = 1..degree, of the RBF with rate gamma on squared distances D2: the
    i-th power of an RBF is the RBF at rate i gamma (the monomial basis of
    phi(K))."""
    powers = jnp.arange(1, degree + 1, dtype=D2.dtype)
    shape = (degree,) + (1,) * D2.ndim
    return jnp.exp(-gamma * powers.reshape(shape) * D2[None])


def transform_weights(
    C: Float[Array, " n_deg"], degree: int,
) -> Float[Array, "degree n_deg"]:
    """Transform weights alpha of every degree 1..D from the HSIC column
    C_i = HSIC(K^(i), X_c X_c^T) (the seed's Theorem 4.1 with the linear
    kernel on the GP's targets): row d - 1 is C_{1..d} / sum C_{1..d},
    clipped at 0, zero beyond d (so phi(K) is PSD)."""
    D = C.shape[0]
    mask = (jnp.arange(D)[None, :] < jnp.arange(1, degree + 1)[:, None])
    w = jnp.maximum(C, 0.0)[None, :] * mask
    tiny = jnp.finfo(C.dtype).tiny
    return w / jnp.maximum(jnp.sum(w, axis=1, keepdims=True), tiny)


def median_rate(D2: np.ndarray) -> float:
    """The median-heuristic rate 1 / median ||y_i - y_j||^2 over the distinct
    pairs of the squared distances ``D2`` (1.0 where every pair coincides)."""
    d2 = np.asarray(D2)[np.triu_indices(D2.shape[0], 1)]
    pos = d2[d2 > 0]
    return 1.0 / float(np.median(pos)) if pos.size else 1.0


def kept_eigenvalues(lam: np.ndarray, size: int, *, eps: float | None = None,
                     ) -> np.ndarray:
    """Boolean mask of the eigenvalues ``lam`` above ``size`` eps lambda_max
    (module docstring: the rounding floor of an eigenproblem of that size; eps
    that of ``lam``'s dtype unless given)."""
    lam = np.asarray(lam)
    eps = np.finfo(lam.dtype).eps if eps is None else eps
    return lam > size * eps * max(float(np.max(lam, initial=0.0)), 0.0)


def transform_gram(
    alpha: Float[Array, " n_deg"], gamma, A: Float[Array, "n d_y"],
    B: Float[Array, "k d_y"],
) -> Float[Array, "n k"]:
    """phi(K)(A, B) = sum_i alpha_i exp(-i gamma ||a - b||^2). O(n k D d_y)."""
    K = rbf_powers(squared_distances(A, B), gamma, alpha.shape[0])
    return jnp.tensordot(alpha, K, 1)


def grid_spectra(D2, L, X, gamma, degree):
    """At one rate: the weights ``alpha`` ``(D, D)`` of every degree, and the
    eigenvalues ``(D, m)`` of phi(K) (clipped at 0) with the projections
    U^T X ``(D, m, d_x)``. O(D m^3)."""
    K_stack = rbf_powers(D2, gamma, degree)
    alpha = transform_weights(hsic_stacks(K_stack, L[None])[:, 0], degree)

    def one(a):
        lam, U = jnp.linalg.eigh(jnp.tensordot(a, K_stack, 1))
        return jnp.maximum(lam, 0.0), U.T @ X

    lam, proj = jax.lax.map(one, alpha)
    return alpha, lam, proj


def pair_eigensystem(Y, X, alpha, gamma):
    """The kept eigenpairs of phi(K) at the training outputs ``Y`` ``(m,
    d_y)`` for one pair, in float64 whatever JAX's precision: ``(lam (r,),
    U (m, r), U^T X (r, d_x))``. O(m^3)."""
    with jax.enable_x64(True):
        Y64 = jnp.asarray(np.asarray(Y, np.float64))
        K = np.asarray(transform_gram(jnp.asarray(np.asarray(alpha, np.float64)),
                                      float(gamma), Y64, Y64))
    lam, U = np.linalg.eigh(K)
    ok = kept_eigenvalues(lam, K.shape[0])
    return lam[ok], U[:, ok], U[:, ok].T @ np.asarray(X, np.float64)


def rbf_spectral_density(w, gamma):
    """S_gamma(w) = sqrt(pi / gamma) exp(-w^2 / (4 gamma)), the 1-D Fourier
    transform of exp(-gamma r^2) (Rasmussen and Williams 2006, eq. (4.21)
    with l^2 = 1 / (2 gamma))."""
    return np.sqrt(np.pi / gamma) * np.exp(-np.square(w) / (4.0 * gamma))


def hsgp_frequencies(J: int, half: float) -> np.ndarray:
    """The first J frequencies w_j = pi j / (2 L) of the Dirichlet Laplacian on
    a box of half-width L."""
    return np.pi * np.arange(1, J + 1) / (2.0 * half)


def hsgp_eigenfunctions(
    y: Float[Array, " n"], centre: float, half: float, J: int,
) -> Float[Array, "n J"]:
    """psi_j(y) = L^{-1/2} sin(pi j (y - c + L) / (2 L)), j = 1..J: the
    Dirichlet Laplacian's eigenfunctions on [c - L, c + L] (Solin and Saerkkae
    2020, eq. (56); ``numpyro.contrib.hsgp.laplacian.eigenfunctions``)."""
    w = jnp.asarray(hsgp_frequencies(J, half), y.dtype)
    return jnp.sin((y[:, None] - centre + half) * w[None]) / math.sqrt(half)


def transform_spectral_density(alpha, gamma, w):
    """sum_i alpha_i S_{i gamma}(w): the spectral density of phi(K) (the i-th
    power of the RBF is the RBF at rate i gamma)."""
    return sum(a * rbf_spectral_density(w, (i + 1) * gamma)
               for i, a in enumerate(alpha) if a != 0.0)
