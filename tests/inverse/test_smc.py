"""SMC draws of the inverse model's predictive (likelihood tempering): draws
against the grid predictive's exact moments and the grid sampler's draws, an
exactly symmetric bimodal predictive's two halves, the log evidence against
brute-force quadrature on a fine grid, same key same draws with one compiled
program, bad inputs.

Monte Carlo tolerances: each test input of a call gets its own particle
system, so a call on R copies of one test input gives R independent
estimates, and their spread is the standard error the bounds use."""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from bayeskde.inverse import (
    fit_inverse_gp,
    inverse_gp_predictive,
    inverse_gp_sample,
    inverse_gp_smc,
)
from bayeskde.inverse.mixture import blocked_log_likelihood, fit_mixture
from bayeskde.inverse.output_prior import log_prior
from tests.helpers import count_compilations
from tests.inverse.conftest import MOONS_PRIOR, moons_like

#: Independent particle systems (copies of one test input) per check.
REPS = 8
#: z-score bound on a Monte Carlo estimate against its oracle (two-sided p
#: about 0.005 under a t with REPS - 1 degrees of freedom).
Z = 4.0


def _reps(x):
    return np.repeat(np.asarray(x, float)[None], REPS, axis=0)


def _grid_moments(pred):
    """Mean and sd of the grid predictive's piecewise-constant density of its
    first test input (cells uniform: the cell's variance added)."""
    p = np.exp(pred.log_probs[0] - np.logaddexp.reduce(pred.log_probs[0]))
    c = np.asarray(pred.support, float)
    mean = p @ c
    var = p @ (c - mean) ** 2 + np.asarray(pred.cell, float) ** 2 / 12
    return mean, np.sqrt(var)


def test_smc_matches_the_grid_predictive(moons_fit):
    """On the moons-like fit (two outputs, where the grid is exact up to its
    cells) the SMC draws' means and sds agree with a 200 x 200 grid's within
    Z standard errors of REPS independent particle systems, and the grid
    sampler's own draws agree with both."""
    x, th, fit = moons_fit("gaussian")
    x0 = x[3]
    pred = inverse_gp_predictive(fit, x0[None], n_grid=200, refine=False)
    g_mean, g_sd = _grid_moments(pred)
    draws, rep = inverse_gp_smc(jax.random.key(3), fit, _reps(x0), 512,
                                num_particles=512, spectrum_tol=0.0)
    assert draws.shape == (REPS, 512, 2) and rep.reached
    assert np.all(rep.betas[np.arange(REPS), rep.num_stages - 1] == 1.0)
    m, s = draws.mean(1), draws.std(1)  # (REPS, 2)
    se_m = m.std(0, ddof=1) / np.sqrt(REPS)
    se_s = s.std(0, ddof=1) / np.sqrt(REPS)
    grid_err = np.asarray(pred.cell, float) / 2  # a cell's half width
    assert np.all(np.abs(m.mean(0) - g_mean) <= Z * se_m + grid_err), (m.mean(0),
                                                                      g_mean, se_m)
    assert np.all(np.abs(s.mean(0) - g_sd) <= Z * se_s + grid_err), (s.mean(0),
                                                                    g_sd, se_s)
    grid = inverse_gp_sample(jax.random.key(4), fit, x0[None], 20_000,
                             sampler="grid", predictive=pred, subdivide=1)[0]
    se_g = grid.std(0) / np.sqrt(len(grid))
    assert np.all(np.abs(grid.mean(0) - m.mean(0)) <= Z * np.hypot(se_m, se_g)
                  + grid_err)


@functools.cache
def _mirrored_fit():
    """A moons-like fit on data closed under (theta, x_1) -> (-theta, -x_1):
    the RBF kernel, the centring of x and the prior's box share the symmetry,
    so the predictive at x* = (0, c) is exactly symmetric under theta ->
    -theta. For c = -0.3 it has two separated modes, theta near +-(0.41,
    -0.73)."""
    x, th = moons_like(40, seed=3)
    X = np.concatenate([x, x * np.array([-1.0, 1.0])])
    Y = np.concatenate([th, -th])
    return fit_inverse_gp(jax.random.key(0), X, Y, MOONS_PRIOR, method="quadrature",
                          num_samples=30, progress_bar=False)


