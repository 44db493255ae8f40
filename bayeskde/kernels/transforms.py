"""Learned polynomial transformations of kernel matrices (monomial and Gegenbauer).

A normalised base kernel ``k`` (values in ``[-1, 1]``, ``k(x, x) = 1``) is mapped
entry by entry through a polynomial without constant term,

    phi(K) = sum_{i=1}^{d_x} alpha_i K^(i),    psi(G) = sum_{j=1}^{d_y} beta_j G^(j),

where ``K^(i)`` is the i-th Hadamard power (monomial basis ``t^i``) or the Gegenbauer
polynomial ``C_i^lambda`` applied to every entry. The weights maximise the biased
HSIC between the transformed kernels under ``||alpha|| = ||beta|| = 1``; by
bilinearity HSIC(phi(K), psi(G)) = alpha^T C beta with C_ij = HSIC(K^(i), G^(j)), so
alpha and beta are the top singular vectors of C and the maximum is its top
singular value.

Pure functions: :func:`polynomial_basis`, :func:`hsic_matrix`,
:func:`fit_polynomial_transform`, :func:`apply_transform`, :func:`psd_projection`.
:class:`PolynomialKernelTransform` is the scikit-learn facade. The public functions
also accept JAX tracers (value checks such as finiteness are then skipped), so the
Bayesian layer can call them inside ``jit``/``grad``.

References:
    Polynomial kernel transformations for structured prediction with Twin Gaussian
    Processes (seed 001): the expansions (paper eqs. 14-15), the objective (eq. 13),
    the C-matrix problem (eq. 16) and its SVD solution (Theorem 4.1, section 4).
    Gretton, Bousquet, Smola and Schölkopf (2005): biased HSIC.
    Cortes, Mohri and Rostamizadeh (2012): centred alignment.
    Abramowitz and Stegun (1964), 22.7.3 (recurrence) and 22.3.4 (lambda = 0).
"""

from __future__ import annotations

import numbers
from functools import partial
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float

from .._typing import ArrayLike
from .._validation import as_float_array, check_integer
from .algebra import hsic_stacks

__all__ = [
    "BASES",
    "DEFAULT_GEGENBAUER_LAMBDA",
    "TransformResult",
    "PSDProjection",
    "polynomial_basis",
    "hsic_matrix",
    "fit_polynomial_transform",
    "apply_transform",
    "psd_projection",
]

BASES = ("monomial", "gegenbauer")
"""Names of the supported polynomial bases."""

DEFAULT_GEGENBAUER_LAMBDA = 0.51
"""The seed's input-side weight parameter (experiments: lambda_1 = 0.51, lambda_2 =
0.52, "rough estimates from Gottlieb et al. (1992)"); pass ``(0.51, 0.52)`` to the
fitting functions to reproduce the seed's pair exactly. lambda = 1/2 would give the
Legendre polynomials."""


class TransformResult(NamedTuple):
    """Learned transformation weights (seed 001, Theorem 4.1).

    Attributes:
        alpha: ``(degree_x,)`` input weights, unit norm; ``alpha[0]`` multiplies
            the degree-1 basis kernel (there is no constant term, alpha_0 = 0).
        beta: ``(degree_y,)`` output weights, unit norm.
        C: ``(degree_x, degree_y)`` matrix C_ij = HSIC(K^(i), G^(j)).
        hsic: ``()`` top singular value of C = HSIC(phi(K), psi(G)) at the optimum.
    """

    alpha: Float[Array, " degree_x"]
    beta: Float[Array, " degree_y"]
    C: Float[Array, "degree_x degree_y"]
    hsic: Float[Array, ""]


class PSDProjection(NamedTuple):
    """Nearest PSD matrix in Frobenius norm and the smallest eigenvalue before.

    Attributes:
        gram: ``(m, m)`` projected matrix U diag(max(e, 0)) U^T.
        min_eigenvalue: ``()`` smallest eigenvalue of the symmetrised input.
    """

    gram: Float[Array, "m m"]
    min_eigenvalue: Float[Array, ""]


# --------------------------------------------------------------------------- checks


def _is_tracer(x) -> bool:
    return isinstance(x, jax.core.Tracer)


