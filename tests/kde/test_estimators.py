import numpy as np
import pytest
from sklearn.base import clone
from sklearn.decomposition import KernelPCA as SKKernelPCA
from sklearn.exceptions import NotFittedError
from sklearn.kernel_ridge import KernelRidge
from sklearn.metrics.pairwise import rbf_kernel
from sklearn.model_selection import GridSearchCV, KFold, cross_val_score

from bayeskde import KernelDependencyEstimator, KNNDependencyEstimator
from bayeskde.kde import kernel_loss
from tests.helpers import X64, assert_close, count_compilations

ATOL = 1e-7 if X64 else 1e-3


@pytest.fixture
def data(rng):
    X = rng.uniform(-1, 1, size=(40, 2))
    Y = np.c_[np.sin(3 * X[:, 0]), np.cos(2 * X[:, 1]), X[:, 0] * X[:, 1]]
    return X, Y


def test_linear_output_kernel_is_multi_output_kernel_ridge(data):
    # Weston et al. sec 3: with the linear output kernel KDE is ridge regression.
    X, Y = data
    m, gamma = len(X), 1e-2
    kde = KernelDependencyEstimator(
        "rbf", {"gamma": 2.0}, "linear", ridge=gamma, preimage="linear"
    ).fit(X, Y)
    ref = KernelRidge(alpha=m * gamma, kernel="rbf", gamma=2.0).fit(X, Y - Y.mean(0))
    Z = np.random.default_rng(1).uniform(-1, 1, size=(7, 2))
    np.testing.assert_allclose(kde.predict(Z), ref.predict(Z) + Y.mean(0), atol=ATOL)


def test_candidate_preimage_equals_sklearn_composition(data):
    X, Y = data
    m, gamma, gx, gy = len(X), 1e-3, 1.5, 0.8
    kde = KernelDependencyEstimator(
        "rbf", {"gamma": gx}, "rbf", {"gamma": gy}, n_components=10, ridge=gamma
    ).fit(X, Y)
    kp = SKKernelPCA(10, kernel="rbf", gamma=gy, eigen_solver="dense").fit(Y)
    T = kp.transform(Y)
    Z = np.random.default_rng(2).uniform(-1, 1, size=(25, 2))
    F = KernelRidge(alpha=m * gamma, kernel="rbf", gamma=gx).fit(X, T).predict(Z)
    idx = ((F[:, None, :] - T[None]) ** 2).sum(-1).argmin(1)
    np.testing.assert_array_equal(kde.predict(Z), Y[idx])
    # Projections agree up to per-component sign.
    Fo = np.asarray(kde.predict_features(Z))
    np.testing.assert_allclose(np.abs(Fo), np.abs(F), atol=1e-4 if not X64 else 1e-8)


def test_full_rank_projection_distance_is_feature_distance(data):
    # With all components, the search in projection space is the search in feature
    # space: argmin_j ||Phi(y_j) - Psi||^2 with Psi = sum_i g_i Phi(y_i).
    from bayeskde.kde import feature_weights

    X, Y = data
    kde = KernelDependencyEstimator(
        "rbf", {"gamma": 1.0}, "rbf", {"gamma": 0.5}, ridge=1e-3
    ).fit(X, Y)
    Z = np.random.default_rng(3).uniform(-1, 1, size=(20, 2))
    g = np.asarray(feature_weights(kde.fit_.kpca, kde.predict_features(Z)))
    L = rbf_kernel(Y, gamma=0.5)
    idx = (np.diag(L)[None, :] - 2 * g @ L).argmin(1)
    np.testing.assert_array_equal(kde.predict(Z), Y[idx])


