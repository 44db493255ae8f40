"""The inverse model's fit: its InferenceData (named dims, posterior
predictive replicates, the log_likelihood group), the pointwise exact
leave-one-out densities against brute-force refits of a dense GP on m - 1
points, and the NUTS and quadrature fits' outputs."""

import jax
import numpy as np
import pytest
from scipy import stats

from bayeskde.datasets import make_sshape
from bayeskde.inverse import (
    InverseGPFit,
    InverseGPPrior,
    Memo,
    fit_inverse_gp,
    prepare_inverse_gp_data,
)
from bayeskde.inverse.fit import pointwise_loo
from tests.helpers import LOOSE, RTOL, assert_close

PRIOR = InverseGPPrior(max_degree=2, n_gamma=5, gamma_low=0.3, gamma_high=30.0)


def _gram(Y, gamma, alpha):
    d2 = ((Y[:, None, :] - Y[None, :, :]) ** 2).sum(-1)
    return sum(a * np.exp(-(i + 1) * gamma * d2) for i, a in enumerate(alpha))


@pytest.fixture(scope="module")
def small():
    r = np.random.default_rng(3)
    Y = r.uniform(size=(25, 1))
    X = np.c_[np.sin(4 * Y[:, 0]), Y[:, 0] ** 2] + 0.1 * r.normal(size=(25, 2))
    return Y, X, prepare_inverse_gp_data(jax.random.key(0), X, Y, PRIOR)


def test_pointwise_loo_is_the_refits(small):
    """For a fixed pair (a one-hot pair log joint) and two draws of (a^2, s^2):
    log N(x_i; E[x_i | x_-i], var(x_i | x_-i) I) by a dense GP on the other
    m - 1 points, for every i."""
    Y, X, data = small
    m = len(Y)
    Xc = X - X.mean(0)
    g, d = 3, 1
    amp, noi = np.array([0.7, 0.3]), np.array([0.05, 0.01])
    lj = np.full((2, PRIOR.n_gamma, PRIOR.max_degree), -np.inf)
    lj[:, g, d] = 0.0
    got = pointwise_loo(jax.random.key(0), data, Memo(), amp, noi, lj)
    assert got.shape == (2, m)
    K0 = _gram(Y, float(data.gammas[g]), np.asarray(data.alpha[g, d], float))
    for s in range(2):
        K = amp[s] * K0 + noi[s] * np.eye(m)
        want = np.empty(m)
        for i in range(m):
            o = np.arange(m) != i
            w = np.linalg.solve(K[np.ix_(o, o)], K[o, i])
            mu, var = w @ Xc[o], K[i, i] - K[i, o] @ w
            want[i] = stats.multivariate_normal(mu, var * np.eye(2)).logpdf(Xc[i])
        # LOO by one eigendecomposition: the variance 1 / [K^-1]_ii is formed
        # through the spectrum, resolved to sqrt(eps) (LOOSE) of the log
        # density's terms
        assert_close(got[s], want, rtol=LOOSE, atol=LOOSE)


@pytest.fixture(scope="module")
def sshape_nuts():
    d = make_sshape(jax.random.key(0), 150)
    prior = InverseGPPrior(max_degree=2, n_gamma=8)
    fit = fit_inverse_gp(jax.random.key(1), d.x_train, d.t_train, prior,
                         method="nuts", num_warmup=40, num_samples=40,
                         num_chains=2, progress_bar=False, num_replicates=2)
    return d, fit


def test_fit_by_nuts_outputs(sshape_nuts):
    d, fit = sshape_nuts
    assert isinstance(fit, InverseGPFit) and fit.method == "nuts"
    assert_close(fit.pair_posterior.sum(), 1.0, rtol=RTOL)
    post = fit.idata.posterior
    assert post["pair_log_joint"].dims == ("chain", "draw", "gamma", "degree")
    assert fit.idata.posterior_predictive["x"].shape == (1, 2, 150, 1)
    assert fit.idata.observed_data["x"].shape == (150, 1)
    assert_close(fit.idata.observed_data["x"].values[:, 0], d.x_train)
    assert "diverging" in fit.idata.sample_stats
    assert fit.map_params["degree"] in (1, 2)
    # the noise of the data set is N(0, 0.05^2) on x
    assert 0.03**2 < fit.map_params["noise"] < 0.08**2
    # the log_likelihood group: one exact LOO density per draw and point,
    # which PSIS-LOO reads
    ll = fit.idata.log_likelihood["x"]
    assert ll.dims == ("chain", "draw", "point") and ll.shape == (2, 40, 150)
    assert np.all(np.isfinite(ll.values))
    import arviz as az

    loo = az.loo(fit.idata)
    assert np.isfinite(loo.elpd_loo)
    # the elpd is about the mean LOO density of x given y, the noise's scale:
    # log N(0; 0, 0.05^2) = 2.07 a point at most
    assert -2.0 < loo.elpd_loo / 150 < 2.1


def test_fit_by_quadrature_outputs(small):
    Y, X, _ = small
    fit = fit_inverse_gp(jax.random.key(3), X, Y, PRIOR, method="quadrature",
                         num_chains=2, num_samples=50, num_replicates=3,
                         progress_bar=False)
    assert fit.method == "quadrature" and fit.approx == "exact"
    post = fit.idata.posterior
    assert post["pair_log_joint"].dims == ("chain", "draw", "gamma", "degree")
    assert post["amplitude"].shape == (2, 50)
    assert_close(fit.pair_posterior.sum(), 1.0, rtol=RTOL)
    g, d = fit.map_params["pair_index"]
    assert fit.pair_posterior[g, d] == fit.pair_posterior.max()
    assert fit.idata.posterior_predictive["x"].shape == (1, 3, 25, 2)
    assert fit.idata.log_likelihood["x"].shape == (2, 50, 25)
    # no log_likelihood group when asked not to
    off = fit_inverse_gp(jax.random.key(3), X, Y, PRIOR, method="quadrature",
                         num_chains=1, num_samples=10, progress_bar=False,
                         posterior_predictive=False, log_likelihood=False)
    assert "log_likelihood" not in off.idata.groups()
    assert "posterior_predictive" not in off.idata.groups()
