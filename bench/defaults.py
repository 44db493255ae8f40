"""Defaults against tuned settings, one row per estimator, on tasks of the README.

Each estimator is run three ways on the same split: with the constant rate the
package used to default to (``gamma = 1``, string ``mode="sum"``), with today's
defaults (rates from the median heuristic, string ``mode="mean"``), and with
settings tuned by a small grid search on a validation split of the training data
(the grid and the chosen value are printed). Scores: higher is better.

- KDE and k-NN: the digit halves (top half -> bottom half), 200 train / 200 test,
  minus the RBF-induced output loss (``score``).
- KDE on strings: ``make_string_pairs``, 100 train / 100 test, accuracy of the
  predicted string's class (the class whose generator made it: the nearest
  training output's class).
- Twin GP: the S-shape, 200 training points, minus the mean absolute error on the
  500-point test grid.
- Latent mean-map kernel + SVM: two-class Gaussian-emission HMM sequences whose
  features are scaled by 10 (a scale the data could have), 40 + 40 train /
  40 + 40 test, test accuracy.
- Hyperkernel learner: pair labels of the digits (first 60 / next 60), the test
  pair accuracy of ``predict_pairs``.

Usage: ``python bench/defaults.py`` (prints a table and JSON).
"""

from __future__ import annotations

import json
import warnings

import jax
import numpy as np
from sklearn.svm import SVC

import bayeskde
from bayeskde.datasets import (
    load_digits_classification,
    load_digits_halves,
    make_hmm_classification,
    make_sshape,
    make_string_pairs,
)
from bayeskde.meanmap import LatentMeanMapKernel


def _best(fn, grid):
    scores = [fn(g) for g in grid]
    return grid[int(np.argmax(scores))]


def kde_digits(cls, **extra):
    h = load_digits_halves()
    Xtr, Ytr, Xte, Yte = h.top[:200], h.bottom[:200], h.top[200:400], h.bottom[200:400]
    out_p = {"sigma": 0.7}  # the output kernel (loss) is fixed: the README's

    def score(in_p, X, Y, Z, W):
        est = cls(**extra, input_kernel="rbf", input_kernel_params=in_p,
                  output_kernel="rbf", output_kernel_params=out_p)
        return est.fit(X, Y).score(Z, W)

    grid = [{"gamma": g} for g in (1e-3, 3e-3, 1e-2, 3e-2, 1e-1, 3e-1, 1.0)]
    tuned = _best(lambda p: score(p, Xtr[:150], Ytr[:150], Xtr[150:], Ytr[150:]),
                  grid)
    return {
        "task": "digit halves, -loss",
        "old default (gamma=1)": score({"gamma": 1.0}, Xtr, Ytr, Xte, Yte),
        "default (median)": score(None, Xtr, Ytr, Xte, Yte),
        "tuned": score(tuned, Xtr, Ytr, Xte, Yte),
        "tuned setting": tuned,
    }


def kde_strings():
    p = make_string_pairs(jax.random.key(0), n_samples=200)
    tr, te = slice(0, 100), slice(100, 200)
    out_cls = {o: c for o, c in zip(p.outputs[tr], p.classes[tr], strict=True)}

    def acc(params, X, Y, Z, C):
        est = bayeskde.KernelDependencyEstimator(
            "string", params, "string", params, ridge=1e-2).fit(X, Y)
        pred = est.predict(Z)
        return float(np.mean([out_cls.get(s, -1) == c for s, c in
                              zip(pred, C, strict=True)]))

    grid = [{"r": 3, "lam": lam, "mode": m} for lam in (0.01, 0.1, 0.5)
            for m in ("sum", "mean")]
    Xa, Ya, Ca = p.inputs[:70], p.outputs[:70], p.classes[:70]
    tuned = _best(lambda q: acc(q, Xa, Ya, p.inputs[70:100], p.classes[70:100]),
                  grid)
    X, Y = p.inputs[tr], p.outputs[tr]
    Z, C = p.inputs[te], p.classes[te]
    del Ca
    return {
        "task": "string pairs, class accuracy",
        "old default (mode=sum)": acc({"mode": "sum"}, X, Y, Z, C),
        "default (median)": acc({}, X, Y, Z, C),
        "tuned": acc(tuned, X, Y, Z, C),
        "tuned setting": tuned,
    }


