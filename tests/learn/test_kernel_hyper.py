"""Workflows of bayeskde.learn and the Twin GP predictive model."""

import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import integrate

from bayeskde import TwinGP
from bayeskde.infer import drop_failed_chains, psis_log_weights
from bayeskde.learn import (
    calibrate_temperature,
    fit_kernel_hyper,
    sample_bma_tgp_predictive,
    sample_tgp_predictive,
    twin_gp_from_params,
)
from bayeskde.models.kernel_hyper import KernelHyperPrior
from bayeskde.models.tgp import batch_energy, tgp_energy_batch
from tests.helpers import X64

# The deprecated fit_kernel_hyper workflow: run in CI's slow step (`-m slow`),
# not in the default run.
pytestmark = pytest.mark.slow


def _sshape(n=40, seed=0):
    rng = np.random.default_rng(seed)
    t = np.sort(rng.uniform(size=n))
    x = t + 0.3 * np.sin(2 * np.pi * t) + 0.02 * rng.normal(size=n)
    return x[:, None], t[:, None]


@pytest.fixture(scope="module")
def tgp():
    X, Y = _sshape()
    return TwinGP("kl", gamma_x=50.0, gamma_y=200.0, ridge=1e-2).fit(X, Y), X, Y


def test_batch_energy_equals_the_minimised_energy(tgp):
    model, X, _ = tgp
    Z = np.array([[0.1], [0.5], [0.9]])
    pred = model.predict(Z)
    batch = tgp_energy_batch(model, jnp.asarray(Z, model.model_.X.dtype))
    E = batch_energy(batch, jnp.asarray(pred, model.model_.X.dtype))
    np.testing.assert_allclose(E, model.solve(Z).energy, rtol=1e-6 if X64 else 1e-4)


def test_predictive_matches_the_grid_normalised_density(tgp, key):
    """The reweighted NUTS draws follow exp(-E/tau) on the box: compare their CDF
    with the quadrature CDF at a multivalued test input (Kolmogorov distance)."""
    model, X, Y = tgp
    tau = 0.05
    Z = np.array([[0.4], [0.45], [0.6]])
    # 4096 importance proposals: the draws carry about that many weighted points
    # (the default 64 per chain gave Kolmogorov distances of 0.05-0.14 over seeds).
    pred = sample_tgp_predictive(key, model, Z, tau, num_chains=4, num_warmup=200,
                                 num_samples=200, n_resample=4000, n_proposals=4096,
                                 progress_bar=False)
    batch = tgp_energy_batch(model, jnp.asarray(Z, model.model_.X.dtype))
    lo, hi = Y.min() - 0.1 * np.ptp(Y), Y.max() + 0.1 * np.ptp(Y)
    grid = np.linspace(lo, hi, 4001)
    E = np.stack([np.asarray(batch_energy(batch, jnp.full((3, 1), g, batch.a.dtype)))
                  for g in grid[::10]], axis=1)
    grid = grid[::10]
    upper_mass = []
    for j in range(3):
        dens = np.exp(-(E[j] - E[j].min()) / tau)
        cdf = np.cumsum(dens) / dens.sum()
        emp = np.searchsorted(np.sort(pred.samples[j, :, 0]), grid) / 4000
        # Seeds 0-3 gave 0.027-0.060 (the grid cells hold up to ~1% of the mass).
        assert np.max(np.abs(emp - cdf)) < 0.09, j
        upper_mass.append(dens[grid > 0.65].sum() / dens.sum())
    # At x = 0.4 the density has two branches (about 3/4 of the mass above
    # t = 0.65, the rest near the middle): the draws carry both, in proportion.
    assert 0.2 < upper_mass[0] < 0.9
    frac = np.mean(pred.samples[0, :, 0] > 0.65)
    assert abs(frac - upper_mass[0]) < 0.05
    assert pred.pareto_k.shape == (3,)


def test_temperature_score_equals_quadrature(tgp, key):
    model, X, Y = tgp
    tau, info = calibrate_temperature(key, model, X, Y, temperatures=[0.02, 0.2],
                                      n_points=2000)
    assert tau in (0.02, 0.2)
    # Recompute the held-out log density of one temperature with scipy's quad.
    perm = np.asarray(jax.random.permutation(jax.random.split(key)[0], len(X)))
    n_val = int(round(0.2 * len(X)))
    val, keep = perm[:n_val], perm[n_val:]
    refit = TwinGP("kl", gamma_x=50.0, gamma_y=200.0, ridge=1e-2).fit(X[keep], Y[keep])
    batch = tgp_energy_batch(refit, jnp.asarray(X[val], refit.model_.X.dtype))
    lo, hi = Y.min() - 0.1 * np.ptp(Y), Y.max() + 0.1 * np.ptp(Y)
    E_true = np.asarray(batch_energy(batch, jnp.asarray(Y[val], batch.a.dtype)))
    scores = []
    for j in range(n_val):
        def e(y, j=j):
            ys = jnp.full((n_val, 1), y, batch.a.dtype)
            return float(np.asarray(batch_energy(batch, ys))[j])
        e0 = E_true[j]
        z = integrate.quad(lambda y, e0=e0: np.exp(-(e(y) - e0) / 0.2), lo, hi,
                           limit=200)[0]
        scores.append(-np.log(z))
    np.testing.assert_allclose(info["heldout_log_density"][1], np.mean(scores),
                               rtol=2e-3)


