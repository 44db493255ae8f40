import numpy as np
import pytest
from sklearn.decomposition import PCA
from sklearn.decomposition import KernelPCA as SKKernelPCA
from sklearn.exceptions import NotFittedError
from sklearn.metrics.pairwise import rbf_kernel

from bayeskde import KernelPCA
from bayeskde.kpca import kernel_pca, kpca_transform
from tests.helpers import X64, count_compilations

ATOL = 1e-8 if X64 else 2e-4


def _match_up_to_sign(a, b, atol=ATOL):
    a, b = np.asarray(a), np.asarray(b)
    assert a.shape == b.shape
    for j in range(a.shape[1]):
        s = np.sign(a[:, j] @ b[:, j]) or 1.0
        np.testing.assert_allclose(a[:, j], s * b[:, j], atol=atol, rtol=0)


def test_equals_sklearn_up_to_sign(rng):
    X, Z = rng.normal(size=(40, 3)), rng.normal(size=(9, 3))
    ours = KernelPCA(5, kernel="rbf", kernel_params={"gamma": 0.4}).fit(X)
    ref = SKKernelPCA(5, kernel="rbf", gamma=0.4, eigen_solver="dense").fit(X)
    np.testing.assert_allclose(ours.eigenvalues_, ref.eigenvalues_, rtol=1e-4)
    _match_up_to_sign(ours.transform(X), ref.transform(X))
    _match_up_to_sign(ours.transform(Z), ref.transform(Z))


def test_precomputed_equals_named(rng):
    X, Z = rng.normal(size=(30, 2)), rng.normal(size=(4, 2))
    a = KernelPCA(4, kernel="rbf", kernel_params={"gamma": 0.7}).fit(X)
    b = KernelPCA(4, kernel="precomputed").fit(rbf_kernel(X, gamma=0.7))
    np.testing.assert_allclose(a.transform(Z), b.transform(rbf_kernel(Z, X, gamma=0.7)),
                               atol=ATOL)


def test_linear_kpca_is_pca(rng):
    X = rng.normal(size=(25, 4)) @ np.diag([3.0, 2.0, 1.0, 0.5])
    ours = KernelPCA(3, kernel="linear").fit_transform(X)
    _match_up_to_sign(ours, PCA(3).fit_transform(X), atol=1e-7 if X64 else 1e-3)


def test_normalisation_unit_feature_vectors(rng):
    # lambda_n (a_n . a_n) = 1, i.e. ||v_n||^2 = a_n^T Kc a_n = 1 (Weston et al. sec 3).
    X = rng.normal(size=(20, 3))
    K = rbf_kernel(X, gamma=0.5)
    res = kernel_pca(K, 6)
    lam_aa = res.eigenvalues * np.sum(np.asarray(res.alphas) ** 2, axis=0)
    np.testing.assert_allclose(lam_aa, 1.0, rtol=1e-4)
    H = np.eye(20) - 1 / 20
    A = np.asarray(res.alphas)
    np.testing.assert_allclose(A.T @ H @ K @ H @ A, np.eye(6), atol=1e-4)


def test_fit_transform_equals_fit_then_transform(rng):
    X = rng.normal(size=(15, 2))
    k = KernelPCA(3, kernel="polynomial", kernel_params={"degree": 2})
    np.testing.assert_allclose(k.fit_transform(X), k.fit(X).transform(X), atol=ATOL)


def test_signs_are_deterministic_and_data_not_mutated(rng):
    X = rng.normal(size=(12, 2))
    X0 = X.copy()
    a = KernelPCA(3, kernel="rbf").fit_transform(X)
    b = KernelPCA(3, kernel="rbf").fit_transform(X)
    np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(X, X0)
    # The entry of largest magnitude of each eigenvector is positive.
    res = kernel_pca(rbf_kernel(X), 3)
    A = np.asarray(res.alphas)
    assert np.all(A[np.abs(A).argmax(0), np.arange(3)] > 0)


def test_default_drops_zero_eigenvalues(rng):
    X = rng.normal(size=(10, 2))
    k = KernelPCA(kernel="linear").fit(X)
    assert k.alphas_.shape == (10, 2)  # rank of the centred linear Gram is 2


def test_no_recompilation(rng):
    K1 = rbf_kernel(rng.normal(size=(11, 2)))
    K2 = rbf_kernel(rng.normal(size=(11, 2)))
    r = kernel_pca(K1, 3)
    kpca_transform(r, K1[:4])
    K2_test = K2[:4]
    with count_compilations() as compiles:
        kernel_pca(K2, 3)
        kpca_transform(r, K2_test)
    assert compiles.count == 0


def test_bad_input(rng):
    X = rng.normal(size=(5, 2))
    with pytest.raises(ValueError, match="n_components"):
        KernelPCA(6).fit(X)
    with pytest.raises(ValueError, match="n_components"):
        KernelPCA(0).fit(X)
    with pytest.raises(NotFittedError):
        KernelPCA(2).transform(X)
    with pytest.raises(ValueError, match="NaN"):
        KernelPCA(2).fit(np.array([[np.nan, 1.0], [1.0, 2.0]]))
    with pytest.raises(ValueError, match="at least 2"):
        KernelPCA(1).fit(np.zeros((1, 2)))
    with pytest.raises(ValueError, match="features"):
        KernelPCA(2).fit(X).transform(np.ones((2, 3)))
    with pytest.raises(ValueError, match="square"):
        KernelPCA(2, kernel="precomputed").fit(np.ones((3, 2)))
    with pytest.raises(ValueError, match="columns"):
        KernelPCA(2, kernel="precomputed").fit(np.eye(3)).transform(np.ones((2, 4)))
    with pytest.raises(ValueError, match="unknown kernel"):
        KernelPCA(2, kernel="gauss").fit(X)


def test_output_has_the_working_dtype_and_n_features_in_(rng):
    X = rng.normal(size=(15, 4))
    kp = KernelPCA(2).fit(X)
    assert kp.n_features_in_ == 4
    out = np.asarray(kp.transform(X.astype(np.float32)))
    assert out.dtype == (np.float64 if X64 else np.float32)
    with pytest.raises(ValueError, match="Reshape your data"):
        kp.transform(X[:, 0])