def as_array(x, name, ndims):
    """Float array with ndim in ``ndims``; value checks only on concrete input."""
    if _is_tracer(x):
        if not jnp.issubdtype(x.dtype, jnp.floating):
            raise TypeError(f"{name} must be a floating array, got {x.dtype}")
    else:
        x = as_float_array(x, name)
    if x.ndim not in ndims:
        want = " or ".join(f"{d}-dimensional" for d in ndims)
        raise ValueError(f"{name} must be {want}, got shape {x.shape}")
    return x


def _as_gram(x, name):
    x = as_array(x, name, (2,))
    if x.shape[0] != x.shape[1]:
        raise ValueError(f"{name} must be a square Gram matrix, got shape {x.shape}")
    if x.shape[0] < 2:
        raise ValueError(f"{name} needs at least 2 samples for HSIC, got {x.shape}")
    return x


def _check_basis(basis):
    if basis not in BASES:
        raise ValueError(f"basis must be one of {BASES}, got {basis!r}")
    return basis


def _check_lambda(value, name="gegenbauer_lambda"):
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name} must be a real number, got {value!r}")
    value = float(value)
    if not np.isfinite(value) or value <= -0.5:
        raise ValueError(
            f"{name} must be finite and > -1/2 (the Gegenbauer weight "
            f"(1 - t^2)^(lambda - 1/2) is integrable only then), got {value}"
        )
    return value


def check_lambdas(value):
    """A scalar (both sides) or a pair ``(lambda_x, lambda_y)``."""
    if isinstance(value, tuple | list):
        if len(value) != 2:
            raise ValueError(
                f"gegenbauer_lambda must be a number or a pair (lambda_x, lambda_y), "
                f"got {value!r}"
            )
        return (_check_lambda(value[0], "gegenbauer_lambda[0]"),
                _check_lambda(value[1], "gegenbauer_lambda[1]"))
    lam = _check_lambda(value)
    return lam, lam


# ----------------------------------------------------------------- the recurrences
#
# Gegenbauer polynomials are evaluated as D_n = C_n^lambda / lambda, which is a
# polynomial in lambda too (every C_n^lambda, n >= 1, has the factor lambda):
# D_1 = 2t, D_2 = 2(1 + lambda) t^2 - 1 and, for n >= 3, the three-term recurrence
# n D_n = 2t(n + lambda - 1) D_{n-1} - (n + 2 lambda - 2) D_{n-2}
# (Abramowitz and Stegun 22.7.3 divided by lambda). C_n = lambda D_n, and at
# lambda = 0, where every C_n^0 vanishes, D_n = (2/n) T_n is the Chebyshev limit
# lim C_n^lambda / lambda that Abramowitz and Stegun 22.3.4 take as C_n^(0). One
# recurrence covers both cases without a division by lambda.


def _first_two(t, lam, basis):
    if basis == "monomial":
        return t, t * t
    return 2.0 * t, 2.0 * (1.0 + lam) * t * t - 1.0


def _next(prev, prev2, n, t, lam, basis):
    if basis == "monomial":
        return prev * t
    return (2.0 * (n + lam - 1.0) * t * prev - (n + 2.0 * lam - 2.0) * prev2) / n


def _scale(lam, basis, dtype):
    if basis == "monomial":
        return jnp.ones((), dtype)
    return jnp.where(lam == 0, 1.0, lam).astype(dtype)


def _basis_stack(t, lam, degree, basis):
    """``(degree, *t.shape)`` stack [P_1(t), ..., P_degree(t)] (helper, not jitted)."""
    lam = jnp.asarray(lam, t.dtype)
    p1, p2 = _first_two(t, lam, basis)
    if degree == 1:
        return (_scale(lam, basis, t.dtype) * p1)[None]

    def _step(carry, n):
        prev, prev2 = carry
        new = _next(prev, prev2, n, t, lam, basis)
        return (new, prev), new

    ns = jnp.arange(3, degree + 1, dtype=t.dtype)
    _, rest = jax.lax.scan(_step, (p2, p1), ns)
    stack = jnp.concatenate([p1[None], p2[None], rest], axis=0)
    return _scale(lam, basis, t.dtype) * stack


