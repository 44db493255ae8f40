"""The forward-noise models of the inverse model: exact leave-one-out
residuals and variances against brute-force refits, the residual density (R)
and its LOO score against direct sums, and the predictive's use of it against
a dense GP."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import stats
from scipy.special import logsumexp

from bayeskde.datasets import make_sbi_pairs, two_moons
from bayeskde.learn.inverse_gp import _train_U, choose_forward_noise, fit_inverse_gp
from bayeskde.learn.inverse_predictive import _draws, _fit_mixture
from bayeskde.models import InverseGPPrior, inverse_gp_mixture, mixture_log_likelihood
from bayeskde.models.inverse_noise import (
    ResidualNoise,
    gp_loo,
    residual_log_likelihood,
    residual_loo_log_density,
)
from tests.conftest import X64

RTOL = 1e-9 if X64 else 2e-3
DT = jnp.float64 if X64 else jnp.float32


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
    np.testing.assert_allclose(np.asarray(r), r_bf, rtol=RTOL, atol=RTOL * 1e-1)
    np.testing.assert_allclose(np.asarray(v), v_bf, rtol=RTOL)


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
    np.testing.assert_allclose(got, want, rtol=RTOL, atol=RTOL)


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
    np.testing.assert_allclose(np.asarray(got), want, rtol=RTOL, atol=RTOL)


@pytest.fixture(scope="module")
def moons_fit():
    task = two_moons()
    p = make_sbi_pairs(jax.random.key(0), task, 120)
    fit = fit_inverse_gp(jax.random.key(1), p.x, p.theta,
                         InverseGPPrior(max_degree=2, n_gamma=6),
                         method="quadrature", num_samples=50, progress_bar=False,
                         n_replicates=2, noise="residual")
    return task, fit


def _dense_map_gp(fit):
    data, mp = fit.data, fit.map_params
    g, d = mp["pair_index"]
    Y, X = np.asarray(data.Y, float), np.asarray(data.X, float)
    alpha, gamma = np.asarray(data.alpha[g, d], float), float(data.gammas[g])

    def k(A, B):
        d2 = ((A[:, None] - B[None]) ** 2).sum(-1)
        return sum(w * np.exp(-(i + 1) * gamma * d2) for i, w in enumerate(alpha))

    a, s2 = mp["amplitude"], mp["noise"]
    K = a * k(Y, Y) + s2 * np.eye(len(Y))
    return Y, X, k, a, s2, alpha, K


def test_fit_residuals_are_the_map_gps_loo_residuals(moons_fit):
    _, fit = moons_fit
    Y, X, k, a, s2, alpha, K = _dense_map_gp(fit)
    r_bf, _ = _brute_loo(K, X)
    tol = 1e-6 if X64 else 5e-2
    np.testing.assert_allclose(np.asarray(fit.noise.residual.residuals), r_bf,
                               rtol=tol, atol=tol * 0.1)


def test_predictive_uses_the_residual_density(moons_fit):
    task, fit = moons_fit
    Y, X, k, a, s2, alpha, K = _dense_map_gp(fit)
    mix = _fit_mixture(fit, "average", 100)
    assert mix.log_w.shape == (1,)
    y = np.array([[0.1, -0.2], [0.5, 0.4], [-0.3, 0.7]])
    xo = np.asarray(task.observations[:2], float)
    got = mixture_log_likelihood(mix, jnp.asarray(y, DT), jnp.asarray(xo, DT),
                                 jnp.asarray(1.0, DT))
    ks = a * k(y, Y)
    xm = np.asarray(fit.data.x_mean, float)
    mu = ks @ np.linalg.solve(K, X) + xm
    vf = a * alpha.sum() - np.einsum("ij,ij->i", ks, np.linalg.solve(K, ks.T).T)
    res = fit.noise.residual
    r, h = np.asarray(res.residuals, float), float(res.bandwidth)
    C = np.cov(r.T)
    want = np.array([[logsumexp([stats.multivariate_normal(
        mu[c] + r[i], h**2 * C + vf[c] * np.eye(2)).logpdf(xo[n])
        for i in range(len(r))]) - np.log(len(r)) for c in range(3)]
        for n in range(2)])
    tol = 1e-6 if X64 else 2e-2
    np.testing.assert_allclose(np.asarray(got), want, rtol=tol, atol=tol)
    # noise-free test inputs keep the GP's latent Gaussian
    got0 = mixture_log_likelihood(mix, jnp.asarray(y, DT), jnp.asarray(xo, DT),
                                  jnp.asarray(0.0, DT))
    want0 = np.array([[stats.multivariate_normal(mu[c], vf[c] * np.eye(2))
                       .logpdf(xo[n]) for c in range(3)] for n in range(2)])
    np.testing.assert_allclose(np.asarray(got0), want0, rtol=tol, atol=tol)


def test_auto_compares_exact_loo_densities(moons_fit):
    _, fit = moons_fit
    Y, X, k, a, s2, alpha, K = _dense_map_gp(fit)
    r_bf, v_bf = _brute_loo(K, X)
    gauss = np.mean(-0.5 * (r_bf**2).sum(1) / v_bf - np.log(2 * np.pi * v_bf))
    ch = choose_forward_noise(fit, "auto", mode="map")
    tol = 1e-6 if X64 else 1e-2
    np.testing.assert_allclose(ch.loo_gaussian, gauss, rtol=tol, atol=tol)
    C = np.cov(r_bf.T)
    h = ch.bandwidth
    lat = v_bf - s2
    res = np.mean([logsumexp([stats.multivariate_normal(
        r_bf[j], h**2 * C + lat[i] * np.eye(2)).logpdf(r_bf[i])
        for j in range(len(X)) if j != i]) - np.log(len(X) - 1)
        for i in range(len(X))])
    np.testing.assert_allclose(ch.loo_residual, res, rtol=tol, atol=tol)
    assert ch.kind == ("residual" if ch.loo_residual - ch.loo_gaussian
                       > 2 * ch.loo_difference_se else "gaussian")


def test_residual_density_keeps_a_strided_subset_above_the_cap(moons_fit, monkeypatch):
    """Above RESIDUAL_MAX pairs the density is (R) on the evenly strided
    subset's LOO residuals (computed from all m pairs), its h and "auto"'s
    comparison on the same subset."""
    import bayeskde.learn.inverse_gp as ig

    _, fit = moons_fit
    Y, X, k, a, s2, alpha, K = _dense_map_gp(fit)
    r_bf, v_bf = _brute_loo(K, X)
    m, cap = len(X), 25
    monkeypatch.setattr(ig, "RESIDUAL_MAX", cap)
    ch = ig.choose_forward_noise(fit, "auto", mode="map")
    keep = np.unique(np.round(np.linspace(0, m - 1, cap)).astype(int))
    assert len(keep) == cap
    tol = 1e-6 if X64 else 1e-2
    np.testing.assert_allclose(np.asarray(ch.residual.residuals, float),
                               r_bf[keep], rtol=tol, atol=tol)
    gauss = np.mean((-0.5 * (r_bf**2).sum(1) / v_bf
                     - np.log(2 * np.pi * v_bf))[keep])
    np.testing.assert_allclose(ch.loo_gaussian, gauss, rtol=tol, atol=tol)
    rk, lat = r_bf[keep], (v_bf - s2)[keep]
    C, h = np.cov(rk.T), ch.bandwidth
    res = np.mean([logsumexp([stats.multivariate_normal(
        rk[j], h**2 * C + lat[i] * np.eye(2)).logpdf(rk[i])
        for j in range(cap) if j != i]) - np.log(cap - 1) for i in range(cap)])
    np.testing.assert_allclose(ch.loo_residual, res, rtol=tol, atol=tol)


def test_lowrank_training_basis_is_orthonormal_and_gives_the_smoother():
    from bayeskde.datasets import make_sshape
    from bayeskde.models.inverse_gp_predictive import mixture_moments

    d = make_sshape(jax.random.key(0), 150)
    fit = fit_inverse_gp(jax.random.key(1), d.x_train, d.t_train,
                         InverseGPPrior(max_degree=2, n_gamma=6),
                         method="quadrature", approx="lowrank", rank=24,
                         num_samples=50, progress_bar=False, n_replicates=2,
                         noise="gaussian")
    mix = inverse_gp_mixture(fit.data, *_draws(fit, "map", 1), cache=fit.cache)
    U = np.asarray(_train_U(mix, fit.data, 0), float)
    tol = 1e-8 if X64 else 1e-3
    a, s2 = float(mix.amplitude[0]), float(mix.noise[0])
    lam = np.asarray(mix.lam[0], float)
    keep = lam > 0
    # A / lambda amplifies A's rounding in the smallest kept directions (1e-5 in
    # float64 at lambda ~ 1e-9 lambda_max); they carry smoother weight
    # c ~ a lambda / s^2, so the check is weighted by sqrt(c_i c_j)
    c = np.sqrt(a * lam / (a * lam + s2))[keep]
    err = (U[:, keep].T @ U[:, keep] - np.eye(keep.sum())) * c[:, None] * c[None]
    assert np.abs(err).max() < (1e-6 if X64 else 1e-2)
    # the columns kept (lambda above 10 eps lambda_max) are orthonormal
    # unweighted: the smaller ones, A's rounding over lambda, are zeroed
    nz = np.abs(U).sum(0) > 0
    assert np.all(lam[nz] > 10 * np.finfo(mix.lam.dtype).eps * lam.max())
    assert np.all(lam[~nz & keep] <= 10 * np.finfo(mix.lam.dtype).eps * lam.max())
    # (float64: 1e-5 in the smallest kept directions, as above)
    np.testing.assert_allclose(U[:, nz].T @ U[:, nz], np.eye(nz.sum()),
                               atol=1e-4 if X64 else 1e-2)
    S = (U * (a * lam / (a * lam + s2))) @ U.T
    mean, _ = mixture_moments(mix, jnp.asarray(fit.data.Y))
    want = S @ np.asarray(fit.data.X, float) + np.asarray(fit.data.x_mean, float)
    np.testing.assert_allclose(np.asarray(mean[0]), want, rtol=tol * 10,
                               atol=tol * 10)
