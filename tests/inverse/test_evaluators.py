"""The samplers' fast evaluators of the mixture likelihood against the
predictive's scan over components (:func:`bayeskde.inverse.mixture_log_likelihood`,
itself tested against dense GP predictives in test_mixture.py), under the
Gaussian, the residual and the heteroscedastic forward noise.

Both are factorisations of the same moments (M), scored by the same
likelihood: they differ from the scan by rounding only, bounded by sqrt(eps)
of the size of the terms the log likelihoods sum
(:func:`tests.inverse.rounding.term_scale`). The filters are compared with
their SVD uncut (``rtol=0``: exact factorisation); the default cut and the
truncated spectrum are held to their documented 1e-2 nats.
"""

import jax.numpy as jnp
import numpy as np
import pytest

from bayeskde.inverse import mixture_log_likelihood
from bayeskde.inverse.evaluators import (
    dense_log_likelihood,
    dense_terms,
    filters,
    point_log_likelihood,
    prune,
    truncate_spectrum,
)
from bayeskde.inverse.mixture import fit_mixture, mixture_log_likelihood_each
from tests.helpers import LOOSE
from tests.inverse.rounding import term_scale


def _setup(moons_fit, noise):
    x, th, fit = moons_fit(noise)
    mix = prune(fit_mixture(fit, "average", 20))
    # the Gaussian average has several pairs; the residual density is the
    # MAP pair's alone
    if noise == "gaussian":
        assert mix.lam.shape[0] > 1 and mix.log_w.shape[0] > 1
    else:
        assert mix.noise_model is not None and mix.log_w.shape == (1,)
    rng = np.random.default_rng(2)
    ys = th[:6] + 0.05 * rng.normal(size=(6, 2))
    return x[:6], ys, mix


#: (noise, test_noise): every noise model with noisy test inputs; exact test
#: inputs (test_noise 0) use N(mu, var_f I) whatever the noise, checked once
#: in the default run and for the residual density in the slow run.
CASES = [("gaussian", 1.0), ("residual", 1.0), ("heteroscedastic", 1.0),
         ("gaussian", 0.0), pytest.param("residual", 0.0, marks=pytest.mark.slow)]


@pytest.mark.parametrize(("noise", "test_noise"), CASES)
def test_point_likelihood_is_the_scan(moons_fit, noise, test_noise):
    xs, ys, mix = _setup(moons_fit, noise)
    dt = mix.lam.dtype
    tn = jnp.asarray(test_noise, dt)
    full = truncate_spectrum(mix, 0.0)
    filt = filters(full, rtol=0.0)
    for x, y in zip(xs, ys, strict=True):
        yj, xj = jnp.asarray(y, dt), jnp.asarray(x, dt)
        scan = float(mixture_log_likelihood(mix, yj[None], xj[None], tn)[0, 0])
        ours = float(point_log_likelihood(full, filt, yj, xj, tn))
        scale = term_scale(mix, y[None], x[None], test_noise)[0, 0]
        assert abs(ours - scan) <= LOOSE * scale, (ours, scan, scale)
        # the default cut of the filters' SVD and of the spectrum
        cut = truncate_spectrum(mix)
        trunc = float(point_log_likelihood(cut, filters(cut), yj, xj, tn))
        assert abs(trunc - scan) < 1e-2
    assert truncate_spectrum(mix).lam.shape[1] < full.lam.shape[1]


@pytest.mark.parametrize(("noise", "test_noise"), CASES)
def test_dense_likelihood_is_the_scan(moons_fit, noise, test_noise):
    """dense_log_likelihood (every component's moments by two matrix
    products) equals the scan, per test input and its own outputs."""
    xs, ys, mix = _setup(moons_fit, noise)
    dt = mix.lam.dtype
    tn = jnp.asarray(test_noise, dt)
    rng = np.random.default_rng(3)
    y = ys[:, None] + 0.1 * rng.normal(size=(6, 4, 2))  # (b, N, d_y)
    got = np.asarray(dense_log_likelihood(mix, dense_terms(mix), jnp.asarray(y, dt),
                                          jnp.asarray(xs, dt), tn), float)
    scan = np.asarray(mixture_log_likelihood_each(mix, jnp.asarray(y, dt),
                                                  jnp.asarray(xs, dt), tn), float)
    assert got.shape == scan.shape == (6, 4)
    err = np.abs(got - scan) / term_scale(mix, y, xs, test_noise)
    assert err.max() <= LOOSE, err.max()
