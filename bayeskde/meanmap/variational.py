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

Cost: O(n_iter n T N (N + d)) time, O(n T N) memory; the loop is one compiled
``lax.fori_loop``.
"""

from __future__ import annotations

from functools import partial
from typing import NamedTuple

import jax
import jax.numpy as jnp
from jax import lax
from jax.scipy.special import digamma, logsumexp
from jaxtyping import Array, Float, Int

from .._validation import check_integer, check_positive
from ..hmm import GaussianEmission, HMMParams, forward_backward

__all__ = ["VariationalHMM", "fit_variational_hmm", "variational_posteriors"]


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
    log_pi = log_pi - logsumexp(log_pi)
    log_a = log_a - log_r[:, None]
    ell = _expected_log_likelihoods(q, X)
    steps = jnp.arange(X.shape[1])
    mask = steps[None, :] < lengths[:, None]
    has_next = (steps[None, :] < lengths[:, None] - 1)[..., None]
    ell = ell + jnp.where(has_next, log_r[None, None], 0.0)
    post = jax.vmap(lambda e, m: forward_backward(log_pi, log_a, e, mask=m))(ell,
                                                                             mask)
    gamma = jnp.where(mask[..., None], post.gamma, 0.0)
    return gamma, post.xi, post.log_likelihood


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
    alpha0 = check_positive(concentration, "concentration")
    strength = check_positive(prior_strength, "prior_strength")
    X = jnp.asarray(X)
    lengths = jnp.asarray(lengths)
    mask = (jnp.arange(X.shape[1])[None, :] < lengths[:, None])[..., None]
    count = jnp.sum(mask)
    mean = jnp.sum(jnp.where(mask, X, 0.0), axis=(0, 1)) / count
    var = jnp.sum(jnp.where(mask, (X - mean[None, None]) ** 2, 0.0),
                  axis=(0, 1)) / count
    dt = X.dtype
    prior = (jnp.asarray(alpha0, dt), mean, jnp.asarray(strength, dt),
             jnp.ones((), dt), strength * jnp.maximum(var, 1e-6))
    gamma, xi = _posteriors_under(init, X, lengths)
    return _fit(gamma, xi, X, lengths, prior, n_iter)


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
