"""The inverse model's forward noise (Gaussian or the residual density, chosen
by exact leave-one-out): the fit's LOO residuals against brute-force refits of
the MAP GP, the predictive's residual likelihood against a dense GP and direct
sums, the LOO scores "auto" compares against direct sums, and the low-rank
training basis against the smoother."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import stats
from scipy.special import logsumexp

import bayeskde.inverse.noise as noise_module
from bayeskde.datasets import make_sbi_pairs, make_sshape, two_moons
from bayeskde.inverse import (
    InverseGPPrior,
    choose_forward_noise,
    fit_inverse_gp,
    inverse_gp_mixture,
    mixture_log_likelihood,
    mixture_moments,
)
from bayeskde.inverse.mixture import fit_mixture, posterior_draws
from bayeskde.inverse.noise import training_basis
from tests.helpers import DTYPE as DT
from tests.helpers import EPS, LOOSE, RTOL, assert_close


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


@pytest.fixture(scope="module")
def moons_fit():
    task = two_moons()
    p = make_sbi_pairs(jax.random.key(0), task, 120)
    fit = fit_inverse_gp(jax.random.key(1), p.x, p.theta,
                         InverseGPPrior(max_degree=2, n_gamma=6),
                         method="quadrature", num_samples=50, progress_bar=False,
                         num_replicates=2, noise="residual")
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
    # the working precision's MAP GP against float64 refits: the residuals
    # x_i - E[x_i | x_-i] cancel to about s^2 / (a^2 lambda) of x, resolved
    # to sqrt(eps) of x's scale
    scale = np.abs(X).max()
    assert_close(fit.noise.residual.residuals, r_bf, rtol=0, atol=LOOSE * scale * 10)


def test_predictive_uses_the_residual_density(moons_fit):
    task, fit = moons_fit
    Y, X, k, a, s2, alpha, K = _dense_map_gp(fit)
    mix = fit_mixture(fit, "average", 100)
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
    assert_close(got, want, rtol=LOOSE * 10, atol=LOOSE * 10)
    # noise-free test inputs keep the GP's latent Gaussian
    got0 = mixture_log_likelihood(mix, jnp.asarray(y, DT), jnp.asarray(xo, DT),
                                  jnp.asarray(0.0, DT))
    want0 = np.array([[stats.multivariate_normal(mu[c], vf[c] * np.eye(2))
                       .logpdf(xo[n]) for c in range(3)] for n in range(2)])
    assert_close(got0, want0, rtol=LOOSE * 10, atol=LOOSE * 10)


def test_auto_compares_exact_loo_densities(moons_fit):
    _, fit = moons_fit
    Y, X, k, a, s2, alpha, K = _dense_map_gp(fit)
    r_bf, v_bf = _brute_loo(K, X)
    gauss = np.mean(-0.5 * (r_bf**2).sum(1) / v_bf - np.log(2 * np.pi * v_bf))
    ch = choose_forward_noise(fit, "auto", mode="map")
    tol = LOOSE * 10
    assert_close(ch.loo_gaussian, gauss, rtol=tol, atol=tol)
    C = np.cov(r_bf.T)
    h = ch.bandwidth
    lat = v_bf - s2
    res = np.mean([logsumexp([stats.multivariate_normal(
        r_bf[j], h**2 * C + lat[i] * np.eye(2)).logpdf(r_bf[i])
        for j in range(len(X)) if j != i]) - np.log(len(X) - 1)
        for i in range(len(X))])
    assert_close(ch.loo_residual, res, rtol=tol, atol=tol)
    # the two scores differ (the data's noise is not Gaussian in x)
    assert ch.loo_residual != ch.loo_gaussian and ch.loo_difference_se > 0
    # the covariance function (H) is the third candidate: its held-out score
    # is the one "heteroscedastic" reports, and "auto" keeps the best of the
    # three only if it beats the Gaussian by two standard errors
    het = choose_forward_noise(fit, "heteroscedastic", mode="map")
    assert het.kind == "heteroscedastic"
    assert_close(ch.loo_heteroscedastic, het.loo_heteroscedastic, rtol=RTOL,
                 atol=RTOL)
    best = max(("residual", ch.loo_residual),
               ("heteroscedastic", ch.loo_heteroscedastic), key=lambda kv: kv[1])
    beats = best[1] - ch.loo_gaussian > 2 * ch.loo_difference_se
    assert ch.kind == (best[0] if beats else "gaussian")


def test_residual_density_keeps_a_strided_subset_above_the_cap(moons_fit, monkeypatch):
    """Above RESIDUAL_MAX pairs the density is (R) on the evenly strided
    subset's LOO residuals (computed from all m pairs), its h and "auto"'s
    comparison on the same subset."""
    _, fit = moons_fit
    Y, X, k, a, s2, alpha, K = _dense_map_gp(fit)
    r_bf, v_bf = _brute_loo(K, X)
    m, cap = len(X), 25
    monkeypatch.setattr(noise_module, "RESIDUAL_MAX", cap)
    ch = choose_forward_noise(fit, "auto", mode="map")
    keep = np.unique(np.round(np.linspace(0, m - 1, cap)).astype(int))
    assert len(keep) == cap
    tol = LOOSE * 10
    assert_close(ch.residual.residuals, r_bf[keep], rtol=tol, atol=tol)
    gauss = np.mean((-0.5 * (r_bf**2).sum(1) / v_bf
                     - np.log(2 * np.pi * v_bf))[keep])
    assert_close(ch.loo_gaussian, gauss, rtol=tol, atol=tol)
    rk, lat = r_bf[keep], (v_bf - s2)[keep]
    C, h = np.cov(rk.T), ch.bandwidth
    res = np.mean([logsumexp([stats.multivariate_normal(
        rk[j], h**2 * C + lat[i] * np.eye(2)).logpdf(rk[i])
        for j in range(cap) if j != i]) - np.log(cap - 1) for i in range(cap)])
    assert_close(ch.loo_residual, res, rtol=tol, atol=tol)


@pytest.mark.slow  # a low-rank fit of its own (about 30 s)
def test_lowrank_training_basis_is_orthonormal_and_gives_the_smoother():
    d = make_sshape(jax.random.key(0), 150)
    fit = fit_inverse_gp(jax.random.key(1), d.x_train, d.t_train,
                         InverseGPPrior(max_degree=2, n_gamma=6),
                         method="quadrature", approx="lowrank", rank=24,
                         num_samples=50, progress_bar=False, num_replicates=2,
                         noise="gaussian")
    mix = inverse_gp_mixture(fit.data, *posterior_draws(fit, "map", 1), memo=fit.memo)
    U = np.asarray(training_basis(mix, fit.data, 0), float)
    a, s2 = float(mix.amplitude[0]), float(mix.noise[0])
    lam = np.asarray(mix.lam[0], float)
    keep = lam > 0
    # A / lambda amplifies A's rounding in the smallest kept directions (1e-5 in
    # float64 at lambda ~ 1e-9 lambda_max); they carry smoother weight
    # c ~ a lambda / s^2, so the check is weighted by sqrt(c_i c_j)
    c = np.sqrt(a * lam / (a * lam + s2))[keep]
    err = (U[:, keep].T @ U[:, keep] - np.eye(keep.sum())) * c[:, None] * c[None]
    # A's rounding is eps lambda_max per entry, over lambda_j >= 10 eps
    # lambda_max for the columns kept: at most 10% of a column, weighted
    assert np.abs(err).max() < 1e4 * EPS * keep.sum() + 1e-6
    # the columns kept (lambda above 10 eps lambda_max) are orthonormal
    # unweighted: the smaller ones, A's rounding over lambda, are zeroed
    nz = np.abs(U).sum(0) > 0
    assert np.all(lam[nz] > 10 * np.finfo(mix.lam.dtype).eps * lam.max())
    assert np.all(lam[~nz & keep] <= 10 * np.finfo(mix.lam.dtype).eps * lam.max())
    # each column within eps lambda_max / lambda_j <= 10% of unit norm, the
    # largest ones to eps; float64: 1e-5 in the smallest kept directions
    G = U[:, nz].T @ U[:, nz]
    lam_nz = lam[nz]
    bound = np.sqrt(EPS * lam.max() / lam_nz)
    assert np.all(np.abs(G - np.eye(nz.sum())) <= 10 * (bound[:, None] + bound[None]
                                                         + 1e-6))
    S = (U * (a * lam / (a * lam + s2))) @ U.T
    mean, _ = mixture_moments(mix, jnp.asarray(fit.data.Y))
    want = S @ np.asarray(fit.data.X, float) + np.asarray(fit.data.x_mean, float)
    assert_close(mean[0], want, rtol=LOOSE * 10, atol=LOOSE * 10)
