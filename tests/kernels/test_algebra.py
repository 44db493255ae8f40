import jax.numpy as jnp
import numpy as np
import pytest

from bayeskde.kernels import (
    alignment,
    center_cross_kernel,
    center_diagonal,
    center_kernel,
    centered_alignment,
    distance_to_kernel,
    hsic,
    kernel_rbf_map,
    median_heuristic,
    normalize_kernel,
    rbf_kernel,
)
from tests.helpers import X64

RTOL = 1e-10 if X64 else 2e-5


def _gram(rng, n=8, d=3):
    X = rng.normal(size=(n, d))
    return X, X @ X.T


def test_center_kernel_equals_hkh(rng):
    _, K = _gram(rng)
    H = np.eye(8) - np.ones((8, 8)) / 8
    np.testing.assert_allclose(center_kernel(K), H @ K @ H, rtol=RTOL, atol=RTOL * 10)


def test_center_cross_kernel_explicit_features(rng):
    # Linear kernel: centring equals subtracting the training mean in input space.
    X, K = _gram(rng)
    Z = rng.normal(size=(4, 3))
    mu = X.mean(0)
    ref = (Z - mu) @ (X - mu).T
    got = center_cross_kernel(Z @ X.T, K)
    np.testing.assert_allclose(got, ref, rtol=RTOL, atol=RTOL * 10)
    dref = ((Z - mu) ** 2).sum(1)
    got_d = center_diagonal(jnp.asarray((Z**2).sum(1)), jnp.asarray(Z @ X.T), K)
    np.testing.assert_allclose(got_d, dref, rtol=RTOL, atol=RTOL * 10)


def test_normalize_kernel_cosine_and_zero_rows(rng):
    X, K = _gram(rng)
    X[2] = 0.0
    K = X @ X.T
    d = np.diag(K)
    N = np.asarray(normalize_kernel(K, d, d))
    nrm = np.linalg.norm(X, axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        ref = K / np.outer(nrm, nrm)
    ref[2, :] = ref[:, 2] = 0.0
    np.testing.assert_allclose(N, ref, rtol=RTOL, atol=RTOL * 10)
    assert np.linalg.eigvalsh(N).min() > -1e-5


def test_alignment_definitions(rng):
    _, K1 = _gram(rng)
    _, K2 = _gram(rng)
    ref = (K1 * K2).sum() / np.sqrt((K1 * K1).sum() * (K2 * K2).sum())
    assert float(alignment(K1, K2)) == pytest.approx(ref, rel=RTOL * 10)
    assert float(alignment(K1, K1)) == pytest.approx(1.0, rel=RTOL * 10)
    H = np.eye(8) - 1 / 8
    C1, C2 = H @ K1 @ H, H @ K2 @ H
    refc = (C1 * C2).sum() / np.sqrt((C1 * C1).sum() * (C2 * C2).sum())
    assert float(centered_alignment(K1, K2)) == pytest.approx(refc, rel=1e-4)


def test_hsic_biased_estimator(rng):
    _, K = _gram(rng)
    _, L = _gram(rng)
    m = 8
    H = np.eye(m) - 1 / m
    ref = np.trace(K @ H @ L @ H) / (m - 1) ** 2
    assert float(hsic(K, L)) == pytest.approx(ref, rel=1e-4 if not X64 else 1e-10)
    # Independence: constant kernel has zero HSIC with anything.
    assert abs(float(hsic(np.ones((m, m)), L))) < 1e-4


def test_distance_to_kernel_recovers_centred_gram(rng):
    X = rng.normal(size=(7, 3))
    D = np.sqrt(((X[:, None] - X[None]) ** 2).sum(-1))
    Xc = X - X.mean(0)
    np.testing.assert_allclose(distance_to_kernel(D), Xc @ Xc.T, rtol=1e-4,
                               atol=1e-9 if X64 else 1e-4)
    # Any weights summing to one: the origin moves to sum_i c_i x_i.
    c = rng.dirichlet(np.ones(7))
    Xo = X - c @ X
    np.testing.assert_allclose(distance_to_kernel(D, c), Xo @ Xo.T, rtol=1e-4,
                               atol=1e-9 if X64 else 1e-4)


def test_distance_to_kernel_rejects_bad_input():
    D = np.array([[0.0, 1.0], [1.0, 0.0]])
    with pytest.raises(ValueError, match="sum to 1"):
        distance_to_kernel(D, np.array([0.2, 0.2]))
    with pytest.raises(ValueError, match="symmetric"):
        distance_to_kernel(np.array([[0.0, 1.0], [2.0, 0.0]]))
    with pytest.raises(ValueError, match="square"):
        distance_to_kernel(np.ones((2, 3)))


def test_kernel_rbf_map_on_linear_is_rbf(rng):
    X = rng.normal(size=(6, 2))
    K = X @ X.T
    d = np.diag(K)
    sigma = 0.8
    got = kernel_rbf_map(K, d, d, sigma)
    ref = rbf_kernel(X, gamma=1 / (2 * sigma**2))
    np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-5)
    with pytest.raises(ValueError, match="sigma"):
        kernel_rbf_map(K, d, d, 0.0)


def test_median_heuristic(rng):
    X = rng.normal(size=(30, 2))
    D = np.sqrt(((X[:, None] - X[None]) ** 2).sum(-1))
    ref = np.median(D[np.triu_indices(30, 1)])
    assert median_heuristic(X) == pytest.approx(ref, rel=1e-4)
    assert median_heuristic(K=X @ X.T) == pytest.approx(ref, rel=1e-3)
    with pytest.raises(ValueError, match="exactly one"):
        median_heuristic()
    with pytest.raises(ValueError, match="coincide"):
        median_heuristic(np.ones((4, 2)))


def test_hsic_and_alignment_reject_mismatch():
    with pytest.raises(ValueError, match="match"):
        hsic(np.eye(3), np.eye(4))
    with pytest.raises(ValueError, match="square"):
        alignment(np.ones((2, 3)), np.ones((2, 3)))
    with pytest.raises(ValueError, match="NaN"):
        hsic(np.full((2, 2), np.nan), np.eye(2))
