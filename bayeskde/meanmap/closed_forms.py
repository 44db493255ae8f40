"""Empirical and generative mean-map kernels and the probability product kernel.

The empirical mean-map kernel (EMMK) between two sets is the mean of base-kernel
values between their points; for non-iid data it is the sum over maximal cliques
of the EMMK of each clique's instances (eq. 3). The generative mean-map kernel
(GMMK, eqs. 5-6) replaces each set by a fitted distribution and takes the
expectation of the base kernel under the two distributions. Closed forms here:

* Gaussians with the RBF base kernel ``k(x, y) = exp(-gamma ||x - y||^2)`` and any
  covariances: with ``S = S1 + S2`` and ``mu = m1 - m2``,
  ``E k = det(I + 2 gamma S)^(-1/2) exp(-gamma mu^T (I + 2 gamma S)^(-1) mu)``
  (the Gaussian integral of ``exp(-gamma z^T z)`` against ``z ~ N(mu, S)``);
* categorical distributions (one multinomial draw, 1-of-K encoding) with any symbol
  kernel matrix ``L``: ``E k = p^T L q``;
* the probability product kernel ``int p^rho q^rho`` (eq. 33) for Gaussians (any
  ``rho > 0``) and categoricals;
* hidden Markov models over length-``T`` sequences with a product base kernel
  ``k(x, y) = prod_t k(x_t, y_t)`` (for the RBF this is the RBF of the concatenated
  sequences) through a forward recursion on the joint state ``(q_t, q'_t)``:
  ``alpha_1 = pi pi'^T * Psi``, ``alpha_t = (A^T alpha_{t-1} A') * Psi``,
  ``k = sum alpha_T`` with ``Psi_ij = E_{x ~ b_i, y ~ b'_j} k(x, y)``. With
  ``Psi_ij = int b_i b'_j`` it is the rho = 1 probability product kernel of HMMs
  (Jebara, Kondor and Howard 2004). Cost O(T N N' (N + N')).

Relations that the tests check: the rho = 1 PPK is the GMMK with the Dirac base
kernel, and ``(gamma / pi)^(D/2)`` times the RBF GMMK is the rho = 1 PPK between
``p`` and ``p'`` smoothed by ``N(0, I / (2 gamma))``; eq. (34)'s two expectations
both equal that quantity.

References:
    Mehta and Gray, "Generative and Latent Mean Map Kernels", eqs. (3), (5)-(6),
    (33)-(34). Jebara, Kondor and Howard (2004), "Probability product kernels",
    JMLR 5, sections 3-4.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import jax
import jax.numpy as jnp
import jax.scipy.linalg as jsl
import numpy as np
from jaxtyping import Array, Float

from .._typing import ArrayLike, float_dtype
from .._validation import as_float_array, check_positive
from ..kernels.standard import rbf_gram

__all__ = [
    "empirical_mean_map_kernel",
    "mean_map_gram",
    "clique_mean_map_kernel",
    "sequence_cliques",
    "symbol_kernel_matrix",
    "log_gaussian_gmmk",
    "gaussian_gmmk",
    "categorical_gmmk",
    "log_gaussian_ppk",
    "gaussian_ppk",
    "categorical_ppk",
    "log_hmm_product_kernel",
]


# --------------------------------------------------------------------------- EMMK


@jax.jit
def _weighted_mean_map(X, wx, Y, wy, gamma):
    return wx @ rbf_gram(X, Y, gamma) @ wy


def as_log_array(x, name):
    """Float array of log values: ``-inf`` (probability 0) allowed, NaN/+inf not."""
    try:
        arr = np.asarray(x)
    except Exception as err:
        raise TypeError(f"{name} must be array-like") from err
    if arr.dtype.kind not in "biuf":
        raise TypeError(f"{name} must hold numbers, got dtype {arr.dtype}")
    if np.any(np.isnan(arr)) or np.any(arr == np.inf):
        raise ValueError(f"{name} contains NaN or +inf")
    return jnp.asarray(arr, dtype=float_dtype())


def _as_set(x, name):
    x = as_float_array(x, name)
    if x.ndim == 1:
        x = x[:, None]
    if x.ndim != 2:
        raise ValueError(f"{name} must be (n_points, n_features), got {x.shape}")
    return x


def empirical_mean_map_kernel(
    X: Float[ArrayLike, "n_x d_x"],
    Y: Float[ArrayLike, "n_y d_y"],
    *,
    gamma: float = 1.0,
) -> Float[Array, ""]:
    """EMMK <mu[X], mu[Y]> = (1 / (m m')) sum_ij exp(-gamma ||x_i - y_j||^2).

    Args:
        X, Y: point sets ``(m, D)`` and ``(m', D)`` (1-D means one feature).
        gamma: RBF rate > 0.

    Returns:
        Scalar kernel value. Cost O(m m' D) time, O(m m') memory.

    Raises:
        ValueError: empty sets, NaN/inf, or different numbers of features.

    Examples:
        >>> import numpy as np
        >>> float(empirical_mean_map_kernel(np.zeros((1, 1)), np.zeros((1, 1))))
        1.0
    """
    gamma = check_positive(gamma, "gamma")
    X, Y = _as_set(X, "X"), _as_set(Y, "Y")
    if X.shape[1] != Y.shape[1]:
        raise ValueError(
            f"X and Y must have the same number of features, got {X.shape[1]} "
            f"and {Y.shape[1]}"
        )
    wx = jnp.full((X.shape[0],), 1.0 / X.shape[0], X.dtype)
    wy = jnp.full((Y.shape[0],), 1.0 / Y.shape[0], X.dtype)
    return _weighted_mean_map(X, wx, Y, wy, gamma)


def _pad_sets(sets, name):
    if len(sets) == 0:
        raise ValueError(f"{name} is an empty list of sets")
    arrs = [_as_set(s, f"{name}[{i}]") for i, s in enumerate(sets)]
    dims = {a.shape[1] for a in arrs}
    if len(dims) != 1:
        raise ValueError(f"{name}: all sets need the same number of features, got "
                         f"{sorted(dims)}")
    m = max(a.shape[0] for a in arrs)
    dtype = arrs[0].dtype
    X = jnp.stack([jnp.pad(a, ((0, m - a.shape[0]), (0, 0))) for a in arrs])
    w = jnp.stack([jnp.where(jnp.arange(m) < a.shape[0], 1.0 / a.shape[0], 0.0)
                   for a in arrs]).astype(dtype)
    return X, w


@jax.jit
def _mean_map_gram(XA, wA, XB, wB, gamma):
    def row(args):
        x, wx = args
        return jax.vmap(lambda y, wy: _weighted_mean_map(x, wx, y, wy, gamma))(XB, wB)

    return jax.lax.map(row, (XA, wA))


def mean_map_gram(
    sets_a: Sequence, sets_b: Sequence | None = None, *, gamma: float = 1.0
) -> Float[Array, "n_a n_b"]:
    """EMMK Gram matrix between two lists of point sets (sizes may differ).

    Sets are zero-padded to the largest size with zero weights, so one compiled
    function serves the whole list. Cost O(n_a n_b m^2 D) time, O(n_b m^2) memory
    (rows are computed one at a time).
    """
    gamma = check_positive(gamma, "gamma")
    XA, wA = _pad_sets(sets_a, "sets_a")
    XB, wB = (XA, wA) if sets_b is None else _pad_sets(sets_b, "sets_b")
    if XA.shape[2] != XB.shape[2]:
        raise ValueError("sets_a and sets_b need the same number of features")
    return _mean_map_gram(XA, wA, XB, wB, gamma)


def sequence_cliques(x: Float[ArrayLike, "n_steps d"] , width: int = 2) -> Array:
    """Clique instances of a chain of order ``width - 1``: stacked windows.

    Row ``t`` is ``(x_t, ..., x_{t+width-1})`` flattened, so a sequence of length
    ``T`` gives ``T - width + 1`` instances (none if ``T < width``: shape
    ``(0, width D)``).
    """
    x = _as_set(x, "x")
    if isinstance(width, bool) or int(width) != width or width < 1:
        raise ValueError(f"width must be a positive integer, got {width!r}")
    n = max(x.shape[0] - width + 1, 0)
    if n == 0:
        return jnp.zeros((0, width * x.shape[1]), x.dtype)
    return jnp.concatenate([x[k : k + n] for k in range(width)], axis=1)


def clique_mean_map_kernel(
    cliques_x: Sequence, cliques_y: Sequence, *, gamma: float | Sequence = 1.0
) -> Float[Array, ""]:
    """Non-iid EMMK: sum over maximal cliques of the clique-wise EMMK (eq. 3).

    With ``v = sum_c v_c`` (eq. 3) the mean map of a set of clique instances
    decomposes into per-clique mean maps, so
    ``k(x, y) = sum_c (1 / (m_c m'_c)) sum_ij v_c(x_c^(i), y_c^(j))``.

    Args:
        cliques_x, cliques_y: one array ``(m_c, D_c)`` of instances per clique type
            (see :func:`sequence_cliques`). A clique type with no instances in
            either object contributes 0 (its mean map is the zero vector).
        gamma: RBF rate of every clique kernel, or one per clique type.
    """
    if len(cliques_x) != len(cliques_y):
        raise ValueError(
            f"cliques_x and cliques_y must list the same clique types, got "
            f"{len(cliques_x)} and {len(cliques_y)}"
        )
    gammas = [gamma] * len(cliques_x) if not isinstance(gamma, Sequence) else gamma
    if len(gammas) != len(cliques_x):
        raise ValueError(f"gamma needs {len(cliques_x)} values, got {len(gammas)}")
    total = jnp.zeros((), float_dtype())
    for c, (cx, cy, g) in enumerate(zip(cliques_x, cliques_y, gammas, strict=True)):
        cx = as_float_array(cx, f"cliques_x[{c}]", allow_empty=True)
        cy = as_float_array(cy, f"cliques_y[{c}]", allow_empty=True)
        if cx.shape[0] == 0 or cy.shape[0] == 0:
            continue
        total = total + empirical_mean_map_kernel(cx, cy, gamma=g)
    return total


# -------------------------------------------------------------------------- GMMK


def symbol_kernel_matrix(n_symbols: int, lam: float) -> Float[Array, "k k"]:
    """``L_ab = exp(-lam [a != b])``: the kernel on 1-of-K codes used in eq. (29).

    It is the RBF ``exp(-(lam / 2) ||e_a - e_b||^2)`` on one-hot vectors, and
    equals ``(1 - e^-lam) I + e^-lam 11^T`` (positive semi-definite).
    ``lam = inf`` gives the identity.
    """
    lam = float(lam)
    if not lam >= 0:
        raise ValueError(f"lam must be >= 0, got {lam}")
    off = math.exp(-lam)
    dtype = float_dtype()
    return (1.0 - off) * jnp.eye(n_symbols, dtype=dtype) + off


@jax.jit
def log_gaussian_gmmk_core(m1, S1, m2, S2, gamma):
    d = m1.shape[-1]
    M = jnp.eye(d, dtype=m1.dtype) + 2.0 * gamma * (S1 + S2)
    chol = jnp.linalg.cholesky(M)
    mu = m1 - m2
    z = jsl.solve_triangular(chol, mu, lower=True)
    logdet = 2.0 * jnp.sum(jnp.log(jnp.diagonal(chol)))
    return -0.5 * logdet - gamma * jnp.dot(z, z)


def _gaussian_args(m1, S1, m2, S2):
    m1 = as_float_array(m1, "mean1", ndim=1)
    m2 = as_float_array(m2, "mean2", ndim=1)
    d = m1.shape[0]
    if m2.shape != (d,):
        raise ValueError(f"mean2 must have shape ({d},), got {m2.shape}")
    out = []
    for S, name in ((S1, "cov1"), (S2, "cov2")):
        S = as_float_array(S, name)
        if S.shape == (d,):
            S = jnp.diag(S)
        if S.shape != (d, d):
            raise ValueError(f"{name} must be ({d}, {d}) or ({d},), got {S.shape}")
        out.append(S)
    return m1, out[0], m2, out[1]


def log_gaussian_gmmk(
    mean1: Float[ArrayLike, " d1"],
    cov1: Float[ArrayLike, "..."],
    mean2: Float[ArrayLike, " d2"],
    cov2: Float[ArrayLike, "..."],
    *,
    gamma: float = 1.0,
) -> Float[Array, ""]:
    """Log GMMK between N(mean1, cov1) and N(mean2, cov2), RBF base kernel (eq. 5).

    ``E exp(-gamma ||x - y||^2) = det(I + 2 gamma S)^(-1/2)
    exp(-gamma mu^T (I + 2 gamma S)^(-1) mu)`` with ``S = cov1 + cov2`` and
    ``mu = mean1 - mean2``; covariances may be singular (point masses give the
    RBF itself). Covariances are ``(D, D)`` or diagonal ``(D,)``. Cost O(D^3).
    """
    gamma = check_positive(gamma, "gamma")
    return log_gaussian_gmmk_core(*_gaussian_args(mean1, cov1, mean2, cov2), gamma)


def gaussian_gmmk(
    mean1: Float[ArrayLike, " d1"],
    cov1: Float[ArrayLike, "..."],
    mean2: Float[ArrayLike, " d2"],
    cov2: Float[ArrayLike, "..."],
    *,
    gamma: float = 1.0,
) -> Float[Array, ""]:
    """GMMK between two Gaussians with the RBF base kernel; see
    :func:`log_gaussian_gmmk`.

    Examples:
        >>> import numpy as np
        >>> z = np.zeros((1, 1))
        >>> g = gaussian_gmmk(np.zeros(1), z, np.ones(1), z, gamma=0.5)
        >>> round(float(g), 6)
        0.606531
    """
    return jnp.exp(log_gaussian_gmmk(mean1, cov1, mean2, cov2, gamma=gamma))


def categorical_gmmk(
    p: Float[ArrayLike, " k1"],
    q: Float[ArrayLike, " k2"],
    symbol_kernel: Float[ArrayLike, "k3 k4"],
) -> Float[Array, ""]:
    """GMMK between categorical distributions: ``sum_ab p_a q_b L_ab = p^T L q``.

    With the 1-of-K encoding and an RBF on the codes, ``L`` is
    :func:`symbol_kernel_matrix`. Cost O(K^2).
    """
    p = as_float_array(p, "p", ndim=1)
    q = as_float_array(q, "q", ndim=1)
    L = as_float_array(symbol_kernel, "symbol_kernel", ndim=2)
    k = p.shape[0]
    if q.shape != (k,) or L.shape != (k, k):
        raise ValueError(
            f"p, q, symbol_kernel must be ({k},), ({k},), ({k}, {k}); got "
            f"{p.shape}, {q.shape}, {L.shape}"
        )
    return p @ L @ q


# --------------------------------------------------------------------------- PPK


@jax.jit
def log_gaussian_ppk_core(m1, S1, m2, S2, rho):
    # N(x; m, S)^rho = (2 pi)^(-rho D/2) |S|^(-rho/2) exp(-rho/2 (x-m)^T S^-1 (x-m)).
    # The product is exp(-rho/2 (x^T P x - 2 x^T h + c)) with P = P1 + P2,
    # h = P1 m1 + P2 m2, c = m1^T P1 m1 + m2^T P2 m2, whose integral is
    # (2 pi)^(D/2) |rho P|^(-1/2) exp(rho/2 h^T P^-1 h).
    d = m1.shape[-1]
    c1 = jnp.linalg.cholesky(S1)
    c2 = jnp.linalg.cholesky(S2)
    eye = jnp.eye(d, dtype=m1.dtype)
    P1 = jsl.cho_solve((c1, True), eye)
    P2 = jsl.cho_solve((c2, True), eye)
    P = P1 + P2
    cP = jnp.linalg.cholesky(0.5 * (P + P.T))
    h = P1 @ m1 + P2 @ m2
    z = jsl.solve_triangular(cP, h, lower=True)
    c = m1 @ P1 @ m1 + m2 @ P2 @ m2
    logdet = lambda ch: 2.0 * jnp.sum(jnp.log(jnp.diagonal(ch)))  # noqa: E731
    log2pi = jnp.log(2.0 * jnp.pi)
    return (
        (0.5 - rho) * d * log2pi
        - 0.5 * rho * (logdet(c1) + logdet(c2))
        - 0.5 * d * jnp.log(rho)
        - 0.5 * logdet(cP)
        - 0.5 * rho * (c - jnp.dot(z, z))
    )


def log_gaussian_ppk(
    mean1: Float[ArrayLike, " d1"],
    cov1: Float[ArrayLike, "..."],
    mean2: Float[ArrayLike, " d2"],
    cov2: Float[ArrayLike, "..."],
    *,
    rho: float = 1.0,
) -> Float[Array, ""]:
    """Log probability product kernel ``int N(x; m1, S1)^rho N(x; m2, S2)^rho dx``
    (eq. 33; Jebara et al. 2004, section 3.1).

    For ``rho = 1`` it is ``log N(m1; m2, S1 + S2)`` (expected likelihood kernel);
    ``rho = 1/2`` is the Bhattacharyya affinity. Covariances must be positive
    definite. Cost O(D^3).
    """
    rho = check_positive(rho, "rho")
    return log_gaussian_ppk_core(*_gaussian_args(mean1, cov1, mean2, cov2), rho)


def gaussian_ppk(
    mean1: Float[ArrayLike, " d1"],
    cov1: Float[ArrayLike, "..."],
    mean2: Float[ArrayLike, " d2"],
    cov2: Float[ArrayLike, "..."],
    *,
    rho: float = 1.0,
) -> Float[Array, ""]:
    """Probability product kernel between Gaussians; see :func:`log_gaussian_ppk`."""
    return jnp.exp(log_gaussian_ppk(mean1, cov1, mean2, cov2, rho=rho))


def categorical_ppk(
    p: Float[ArrayLike, " k1"], q: Float[ArrayLike, " k2"], *, rho: float = 1.0
) -> Float[Array, ""]:
    """PPK between categoricals, ``sum_a p_a^rho q_a^rho`` (eq. 33, counting
    measure). For ``rho = 1`` it is the GMMK with the delta kernel ``L = I``."""
    rho = check_positive(rho, "rho")
    p = as_float_array(p, "p", ndim=1)
    q = as_float_array(q, "q", ndim=1)
    if p.shape != q.shape:
        raise ValueError(f"p and q must have the same shape, got {p.shape}, {q.shape}")
    return jnp.sum(p**rho * q**rho)


# -------------------------------------------------------------------------- HMMs


@jax.jit
def log_hmm_product_kernel_core(log_pi1, log_A1, log_pi2, log_A2, log_pair, mask):
    # Scaled forward recursion on the joint state (q_t, q'_t): alpha is kept
    # normalised and its log scale accumulated, so long sequences stay finite.
    shift = jnp.max(log_pair)
    psi = jnp.exp(log_pair - shift)
    A1 = jnp.exp(log_A1)
    A2 = jnp.exp(log_A2)
    a0 = jnp.exp(log_pi1[:, None] + log_pi2[None, :] + log_pair - shift)
    s0 = jnp.sum(a0)

    def _step(carry, on):
        alpha, log_scale = carry
        nxt = (A1.T @ alpha @ A2) * psi
        s = jnp.sum(nxt)
        alpha = jnp.where(on, nxt / s, alpha)
        log_scale = log_scale + jnp.where(on, jnp.log(s) + shift, 0.0)
        return (alpha, log_scale), None

    (_, log_k), _ = jax.lax.scan(_step, (a0 / s0, jnp.log(s0) + shift), mask)
    return log_k


def log_hmm_product_kernel(
    log_initial1: Float[ArrayLike, " n1"],
    log_transition1: Float[ArrayLike, "n1 n1"],
    log_initial2: Float[ArrayLike, " n2"],
    log_transition2: Float[ArrayLike, "n2 n2"],
    log_pair: Float[ArrayLike, "p1 p2"],
    length: int,
) -> Float[Array, ""]:
    """Log of ``E_{x ~ HMM1, y ~ HMM2} prod_{t<=T} k(x_t, y_t)`` for length ``T``.

    ``log_pair[i, j] = log E_{x ~ b_i, y ~ b'_j} k(x, y)`` couples the emissions of
    state ``i`` of the first HMM with state ``j`` of the second: the GMMK of the
    emission distributions (eqs. 5-6) gives the GMMK of the two HMMs for the RBF on
    the concatenated sequence; ``log int b_i b'_j`` gives the rho = 1 PPK
    (eq. 33). The expectation factorises over the joint chain ``(q_t, q'_t)``,
    computed by a scaled forward recursion. Cost O(T N1 N2 (N1 + N2)).
    """
    length = int(length)
    if length < 1:
        raise ValueError(f"length must be >= 1, got {length}")
    args = [as_log_array(a, n) for a, n in (
        (log_initial1, "log_initial1"), (log_transition1, "log_transition1"),
        (log_initial2, "log_initial2"), (log_transition2, "log_transition2"),
        (log_pair, "log_pair"))]
    n1, n2 = args[0].shape[0], args[2].shape[0]
    expected = ((n1,), (n1, n1), (n2,), (n2, n2), (n1, n2))
    for a, e, n in zip(args, expected, ("log_initial1", "log_transition1",
                       "log_initial2", "log_transition2", "log_pair"), strict=True):
        if a.shape != e:
            raise ValueError(f"{n} must have shape {e}, got {a.shape}")
    mask = jnp.ones((length - 1,), bool)
    return log_hmm_product_kernel_core(*args, mask)
