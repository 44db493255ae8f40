"""The covariance function (H) of :mod:`bayeskde.inverse.heteroscedastic`:
its likelihood against SciPy's multivariate normal, its fit against a known
covariance function (Monte Carlo), and the fit's choice by held-out density."""

import jax.numpy as jnp
import numpy as np
import pytest
from scipy.stats import multivariate_normal

from bayeskde.inverse import HeteroscedasticNoise
from bayeskde.inverse.heteroscedastic import (
    UNROLL_MAX_DIM,
    fit_heteroscedastic_noise,
    heteroscedastic_log_likelihood,
    noise_cholesky,
)
from bayeskde.inverse.mixture import component_log_likelihood
from tests.helpers import DTYPE, LOOSE, RTOL, assert_close


def _known_noise(Y):
    """A covariance that moves with y: scales and correlation from y."""
    s1 = 0.2 + Y[:, 0] ** 2 / 4
    s2 = 0.5 * np.exp(0.3 * Y[:, 1])
    rho = np.tanh(Y[:, 2])
    return np.stack([np.stack([s1**2, rho * s1 * s2], -1),
                     np.stack([rho * s1 * s2, s2**2], -1)], -2)


@pytest.fixture(scope="module")
def fitted():
    rng = np.random.default_rng(0)
    Y = rng.uniform(-3, 3, (600, 3))
    C = _known_noise(Y)
    R = np.einsum("nij,nj->ni", np.linalg.cholesky(C), rng.standard_normal((600, 2)))
    v = np.full(600, 1e-3)
    noise, held = fit_heteroscedastic_noise(
        jnp.asarray(Y, DTYPE), jnp.asarray(R, DTYPE), jnp.asarray(v, DTYPE),
        gamma_factors=(1.0,), taus=(1.0,))
    return Y, R, v, noise, held


def test_likelihood_is_the_multivariate_normal(fitted):
    """log N(x; mu, Sigma(y) + var_f I) per (test, output) equals SciPy's
    with Sigma from noise_cholesky; L lower triangular, positive diagonal."""
    _, _, _, noise, _ = fitted
    rng = np.random.default_rng(1)
    ys = rng.uniform(-3, 3, (5, 3))
    mean = rng.normal(size=(5, 2))
    var_f = rng.uniform(0.0, 0.3, 5)
    X = rng.normal(size=(4, 2))
    got = np.asarray(heteroscedastic_log_likelihood(
        noise, jnp.asarray(ys, DTYPE), jnp.asarray(mean, DTYPE),
        jnp.asarray(var_f, DTYPE), jnp.asarray(X, DTYPE)), float)
    L = np.asarray(noise_cholesky(noise, jnp.asarray(ys, DTYPE)), float)
    assert np.all(np.triu(L, 1) == 0) and np.all(np.diagonal(L, axis1=1, axis2=2) > 0)
    want = np.array([[multivariate_normal(mean[c], L[c] @ L[c].T + var_f[c] * np.eye(2)
                                          ).logpdf(x) for c in range(5)] for x in X])
    assert_close(got, want, rtol=LOOSE, atol=LOOSE)


