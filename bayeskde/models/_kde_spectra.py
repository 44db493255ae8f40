"""Spectra of the input Grams on a width grid: exact and Nystroem (low-rank).

The Bayesian KDE (:mod:`bayeskde.models.kde`, which re-exports these names)
needs, per grid width g, an eigendecomposition of the input Gram and the output
coordinates in its eigenbasis: K_g = U_g diag(s_g) U_g^T and W_g = U_g^T T. Then
the ridge only moves the eigenvalues, C_g = K_g + m gamma I = U_g diag(s_g + m
gamma) U_g^T: the leave-one-out predictions of the Gibbs posterior need C_g^-1 T
and diag(C_g^-1) for every ridge without a factorisation, and the GP evidences
kept as references in ``bench/kde_evidence.py`` need

    log|C_g| = sum_i log(s_gi + m gamma),  q_gj = sum_i W_g[i, j]^2 / (s_gi + m gamma).

Exact path: one m x m ``eigh`` per width, O(G m^3).

Nystroem path. With M centres (indices c) and the features Phi = K_g[:, c] K_cc^-1/2
(Williams and Seeger 2001), K_g is replaced by K~_g = Phi Phi^T. Only the M x M
matrix Phi^T Phi = V diag(e) V^T is decomposed: K~_g has the M eigenpairs
(e_i, U_i = Phi v_i / sqrt(e_i)) and the eigenvalue 0 on the other m - M
directions, so by Woodbury and the matrix determinant lemma

    log|K~_g + m gamma I| = sum_i log(e_i + m gamma) + (m - M) log(m gamma),
    t_j^T (K~_g + m gamma I)^-1 t_j = sum_i w_ij^2 / (e_i + m gamma) + r_j / (m gamma),

with w = U^T T and r_j = ||t_j - U U^T t_j||^2 the part of t_j outside the span.
Precomputation O(G m M^2), then O(G M p) per density and gradient. With every point
a centre it is the exact path (``tests/models/test_kde_lowrank.py``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float, Int

from .._typing import ArrayLike
from .._validation import as_float_array
from ..lowrank.features import normalizer_from_gram, rel_floor

__all__ = [
    "SOLVERS",
    "KDESpectra",
    "kde_spectra",
    "n_components_for_variance",
]

def _is_concrete(x) -> bool:
    return not isinstance(x, jax.core.Tracer)


def _check_coords(T, m, name="T"):
    """Shape and content checks of the output coordinates (before sampling)."""
    if T.ndim != 2 or T.shape[0] != m or T.shape[1] < 1:
        raise ValueError(
            f"{name} must have shape ({m}, p) with p >= 1 output components, got "
            f"{tuple(T.shape)}"
        )
    if _is_concrete(T):
        Tn = np.asarray(T)
        if not np.all(np.isfinite(Tn)):
            raise ValueError(f"{name} contains NaN or inf")
        zero = np.flatnonzero(~(np.sum(Tn * Tn, axis=0) > 0))
        if zero.size:
            raise ValueError(
                f"{name} has all-zero columns {zero.tolist()[:5]} (components with "
                "zero KPCA eigenvalue carry no evidence; drop them)"
            )


#: Eigensolvers of :func:`kde_spectra`.
SOLVERS = ("exact", "nystroem")


class KDESpectra(NamedTuple):
    """Eigendecompositions K_g = U_g diag(s_g) U_g^T of the input Gram per width.

    With r = m (exact) or r = M (Nystroem, the rank of K~_g = Phi Phi^T):

    Attributes:
        sigmas: ``(G,)`` grid widths (labels when Grams were given).
        eigenvalues: ``(G, r)`` s_g, clipped at zero (Nystroem: below round-off
            set to zero, their eigenvectors too).
        eigenvectors: ``(G, m, r)`` U_g (exact, orthonormal columns); Nystroem:
            Phi V = U_g diag(sqrt(s_g)), the eigenvectors scaled by the singular
            values of Phi.
        coords: ``(G, r, p)`` W_g = U_g^T T, the output coordinates in each
            eigenbasis.
        residual: ``(G, p)`` ||t_j - U_g W_g[:, j]||^2, the squared norm of each
            coordinate outside the span of U_g (Nystroem); ``None`` when U_g spans
            R^m (exact).
        test_map: ``(G, M, r)`` K_cc^-1/2 V (Nystroem): a test-by-centre Gram times
            it is Phi_test V, and K~_test U_g = Phi_test V diag(sqrt(s_g));
            ``None`` when test Grams multiply the eigenvectors directly (exact).
    """

    sigmas: Float[Array, " grid"]
    eigenvalues: Float[Array, "grid rank"]
    eigenvectors: Float[Array, "grid m rank"]
    coords: Float[Array, "grid rank p"]
    residual: Float[Array, "grid p"] | None = None
    test_map: Float[Array, "grid n_centers rank"] | None = None


def _one_spectrum(K, T):
    s, U = jnp.linalg.eigh(0.5 * (K + K.T))  # symmetrise against round-off
    # A PSD Gram's round-off leaves tiny negative eigenvalues: clip them.
    return jnp.maximum(s, 0.0), U, U.T @ T


@jax.jit
def _spectra_from_grams(grams, T, sigmas):
    s, U, W = jax.vmap(_one_spectrum, in_axes=(0, None))(grams, T)
    return KDESpectra(sigmas, s, U, W)


@jax.jit
def _spectra_from_d2(D2, T, sigmas):
    def one(sigma):
        return _one_spectrum(jnp.exp(-D2 / (2.0 * sigma * sigma)), T)

    s, U, W = jax.lax.map(one, sigmas)  # one m x m Gram in memory at a time
    return KDESpectra(sigmas, s, U, W)


def _one_nystroem(Kc, idx, T):
    """Spectrum of K~ = Phi Phi^T from the Gram columns ``Kc = K[:, idx]``."""
    Wn = normalizer_from_gram(Kc[idx])  # K_cc^-1/2 (pseudo-inverse), (M, M)
    # Phi formed first keeps round-off relative to the O(1) features.
    Phi = Kc @ Wn
    e, V = jnp.linalg.eigh(Phi.T @ Phi)
    keep = e > rel_floor(Kc.dtype, Kc.shape[1]) * jnp.maximum(e[-1], 1e-30)
    e = jnp.where(keep, e, 0.0)
    # Phi V = U diag(sqrt(e)): the eigenvectors are kept scaled, since dividing
    # by a tiny sqrt(e_i) would spoil U_i's orthogonality. W = U^T T from
    # Z = (Phi V)^T T; its errors stay within eps ||T|| sqrt(e_max / e_i).
    PhiV = Phi @ V
    Z = PhiV.T @ T
    W = jnp.where(keep[:, None], Z / jnp.sqrt(jnp.where(keep, e, 1.0))[:, None], 0.0)
    # ||t||^2 - ||U^T t||^2: its round-off, eps ||t||^2, weighs 1 / (m gamma) in
    # q, the eps cond(C) of the exact path.
    res = jnp.maximum(jnp.sum(T * T, axis=0) - jnp.sum(W * W, axis=0), 0.0)
    return e, PhiV, W, res, Wn @ V


@jax.jit
def _nystroem_from_grams(grams, idx, T, sigmas):
    e, U, W, r, P = jax.lax.map(lambda K: _one_nystroem(K, idx, T), grams)
    return KDESpectra(sigmas, e, U, W, r, P)


@jax.jit
def _nystroem_from_d2(D2, idx, T, sigmas):
    def one(sigma):
        return _one_nystroem(jnp.exp(-D2 / (2.0 * sigma * sigma)), idx, T)

    e, U, W, r, P = jax.lax.map(one, sigmas)  # one m x M Gram at a time
    return KDESpectra(sigmas, e, U, W, r, P)


def _check_centers(centers, m, n_cols):
    idx = np.asarray(centers)
    if idx.ndim != 1 or idx.size == 0 or idx.dtype.kind not in "iu":
        raise ValueError(
            f"centers must be a 1-D array of integer indices into the {m} training "
            f"points, got {idx.dtype} array of shape {idx.shape}"
        )
    if idx.size != n_cols:
        raise ValueError(
            f"with solver='nystroem', D2_or_grams must hold the columns of the "
            f"{idx.size} centres, (m, {idx.size}) or (G, m, {idx.size}); got "
            f"{n_cols} columns"
        )
    if idx.min() < 0 or idx.max() >= m or np.unique(idx).size != idx.size:
        raise ValueError(
            f"centers must be distinct indices in [0, {m}), got min {idx.min()}, "
            f"max {idx.max()}, {np.unique(idx).size} distinct of {idx.size}"
        )
    return jnp.asarray(idx, jnp.int32)


def kde_spectra(
    D2_or_grams: Float[ArrayLike, "*grid m_a n_cols"],
    T: Float[ArrayLike, "m_c p"],
    sigmas: Float[ArrayLike, " n_sigmas"] | Sequence[float],
    *,
    solver: str = "exact",
    centers: Int[ArrayLike, " n_centers"] | None = None,
) -> KDESpectra:
    """Precompute the eigendecompositions of the input Grams on a width grid.

    Args:
        D2_or_grams: squared (feature-space) input distances, the Grams then being
            exp(-D2 / (2 sigma_g^2)) (RBF kernel or RBF map on any kernel, Weston
            et al. 2002, section 4), or Gram matrices, one per grid value, used as
            given. Exact: ``(m, m)`` distances or ``(G, m, m)`` Grams. Nystroem:
            only the columns of the centres, ``D2[:, centers]`` ``(m, M)`` or
            ``grams[:, :, centers]`` ``(G, m, M)``.
        T: ``(m, p)`` output KPCA coordinates of the training points.
        sigmas: ``(G,)`` positive widths (with Grams: their labels).
        solver: ``"exact"`` (one m x m ``eigh`` per width) or ``"nystroem"``
            (module docstring).
        centers: ``(M,)`` distinct indices of the Nystroem centres among the
            training points (e.g. :func:`bayeskde.lowrank.select_centers`);
            required by, and only allowed with, ``solver="nystroem"``.

    Returns:
        :class:`KDESpectra`.

    Raises:
        ValueError: for NaN/inf, empty or mismatched shapes, fewer than 3 points,
            ``p = 0``, non-positive widths, negative or asymmetric distances, an
            all-zero column of ``T``, an unknown solver or bad centres.

    Cost: exact O(G m^3) time and O(G m (m + p)) memory; Nystroem O(G m M (M + p))
    time and O(G m M) memory (the eigenvectors), O(m M) per width while computing.

    Examples:
        >>> import numpy as np
        >>> x = np.linspace(0.0, 1.0, 6)
        >>> D2 = (x[:, None] - x[None, :]) ** 2
        >>> T = np.c_[x - x.mean()]
        >>> ex = kde_spectra(D2, T, [0.5])
        >>> ny = kde_spectra(D2, T, [0.5], solver="nystroem", centers=np.arange(6))
        >>> bool(np.allclose(np.sort(ex.eigenvalues[0])[-3:],
        ...                  np.sort(ny.eigenvalues[0])[-3:], rtol=1e-3))
        True
    """
    if solver not in SOLVERS:
        raise ValueError(f"solver must be one of {SOLVERS}, got {solver!r}")
    X = as_float_array(D2_or_grams, "D2_or_grams", allow_empty=True)
    square = solver == "exact"
    if X.ndim not in (2, 3) or X.size == 0 or (square and X.shape[-1] != X.shape[-2]):
        want = "(m, m) squared distances or (G, m, m) Grams" if square else \
            "(m, M) squared distances or (G, m, M) Grams to the centres"
        raise ValueError(f"D2_or_grams must be {want}, got shape {tuple(X.shape)}")
    m = X.shape[-2]
    if m < 3:
        raise ValueError(f"need at least 3 training points, got m = {m}")
    T = as_float_array(T, "T", allow_empty=True)
    _check_coords(T, m)
    sig = as_float_array(sigmas, "sigmas", ndim=1)
    if not np.all(np.asarray(sig) > 0):
        raise ValueError(f"sigmas must all be > 0, got {np.asarray(sig).tolist()}")
    if square and centers is not None:
        raise ValueError("centers is only used with solver='nystroem'")
    if not square and centers is None:
        raise ValueError("solver='nystroem' needs centers (indices of M points)")
    idx = None if square else _check_centers(centers, m, X.shape[-1])
    Xn = np.asarray(X)
    block = Xn if square else Xn[..., np.asarray(idx), :]  # (.., M, M) on centres
    asym = np.max(np.abs(block - np.swapaxes(block, -1, -2)))
    if asym > 1e-6 * max(np.max(np.abs(block)), 1e-30):
        raise ValueError(f"D2_or_grams must be symmetric, max |A - A^T| = {asym:.3g}")
    if X.ndim == 2:
        if np.min(Xn) < -1e-6 * max(np.max(Xn), 1e-30):
            raise ValueError(f"D2 must be non-negative, min entry {np.min(Xn):.3g}")
        if square:
            return _spectra_from_d2(X, T, sig)
        return _nystroem_from_d2(X, idx, T, sig)
    if X.shape[0] != sig.shape[0]:
        raise ValueError(
            f"sigmas must have one entry per Gram ({X.shape[0]}), got {sig.shape[0]}"
        )
    if square:
        return _spectra_from_grams(X, T, sig)
    return _nystroem_from_grams(X, idx, T, sig)


def n_components_for_variance(
    eigenvalues: Float[ArrayLike, " n_components"], fraction: float = 0.95
) -> int:
    """Smallest p whose leading eigenvalues (descending) hold ``fraction`` of the sum.

    Raises:
        ValueError: for an empty/negative/NaN spectrum or ``fraction`` not in (0, 1].
    """
    ev = np.asarray(as_float_array(eigenvalues, "eigenvalues", ndim=1), np.float64)
    if not 0.0 < float(fraction) <= 1.0:
        raise ValueError(f"fraction must be in (0, 1], got {fraction}")
    if np.any(ev < 0) or not ev.sum() > 0:
        raise ValueError("eigenvalues must be >= 0 with a positive sum")
    cum = np.cumsum(np.sort(ev)[::-1]) / ev.sum()
    return int(min(np.searchsorted(cum, fraction * (1 - 1e-12)) + 1, ev.size))