def _combine(t, coeffs, lam, basis):
    """sum_i coeffs[i] P_{i+1}(t) by the same recurrence, O(t.size) memory."""
    lam = jnp.asarray(lam, t.dtype)
    coeffs = coeffs.astype(t.dtype)
    p1, p2 = _first_two(t, lam, basis)
    acc = coeffs[0] * p1
    if coeffs.shape[0] > 1:
        acc = acc + coeffs[1] * p2

    def _step(carry, x):
        prev, prev2, total = carry
        n, c = x
        new = _next(prev, prev2, n, t, lam, basis)
        return (new, prev, total + c * new), None

    if coeffs.shape[0] > 2:
        ns = jnp.arange(3, coeffs.shape[0] + 1, dtype=t.dtype)
        (_, _, acc), _ = jax.lax.scan(_step, (p2, p1, acc), (ns, coeffs[2:]))
    return _scale(lam, basis, t.dtype) * acc


_hsic_matrix = hsic_stacks


_basis_jit = jax.jit(_basis_stack, static_argnames=("degree", "basis"))
combine_jit = jax.jit(_combine, static_argnames="basis")
_hsic_matrix_jit = jax.jit(_hsic_matrix)


@partial(jax.jit, static_argnames=("degree_x", "degree_y", "basis"))
def _fit_transform(K, G, lam_x, lam_y, degree_x, degree_y, basis):
    C = _hsic_matrix(
        _basis_stack(K, lam_x, degree_x, basis), _basis_stack(G, lam_y, degree_y, basis)
    )
    U, s, Vt = jnp.linalg.svd(C, full_matrices=False)
    u, v = U[:, 0], Vt[0]
    # (u, v) and (-u, -v) are equally optimal: pick the one with positive total
    # weight, which for the monomial basis (C >= 0 entrywise, Perron-Frobenius) makes
    # both vectors entrywise non-negative.
    sign = jnp.where(jnp.sum(u) + jnp.sum(v) < 0, -1.0, 1.0).astype(C.dtype)
    return TransformResult(alpha=sign * u, beta=sign * v, C=C, hsic=s[0])


def _symmetric_eigh(K):
    return jnp.linalg.eigh(0.5 * (K + K.T))


@jax.jit
def _psd_projection(K):
    evals, evecs = _symmetric_eigh(K)
    proj = (evecs * jnp.maximum(evals, 0.0)[None, :]) @ evecs.T
    return PSDProjection(gram=0.5 * (proj + proj.T), min_eigenvalue=evals[0])


eigh_jit = jax.jit(_symmetric_eigh)


def psd_tolerance(evals):
    """Round-off level of an eigenvalue of a symmetric matrix with spectrum evals."""
    evals = np.asarray(evals)
    return 100.0 * np.finfo(evals.dtype).eps * max(float(np.abs(evals).max()), 1.0)


# ------------------------------------------------------------------ public functions


def polynomial_basis(
    K: Float[ArrayLike, "*shape"],
    degree: int,
    basis: str = "monomial",
    gegenbauer_lambda: float = DEFAULT_GEGENBAUER_LAMBDA,
) -> Float[Array, "n_degrees *shape"]:  # noqa: F821
    """Basis kernels [K^(1), ..., K^(degree)] applied entry by entry (seed eqs. 14-15).

    Monomial: K^(i) = K ** i (Hadamard power). Gegenbauer: K^(i)_ab =
    C_i^lambda(K_ab) by the three-term recurrence C_0 = 1, C_1 = 2 lambda t,
    n C_n = 2t(n + lambda - 1) C_{n-1} - (n + 2 lambda - 2) C_{n-2}; at lambda = 0
    the Chebyshev limit C_n^(0) = (2/n) T_n is used. Index 0 is degree 1 (no
    constant term).

    Args:
        K: a Gram matrix, a test-versus-training cross-kernel or a 1-D diagonal
            ``k(x, x)``; normalised kernels (entries in ``[-1, 1]``) are expected.
        degree: number of basis kernels, >= 1.
        basis: ``"monomial"`` or ``"gegenbauer"``.
        gegenbauer_lambda: lambda > -1/2 (ignored by the monomial basis).

    Returns:
        ``(degree, *K.shape)`` stack.

    Raises:
        TypeError: if ``degree`` is not an integer.
        ValueError: for degree < 1, an unknown basis, lambda <= -1/2, NaN/inf.

    Cost: O(degree size(K)) time and memory.

    Examples:
        >>> import numpy as np
        >>> polynomial_basis(np.array([0.5, 1.0]), 3).tolist()
        [[0.5, 1.0], [0.25, 1.0], [0.125, 1.0]]
    """
    degree = check_integer(degree, "degree", minimum=1)
    basis = _check_basis(basis)
    lam = _check_lambda(gegenbauer_lambda)
    K = as_array(K, "K", (1, 2))
    return _basis_jit(K, lam, degree=degree, basis=basis)


