"""Draws and densities of the output priors a user passes as NumPyro
distributions (sbibm's Gaussian, log-normal and GLM priors)."""

import jax
import jax.numpy as jnp
import numpy as np
import numpyro.distributions as dist
from scipy import stats

from bayeskde.inverse.output_prior import log_prior, sample_prior
from tests.helpers import DTYPE, LOOSE, assert_close


def test_gaussian_and_lognormal_priors_draw_and_score():
    """sample_prior draws from a batched Normal and LogNormal under the suite's
    rank-promotion setting ("raise"; NumPyro's samplers promote), with the
    right moments (5 standard errors), and log_prior is SciPy's density."""
    n = 20_000
    normal = dist.Normal(jnp.asarray([0.0, 1.0], DTYPE), 0.5).to_event(1)
    lognormal = dist.LogNormal(jnp.log(jnp.asarray([0.4, 0.125], DTYPE)),
                               jnp.asarray([0.5, 0.2], DTYPE)).to_event(1)
    y = np.asarray(sample_prior("distribution", normal, jax.random.key(0), n, 2,
                                DTYPE), float)
    assert y.shape == (n, 2)
    assert np.all(np.abs(y.mean(0) - [0.0, 1.0]) < 5 * 0.5 / np.sqrt(n))
    z = np.asarray(sample_prior("distribution", lognormal, jax.random.key(1), n, 2,
                                DTYPE), float)
    assert np.all(z > 0)
    assert np.all(np.abs(np.log(z).mean(0) - np.log([0.4, 0.125]))
                  < 5 * np.array([0.5, 0.2]) / np.sqrt(n))
    pts = z[:5]
    want = (stats.lognorm(0.5, scale=0.4).logpdf(pts[:, 0])
            + stats.lognorm(0.2, scale=0.125).logpdf(pts[:, 1]))
    assert_close(log_prior("distribution", lognormal, jnp.asarray(pts, DTYPE)), want,
                 rtol=LOOSE, atol=LOOSE)
