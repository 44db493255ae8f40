"""Low-rank evidence and predictive features of the generative inverse model.

The forward GP (F) of :mod:`bayeskde.inverse` has the kernel
phi(K) = sum_{i <= d} alpha_i K^(i), and the i-th Hadamard power of an RBF at
rate gamma is the RBF at rate i gamma, so a feature map Phi (m x R) with
Phi Phi^T ~ phi(K) is built from features of RBF kernels alone. With
Phi^T Phi = V Lambda V^T (R x R) the nonzero eigenpairs of Phi Phi^T are
(Lambda, U = Phi V Lambda^{-1/2}), never formed, and

    log det(a^2 Phi Phi^T + s^2 I) = sum_j log(a^2 lambda_j + s^2)
                                     + (m - r) log s^2,
    X^T (a^2 Phi Phi^T + s^2 I)^{-1} X = sum_j q_j / (a^2 lambda_j + s^2)
                                         + (||X||^2 - sum_j q_j) / s^2,

with q_j = ||(U^T X)_j||^2 = ||V_j^T Phi^T X||^2 / lambda_j: the matrix
determinant lemma and the Woodbury identity in the eigenbasis of the r x r
capacitance matrix (Rasmussen and Williams 2006, eqs. (A.9), (A.10)). These
are exactly the fields ``lam``, ``q``, ``n_rest = m - r`` and ``q_rest`` of
:class:`~bayeskde.inverse.InverseGPData` that
:func:`~bayeskde.inverse.evidence.pair_log_evidence` reads, so the evidence, NUTS and
the quadrature are the same code as the exact path's, at O(m R^2) once
instead of O(m^3) a pair and with no m x m matrix. The sufficient statistics
Phi^T Phi and Phi^T X are float64 sums streamed over chunks of rows and split
over the devices (:func:`bayeskde.distributed.sharded_sum`: one chunk on the
devices at a time, so m = 1e6 needs no more device memory than 1e4), whatever
the working precision (as the exact spectra are float64). Float32 runs agree
with float64 on the same data (m = 1e5 S-shape: pair posterior TV 0.00095,
CRPS equal to 4 digits, ``bench/scale_bayes.py --both-precisions``). The
transform
weights alpha come from HSIC(K^(i), X_c X_c^T) = ||F_i^T X_c||_F^2 / (m - 1)^2
for the features F_i of K^(i) (seed Theorem 4.1; a product of small matrices).

The predictive needs A = k(y)^T U at an output y; with k(y, Y) = Phi phi(y),
A = phi(y)^T V Lambda^{1/2}: O(R r) an output, without the training points.

Feature maps (``features``; ``"auto"`` picks by the output dimension d_y):

* ``"hsgp"`` (d_y = 1, the default there): the Hilbert-space basis of
  Solin and Saerkkae (2020), as in ``numpyro.contrib.hsgp``: the Laplacian's
  eigenfunctions psi_j(y) = L^{-1/2} sin(w_j (y - c + L)), w_j = pi j / (2L),
  on a box [c - L, c + L] around the outputs, and
  k(y, y') ~ sum_j S(w_j) psi_j(y) psi_j(y') with S the kernel's spectral
  density; for phi(K), S = sum_i alpha_i S_{i gamma}, S_gamma(w) =
  sqrt(pi / gamma) exp(-w^2 / (4 gamma)) (the Fourier transform of
  exp(-gamma r^2)). The basis does not depend on the rate or degree: Psi^T Psi
  and Psi^T X are one pass over the data for all n_gamma x D pairs, a pair's
  features are Psi diag(sqrt(S)), and the functions whose weight is below
  rounding (1e-16 of the largest) are dropped per pair, so a wide kernel's
  eigenproblem is small. Chosen for one output because it is one data pass
  for the whole grid (Nystroem needs one per rate, 24 times the work) and it
  converges to the exact evidence as J grows (tested).
* ``"nystroem"`` (any d_y; the default for d_y >= 2, where a tensor-product
  basis needs J^d_y functions): M centres shared by every pair (k-means++
  seeding, :func:`bayeskde.lowrank.select_centers`), the Nystroem map of each
  power K^(i) (Williams and Seeger 2001), stacked with weights sqrt(alpha_i):
  R = d M features. With all training points as centres it is the exact
  kernel (tested). Its data pass is O(n_gamma m (D M)^2).

Random Fourier features are not offered: the evidence needs the kernel's trace
captured to well below s^2 / a^2 in absolute terms (the log determinant moves
by up to (d_x / 2) (a^2 / s^2) tr(phi(K) - Phi Phi^T)), and a Monte Carlo
map's error, O(R^{-1/2}) an entry, would need R in the millions for that.
"""

