"""A variational Bayesian HMM with Gaussian (diagonal) emissions, for mean maps.

The Bayesian HMM of the design (Dirichlet priors on the initial and transition
probabilities, conjugate priors on the emissions, the states marginalised by the
forward algorithm) fitted by variational Bayes (MacKay 1997; Beal 2003, chapter
3): ``q(theta) q(z)`` with

* ``q(pi) = Dir(alpha_0 + E[z_1])``, ``q(A_i) = Dir(alpha_0 + sum_t E[z_t,i
  z_t+1,j])`` (Beal eqs. 3.54-3.55);
* per state and dimension a Normal-Gamma ``q(mu, lambda) = N(mu | m, (beta
  lambda)^-1) Gam(lambda | a, b)`` updated from the expected occupancies
  (Bishop 2006, eqs. 10.60-10.63 with a diagonal precision);
* ``q(z)`` by forward-backward on the sub-normalised parameters ``exp E[log
  theta]`` (Beal eq. 3.68).

The forward-backward of :mod:`bayeskde.hmm` needs rows that sum to one. A row
``i`` of ``exp E[log A]`` sums to ``r_i < 1``; every path pays ``r_{z_t}`` once per
transition out of step ``t``, so dividing the row by ``r_i`` and adding ``log r_i``
to the emission log likelihood of every step that has a successor gives the same
path weights, hence the exact variational ``q(z)``.

The latent mean map of a sequence is then the expectation of its clique
features under ``q(z)``, the parameter uncertainty integrated out (mean field):
the "posterior expectation of the clique features" of Mehta and Gray, eqs.
(20)-(23), under the Bayesian HMM, in the form :mod:`bayeskde.meanmap.latent`
takes (``gamma`` ``(n, T, N)`` zero on padding, summed ``xi`` ``(n, N, N)``).

:func:`variational_elbo` gives the bound ``F(q)`` each fit reaches (Beal eq.
3.22; tested against a Monte Carlo estimate over ``q(theta)`` with every state
path enumerated), and :func:`mode_weights` the posterior weights
``softmax(F_m)`` of fits started from different points, read as the components
of a mixture ``q(theta) = sum_m w_m q_m(theta)``. Separate local optima of an
HMM's bound differ by tens to hundreds of nats on the UCR sets (measured on
ArrowHead, ItalyPowerDemand, GunPoint: the weights are one-hot), so the mixture
keeps the fit of the highest bound. The highest bound need not give the best
kernel; :class:`~bayeskde.meanmap.SequenceKernelClassifier` can stack the modes
by held-out error instead (``mode_weighting="stacking"``,
:func:`~bayeskde.meanmap.stacking_weights`; Yao, Vehtari and Gelman 2022).

Cost: O(n_iter n T N (N + d)) time, O(n T N) memory; the loop is one compiled
``lax.fori_loop``.
"""

from __future__ import annotations

from functools import partial
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax.scipy.special import digamma, gammaln, logsumexp
from jaxtyping import Array, Float, Int

from .._validation import check_integer, check_positive
from ..hmm import GaussianEmission, HMMParams, forward_backward

__all__ = [
    "VariationalHMM",
    "fit_variational_hmm",
    "mode_weights",
    "variational_elbo",
    "variational_posteriors",
]


class VariationalHMM(NamedTuple):
    """The variational posterior ``q(theta)`` of a diagonal-Gaussian HMM.

    Attributes:
        initial: ``(N,)`` Dirichlet concentrations of ``q(pi)``.
        transition: ``(N, N)`` Dirichlet concentrations of the rows of ``q(A)``.
        means, beta: ``(N, d)`` and ``(N,)``: Normal-Gamma location and precision
            scale.
        shape, rate: ``(N, d)`` Gamma shape ``a`` and rate ``b`` of the precisions.
    """

    initial: Float[Array, " n_states"]
    transition: Float[Array, "n_states n_states"]
    means: Float[Array, "n_states d"]
    beta: Float[Array, " n_states"]
    shape: Float[Array, "n_states d"]
    rate: Float[Array, "n_states d"]


def _expected_log_dirichlet(conc):
    return digamma(conc) - digamma(jnp.sum(conc, axis=-1, keepdims=True))


def _expected_log_likelihoods(q, X):
    """``E_q[log N(x_t | mu_i, lambda_i^-1)]``: ``(..., T, N)`` from ``(..., T, d)``."""
    e_log_lam = digamma(q.shape) - jnp.log(q.rate)
    e_lam = q.shape / q.rate
    lead = (None,) * (X.ndim - 1)
    sq = (X[..., None, :] - q.means[lead]) ** 2
    const = jnp.sum(0.5 * (e_log_lam - jnp.log(2 * jnp.pi) - 1.0 / q.beta[:, None]),
                    axis=-1)
    return const[lead] - 0.5 * jnp.sum(e_lam[lead] * sq, axis=-1)


