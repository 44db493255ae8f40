import jax
import numpy as np
import pytest
from scipy.optimize import minimize
from sklearn.svm import SVC

from bayeskde import KernelPCA
from bayeskde.hyperlearn import (
    HyperkernelLearner,
    LearnedKernel,
    pair_labels,
    solve_hyperkernel_qp,
)
from bayeskde.kernels.algebra import center_kernel
from bayeskde.kernels.hyper import (
    gaussian_hyperkernel_gram,
    harmonic_hyperkernel_gram,
    wishart_hyperkernel_gram,
)
from tests.helpers import X64

TOL = 1e-6 if X64 else 2e-3  # QP optimality is limited by K's precision


def _data(rng, m=8, d=2):
    X = rng.normal(size=(m, d))
    y = (X[:, 0] + 0.3 * rng.normal(size=m) > 0).astype(int)
    return X, y


def _tiny_qp(rng, p=10):
    P = rng.normal(size=(p, 2, 2))
    K = np.asarray(gaussian_hyperkernel_gram(P, None, 1.0, 0.5, normalize=False))
    y = np.where(rng.uniform(size=p) > 0.5, 1.0, -1.0)
    w = rng.uniform(0.5, 2.0, size=p)
    return K.astype(np.float64), y, w


@pytest.mark.parametrize("variant", ["conic", "linear"])
def test_qp_satisfies_kkt(rng, variant):
    K, y, w = _tiny_qp(rng)
    C = 2.0
    res = solve_hyperkernel_qp(K, y, C, weights=w, variant=variant, tol=1e-10)
    f = K @ res.beta + res.b
    assert res.status == "Solved"
    # Primal feasibility.
    assert np.all(y * f >= 1 - res.slack - TOL)
    assert np.all(res.slack >= -TOL)
    # Dual feasibility and the equality constraint.
    assert np.all(res.alpha >= -TOL) and np.all(res.alpha <= C * w + TOL)
    assert abs(y @ res.alpha) <= TOL * C * w.sum()
    # Stationarity in beta: K beta = K Y alpha + nu.
    np.testing.assert_allclose(K @ res.beta, K @ (y * res.alpha) + res.nu,
                               atol=TOL * max(1.0, np.abs(K @ res.beta).max()))
    # Complementary slackness.
    assert np.all(np.abs(res.alpha * (y * f - 1 + res.slack)) <= TOL * C * w.max())
    assert np.all(np.abs((C * w - res.alpha) * res.slack) <= TOL * C * w.max())
    if variant == "conic":
        assert np.all(res.beta >= -TOL) and np.all(res.nu >= -TOL)
        assert np.all(np.abs(res.nu * res.beta) <= TOL * max(1.0, res.nu.max()))
    else:
        np.testing.assert_array_equal(res.nu, 0.0)


def test_conic_qp_matches_brute_force(rng):
    K, y, w = _tiny_qp(rng, p=6)
    C, p = 1.5, 6
    res = solve_hyperkernel_qp(K, y, C, weights=w, variant="conic", tol=1e-10)

    # Eliminate the slacks: min 1/2 b K b + C sum w max(0, 1 - y (K b + c)), b >= 0,
    # smoothed exactly as a constrained problem in (beta, c, xi) for SLSQP.
    def obj(z):
        beta, xi = z[:p], z[p + 1:]
        return 0.5 * beta @ K @ beta + C * w @ xi

    cons = [{"type": "ineq", "fun": lambda z: y * (K @ z[:p] + z[p]) - 1 + z[p + 1:]}]
    bounds = [(0, None)] * p + [(None, None)] + [(0, None)] * p
    best = min(
        (minimize(obj, z0, bounds=bounds, constraints=cons, method="SLSQP",
                  options={"ftol": 1e-12, "maxiter": 1000})
         for z0 in (np.zeros(2 * p + 1), np.ones(2 * p + 1))),
        key=lambda r: r.fun,
    )
    assert best.success
    np.testing.assert_allclose(float(res.objective), best.fun, rtol=1e-5)


