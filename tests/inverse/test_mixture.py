"""The inverse model's mixture predictive against dense GP predictives.

Oracle: the GP predictive of (F) by dense linear algebra (NumPy solves with
the m x m covariance a^2 phi(K) + s^2 I), summed over (draw, pair) components
by hand with the per-draw pair posteriors as weights.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import stats

from bayeskde.inverse import (
    InverseGPPrior,
    inverse_gp_mixture,
    mixture_log_likelihood,
    mixture_moments,
    prepare_inverse_gp_data,
)
from bayeskde.inverse import mixture as mixture_module
from bayeskde.inverse.mixture import blocked_log_likelihood, fit_mixture
from tests.helpers import LOOSE, assert_close
from tests.inverse.rounding import term_scale


def _k(A, B, gamma, alpha):
    d2 = ((A[:, None] - B[None]) ** 2).sum(-1)
    return sum(w * np.exp(-(i + 1) * gamma * d2) for i, w in enumerate(alpha))


def _gp_moments(Y, X, y, gamma, alpha, a, s):
    """Mean and latent variance of the GP of (F) at outputs ``y``, dense."""
    xm = X.mean(0)
    S = a * _k(Y, Y, gamma, alpha) + s * np.eye(len(Y))
    ks = a * _k(y, Y, gamma, alpha)
    mu = ks @ np.linalg.solve(S, X - xm) + xm
    var = a * alpha.sum() - np.sum(ks * np.linalg.solve(S, ks.T).T, 1)
    return mu, var


@pytest.fixture(scope="module")
def small():
    r = np.random.default_rng(3)
    Y = r.uniform(size=(25, 1))
    X = np.c_[np.sin(4 * Y[:, 0]), Y[:, 0] ** 2] + 0.1 * r.normal(size=(25, 2))
    prior = InverseGPPrior(max_degree=2, n_gamma=3, gamma_low=0.3, gamma_high=3.0)
    return Y, X, prepare_inverse_gp_data(jax.random.key(0), X, Y, prior)


def test_mixture_is_the_model_average_of_gp_predictives(small):
    """log sum_{s, pair} w N(x; mu, var) from the mixture equals the same sum of
    dense GP predictive densities, the weights the per-draw pair posteriors;
    its moments are the dense GP's."""
    Y, X, data = small
    r = np.random.default_rng(4)
    amp, noi = np.array([0.5, 0.9]), np.array([0.02, 0.05])
    lj = r.normal(size=(2, 3, 2)) * 2
    mix = inverse_gp_mixture(data, amp, noi, lj)
    assert mix.log_w.shape == (12,)
    cand = np.array([[0.2], [0.55], [0.9]])
    xt = np.array([[0.5, 0.3], [-0.4, 0.7]])
    dt = data.X.dtype
    got = np.asarray(mixture_log_likelihood(mix, jnp.asarray(cand, dt),
                                            jnp.asarray(xt, dt),
                                            jnp.asarray(1.0, dt)))
    mean, var_f = (np.asarray(a, float) for a in mixture_moments(
        mix, jnp.asarray(cand, dt)))
    w = np.exp(lj.reshape(2, -1) - lj.reshape(2, -1).max(1, keepdims=True))
    w /= w.sum(1, keepdims=True) * 2
    ref = np.full((2, 3), -np.inf)
    for s in range(2):
        for p in range(6):
            g, dd = divmod(p, 2)
            alpha = np.asarray(data.alpha[g, dd], float)
            mu, vf = _gp_moments(Y, X, cand, float(data.gammas[g]), alpha, amp[s],
                                 noi[s])
            for i in range(2):
                ll = np.array([stats.multivariate_normal(
                    mu[j], (vf[j] + noi[s]) * np.eye(2)).logpdf(xt[i])
                    for j in range(3)])
                ref[i] = np.logaddexp(ref[i], np.log(w[s, p]) + ll)
            # the component of this draw and pair has the dense moments
            comp = [k for k in range(12) if int(mix.pair[k]) == p and np.isclose(
                float(mix.amplitude[k]), amp[s], rtol=1e-6)]
            assert len(comp) == 1
            # the latent variance cancels a^2 sum(alpha) against a^2 k^T S^-1 k
            # (both ~a^2): its rounding is about sqrt(eps) relative to a^2
            assert_close(mean[comp[0]], mu, rtol=LOOSE, atol=LOOSE)
            assert_close(var_f[comp[0]], vf, rtol=LOOSE, atol=LOOSE * amp[s])
    assert_close(got, ref, rtol=LOOSE, atol=LOOSE)


