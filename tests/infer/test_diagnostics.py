"""bayeskde.infer.diagnostics under the installed ArviZ (0.23 or 1.x).

Oracles: the conjugate normal model's closed-form posterior and exact
leave-one-out predictive densities, numpy moments of the draws, and the tail
index of Pareto-distributed importance weights. The same file runs in the
Python 3.11 / ArviZ 0.23 and Python 3.12 / ArviZ 1.x environments (.ci/run).
"""

import warnings

import arviz as az
import jax
import numpy as np
import numpyro
import numpyro.distributions as dist
import pytest
from scipy import stats
from scipy.special import logsumexp

from bayeskde.infer import (
    ARVIZ_MAJOR,
    check_convergence,
    compare_models,
    convergence_report,
    group_names,
    load_inference_data,
    loo,
    plot_pit,
    plot_posterior,
    plot_ppc,
    plot_rank,
    plot_trace,
    psis_log_weights,
    run_nuts,
    save_inference_data,
    summary,
    to_inference_data,
)

N_OBS, SIGMA, TAU = 20, 1.0, 2.0  # y_i ~ N(mu, SIGMA^2), mu ~ N(0, TAU^2)
NUM_CHAINS, NUM_DRAWS = 4, 1000


def _model(y):
    mu = numpyro.sample("mu", dist.Normal(0.0, TAU))
    with numpyro.plate("obs", y.shape[0]):
        numpyro.sample("y", dist.Normal(mu, SIGMA), obs=y)


def _posterior(y):
    """Closed-form posterior mean and sd of mu given observations y."""
    prec = 1 / TAU**2 + len(y) / SIGMA**2
    return y.sum() / SIGMA**2 / prec, prec**-0.5


def _from_dict(**groups):
    """Inference data from plain arrays, in the installed ArviZ's spelling."""
    if ARVIZ_MAJOR >= 1:
        return az.from_dict(groups)
    return az.from_dict(**groups)


@pytest.fixture(scope="module")
def fit():
    y = np.random.default_rng(1).normal(1.5, SIGMA, N_OBS)
    mcmc = run_nuts(jax.random.key(0), _model, y, num_warmup=500,
                    num_samples=NUM_DRAWS, num_chains=NUM_CHAINS,
                    progress_bar=False)
    mu = np.asarray(mcmc.get_samples(group_by_chain=True)["mu"], np.float64)
    rep = mu[..., None] + SIGMA * np.random.default_rng(2).normal(
        size=mu.shape + (N_OBS,))
    idata = to_inference_data(
        mcmc, coords={"obs": np.arange(N_OBS)}, dims={"y": ["obs"]},
        posterior_predictive={"y": rep}, observed_data={"y": y},
    )
    return y, mcmc, idata


def test_groups_dims_and_the_conjugate_posterior(fit):
    y, _, idata = fit
    assert {"posterior", "sample_stats", "log_likelihood", "posterior_predictive",
            "observed_data"} <= set(group_names(idata))
    assert idata["posterior"]["mu"].dims == ("chain", "draw")
    assert idata["log_likelihood"]["y"].dims == ("chain", "draw", "obs")
    assert idata["posterior_predictive"]["y"].dims == ("chain", "draw", "obs")
    assert idata["observed_data"]["y"].dims == ("obs",)
    np.testing.assert_allclose(idata["observed_data"]["y"].values, y)
    mean, sd = _posterior(y)
    draws = np.asarray(idata["posterior"]["mu"]).ravel()
    # MC error of the mean with >= 300 effective draws, 5 standard errors
    assert abs(draws.mean() - mean) < 5 * sd / np.sqrt(300)
    assert abs(draws.std() / sd - 1) < 0.15
    # NumPyro's pointwise log likelihood, recomputed by scipy
    ll = stats.norm(draws[:, None], SIGMA).logpdf(y[None])
    np.testing.assert_allclose(
        np.asarray(idata["log_likelihood"]["y"]).reshape(-1, N_OBS), ll,
        rtol=1e-4, atol=1e-4)


