"""Kernel learning with hyperkernels: the hinge quality functional on pair labels.

Kondor and Jebara (2006), section 5, learn a kernel on pairs of training points
labelled ``y_ij = +1`` (same class) or ``-1`` (different classes),

    k(x, x') = sum_u beta_u K(u, (x, x')) + b,   u = (x_i, x_j) a training pair,

by minimising the hyperkernel regulariser plus the hinge loss on the pairs:

    min_{beta, b, xi}  1/2 beta^T K beta + C sum_u w_u xi_u
    s.t.  y_u ((K beta)_u + b) >= 1 - xi_u,   xi_u >= 0,
          beta_u >= 0                      (conic variant only),

where ``K`` is the hyperkernel Gram matrix between the training pairs (the RKHS norm
of ``k - b`` is ``beta^T K beta``) and ``w_u`` are per-pair weights (1 unless pairs
are merged by symmetry, below). The conic variant keeps ``k - b`` in the cone
``K_+`` of non-negative combinations of hyperkernel sections, each of which is a
kernel (Definition 1), so ``k - b`` is a Mercer kernel; the linear variant drops the
constraint. Both are convex QPs in 2p + 1 variables (the paper's 2 m^2 + 1), solved
here by the interior-point solver Clarabel.

Derivation of the solver form. With z = (beta, xi, b) Clarabel minimises
1/2 z^T P z + q^T z subject to A z + s = h, s >= 0, where P = blkdiag(K, 0, 0),
q = (0, C w, 0) and the rows of A, h are [-Y K, -I, -y | -1] (hinge),
[0, -I, 0 | 0] (xi >= 0) and, conic only, [-I, 0, 0 | 0] (beta >= 0), with
Y = diag(y). Its duals (alpha, mu, nu) >= 0 satisfy the KKT conditions
K beta = K Y alpha + nu, C w = alpha + mu, y^T alpha = 0, and complementary
slackness; in the linear variant nu = 0, beta = Y alpha solves them, and the dual is
the SVM dual on pairs with kernel K and box 0 <= alpha <= C w, so the linear
hyperkernel is a weighted SVM on pairs (tested against scikit-learn's SVC).

Symmetry. The Gaussian, Wishart and harmonic hyperkernels are invariant under
swapping the members of a pair, so with a symmetric label matrix the problem over
all m^2 ordered pairs has an optimum with beta_ij = beta_ji. Substituting
gamma_ij = beta_ij + beta_ji over the pairs i <= j gives the same problem over
m (m + 1) / 2 pairs with weights w = 2 off the diagonal and 1 on it: the same
kernel, at an eighth of the QP cost.

References:
    Kondor and Jebara (2006), "Gaussian and Wishart Hyperkernels", NIPS 19,
    sections 2 and 5.
    Ong, Smola and Williamson (2005), "Learning the kernel with hyperkernels",
    JMLR 6 (the hyper-representer theorem).
    Goulart and Chen (2024), "Clarabel: an interior-point solver for conic
    programs with quadratic objectives".
"""

from __future__ import annotations

from typing import NamedTuple

import jax.numpy as jnp
import numpy as np
from jaxtyping import Float, Real

from .._typing import ArrayLike
from .._validation import (
    as_float_array,
    check_positive,
    warn_once,
)

__all__ = [
    "VARIANTS",
    "HyperkernelQPResult",
    "solve_hyperkernel_qp",
    "pair_labels",
]

#: ``variant`` values of :func:`solve_hyperkernel_qp`.
VARIANTS = ("conic", "linear")


class HyperkernelQPResult(NamedTuple):
    """Solution of the hyperkernel QP (float64 NumPy arrays, from the solver).

    Attributes:
        beta: ``(n_pairs,)`` expansion coefficients.
        b: ``()`` offset.
        slack: ``(n_pairs,)`` hinge slacks xi.
        alpha: ``(n_pairs,)`` duals of the hinge constraints, in [0, C w].
        nu: ``(n_pairs,)`` duals of beta >= 0 (zeros for the linear variant).
        objective: ``()`` 1/2 beta^T K beta + C sum w xi.
        status: the solver's status string (``"Solved"`` on success).
        iterations: interior-point iterations.
    """

    beta: np.ndarray
    b: np.ndarray
    slack: np.ndarray
    alpha: np.ndarray
    nu: np.ndarray
    objective: np.ndarray
    status: str
    iterations: int


def _psd_for_solver(K, eps):
    K = 0.5 * (K + K.T)
    lo = float(np.linalg.eigvalsh(K)[0])
    if lo < 0.0:
        # Round-off (a float32 Gram) leaves K slightly indefinite; the QP needs
        # P >= 0. The shift equals adding a small delta kernel on training pairs;
        # only a shift above round-off level is worth a warning.
        scale = max(float(np.max(np.abs(np.diag(K)))), 1e-300)
        jitter = -lo + 1e-12 * scale
        if -lo > 100.0 * eps * K.shape[0] * scale:
            warn_once(
                f"hyperkernel Gram matrix has a negative eigenvalue {lo:.2e}; "
                f"adding {jitter:.2e} to its diagonal"
            )
        K = K + jitter * np.eye(K.shape[0])
    return K


