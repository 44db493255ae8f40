import jax.numpy as jnp
import numpy as np
import pytest
from scipy.special import multigammaln
from scipy.stats import invwishart

from bayeskde.kernels import rbf_kernel
from bayeskde.kernels.hyper import (
    gaussian_hyperkernel,
    gaussian_hyperkernel_gram,
    harmonic_hyperkernel,
    harmonic_hyperkernel_gram,
    wishart_hyperkernel,
    wishart_hyperkernel_gram,
)
from tests.helpers import X64, count_compilations

RTOL = 1e-10 if X64 else 2e-5


def _normal(a, b, var):
    """The paper's <a, b>_{var} in float64 NumPy, batched over leading axes."""
    n = a.shape[-1]
    d2 = np.sum((a - b) ** 2, axis=-1)
    return (2 * np.pi * var) ** (-n / 2) * np.exp(-d2 / (2 * var))


def _mvn(a, b, Sigma):
    """N(a; b, Sigma) for a batch of covariances Sigma (N, n, n)."""
    n = a.shape[-1]
    d = a - b
    sol = np.linalg.solve(Sigma, d[..., None])[..., 0]
    _, logdet = np.linalg.slogdet(Sigma)
    log_norm = 0.5 * logdet + 0.5 * n * np.log(2 * np.pi)
    return np.exp(-0.5 * np.sum(d * sol, -1) - log_norm)


def _assert_mc(value, samples):
    mc = samples.mean()
    se = samples.std(ddof=1) / np.sqrt(samples.size)
    assert abs(float(value) - mc) <= 3 * se + RTOL * abs(mc), (float(value), mc, se)


@pytest.mark.parametrize("case", range(3))
def test_gaussian_matches_monte_carlo_of_eq7(case):
    rng = np.random.default_rng(100 + case)
    n = 2
    x1, x1p, x2, x2p = 0.6 * rng.normal(size=(4, n))
    sigma, sigma_h = 0.7 + 0.2 * case, 0.3 + 0.4 * case
    N = 200_000
    # Sample z ~ <x1, .>_{s2} and z' ~ <z, .>_{h2}; average the other three factors.
    z = x1 + sigma * rng.normal(size=(N, n))
    zp = z + sigma_h * rng.normal(size=(N, n))
    s2 = sigma**2
    f = _normal(z, x1p, s2) * _normal(x2, zp, s2) * _normal(zp, x2p, s2)
    _assert_mc(gaussian_hyperkernel(x1, x1p, x2, x2p, sigma, sigma_h), f)


@pytest.mark.parametrize("n, r", [(2, 3.0), (2, 5.5), (3, 4.0)])
def test_wishart_matches_monte_carlo_of_eq10(n, r):
    rng = np.random.default_rng(7 + n)
    x1, x1p, x2, x2p = 0.5 * rng.normal(size=(4, n))
    A = rng.normal(size=(n, n))
    C = A @ A.T / n + 0.5 * np.eye(n)
    N = 200_000
    Sigma = invwishart(df=r, scale=C).rvs(N, random_state=rng)
    z = x1 + np.einsum("kij,kj->ki", np.linalg.cholesky(Sigma), rng.normal(size=(N, n)))
    f = _mvn(z, x1p, Sigma) * _mvn(x2, z, Sigma) * _mvn(x2p, z, Sigma)
    _assert_mc(wishart_hyperkernel(x1, x1p, x2, x2p, C, r), f)


def test_wishart_equals_eq12_by_determinants(rng):
    n, r = 4, 6.0
    A = rng.normal(size=(n, n))
    C = A @ A.T + np.eye(n)
    P, Q = rng.normal(size=(5, 2, n)), rng.normal(size=(3, 2, n))
    K = np.asarray(wishart_hyperkernel_gram(P, Q, C, r))
    log_c = (-1.5 * n * np.log(np.pi) - n * np.log(2) + multigammaln((r + 3) / 2, n)
             - multigammaln(r / 2, n))
    for i in range(5):
        for j in range(3):
            d1, d2 = P[i, 0] - P[i, 1], Q[j, 0] - Q[j, 1]
            dm = (P[i, 0] + P[i, 1] - Q[j, 0] - Q[j, 1]) / 2
            S = 0.5 * np.outer(d1, d1) + 0.5 * np.outer(d2, d2) + np.outer(dm, dm)
            ref = np.exp(log_c + r / 2 * np.linalg.slogdet(C)[1]
                         - (r + 3) / 2 * np.linalg.slogdet(C + S)[1])
            np.testing.assert_allclose(K[i, j], ref, rtol=100 * RTOL)
    Kn = np.asarray(wishart_hyperkernel_gram(P, Q, C, r, normalize=False))
    const = np.exp(log_c - 1.5 * np.linalg.slogdet(C)[1])
    np.testing.assert_allclose(Kn * const, K, rtol=100 * RTOL)
    assert np.all(Kn <= 1 + RTOL)


