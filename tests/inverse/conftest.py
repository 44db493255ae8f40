"""Fits shared by the inverse model's test modules: each is computed once per
test process (pytest-xdist's ``loadfile`` gives a worker whole files, so a
worker pays a fit only if one of its files asks for it)."""

import functools

import jax
import numpy as np
import pytest

from bayeskde.datasets import make_sshape
from bayeskde.inverse import InverseGPPrior, fit_inverse_gp

#: The prior of the S-shape and moons-like fits.
SSHAPE_PRIOR = InverseGPPrior(max_degree=2, n_gamma=8)
MOONS_PRIOR = InverseGPPrior(max_degree=2, n_gamma=6)


@pytest.fixture(scope="session")
def sshape_fit():
    """The S-shape (150 pairs) fitted by quadrature: the predictive's tests."""
    d = make_sshape(jax.random.key(0), 150)
    fit = fit_inverse_gp(jax.random.key(1), d.x_train, d.t_train, SSHAPE_PRIOR,
                         method="quadrature", num_samples=60, num_chains=2,
                         progress_bar=False, num_replicates=2)
    return d, fit


def moons_like(m, seed=0):
    """A two-output, two-input simulator like sbibm's two_moons: ``(x, theta)``."""
    rng = np.random.default_rng(seed)
    th = rng.uniform(-1, 1, (m, 2))
    x = np.stack([np.sin(2 * th[:, 0]) + th[:, 1], th[:, 0] * th[:, 1]], 1)
    return x + 0.05 * rng.normal(size=x.shape), th


@functools.cache
def _moons_fit(noise):
    x, th = moons_like(80)
    return x, th, fit_inverse_gp(
        jax.random.key(0), x, th, MOONS_PRIOR, method="quadrature", num_samples=50,
        progress_bar=False, num_replicates=2, noise=noise)


@pytest.fixture(scope="session")
def moons_fit():
    """``moons_fit(noise)``: one quadrature fit of 80 moons-like pairs per
    forward-noise model (``"gaussian"``, ``"residual"``, ``"heteroscedastic"``),
    ``(x, theta, fit)``."""
    return _moons_fit
