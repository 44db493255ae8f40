"""The Twin GP fit as one compiled program (the estimator's fit engine).

A :class:`bayeskde.TwinGP` fit with RBF kernels and no kernel transform needs
the input and output Grams, the Cholesky factor of K_X + ridge I (the KL
energy's k_x^T K_X^-1 k_x, Bo and Sminchisescu 2010, eq. (14)), the
eigendecomposition of K_Y + ridge I behind the truncated whitening
(:func:`bayeskde.tgp.truncated_whitening`) and the ridge linear regression of
the starts. Called one by one, these were five compiled programs in a fresh
process (about 0.7 s of tracing and compilation on 2 CPU cores); here they are
one, and the choices that depend on the results (the whitening's kept
eigenvectors, the jitter policy when the factor failed) run on the host.

The module also holds the fit's pieces as public functions: the start's ridge
linear regression (:func:`linear_init_weights`) and the truncated whitening of
the output Gram (:func:`truncated_whitening`, with its error bound).
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import jax.scipy.linalg as jsl
import numpy as np
from jaxtyping import Array, Float

from .._linalg import cholesky_try, cholesky_with_jitter
from .._typing import ArrayLike
from .._validation import check_data, check_gram, check_positive, check_same_length
from ..cache import quick_jit
from ..kernels.standard import rbf_gram
from .energy import STATE_DTYPE

__all__ = ["FitArrays", "fit_rbf", "Whitening", "truncated_whitening",
           "linear_init_weights", "input_gram_hi", "input_factor"]


@jax.jit
def linear_init_weights_jit(X, Y):
    Xe = jnp.concatenate([jnp.ones((X.shape[0], 1), X.dtype), X], axis=1)
    H = Xe.T @ Xe
    lam = 1e-5 * jnp.mean(jnp.diagonal(H))
    A = H + lam * jnp.eye(H.shape[0], dtype=H.dtype)
    return jsl.cho_solve(jsl.cho_factor(A, lower=True), Xe.T @ Y)


def linear_init_weights(
    X: Float[ArrayLike, "n_samples n_features"], Y: Float[ArrayLike, "n_outputs d_y"]
) -> Float[Array, "n_features_plus_1 d_y"]:
    """Ridge linear regression with bias, the TGP start (original ``LinearRegressor``).

    W = ([1 X]^T [1 X] + lam I)^-1 [1 X]^T Y with lam = 1e-5 mean(diag([1 X]^T
    [1 X])); predict with ``[1, x] @ W``. Cost O(n d^2 + d^3).
    """
    X = check_data(X, "X")
    Y = check_data(Y, "Y")
    check_same_length(X, Y, "X", "Y")
    return linear_init_weights_jit(X, Y)


@jax.jit
def whiten_gram(A):
    """W = V diag(lambda)^-1/2 with A = V diag(lambda) V^T, so A^-1 = W W^T.

    Eigenvalues below eps * max (an indefinite or singular A) are raised to it;
    the second output says whether any was.
    """
    lam, V = jnp.linalg.eigh(A)
    floor = jnp.finfo(A.dtype).eps * jnp.max(jnp.abs(lam))
    return V * jax.lax.rsqrt(jnp.maximum(lam, floor))[None, :], jnp.any(lam < floor)


@jax.jit
def _eigh_floor(G, ridge):
    A = G + ridge * jnp.eye(G.shape[0], dtype=G.dtype)
    lam, V = jnp.linalg.eigh(A)
    floor = jnp.finfo(A.dtype).eps * jnp.max(jnp.abs(lam))
    return lam, V, floor


class Whitening(NamedTuple):
    """A factor W with (K_Y + ridge I)^-1 ~ W W^T (:func:`truncated_whitening`).

    Attributes:
        whiten: ``(N, r)`` the kept columns V_j (lambda_j + ridge)^-1/2.
        rank: r, the number of kept eigenvectors.
        threshold: tau; eigenvectors with |lambda_j(K_Y)| <= tau were dropped.
        clipped: whether an eigenvalue of K_Y + ridge I was raised to eps * max.
    """

    whiten: Float[Array, "n_samples rank"]
    rank: int
    threshold: float
    clipped: bool


def truncated_whitening(
    G: Float[ArrayLike, "n_samples n_samples_2"],
    ridge: float,
    rtol: float | None = None,
) -> Whitening:
    """Low-rank W with W W^T ~ (G + ridge I)^-1 for the KL energy's k^T G^-1 k.

    With G = sum_j lambda_j v_j v_j^T, (G + ridge I)^-1 = sum_j v_j v_j^T /
    (lambda_j + ridge). The eigenvectors with |lambda_j| <= tau = rtol * ridge
    are dropped. For a PSD output kernel the error is bounded: [[G, k_y],
    [k_y^T, k(y,y)]] is PSD, so sum_j (v_j^T k_y)^2 / lambda_j <= k(y, y) and the
    dropped part of k_y^T (G + ridge I)^-1 k_y is at most

        sum_{lambda_j <= tau} (v_j^T k_y)^2 / ridge <= tau k(y, y) / ridge
        = rtol k(y, y),

    for every y at once. The Schur complement s = k(y,y) + ridge - k_y^T G^-1 k_y
    of the KL energy is >= ridge, so log s moves by at most rtol k(y, y) / ridge.
    Smooth kernels have fast-decaying spectra (the S-shape output Gram, N = 500,
    gamma_y = 20, keeps 23 of 500 eigenvectors in float64), so the energy costs
    O(N r) instead of O(N^2) per evaluation. Eigenvalues of G + ridge I below
    eps * max are raised to it, as an indefinite transformed Gram needs.

    Args:
        G: ``(N, N)`` output Gram matrix without the ridge.
        ridge: the ridge, > 0.
        rtol: relative threshold (tau = rtol * ridge); 0 keeps every
            eigenvector (exact). ``None`` (default) is dtype-aware: tau =
            max(sqrt(eps) ridge, sqrt(N) eps max(lambda)), the larger term being
            the round-off of ``eigh`` in the dtype, below which eigenvalues and
            their eigenvectors are noise (S-shape, N = 500: 23 kept in float64,
            13 in float32 instead of 493, which cost float32 a 20x slower
            energy for no accuracy).

    Returns:
        :class:`Whitening`.

    Cost: one ``eigh``, O(N^3) time, O(N^2) memory.
    """
    G = check_gram(G, "G")
    ridge = check_positive(ridge, "ridge")
    if rtol is not None and (not np.isfinite(float(rtol)) or float(rtol) < 0):
        raise ValueError(f"rtol must be finite and >= 0, got {rtol}")
    # One compiled program; the selection runs on the host (a handful of small
    # device ops would each compile in a fresh process).
    lam, V, floor = jax.device_get(_eigh_floor(G, ridge))
    return select_whitening(lam, V, floor, ridge, rtol)


def select_whitening(lam: np.ndarray, V: np.ndarray, floor, ridge: float,
                     rtol: float | None) -> Whitening:
    """:func:`truncated_whitening` from ``eigh(G + ridge I)`` = ``(lam, V)`` and
    the floor eps * max|lam| (host arrays, the outputs of ``_eigh_floor``)."""
    dtype = lam.dtype
    eps = float(np.finfo(dtype).eps)
    auto = rtol is None
    rtol = float(np.sqrt(eps)) if auto else float(rtol)
    tau = rtol * ridge
    if auto:
        # Eigenvalues within the round-off of eigh (about eps ||G||, grown by
        # sqrt(N) for the accumulated rotations) are not resolved by the dtype.
        tau = max(tau, np.sqrt(V.shape[0]) * eps * float(np.max(np.abs(lam))))
    keep = np.abs(lam - ridge) > tau
    if not keep.any():
        keep[-1] = True  # G ~ 0: keep one direction so that shapes stay valid
    W = V[:, keep] / np.sqrt(np.maximum(lam[keep], floor))[None, :]
    return Whitening(jnp.asarray(W, dtype), int(keep.sum()), tau,
                     bool(np.any(lam < float(floor))))


class FitArrays(NamedTuple):
    """What :func:`fit_rbf` computes.

    Attributes:
        K, G: input and output RBF Grams (no ridge).
        chol_in: lower factor of K + ridge I in float64 whatever the working
            precision (:data:`~bayeskde.tgp.STATE_DTYPE`; ``None`` for HSIC).
        whitening: :class:`Whitening` of G + ridge I (``None`` for HSIC).
        weights: ``(d_x + 1, d_y)`` ridge linear-regression weights.
    """

    K: Float[Array, "n n"]
    G: Float[Array, "n n"]
    chol_in: Float[Array, "n n"] | None
    whitening: Whitening | None
    weights: Float[Array, "d_x1 d_y"]


def input_gram_hi(X, gamma_x):
    """The input RBF Gram in :data:`~bayeskde.tgp.STATE_DTYPE` (float64) from
    working-precision ``X`` and ``gamma_x`` (cast exactly; call under
    ``jax.enable_x64``), so that the factor and the test rows k_x agree."""
    hi = STATE_DTYPE
    X = X.astype(hi)
    return rbf_gram(X, X, jnp.asarray(gamma_x).astype(hi))


def input_factor(K, ridge):
    """Lower factor of K + ridge I in float64 (:data:`~bayeskde.tgp.STATE_DTYPE`)
    with the package's jitter policy, whatever the working precision."""
    with jax.enable_x64(True):
        return cholesky_with_jitter(jnp.asarray(K).astype(STATE_DTYPE),
                                    "K_X + ridge I", shift=ridge)


