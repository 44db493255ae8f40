"""Fit and predict with the generative inverse model.

The model is :mod:`bayeskde.models.inverse_gp`.

* :func:`fit_inverse_gp`: NUTS (4 chains by default) on the amplitude and noise,
  the kernel rate and degree summed out exactly on their grid; InferenceData
  with named dims, the posterior of every (rate, degree) pair, the MAP
  parameters, a convergence report (R-hat, bulk and tail ESS, divergences) and
  a posterior predictive replicate of the inputs per draw.
* :func:`inverse_gp_predictive`: the predictive distribution p(y* | x*, D) on an
  output grid (outputs of dimension <= 2) or on the training outputs used as
  importance proposals, model-averaged over draws or at the MAP parameters,
  with its top-k modes and their masses (:func:`bayeskde.learn.top_k_modes`).
* :class:`InverseGPRegressor`: the scikit-learn facade.
"""

from __future__ import annotations

import time
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from sklearn.base import BaseEstimator, RegressorMixin
from sklearn.exceptions import NotFittedError

from .. import infer
from .._modes import top_k_modes
from .._validation import as_float_array, check_integer
from ..models.inverse_gp import (
    InverseGPData,
    InverseGPPrior,
    inverse_gp_log_density,
    inverse_gp_log_probs,
    inverse_gp_model,
    inverse_gp_point,
    inverse_gp_replicate,
    pair_log_joint,
    prepare_inverse_gp_data,
)
from ..tgp import tgp_minimize
from .quadrature import quadrature_posterior

__all__ = [
    "InverseGPFit",
    "fit_inverse_gp",
    "InverseGPPredictive",
    "inverse_gp_predictive",
    "InverseGPRegressor",
]

_CONTINUOUS = ("amplitude", "noise")


class InverseGPFit(NamedTuple):
    """Result of :func:`fit_inverse_gp`.

    Attributes:
        idata: InferenceData: posterior (``pair_log_joint`` on dims ``gamma``,
            ``degree``), sample_stats, posterior_predictive ``x`` (replicated
            inputs on dims ``sample``, ``input``), observed_data ``x``.
        pair_posterior: ``(n_gamma, D)`` posterior probability of every pair.
        map_params: the highest-density draw's ``amplitude``, ``noise`` and its
            most probable pair (``gamma``, ``degree``, ``pair_index``).
        report: :class:`bayeskde.infer.ConvergenceReport` (ESS threshold 400).
        runtime_s: preparation plus sampling wall time.
        data, prior: what the model saw.
    """

    idata: object
    pair_posterior: np.ndarray
    map_params: dict
    report: object
    runtime_s: float
    data: InverseGPData
    prior: InverseGPPrior


