"""The Bayesian KDE on the paper's width grid: evidence, posterior and BMA.

From the spectra of :mod:`bayeskde.models.kde_eigen` (exact or Nystroem), the
evidence of every grid width costs O(G r p) per ridge (r = m exact, r = M
Nystroem), no factorisation; the width index is summed out exactly and the ridge
is sampled in Carlin and Chib's product space (:func:`bayesian_kde_grid_model`).
The likelihoods (``"scale_free"``, ``"shared"``) are derived in the docstring of
:mod:`bayeskde.models.kde`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import numpyro
import numpyro.distributions as dist
from jax.scipy.special import gammaln, logsumexp
from jaxtyping import Array, Float

from .._typing import ArrayLike
from .._validation import as_float_array
from .kde_eigen import KDESpectra

__all__ = [
    "LIKELIHOODS",
    "BayesianKDEGridPrior",
    "kde_grid_loglik",
    "kde_grid_log_joint",
    "bayesian_kde_grid_model",
    "kde_grid_bma_features",
]

LIKELIHOODS = ("scale_free", "shared")


class BayesianKDEGridPrior(NamedTuple):
    """Priors of :func:`bayesian_kde_grid_model`.

    Attributes:
        log_ridge_loc, log_ridge_scale: log gamma ~ N(loc, scale) (as
            :class:`bayeskde.models.BayesianKDEPrior`).
        grid_logits: ``(G,)`` unnormalised log prior weights of the grid widths;
            ``None`` for the uniform prior (the paper's grid search has no
            preference).
    """

    log_ridge_loc: float = float(np.log(1e-2))
    log_ridge_scale: float = 2.0
    grid_logits: Float[ArrayLike, " grid"] | None = None


def _check_likelihood(likelihood):
    if likelihood not in LIKELIHOODS:
        raise ValueError(f"likelihood must be one of {LIKELIHOODS}, got {likelihood!r}")


def _grid_loglik(spectra, ridge, likelihood):
    """log p(T | g, gamma) for every grid value g: ``(G,)`` (module docstring of
    :mod:`bayeskde.models.kde`; Nystroem terms: :mod:`bayeskde.models.kde_eigen`)."""
    m = spectra.eigenvectors.shape[1]
    r, p = spectra.coords.shape[1], spectra.coords.shape[2]
    # ridge: a scalar, or one per grid value (the product-space model).
    mr = m * jnp.reshape(ridge, (-1, 1))
    d = spectra.eigenvalues + mr  # (G, r): eigenvalues of C_g on the span of U_g
    logdet = jnp.sum(jnp.log(d), axis=1)
    q = jnp.einsum("gip,gi->gp", spectra.coords * spectra.coords, 1.0 / d)
    if spectra.residual is not None:  # the m - r directions outside the span
        logdet = logdet + (m - r) * jnp.log(mr[:, 0])
        q = q + spectra.residual / mr
    log2pi = jnp.log(2.0 * jnp.pi)
    if likelihood == "scale_free":
        const = gammaln(m / 2.0) - (m / 2.0) * log2pi
        return p * const - 0.5 * p * logdet - (m / 2.0) * jnp.sum(
            jnp.log(q / 2.0), axis=1)
    n = m * p
    Q = jnp.sum(q, axis=1)
    return gammaln(n / 2.0) - (n / 2.0) * log2pi - 0.5 * p * logdet - (
        n / 2.0) * jnp.log(Q / 2.0)


def _grid_log_prior(prior, G, dtype):
    if prior.grid_logits is None:
        return jnp.full((G,), -jnp.log(G), dtype)
    logits = jnp.asarray(prior.grid_logits, dtype)
    if logits.shape != (G,):
        raise ValueError(
            f"prior.grid_logits must have shape ({G},), got {tuple(logits.shape)}"
        )
    return logits - logsumexp(logits)


_grid_loglik_jit = jax.jit(_grid_loglik, static_argnames="likelihood")


def kde_grid_loglik(
    spectra: KDESpectra,
    ridge: float | Float[ArrayLike, " grid"],
    likelihood: str = "scale_free",
) -> Float[Array, " grid"]:
    """log p(T | sigma_g, gamma) for every grid width, from the spectra.

    Args:
        spectra: :func:`bayeskde.models.kde_spectra` output (exact or Nystroem).
        ridge: the paper's ridge gamma (> 0), or one ridge per grid width.
        likelihood: ``"scale_free"`` or ``"shared"`` (module docstring).

    Returns:
        ``(G,)`` log evidences. Cost: O(G r p), r = m (exact) or M (Nystroem).
    """
    _check_likelihood(likelihood)
    ridge = jnp.asarray(ridge, spectra.coords.dtype)
    if ridge.ndim > 1 or (ridge.ndim == 1 and ridge.shape[0] != len(spectra.sigmas)):
        raise ValueError(f"ridge must be a scalar or have shape "
                         f"({len(spectra.sigmas)},), got {tuple(ridge.shape)}")
    return _grid_loglik_jit(spectra, ridge, likelihood)


def _log_joint(spectra, log_ridges, prior, likelihood):
    G = spectra.sigmas.shape[0]
    ll = jax.vmap(lambda r: _grid_loglik(spectra, jnp.exp(r), likelihood))(log_ridges)
    lp_r = dist.Normal(prior.log_ridge_loc, prior.log_ridge_scale).log_prob(
        log_ridges)
    return ll.T + _grid_log_prior(prior, G, ll.dtype)[:, None] + lp_r[None, :]


_log_joint_jit = jax.jit(_log_joint, static_argnames="likelihood")


def _pseudo_prior(spectra, prior, likelihood):
    """Normal approximations of p(log gamma | g, T), one per width: ``(G,)`` each.

    Moments of the exact conditional on 121 points spanning +-6 prior standard
    deviations; the scale is floored at the grid step and widened by 1.5 so the
    pseudo-prior covers the conditional's tails. Evaluated eagerly (once per trace)
    when the spectra are concrete, through the compiled log joint (op-by-op it
    took seconds).
    """
    with jax.ensure_compile_time_eval():
        dtype = spectra.coords.dtype
        u = jnp.linspace(-6.0, 6.0, 121, dtype=dtype)
        lr = prior.log_ridge_loc + prior.log_ridge_scale * u
        lj = _log_joint_jit(spectra, lr, prior, likelihood)
        w = jnp.exp(lj - jnp.max(lj, axis=1, keepdims=True))
        w = w / jnp.sum(w, axis=1, keepdims=True)
        mean = w @ lr
        var = jnp.maximum(w @ (lr * lr) - mean * mean, 0.0)
        step = prior.log_ridge_scale * (u[1] - u[0])
        return mean, 1.5 * jnp.maximum(jnp.sqrt(var), step)


def kde_grid_log_joint(
    spectra: KDESpectra,
    log_ridges: Float[ArrayLike, " n_ridges"] | Sequence[float],
    prior: BayesianKDEGridPrior | None = None,
    likelihood: str = "scale_free",
) -> Float[Array, "grid n_ridges"]:
    """Unnormalised log posterior density of (g, log gamma) on a log-ridge grid.

    The exact posterior up to a constant: exponentiate, normalise and sum over a
    fine ``log_ridges`` grid for quadrature, or take the argmax for the MAP.
    Cost: O(G r p) per ridge value, r = m (exact) or M (Nystroem).
    """
    _check_likelihood(likelihood)
    prior = BayesianKDEGridPrior() if prior is None else prior
    lr = as_float_array(log_ridges, "log_ridges", ndim=1)
    return _log_joint_jit(spectra, lr, prior, likelihood)


def bayesian_kde_grid_model(
    spectra: KDESpectra,
    prior: BayesianKDEGridPrior | None = None,
    likelihood: str = "scale_free",
) -> None:
    """NumPyro model: the grid width summed out, one ridge per width sampled.

    The evidence of :func:`bayeskde.models.bayesian_kde_model` (or its
    shared-amplitude variant) with sigma restricted to the paper's grid (Weston et
    al. 2002, section 4) and summed out exactly (module docstring of
    :mod:`bayeskde.models.kde`). The ridge is written in Carlin and Chib's (1995)
    product space: every width g has its own ridge gamma_g; given g only gamma_g
    meets the data and the others follow pseudo-priors psi_h,

        p(g, gamma_1..G | T) propto pi_g p(T | g, gamma_g) p(gamma_g)
                                     prod_{h != g} psi_h(gamma_h),

    so the marginal of (g, gamma_g) is exactly the posterior of (g, gamma) with a
    single ridge, whatever the psi_h. Why: with one shared ridge, different widths
    want different ridges, the ridge marginal is multimodal with deep valleys, and
    NUTS stays in whichever mode it starts in, silently (R-hat cannot see it when
    all chains start alike; seen on digits). The psi_h are normal fits to each
    conditional p(log gamma_h | h, T), computed once from the spectra on a
    121-point ridge grid (Carlin and Chib's recommendation), so the ridge vector
    barely depends on g and the chain moves between widths freely. (With the prior
    as pseudo-prior the chain switched widths too rarely: ESS 62 of 3000 draws.)

    Args:
        spectra: :func:`bayeskde.models.kde_spectra` output (validated there), exact
            or Nystroem (the evidence of the Nystroem Gram K~_g, same model).
        prior: :class:`BayesianKDEGridPrior`; ``None`` for the defaults.
        likelihood: ``"scale_free"`` (each component its own amplitude) or
            ``"shared"`` (one amplitude, the multi-output GP evidence).

    Sites: ``log_ridge_std`` (latent, plate ``sigma`` of size G: log gamma_g
    standardised by its pseudo-prior), ``log_ridge`` and ``ridge``
    (deterministic, ``(G,)``), ``grid_probs`` (deterministic ``(G,)``: p(g | T,
    gamma_1..G), whose mean over draws is the posterior probability of each
    width), ``log_ridge_avg`` (deterministic: sum_g grid_probs_g log gamma_g,
    whose mean over draws is the posterior mean of log gamma), ``evidence``
    (factor).

    Raises:
        ValueError: for an unknown likelihood or grid logits of the wrong length.
        TypeError: for spectra that are not a :class:`KDESpectra`.

    Cost per density and gradient: O(G r p), r = m (exact) or M (Nystroem), no
    factorisation; the pseudo-priors cost O(121 G r p) once per trace.

    References: B. P. Carlin and S. Chib (1995), Bayesian model choice via Markov
    chain Monte Carlo methods, JRSS B 57(3), 473-484.
    """
    _check_likelihood(likelihood)
    if not isinstance(spectra, KDESpectra):
        raise TypeError(
            f"spectra must be a KDESpectra from kde_spectra, got {type(spectra)}"
        )
    prior = BayesianKDEGridPrior() if prior is None else prior
    G = spectra.sigmas.shape[0]
    psi_loc, psi_scale = _pseudo_prior(spectra, prior, likelihood)
    # Standardised around the pseudo-priors: z ~ N(0, 1) is log gamma ~ psi (the
    # Jacobian psi_scale is constant), and NUTS sees unit scales.
    with numpyro.plate("sigma", G):
        z = numpyro.sample("log_ridge_std", dist.Normal(0.0, 1.0))
    log_ridge = numpyro.deterministic("log_ridge", psi_loc + psi_scale * z)
    ridge = numpyro.deterministic("ridge", jnp.exp(log_ridge))
    psi = dist.Normal(psi_loc, psi_scale)
    # Component g of the mixture, divided by the product of all pseudo-priors
    # (which the sample site already contributes).
    joint = (
        _grid_log_prior(prior, G, spectra.coords.dtype)
        + _grid_loglik(spectra, ridge, likelihood)
        + dist.Normal(prior.log_ridge_loc, prior.log_ridge_scale).log_prob(log_ridge)
        - psi.log_prob(log_ridge)
    )
    total = logsumexp(joint)
    probs = numpyro.deterministic("grid_probs", jnp.exp(joint - total))
    numpyro.deterministic("log_ridge_avg", jnp.sum(probs * log_ridge))
    numpyro.factor("evidence", total)


@jax.jit
def _bma_jit(spectra, K_test, T_pred, ridges, weights):
    m = spectra.eigenvectors.shape[1]
    # Averaging over draws commutes with the linear predictor: only the diagonal
    # weights c_g = mean_d w_dg / (s_g + m gamma_d) depend on the draws.
    c = jnp.mean(
        weights[:, :, None]
        / (spectra.eigenvalues[None, :, :] + m * ridges[:, :, None]),
        axis=0,
    )  # (G, r)
    # Exact: (K_test U) c (U^T T_pred). Nystroem: K~_test (I - U U^T) = 0, so the
    # directions outside the span drop out, and (K~_test U) c (U^T T_pred) =
    # (Phi_test V) c ((Phi V)^T T_pred), the two sqrt(s) factors cancelling.
    right = spectra.eigenvectors if spectra.test_map is None else spectra.test_map
    A = jnp.einsum("gnc,gck->gnk", K_test, right)
    B = jnp.einsum("gmk,mq->gkq", spectra.eigenvectors, T_pred)
    return jnp.einsum("gnk,gk,gkq->nq", A, c, B)


def kde_grid_bma_features(
    spectra: KDESpectra,
    K_test: Float[ArrayLike, "grid_a n_test n_cols"],
    T_pred: Float[ArrayLike, "m_b q"],
    ridges: Float[ArrayLike, "*ridge_shape"] | Sequence[float],
    grid_weights: Float[ArrayLike, "n_draws_b grid_b"],
) -> Float[Array, "n_test q"]:
    """Bayesian-model-averaged KDE projections over (grid width, ridge) draws.

    mean_d sum_g w_dg K_test,g (K_g + m gamma_d I)^-1 T_pred (Weston et al. 2002,
    eq. (6), per (g, gamma)). With ``grid_weights`` the per-draw ``grid_probs``
    this is the Rao-Blackwellised BMA; one-hot weights and one ridge give the MAP
    (or any single setting). On Nystroem spectra K_g and K_test,g are the Nystroem
    Grams (the Nystroem kernel ridge predictor, as
    :func:`bayeskde.lowrank.nystroem_krr`).

    Args:
        spectra: :func:`bayeskde.models.kde_spectra` output for the training Grams.
        K_test: test Grams, one per grid width: ``(G, n_test, m)`` test-by-training
            (exact), ``(G, n_test, M)`` test-by-centre (Nystroem).
        T_pred: ``(m, q)`` training coordinates to predict (e.g. all output KPCA
            components, whatever ``spectra.coords`` used).
        ridges: ``(D,)`` ridge draws (> 0), or ``(D, G)`` one per width (the
            ``ridge`` site of :func:`bayesian_kde_grid_model`).
        grid_weights: ``(D, G)`` weights of the grid widths per draw (rows sum
            to one).

    Returns:
        ``(n_test, q)`` averaged projections.

    Raises:
        ValueError: for mismatched shapes, NaN/inf, non-positive ridges or
            negative weights.

    Cost: O(D G r + G r (m + n_cols) (n_test + q)) time with r = m (exact) or M
    (Nystroem): the average over draws collapses to one diagonal per width.
    Memory O(G r (n_test + q)).
    """
    G, m = spectra.eigenvalues.shape[0], spectra.eigenvectors.shape[1]
    cols = m if spectra.test_map is None else spectra.test_map.shape[1]
    K_test = as_float_array(K_test, "K_test", ndim=3)
    if K_test.shape[0] != G or K_test.shape[2] != cols:
        what = "" if spectra.test_map is None else " (Nystroem: test-by-centre)"
        raise ValueError(
            f"K_test{what} must have shape ({G}, n_test, {cols}), got "
            f"{tuple(K_test.shape)}"
        )
    T_pred = as_float_array(T_pred, "T_pred", ndim=2)
    if T_pred.shape[0] != m:
        raise ValueError(f"T_pred must have {m} rows, got {tuple(T_pred.shape)}")
    ridges = as_float_array(ridges, "ridges")
    if ridges.ndim == 1:
        ridges = jnp.broadcast_to(ridges[:, None], (ridges.shape[0], G))
    if ridges.ndim != 2 or ridges.shape[1] != G:
        raise ValueError(f"ridges must have shape (D,) or (D, {G}), got "
                         f"{tuple(ridges.shape)}")
    if not np.all(np.asarray(ridges) > 0):
        raise ValueError("ridges must all be > 0")
    w = as_float_array(grid_weights, "grid_weights", ndim=2)
    if w.shape != (ridges.shape[0], G) or np.any(np.asarray(w) < 0):
        raise ValueError(
            f"grid_weights must be non-negative with shape ({ridges.shape[0]}, {G}), "
            f"got {tuple(w.shape)}"
        )
    return _bma_jit(spectra, K_test, T_pred, ridges, w)
