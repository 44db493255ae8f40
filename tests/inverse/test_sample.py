"""Draws of the inverse model's predictive: the grid's memory blocks against
one unblocked program, the chains' per-point likelihood (factored filters,
truncated spectrum) against the predictive's scan, and NUTS / HMC above two
outputs against an importance oracle of the same density and the exact
posterior of a Gaussian linear simulator in a box."""

import jax
import jax.numpy as jnp
import numpy as np
import numpyro.distributions as dist
import pytest
from numpyro.diagnostics import effective_sample_size

from bayeskde.learn import InverseGPRegressor, _grid_draws
from bayeskde.learn import inverse_predictive as ip
from bayeskde.learn import inverse_sample as isample
from bayeskde.learn.inverse_gp import fit_inverse_gp, inverse_gp_nuts
from bayeskde.models import InverseGPPrior, mixture_log_likelihood
from tests.conftest import X64

PRIOR = InverseGPPrior(max_degree=2, n_gamma=6)


def _moons_like(m, seed=0):
    rng = np.random.default_rng(seed)
    th = rng.uniform(-1, 1, (m, 2))
    x = np.stack([np.sin(2 * th[:, 0]) + th[:, 1], th[:, 0] * th[:, 1]], 1)
    return x + 0.05 * rng.normal(size=x.shape), th


_FITS = {}


def _moons_fit(noise):
    """One quadrature fit of the moons-like pairs per noise model, shared."""
    if noise not in _FITS:
        x, th = _moons_like(80)
        _FITS[noise] = (x, th, fit_inverse_gp(
            jax.random.key(0), x, th, PRIOR, method="quadrature", num_samples=50,
            progress_bar=False, n_replicates=2, noise=noise))
    return _FITS[noise]


def test_grid_blocks_match_one_program(monkeypatch):
    x, th, fit = _moons_fit("gaussian")
    mix = ip._fit_mixture(fit, "average", 20)
    dt = mix.lam.dtype
    cand = jnp.asarray(np.random.default_rng(1).uniform(-1, 1, (300, 2)), dt)
    X = jnp.asarray(x[:5], dt)
    one = np.asarray(mixture_log_likelihood(mix, cand, X, jnp.asarray(1.0, dt)))
    P, r = mix.lam.shape
    monkeypatch.setattr(ip, "_BLOCK_NUMBERS", P * r * 40)  # blocks of 32 cells
    assert ip._cell_block(mix, 300) == 32
    blocked = ip._blocked_loglik(mix, cand, X, jnp.asarray(1.0, dt))
    # float64: the same numbers; float32: programs of different shapes fuse
    # and round differently, up to 0.03 nats of a log likelihood near -100
    # at this conditioning (measured), so the float32 check is of the blocking
    # logic only to that rounding
    np.testing.assert_allclose(blocked, one, rtol=1e-10 if X64 else 1e-3,
                               atol=1e-10 if X64 else 5e-2)


def _by_position(pts, lp, step):
    """Log masses keyed by their points' integer positions on a grid of
    spacing ``step`` (float rounding of the centres is well below it)."""
    keys = np.round(pts / step - 0.5).astype(int)
    order = np.lexsort(keys.T[::-1])
    return keys[order], lp[order]


