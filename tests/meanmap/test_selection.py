"""DTW against dynamic programming, the nested choice against brute-force refits,
and the classifier's DTW fallback and training-length PAA (issue 43)."""

import numpy as np
import pytest

from bayeskde import SequenceKernelClassifier
from bayeskde.meanmap.dtw import dtw_distances
from bayeskde.meanmap.selection import (
    nearest_neighbour_loo_accuracy,
    nested_selection_accuracy,
    outer_folds,
    select_kernel,
)
from bayeskde.meanmap.stacking import RIDGE_ALPHAS, RIDGE_INTERCEPT
from tests.helpers import LOOSE, RTOL, assert_close


def _dtw_loop(x, y, radius=None):
    """The textbook O(T1 T2) recursion (Sakoe and Chiba 1978)."""
    n, m = len(x), len(y)
    r = max(n, m) if radius is None else max(radius, abs(n - m))
    D = np.full((n + 1, m + 1), np.inf)
    D[0, 0] = 0.0
    for i in range(1, n + 1):
        for j in range(1, m + 1):
            if abs(i - j) <= r:
                cost = np.sum((x[i - 1] - y[j - 1]) ** 2)
                D[i, j] = cost + min(D[i - 1, j], D[i, j - 1], D[i - 1, j - 1])
    return D[n, m]


def _pad(seqs):
    T = max(len(s) for s in seqs)
    out = np.zeros((len(seqs), T, seqs[0].shape[1]))
    for i, s in enumerate(seqs):
        out[i, :len(s)] = s
    return out, np.array([len(s) for s in seqs])


def test_dtw_equals_the_recursion(rng):
    A = [rng.normal(size=(int(rng.integers(3, 12)), 2)) for _ in range(5)]
    B = [rng.normal(size=(int(rng.integers(3, 12)), 2)) for _ in range(4)]
    XA, la = _pad(A)
    XB, lb = _pad(B)
    for window in (None, 0.3):
        radius = None if window is None else int(np.ceil(window * 11))
        D = dtw_distances(XA, XB, lengths_a=la, lengths_b=lb, window=window,
                          block_size=7)
        ref = np.array([[_dtw_loop(a, b, radius) for b in B] for a in A])
        assert_close(D, ref, rtol=RTOL * 10, atol=RTOL * 10)
    S = dtw_distances(XA, lengths_a=la)
    ref = np.array([[_dtw_loop(a, b) for b in A] for a in A])
    assert_close(S, ref, rtol=RTOL * 10, atol=RTOL * 10)
    # a warped copy is at distance 0
    x = rng.normal(size=(6, 1))
    XX, lx = _pad([x, np.repeat(x, 2, axis=0)])
    assert dtw_distances(XX, lengths_a=lx)[0, 1] == 0.0


@pytest.mark.parametrize(("kw", "match"), [(dict(window=0.0), "window"),
                                           (dict(window=2.0), "window"),
                                           (dict(block_size=0), "block_size")])
def test_dtw_bad_input(kw, match):
    with pytest.raises(ValueError, match=match):
        dtw_distances(np.zeros((2, 3, 1)), **kw)


def _ridge_refit_choice(K, Y, tr):
    """The ridge of least LOO squared error on the rows ``tr`` by explicit refits."""
    Kt = K[np.ix_(tr, tr)] + RIDGE_INTERCEPT
    best = None
    for a in RIDGE_ALPHAS:
        err = 0.0
        for i in range(len(tr)):
            keep = np.arange(len(tr)) != i
            coef = np.linalg.solve(Kt[np.ix_(keep, keep)] + a * np.eye(len(tr) - 1),
                                   Y[tr][keep])
            err += np.mean((Kt[i, keep] @ coef - Y[tr][i]) ** 2)
        if best is None or err < best[0] - 1e-12:
            best = (err, a)
    return best[1]


