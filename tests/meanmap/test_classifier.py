"""SequenceKernelClassifier: LOO algebra, a published number, inputs, bad inputs,
scikit-learn's checks; the variational HMM's E-step against path enumeration."""

import itertools
import json

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy.special import digamma
from sklearn.exceptions import NotFittedError
from sklearn.utils.estimator_checks import parametrize_with_checks

from bayeskde import SequenceKernelClassifier
from bayeskde.datasets import load_ucr
from bayeskde.meanmap import VariationalHMM, variational_posteriors
from bayeskde.meanmap.classifier import loo_ridge_scores
from tests.helpers import LOOSE, RTOL, assert_close


@pytest.fixture(scope="module")
def italy():
    return load_ucr("ItalyPowerDemand", "train"), load_ucr("ItalyPowerDemand", "test")


@pytest.fixture(scope="module")
def italy_gak(italy):
    tr, _ = italy
    return SequenceKernelClassifier(kernels=("gak",), derivative=3.0).fit(tr.X, tr.y)


def test_loo_ridge_equals_refits(rng):
    Z = rng.normal(size=(12, 5))
    K = Z @ Z.T + 0.1
    Y = np.where(rng.random((12, 3)) < 0.5, 1.0, -1.0)
    alphas = [0.01, 1.0]
    errors, preds = loo_ridge_scores(K, Y, alphas)
    for a, (err, P) in enumerate(zip(errors, preds, strict=True)):
        ref = np.empty_like(Y)
        for i in range(12):
            keep = np.arange(12) != i
            coef = np.linalg.solve(K[np.ix_(keep, keep)] + alphas[a] * np.eye(11),
                                   Y[keep])
            ref[i] = K[i, keep] @ coef
        np.testing.assert_allclose(P, ref, rtol=1e-8, atol=1e-8)
        np.testing.assert_allclose(err, np.mean((ref - Y) ** 2), rtol=1e-8)


def test_italy_power_demand_beats_published_dtw(italy, italy_gak):
    # the whole fixed test split; 1-NN DTW scores 0.950 (Dempster et al. 2020)
    _, te = italy
    acc = np.mean(italy_gak.predict(te.X) == te.y)
    assert acc >= 0.950, acc


def test_window_kernel_on_italy_power_demand(italy):
    # the window mean map alone, the whole test split; 1-NN DTW scores 0.950
    tr, te = italy
    clf = SequenceKernelClassifier(kernels=("window",), window_features=2000).fit(
        tr.X, tr.y)
    assert {s["representation"] for s in clf.selected_} <= {"raw", "diff", "both"}
    assert np.mean(clf.predict(te.X) == te.y) >= 0.950


def test_budget_gates_the_expensive_families(italy):
    """n^2 T^2 (T after PAA to max_length) against the budget; explicit kernels
    are always scored."""
    from bayeskde.meanmap.sequence_kernels import FAMILIES

    clf = SequenceKernelClassifier()
    assert clf._families(100, 1460) == ("window",)      # ACSF1: 100^2 128^2 > 5e7
    assert clf._families(67, 24) == FAMILIES            # ItalyPowerDemand
    assert clf._families(56, 128) == ("window",)        # 5.14e7, just over
    assert clf._families(55, 200) == FAMILIES           # 4.96e7 (PAA to 128)
    assert SequenceKernelClassifier(budget=None)._families(10**4, 10**4) == FAMILIES
    assert SequenceKernelClassifier(kernels=("gak",), budget=1.0)._families(
        10**4, 10**4) == ("gak",)
    tr, _ = italy
    fit = SequenceKernelClassifier(budget=1.0, window_features=300).fit(tr.X, tr.y)
    assert {s.get("family") for s in fit.scores_ if "family" in s} == {"window"}
    with pytest.raises(ValueError, match="budget"):
        SequenceKernelClassifier(budget=0.0).fit(tr.X, tr.y)


def test_probabilities_and_decisions(italy, italy_gak):
    X = italy[1].X[:40]
    P = italy_gak.predict_proba(X)
    assert_close(P.sum(axis=1), np.ones(40))
    pred = italy_gak.predict(X)
    np.testing.assert_array_equal(italy_gak.classes_[P.argmax(1)], pred)
    d = italy_gak.decision_function(X)
    assert d.shape == (40,)
    np.testing.assert_array_equal(italy_gak.classes_[(d > 0).astype(int)], pred)


