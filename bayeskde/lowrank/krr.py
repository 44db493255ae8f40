"""Kernel ridge regression on a Nystroem subspace: a direct solver and Falkon.

With centres C (M of them) the Nystroem estimator f(x) = k(x, C) alpha minimises
(1/n) ||K_nM alpha - Y||^2 + ridge alpha^T K_MM alpha, i.e. solves

    (K_nM^T K_nM + n ridge K_MM) alpha = K_nM^T Y,                          (*)

the same ridge convention as :mod:`bayeskde.kde` (Weston et al. 2002, eq. (6): the
exact system K + n ridge I is (*) with C = X, K invertible). ``Y`` may have p
columns, all solved at once (KDE regresses every output principal component).

:func:`nystroem_krr` forms Phi^T Phi block by block for the Nystroem features
Phi = K_nM U (S + delta)^-1/2 (K_MM = U S U^T, one M x M ``eigh``, delta = 100 eps
times the mean diagonal) and solves (*) as ridge regression on them, with
K_MM + delta I in the penalty: the estimator scikit-learn's ``Nystroem`` + ``Ridge``
computes, up to delta.
:func:`falkon` (Rudi, Carratino and Rosasco 2017, Algorithm 1) never forms an M x M
product of K_nM: conjugate gradients run on B^T H B beta = B^T K_nM^T Y / n with
H = K_nM^T K_nM / n + ridge K_MM and the preconditioner B = T^-1 A^-1 built from
T = chol(K_MM) and A = chol(T T^T / M + ridge I), which approximates
(n/M K_MM^2 + n ridge K_MM)^-1 (their eq. (9)); K_MM in H carries a shift of
100 eps times its mean diagonal (see ``_falkon_jit``). Each iteration streams blocks of
K_nM (``block_size`` rows at a time), so memory is O(M^2 + block_size M).
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp
import jax.scipy.linalg as jsl
from jaxtyping import Array, Float, Int

from .._linalg import pad_rows
from .._typing import ArrayLike
from .._validation import as_float_array, check_integer, check_positive
from .blocked import (
    block_sum,
    check_apply_args,
    gram_fn,
    matmul_core,
    resolve_vector_kernel,
    rmatmul_core,
    scan_sum,
    split_kernel,
)
from .features import damped_normalizer, rel_floor

__all__ = ["KRRFit", "nystroem_krr", "falkon", "krr_predict"]


class KRRFit(NamedTuple):
    """A Nystroem kernel ridge regression fit, f(x) = k(x, centers) @ coef.

    Attributes:
        centers: ``(M, d)`` centres.
        coef: ``(M, p)`` coefficients alpha.
        n_iter: ``()`` conjugate-gradient iterations (0 for the direct solver).
        residual: ``(p,)`` final relative residual of the preconditioned system
            per column (0 for the direct solver).
    """

    centers: Float[Array, "n_centers n_features"]
    coef: Float[Array, "n_centers n_outputs"]
    n_iter: Int[Array, ""]
    residual: Float[Array, " n_outputs"]


def _jitter(Kmm):
    m = Kmm.shape[0]
    scale = jnp.maximum(jnp.mean(jnp.diagonal(Kmm)), 1e-30)
    return rel_floor(Kmm.dtype, m) * scale * jnp.eye(m, dtype=Kmm.dtype)


#: Rows per block of a stored K_nM on CPU: Kb^T (Kb u) then runs from cache. One
#: unblocked K^T (K u) streams K_nM twice, and XLA's CPU matvec with K^T is
#: about 9x slower than this loop (measured at n = 10^5, M = 2000). On GPUs the
#: whole product is one fast BLAS call, while a scan would launch a kernel per
#: block, so there K_nM stays one block.
_STORED_ROWS_CPU = 64


def _stored_blocks(spec, theta, X, C):
    """K_nM formed once, as ``(n_blocks, rows, M)`` with zero pad rows."""
    cpu = jax.default_backend() == "cpu"
    rows = min(_STORED_ROWS_CPU, X.shape[0]) if cpu else X.shape[0]
    Xb, mask = pad_rows(X, rows)
    K = gram_fn(spec, theta, Xb.reshape(-1, X.shape[1]), C) * mask.reshape(-1, 1)
    return K.reshape(Xb.shape[0], rows, C.shape[0])


def _ktk_fn(spec, theta, X, C, block_size, stored):
    """u -> K_nM^T K_nM u, from the stored blocks or streaming row blocks."""
    if stored is not None:
        return lambda u: scan_sum(lambda kb: kb.T @ (kb @ u), jnp.zeros_like(u),
                                  (stored,))

    def apply(u):
        def fn(mb, xb):
            Kb = gram_fn(spec, theta, xb, C) * mb[:, None]
            return Kb.T @ (Kb @ u)

        return block_sum(fn, jnp.zeros_like(u), block_size, X)

    return apply


def _stored_rhs(stored, Y):
    """K_nM^T Y from the stored blocks (one pass, cache-friendly)."""
    acc0 = jnp.zeros((stored.shape[2], Y.shape[1]), Y.dtype)
    return scan_sum(lambda kb, yb: kb.T @ yb, acc0,
                    (stored, pad_rows(Y, stored.shape[1])[0]))


def feature_scatter(spec, theta, X, C, W, Y, block_size):
    """(Phi^T Phi, Phi^T Y) for the features Phi = K(X, C) W, accumulated over
    row blocks. Forming Phi block by block (not W^T K^T K W) keeps the round-off
    relative to the O(1) features, not to W's large entries."""
    if block_size is None or block_size >= X.shape[0]:
        Phi = gram_fn(spec, theta, X, C) @ W
        return Phi.T @ Phi, Phi.T @ Y

    def fn(mb, xb, yb):
        Pb = (gram_fn(spec, theta, xb, C) @ W) * mb[:, None]
        return Pb.T @ Pb, Pb.T @ yb

    r = W.shape[1]
    acc0 = (jnp.zeros((r, r), W.dtype), jnp.zeros((r, Y.shape[1]), W.dtype))
    return block_sum(fn, acc0, block_size, X, Y)


