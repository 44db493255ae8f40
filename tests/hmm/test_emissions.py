"""Emission log likelihoods against scipy.stats and direct indexing."""

import jax.numpy as jnp
import numpy as np
import pytest
from scipy.stats import multivariate_normal

from bayeskde.hmm import (
    CategoricalEmission,
    GaussianEmission,
    categorical_log_likelihoods,
    emission_log_likelihoods,
    gaussian_log_likelihoods,
)
from bayeskde.hmm.emissions import gaussian_log_density_fn
from tests.helpers import X64

RTOL = 1e-10 if X64 else 2e-5


def test_categorical_matches_direct_indexing(rng):
    probs = rng.dirichlet(np.ones(5), size=3)
    obs = rng.integers(0, 5, size=11)
    em = CategoricalEmission(jnp.log(probs))
    got = categorical_log_likelihoods(em, obs)
    want = np.log(probs[:, obs]).T
    np.testing.assert_allclose(got, want, rtol=RTOL)
    np.testing.assert_allclose(emission_log_likelihoods(em, obs), want, rtol=RTOL)


@pytest.mark.parametrize("covariance", ["full", "diag"])
def test_gaussian_matches_scipy(rng, covariance):
    n, d, t = 3, 4, 9
    means = rng.normal(size=(n, d))
    if covariance == "full":
        L = rng.normal(size=(n, d, d))
        covs = L @ np.swapaxes(L, 1, 2) + np.eye(d)
        dense = covs
    else:
        covs = rng.uniform(0.3, 2.0, size=(n, d))
        dense = np.stack([np.diag(c) for c in covs])
    obs = rng.normal(size=(t, d))
    em = GaussianEmission(jnp.asarray(means), jnp.asarray(covs))
    got = gaussian_log_likelihoods(em, obs)
    want = np.stack(
        [multivariate_normal(means[i], dense[i]).logpdf(obs) for i in range(n)], 1
    )
    np.testing.assert_allclose(got, want, rtol=RTOL)
    np.testing.assert_allclose(emission_log_likelihoods(em, obs), want, rtol=RTOL)


@pytest.mark.parametrize("covariance", ["full", "diag"])
@pytest.mark.parametrize("offset", [0.0, 1e3])
def test_feature_major_scan_density_matches_scipy(rng, covariance, offset):
    # The whitened, feature-major form used inside the batched scans; a common
    # offset of data and means (1e3 standard deviations) must cost no precision.
    n, d, t = 3, 2, 7
    means = rng.normal(scale=3.0, size=(n, d)) + offset
    if covariance == "full":
        L = rng.normal(size=(n, d, d))
        covs = L @ np.swapaxes(L, 1, 2) + 0.5 * np.eye(d)
    else:
        covs = rng.uniform(0.3, 2.0, size=(n, d))
    obs = means[rng.integers(0, n, size=t)] + rng.normal(size=(t, d))
    dtype = jnp.result_type(float)
    # The reference sees the same rounded inputs as the library.
    means, covs, obs = (np.asarray(jnp.asarray(a, dtype), np.float64)
                        for a in (means, covs, obs))
    if covariance == "diag":
        dense = np.stack([np.diag(c) for c in covs])
    else:
        dense = covs
    em = GaussianEmission(jnp.asarray(means, dtype), jnp.asarray(covs, dtype))
    got = gaussian_log_density_fn(em)(jnp.asarray(obs, dtype).T).T
    want = np.stack(
        [multivariate_normal(means[i], dense[i]).logpdf(obs) for i in range(n)], 1
    )
    np.testing.assert_allclose(got, want, rtol=RTOL, atol=RTOL)


def test_dispatch_rejects_other_types():
    with pytest.raises(TypeError, match="emission"):
        emission_log_likelihoods((1, 2), np.zeros(3, np.int32))
