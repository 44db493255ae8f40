"""Hyperkernels: kernels on pairs of points whose sections are kernels.

A hyperkernel ``K((x1, x1'), (x2, x2'))`` is positive definite on pairs and, with one
pair fixed, positive definite in the other (Kondor and Jebara 2006, Definition 1).
This module holds the Gaussian hyperkernel (eqs. (7)-(8)), the Wishart hyperkernel
(eqs. (10)-(12)) and, as a reference, the harmonic hyperkernel of Ong, Smola and
Williamson (2003), each for one quadruple and as a Gram matrix between two lists of
pairs, stored as arrays of shape ``(n_pairs, 2, n_features)``.

Notation: ``<x, x'>_S = N(x; x', S)`` is the normalised Gaussian density with
covariance ``S`` (a scalar ``s^2`` means ``s^2 I``); ``n`` is the dimension.

Every closed form here was derived again from its defining integral (the seed's
text lost most symbols) and is checked against Monte Carlo estimates of that
integral in ``tests/kernels/test_hyper.py``. Values are computed in log space and
exponentiated once, so the tiny normalising constants of high-dimensional Gaussians
do not underflow before they are combined.

``normalize``: with ``True`` (the default) the functions return the integrals
exactly. With ``False`` they return ``K / K((x, x), (x, x))``, the integral divided
by its value at four coincident points (a constant that depends only on ``sigma``,
``sigma_h``, ``n`` or on ``C``, ``r``, ``n``), so the values lie in ``(0, 1]``. The
constant rescales every kernel learned with the hyperkernel, which the learner's
hinge constant absorbs; the learner uses ``normalize=False``.

References:
    Kondor and Jebara (2006), "Gaussian and Wishart Hyperkernels", NIPS 19,
    Definition 1, Lemma 1, eqs. (7)-(12).
    Ong, Smola and Williamson (2003), "Hyperkernels", NIPS 15; Ong, Smola and
    Williamson (2005), "Learning the kernel with hyperkernels", JMLR 6, the
    harmonic hyperkernel.
"""

from __future__ import annotations

from functools import partial

import jax
import jax.numpy as jnp
import numpy as np
from jax.scipy.linalg import solve_triangular
from jax.scipy.special import multigammaln
from jaxtyping import Array, Float

from .._typing import ArrayLike
from .._validation import (
    as_float_array,
    check_nonnegative,
    check_positive,
    check_squared_range,
)
from .standard import squared_distances

__all__ = [
    "gaussian_hyperkernel",
    "gaussian_hyperkernel_gram",
    "wishart_hyperkernel",
    "wishart_hyperkernel_gram",
    "harmonic_hyperkernel",
    "harmonic_hyperkernel_gram",
    "check_pairs",
    "check_wishart_params",
]


# ----------------------------------------------------------------------------- cores
# Unjitted helpers on validated arrays; composed by the jitted entry points below
# and by bayeskde.hyperlearn.


def _pair_parts(P):
    """Squared within-pair distances ``||x - x'||^2`` and midpoints ``(x + x')/2``."""
    diff = P[:, 0, :] - P[:, 1, :]
    return jnp.sum(diff * diff, axis=1), 0.5 * (P[:, 0, :] + P[:, 1, :])


def gaussian_log_norm(n, sigma, sigma_h):
    """log of (4 pi sigma^2)^(-n) (2 pi (sigma^2 + sigma_h^2))^(-n/2)."""
    tau2 = sigma * sigma + sigma_h * sigma_h
    return -n * jnp.log(4.0 * jnp.pi * sigma * sigma) - 0.5 * n * jnp.log(
        2.0 * jnp.pi * tau2
    )


def gaussian_log_gram(P, Q, sigma, sigma_h, normalize):
    dP, mP = _pair_parts(P)
    dQ, mQ = _pair_parts(Q)
    tau2 = sigma * sigma + sigma_h * sigma_h
    logK = -(dP[:, None] + dQ[None, :]) / (4.0 * sigma * sigma) - squared_distances(
        mP, mQ
    ) / (2.0 * tau2)
    if normalize:
        logK = logK + gaussian_log_norm(P.shape[-1], sigma, sigma_h)
    return logK


