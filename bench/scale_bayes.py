"""The generative inverse model at scale: exact against low-rank evidence.

Workload (issue 26): ``fit_inverse_gp`` + ``inverse_gp_predictive`` on the
S-shape (``make_sshape``, d_y = 1, HSGP features) or the planar arm
(``make_arm_pose``, d_y = 3, Nystroem features), with the model's default
prior, on m training points, predicting ``--n-test`` test inputs (S-shape: the
noise-free x of t on an even grid of [0, 1]; arm: noisy test markers).

Per size and approximation, in a fresh subprocess (peak resident memory,
``ru_maxrss``, is that run's alone): fit seconds (preparation and rank choice
included), predict seconds, peak memory, top-mode error (|mode 1 - y|),
best-of-2 (min over the top 2 modes), CRPS and 90% coverage of the grid
predictive (S-shape; the arm reports the importance predictive's draws'
CRPS per angle), the rank chosen and its error bound. Where both approximations
run (m <= ``--exact-max``) an agreement line gives the total variation distance
between the two posteriors over (rate, degree) and the relative CRPS and
top-mode error differences. ``--method`` (default ``nuts``, the fit's default;
``quadrature`` for a deterministic comparison; ``svi``) picks the inference;
``--svi-agreement`` adds the SVI-vs-NUTS pair-posterior TV at each size.

One JSON line per run; the machine is shared: timings are noisy (``uptime`` is
printed with each line).

Run: ``python bench/scale_bayes.py [--task sshape] [--sizes 2000 10000 100000]
[--float32]``.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time

import numpy as np


def _data(task, m, n_test):
    import jax

    from bayeskde.datasets import make_arm_pose, make_sshape

    if task == "sshape":
        d = make_sshape(jax.random.key(0), m)
        t = (np.arange(n_test) + 0.5) / n_test
        return d.x_train, d.t_train, t + 0.3 * np.sin(2 * np.pi * t), t
    d = make_arm_pose(jax.random.key(0), m, n_test)
    return d.x_train, d.theta_train, d.x_test, d.theta_test


def run_one(args):
    """One fit + predict; prints one JSON line and saves the pair posterior."""
    import jax

    from bayeskde.learn import fit_inverse_gp, inverse_gp_predictive, inverse_gp_sample
    from bayeskde.metrics import best_of_k_error, coverage_discrete, crps_discrete
    from bayeskde.metrics import crps_samples

    X, Y, Xt, Yt = _data(args.task, args.m, args.n_test)
    kw = dict(method=args.method, approx=args.approx, progress_bar=False)
    if args.method == "nuts":
        kw.update(num_warmup=args.num_warmup, num_samples=args.num_samples,
                  num_chains=args.num_chains)
    t0 = time.perf_counter()
    fit = fit_inverse_gp(jax.random.key(1), X, Y, **kw)
    t_fit = time.perf_counter() - t0
    t0 = time.perf_counter()
    pred = inverse_gp_predictive(fit, Xt, k=3, noisy_inputs=args.task != "sshape")
    t_pred = time.perf_counter() - t0
    Yt2 = Yt[:, None] if Yt.ndim == 1 else Yt
    top = np.linalg.norm(pred.modes[:, 0] - Yt2, axis=1)
    best2 = np.asarray(best_of_k_error(pred.modes[:, :2], Yt2))
    row = {"task": args.task, "m": args.m, "approx": fit.approx,
           "method": args.method, "dtype": str(fit.data.X.dtype),
           "fit_s": round(t_fit, 2), "predict_s": round(t_pred, 2),
           "fit_predict_s": round(t_fit + t_pred, 2),
           "peak_rss_gb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
                                / 2**20, 3),
           "top_mode_error": float(top.mean()), "best_of_2": float(best2.mean())}
    if pred.method == "grid":
        p = np.exp(pred.log_probs)
        sup = pred.support[:, 0]
        row["crps"] = float(np.mean(crps_discrete(sup, p, Yt)))
        row["coverage90"] = float(np.mean(coverage_discrete(sup, p, Yt, 0.9)))
    else:
        s = inverse_gp_sample(jax.random.key(2), fit, Xt, 200, predictive=pred)
        row["crps"] = float(np.mean([np.mean(crps_samples(s[..., j], Yt[:, j]))
                                     for j in range(Yt.shape[1])]))
    if fit.rank is not None:
        row.update(features=fit.rank.features, rank=fit.rank.rank,
                   ranks_tried=list(fit.rank.tried),
                   rank_error_bound=fit.rank.error_bound[-1])
    if args.svi_agreement and args.method == "nuts":
        svi = fit_inverse_gp(jax.random.key(1), X, Y, method="svi",
                             approx=fit.approx, rank=None if fit.rank is None
                             else fit.rank.rank, progress_bar=False)
        row["svi_vs_nuts_tv"] = float(0.5 * np.abs(svi.pair_posterior
                                                   - fit.pair_posterior).sum())
        row["svi_fit_s"] = round(svi.runtime_s, 2)
    row["uptime"] = os.getloadavg()[0]
    if args.save:
        np.savez(args.save, pair_posterior=fit.pair_posterior,
                 top=top, crps=row.get("crps", np.nan))
    print(json.dumps(row), flush=True)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--task", default="sshape", choices=("sshape", "arm"))
    ap.add_argument("--sizes", type=int, nargs="+", default=[2000, 10000, 100000])
    ap.add_argument("--exact-max", type=int, default=2000)
    ap.add_argument("--n-test", type=int, default=1000)
    ap.add_argument("--method", default="nuts", choices=("nuts", "quadrature", "svi"))
    ap.add_argument("--num-warmup", type=int, default=500)
    ap.add_argument("--num-samples", type=int, default=500)
    ap.add_argument("--num-chains", type=int, default=4)
    ap.add_argument("--svi-agreement", action="store_true")
    ap.add_argument("--float32", action="store_true")
    # internal: one run in this process
    ap.add_argument("--one", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--m", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--approx", default="auto", help=argparse.SUPPRESS)
    ap.add_argument("--save", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.one:
        return run_one(args)
    env = {**os.environ, "JAX_ENABLE_X64": "0" if args.float32 else "1"}
    base = [sys.executable, __file__, "--one", "--task", args.task, "--n-test",
            str(args.n_test), "--method", args.method, "--num-warmup",
            str(args.num_warmup), "--num-samples", str(args.num_samples),
            "--num-chains", str(args.num_chains)] + (
        ["--svi-agreement"] if args.svi_agreement else [])
    tmp = os.environ.get("TMPDIR", "/tmp")
    for m in args.sizes:
        rows = {}
        for approx in (("exact", "lowrank") if m <= args.exact_max else ("lowrank",)):
            save = os.path.join(tmp, f"scale_bayes_{os.getpid()}_{m}_{approx}.npz")
            out = subprocess.run(base + ["--m", str(m), "--approx", approx,
                                         "--save", save],
                                 env=env, capture_output=True, text=True)
            line = [ln for ln in out.stdout.splitlines() if ln.startswith("{")]
            if out.returncode or not line:
                print(json.dumps({"task": args.task, "m": m, "approx": approx,
                                  "error": out.stderr[-1500:]}), flush=True)
                continue
            print(line[-1], flush=True)
            rows[approx] = (json.loads(line[-1]), np.load(save))
        if len(rows) == 2:
            (re, ne), (rl, nl) = rows["exact"], rows["lowrank"]
            print(json.dumps({
                "task": args.task, "m": m, "agreement": True,
                "pair_posterior_tv": float(0.5 * np.abs(
                    ne["pair_posterior"] - nl["pair_posterior"]).sum()),
                "crps_rel_diff": (rl["crps"] - re["crps"]) / re["crps"],
                "top_mode_error_rel_diff": (rl["top_mode_error"] - re[
                    "top_mode_error"]) / re["top_mode_error"],
                "speedup_fit_predict": re["fit_predict_s"] / rl["fit_predict_s"],
            }), flush=True)


if __name__ == "__main__":
    main()