def _e_step(q, X, lengths):
    log_pi = _expected_log_dirichlet(q.initial)
    log_a = _expected_log_dirichlet(q.transition)
    log_r = logsumexp(log_a, axis=1)
    log_s = logsumexp(log_pi)
    log_pi = log_pi - log_s
    log_a = log_a - log_r[:, None]
    ell = _expected_log_likelihoods(q, X)
    steps = jnp.arange(X.shape[1])
    mask = steps[None, :] < lengths[:, None]
    has_next = (steps[None, :] < lengths[:, None] - 1)[..., None]
    ell = ell + jnp.where(has_next, log_r[None, None], 0.0)
    post = jax.vmap(lambda e, m: forward_backward(log_pi, log_a, e, mask=m))(ell,
                                                                             mask)
    gamma = jnp.where(mask[..., None], post.gamma, 0.0)
    # log Z_n = log sum_z exp E_q[log p(x_n, z | theta)]: the normaliser of q(z_n),
    # undoing the two renormalisations above
    return gamma, post.xi, post.log_likelihood + log_s


def _kl_dirichlet(conc, conc0):
    """``KL(Dir(conc) || Dir(conc0))`` over the last axis."""
    c, c0 = jnp.sum(conc, -1), jnp.sum(conc0, -1)
    return (gammaln(c) - jnp.sum(gammaln(conc), -1) - gammaln(c0)
            + jnp.sum(gammaln(conc0), -1)
            + jnp.sum((conc - conc0) * (digamma(conc) - digamma(c)[..., None]), -1))


def _kl_normal_gamma(q, prior):
    """``sum_{i,d} KL(NG(m, beta, a, b) || NG(m_0, beta_0, a_0, b_0))``: the
    Gamma KL plus the expected (over ``lambda``) KL of the two normals of
    precisions ``beta lambda`` and ``beta_0 lambda``."""
    _, m0, beta0, a0, b0 = prior
    m0, b0 = m0[None], b0[None]
    a, b, beta = q.shape, q.rate, q.beta[:, None]
    kl_gamma = ((a - a0) * digamma(a) - gammaln(a) + gammaln(a0)
                + a0 * (jnp.log(b) - jnp.log(b0)) + a * (b0 - b) / b)
    kl_normal = 0.5 * (jnp.log(beta / beta0) + beta0 / beta - 1.0
                       + beta0 * (a / b) * (q.means - m0) ** 2)
    return jnp.sum(kl_gamma + kl_normal)


def _elbo(q, X, lengths, prior):
    """Beal (2003) eq. 3.22 at the optimal ``q(z)`` for ``q(theta)``:
    ``F = sum_n log Z_n - KL(q(theta) || p(theta))``."""
    alpha0 = prior[0]
    _, _, log_z = _e_step(q, X, lengths)
    kl = (_kl_dirichlet(q.initial, jnp.full_like(q.initial, alpha0))
          + jnp.sum(_kl_dirichlet(q.transition, jnp.full_like(q.transition, alpha0)))
          + _kl_normal_gamma(q, prior))
    return jnp.sum(log_z) - kl


def _m_step(gamma, xi, X, prior):
    alpha0, m0, beta0, a0, b0 = prior
    occ = jnp.sum(gamma, axis=(0, 1))
    sx = jnp.einsum("btn,btd->nd", gamma, X)
    sxx = jnp.einsum("btn,btd->nd", gamma, X**2)
    safe = jnp.maximum(occ, 1e-10)[:, None]
    xbar = sx / safe
    scatter = jnp.maximum(sxx - safe * xbar**2, 0.0)
    beta = beta0 + occ
    means = (beta0 * m0[None] + sx) / beta[:, None]
    shape = a0 + 0.5 * occ[:, None]
    rate = (b0[None] + 0.5 * scatter
            + 0.5 * (beta0 * occ / beta)[:, None] * (xbar - m0[None]) ** 2)
    initial = alpha0 + jnp.sum(gamma[:, 0], axis=0)
    transition = alpha0 + jnp.sum(xi, axis=0)
    return VariationalHMM(initial, transition, means, beta, shape, rate)


@partial(jax.jit, static_argnames="n_iter")
def _fit(gamma0, xi0, X, lengths, prior, n_iter):
    q = _m_step(gamma0, xi0, X, prior)

    def _body(_, q):
        gamma, xi, _ = _e_step(q, X, lengths)
        return _m_step(gamma, xi, X, prior)

    return lax.fori_loop(0, n_iter, _body, q)


