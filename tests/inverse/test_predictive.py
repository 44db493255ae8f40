"""The inverse model's predictive: mixture, grid, importance sampling, priors and
draws against brute force."""

import jax
import jax.numpy as jnp
import numpy as np
import numpyro.distributions as dist
import pytest
from scipy import stats

from bayeskde.datasets import make_sshape
from bayeskde.learn import (
    InverseGPRegressor,
    Modes,
    fit_inverse_gp,
    inverse_gp_predictive,
    inverse_gp_sample,
    top_k_modes,
)
from bayeskde.models import (
    InverseGPPrior,
    inverse_gp_mixture,
    mixture_log_likelihood,
    prepare_inverse_gp_data,
)
from tests.conftest import X64

PRIOR = InverseGPPrior(max_degree=2, n_gamma=8)


@pytest.fixture(scope="module")
def sshape_fit():
    d = make_sshape(jax.random.key(0), 150)
    # the quadrature posterior (NUTS's fit of the same model is tested in
    # tests/models/test_inverse_gp.py; here the fit only feeds the predictive)
    fit = fit_inverse_gp(jax.random.key(1), d.x_train, d.t_train, PRIOR,
                         method="quadrature", num_samples=60, num_chains=2,
                         progress_bar=False, n_replicates=2)
    return d, fit


def _gp_density(Y, X, y, x, gamma, alpha, a, s, noisy):
    """log N(x; mu(y), var(y) I) of the GP of (F), by dense linear algebra."""
    def k(A, B):
        d2 = ((A[:, None] - B[None]) ** 2).sum(-1)
        return sum(w * np.exp(-(i + 1) * gamma * d2) for i, w in enumerate(alpha))

    xm = X.mean(0)
    S = a * k(Y, Y) + s * np.eye(len(Y))
    ks = a * k(y[None], Y)[0]
    mu = ks @ np.linalg.solve(S, X - xm) + xm
    var = a * alpha.sum() - ks @ np.linalg.solve(S, ks) + noisy * s
    return stats.multivariate_normal(mu, var * np.eye(len(x))).logpdf(x)


def test_mixture_is_the_model_average_of_gp_predictives():
    """log sum_{s, pair} w N(x; mu, var) from the mixture equals the same sum of
    dense GP predictive densities, the weights the per-draw pair posteriors."""
    r = np.random.default_rng(3)
    Y = r.uniform(size=(25, 1))
    X = np.c_[np.sin(4 * Y[:, 0]), Y[:, 0] ** 2] + 0.1 * r.normal(size=(25, 2))
    prior = InverseGPPrior(max_degree=2, n_gamma=3, gamma_low=0.3, gamma_high=3.0)
    data = prepare_inverse_gp_data(Y, X, prior)
    amp, noi = np.array([0.5, 0.9]), np.array([0.02, 0.05])
    lj = r.normal(size=(2, 3, 2)) * 2
    mix = inverse_gp_mixture(data, amp, noi, lj)
    cand = np.array([[0.2], [0.55], [0.9]])
    xt = np.array([[0.5, 0.3], [-0.4, 0.7]])
    dt = data.X.dtype
    got = np.asarray(mixture_log_likelihood(mix, jnp.asarray(cand, dt),
                                            jnp.asarray(xt, dt),
                                            jnp.asarray(1.0, dt)))
    w = np.exp(lj.reshape(2, -1) - lj.reshape(2, -1).max(1, keepdims=True))
    w /= w.sum(1, keepdims=True) * 2
    ref = np.full((2, 3), -np.inf)
    for s in range(2):
        for p in range(6):
            g, dd = divmod(p, 2)
            alpha = np.asarray(data.alpha[g, dd], float)
            for i in range(2):
                for c in range(3):
                    ref[i, c] = np.logaddexp(ref[i, c], np.log(w[s, p]) + _gp_density(
                        Y, X, cand[c], xt[i], float(data.gammas[g]), alpha,
                        amp[s], noi[s], 1.0))
    np.testing.assert_allclose(got, ref, rtol=1e-7 if X64 else 2e-3,
                               atol=1e-7 if X64 else 2e-3)


def test_component_resampling_keeps_the_average(sshape_fit):
    """Above max_components the components are a systematic resample: its
    predictive density stays close to the full Rao-Blackwellised one."""
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
    # total variation between the two predictives over the grid
    pa, pb = a / a.sum(1, keepdims=True), b / b.sum(1, keepdims=True)
    assert np.max(0.5 * np.abs(pa - pb).sum(1)) < 0.02