def test_linear_variant_is_a_weighted_svm_on_pairs(rng):
    K, y, w = _tiny_qp(rng, p=12)
    C = 3.0
    res = solve_hyperkernel_qp(K, y, C, weights=w, variant="linear", tol=1e-10)
    svc = SVC(kernel="precomputed", C=C, tol=1e-10).fit(K, y, sample_weight=w)
    np.testing.assert_allclose(K @ res.beta + res.b, svc.decision_function(K),
                               atol=1e-4 * np.abs(svc.decision_function(K)).max())


def test_symmetric_reduction_equals_all_pairs(rng):
    X, y = _data(rng, m=6)
    m = 6
    reduced = HyperkernelLearner(sigma=1.0, sigma_h=0.5, C=2.0).fit(X, y)
    assert reduced.pair_index_.shape[0] == m * (m + 1) // 2
    rows, cols = (a.ravel() for a in np.indices((m, m)))
    P = np.stack([X[rows], X[cols]], axis=1)
    K = np.asarray(gaussian_hyperkernel_gram(P, None, 1.0, 0.5, normalize=False))
    full = solve_hyperkernel_qp(K, pair_labels(y).ravel(), 2.0, tol=1e-10)
    np.testing.assert_allclose(float(reduced.qp_.objective), float(full.objective),
                               rtol=10 * TOL)
    k_full = (K @ full.beta + full.b).reshape(m, m)
    np.testing.assert_allclose(reduced.kernel_(X, X), k_full, rtol=10 * TOL,
                               atol=10 * TOL * np.abs(k_full).max())


@pytest.mark.parametrize("kind", ["gaussian", "wishart", "harmonic"])
def test_learned_kernel_equals_its_expansion(rng, kind):
    X, y = _data(rng, m=7)
    C = np.array([[1.0, 0.3], [0.3, 0.5]])
    learner = HyperkernelLearner(kind, sigma=0.8, sigma_h=0.4, variant="linear",
                                 wishart_scale=C, wishart_dof=3.0).fit(X, y)
    k = learner.kernel_
    A, B = rng.normal(size=(5, 2)), rng.normal(size=(5, 2))
    a, b = np.meshgrid(np.arange(5), np.arange(5), indexing="ij")
    Q = np.stack([A[a.ravel()], B[b.ravel()]], axis=1)
    if kind == "gaussian":
        Kuq = gaussian_hyperkernel_gram(k.pairs, Q, 0.8, 0.4, normalize=False)
    elif kind == "wishart":
        Kuq = wishart_hyperkernel_gram(k.pairs, Q, C, 3.0, normalize=False)
    else:
        Kuq = harmonic_hyperkernel_gram(k.pairs, Q, 1.0, 0.5)
    ref = (np.asarray(k.beta) @ np.asarray(Kuq)).reshape(5, 5) + k.b
    scale = np.abs(ref).max()
    np.testing.assert_allclose(k(A, B), ref, atol=20 * TOL * scale)
    np.testing.assert_allclose(k.diag(A), np.diag(np.asarray(k(A, A))),
                               atol=20 * TOL * scale)
    D = np.asarray(k.distances(A))
    np.testing.assert_allclose(np.diag(D), 0.0, atol=50 * TOL * scale)


def test_conic_kernel_is_psd_on_held_out_points(rng):
    X, y = _data(rng, m=10, d=3)
    learner = HyperkernelLearner(sigma=0.7, sigma_h=0.5).fit(X, y)
    assert np.all(learner.qp_.beta >= -1e-8)
    Z = rng.normal(size=(40, 3))
    eig_tol = 1e-9 if X64 else 1e-4
    K0 = np.asarray(learner.kernel_.without_bias()(Z), dtype=np.float64)
    ev = np.linalg.eigvalsh(0.5 * (K0 + K0.T))
    assert ev[0] >= -eig_tol * ev[-1]
    # With the offset, k is conditionally positive definite: PSD once centred.
    Kc = np.asarray(center_kernel(learner.kernel_(Z)), dtype=np.float64)
    evc = np.linalg.eigvalsh(0.5 * (Kc + Kc.T))
    assert evc[0] >= -eig_tol * evc[-1]
    assert np.all(np.asarray(learner.kernel_.distances(Z)) >= 0)


