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
    ap.add_argument("--keys", type=int, default=0,
                    help="instead: the fixed split under this many keys")
    ap.add_argument("--jax-cache", metavar="DIR", default=None)
    args = ap.parse_args(argv)
    warnings.simplefilter("ignore")
    if args.jax_cache:
        from bayeskde.cache import enable_compilation_cache

        enable_compilation_cache(args.jax_cache)
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