def test_nested_accuracy_equals_refits(rng):
    # one candidate: the nested choice is the ridge; brute force chooses it by
    # explicit LOO refits on each outer training set, then predicts the left-out
    n = 14
    Z = rng.normal(size=(n, 3))
    y = (Z[:, 0] + 0.7 * rng.normal(size=n) > 0).astype(int)
    K = np.exp(-0.5 * np.sum((Z[:, None] - Z[None]) ** 2, -1))
    Y = -np.ones((n, 2))
    Y[np.arange(n), y] = 1.0
    folds = outer_folds(y, 0)
    assert len(folds) == n  # leave-one-out below 30 series
    acc, _ = nested_selection_accuracy([K], ["rbf"], Y, y, folds)
    hits = 0
    for tr, te in folds:
        a = _ridge_refit_choice(K, Y, tr)
        Kc = K + RIDGE_INTERCEPT
        coef = np.linalg.solve(Kc[np.ix_(tr, tr)] + a * np.eye(len(tr)), Y[tr])
        hits += int((Kc[np.ix_(te, tr)] @ coef).argmax(1)[0] == y[te][0])
    assert acc == hits / n
    # the choice on all rows keeps that ridge too
    choice = select_kernel([K], ["rbf"], Y, y)
    assert choice.results[choice.best][2] == _ridge_refit_choice(K, Y, np.arange(n))
    # 1-NN: each point's nearest other point, by brute force
    D = np.sum((Z[:, None] - Z[None]) ** 2, -1)
    ref = np.mean([y[min((j for j in range(n) if j != i), key=lambda j: D[i, j])]
                   == y[i] for i in range(n)])
    assert nearest_neighbour_loo_accuracy(D, y) == ref
    big = outer_folds(np.arange(60) % 3, 0)
    assert len(big) == 10
    assert sorted(np.concatenate([te for _, te in big]).tolist()) == list(range(60))


def _warped(rng, n):
    """Two classes told apart by the order of two bumps, warped per series."""
    X, y = [], []
    for i in range(n):
        c = i % 2
        T = int(rng.integers(30, 50))
        t = np.sort(rng.random(T))
        a, b = (0.3, 0.7) if c == 0 else (0.7, 0.3)
        x = np.exp(-((t - a) / 0.05) ** 2) - np.exp(-((t - b) / 0.05) ** 2)
        X.append(x + 0.05 * rng.normal(size=T))
        y.append(c)
    return X, np.array(y)


def test_dtw_rule_and_training_length_paa(rng):
    X, y = _warped(rng, 16)
    Xt, yt = _warped(rng, 10)
    clf = SequenceKernelClassifier(kernels=("dtw",), max_length=20).fit(X, y)
    assert clf.procedure_ == "dtw" and clf.selected_[0]["family"] == "dtw"
    # the 1-NN rule on the recursion's distances, after PAA by the training
    # set's longest length (49 frames -> 20): one series at a time or all at
    # once gives the same answer
    from bayeskde.meanmap.sequence_kernels import preprocess

    t_ref = max(len(x) for x in X)
    tr = [s[:n] for s, n in zip(*preprocess(X, 20, 0.0, t_ref), strict=True)]
    te = [s[:n] for s, n in zip(*preprocess(Xt, 20, 0.0, t_ref), strict=True)]
    D = np.array([[_dtw_loop(a, b) for b in tr] for a in te])
    np.testing.assert_array_equal(clf.predict(Xt), y[D.argmin(1)])
    one = np.concatenate([clf.decision_function([x]) for x in Xt[:4]])
    assert_close(one, clf.decision_function(Xt[:4]))
    P = clf.predict_proba(Xt)
    assert_close(P.sum(1), np.ones(len(Xt)))
    assert np.mean(clf.predict(Xt) == yt) == 1.0


def test_nested_choice_of_pool(rng):
    X, y = _warped(rng, 16)
    clf = SequenceKernelClassifier(kernels=("window", "signature", "dtw"),
                                   window_features=300, max_length=20).fit(X, y)
    s = clf.procedure_scores_
    assert set(s) == {"window", "all", "dtw"}
    # a kernel pool of the best nested accuracy (ties by the nested squared
    # error: test_dtw_fallback_needs_a_significant_difference), or the 1-NN rule
    # when it is strictly better
    best = max(s["window"], s["all"])
    if clf.procedure_ == "dtw":
        assert s["dtw"] > best
    else:
        assert s[clf.procedure_] == best
    if clf.procedure_ == "window":
        assert {c["family"] for c in clf.selected_} == {"window"}
    loo = SequenceKernelClassifier(kernels=("window", "dtw"), window_features=300,
                                   max_length=20, selection="loo").fit(X, y)
    assert loo.procedure_ == "all" and loo.procedure_scores_ == {}
    # ragged training series: the window family also reads them zero-padded
    assert {e.get("representation") for e in loo.scores_} == {
        "raw", "diff", "both", "padded"}
    with pytest.raises(ValueError, match="selection must be"):
        SequenceKernelClassifier(selection="cv").fit(X, y)
    with pytest.raises(ValueError, match="dtw_budget"):
        SequenceKernelClassifier(dtw_budget=-1.0).fit(X, y)