def test_log_likelihood_override_and_group_dims(fit):
    _, mcmc, _ = fit
    ll = np.zeros((NUM_CHAINS, NUM_DRAWS, N_OBS))
    idata = to_inference_data(
        mcmc, coords={"obs": np.arange(N_OBS)}, log_likelihood={"y": ll},
        group_dims={"log_likelihood": {"y": ["obs"]}})
    assert idata["log_likelihood"]["y"].dims == ("chain", "draw", "obs")
    assert float(np.abs(idata["log_likelihood"]["y"]).max()) == 0.0
    with pytest.raises(ValueError, match="unknown groups"):
        to_inference_data(mcmc, group_dims={"prior": {}})


def test_summary_and_convergence_of_a_good_run(fit):
    _, _, idata = fit
    table = summary(idata, var_names=["mu"], round_to="none")
    draws = np.asarray(idata["posterior"]["mu"]).ravel()
    np.testing.assert_allclose(table.loc["mu", "mean"], draws.mean(), atol=0.01)
    report = convergence_report(idata, ["mu"])
    assert report.max_rhat < 1.01 and report.min_ess_bulk > 100
    assert report.divergences == 0 and report.messages == ()
    assert check_convergence(idata, ["mu"])


def test_stuck_chains_fail_in_plain_words(rng):
    # two chains stuck at different values: R-hat far above 1, few effective draws
    draws = np.stack([rng.normal(0, 0.1, 200), rng.normal(3, 0.1, 200)])
    idata = _from_dict(posterior={"theta": draws})
    report = convergence_report(idata)
    assert report.max_rhat > 1.5
    assert any("chains disagree" in m for m in report.messages)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert not check_convergence(idata)
    said = [str(w.message) for w in caught if w.category is RuntimeWarning]
    assert len(said) == len(report.messages) and "chains disagree" in said[0]


def test_loo_matches_exact_leave_one_out(fit):
    """PSIS-LOO elpd against the closed-form leave-one-out predictive densities
    p(y_i | y_-i) = N(y_i; m_-i, SIGMA^2 + s_-i^2) of the conjugate model."""
    y, _, idata = fit
    exact = 0.0
    for i in range(N_OBS):
        m, s = _posterior(np.delete(y, i))
        exact += stats.norm(m, np.sqrt(SIGMA**2 + s**2)).logpdf(y[i])
    # a worse variant: the same draws scored with a 3x too wide noise
    draws = np.asarray(idata["posterior"]["mu"], np.float64)
    wide = _from_dict(
        posterior={"mu": draws},
        log_likelihood={"y": stats.norm(draws[..., None], 3 * SIGMA).logpdf(y)})
    table = compare_models({"right": idata, "wide": wide})
    column = "elpd" if ARVIZ_MAJOR >= 1 else "elpd_loo"
    assert list(table.index) == ["right", "wide"]
    assert abs(table.loc["right", column] - exact) < 0.3
    if ARVIZ_MAJOR >= 1:
        with pytest.raises(ValueError, match="removed WAIC"):
            compare_models({"right": idata, "wide": wide}, ic="waic")
    else:
        waic = compare_models({"right": idata, "wide": wide}, ic="waic")
        assert abs(waic.loc["right", "elpd_waic"] - exact) < 0.3
    with pytest.raises(ValueError, match="ic must be"):
        compare_models({"right": idata}, ic="bic")


def test_loo_of_one_model_matches_exact_leave_one_out(fit):
    """loo's elpd, per point and summed, against the closed-form leave-one-out
    predictive densities; the same number compare_models ranks by."""
    y, _, idata = fit
    exact = np.array([
        stats.norm(m, np.sqrt(SIGMA**2 + s**2)).logpdf(y[i])
        for i, (m, s) in enumerate(_posterior(np.delete(y, i))
                                   for i in range(N_OBS))])
    res = loo(idata)
    assert res.pointwise.shape == res.pareto_k.shape == (N_OBS,)
    assert abs(res.elpd - exact.sum()) < 0.3
    np.testing.assert_allclose(res.pointwise, exact, atol=0.05)
    np.testing.assert_allclose(res.pointwise.sum(), res.elpd, rtol=1e-10)
    assert np.all(res.pareto_k < 0.7) and 0.0 < res.p_loo < 2.0 and res.se > 0
    column = "elpd" if ARVIZ_MAJOR >= 1 else "elpd_loo"
    table = compare_models({"a": idata, "b": idata})
    np.testing.assert_allclose(table.loc["a", column], res.elpd, rtol=1e-10)
    with pytest.raises(ValueError, match="log_likelihood group"):
        loo(_from_dict(posterior={"mu": np.zeros((2, 10))}))


