"""Draws of the inverse model's predictive by the grid: draws against the exact
CDF of the grid density they come from (KS), the refined grid against the
midpoint rule of the finer grid (exactly), its draws' moments against the fine
grid's (Monte Carlo); bad settings."""

import jax
import numpy as np
import pytest
from scipy import stats

import bayeskde.inverse.sample as sample_module
from bayeskde.inverse import inverse_gp_predictive, inverse_gp_sample
from tests.helpers import LOOSE, RTOL, assert_close
from tests.inverse.rounding import term_scale


def _grid_cdf(pred):
    """CDF of the piecewise-constant grid density (1-D) as a callable."""
    edges = np.r_[pred.support[:, 0] - pred.cell[0] / 2,
                  pred.support[-1, 0] + pred.cell[0] / 2]
    cdf = np.r_[0.0, np.cumsum(np.exp(pred.log_probs[0]))]
    return lambda t: np.interp(t, edges, cdf / cdf[-1])


def test_grid_draws_follow_the_grid_predictive(sshape_fit):
    """KS test of draws against the exact CDF of the grid density they come
    from, at a three-branch input; and the default grid against a 4,000-cell
    one (discretisation)."""
    _, fit = sshape_fit
    x = np.array([0.45])
    pred = inverse_gp_predictive(fit, x, num_draws=20, refine=False)
    draws = inverse_gp_sample(jax.random.key(5), fit, x, 4000, predictive=pred,
                              subdivide=1)
    assert draws.shape == (1, 4000, 1)
    assert stats.kstest(draws[0, :, 0], _grid_cdf(pred)).pvalue > 0.01
    fine = inverse_gp_predictive(fit, x, num_draws=20, n_grid=4000, refine=False)
    assert stats.kstest(draws[0, :, 0], _grid_cdf(fine)).pvalue > 0.01
    again = inverse_gp_sample(jax.random.key(5), fit, x, 4000, predictive=pred,
                              subdivide=1)
    np.testing.assert_array_equal(draws, again)
    # the default refines every one of the 512 cells 8-fold: the draws of a
    # 4,096-cell midpoint rule, against the 4,000-cell grid's CDF
    refined = inverse_gp_sample(jax.random.key(6), fit, x, 4000, predictive=pred)
    assert stats.kstest(refined[0, :, 0], _grid_cdf(fine)).pvalue > 0.01


def _by_position(pts, lp, step):
    """Log masses keyed by their points' integer positions on a grid of
    spacing ``step`` (float rounding of the centres is well below it)."""
    keys = np.round(pts / step - 0.5).astype(int)
    order = np.lexsort(keys.T[::-1])
    return keys[order], lp[order]


# a grid 4x finer per dimension (about 45 s); the narrow-density test of the refined
# grid stays in the default run
@pytest.mark.slow
@pytest.mark.parametrize("noise", ["gaussian", "residual"])
def test_refined_grid_is_the_midpoint_rule_of_the_finer_grid(noise, monkeypatch,
                                                              moons_fit):
    """Every cell of a 12 x 12 grid split 8 x 8 is the 96 x 96 grid's midpoint
    rule exactly (centres and masses); with only the 10 most probable cells
    split, those cells' sub-masses are the 96 x 96 grid's up to one constant
    (the normalisation) and every other cell keeps its coarse mass."""
    x, th, fit = moons_fit(noise)
    xo = x[:2]
    coarse = inverse_gp_predictive(fit, xo, num_draws=20, n_grid=12, refine=False)
    fine = inverse_gp_predictive(fit, xo, num_draws=20, n_grid=96, refine=False)
    step = np.asarray(fine.cell, float)
    lo = fine.support.min(0) - step / 2
    cen, lm, width = sample_module._refined_grid(coarse, xo, 8)
    assert cen.shape == (2, 96 * 96, 2) and width.shape == (96 * 96, 2)
    assert_close(width, np.broadcast_to(step, width.shape))
    # programs of other shapes round the log likelihoods differently, by
    # sqrt(eps) of their terms (tests.inverse.rounding); compared where the
    # mass is above 1e-12 of the largest
    mix = fine.mixture
    for i in range(2):
        kf, lf = _by_position(fine.support - lo, fine.log_probs[i], step)
        kr, lr = _by_position(cen[i] - lo, lm[i], step)
        np.testing.assert_array_equal(kr, kf)
        big = lf > lf.max() - 27.6
        # the fine grid's scale at its cells, in the same (sorted) order
        tol = LOOSE * term_scale(mix, fine.support, xo[i:i + 1], 1.0)[0]
        tol = _by_position(fine.support - lo, tol, step)[1]
        assert np.all(np.abs(lr[big] - lf[big]) <= 2 * tol[big])
    # part of the grid refined: K = 640 // 64 = 10 cells
    monkeypatch.setattr(sample_module, "GRID_REFINE_EVALS", 640)
    cen, lm, width = sample_module._refined_grid(coarse, xo, 8)
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
        # (in float64 on the host: to float64 rounding of the log masses)
        ok = np.isfinite(want[1])
        np.testing.assert_array_equal(np.isfinite(kept[1]), ok)
        shift = kept[1][ok] - want[1][ok]
        err = np.abs(shift - shift[0]) / (1 + np.abs(want[1][ok]))
        assert err.max() <= RTOL, err.max()
        # the sub-cells: the fine grid's masses there, shifted by one constant
        kf, lf = _by_position(fine.support - lo, fine.log_probs[i], step)
        kr, lr = _by_position(cen[i, :640] - lo, lm[i, :640], step)
        pos = {tuple(k): j for j, k in enumerate(kf)}
        lf = lf[[pos[tuple(k)] for k in kr]]
        big = lf > lf.max() - 27.6
        tol = LOOSE * term_scale(mix, cen[i, :640], xo[i:i + 1], 1.0)[0]
        tol = _by_position(cen[i, :640] - lo, tol, step)[1]
        diff = (lr - lf)[big]
        assert np.all(np.abs(diff - diff[0]) <= 2 * (tol[big] + tol[big][0]))
        assert_close(np.logaddexp.reduce(lm[i]), 0.0, atol=RTOL)


