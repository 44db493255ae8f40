"""Is a miss on the archive's fixed split the classifier or the split?

For one UCR set (``--dataset``), the training and test splits are pooled and
split again at random ``--resamples`` times, stratified, with the fixed split's
sizes (the protocol behind MiniRocket's published accuracies: Dempster, Schmidt
and Webb 2021, 30 resamples; Bagnall et al. 2017). On each resample, and on the
fixed split (resample 0), every method of ``--methods`` is fitted on the
training part and scored on the test part: ``ours``
(``SequenceKernelClassifier()``), ``minirocket`` (aeon, ``random_state`` the
resample), ``dtw`` (aeon 1-NN DTW, full window; it has nothing random). The
test labels serve only to score; nothing is chosen here.

The question it answers: whether the fixed split's gap between ours and a peer
is what the two methods do on that data set (the gap repeats on resamples)
or a property of that one split (a shift between its training and test series
that no choice made from the training split can see).

``--keys K`` instead fits ours and MiniRocket on the fixed split under keys
``0..K-1`` (ours' ``key``, MiniRocket's ``random_state``): how far a fixed-split
accuracy moves with the method's own random draws.

``--shift`` instead measures how far the fixed split's test series differ
from its training series, against resamples: the cross-validated AUC of a
classifier that separates the two parts (no class labels).

Run (bench environment, one set per process):
``python bench/ucr_resamples.py --dataset Beef --resamples 10``. Prints one
JSON line: per method, the accuracy on each split, their mean and standard
error, and the mean paired difference of ``ours`` against each peer.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import warnings
from pathlib import Path

import numpy as np
from sklearn.model_selection import train_test_split

sys.path.insert(0, str(Path(__file__).resolve().parent))

from ucr_archive import _aeon, load  # noqa: E402


def _fit_predict(method, Xtr, ytr, Xte, seed, key=0):
    if method == "ours":
        import jax

        from bayeskde import SequenceKernelClassifier

        est, aeon = SequenceKernelClassifier(key=jax.random.key(key)), False
    elif method == "minirocket":
        from aeon.classification.convolution_based import MiniRocketClassifier

        est, aeon = MiniRocketClassifier(random_state=seed + key), True
    else:
        from aeon.classification.distance_based import KNeighborsTimeSeriesClassifier

        est, aeon = KNeighborsTimeSeriesClassifier(distance="dtw", n_neighbors=1), True
    T = max(len(x) for x in Xtr + Xte)
    a, b = (_aeon(Xtr, T), _aeon(Xte, T)) if aeon else (Xtr, Xte)
    est.fit(a, ytr)
    out = {"pred": np.asarray(est.predict(b))}
    if method == "ours":
        out["procedure"] = est.procedure_
        out["selected"] = [s["family"] + "/" + str(s.get("representation", ""))
                           for s in est.selected_]
    return out


def fixed_split_keys(name, methods, n_keys):
    """Each randomised method on the fixed split under keys 0..n_keys-1 (ours'
    ``key``, MiniRocket's ``random_state``): how far its accuracy there moves
    with its own random draws."""
    Xtr, ytr = load(name, "train")
    Xte, yte = load(name, "test")
    out = {}
    for m in methods:
        if m == "dtw":
            continue
        acc = [float(np.mean(_fit_predict(m, Xtr, ytr, Xte, 0, k)["pred"] == yte))
               for k in range(n_keys)]
        print(f"{name} fixed split {m} keys {acc}", file=sys.stderr, flush=True)
        out[m] = {"keys": acc, "mean": float(np.mean(acc)),
                  "se": float(np.std(acc, ddof=1) / np.sqrt(len(acc)))
                  if len(acc) > 1 else None}
    return out


def split_shift(name, n_resamples, n_features=2000):
    """How distinguishable a split's test series are from its training series:
    the cross-validated AUC of a classifier told to separate them (a classifier
    two-sample test, Lopez-Paz and Oquab 2017), on the fixed split and on
    ``n_resamples`` stratified resamples of the same sizes. The features are the
    window mean embedding of the series (``bayeskde.kernels.windows``), its
    bias levels drawn from all series pooled; no class label is used. An AUC
    near 0.5 means the two parts look alike; well above it on the fixed split
    and not on the resamples means the fixed split's test series differ."""
    import jax
    from sklearn.linear_model import LogisticRegression
    from sklearn.metrics import roc_auc_score
    from sklearn.model_selection import StratifiedKFold, cross_val_predict
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    from bayeskde.kernels.sequence import pad_series
    from bayeskde.kernels.windows import fit_window_map, window_mean_embedding

    Xtr, ytr = load(name, "train")
    Xte, yte = load(name, "test")
    X, y = Xtr + Xte, np.concatenate([ytr, yte])
    P, lengths = pad_series(X)
    wmap = fit_window_map(jax.random.key(0), P, lengths, n_features=n_features)
    F = np.asarray(window_mean_embedding(P, lengths, wmap), np.float64)
    n_train, aucs = len(Xtr), []
    for r in range(n_resamples + 1):
        if r == 0:
            tr = np.arange(n_train)
        else:
            tr, _ = train_test_split(np.arange(len(X)), train_size=n_train,
                                     stratify=y, random_state=r)
        part = np.zeros(len(X), int)
        part[tr] = 1
        clf = make_pipeline(StandardScaler(), LogisticRegression(C=0.01,
                                                                 max_iter=2000))
        cv = StratifiedKFold(5, shuffle=True, random_state=r)
        score = cross_val_predict(clf, F, part, cv=cv, method="decision_function")
        aucs.append(float(roc_auc_score(part, score)))
        print(f"{name} split {r} train-vs-test AUC {aucs[-1]:.3f}", file=sys.stderr,
              flush=True)
    return {"fixed_auc": aucs[0], "resample_aucs": aucs[1:],
            "resample_mean_auc": float(np.mean(aucs[1:])) if n_resamples else None}


def resample(name, methods, n_resamples):
    Xtr, ytr = load(name, "train")
    Xte, yte = load(name, "test")
    X, y = Xtr + Xte, np.concatenate([ytr, yte])
    n_train = len(Xtr)
    acc = {m: [] for m in methods}
    choices = []
    for r in range(n_resamples + 1):
        if r == 0:  # the archive's fixed split
            tr, te = np.arange(n_train), np.arange(n_train, len(X))
        else:
            tr, te = train_test_split(np.arange(len(X)), train_size=n_train,
                                      stratify=y, random_state=r)
        for m in methods:
            t0 = time.perf_counter()
            out = _fit_predict(m, [X[i] for i in tr], y[tr], [X[i] for i in te], r)
            acc[m].append(float(np.mean(out["pred"] == y[te])))
            if m == "ours":
                choices.append(out["procedure"] + ": " + " + ".join(out["selected"]))
            print(f"{name} split {r} {m} {acc[m][-1]:.3f} "
                  f"({time.perf_counter() - t0:.1f} s)", file=sys.stderr, flush=True)
    res = {m: {"fixed": a[0], "resamples": a[1:],
               "mean": float(np.mean(a[1:])),
               "se": float(np.std(a[1:], ddof=1) / np.sqrt(len(a) - 1))
               if len(a) > 2 else None} for m, a in acc.items()}
    if "ours" in methods:
        for m in methods:
            if m != "ours":
                d = np.array(acc["ours"][1:]) - np.array(acc[m][1:])
                res["ours"][f"minus_{m}"] = {
                    "fixed": acc["ours"][0] - acc[m][0], "mean": float(d.mean()),
                    "se": float(d.std(ddof=1) / np.sqrt(len(d))) if len(d) > 1
                    else None}
        res["ours"]["choices"] = choices
    return res


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dataset", required=True)
    ap.add_argument("--resamples", type=int, default=10)
    ap.add_argument("--methods", nargs="+", default=["ours", "minirocket", "dtw"],
                    choices=["ours", "minirocket", "dtw"])
    ap.add_argument("--shift", action="store_true",
                    help="instead: the train-vs-test classifier AUC of the fixed "
                         "split and of the resamples (no class labels)")
    ap.add_argument("--keys", type=int, default=0,
                    help="instead: the fixed split under this many keys")
    ap.add_argument("--jax-cache", metavar="DIR", default=None)
    args = ap.parse_args(argv)
    warnings.simplefilter("ignore")
    if args.jax_cache:
        from bayeskde.cache import enable_compilation_cache

        enable_compilation_cache(args.jax_cache)
    if args.shift:
        print(json.dumps({"bench": "ucr_split_shift", "dataset": args.dataset,
                          "resamples": args.resamples,
                          "results": split_shift(args.dataset, args.resamples)}))
        return
    if args.keys:
        print(json.dumps({"bench": "ucr_fixed_split_keys", "dataset": args.dataset,
                          "keys": args.keys, "results": fixed_split_keys(
                              args.dataset, args.methods, args.keys)}))
        return
    print(json.dumps({"bench": "ucr_resamples", "dataset": args.dataset,
                      "resamples": args.resamples,
                      "results": resample(args.dataset, args.methods,
                                          args.resamples)}))


if __name__ == "__main__":
    main()