def test_fixed_point_preimage_improves_on_candidates(data):
    X, Y = data
    kde = KernelDependencyEstimator(
        "rbf", {"gamma": 3.0}, "rbf", {"gamma": 0.5}, ridge=1e-4, preimage="fixed_point"
    ).fit(X, Y)
    Z = np.random.default_rng(4).uniform(-1, 1, size=(15, 2))
    z = kde.predict(Z)
    cand = (
        KernelDependencyEstimator(
            "rbf", {"gamma": 3.0}, "rbf", {"gamma": 0.5}, ridge=1e-4
        )
        .fit(X, Y)
        .predict(Z)
    )
    from bayeskde.kde import feature_weights

    g = np.asarray(feature_weights(kde.fit_.kpca, kde.predict_features(Z)))

    def score(P):  # <Phi(p), Psi>, to be maximised
        return (g * rbf_kernel(P, Y, gamma=0.5)).sum(1)

    assert np.all(score(z) >= score(cand) - 1e-6)
    assert np.mean(score(z) > score(cand) + 1e-6) > 0.5
    # Stationary: one more fixed-point step does not move the answer.
    w = g * rbf_kernel(z, Y, gamma=0.5)
    step = (w @ Y) / w.sum(1, keepdims=True)
    moved = ~kde.fixed_point_fallback_
    np.testing.assert_allclose(step[moved], z[moved], atol=1e-3)


def test_knn_matches_brute_force(data):
    X, Y = data
    Z = np.random.default_rng(5).uniform(-1, 1, size=(12, 2))
    d = ((Z[:, None] - X[None]) ** 2).sum(-1)
    nn = d.argsort(1)
    k1 = KNNDependencyEstimator(1, "rbf", {"gamma": 1.0}, "rbf", {"gamma": 0.5})
    np.testing.assert_array_equal(k1.fit(X, Y).predict(Z), Y[nn[:, 0]])
    k3 = KNNDependencyEstimator(3, "rbf", {"gamma": 1.0}, "rbf", {"gamma": 0.5})
    L = rbf_kernel(Y, gamma=0.5)
    score = np.diag(L)[None, :] - 2 / 3 * L[nn[:, :3]].sum(1)
    np.testing.assert_array_equal(k3.fit(X, Y).predict(Z), Y[score.argmin(1)])


def test_outputs_keep_their_kind(rng):
    X = rng.normal(size=(30, 2))
    labels = (X[:, 0] > 0).astype(int) + 2 * (X[:, 1] > 0)
    kde = KernelDependencyEstimator("rbf", {"gamma": 1.0}, "delta", ridge=1e-3)
    pred = kde.fit(X, labels).predict(X)
    assert pred.dtype == labels.dtype and pred.shape == (30,)
    assert np.mean(pred == labels) > 0.9
    names = np.array(["a", "b", "c", "d"])[labels].tolist()
    pred = kde.fit(X, names).predict(X[:5])
    assert isinstance(pred, list) and all(isinstance(p, str) for p in pred)


def test_precomputed_kernels(data):
    X, Y = data
    Z = X[:6] + 0.01
    a = KernelDependencyEstimator("rbf", {"gamma": 1.0}, "rbf", {"gamma": 0.5}).fit(
        X, Y
    )
    b = KernelDependencyEstimator("precomputed", None, "precomputed").fit(
        rbf_kernel(X, gamma=1.0), rbf_kernel(Y, gamma=0.5)
    )
    idx = b.predict(rbf_kernel(Z, X, gamma=1.0))
    np.testing.assert_array_equal(a.predict(Z), Y[idx])


def test_user_candidates(data):
    X, Y = data
    C = Y[::2] + 0.05
    kde = KernelDependencyEstimator(
        "rbf", {"gamma": 1.0}, "rbf", {"gamma": 0.5}, candidates=C
    ).fit(X, Y)
    pred = kde.predict(X[:10])
    assert all(any(np.allclose(p, c) for c in C) for p in pred)


def test_sklearn_api(data):
    X, Y = data
    est = KernelDependencyEstimator("rbf", {"gamma": 1.0}, "rbf", {"gamma": 0.5})
    c = clone(est).set_params(ridge=0.1)
    assert c.get_params()["ridge"] == 0.1 and est.ridge == 1e-3
    folds = KFold(3)
    scores = cross_val_score(est, X, Y, cv=folds)
    manual = []
    for tr, va in folds.split(X):
        p = clone(est).fit(X[tr], Y[tr]).predict(X[va])
        manual.append(-np.mean(kernel_loss("rbf", Y[va], p, {"gamma": 0.5})))
    np.testing.assert_allclose(scores, manual, rtol=1e-5)
    gs = GridSearchCV(est, {"ridge": [1e-4, 1e-1, 10.0]}, cv=folds).fit(X, Y)
    assert gs.best_params_["ridge"] in (1e-4, 1e-1, 10.0)
    knn = KNNDependencyEstimator(2, "rbf", None, "rbf", None)
    assert clone(knn).get_params()["n_neighbors"] == 2