def test_smc_gives_symmetric_modes_equal_mass():
    """Both modes of an exactly symmetric bimodal predictive get mass 1/2
    within Z standard errors (the spread of REPS particle systems), and
    both are populated in every system."""
    fit = _mirrored_fit()
    draws, rep = inverse_gp_smc(jax.random.key(5), fit, _reps([0.0, -0.3]), 512,
                                num_particles=512)
    assert rep.reached
    frac = (draws[..., 0] > 0).mean(1)  # (REPS,)
    assert np.all((frac > 0.2) & (frac < 0.8)), frac
    se = max(frac.std(ddof=1) / np.sqrt(REPS), 0.5 / np.sqrt(REPS * 512))
    assert abs(frac.mean() - 0.5) <= Z * se, (frac, se)


def test_smc_log_evidence_matches_quadrature(moons_fit):
    """log p(x* | D) = log int p(x* | y, D) p(y) dy from the tempering path
    against the midpoint rule on a 200 x 200 grid over the prior's box (the
    same likelihood, all eigenpairs): within Z standard errors of REPS
    estimates plus 0.02 nats for the rule and the components pruned."""
    x, th, fit = moons_fit("gaussian")
    x0 = x[7]
    mix = fit_mixture(fit, "average", 100)
    pred = inverse_gp_predictive(fit, x0[None], n_grid=200, refine=False)
    cells = jnp.asarray(pred.support, fit.data.X.dtype)
    ll = blocked_log_likelihood(mix, cells, jnp.asarray(x0[None], cells.dtype),
                                jnp.asarray(1.0, cells.dtype))[0]
    lp = np.asarray(log_prior(pred.prior.kind, pred.prior.params, cells), float)
    log_z = np.logaddexp.reduce(ll + lp) + np.sum(np.log(pred.cell))
    _, rep = inverse_gp_smc(jax.random.key(6), fit, _reps(x0), 64,
                            num_particles=512, spectrum_tol=0.0)
    est = rep.log_evidence
    se = est.std(ddof=1) / np.sqrt(REPS)
    assert abs(est.mean() - log_z) <= Z * se + 0.02, (est, log_z)
    # the reported standard error is the spread's order of magnitude
    assert 0.2 < np.median(rep.log_evidence_se) / est.std(ddof=1) < 5


def test_smc_same_key_same_draws_one_program(moons_fit):
    """Same key, same draws (through inverse_gp_sample's "smc"); a repeated
    call of the same shapes compiles nothing; more draws than particles come
    from further sweeps (no repeats of the first sweep)."""
    x, th, fit = moons_fit("gaussian")
    a = inverse_gp_sample(jax.random.key(1), fit, x[:2], 100, sampler="smc",
                          num_particles=64)
    with count_compilations() as c:
        b = inverse_gp_sample(jax.random.key(1), fit, x[:2], 100, sampler="smc",
                              num_particles=64)
    assert c.count == 0
    np.testing.assert_array_equal(a, b)
    assert a.shape == (2, 100, 2)
    assert len(np.unique(a[0], axis=0)) > 64


def test_smc_refuses_bad_inputs(moons_fit):
    x, th, fit = moons_fit("gaussian")
    k = jax.random.key(0)
    with pytest.raises(ValueError, match="num_samples"):
        inverse_gp_smc(k, fit, x[:1], 0)
    with pytest.raises(ValueError, match=r"X_test must have shape \(n_test, 2\)"):
        inverse_gp_smc(k, fit, np.zeros((1, 3)), 10)
    with pytest.raises(ValueError, match="X_test"):
        inverse_gp_smc(k, fit, np.array([[np.nan, 0.0]]), 10)
    with pytest.raises(ValueError, match="target_ess"):
        inverse_gp_smc(k, fit, x[:1], 10, target_ess=1.0)
    with pytest.raises(ValueError, match="num_particles"):
        inverse_gp_smc(k, fit, x[:1], 10, num_particles=1)
    with pytest.raises(TypeError, match="fit"):
        inverse_gp_smc(k, None, x[:1], 10)
    with pytest.raises(ValueError, match="sampler"):
        inverse_gp_sample(k, fit, x[:1], 10, sampler="tempered")