def test_refined_grid_draws_resolve_a_density_narrower_than_a_cell(moons_fit):
    """On a 6 x 6 grid (cells a third of the box, wider than the density's
    spread of 0.09 in y_1) the draws of the 16-fold refined grid have the
    mean and spread of the 96 x 96 grid's density (Monte Carlo error), and
    the coarse cells' draws do not."""
    x, th, fit = moons_fit("gaussian")
    xo = x[3:4]
    coarse = inverse_gp_predictive(fit, xo, num_draws=20, n_grid=6, refine=False)
    fine = inverse_gp_predictive(fit, xo, num_draws=20, n_grid=96, refine=False)
    w = np.exp(fine.log_probs[0])
    mean = w @ fine.support
    sd = np.sqrt(w @ fine.support**2 - mean**2 + np.asarray(fine.cell) ** 2 / 12)
    n = 20_000
    got = inverse_gp_sample(jax.random.key(4), fit, xo, n,
                                    predictive=coarse, subdivide=16)[0]
    assert np.all(np.abs(got.mean(0) - mean) < 5 * sd / np.sqrt(n))
    # sd of a sample sd: sd / sqrt(2 n) for a near-Gaussian peak, 6 of them
    assert np.all(np.abs(got.std(0) - sd) < 6 * sd / np.sqrt(2 * n))
    flat = inverse_gp_sample(jax.random.key(4), fit, xo, n,
                                     predictive=coarse, subdivide=1)[0]
    # the same check fails for the coarse cells' draws
    assert np.any(np.abs(flat.std(0) - sd) > 6 * sd / np.sqrt(2 * n))




def test_bad_sample_settings(sshape_fit):
    _, fit = sshape_fit
    x = np.array([0.3])
    key = jax.random.key(0)
    with pytest.raises(ValueError, match="num_samples"):
        inverse_gp_sample(key, fit, x, 0, num_draws=3)
    with pytest.raises(TypeError, match="key"):
        inverse_gp_sample("abc", fit, x, 5, num_draws=3)
    with pytest.raises(ValueError, match="subdivide"):
        inverse_gp_sample(key, fit, x, 5, num_draws=3, subdivide=0)
    with pytest.raises(ValueError, match="sampler"):
        inverse_gp_sample(key, fit, x, 5, sampler="mh")
    pred = inverse_gp_predictive(fit, np.array([0.2, 0.3, 0.4]), num_draws=3,
                                 n_grid=32, refine=False)
    for sub in (1, 8):  # a predictive of other rows, refined or not
        with pytest.raises(ValueError, match="predictive"):
            inverse_gp_sample(key, fit, np.array([0.2, 0.3]), 5, predictive=pred,
                              subdivide=sub)