def test_gaussian_limits_and_factorisation(rng):
    n, sigma = 3, 0.8
    x1, x1p, x2, x2p = rng.normal(size=(4, n))
    m1, m2 = (x1 + x1p) / 2, (x2 + x2p) / 2
    pair_rbf = _normal(x1, x1p, 2 * sigma**2) * _normal(x2, x2p, 2 * sigma**2)
    # sigma_h -> 0: h becomes a delta, K = <x1,x1'>_{2s2} <x2,x2'>_{2s2} <m1,m2>_{s2}.
    delta = pair_rbf * _normal(m1, m2, sigma**2)
    np.testing.assert_allclose(
        gaussian_hyperkernel(x1, x1p, x2, x2p, sigma, 0.0), delta, rtol=10 * RTOL)
    np.testing.assert_allclose(
        gaussian_hyperkernel(x1, x1p, x2, x2p, sigma, 1e-4), delta, rtol=1e-6)
    # sigma_h -> inf: (2 pi (s2 + h2))^(n/2) K -> product of two RBF kernels.
    for sh in (1e2, 1e4):
        K = float(gaussian_hyperkernel(x1, x1p, x2, x2p, sigma, sh))
        scaled = K * (2 * np.pi * (sigma**2 + sh**2)) ** (n / 2)
        gap = np.sum((m1 - m2) ** 2) / (2 * (sigma**2 + sh**2))
        np.testing.assert_allclose(scaled, pair_rbf, rtol=2 * gap + 10 * RTOL)
    P = np.stack([x1, x1p])[None]
    Kn = gaussian_hyperkernel_gram(P, np.stack([x2, x2p])[None], sigma, 1e6,
                                   normalize=False)
    gamma = 1 / (4 * sigma**2)
    ref = rbf_kernel(x1[None], x1p[None], gamma=gamma) * rbf_kernel(
        x2[None], x2p[None], gamma=gamma)
    np.testing.assert_allclose(Kn, ref, rtol=1e-6)
    # Sum/difference coordinates: K = 2^(-n/2) <x1^, x2^>_{2 tau2} <x1~,0> <x2~,0>.
    sh = 0.6
    tau2 = sigma**2 + sh**2
    h1, h2 = (x1 + x1p) / np.sqrt(2), (x2 + x2p) / np.sqrt(2)
    t1, t2 = (x1 - x1p) / np.sqrt(2), (x2 - x2p) / np.sqrt(2)
    zero = np.zeros(n)
    fact = 2 ** (-n / 2) * _normal(h1, h2, 2 * tau2) * _normal(t1, zero, sigma**2) * (
        _normal(t2, zero, sigma**2))
    np.testing.assert_allclose(
        gaussian_hyperkernel(x1, x1p, x2, x2p, sigma, sh), fact, rtol=10 * RTOL)


def test_harmonic_matches_its_series(rng):
    x1, x1p, x2, x2p = rng.normal(size=(4, 2))
    g, lam = 0.3, 0.6
    k1 = np.exp(-g * np.sum((x1 - x1p) ** 2))
    k2 = np.exp(-g * np.sum((x2 - x2p) ** 2))
    series = (1 - lam) * sum((lam * k1 * k2) ** i for i in range(200))
    np.testing.assert_allclose(
        harmonic_hyperkernel(x1, x1p, x2, x2p, g, lam), series, rtol=10 * RTOL)


def _grams(P, Q=None):
    C = np.array([[1.0, 0.2, 0.0], [0.2, 0.8, 0.1], [0.0, 0.1, 1.2]])
    return {
        "gaussian": np.asarray(gaussian_hyperkernel_gram(P, Q, 0.9, 0.7,
                                                         normalize=False)),
        "gaussian_delta": np.asarray(gaussian_hyperkernel_gram(P, Q, 0.9, 0.0)),
        "wishart": np.asarray(wishart_hyperkernel_gram(P, Q, C, 4.0)),
        "harmonic": np.asarray(harmonic_hyperkernel_gram(P, Q, 0.4, 0.7)),
    }


def _min_rel_eig(K):
    K = 0.5 * (K + K.T)
    ev = np.linalg.eigvalsh(K.astype(np.float64))
    return ev[0] / max(ev[-1], 1e-300)


def test_definition_1_positive_definite_on_pairs_and_sections(rng):
    eig_tol = 1e-10 if X64 else 1e-5
    P = rng.normal(size=(40, 2, 3))
    for name, K in _grams(P).items():
        assert _min_rel_eig(K) >= -eig_tol, name
        assert np.all(K >= 0), name
    # Sections: fix a pair x and vary (z_a, z_b) over a grid of points.
    Z = rng.normal(size=(15, 3))
    a, b = np.meshgrid(np.arange(15), np.arange(15), indexing="ij")
    Qgrid = np.stack([Z[a.ravel()], Z[b.ravel()]], axis=1)
    for x in P[:4]:
        for name, row in _grams(x[None], Qgrid).items():
            Kx = row.reshape(15, 15)
            np.testing.assert_allclose(Kx, Kx.T, rtol=10 * RTOL, atol=0)
            assert _min_rel_eig(Kx) >= -eig_tol, name