def fit_variational_hmm(
    init: HMMParams,
    X: Float[Array, "n t_max d"],
    lengths: Int[Array, " n"],
    *,
    n_iter: int = 30,
    concentration: float = 1.0,
    prior_strength: float = 1e-2,
) -> VariationalHMM:
    """Variational Bayes for a diagonal-Gaussian HMM, started from ``init``.

    The first ``q(z)`` is the exact posterior under ``init`` (e.g. an EM fit);
    then ``n_iter`` rounds of the updates of the module notes. Priors:
    ``Dir(concentration)`` on every row, and per state ``mu ~ N(m_0, (beta_0
    lambda)^-1)``, ``lambda ~ Gam(a_0, b_0)`` with ``m_0`` the data mean,
    ``beta_0 = prior_strength``, ``a_0 = 1`` and ``b_0 = prior_strength`` times the
    data variance (weak, scaled to the data).

    Args:
        init: starting ``HMMParams`` with a ``GaussianEmission``.
        X: ``(n, T_max, d)`` padded sequences; lengths ``(n,)``.
        n_iter: variational rounds.
        concentration: Dirichlet concentration ``alpha_0 > 0``.
        prior_strength: ``beta_0`` and the scale of ``b_0``, > 0.

    Returns:
        :class:`VariationalHMM`.
    """
    if not isinstance(init.emission, GaussianEmission):
        raise TypeError("init must have a GaussianEmission")
    n_iter = check_integer(n_iter, "n_iter", minimum=0)
    X = jnp.asarray(X)
    lengths = jnp.asarray(lengths)
    prior = _prior(X, lengths, concentration, prior_strength)
    gamma, xi = _posteriors_under(init, X, lengths)
    return _fit(gamma, xi, X, lengths, prior, n_iter)


def _prior(X, lengths, concentration, prior_strength):
    """``(alpha_0, m_0, beta_0, a_0, b_0)`` of :func:`fit_variational_hmm`."""
    alpha0 = check_positive(concentration, "concentration")
    strength = check_positive(prior_strength, "prior_strength")
    mask = (jnp.arange(X.shape[1])[None, :] < lengths[:, None])[..., None]
    count = jnp.sum(mask)
    mean = jnp.sum(jnp.where(mask, X, 0.0), axis=(0, 1)) / count
    var = jnp.sum(jnp.where(mask, (X - mean[None, None]) ** 2, 0.0),
                  axis=(0, 1)) / count
    dt = X.dtype
    return (jnp.asarray(alpha0, dt), mean, jnp.asarray(strength, dt),
            jnp.ones((), dt), strength * jnp.maximum(var, 1e-6))


def variational_elbo(
    q: VariationalHMM,
    X: Float[Array, "n t_max d"],
    lengths: Int[Array, " n"],
    *,
    concentration: float = 1.0,
    prior_strength: float = 1e-2,
) -> Float[Array, ""]:
    """The evidence lower bound of ``q(theta)`` under the priors of
    :func:`fit_variational_hmm` (same ``concentration``, ``prior_strength``).

    ``F(q) = sum_n log Z_n - KL(q(theta) || p(theta))`` (Beal 2003, eq. 3.22 with
    the optimal ``q(z)``), where ``log Z_n = log sum_z exp E_q[log p(x_n, z |
    theta)]`` is the forward algorithm on the sub-normalised parameters and the
    KL is a sum of closed-form Dirichlet and Normal-Gamma terms. ``F <= log
    p(X)``; the gap is ``KL(q(theta) q(z) || p(theta, z | X))``.
    """
    X = jnp.asarray(X)
    lengths = jnp.asarray(lengths)
    return _elbo_jit(q, X, lengths, _prior(X, lengths, concentration, prior_strength))


_elbo_jit = jax.jit(_elbo)


def mode_weights(elbos) -> np.ndarray:
    """Posterior weights of variational fits started from different points.

    Each fit ``m`` is a local optimum ``q_m`` of the ELBO; read as one component
    of the mixture ``q(theta) = sum_m w_m q_m(theta)`` with components that do
    not overlap, the mixture's ELBO is ``sum_m w_m (F_m - log w_m)``, maximised
    by ``w_m = exp(F_m) / sum_k exp(F_k)`` (the mixture-of-modes view of
    Bishop 2006, section 10.1.4 / Jaakkola and Jordan 1998). A mean map then
    averages a kernel over ``q`` as ``sum_m w_m k_m``.

    Args:
        elbos: ``(M,)`` finite ELBOs.

    Returns:
        ``(M,)`` weights summing to one.
    """
    elbos = np.asarray(elbos, np.float64)
    if elbos.ndim != 1 or elbos.size == 0 or not np.all(np.isfinite(elbos)):
        raise ValueError(f"elbos must be a non-empty 1-D array of finite numbers, "
                         f"got {elbos!r}")
    w = np.exp(elbos - elbos.max())
    return w / w.sum()


def _posteriors_under(params, X, lengths):
    from ..hmm import batch_posteriors

    post = batch_posteriors(params, X, lengths)
    return post.gamma, post.xi


@jax.jit
def variational_posteriors(
    q: VariationalHMM, X: Float[Array, "n t_max d"], lengths: Int[Array, " n"]
) -> tuple[Float[Array, "n t_max n_states"], Float[Array, "n n_states n_states"]]:
    """``q(z)`` of each sequence under ``q(theta)``: smoothed marginals ``(n, T,
    N)`` (zero on padding) and summed pairwise marginals ``(n, N, N)``."""
    gamma, xi, _ = _e_step(q, X, lengths)
    return gamma, xi
