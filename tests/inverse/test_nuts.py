"""Draws of the inverse model's predictive by NUTS's warm-up then HMC (or NUTS)
in any output dimension: bad settings, one compiled program for repeated calls
(counted through JAX's compile events), NaN diagnostics for too few draws, and
against an importance oracle of the same density and the exact posterior of a
Gaussian linear simulator in a box (slow)."""

import jax
import jax.numpy as jnp
import numpy as np
import numpyro.distributions as dist
import pytest
from numpyro.diagnostics import effective_sample_size

from bayeskde.inverse import (
    InverseGPPredictive,
    InverseGPPrior,
    InverseGPRegressor,
    fit_inverse_gp,
    inverse_gp_nuts,
    predictive_log_density,
    resolve_output_prior,
)
from bayeskde.inverse.evaluators import prune
from bayeskde.inverse.mixture import fit_mixture
from bayeskde.inverse.nuts import _report
from tests.helpers import count_compilations

PRIOR = InverseGPPrior(max_degree=2, n_gamma=6)


def test_nuts_rejects_bad_settings(moons_fit):
    x, th, fit = moons_fit("gaussian")
    with pytest.raises(ValueError, match="sampling_kernel"):
        inverse_gp_nuts(jax.random.key(1), fit, x[:1], 10, sampling_kernel="mala")
    with pytest.raises(TypeError, match="fit"):
        inverse_gp_nuts(jax.random.key(1), None, x[:1], 10)
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


@pytest.mark.slow  # two NUTS runs for an argument's two spellings (about 17 s)
def test_nuts_tree_depth_int_is_the_pair_of_itself(moons_fit):
    """An int cap d is the pair (d, d): the same program (no compilation on
    the second call) and the same draws (the default pair (4, 8) runs in the
    other tests)."""
    x, th, fit = moons_fit("gaussian")
    a, _ = inverse_gp_nuts(jax.random.key(1), fit, x[:1], 8, num_warmup=20,
                           max_tree_depth=5)
    with count_compilations() as c:
        b, _ = inverse_gp_nuts(jax.random.key(1), fit, x[:1], 8, num_warmup=20,
                               max_tree_depth=[5, 5])
    assert c.count == 0
    np.testing.assert_array_equal(a, b)


@pytest.mark.slow  # a NUTS run for an edge case of the report (about 25 s)
def test_nuts_reports_nan_diagnostics_for_too_few_draws(moons_fit):
    """Fewer than 4 kept states a chain leave split R-hat undefined (numpyro
    asserts): the draws come back and R-hat (and, under 2, ESS) is NaN."""
    x, th, fit = moons_fit("gaussian")
    draws, rep = inverse_gp_nuts(jax.random.key(1), fit, x[:1], 8, num_warmup=20)
    assert draws.shape == (1, 8, 2) and np.all(np.isfinite(draws))
    assert rep.num_keep == 2 and np.all(np.isnan(rep.rhat))
    assert np.all(np.isfinite(rep.ess))
    # one kept state a chain (4 draws, 4 chains): ESS is NaN too; the same
    # report function on the chains' states (private: a second NUTS run would
    # compile its program again for num_keep=1, 10 s here)
    ys = np.random.default_rng(0).normal(size=(1, 4, 2))
    draws, rep = _report(ys, np.zeros((1, 4), bool), 4, 20, 4)
    assert draws.shape == (1, 4, 2) and rep.num_keep == 1
    assert np.all(np.isnan(rep.ess)) and np.all(np.isnan(rep.rhat))


def test_nuts_does_not_recompile_on_a_repeated_call(moons_fit):
    """The chains' program is one module-level jit: a second call with another
    key, other test inputs and another prior distribution of the same shapes
    compiles nothing."""
    x, th, fit = moons_fit("gaussian")
    box = dist.Uniform(-np.ones(2), np.ones(2)).to_event(1)
    inverse_gp_nuts(jax.random.key(1), fit, x[:1], 8, num_warmup=20,
                    output_prior=box)
    wider = dist.Uniform(-2 * np.ones(2), 2 * np.ones(2)).to_event(1)
    with count_compilations() as c:
        inverse_gp_nuts(jax.random.key(2), fit, x[1:2], 8, num_warmup=20,
                        output_prior=wider)
    assert c.count == 0


def _truncnorm_moments(mu, sd, lo=-1.0, hi=1.0):
    from scipy import stats

    a, b = (lo - mu) / sd, (hi - mu) / sd
    t = stats.truncnorm(a, b, loc=mu, scale=sd)
    return t.mean(), t.std()


@pytest.mark.slow
@pytest.mark.parametrize("noise,sampling_kernel", [("gaussian", "hmc"),
                                            ("residual", "hmc"),
                                            ("gaussian", "nuts")])
def test_nuts_matches_an_importance_oracle_and_the_exact_posterior(noise,
                                                                   sampling_kernel):
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
                         num_samples=100, progress_bar=False, num_replicates=2,
                         noise=noise)
    x_o = np.array([[0.3, -0.5, 0.9], [-0.2, 0.1, 0.0]])
    draws, rep = inverse_gp_nuts(jax.random.key(1), fit, x_o, 4000,
                                 output_prior=box, num_warmup=300,
                                 sampling_kernel=sampling_kernel)
    assert rep.sampling_kernel == sampling_kernel and np.all(rep.acceptance > 0.6)
    assert draws.shape == (2, 4000, d)
    assert np.all(np.abs(draws) <= 1.0)
    assert rep.rhat.max() < 1.02 and rep.ess.min() > 400
    assert rep.divergences.sum() == 0
    # the oracle: the same density, importance-sampled from the prior
    prior = resolve_output_prior(box, fit.data.Y)
    # the oracle's density is the full spectrum's: the truncation is part of
    # what is tested
    mix = prune(fit_mixture(fit, "average", 100))
    pred = InverseGPPredictive(None, None, None, None, None, mixture=mix,
                               prior=prior)
    n_is = 400_000
    u = rng.uniform(-1, 1, (n_is, d))
    lw = np.concatenate([predictive_log_density(
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
    assert not hasattr(reg, "sample_report_")  # the estimator keeps no state
    assert all(len(np.unique(d, axis=0)) > 500 for d in s)
    np.testing.assert_array_equal(s, reg.sample(x[:2], 1000, key=jax.random.key(0)))
