"""Bayesian kernel learning: the models of bayeskde.models run by bayeskde.infer.

* :func:`fit_kernel_hyper` (deprecated: a ``FutureWarning`` names the
  replacement, :func:`bayeskde.learn.fit_inverse_gp` /
  :class:`bayeskde.learn.InverseGPRegressor`): NUTS on the kernel
  hyperparameter model (:mod:`bayeskde.models.kernel_hyper`), returning
  InferenceData with named dims, the posterior probability of every degree
  pair, the MAP kernel and exact leave-one-out log densities for PSIS-LOO. Its
  Twin GP evidence reads the second branch of a one-to-many inverse map
  (S-shape, poses) as noise, so its posterior picks kernels that lose to
  cross-validation on held-out data; the generative inverse model (a GP on the
  forward map, inverted by Bayes' rule) beats it. One model per idea: the
  loser stays, working, for a deprecation period.
* :func:`twin_gp_from_params`, :func:`bma_tgp_predict`: Twin GPs with the MAP
  kernel, and Bayesian model averaging over posterior draws.
* :func:`calibrate_temperature`, :func:`sample_tgp_predictive`: the Twin GP
  predictive distribution (:mod:`bayeskde.models.tgp`) sampled by NUTS and
  reweighted by Pareto-smoothed importance sampling. The temperature rule
  (:func:`calibrate_temperature`) lives in the core, :mod:`bayeskde.tgp.modes`,
  and is re-exported here.
"""

from __future__ import annotations

import time
import warnings
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from .. import infer
from .._validation import as_float_array, check_integer, check_positive
from ..kernels import PolynomialKernelTransform
from ..models.kernel_hyper import (
    KernelHyperData,
    KernelHyperPrior,
    default_kernel_hyper_prior,
    kernel_hyper_model,
    loo_log_likelihood,
    posterior_predictive_draw,
    prepare_kernel_hyper_data,
)
from ..models.tgp import tgp_predictive_model
from ..tgp import TwinGP, batch_energy_many, tgp_energy_batch
from ..tgp.modes import _box, _energies_at
from ..tgp.modes import calibrate_temperature as calibrate_temperature

__all__ = [
    "KernelHyperFit",
    "fit_kernel_hyper",
    "twin_gp_from_params",
    "bma_tgp_predict",
    "bma_kde_predict",
    "calibrate_temperature",
    "TGPPredictive",
    "sample_tgp_predictive",
    "sample_bma_tgp_predictive",
    "tgp_grid_log_probs",
]

_CONTINUOUS = ("gamma_x", "gamma_y", "ridge", "amplitude")

#: The warning of :func:`fit_kernel_hyper` (callers that keep it as a
#: reference filter this message).
FIT_KERNEL_HYPER_DEPRECATION = (
    "fit_kernel_hyper (the Twin GP-evidence kernel hyperparameter model) is "
    "deprecated and will be removed in a future release: its posterior picks "
    "kernels that lose to cross-validation on held-out data. Use "
    "bayeskde.learn.fit_inverse_gp or bayeskde.learn.InverseGPRegressor (the "
    "generative inverse model) instead."
)


class KernelHyperFit(NamedTuple):
    """Result of :func:`fit_kernel_hyper`.

    Attributes:
        idata: InferenceData (posterior with ``degree_log_joint`` on dims
            ``degree_x``, ``degree_y``; sample_stats; log_likelihood ``y`` with the
            exact leave-one-out densities on dim ``sample``; observed_data).
        degree_posterior: ``(D1, D2)`` posterior probability of every pair.
        map_params: the MAP kernel: the highest-density draw's continuous
            parameters and its most probable degree pair.
        report: :class:`bayeskde.infer.ConvergenceReport` of the continuous
            parameters.
        runtime_s: sampling wall time.
        data, prior: what the model saw.
    """

    idata: object
    degree_posterior: np.ndarray
    map_params: dict
    report: object
    runtime_s: float
    data: KernelHyperData
    prior: KernelHyperPrior