def test_twin_gp_from_params_builds_the_transform():
    p = {"degree_x": 2, "degree_y": 3, "gamma_x": 1.0, "gamma_y": 2.0, "ridge": 0.5}
    tgp = twin_gp_from_params(p, ridge=1e-3)
    assert tgp.ridge == 1e-3 and tgp.kernel_transform.degree_y == 3
    linear = twin_gp_from_params({**p, "degree_x": 1, "degree_y": 1})
    assert linear.kernel_transform is None
    with pytest.raises(ValueError, match="ridge"):
        twin_gp_from_params(p, ridge=-1.0)


@pytest.fixture(scope="module")
def hyper_fit():
    """One NUTS fit of the kernel hyperparameter model on 20 S-shape points
    (degrees up to 2 x 2, 2 chains x 30 draws, with PSIS-LOO and the posterior
    predictive), shared by the tests that read a fit."""
    X, Y = _sshape(n=20)
    with pytest.warns(FutureWarning, match=r"deprecated.*fit_inverse_gp"):
        fit = fit_kernel_hyper(jax.random.key(0), X, Y,
                               KernelHyperPrior(max_degree_x=2, max_degree_y=2),
                               num_warmup=30, num_samples=30, progress_bar=False)
    return fit, X, Y


def test_fit_kernel_hyper_end_to_end(hyper_fit, key, tmp_path):
    from bayeskde.infer import load_inference_data, save_inference_data

    fit, X, Y = hyper_fit
    assert fit.degree_posterior.shape == (2, 2)
    np.testing.assert_allclose(fit.degree_posterior.sum(), 1.0, rtol=1e-6)
    assert fit.map_params["degree_x"] in (1, 2)
    ll = fit.idata.log_likelihood["y"]
    assert ll.dims == ("chain", "draw", "sample") and np.all(np.isfinite(ll))
    pp = fit.idata.posterior_predictive
    assert pp["y"].dims == ("chain", "draw", "sample", "output")
    assert pp["y"].shape == (2, 30, 20, 1) and np.all(np.isfinite(pp["y"]))
    assert set(np.unique(pp["d1"])) <= {1, 2} and set(np.unique(pp["d2"])) <= {1, 2}
    # the replicates scatter around the data on the data's scale
    obs = fit.idata.observed_data["y"].values
    assert pp["y"].dims[-2:] == fit.idata.observed_data["y"].dims
    rep_sd = float(pp["y"].std())
    assert 0.3 * obs.std() < rep_sd < 3 * obs.std()
    back = load_inference_data(save_inference_data(fit.idata, tmp_path / "f.nc"))
    np.testing.assert_array_equal(back.posterior["gamma_x"], fit.idata.posterior[
        "gamma_x"])
    np.testing.assert_array_equal(back.posterior_predictive["y"], pp["y"])
    with pytest.warns(FutureWarning, match="InverseGPRegressor"):
        with pytest.raises(TypeError, match="KernelHyperPrior"):
            fit_kernel_hyper(key, X, Y, {"max_degree_x": 2})
        with pytest.raises(ValueError, match="NaN|finite"):
            fit_kernel_hyper(key, np.full_like(X, np.nan), Y)
        with pytest.raises(ValueError, match=r"prior\.log_gamma_x_loc.*finite"):
            fit_kernel_hyper(key, X, Y, KernelHyperPrior(log_gamma_x_loc=np.nan))


@pytest.mark.parametrize(
    "kwargs, match",
    [({"temperature": 0.0}, "temperature"), ({"num_chains": 0}, "num_chains"),
     ({"n_resample": 0}, "n_resample")],
)
def test_predictive_rejects_bad_settings(tgp, key, kwargs, match):
    model, X, Y = tgp
    args = {"temperature": 0.1, **kwargs}
    with pytest.raises(ValueError, match=match):
        sample_tgp_predictive(key, model, X[:2], progress_bar=False, **args)


def test_predictive_needs_a_global_twin_gp(key):
    X, Y = _sshape()
    local = TwinGP("kl", gamma_x=5.0, gamma_y=5.0, n_neighbors=10).fit(X, Y)
    with pytest.raises(ValueError, match="global"):
        sample_tgp_predictive(key, local, X[:2], 0.1, progress_bar=False)


class _FakeRun:
    """Two chains of which the second produced NaN draws."""

    def get_samples(self, group_by_chain=False):
        a = np.ones((2, 5, 3))
        a[1, 2, 0] = np.nan
        return {"theta": a}

    def get_extra_fields(self, group_by_chain=False):
        return {"accept_prob": np.full((2, 5), 0.8)}


def test_a_failed_chain_does_not_lose_the_others():
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        samples, failed = drop_failed_chains(_FakeRun())
    assert failed == (1,) and samples["theta"].shape == (1, 5, 3)
    assert any("chains [1] failed" in str(x.message) for x in w)