@quick_jit(static_argnames="kl")
def _fit_program(X, Y, gamma_x, gamma_y, ridge, kl):
    K = rbf_gram(X, X, gamma_x)
    G = rbf_gram(Y, Y, gamma_y)
    weights = linear_init_weights_jit(X, Y)
    if not kl:
        return K, G, weights, jnp.all(jnp.isfinite(K)) & jnp.all(jnp.isfinite(G))
    # The factor in float64 (traced under jax.enable_x64): STATE_DTYPE.
    L, _, finite_k, ok = cholesky_try(input_gram_hi(X, gamma_x),
                                       jnp.asarray(ridge).astype(STATE_DTYPE))
    lam, V, floor = _eigh_floor(G, ridge)
    return K, G, weights, finite_k & jnp.all(jnp.isfinite(G)), L, ok, lam, V, floor


def fit_rbf(X, Y, gamma_x: float, gamma_y: float, ridge: float, kl: bool,
            rtol: float | None) -> FitArrays:
    """Grams, factor, whitening and start weights of a Twin GP with RBF kernels.

    Args:
        X, Y: validated ``(n, d_x)`` and ``(n, d_y)`` float arrays.
        gamma_x, gamma_y: RBF widths.
        ridge: the ridge, > 0.
        kl: the KL criterion (factor and whitening); else HSIC (Grams only).
        rtol: the whitening threshold (:func:`bayeskde.tgp.truncated_whitening`).

    Raises:
        ValueError: a Gram matrix is not finite.
        numpy.linalg.LinAlgError: K + ridge I stays indefinite under the jitter
            policy of :func:`bayeskde._linalg.cholesky_with_jitter`.

    Cost: O(n^2 (d_x + d_y)) for the Grams, O(n^3) for one Cholesky and one
    ``eigh``; one compiled program per (n, d_x, d_y, dtype).
    """
    dtype = X.dtype
    # Under jax.enable_x64 for the float64 input factor (STATE_DTYPE); every
    # other array of the program stays in the working precision.
    with jax.enable_x64(True):
        out = _fit_program(X, Y, jnp.asarray(gamma_x, dtype),
                           jnp.asarray(gamma_y, dtype), jnp.asarray(ridge, dtype), kl)
        K, G, weights, finite = out[:4]
        # One transfer for everything the host decides on.
        finite, *host = jax.device_get((finite, *out[5:]))
    if not finite:
        raise ValueError(
            "K_X or K_Y contains NaN or inf; check the data and the kernel "
            f"parameters (finite in {dtype}?)")
    if not kl:
        return FitArrays(K, G, None, None, weights)
    ok, lam, V, floor = host
    L = out[4]
    if not ok:  # the jitter policy, on the rare indefinite system
        with jax.enable_x64(True):
            L = input_factor(input_gram_hi(X, jnp.asarray(gamma_x, dtype)), ridge)
    return FitArrays(K, G, L, select_whitening(lam, V, floor, ridge, rtol), weights)
