"""Gram-matrix functions on vectors: RBF, polynomial, linear, delta and regression.

Every function maps ``A`` of shape ``(n_a, n_features)`` and ``B`` of shape
``(n_b, n_features)`` to the ``(n_a, n_b)`` Gram matrix. The ``*_gram`` cores are
jitted and assume validated input; the public wrappers validate, so estimators in
inner loops call the cores.

References:
    Weston, Chapelle, Elisseeff, Schölkopf and Vapnik (2002), "Kernel Dependency
    Estimation", NIPS 15, section 2, eqs. (2)-(3).
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float

from .._typing import float_dtype
from .._validation import (
    check_data,
    check_finite_result,
    check_integer,
    check_nonnegative,
    check_positive,
    check_squared_range,
)

__all__ = [
    "squared_distances",
    "rbf_kernel",
    "polynomial_kernel",
    "linear_kernel",
    "delta_kernel",
    "regression_kernel",
    "sigma_to_gamma",
    "median_gamma",
    "gamma_to_sigma",
    "VECTOR_KERNELS",
    "split_params",
    "gram_fn",
    "diag_fn",
]


def sigma_to_gamma(sigma: float) -> float:
    """Convert an RBF width to the rate: gamma = 1 / (2 sigma^2)."""
    sigma = check_positive(sigma, "sigma")
    return 1.0 / (2.0 * sigma * sigma)


def gamma_to_sigma(gamma: float) -> float:
    """Convert an RBF rate to the width: sigma = sqrt(1 / (2 gamma))."""
    gamma = check_positive(gamma, "gamma")
    return (0.5 / gamma) ** 0.5


@jax.jit
def squared_distances(
    A: Float[Array, "n_a n_features"], B: Float[Array, "n_b n_features"]
) -> Float[Array, "n_a n_b"]:
    """Pairwise squared Euclidean distances, clipped at zero against round-off.

    Overflow-safe form: both sets are scaled by the power of two nearest their
    largest magnitude (exact in floating point, so the result does not depend on
    which rows share a call), so the expansion ||a||^2 + ||b||^2 - 2 a.b cannot
    overflow; the scale comes back only at the end, where an overflow gives
    ``inf`` (an RBF value of 0), never ``inf - inf = NaN``.

    Cost: O(n_a n_b n_features) time, O(n_a n_b) memory.
    """
    big = jnp.maximum(jnp.max(jnp.abs(A), initial=0.0),
                      jnp.max(jnp.abs(B), initial=0.0))
    # frexp/ldexp: an exact power of two (exp2 of a float need not be one).
    _, exponent = jnp.frexp(jnp.where(big > 0, big, 1.0))
    scale = jnp.ldexp(jnp.ones((), A.dtype), exponent)
    A = A / scale
    B = B / scale
    a2 = jnp.sum(A * A, axis=1)
    b2 = jnp.sum(B * B, axis=1)
    d2 = jnp.maximum(a2[:, None] + b2[None, :] - 2.0 * (A @ B.T), 0.0)
    return jnp.where(d2 > 0, (d2 * scale) * scale, 0.0)


@jax.jit
def rbf_gram(A, B, gamma):
    return jnp.exp(-gamma * squared_distances(A, B))


@functools.partial(jax.jit, static_argnames="degree")
def polynomial_gram(A, B, degree, coef0):
    return (A @ B.T + coef0) ** degree


@jax.jit
def linear_gram(A, B):
    return A @ B.T


@jax.jit
def delta_gram(A, B, scale):
    same = jnp.all(A[:, None, :] == B[None, :, :], axis=-1)
    return scale * same.astype(A.dtype)


# ---------------------------------------------------------------- one definition
# The vector kernels as (static spec, dynamic theta): the form the low-rank and
# blocked code needs (a new gamma or coef0 must not recompile), and the one place
# each formula and diagonal is written. ``spec`` is ``(name, degree)``.

#: Kernels with a closed form on vectors that :func:`split_params` accepts.
VECTOR_KERNELS = ("rbf", "polynomial", "linear", "regression")


def split_params(name: str, params) -> tuple[tuple[str, int], Array]:
    """(static spec, dynamic theta) of a vector kernel with validated ``params``."""
    dtype = float_dtype()
    if isinstance(params.get("gamma"), str) or isinstance(
            params.get("rbf_sigma"), str):
        raise ValueError(
            f"{name} kernel parameters {dict(params)} hold 'median', which is "
            "resolved from training data: resolve it with Kernel.fit(X) (estimators "
            "do this in fit) or pass a number"
        )
    # Built on the host: a device-side cast compiles a program of its own.
    if name == "rbf":
        return ("rbf", 0), jnp.asarray(np.asarray([params["gamma"]], dtype))
    if name == "polynomial":
        return ("polynomial", params["degree"]), jnp.asarray(
            np.asarray([params["coef0"]], dtype))
    if name in ("linear", "regression"):
        return ("linear", 0), jnp.asarray(np.zeros((1,), dtype))
    raise ValueError(f"no vector form for kernel {name!r}; one of {VECTOR_KERNELS}")


def gram_fn(spec, theta, A, B):
    """The Gram block k(A, B) for a static ``spec`` (jit-safe, unvalidated)."""
    name, degree = spec
    if name == "rbf":
        return rbf_gram(A, B, theta[0])
    if name == "polynomial":
        return polynomial_gram(A, B, degree, theta[0])
    return linear_gram(A, B)


def diag_fn(spec, theta, A):
    """k(a, a) for each row of ``A`` (jit-safe, unvalidated)."""
    name, degree = spec
    if name == "rbf":
        return jnp.ones((A.shape[0],), A.dtype)
    sq = jnp.sum(A * A, axis=1)
    if name == "polynomial":
        return (sq + theta[0]) ** degree
    return sq


def _pair(A, B):
    A = check_squared_range(check_data(A, "A"), "A")
    B = A if B is None else check_squared_range(check_data(B, "B"), "B")
    if isinstance(A, tuple) or isinstance(B, tuple):
        raise TypeError("this kernel needs numeric arrays, got strings")
    if A.shape[1] != B.shape[1]:
        raise ValueError(
            f"A and B must have the same number of features, got {A.shape[1]} and "
            f"{B.shape[1]}"
        )
    return A, B


def _names(B):
    return "A" if B is None else "A and B"


def median_gamma(X, max_samples: int = 2000) -> float:
    """The median-heuristic RBF rate of data ``X``: gamma = 1 / (2 median^2).

    ``median`` is the median Euclidean distance between distinct rows among the
    first ``max_samples`` rows (pairs at distance 0, i.e. duplicate rows, are left
    out); if all rows coincide (or there is one row) every rate gives the same
    Gram matrix and gamma = 1. Cost O(min(n, max_samples)^2 n_features).

    Examples:
        >>> import numpy as np
        >>> median_gamma(np.array([[0.0], [1.0], [3.0]]))  # median distance 2
        0.125
    """
    X = check_data(X, "X")
    if isinstance(X, tuple):
        raise TypeError("the median heuristic needs a numeric array X, got strings")
    X = np.asarray(check_squared_range(X, "X")[:max_samples], dtype=np.float64)
    # On the host in float64 (at most max_samples rows): one small O(n^2 d)
    # product, no compilation per data shape.
    X = X - X.mean(axis=0)
    scale = max(float(np.max(np.abs(X))), float(np.finfo(np.float64).tiny))
    X = X / scale
    sq = np.sum(X * X, axis=1)
    d2 = np.maximum(sq[:, None] + sq[None, :] - 2.0 * (X @ X.T), 0.0)
    d2 = d2[np.triu_indices(X.shape[0], k=1)]
    # Duplicate rows leave round-off, not 0, in the expansion: drop it.
    d2 = d2[d2 > 64.0 * np.finfo(np.float64).eps * max(float(sq.max()), 1e-300)]
    if d2.size == 0:
        return 1.0
    med = float(np.median(np.sqrt(d2))) * scale
    return 1.0 / (2.0 * med * med)


def rbf_kernel(A, B=None, *, gamma: float | str = 1.0) -> Float[Array, "n_a n_b"]:
    """Gaussian RBF kernel k(x, y) = exp(-gamma ||x - y||^2).

    Args:
        A: ``(n_a, n_features)`` array (1-D is read as one feature).
        B: ``(n_b, n_features)`` array, or ``None`` for ``B = A``.
        gamma: rate, > 0 (``gamma = 1 / (2 sigma^2)``, see :func:`sigma_to_gamma`),
            or ``"median"``: :func:`median_gamma` of ``A``.

    Raises:
        ValueError: for NaN/inf in ``A``/``B``, or data whose squared norms
            overflow the working dtype (the message names the argument).

    Returns:
        ``(n_a, n_b)`` Gram matrix. Cost O(n_a n_b n_features).

    Examples:
        >>> import numpy as np
        >>> K = rbf_kernel(np.array([[0.0], [1.0]]), gamma=0.5)
        >>> round(float(K[0, 1]), 6)
        0.606531
    """
    A, B = _pair(A, B)
    gamma = median_gamma(A) if isinstance(gamma, str) and gamma == "median" else (
        check_positive(gamma, "gamma"))
    return check_finite_result(rbf_gram(A, B, gamma), _names(B), "rbf Gram")


def polynomial_kernel(
    A, B=None, *, degree: int = 2, coef0: float = 1.0
) -> Float[Array, "n_a n_b"]:
    """Polynomial kernel k(x, y) = (x . y + coef0)^degree (Weston et al. 2002, sec. 2).

    Raises:
        ValueError: if ``degree`` is not a positive integer or ``coef0 < 0``.
    """
    degree = check_integer(degree, "degree", minimum=1)
    coef0 = check_nonnegative(coef0, "coef0")
    A, B = _pair(A, B)
    return check_finite_result(
        polynomial_gram(A, B, degree, coef0), _names(B), "polynomial Gram")


def linear_kernel(A, B=None) -> Float[Array, "n_a n_b"]:
    """Linear kernel k(x, y) = x . y."""
    A, B = _pair(A, B)
    return check_finite_result(linear_gram(A, B), _names(B), "linear Gram")


def regression_kernel(A, B=None) -> Float[Array, "n_a n_b"]:
    """The regression output kernel l(y, y') = (y . y'), Weston et al. 2002, eq. (3).

    It is the linear kernel; the name exists so an output kernel reads as the paper.
    """
    return linear_kernel(A, B)


def delta_kernel(A, B=None, *, scale: float = 0.5) -> Float[Array, "n_a n_b"]:
    """Pattern-recognition kernel l(y, y') = scale [y == y'] (Weston et al., eq. (2)).

    With the paper's ``scale = 1/2`` the induced squared distance
    ``l(y,y) + l(y',y') - 2 l(y,y')`` is the 0-1 loss ``1 - [y == y']``. Rows are
    equal when all their features are equal; lists of strings compare as strings.
    """
    scale = check_positive(scale, "scale")
    A = check_data(A, "A")
    B = A if B is None else check_data(B, "B")
    if isinstance(A, tuple) != isinstance(B, tuple):
        raise TypeError("A and B must both be strings or both be arrays")
    if isinstance(A, tuple):
        codes = {s: i for i, s in enumerate(dict.fromkeys(A + B))}
        A = jnp.asarray([[codes[s]] for s in A], dtype=float_dtype())
        B = jnp.asarray([[codes[s]] for s in B], dtype=A.dtype)
    elif A.shape[1] != B.shape[1]:
        raise ValueError(
            f"A and B must have the same number of features, got {A.shape[1]} and "
            f"{B.shape[1]}"
        )
    return delta_gram(A, B, scale)