@functools.partial(jax.jit, static_argnames=("spec", "block_size"))
def _direct_jit(spec, theta, X, Y, C, ridge, block_size):
    n = X.shape[0]
    # Nystroem features Phi = K_nM W with W = U (S + delta)^-1/2 (K_MM = U S U^T):
    # alpha = W w, (Phi^T Phi + n ridge I) w = Phi^T Y, which is (*) with
    # K_MM + delta I in the penalty (delta = 100 eps mean diag, see
    # damped_normalizer) and stays well posed when K_MM is near-singular.
    W = damped_normalizer(gram_fn(spec, theta, C, C))
    G, b = feature_scatter(spec, theta, X, C, W, Y, block_size)
    # eigh, not Cholesky: Phi^T Phi is PSD in exact arithmetic, but float32
    # round-off can push it below -n ridge, where Cholesky returns NaN.
    e, V = jnp.linalg.eigh(0.5 * (G + G.T))
    coef = W @ (V @ ((V.T @ b) / (jnp.maximum(e, 0.0) + n * ridge)[:, None]))
    return KRRFit(C, coef, jnp.zeros((), jnp.int32), jnp.zeros(Y.shape[1], Y.dtype))


_CG_PATIENCE = 5


def _cg(op, b, tol, max_iter):
    """Conjugate gradients, every column of ``b`` its own system.

    A column stops when ||r|| <= tol ||b||, or when its residual has not reached
    a new minimum for ``_CG_PATIENCE`` iterations (no progress: the round-off
    floor of the dtype, which float32 can meet above ``tol``). The loop stops
    when every column has. Returns the solution, the iterations and the final
    relative residuals.
    """
    thr = (tol * jnp.sqrt(jnp.sum(b * b, axis=0))) ** 2
    rs0 = jnp.sum(b * b, axis=0)
    izero = jnp.zeros(rs0.shape, jnp.int32)

    def active_of(rs, since):
        return (rs > thr) & (since < _CG_PATIENCE)

    def cond(state):
        _, _, _, rs, it, _, since = state
        return (it < max_iter) & jnp.any(active_of(rs, since))

    def body(state):
        x, r, p, rs, it, best, since = state
        Ap = op(p)
        active = active_of(rs, since)
        pAp = jnp.sum(p * Ap, axis=0)
        a = jnp.where(active, rs / jnp.where(pAp > 0, pAp, 1.0), 0.0)
        x = x + a[None, :] * p
        r = r - a[None, :] * Ap
        rs_new = jnp.sum(r * r, axis=0)
        beta = jnp.where(active, rs_new / jnp.where(rs > 0, rs, 1.0), 0.0)
        p = jnp.where(active[None, :], r + beta[None, :] * p, p)
        improved = rs_new < best
        best = jnp.where(active & improved, rs_new, best)
        since = jnp.where(active, jnp.where(improved, 0, since + 1), since)
        return x, r, p, jnp.where(active, rs_new, rs), it + 1, best, since

    x, _, _, rs, it, _, _ = jax.lax.while_loop(
        cond, body,
        (jnp.zeros_like(b), b, b, rs0, jnp.zeros((), jnp.int32), rs0, izero),
    )
    return x, it, jnp.sqrt(rs / jnp.where(rs0 > 0, rs0, 1.0))


