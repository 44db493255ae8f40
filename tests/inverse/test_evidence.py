"""Generative inverse model: evidence, predictive and fit against brute force."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import stats
from sklearn.exceptions import NotFittedError

from bayeskde.datasets import make_sshape
from bayeskde.learn import (
    InverseGPRegressor,
    Modes,
    fit_inverse_gp,
    inverse_gp_predictive,
)
from bayeskde.models import (
    InverseGPPrior,
    exact_replicates,
    inverse_gp_log_probs,
    pair_log_evidence,
    prepare_inverse_gp_data,
)
from tests.conftest import X64

PRIOR = InverseGPPrior(max_degree=2, n_gamma=5, gamma_low=0.3, gamma_high=30.0)


def _gram(Y, gamma, alpha):
    d2 = ((Y[:, None, :] - Y[None, :, :]) ** 2).sum(-1)
    return sum(a * np.exp(-(i + 1) * gamma * d2) for i, a in enumerate(alpha))


def _hsic(K, L):
    m = len(K)
    H = np.eye(m) - 1.0 / m
    return np.trace(H @ K @ H @ L) / (m - 1) ** 2


@pytest.fixture(scope="module")
def small():
    r = np.random.default_rng(3)
    Y = r.uniform(size=(25, 1))
    X = np.c_[np.sin(4 * Y[:, 0]), Y[:, 0] ** 2] + 0.1 * r.normal(size=(25, 2))
    return Y, X, prepare_inverse_gp_data(Y, X, PRIOR)


def test_alpha_is_the_normalised_hsic_column(small):
    Y, X, data = small
    Xc = X - X.mean(0)
    g = float(data.gammas[2])
    d2 = ((Y - Y.T) ** 2)
    C = np.array([_hsic(np.exp(-(i + 1) * g * d2), Xc @ Xc.T) for i in range(2)])
    np.testing.assert_allclose(data.alpha[2, 1], C / C.sum(), rtol=1e-4)
    np.testing.assert_allclose(data.alpha[2, 0], [1.0, 0.0], atol=1e-6)


def test_exact_replicates_are_the_gp_posterior_predictive(small):
    """Monte Carlo against the direct posterior predictive at the training
    outputs: for pair (g, d), mean a^2 K (a^2 K + s^2 I)^-1 Xc + x_mean and
    covariance a^2 K - a^2 K (a^2 K + s^2 I)^-1 a^2 K + s^2 I, K = phi(K) of
    the pair; two pairs of equal conditional mass give the equal mixture, and
    the pairs drawn follow that mass."""
    Y, X, data = small
    n, a, s = 6000, 0.7, 0.05
    lj = np.full((n, PRIOR.n_gamma, 2), -np.inf)
    lj[:, 1, 0] = lj[:, 3, 1] = 0.0
    cache = {}
    x, pair = exact_replicates(jax.random.key(5), data, np.full(n, a),
                               np.full(n, s), lj, cache)
    assert x.shape == (n, 25, 2) and x.dtype == data.X.dtype
    assert set(cache) == {(1, 0), (3, 1)}
    assert abs(np.mean(pair == 1 * 2 + 0) - 0.5) < 4 * 0.5 / np.sqrt(n)
    Xc = X - X.mean(0)
    for (g, d) in [(1, 0), (3, 1)]:
        K = a * _gram(Y, float(data.gammas[g]), np.asarray(data.alpha[g, d], float))
        G = K @ np.linalg.inv(K + s * np.eye(len(Y)))
        mean = G @ Xc + X.mean(0)
        var = np.diag(K - G @ K) + s
        xs = np.asarray(x[pair == g * 2 + d], np.float64)
        se = np.sqrt(var / len(xs))[:, None]
        assert np.max(np.abs(xs.mean(0) - mean) / se) < 5.0
        assert np.max(np.abs(xs.var(0) / var[:, None] - 1.0)) < 5 * np.sqrt(2 / len(xs))


def test_evidence_matches_direct_gaussian_density(small):
    Y, X, data = small
    a, s = 0.7, 0.05
    ev = np.asarray(pair_log_evidence(data, jnp.asarray(a, data.X.dtype),
                                      jnp.asarray(s, data.X.dtype)))
    Xc = X - X.mean(0)
    for g in range(PRIOR.n_gamma):
        for d in range(2):
            S = a * _gram(Y, float(data.gammas[g]), np.asarray(data.alpha[g, d],
                                                                float))
            S += s * np.eye(len(Y))
            ref = sum(stats.multivariate_normal(np.zeros(len(Y)), S).logpdf(c)
                      for c in Xc.T)
            # float32 eigendecomposition: eigenvalue errors ~ m eps lambda_max
            np.testing.assert_allclose(ev[g, d], ref, rtol=1e-9 if X64 else 1e-3,
                                       atol=1e-9 if X64 else 1e-3)


def test_predictive_is_bayes_rule_on_the_gp_predictive(small):
    Y, X, data = small
    a, s = 0.7, 0.05
    g, d = 3, 1
    lj = np.full((1, PRIOR.n_gamma, 2), -np.inf)
    lj[0, g, d] = 0.0
    cand = np.linspace(0, 1, 7)[:, None]
    Xt = np.array([[0.5, 0.2], [-0.3, 0.8]])
    lp = np.asarray(inverse_gp_log_probs(data, np.array([a]), np.array([s]), lj,
                                         cand, Xt))
    alpha = np.asarray(data.alpha[g, d], float)
    gam = float(data.gammas[g])
    S = a * _gram(Y, gam, alpha) + s * np.eye(len(Y))
    d2 = (cand - Y.T) ** 2
    ks = a * sum(c * np.exp(-(i + 1) * gam * d2) for i, c in enumerate(alpha))
    Xc = X - X.mean(0)
    mean = ks @ np.linalg.solve(S, Xc) + X.mean(0)
    var = a * alpha.sum() - np.sum(ks * np.linalg.solve(S, ks.T).T, 1) + s
    ll = np.stack([stats.norm.logpdf(x[None], mean, np.sqrt(var[:, None])).sum(1)
                   for x in Xt])
    ref = ll - np.logaddexp.reduce(ll, axis=1, keepdims=True)
    np.testing.assert_allclose(lp, ref, rtol=1e-7 if X64 else 2e-3,
                               atol=1e-7 if X64 else 2e-3)


def test_bad_data():
    with pytest.raises(ValueError, match="same number of rows"):
        prepare_inverse_gp_data(np.zeros((5, 1)), np.ones((4, 1)))
    with pytest.raises(ValueError, match="constant"):
        prepare_inverse_gp_data(np.arange(5.0), np.ones(5))
    with pytest.raises(ValueError, match="n_gamma"):
        prepare_inverse_gp_data(np.arange(5.0), np.arange(5.0),
                                InverseGPPrior(n_gamma=0))


@pytest.fixture(scope="module")
def sshape_fit():
    d = make_sshape(jax.random.key(0), 150)
    prior = InverseGPPrior(max_degree=2, n_gamma=8)
    fit = fit_inverse_gp(jax.random.key(1), d.x_train, d.t_train, prior,
                         num_warmup=40, num_samples=40, num_chains=2,
                         progress_bar=False, n_replicates=2)
    return d, fit


def _branches(x):
    t = np.linspace(0, 1, 200001)
    f = t + 0.3 * np.sin(2 * np.pi * t) - x
    return t[np.flatnonzero(np.sign(f[:-1]) != np.sign(f[1:]))]


def test_predictive_modes_find_every_branch(sshape_fit):
    _, fit = sshape_fit
    roots = _branches(0.45)
    assert len(roots) == 3  # the oracle: t solving t + 0.3 sin(2 pi t) = 0.45
    x_single = 0.1 + 0.3 * np.sin(0.2 * np.pi)
    pr = inverse_gp_predictive(fit, np.array([0.45, x_single]), k=3, n_draws=10,
                               n_grid=400, noisy_inputs=False)
    np.testing.assert_allclose(np.sort(pr.modes[0, :, 0]), roots, atol=0.05)
    assert np.all(pr.mode_masses[0] > 0.05)
    assert abs(pr.modes[1, 0, 0] - 0.1) < 0.03 and pr.mode_masses[1, 0] > 0.95
    np.testing.assert_allclose(np.exp(pr.log_probs).sum(1), 1.0, rtol=1e-5)


def test_fit_outputs(sshape_fit):
    d, fit = sshape_fit
    np.testing.assert_allclose(fit.pair_posterior.sum(), 1.0, rtol=1e-6)
    post = fit.idata.posterior
    assert post["pair_log_joint"].dims[-2:] == ("gamma", "degree")
    assert fit.idata.posterior_predictive["x"].shape[-2:] == (150, 1)
    assert fit.map_params["degree"] in (1, 2)
    # the noise of the data set is N(0, 0.05^2) on x
    assert 0.03**2 < fit.map_params["noise"] < 0.08**2


def test_estimator_facade(sshape_fit):
    d, _ = sshape_fit
    est = InverseGPRegressor(InverseGPPrior(max_degree=1, n_gamma=4), method="nuts",
                             num_warmup=20, num_samples=20, num_chains=1,
                             n_draws=3, n_grid=100)
    with pytest.raises(NotFittedError):
        est.predict(np.zeros((2, 1)))
    est.fit(d.x_train[:, None], d.t_train)
    z = d.x_test[::100, None]
    pred = est.predict(z)
    res = est.predict_modes(z, 2)
    assert isinstance(res, Modes)
    modes, masses = res.modes, res.masses
    assert pred.shape == (5,) and modes.shape == (5, 2, 1)
    np.testing.assert_allclose(pred, modes[:, 0, 0])
    assert np.all(np.diff(masses, axis=1) <= 0)