@pytest.mark.parametrize("noise", ["gaussian", "residual"])
def test_refined_grid_is_the_midpoint_rule_of_the_finer_grid(noise, monkeypatch):
    """Every cell of a 12 x 12 grid split 8 x 8 is the 96 x 96 grid's midpoint
    rule exactly (centres and masses); with only the 10 most probable cells
    split, those cells' sub-masses are the 96 x 96 grid's up to one constant
    (the normalisation) and every other cell keeps its coarse mass."""
    x, th, fit = _moons_fit(noise)
    xo = x[:2]
    coarse = ip.inverse_gp_predictive(fit, xo, n_draws=20, n_grid=12, refine=False)
    fine = ip.inverse_gp_predictive(fit, xo, n_draws=20, n_grid=96, refine=False)
    step = np.asarray(fine.cell, float)
    lo = fine.support.min(0) - step / 2
    cen, lm, width = _grid_draws._refined_grid(coarse, xo, 8)
    assert cen.shape == (2, 96 * 96, 2) and width.shape == (96 * 96, 2)
    np.testing.assert_allclose(width, np.broadcast_to(step, width.shape), rtol=1e-6)
    # float32: programs of other shapes round log likelihoods of -100 to
    # -1000 differently by up to ~1e-4 relative; compared where the mass is
    # above 1e-12 of the largest
    tol = 1e-8 if X64 else 2e-3
    for i in range(2):
        kf, lf = _by_position(fine.support - lo, fine.log_probs[i], step)
        kr, lr = _by_position(cen[i] - lo, lm[i], step)
        np.testing.assert_array_equal(kr, kf)
        big = lf > lf.max() - 27.6
        np.testing.assert_allclose(lr[big], lf[big], atol=tol)
    # part of the grid refined: K = 640 // 64 = 10 cells
    monkeypatch.setattr(_grid_draws, "GRID_REFINE_EVALS", 640)
    cen, lm, width = _grid_draws._refined_grid(coarse, xo, 8)
    assert cen.shape == (2, 144 - 10 + 640, 2)
    for i in range(2):
        top = np.argsort(-coarse.log_probs[i])[:10]
        rest = np.setdiff1d(np.arange(144), top)
        # the coarse cells kept, after the 640 sub-cells
        kept = _by_position(cen[i, 640:] - lo, lm[i, 640:], np.asarray(coarse.cell))
        want = _by_position(coarse.support[rest] - lo, coarse.log_probs[i, rest],
                            np.asarray(coarse.cell))
        np.testing.assert_array_equal(kept[0], want[0])
        # the coarse masses, renormalised: shifted by one constant
        np.testing.assert_allclose(kept[1] - want[1], (kept[1] - want[1])[0],
                                   atol=1e-9 if X64 else 1e-4)
        # the sub-cells: the fine grid's masses there, shifted by one constant
        kf, lf = _by_position(fine.support - lo, fine.log_probs[i], step)
        kr, lr = _by_position(cen[i, :640] - lo, lm[i, :640], step)
        pos = {tuple(k): j for j, k in enumerate(kf)}
        lf = lf[[pos[tuple(k)] for k in kr]]
        big = lf > lf.max() - 27.6
        diff = (lr - lf)[big]
        np.testing.assert_allclose(diff, diff[0], atol=tol)
        np.testing.assert_allclose(np.logaddexp.reduce(lm[i]), 0.0, atol=1e-9)


def test_refined_grid_draws_resolve_a_density_narrower_than_a_cell():
    """On a 6 x 6 grid (cells a third of the box, wider than the density's
    spread of 0.09 in y_1) the draws of the 16-fold refined grid have the
    mean and spread of the 96 x 96 grid's density (Monte Carlo error), and
    the coarse cells' draws do not."""
    x, th, fit = _moons_fit("gaussian")
    xo = x[3:4]
    coarse = ip.inverse_gp_predictive(fit, xo, n_draws=20, n_grid=6, refine=False)
    fine = ip.inverse_gp_predictive(fit, xo, n_draws=20, n_grid=96, refine=False)
    w = np.exp(fine.log_probs[0])
    mean = w @ fine.support
    sd = np.sqrt(w @ fine.support**2 - mean**2 + np.asarray(fine.cell) ** 2 / 12)
    n = 20_000
    got = isample.inverse_gp_sample(jax.random.key(4), fit, xo, n,
                                    predictive=coarse, subdivide=16)[0]
    assert np.all(np.abs(got.mean(0) - mean) < 5 * sd / np.sqrt(n))
    # sd of a sample sd: sd / sqrt(2 n) for a near-Gaussian peak, 6 of them
    assert np.all(np.abs(got.std(0) - sd) < 6 * sd / np.sqrt(2 * n))
    flat = isample.inverse_gp_sample(jax.random.key(4), fit, xo, n,
                                     predictive=coarse, subdivide=1)[0]
    # the same check fails for the coarse cells' draws
    assert np.any(np.abs(flat.std(0) - sd) > 6 * sd / np.sqrt(2 * n))


