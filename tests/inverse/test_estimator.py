"""The scikit-learn facade of the inverse model: its point prediction against
the S-shape's analytic branches, its score (the mean log predictive density)
against a brute-force normalisation of the same density on a finer grid, its
draws and its memo of the last predictive."""

import jax
import numpy as np
import pytest
from sklearn.exceptions import NotFittedError

import bayeskde
from bayeskde.datasets import make_sshape
from bayeskde.inverse import (
    InverseGPRegressor,
    inverse_gp_sample,
    predictive_log_density,
)
from bayeskde.tgp import Modes
from tests.helpers import LOOSE
from tests.inverse.conftest import SSHAPE_PRIOR
from tests.inverse.rounding import term_scale


def _branches(x):
    """Every t in [0, 1] with t + 0.3 sin(2 pi t) = x (the S-shape's inverse)."""
    t = np.linspace(0, 1, 200001)
    f = t + 0.3 * np.sin(2 * np.pi * t) - x
    return t[np.flatnonzero(np.sign(f[:-1]) != np.sign(f[1:]))]


@pytest.fixture(scope="module")
def est():
    d = make_sshape(jax.random.key(0), 150)
    reg = InverseGPRegressor(SSHAPE_PRIOR, key=jax.random.key(0), num_samples=30,
                             num_chains=2, num_draws=5)
    return d, reg.fit(d.x_train[:, None], d.t_train)


def test_root_export_and_not_fitted():
    assert bayeskde.InverseGPRegressor is InverseGPRegressor
    with pytest.raises(NotFittedError):
        InverseGPRegressor().predict(np.zeros((2, 1)))


def test_predict_is_a_branch_of_the_inverse(est):
    """Every prediction lies on one of the analytic branches t(x) (within the
    noise's effect on the mode, 0.05); where there is one branch, on it; the
    modes come with masses in decreasing order."""
    d, reg = est
    z = d.x_test[::50, None]
    pred = reg.predict(z)
    res = reg.predict_modes(z, 2)
    assert isinstance(res, Modes) and res.modes.shape == (10, 2, 1)
    assert pred.shape == (10,)
    assert np.all(np.diff(res.masses, axis=1) <= 0)
    for x, p in zip(z[:, 0], pred, strict=True):
        roots = _branches(x)
        assert np.min(np.abs(roots - p)) < 0.05, (x, p, roots)


@pytest.mark.slow  # a second predictive and its draws (about 30 s)
def test_sample_uses_the_memoised_predictive(est):
    d, reg = est
    z = d.x_test[::100, None]
    reg.predict_modes(z, 2)
    held = reg.fit_.memo.peek("predictive")
    s = reg.sample(z, 50, key=jax.random.key(3))
    assert s.shape == (5, 50, 1)
    np.testing.assert_array_equal(s, inverse_gp_sample(
        jax.random.key(3), reg.fit_, z, 50, predictive=held[1]))
    np.testing.assert_array_equal(s, reg.sample(z, 50, key=jax.random.key(3)))


def test_score_is_the_mean_log_predictive_density(est):
    """Oracle: the unnormalised density of (B) at the held-out y and on a grid
    4 times finer than the predictive's, normalised there by the midpoint
    rule. The two normalisers differ by the midpoint rule's error, at most
    (b - a) h^2 / 24 max |p''| for the coarse cells h (p'' estimated on the
    fine grid), and by rounding (sqrt(eps) of the log densities' terms)."""
    d, reg = est
    t_train = d.t_train
    inside = (d.t_test > t_train.min() + 0.02) & (d.t_test < t_train.max() - 0.02)
    X, y = d.x_test[inside][::60, None], d.t_test[inside][::60]
    score = reg.score(X, y)
    pred = reg.predict_distribution(X)
    low, high = float(pred.prior.low[0]), float(pred.prior.high[0])
    n_coarse = pred.support.shape[0]
    n_fine = 4 * n_coarse
    h = (high - low) / n_fine
    fine = low + (np.arange(n_fine) + 0.5) * h
    grid = np.broadcast_to(fine[None, :, None], (len(X), n_fine, 1))
    lf = predictive_log_density(pred, grid, X)  # unnormalised
    log_z = np.logaddexp.reduce(lf, axis=1) + np.log(h)
    at_y = predictive_log_density(pred, y[:, None, None], X)[:, 0]
    oracle = at_y - log_z
    assert np.all(np.isfinite(oracle))
    # the midpoint rule's error bound of the coarse normaliser, relative
    p = np.exp(lf - lf.max(axis=1, keepdims=True))
    z = p.sum(1) * h
    d2 = np.abs(np.diff(p, 2, axis=1)).max(1) / h**2
    hc = (high - low) / n_coarse
    quad = (high - low) * hc**2 / 24 * d2 / z
    rounding = LOOSE * np.max(term_scale(pred.mixture, pred.support, X, 1.0), 1)
    assert abs(score - oracle.mean()) <= np.mean(quad + rounding), (score,
                                                                    oracle.mean())
    w = np.linspace(1.0, 2.0, len(X))
    assert abs(reg.score(X, y, sample_weight=w) - np.average(oracle, weights=w)) <= (
        np.max(quad + rounding))
    with pytest.raises(ValueError, match="y must have shape"):
        reg.score(X, np.ones(len(X) + 1))