def fit_inverse_gp(
    key: jax.Array, X, Y, prior: InverseGPPrior | None = None, *,
    method: str = "nuts", num_warmup: int = 500, num_samples: int = 500,
    num_chains: int = 4, progress_bar: bool = True,
    posterior_predictive: bool = True, n_replicates: int = 100,
) -> InverseGPFit:
    """Posterior of the forward GP (F) of :mod:`bayeskde.models.inverse_gp`.

    Args:
        key: PRNG key.
        X: ``(m, d_x)`` inputs of the inverse problem (the forward GP's targets).
        Y: ``(m, d_y)`` outputs (the forward GP's inputs); 1-D allowed.
        prior: :class:`InverseGPPrior` (default: its defaults).
        method: ``"nuts"`` (``num_chains`` chains of ``num_warmup`` +
            ``num_samples``; ``report`` is a
            :class:`bayeskde.infer.ConvergenceReport`) or ``"quadrature"``
            (:func:`bayeskde.learn.quadrature.quadrature_posterior`:
            ``num_chains`` x ``num_samples`` independent draws of the same
            posterior, ``report`` a
            :class:`~bayeskde.learn.quadrature.QuadratureReport`). Use the
            quadrature when pairs of different amplitudes share the mass
            (NUTS's chains then stay in one mode each: R-hat above 1.01).
        posterior_predictive: draw ``n_replicates`` replicates of X (evenly
            thinned draws) for the posterior predictive check.

    Raises:
        ValueError: bad data or sampler settings, before any sampling.

    Cost: O(n_gamma D m^3) once, then O(n_gamma D m d_x) per gradient (NUTS)
    or per grid point (quadrature, about 5,000 points).
    """
    if method not in ("nuts", "quadrature"):
        raise ValueError(f"method must be 'nuts' or 'quadrature', got {method!r}")
    t0 = time.perf_counter()
    prior = InverseGPPrior() if prior is None else prior
    data = prepare_inverse_gp_data(Y, X, prior)
    if method == "nuts":
        mcmc = infer.run_nuts(
            key, inverse_gp_model, data, prior, num_warmup=num_warmup,
            num_samples=num_samples, num_chains=num_chains,
            progress_bar=progress_bar)
        samples = {k: np.asarray(v) for k, v in
                   mcmc.get_samples(group_by_chain=True).items()}
        pe = np.asarray(mcmc.get_extra_fields(group_by_chain=True)[
            "potential_energy"])
        c, s = np.unravel_index(np.argmin(pe), pe.shape)
        lj = np.asarray(samples["pair_log_joint"], np.float64)  # (C, S, G, D)
        map_params = {k: float(samples[k][c, s]) for k in _CONTINUOUS}
        map_pair = np.unravel_index(np.argmax(lj[c, s]), lj.shape[-2:])
    else:
        check_integer(num_samples, "num_samples", minimum=1)
        check_integer(num_chains, "num_chains", minimum=1)
        q = quadrature_posterior(key, data, prior,
                                 n_draws=num_chains * num_samples)
        mcmc, samples = None, _quadrature_samples(q, data, num_chains, num_samples)
        lj = samples["pair_log_joint"]
        map_pair = np.unravel_index(q.map_pair, data.n_rest.shape)
        mu, mv = q.mode[map_pair]
        map_params = {"amplitude": float(np.exp(mu)), "noise": float(np.exp(mv))}
    runtime = time.perf_counter() - t0
    cond = np.exp(lj - lj.max(axis=(-2, -1), keepdims=True))
    cond /= cond.sum(axis=(-2, -1), keepdims=True)
    g, d = (int(i) for i in map_pair)
    map_params.update(gamma=float(data.gammas[g]), degree=d + 1, pair_index=(g, d))
    coords = {"gamma": np.asarray(data.gammas),
              "degree": np.arange(1, prior.max_degree + 1),
              "sample": np.arange(data.X.shape[0]),
              "input": np.arange(data.X.shape[1])}
    dims = {"pair_log_joint": ["gamma", "degree"], "x": ["sample", "input"]}
    pp = None
    if posterior_predictive:
        n_rep = check_integer(n_replicates, "n_replicates", minimum=1)
        size = lj.shape[0] * lj.shape[1]
        flat = np.linspace(0, size - 1, n_rep).round().astype(int)
        amp = jnp.asarray(samples["amplitude"].reshape(-1)[flat], data.X.dtype)
        noi = jnp.asarray(samples["noise"].reshape(-1)[flat], data.X.dtype)
        plj = jnp.asarray(samples["pair_log_joint"].reshape(
            size, *lj.shape[-2:])[flat], data.X.dtype)
        keys = jax.random.split(jax.random.fold_in(key, 1), n_rep)
        x_rep, _ = jax.lax.map(
            lambda a: inverse_gp_replicate(a[0], data, a[1], a[2], a[3]),
            (keys, amp, noi, plj))
        pp = {"x": np.asarray(x_rep)[None]}
    idata = infer.to_inference_data(
        samples if mcmc is None else mcmc, coords=coords, dims=dims,
        posterior_predictive=pp,
        observed_data={"x": np.asarray(data.X + data.x_mean[None, :])},
    )
    if method == "nuts":
        report = infer.convergence_report(
            idata, var_names=["log_amplitude", "log_noise"], ess_min=400.0)
        pair_posterior = cond.mean(axis=(0, 1))
    else:
        report, pair_posterior = q.report, q.pair_posterior
    return InverseGPFit(idata, pair_posterior, map_params, report, runtime, data,
                        prior)


def _quadrature_samples(q, data, num_chains, num_samples):
    """Quadrature draws laid out as NUTS's (chain, draw) samples."""
    dt = data.X.dtype
    lj = jax.lax.map(lambda a: pair_log_joint(data, jnp.exp(a[0]), jnp.exp(a[1])),
                     (jnp.asarray(q.log_amplitude, dt), jnp.asarray(q.log_noise, dt)),
                     batch_size=256)
    shape = (num_chains, num_samples)
    u, v = q.log_amplitude.reshape(shape), q.log_noise.reshape(shape)
    return {"log_amplitude": u, "log_noise": v, "amplitude": np.exp(u),
            "noise": np.exp(v), "pair_log_joint": np.asarray(lj, np.float64)
            .reshape(*shape, *data.n_rest.shape)}


