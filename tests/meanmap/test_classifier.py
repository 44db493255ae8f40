"""SequenceKernelClassifier: LOO algebra, a published number, inputs, bad inputs,
scikit-learn's checks; the variational HMM's E-step against path enumeration."""

import itertools
import json
import os
import subprocess
import sys

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
from bayeskde.meanmap.stacking import loo_ridge_scores
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


@pytest.mark.slow
def test_italy_power_demand_beats_published_dtw(italy, italy_gak):
    # the whole fixed test split; 1-NN DTW scores 0.950 (Dempster et al. 2020).
    # Slow (1,029 x 67 alignments); the default run keeps the window kernel's
    # oracle on the same split, and tests/kernels the alignment kernel's
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
    fit = SequenceKernelClassifier(budget=1.0, window_features=300,
                                   selection="loo").fit(tr.X, tr.y)
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
               dict(kernels=("lmmk",), n_states=2, hmm="bayes"),
               dict(kernels=("lmmk",), n_states=2, hmm="bayes",
                    mode_weighting="stacking")):
        clf = SequenceKernelClassifier(**kw, key=jax.random.key(1)).fit(X, y)
        assert np.mean(clf.predict(X) == y) == 1.0, kw
        assert clf.n_channels_ == 2
        if kw.get("mode_weighting") == "stacking":
            (sel,) = clf.selected_
            assert sel["mode_weighting"] == "stacking"
            assert min(sel["mode_weights"]) >= 0
            assert_close(sum(sel["mode_weights"]), 1.0, rtol=1e-12, atol=1e-12)
        if kw["kernels"] == ("window",):
            # a fixed derivative weight: the series' and the differences' sum
            assert [s["representation"] for s in clf.selected_] == ["both"]
    with pytest.raises(ValueError, match="d = 1"):
        clf.predict([x[:, :1] for x in X])


def test_same_key_same_result(italy):
    X, y = italy[0].X[:12], italy[0].y[:12]
    a = SequenceKernelClassifier(kernels=("lmmk",), n_states=2).fit(X, y)
    b = SequenceKernelClassifier(kernels=("lmmk",), n_states=2).fit(X, y)
    np.testing.assert_array_equal(a.decision_function(X[:5]),
                                  b.decision_function(X[:5]))


