import numpy as np
import pytest
from sklearn.metrics.pairwise import linear_kernel as sk_linear
from sklearn.metrics.pairwise import polynomial_kernel as sk_poly
from sklearn.metrics.pairwise import rbf_kernel as sk_rbf

from bayeskde.kernels import (
    delta_kernel,
    gamma_to_sigma,
    linear_kernel,
    median_gamma,
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


def _brute_median_gamma(X):
    X = np.asarray(X, np.float64)
    d = [np.linalg.norm(X[i] - X[j]) for i in range(len(X))
         for j in range(i + 1, len(X))]
    d = [v for v in d if v > 0]
    return 1.0 / (2.0 * np.median(d) ** 2) if d else 1.0


def test_median_gamma_is_the_median_heuristic(rng):
    X = rng.normal(size=(9, 3)) * 7.0
    assert median_gamma(X) == pytest.approx(_brute_median_gamma(X), rel=RTOL * 10)
    # duplicate rows are left out; all-identical rows give 1
    D = np.vstack([X[:4], X[:4], X[4:5]])
    assert median_gamma(D) == pytest.approx(_brute_median_gamma(D), rel=RTOL * 10)
    assert median_gamma(np.ones((5, 2))) == 1.0
    # scale-covariant: x -> c x gives gamma -> gamma / c^2
    assert median_gamma(X * 1e3) == pytest.approx(median_gamma(X) * 1e-6, rel=1e-5)


def test_rbf_gamma_median(rng):
    X = rng.normal(size=(8, 2)) * 50.0
    np.testing.assert_allclose(
        rbf_kernel(X, gamma="median"), sk_rbf(X, gamma=_brute_median_gamma(X)),
        rtol=1e-4 if not X64 else 1e-9, atol=1e-6 if not X64 else 1e-12)


def test_squared_distances_do_not_overflow_before_the_end(rng):
    # Near the top of the range the scaled expansion still returns the
    # distances (or inf where they overflow), never NaN.
    big = 1e18 if not X64 else 1e152
    X = rng.normal(size=(5, 2))
    ref = ((X[:, None, :] - X[None, :, :]) ** 2).sum(-1)
    got = np.asarray(squared_distances(X * big, X * big), np.float64) / big**2
    assert np.all(np.isfinite(got))
    huge = np.asarray(squared_distances(X * big * 100.0, X * big * 100.0))
    assert not np.any(np.isnan(huge))
    np.testing.assert_allclose(got, ref, rtol=1e-4 if not X64 else 1e-10,
                               atol=1e-4 if not X64 else 1e-10)


def test_overflowing_data_is_an_error_naming_the_argument():
    big = 1e20 if not X64 else 1e160
    name = "float32" if not X64 else "float64"
    X = np.array([[0.0, 1.0], [2.0, 3.0]]) * big
    for fn in (rbf_kernel, polynomial_kernel, linear_kernel):
        with pytest.raises(ValueError, match=f"A overflow {name}"):
            fn(X)
    with pytest.raises(ValueError, match=f"B overflow {name}"):
        rbf_kernel(np.ones((2, 2)), X)
    if not X64:  # finite in float64, inf after the cast to float32
        with pytest.raises(ValueError, match="A overflows float32"):
            rbf_kernel(np.array([[1e300, 0.0]]))


def test_polynomial_gram_overflow_is_reported():
    X = np.full((2, 2), 1e3 if not X64 else 1e30)
    with pytest.raises(ValueError, match="overflows"):
        polynomial_kernel(X, degree=9)


@pytest.mark.parametrize("degree", [None, 2.5, "2", True])
def test_polynomial_degree_checked(degree):
    with pytest.raises((TypeError, ValueError), match="degree"):
        polynomial_kernel(np.ones((2, 2)), degree=degree)