def _wishart_log_const(n, r):
    """log c(r, n) = log[pi^(-3n/2) 2^(-n) Gamma_n((r+3)/2) / Gamma_n(r/2)]."""
    return (
        -1.5 * n * jnp.log(jnp.pi)
        - n * jnp.log(2.0)
        + multigammaln(0.5 * (r + 3.0), n)
        - multigammaln(0.5 * r, n)
    )


def _whiten_pairs(P, L):
    """Whitened half-differences L^-1 (x - x')/sqrt(2) and midpoints L^-1 (x + x')/2."""
    u = solve_triangular(L, (P[:, 0, :] - P[:, 1, :]).T, lower=True).T
    m = solve_triangular(L, (P[:, 0, :] + P[:, 1, :]).T, lower=True).T
    return u / jnp.sqrt(2.0), 0.5 * m


def _logdet3(a11, a22, a33, a12, a13, a23):
    """log det of the SPD 3x3 matrix I + G by its LDL^T pivots (each >= 1)."""
    d1 = a11
    l21, l31 = a12 / d1, a13 / d1
    d2 = a22 - l21 * a12
    l32 = (a23 - l31 * a12) / d2
    d3 = a33 - l31 * a13 - l32 * l32 * d2
    one = jnp.ones((), d1.dtype)
    # Round-off only: the pivots of I + G with G PSD are >= 1.
    return (
        jnp.log(jnp.maximum(d1, one))
        + jnp.log(jnp.maximum(d2, one))
        + jnp.log(jnp.maximum(d3, one))
    )


def wishart_log_gram(P, Q, L, r, normalize):
    uP, mP = _whiten_pairs(P, L)
    uQ, mQ = _whiten_pairs(Q, L)
    # G = V^T V with V = L^-1 [u_P, u_Q, m_P - m_Q]: the 3x3 Gram of the whitened
    # rank-3 factors of S_tot, by the matrix determinant lemma.
    aa = jnp.sum(uP * uP, axis=1)[:, None]
    bb = jnp.sum(uQ * uQ, axis=1)[None, :]
    mm_p = jnp.sum(mP * mP, axis=1)[:, None]
    mm_q = jnp.sum(mQ * mQ, axis=1)[None, :]
    cc = jnp.maximum(mm_p + mm_q - 2.0 * (mP @ mQ.T), 0.0)
    ab = uP @ uQ.T
    ac = jnp.sum(uP * mP, axis=1)[:, None] - uP @ mQ.T
    bc = mP @ uQ.T - jnp.sum(uQ * mQ, axis=1)[None, :]
    logdet = _logdet3(1.0 + aa, 1.0 + bb, 1.0 + cc, ab, ac, bc)
    logK = -0.5 * (r + 3.0) * logdet
    if normalize:
        n = P.shape[-1]
        log_det_C = 2.0 * jnp.sum(jnp.log(jnp.diagonal(L)))
        logK = logK - 1.5 * log_det_C + _wishart_log_const(n, r)
    return logK


def harmonic_gram(P, Q, gamma_h, lambda_h):
    dP, _ = _pair_parts(P)
    dQ, _ = _pair_parts(Q)
    e = jnp.exp(-gamma_h * (dP[:, None] + dQ[None, :]))
    return (1.0 - lambda_h) / (1.0 - lambda_h * e)


@partial(jax.jit, static_argnames="normalize")
def _gaussian_gram_jit(P, Q, sigma, sigma_h, normalize):
    return jnp.exp(gaussian_log_gram(P, Q, sigma, sigma_h, normalize))


@partial(jax.jit, static_argnames="normalize")
def _wishart_gram_jit(P, Q, L, r, normalize):
    return jnp.exp(wishart_log_gram(P, Q, L, r, normalize))


