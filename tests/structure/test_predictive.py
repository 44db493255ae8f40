"""The mixture forecast: each component against scikit-learn's GP predictive
(oracle), the closed-form CRPS against quadrature of its integral definition,
quantiles against the mixture's CDF, joint draws against the mixture's moments
(Monte Carlo)."""

import jax
import numpy as np
from scipy.special import ndtr
from sklearn.gaussian_process import GaussianProcessRegressor
from sklearn.gaussian_process import kernels as sk

from bayeskde.structure import (
    mixture_crps,
    mixture_log_density,
    mixture_mean,
    mixture_predictive,
    mixture_quantiles,
    mixture_sample,
)
from tests.helpers import LOOSE, RTOL, X64, assert_close

T_NEW = np.array([13.7, 14.0, 15.2, 17.5])


def test_components_match_sklearn(handmade):
    post, t, y = handmade
    pred = mixture_predictive(post, T_NEW)
    sc = post.scales
    tau, z = np.asarray(post.tau, np.float64), np.asarray(post.z, np.float64)
    tau_new = (T_NEW - sc.t_min) / sc.span
    assert_close(pred.weights, [0.7, 0.3])
    for c, u in enumerate(post.component_u):
        th = np.where(post.grammar.param_positive, np.exp(u), u)
        kernel = sk.ConstantKernel(th[0])
        per = sk.ConstantKernel(th[4]) * sk.ExpSineSquared(th[5], th[6])
        kernel = kernel + per
        gpr = GaussianProcessRegressor(kernel, alpha=th[1] + post.floor,
                                       optimizer=None)
        has_lin = bool(post.grammar.masks[post.component_structure[c], 0])
        if has_lin:
            # the linear term as an explicit feature covariance on shifted times
            off = th[3]
            K = kernel(tau[:, None]) + th[2] * np.outer(tau - off, tau - off)
            Ks = kernel(tau[:, None], tau_new[:, None]) + th[2] * np.outer(
                tau - off, tau_new - off)
            Kss = kernel.diag(tau_new[:, None]) + th[2] * (tau_new - off) ** 2
            Ky = K + (th[1] + post.floor) * np.eye(tau.size)
            mean = Ks.T @ np.linalg.solve(Ky, z)
            var = Kss - np.sum(Ks * np.linalg.solve(Ky, Ks), 0) + th[1] + post.floor
        else:
            gpr.fit(tau[:, None], z)
            mean, sd = gpr.predict(tau_new[:, None], return_std=True)
            var = sd ** 2 + th[1] + post.floor
        tol = RTOL * 100 if X64 else LOOSE
        assert_close(pred.means[c], sc.y_mean + sc.y_sd * mean, rtol=tol, atol=tol)
        assert_close(pred.sds[c], sc.y_sd * np.sqrt(var), rtol=tol, atol=tol)
    assert_close(mixture_mean(pred), pred.weights @ pred.means)


def test_scores_against_definitions(handmade):
    post, _, _ = handmade
    pred = mixture_predictive(post, T_NEW)
    y = pred.means[0] + np.array([-1.0, 0.3, 2.0, 0.0]) * pred.sds[0]
    dens = np.einsum("c,cm->m", pred.weights, np.exp(
        -0.5 * ((y - pred.means) / pred.sds) ** 2) / (np.sqrt(2 * np.pi) * pred.sds))
    assert_close(mixture_log_density(pred, y), np.log(dens), rtol=LOOSE, atol=LOOSE)
    # CRPS = int (F(x) - 1{x >= y})^2 dx (Gneiting and Raftery 2007, eq. 20)
    x = np.linspace(pred.means.min() - 12 * pred.sds.max(),
                    pred.means.max() + 12 * pred.sds.max(), 200001)
    for i in range(y.size):
        F = pred.weights @ ndtr((x[None] - pred.means[:, i:i + 1])
                                / pred.sds[:, i:i + 1])
        quad = np.trapezoid((F - (x >= y[i])) ** 2, x)
        np.testing.assert_allclose(mixture_crps(pred, y)[i], quad, rtol=1e-4)
    q = mixture_quantiles(pred, [0.05, 0.5, 0.95])
    for k, level in enumerate([0.05, 0.5, 0.95]):
        cdf = np.einsum("c,cm->m", pred.weights,
                        ndtr((q[k][None] - pred.means) / pred.sds))
        np.testing.assert_allclose(cdf, level, atol=1e-9)


