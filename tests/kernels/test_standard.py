import numpy as np
import pytest
from sklearn.metrics.pairwise import linear_kernel as sk_linear
from sklearn.metrics.pairwise import polynomial_kernel as sk_poly
from sklearn.metrics.pairwise import rbf_kernel as sk_rbf

from bayeskde.kernels import (
    delta_kernel,
    gamma_to_sigma,
    linear_kernel,
    polynomial_kernel,
    rbf_kernel,
    regression_kernel,
    sigma_to_gamma,
    squared_distances,
)
from tests.helpers import X64

RTOL = 1e-10 if X64 else 1e-5


def test_rbf_matches_sklearn(rng):
    A, B = rng.normal(size=(13, 4)), rng.normal(size=(7, 4))
    np.testing.assert_allclose(
        rbf_kernel(A, B, gamma=0.37), sk_rbf(A, B, gamma=0.37), rtol=RTOL, atol=RTOL
    )
    np.testing.assert_allclose(rbf_kernel(A, gamma=0.37), sk_rbf(A, gamma=0.37),
                               rtol=RTOL, atol=RTOL)


def test_polynomial_and_linear_match_sklearn(rng):
    A, B = rng.normal(size=(9, 3)), rng.normal(size=(5, 3))
    np.testing.assert_allclose(
        polynomial_kernel(A, B, degree=3, coef0=0.5),
        sk_poly(A, B, degree=3, gamma=1.0, coef0=0.5), rtol=RTOL * 10,
    )
    np.testing.assert_allclose(linear_kernel(A, B), sk_linear(A, B), rtol=RTOL,
                               atol=RTOL)
    np.testing.assert_allclose(regression_kernel(A, B), sk_linear(A, B), rtol=RTOL,
                               atol=RTOL)


def test_squared_distances_brute_force(rng):
    A, B = rng.normal(size=(6, 3)), rng.normal(size=(4, 3))
    ref = ((A[:, None, :] - B[None, :, :]) ** 2).sum(-1)
    np.testing.assert_allclose(squared_distances(A, B), ref, rtol=RTOL * 10,
                               atol=RTOL * 10)
    assert np.all(np.asarray(squared_distances(A, A)) >= 0)


def test_delta_kernel_gives_zero_one_loss():
    y = np.array([0, 1, 1, 2])
    L = np.asarray(delta_kernel(y))
    d = np.diag(L)
    loss = d[:, None] + d[None, :] - 2 * L
    np.testing.assert_array_equal(loss, (y[:, None] != y[None, :]).astype(float))
    S = np.asarray(delta_kernel(["a", "b", "a"], ["a", "c"]))
    np.testing.assert_array_equal(S, [[0.5, 0], [0, 0], [0.5, 0]])


def test_sigma_gamma_round_trip():
    assert sigma_to_gamma(2.0) == pytest.approx(0.125)
    assert gamma_to_sigma(sigma_to_gamma(0.7)) == pytest.approx(0.7)


@pytest.mark.parametrize("bad", [0.0, -1.0, float("nan"), float("inf")])
def test_rbf_rejects_bad_gamma(bad):
    with pytest.raises(ValueError, match="gamma"):
        rbf_kernel(np.ones((2, 2)), gamma=bad)


def test_kernels_reject_bad_data():
    with pytest.raises(ValueError, match="NaN or inf"):
        rbf_kernel(np.array([[1.0, np.nan]]))
    with pytest.raises(ValueError, match="at least 1"):
        linear_kernel(np.zeros((0, 3)))
    with pytest.raises(ValueError, match="same number of features"):
        rbf_kernel(np.ones((2, 3)), np.ones((2, 4)))
    with pytest.raises(TypeError, match="strings"):
        rbf_kernel(["ab", "cd"])
    with pytest.raises(ValueError, match="degree"):
        polynomial_kernel(np.ones((2, 2)), degree=0)
    with pytest.raises(ValueError, match="coef0"):
        polynomial_kernel(np.ones((2, 2)), coef0=-1.0)
    with pytest.raises(ValueError, match="3-dimensional|2-dimensional"):
        linear_kernel(np.ones((2, 2, 2)))