_harmonic_gram_jit = jax.jit(harmonic_gram)


# ------------------------------------------------------------------------ validation


def check_pairs(P, name: str) -> Float[Array, "n_pairs 2 n_features"]:
    """Validate an array of pairs: shape ``(n_pairs, 2, n_features)``, finite.

    Raises:
        ValueError: for another shape, an empty array or NaN/inf.
    """
    P = as_float_array(P, name)
    if P.ndim != 3 or P.shape[1] != 2 or P.shape[2] == 0:
        raise ValueError(
            f"{name} must be an array of pairs of shape (n_pairs, 2, n_features), "
            f"got shape {P.shape}"
        )
    check_squared_range(P.reshape(P.shape[0], -1), name)
    return P


def _two_pair_sets(P, Q):
    P = check_pairs(P, "P")
    Q = P if Q is None else check_pairs(Q, "Q")
    if P.shape[2] != Q.shape[2]:
        raise ValueError(
            f"P and Q must have the same number of features, got {P.shape[2]} and "
            f"{Q.shape[2]}"
        )
    return P, Q


def _quadruple(x1, x1p, x2, x2p):
    xs = [as_float_array(v, name, ndim=1) for v, name in
          ((x1, "x1"), (x1p, "x1p"), (x2, "x2"), (x2p, "x2p"))]
    dims = {int(v.shape[0]) for v in xs}
    if len(dims) != 1:
        raise ValueError(
            "x1, x1p, x2 and x2p must have the same length, got "
            f"{[int(v.shape[0]) for v in xs]}"
        )
    return jnp.stack(xs[:2])[None], jnp.stack(xs[2:])[None]


def check_sigmas(sigma, sigma_h):
    sigma = check_positive(sigma, "sigma")
    # sigma_h = 0 is the exact limit h -> delta of eq. (7), used by the paper.
    sigma_h = check_nonnegative(sigma_h, "sigma_h")
    return sigma, sigma_h


def check_wishart_params(C, r, n_features: int):
    """Validate the Wishart hyperkernel's scale ``C`` and degrees of freedom ``r``.

    Returns:
        ``(L, r)``: the lower Cholesky factor of ``C`` and ``r`` as a float.

    Raises:
        ValueError: if ``C`` is not a symmetric positive definite
            ``(n_features, n_features)`` matrix, or ``r <= n_features - 1`` (the
            inverse Wishart density is then not normalisable).
    """
    C64 = np.asarray(C, dtype=np.float64)
    if C64.shape != (n_features, n_features):
        raise ValueError(
            f"C must have shape ({n_features}, {n_features}), got {C64.shape}"
        )
    if not np.all(np.isfinite(C64)):
        raise ValueError("C contains NaN or inf")
    if not np.allclose(C64, C64.T, rtol=1e-6, atol=1e-8 * np.abs(C64).max()):
        raise ValueError("C must be symmetric")
    evals = np.linalg.eigvalsh(0.5 * (C64 + C64.T))
    if evals[0] <= 1e-10 * max(evals[-1], 0.0) or evals[-1] <= 0:
        raise ValueError(
            f"C must be positive definite, got smallest eigenvalue {evals[0]:.3g}"
        )
    r = check_positive(r, "r")
    if r <= n_features - 1:
        raise ValueError(
            f"r must be > n_features - 1 = {n_features - 1} for the inverse Wishart "
            f"to be normalisable, got {r}"
        )
    L = np.linalg.cholesky(0.5 * (C64 + C64.T))
    return as_float_array(L, "C's Cholesky factor"), r


# ------------------------------------------------------------------------- Gaussian


