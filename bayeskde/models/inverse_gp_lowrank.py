"""Low-rank evidence and predictive of the generative inverse model.

The forward GP (F) of :mod:`bayeskde.models.inverse_gp` has the kernel
phi(K) = sum_{i <= d} alpha_i K^(i), and the i-th Hadamard power of an RBF at
rate gamma is an RBF at rate i gamma. So a feature map Phi (m x R) with
Phi Phi^T ~ phi(K) is built from features of RBF kernels alone. With
Phi^T Phi = V Lambda V^T (R x R), the kept eigenvectors of Phi Phi^T are
U = Phi V Lambda^{-1/2}, never formed:

    U^T X = Lambda^{-1/2} V^T (Phi^T X),   q_j = ||(U^T X)_j||^2,
    n_rest = m - r,  q_rest = ||X||^2 - sum_j q_j,

which are exactly the fields of :class:`~bayeskde.models.InverseGPData` that
:func:`~bayeskde.models.pair_log_evidence` reads: the evidence is the same code
(Woodbury and the determinant lemma in the eigenbasis, float64 spectra), at
O(m R^2) once instead of O(m^3) per pair, and no m x m matrix. The alpha
weights come from HSIC(K^(i), X X^T) = ||F_i^T X_c||_F^2 / (m - 1)^2 for the
features F_i of K^(i) (HSIC of a low-rank kernel with the linear kernel of the
centred targets is a product of small matrices).

The predictive needs A = k(y)^T U at an output y. With k(y, Y) = Phi phi(y),
A = phi(y)^T Phi^T Phi V Lambda^{-1/2} = phi(y)^T V Lambda^{1/2}: O(R r) an
output, never touching the m training points (:func:`feature_projections`).

Two feature maps, chosen by the output dimension d_y (``features="auto"``):

* ``"hsgp"`` (d_y = 1 by default, allowed for d_y <= 2): the Hilbert-space
  basis of ``numpyro.contrib.hsgp`` (Solin and Saerkkae 2020): Laplacian
  eigenfunctions psi_j on a box [-L, L] around the outputs, the RBF's spectral
  density S at their frequencies as weights, k(y, y') ~ sum_j S(w_j) psi_j(y)
  psi_j(y'). The basis does not depend on the rate: Psi^T Psi and Psi^T X are
  one pass over the data for all n_gamma x D pairs, and a pair's features are
  Psi diag(sqrt(sum_i alpha_i S_{i gamma})) (one R-dimensional map for the
  whole sum, not one per power). Measured on the S-shape at m = 2000
  (``bench/scale_bayes.py``) it matches the exact evidence more closely than
  Nystroem at the same rank and costs one pass instead of one per rate. In
  d_y = 2 the basis is a tensor product (J^2 functions) and in d_y >= 3 it is
  out of reach.
* ``"nystroem"`` (any d_y; the default for d_y >= 2): M centres shared by every
  pair (k-means++ seeding of :func:`bayeskde.lowrank.select_centers`), the
  Nystroem map of each power K^(i) (Williams and Seeger 2001;
  :func:`bayeskde.lowrank.features.normalizer_from_gram`), stacked with weights
  sqrt(alpha_i): R = d M features. With all training points as centres it is
  the exact kernel (tested). One pass over the data computes, for every rate,
  the D M x D M cross products of the power features (O(n_gamma m (D M)^2)).

Random Fourier features are not offered: the evidence needs the kernel's
trace captured to well below s^2 / a^2 in absolute terms (the log determinant
moves by up to (d_x / 2) a^2 tr(K - K~) / s^2), and a Monte Carlo map's error,
O(R^{-1/2}) an entry, would need R in the millions for that.

All sufficient statistics are float64 sums (as the exact spectra are), whatever
the working precision; the data pass streams over blocks of rows.
"""

from __future__ import annotations

import math
from functools import partial
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float
from numpyro.contrib.hsgp.laplacian import eigenfunctions, sqrt_eigenvalues
from numpyro.contrib.hsgp.spectral_densities import (
    spectral_density_squared_exponential,
)

from .._validation import check_integer
from ..kernels import squared_distances
from ..lowrank.features import select_centers

