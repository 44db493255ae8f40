"""Inference runners and diagnostics: NUTS, SVI, ArviZ InferenceData.

Every ArviZ call of the package lives in this module, so a move to ArviZ 1.x is one
file. Models are plain NumPyro functions (see :mod:`bayeskde.models`); this module
runs them and hands back InferenceData with named dims and coords.

* :func:`run_nuts`: multi-chain NUTS; chains run in parallel when there are enough
  devices, otherwise vectorised on one device.
* :func:`run_svi`: SVI with an AutoNormal, AutoLowRankMultivariateNormal or
  AutoDelta guide and an optax optimiser.
* :func:`to_inference_data`: posterior, sample_stats, log_likelihood and
  observed_data groups with named dims.
* :func:`check_convergence`: R-hat, bulk and tail ESS and divergences, reported as
  plain-language warnings.
* :func:`compare_models`: LOO or WAIC comparison; :func:`save_inference_data` /
  :func:`load_inference_data` round-trip through netCDF.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import NamedTuple

import arviz as az
import jax
import numpy as np
from numpyro.infer import MCMC, NUTS, SVI, Trace_ELBO, autoguide

from .._validation import check_integer, check_positive

__all__ = [
    "run_nuts",
    "run_svi",
    "SVIFit",
    "to_inference_data",
    "convergence_report",
    "check_convergence",
    "summary",
    "compare_models",
    "save_inference_data",
    "load_inference_data",
    "plot_trace",
    "psis_log_weights",
    "drop_failed_chains",
]


def _chain_method(num_chains: int) -> str:
    return "parallel" if jax.local_device_count() >= num_chains else "vectorized"


def run_nuts(
    key: jax.Array,
    model: Callable,
    *args,
    num_warmup: int = 500,
    num_samples: int = 500,
    num_chains: int = 2,
    target_accept_prob: float = 0.8,
    dense_mass: bool = False,
    max_tree_depth: int = 10,
    progress_bar: bool = True,
    init_params: dict | None = None,
    jit_model_args: bool = False,
    **kwargs,
) -> MCMC:
    """Run NUTS on ``model(*args, **kwargs)`` and return the fitted ``MCMC``.

    The chain method is ``"parallel"`` when JAX sees at least ``num_chains``
    devices and ``"vectorized"`` otherwise (one compiled program for all chains).
    ``init_params`` (unconstrained values, leading axis ``num_chains``) starts the
    chains at chosen points; ``jit_model_args=True`` passes the data as traced
    arguments, so repeated runs on new data of the same shape do not recompile.

    Raises:
        ValueError: for non-positive sample or chain counts, or a target
            acceptance probability outside (0, 1).
    """
    num_warmup = check_integer(num_warmup, "num_warmup", minimum=1)
    num_samples = check_integer(num_samples, "num_samples", minimum=1)
    num_chains = check_integer(num_chains, "num_chains", minimum=1)
    if not 0.0 < float(target_accept_prob) < 1.0:
        raise ValueError(
            f"target_accept_prob must be in (0, 1), got {target_accept_prob}"
        )
    max_tree_depth = check_integer(max_tree_depth, "max_tree_depth", minimum=1)
    kernel = NUTS(model, target_accept_prob=target_accept_prob, dense_mass=dense_mass,
                  max_tree_depth=max_tree_depth)
    mcmc = MCMC(
        kernel,
        num_warmup=num_warmup,
        num_samples=num_samples,
        num_chains=num_chains,
        chain_method=_chain_method(num_chains),
        progress_bar=progress_bar,
        jit_model_args=jit_model_args,
    )
    mcmc.run(
        key, *args,
        extra_fields=("diverging", "potential_energy", "accept_prob", "num_steps"),
        init_params=init_params, **kwargs,
    )
    return mcmc


class SVIFit(NamedTuple):
    """Result of :func:`run_svi`: the guide, its parameters and the loss trace."""

    guide: Callable
    params: dict
    losses: np.ndarray


_GUIDES = {
    "normal": autoguide.AutoNormal,
    "lowrank": autoguide.AutoLowRankMultivariateNormal,
    "delta": autoguide.AutoDelta,
}


def run_svi(
    key: jax.Array,
    model: Callable,
    *args,
    guide: str = "normal",
    num_steps: int = 2000,
    learning_rate: float = 1e-2,
    progress_bar: bool = True,
    **kwargs,
) -> SVIFit:
    """Fit an automatic guide by SVI (Trace_ELBO, optax Adam).

    Args:
        guide: ``"normal"`` (AutoNormal), ``"lowrank"``
            (AutoLowRankMultivariateNormal) or ``"delta"`` (AutoDelta: MAP).

    Raises:
        ValueError: for an unknown guide, non-positive step count or rate.
    """
    import optax

    if guide not in _GUIDES:
        raise ValueError(f"guide must be one of {sorted(_GUIDES)}, got {guide!r}")
    num_steps = check_integer(num_steps, "num_steps", minimum=1)
    learning_rate = check_positive(learning_rate, "learning_rate")
    g = _GUIDES[guide](model)
    svi = SVI(model, g, optax.adam(learning_rate), Trace_ELBO())
    res = svi.run(key, num_steps, *args, progress_bar=progress_bar, **kwargs)
    return SVIFit(g, res.params, np.asarray(res.losses))


def to_inference_data(
    mcmc: MCMC,
    *,
    coords: Mapping | None = None,
    dims: Mapping | None = None,
    posterior_predictive: Mapping | None = None,
    log_likelihood: Mapping | None = None,
    observed_data: Mapping | None = None,
    constant_data: Mapping | None = None,
    group_dims: Mapping[str, Mapping] | None = None,
):
    """InferenceData with posterior, sample_stats, log_likelihood, observed_data.

    ``coords`` and ``dims`` name the axes (e.g. ``{"component": [...]}`` and
    ``{"T": ["component", "sample"]}``) so no ``x_dim_0`` is left;
    ``group_dims`` overrides ``dims`` for one group (e.g. a leave-one-out
    ``log_likelihood`` ``y`` on ``["sample"]`` beside a posterior-predictive ``y``
    on ``["sample", "output"]``).

    ``log_likelihood`` replaces NumPyro's per-site log densities with arrays of
    shape ``(chain, draw, *obs)`` (e.g. exact leave-one-out predictive densities
    for a GP evidence, which does not factorise over points);
    ``posterior_predictive`` arrays are ``(chain, draw, ...)`` as well, and
    ``observed_data`` / ``constant_data`` arrays carry no chain or draw axes.
    """
    group_dims = dict(group_dims or {})
    unknown = set(group_dims) - {
        "posterior", "posterior_predictive", "log_likelihood", "observed_data",
        "constant_data",
    }
    if unknown:
        raise ValueError(f"group_dims names unknown groups {sorted(unknown)}")

    def dims_for(group):
        return {**dict(dims or {}), **dict(group_dims.get(group, {}))}

    # ArviZ re-traces the model through NumPyro, whose transforms broadcast by
    # rank promotion; allow it here so a user's strict setting does not break it.
    with jax.numpy_rank_promotion("allow"):
        idata = az.from_numpyro(
            mcmc,
            coords=dict(coords or {}),
            dims=dims_for("posterior"),
            log_likelihood=log_likelihood is None,
        )
    extra = {}
    for group, values in (("posterior_predictive", posterior_predictive),
                          ("log_likelihood", log_likelihood),
                          ("observed_data", observed_data),
                          ("constant_data", constant_data)):
        if values is not None:
            extra[group] = az.from_dict(
                **{group: {k: np.asarray(v) for k, v in values.items()}},
                coords=dict(coords or {}), dims=dims_for(group),
            )[group]
    if extra:
        idata = az.InferenceData(
            **{g: idata[g] for g in idata.groups() if g not in extra}, **extra
        )
    return idata


def summary(idata, var_names=None):
    """ArviZ summary table (mean, sd, HDI, ESS, R-hat) as a pandas DataFrame."""
    return az.summary(idata, var_names=var_names)


class ConvergenceReport(NamedTuple):
    """Worst-case diagnostics over the named variables, plus the warnings."""

    max_rhat: float
    min_ess_bulk: float
    min_ess_tail: float
    divergences: int
    messages: tuple[str, ...]


def convergence_report(
    idata,
    var_names=None,
    *,
    rhat_max: float = 1.01,
    ess_min: float = 100.0,
) -> ConvergenceReport:
    """Check R-hat, bulk and tail ESS and divergent transitions.

    The thresholds follow Vehtari et al. (2021): R-hat below 1.01 and an ESS of
    at least 100 per chain-set for reliable posterior summaries.
    """
    rhat = az.rhat(idata, var_names=var_names)
    ess_b = az.ess(idata, var_names=var_names, method="bulk")
    ess_t = az.ess(idata, var_names=var_names, method="tail")

    def worst(ds, fn):
        vals = [float(fn(np.asarray(v))) for v in ds.data_vars.values()]
        return fn(np.asarray(vals)) if vals else float("nan")

    max_rhat = worst(rhat, np.nanmax)
    min_b = worst(ess_b, np.nanmin)
    min_t = worst(ess_t, np.nanmin)
    div = 0
    if "sample_stats" in idata and "diverging" in idata.sample_stats:
        div = int(np.asarray(idata.sample_stats["diverging"]).sum())
    msgs = []
    if not max_rhat < rhat_max:
        msgs.append(
            f"the chains disagree (largest R-hat {max_rhat:.3f} >= {rhat_max}): run "
            "longer or reparameterise before trusting the posterior"
        )
    if not min(min_b, min_t) >= ess_min:
        msgs.append(
            f"too few effective draws (bulk ESS {min_b:.0f}, tail ESS {min_t:.0f}, "
            f"want >= {ess_min:.0f}): summaries and intervals are noisy"
        )
    if div:
        msgs.append(
            f"{div} divergent transitions: the sampler hit regions of high "
            "curvature, so the posterior may be biased there"
        )
    return ConvergenceReport(max_rhat, min_b, min_t, div, tuple(msgs))


def check_convergence(idata, var_names=None, **kwargs) -> bool:
    """Warn in plain words about every failed diagnostic; True when all pass."""
    report = convergence_report(idata, var_names, **kwargs)
    for m in report.messages:
        warnings.warn(m, RuntimeWarning, stacklevel=2)
    return not report.messages


def compare_models(models: dict, ic: str = "loo"):
    """LOO (PSIS) or WAIC comparison of model variants (ArviZ ``compare``)."""
    if ic not in ("loo", "waic"):
        raise ValueError(f"ic must be 'loo' or 'waic', got {ic!r}")
    return az.compare(dict(models), ic=ic)


def save_inference_data(idata, path: str | Path) -> Path:
    """Write InferenceData to netCDF (every group, dims and coords)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    idata.to_netcdf(str(path))
    return path


