"""Posterior predictive replicates of the inverse model's inputs against the
dense GP posterior at the training outputs (Monte Carlo)."""

import jax
import numpy as np
import pytest

from bayeskde.inverse import InverseGPPrior, Memo, prepare_inverse_gp_data
from bayeskde.inverse.replicates import replicates

PRIOR = InverseGPPrior(max_degree=2, n_gamma=5, gamma_low=0.3, gamma_high=30.0)


def _gram(Y, gamma, alpha):
    d2 = ((Y[:, None, :] - Y[None, :, :]) ** 2).sum(-1)
    return sum(a * np.exp(-(i + 1) * gamma * d2) for i, a in enumerate(alpha))


@pytest.fixture(scope="module")
def small():
    r = np.random.default_rng(3)
    Y = r.uniform(size=(25, 1))
    X = np.c_[np.sin(4 * Y[:, 0]), Y[:, 0] ** 2] + 0.1 * r.normal(size=(25, 2))
    return Y, X, prepare_inverse_gp_data(jax.random.key(0), X, Y, PRIOR)


def test_replicates_are_the_gp_posterior_predictive(small):
    """Monte Carlo against the direct posterior predictive at the training
    outputs: for pair (g, d), mean a^2 K (a^2 K + s^2 I)^-1 Xc + x_mean and
    covariance a^2 K - a^2 K (a^2 K + s^2 I)^-1 a^2 K + s^2 I, K = phi(K) of
    the pair; two pairs of equal conditional mass give the equal mixture, and
    the pairs drawn follow that mass. Bounds: 4 binomial standard errors for
    the pairs' share, 5 standard errors sqrt(var / n) for the means, and 5 of
    a Gaussian variance estimate, var sqrt(2 / n), for the variances."""
    Y, X, data = small
    n, a, s = 6000, 0.7, 0.05
    lj = np.full((n, PRIOR.n_gamma, 2), -np.inf)
    lj[:, 1, 0] = lj[:, 3, 1] = 0.0
    memo = Memo()
    x, pair = replicates(jax.random.key(5), data, np.full(n, a), np.full(n, s), lj,
                         memo)
    assert x.shape == (n, 25, 2) and x.dtype == data.X.dtype
    assert len(memo) == 2  # the two pairs drawn, one eigendecomposition each
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


def test_same_key_same_replicates(small):
    _, _, data = small
    lj = np.zeros((3, PRIOR.n_gamma, 2))
    a = replicates(jax.random.key(1), data, np.full(3, 0.5), np.full(3, 0.02), lj)
    b = replicates(jax.random.key(1), data, np.full(3, 0.5), np.full(3, 0.02), lj,
                   Memo())
    np.testing.assert_array_equal(a[0], b[0])
    np.testing.assert_array_equal(a[1], b[1])
