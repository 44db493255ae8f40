"""Fit the generative inverse model: the posterior of its forward GP.

:func:`fit_inverse_gp` prepares the spectra (:mod:`.rank`: exact, or low rank
with the rank chosen from the data), runs one of three posterior algorithms
over (log a^2, log s^2) with the (rate, degree) pairs summed out exactly
(NUTS, per-pair adaptive quadrature, SVI: a dispatch table), and returns an
immutable :class:`InverseGPFit`: InferenceData with named dims, a
``log_likelihood`` group for PSIS-LOO, posterior predictive replicates
(:func:`~.replicates.replicates`), the pairs' posterior, the MAP parameters,
a convergence report and the forward noise chosen by leave-one-out
(:mod:`.noise`).
"""

from __future__ import annotations

import time
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from .. import infer
from .._validation import check_integer, check_key
from .data import InverseGPData, InverseGPPrior, Memo, check_prior
from .evidence import inverse_gp_model, observed_inputs, pair_log_joint
from .mixture import inverse_gp_mixture
from .noise import (
    NOISE,
    ForwardNoise,
    choose_forward_noise,
    gaussian_loo_log_density,
    model_average_loo,
    training_basis,
)
from .quadrature import QuadratureReport, quadrature_posterior
from .rank import RankReport, prepare_for_fit
from .replicates import replicates
from .svi import SVIReport, svi_posterior
from .transform import (
    InputTransform,
    all_positive,
    apply_transform,
    check_transform,
    transform_score,
)

__all__ = [
    "METHODS",
    "LOG_LIKELIHOOD_MAX_WORK",
    "InverseGPFit",
    "fit_inverse_gp",
    "pointwise_loo",
]

#: The posterior algorithms of :func:`fit_inverse_gp`.
METHODS = ("nuts", "quadrature", "svi")
#: Work (draws x m x kept eigenpairs x d_x multiply-adds) up to which the fit
#: writes the ``log_likelihood`` group by default: about a second on 2 cores
#: (the S-shape at m = 500, 2,000 draws: 0.5e9); the 10-D sbibm task at 1e3
#: simulations would take 2e10 and is left out unless asked for.
LOG_LIKELIHOOD_MAX_WORK = 4e9
_CONTINUOUS = ("amplitude", "noise")


class InverseGPFit(NamedTuple):
    """Result of :func:`fit_inverse_gp`.

    Attributes:
        idata: InferenceData: posterior (``pair_log_joint`` on dims ``gamma``,
            ``degree``), sample_stats (NUTS), log_likelihood ``x`` (pointwise
            exact leave-one-out densities, dims ``point``: PSIS-LOO reads it),
            posterior_predictive ``x`` (replicated inputs on dims ``point``,
            ``input``), observed_data ``x``.
        pair_posterior: ``(n_gamma, D)`` posterior probability of every pair.
        map_params: the highest-density draw's ``amplitude``, ``noise`` and its
            most probable pair (``gamma``, ``degree``, ``pair_index``).
        report: :class:`bayeskde.infer.ConvergenceReport` (NUTS, ESS
            threshold 400), :class:`~.quadrature.QuadratureReport` or
            :class:`~.svi.SVIReport`.
        runtime_s: preparation plus sampling wall time.
        data, prior: what the model saw.
        memo: a :class:`~.data.Memo` of the pairs' eigendecompositions (and the
            estimator's last predictive): pure functions of the fit, computed
            once.
        approx: ``"exact"`` or ``"lowrank"`` (what ``approx="auto"`` chose).
        rank: the low-rank evidence's :class:`~.rank.RankReport` (``None``
            exact).
        noise: the :class:`~.noise.ForwardNoise` the predictive uses.
        method: the posterior algorithm that ran.
        transform: the :class:`~.transform.InputTransform` applied to x
            (``data`` holds t(x)).
    """

    idata: object
    pair_posterior: np.ndarray
    map_params: dict
    report: infer.ConvergenceReport | QuadratureReport | SVIReport
    runtime_s: float
    data: InverseGPData
    prior: InverseGPPrior
    memo: Memo
    approx: str = "exact"
    rank: RankReport | None = None
    noise: ForwardNoise | None = None
    method: str = "quadrature"
    transform: InputTransform = InputTransform()