__all__ = [
    "FEATURES",
    "LowRankBasis",
    "default_features",
    "lowrank_statistics",
    "lowrank_hsic",
    "lowrank_pair_spectra",
    "kept_mask",
    "lowrank_pair_spectrum",
    "feature_projections",
    "feature_apply",
    "InverseGPFeatureMixture",
    "lowrank_replicates",
]

#: Feature maps of the low-rank evidence.
FEATURES = ("auto", "hsgp", "nystroem")
#: Rows per block of the data pass.
BLOCK_ROWS = 8192


@jax.tree_util.register_static
class LowRankBasis:
    """The feature map of a low-rank :class:`~bayeskde.models.InverseGPData`
    and its sufficient statistics (float64 NumPy arrays).

    A static pytree node (hashed by identity): it rides along with the data
    into compiled programs without being traced.

    Attributes:
        kind: ``"hsgp"`` or ``"nystroem"``.
        rank: basis functions J (hsgp) or centres M (nystroem).
        gram: ``(J, J)`` Psi^T Psi, or ``(n_gamma, D M, D M)`` the power
            features' cross products per rate.
        cross: ``(J, d_x)`` or ``(n_gamma, D M, d_x)``: the same with X.
        x_sq: ||X_c||_F^2.
        n: training points m.
        centres: ``(M, d_y)`` Nystroem centres; normalizer ``(n_gamma, D, M, M)``
            the map of each power.
        box_centre, box_half: the HSGP box (centre, half-widths L);
            per_dim: functions per dimension; frequencies ``(J, d_y)``.
        trace_residual: ``(n_gamma, D)`` tr(phi(K)) - tr(Phi Phi^T) per pair
            (0 for an exact map), the diagnostic of the rank.
    """

    def __init__(self, kind, rank, gram, cross, x_sq, n, *, centres=None,
                 normalizer=None, box_centre=None, box_half=None, per_dim=None,
                 frequencies=None):
        self.kind = kind
        self.rank = int(rank)
        self.gram = gram
        self.cross = cross
        self.x_sq = float(x_sq)
        self.n = int(n)
        self.centres = centres
        self.normalizer = normalizer
        self.box_centre = box_centre
        self.box_half = box_half
        self.per_dim = per_dim
        self.frequencies = frequencies
        self.trace_residual = None

    def __repr__(self):
        return f"LowRankBasis(kind={self.kind!r}, rank={self.rank}, n={self.n})"


def default_features(d_y: int) -> str:
    """The feature map ``features="auto"`` picks for outputs of dimension d_y:
    ``"hsgp"`` for one output, ``"nystroem"`` above (module docstring)."""
    return "hsgp" if d_y == 1 else "nystroem"


def _eigenfunctions(y, half, per_dim):
    # numpyro's HSGP code broadcasts by rank promotion; allow it locally.
    with jax.numpy_rank_promotion("allow"):
        return eigenfunctions(y, [float(h) for h in half], list(per_dim))


