"""Composable kernels against scikit-learn's GP kernels (oracle), a NumPy
changepoint formula, symmetry and PSD, and differentiation through parameters."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from sklearn.gaussian_process import kernels as sk

from bayeskde.kernels.composable import (
    ChangePoint,
    Constant,
    Linear,
    Periodic,
    RationalQuadratic,
    SquaredExponential,
    WhiteNoise,
)
from tests.helpers import DTYPE, LOOSE, assert_close

T = np.linspace(-1.0, 2.5, 9)
S = np.linspace(0.3, 3.1, 5)

CASES = [
    (SquaredExponential(0.7), sk.RBF(0.7)),
    (Periodic(1.3, 0.9), sk.ExpSineSquared(1.3, 0.9)),
    (RationalQuadratic(0.5, 2.0), sk.RationalQuadratic(0.5, 2.0)),
    (Linear(0.0), sk.DotProduct(0.0)),
    (Constant(2.5), sk.ConstantKernel(2.5)),
    (Constant(2.0) * SquaredExponential(0.7) + Periodic(1.3, 0.9)
     * RationalQuadratic(0.5, 2.0) + Linear(0.0),
     sk.ConstantKernel(2.0) * sk.RBF(0.7) + sk.ExpSineSquared(1.3, 0.9)
     * sk.RationalQuadratic(0.5, 2.0) + sk.DotProduct(0.0)),
]


@pytest.mark.parametrize("ours, ref", CASES)
def test_gram_matches_sklearn(ours, ref):
    t, s = jnp.asarray(T, DTYPE), jnp.asarray(S, DTYPE)
    assert_close(ours(t, s), ref(T[:, None], S[:, None]))
    assert_close(ours(t), ref(T[:, None]))
    assert_close(ours.diagonal(t), ref.diag(T[:, None]))


def test_white_noise_and_offset_linear():
    t = jnp.asarray(T, DTYPE)
    assert_close(WhiteNoise(0.3)(t), 0.3 * np.eye(T.size))
    assert_close(WhiteNoise(0.3)(t, t + 1.0), np.zeros((T.size, T.size)))
    assert_close(Linear(0.4)(t), np.outer(T - 0.4, T - 0.4))


def test_changepoint_formula_and_psd():
    k1, k2 = SquaredExponential(0.5), Constant(2.0) * Periodic(1.0, 1.2)
    cp = ChangePoint(k1, k2, 0.8, 0.3)
    s = 1.0 / (1.0 + np.exp(-(T - 0.8) / 0.3))
    want = (np.outer(1 - s, 1 - s) * sk.RBF(0.5)(T[:, None])
            + np.outer(s, s) * 2.0 * sk.ExpSineSquared(1.0, 1.2)(T[:, None]))
    K = cp(jnp.asarray(T, DTYPE))
    assert_close(K, want)
    assert_close(K, K.T)
    assert np.linalg.eigvalsh(np.asarray(K, np.float64)).min() > -LOOSE


def test_params_are_traceable():
    t = jnp.asarray(T, DTYPE)

    def total(scale):
        return jnp.sum((Constant(1.5) * SquaredExponential(scale))(t))

    g = jax.jit(jax.grad(total))(jnp.asarray(0.6, DTYPE))
    h = 1e-3
    fd = (np.sum(1.5 * sk.RBF(0.6 + h)(T[:, None]))
          - np.sum(1.5 * sk.RBF(0.6 - h)(T[:, None]))) / (2 * h)
    assert_close(g, fd, rtol=LOOSE * 10, atol=LOOSE * 10)
    batch = jax.vmap(lambda s: SquaredExponential(s)(t))(jnp.asarray([0.5, 1.0],
                                                                     DTYPE))
    assert_close(batch[1], sk.RBF(1.0)(T[:, None]))


@pytest.mark.parametrize("kernel", [SquaredExponential(0.7), Periodic(1.3, 0.9),
                                    RationalQuadratic(0.5, 2.0), Constant(2.5),
                                    WhiteNoise(0.3), Constant(2.0) * Periodic(
                                        1.3, 0.9) * SquaredExponential(0.4)
                                    + RationalQuadratic(0.5, 2.0)])
def test_stationary_kernels_on_lags_match_the_gram(kernel):
    """k(r, 0) on the lags, gathered, is the Gram matrix (scikit-learn's for the
    formulas, by test_gram_matches_sklearn)."""
    t = jnp.asarray(T, DTYPE)
    assert kernel.stationary
    lags = np.abs(T[:, None] - S[None, :])
    on = kernel.on_lags(jnp.asarray(lags.ravel(), DTYPE)).reshape(lags.shape)
    assert_close(on, kernel(t, jnp.asarray(S, DTYPE)))


@pytest.mark.parametrize("kernel", [Linear(0.0), Linear(0.0) * SquaredExponential(
    1.0), ChangePoint(SquaredExponential(0.5), Constant(1.0), 0.0, 1.0),
    SquaredExponential(1.0) + Linear(0.0)])
def test_non_stationary_kernels_refuse_lags(kernel):
    assert not kernel.stationary
    with pytest.raises(TypeError, match="not stationary"):
        kernel.on_lags(jnp.asarray([0.0, 1.0], DTYPE))
