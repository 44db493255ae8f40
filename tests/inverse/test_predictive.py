"""The inverse model's predictive: modes against the S-shape's analytic
branches, importance draws against a fine grid (KS at the ESS's critical
value), output priors against the uniform predictive times their density, the
normalised density against the midpoint rule, and bad settings."""

import jax
import jax.numpy as jnp
import numpy as np
import numpyro.distributions as dist
import pytest
from scipy import stats

from bayeskde.inverse import (
    inverse_gp_predictive,
    inverse_gp_sample,
    predictive_log_density,
)
from tests.helpers import LOOSE, RTOL, assert_close
from tests.inverse.rounding import term_scale


def _branches(x):
    t = np.linspace(0, 1, 200001)
    f = t + 0.3 * np.sin(2 * np.pi * t) - x
    return t[np.flatnonzero(np.sign(f[:-1]) != np.sign(f[1:]))]


def test_predictive_modes_find_every_branch(sshape_fit):
    _, fit = sshape_fit
    roots = _branches(0.45)
    assert len(roots) == 3  # the oracle: t solving t + 0.3 sin(2 pi t) = 0.45
    x_single = 0.1 + 0.3 * np.sin(0.2 * np.pi)
    pr = inverse_gp_predictive(fit, np.array([0.45, x_single]), k=3, num_draws=10,
                               n_grid=400, noisy_inputs=False)
    np.testing.assert_allclose(np.sort(pr.modes[0, :, 0]), roots, atol=0.05)
    assert np.all(pr.mode_masses[0] > 0.05)
    assert abs(pr.modes[1, 0, 0] - 0.1) < 0.03 and pr.mode_masses[1, 0] > 0.95
    assert_close(np.exp(pr.log_probs).sum(1), 1.0, rtol=LOOSE)


def _grid_cdf(pred):
    """CDF of the piecewise-constant grid density (1-D) as a callable."""
    edges = np.r_[pred.support[:, 0] - pred.cell[0] / 2,
                  pred.support[-1, 0] + pred.cell[0] / 2]
    cdf = np.r_[0.0, np.cumsum(np.exp(pred.log_probs[0]))]
    return lambda t: np.interp(t, edges, cdf / cdf[-1])


# importance draws against the grid (about 30 s); the sampler's own tests stay in the
# default run
@pytest.mark.slow
def test_importance_draws_match_the_grid_in_one_dimension(sshape_fit):
    """The importance path (the one used above two outputs: adaptive
    importance sampling, Langevin chains, importance sampling from the chains)
    run on a 1-D task: its resampled draws against the fine grid's CDF (the
    same uniform prior), by the KS statistic at the 1% critical value of its
    effective sample size; its modes on the three branches."""
    _, fit = sshape_fit
    x = np.array([0.45])
    fine = inverse_gp_predictive(fit, x, num_draws=20, n_grid=4000, refine=False)
    imp = inverse_gp_predictive(fit, x, num_draws=20, sampler="importance",
                                key=jax.random.key(2))
    assert imp.sampler == "importance" and imp.support.shape[:2] == (1, 1024)
    ess = float(imp.ess[0])
    assert ess > 100
    draws = inverse_gp_sample(jax.random.key(3), fit, x, 4000, predictive=imp)
    D = stats.kstest(draws[0, :, 0], _grid_cdf(fine)).statistic
    assert D < 1.63 / np.sqrt(ess)
    roots = np.array([0.179195, 0.559415, 0.749995])  # t + 0.3 sin 2 pi t = 0.45
    np.testing.assert_allclose(np.sort(imp.modes[0, :, 0]), roots, atol=0.05)