def fit_kernel_hyper(
    key: jax.Array,
    X,
    Y,
    prior: KernelHyperPrior | None = None,
    *,
    num_warmup: int = 300,
    num_samples: int = 300,
    num_chains: int = 2,
    progress_bar: bool = True,
    loo: bool = True,
    posterior_predictive: bool = True,
    dense_mass: bool = True,
    max_tree_depth: int = 8,
) -> KernelHyperFit:
    """Posterior over transform degrees and bandwidths by NUTS (degrees summed out).

    Deprecated: this Twin GP-evidence model loses to cross-validation on
    held-out data; use :func:`bayeskde.learn.fit_inverse_gp` (or
    :class:`bayeskde.learn.InverseGPRegressor`), the generative inverse model.
    Every call emits a ``FutureWarning`` saying so; the function keeps working.

    Args:
        key: PRNG key.
        X: ``(m, d_x)`` inputs; Y: ``(m, d_y)`` outputs (1-D allowed).
        prior: :class:`KernelHyperPrior`; ``None`` centres it on the data
            (:func:`default_kernel_hyper_prior`).
        loo: also compute the leave-one-out log densities for LOO comparison
            (O(draws D1 D2 m^3)).
        posterior_predictive: also draw one replicate of the training outputs
            per posterior draw (:func:`bayeskde.models.posterior_predictive_draw`,
            key ``fold_in(key, 1)``), the ``posterior_predictive`` group ``y``
            on dims ``sample``, ``output``, with the drawn degrees as
            ``d1`` / ``d2`` (O(draws D1 D2 m^3)).
        dense_mass: adapt a dense mass matrix (the ridge and the amplitude are
            strongly correlated; with a diagonal one NUTS builds deep trees).
        max_tree_depth: NUTS tree-depth cap (at most 2^depth gradients a draw).

    Returns:
        :class:`KernelHyperFit`.

    Raises:
        ValueError: for bad data (NaN, shapes, fewer than 3 points, constant Y)
            or bad sampler settings, before any sampling.

    Cost: O((warmup + samples) chains L D1 D2 m^3) for L leapfrog steps per draw.
    """
    warnings.warn(FIT_KERNEL_HYPER_DEPRECATION, FutureWarning, stacklevel=2)
    data = prepare_kernel_hyper_data(X, Y)
    prior = default_kernel_hyper_prior(data) if prior is None else prior
    if not isinstance(prior, KernelHyperPrior):
        raise TypeError(f"prior must be a KernelHyperPrior, got {type(prior)}")
    default_kernel_hyper_prior(data, **prior._asdict())  # validates the fields
    t0 = time.perf_counter()
    mcmc = infer.run_nuts(
        key, kernel_hyper_model, data, prior, num_warmup=num_warmup,
        num_samples=num_samples, num_chains=num_chains, progress_bar=progress_bar,
        dense_mass=dense_mass, max_tree_depth=max_tree_depth,
    )
    runtime = time.perf_counter() - t0
    samples = mcmc.get_samples(group_by_chain=True)
    lj = np.asarray(samples["degree_log_joint"], np.float64)
    cond = np.exp(lj - lj.max(axis=(-2, -1), keepdims=True))
    cond /= cond.sum(axis=(-2, -1), keepdims=True)
    degree_posterior = cond.mean(axis=(0, 1))
    pe = np.asarray(mcmc.get_extra_fields(group_by_chain=True)["potential_energy"])
    c, d = np.unravel_index(np.argmin(pe), pe.shape)
    i, j = np.unravel_index(np.argmax(lj[c, d]), lj.shape[-2:])
    map_params = {k: float(samples[k][c, d]) for k in _CONTINUOUS}
    map_params.update(degree_x=int(i) + 1, degree_y=int(j) + 1)
    coords = {
        "degree_x": np.arange(1, prior.max_degree_x + 1),
        "degree_y": np.arange(1, prior.max_degree_y + 1),
        "sample": np.arange(data.Y.shape[0]),
        "output": np.arange(data.Y.shape[1]),
    }
    dims = {"degree_log_joint": ["degree_x", "degree_y"], "y": ["sample", "output"]}
    flat = tuple(jnp.asarray(samples[k]).reshape(-1) for k in _CONTINUOUS)
    log_lik = pp = None
    group_dims = {}
    if loo:
        ll = jax.lax.map(lambda p: loo_log_likelihood(data, *p, prior), flat)
        log_lik = {"y": np.asarray(ll).reshape(*pe.shape, -1)}
        group_dims["log_likelihood"] = {"y": ["sample"]}
    if posterior_predictive:
        keys = jax.random.split(jax.random.fold_in(key, 1), pe.size)
        y_rep, pair = jax.lax.map(
            lambda a: posterior_predictive_draw(a[0], data, *a[1:], prior),
            (keys, *flat),
        )
        pair = np.asarray(pair).reshape(pe.shape)
        pp = {
            "y": np.asarray(y_rep).reshape(*pe.shape, *data.Y.shape),
            "d1": pair // prior.max_degree_y + 1,
            "d2": pair % prior.max_degree_y + 1,
        }
    idata = infer.to_inference_data(
        mcmc, coords=coords, dims=dims, log_likelihood=log_lik,
        posterior_predictive=pp, group_dims=group_dims,
        observed_data={"y": np.asarray(data.Y) + np.asarray(data.y_mean)[None, :]},
    )
    report = infer.convergence_report(
        idata, var_names=[f"log_{k}" for k in _CONTINUOUS]
    )
    return KernelHyperFit(
        idata, degree_posterior, map_params, report, runtime, data, prior
    )