def test_symmetry_and_pair_swap_invariance(rng):
    P, Q = rng.normal(size=(6, 2, 3)), rng.normal(size=(6, 2, 3))
    grams_pq, grams_qp = _grams(P, Q), _grams(Q, P)
    grams_swapped = _grams(P[:, ::-1], Q[:, ::-1])
    grams_swapped_p = _grams(P[:, ::-1], Q)
    for name in grams_pq:
        np.testing.assert_allclose(grams_pq[name], grams_qp[name].T, rtol=10 * RTOL)
        np.testing.assert_allclose(grams_pq[name], grams_swapped[name], rtol=10 * RTOL)
        np.testing.assert_allclose(grams_pq[name], grams_swapped_p[name],
                                   rtol=10 * RTOL)


def test_scalar_versions_match_grams_and_dtype(rng):
    P = rng.normal(size=(3, 2, 2))
    C = np.eye(2)
    K = gaussian_hyperkernel_gram(P, None, 0.5, 0.5)
    W = wishart_hyperkernel_gram(P, None, C, 2.5)
    H = harmonic_hyperkernel_gram(P, None, 1.0, 0.5)
    dtype = jnp.zeros(()).dtype
    assert K.dtype == W.dtype == H.dtype == dtype
    for i in range(3):
        for j in range(3):
            args = (P[i, 0], P[i, 1], P[j, 0], P[j, 1])
            np.testing.assert_allclose(gaussian_hyperkernel(*args, 0.5, 0.5), K[i, j],
                                       rtol=10 * RTOL)
            np.testing.assert_allclose(wishart_hyperkernel(*args, C, 2.5), W[i, j],
                                       rtol=10 * RTOL)
            np.testing.assert_allclose(harmonic_hyperkernel(*args, 1.0, 0.5), H[i, j],
                                       rtol=10 * RTOL)


def test_high_dimension_stays_finite(rng):
    # 64 features: the normalising constants alone underflow float32.
    P = rng.uniform(size=(5, 2, 64))
    K = np.asarray(gaussian_hyperkernel_gram(P, None, 0.5, 0.5, normalize=False))
    assert np.all(np.isfinite(K)) and np.all(K > 0)
    W = np.asarray(wishart_hyperkernel_gram(0.1 * P, None, np.eye(64), 70.0,
                                            normalize=False))
    assert np.all(np.isfinite(W)) and np.all(W > 0)


def test_no_recompilation_on_new_parameter_values(rng):
    P = rng.normal(size=(4, 2, 2))
    gaussian_hyperkernel_gram(P, None, 0.5, 0.5)
    wishart_hyperkernel_gram(P, None, np.eye(2), 3.0)
    with count_compilations() as compiles:
        gaussian_hyperkernel_gram(P + 1.0, None, 0.7, 1.5)
        wishart_hyperkernel_gram(P, None, 2.0 * np.eye(2), 4.5)
    assert compiles.count == 0


@pytest.mark.parametrize(
    "call, match",
    [
        (lambda P: gaussian_hyperkernel_gram(P, None, 0.0, 1.0), "sigma must be > 0"),
        (lambda P: gaussian_hyperkernel_gram(P, None, -1.0, 1.0), "sigma must be > 0"),
        (lambda P: gaussian_hyperkernel_gram(P, None, 1.0, -0.1), "sigma_h"),
        (lambda P: wishart_hyperkernel_gram(P, None, np.eye(2), 1.0), "r must be >"),
        (lambda P: wishart_hyperkernel_gram(P, None, -np.eye(2), 3.0),
         "positive definite"),
        (lambda P: wishart_hyperkernel_gram(P, None, np.array([[1.0, 2.0], [2.0, 1.0]]),
                                            3.0), "positive definite"),
        (lambda P: wishart_hyperkernel_gram(P, None, np.array([[1.0, 0.5], [0.0, 1.0]]),
                                            3.0), "symmetric"),
        (lambda P: wishart_hyperkernel_gram(P, None, np.eye(3), 3.0), "shape"),
        (lambda P: harmonic_hyperkernel_gram(P, None, 1.0, 1.0), "lambda_h"),
        (lambda P: gaussian_hyperkernel_gram(P[:, :1], None, 1.0, 1.0), "pairs"),
        (lambda P: gaussian_hyperkernel_gram(P[0], None, 1.0, 1.0), "pairs"),
        (lambda P: gaussian_hyperkernel_gram(P, np.zeros((2, 2, 3)), 1.0, 1.0),
         "same number of features"),
        (lambda P: gaussian_hyperkernel(np.zeros(2), np.zeros(3), np.zeros(2),
                                        np.zeros(2), 1.0, 1.0), "same length"),
    ],
)
def test_bad_input_raises(call, match):
    P = np.zeros((3, 2, 2))
    with pytest.raises(ValueError, match=match):
        call(P)


def test_nan_pairs_refused():
    P = np.zeros((2, 2, 2))
    P[0, 0, 0] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        gaussian_hyperkernel_gram(P, None, 1.0, 1.0)