def test_psis_weights_are_normalised_and_diagnosed(rng):
    lw = rng.normal(size=(3, 500))
    out, k = psis_log_weights(lw)
    np.testing.assert_allclose(np.exp(out).sum(axis=1), 1.0, rtol=1e-10)
    assert k.shape == (3,) and np.all(k < 0.7)
    with pytest.raises(ValueError, match="n_samples"):
        psis_log_weights(np.array([np.nan, 1.0]))


def test_bma_kde_per_draw_equals_kde_with_the_draws_kernels(hyper_fit):
    from bayeskde import KernelDependencyEstimator
    from bayeskde.kernels.transforms import fit_polynomial_transform
    from bayeskde.learn import bma_kde_predict

    fit, X, Y = hyper_fit
    Z = np.linspace(0, 1, 7)[:, None]
    mean, per, draws = bma_kde_predict(jax.random.key(3), fit, X, Y, Z, n_draws=2)
    np.testing.assert_allclose(mean, per.mean(0))
    for p, pred in zip(draws, per, strict=True):
        K = np.exp(-p["gamma_x"] * (X - X.T) ** 2)
        G = np.exp(-p["gamma_y"] * (Y - Y.T) ** 2)
        tr = fit_polynomial_transform(K, G, p["degree_x"], p["degree_y"])
        a, b = np.asarray(tr.alpha, float), np.asarray(tr.beta, float)

        def kx(A, B, a=a, g=p["gamma_x"]):
            d2 = (A - B.T) ** 2
            return sum(c * np.exp(-(i + 1) * g * d2) for i, c in enumerate(a))

        def ky(A, B, b=b, g=p["gamma_y"]):
            d2 = (A - B.T) ** 2
            return sum(c * np.exp(-(i + 1) * g * d2) for i, c in enumerate(b))

        ref = KernelDependencyEstimator(input_kernel=kx, output_kernel=ky,
                                        ridge=p["ridge"] / len(X)).fit(X, Y)
        np.testing.assert_allclose(pred, ref.predict(Z))


def test_bma_predictive_follows_the_mixture_over_kernel_draws(hyper_fit, key):
    """Pooled draws over two posterior kernels follow the equal mixture of the
    two grid-normalised densities (Kolmogorov distance at each test input), and
    the mode is a draw near the mixture's highest density."""
    fit, X, Y = hyper_fit
    tau = 0.05
    Z = np.array([[0.4], [0.7]])
    kw = dict(num_chains=2, num_warmup=80, num_samples=80, n_resample=1000,
              n_proposals=2048, progress_bar=False)
    k = jax.random.fold_in(key, 7)
    pred = sample_bma_tgp_predictive(k, fit, X, Y, Z, tau, n_draws=2, ridge=1e-2,
                                     **kw)
    assert pred.samples.shape == (2, 2000, 1) and len(pred.mcmc) == 2
    # the same components, by hand
    k_draw, _ = jax.random.split(k)
    from bayeskde.learn.kernel_hyper import _posterior_draws

    lo, hi = Y.min() - 0.1 * np.ptp(Y), Y.max() + 0.1 * np.ptp(Y)
    grid = np.linspace(lo, hi, 400)
    mix = np.zeros((2, grid.size))
    for p in _posterior_draws(fit, k_draw, 2):
        model = twin_gp_from_params(p, "kl", 1e-2).fit(X, Y)
        batch = tgp_energy_batch(model, jnp.asarray(Z, model.model_.X.dtype))
        E = np.stack([np.asarray(batch_energy(batch, jnp.full((2, 1), g,
                                                              batch.a.dtype)))
                      for g in grid], axis=1)
        dens = np.exp(-(E - E.min(axis=1, keepdims=True)) / tau)
        mix += 0.5 * dens / dens.sum(axis=1, keepdims=True)
    for j in range(2):
        cdf = np.cumsum(mix[j])
        emp = np.searchsorted(np.sort(pred.samples[j, :, 0]), grid) / 2000
        assert np.max(np.abs(emp - cdf)) < 0.09, j
        # the mode sits where the mixture density is within a factor 3 of its peak
        near = mix[j][np.argmin(np.abs(grid - pred.mode[j, 0]))]
        assert near > mix[j].max() / 3, j


def test_plots_are_written_and_ppc_needs_its_groups(tmp_path, rng):
    """ArviZ plots through bayeskde.infer: PNG files; a PPC without the
    posterior_predictive group is refused with the reason."""
    import arviz as az

    from bayeskde.infer import plot_trace
    from bayeskde.infer.diagnostics import plot_ppc

    idata = az.from_dict(posterior={"a": rng.normal(size=(2, 50))},
                         posterior_predictive={"y": rng.normal(size=(2, 50, 10))},
                         observed_data={"y": rng.normal(size=10)})
    for path in (plot_trace(idata, tmp_path / "t.png"),
                 plot_ppc(idata, tmp_path / "p.png")):
        assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    with pytest.raises(ValueError, match="posterior_predictive"):
        plot_ppc(az.from_dict(posterior={"a": rng.normal(size=(2, 50))}),
                 tmp_path / "q.png")