@pytest.mark.parametrize("d", [2, 6])
@pytest.mark.parametrize("structure", ["diagonal", "full"])
def test_likelihood_at_any_dimension(d, structure):
    """The same oracle for a (H) with random functions, on both sides of
    UNROLL_MAX_DIM (unrolled factorisation below, LAPACK above) and for the
    diagonal structure's closed form."""
    assert 2 <= UNROLL_MAX_DIM < 6
    rng = np.random.default_rng(4)
    d_y, F = 3, 8
    rows, cols = (np.tril_indices(d, -1) if structure == "full"
                  else (np.zeros(0, int), np.zeros(0, int)))
    Q = d + rows.size
    omega = rng.normal(size=(d_y, F // 2))
    n_poly = d_y + d_y * (d_y + 1) // 2
    noise = HeteroscedasticNoise(
        jnp.asarray(omega, DTYPE), jnp.zeros(d_y, DTYPE), jnp.ones(d_y, DTYPE),
        jnp.asarray(rng.normal(scale=0.3, size=Q), DTYPE),
        jnp.asarray(rng.normal(scale=0.2, size=(F + n_poly, Q)), DTYPE),
        jnp.asarray(rows), jnp.asarray(cols), jnp.asarray(0.0, DTYPE),
        jnp.asarray(1.0, DTYPE), jnp.asarray(1.0, DTYPE))
    assert noise.structure == structure
    ys = rng.uniform(-1, 1, (5, d_y))
    mean = rng.normal(size=(5, d))
    var_f = rng.uniform(0.0, 0.3, 5)
    X = rng.normal(size=(4, d))
    got = np.asarray(heteroscedastic_log_likelihood(
        noise, jnp.asarray(ys, DTYPE), jnp.asarray(mean, DTYPE),
        jnp.asarray(var_f, DTYPE), jnp.asarray(X, DTYPE)), float)
    L = np.asarray(noise_cholesky(noise, jnp.asarray(ys, DTYPE)), float)
    want = np.array([[multivariate_normal(mean[c], L[c] @ L[c].T + var_f[c] * np.eye(d)
                                          ).logpdf(x) for c in range(5)] for x in X])
    assert_close(got, want, rtol=LOOSE, atol=LOOSE)


def test_fit_recovers_a_known_covariance_function(fitted):
    """On 600 draws r_i ~ N(0, Sigma(y_i)) the fitted Sigma's scales are within
    20% (median) and its correlation within 0.1 (mean absolute) of the truth
    on new outputs, and its held-out log density is within 0.35 nats of the
    true covariance's and far above the best constant covariance's."""
    Y, R, v, noise, held = fitted
    assert noise.structure == "full"
    rng = np.random.default_rng(2)
    Yt = rng.uniform(-3, 3, (2000, 3))
    C = _known_noise(Yt)
    L = np.asarray(noise_cholesky(noise, jnp.asarray(Yt, DTYPE)), float)
    S = L @ L.transpose(0, 2, 1)
    sd_err = np.abs(np.sqrt(np.diagonal(S, axis1=1, axis2=2))
                    / np.sqrt(np.diagonal(C, axis1=1, axis2=2)) - 1)
    assert np.median(sd_err) < 0.2, np.median(sd_err)
    rho = S[:, 0, 1] / np.sqrt(S[:, 0, 0] * S[:, 1, 1])
    rho_true = C[:, 0, 1] / np.sqrt(C[:, 0, 0] * C[:, 1, 1])
    assert np.mean(np.abs(rho - rho_true)) < 0.1
    Ce = _known_noise(Y) + v[:, None, None] * np.eye(2)
    true = np.mean([multivariate_normal(np.zeros(2), c).logpdf(r)
                    for r, c in zip(R, Ce, strict=True)])
    constant = multivariate_normal(np.zeros(2), np.cov(R.T)).logpdf(R).mean()
    assert held.shape == (600,)
    assert true - 0.35 < held.mean() < true + 0.1, (held.mean(), true)
    assert held.mean() > constant + 1.0, (held.mean(), constant)


def test_diagonal_structure_on_independent_noise():
    """Noise with y-dependent variances and no correlation: "diagonal" is
    chosen or "full" holds no more than 0.02 nats above it, and a constant
    noise gives a flat variance function."""
    rng = np.random.default_rng(3)
    Y = rng.uniform(-1, 1, (300, 1))
    sd = np.exp(0.8 * Y[:, 0])
    R = np.stack([sd, 0.5 * np.ones(300)], 1) * rng.standard_normal((300, 2))
    noise, held = fit_heteroscedastic_noise(
        jnp.asarray(Y, DTYPE), jnp.asarray(R, DTYPE), jnp.zeros(300, DTYPE),
        gamma_factors=(1.0,), taus=(1.0,), structures=("diagonal",))
    assert noise.structure == "diagonal" and noise.lower_rows.shape == (0,)
    L = np.asarray(noise_cholesky(noise, jnp.linspace(-1, 1, 5)[:, None].astype(DTYPE)))
    sd_fit = L[:, 0, 0]
    # the first output's scale grows with y as exp(0.8 y), the second is flat
    slope = np.polyfit(np.linspace(-1, 1, 5), np.log(sd_fit), 1)[0]
    assert 0.5 < slope < 1.1, slope
    assert np.ptp(np.log(L[:, 1, 1])) < 0.3


def test_component_likelihood_dispatches(fitted):
    """component_log_likelihood uses (H) for noisy test inputs and the
    latent N(mu, var_f I) for exact ones; (H) needs the outputs."""
    _, _, _, noise, _ = fitted
    ys = jnp.asarray([[0.5, -1.0, 0.2], [2.0, 1.0, -1.0]], DTYPE)
    mean = jnp.asarray([[0.1, 0.2], [0.0, -0.3]], DTYPE)
    var_f = jnp.asarray([0.05, 0.2], DTYPE)
    X = jnp.asarray([[0.3, 0.1]], DTYPE)
    s2 = jnp.asarray(0.01, DTYPE)
    noisy = component_log_likelihood(mean, var_f, s2, X, jnp.asarray(1.0, DTYPE),
                                     noise, ys)
    assert_close(noisy, heteroscedastic_log_likelihood(noise, ys, mean, var_f, X),
                 rtol=RTOL, atol=RTOL)
    exact = component_log_likelihood(mean, var_f, s2, X, jnp.asarray(0.0, DTYPE),
                                     noise, ys)
    want = [multivariate_normal(np.asarray(mean[c]), float(var_f[c]) * np.eye(2)
                                ).logpdf(np.asarray(X[0])) for c in range(2)]
    assert_close(exact[0], want, rtol=LOOSE, atol=LOOSE)
    with pytest.raises(ValueError, match="outputs"):
        component_log_likelihood(mean, var_f, s2, X, jnp.asarray(1.0, DTYPE), noise)
    assert isinstance(noise, HeteroscedasticNoise)


def test_bad_structures():
    with pytest.raises(ValueError, match="structures"):
        fit_heteroscedastic_noise(jnp.zeros((10, 1)), jnp.zeros((10, 2)),
                                  jnp.zeros(10), structures=("banded",))