from __future__ import annotations

import functools
import math
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float

from ..distributed import sharded_sum
from ..kernels import squared_distances
from ..lowrank.features import select_centers
from .kernel import (
    hsgp_eigenfunctions,
    hsgp_frequencies,
    kept_eigenvalues,
    rbf_powers,
    rbf_spectral_density,
    transform_spectral_density,
)

__all__ = [
    "FEATURES",
    "LowRankBasis",
    "default_features",
    "default_rank",
    "lowrank_statistics",
    "lowrank_hsic",
    "lowrank_pair_spectra",
    "lowrank_pair_spectrum",
    "hsgp_tail_indicator",
    "feature_projections",
    "apply_features",
    "apply_features_rows",
]

#: Feature maps of the low-rank evidence.
FEATURES = ("auto", "hsgp", "nystroem")
#: Rows per block of the data passes.
BLOCK_ROWS = 8192
#: Relative weight below which a pair drops an HSGP function (rounding).
SPECTRAL_FLOOR = 1e-16
#: Relative eigenvalue floor of K_ZZ in the Nystroem map.
NYSTROEM_FLOOR = 1e-10


@jax.tree_util.register_static
class LowRankBasis:
    """The feature map of a low-rank :class:`~bayeskde.inverse.InverseGPData`
    and its float64 sufficient statistics.

    A static pytree node (hashed by identity): it rides along with the data
    and the predictive's mixture into compiled programs without being traced.

    Attributes:
        kind: ``"hsgp"`` or ``"nystroem"``.
        rank: basis functions J (hsgp) or centres M (nystroem).
        gram: ``(J, J)`` Psi^T Psi, or ``(n_gamma, D M, D M)`` the
            normalised power features' (K^(i)(Y, Z) W_i) cross products per
            rate.
        cross: ``(J, d_x)`` or ``(n_gamma, D M, d_x)``: the same with X.
        x_sq: ||X_c||_F^2; n: training points m.
        centres, normalizer: ``(M, d_y)`` Nystroem centres and
            ``(n_gamma, D, M, M)`` the map of each power.
        box_centre, box_half: the HSGP box c, L.
        trace_residual: ``(n_gamma, D)`` the kernel variance the map misses,
            summed over the training points (set by
            :func:`lowrank_pair_spectra`).
    """

    def __init__(self, kind, rank, gram, cross, x_sq, n, *, centres=None,
                 normalizer=None, box_centre=None, box_half=None):
        self.kind = kind
        self.rank = int(rank)
        self.gram = gram
        self.cross = cross
        self.x_sq = float(x_sq)
        self.n = int(n)
        self.centres = centres
        self.normalizer = normalizer
        self.box_centre = None if box_centre is None else float(box_centre)
        self.box_half = None if box_half is None else float(box_half)
        self.trace_residual = None

    def __repr__(self):
        return f"LowRankBasis(kind={self.kind!r}, rank={self.rank}, n={self.n})"


def default_features(d_y: int) -> str:
    """``"hsgp"`` for one output, ``"nystroem"`` above (module docstring)."""
    return "hsgp" if d_y == 1 else "nystroem"


def default_rank(m: int, features: str) -> int:
    """The first rank the data-driven choice tries: 32 HSGP functions (the
    S-shape's evidence is within 3e-4 nats of the full one there at m = 2000,
    and the choice grows it where the data ask for more), or min(m, 256)
    Nystroem centres."""
    return 32 if features == "hsgp" else min(m, 256)