def hsic_matrix(
    K_stack: Float[ArrayLike, "d_x m_k1 m_k2"],
    G_stack: Float[ArrayLike, "d_y m_g1 m_g2"],
) -> Float[Array, "d_x d_y"]:
    """C_ij = HSIC(K^(i), G^(j)), the biased estimator (seed eq. 16; Gretton 2005).

    Each K^(i) is centred once and C = [<H K^(i) H, G^(j)>_F] / (m - 1)^2 is one
    contraction, the same estimator as :func:`bayeskde.kernels.hsic`.

    Args:
        K_stack: ``(d_x, m, m)`` input basis kernels (see :func:`polynomial_basis`).
        G_stack: ``(d_y, m, m)`` output basis kernels on the same samples.

    Returns:
        ``(d_x, d_y)`` matrix.

    Raises:
        ValueError: for non-square or mismatched stacks, fewer than 2 samples, NaN.

    Cost: O(d_x d_y m^2) time, O(d_x m^2) extra memory.
    """
    K_stack = as_array(K_stack, "K_stack", (3,))
    G_stack = as_array(G_stack, "G_stack", (3,))
    m = K_stack.shape[1]
    if K_stack.shape[1:] != (m, m) or G_stack.shape[1:] != (m, m):
        raise ValueError(
            "K_stack and G_stack must be stacks of (m, m) Gram matrices on the same "
            f"samples, got shapes {K_stack.shape} and {G_stack.shape}"
        )
    if m < 2:
        raise ValueError("HSIC needs at least 2 samples")
    return _hsic_matrix_jit(K_stack, G_stack)


def fit_polynomial_transform(
    K: Float[ArrayLike, "m_k1 m_k2"],
    G: Float[ArrayLike, "m_g1 m_g2"],
    degree_x: int,
    degree_y: int,
    basis: str = "monomial",
    gegenbauer_lambda: float | tuple[float, float] = DEFAULT_GEGENBAUER_LAMBDA,
) -> TransformResult:
    """Maximise HSIC(phi(K), psi(G)) over unit-norm alpha, beta (seed Theorem 4.1).

    By bilinearity HSIC(sum_i alpha_i K^(i), sum_j beta_j G^(j)) = alpha^T C beta,
    maximised on the unit spheres by the top left/right singular vectors of C; the
    maximum is the top singular value. Signs are fixed so that sum(alpha) +
    sum(beta) > 0; for the monomial basis C >= 0 and Perron-Frobenius makes both
    vectors entrywise non-negative. With ``degree_y = 1``, alpha is proportional
    to [HSIC(K^(i), G)]_i, the centred-alignment weighting of Cortes et al. (2012).

    Args:
        K: ``(m, m)`` normalised base Gram matrix of the inputs.
        G: ``(m, m)`` normalised base Gram matrix of the outputs.
        degree_x, degree_y: expansion degrees d_1, d_2 >= 1.
        basis: ``"monomial"`` or ``"gegenbauer"``.
        gegenbauer_lambda: lambda > -1/2, or a pair ``(lambda_x, lambda_y)``.

    Returns:
        :class:`TransformResult`.

    Raises:
        TypeError: for non-integer degrees.
        ValueError: for degrees < 1, lambda <= -1/2, non-square or mismatched
            matrices, fewer than 2 samples, NaN/inf.

    Cost: O((d_x + d_y + d_x d_y) m^2) time, O((d_x + d_y) m^2) memory; one
    compilation per (shape, dtype, degrees, basis).

    Examples:
        >>> import numpy as np
        >>> from bayeskde.kernels import rbf_kernel
        >>> X = np.linspace(0, 1, 30)[:, None]
        >>> K, G = rbf_kernel(X, X, gamma=5.0), rbf_kernel(X**2, X**2, gamma=5.0)
        >>> res = fit_polynomial_transform(K, G, 3, 2)
        >>> res.alpha.shape, res.beta.shape, bool((res.alpha >= 0).all())
        ((3,), (2,), True)
    """
    degree_x = check_integer(degree_x, "degree_x", minimum=1)
    degree_y = check_integer(degree_y, "degree_y", minimum=1)
    basis = _check_basis(basis)
    lam_x, lam_y = check_lambdas(gegenbauer_lambda)
    K = _as_gram(K, "K")
    G = _as_gram(G, "G")
    if K.shape != G.shape:
        raise ValueError(
            f"K and G must be Gram matrices on the same samples, got shapes {K.shape} "
            f"and {G.shape}"
        )
    return _fit_transform(K, G, lam_x, lam_y, degree_x, degree_y, basis)