@pytest.mark.parametrize("noise", ["gaussian", "residual"])
def test_point_likelihood_matches_the_predictive_scan(noise):
    """The chains' log p(x | y, D) (every component through the SVD-factored
    filters, no scan) equals the predictive's scan over components at tol 0,
    on a mixture of several pairs; the truncated spectrum moves it by less
    than the documented 1e-2 nats near the data."""
    x, th, fit = _moons_fit(noise)
    mix = isample._prune(ip._fit_mixture(fit, "average", 20))
    # the Gaussian average has several pairs; the residual density is the
    # MAP pair's alone
    assert (mix.lam.shape[0] > 1 and mix.log_w.shape[0] > 1) or noise == "residual"
    dt = mix.lam.dtype
    full = isample._truncate_spectrum(mix, 0.0)
    filt = isample._filters(full)
    cut = isample._truncate_spectrum(mix)
    assert cut.lam.shape[1] < full.lam.shape[1]
    rng = np.random.default_rng(2)
    tn = jnp.asarray(1.0, dt)
    for i in range(6):
        y = jnp.asarray(th[i] + 0.05 * rng.normal(size=2), dt)
        xo = jnp.asarray(x[i], dt)
        scan = float(mixture_log_likelihood(mix, y[None], xo[None], tn)[0, 0])
        ours = float(isample._point_log_likelihood(full, filt, y, xo, tn))
        # float64: the SVD cut at FILTER_RTOL of the largest singular value
        # leaves up to ~4e-6 nats of a log likelihood near -2 (measured at
        # 1e-10; a statistically invisible error)
        np.testing.assert_allclose(ours, scan, rtol=1e-5 if X64 else 1e-4,
                                   atol=1e-5 if X64 else 1e-3)
        trunc = float(isample._point_log_likelihood(cut, isample._filters(cut),
                                                    y, xo, tn))
        assert abs(trunc - scan) < 1e-2


def test_nuts_rejects_bad_settings():
    x, th, fit = _moons_fit("gaussian")
    with pytest.raises(ValueError, match="sampling"):
        inverse_gp_nuts(jax.random.key(1), fit, x[:1], 10, sampling="mala")
    with pytest.raises(ValueError, match="spectrum_tol"):
        inverse_gp_nuts(jax.random.key(1), fit, x[:1], 10, spectrum_tol=-1.0)
    with pytest.raises(ValueError, match="spectrum_tol"):
        inverse_gp_nuts(jax.random.key(1), fit, x[:1], 10, spectrum_tol=np.nan)
    for bad in (0, (4, 0), (4, 5, 6), (4,)):
        with pytest.raises(ValueError, match="max_tree_depth"):
            inverse_gp_nuts(jax.random.key(1), fit, x[:1], 10,
                            max_tree_depth=bad)
    for bad in (2.5, (4, 8.5), "4"):
        with pytest.raises(TypeError, match="max_tree_depth"):
            inverse_gp_nuts(jax.random.key(1), fit, x[:1], 10,
                            max_tree_depth=bad)


def test_nuts_tree_depth_int_is_the_pair_of_itself():
    """An int cap d is the pair (d, d): the same program (no second
    compilation) and the same draws (the default pair (4, 8) runs in the
    other tests)."""
    from bayeskde.learn import inverse_sample

    x, th, fit = _moons_fit("gaussian")
    a, _ = inverse_gp_nuts(jax.random.key(1), fit, x[:1], 8, num_warmup=20,
                           max_tree_depth=5)
    size = inverse_sample._run_chains._cache_size()
    b, _ = inverse_gp_nuts(jax.random.key(1), fit, x[:1], 8, num_warmup=20,
                           max_tree_depth=[5, 5])
    assert inverse_sample._run_chains._cache_size() == size
    np.testing.assert_array_equal(a, b)