def test_kernel_loss_values():
    y = np.array([[0.0], [1.0]])
    yh = np.array([[0.0], [0.0]])
    np.testing.assert_allclose(
        kernel_loss("rbf", y, yh, {"gamma": 0.5}),
        [0.0, 2 - 2 * np.exp(-0.5)],
        rtol=1e-6,
    )
    np.testing.assert_allclose(kernel_loss("delta", [1, 2], [1, 3]), [0.0, 1.0])


def test_inputs_not_mutated(data):
    X, Y = data
    X0, Y0 = X.copy(), Y.copy()
    KernelDependencyEstimator().fit(X, Y).predict(X)
    np.testing.assert_array_equal(X, X0)
    np.testing.assert_array_equal(Y, Y0)


def test_bad_input(data):
    X, Y = data
    kde = KernelDependencyEstimator
    with pytest.raises(ValueError, match="same number of samples"):
        kde().fit(X, Y[:-1])
    with pytest.raises(ValueError, match="at least 2"):
        kde().fit(X[:0], Y[:0])
    Xn = X.copy()
    Xn[0, 0] = np.inf
    with pytest.raises(ValueError, match="X contains NaN or inf"):
        kde().fit(Xn, Y)
    with pytest.raises(ValueError, match="unknown kernel"):
        kde(input_kernel="gaussian").fit(X, Y)
    with pytest.raises(ValueError, match="ridge"):
        kde(ridge=-1.0).fit(X, Y)
    with pytest.raises(ValueError, match="gamma"):
        kde("rbf", {"gamma": -2.0}).fit(X, Y)
    with pytest.raises(ValueError, match="n_components"):
        kde(n_components=41).fit(X, Y)
    with pytest.raises(NotFittedError):
        kde().predict(X)
    with pytest.raises(ValueError, match="preimage"):
        kde(preimage="magic").fit(X, Y)
    with pytest.raises(ValueError, match="linear"):
        kde(preimage="linear").fit(X, Y)
    with pytest.raises(ValueError, match="fixed_point"):
        kde(output_kernel="linear", preimage="fixed_point").fit(X, Y)
    with pytest.raises(ValueError, match="features"):
        kde().fit(X, Y).predict(np.ones((2, 5)))
    with pytest.raises(TypeError, match="kind"):
        kde().fit(X, Y).predict(["ab", "cd"])
    with pytest.raises(ValueError, match="n_neighbors"):
        KNNDependencyEstimator(41).fit(X, Y)
    with pytest.raises(TypeError, match="n_neighbors"):
        KNNDependencyEstimator(1.5).fit(X, Y)
    with pytest.raises(NotFittedError):
        KNNDependencyEstimator().predict(X)


@pytest.mark.parametrize("preimage", ["candidates", "fixed_point"])
def test_blocked_prediction_equals_whole(data, preimage):
    X, Y = data
    Z = np.random.default_rng(6).uniform(-1, 1, size=(23, 2))
    est = KernelDependencyEstimator("rbf", {"gamma": 1.0}, "rbf", {"gamma": 0.5},
                                    preimage=preimage).fit(X, Y)
    whole = est.predict(Z)
    est.batch_size = 7
    # Fixed-point iterations vmapped over 7 or 23 rows round differently in the
    # last bits (a few float32 ulps): the suite's same-algebra tolerance.
    assert_close(est.predict(Z), whole)
    knn = KNNDependencyEstimator(3, "rbf", {"gamma": 1.0}, "rbf", None).fit(X, Y)
    nb = knn.kneighbors(Z)
    knn.batch_size = 5
    np.testing.assert_array_equal(knn.kneighbors(Z), nb)


