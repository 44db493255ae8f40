"""The generative inverse model at scale: exact against low-rank evidence.

Workload (issue 26): ``fit_inverse_gp`` + ``inverse_gp_predictive`` on the
S-shape (``make_sshape``, d_y = 1, so HSGP features) with the model's default
prior and the fit's default method (``--method`` to change it), on m training
points. Per size and approximation, in a fresh subprocess (so that the peak
resident memory, ``ru_maxrss``, is that run's alone):

- ``fit_s``: preparation (spectra, or the low-rank statistics with the rank
  chosen from the data) plus sampling;
- ``predict_s``: the predictive of 1,000 noise-free test inputs x = f(t) on
  the even grid t = (i + 0.5) / 1000, conditioned on x* = f(t*) exactly (the
  paper's test grid), scored by ``top_mode_error`` (mean |mode 1 - t|) and
  ``best_of_2`` (mean min over the top 2 modes);
- ``crps`` and ``coverage90``: the grid predictive of 1,000 fresh noisy
  held-out points (``make_sshape`` with another key), scored exactly on the
  grid (``crps_discrete``, ``coverage_discrete``); its time is ``score_s``;
- ``peak_rss_gb``, the rank chosen, the kept spectrum and the rank's error
  indicator.

Where both approximations run (m <= ``--exact-max``) an agreement line gives
the total variation distance between the two posteriors over (rate, degree)
and the low-rank / exact ratios of CRPS and top-mode error. One JSON line per
run. The machine may be shared: each line carries the 1-minute load average
(``load1``), and timings on a loaded machine are upper bounds.

Run: ``python bench/scale_bayes.py [--sizes 500 2000 10000 100000]
[--exact-max 2000] [--float32 | --both-precisions] [--method quadrature]``.
The data are drawn in float64 in every run (JAX's generator draws other
numbers in float32), so ``--both-precisions`` compares float32 with float64
on the same points.

Measured 2026-12-03 (``--sizes 500 1000 2000 10000 100000 --method quadrature``,
float64; 2 CPU cores shared with three other sessions, load average 4-7, so
the seconds are upper bounds; HSGP rank 128 chosen at every size, indicator 0):

======  =====================  ==========  ========  ======  ======  ========
m       fit + predict s        peak GB     top mode  best 2  CRPS    cover 90
        (exact / low rank)     (low rank)
======  =====================  ==========  ========  ======  ======  ========
500     258.0 / 67.4           0.98        0.0890    0.0485  0.0962  0.908
1000    573.7 / 56.7           0.99        0.0870    0.0473  0.0961  0.913
2000    1973.3 / 25.0          0.97        0.0833    0.0450  0.0961  0.921
1e4     - / 32.6               0.97        0.0800    0.0422  0.0961  0.910
1e5     - / 47.8               1.15        0.0956    0.0414  0.0961  0.911
======  =====================  ==========  ========  ======  ======  ========

Exact against low rank: pair-posterior TV 1e-5 at m = 500, 1000 and 2000, CRPS
ratio 1.000 and top-mode error ratio 1.0007, 0.9999, 1.000. Float32 at m = 1e5:
47.8 -> 65.9 s, CRPS 0.0982, coverage 0.890, best-of-2 0.0392, pair posterior
TV 0.071 from the float64 run (float32 resolves the absolute log evidence,
|E| ~ 1e5, to about 0.01-0.06 nats).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time

import numpy as np


def run_one(args):
    """One fit + predict; prints one JSON line and saves the pair posterior."""
    import jax

    from bayeskde.datasets import make_sshape
    from bayeskde.learn import fit_inverse_gp, inverse_gp_predictive
    from bayeskde.metrics import best_of_k_error, coverage_discrete, crps_discrete

    # The draws in float64 whatever the working precision: JAX's generator
    # gives other numbers in float32, and a float32 run must see the same data
    # as the float64 run it is compared with.
    with jax.enable_x64(True):
        d = jax.tree.map(np.asarray, make_sshape(jax.random.key(0), args.m))
        held = jax.tree.map(np.asarray, make_sshape(jax.random.key(1000),
                                                    args.n_test))
    t = (np.arange(args.n_test) + 0.5) / args.n_test
    xt = t + 0.3 * np.sin(2 * np.pi * t)
    kw = dict(approx=args.approx, progress_bar=False)
    if args.method:
        kw["method"] = args.method
    t0 = time.perf_counter()
    fit = fit_inverse_gp(jax.random.key(1), d.x_train, d.t_train, **kw)
    t_fit = time.perf_counter() - t0
    t0 = time.perf_counter()
    pred = inverse_gp_predictive(fit, xt, k=3, noisy_inputs=False)
    t_pred = time.perf_counter() - t0
    top = np.abs(pred.modes[:, 0, 0] - t)
    best2 = np.asarray(best_of_k_error(pred.modes[:, :2, 0], t))
    t0 = time.perf_counter()
    ph = inverse_gp_predictive(fit, held.x_train, k=1, refine=False)
    t_score = time.perf_counter() - t0
    p = np.exp(ph.log_probs)
    row = {"task": "sshape", "m": args.m, "approx": fit.approx,
           "method": args.method or "default", "dtype": str(fit.data.X.dtype),
           "fit_s": round(t_fit, 1), "predict_s": round(t_pred, 1),
           "fit_predict_s": round(t_fit + t_pred, 1), "score_s": round(t_score, 1),
           "peak_rss_gb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
                                / 2**20, 3),
           "top_mode_error": round(float(top.mean()), 5),
           "best_of_2": round(float(best2.mean()), 5),
           "crps": round(float(np.mean(crps_discrete(ph.support[:, 0], p,
                                                     held.t_train))), 5),
           "coverage90": round(float(np.mean(coverage_discrete(
               ph.support[:, 0], p, held.t_train, 0.9))), 4)}
    if fit.rank is not None:
        row.update(features=fit.rank.features, rank=fit.rank.rank,
                   ranks_tried=list(fit.rank.tried), n_kept=fit.rank.n_kept,
                   rank_error_bound=round(fit.rank.error_bound[-1], 4))
    row["load1"] = round(os.getloadavg()[0], 2)
    np.savez(args.save, pair_posterior=fit.pair_posterior, top=top.mean(),
             crps=row["crps"], modes=np.asarray(pred.modes[..., 0]),
             masses=np.asarray(pred.mode_masses))
    print(json.dumps(row), flush=True)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="+",
                    default=[500, 2000, 10000, 100000])
    ap.add_argument("--exact-max", type=int, default=2000)
    ap.add_argument("--n-test", type=int, default=1000)
    ap.add_argument("--method", default=None, choices=("nuts", "quadrature"))
    ap.add_argument("--float32", action="store_true")
    ap.add_argument("--both-precisions", action="store_true",
                    help="run the low-rank fits in float64 and float32 too and "
                         "print their agreement")
    ap.add_argument("--timeout", type=float, default=3600.0,
                    help="seconds per run before it is reported as a timeout")
    # internal: one run in this process
    ap.add_argument("--one", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--m", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--approx", default="auto", help=argparse.SUPPRESS)
    ap.add_argument("--save", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.one:
        return run_one(args)
    envs = {p: {**os.environ, "JAX_ENABLE_X64": "1" if p == "float64" else "0"}
            for p in ("float64", "float32")}
    env = envs["float32" if args.float32 else "float64"]
    base = [sys.executable, os.path.abspath(__file__), "--one", "--n-test",
            str(args.n_test)] + (["--method", args.method] if args.method else [])
    tmp = tempfile.mkdtemp(prefix="scale_bayes_")
    for m in args.sizes:
        rows = {}
        runs = [(a, env) for a in (("exact", "lowrank") if m <= args.exact_max
                                   else ("lowrank",))]
        if args.both_precisions:
            runs.append(("lowrank32", envs["float32"]))
        for approx, env_run in runs:
            save = os.path.join(tmp, f"{m}_{approx}.npz")
            try:
                out = subprocess.run(base + ["--m", str(m), "--approx",
                                             approx.removesuffix("32"),
                                             "--save", save], env=env_run,
                                     capture_output=True, text=True,
                                     timeout=args.timeout)
            except subprocess.TimeoutExpired:
                print(json.dumps({"task": "sshape", "m": m, "approx": approx,
                                  "error": f"timeout after {args.timeout} s"}),
                      flush=True)
                continue
            line = [ln for ln in out.stdout.splitlines() if ln.startswith("{")]
            if out.returncode or not line:
                print(json.dumps({"task": "sshape", "m": m, "approx": approx,
                                  "error": out.stderr[-1500:]}), flush=True)
                continue
            print(line[-1], flush=True)
            rows[approx] = (json.loads(line[-1]), np.load(save))
        if "lowrank" in rows and "lowrank32" in rows:
            (r64, n64), (r32, n32) = rows["lowrank"], rows["lowrank32"]
            # the same modes in another order where their masses tie: the
            # top mode's error is then a coin flip between the branches
            flip = np.abs(n64["modes"][:, 0] - n32["modes"][:, 0]) > 0.05
            gap = np.abs(n64["masses"][:, 0] - n64["masses"][:, 1])
            print(json.dumps({
                "task": "sshape", "m": m, "precision_agreement": True,
                "sorted_modes_diff_p50": round(float(np.median(np.max(np.abs(
                    np.sort(n64["modes"], 1) - np.sort(n32["modes"], 1)),
                    axis=1))), 6),
                "top_mode_flips": int(flip.sum()),
                "flips_max_mass_gap": round(float(gap[flip].max()), 4)
                if flip.any() else 0.0,
                "pair_posterior_tv": round(float(0.5 * np.abs(
                    n64["pair_posterior"] - n32["pair_posterior"]).sum()), 5),
                "crps_ratio": round(r32["crps"] / r64["crps"], 4),
                "top_mode_error_ratio": round(r32["top_mode_error"]
                                              / r64["top_mode_error"], 4),
            }), flush=True)
        if "exact" in rows and "lowrank" in rows:
            (re_, ne), (rl, nl) = rows["exact"], rows["lowrank"]
            print(json.dumps({
                "task": "sshape", "m": m, "agreement": True,
                "pair_posterior_tv": round(float(0.5 * np.abs(
                    ne["pair_posterior"] - nl["pair_posterior"]).sum()), 5),
                "crps_ratio": round(rl["crps"] / re_["crps"], 4),
                "top_mode_error_ratio": round(rl["top_mode_error"]
                                              / re_["top_mode_error"], 4),
                "speedup_fit_predict": round(re_["fit_predict_s"]
                                             / rl["fit_predict_s"], 2),
            }), flush=True)


if __name__ == "__main__":
    main()
