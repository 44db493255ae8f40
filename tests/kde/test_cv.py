import numpy as np
import pytest
from sklearn.metrics.pairwise import rbf_kernel
from sklearn.model_selection import GridSearchCV

from bayeskde import (
    KernelDependencyEstimator,
    KernelDependencyEstimatorCV,
    KNNDependencyEstimator,
)
from bayeskde.kde import (
    input_gram_grid,
    kde_cv_losses,
    kernel_loss,
    kfold_indices,
    knn_cv_losses,
)
from bayeskde.kernels import make_kernel
from tests.helpers import X64, count_compilations

RTOL = 1e-8 if X64 else 1e-4


@pytest.fixture
def data(rng):
    X = rng.uniform(-1, 1, size=(30, 2))
    Y = np.c_[np.sin(3 * X[:, 0]), X[:, 1] ** 2]
    return X, Y


@pytest.mark.parametrize("p", [None, 4])
def test_kde_cv_equals_refitting_every_setting(data, p):
    # Oracle: refit KernelDependencyEstimator on every (sigma, ridge, fold).
    X, Y = data
    gammas, ridges = [0.3, 3.0], [1e-3, 1e-1]
    K_grid = np.stack([rbf_kernel(X, gamma=g) for g in gammas])
    L = rbf_kernel(Y, gamma=0.5)
    res = kde_cv_losses(K_grid, L, ridges, folds=3, n_components=p)
    folds = kfold_indices(30, 3)
    for a, g in enumerate(gammas):
        for b, r in enumerate(ridges):
            for f, (tr, va) in enumerate(folds):
                est = KernelDependencyEstimator("rbf", {"gamma": g}, "rbf",
                                                {"gamma": 0.5}, ridge=r,
                                                n_components=p)
                pred = est.fit(X[tr], Y[tr]).predict(X[va])
                ref = float(np.mean(kernel_loss("rbf", Y[va], pred, {"gamma": 0.5})))
                assert res.fold_losses[f, a, b] == pytest.approx(ref, rel=RTOL,
                                                                 abs=RTOL)
    assert res.mean_loss.shape == (2, 2)
    assert res.best == np.unravel_index(res.mean_loss.argmin(), (2, 2))


def test_knn_cv_equals_refitting(data):
    X, Y = data
    K = rbf_kernel(X, gamma=1.0)
    L = rbf_kernel(Y, gamma=0.5)
    ks = (1, 3, 5)  # k = 2 ties: both neighbours are equidistant from the mean
    res = knn_cv_losses(K, L, ks, folds=3)
    for j, k in enumerate(ks):
        for f, (tr, va) in enumerate(kfold_indices(30, 3)):
            est = KNNDependencyEstimator(k, "rbf", {"gamma": 1.0}, "rbf",
                                         {"gamma": 0.5})
            pred = est.fit(X[tr], Y[tr]).predict(X[va])
            ref = float(np.mean(kernel_loss("rbf", Y[va], pred, {"gamma": 0.5})))
            assert res.fold_losses[f, 0, j] == pytest.approx(ref, rel=RTOL, abs=RTOL)


def test_estimator_cv_agrees_with_gridsearch(data):
    X, Y = data
    sigmas, ridges = [0.2, 1.0, 5.0], [1e-4, 1e-2, 1.0]
    cv = KernelDependencyEstimatorCV(
        "rbf", None, "rbf", {"gamma": 0.5},
        input_param_grid={"sigma": sigmas}, ridges=ridges, cv=3,
    ).fit(X, Y)
    folds = kfold_indices(30, 3)
    gs = GridSearchCV(
        KernelDependencyEstimator("rbf", None, "rbf", {"gamma": 0.5}),
        {"input_kernel_params": [{"sigma": s} for s in sigmas], "ridge": ridges},
        cv=folds,
    ).fit(X, Y)
    assert cv.best_params_["ridge"] == gs.best_params_["ridge"]
    expect = make_kernel("rbf", gs.best_params_["input_kernel_params"]).params
    assert cv.best_params_["input_kernel_params"]["gamma"] == pytest.approx(
        expect["gamma"])
    gs_loss = -gs.cv_results_["mean_test_score"].reshape(3, 3)
    np.testing.assert_allclose(cv.cv_result_.mean_loss, gs_loss, rtol=1e-4,
                               atol=1e-6)
    np.testing.assert_array_equal(cv.predict(X), gs.best_estimator_.predict(X))