def test_input_forms_agree(italy, italy_gak):
    X = italy[1].X[:10]
    ref = italy_gak.decision_function(X)
    arr3 = np.stack(X)
    assert_close(italy_gak.decision_function(arr3), ref, rtol=LOOSE, atol=LOOSE)
    assert_close(italy_gak.decision_function(arr3[:, :, 0]), ref, rtol=LOOSE,
                 atol=LOOSE)
    assert_close(italy_gak.decision_function([x[:, 0] for x in X]), ref,
                 rtol=LOOSE, atol=LOOSE)


def test_ragged_multivariate_and_every_family(rng):
    # unequal lengths, two channels; classes differ in frequency
    X, y = [], []
    for i in range(16):
        c = i % 2
        T = int(rng.integers(15, 25))
        t = np.linspace(0, 1, T)
        X.append(np.stack([np.sin(2 * np.pi * (1 + 2 * c) * t), np.cos(
            2 * np.pi * (1 + 2 * c) * t)], 1) + 0.1 * rng.normal(size=(T, 2)))
        y.append(["slow", "fast"][c])
    y = np.array(y)
    for kw in (dict(kernels=("signature",)),
               dict(kernels=("window",), window_features=300, derivative=2.0),
               dict(kernels=("lmmk",), n_states=2),
               dict(kernels=("lmmk",), n_states=2, hmm="bayes")):
        clf = SequenceKernelClassifier(**kw, key=jax.random.key(1)).fit(X, y)
        assert np.mean(clf.predict(X) == y) == 1.0, kw
        assert clf.n_channels_ == 2
        if kw["kernels"] == ("window",):
            # a fixed derivative weight: the series' and the differences' sum
            assert [s["representation"] for s in clf.selected_] == ["both"]
    with pytest.raises(ValueError, match="d = 1"):
        clf.predict([x[:, :1] for x in X])


def test_same_key_same_result(italy):
    X, y = italy[0].X[:20], italy[0].y[:20]
    a = SequenceKernelClassifier(kernels=("lmmk",), n_states=3).fit(X, y)
    b = SequenceKernelClassifier(kernels=("lmmk",), n_states=3).fit(X, y)
    np.testing.assert_array_equal(a.decision_function(X[:5]),
                                  b.decision_function(X[:5]))


@pytest.mark.parametrize("X, y, kw, match", [
    ([np.array([1.0, np.nan])] * 4, [0, 1] * 2, {}, r"X\[0\] contains NaN"),
    ([], [], {}, "X is empty"),
    ([np.zeros(0)] * 4, [0, 1] * 2, {}, r"X\[0\] must be a non-empty"),
    ([np.zeros(3), np.zeros((3, 2))] * 2, [0, 1] * 2, {}, "different d"),
    ([np.zeros(3)] * 4, [0, 1, 0], {}, "y must be 1-D"),
    ([np.zeros(3)] * 4, [0] * 4, {}, "need at least 2"),
    ([np.zeros(3)] * 4, [0, 1] * 2, dict(kernels="dtw"), "kernels must be"),
    ([np.zeros(3)] * 4, [0, 1] * 2, dict(hmm="gibbs"), "hmm must be"),
    ([np.zeros(3)] * 4, [0, 1] * 2, dict(max_length=1), "max_length"),
    ([np.zeros(3)] * 4, [0, 1] * 2, dict(derivative=-1.0), "derivative"),
    ([np.zeros(3)] * 4, [0, 1] * 2, dict(method="knn"), "method must be"),
    ([np.zeros(3)] * 4, [0, 1] * 2, dict(window_features=0), "window_features"),
    ([np.zeros(3)] * 4, [0, 1] * 2, dict(normalize="minmax"), "normalize must be"),
    (np.zeros(5), [0, 1] * 2, {}, "Reshape"),
])
def test_bad_inputs(X, y, kw, match):
    with pytest.raises(ValueError, match=match):
        SequenceKernelClassifier(**kw).fit(X, y)


