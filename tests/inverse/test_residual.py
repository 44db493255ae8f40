"""The residual noise density (R) of the inverse model: exact leave-one-out
residuals and variances against brute-force refits, its LOO score and its
likelihood against direct sums of scipy Gaussians."""

import jax.numpy as jnp
import numpy as np
import pytest
from scipy import stats
from scipy.special import logsumexp

from bayeskde.inverse import ResidualNoise
from bayeskde.inverse.residual import (
    gp_loo,
    residual_log_likelihood,
    residual_loo_log_density,
)
from tests.helpers import DTYPE as DT
from tests.helpers import LOOSE, assert_close


def _brute_loo(K, X):
    """m refits: mean and variance of x_i given the other m - 1 rows."""
    m = len(X)
    r, v = np.empty_like(X), np.empty(m)
    for i in range(m):
        o = np.arange(m) != i
        w = np.linalg.solve(K[np.ix_(o, o)], K[o, i])
        r[i] = X[i] - w @ X[o]
        v[i] = K[i, i] - K[i, o] @ w
    return r, v


def _problem(seed, m=40, rank=None):
    rng = np.random.default_rng(seed)
    Y = rng.uniform(-1, 1, (m, 2))
    X = np.sin(3 * Y) + 0.1 * rng.normal(size=(m, 2))
    X = X - X.mean(0)
    d2 = ((Y[:, None] - Y[None]) ** 2).sum(-1)
    phi = 0.7 * np.exp(-2.0 * d2) + 0.3 * np.exp(-4.0 * d2)
    if rank is not None:  # a feature-map Gram F F^T of rank R (Woodbury form)
        F = rng.normal(size=(m, rank))
        phi = F @ F.T / rank
    lam, U = np.linalg.eigh(phi)
    ok = lam > m * np.finfo(float).eps * lam.max()
    return Y, X, phi, lam[ok], U[:, ok]


@pytest.mark.parametrize("rank", [None, 6])
def test_loo_residuals_and_variances_match_refits(rank):
    Y, X, phi, lam, U = _problem(0, rank=rank)
    a, s2 = 1.7, 0.05
    r, v = gp_loo(jnp.asarray(U, DT), jnp.asarray(lam, DT), jnp.asarray(X, DT),
                  jnp.asarray(a, DT), jnp.asarray(s2, DT))
    r_bf, v_bf = _brute_loo(a * phi + s2 * np.eye(len(X)), X)
    # LOO by one eigendecomposition against m solves: the same algebra
    # through the spectrum, whose smallest kept directions are resolved to
    # sqrt(eps) (LOOSE)
    assert_close(r, r_bf, rtol=LOOSE, atol=LOOSE)
    assert_close(v, v_bf, rtol=LOOSE)


def test_residual_loo_density_matches_the_direct_sum():
    rng = np.random.default_rng(1)
    r = rng.normal(size=(30, 2)) @ np.array([[1.0, 0.3], [0.0, 0.2]])
    lat = rng.uniform(0.0, 0.01, 30)
    h = 0.4
    got = residual_loo_log_density(jnp.asarray(r, DT), jnp.asarray(lat, DT), h)
    C = np.cov(r.T)
    want = [logsumexp([stats.multivariate_normal(r[j], h**2 * C + lat[i] * np.eye(2))
                       .logpdf(r[i]) for j in range(30) if j != i]) - np.log(29)
            for i in range(30)]
    assert_close(got, want, rtol=LOOSE, atol=LOOSE)


def test_residual_likelihood_matches_the_direct_sum():
    rng = np.random.default_rng(2)
    r = rng.normal(size=(70, 2)) * np.array([0.3, 0.05])
    C = np.cov(r.T)
    h = 0.3
    eta, V = np.linalg.eigh(h**2 * C)
    noise = ResidualNoise(*(jnp.asarray(a, DT) for a in (r, V, eta, r @ V, h)))
    mean = rng.normal(size=(5, 2))
    vf = rng.uniform(0, 0.02, 5)
    X = rng.normal(size=(3, 2))
    got = residual_log_likelihood(noise, jnp.asarray(mean, DT), jnp.asarray(vf, DT),
                                  jnp.asarray(X, DT))
    want = np.array([[logsumexp([stats.multivariate_normal(
        mean[c] + r[i], h**2 * C + vf[c] * np.eye(2)).logpdf(X[n])
        for i in range(70)]) - np.log(70) for c in range(5)] for n in range(3)])
    assert_close(got, want, rtol=LOOSE, atol=LOOSE)