@functools.partial(jax.jit, static_argnames=("spec", "block_size", "max_iter"))
def _falkon_jit(spec, theta, X, Y, C, ridge, tol, max_iter, block_size):
    n, m = X.shape[0], C.shape[0]
    Kmm = gram_fn(spec, theta, C, C)
    # Lower factors: L = T^T with T^T T = K_MM, and A_l = A^T with
    # A^T A = T T^T / M + ridge I (T T^T = L^T L). Their symmetrisation pass and
    # the transposed copies cost more than the factorisations at M = 2000.
    chol = functools.partial(jax.lax.linalg.cholesky, symmetrize_input=False)
    L = chol(Kmm + _jitter(Kmm))
    Al = chol(L.T @ L / m + ridge * jnp.eye(m, dtype=X.dtype))
    whole = block_size is None or block_size >= n
    stored = _stored_blocks(spec, theta, X, C) if whole else None
    ktk = _ktk_fn(spec, theta, X, C, block_size, stored)

    def lower(F, u, trans=0):
        return jsl.solve_triangular(F, u, lower=True, trans=trans)

    def prec(u):  # B u = T^-1 A^-1 u = L^-T Al^-T u
        return lower(L, lower(Al, u, 1), 1)

    def prec_t(w):  # B^T w = A^-T T^-T w = Al^-1 L^-1 w
        return lower(Al, lower(L, w))

    # The regulariser is applied with K_MM itself, not through the jittered
    # T^T T: Falkon's shortcut ridge A^-T A^-1 = ridge B^T T^T T B adds
    # ridge * jitter * I to the system, and in float32 the preconditioner's
    # jitter (eps M mean diag, needed for its Cholesky at M = 2000) cost +2.7%
    # test loss on bench/scale.py at m = 3e4 (+2.5% in float64 with the same
    # jitter). Some shift is still needed: without one, float32 CG on a tiny,
    # numerically singular K_MM returned NaN (falkon's doctest). 100 eps mean
    # diag, independent of M, keeps that stable and costs +1.4% at m = 3e4,
    # +0.24% at m = 1e4 (was +1.1%).
    shift = 100.0 * jnp.finfo(X.dtype).eps * jnp.mean(jnp.diagonal(Kmm))

    def bhb(u):
        v = prec(u)
        return prec_t(ktk(v) / n + ridge * (Kmm @ v + shift * v))

    rhs = _stored_rhs(stored, Y) if whole else rmatmul_core(spec, theta, X, C, Y,
                                                             block_size)
    r = prec_t(rhs / n)
    beta, it, res = _cg(bhb, r, tol, max_iter)
    return KRRFit(C, prec(beta), it, res)


def _check_fit_args(kernel, params, X, Y, centers, ridge, block_size):
    k = resolve_vector_kernel(kernel, params)
    X = as_float_array(X, "X", ndim=2)
    Y = as_float_array(Y, "Y")
    if Y.ndim == 1:
        Y = Y[:, None]
    if Y.ndim != 2 or Y.shape[0] != X.shape[0]:
        raise ValueError(
            f"Y must be ({X.shape[0]},) or ({X.shape[0]}, p) to match X, got shape "
            f"{Y.shape}"
        )
    C = as_float_array(centers, "centers", ndim=2)
    if C.shape[1] != X.shape[1]:
        raise ValueError(
            f"centers must have {X.shape[1]} features (as X), got shape {C.shape}"
        )
    if C.shape[0] > X.shape[0]:
        raise ValueError(
            f"need at most {X.shape[0]} centers (one per sample), got {C.shape[0]}"
        )
    ridge = check_positive(ridge, "ridge")
    bs = None if block_size is None else check_integer(block_size, "block_size")
    spec, theta = split_kernel(k)
    return spec, theta, X, Y, C, ridge, bs