def _blocks(m):
    b = min(BLOCK_ROWS, m)
    return b, -(-m // b)


def _padded(a, b, n_blocks):
    pad = b * n_blocks - a.shape[0]
    return np.concatenate([a, np.zeros((pad, *a.shape[1:]), a.dtype)]) if pad else a


@functools.lru_cache(maxsize=16)
def _hsgp_block(centre, half, J):
    """The per-block statistics of one HSGP basis (one function object per
    basis, so :func:`~bayeskde.distributed.sharded_sum` compiles it once)."""

    def block(Yb, Xb, mask):
        Psi = hsgp_eigenfunctions(Yb[:, 0], centre, half, J) * mask[:, None]
        return Psi.T @ Psi, Psi.T @ Xb, jnp.sum(mask[:, None] * Xb**2)

    return block


def _nystroem_block(Z, gammas, W, Yb, Xb, mask):
    d2 = squared_distances(Yb, Z)
    D = W.shape[1]

    def per_gamma(a):
        g, Wg = a
        # the normalised features K^(i)(Y, Z) W_i of every power, side by side:
        # their cross products round at eps ||F||^2, where W^T (K^T K) W
        # would round at eps s_max^2 / s for a kept eigenvalue s of K_ZZ.
        F = jnp.einsum("ibm,imk->bik", rbf_powers(d2, g, D), Wg)
        F = F.reshape(d2.shape[0], -1) * mask[:, None]
        return F.T @ F, F.T @ Xb

    gram, cross = jax.lax.map(per_gamma, (gammas, W))
    return gram, cross, jnp.sum(mask[:, None] * Xb**2)


def _floored_normalizer(Kcc):
    """U S^{-1/2} of K_ZZ, directions below NYSTROEM_FLOOR s_max dropped (the
    pseudo-inverse square root; the normalised features K_nZ W are formed
    before their cross products, so a kept direction rounds at eps, and the
    dropped ones carry below 1e-10 of the largest eigenvalue: measured at full
    rank, m = 100, the evidence within 2e-8 of the exact)."""
    s, U = jnp.linalg.eigh(Kcc)
    thr = NYSTROEM_FLOOR * jnp.maximum(s[-1], 1e-30)
    return U * jnp.where(s > thr, 1.0 / jnp.sqrt(jnp.maximum(s, thr)), 0.0)[None]


@partial(jax.jit, static_argnames="D")
def _normalizers(Z, gammas, D):
    d2 = squared_distances(Z, Z)
    return jax.lax.map(lambda g: jax.vmap(_floored_normalizer)(
        rbf_powers(d2, g, D)), gammas)  # (G, D, M, M)


def _hsgp_box(Y, gammas):
    """Box centre c and half-width L = c' S around the outputs (half-range S):
    c' = 3.2 l_max / S within [1.5, 4] keeps the boundary condition away from
    the widest kernel, l_max = (2 gamma_min)^{-1/2} (Riutort-Mayol et al.
    2023, Statistics and Computing 33:17, eq. (18))."""
    lo, hi = float(Y.min()), float(Y.max())
    S = max(0.5 * (hi - lo), 1e-12)
    ell_max = 1.0 / math.sqrt(2.0 * float(np.min(gammas)))
    return 0.5 * (lo + hi), float(np.clip(3.2 * ell_max / S, 1.5, 4.0)) * S


def lowrank_statistics(
    key: jax.Array, Y: np.ndarray, X: np.ndarray, gammas: np.ndarray,
    max_degree: int, rank: int, features: str, *, progress_bar: bool = False,
    mesh=None, chunk_rows: int = BLOCK_ROWS,
) -> LowRankBasis:
    """One pass over the data: the feature map and its float64 sufficient
    statistics (Phi^T Phi, Phi^T X and ||X||^2; per rate for Nystroem).

    The sums over the rows run data-parallel
    (:func:`bayeskde.distributed.sharded_sum`): each chunk of rows is split
    over the devices of ``mesh``, every device sums its rows' contributions,
    the devices' sums are added by ``psum`` and the chunks' on the host, so a
    device holds one chunk (BLOCK_ROWS rows) at a time whatever m, and under
    ``jax.distributed`` the hosts share the pass.

    Args:
        key: PRNG key of the Nystroem centres (k-means++).
        Y: ``(m, d_y)`` outputs, X ``(m, d_x)`` centred targets (float64).
        gammas: the rate grid; max_degree: D.
        rank: HSGP functions J or Nystroem centres M (<= m).
        features: ``"hsgp"`` (d_y = 1) or ``"nystroem"``.
        mesh: a one-axis device mesh (default: every device,
            :func:`bayeskde.distributed.device_mesh`).
        chunk_rows: rows a device sums at once.

    Cost: hsgp O(m J^2) time; nystroem O(n_gamma m (D M)^2) plus the
    k-means++ seeding (one device); both split over the devices; device
    memory O(chunk_rows R + n_gamma R^2).
    """
    m = Y.shape[0]
    kw = dict(mesh=mesh, chunk_rows=chunk_rows, progress_bar=progress_bar)
    with jax.enable_x64(True):
        if features == "hsgp":
            centre, half = _hsgp_box(Y, gammas)
            gram, cross, x_sq = sharded_sum(
                _hsgp_block(centre, half, int(rank)), Y, X,
                desc="HSGP statistics", **kw)
            return LowRankBasis("hsgp", rank, gram, cross, x_sq, m,
                                box_centre=centre, box_half=half)
        if rank >= m:
            Z = Y
        else:
            # Centres spread in the feature space of a mid-grid rate of the
            # highest degree (space filling for the narrow kernels).
            g_c = float(np.sqrt(gammas.min() * gammas.max()) * max_degree)
            idx = select_centers(key, Y, rank, method="kmeans++", kernel="rbf",
                                 params={"gamma": g_c})
            Z = Y[np.asarray(idx)]
        Zj, gj = jnp.asarray(Z), jnp.asarray(gammas)
        W = np.asarray(_normalizers(Zj, gj, max_degree))
        gram, cross, x_sq = sharded_sum(
            _nystroem_block, Y, X, broadcast=(Zj, gj, W),
            desc="Nystroem statistics", **kw)
    return LowRankBasis("nystroem", Z.shape[0], gram, cross, x_sq, m,
                        centres=Z, normalizer=W)


def lowrank_hsic(basis: LowRankBasis, gammas: np.ndarray, D: int) -> np.ndarray:
    """``(n_gamma, D)`` HSIC(K^(i), X_c X_c^T) = ||F_i^T X_c||_F^2 / (m - 1)^2
    from the statistics (the features F_i of K^(i)). Cost O(n_gamma D R^2)."""
    if basis.kind == "hsgp":
        w = hsgp_frequencies(basis.rank, basis.box_half)
        cx = np.sum(basis.cross**2, axis=1)
        C = np.array([[rbf_spectral_density(w, (i + 1) * g) @ cx
                       for i in range(D)] for g in gammas])
    else:
        M = basis.centres.shape[0]
        C = np.array([[np.sum(basis.cross[g][i * M:(i + 1) * M] ** 2)
                       for i in range(D)] for g in range(len(gammas))])
    return C / (basis.n - 1) ** 2


def _pair_system(basis, alpha, gammas, g, d):
    """(Gram, cross, map) of pair (g, d) in its own feature coordinates,
    Gp = B^T Phi_raw^T Phi_raw B and c = B^T Phi_raw^T X, with B the pair's
    weights on the raw features: HSGP diag sqrt(S) on the functions above
    the floor (the map is their indices and weights); Nystroem sqrt(alpha_i)
    on the normalised features of the degrees used."""
    a = np.asarray(alpha[g, d], np.float64)
    if basis.kind == "hsgp":
        s = transform_spectral_density(a, float(gammas[g]),
                                       hsgp_frequencies(basis.rank, basis.box_half))
        idx = np.flatnonzero(s > SPECTRAL_FLOOR * s.max())
        sq = np.sqrt(s[idx])
        G = sq[:, None] * basis.gram[np.ix_(idx, idx)] * sq[None]
        return G, sq[:, None] * basis.cross[idx], (idx, sq)
    M = basis.centres.shape[0]
    use = [i for i in range(d + 1) if a[i] > 0]
    rows = np.concatenate([np.arange(i * M, (i + 1) * M) for i in use])
    sq = np.repeat(np.sqrt(a[use]), M)
    G = sq[:, None] * basis.gram[g][np.ix_(rows, rows)] * sq[None]
    return G, sq[:, None] * basis.cross[g][rows], (use, sq)


def _kept(lam, m):
    """The eigenvalues of an R x R Phi^T Phi the evidence keeps: the rule of
    :func:`~.kernel.kept_eigenvalues` at size max(m, R) (they stand for the
    m x m Gram's), at most m of them."""
    ok = kept_eigenvalues(lam, max(m, lam.shape[0]), eps=np.finfo(np.float64).eps)
    if ok.sum() > m:
        ok &= lam >= np.sort(lam)[-m]
    return ok


def _hsgp_tails(basis, alpha, gammas):
    """``(n_gamma, D, J_max + 1)``: entry J is m times the variance of phi(K)
    beyond the first J functions at a point, sum_{j > J} S(w_j) times the
    functions' mean square 1 / (2 L), up to the frequency J_max where the
    narrowest kernel's density is below exp(-40). (The box's boundary bias is
    not in it; more functions do not remove that.)"""
    g_max = float(np.max(gammas)) * alpha.shape[-1]
    j_max = int(np.ceil(math.sqrt(160.0 * g_max) * 2.0 * basis.box_half / np.pi))
    w = hsgp_frequencies(max(j_max, basis.rank + 1), basis.box_half)
    dens = np.array([[transform_spectral_density(alpha[g, d], float(gammas[g]), w)
                      for d in range(alpha.shape[1])] for g in range(len(gammas))])
    tail = np.cumsum(dens[..., ::-1], axis=-1)[..., ::-1]  # tail[J] = sum_{j>=J}
    tail = np.concatenate([tail, np.zeros((*tail.shape[:2], 1))], axis=-1)
    return basis.n * tail / (2.0 * basis.box_half)


def _hsgp_tail(basis, alpha, gammas):
    return _hsgp_tails(basis, alpha, gammas)[..., basis.rank]


def hsgp_tail_indicator(basis: LowRankBasis, alpha: np.ndarray,
                        gammas: np.ndarray, ratio: np.ndarray, d_x: int,
                        ) -> np.ndarray:
    """The evidence-error indicator (d_x / 2) (a^2 / s^2) m Var_{>J} of every
    HSGP basis size J = 0..J_max (m Var_{>J}: the spectral density summed
    beyond the first J functions, times their mean square 1 / (2 L)),
    maximised over the pairs: ``(J_max + 1,)``.

    ``ratio`` ``(n_gamma, D)`` is each pair's a^2 / s^2 at its mode, zero for
    the pairs to leave out. A function of the kernel's spectral density, the
    box and the pairs' modes only: no data pass, so it tells which J the
    captured spectrum needs before the statistics at that J are formed.
    Cost O(n_gamma D D J_max)."""
    tails = _hsgp_tails(basis, alpha, gammas)
    return np.max(0.5 * d_x * np.asarray(ratio)[..., None] * tails, axis=(0, 1))


def lowrank_pair_spectra(basis: LowRankBasis, alpha: np.ndarray,
                         gammas: np.ndarray, *, progress_bar: bool = False):
    """The kept eigenvalues and squared projections of every pair, a list of
    ``(lam, q)`` float64 arrays (flat pair order g D + d), and sets
    ``basis.trace_residual`` ``(n_gamma, D)``: m sum(alpha) - tr(Phi Phi^T)
    for Nystroem (>= 0: its kernel is below the exact one), the variance
    beyond the basis for HSGP (:func:`_hsgp_tail`).

    Cost O(n_gamma D R_p^3) for each pair's R_p <= R features."""
    G, D = alpha.shape[:2]
    out, resid = [], np.zeros((G, D))
    pairs = [(g, d) for g in range(G) for d in range(D)]
    if progress_bar:
        from tqdm.auto import tqdm

        pairs = tqdm(pairs, desc="pair spectra", leave=False)
    for g, d in pairs:
        Gp, c, _ = _pair_system(basis, alpha, gammas, g, d)
        lam, V = np.linalg.eigh(Gp)
        ok = _kept(lam, basis.n)
        lam, V = lam[ok], V[:, ok]
        out.append((lam, np.sum((V.T @ c) ** 2, axis=1) / lam))
        resid[g, d] = basis.n * alpha[g, d].sum() - np.trace(Gp)
    basis.trace_residual = (_hsgp_tail(basis, alpha, gammas)
                            if basis.kind == "hsgp" else resid)
    return out


def lowrank_pair_spectrum(basis: LowRankBasis, alpha: np.ndarray,
                          gammas: np.ndarray, g: int, d: int):
    """Kept spectrum of pair (g, d) for the predictive, float64:
    ``(lam (r,), coef, proj (r, d_x))``, with ``coef`` the map from raw
    features to A = k(y)^T U = phi(y)^T V Lambda^{1/2}: ``(J, r)`` for hsgp
    (zero rows for the functions the pair drops), ``(D, M, r)`` for
    nystroem; proj = U^T X = Lambda^{-1/2} V^T c. Cost O(R^3)."""
    Gp, c, fmap = _pair_system(basis, alpha, gammas, g, d)
    lam, V = np.linalg.eigh(Gp)
    ok = _kept(lam, basis.n)
    lam, V = lam[ok], V[:, ok]
    proj = (V.T @ c) / np.sqrt(lam)[:, None]
    VL = V * np.sqrt(lam)[None]
    if basis.kind == "hsgp":
        idx, sq = fmap
        coef = np.zeros((basis.rank, len(lam)))
        coef[idx] = sq[:, None] * VL
        return lam, coef, proj
    use, sq = fmap
    M, D = basis.centres.shape[0], alpha.shape[1]
    coef = np.zeros((D, M, len(lam)))
    full = sq[:, None] * VL
    for k, i in enumerate(use):
        coef[i] = basis.normalizer[g, i] @ full[k * M:(k + 1) * M]
    return lam, coef, proj


def _raw_features(basis, Z, gamma, D, y):
    """Raw features at outputs ``y`` (n, d_y): the HSGP functions (n, J) or
    the Nystroem power kernels to the centres (D, n, M)."""
    if basis.kind == "hsgp":
        return hsgp_eigenfunctions(y[:, 0], basis.box_centre, basis.box_half,
                                   basis.rank)
    return rbf_powers(squared_distances(y, Z), gamma, D)


def feature_projections(mix, outputs: Float[Array, "n_c d_y"]) -> Array:
    """A = phi(y)^T V Lambda^{1/2} of every pair of a low-rank
    :class:`~bayeskde.inverse.InverseGPMixture` at ``outputs``: ``(P, n_c, r)``,
    the feature form of k(y)^T U. The HSGP functions are shared by the pairs
    (computed once); the Nystroem power kernels depend on the pair's rate.
    Cost O(n_c P R r), independent of m."""
    basis = mix.basis
    if basis.kind == "hsgp":
        F = _raw_features(basis, None, None, None, outputs)
        return jnp.einsum("nj,pjr->pnr", F, mix.U)
    D = mix.alpha.shape[1]
    return jax.lax.map(lambda a: jnp.einsum(
        "inm,imr->nr", _raw_features(basis, mix.Y, a[0], D, outputs), a[1]),
        (mix.gamma, mix.U))


@partial(jax.jit, static_argnames=("basis", "D"))
def apply_features(basis, Z, gamma, D, coef, y):
    """The raw features at outputs ``y`` times ``coef`` (the replicates' map
    from a pair's coefficients to f)."""
    F = _raw_features(basis, Z, gamma, D, y)
    if basis.kind == "hsgp":
        return F @ coef
    return jnp.einsum("inm,imk->nk", F, coef)


def apply_features_rows(basis, Z, gamma, D, coef, Y):
    """phi_raw(Y) @ coef over row blocks of the training outputs ``Y``
    (:func:`apply_features`: the raw features at Y times ``coef``)."""
    m = Y.shape[0]
    b, nb = _blocks(m)
    Yp = _padded(np.asarray(Y), b, nb)
    return np.concatenate([np.asarray(apply_features(basis, Z, gamma, D, coef,
                                             jnp.asarray(Yp[i * b:(i + 1) * b])))
                           for i in range(nb)])[:m]
