"""Bayesian KDE: a posterior over the input RBF width and the ridge.

KDE (Weston et al. 2002, section 3) regresses each output principal coordinate
t_j = (v_j . Phi(y_i))_i on the inputs by kernel ridge regression with
beta = (K + m gamma I)^-1 t_j. That predictor is the posterior mean of a Gaussian
process f ~ GP(0, a^2 k) observed with noise variance a^2 m gamma, so the GP
evidence of the coordinates is a likelihood for the kernel width sigma and the
ridge gamma, where the paper used 5-fold cross-validation.

The likelihood. With C = K_sigma + m gamma I, each coordinate vector is
t_j | a_j, C ~ N(0, a_j^2 C). The coordinates have very different scales (their
squared norms are the KPCA eigenvalues), so each gets its own amplitude, integrated
out under the scale-invariant prior p(a_j^2) proportional to 1 / a_j^2:

    p(t_j | C) = int N(t_j; 0, a^2 C) a^-2 da^2
               = Gamma(m/2) (2 pi)^(-m/2) |C|^(-1/2) (q_j / 2)^(-m/2),
    q_j = t_j^T C^-1 t_j,

using int_0^inf x^(-m/2-1) exp(-q/(2x)) dx = Gamma(m/2) (q/2)^(-m/2). This is a
real (if improperly-normalised-prior) marginal likelihood: it is invariant to the
scale of each coordinate, and its constant does not depend on (sigma, gamma), so
posteriors and model comparisons under the same prior are exact.
``tests/models/test_kde.py`` checks it against numerical integration over a^2.

Priors: log sigma ~ N(log median distance, 1), log gamma ~ N(log 1e-2, 2) (the
paper's ridge grid spans 1e-4..1e1, four prior standard deviations).

Cost per density evaluation: one m x m Cholesky, O(m^3 + m^2 p).
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import jax.scipy.linalg as jsl
import numpyro
import numpyro.distributions as dist
from jax.scipy.special import gammaln
from jaxtyping import Array, Float

__all__ = [
    "BayesianKDEPrior",
    "scale_free_gp_logpdf",
    "bayesian_kde_model",
    "kde_bma_features",
]


class BayesianKDEPrior(NamedTuple):
    """Log-normal priors on the RBF width sigma and the paper's ridge gamma."""

    log_sigma_loc: float = 0.0
    log_sigma_scale: float = 1.0
    log_ridge_loc: float = float(jnp.log(1e-2))
    log_ridge_scale: float = 2.0


def _cov_chol(D2, sigma, ridge):
    m = D2.shape[0]
    K = jnp.exp(-D2 / (2.0 * sigma * sigma))
    C = K + (m * ridge) * jnp.eye(m, dtype=D2.dtype)
    return jnp.linalg.cholesky(C)


def scale_free_gp_logpdf(
    T: Float[Array, "m p"], chol: Float[Array, "m m"]
) -> Float[Array, " p"]:
    """log p(t_j | C) for each column, amplitude integrated out (module docstring).

    Args:
        T: ``(m, p)`` coordinates, one column per output component.
        chol: lower Cholesky factor of C.
    """
    m = T.shape[0]
    z = jsl.solve_triangular(chol, T, lower=True)
    q = jnp.sum(z * z, axis=0)
    half_logdet = jnp.sum(jnp.log(jnp.diagonal(chol)))
    return (
        gammaln(m / 2.0)
        - (m / 2.0) * jnp.log(2.0 * jnp.pi)
        - half_logdet
        - (m / 2.0) * jnp.log(q / 2.0)
    )


class _ScaleFreeGP(dist.Distribution):
    """Observation site for :func:`scale_free_gp_logpdf` (log density only)."""

    support = dist.constraints.real_vector

    def __init__(self, chol, m):
        self.chol = chol
        super().__init__(batch_shape=(), event_shape=(m,))

    def sample(self, key, sample_shape=()):
        raise NotImplementedError(
            "the amplitude prior is improper, so the coordinates cannot be sampled"
        )

    def log_prob(self, value):
        # value: (..., m) with components leading; the logpdf takes (m, p).
        flat = value.reshape(-1, value.shape[-1]).T
        return scale_free_gp_logpdf(flat, self.chol).reshape(value.shape[:-1])


def bayesian_kde_model(
    D2: Float[Array, "m m"],
    T: Float[Array, "m p"],
    prior: BayesianKDEPrior | None = None,
) -> None:
    """NumPyro model: GP evidence of the output KPCA coordinates.

    Args:
        D2: squared input (feature-space) distances; the input kernel is
            exp(-D2 / (2 sigma^2)), the RBF kernel or the RBF map on any kernel.
        T: ``(m, p)`` output KPCA coordinates of the training points.
        prior: :class:`BayesianKDEPrior`; ``None`` for the defaults.

    Sites: ``log_sigma``, ``log_ridge`` (latent), ``sigma``, ``ridge``
    (deterministic), ``T`` (observed, plate ``component``).
    """
    prior = BayesianKDEPrior() if prior is None else prior
    log_sigma = numpyro.sample(
        "log_sigma", dist.Normal(prior.log_sigma_loc, prior.log_sigma_scale)
    )
    log_ridge = numpyro.sample(
        "log_ridge", dist.Normal(prior.log_ridge_loc, prior.log_ridge_scale)
    )
    sigma = numpyro.deterministic("sigma", jnp.exp(log_sigma))
    ridge = numpyro.deterministic("ridge", jnp.exp(log_ridge))
    chol = _cov_chol(D2, sigma, ridge)
    with numpyro.plate("component", T.shape[1]):
        numpyro.sample("T", _ScaleFreeGP(chol, T.shape[0]), obs=T.T)


@jax.jit
def kde_bma_features(
    D2_train: Float[Array, "m m"],
    D2_test: Float[Array, "n_test m"],
    T: Float[Array, "m p"],
    sigmas: Float[Array, " n_draws"],
    ridges: Float[Array, " n_draws"],
) -> Float[Array, "n_test p"]:
    """Bayesian-model-averaged KDE projections: mean over draws of
    K_test (K + m gamma I)^-1 T (Weston et al. 2002, eq. (6), per draw).

    Draws are processed by ``lax.map`` so memory stays O(m^2).
    Cost: O(n_draws (m^3 + n_test m p)).
    """

    def one(draw):
        sigma, ridge = draw
        chol = _cov_chol(D2_train, sigma, ridge)
        beta = jsl.cho_solve((chol, True), T)
        return jnp.exp(-D2_test / (2.0 * sigma * sigma)) @ beta

    return jnp.mean(jax.lax.map(one, (sigmas, ridges)), axis=0)