def load_inference_data(path: str | Path):
    """Read InferenceData written by :func:`save_inference_data`."""
    return az.from_netcdf(str(path))


def plot_trace(idata, path: str | Path, var_names=None) -> Path:
    """Save ArviZ trace plots (density and trace per variable) as a PNG."""
    import matplotlib

    matplotlib.use("Agg")
    return _save_axes(az.plot_trace(idata, var_names=var_names, compact=True), path)


def _save_axes(axes, path) -> Path:
    """Save the figure of an ArviZ axes array as a PNG and close it."""
    import matplotlib.pyplot as plt

    fig = np.asarray(axes).ravel()[0].figure
    fig.tight_layout()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def plot_ppc(idata, path: str | Path, var_names=None, num_pp_samples=100) -> Path:
    """Save an ArviZ posterior predictive check (replicates against the observed
    data's density, per variable) as a PNG; needs the ``posterior_predictive``
    and ``observed_data`` groups."""
    import matplotlib

    matplotlib.use("Agg")
    for group in ("posterior_predictive", "observed_data"):
        if group not in idata.groups():
            raise ValueError(f"plot_ppc needs the {group} group; idata has "
                             f"{list(idata.groups())}")
    return _save_axes(az.plot_ppc(idata, var_names=var_names,
                                  num_pp_samples=num_pp_samples, random_seed=0), path)