def _by_nuts(key, data, prior, s):
    mcmc = infer.run_nuts(
        key, inverse_gp_model, data, prior, observed_inputs(data),
        num_warmup=s["num_warmup"], num_samples=s["num_samples"],
        num_chains=s["num_chains"], progress_bar=s["progress_bar"])
    samples = {k: np.asarray(v) for k, v in
               mcmc.get_samples(group_by_chain=True).items()}
    pe = np.asarray(mcmc.get_extra_fields(group_by_chain=True)["potential_energy"])
    c, i = np.unravel_index(np.argmin(pe), pe.shape)
    lj = np.asarray(samples["pair_log_joint"], np.float64)  # (C, S, G, D)
    map_params = {k: float(samples[k][c, i]) for k in _CONTINUOUS}
    map_pair = np.unravel_index(np.argmax(lj[c, i]), lj.shape[-2:])
    return mcmc, samples, map_params, map_pair, None


def _by_svi(key, data, prior, s):
    q = svi_posterior(key, data, prior, num_samples=s["num_chains"] * s["num_samples"],
                      num_steps=s["num_steps"], progress_bar=s["progress_bar"])
    samples = _as_chains(q, data, s["num_chains"], s["num_samples"])
    dt = data.X.dtype
    at = np.asarray(pair_log_joint(data, jnp.exp(jnp.asarray(q.median[0], dt)),
                                   jnp.exp(jnp.asarray(q.median[1], dt))))
    map_pair = np.unravel_index(np.argmax(at), at.shape)
    map_params = {"amplitude": float(np.exp(q.median[0])),
                  "noise": float(np.exp(q.median[1]))}
    return None, samples, map_params, map_pair, q


def _by_quadrature(key, data, prior, s):
    q = quadrature_posterior(key, data, prior,
                             num_samples=s["num_chains"] * s["num_samples"])
    samples = _as_chains(q, data, s["num_chains"], s["num_samples"])
    map_pair = np.unravel_index(q.map_pair, data.n_rest.shape)
    mu, mv = q.mode[map_pair]
    map_params = {"amplitude": float(np.exp(mu)), "noise": float(np.exp(mv))}
    return None, samples, map_params, map_pair, q


_ALGORITHMS = {"nuts": _by_nuts, "svi": _by_svi, "quadrature": _by_quadrature}


def _as_chains(q, data, num_chains, num_samples):
    """Independent draws laid out as NUTS's (chain, draw) samples, with each
    draw's pair log joint."""
    dt = data.X.dtype
    lj = jax.lax.map(lambda a: pair_log_joint(data, jnp.exp(a[0]), jnp.exp(a[1])),
                     (jnp.asarray(q.log_amplitude, dt), jnp.asarray(q.log_noise, dt)),
                     batch_size=256)
    shape = (num_chains, num_samples)
    u, v = q.log_amplitude.reshape(shape), q.log_noise.reshape(shape)
    return {"log_amplitude": u, "log_noise": v, "amplitude": np.exp(u),
            "noise": np.exp(v), "pair_log_joint": np.asarray(lj, np.float64)
            .reshape(*shape, *data.n_rest.shape)}


def pointwise_loo(key: jax.Array, data: InverseGPData, memo: Memo,
                  amplitude: np.ndarray, noise: np.ndarray,
                  pair_log_joint: np.ndarray) -> np.ndarray:
    """``(S, m)`` log p(x_i | x_-i, Y, theta_s) for each draw s: the exact
    leave-one-out density of each training input under the Gaussian noise
    (:func:`~.noise.gaussian_loo_log_density`), at the draw's (a^2, s^2) and a
    pair drawn from its conditional posterior. For a GP, whose likelihood
    does not factorise over points, these conditional densities are the
    pointwise log likelihoods that PSIS-LOO reweights (Buerkner, Gabry and
    Vehtari 2021, Computational Statistics 36, eq. (10)).
    Cost O(P m^3) for the P distinct pairs drawn (memoised) plus O(S m r d_x).
    """
    amplitude = np.asarray(amplitude, np.float64).reshape(-1)
    noise = np.asarray(noise, np.float64).reshape(-1)
    S = len(amplitude)
    lj = np.asarray(pair_log_joint, np.float64).reshape(S, -1)
    pairs = np.asarray(jax.random.categorical(key, jnp.asarray(lj), axis=-1))
    dt = data.X.dtype
    X = jnp.asarray(data.X, dt)
    out = np.empty((S, data.X.shape[0]))
    for p in np.unique(pairs):
        idx = np.flatnonzero(pairs == p)
        one = np.full((1, lj.shape[1]), -np.inf)
        one[0, p] = 0.0
        mix = inverse_gp_mixture(data, amplitude[idx[:1]], noise[idx[:1]], one,
                                 memo=memo)
        U, lam = training_basis(mix, data, 0), mix.lam[0]
        ll = jax.vmap(gaussian_loo_log_density, in_axes=(None, None, None, 0, 0))(
            U, lam, X, jnp.asarray(amplitude[idx], dt), jnp.asarray(noise[idx], dt))
        out[idx] = np.asarray(ll, float)
    return out


