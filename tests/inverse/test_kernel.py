"""The inverse model's kernel phi(K) = sum_i alpha_i K^(i) against NumPy."""

import jax
import jax.numpy as jnp
import numpy as np

from bayeskde.inverse.kernel import (
    kept_eigenvalues,
    median_rate,
    pair_eigensystem,
    transform_gram,
    transform_weights,
)
from tests.helpers import assert_close


def _numpy_gram(A, B, gamma, alpha):
    d2 = ((A[:, None, :] - B[None, :, :]) ** 2).sum(-1)
    return sum(a * np.exp(-(i + 1) * gamma * d2) for i, a in enumerate(alpha))


def test_transform_gram_is_the_weighted_sum_of_rbf_powers(rng):
    A, B = rng.normal(size=(7, 2)), rng.normal(size=(5, 2))
    alpha = np.array([0.5, 0.3, 0.2])
    got = transform_gram(jnp.asarray(alpha), 0.7, jnp.asarray(A), jnp.asarray(B))
    assert_close(got, _numpy_gram(A, B, 0.7, alpha))


def test_transform_weights_are_the_clipped_normalised_prefixes():
    C = jnp.asarray([2.0, -1.0, 1.0])
    w = np.asarray(transform_weights(C, 3))
    assert_close(w, [[1, 0, 0], [1, 0, 0], [2 / 3, 0, 1 / 3]])


def test_median_rate_and_kept_eigenvalues():
    Y = np.array([[0.0], [1.0], [3.0]])
    D2 = (Y - Y.T) ** 2
    assert median_rate(D2) == 1.0 / 4.0  # distinct pairs' d^2: 1, 9, 4
    assert median_rate(np.zeros((3, 3))) == 1.0
    lam = np.array([1.0, 1e-3, 5e-16, -1e-14])
    eps = np.finfo(np.float64).eps
    assert list(kept_eigenvalues(lam, 4)) == [True, True, 5e-16 > 4 * eps, False]


def test_pair_eigensystem_keeps_the_resolved_spectrum(rng):
    """Float64 whatever the working precision: U diag(lam) U^T is the dense
    Gram to rounding, every kept eigenvalue is above m eps lambda_max."""
    Y = rng.uniform(size=(30, 1))
    X = rng.normal(size=(30, 2))
    alpha = np.array([0.6, 0.4])
    lam, U, proj = pair_eigensystem(Y, X, jnp.asarray(alpha), 5.0)
    assert lam.dtype == np.float64 and U.shape == (30, len(lam))
    K = _numpy_gram(Y, Y, 5.0, alpha)
    eps = np.finfo(np.float64).eps
    assert np.all(lam > 30 * eps * lam.max())
    # the dropped directions carry at most m eps lambda_max each
    np.testing.assert_allclose((U * lam) @ U.T, K, atol=30 * 30 * eps * lam.max())
    np.testing.assert_allclose(proj, U.T @ X, rtol=1e3 * eps,
                               atol=1e3 * eps)
    with jax.enable_x64(False):  # the same spectrum from a float32 caller
        lam32, _, _ = pair_eigensystem(np.float32(Y), np.float32(X),
                                       jnp.asarray(alpha, jnp.float32), 5.0)
    assert lam32.dtype == np.float64
