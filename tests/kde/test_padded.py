"""The exact KDE engine on size buckets: padded equals unpadded, one compiled set of
programs per bucket, and the output-KPCA memo (never a stale hit)."""

import jax.numpy as jnp
import numpy as np
import pytest
from sklearn.metrics.pairwise import rbf_kernel

from bayeskde import KernelDependencyEstimator
from bayeskde._linalg import bucket_multiple, pad_to_multiple
from bayeskde.kde import fit_kde, memo, ridge_solve, ridge_solve_padded
from bayeskde.kpca import (
    kernel_pca,
    kernel_pca_padded,
    kpca_transform,
    kpca_transform_padded,
)
from tests.helpers import LOOSE, assert_close, count_compilations


def _data(n, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.uniform(-1, 1, size=(n, 2))
    Y = np.c_[np.sin(3 * X[:, 0]), np.cos(2 * X[:, 1]), X[:, 0] * X[:, 1]]
    return X, Y


def _padded_gram(K, size):
    n = K.shape[0]
    out = np.full((size, size), 7.0)  # padding must not matter, whatever it holds
    out[:n, :n] = K
    return jnp.asarray(out)


def test_padded_kpca_and_ridge_equal_unpadded():
    X, Y = _data(37)
    L = rbf_kernel(Y, gamma=0.5)
    K = rbf_kernel(X, gamma=2.0)
    size = 48
    ref = kernel_pca(L, 5)
    got = kernel_pca_padded(_padded_gram(L, size), 37, 5)
    assert_close(got.eigenvalues, ref.eigenvalues)
    assert_close(got.alphas[:37], ref.alphas, rtol=LOOSE, atol=LOOSE)
    assert np.all(np.asarray(got.alphas[37:]) == 0.0)
    assert_close(got.col_means[:37], ref.col_means)
    assert_close(got.total_mean, ref.total_mean)
    # All components: the spectrum, and the projections' Gram T T^T (invariant
    # under rotations inside clusters of equal eigenvalues).
    full = kernel_pca_padded(_padded_gram(L, size), 37, size)
    ref_full = kernel_pca(L)
    assert_close(full.eigenvalues[:37], ref_full.eigenvalues, atol=LOOSE)
    assert np.all(np.asarray(full.eigenvalues[37:]) == 0.0)
    T_ref = np.asarray(kpca_transform(ref_full, L))
    T = np.asarray(kpca_transform_padded(
        full, jnp.asarray(np.c_[L, np.full((37, 11), 7.0)]), 37))
    assert_close(T @ T.T, T_ref @ T_ref.T, rtol=LOOSE, atol=LOOSE)
    # Ridge: exact zeros on padding rows, the unpadded solution above them.
    Tp = np.zeros((size, 4))
    Tp[:37] = np.random.default_rng(1).normal(size=(37, 4))
    B, finite = ridge_solve_padded(_padded_gram(K, size), jnp.asarray(Tp), 1e-2, 37)
    assert bool(finite)
    assert_close(B[:37], ridge_solve(K, Tp[:37], 1e-2), rtol=LOOSE, atol=LOOSE)
    assert np.all(np.asarray(B[37:]) == 0.0)


@pytest.mark.parametrize("n", [37, 45])
def test_estimator_equals_unpadded_computation(n):
    X, Y = _data(n)
    Z = np.random.default_rng(2).uniform(-1, 1, size=(13, 2))
    assert n % bucket_multiple(n) != 0  # the case under test pads
    gx, gy, ridge = 2.0, 0.5, 1e-3
    est = KernelDependencyEstimator("rbf", {"gamma": gx}, "rbf", {"gamma": gy},
                                    n_components=6, ridge=ridge, memoize=False)
    est.fit(X, Y)
    K, L, Kt = rbf_kernel(X, gamma=gx), rbf_kernel(Y, gamma=gy), rbf_kernel(
        Z, X, gamma=gx)
    ref = fit_kde(K, L, ridge, 6)
    assert_close(est.fit_.kpca.eigenvalues, ref.kpca.eigenvalues)
    assert_close(est.fit_.coef, ref.coef, rtol=LOOSE, atol=LOOSE)
    assert_close(est.fit_.train_proj, ref.train_proj, rtol=LOOSE, atol=LOOSE)
    F_ref = Kt @ np.asarray(ref.coef)
    assert_close(est.predict_features(Z), F_ref, rtol=LOOSE, atol=LOOSE)
    T = np.asarray(ref.train_proj)
    idx = ((F_ref[:, None, :] - T[None]) ** 2).sum(-1).argmin(1)
    np.testing.assert_array_equal(est.predict(Z), Y[idx])
    # All components, and the Gram path (precomputed kernels) on the same sizes.
    full = KernelDependencyEstimator("rbf", {"gamma": gx}, "rbf", {"gamma": gy},
                                     ridge=ridge, memoize=False).fit(X, Y)
    pre = KernelDependencyEstimator("precomputed", None, "precomputed", None,
                                    ridge=ridge, memoize=False).fit(K, L)
    np.testing.assert_array_equal(Y[pre.predict(Kt)], full.predict(Z))
    assert full.fit_.coef.shape == (n, n)
    assert_close(full.fit_.kpca.eigenvalues, kernel_pca(L).eigenvalues, atol=LOOSE)
    # The linear pre-image (explicit, eq. (3)) is multi-output kernel ridge.
    lin = KernelDependencyEstimator("rbf", {"gamma": gx}, "linear", ridge=ridge,
                                    preimage="linear", memoize=False).fit(X, Y)
    Yc = Y - Y.mean(0)
    want = Kt @ np.linalg.solve(K + n * ridge * np.eye(n), Yc) + Y.mean(0)
    assert_close(lin.predict(Z), want, rtol=LOOSE, atol=LOOSE)


def test_no_recompilation_within_a_bucket():
    X, Y = _data(45)
    Z = np.random.default_rng(3).uniform(-1, 1, size=(15, 2))

    def run(n_train, n_test, ridge, memoize):
        KernelDependencyEstimator(
            "rbf", {"gamma": 2.0}, "rbf", {"gamma": 0.5}, ridge=ridge,
            memoize=memoize,
        ).fit(X[:n_train], Y[:n_train]).predict(Z[:n_test])

    run(41, 13, 1e-3, True)  # compiles the bucket (48 training, 16 test rows)
    run(41, 13, 1e-2, True)  # and the path that reuses the output KPCA
    with count_compilations() as compiles:
        run(45, 15, 1e-1, False)
        run(43, 10, 1e-2, True)
        run(43, 9, 1e-3, True)
    assert compiles.count == 0


def test_memo_reuses_exactly_and_misses_on_any_change():
    memo.clear_memo()
    X, Y = _data(37)
    Z = np.random.default_rng(4).uniform(-1, 1, size=(9, 2))

    def fit(Yd, rate=2.0, memoize=True):
        return KernelDependencyEstimator("rbf", {"gamma": rate}, "rbf",
                                         {"gamma": 0.5}, memoize=memoize).fit(X, Yd)

    a = fit(Y)
    assert memo.memo_size() == 1
    b = fit(Y, rate=3.0)  # a new input kernel: the same output KPCA
    assert memo.memo_size() == 1
    np.testing.assert_array_equal(b.fit_.kpca.alphas, a.fit_.kpca.alphas)
    np.testing.assert_array_equal(
        b.predict(Z), fit(Y, rate=3.0, memoize=False).predict(Z))
    Y2 = Y.copy()
    Y2[5, 1] += 1e-3  # one entry
    c = fit(Y2)
    assert memo.memo_size() == 2
    fresh = fit(Y2, memoize=False)
    np.testing.assert_array_equal(c.fit_.kpca.alphas, fresh.fit_.kpca.alphas)
    np.testing.assert_array_equal(c.predict(Z), fresh.predict(Z))
    assert not np.array_equal(np.asarray(c.fit_.train_proj),
                              np.asarray(a.fit_.train_proj))
    # Another output rate is another key.
    KernelDependencyEstimator("rbf", {"gamma": 2.0}, "rbf", {"gamma": 0.7}).fit(X, Y)
    assert memo.memo_size() == 3


def test_memo_checks_content_and_stays_bounded():
    memo.clear_memo()
    ref = np.arange(12.0).reshape(4, 3)
    key = ("k", memo.fingerprint(ref))
    memo.memo_put(key, ref, ("value",))
    assert memo.memo_get(key, ref.copy()) == ("value",)
    changed = ref.copy()
    changed[2, 2] = -1.0
    assert memo.memo_get(key, changed) is None  # same key, other content: a miss
    for i in range(memo.MAX_ENTRIES + 3):
        memo.memo_put(("k", i), ref, (np.zeros(3),))
    assert memo.memo_size() == memo.MAX_ENTRIES
    assert memo.memo_get(("k", 0), ref) is None  # least recently used went first
    memo.clear_memo()
    assert memo.memo_size() == 0


def test_pad_to_multiple_on_host_and_buckets():
    x = np.arange(10.0).reshape(5, 2)
    xp, n = pad_to_multiple(x, bucket_multiple(5))
    assert isinstance(xp, np.ndarray) and n == 5 and xp.shape == (8, 2)
    np.testing.assert_array_equal(xp[5:], np.repeat(x[-1:], 3, axis=0))
    sizes = [-(-n // bucket_multiple(n)) * bucket_multiple(n) for n in range(1, 2049)]
    assert all(n <= s <= n + max(7, n / 8) for n, s in enumerate(sizes, 1))
    assert len(set(sizes)) <= 8 + 8 * 8  # 8 buckets per octave above 64


def test_fixed_point_preimage_does_not_recompile_within_a_bucket():
    X, Y = _data(40)
    Z = np.random.default_rng(5).uniform(-1, 1, size=(15, 2))
    est = KernelDependencyEstimator("rbf", {"gamma": 1.0}, "rbf", {"gamma": 0.5},
                                    preimage="fixed_point").fit(X, Y)
    whole = est.predict(Z)
    with count_compilations() as compiles:
        part = est.predict(Z[:11])  # 11 and 15 rows share the bucket of 16
    assert compiles.count == 0
    assert_close(part, whole[:11])
    np.testing.assert_array_equal(est.fixed_point_fallback_.shape, (11,))
