"""The Laplace-mixture importance sampler of the predictive (``sampler=
"laplace"``, the default above two outputs): its weighted draws and
normaliser against the grid predictive's exact moments and midpoint rule,
the solutions of a deterministic simulator, same key same draws with one
compiled program, bad settings.

Monte Carlo tolerances: each test input of a call gets its own draws, so a
call on R copies of one test input gives R independent estimates, and their
spread is the standard error the bounds use."""

import functools

import jax
import numpy as np
import pytest

from bayeskde.inverse import fit_inverse_gp, inverse_gp_predictive, inverse_gp_sample
from tests.helpers import count_compilations
from tests.inverse.conftest import MOONS_PRIOR

#: Independent importance samples (copies of one test input) per check.
REPS = 8
#: z-score bound on a Monte Carlo estimate against its oracle (two-sided p
#: about 0.005 under a t with REPS - 1 degrees of freedom).
Z = 4.0


def _weighted_moments(pred):
    w = np.exp(pred.log_probs)  # (R, N)
    m = np.einsum("rn,rnd->rd", w, pred.support)
    v = np.einsum("rn,rnd->rd", w, (pred.support - m[:, None]) ** 2)
    return m, np.sqrt(v)


def test_laplace_matches_the_grid_predictive(moons_fit):
    """Two outputs, where a 200 x 200 grid is exact up to its cells: the
    Laplace stage's weighted means and sds and its log normaliser agree with
    the grid's within Z standard errors of REPS independent samples (plus a
    cell's half width for the moments)."""
    x, _, fit = moons_fit("gaussian")
    for x0 in (x[3], x[11]):
        grid = inverse_gp_predictive(fit, x0[None], n_grid=200, refine=False)
        p = np.exp(grid.log_probs[0])
        c = np.asarray(grid.support, float)
        g_mean = p @ c
        g_sd = np.sqrt(p @ (c - g_mean) ** 2 + np.asarray(grid.cell) ** 2 / 12)
        lap = inverse_gp_predictive(fit, np.repeat(x0[None], REPS, 0),
                                    sampler="laplace", key=jax.random.key(5))
        assert lap.sampler == "laplace" and lap.support.shape == (REPS, 1024, 2)
        assert np.all(lap.ess > 50), lap.ess
        m, s = _weighted_moments(lap)
        half = np.asarray(grid.cell, float) / 2
        se_m = m.std(0, ddof=1) / np.sqrt(REPS)
        se_s = s.std(0, ddof=1) / np.sqrt(REPS)
        assert np.all(np.abs(m.mean(0) - g_mean) <= Z * se_m + half), (m, g_mean)
        assert np.all(np.abs(s.mean(0) - g_sd) <= Z * se_s + half), (s, g_sd)
        lz = lap.log_normalizer
        se_z = lz.std(ddof=1) / np.sqrt(REPS)
        # the midpoint rule's error at 200 cells a side is far below 0.01 nats
        assert abs(lz.mean() - grid.log_normalizer[0]) <= Z * se_z + 0.01, (
            lz, grid.log_normalizer)


def _kinematics(t):
    """A deterministic three-joint planar arm: the elbow's and the hand's
    positions minus the wrist's x (three outputs of three angles)."""
    a = np.cumsum(t, axis=1)
    links = np.array([1.0, 0.8, 0.5])
    p = np.cumsum(np.stack([links * np.cos(a), links * np.sin(a)], -1), axis=1)
    return np.stack([p[:, 1, 0], p[:, 2, 0], p[:, 2, 1]], 1)


@functools.cache
def _noise_free_fit():
    rng = np.random.default_rng(0)
    lim = np.array([[-1.2, 1.2], [0.2, 2.0], [-1.2, 1.2]])
    th = lim[:, 0] + np.ptp(lim, 1) * rng.uniform(size=(150, 3))
    th_test = lim[:, 0] + np.ptp(lim, 1) * rng.uniform(size=(12, 3))
    fit = fit_inverse_gp(jax.random.key(0), _kinematics(th), th, MOONS_PRIOR,
                         method="quadrature", num_samples=30, progress_bar=False,
                         num_replicates=2, noise="gaussian")
    return fit, _kinematics(th_test)


@pytest.mark.slow
def test_laplace_finds_a_deterministic_simulators_solutions():
    """Noise-free training data: the noise posterior collapses and the
    predictive is a few narrow spikes. The top mode's re-simulation error
    through the true kinematics is at the forward GP's own error: below 1% of
    the inputs' range at the median (measured: float64 about 1e-5, float32
    0.005 at the noise floor of :func:`~bayeskde.inverse.mixture.noise_floor`,
    0.47 without it), and the draws' weights are not degenerate."""
    fit, X_test = _noise_free_fit()
    lap = inverse_gp_predictive(fit, X_test, sampler="laplace")
    err = np.linalg.norm(_kinematics(lap.modes[:, 0]) - X_test, axis=1)
    span = np.ptp(X_test, axis=0).mean()
    assert np.median(err) < 0.01 * span, err
    assert np.median(lap.ess) > 100, lap.ess


def test_laplace_same_key_same_draws_one_program(moons_fit):
    x, _, fit = moons_fit("gaussian")
    X = x[:5]
    a = inverse_gp_sample(jax.random.key(1), fit, X, 300, sampler="laplace")
    with count_compilations() as c:
        b = inverse_gp_sample(jax.random.key(1), fit, X, 300, sampler="laplace")
    assert c.count == 0
    np.testing.assert_array_equal(a, b)
    other = inverse_gp_sample(jax.random.key(2), fit, X, 300, sampler="laplace")
    assert a.shape == (5, 300, 2) and not np.array_equal(a, other)


def test_laplace_refuses_bad_settings(moons_fit):
    x, _, fit = moons_fit("gaussian")
    with pytest.raises(ValueError, match="n_particles"):
        inverse_gp_predictive(fit, x[:2], sampler="laplace", n_particles=1)
    with pytest.raises(TypeError, match="key"):
        inverse_gp_predictive(fit, x[:2], sampler="laplace", key="abc")
    with pytest.raises(ValueError, match="sampler"):
        inverse_gp_predictive(fit, x[:2], sampler="laplac")


@pytest.mark.slow
def test_auto_draws_fall_back_to_nuts_where_the_weights_degenerate():
    """``sampler="auto"`` above two outputs keeps the Laplace stage's draws
    for the test inputs whose effective sample size reaches ``min_ess`` of its
    particles and draws the others by NUTS: with ``min_ess=1`` every row is
    NUTS's (the same draws as NUTS on that predictive and key), with 0 none
    (the Laplace stage's own resample)."""
    from bayeskde.inverse import inverse_gp_nuts

    fit, X_test = _noise_free_fit()
    X = X_test[:2]
    pred = inverse_gp_predictive(fit, X, sampler="laplace", refine=False)
    key = jax.random.key(4)
    none = inverse_gp_sample(key, fit, X, 100, predictive=pred, min_ess=0.0)
    lap = inverse_gp_sample(key, fit, X, 100, predictive=pred, sampler="laplace")
    np.testing.assert_array_equal(none, lap)
    every = inverse_gp_sample(key, fit, X, 100, predictive=pred, min_ess=1.0)
    ref, _ = inverse_gp_nuts(key, fit, X, 100, predictive=pred)
    np.testing.assert_array_equal(every, ref)
    with pytest.raises(ValueError, match="min_ess"):
        inverse_gp_sample(key, fit, X, 100, predictive=pred, min_ess=2.0)