def solve_hyperkernel_qp(
    K: Float[ArrayLike, "n_pairs_k n_pairs_k2"],
    y: Real[ArrayLike, " n_pairs_y"],
    C: float | int = 10.0,
    *,
    weights: Real[ArrayLike, " n_pairs_w"] | None = None,
    variant: str = "conic",
    tol: float | int = 1e-8,
) -> HyperkernelQPResult:
    """Solve the hinge-loss hyperkernel QP of section 5 (see the module docstring).

    Args:
        K: ``(p, p)`` hyperkernel Gram matrix between the training pairs.
        y: ``(p,)`` pair labels in {-1, +1}.
        C: hinge constant, > 0 (the paper uses 10).
        weights: ``(p,)`` non-negative per-pair weights of the hinge; default 1.
        variant: ``"conic"`` (beta >= 0, a Mercer kernel) or ``"linear"``.
        tol: the solver's gap and feasibility tolerances.

    Returns:
        :class:`HyperkernelQPResult`.

    Raises:
        ValueError: for mismatched shapes, labels outside {-1, +1}, ``C <= 0``,
            negative weights, an unknown variant, or a solver failure.

    Cost: O(iterations p^3) time (interior point on dense p x p blocks), O(p^2)
    memory; p = 210 (m = 20, symmetric labels) takes about 0.1 s on one CPU core.
    """
    import clarabel
    import scipy.sparse as sp

    if variant not in VARIANTS:
        raise ValueError(f"variant must be one of {VARIANTS}, got {variant!r}")
    C = check_positive(C, "C")
    tol = check_positive(tol, "tol")
    K = as_float_array(K, "K", ndim=2)
    eps = float(jnp.finfo(K.dtype).eps)
    K = np.asarray(K, dtype=np.float64)
    p = K.shape[0]
    if K.shape != (p, p):
        raise ValueError(f"K must be square, got shape {K.shape}")
    y = check_pm1(y, "y", (p,))
    w = np.ones(p) if weights is None else np.asarray(
        as_float_array(weights, "weights", ndim=1), dtype=np.float64)
    if w.shape != (p,):
        raise ValueError(f"weights must have shape ({p},), got {w.shape}")
    if np.any(w < 0):
        raise ValueError("weights must be >= 0")
    K = _psd_for_solver(K, eps)

    zero_pp = sp.csc_matrix((p, p))
    eye = sp.identity(p, format="csc")
    P = sp.block_diag([sp.csc_matrix(np.triu(K)), sp.csc_matrix((p + 1, p + 1))])
    q = np.concatenate([np.zeros(p), C * w, [0.0]])
    rows = [
        sp.hstack([sp.csc_matrix(-y[:, None] * K), -eye, sp.csc_matrix(-y[:, None])]),
        sp.hstack([zero_pp, -eye, sp.csc_matrix((p, 1))]),
    ]
    h = [-np.ones(p), np.zeros(p)]
    if variant == "conic":
        rows.append(sp.hstack([-eye, sp.csc_matrix((p, p + 1))]))
        h.append(np.zeros(p))
    A = sp.vstack(rows, format="csc")
    h = np.concatenate(h)
    settings = clarabel.DefaultSettings()
    settings.verbose = False
    settings.tol_gap_abs = settings.tol_gap_rel = tol
    settings.tol_feas = tol
    solver = clarabel.DefaultSolver(
        sp.csc_matrix(P), q, A, h, [clarabel.NonnegativeConeT(A.shape[0])], settings
    )
    sol = solver.solve()
    status = str(sol.status)
    if "Solved" not in status:
        raise ValueError(f"the hyperkernel QP was not solved: status {status}")
    z = np.asarray(sol.x)
    duals = np.asarray(sol.z)
    beta, xi, b = z[:p], np.maximum(z[p : 2 * p], 0.0), z[2 * p]
    nu = duals[2 * p :] if variant == "conic" else np.zeros(p)
    objective = 0.5 * beta @ K @ beta + C * w @ xi
    return HyperkernelQPResult(
        beta, np.asarray(b), xi, duals[:p], nu, np.asarray(objective), status,
        int(sol.iterations),
    )


def check_pm1(y, name, shape):
    arr = np.asarray(y)
    if arr.shape != shape:
        raise ValueError(f"{name} must have shape {shape}, got {arr.shape}")
    if arr.dtype.kind not in "biuf" or not np.all(np.isin(arr, (-1, 1))):
        raise ValueError(f"{name} must hold pair labels in {{-1, +1}}")
    return arr.astype(np.float64)


def pair_labels(labels) -> np.ndarray:
    """Pair labels y_ij = +1 if labels[i] == labels[j] else -1 (section 5).

    Args:
        labels: ``(m,)`` class labels of any comparable type.

    Returns:
        ``(m, m)`` int array in {-1, +1}.
    """
    labels = np.asarray(labels)
    if labels.ndim != 1:
        raise ValueError(f"labels must be 1-dimensional, got shape {labels.shape}")
    return np.where(labels[:, None] == labels[None, :], 1, -1)


# ------------------------------------------------------------------- learned kernel