@pytest.mark.parametrize("X, y, kw, match", [
    ([np.array([1.0, np.nan])] * 4, [0, 1] * 2, {}, r"X\[0\] contains NaN"),
    ([], [], {}, "X is empty"),
    ([np.zeros(0)] * 4, [0, 1] * 2, {}, r"X\[0\] must be a non-empty"),
    ([np.zeros(3), np.zeros((3, 2))] * 2, [0, 1] * 2, {}, "different d"),
    ([np.zeros(3)] * 4, [0, 1, 0], {}, "y must be 1-D"),
    ([np.zeros(3)] * 4, [0] * 4, {}, "need at least 2"),
    ([np.zeros(3)] * 4, [0, 1] * 2, dict(kernels="knn"), "kernels must be"),
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
        # once at import): run in a child process with it on, this estimator
        # alone (tests/test_sklearn_checks.py runs the package's others)
        env = {**os.environ, "SCIPY_ARRAY_API": "1"}
        proc = subprocess.run([sys.executable, "-c", _ARRAY_API_CHILD,
                               json.dumps(check.keywords, sort_keys=True)],
                              env=env, capture_output=True, text=True, timeout=600)
        assert proc.returncode == 0, proc.stderr[-3000:]
        error = json.loads(proc.stdout.strip().splitlines()[-1])
        assert not error, error
        return
    check(estimator)


_ARRAY_API_CHILD = """
import json, sys, traceback, warnings
from sklearn.utils.estimator_checks import check_array_api_input
from bayeskde import SequenceKernelClassifier
try:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        check_array_api_input("SequenceKernelClassifier", SequenceKernelClassifier(
            kernels=("signature",), derivative=0.0), **json.loads(sys.argv[1]))
    print(json.dumps(""))
except Exception:
    print(json.dumps(traceback.format_exc()))
"""


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


# --------------------------------------------------- stacking of the modes
def _brute_loo_error(K, Y, alphas):
    """The LOO squared error by n refits per ridge, the smallest over ridges."""
    n = len(Y)
    best = np.inf
    for a in alphas:
        ref = np.empty_like(Y)
        for i in range(n):
            keep = np.arange(n) != i
            coef = np.linalg.solve(K[np.ix_(keep, keep)] + a * np.eye(n - 1), Y[keep])
            ref[i] = K[i, keep] @ coef
        best = min(best, float(np.mean((ref - Y) ** 2)))
    return best


def _mode_grams(rng, n=14, M=4):
    """M cosine-normalised RBF Grams of views of two classes of points, from
    informative to noise, and the one-hot codes."""
    y = np.arange(n) % 2
    grams = []
    for m in range(M):
        Z = (1.5 - 0.5 * m) * y[:, None] + rng.normal(size=(n, 3))
        sq = np.sum((Z[:, None] - Z[None]) ** 2, axis=-1)
        grams.append(np.exp(-0.3 * sq))
    return np.stack(grams), _one_hot_pm(y)


def _one_hot_pm(y):
    Y = -np.ones((len(y), 2))
    Y[np.arange(len(y)), y] = 1.0
    return Y


@pytest.mark.parametrize(("M", "step"), [(1, 0.25), (2, 0.5), (3, 0.2), (4, 0.25)])
def test_simplex_grid_is_every_point_of_the_lattice(M, step):
    from bayeskde.meanmap.stacking import simplex_grid

    k = round(1 / step)
    ref = {p for p in itertools.product(range(k + 1), repeat=M) if sum(p) == k}
    grid = simplex_grid(M, step)
    got = {tuple(int(c) for c in np.rint(p * k)) for p in grid}
    assert got == ref and len(grid) == len(ref)
    np.testing.assert_allclose(grid.sum(axis=1), 1.0, rtol=0, atol=1e-15)
    assert np.all(grid >= 0)
    # the single modes come first
    np.testing.assert_array_equal(grid[:M], np.eye(M))


def test_stacking_weights_equal_an_exhaustive_search(rng):
    # the oracle: every point of the same grid scored by n refits per ridge
    from bayeskde.meanmap import mode_weights
    from bayeskde.meanmap.stacking import stacking_weights

    grams, Y = _mode_grams(rng)
    alphas = (1e-3, 1e-1, 1.0)
    res = stacking_weights(grams, Y, step=0.25, alphas=alphas, intercept=1.0)
    brute = {}
    for p in itertools.product(range(5), repeat=4):
        if sum(p) == 4:
            w = np.asarray(p) / 4
            brute[p] = _brute_loo_error(np.tensordot(w, grams, 1) + 1.0, Y, alphas)
    best = min(brute.values())
    np.testing.assert_allclose(res.loo_error, best, rtol=1e-8)
    np.testing.assert_allclose(
        res.loo_error, brute[tuple(int(c) for c in np.rint(res.weights * 4))],
        rtol=1e-8)
    for w, e in zip(res.grid, res.grid_errors, strict=True):
        np.testing.assert_allclose(e, brute[tuple(int(c) for c in np.rint(w * 4))],
                                   rtol=1e-8)
    assert np.all(res.weights >= 0)
    np.testing.assert_allclose(res.weights.sum(), 1.0, rtol=0, atol=1e-15)
    # no worse than every single mode, nor than the ELBO weights: bounds tens
    # of nats apart (as measured on the UCR sets) give a vertex of the grid
    singles = [_brute_loo_error(K + 1.0, Y, alphas) for K in grams]
    assert res.loo_error <= min(singles) * (1 + 1e-12)
    w_elbo = mode_weights(np.array([-1990.0, -1865.0, -1900.0, -1870.0]))
    assert res.loo_error <= _brute_loo_error(
        np.tensordot(w_elbo, grams, 1) + 1.0, Y, alphas) * (1 + 1e-12)
    # a mixture beats the best single view here: the grid is searched, not
    # just its vertices
    assert res.loo_error < min(singles)


def test_stacking_prefers_fewer_modes_on_ties(rng):
    from bayeskde.meanmap.stacking import stacking_weights

    grams, Y = _mode_grams(rng, M=1)
    res = stacking_weights(np.concatenate([grams, grams, grams]), Y)
    np.testing.assert_array_equal(res.weights, [1.0, 0.0, 0.0])


@pytest.mark.parametrize(("args", "match"), [
    (dict(step=0.3), "step"), (dict(step=0.0), "step"), (dict(step=2.0), "step"),
    (dict(grams=np.zeros((2, 4, 5))), "grams"), (dict(Y=np.zeros((3, 2))), "grams"),
    (dict(grams=np.zeros((4, 4))), "grams")])
def test_stacking_bad_input(args, match):
    from bayeskde.meanmap.stacking import stacking_weights

    kw = dict(grams=np.stack([np.eye(4)] * 2), Y=_one_hot_pm(np.arange(4) % 2))
    kw.update(args)
    with pytest.raises(ValueError, match=match):
        stacking_weights(kw.pop("grams"), kw.pop("Y"), **kw)


def test_mode_weighting_bad_option(italy):
    from bayeskde.meanmap.sequence_kernels import make_component

    X, y = italy[0].X[:8], italy[0].y[:8]
    with pytest.raises(ValueError, match="mode_weighting must be one of"):
        SequenceKernelClassifier(kernels=("lmmk",), hmm="bayes",
                                 mode_weighting="evidence").fit(X, y)
    with pytest.raises(ValueError, match="mode_weighting must be one of"):
        make_component("lmmk", n_states=2, hmm="bayes", derivative=1.0,
                       max_length=128, nu=None, n_features=8, n_iter=2,
                       n_restarts=1, key=jax.random.key(0), mode_weighting=None)
    comp = make_component("lmmk", n_states=2, hmm="bayes", derivative=1.0,
                          max_length=128, nu=None, n_features=8, n_iter=2,
                          n_restarts=1, key=jax.random.key(0), vb_iter=1,
                          vb_restarts=2, mode_weighting="stacking")
    seqs = [np.asarray(x, np.float64).reshape(len(x), -1) for x in X]
    with pytest.raises(ValueError, match="needs weigh"):
        comp.fit(seqs)
    with pytest.raises(ValueError, match="non-negative weights summing to one"):
        comp.fit(seqs, weigh=lambda g: np.array([0.7, 0.7]))


def test_bayes_hmm_kernel_stacks_its_modes(italy):
    # the stacked kernel is the weighted sum of the modes' cosine-normalised
    # Grams with the weights the labels chose; cross() on the training series
    # gives it back; the EM kernel ignores the weighting
    from bayeskde.meanmap.sequence_kernels import make_component
    from bayeskde.meanmap.stacking import stacking_weights

    X, y = italy[0].X[:12], italy[0].y[:12]
    seqs = [np.asarray(x, np.float64).reshape(len(x), -1) for x in X]
    Y = _one_hot_pm((y == y[0]).astype(int))
    seen = {}

    def weigh(grams):
        seen["grams"] = grams
        # a fixed interior point: every mode kept
        return np.full(len(grams), 1.0 / len(grams))

    kw = dict(n_states=(2, 3), derivative=1.0, max_length=128, nu=None,
              n_features=16, n_iter=5, n_restarts=1, key=jax.random.key(2),
              vb_iter=3, vb_restarts=1)
    comp = make_component("lmmk", hmm="bayes", mode_weighting="stacking",
                          **kw).fit(seqs, weigh=weigh)
    grams = seen["grams"]
    assert grams.shape == (2, 12, 12)
    assert_close(comp.K_, grams.mean(axis=0), rtol=1e-12, atol=1e-12)
    assert_close(comp.cross(seqs), comp.K_, rtol=LOOSE, atol=LOOSE)
    res = stacking_weights(grams, Y)
    best = make_component("lmmk", hmm="bayes", mode_weighting="stacking",
                          **kw).fit(seqs, weigh=lambda g: stacking_weights(g, Y)
                                    .weights)
    np.testing.assert_array_equal(best.all_mode_weights_, res.weights)
    assert_close(np.sum(best.mode_weights_), 1.0)
    em = [make_component("lmmk", hmm="em", mode_weighting=m, **dict(
        kw, n_states=2)).fit(seqs) for m in ("elbo", "stacking")]
    np.testing.assert_array_equal(em[0].K_, em[1].K_)