def _grid_cdf(pred):
    """CDF of the piecewise-constant grid density (1-D) as a callable."""
    edges = np.r_[pred.support[:, 0] - pred.cell[0] / 2,
                  pred.support[-1, 0] + pred.cell[0] / 2]
    cdf = np.r_[0.0, np.cumsum(np.exp(pred.log_probs[0]))]
    return lambda t: np.interp(t, edges, cdf / cdf[-1])


def test_grid_draws_follow_the_grid_predictive(sshape_fit):
    """KS test of draws against the exact CDF of the grid density they come
    from, at a three-branch input; and the default grid against a 4,000-cell
    one (discretisation)."""
    _, fit = sshape_fit
    x = np.array([0.45])
    pred = inverse_gp_predictive(fit, x, n_draws=20, refine=False)
    draws = inverse_gp_sample(jax.random.key(5), fit, x, 4000, predictive=pred,
                              subdivide=1)
    assert draws.shape == (1, 4000, 1)
    assert stats.kstest(draws[0, :, 0], _grid_cdf(pred)).pvalue > 0.01
    fine = inverse_gp_predictive(fit, x, n_draws=20, n_grid=4000, refine=False)
    assert stats.kstest(draws[0, :, 0], _grid_cdf(fine)).pvalue > 0.01
    again = inverse_gp_sample(jax.random.key(5), fit, x, 4000, predictive=pred,
                              subdivide=1)
    np.testing.assert_array_equal(draws, again)
    # the default refines every one of the 512 cells 8-fold: the draws of a
    # 4,096-cell midpoint rule, against the 4,000-cell grid's CDF
    refined = inverse_gp_sample(jax.random.key(6), fit, x, 4000, predictive=pred)
    assert stats.kstest(refined[0, :, 0], _grid_cdf(fine)).pvalue > 0.01


def test_importance_draws_match_the_grid_in_one_dimension(sshape_fit):
    """The importance path (the one used above two outputs: adaptive
    importance sampling, Langevin chains, importance sampling from the chains)
    run on a 1-D task: its resampled draws against the fine grid's CDF (the
    same uniform prior), by the KS statistic at the 1% critical value of its
    effective sample size; its modes on the three branches."""
    _, fit = sshape_fit
    x = np.array([0.45])
    fine = inverse_gp_predictive(fit, x, n_draws=20, n_grid=4000, refine=False)
    imp = inverse_gp_predictive(fit, x, n_draws=20, method="importance",
                                key=jax.random.key(2))
    assert imp.method == "importance" and imp.support.shape[:2] == (1, 1024)
    ess = float(imp.ess[0])
    assert ess > 100
    draws = inverse_gp_sample(jax.random.key(3), fit, x, 4000, predictive=imp)
    D = stats.kstest(draws[0, :, 0], _grid_cdf(fine)).statistic
    assert D < 1.63 / np.sqrt(ess)
    roots = np.array([0.179195, 0.559415, 0.749995])  # t + 0.3 sin 2 pi t = 0.45
    np.testing.assert_allclose(np.sort(imp.modes[0, :, 0]), roots, atol=0.05)


def test_output_priors_multiply_the_likelihood(sshape_fit):
    """A NumPyro prior's grid predictive is the uniform one times its density,
    renormalised; a box confines the grid (and every draw) to it."""
    _, fit = sshape_fit
    x = np.array([0.45, 0.2])
    uni = inverse_gp_predictive(fit, x, n_draws=10, refine=False, margin=0.1)
    g = uni.support[:, 0]
    prior = dist.Normal(0.3, 0.15).expand([1]).to_event(1)
    got = inverse_gp_predictive(fit, x, n_draws=10, refine=False, margin=0.1,
                                output_prior=prior)
    ref = uni.log_probs + stats.norm(0.3, 0.15).logpdf(g)[None]
    ref -= np.logaddexp.reduce(ref, axis=1, keepdims=True)
    np.testing.assert_allclose(got.log_probs, ref, atol=1e-8 if X64 else 2e-4)
    box = inverse_gp_predictive(fit, x, n_draws=10, output_prior=(0.5, 0.9),
                                refine=True)
    assert box.support.min() >= 0.5 and box.support.max() <= 0.9
    assert np.all((box.modes >= 0.5) & (box.modes <= 0.9))
    draws = inverse_gp_sample(jax.random.key(0), fit, x, 500, predictive=box)
    assert draws.min() >= 0.5 and draws.max() <= 0.9
    # a bounded distribution's support is the grid's box
    u = inverse_gp_predictive(fit, x, n_draws=10, refine=False,
                              output_prior=dist.Uniform(0.1, 0.6).expand([1])
                              .to_event(1))
    np.testing.assert_allclose([u.support.min(), u.support.max()],
                               [0.1 + 0.25 / 512, 0.6 - 0.25 / 512], rtol=1e-6)