def fit_inverse_gp(
    key: jax.Array, X, Y, prior: InverseGPPrior | None = None, *,
    method: str = "nuts", approx="auto", rank=None,
    num_warmup: int = 500, num_samples: int = 500,
    num_chains: int = 4, progress_bar: bool = True,
    posterior_predictive: bool = True, num_replicates: int = 100,
    num_steps: int = 2000, noise: str = "auto", transform: str = "auto",
    log_likelihood: bool | None = None,
) -> InverseGPFit:
    """Posterior of the forward GP (F) of :mod:`bayeskde.inverse`.

    Args:
        key: PRNG key.
        X: ``(m, d_x)`` inputs of the inverse problem (the forward GP's targets).
        Y: ``(m, d_y)`` outputs (the forward GP's inputs); 1-D allowed.
        prior: :class:`~.data.InverseGPPrior` (default: its defaults).
        method: ``"nuts"`` (``num_chains`` chains of ``num_warmup`` +
            ``num_samples``; ``report`` is a
            :class:`bayeskde.infer.ConvergenceReport`), ``"quadrature"``
            (:func:`~.quadrature.quadrature_posterior`: ``num_chains`` x
            ``num_samples`` independent draws of the same posterior; use it
            when pairs of different amplitudes share the mass, where NUTS's
            chains stay in one mode each: R-hat above 1.01) or ``"svi"``
            (:func:`~.svi.svi_posterior`: a Gaussian guide over (log a^2,
            log s^2) fitted by ``num_steps`` of Adam, then ``num_chains`` x
            ``num_samples`` draws of it; one mode of (a^2, s^2) only).
        approx: ``"auto"`` (exact spectra up to :data:`~.data.EXACT_MAX_M`
            training points, 500 for one output and 2000 above, the measured
            crossovers; low rank above or when ``rank`` is given), ``"exact"``
            or ``"lowrank"`` (:mod:`~bayeskde.inverse.lowrank`: HSGP features for
            one output,
            Nystroem above; no m x m matrix). ``fit.approx`` says which ran.
        rank: the low-rank map's rank (HSGP functions or Nystroem centres,
            >= 1); ``None``: chosen from the data
            (:func:`~.rank.prepare_for_fit`), reported as ``fit.rank``.
        posterior_predictive: draw ``num_replicates`` replicates of X (evenly
            thinned draws; f from its posterior) for the posterior predictive
            check (of the Gaussian noise model's x,
            whichever ``noise`` is chosen).
        noise: the forward noise the predictive uses
            (:func:`~.noise.choose_forward_noise`): ``"auto"`` (the one of
            higher leave-one-out log density of x given y on the training
            data), ``"gaussian"`` or ``"residual"``; ``fit.noise`` says which
            and why.
        transform: what the model describes in place of x
            (:mod:`~bayeskde.inverse.transform`): ``"auto"`` (where every
            training x is positive, x and log x are both fitted and the one of
            higher mean leave-one-out density of x, Jacobian included, is
            kept; x elsewhere), ``"none"`` or ``"log"``. ``fit.transform``
            says which and why; every predictive function applies it to the
            test inputs.
        log_likelihood: write the ``log_likelihood`` group
            (:func:`pointwise_loo`; ``None``: where its work, draws x m x
            kept eigenpairs x d_x, is below :data:`LOG_LIKELIHOOD_MAX_WORK`).

    Raises:
        ValueError: bad data or sampler settings, before any sampling.
        TypeError: a key that is not a JAX PRNG key; X or Y None.

    Cost: exact O(n_gamma D m^3) once; low rank O(m R^2) (HSGP) or
    O(n_gamma m (D M)^2) (Nystroem) per rank tried, no m x m matrix; then
    O(n_gamma D r) per gradient (NUTS) or per grid point (quadrature, about
    5,000 points), r <= m the kept spectrum a pair; the log_likelihood group
    O(S m r d_x) for S draws.
    """
    key = check_key(key)
    if method not in METHODS:
        raise ValueError(f"method must be one of {METHODS}, got {method!r}")
    if not isinstance(noise, str) or noise not in NOISE:
        raise ValueError(f"noise must be one of {NOISE}, got {noise!r}")
    requested = check_transform(transform)
    if transform == "auto":
        if not all_positive(X):
            transform = "none"
        else:
            kw = dict(prior=prior, method=method, approx=approx, rank=rank,
                      num_warmup=num_warmup, num_samples=num_samples,
                      num_chains=num_chains, progress_bar=progress_bar,
                      posterior_predictive=posterior_predictive,
                      num_replicates=num_replicates, num_steps=num_steps,
                      noise=noise, log_likelihood=log_likelihood)
            fits = {t: fit_inverse_gp(key, X, Y, transform=t, **kw)
                    for t in ("none", "log")}
            scores = {t: f.transform.scores[t] for t, f in fits.items()}
            best = max(scores, key=scores.get)
            return fits[best]._replace(
                transform=InputTransform(best, requested, scores),
                runtime_s=sum(f.runtime_s for f in fits.values()))
    X_in, X = X, apply_transform(transform, X)
    settings = {
        "num_warmup": check_integer(num_warmup, "num_warmup", minimum=1),
        "num_samples": check_integer(num_samples, "num_samples", minimum=1),
        "num_chains": check_integer(num_chains, "num_chains", minimum=1),
        "num_steps": check_integer(num_steps, "num_steps", minimum=1),
        "progress_bar": bool(progress_bar),
    }
    n_rep = (check_integer(num_replicates, "num_replicates", minimum=1)
             if posterior_predictive else 0)
    t0 = time.perf_counter()
    prior = InverseGPPrior() if prior is None else prior
    check_prior(prior)
    data, rank_report = prepare_for_fit(key, X, Y, prior, approx, rank,
                                        progress_bar)
    mcmc, samples, map_params, map_pair, q = _ALGORITHMS[method](
        key, data, prior, settings)
    runtime = time.perf_counter() - t0
    lj = samples["pair_log_joint"]
    cond = np.exp(lj - lj.max(axis=(-2, -1), keepdims=True))
    cond /= cond.sum(axis=(-2, -1), keepdims=True)
    g, d = (int(i) for i in map_pair)
    map_params.update(gamma=float(data.gammas[g]), degree=d + 1, pair_index=(g, d))
    m = data.X.shape[0]
    coords = {"gamma": np.asarray(data.gammas),
              "degree": np.arange(1, prior.max_degree + 1),
              "point": np.arange(m), "input": np.arange(data.X.shape[1])}
    # "point", not "sample": ArviZ 1.x reserves "sample" for stacked draws
    dims = {"pair_log_joint": ["gamma", "degree"], "x": ["point", "input"]}
    memo = Memo()
    pp = None
    if n_rep:
        size = lj.shape[0] * lj.shape[1]
        flat = np.linspace(0, size - 1, n_rep).round().astype(int)
        x_rep, _ = replicates(
            jax.random.fold_in(key, 1), data,
            samples["amplitude"].reshape(-1)[flat], samples["noise"].reshape(-1)[flat],
            lj.reshape(size, *lj.shape[-2:])[flat], memo)
        pp = {"x": np.asarray(x_rep)[None]}
    ll = None
    r_max = int(m - np.min(np.asarray(data.n_rest)))
    work = lj.shape[0] * lj.shape[1] * m * r_max * data.X.shape[1]
    if log_likelihood or (log_likelihood is None and work <= LOG_LIKELIHOOD_MAX_WORK):
        ll = {"x": pointwise_loo(
            jax.random.fold_in(key, 2), data, memo, samples["amplitude"],
            samples["noise"], lj).reshape(*lj.shape[:2], m)}
    idata = infer.to_inference_data(
        samples if mcmc is None else mcmc, coords=coords, dims=dims,
        posterior_predictive=pp, log_likelihood={} if ll is None else ll,
        observed_data={"x": np.asarray(observed_inputs(data))},
        group_dims={"log_likelihood": {"x": ["point"]}})
    if method == "nuts":
        report = infer.convergence_report(
            idata, var_names=["log_amplitude", "log_noise"], ess_min=400.0)
        pair_posterior = cond.mean(axis=(0, 1))
    elif method == "svi":
        report, pair_posterior = q.report, cond.mean(axis=(0, 1))
    else:
        report, pair_posterior = q.report, q.pair_posterior
    fit = InverseGPFit(idata, pair_posterior, map_params, report, runtime, data,
                       prior, memo, "exact" if data.lowrank is None else "lowrank",
                       rank_report, None, method)
    fwd = choose_forward_noise(fit, noise)
    if fwd.kind == "gaussian" and fwd.loo_gaussian is None:
        fwd = fwd._replace(loo_gaussian=float(np.mean(model_average_loo(fit))))
    score = transform_score(transform, fwd, X_in)
    fit = fit._replace(noise=fwd, transform=InputTransform(
        transform, requested, {transform: score}))
    return fit._replace(runtime_s=time.perf_counter() - t0)