def test_nuts_reports_nan_diagnostics_for_too_few_draws():
    """Fewer than 4 kept states a chain leave split R-hat undefined (numpyro
    asserts): the draws come back and R-hat (and, under 2, ESS) is NaN."""
    x, th, fit = _moons_fit("gaussian")
    draws, rep = inverse_gp_nuts(jax.random.key(1), fit, x[:1], 8, num_warmup=20)
    assert draws.shape == (1, 8, 2) and np.all(np.isfinite(draws))
    assert rep.num_keep == 2 and np.all(np.isnan(rep.rhat))
    assert np.all(np.isfinite(rep.ess))
    # one kept state a chain (4 draws, 4 chains): ESS is NaN too; the same
    # report function on the chains' states (a second NUTS run would compile
    # its program again for num_keep=1)
    from bayeskde.learn.inverse_sample import _report

    ys = np.random.default_rng(0).normal(size=(1, 4, 2))
    draws, rep = _report(ys, np.zeros((1, 4), bool), 4, 20, 4)
    assert draws.shape == (1, 4, 2) and rep.num_keep == 1
    assert np.all(np.isnan(rep.ess)) and np.all(np.isnan(rep.rhat))


def test_nuts_does_not_recompile_on_a_repeated_call():
    """The chains' program is one module-level jit: a second call with another
    key, other test inputs and another prior distribution of the same shapes
    reuses it."""
    import numpyro.distributions as dist

    from bayeskde.learn import inverse_sample

    x, th, fit = _moons_fit("gaussian")
    box = dist.Uniform(-np.ones(2), np.ones(2)).to_event(1)
    inverse_gp_nuts(jax.random.key(1), fit, x[:1], 8, num_warmup=20,
                    output_prior=box)
    size = inverse_sample._run_chains._cache_size()
    wider = dist.Uniform(-2 * np.ones(2), 2 * np.ones(2)).to_event(1)
    inverse_gp_nuts(jax.random.key(2), fit, x[1:2], 8, num_warmup=20,
                    output_prior=wider)
    assert inverse_sample._run_chains._cache_size() == size


def _truncnorm_moments(mu, sd, lo=-1.0, hi=1.0):
    from scipy import stats

    a, b = (lo - mu) / sd, (hi - mu) / sd
    t = stats.truncnorm(a, b, loc=mu, scale=sd)
    return t.mean(), t.std()


@pytest.mark.slow
@pytest.mark.parametrize("noise,sampling", [("gaussian", "hmc"),
                                            ("residual", "hmc"),
                                            ("gaussian", "nuts")])
