"""Bayesian KDE with a continuous RBF width: one Cholesky per density evaluation.

The model and its scale-free likelihood are derived in the docstring of
:mod:`bayeskde.models.kde`: each output KPCA coordinate vector t_j is
N(0, a_j^2 C) with C = K_sigma + m gamma I, its amplitude a_j integrated out under
p(a_j^2) proportional to 1 / a_j^2. This module also holds the input checks the
grid path (:mod:`bayeskde.models.kde_eigen`) shares.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import jax.scipy.linalg as jsl
import numpy as np
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
    """log p(t_j | C) for each column, amplitude integrated out
    (:mod:`bayeskde.models.kde`, the scale-free evidence).

    Args:
        T: ``(m, p)`` coordinates, one column per output component.
        chol: lower Cholesky factor of C.

    Returns:
        ``(p,)`` log evidences. Cost: O(m^2 p).
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


def _check_kde_data(D2, T):
    if D2.ndim != 2 or D2.shape[0] != D2.shape[1] or D2.shape[0] < 3:
        raise ValueError(
            f"D2 must be a square (m, m) distance matrix with m >= 3, got shape "
            f"{tuple(D2.shape)}"
        )
    if _is_concrete(D2) and not np.all(np.isfinite(np.asarray(D2))):
        raise ValueError("D2 contains NaN or inf")
    _check_coords(T, D2.shape[0])


def bayesian_kde_model(
    D2: Float[Array, "m_a m_b"],
    T: Float[Array, "m_c p"],
    prior: BayesianKDEPrior | None = None,
) -> None:
    """NumPyro model: GP evidence of the output KPCA coordinates.

    Priors: log sigma ~ N(log median distance, 1) (set ``prior.log_sigma_loc``),
    log gamma ~ N(log 1e-2, 2) (the paper's ridge grid spans 1e-4..1e1, four prior
    standard deviations). The predictor of each draw is the KDE ridge regression
    of Weston et al. 2002, eq. (6).

    Args:
        D2: squared input (feature-space) distances; the input kernel is
            exp(-D2 / (2 sigma^2)), the RBF kernel or the RBF map on any kernel.
        T: ``(m, p)`` output KPCA coordinates of the training points.
        prior: :class:`BayesianKDEPrior`; ``None`` for the defaults.

    Sites: ``log_sigma``, ``log_ridge`` (latent), ``sigma``, ``ridge``
    (deterministic), ``T`` (observed, plate ``component``).

    Raises:
        ValueError: before sampling, for a non-square ``D2``, fewer than 3 points,
            ``T`` of the wrong shape or with no columns, NaN/inf, or an all-zero
            column of ``T``.

    Cost per density evaluation: one m x m Cholesky, O(m^3 + m^2 p) time, O(m^2)
    memory.
    """
    _check_kde_data(D2, T)
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