def gaussian_hyperkernel_gram(
    P: Float[ArrayLike, "*pairs_p"],
    Q: Float[ArrayLike, "*pairs_q"] | None,
    sigma: float | int,
    sigma_h: float | int,
    *,
    normalize: bool = True,
) -> Float[Array, "n_p n_q"]:
    """Gaussian hyperkernel between two lists of pairs, Kondor and Jebara eq. (8).

    Derivation of eq. (8) from the integral of eq. (7),
    K = int int <x1,z>_s2 <z,x1'>_s2 <z,z'>_h2 <x2,z'>_s2 <z',x2'>_s2 dz dz'
    with s2 = sigma^2, h2 = sigma_h^2: completing the square,
    <x1,z>_s2 <z,x1'>_s2 = <x1,x1'>_{2 s2} <z, m1>_{s2/2}, m1 = (x1 + x1')/2, and
    the convolution of Gaussians int int <m1,z>_{s2/2} <z,z'>_h2 <z',m2>_{s2/2}
    = <m1, m2>_{s2 + h2}. Hence

        K = <x1, x1'>_{2 sigma^2} <x2, x2'>_{2 sigma^2} <m1, m2>_{sigma^2+sigma_h^2}.

    Limits: sigma_h -> 0 (h -> delta) gives <m1, m2>_{sigma^2}; as sigma_h -> inf,
    (2 pi (sigma^2 + sigma_h^2))^(n/2) K tends to the product of two Gaussian RBF
    kernels <x1,x1'>_{2 sigma^2} <x2,x2'>_{2 sigma^2}: the pairs decouple.
    Sum/difference factorisation: with x^ = (x + x')/sqrt(2), x~ = (x - x')/sqrt(2),
    K = 2^(-n/2) <x1^, x2^>_{2(sigma^2 + sigma_h^2)} <x1~, 0>_{sigma^2}
    <x2~, 0>_{sigma^2} (the paper prints it without the Jacobian factor 2^(-n/2)):
    a Gaussian kernel in the sums times a rank-one factor in the differences.

    Args:
        P: ``(n_p, 2, n_features)`` pairs.
        Q: ``(n_q, 2, n_features)`` pairs, or ``None`` for ``Q = P``.
        sigma: width of the Gaussians r(x, z), > 0.
        sigma_h: width of h(z, z'), >= 0 (0 is the delta limit).
        normalize: ``False`` divides by the value at coincident points,
            (4 pi sigma^2)^(-n) (2 pi (sigma^2 + sigma_h^2))^(-n/2), giving
            exp(-(||x1-x1'||^2 + ||x2-x2'||^2)/(4 sigma^2)
            - ||m1-m2||^2/(2 (sigma^2 + sigma_h^2))).

    Returns:
        ``(n_p, n_q)`` hyperkernel matrix. Cost O(n_p n_q n_features).

    Raises:
        ValueError: for pairs of the wrong shape, ``sigma <= 0``, ``sigma_h < 0``.

    Examples:
        >>> import numpy as np
        >>> P = np.zeros((1, 2, 1))
        >>> K = gaussian_hyperkernel_gram(P, None, 1.0, 0.0, normalize=False)
        >>> float(K[0, 0])
        1.0
    """
    sigma, sigma_h = check_sigmas(sigma, sigma_h)
    P, Q = _two_pair_sets(P, Q)
    return _gaussian_gram_jit(P, Q, sigma, sigma_h, normalize=bool(normalize))


def gaussian_hyperkernel(
    x1: Float[ArrayLike, " n1"],
    x1p: Float[ArrayLike, " n2"],
    x2: Float[ArrayLike, " n3"],
    x2p: Float[ArrayLike, " n4"],
    sigma: float | int,
    sigma_h: float | int,
    *,
    normalize: bool = True,
) -> Float[Array, ""]:
    """Gaussian hyperkernel K((x1, x1'), (x2, x2')), Kondor and Jebara eqs. (7)-(8).

    See :func:`gaussian_hyperkernel_gram` for the derivation and arguments.

    Examples:
        >>> import numpy as np
        >>> x = np.zeros(1)
        >>> k = gaussian_hyperkernel(x, x, x, x, 1.0, 0.0)
        >>> bool(np.isclose(k, (4 * np.pi) ** -1 * (2 * np.pi) ** -0.5))
        True
    """
    sigma, sigma_h = check_sigmas(sigma, sigma_h)
    P, Q = _quadruple(x1, x1p, x2, x2p)
    return _gaussian_gram_jit(P, Q, sigma, sigma_h, normalize=bool(normalize))[0, 0]