def test_default_grid_is_paper_grid_times_median(data):
    X, Y = data
    cv = KernelDependencyEstimatorCV("rbf", None, "rbf", {"gamma": 0.5}, cv=3)
    cv.fit(X, Y)
    assert len(cv.grid_) == 7 and cv.cv_result_.mean_loss.shape == (7, 6)


def test_input_gram_grid_fast_paths(data):
    X, _ = data
    g = input_gram_grid("rbf", [{"sigma": 0.5}, {"gamma": 2.0}], X)
    np.testing.assert_allclose(g[0], rbf_kernel(X, gamma=2.0), rtol=1e-5)
    np.testing.assert_allclose(g[1], rbf_kernel(X, gamma=2.0), rtol=1e-5)
    lin = make_kernel("linear", {"rbf_sigma": 1.0})
    g = input_gram_grid(lin, [{"rbf_sigma": 0.5}], X)
    np.testing.assert_allclose(g[0], rbf_kernel(X, gamma=2.0), rtol=1e-4, atol=1e-6)


def test_no_recompilation_across_calls(data):
    X, Y = data
    K_grid = np.stack([rbf_kernel(X, gamma=g) for g in (0.5, 2.0)])
    L = rbf_kernel(Y)
    kde_cv_losses(K_grid, L, [1e-3, 1e-2], folds=3)
    with count_compilations() as compiles:
        kde_cv_losses(K_grid * 0.9, L, [1e-2, 1e-1], folds=3)
    assert compiles.count == 0


def test_bad_input(data):
    X, Y = data
    K = rbf_kernel(X)
    with pytest.raises(ValueError, match="ridges"):
        kde_cv_losses(K, rbf_kernel(Y), [0.0])
    with pytest.raises(ValueError, match="L must have shape"):
        kde_cv_losses(K, np.eye(3))
    with pytest.raises(ValueError, match="K_grid"):
        kde_cv_losses(np.ones((2, 3, 4)), np.eye(3))
    with pytest.raises(ValueError, match="ks"):
        knn_cv_losses(K, rbf_kernel(Y), [50], folds=3)
    with pytest.raises(ValueError, match="input_param_grid"):
        KernelDependencyEstimatorCV(input_param_grid=[]).fit(X, Y)
    with pytest.raises(ValueError, match="precomputed"):
        KernelDependencyEstimatorCV("precomputed").fit(K, Y)


def test_select_and_predict_agree_with_single_fold_cv(data):
    # Selecting on the training block, then predicting the test block, gives the
    # test loss that kde_cv_losses reports for that setting on the split itself.
    from bayeskde.apps.protocols import select_and_predict_kde, select_and_predict_knn
    from bayeskde.kde import loss_matrix_from_kernel

    X, Y = data
    K_grid = np.stack([rbf_kernel(X, gamma=g) for g in (0.3, 3.0)])
    L = rbf_kernel(Y, gamma=0.5)
    loss = np.asarray(loss_matrix_from_kernel(L))
    train, test = np.arange(20), np.arange(20, 30)
    pred, info = select_and_predict_kde(K_grid, L, train, test, [1e-3, 1e-1], 4)
    split = kde_cv_losses(K_grid, L, [info["ridge"]], folds=[(train, test)])
    assert np.all(np.isin(pred, train))
    assert np.mean(loss[test, pred]) == pytest.approx(
        split.mean_loss[info["param_index"], 0], rel=RTOL, abs=RTOL)
    pred, info = select_and_predict_knn(K_grid[0], L, train, test, (1, 3), 4)
    split = knn_cv_losses(K_grid[0], L, (info["k"],), folds=[(train, test)])
    assert np.mean(loss[test, pred]) == pytest.approx(split.mean_loss[0, 0],
                                                      rel=RTOL, abs=RTOL)