def _blocks(m):
    b = min(BLOCK_ROWS, m)
    return b, -(-m // b)


def _padded(a, b, n_blocks):
    pad = b * n_blocks - a.shape[0]
    return np.concatenate([a, np.zeros((pad, *a.shape[1:]), a.dtype)]) if pad else a


@partial(jax.jit, static_argnames=("half", "per_dim"))
def _hsgp_block(Yb, Xb, mask, centre, half, per_dim):
    Psi = _eigenfunctions(Yb - centre[None], half, per_dim) * mask[:, None]
    return Psi.T @ Psi, Psi.T @ Xb


@partial(jax.jit, static_argnames="D")
def _nystroem_block(Yb, Xb, mask, Z, gammas, D):
    from .inverse_gp import _rbf_powers

    d2 = squared_distances(Yb, Z)

    def per_gamma(g):
        F = _rbf_powers(d2, g, D)  # (D, b, M)
        F = jnp.moveaxis(F, 0, 1).reshape(d2.shape[0], -1) * mask[:, None]
        return F.T @ F, F.T @ Xb

    return jax.lax.map(per_gamma, gammas)


#: Relative eigenvalue floor of K_ZZ in the Nystroem map of the evidence.
NYSTROEM_FLOOR = 1e-8


def _floored_normalizer(Kcc):
    """U S^{-1/2} of K_ZZ with directions below NYSTROEM_FLOOR s_max dropped.

    :func:`bayeskde.lowrank.features.normalizer_from_gram` floors at M eps,
    right for regression; the evidence forms W^T (K_nZ^T K_nZ) W, whose
    rounding error grows as eps s_max^2 / s for a kept eigenvalue s, which at
    M eps s_max is O(s_max / M): measured at full rank (all points as
    centres, m = 200), log evidences 0.09 off. The floor trades that for the
    dropped variance, below 1e-8 of the largest eigenvalue a centre."""
    s, U = jnp.linalg.eigh(Kcc)
    thr = NYSTROEM_FLOOR * jnp.maximum(s[-1], 1e-30)
    return U * jnp.where(s > thr, 1.0 / jnp.sqrt(jnp.maximum(s, thr)), 0.0)[None]


@partial(jax.jit, static_argnames="D")
def _normalizers(Z, gammas, D):
    from .inverse_gp import _rbf_powers

    d2 = squared_distances(Z, Z)
    return jax.lax.map(lambda g: jax.vmap(_floored_normalizer)(
        _rbf_powers(d2, g, D)), gammas)  # (G, D, M, M)


def _stream(fn, Y, X, progress_bar, desc):
    """Sum ``fn(Y_block, X_block, mask)`` over row blocks (float64)."""
    m = Y.shape[0]
    b, nb = _blocks(m)
    Yp, Xp = _padded(Y, b, nb), _padded(X, b, nb)
    mask = _padded(np.ones(m), b, nb)
    rows = range(nb)
    if progress_bar and nb > 1:
        from tqdm.auto import tqdm

        rows = tqdm(rows, desc=desc, leave=False)
    total = None
    for i in rows:
        sl = slice(i * b, (i + 1) * b)
        out = fn(jnp.asarray(Yp[sl]), jnp.asarray(Xp[sl]), jnp.asarray(mask[sl]))
        out = jax.tree.map(lambda a: np.asarray(a, np.float64), out)
        total = out if total is None else jax.tree.map(np.add, total, out)
    return total


def _hsgp_box(Y, gammas):
    lo, hi = Y.min(axis=0), Y.max(axis=0)
    centre = 0.5 * (lo + hi)
    S = np.maximum(0.5 * (hi - lo), 1e-12)
    # Riutort-Mayol et al. (2023), eq. (18): c >= 3.2 l / S keeps the box's
    # boundary condition away from the widest kernel (degree 1, lowest rate).
    ell_max = 1.0 / math.sqrt(2.0 * float(np.min(gammas)))
    c = np.clip(3.2 * ell_max / S, 1.5, 4.0)
    return centre, c * S


def lowrank_statistics(
    key: jax.Array, Y: np.ndarray, X: np.ndarray, gammas: np.ndarray,
    max_degree: int, rank: int, features: str, *, progress_bar: bool = False,
) -> LowRankBasis:
    """One pass over the data: the feature map and its float64 sufficient
    statistics (Phi^T Phi and Phi^T X, per rate for Nystroem).

    Args:
        key: PRNG key of the Nystroem centres (k-means++).
        Y: ``(m, d_y)`` outputs, X ``(m, d_x)`` centred targets (float64).
        gammas: the rate grid; max_degree: D.
        rank: HSGP functions (rounded to a power per dimension) or centres.
        features: ``"hsgp"`` or ``"nystroem"``.

    Cost: hsgp O(m J^2) time, nystroem O(n_gamma m (D M)^2 + m M d_y) (the
    k-means++ seeding) time; O(block (D M) + n_gamma (D M)^2) memory.
    """
    m, d_y = Y.shape
    with jax.enable_x64(True):
        if features == "hsgp":
            per = max(2, int(round(rank ** (1.0 / d_y))))
            per_dim = (per,) * d_y
            centre, half = _hsgp_box(Y, gammas)
            half_t = tuple(float(h) for h in half)
            gram, cross = _stream(
                lambda y, x, w: _hsgp_block(y, x, w, jnp.asarray(centre), half_t,
                                            per_dim),
                Y, X, progress_bar, "HSGP statistics")
            with jax.numpy_rank_promotion("allow"):
                freqs = np.asarray(sqrt_eigenvalues(list(half_t), list(per_dim),
                                                    d_y)).T
            basis = LowRankBasis("hsgp", per**d_y, gram, cross, np.sum(X**2), m,
                                 box_centre=centre, box_half=half, per_dim=per_dim,
                                 frequencies=freqs)
        else:
            M = rank
            if M >= m:
                Z = Y
            else:
                # Centres spread in the feature space of a mid-grid rate of the
                # highest degree (space filling for the narrow kernels).
                g_c = float(np.sqrt(gammas.min() * gammas.max()) * max_degree)
                idx = select_centers(key, Y, M, method="kmeans++", kernel="rbf",
                                     params={"gamma": g_c})
                Z = Y[np.asarray(idx)]
            Zj, gj = jnp.asarray(Z), jnp.asarray(gammas)
            W = np.asarray(_normalizers(Zj, gj, max_degree))
            gram, cross = _stream(
                lambda y, x, w: _nystroem_block(y, x, w, Zj, gj, max_degree),
                Y, X, progress_bar, "Nystroem statistics")
            basis = LowRankBasis("nystroem", Z.shape[0], gram, cross, np.sum(X**2),
                                 m, centres=Z, normalizer=W)
    return basis


def _hsgp_density(basis, gammas, D):
    """(G, D, J) spectral density of K^(i) at the basis frequencies."""
    d_y = basis.frequencies.shape[1]
    with jax.enable_x64(True), jax.numpy_rank_promotion("allow"):
        w = jnp.asarray(basis.frequencies)
        out = [[np.asarray(spectral_density_squared_exponential(
            d_y, w, 1.0, 1.0 / math.sqrt(2.0 * (i + 1) * float(g))))
            for i in range(D)] for g in gammas]
    return np.asarray(out)


def lowrank_hsic(basis: LowRankBasis, gammas: np.ndarray, D: int) -> np.ndarray:
    """``(n_gamma, D)`` HSIC(K^(i), X_c X_c^T) = ||F_i^T X_c||_F^2 / (m - 1)^2
    from the statistics (the features F_i of K^(i)). Cost O(n_gamma D R^2)."""
    if basis.kind == "hsgp":
        dens = _hsgp_density(basis, gammas, D)  # (G, D, J)
        C = dens @ np.sum(basis.cross**2, axis=1)
    else:
        M = basis.centres.shape[0]
        C = np.array([[np.sum((basis.normalizer[g, i].T
                               @ basis.cross[g][i * M:(i + 1) * M]) ** 2)
                       for i in range(D)] for g in range(len(gammas))])
    return C / (basis.n - 1) ** 2


def _pair_system(basis, alpha, g, d, dens):
    """(Gram, cross, map) of pair (g, d) in its own feature coordinates:
    Gp = B^T G B, c = B^T Phi^T X, with B the pair's weights on the raw
    features (HSGP: diag sqrt(s); Nystroem: blockdiag sqrt(alpha_i) W_i)."""
    a = alpha[g, d]
    if basis.kind == "hsgp":
        s = np.tensordot(a, dens[g], 1)
        sq = np.sqrt(np.maximum(s, 0.0))
        return sq[:, None] * basis.gram * sq[None], sq[:, None] * basis.cross, sq
    M = basis.centres.shape[0]
    use = [i for i in range(d + 1) if a[i] > 0]
    Wb = np.zeros((len(use) * M, len(use) * M))
    rows = np.concatenate([np.arange(i * M, (i + 1) * M) for i in use])
    for k, i in enumerate(use):
        Wb[k * M:(k + 1) * M, k * M:(k + 1) * M] = math.sqrt(a[i]) * basis.normalizer[
            g, i]
    G = basis.gram[g][np.ix_(rows, rows)]
    return Wb.T @ G @ Wb, Wb.T @ basis.cross[g][rows], (use, Wb)


def kept_mask(lam: np.ndarray, m: int) -> np.ndarray:
    """The eigenvalues of an R x R Phi^T Phi the evidence keeps: above
    max(m, R) eps lam_max (the exact path's m eps lam_max, or the R x R
    problem's own rounding where that is larger), and at most m of them (the
    rank of Phi Phi^T), the largest."""
    R = lam.shape[-1]
    top = max(float(lam.max()), 0.0)
    ok = lam > max(m, R) * np.finfo(np.float64).eps * top
    if ok.sum() > m:
        ok &= lam >= np.sort(lam)[-m]
    return ok


def _hsgp_tail(basis, alpha, gammas):
    """HSGP: m times the kernel variance a point beyond the basis, the
    spectral density summed over the frequencies of a basis 4 times as
    long per dimension, less the kept ones, times the eigenfunctions' mean square
    prod 1 / (2 L_k). (tr phi(K) - tr Phi Phi^T on the data also holds the
    box's boundary bias, which more functions do not remove: the rank is
    chosen by what they do.)"""
    d_y = basis.frequencies.shape[1]
    big = tuple(4 * p for p in basis.per_dim)
    with jax.enable_x64(True), jax.numpy_rank_promotion("allow"):
        w = np.asarray(sqrt_eigenvalues([float(h) for h in basis.box_half],
                                        list(big), d_y)).T
    idx = np.asarray(np.unravel_index(np.arange(w.shape[0]), big)).T  # (n, d_y)
    outside = np.any(idx >= np.asarray(basis.per_dim)[None], axis=1)
    tmp = LowRankBasis("hsgp", 1, None, None, 0.0, 1, frequencies=w[outside])
    dens = _hsgp_density(tmp, gammas, alpha.shape[1])  # (G, D, n_out)
    tail = np.einsum("gdi,gdn->gd", alpha, dens)
    return basis.n * tail / np.prod(2.0 * np.asarray(basis.box_half))


def lowrank_pair_spectra(basis: LowRankBasis, alpha: np.ndarray,
                         gammas: np.ndarray, *, progress_bar: bool = False):
    """Eigenvalues and squared projections of every pair: lists of ``(lam, q)``
    float64 arrays (all of Phi^T Phi's eigenvalues, clipped at 0), and the
    ``(n_gamma, D)`` trace residual: m sum(alpha) - tr(Phi^T Phi) for
    Nystroem, the variance beyond the basis for HSGP (:func:`_hsgp_tail`).

    Cost O(n_gamma D R^3) for R = J (hsgp) or up to D M (nystroem)."""
    G, D = alpha.shape[:2]
    dens = _hsgp_density(basis, gammas, D) if basis.kind == "hsgp" else None
    out, resid = [], np.zeros((G, D))
    pairs = [(g, d) for g in range(G) for d in range(D)]
    if progress_bar:
        from tqdm.auto import tqdm

        pairs = tqdm(pairs, desc="pair spectra", leave=False)
    for g, d in pairs:
        Gp, c, _ = _pair_system(basis, alpha, g, d, dens)
        lam, V = np.linalg.eigh(Gp)
        lam = np.maximum(lam, 0.0)
        proj2 = (V.T @ c) ** 2
        q = np.sum(proj2, axis=1) / np.where(lam > 0, lam, np.inf)
        out.append((lam, q))
        resid[g, d] = basis.n * alpha[g, d].sum() - np.trace(Gp)
    if basis.kind == "hsgp":
        resid = _hsgp_tail(basis, alpha, gammas)
    return out, resid


def lowrank_pair_spectrum(basis: LowRankBasis, alpha: np.ndarray,
                          gammas: np.ndarray, g: int, d: int):
    """Kept spectrum of pair (g, d) for the predictive (float64):
    ``(lam (r,), coef, proj (r, d_x))`` with ``coef`` the map from raw
    features to A = k(y)^T U: ``(J, r)`` for hsgp, ``(D, M, r)`` for nystroem.
    The kept set is the exact path's (lam > m eps lam_max). Cost O(R^3)."""
    D = alpha.shape[1]
    if basis.kind == "hsgp":
        dens = _hsgp_density(basis, gammas[g:g + 1], D)
        Gp, c, wmap = _pair_system(basis, alpha[g:g + 1], 0, d, dens)
    else:
        Gp, c, wmap = _pair_system(basis, alpha, g, d, None)
    lam, V = np.linalg.eigh(Gp)
    ok = kept_mask(lam, basis.n)
    lam, V = lam[ok], V[:, ok]
    proj = (V.T @ c) / np.sqrt(lam)[:, None]
    VL = V * np.sqrt(lam)[None]
    if basis.kind == "hsgp":
        coef = wmap[:, None] * VL
    else:
        use, Wb = wmap
        M = basis.centres.shape[0]
        coef = np.zeros((D, M, len(lam)))
        full = Wb @ VL
        for k, i in enumerate(use):
            coef[i] = full[k * M:(k + 1) * M]
    return lam, coef, proj


def _raw_features(basis, Z, gamma, y):
    """Raw features of outputs ``y`` (n, d_y): the HSGP functions (n, J) or
    the Nystroem power kernels (D, n, M)."""
    if basis.kind == "hsgp":
        c = jnp.asarray(basis.box_centre, y.dtype)
        return _eigenfunctions(y - c[None], basis.box_half, basis.per_dim)
    from .inverse_gp import _rbf_powers

    D = basis.normalizer.shape[1]
    return _rbf_powers(squared_distances(y, Z), gamma, D)


def feature_apply(
    basis: LowRankBasis, Z: Float[Array, "n_anchor d_y"], gamma: Float[Array, ""],
    coef: Array, y: Float[Array, "n d_y"],
) -> Float[Array, "n k"]:
    """phi_raw(y) @ coef: the pair's raw features at ``y`` times ``coef``
    (``(J, k)`` for hsgp, ``(D, M, k)`` for nystroem). With ``coef`` of
    :func:`lowrank_pair_spectrum` this is A = k(y)^T U. Jit-safe.
    Cost O(n R k)."""
    F = _raw_features(basis, Z, gamma, y)
    if basis.kind == "hsgp":
        return F @ coef
    return jnp.einsum("inm,imk->nk", F, coef)


class InverseGPFeatureMixture(NamedTuple):
    """:class:`~bayeskde.models.InverseGPMixture` of a low-rank fit in
    feature form: the same fields, with ``U`` the pairs' maps from raw
    features to A (``(P, J, r)`` hsgp, ``(P, D, M, r)`` nystroem) and ``Y``
    the map's anchors (the Nystroem centres, or the HSGP box centre
    ``(1, d_y)``); ``basis`` the static :class:`LowRankBasis`. Evaluating it
    at an output costs O(P R r), independent of m."""

    Y: Float[Array, "n_anchor d_y"]
    U: Array
    lam: Float[Array, "n_pairs r"]
    proj: Float[Array, "n_pairs r d_x"]
    alpha: Float[Array, "n_pairs n_deg"]
    gamma: Float[Array, " n_pairs"]
    pair: Array
    amplitude: Float[Array, " n_comp"]
    noise: Float[Array, " n_comp"]
    log_w: Float[Array, " n_comp"]
    x_mean: Float[Array, " d_x"]
    basis: LowRankBasis


def feature_projections(
    mix: InverseGPFeatureMixture, outputs: Float[Array, "n_c d_y"],
) -> Float[Array, "n_pairs n_c r"]:
    """A = phi(y)^T V Lambda^{1/2} of every pair at ``outputs`` (the feature
    form of k(y)^T U). The HSGP functions are shared by the pairs (computed
    once); Nystroem's power kernels depend on the pair's rate.
    Cost O(n_c P R r)."""
    basis = mix.basis
    if basis.kind == "hsgp":
        F = _raw_features(basis, mix.Y, None, outputs)
        return jnp.einsum("nj,pjr->pnr", F, mix.U)
    return jax.lax.map(lambda a: feature_apply(basis, mix.Y, a[0], a[1], outputs),
                       (mix.gamma, mix.U))


_apply_jit = jax.jit(feature_apply, static_argnames="basis")


def _apply_rows(basis, Z, gamma, coef, Y):
    """feature_apply over row blocks of Y (host loop, one program)."""
    m = Y.shape[0]
    b, nb = _blocks(m)
    Yp = _padded(np.asarray(Y), b, nb)
    out = [np.asarray(_apply_jit(basis, Z, gamma, coef, jnp.asarray(Yp[i * b:(i + 1)
                                                                        * b])))
           for i in range(nb)]
    return np.concatenate(out)[:m]


def lowrank_replicates(
    key: jax.Array, data, amplitude: np.ndarray, noise: np.ndarray,
    pair_log_joint: np.ndarray, cache: dict | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Posterior predictive replicates of X at the training outputs for a
    low-rank fit, one per draw: the pair from its conditional posterior, then
    f = U c with c = (a^2 lam / v) U^T X + sqrt(a^2 lam s^2 / v) z (as
    :func:`~bayeskde.models.inverse_gp_replicate`), formed as
    f = phi_raw(Y) (coef Lambda^{-1} c) without U, plus noise.

    Returns ``(x_rep (n, m, d_x), pair (n,))``, the pair flat g D + (d - 1).
    Cost O(P m R n d_x / P) = O(m R n d_x) for n draws (rates grouped)."""
    basis = data.lowrank
    amplitude = np.asarray(amplitude, np.float64).reshape(-1)
    noise = np.asarray(noise, np.float64).reshape(-1)
    n = len(amplitude)
    k_pair, k_f, k_e = jax.random.split(key, 3)
    lj = jnp.asarray(np.asarray(pair_log_joint, np.float64).reshape(n, -1))
    pairs = np.asarray(jax.random.categorical(k_pair, lj, axis=-1))
    alpha = np.asarray(data.alpha, np.float64)
    gammas = np.asarray(data.gammas, np.float64)
    G, D = alpha.shape[:2]
    m, d_x = data.X.shape
    dt = data.X.dtype
    # Coefficients of every draw on the raw features, grouped by rate (the
    # Nystroem features depend on it; HSGP's are shared: one group).
    R_shape = (basis.gram.shape[0],) if basis.kind == "hsgp" else (
        D, basis.centres.shape[0])
    groups = [0] if basis.kind == "hsgp" else sorted({int(p) // D for p in pairs})
    coef_all = {g: np.zeros((*R_shape, n, d_x)) for g in groups}
    for p in np.unique(pairs):
        g, d = divmod(int(p), D)
        key_gd = (g, d)
        if cache is not None and key_gd in cache:
            lam, coef, proj = cache[key_gd]
        else:
            lam, coef, proj = lowrank_pair_spectrum(basis, alpha, gammas, g, d)
            if cache is not None:
                cache[key_gd] = (lam, coef, proj)
        idx = np.flatnonzero(pairs == p)
        al = amplitude[idx, None] * lam[None]
        v = al + noise[idx, None]
        z = np.asarray(jax.random.normal(jax.random.fold_in(k_f, int(p)),
                                         (len(idx), len(lam), d_x)), np.float64)
        c = (al / v)[..., None] * proj[None] + np.sqrt(al * noise[idx, None] / v
                                                       )[..., None] * z
        cc = np.einsum("...r,krx->...kx", coef / lam, c)
        coef_all[0 if basis.kind == "hsgp" else g][..., idx, :] += cc
    f = np.zeros((m, n, d_x))
    anchors = jnp.asarray(basis.centres if basis.kind == "nystroem"
                          else basis.box_centre[None], dt)
    for g, C in coef_all.items():
        out = _apply_rows(basis, anchors, jnp.asarray(gammas[g], dt),
                          jnp.asarray(C.reshape(*R_shape, n * d_x), dt),
                          np.asarray(data.Y, dt))
        f += out.reshape(m, n, d_x)
    eps = np.sqrt(noise)[:, None, None] * np.asarray(
        jax.random.normal(k_e, (n, m, d_x)), np.float64)
    x = np.transpose(f, (1, 0, 2)) + eps + np.asarray(data.x_mean, np.float64)
    return x.astype(dt), pairs