def test_learned_kernel_plugs_into_kpca_and_svc(rng):
    X, y = _data(rng, m=12)
    learner = HyperkernelLearner(sigma=0.8, sigma_h=0.8).fit(X, y)
    k = learner.kernel_
    assert isinstance(k, LearnedKernel)
    Z = KernelPCA(2, kernel=k).fit(X).transform(rng.normal(size=(5, 2)))
    assert Z.shape == (5, 2) and np.all(np.isfinite(np.asarray(Z)))
    svc = SVC(kernel="precomputed").fit(np.asarray(k(X, X)), y)
    assert svc.predict(np.asarray(k(X[:3], X))).shape == (3,)
    pred = np.asarray(learner.predict_pairs(X))
    assert set(np.unique(pred)) <= {-1, 1}


def test_subsampling_is_reproducible_by_key(rng):
    X, y = _data(rng, m=8)
    key = jax.random.key(3)
    a = HyperkernelLearner(max_pairs=15, key=key).fit(X, y)
    b = HyperkernelLearner(max_pairs=15, key=key).fit(X, y)
    assert a.pair_index_.shape == (15, 2)
    np.testing.assert_array_equal(a.pair_index_, b.pair_index_)
    np.testing.assert_array_equal(np.asarray(a.kernel_.beta),
                                  np.asarray(b.kernel_.beta))
    with pytest.raises(ValueError, match="key"):
        HyperkernelLearner(max_pairs=15).fit(X, y)


def test_pair_label_matrix_input(rng):
    X, y = _data(rng, m=6)
    Y = pair_labels(y)
    a = HyperkernelLearner().fit(X, Y)
    b = HyperkernelLearner().fit(X, y)
    np.testing.assert_array_equal(a.pair_index_, b.pair_index_)
    Y_asym = Y.copy()
    Y_asym[0, 1] = -Y_asym[0, 1]
    c = HyperkernelLearner().fit(X, Y_asym)
    assert c.pair_index_.shape[0] == 36


@pytest.mark.parametrize(
    "y, match",
    [
        (np.zeros(5), "length 6"),
        (np.ones((6, 5)), "shape"),
        (np.ones((6, 6, 1)), "shape"),
        (np.full((6, 6), 2), r"\{-1, \+1\}"),
        (np.zeros((6, 6)), r"\{-1, \+1\}"),
    ],
)
def test_labels_that_are_not_pairs_raise(rng, y, match):
    X, _ = _data(rng, m=6)
    with pytest.raises(ValueError, match=match):
        HyperkernelLearner().fit(X, y)


def test_bad_settings_raise(rng):
    X, y = _data(rng, m=6)
    with pytest.raises(ValueError, match="variant"):
        HyperkernelLearner(variant="cone").fit(X, y)
    with pytest.raises(ValueError, match="hyperkernel"):
        HyperkernelLearner("laplace").fit(X, y)
    with pytest.raises(ValueError, match="sigma"):
        HyperkernelLearner(sigma=0.0).fit(X, y)
    with pytest.raises(ValueError, match="r must be"):
        HyperkernelLearner("wishart", wishart_dof=0.5).fit(X, y)
    with pytest.raises(ValueError, match="C must be"):
        HyperkernelLearner(C=-1.0).fit(X, y)
    K, yp, _ = _tiny_qp(rng, p=4)
    with pytest.raises(ValueError, match="shape"):
        solve_hyperkernel_qp(K, yp[:3])
    with pytest.raises(ValueError, match=r"\{-1, \+1\}"):
        solve_hyperkernel_qp(K, np.array([1.0, 0.0, 1.0, -1.0]))