def nystroem_krr(
    kernel,
    X: Float[ArrayLike, "n_samples n_features"],
    Y: Float[ArrayLike, "n_samples_y n_outputs"] | Float[ArrayLike, " n_samples_y"],
    centers: Float[ArrayLike, "n_centers n_features_c"],
    ridge: float,
    *,
    params=None,
    block_size: int | None = None,
) -> KRRFit:
    """Solve the Nystroem ridge system (*) directly (module docstring).

    Args:
        kernel, params: a vector kernel (``"rbf"``, ``"polynomial"``, ``"linear"``).
        X: ``(n, d)`` inputs; Y: ``(n,)`` or ``(n, p)`` targets.
        centers: ``(M, d)`` centres, M <= n.
        ridge: KDE's ridge gamma (> 0): the system has n ridge K_MM.
        block_size: rows of K_nM formed at once; ``None`` forms it whole.

    Returns:
        :class:`KRRFit`.

    Raises:
        ValueError: inconsistent shapes, NaN/inf, ridge <= 0, a non-vector kernel.

    Cost: O(n M (d + M + p) + M^3) time; O(M^2 + block_size M) memory with
    ``block_size`` (O(n M) without).
    """
    args = _check_fit_args(kernel, params, X, Y, centers, ridge, block_size)
    spec, theta, X, Y, C, ridge, bs = args
    return _direct_jit(spec, theta, X, Y, C, ridge, bs)


def falkon(
    kernel,
    X: Float[ArrayLike, "n_samples n_features"],
    Y: Float[ArrayLike, "n_samples_y n_outputs"] | Float[ArrayLike, " n_samples_y"],
    centers: Float[ArrayLike, "n_centers n_features_c"],
    ridge: float,
    *,
    params=None,
    block_size: int | None = None,
    max_iter: int = 100,
    tol: float | None = None,
) -> KRRFit:
    """Falkon: preconditioned conjugate gradients on the Nystroem system (*)
    (Rudi et al. 2017, Algorithm 1 and eq. (9)).

    Takes the arguments of :func:`nystroem_krr`, and

    Args:
        max_iter: most CG iterations (Falkon needs O(log n) for a good fit).
        tol: stop when every column's preconditioned residual is below ``tol``
            relative to its right-hand side, or stops decreasing (5 iterations
            without a new minimum: the round-off floor); ``None`` means
            max(1000 eps, 1e-7) of the dtype (1e-7 in float64, 1.2e-4 in
            float32).

    Returns:
        :class:`KRRFit` with the iteration count and final residuals.

    Cost: O(t n M (d + p) + M^3) time for t iterations; O(M^2 + block_size M)
    memory with ``block_size`` (O(n M) without, then K_nM is formed once).

    Examples:
        >>> import numpy as np
        >>> X = np.linspace(0, 1, 50)[:, None]; Y = np.sin(4 * X)
        >>> fit = falkon("rbf", X, Y, X[::5], 1e-6, params={"gamma": 5.0},
        ...              block_size=16)
        >>> err = np.abs(krr_predict("rbf", fit, X, params={"gamma": 5.0}) - Y)
        >>> bool(err.max() < 2e-2)
        True
    """
    args = _check_fit_args(kernel, params, X, Y, centers, ridge, block_size)
    spec, theta, X, Y, C, ridge, bs = args
    it = check_integer(max_iter, "max_iter", minimum=1)
    if tol is None:
        tol = max(1000.0 * float(jnp.finfo(X.dtype).eps), 1e-7)
    tol = check_positive(tol, "tol")
    return _falkon_jit(spec, theta, X, Y, C, ridge, tol, it, bs)


_predict_jit = jax.jit(matmul_core, static_argnames=("spec", "block_size"))


def krr_predict(
    kernel,
    fit: KRRFit,
    X: Float[ArrayLike, "n_test n_features"],
    *,
    params=None,
    block_size: int | None = None,
) -> Float[Array, "n_test n_outputs"]:
    """Predictions k(x, C) @ coef ``(n_test, p)``, blocked over test rows.

    Cost: O(n_test M (d + p)) time, O(block_size M + n_test p) memory.
    """
    spec, theta, X, bs = check_apply_args(kernel, params, X, fit.centers, block_size)
    return _predict_jit(spec, theta, X, fit.centers, fit.coef, bs)
