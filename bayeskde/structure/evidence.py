"""The evidence of one structure: its GP marginal likelihood, the log joint over
its parameters and the Laplace approximation of their integral.

For a structure ``S`` (a 0/1 mask over the grammar's terms) and unconstrained
parameters ``u`` the model on the standardised data ``(tau, z)`` is::

    z ~ N(0, K_S(u) + s2 I),
    log p(z | u, S) = -z^T (K + s2 I)^{-1} z / 2 - log|K + s2 I| / 2 - n log(2 pi) / 2

(Rasmussen and Williams 2006, eq. 2.30), exact, by one Cholesky factorisation:
O(n^3) time and O(n^2) memory per evaluation. The prior (:mod:`.priors`) is a
product of normals on ``u``, so the log joint is ``log p(z | u, S) + sum_i
log N(u_i; m_i, s_i^2)``.

The evidence ``p(z | S) = int p(z | u, S) p(u) du`` is approximated by Laplace's
method around each mode ``u*`` with ``H = -grad^2 log p(z, u | S)`` (Tierney and
Kadane 1986; MacKay 2003, eq. 28.8)::

    log p(z | S) ~ log p(z, u* | S) + (d / 2) log(2 pi) - log|H| / 2,

summed over the distinct modes (a mixture of Laplace approximations). Its
relative error is O(1/n) where the posterior of ``u`` is unimodal and regular;
it is larger for weakly identified parameters (a period or length scale the data
hardly constrain), which :func:`importance_log_evidence` corrects by importance
sampling with the Laplace Gaussian as the proposal (consistent as the number of
draws grows). Parameters of the terms a structure leaves out are kept in ``u``
with their prior: the likelihood does not depend on them, so their block of the
log joint is exactly Gaussian and Laplace integrates it exactly (to one), which
lets every structure share one parameter layout and be vmapped.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax.scipy.special import logsumexp
from jaxtyping import Array, Float, Int

from ..kernels.composable import Constant, Kernel
from .grammar import BASE_KERNELS, term_kernel

__all__ = [
    "LagTable",
    "lag_table",
    "natural_params",
    "structure_kernel",
    "structure_gram",
    "gp_log_marginal_likelihood",
    "log_joint",
    "laplace_log_evidence",
    "importance_log_evidence",
    "noise_floor",
]

#: Lags closer than this (in the fit's time unit, the span being 1) are one lag.
LAG_RESOLUTION = 1e-12


def noise_floor(n: int, dtype) -> float:
    """The smallest noise variance (standardised units): ``10 n eps``. Below it
    the Gram matrix of a smooth kernel is numerically singular in float32."""
    return 10.0 * n * float(jnp.finfo(dtype).eps)


def natural_params(u: Float[Array, " p"], positive: tuple[bool, ...]
                   ) -> Float[Array, " p"]:
    """``exp(u_i)`` for positive parameters, ``u_i`` otherwise."""
    pos = jnp.asarray(positive)
    return jnp.where(pos, jnp.exp(jnp.where(pos, u, 0.0)), u)


def structure_kernel(
    terms: tuple[tuple[str, ...], ...], theta: Float[Array, " p"],
    mask: Float[Array, " num_terms"],
) -> tuple[Kernel, Float[Array, ""]]:
    """The composable kernel ``c + sum_j mask_j v_j prod_b k_b`` and the noise
    variance, from natural parameters ``theta`` in the grammar's layout
    (:class:`~bayeskde.structure.Grammar`).

    Returns:
        ``(kernel, noise_variance)``.
    """
    kernel: Kernel = Constant(theta[0])
    i = 2
    for j, factors in enumerate(terms):
        size = sum(len(BASE_KERNELS[f][1]) for f in factors)
        values = [theta[i + 1 + k] for k in range(size)]
        kernel = kernel + term_kernel(factors, mask[j] * theta[i], values)
        i += 1 + size
    return kernel, theta[1]


class LagTable(NamedTuple):
    """The distinct lags ``|tau_i - tau_j|`` of a set of times and where each
    entry of the Gram matrix reads its lag.

    Attributes:
        lags: ``(num_lags,)`` the distinct lags (``n`` on a regular grid, at most
            ``n (n - 1) / 2 + 1``).
        index: ``(n, n)`` int, ``|tau_i - tau_j| = lags[index[i, j]]``.
    """

    lags: np.ndarray
    index: np.ndarray


def lag_table(tau) -> LagTable:
    """The :class:`LagTable` of ``(n,)`` times (NumPy, float64; lags equal to
    within :data:`LAG_RESOLUTION` are merged). O(n^2 log n)."""
    tau = np.asarray(tau, np.float64)
    r = np.round(np.abs(tau[:, None] - tau[None, :]) / LAG_RESOLUTION)
    keys, index = np.unique(r, return_inverse=True)
    return LagTable(keys * LAG_RESOLUTION, index.reshape(r.shape).astype(np.int32))


def structure_gram(
    terms: tuple[tuple[str, ...], ...], theta: Float[Array, " p"],
    mask: Float[Array, " num_terms"], tau: Float[Array, " n"],
    lags: Float[Array, " num_lags"], index: Int[Array, "n n"],
) -> Float[Array, "n n"]:
    """The Gram matrix of :func:`structure_kernel` at the training times, without
    the noise: each term's stationary factors (``SE``, ``PER``, ``RQ`` and the
    variance) are evaluated once per distinct lag (:meth:`~bayeskde.kernels.
    composable.Kernel.on_lags`) and gathered, its other factors (``LIN``) on the
    times. Equal to ``structure_kernel(terms, theta, mask)[0](tau)``; O(T
    (num_lags + n^2)) for ``T`` terms instead of O(T n^2) formula evaluations.
    """
    on_lags = jnp.full(lags.shape, theta[0], tau.dtype)
    gram = jnp.zeros((tau.shape[0], tau.shape[0]), tau.dtype)
    i = 2
    for j, factors in enumerate(terms):
        stationary: Kernel = Constant(mask[j] * theta[i])
        other = None
        k = i + 1
        for f in factors:
            cls, specs = BASE_KERNELS[f]
            kernel = cls(*[theta[k + a] for a in range(len(specs))])
            k += len(specs)
            if kernel.stationary:
                stationary = stationary * kernel
            else:
                other = kernel if other is None else other * kernel
        if other is None:
            on_lags = on_lags + stationary.on_lags(lags)
        else:
            gram = gram + stationary.on_lags(lags)[index] * other(tau)
        i = k
    return gram + on_lags[index]


@jax.custom_jvp
def gp_log_marginal_likelihood(
    K: Float[Array, "n n"], noise: Float[Array, ""], z: Float[Array, " n"]
) -> Float[Array, ""]:
    """``log N(z; 0, K + noise I)`` by Cholesky (Rasmussen and Williams 2006,
    Algorithm 2.1, eq. 2.30). O(n^3) time, O(n^2) memory.

    Its derivative is written out (Rasmussen and Williams 2006, eq. 5.9) as a
    JVP, ``d log p = a^T dK a / 2 - tr((K + noise I)^{-1} dK) / 2 + dnoise (a^T a
    - tr (K + noise I)^{-1}) / 2 - a^T dz`` with ``a = (K + noise I)^{-1} z``:
    one Cholesky solve against the identity, several times cheaper on CPU than
    differentiating through the factorisation. Reverse mode transposes it (the
    gradient ``d/dK = (a a^T - (K + noise I)^{-1}) / 2``) and forward-over-reverse
    Hessians differentiate it again.
    """
    return _lml_forward(K, noise, z)[0]


def _lml_forward(K, noise, z):
    n = z.shape[0]
    L = jnp.linalg.cholesky(K + noise * jnp.eye(n, dtype=K.dtype))
    half = jax.scipy.linalg.solve_triangular(L, z, lower=True)
    value = (-0.5 * jnp.dot(half, half) - jnp.sum(jnp.log(jnp.diagonal(L)))
             - 0.5 * n * jnp.log(2.0 * jnp.pi))
    return value, L


@gp_log_marginal_likelihood.defjvp
def _lml_jvp(primals, tangents):
    K, noise, z = primals
    dK, dnoise, dz = tangents
    value, L = _lml_forward(K, noise, z)
    n = z.shape[0]
    alpha = jax.scipy.linalg.cho_solve((L, True), z)
    inverse = jax.scipy.linalg.cho_solve((L, True), jnp.eye(n, dtype=L.dtype))
    tangent = (0.5 * alpha @ (dK @ alpha) - 0.5 * jnp.sum(inverse * dK)
               + 0.5 * dnoise * (alpha @ alpha - jnp.trace(inverse)) - alpha @ dz)
    return value, tangent


def log_joint(
    u: Float[Array, " p"], mask: Float[Array, " num_terms"],
    tau: Float[Array, " n"], z: Float[Array, " n"], loc: Float[Array, " p"],
    scale: Float[Array, " p"], *, terms: tuple[tuple[str, ...], ...],
    positive: tuple[bool, ...], floor: float,
) -> Float[Array, ""]:
    """``log p(z | u, S) + log p(u)`` (module docstring); ``floor`` is added to
    the noise variance (:func:`noise_floor`). O(n^3)."""
    theta = natural_params(u, positive)
    kernel, noise = structure_kernel(terms, theta, mask)
    lml = gp_log_marginal_likelihood(kernel(tau), noise + floor, z)
    r = (u - loc) / scale
    log_prior = jnp.sum(-0.5 * r * r - jnp.log(scale) - 0.5 * jnp.log(2.0 * jnp.pi))
    return lml + log_prior


def laplace_log_evidence(
    log_joint_at_mode: Float[Array, ""], hessian: Float[Array, "p p"]
) -> Float[Array, ""]:
    """``log p(z, u*) + (d/2) log 2 pi - log|H| / 2`` with ``H`` the negative
    Hessian of the log joint at the mode (MacKay 2003, eq. 28.8); ``-inf`` where
    ``H`` is not positive definite (not a maximum). O(d^3)."""
    d = hessian.shape[0]
    L = jnp.linalg.cholesky(0.5 * (hessian + hessian.T))
    logdet = 2.0 * jnp.sum(jnp.log(jnp.diagonal(L)))
    out = log_joint_at_mode + 0.5 * d * jnp.log(2.0 * jnp.pi) - 0.5 * logdet
    return jnp.where(jnp.isfinite(out), out, -jnp.inf)


def importance_log_evidence(
    key: jax.Array, log_joint_fn, mode: Float[Array, " p"],
    hessian: Float[Array, "p p"], num_draws: int,
) -> tuple[Float[Array, ""], Float[Array, " num_draws"]]:
    """``log p(z | S)`` by importance sampling from the Laplace Gaussian
    ``N(u*, H^{-1})``: ``log mean_m p(z, u_m) / q(u_m)``, consistent as
    ``num_draws`` grows (Geweke 1989). O(num_draws n^3).

    Args:
        key: a ``jax.random`` key.
        log_joint_fn: ``u -> log p(z, u | S)``.
        mode: ``(p,)`` the Laplace mode.
        hessian: ``(p, p)`` negative Hessian of the log joint at the mode.
        num_draws: number of importance draws.

    Returns:
        ``(log_evidence, log_weights)``, the latter ``(num_draws,)`` for
        diagnostics (their effective sample size, Pareto k).
    """
    d = mode.shape[0]
    L = jnp.linalg.cholesky(0.5 * (hessian + hessian.T))  # H = L L^T
    eps = jax.random.normal(key, (num_draws, d), mode.dtype)
    # u = mode + L^{-T} eps has covariance H^{-1}.
    u = mode[None, :] + jax.scipy.linalg.solve_triangular(L.T, eps.T, lower=False).T
    log_q = (-0.5 * jnp.sum(eps * eps, axis=1) + jnp.sum(jnp.log(jnp.diagonal(L)))
             - 0.5 * d * jnp.log(2.0 * jnp.pi))
    log_w = jax.vmap(log_joint_fn)(u) - log_q
    log_w = jnp.where(jnp.isfinite(log_w), log_w, -jnp.inf)
    return logsumexp(log_w) - jnp.log(num_draws), log_w