def twin_gp():
    s = make_sshape(jax.random.key(0), n_train=200)

    def score(kw, X, T, Z, W):
        pred = bayeskde.TwinGP(**kw).fit(X, T).predict(Z)
        return -float(np.mean(np.abs(pred - W)))

    grid = [{"gamma_x": gx, "gamma_y": gy, "ridge": 1e-4}
            for gx in (0.2, 2.0, 20.0) for gy in (2.0, 20.0)]
    x, t = s.x_train, s.t_train
    tuned = _best(lambda kw: score(kw, x[:150], t[:150], x[150:], t[150:]), grid)
    return {
        "task": "S-shape, -MAE",
        "old default (gamma=1)": score({"gamma_x": 1.0, "gamma_y": 1.0}, x, t,
                                       s.x_test, s.t_test),
        "default (median)": score({}, x, t, s.x_test, s.t_test),
        "tuned": score(tuned, x, t, s.x_test, s.t_test),
        "tuned setting": tuned,
    }


def lmmk_svm():
    data = make_hmm_classification(jax.random.key(3), n_per_class=40, length=40,
                                   kind="gaussian")
    seqs = [10.0 * np.asarray(s) for s in data.sequences]
    y = np.asarray(data.labels)
    idx = np.random.default_rng(0).permutation(len(seqs))
    tr, te = idx[:40], idx[40:]

    def acc(gamma, a, b):
        k = LatentMeanMapKernel(3, "gaussian", key=jax.random.key(0), gamma=gamma,
                                n_iter=30, n_restarts=2)
        k.fit([seqs[i] for i in a])
        A = [seqs[i] for i in a]
        B = [seqs[i] for i in b]
        K = np.asarray(k.gram(A), np.float64)
        svm = SVC(kernel="precomputed", C=10.0).fit(K, y[a])
        return float(np.mean(svm.predict(np.asarray(k.gram(B, A))) == y[b]))

    grid = [1e-3, 1e-2, 1e-1, 1.0]
    tuned = _best(lambda g: acc(g, tr[:28], tr[28:]), grid)
    return {
        "task": "HMM sequences x10, SVM accuracy",
        "old default (gamma=1)": acc(1.0, tr, te),
        "default (median)": acc("median", tr, te),
        "tuned": acc(tuned, tr, te),
        "tuned setting": {"gamma": tuned},
    }


def hyperkernel():
    d = load_digits_classification()
    X = np.asarray(d.images if hasattr(d, "images") else d.X, np.float64)
    y = np.asarray(d.labels if hasattr(d, "labels") else d.y)
    keep = np.flatnonzero(y < 3)[:120]
    X, y = X[keep], y[keep]

    def acc(kw, a, b):
        lr = bayeskde.HyperkernelLearner(**kw).fit(X[a], y[a])
        pred = np.asarray(lr.predict_pairs(X[b]))
        truth = np.where(y[b][:, None] == y[b][None, :], 1, -1)
        return float(np.mean(pred == truth))

    tr, te = np.arange(60), np.arange(60, 120)
    grid = [{"sigma": s, "sigma_h": s} for s in (1.0, 3.0, 10.0, 30.0)]
    tuned = _best(lambda kw: acc(kw, tr[:40], tr[40:]), grid)
    return {
        "task": "digit pairs 0-2, pair accuracy",
        "old default (gamma=1)": acc({"sigma": 1.0, "sigma_h": 1.0}, tr, te),
        "default (median)": acc({}, tr, te),
        "tuned": acc(tuned, tr, te),
        "tuned setting": tuned,
    }


def main():
    rows = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        rows["KernelDependencyEstimator"] = kde_digits(
            bayeskde.KernelDependencyEstimator, ridge=1e-3)
        rows["KNNDependencyEstimator"] = kde_digits(
            bayeskde.KNNDependencyEstimator, n_neighbors=3)
        rows["KernelDependencyEstimator (strings)"] = kde_strings()
        rows["TwinGP"] = twin_gp()
        rows["LatentMeanMapKernel + SVM"] = lmmk_svm()
        rows["HyperkernelLearner"] = hyperkernel()
    print(f"{'estimator':36s} {'task':34s} {'old default':>12s} {'default':>9s} "
          f"{'tuned':>9s}  tuned setting")
    for name, r in rows.items():
        old = [v for k, v in r.items() if k.startswith("old default")][0]
        print(f"{name:36s} {r['task']:34s} {old:12.4f} {r['default (median)']:9.4f} "
              f"{r['tuned']:9.4f}  {r['tuned setting']}")
    print(json.dumps({"dtype": str(jax.numpy.zeros(()).dtype), "rows": rows},
                     default=str))


if __name__ == "__main__":
    main()