def test_top_k_modes_per_row_supports_equal_the_shared_path():
    r = np.random.default_rng(0)
    Z = np.sort(r.uniform(size=(300, 1)), axis=0)
    P = np.exp(-0.5 * ((Z[:, 0][None] - np.array([[0.2], [0.7]])) / 0.05) ** 2)
    P += 0.5 * np.exp(-0.5 * ((Z[:, 0][None] - 0.45) / 0.04) ** 2)
    shared = top_k_modes(Z, P, 3, 0.08)
    each = top_k_modes(np.broadcast_to(Z, (2, 300, 1)), P, 3, 0.08)
    for a, b in zip(shared, each, strict=True):
        np.testing.assert_array_equal(a, b)
    grid = np.linspace(0, 1, 401)[:, None]
    g = grid[:, 0][None]
    Pg = (np.exp(-0.5 * ((g - np.array([[0.3], [0.2]])) / 0.05) ** 2)
          + 0.6 * np.exp(-0.5 * ((g - np.array([[0.8], [0.65]])) / 0.04) ** 2))
    boxed = top_k_modes(grid, Pg, 2, 0.1, grid_shape=(401,))
    ball = top_k_modes(grid, Pg, 2, 0.1)
    np.testing.assert_allclose(boxed[0], ball[0])
    np.testing.assert_allclose(boxed[1], ball[1], atol=1e-12)
    with pytest.raises(ValueError, match="grid_shape"):
        top_k_modes(grid, Pg, 2, 0.1, grid_shape=(400,))


def test_estimator_samples_and_modes(sshape_fit):
    d, _ = sshape_fit
    est = InverseGPRegressor(PRIOR, key=jax.random.key(0), num_samples=30,
                             num_chains=2, n_draws=5)
    est.fit(d.x_train[:, None], d.t_train)
    z = d.x_test[::100, None]
    res = est.predict_modes(z, 2)
    assert isinstance(res, Modes) and res.modes.shape == (5, 2, 1)
    np.testing.assert_allclose(est.predict(z), res.modes[:, 0, 0])
    s = est.sample(z, 50, key=jax.random.key(3))
    assert s.shape == (5, 50, 1)
    np.testing.assert_array_equal(s, est.sample(z, 50, key=jax.random.key(3)))


def test_bad_predictive_settings(sshape_fit):
    _, fit = sshape_fit
    x = np.array([0.3])
    bad = [
        (dict(output_prior="foo"), ValueError, "output_prior"),
        (dict(output_prior=(1.0, 0.0)), ValueError, "low < high"),
        (dict(output_prior=([0.0, 0.0], [1.0, 1.0])), ValueError, "broadcast|shape"),
        (dict(output_prior=object()), TypeError, "output_prior"),
        (dict(output_prior=dist.Normal(jnp.zeros(3), 1.0).to_event(1)), ValueError,
         "log_prob"),
        (dict(method="grid2"), ValueError, "method"),
        (dict(n_grid=1), ValueError, "n_grid"),
        (dict(margin=-0.5), ValueError, "margin"),
        (dict(mode="mean"), ValueError, "mode"),
        (dict(k=0), ValueError, "k"),
        (dict(mode_radius=0.0), ValueError, "mode_radius"),
        (dict(method="importance", n_particles=1), ValueError, "n_particles"),
        (dict(method="importance", key="abc"), TypeError, "key"),
    ]
    for kw, err, msg in bad:
        with pytest.raises(err, match=msg):
            inverse_gp_predictive(fit, x, n_draws=3, **kw)
    for X_bad, msg in ((np.zeros((2, 3)), "X_test"), (np.array([np.nan]), "NaN|finite"),
                       (np.zeros((0, 1)), "empty")):
        with pytest.raises(ValueError, match=msg):
            inverse_gp_predictive(fit, X_bad, n_draws=3)
    with pytest.raises(ValueError, match="num_samples"):
        inverse_gp_sample(jax.random.key(0), fit, x, 0, n_draws=3)
    with pytest.raises(TypeError, match="key"):
        inverse_gp_sample("abc", fit, x, 5, n_draws=3)
    with pytest.raises(ValueError, match="subdivide"):
        inverse_gp_sample(jax.random.key(0), fit, x, 5, n_draws=3, subdivide=0)
