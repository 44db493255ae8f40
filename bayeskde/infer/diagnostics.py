"""Inference diagnostics: ArviZ InferenceData or DataTree, checks, plots.

Every ArviZ call of the package lives here, for both ArviZ generations: 0.23
(Python 3.11; ``arviz.InferenceData``) and 1.x (Python >= 3.12; arviz-base,
arviz-stats, arviz-plots; ``xarray.DataTree``). Either holds the same named groups,
dims and coords, read the same way (``idata["posterior"]["x"]``, ``"sample_stats"
in idata``, :func:`group_names`). Models are plain NumPyro functions
(:mod:`bayeskde.models`).

The samplers (:func:`~bayeskde.infer.run_nuts`, :func:`~bayeskde.infer.run_svi`)
are in :mod:`.samplers`, which calls no ArviZ.

* :func:`to_inference_data`: posterior, sample_stats, log_likelihood and
  observed_data groups with named dims.
* :func:`check_convergence`: R-hat, bulk and tail ESS and divergences, reported as
  plain-language warnings.
* :func:`loo`: PSIS-LOO of one model with each point's Pareto k;
  :func:`compare_models`: PSIS-LOO comparison (WAIC too under ArviZ 0.23; 1.x
  removed it); :func:`save_inference_data` / :func:`load_inference_data`
  round-trip through netCDF.
* Plots (:func:`plot_trace`, :func:`plot_rank`, :func:`plot_posterior`,
  :func:`plot_ppc`, :func:`plot_pit`): saved as a PNG when given a path, else
  returned as a matplotlib ``Figure`` (shown inline in a notebook).
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from pathlib import Path
from typing import NamedTuple

import jax
import numpy as np
from numpyro.infer import MCMC

from .._validation import check_integer

# ArviZ 0.23 announces its 1.x refactor with a FutureWarning at import, which a
# user of bayeskde can do nothing about: silenced for that import alone.
with warnings.catch_warnings():
    warnings.filterwarnings("ignore", message=r"\s*ArviZ is undergoing",
                            category=FutureWarning)
    import arviz as az

# ArviZ 0.23's matplotlib backend and its LOO comparison call APIs that
# Matplotlib 3.11 and pandas 3.1 deprecate; the notices, issued from ArviZ's
# own modules on every plot, say nothing a user of bayeskde can act on.
# Filtered for those two messages from ArviZ's modules only.
warnings.filterwarnings("ignore", message="Passing a dict or None as alias_mapping",
                        category=DeprecationWarning, module=r"arviz\.")
warnings.filterwarnings("ignore", message="The inplace keyword in DataFrame",
                        module=r"arviz\.")

__all__ = [
    "to_inference_data", "convergence_report",
    "check_convergence", "summary", "compare_models", "save_inference_data",
    "load_inference_data", "plot_trace", "plot_rank", "plot_posterior", "plot_ppc",
    "plot_pit", "group_names", "psis_log_weights", "ARVIZ_MAJOR", "LOOResult",
    "loo",
]

#: Major version of the installed ArviZ: 0 (InferenceData) or 1 (DataTree).
ARVIZ_MAJOR = int(az.__version__.split(".")[0])
_AZ1 = ARVIZ_MAJOR >= 1


def _expose_numpyro_initialization() -> None:
    """arviz-base 1.x reads ``numpyro.infer.initialization``, left unbound when
    arviz was imported before numpyro (it loads numpyro lazily); bind it."""
    import importlib
    import sys

    package = sys.modules["numpyro.infer"]
    if not hasattr(package, "initialization"):
        package.initialization = importlib.import_module("numpyro.infer.initialization")


def to_inference_data(
    mcmc: MCMC | Mapping,
    *,
    coords: Mapping | None = None,
    dims: Mapping | None = None,
    posterior_predictive: Mapping | None = None,
    log_likelihood: Mapping | None = None,
    observed_data: Mapping | None = None,
    constant_data: Mapping | None = None,
    group_dims: Mapping[str, Mapping] | None = None,
):
    """Inference data with posterior, sample_stats, log_likelihood, observed_data.

    ``mcmc`` is a NumPyro ``MCMC`` or a mapping of posterior draws shaped
    ``(chain, draw, ...)`` from another exact method (no sample_stats then).

    ``coords`` and ``dims`` name the axes (e.g. ``{"component": [...]}`` and
    ``{"T": ["component", "sample"]}``) so no ``x_dim_0`` is left;
    ``group_dims`` overrides ``dims`` for one group (e.g. a leave-one-out
    ``log_likelihood`` ``y`` on ``["sample"]`` beside a posterior-predictive ``y``
    on ``["sample", "output"]``).

    ``log_likelihood`` replaces NumPyro's per-site log densities with arrays of
    shape ``(chain, draw, *obs)`` (e.g. exact leave-one-out predictive densities
    for a GP evidence, which does not factorise over points; an empty mapping
    writes no such group);
    ``posterior_predictive`` arrays are ``(chain, draw, ...)`` as well, and
    ``observed_data`` / ``constant_data`` arrays carry no chain or draw axes.

    Returns:
        ``arviz.InferenceData`` under ArviZ 0.23, ``xarray.DataTree`` under 1.x;
        the groups, variables, dims and coords are the same.

    Raises:
        ValueError: when ``group_dims`` names a group this function does not
            write.
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

    draws = mcmc if isinstance(mcmc, Mapping) else None
    if draws is None:
        if _AZ1:
            _expose_numpyro_initialization()
        # ArviZ re-traces the model through NumPyro, whose transforms broadcast by
        # rank promotion; allow it so a user's strict setting does not break it.
        with jax.numpy_rank_promotion("allow"):
            idata = az.from_numpyro(
                mcmc, coords=dict(coords or {}), dims=dims_for("posterior"),
                log_likelihood=log_likelihood is None)
    extra = {}
    for group, values in (("posterior", draws),
                          ("posterior_predictive", posterior_predictive),
                          ("log_likelihood", log_likelihood),
                          ("observed_data", observed_data),
                          ("constant_data", constant_data)):
        if values is None or (group == "log_likelihood" and not values):
            continue  # an empty log_likelihood mapping: no group at all
        arrays = {k: np.asarray(v) for k, v in values.items()}
        kwargs = {"coords": dict(coords or {}), "dims": dims_for(group)}
        if _AZ1:
            extra[group] = az.from_dict({group: arrays}, **kwargs)[group]
        else:
            extra[group] = az.from_dict(**{group: arrays}, **kwargs)[group]
    if draws is not None:
        import xarray as xr  # ArviZ's own dependency

        return xr.DataTree.from_dict(extra) if _AZ1 else az.InferenceData(**extra)
    if _AZ1 or not extra:
        for group, node in extra.items():
            idata[group] = node
        return idata
    return az.InferenceData(
        **{g: idata[g] for g in idata.groups() if g not in extra}, **extra
    )


