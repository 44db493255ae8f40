"""The base kernel the structure grammar adds to the composable kernels: the
Matern-1/2 (Ornstein-Uhlenbeck) kernel ``OU`` against scikit-learn's ``Matern``
with ``nu = 0.5`` (oracle), on lags as on pairs, and its Markov forecast (the
conditional mean given noise-free data is the last value times ``exp(-h / l)``,
the closed form of the OU process's transition)."""

import jax.numpy as jnp
import numpy as np
from sklearn.gaussian_process import kernels as sk

from bayeskde.kernels.composable import Constant, Exponential, Periodic
from bayeskde.structure import BASE_KERNELS, DEFAULT_TERMS
from tests.helpers import DTYPE, LOOSE, assert_close

T = np.linspace(-1.0, 2.5, 9)
S = np.linspace(0.3, 3.1, 5)


def test_exponential_matches_sklearn_matern_half():
    t, s = jnp.asarray(T, DTYPE), jnp.asarray(S, DTYPE)
    for ours, ref in ((Exponential(0.7), sk.Matern(0.7, nu=0.5)),
                      (Constant(2.0) * Exponential(1.3) * Periodic(1.1, 0.9),
                       sk.ConstantKernel(2.0) * sk.Matern(1.3, nu=0.5)
                       * sk.ExpSineSquared(1.1, 0.9))):
        assert_close(ours(t, s), ref(T[:, None], S[:, None]))
        assert_close(ours(t), ref(T[:, None]))
        assert_close(ours.diagonal(t), ref.diag(T[:, None]))
    kernel = Exponential(0.7)
    assert kernel.stationary
    lags = np.abs(T[:, None] - S[None, :])
    on = kernel.on_lags(jnp.asarray(lags.ravel(), DTYPE)).reshape(lags.shape)
    assert_close(on, kernel(t, s))


def test_exponential_forecast_is_markov():
    """Given noise-free values, the GP's conditional mean at ``t_n + h`` is
    ``exp(-h / l) y_n`` whatever came before (the OU transition), solved here by
    the general GP formula in float64."""
    rng = np.random.default_rng(0)
    t = np.sort(rng.uniform(0.0, 3.0, 8))
    y = rng.normal(size=8)
    kernel = Exponential(0.9)
    K = np.asarray(kernel(jnp.asarray(t, DTYPE)), np.float64)
    new = t[-1] + np.array([0.1, 0.5, 2.0])
    Ks = np.asarray(kernel(jnp.asarray(new, DTYPE), jnp.asarray(t, DTYPE)),
                    np.float64)
    mean = Ks @ np.linalg.solve(K, y)
    assert_close(mean, np.exp(-(new - t[-1]) / 0.9) * y[-1], rtol=LOOSE,
                 atol=LOOSE)


def test_ou_is_a_default_term():
    assert "OU" in DEFAULT_TERMS
    cls, specs = BASE_KERNELS["OU"]
    assert cls is Exponential
    assert [(p.name, p.role) for p in specs] == [("scale", "lengthscale")]
