"""Mean-map kernels' closed forms: the empirical and clique mean-map kernels
against their definitions, the Gaussian and categorical GMMK / PPK against
Monte Carlo (split out of test_meanmap.py)."""

import itertools

import numpy as np
import pytest
from scipy.stats import multivariate_normal as mvn
from sklearn.metrics.pairwise import rbf_kernel as sk_rbf

from bayeskde.meanmap import (
    categorical_gmmk,
    categorical_ppk,
    clique_mean_map_kernel,
    empirical_mean_map_kernel,
    gaussian_gmmk,
    gaussian_ppk,
    log_gaussian_gmmk,
    mean_map_gram,
    sequence_cliques,
    symbol_kernel_matrix,
)
from tests.helpers import X64
from tests.meanmap.checks import RTOL, assert_psd, assert_within_3se, random_spd

# ------------------------------------------------------------------- EMMK


def test_emmk_is_mean_of_base_kernel(rng):
    X, Y = rng.normal(size=(5, 2)), rng.normal(size=(7, 2))
    ref = sk_rbf(X, Y, gamma=0.3).mean()
    assert float(empirical_mean_map_kernel(X, Y, gamma=0.3)) == pytest.approx(
        ref, rel=RTOL)
    sets = [rng.normal(size=(m, 2)) for m in (3, 5, 1, 4)]
    K = mean_map_gram(sets, gamma=0.3)
    ref = np.array([[sk_rbf(a, b, gamma=0.3).mean() for b in sets] for a in sets])
    np.testing.assert_allclose(K, ref, rtol=RTOL * 10)
    assert_psd(K)


def test_clique_decomposition_eq3(rng):
    x, y = rng.normal(size=(6, 1)), rng.normal(size=(4, 1))
    cx = [x, sequence_cliques(x, 2)]
    cy = [y, sequence_cliques(y, 2)]
    assert cx[1].shape == (5, 2)
    ref = sk_rbf(x, y, gamma=0.5).mean() + sk_rbf(
        np.asarray(cx[1]), np.asarray(cy[1]), gamma=0.5).mean()
    got = clique_mean_map_kernel(cx, cy, gamma=0.5)
    assert float(got) == pytest.approx(ref, rel=RTOL)
    # a length-1 object has no pair cliques: that clique type contributes 0
    one = rng.normal(size=(1, 1))
    assert sequence_cliques(one, 2).shape == (0, 2)
    got = clique_mean_map_kernel([one, sequence_cliques(one, 2)], cy, gamma=0.5)
    assert float(got) == pytest.approx(sk_rbf(one, y, gamma=0.5).mean(), rel=RTOL)


def test_emmk_bad_input():
    with pytest.raises(ValueError, match="features"):
        empirical_mean_map_kernel(np.zeros((2, 2)), np.zeros((2, 3)))
    with pytest.raises(ValueError, match="NaN"):
        empirical_mean_map_kernel(np.array([[np.nan]]), np.zeros((1, 1)))
    with pytest.raises(ValueError, match="empty"):
        empirical_mean_map_kernel(np.zeros((0, 1)), np.zeros((1, 1)))


# --------------------------------------------------------- GMMK closed forms


def test_gaussian_gmmk_monte_carlo(rng):
    d, g, n = 3, 0.4, 100_000
    m1, m2 = rng.normal(size=d), rng.normal(size=d)
    S1, S2 = random_spd(rng, d), random_spd(rng, d)
    x = rng.multivariate_normal(m1, S1, n)
    y = rng.multivariate_normal(m2, S2, n)
    assert_within_3se(gaussian_gmmk(m1, S1, m2, S2, gamma=g),
                np.exp(-g * ((x - y) ** 2).sum(1)))
    # point masses give the base kernel itself; diagonal covariances accepted
    val = gaussian_gmmk(m1, np.zeros(d), m2, np.zeros(d), gamma=g)
    assert float(val) == pytest.approx(np.exp(-g * ((m1 - m2) ** 2).sum()), rel=RTOL)
    full = log_gaussian_gmmk(m1, np.diag([0.1, 0.2, 0.3]), m2, S2, gamma=g)
    diag = log_gaussian_gmmk(m1, np.array([0.1, 0.2, 0.3]), m2, S2, gamma=g)
    assert float(full) == pytest.approx(float(diag), rel=RTOL)