def psis_log_weights(log_weights, reff: float = 1.0):
    """Pareto-smoothed, normalised log importance weights (Vehtari et al. 2024).

    Args:
        log_weights: ``(..., n_samples)`` raw log weights, samples last.
        reff: relative efficiency of the draws (1 for independent ones).

    Returns:
        ``(smoothed log weights, pareto_k)``, shapes ``(..., n_samples)`` and
        ``(...)``; k > 0.7 means the estimate is unreliable.
    """
    lw = np.asarray(log_weights, dtype=np.float64)
    if lw.ndim < 1 or lw.shape[-1] < 2 or not np.all(np.isfinite(lw) | (lw == -np.inf)):
        raise ValueError(
            "log_weights must be (..., n_samples) with n_samples >= 2 and no NaN/+inf"
        )
    out, k = az.psislw(lw, reff=reff)
    return np.asarray(out), np.asarray(k)


def drop_failed_chains(mcmc, *, min_accept: float = 0.05):
    """Split a run's chains into usable and failed ones, keeping the good draws.

    A chain fails when any of its draws is not finite or its mean acceptance
    probability is below ``min_accept`` (stuck). Returns ``(samples, failed)``:
    the per-chain samples dict (``(chain, draw, ...)`` arrays) of the usable
    chains and the indices of the failed ones, so one bad chain never loses the
    others' draws. Warns naming the failed chains.
    """
    samples = mcmc.get_samples(group_by_chain=True)
    n_chains = next(iter(samples.values())).shape[0]
    bad = np.zeros(n_chains, bool)
    for v in samples.values():
        v = np.asarray(v).reshape(n_chains, -1)
        bad |= ~np.all(np.isfinite(v), axis=1)
    extra = mcmc.get_extra_fields(group_by_chain=True)
    if "accept_prob" in extra:
        acc = np.asarray(extra["accept_prob"]).mean(axis=1)
        bad |= acc < min_accept
    failed = tuple(int(i) for i in np.flatnonzero(bad))
    if failed:
        warnings.warn(
            f"chains {list(failed)} failed (non-finite draws or acceptance below "
            f"{min_accept}); their draws are dropped, the other "
            f"{n_chains - len(failed)} chains are kept",
            RuntimeWarning,
            stacklevel=2,
        )
    keep = ~bad
    return {k: np.asarray(v)[keep] for k, v in samples.items()}, failed
