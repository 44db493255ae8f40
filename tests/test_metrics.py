"""Proper scores against closed forms and brute force."""

import numpy as np
import pytest
from scipy import integrate, stats

from bayeskde import metrics
from tests.conftest import X64


def test_crps_gaussian_matches_integral_definition(tol):
    # CRPS = int (Phi((z - mu) / sd) - 1{z >= y})^2 dz, integrated numerically.
    mu, sd, y = np.array([0.3, -1.0, 2.0]), np.array([0.5, 2.0, 0.1]), np.array(
        [0.1, 1.5, 2.05])
    ref = []
    for m, s, yy in zip(mu, sd, y, strict=True):
        f_lo = integrate.quad(lambda z, m=m, s=s: stats.norm.cdf(z, m, s) ** 2,
                              -np.inf, yy, epsabs=1e-13)[0]
        f_hi = integrate.quad(lambda z, m=m, s=s: stats.norm.sf(z, m, s) ** 2,
                              yy, np.inf, epsabs=1e-13)[0]
        ref.append(f_lo + f_hi)
    got = np.asarray(metrics.crps_gaussian(mu, sd, y))
    np.testing.assert_allclose(got, ref, rtol=max(tol, 1e-9) * 10)


def test_log_density_gaussian_matches_scipy(tol):
    mu, sd, y = np.array([0.3, -1.0]), np.array([0.5, 2.0]), np.array([0.1, 1.5])
    np.testing.assert_allclose(metrics.log_density_gaussian(mu, sd, y),
                               stats.norm.logpdf(y, mu, sd), rtol=tol * 10)


def test_crps_samples_equals_energy_form_brute_force(rng, tol):
    X = rng.normal(size=(4, 37))
    y = rng.normal(size=4)
    ref = (np.abs(X - y[:, None]).mean(1)
           - 0.5 * np.abs(X[:, :, None] - X[:, None, :]).mean((1, 2)))
    np.testing.assert_allclose(metrics.crps_samples(X, y), ref, rtol=tol * 10,
                               atol=tol)


def test_crps_discrete_weighted_brute_force(rng, tol):
    z = rng.normal(size=25)
    p = rng.random((3, 25))
    y = rng.normal(size=3)
    q = p / p.sum(1, keepdims=True)
    ref = (q * np.abs(z[None] - y[:, None])).sum(1) - 0.5 * np.einsum(
        "ni,nj,ij->n", q, q, np.abs(z[:, None] - z[None]))
    np.testing.assert_allclose(metrics.crps_discrete(z, p, y), ref, rtol=tol * 10,
                               atol=tol)


def test_discretised_gaussian_approaches_closed_form():
    grid = np.linspace(-8, 8, 4001)
    dz = grid[1] - grid[0]
    p = stats.norm.pdf(grid)[None] * dz
    got = float(metrics.crps_discrete(grid, p, np.array([0.7]))[0])
    exact = float(metrics.crps_gaussian(np.zeros(1), np.ones(1), np.array([0.7]))[0])
    # a grid of cell dz carries an O(dz) discretisation error
    assert abs(got - exact) < dz


def test_log_density_grid_interpolates_a_normalised_density():
    grid = np.linspace(-6, 6, 2001)
    logd = stats.norm.logpdf(grid)[None].repeat(2, 0) + 3.0  # unnormalised
    y = np.array([0.3, -1.2])
    got = np.asarray(metrics.log_density_grid(grid, logd, y))
    # linear interpolation of a smooth density: O(dz^2) error
    np.testing.assert_allclose(got, stats.norm.logpdf(y), atol=1e-4)
    assert np.isneginf(metrics.log_density_grid(grid, logd[:1], np.array([7.0]))[0])


def test_pit_interval_and_coverage_match_numpy(rng):
    X = rng.normal(size=(5, 101))
    y = rng.normal(size=5)
    p = np.ones_like(X)
    np.testing.assert_allclose(metrics.pit_discrete(X, p, y),
                               (X <= y[:, None]).mean(1), atol=1e-6)
    lo, hi = metrics.interval_discrete(X, p, 0.8)
    ref_lo = np.quantile(X, 0.1, axis=1, method="inverted_cdf")
    ref_hi = np.quantile(X, 0.9, axis=1, method="inverted_cdf")
    np.testing.assert_allclose(lo, ref_lo, rtol=1e-6)
    np.testing.assert_allclose(hi, ref_hi, rtol=1e-6)
    cov = metrics.coverage_discrete(X, p, y, 0.8)
    np.testing.assert_array_equal(np.asarray(cov),
                                  ((ref_lo <= y) & (y <= ref_hi)).astype(float))


def test_coverage_of_calibrated_samples_is_nominal():
    r = np.random.default_rng(1)
    X = r.normal(size=(2000, 200))
    y = r.normal(size=2000)
    cov = float(np.mean(metrics.coverage_discrete(X, np.ones_like(X), y, 0.9)))
    assert abs(cov - 0.9) < 3 * np.sqrt(0.09 / 2000) + 0.01  # + quantile noise


def test_best_of_k_brute_force(rng, tol):
    H = rng.normal(size=(6, 3, 2))
    y = rng.normal(size=(6, 2))
    ref = [min(np.linalg.norm(H[i, j] - y[i]) for j in range(3)) for i in range(6)]
    np.testing.assert_allclose(metrics.best_of_k_error(H, y), ref, rtol=tol * 10)
    h1 = rng.normal(size=(4, 2))
    y1 = rng.normal(size=4)
    np.testing.assert_allclose(metrics.best_of_k_error(h1, y1),
                               np.abs(h1 - y1[:, None]).min(1), rtol=tol * 10)


@pytest.mark.parametrize("bad", [
    lambda: metrics.crps_gaussian(np.zeros(1), np.zeros(1), np.ones(1)),
    lambda: metrics.crps_discrete(np.arange(3.0), np.ones((2, 4)), np.zeros(2)),
    lambda: metrics.crps_discrete(np.arange(3.0), -np.ones((2, 3)), np.zeros(2)),
    lambda: metrics.interval_discrete(np.arange(3.0), np.ones((2, 3)), 1.5),
    lambda: metrics.best_of_k_error(np.zeros((2, 3, 2)), np.zeros((3, 2))),
])
def test_bad_input_raises(bad):
    with pytest.raises(ValueError):
        bad()


def test_dtype_follows_precision():
    out = metrics.crps_samples(np.ones((2, 3)), np.zeros(2))
    assert out.dtype == (np.float64 if X64 else np.float32)