class InverseGPPredictive(NamedTuple):
    """Result of :func:`inverse_gp_predictive`.

    Attributes:
        support: ``(n_c, d_y)`` candidate outputs (grid cell centres or the
            training outputs).
        log_probs: ``(n_test, n_c)`` normalised log probabilities.
        modes: ``(n_test, k, d_y)`` the top-k modes by mass.
        mode_masses: ``(n_test, k)`` their posterior masses.
        cell: the grid cell width per output dimension (``None`` for
            importance-sampling candidates).
    """

    support: np.ndarray
    log_probs: np.ndarray
    modes: np.ndarray
    mode_masses: np.ndarray
    cell: np.ndarray | None


def _grid(Y, n_grid, margin):
    lo, hi = Y.min(axis=0), Y.max(axis=0)
    pad = margin * (hi - lo)
    lo, hi = lo - pad, hi + pad
    d = Y.shape[1]
    per = int(round(n_grid ** (1.0 / d)))
    cell = (hi - lo) / per
    axes = [lo[j] + (np.arange(per) + 0.5) * cell[j] for j in range(d)]
    pts = np.stack(np.meshgrid(*axes, indexing="ij"), -1).reshape(-1, d)
    return pts, cell


def inverse_gp_predictive(
    fit: InverseGPFit, X_test, *, mode: str = "average", n_draws: int = 100,
    n_grid: int = 200, margin: float = 0.0, k: int = 3,
    output_prior: str = "uniform", mode_radius: float | None = None,
    noisy_inputs: bool = True, refine: bool | None = None,
) -> InverseGPPredictive:
    """p(y* | x*, D) of (B) for every test input.

    Args:
        fit: :func:`fit_inverse_gp` result.
        X_test: ``(n_test, d_x)`` test inputs.
        mode: ``"average"`` (Bayesian model average over ``n_draws`` evenly
            thinned draws, pairs Rao-Blackwellised) or ``"map"`` (the MAP
            draw and pair only).
        n_grid: grid points over the training outputs' box widened by
            ``margin`` (outputs of dimension <= 2); above, the candidates are
            the training outputs (importance sampling from their empirical
            distribution).
        k: number of modes returned.
        noisy_inputs: whether the test inputs carry the training noise (see
            :func:`bayeskde.models.inverse_gp.inverse_gp_log_probs`).
        output_prior: p(y) on the grid: ``"uniform"`` on the box, or ``"kde"``
            (a Gaussian KDE of the training outputs, Scott's bandwidth).
        mode_radius: merge radius of :func:`top_k_modes` for candidates that
            are not a 1-D grid (default: 0.1 of the outputs' mean range).
        refine: move each mode to the local maximum of (B) over continuous y
            (BFGS, :func:`bayeskde.tgp.tgp_minimize`, from the mode), with the
            MAP draw's pair, amplitude and noise and the Gaussian KDE of the
            training outputs (Scott's bandwidth) as p(y); the masses stay.
            Default: when the candidates are the training outputs (outputs of
            dimension > 2), whose spacing limits the modes' precision.

    Cost: see :func:`bayeskde.models.inverse_gp.inverse_gp_log_probs`.
    """
    if mode not in ("average", "map"):
        raise ValueError(f"mode must be 'average' or 'map', got {mode!r}")
    if output_prior not in ("uniform", "kde"):
        raise ValueError(f"output_prior must be 'uniform' or 'kde', got "
                         f"{output_prior!r}")
    X_test = as_float_array(X_test, "X_test")
    X_test = X_test[:, None] if X_test.ndim == 1 else X_test
    Y = np.asarray(fit.data.Y, float)
    post = fit.idata.posterior
    amp = np.asarray(post["amplitude"]).reshape(-1)
    noi = np.asarray(post["noise"]).reshape(-1)
    lj = np.asarray(post["pair_log_joint"]).reshape(len(amp), -1)
    if mode == "map":
        g, d = fit.map_params["pair_index"]
        D = lj.shape[1] // len(np.asarray(fit.data.gammas))
        one = np.full((1, lj.shape[1]), -np.inf)
        one[0, g * D + d] = 0.0
        amp, noi, lj = (np.array([fit.map_params["amplitude"]]),
                        np.array([fit.map_params["noise"]]), one)
    else:
        n_draws = check_integer(n_draws, "n_draws", minimum=1)
        rows = np.linspace(0, len(amp) - 1, min(n_draws, len(amp))).round()
        rows = rows.astype(int)
        amp, noi, lj = amp[rows], noi[rows], lj[rows]
    if Y.shape[1] <= 2:
        cand, cell = _grid(Y, n_grid, margin)
        log_prior = np.full(len(cand), np.log(np.prod(cell)))
        if output_prior == "kde":
            h = Y.std(axis=0) * len(Y) ** (-1.0 / (Y.shape[1] + 4))
            z = (cand[:, None, :] - Y[None]) / h
            log_prior = log_prior + np.logaddexp.reduce(
                -0.5 * np.sum(z * z, axis=-1), axis=1)
    else:
        cand, cell, log_prior = Y, None, np.zeros(len(Y))
    log_probs = np.asarray(inverse_gp_log_probs(
        fit.data, amp, noi, lj, cand, X_test, log_prior,
        noisy_inputs=noisy_inputs), float)
    if mode_radius is None:
        mode_radius = 0.1 * float(np.mean(Y.max(axis=0) - Y.min(axis=0)))
    modes, masses = top_k_modes(cand, np.exp(log_probs), k, radius=mode_radius)
    if cell is None if refine is None else refine:
        modes = _refine_modes(fit, X_test, modes, noisy_inputs)
    return InverseGPPredictive(cand, log_probs, modes, masses, cell)