def test_strings_to_strings_with_unseen_symbols():
    import jax

    from bayeskde.datasets import make_string_pairs
    from bayeskde.kernels import subsequence_kernel

    pairs = make_string_pairs(jax.random.key(1), n_samples=40)
    sp = {"r": 3, "lam": 0.1, "mode": "mean"}
    kde = KernelDependencyEstimator("string", {**sp, "rbf_sigma": 1.0}, "string", sp,
                                    ridge=1e-2).fit(pairs.inputs, pairs.outputs)
    tests = ["abcdabcdab", "xyzxyzxyzx", "ccddccddcc"]
    pred = kde.predict(tests)
    assert isinstance(pred, list) and all(p in pairs.outputs for p in pred)
    # Same answer through precomputed Grams (string kernel + RBF map by hand).
    K = np.asarray(subsequence_kernel(pairs.inputs, **sp))
    Kt = np.asarray(subsequence_kernel(tests, pairs.inputs, **sp))
    dt = np.asarray(subsequence_kernel(tests, **sp)).diagonal()
    rbf = lambda G, da, db: np.exp(-(da[:, None] + db[None] - 2 * G) / 2.0)  # noqa: E731
    d = K.diagonal()
    pre = KernelDependencyEstimator("precomputed", None, "string", sp, ridge=1e-2)
    idx = pre.fit(rbf(K, d, d), pairs.outputs).predict(rbf(Kt, dt, d))
    assert pred == idx
    # A string of unseen symbols shares no features with any training input.
    assert np.all(Kt[1] == 0.0)


def test_singular_system_gets_jitter_and_one_warning(data):
    from bayeskde import _validation
    from bayeskde.kde import ridge_solve

    X, Y = data
    Xd = np.r_[X, X]  # duplicated rows: a singular linear Gram with ridge 0
    K = Xd @ Xd.T
    T = K @ np.random.default_rng(7).normal(size=(len(Xd), 3))  # in K's range
    _validation._WARNED.clear()
    with pytest.warns(RuntimeWarning, match="ill-conditioned"):
        B = np.asarray(ridge_solve(K, T, 0.0))
    assert np.all(np.isfinite(B))
    rel = np.linalg.norm(K @ B - T) / np.linalg.norm(T)
    assert rel < (1e-6 if X64 else 1e-2)


def test_no_recompilation_on_refit_and_predict(data):

    X, Y = data
    est = KernelDependencyEstimator("rbf", {"gamma": 1.0}, "rbf", {"gamma": 0.5})
    est.fit(X, Y).predict(X[:5])
    with count_compilations() as compiles:
        est.set_params(ridge=0.5).fit(X + 0.1, Y).predict(X[5:10])
    assert compiles.count == 0


def test_default_kernels_follow_the_data_scale(rng):
    # The median-heuristic defaults make KDE invariant to the units of X and Y.
    X, Y = rng.normal(size=(25, 3)), rng.normal(size=(25, 2))
    a = KernelDependencyEstimator().fit(X, Y)
    b = KernelDependencyEstimator().fit(X * 1e3, Y * 1e-3)
    assert b.input_kernel_.params["gamma"] == pytest.approx(
        a.input_kernel_.params["gamma"] * 1e-6, rel=1e-4)
    Z = rng.normal(size=(6, 3))
    np.testing.assert_allclose(a.predict(Z), b.predict(Z * 1e3) * 1e3, rtol=1e-6)
    assert a.n_features_in_ == 3


def test_fit_checks_conversions_and_key(rng):
    X, Y = rng.normal(size=(10, 2)), rng.normal(size=(10, 2))
    for kw, name in [({"fixed_point_iter": -1}, "fixed_point_iter"),
                     ({"fixed_point_iter": "x"}, "fixed_point_iter"),
                     ({"input_kernel_params": "gamma"}, "input_kernel_params"),
                     ({"key": 3}, "key"), ({"ridge": "a"}, "ridge")]:
        with pytest.raises((TypeError, ValueError), match=name):
            KernelDependencyEstimator(**kw).fit(X, Y)
    with pytest.raises(NotFittedError):
        KNNDependencyEstimator().score(X, Y)
