"""The transform of x (:mod:`bayeskde.inverse.transform`): the change of
variables (T) against a fit of log x by hand, the choice (S) on data whose
noise is known to be multiplicative or additive, and bad settings."""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from bayeskde.inverse import (
    InverseGPPrior,
    fit_inverse_gp,
    inverse_gp_predictive,
    predictive_log_density,
)
from bayeskde.inverse.noise import model_average_loo
from bayeskde.inverse.transform import log_jacobian, transform_score
from tests.helpers import DTYPE, LOOSE, RTOL, assert_close

PRIOR = InverseGPPrior(max_degree=2, n_gamma=6)


def _simulator(m, multiplicative, seed=0):
    """Two positive observations of two parameters: log-normal noise around
    exp(f(theta)) (``multiplicative``), or Gaussian noise around 3 + f."""
    rng = np.random.default_rng(seed)
    th = rng.uniform(-1, 1, (m, 2))
    f = np.stack([np.sin(2 * th[:, 0]) + th[:, 1], th[:, 0] * th[:, 1]], 1)
    if multiplicative:
        return np.exp(f + 0.3 * rng.normal(size=f.shape)), th
    return 3.0 + f + 0.05 * rng.normal(size=f.shape), th


@functools.cache
def _fit(multiplicative, transform):
    x, th = _simulator(80, multiplicative)
    return x, th, fit_inverse_gp(
        jax.random.key(0), x, th, PRIOR, method="quadrature", num_samples=50,
        progress_bar=False, num_replicates=2, noise="gaussian",
        transform=transform)


def test_log_fit_is_the_fit_of_log_x():
    """transform="log" is the model of log x: the same fit as passing log x
    with transform="none", the same predictive at log x*, and a log density
    of x* that differs from log x*'s by the Jacobian -sum log x* (T)."""
    x, th, fit = _fit(True, "log")
    ref = fit_inverse_gp(
        jax.random.key(0), np.log(x), th, PRIOR, method="quadrature",
        num_samples=50, progress_bar=False, num_replicates=2, noise="gaussian",
        transform="none")
    assert fit.transform.kind == "log" and ref.transform.kind == "none"
    assert_close(fit.data.X, ref.data.X, rtol=RTOL, atol=RTOL)
    xt = _simulator(6, True, seed=1)[0]
    p_log = inverse_gp_predictive(fit, xt, n_grid=24)
    p_ref = inverse_gp_predictive(ref, np.log(xt), n_grid=24)
    assert_close(p_log.log_probs, p_ref.log_probs, rtol=LOOSE, atol=LOOSE)
    jac = -np.sum(np.log(xt), axis=1)
    assert_close(p_log.log_normalizer, p_ref.log_normalizer + jac,
                 rtol=LOOSE, atol=LOOSE)
    ye = np.broadcast_to(np.asarray(p_log.modes[:, :1], float), (6, 1, 2))
    got = predictive_log_density(p_log, ye, xt)
    want = predictive_log_density(p_ref, ye, np.log(xt)) + jac[:, None]
    assert_close(got, want, rtol=LOOSE, atol=LOOSE)
    # normalised, the Jacobian cancels: a density of y
    assert_close(predictive_log_density(p_log, ye, xt, normalized=True),
                 predictive_log_density(p_ref, ye, np.log(xt), normalized=True),
                 rtol=LOOSE, atol=LOOSE)


def test_score_is_the_loo_density_of_x():
    """Score (S) of each fit: the Gaussian noise's mean model-averaged LOO
    density of t(x) plus the mean Jacobian."""
    x, _, fit = _fit(True, "log")
    loo = float(np.mean(model_average_loo(fit)))
    assert_close(fit.transform.scores["log"],
                 loo + float(np.mean(log_jacobian("log", x))), rtol=RTOL, atol=RTOL)
    assert_close(transform_score("log", fit.noise, x), fit.transform.scores["log"],
                 rtol=RTOL, atol=RTOL)
    assert_close(log_jacobian("log", x), -np.log(x).sum(1), rtol=RTOL, atol=RTOL)


@pytest.mark.parametrize("multiplicative", [True, False])
def test_auto_finds_the_noise_the_data_have(multiplicative):
    """"auto" keeps log x for log-normal noise and x for additive Gaussian
    noise on positive data, each by a margin of more than 0.2 nats a point,
    and records both scores."""
    _, _, fit = _fit(multiplicative, "auto")
    want = "log" if multiplicative else "none"
    other = "none" if multiplicative else "log"
    assert fit.transform.kind == want and fit.transform.requested == "auto"
    s = fit.transform.scores
    assert s[want] > s[other] + 0.2, s


def test_auto_skips_the_log_where_x_is_not_positive():
    x, th = _simulator(40, False)
    x = x - 3.5
    fit = fit_inverse_gp(jax.random.key(0), x, th, PRIOR, method="quadrature",
                         num_samples=20, progress_bar=False, num_replicates=2,
                         noise="gaussian")
    assert fit.transform.kind == "none" and set(fit.transform.scores) == {"none"}


def test_bad_transforms():
    x, th, fit = _fit(True, "log")
    with pytest.raises(ValueError, match="transform must be one of"):
        fit_inverse_gp(jax.random.key(0), x, th, PRIOR, transform="sqrt")
    with pytest.raises(ValueError, match="X has entries <= 0"):
        fit_inverse_gp(jax.random.key(0), x - 10.0, th, PRIOR, transform="log")
    with pytest.raises(ValueError, match="X_test has entries <= 0"):
        inverse_gp_predictive(fit, -np.ones((2, 2)))
    with pytest.raises(ValueError, match="NaN|finite"):
        inverse_gp_predictive(fit, jnp.full((2, 2), jnp.nan, DTYPE))