def group_names(idata) -> tuple[str, ...]:
    """Names of the groups of InferenceData (ArviZ 0.23) or a DataTree (1.x),
    e.g. ``("posterior", "sample_stats", "log_likelihood", "observed_data")``."""
    if hasattr(idata, "children"):
        return tuple(idata.children)
    return tuple(idata.groups())


def summary(idata, var_names=None, *, round_to: int | str = 2):
    """ArviZ summary table as a pandas DataFrame, one row per scalar.

    Columns: mean, sd, a credible interval (ArviZ 0.23: the 94% HDI; 1.x: the
    89% equal-tailed interval), MCSE, bulk and tail ESS and R-hat, rounded to
    ``round_to`` digits (``"none"``: unrounded).
    """
    return az.summary(idata, var_names=var_names, round_to=round_to)


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

    The thresholds follow Vehtari et al. (2021): rank-normalised split R-hat
    below 1.01 and an ESS of at least 100 over all chains for reliable posterior
    summaries. Cost: O(n_draws log n_draws) per scalar (ranks and FFT
    autocorrelation).
    """
    rhat = az.rhat(idata, var_names=var_names)
    ess_b = az.ess(idata, var_names=var_names, method="bulk")
    ess_t = az.ess(idata, var_names=var_names, method="tail")

    def worst(ds, fn):
        # R-hat is NaN with one chain: the worst of all-NaN is NaN, quietly.
        def f(a):
            a = np.asarray(a, float)
            return float(fn(a)) if np.any(np.isfinite(a)) else float("nan")

        return f([f(v) for v in ds.data_vars.values()]) if ds.data_vars else \
            float("nan")

    max_rhat = worst(rhat, np.nanmax)
    min_b = worst(ess_b, np.nanmin)
    min_t = worst(ess_t, np.nanmin)
    div = 0
    if "sample_stats" in idata and "diverging" in idata["sample_stats"]:
        div = int(np.asarray(idata["sample_stats"]["diverging"]).sum())
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
    """PSIS-LOO comparison of model variants (ArviZ ``compare``).

    Each value needs a ``log_likelihood`` group. The table ranks the models by
    expected log pointwise predictive density (ArviZ 0.23 names the column
    ``elpd_loo``, 1.x ``elpd``) with the difference to the best, its standard
    error and stacking weights.

    Args:
        models: ``{name: inference data}``.
        ic: ``"loo"``; ``"waic"`` only under ArviZ 0.23 (1.x removed WAIC, whose
            PSIS-LOO replacement is more reliable, Vehtari et al. 2017).

    Raises:
        ValueError: for another ``ic``, or ``"waic"`` under ArviZ 1.x.
    """
    if ic not in ("loo", "waic"):
        raise ValueError(f"ic must be 'loo' or 'waic', got {ic!r}")
    if _AZ1:
        if ic == "waic":
            raise ValueError(
                f"ic='waic' needs ArviZ 0.23; ArviZ {az.__version__} removed WAIC, "
                "use ic='loo'"
            )
        return az.compare(dict(models), round_to="none")
    return az.compare(dict(models), ic=ic)


class LOOResult(NamedTuple):
    """PSIS-LOO of one model (:func:`loo`).

    Attributes:
        elpd: estimated expected log pointwise predictive density (sum over
            observations).
        se: its standard error.
        p_loo: effective number of parameters.
        pointwise: ``(n_obs,)`` each observation's elpd contribution.
        pareto_k: ``(n_obs,)`` Pareto k of each observation's importance
            weights (above 0.7: that point's estimate is unreliable).
    """

    elpd: float
    se: float
    p_loo: float
    pointwise: np.ndarray
    pareto_k: np.ndarray


def loo(idata, var_name: str | None = None) -> LOOResult:
    """PSIS-LOO (Vehtari, Gelman and Gabry 2017) of one model, the same fields
    under ArviZ 0.23 and 1.x.

    Needs a ``log_likelihood`` group (``var_name`` picks one variable where it
    holds several); its observation dims are flattened. Cost: O(n_draws
    n_obs) plus a Pareto fit per observation.

    Raises:
        ValueError: when the ``log_likelihood`` group is missing.
    """
    _require_groups(idata, "loo", ("log_likelihood",))
    res = az.loo(idata, pointwise=True, var_name=var_name)
    if _AZ1:
        elpd, p, each = res.elpd, res.p, res.elpd_i
    else:
        elpd, p, each = res["elpd_loo"], res["p_loo"], res["loo_i"]
    k = res.pareto_k if _AZ1 else res["pareto_k"]
    return LOOResult(float(elpd), float(res.se if _AZ1 else res["se"]), float(p),
                     np.asarray(each, float).ravel(), np.asarray(k, float).ravel())


def _check_path(path, name: str = "path") -> Path:
    if not isinstance(path, str | Path) or not str(path):
        raise TypeError(
            f"{name} must be a file path (str or pathlib.Path), got "
            f"{type(path).__name__} {path!r}"
        )
    return Path(path)


def save_inference_data(idata, path: str | Path) -> Path:
    """Write inference data to netCDF (every group, dims and coords).

    Raises:
        TypeError: ``idata`` is not inference data (an ``InferenceData`` or a
            ``DataTree``, e.g. from :func:`to_inference_data`), or ``path`` is
            not a path.
    """
    if not callable(getattr(idata, "to_netcdf", None)):
        raise TypeError(
            "idata must be inference data (arviz.InferenceData or "
            "xarray.DataTree, e.g. from bayeskde.infer.to_inference_data), got "
            f"{type(idata).__name__}"
        )
    path = _check_path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    idata.to_netcdf(str(path))
    return path


def load_inference_data(path: str | Path):
    """Read inference data written by :func:`save_inference_data`, into memory
    (the file is closed on return, so it can be overwritten).

    Raises:
        TypeError: ``path`` is not a path.
        FileNotFoundError: no file at ``path``.
        ValueError: the file at ``path`` is not netCDF inference data.
    """
    path = _check_path(path)
    if not path.is_file():
        raise FileNotFoundError(f"path {str(path)!r}: no such file")
    try:
        if _AZ1:
            idata = az.from_netcdf(str(path)).load()
            idata.close()
            return idata
        with az.rc_context({"data.load": "eager"}):
            return az.from_netcdf(str(path))
    except (OSError, ValueError, KeyError) as err:
        raise ValueError(
            f"path {str(path)!r} is not a netCDF file of inference data (as "
            f"save_inference_data writes): {type(err).__name__}: {err}"
        ) from err


def _figure(plot):
    """The matplotlib Figure behind an ArviZ plot's return value (0.23: axes or
    an array of them; 1.x: a PlotCollection)."""
    if hasattr(plot, "viz"):
        return plot.viz["figure"].item()
    return np.asarray(plot).ravel()[0].figure


def _finish(plot, path):
    """Save the plot as a PNG at ``path`` and close it, or return its Figure."""
    fig = _figure(plot)
    fig.tight_layout()
    if path is None:
        return fig
    import matplotlib.pyplot as plt

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def _require_groups(idata, what, groups):
    have = group_names(idata)
    for group in groups:
        if group not in have:
            raise ValueError(f"{what} needs the {group} group; idata has {list(have)}")


def _predictive_tree(idata, var_names):
    """The posterior_predictive and observed_data variables as a new DataTree,
    each flattened to one ``observation`` dim beside chain and draw (ArviZ 1.x
    plots stack chain and draw into a dim named ``sample``, a name bayeskde's
    data may use, and its PIT wants one observation dim), as ArviZ 0.23's
    ``plot_ppc`` flattens them."""
    import xarray as xr

    names = var_names or list(idata["observed_data"].data_vars)
    pp, obs = {}, {}
    for name in names:
        rep = np.asarray(idata["posterior_predictive"][name])
        pp[name] = (("chain", "draw", "observation"), rep.reshape(*rep.shape[:2], -1))
        obs[name] = (("observation",), np.asarray(idata["observed_data"][name]).ravel())
    return xr.DataTree.from_dict({"posterior_predictive": xr.Dataset(pp),
                                  "observed_data": xr.Dataset(obs)})


def plot_trace(idata, path: str | Path | None = None, var_names=None):
    """Trace plots: each variable's density per chain beside its draws.

    Returns:
        The PNG's ``Path`` when ``path`` is given (the figure is closed), else
        the matplotlib ``Figure``.
    """
    if _AZ1:
        plot = az.plot_trace_dist(idata, var_names=var_names, compact=True,
                                  backend="matplotlib")
    else:
        plot = az.plot_trace(idata, var_names=var_names, compact=True)
    return _finish(plot, path)


def plot_rank(idata, path: str | Path | None = None, var_names=None):
    """Rank plots (Vehtari et al. 2021): the draws' ranks over all chains, per
    chain; well-mixed chains give uniform ranks (ArviZ 0.23: rank histograms;
    1.x: rank ECDF differences with simultaneous bands). Returns as
    :func:`plot_trace`."""
    if _AZ1:
        plot = az.plot_rank(idata, var_names=var_names, backend="matplotlib")
    else:
        plot = az.plot_rank(idata, var_names=var_names)
    return _finish(plot, path)


def plot_posterior(idata, path: str | Path | None = None, var_names=None):
    """Marginal posterior densities with a point estimate and a credible
    interval (ArviZ 0.23: 94% HDI; 1.x: 89% ETI). Returns as
    :func:`plot_trace`."""
    if _AZ1:
        plot = az.plot_dist(idata, var_names=var_names, backend="matplotlib")
    else:
        plot = az.plot_posterior(idata, var_names=var_names)
    return _finish(plot, path)


def plot_ppc(idata, path: str | Path | None = None, var_names=None,
             num_pp_samples=100):
    """Posterior predictive check: densities of ``num_pp_samples`` replicated
    data sets (at most all of them) against the observed data's, per variable.

    Needs the ``posterior_predictive`` and ``observed_data`` groups. Returns as
    :func:`plot_trace`.

    Raises:
        ValueError: when a needed group is missing.
    """
    _require_groups(idata, "plot_ppc", ("posterior_predictive", "observed_data"))
    num_pp_samples = check_integer(num_pp_samples, "num_pp_samples", minimum=1)
    # at most every replicate there is (ArviZ 0.23 refuses more)
    first = next(iter(idata["posterior_predictive"].data_vars.values()))
    num_pp_samples = min(num_pp_samples, int(np.prod(first.shape[:2])))
    if _AZ1:
        plot = az.plot_ppc_dist(_predictive_tree(idata, var_names),
                                num_samples=num_pp_samples, backend="matplotlib")
    else:
        plot = az.plot_ppc(idata, var_names=var_names,
                           num_pp_samples=num_pp_samples, random_seed=0)
    return _finish(plot, path)


def plot_pit(idata, path: str | Path | None = None, var_names=None):
    """PIT-ECDF check of calibration (Säilynoja, Bürkner and Vehtari 2022).

    For each observation ``y_i`` the probability integral transform
    ``u_i = P(y_rep_i <= y_i)`` is estimated from the posterior predictive
    draws; a calibrated predictive makes the ``u_i`` uniform, so their ECDF
    minus the uniform CDF stays inside the simultaneous band. Needs the
    ``posterior_predictive`` and ``observed_data`` groups. Returns as
    :func:`plot_trace`. Cost: O(n_draws * n_obs).

    Raises:
        ValueError: when a needed group is missing.
    """
    _require_groups(idata, "plot_pit", ("posterior_predictive", "observed_data"))
    if _AZ1:
        plot = az.plot_ppc_pit(_predictive_tree(idata, var_names),
                               backend="matplotlib")
        return _finish(plot, path)
    import matplotlib.pyplot as plt
    from scipy import stats

    names = var_names or list(idata.observed_data.data_vars)
    fig, axes = plt.subplots(1, len(names), figsize=(4.5 * len(names), 3.5),
                             squeeze=False)
    for ax, name in zip(axes[0], names, strict=True):
        obs = np.asarray(idata.observed_data[name]).ravel()
        rep = np.asarray(idata.posterior_predictive[name])
        rep = rep.reshape(-1, obs.size)
        pit = np.mean(rep <= obs, axis=0)
        # the PIT of a continuous predictive is continuous: the band is
        # calibrated by simulating uniform draws (rvs), at a fixed seed
        az.plot_ecdf(pit, cdf=stats.uniform(0, 1).cdf, difference=True,
                     confidence_bands=True, eval_points=np.linspace(0, 1, 101),
                     rvs=stats.uniform(0, 1).rvs, random_state=0, ax=ax)
        ax.set(title=name, xlabel="PIT", ylabel="ECDF - uniform CDF")
    return _finish(axes, path)


def psis_log_weights(log_weights, reff: float = 1.0):
    """Pareto-smoothed, normalised log importance weights (Vehtari et al. 2024).

    Args:
        log_weights: ``(..., n_samples)`` raw log weights, samples last.
        reff: relative efficiency of the draws (1 for independent ones).

    Returns:
        ``(smoothed log weights, pareto_k)``, shapes ``(..., n_samples)`` and
        ``(...)``; k > 0.7 means the estimate is unreliable.

    Raises:
        ValueError: for fewer than 2 samples, NaN or +inf.
    """
    lw = np.asarray(log_weights, dtype=np.float64)
    if lw.ndim < 1 or lw.shape[-1] < 2 or not np.all(np.isfinite(lw) | (lw == -np.inf)):
        raise ValueError(
            "log_weights must be (..., n_samples) with n_samples >= 2 and no NaN/+inf"
        )
    if _AZ1:
        from arviz_stats.base import array_stats

        # arviz-stats takes log likelihoods (the weights of leave-one-out are
        # their reciprocals), so the log weights enter negated.
        out, k = array_stats.psislw(-lw, r_eff=reff, axis=-1)
    else:
        out, k = az.psislw(lw, reff=reff)
    return np.asarray(out), np.asarray(k)
