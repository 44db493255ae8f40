"""Simulation-based calibration utilities: rank test and replicated NUTS."""

import jax.numpy as jnp
import numpy as np
import numpyro
import numpyro.distributions as dist
import pytest

from bayeskde.infer import replicated_nuts, sbc_rank_test


def _conjugate(rng, R, L, n, sd_scale=1.0):
    """Normal mean with a N(0, 1) prior and n unit-variance observations: exact
    posterior draws (optionally with a wrong spread)."""
    mu = rng.normal(size=R)
    y = mu[:, None] + rng.normal(size=(R, n))
    post_sd = 1 / np.sqrt(1 + n)
    post_mean = y.sum(1) / (1 + n)
    draws = post_mean[:, None] + sd_scale * post_sd * rng.normal(size=(R, L))
    return mu, y, draws


def test_ranks_count_the_draws_below_the_truth():
    draws = np.array([[[0.1], [0.5], [0.9]], [[0.3], [0.2], [0.1]]])
    res = sbc_rank_test(draws, np.array([[0.6], [0.0]]), bins=2)
    np.testing.assert_array_equal(res.ranks[:, 0], [2, 0])
    np.testing.assert_array_equal(res.counts, [[1, 1]])


def test_exact_posterior_passes_and_a_too_narrow_one_fails(rng):
    mu, _, good = _conjugate(rng, 500, 19, 5)
    res = sbc_rank_test(good, mu[:, None], bins=4)
    assert res.p_pooled > 0.01 and res.counts.sum() == 500
    mu, _, bad = _conjugate(rng, 500, 19, 5, sd_scale=0.5)
    res = sbc_rank_test(bad, mu[:, None], bins=4)
    assert res.p_pooled < 1e-6  # over-confident: ranks pile up at 0 and L


@pytest.mark.parametrize(
    "draws, truths, bins, match",
    [(np.zeros((3, 19, 2)), np.zeros((3, 1)), 4, "truths"),
     (np.zeros((3, 18)), np.zeros(3), 4, "multiple of bins"),
     (np.full((3, 19), np.nan), np.zeros(3), 4, "finite"),
     (np.zeros((3, 19)), np.zeros(3), 1, "bins")],
)
def test_bad_input_is_refused(draws, truths, bins, match):
    with pytest.raises(ValueError, match=match):
        sbc_rank_test(draws, truths, bins=bins)


def _normal_mean_model(y):
    mu = numpyro.sample("mu", dist.Normal(0.0, 1.0))
    numpyro.sample("y", dist.Normal(mu, 1.0), obs=y)


def test_replicated_nuts_samples_each_conjugate_posterior(key, rng):
    """Eight data sets at once: each chain's mean and spread match its own
    analytic posterior (4 Monte Carlo standard errors)."""
    R, n = 8, 5
    mu, y, _ = _conjugate(rng, R, 1, n)
    dt = jnp.zeros(()).dtype
    sample = replicated_nuts(_normal_mean_model, (jnp.zeros(n, dt),),
                             num_warmup=200, num_draws=400, thin=1)
    post = np.asarray(sample(key, (jnp.asarray(y, dt),))["mu"])
    assert post.shape == (R, 400)
    mean, sd = y.sum(1) / (1 + n), 1 / np.sqrt(1 + n)
    # NUTS draws are nearly independent here; allow for an ESS of 200.
    assert np.all(np.abs(post.mean(1) - mean) < 4 * sd / np.sqrt(200))
    assert np.all(np.abs(post.std(1) / sd - 1) < 0.25)
    with pytest.raises(ValueError, match="leading replication axis"):
        sample(key, (jnp.asarray(y, dt),), {"unused": jnp.zeros(3, dt)})
    with pytest.raises(ValueError, match="num_draws"):
        replicated_nuts(_normal_mean_model, (jnp.zeros(n, dt),), num_draws=0)


def test_ecdf_band_is_simultaneous_and_flags_a_narrow_posterior(key, rng):
    import jax

    from bayeskde.infer import sbc_ecdf_band

    R, L = 200, 99
    band = sbc_ecdf_band(key, np.zeros((R, 1), int), L, prob=0.95, n_sims=2000)
    # Coverage of the whole curve on fresh uniform rank sets (Monte Carlo, 1000
    # sets: s.e. 0.007), not the sets that built the band.
    fresh = sbc_ecdf_band(jax.random.key(7), rng.integers(0, L + 1, (R, 1000)), L,
                          n_sims=2000)
    np.testing.assert_allclose(fresh.lower, band.lower, atol=0.02)
    assert 0.92 <= fresh.inside.mean() <= 0.98
    assert band.gamma < 0.05 / 2  # simultaneous is wider than pointwise
    mu, _, draws = _conjugate(rng, R, L, 5, sd_scale=0.6)
    narrow = sbc_ecdf_band(key, sbc_rank_test(draws, mu).ranks, L)
    assert not narrow.inside[0]
    # The curve is ECDF - z: counts of ranks below z (L + 1) over R, minus z.
    ranks = rng.integers(0, L + 1, (R, 1))
    got = sbc_ecdf_band(key, ranks, L)
    ref = [np.mean(ranks < round(z * (L + 1))) - z for z in got.z]
    np.testing.assert_allclose(got.ecdf_diff[0], ref)
    with pytest.raises(ValueError, match="ranks"):
        sbc_ecdf_band(key, np.full((5, 1), L + 1), L)