# -------------------------------------------------------------------------- Wishart


def wishart_hyperkernel_gram(
    P: Float[ArrayLike, "*pairs_p"],
    Q: Float[ArrayLike, "*pairs_q"] | None,
    C: Float[ArrayLike, "c_rows c_cols"],
    r: float | int,
    *,
    normalize: bool = True,
) -> Float[Array, "n_p n_q"]:
    """Wishart hyperkernel between two lists of pairs, Kondor and Jebara eq. (12).

    Derivation from eq. (10), K = int_{Sigma > 0} int <x1,z>_Sigma <z,x1'>_Sigma
    <x2,z>_Sigma <z,x2'>_Sigma IW(Sigma; C, r) dz dSigma, with the inverse Wishart
    IW(Sigma; C, r) = |C|^(r/2) |Sigma|^(-(r+n+1)/2) exp(-tr(C Sigma^-1)/2) / Z_r,
    Z_r = 2^(rn/2) Gamma_n(r/2) (scipy's ``invwishart(df=r, scale=C)``). The four
    Gaussians in z share Sigma; with a_1..a_4 = x1, x1', x2, x2' and mean a-bar,
    sum_i (z - a_i)^T Sigma^-1 (z - a_i) = 4 (z - a-bar)^T Sigma^-1 (z - a-bar)
    + tr(Sigma^-1 S_tot), so the z-integral is
    (2 pi)^(-3n/2) 2^(-n) |Sigma|^(-3/2) exp(-tr(Sigma^-1 S_tot)/2), where the
    scatter S_tot = S1 + S2 + S, S_i = (x_i - x_i')(x_i - x_i')^T / 2,
    S = (m1 - m2)(m1 - m2)^T, m_i = (x_i + x_i')/2. The Sigma-integral is the
    normaliser of IW(C + S_tot, r + 3):

        K = c(r, n) |C|^(r/2) / |C + S_tot|^((r+3)/2),
        c(r, n) = pi^(-3n/2) 2^(-n) Gamma_n((r+3)/2) / Gamma_n(r/2).

    S_tot has rank <= 3, so |C + S_tot| = |C| det(I_3 + V^T V) with
    V = L^-1 [u1, u2, m1 - m2] (C = L L^T, u_i = (x_i - x_i')/sqrt(2)): after one
    Cholesky of C each quadruple costs O(n).

    Args:
        P: ``(n_p, 2, n_features)`` pairs.
        Q: ``(n_q, 2, n_features)`` pairs, or ``None`` for ``Q = P``.
        C: ``(n_features, n_features)`` symmetric positive definite scale.
        r: degrees of freedom, > n_features - 1 (real values allowed).
        normalize: ``False`` divides by the coincident-point value
            c(r, n) |C|^(-3/2), giving (|C| / |C + S_tot|)^((r+3)/2) in (0, 1].

    Returns:
        ``(n_p, n_q)`` hyperkernel matrix. Cost O(n^3 + (n_p + n_q) n^2
        + n_p n_q n).

    Raises:
        ValueError: for pairs of the wrong shape, a ``C`` that is not symmetric
            positive definite or of the wrong size, or ``r <= n_features - 1``.

    Examples:
        >>> import numpy as np
        >>> P = np.zeros((1, 2, 2))
        >>> K = wishart_hyperkernel_gram(P, None, np.eye(2), 3, normalize=False)
        >>> float(K[0, 0])
        1.0
    """
    P, Q = _two_pair_sets(P, Q)
    L, r = check_wishart_params(C, r, int(P.shape[2]))
    return _wishart_gram_jit(P, Q, L, r, normalize=bool(normalize))