def test_output_priors_multiply_the_likelihood(sshape_fit):
    """A NumPyro prior's grid predictive is the uniform one times its density,
    renormalised; a box confines the grid (and every draw) to it."""
    _, fit = sshape_fit
    x = np.array([0.45, 0.2])
    uni = inverse_gp_predictive(fit, x, num_draws=10, refine=False, margin=0.1)
    g = uni.support[:, 0]
    prior = dist.Normal(0.3, 0.15).expand([1]).to_event(1)
    got = inverse_gp_predictive(fit, x, num_draws=10, refine=False, margin=0.1,
                                output_prior=prior)
    ref = uni.log_probs + stats.norm(0.3, 0.15).logpdf(g)[None]
    ref -= np.logaddexp.reduce(ref, axis=1, keepdims=True)
    # the same likelihoods plus a log density: the sum's rounding, relative
    # to the log probabilities' size
    err = np.abs(got.log_probs - ref) / (1 + np.abs(ref))
    assert np.max(err) <= 10 * RTOL, (np.max(err), np.argmax(err))
    box = inverse_gp_predictive(fit, x, num_draws=10, output_prior=(0.5, 0.9),
                                refine=True)
    assert box.support.min() >= 0.5 and box.support.max() <= 0.9
    assert np.all((box.modes >= 0.5) & (box.modes <= 0.9))
    draws = inverse_gp_sample(jax.random.key(0), fit, x, 500, predictive=box)
    assert draws.min() >= 0.5 and draws.max() <= 0.9
    # a bounded distribution's support is the grid's box
    u = inverse_gp_predictive(fit, x, num_draws=10, refine=False,
                              output_prior=dist.Uniform(0.1, 0.6).expand([1])
                              .to_event(1))
    assert_close([u.support.min(), u.support.max()],
                 [0.1 + 0.25 / 512, 0.6 - 0.25 / 512])


def test_bad_predictive_settings(sshape_fit):
    _, fit = sshape_fit
    x = np.array([0.3])
    bad = [
        (dict(output_prior="foo"), ValueError, "output_prior"),
        (dict(output_prior=(1.0, 0.0)), ValueError, "low < high"),
        (dict(output_prior=([0.0, 0.0], [1.0, 1.0])), ValueError, "broadcast|shape"),
        (dict(output_prior=object()), TypeError, "output_prior"),
        (dict(output_prior=dist.Normal(jnp.zeros(3), 1.0).to_event(1)), ValueError,
         "log_prob"),
        (dict(sampler="grid2"), ValueError, "sampler"),
        (dict(n_grid=1), ValueError, "n_grid"),
        (dict(margin=-0.5), ValueError, "margin"),
        (dict(mode="mean"), ValueError, "mode"),
        (dict(k=0), ValueError, "k"),
        (dict(mode_radius=0.0), ValueError, "mode_radius"),
        (dict(sampler="importance", n_particles=1), ValueError, "n_particles"),
        (dict(sampler="importance", key="abc"), TypeError, "key"),
    ]
    for kw, err, msg in bad:
        with pytest.raises(err, match=msg):
            inverse_gp_predictive(fit, x, num_draws=3, **kw)
    for X_bad, msg in ((np.zeros((2, 3)), "X_test"), (np.array([np.nan]), "NaN|finite"),
                       (np.zeros((0, 1)), "empty")):
        with pytest.raises(ValueError, match=msg):
            inverse_gp_predictive(fit, X_bad, num_draws=3)
    with pytest.raises(TypeError, match="fit"):
        inverse_gp_predictive(None, x)


def test_normalised_density_integrates_to_one(sshape_fit):
    """predictive_log_density(normalized=True) on the grid's cells, summed by
    the midpoint rule, is 1 (a proper density of y); unnormalised it is the
    grid's log probabilities plus the log normaliser minus the log cell."""
    _, fit = sshape_fit
    x = np.array([0.45, 0.2, 0.8])
    pred = inverse_gp_predictive(fit, x, num_draws=10, n_grid=256, refine=False)
    cells = np.broadcast_to(pred.support, (3, *pred.support.shape))
    lp = predictive_log_density(pred, cells, x[:, None], normalized=True)
    assert lp.shape == (3, 256)
    total = np.exp(lp).sum(1) * float(np.prod(pred.cell))
    # the grid's program and the per-point program round differently: by
    # sqrt(eps) of the terms of each log density (tests.inverse.rounding),
    # averaged over the cells by their mass
    scale = term_scale(pred.mixture, pred.support, x[:, None], 1.0)
    bound = LOOSE * np.sum(np.exp(pred.log_probs) * scale, axis=1)
    assert np.all(np.abs(total - 1.0) <= bound), (total, bound)
    raw = predictive_log_density(pred, cells, x[:, None])
    assert_close(raw - pred.log_normalizer[:, None], lp, rtol=RTOL, atol=RTOL)