def test_not_fitted():
    with pytest.raises(NotFittedError):
        SequenceKernelClassifier().predict([np.zeros(3)])


@parametrize_with_checks([SequenceKernelClassifier(kernels=("signature",),
                                                  derivative=0.0)])
def test_sklearn_checks(estimator, check):
    if getattr(check, "func", check).__name__ == "check_array_api_input":
        # scikit-learn skips it unless SciPy's array API support is on (read
        # once at import): run in the child process of tests/test_sklearn_checks.
        from tests.test_sklearn_checks import _array_api_results

        error = _array_api_results(json.dumps(check.keywords, sort_keys=True))[
            "SequenceKernelClassifier"]
        assert not error, error
        return
    check(estimator)


def test_variational_e_step_equals_path_enumeration(rng):
    N, T = 2, 4
    q = VariationalHMM(
        initial=jnp.asarray([1.5, 2.5]), transition=jnp.asarray([[3.0, 1.0],
                                                                 [0.5, 2.0]]),
        means=jnp.asarray([[-1.0], [1.0]]), beta=jnp.asarray([2.0, 3.0]),
        shape=jnp.asarray([[2.0], [3.0]]), rate=jnp.asarray([[1.0], [2.0]]))
    X = rng.normal(size=(1, T, 1))
    gamma, xi = variational_posteriors(q, jnp.asarray(X), jnp.asarray([T]))
    qn = {k: np.asarray(v, np.float64) for k, v in q._asdict().items()}
    elog_pi = digamma(qn["initial"]) - digamma(qn["initial"].sum())
    elog_a = digamma(qn["transition"]) - digamma(qn["transition"].sum(1,
                                                                      keepdims=True))
    e_loglam = digamma(qn["shape"][:, 0]) - np.log(qn["rate"][:, 0])
    e_lam = qn["shape"][:, 0] / qn["rate"][:, 0]
    ell = 0.5 * (e_loglam - np.log(2 * np.pi) - 1 / qn["beta"]
                 - e_lam * (X[0, :, :] - qn["means"][:, 0]) ** 2)
    w, g_ref, xi_ref = 0.0, np.zeros((T, N)), np.zeros((N, N))
    for z in itertools.product(range(N), repeat=T):
        lw = elog_pi[z[0]] + sum(elog_a[z[t], z[t + 1]] for t in range(T - 1)) + sum(
            ell[t, z[t]] for t in range(T))
        p = np.exp(lw)
        w += p
        for t in range(T):
            g_ref[t, z[t]] += p
        for t in range(T - 1):
            xi_ref[z[t], z[t + 1]] += p
    assert_close(gamma[0], g_ref / w, rtol=10 * RTOL, atol=10 * RTOL)
    assert_close(xi[0], xi_ref / w, rtol=10 * RTOL, atol=10 * RTOL)


def test_bayes_hmm_kernel_mixes_its_modes(italy):
    # the Bayesian HMM kernel over several variational fits: the mixture of the
    # modes' cosine-normalised kernels with weights softmax(ELBO), one per mode
    # kept; a mean of unit-diagonal PSD kernels, and cross() on the training
    # series gives the training Gram back
    from bayeskde.meanmap.sequence_kernels import make_component

    seqs = [np.asarray(x, np.float64).reshape(len(x), -1) for x in italy[0].X[:12]]
    comp = make_component("lmmk", n_states=(2, 3), hmm="bayes", derivative=1.0,
                          max_length=128, nu=None, n_features=16, n_iter=5,
                          n_restarts=1, key=jax.random.key(2), vb_iter=3,
                          vb_restarts=1).fit(seqs)
    assert comp.elbos_.shape == (2,)
    assert_close(np.sum(comp.mode_weights_), 1.0)
    assert len(comp.modes_) == len(comp.mode_weights_) >= 1
    K = comp.K_
    assert_close(K, K.T)
    assert_close(np.diag(K), np.ones(12), rtol=LOOSE, atol=LOOSE)
    assert np.linalg.eigvalsh(K).min() > -LOOSE
    assert_close(comp.cross(seqs), K, rtol=LOOSE, atol=LOOSE)