def wishart_hyperkernel(
    x1: Float[ArrayLike, " n1"],
    x1p: Float[ArrayLike, " n2"],
    x2: Float[ArrayLike, " n3"],
    x2p: Float[ArrayLike, " n4"],
    C: Float[ArrayLike, "c_rows c_cols"],
    r: float | int,
    *,
    normalize: bool = True,
) -> Float[Array, ""]:
    """Wishart hyperkernel K((x1, x1'), (x2, x2')), Kondor and Jebara eqs. (10)-(12).

    See :func:`wishart_hyperkernel_gram` for the derivation and arguments.

    Examples:
        >>> import numpy as np
        >>> x = np.zeros(1)
        >>> k = wishart_hyperkernel(x, x, x, x, np.eye(1), 2.0, normalize=False)
        >>> float(k)
        1.0
    """
    P, Q = _quadruple(x1, x1p, x2, x2p)
    L, r = check_wishart_params(C, r, int(P.shape[2]))
    return _wishart_gram_jit(P, Q, L, r, normalize=bool(normalize))[0, 0]


# ------------------------------------------------------------------------- harmonic


def check_harmonic(gamma_h, lambda_h):
    gamma_h = check_positive(gamma_h, "gamma_h")
    lambda_h = check_positive(lambda_h, "lambda_h")
    if lambda_h >= 1.0:
        raise ValueError(f"lambda_h must be in (0, 1), got {lambda_h}")
    return gamma_h, lambda_h


def harmonic_hyperkernel_gram(
    P: Float[ArrayLike, "*pairs_p"],
    Q: Float[ArrayLike, "*pairs_q"] | None,
    gamma_h: float | int,
    lambda_h: float | int,
) -> Float[Array, "n_p n_q"]:
    """Ong, Smola and Williamson's harmonic hyperkernel with a Gaussian base kernel.

    ::

        K = (1 - lambda_h) sum_{i >= 0} lambda_h^i (k(x1, x1') k(x2, x2'))^i
          = (1 - lambda_h) / (1 - lambda_h exp(-gamma_h (||x1 - x1'||^2
            + ||x2 - x2'||^2))),

    with k(x, x') = exp(-gamma_h ||x - x'||^2) (Ong et al. 2003, section 4; 2005,
    the harmonic hyperkernel). Each term is a feature product in the pairs (so K is
    positive definite on pairs) and a power of k in the other pair (so each
    section is a kernel): Definition 1 holds. Unlike the Gaussian hyperkernel it
    ignores where the pairs lie, only how far apart their members are.

    Args:
        P, Q: pairs as in :func:`gaussian_hyperkernel_gram`.
        gamma_h: rate of the base RBF kernel, > 0.
        lambda_h: in (0, 1); larger values weight higher powers of k more.

    Returns:
        ``(n_p, n_q)`` hyperkernel matrix. Cost O((n_p + n_q) n_features + n_p n_q).

    Raises:
        ValueError: for pairs of the wrong shape or parameters out of range.
    """
    gamma_h, lambda_h = check_harmonic(gamma_h, lambda_h)
    P, Q = _two_pair_sets(P, Q)
    return _harmonic_gram_jit(P, Q, gamma_h, lambda_h)


def harmonic_hyperkernel(
    x1: Float[ArrayLike, " n1"],
    x1p: Float[ArrayLike, " n2"],
    x2: Float[ArrayLike, " n3"],
    x2p: Float[ArrayLike, " n4"],
    gamma_h: float | int,
    lambda_h: float | int,
) -> Float[Array, ""]:
    """Harmonic hyperkernel of one quadruple; see :func:`harmonic_hyperkernel_gram`.

    Examples:
        >>> import numpy as np
        >>> x = np.zeros(2)
        >>> float(harmonic_hyperkernel(x, x, x, x, 1.0, 0.5))
        1.0
    """
    gamma_h, lambda_h = check_harmonic(gamma_h, lambda_h)
    P, Q = _quadruple(x1, x1p, x2, x2p)
    return _harmonic_gram_jit(P, Q, gamma_h, lambda_h)[0, 0]