def _two_class_grams(rng, n=24):
    """Three RBF Grams of views of two classes, from informative to noise."""
    y = np.arange(n) % 2
    grams = []
    for scale in (0.7, 0.4, 0.0):
        Z = scale * y[:, None] + rng.normal(size=(n, 3))
        grams.append(np.exp(-0.3 * np.sum((Z[:, None] - Z[None]) ** 2, -1)))
    Y = -np.ones((n, 2))
    Y[np.arange(n), y] = 1.0
    return grams, Y, y


def test_one_standard_error_rule_counts_kernels(rng):
    # the rule by hand from each option's LOO error and standard error: the
    # fewest kernels within one standard error of the smallest error, then the
    # smallest error; a candidate that is a sum of two kernels counts two
    from bayeskde.meanmap.selection import ridge_loo_score

    grams, Y, y = _two_class_grams(rng)
    res = [ridge_loo_score(K, Y, y) for K in grams]
    err = np.array([r[0] for r in res])
    j = int(np.argmin(err))
    near = np.flatnonzero(err <= err[j] + res[j][3])
    for sizes in ([1, 1, 1], [2, 1, 1], [1, 2, 2]):
        ch = select_kernel(grams, ["a", "a", "a"], Y, y, sizes=sizes)
        ref = min(near, key=lambda i: (sizes[i], err[i]))
        assert ch.options[ch.best] == ((int(ref),), (1.0,))
    assert select_kernel(grams, ["a"] * 3, Y, y).best == select_kernel(
        grams, ["a"] * 3, Y, y, sizes=[1, 1, 1]).best


def test_dtw_fallback_needs_a_significant_difference(rng):
    # the 1-NN rule replaces the kernel pool only when the one-sided exact
    # McNemar test finds it more accurate at the 5% level: the binomial tail
    # of the discordant series computed here by enumeration
    from math import comb

    from bayeskde.meanmap.selection import (
        DTW_FALLBACK_LEVEL,
        choose_procedure,
        nested_selection_outcomes,
    )

    grams, Y, y = _two_class_grams(rng)
    fams = ["window", "window", "gak"]
    n = len(y)
    folds = outer_folds(y, 3)
    out = {name: nested_selection_outcomes([grams[i] for i in idx],
                                           [fams[i] for i in idx], Y, y, folds)
           for name, idx in (("window", [0, 1]), ("all", [0, 1, 2]))}
    # the better pool: accuracy, then squared error, then the window pool
    pool = max(("window", "all"), key=lambda p: (out[p][0].mean(),
                                                 -out[p][1].mean(), p == "window"))
    chosen = set()
    for n_right in range(n - 8, n + 1):
        # each series' nearest other series: of its class for the first n_right
        D = np.full((n, n), 10.0)
        for i in range(n):
            j = next(k for k in range(n) if k != i and (y[k] == y[i]) == (i < n_right))
            D[i, j] = 1.0
        D = np.minimum(D, D.T)
        np.fill_diagonal(D, 0.0)
        hit = np.array([y[min((k for k in range(n) if k != i), key=lambda k: D[i, k])]
                        == y[i] for i in range(n)])
        _, proc, scores = choose_procedure(grams, fams, Y, y, 3, D)
        assert scores["dtw"] == np.mean(hit)
        kern = out[pool][0] > 0.5
        m, k = int(np.sum(hit & ~kern)), int(np.sum(~hit & kern))
        p = sum(comb(m + k, j) for j in range(m, m + k + 1)) / 2.0 ** (m + k)
        win = m > k and p < DTW_FALLBACK_LEVEL
        assert proc == ("dtw" if win else pool), (n_right, m, k, proc)
        chosen.add(proc)
    assert chosen == {"dtw", pool}  # both sides of the rule were exercised


