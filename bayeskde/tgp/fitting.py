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
"""

from __future__ import annotations

from typing import NamedTuple

import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float

from .._linalg import _cholesky_try, cholesky_with_jitter
from ..cache import quick_jit
from ..kernels.standard import rbf_gram
from .energy import (
    Whitening,
    _eigh_floor,
    _linear_init_weights,
    select_whitening,
)

__all__ = ["FitArrays", "fit_rbf"]


class FitArrays(NamedTuple):
    """What :func:`fit_rbf` computes.

    Attributes:
        K, G: input and output RBF Grams (no ridge).
        chol_in: lower factor of K + ridge I (``None`` for HSIC).
        whitening: :class:`Whitening` of G + ridge I (``None`` for HSIC).
        weights: ``(d_x + 1, d_y)`` ridge linear-regression weights.
    """

    K: Float[Array, "n n"]
    G: Float[Array, "n n"]
    chol_in: Float[Array, "n n"] | None
    whitening: Whitening | None
    weights: Float[Array, "d_x1 d_y"]


@quick_jit(static_argnames="kl")
def _fit_program(X, Y, gamma_x, gamma_y, ridge, kl):
    K = rbf_gram(X, X, gamma_x)
    G = rbf_gram(Y, Y, gamma_y)
    weights = _linear_init_weights(X, Y)
    if not kl:
        return K, G, weights, jnp.all(jnp.isfinite(K)) & jnp.all(jnp.isfinite(G))
    L, diag_max, finite_k, ok = _cholesky_try(K, ridge)
    lam, V, floor = _eigh_floor(G, ridge)
    return (K, G, weights, finite_k & jnp.all(jnp.isfinite(G)), L, diag_max, ok,
            lam, V, floor)


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
    out = _fit_program(X, Y, jnp.asarray(gamma_x, dtype), jnp.asarray(gamma_y, dtype),
                       jnp.asarray(ridge, dtype), kl)
    K, G, weights, finite = out[:4]
    if not bool(finite):
        raise ValueError(
            "K_X or K_Y contains NaN or inf; check the data and the kernel "
            f"parameters (finite in {dtype}?)")
    if not kl:
        return FitArrays(K, G, None, None, weights)
    L, _, ok, lam, V, floor = out[4:]
    if not bool(ok):  # the jitter policy, on the rare indefinite system
        L = cholesky_with_jitter(K, "K_X + ridge I", shift=ridge)
    w = select_whitening(*(np.asarray(a) for a in (lam, V, floor)), ridge, rtol)
    return FitArrays(K, G, L, w, weights)