@pytest.mark.parametrize("rho", [0.5, 1.0, 1.5])
def test_gaussian_ppk_monte_carlo(rng, rho):
    d, n = 2, 200_000
    m1, m2 = 0.5 * rng.normal(size=d), 0.5 * rng.normal(size=d)
    S1, S2 = random_spd(rng, d, 0.2), random_spd(rng, d, 0.2)
    # int p^rho q^rho = E_{x~p}[p(x)^(rho - 1) q(x)^rho]
    x = rng.multivariate_normal(m1, S1, n)
    w = mvn(m1, S1).pdf(x) ** (rho - 1) * mvn(m2, S2).pdf(x) ** rho
    assert_within_3se(gaussian_ppk(m1, S1, m2, S2, rho=rho), w)
    if rho == 1.0:
        ref = mvn(m2, S1 + S2).pdf(m1)
        assert float(gaussian_ppk(m1, S1, m2, S2)) == pytest.approx(ref, rel=RTOL)


def test_categorical_gmmk_and_ppk(rng):
    p, q = rng.dirichlet(np.ones(4)), rng.dirichlet(np.ones(4))
    L = symbol_kernel_matrix(4, 0.7)
    n = 200_000
    a, b = rng.choice(4, n, p=p), rng.choice(4, n, p=q)
    assert_within_3se(categorical_gmmk(p, q, L), np.where(a == b, 1.0, np.exp(-0.7)))
    # rho = 1: the PPK is the GMMK with the delta kernel
    assert float(categorical_ppk(p, q)) == pytest.approx(
        float(categorical_gmmk(p, q, np.eye(4))), rel=RTOL)
    assert float(categorical_ppk(p, q, rho=0.5)) == pytest.approx(
        np.sum(np.sqrt(p * q)), rel=RTOL)


def test_ppk_rho1_is_dirac_limit_of_gmmk(rng):
    d = 2
    m1, m2 = rng.normal(size=d), rng.normal(size=d)
    S1, S2 = random_spd(rng, d), random_spd(rng, d)
    ppk = float(gaussian_ppk(m1, S1, m2, S2))
    errs = []
    for g in (1.0, 10.0, 100.0, 1000.0):
        # normalised RBF (g/pi)^(D/2) exp(-g |x-y|^2) = N(x; y, I/(2g))
        scaled = (g / np.pi) ** (d / 2) * float(gaussian_gmmk(m1, S1, m2, S2, gamma=g))
        smoothed = float(gaussian_ppk(m1, S1, m2, S2 + np.eye(d) / (2 * g)))
        assert scaled == pytest.approx(smoothed, rel=1e-8 if X64 else 1e-4)
        errs.append(abs(scaled - ppk))
    assert all(b < a for a, b in itertools.pairwise(errs))
    assert errs[-1] < 2e-3 * ppk


def test_eq34_both_expectations_equal(rng):
    d, lam, n = 2, 0.8, 100_000
    m1, m2 = rng.normal(size=d), rng.normal(size=d)
    S1, S2 = random_spd(rng, d), random_spd(rng, d)
    var = 1.0 / (2.0 * lam)  # sigma = (2 lam)^(-1/2)
    closed = (lam / np.pi) ** (d / 2) * float(gaussian_gmmk(m1, S1, m2, S2,
                                                            gamma=lam))
    # k_p(p, N(x, sigma^2)) with rho = 1 is N(x; m, S + sigma^2 I)
    xp = rng.multivariate_normal(m2, S2, n)  # x ~ p'
    lhs = mvn(m1, S1 + var * np.eye(d)).pdf(xp)
    xq = rng.multivariate_normal(m1, S1, n)  # x ~ p
    rhs = mvn(m2, S2 + var * np.eye(d)).pdf(xq)
    assert_within_3se(closed, lhs)
    assert_within_3se(closed, rhs)