def test_large_sets_choose_on_a_subset(rng):
    # past max_select series the choice (kernel, ridge) is made on a stratified
    # subset and the kept kernel's ridge is solved on every series
    from bayeskde.meanmap.selection import ridge_loo_score

    X, y = _warped(rng, 40)
    y = np.where(np.arange(40) < 30, y, 2)  # a smaller third class
    Xt, _ = _warped(rng, 6)
    kw = dict(kernels=("window",), window_features=200, max_length=20)
    clf = SequenceKernelClassifier(max_select=16, **kw).fit(X, y)
    rows = clf.selection_rows_
    counts = np.bincount(y[rows])
    np.testing.assert_array_equal(counts, np.round(16 * np.bincount(y) / 40))
    K = sum(w * c.K_ for c, w in zip(clf.components_, clf.weights_, strict=True))
    Y = -np.ones((40, 3))
    Y[np.arange(40), y] = 1.0
    err, acc, alpha, _ = ridge_loo_score(K[np.ix_(rows, rows)], Y[rows], y[rows])
    assert (clf.alpha_, clf.loo_accuracy_) == (alpha, acc)
    assert_close(clf.loo_error_, err, rtol=1e-12, atol=1e-12)
    coef = np.linalg.solve(K + RIDGE_INTERCEPT + alpha * np.eye(40), Y)
    assert_close(clf.dual_coef_, coef, rtol=1e-8, atol=1e-8)
    Kt = sum(w * c.cross([x[:, None] for x in Xt])
             for c, w in zip(clf.components_, clf.weights_, strict=True))
    assert_close(clf.decision_function(Xt), (Kt + RIDGE_INTERCEPT) @ coef,
                 rtol=1e-8, atol=1e-8)
    whole = SequenceKernelClassifier(max_select=40, **kw).fit(X, y)
    assert whole.selection_rows_ is None
    with pytest.raises(ValueError, match="max_select"):
        SequenceKernelClassifier(max_select=1).fit(X, y)


def test_alignment_dtw_and_hmm_features_compile_once_across_sizes(rng):
    # pairs gathered outside the compiled programs, padded to a power of two
    # from 64 (DTW) or a multiple of 64 (alignment), lengths bucketed: data sets
    # of other sizes and nearby lengths reuse them
    import jax

    from bayeskde.kernels.sequence import global_alignment_gram
    from bayeskde.meanmap.sequence_kernels import make_component
    from tests.helpers import count_compilations

    def batch(n, T):
        lengths = rng.integers(T - 5, T + 1, n)
        return rng.normal(size=(n, T, 1)), lengths

    (A, la), (B, lb), (C, lc) = batch(6, 30), batch(5, 27), batch(7, 29)
    (E, le), (F, lf) = batch(22, 30), batch(18, 29)
    dtw_distances(A, lengths_a=la)                     # 15 pairs: a block of 64
    dtw_distances(E, lengths_a=le)                     # 231 pairs: a block of 256
    dtw_distances(A[:4], B, lengths_a=la[:4], lengths_b=lb)   # 20 pairs
    global_alignment_gram(A, sigma=1.0, lengths_a=la)  # 21 pairs
    seqs = [x[:n] for x, n in zip(A, la, strict=True)] + [
        x[:n] for x, n in zip(C, lc, strict=True)]
    comp = make_component("lmmk", n_states=2, hmm="em", derivative=1.0,
                          max_length=None, nu=None, n_features=8, n_iter=3,
                          n_restarts=1, key=jax.random.key(0)).fit(seqs[:12])
    comp.cross(seqs[:5])
    with count_compilations() as c:
        dtw_distances(B, lengths_a=lb)                 # 10 pairs
        dtw_distances(F, lengths_a=lf)                 # 153 pairs: 256
        dtw_distances(C[:4], A, lengths_a=lc[:4], lengths_b=la)  # 24 pairs
        global_alignment_gram(C, sigma=1.0, lengths_a=lc)  # 28 pairs
        K = comp.cross(seqs[5:12])                     # 7 series: a tile of 8
    assert c.count == 0
    assert_close(K, comp.K_[5:12], rtol=LOOSE, atol=LOOSE)