def test_one_component_is_bayes_rule_on_the_gp_predictive(small):
    """One draw, one pair, a uniform prior: the candidates' log likelihoods,
    normalised, are the dense GP predictive's densities normalised."""
    Y, X, data = small
    a, s, g, d = 0.7, 0.05, 2, 1
    lj = np.full((1, 3, 2), -np.inf)
    lj[0, g, d] = 0.0
    mix = inverse_gp_mixture(data, np.array([a]), np.array([s]), lj)
    cand = np.linspace(0, 1, 7)[:, None]
    Xt = np.array([[0.5, 0.2], [-0.3, 0.8]])
    dt = data.X.dtype
    ll = np.asarray(mixture_log_likelihood(mix, jnp.asarray(cand, dt),
                                           jnp.asarray(Xt, dt), jnp.asarray(1.0, dt)),
                    float)
    lp = ll - np.logaddexp.reduce(ll, axis=1, keepdims=True)
    mu, vf = _gp_moments(Y, X, cand, float(data.gammas[g]),
                         np.asarray(data.alpha[g, d], float), a, s)
    ref = np.stack([stats.norm.logpdf(x[None], mu, np.sqrt(vf + s)[:, None]).sum(1)
                    for x in Xt])
    ref -= np.logaddexp.reduce(ref, axis=1, keepdims=True)
    assert_close(lp, ref, rtol=LOOSE, atol=LOOSE)


def test_component_resampling_keeps_the_average(sshape_fit):
    """Above max_components the components are a systematic resample: its
    predictive density stays within total variation 0.02 of the full
    Rao-Blackwellised one (the module docstring's 1e-3 nats at 256)."""
    d, fit = sshape_fit
    post = fit.idata.posterior
    amp = np.asarray(post["amplitude"]).reshape(-1)[::4]
    noi = np.asarray(post["noise"]).reshape(-1)[::4]
    lj = np.asarray(post["pair_log_joint"]).reshape(len(amp) * 4, -1)[::4]
    full = inverse_gp_mixture(fit.data, amp, noi, lj, max_components=10_000)
    few = inverse_gp_mixture(fit.data, amp, noi, lj, max_components=64)
    assert few.log_w.shape[0] <= 64 < full.log_w.shape[0]
    dt = fit.data.X.dtype
    cand = jnp.linspace(0.0, 1.0, 101, dtype=dt)[:, None]
    xt = jnp.asarray(d.x_test[::50, None], dt)
    one = jnp.asarray(1.0, dt)
    a = np.exp(np.asarray(mixture_log_likelihood(full, cand, xt, one)))
    b = np.exp(np.asarray(mixture_log_likelihood(few, cand, xt, one)))
    pa, pb = a / a.sum(1, keepdims=True), b / b.sum(1, keepdims=True)
    assert np.max(0.5 * np.abs(pa - pb).sum(1)) < 0.02


def test_blocks_match_one_program(moons_fit, monkeypatch):
    """blocked_log_likelihood over blocks of 32 candidates equals one program
    over all 300. The same algebra in programs of other shapes, rounded in
    another order: within sqrt(eps) of the size of the terms the log
    likelihoods sum (:func:`tests.inverse.rounding.term_scale`)."""
    x, th, fit = moons_fit("gaussian")
    mix = fit_mixture(fit, "average", 20)
    dt = mix.lam.dtype
    cand = jnp.asarray(np.random.default_rng(1).uniform(-1, 1, (300, 2)), dt)
    X = jnp.asarray(x[:5], dt)
    one = np.asarray(mixture_log_likelihood(mix, cand, X, jnp.asarray(1.0, dt)))
    P, r = mix.lam.shape
    monkeypatch.setattr(mixture_module, "BLOCK_NUMBERS", P * r * 40)  # 32 cells
    blocked = blocked_log_likelihood(mix, cand, X, jnp.asarray(1.0, dt))
    assert blocked.shape == (5, 300)
    err = np.abs(blocked - one) / term_scale(mix, cand, X, 1.0)
    assert err.max() <= LOOSE, err.max()


def test_mixture_refuses_bad_draws(small):
    _, _, data = small
    with pytest.raises(ValueError, match="positive"):
        inverse_gp_mixture(data, np.array([-1.0]), np.ones(1), np.zeros((1, 3, 2)))