def twin_gp_from_params(
    params: dict, criterion: str = "kl", ridge: float | None = None
) -> TwinGP:
    """An unfitted :class:`TwinGP` with the monomial transform of ``params``
    (``degree_x``, ``degree_y``, ``gamma_x``, ``gamma_y``, ``ridge``).

    ``ridge`` overrides the posterior ridge. The model's ridge is the GP's
    noise-to-signal ratio, and where the inverse map is many-to-one the evidence
    explains the branches as noise, so it can be far larger than the small
    numerical ridge a Twin GP is usually run with (1e-4 on S-shape).
    """
    transform = None
    if params["degree_x"] > 1 or params["degree_y"] > 1:
        transform = PolynomialKernelTransform(
            basis="monomial", degree_x=params["degree_x"],
            degree_y=params["degree_y"],
        )
    return TwinGP(
        criterion, gamma_x=params["gamma_x"], gamma_y=params["gamma_y"],
        ridge=params["ridge"] if ridge is None else check_positive(ridge, "ridge"),
        kernel_transform=transform,
    )


def _posterior_draws(fit: KernelHyperFit, key, n_draws):
    post = fit.idata.posterior
    flat = {k: np.asarray(post[k]).reshape(-1) for k in _CONTINUOUS}
    lj = np.asarray(post["degree_log_joint"]).reshape(len(flat["ridge"]), -1)
    k1, k2 = jax.random.split(key)
    rows = np.asarray(jax.random.choice(k1, len(flat["ridge"]), (n_draws,)))
    pairs = np.asarray(jax.random.categorical(k2, jnp.asarray(lj[rows])))
    D2 = fit.prior.max_degree_y
    return [
        {**{k: float(flat[k][r]) for k in _CONTINUOUS},
         "degree_x": int(p // D2) + 1, "degree_y": int(p % D2) + 1}
        for r, p in zip(rows, pairs, strict=True)
    ]


def bma_tgp_predict(
    key: jax.Array, fit: KernelHyperFit, X, Y, X_test, *, n_draws: int = 4,
    criterion: str = "kl", ridge: float | None = None,
):
    """Bayesian-model-averaged Twin GP predictions: the mean over ``n_draws``
    posterior draws (degree pairs drawn from their conditional posterior) of the
    TGP fitted with each draw's kernel (``ridge`` as in
    :func:`twin_gp_from_params`). Returns ``(mean, per_draw, draws)``.

    Cost: ``n_draws`` TGP fits and predictions.
    """
    n_draws = check_integer(n_draws, "n_draws", minimum=1)
    draws = _posterior_draws(fit, key, n_draws)
    preds = np.stack([
        np.asarray(twin_gp_from_params(p, criterion, ridge).fit(X, Y).predict(X_test))
        for p in draws
    ])
    return preds.mean(axis=0), preds, draws


def _transform_kernel(gamma, coef):
    """k(A, B) = sum_i coef_i exp(-i gamma ||a - b||^2): the monomial transform of
    an RBF (its i-th Hadamard power is the RBF with rate i gamma)."""
    coef = np.asarray(coef, float)
    coef = coef[: np.flatnonzero(coef)[-1] + 1] if np.any(coef) else coef[:1]

    def k(A, B):
        A, B = np.asarray(A, float), np.asarray(B, float)
        A = A[:, None] if A.ndim == 1 else A
        B = B[:, None] if B.ndim == 1 else B
        d2 = ((A[:, None, :] - B[None, :, :]) ** 2).sum(-1)
        return sum(c * np.exp(-(i + 1) * gamma * d2) for i, c in enumerate(coef))

    return k


def bma_kde_predict(
    key: jax.Array, fit: KernelHyperFit, X, Y, X_test, *, n_draws: int = 4,
    ridge: float | None = None,
):
    """Bayesian-model-averaged KDE (Weston et al. 2002, eq. 6 per draw): for each
    posterior draw, KDE with the draw's transformed input and output kernels
    (alpha, beta from :func:`bayeskde.models.kernel_hyper.degree_terms` at the
    draw) and pre-images among the training outputs; the predictions are averaged.

    The GP ridge r of the model is K + r I, the KDE ridge is K + m gamma I, so
    gamma = r / m unless ``ridge`` (the KDE's gamma) is given. Returns
    ``(mean, per_draw, draws)``. Cost: ``n_draws`` KDE fits, O(m^3) each.
    """
    from ..kde.estimators import KernelDependencyEstimator
    from ..models.kernel_hyper import degree_terms

    n_draws = check_integer(n_draws, "n_draws", minimum=1)
    X = as_float_array(X, "X")
    Y = as_float_array(Y, "Y")
    # The KDE takes 2-D inputs only (scikit-learn's rule); scalar inputs, as
    # the S-shape's, are one feature per sample here.
    X = X[:, None] if X.ndim == 1 else X
    X_test = np.asarray(X_test)
    X_test = X_test[:, None] if X_test.ndim == 1 else X_test
    draws = _posterior_draws(fit, key, n_draws)
    preds = []
    for p in draws:
        dt = fit.data.Y.dtype
        terms = degree_terms(fit.data, *(jnp.asarray(p[k], dt) for k in _CONTINUOUS),
                             fit.prior)
        i, j = p["degree_x"] - 1, p["degree_y"] - 1
        kde = KernelDependencyEstimator(
            input_kernel=_transform_kernel(p["gamma_x"], terms.alpha[i, j]),
            output_kernel=_transform_kernel(p["gamma_y"], terms.beta[i, j]),
            ridge=p["ridge"] / len(X) if ridge is None else ridge,
        ).fit(X, Y)
        preds.append(np.asarray(kde.predict(X_test), float))
    preds = np.stack(preds)
    return preds.mean(axis=0), preds, draws


class TGPPredictive(NamedTuple):
    """Result of :func:`sample_tgp_predictive`.

    Attributes:
        samples: ``(n_test, n_resample, d_y)`` reweighted predictive draws.
        mode: ``(n_test, d_y)`` the lowest-energy draw of each test point.
        pareto_k: ``(n_test,)`` PSIS diagnostic of the reweighting.
        chain_means: ``(n_chains, n_test, d_y)`` where each NUTS chain sat.
        mcmc: the NUTS run (site ``y``).
    """

    samples: np.ndarray
    mode: np.ndarray
    pareto_k: np.ndarray
    chain_means: np.ndarray
    mcmc: object


def sample_tgp_predictive(
    key: jax.Array, tgp: TwinGP, X_test, temperature: float, *,
    num_chains: int = 4, num_warmup: int = 300, num_samples: int = 300,
    n_resample: int = 200, margin: float = 0.1, progress_bar: bool = True,
    n_proposals: int | None = None,
) -> TGPPredictive:
    """Sample the TGP predictive (P) for every test point at once by NUTS, then
    reweight per test point by PSIS (module docstring of :mod:`bayeskde.models.tgp`).

    Chains start at evenly spaced quantiles of the box [lower, upper] (every
    output coordinate at the same quantile), so well-separated modes are found.
    The draws returned are resampled from ``n_proposals`` importance proposals
    (a Gaussian mixture, one component per chain, from the chains' means and
    inflated deviations), weighted by exp(-E / temperature) / q: their accuracy
    is that of ``n_proposals`` weighted draws (default 64 per chain), whatever
    ``n_resample`` is. Raise ``n_proposals`` for accurate tails or CDFs.

    Cost: NUTS on an ``n_test * d_y``-dimensional product density, then
    O(n_test n_proposals N) for the reweighting.
    """
    temperature = check_positive(temperature, "temperature")
    num_chains = check_integer(num_chains, "num_chains", minimum=1)
    n_resample = check_integer(n_resample, "n_resample", minimum=1)
    n_prop = (64 * num_chains if n_proposals is None
              else check_integer(n_proposals, "n_proposals", minimum=num_chains))
    X_test = as_float_array(X_test, "X_test")
    X_test = X_test[:, None] if X_test.ndim == 1 else X_test
    batch = tgp_energy_batch(tgp, X_test)
    n_test, d_y = X_test.shape[0], batch.outputs.shape[1]
    lower, upper = _box(batch.outputs, margin)
    dtype = batch.outputs.dtype
    lo, hi = jnp.asarray(lower, dtype), jnp.asarray(upper, dtype)
    q = (np.arange(num_chains) + 0.5) / num_chains
    # Unconstrained init of a Uniform(lo, hi) site is logit((y - lo) / (hi - lo)).
    init = jnp.broadcast_to(
        jnp.asarray(np.log(q / (1 - q)), dtype)[:, None, None],
        (num_chains, n_test, d_y),
    )
    k_nuts, k_prop, k_res = jax.random.split(key, 3)
    mcmc = infer.run_nuts(
        k_nuts, tgp_predictive_model, batch, lo, hi, temperature,
        num_warmup=num_warmup, num_samples=num_samples, num_chains=num_chains,
        progress_bar=progress_bar, init_params={"y": init},
    )
    draws = np.asarray(mcmc.get_samples(group_by_chain=True)["y"])  # (C, S, n, d)
    mu = draws.mean(axis=1)
    width = (np.asarray(hi) - np.asarray(lo)) / 50.0
    sd = np.maximum(draws.std(axis=1) * 1.5, width)  # inflated for heavier tails
    comp = np.asarray(jax.random.randint(k_prop, (n_test, n_prop), 0, num_chains))
    z = np.asarray(jax.random.normal(jax.random.fold_in(k_prop, 1),
                                     (n_test, n_prop, d_y)))
    mu_t, sd_t = np.moveaxis(mu, 0, 1), np.moveaxis(sd, 0, 1)  # (n, C, d)
    props = np.take_along_axis(mu_t, comp[..., None], 1) + z * np.take_along_axis(
        sd_t, comp[..., None], 1)
    inside = np.all((props > np.asarray(lo)) & (props < np.asarray(hi)), axis=-1)
    log_q_comp = -0.5 * ((props[:, :, None, :] - mu_t[:, None]) / sd_t[:, None]) ** 2 \
        - np.log(sd_t[:, None]) - 0.5 * np.log(2 * np.pi)
    log_q = np.logaddexp.reduce(log_q_comp.sum(-1), axis=-1) - np.log(num_chains)
    E = np.asarray(batch_energy_many(
        batch, jnp.asarray(np.moveaxis(props, 1, 0), dtype))).T  # (n, n_prop)
    log_w = np.where(inside, -E / temperature - log_q, -np.inf)
    lw, k = infer.psis_log_weights(log_w)
    idx = np.stack([
        np.asarray(jax.random.choice(jax.random.fold_in(k_res, j), n_prop,
                                     (n_resample,), p=jnp.exp(jnp.asarray(lw[j]))))
        for j in range(n_test)
    ])
    samples = np.take_along_axis(props, idx[..., None], 1)
    flat = draws.reshape(-1, n_test, d_y)
    E_draws = np.asarray(batch_energy_many(batch, jnp.asarray(flat, dtype)))
    mode = flat[np.argmin(E_draws, axis=0), np.arange(n_test)]
    return TGPPredictive(samples, mode, k, mu, mcmc)


def _pooled_mode(samples):
    """Per test point, the pooled draw of highest Gaussian-KDE density (Scott's
    bandwidth per test point and coordinate). ``samples`` ``(n, S, d)``;
    O(n S^2 d) in row blocks of test points."""
    n, S, d = samples.shape
    h = np.maximum(samples.std(axis=1), 1e-12) * S ** (-1.0 / (d + 4))  # (n, d)
    modes = np.empty((n, d))
    for j in range(n):
        z = (samples[j][:, None, :] - samples[j][None, :, :]) / h[j]
        dens = np.exp(-0.5 * np.sum(z * z, axis=-1)).sum(axis=1)
        modes[j] = samples[j, np.argmax(dens)]
    return modes


def sample_bma_tgp_predictive(
    key: jax.Array, fit: KernelHyperFit, X, Y, X_test, temperature: float, *,
    n_draws: int = 4, criterion: str = "kl", ridge: float | None = None,
    **predictive_kwargs,
) -> TGPPredictive:
    """The TGP predictive averaged over the kernel posterior (with
    priors over the TGP hyperparameters):

        p(y* | x*, D) = sum_s (1 / S) p_tau(y* | x*, theta_s),  theta_s ~ p(theta | D),

    where theta_s are ``n_draws`` posterior draws of the kernel model (degree pairs
    drawn from their conditional posterior, as in :func:`bma_tgp_predict`) and
    p_tau(. | theta) is the normalised TGP density (P) of
    :func:`sample_tgp_predictive`. Each component is sampled by its own NUTS run
    and reweighted by PSIS, so every component carries its own normaliser and the
    pooled draws (equal numbers per component) follow the mixture.

    Returns:
        :class:`TGPPredictive` with ``samples`` ``(n_test, n_draws n_resample,
        d_y)`` (component-major along axis 1), ``mode`` the pooled draw of highest
        kernel density estimate per test point, ``pareto_k`` the worst over the
        components, ``chain_means`` of all runs stacked, and ``mcmc`` the tuple of
        runs.

    Cost: ``n_draws`` TGP fits and predictive runs, plus O(n_test (S n_resample)^2)
    for the mode.
    """
    n_draws = check_integer(n_draws, "n_draws", minimum=1)
    k_draw, k_pred = jax.random.split(key)
    comps = [
        sample_tgp_predictive(
            jax.random.fold_in(k_pred, s),
            twin_gp_from_params(p, criterion, ridge).fit(X, Y), X_test, temperature,
            **predictive_kwargs,
        )
        for s, p in enumerate(_posterior_draws(fit, k_draw, n_draws))
    ]
    samples = np.concatenate([c.samples for c in comps], axis=1)
    return TGPPredictive(
        samples, _pooled_mode(samples),
        np.max(np.stack([c.pareto_k for c in comps]), axis=0),
        np.concatenate([c.chain_means for c in comps], axis=0),
        tuple(c.mcmc for c in comps),
    )


def tgp_grid_log_probs(
    tgp: TwinGP, X_test, grid, temperature: float
) -> np.ndarray:
    """The tempered Twin GP predictive (P) of :mod:`bayeskde.models.tgp` on a
    shared output grid: ``(n_test, n_grid)`` log probabilities, each row
    normalised (the grid's cells are taken equal). Cost O(n_test n_grid N).
    """
    temperature = check_positive(temperature, "temperature")
    X_test = as_float_array(X_test, "X_test")
    X_test = X_test[:, None] if X_test.ndim == 1 else X_test
    grid = np.asarray(as_float_array(grid, "grid"))
    grid = grid[:, None] if grid.ndim == 1 else grid
    a = -_energies_at(tgp_energy_batch(tgp, X_test), grid) / temperature
    a = a - a.max(axis=1, keepdims=True)
    return a - np.log(np.exp(a).sum(axis=1, keepdims=True))