def test_netcdf_round_trip(fit, tmp_path):
    _, _, idata = fit
    back = load_inference_data(save_inference_data(idata, tmp_path / "a" / "f.nc"))
    assert set(group_names(back)) == set(group_names(idata))
    for group in group_names(idata):
        for name in idata[group].data_vars:
            np.testing.assert_array_equal(back[group][name].values,
                                          idata[group][name].values)
            assert back[group][name].dims == idata[group][name].dims
    # closed on return: the same path can be written again
    save_inference_data(back, tmp_path / "a" / "f.nc")


@pytest.mark.parametrize("plot", [plot_trace, plot_rank, plot_posterior, plot_ppc,
                                  plot_pit], ids=lambda f: f.__name__)
def test_plots_write_pngs_or_return_figures(plot, fit, tmp_path):
    import matplotlib.pyplot as plt

    _, _, idata = fit
    kwargs = {"var_names": ["y"]} if plot in (plot_ppc, plot_pit) else {
        "var_names": ["mu"]}
    path = plot(idata, tmp_path / "p.png", **kwargs)
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    fig = plot(idata, **kwargs)
    assert isinstance(fig, plt.Figure) and fig.axes
    plt.close(fig)


@pytest.mark.slow
def test_ppc_asks_for_at_most_the_replicates_there_are(fit, tmp_path):
    _, _, idata = fit
    path = plot_ppc(idata, tmp_path / "all.png", num_pp_samples=10 * NUM_DRAWS)
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.parametrize("plot", [plot_ppc, plot_pit], ids=lambda f: f.__name__)
def test_predictive_plots_take_multi_output_data_on_a_sample_dim(plot, rng,
                                                                 tmp_path):
    # bayeskde's kernel models name the data dim "sample" (a name ArviZ 1.x
    # plots use internally) beside an "output" dim
    idata = _from_dict(
        posterior={"a": rng.normal(size=(2, 50))},
        posterior_predictive={"y": rng.normal(size=(2, 50, 12, 2))},
        observed_data={"y": rng.normal(size=(12, 2))})
    for group in ("posterior_predictive", "observed_data"):
        idata[group]["y"] = idata[group]["y"].rename(
            {d: n for d, n in zip(idata[group]["y"].dims[-2:], ("sample", "output"),
                                  strict=True)})
    path = plot(idata, tmp_path / "m.png", var_names=["y"])
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.parametrize("plot", [plot_ppc, plot_pit], ids=lambda f: f.__name__)
def test_predictive_plots_need_their_groups(plot, rng, tmp_path):
    idata = _from_dict(posterior={"a": rng.normal(size=(2, 50))})
    with pytest.raises(ValueError, match="posterior_predictive"):
        plot(idata, tmp_path / "q.png")


def test_psis_weights_are_normalised_and_k_reads_the_tail(rng):
    """Importance weights w ~ Pareto(alpha) have tail index k = 1 / alpha."""
    alpha = 2.0
    w = stats.pareto(alpha).rvs(size=(40, 4000), random_state=rng)
    lw, k = psis_log_weights(np.log(w))
    assert lw.shape == w.shape and k.shape == (40,)
    np.testing.assert_allclose(logsumexp(lw, axis=-1), 0.0, atol=1e-8)
    assert abs(k.mean() - 1 / alpha) < 0.06
    # light tails (normal log weights with small spread): k well below 0.5
    _, k_light = psis_log_weights(rng.normal(0, 0.3, size=(5, 4000)))
    assert np.all(k_light < 0.3)
    with pytest.raises(ValueError, match="n_samples"):
        psis_log_weights(np.array([0.0, np.nan]))