@jax.jit
def _refine(point, y0, x, test_noise):
    tol = jnp.sqrt(jnp.finfo(y0.dtype).eps)

    def energy(y, x):
        return -inverse_gp_log_density(y, x, point, test_noise)

    return jax.vmap(lambda y, x: tgp_minimize(energy, y, x, 200, tol).y)(y0, x)


def _refine_modes(fit, X_test, modes, noisy_inputs):
    """Modes moved to the local maxima of (B) (``refine`` above)."""
    data = fit.data
    Y = np.asarray(data.Y, float)
    h = Y.std(axis=0) * len(Y) ** (-1.0 / (Y.shape[1] + 4))
    point = inverse_gp_point(data, fit.map_params["pair_index"],
                             fit.map_params["amplitude"], fit.map_params["noise"], h)
    n, k, d = modes.shape
    dt = data.X.dtype
    out = _refine(point, jnp.asarray(modes.reshape(-1, d), dt),
                  jnp.asarray(np.repeat(X_test, k, axis=0), dt),
                  jnp.asarray(float(noisy_inputs), dt))
    return np.asarray(out, float).reshape(n, k, d)


class InverseGPRegressor(RegressorMixin, BaseEstimator):
    """scikit-learn facade of the generative inverse model.

    ``fit(X, Y)`` runs :func:`fit_inverse_gp`; ``predict(X)`` returns the mode
    of highest posterior mass per test point, ``predict_modes(X, k)`` the top-k
    modes and their masses, ``predict_distribution(X)`` the full
    :class:`InverseGPPredictive`.
    """

    def __init__(self, prior=None, *, key=None, num_warmup=500, num_samples=500,
                 num_chains=4, mode="average", n_draws=100, n_grid=200,
                 progress_bar=False):
        self.prior = prior
        self.key = key
        self.num_warmup = num_warmup
        self.num_samples = num_samples
        self.num_chains = num_chains
        self.mode = mode
        self.n_draws = n_draws
        self.n_grid = n_grid
        self.progress_bar = progress_bar

    def fit(self, X, Y):
        key = jax.random.key(0) if self.key is None else self.key
        self.fit_ = fit_inverse_gp(
            key, X, Y, self.prior, num_warmup=self.num_warmup,
            num_samples=self.num_samples, num_chains=self.num_chains,
            progress_bar=self.progress_bar)
        self.n_outputs_ = self.fit_.data.Y.shape[1]
        return self

    def predict_distribution(self, X, k: int = 3) -> InverseGPPredictive:
        if not hasattr(self, "fit_"):
            raise NotFittedError("InverseGPRegressor is not fitted yet; call fit")
        return inverse_gp_predictive(self.fit_, X, mode=self.mode,
                                     n_draws=self.n_draws, n_grid=self.n_grid, k=k)

    def predict_modes(self, X, k: int = 2):
        """``(modes (n, k, d_y), masses (n, k))``, highest mass first; the
        modes are sought among 3 or more (so that the first is the same for
        every k)."""
        pred = self.predict_distribution(X, max(k, 3))
        return pred.modes[:, :k], pred.mode_masses[:, :k]

    def predict(self, X):
        modes, _ = self.predict_modes(X, 3)
        out = modes[:, 0, :]
        return out[:, 0] if self.n_outputs_ == 1 else out