def test_joint_draws_match_moments(handmade):
    post, _, _ = handmade
    pred = mixture_predictive(post, T_NEW)
    draws = mixture_sample(jax.random.key(3), post, T_NEW, 20000)
    assert draws.shape == (T_NEW.size, 20000)
    mean = mixture_mean(pred)
    var = pred.weights @ (pred.sds ** 2 + pred.means ** 2) - mean ** 2
    se = np.sqrt(var / 20000)
    assert np.all(np.abs(draws.mean(1) - mean) < 5 * se)
    # variance: 5 standard errors of a sample variance (kurtosis <= 9 here)
    assert np.all(np.abs(draws.var(1) - var) < 5 * var * np.sqrt(8 / 20000))
    same = mixture_sample(jax.random.key(3), post, T_NEW, 20000)
    np.testing.assert_array_equal(draws, same)


def _log_normal_mixture():
    from bayeskde.structure import MixturePredictive

    means = np.array([[0.2, 1.0, 2.5], [0.6, 0.8, 3.0]])
    sds = np.array([[0.3, 0.5, 0.2], [0.4, 0.2, 0.6]])
    return MixturePredictive(np.array([0.35, 0.65]), means, sds, np.array([0, 1]),
                             0.0, True)


def test_log_normal_components_against_scipy():
    """Log-scale components: mean, density, quantiles against scipy's lognorm,
    and the CRPS against the closed form of one log-normal (Baran and Lerch
    2015) and against quadrature of its integral definition for the mixture."""
    from scipy.integrate import quad
    from scipy.stats import lognorm

    from bayeskde.structure import MixturePredictive

    pred = _log_normal_mixture()
    y = np.array([1.1, 0.5, 20.0])
    dists = [[lognorm(s=pred.sds[c, j], scale=np.exp(pred.means[c, j]))
              for j in range(3)] for c in range(2)]
    mean = [sum(pred.weights[c] * dists[c][j].mean() for c in range(2))
            for j in range(3)]
    np.testing.assert_allclose(mixture_mean(pred), mean, rtol=1e-12)
    dens = [sum(pred.weights[c] * dists[c][j].pdf(y[j]) for c in range(2))
            for j in range(3)]
    assert_close(mixture_log_density(pred, y), np.log(dens), rtol=LOOSE, atol=LOOSE)
    q = mixture_quantiles(pred, [0.1, 0.9])
    for j in range(3):
        cdf = sum(pred.weights[c] * dists[c][j].cdf(q[:, j]) for c in range(2))
        np.testing.assert_allclose(cdf, [0.1, 0.9], atol=1e-9)
    crps = mixture_crps(pred, y)
    for j in range(3):
        def integrand(x, j=j):
            F = sum(pred.weights[c] * dists[c][j].cdf(x) for c in range(2))
            return (F - (x >= y[j])) ** 2

        want = (quad(integrand, 0, y[j], limit=200)[0]
                + quad(integrand, y[j], np.inf, limit=200)[0])
        np.testing.assert_allclose(crps[j], want, rtol=1e-6)
    one = MixturePredictive(np.ones(1), pred.means[:1], pred.sds[:1], np.zeros(1, int),
                            0.0, True)
    mu, s = pred.means[0], pred.sds[0]
    z = (np.log(y) - mu) / s
    closed = y * (2 * ndtr(z) - 1) - 2 * np.exp(mu + s * s / 2) * (
        ndtr(z - s) + ndtr(s / np.sqrt(2)) - 1)
    np.testing.assert_allclose(mixture_crps(one, y), closed, rtol=1e-6)