def apply_transform(
    K: Float[ArrayLike, "*shape"],
    coeffs: Float[ArrayLike, " n_coeffs"],
    basis: str = "monomial",
    gegenbauer_lambda: float = DEFAULT_GEGENBAUER_LAMBDA,
) -> Float[Array, "*shape"]:
    """sum_i coeffs[i] K^(i+1), entry by entry (seed eqs. 14-15).

    Works on any kernel values: training Gram matrices, cross-kernels between test
    and training points, and diagonals ``k(x, x)`` (after a Gegenbauer transform
    these are sum_i coeffs[i] C_i^lambda(1), no longer 1). Entry-wise, so the
    transform of a cross-kernel is the matching block of the transform of the
    joint Gram matrix.

    Args:
        K: kernel values of any shape (1-D or 2-D).
        coeffs: ``(degree,)`` weights; ``coeffs[0]`` multiplies the degree-1 basis.
        basis: ``"monomial"`` or ``"gegenbauer"``.
        gegenbauer_lambda: lambda > -1/2 (ignored by the monomial basis).

    Returns:
        Array of ``K``'s shape.

    Raises:
        ValueError: for an unknown basis, lambda <= -1/2, empty coeffs, NaN/inf.

    Cost: O(degree size(K)) time, O(size(K)) memory (the sum is accumulated along
    the recurrence, the basis stack is never formed).

    Examples:
        >>> import numpy as np
        >>> apply_transform(np.array([0.5, 1.0]), np.array([1.0, 2.0])).tolist()
        [1.0, 3.0]
    """
    basis = _check_basis(basis)
    lam = _check_lambda(gegenbauer_lambda)
    K = as_array(K, "K", (1, 2))
    coeffs = as_array(coeffs, "coeffs", (1,))
    return combine_jit(K, coeffs, lam, basis=basis)


def psd_projection(K: Float[ArrayLike, "m_1 m_2"]) -> PSDProjection:
    """Project a symmetric matrix onto the PSD cone: negative eigenvalues set to 0.

    The result U diag(max(e, 0)) U^T of ``eigh((K + K^T) / 2)`` is the nearest PSD
    matrix in Frobenius norm (Higham 1988).

    Args:
        K: ``(m, m)`` symmetric matrix, e.g. a Gegenbauer-transformed Gram matrix.

    Returns:
        :class:`PSDProjection` (projected matrix, smallest eigenvalue before).

    Raises:
        ValueError: if ``K`` is not square or holds NaN/inf.

    Cost: O(m^3) time (one dense ``eigh``), O(m^2) memory.

    Examples:
        >>> import numpy as np
        >>> proj = psd_projection(np.array([[1.0, 2.0], [2.0, 1.0]]))
        >>> float(proj.min_eigenvalue.round(5)), np.asarray(proj.gram).round(5).tolist()
        (-1.0, [[1.5, 1.5], [1.5, 1.5]])
    """
    K = as_array(K, "K", (2,))
    if K.shape[0] != K.shape[1]:
        raise ValueError(f"K must be square, got shape {K.shape}")
    return _psd_projection(K)