def test_nuts_matches_an_importance_oracle_and_the_exact_posterior(noise, sampling):
    """Gaussian linear simulator x = theta + N(0, 0.1 I) in 3-D with the flat
    box U(-1, 1)^3: the chains' draws (NUTS's warm-up, then HMC or NUTS) of
    the model's predictive agree with
    self-normalised importance sampling of the same density from 400,000
    prior draws (moments within Monte Carlo error), and with the exact
    posterior (a truncated normal per coordinate) to the model's accuracy."""
    rng = np.random.default_rng(0)
    d, m = 3, 300
    th = rng.uniform(-1, 1, (m, d))
    x = th + np.sqrt(0.1) * rng.normal(size=(m, d))
    box = dist.Uniform(-jnp.ones(d), jnp.ones(d)).to_event(1)
    fit = fit_inverse_gp(jax.random.key(0), x, th, PRIOR, method="quadrature",
                         num_samples=100, progress_bar=False, n_replicates=2,
                         noise=noise)
    x_o = np.array([[0.3, -0.5, 0.9], [-0.2, 0.1, 0.0]])
    draws, rep = inverse_gp_nuts(jax.random.key(1), fit, x_o, 4000,
                                 output_prior=box, num_warmup=300,
                                 sampling=sampling)
    assert rep.sampling == sampling and np.all(rep.acceptance > 0.6)
    assert draws.shape == (2, 4000, d)
    assert np.all(np.abs(draws) <= 1.0)
    assert rep.rhat.max() < 1.02 and rep.ess.min() > 400
    assert rep.divergences.sum() == 0
    # the oracle: the same density, importance-sampled from the prior
    prior = ip.resolve_output_prior(box, fit.data.Y)
    # the oracle's density is the full spectrum's: the truncation is part of
    # what is tested
    mix = isample._prune(ip._fit_mixture(fit, "average", 100))
    pred = ip.InverseGPPredictive(None, None, None, None, None, mixture=mix,
                                  prior=prior)
    n_is = 400_000
    u = rng.uniform(-1, 1, (n_is, d))
    lw = np.concatenate([ip.predictive_log_density(
        pred, u[None, i:i + 50_000].repeat(2, 0), x_o)
        for i in range(0, n_is, 50_000)], axis=1)  # (2, n_is)
    w = np.exp(lw - lw.max(1, keepdims=True))
    w /= w.sum(1, keepdims=True)
    ess_is = 1 / (w**2).sum(1)
    assert ess_is.min() > 5000
    mean_is = w @ u  # (2, d)
    sd_is = np.sqrt(np.einsum("in,nd->id", w, u**2) - mean_is**2)
    mean_nuts, sd_nuts = draws.mean(1), draws.std(1)
    # Monte Carlo error: sd / sqrt(ESS) for both, 5 of them
    tol = 5 * sd_is * np.sqrt(1 / rep.ess + 1 / ess_is[:, None])
    assert np.all(np.abs(mean_nuts - mean_is) < tol)
    # the sd's Monte Carlo error is set by the squared deviations' ESS (the
    # tails' mixing), not the draws' bulk ESS: the delta method gives
    # se(sd) / sd = sd(dev^2) / (2 mean(dev^2) sqrt(ESS(dev^2))); 5 of them
    chains = draws.reshape(2, 4, -1, d)
    dev2 = (chains - chains.mean((1, 2), keepdims=True)) ** 2
    ess2 = np.stack([np.asarray(effective_sample_size(v)) for v in dev2])  # (2, d)
    rel_se = dev2.reshape(2, -1, d).std(1) / (2 * dev2.reshape(2, -1, d).mean(1))
    rel_tol = 5 * rel_se * np.sqrt(1 / ess2 + 1 / ess_is[:, None])
    assert np.all(np.abs(sd_nuts / sd_is - 1) < rel_tol)
    assert rel_tol.max() < 0.15  # the check has teeth
    # the exact posterior of the simulator against the model's own predictive
    # (the importance oracle, free of the chains' error): the GP forward model
    # is within 0.08 of the mean; its noise model widens the sd (the residual
    # density's kernel adds its bandwidth: 16% here in float64)
    em, es = _truncnorm_moments(x_o, np.sqrt(0.1))
    assert np.abs(mean_is - em).max() < 0.08
    assert np.abs(sd_is / es - 1).max() < 0.2


@pytest.mark.slow
def test_estimator_samples_three_outputs_by_nuts():
    rng = np.random.default_rng(3)
    th = rng.uniform(-1, 1, (150, 3))
    x = th + 0.3 * rng.normal(size=(150, 3))
    reg = InverseGPRegressor(PRIOR, num_samples=50, output_prior=(
        -np.ones(3), np.ones(3))).fit(x, th)
    s = reg.sample(x[:2], 1000, key=jax.random.key(0))
    assert s.shape == (2, 1000, 3)
    assert reg.sample_report_.rhat.shape == (2, 3)
    assert np.all(reg.sample_report_.distinct > 500)
    np.testing.assert_array_equal(s, reg.sample(x[:2], 1000, key=jax.random.key(0)))
