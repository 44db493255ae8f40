"""Recipe: Bayesian learning of kernel transform degrees and bandwidths (NUTS).

The kernel hyperparameter model (:mod:`bayeskde.models.kernel_hyper`; the future
work of Ghosh et al., section 7) on two tasks, each reported beside its
deterministic twin:

* ``--task sshape``: the S-shape inverse problem (Bo and Sminchisescu 2010,
  section 6.1). Baselines with the published settings and the published MAEs
  (TGP-KL 0.116, GP 0.127, weighted 1-NN 0.174); the MAP kernel and the model
  average through Twin GPs; the Twin GP predictive distribution
  (:mod:`bayeskde.models.tgp`) with both branches, averaged over ``--pred-draws``
  kernel posterior draws. Same code as ``bayeskde demo``, with more draws.
* ``--task arm``: the planar three-link arm (:func:`bayeskde.datasets.make_arm_pose`):
  three joint angles from four noisy marker coordinates, a two-valued inverse.
  Baseline: TGP-KL with 4 x the median-heuristic rates and ridge 1e-3 (as
  ``models/pose_tgp.py``); errors by angle, by the nearer exact inverse and by
  how well the forward map of the prediction explains the markers.

Writes InferenceData (``kernel_hyper.nc``), PNGs and ``summary.json`` to ``--out``.
Run ``python models/bayesian_kernel_learning.py --task arm`` (float64).
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np


def _args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--task", choices=("sshape", "arm"), default="sshape")
    p.add_argument("--num-samples", type=int, default=None,
                   help="NUTS draws per chain (the same number of warmup steps)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--pred-draws", type=int, default=4,
                   help="sshape: kernel posterior draws the Twin GP predictive is "
                        "averaged over (1: the MAP kernel only, as the demo)")
    p.add_argument("--out", type=Path, default=None,
                   help="output folder (default results/bayesian_kernel_<task>)")
    p.add_argument("--quick", action="store_true", help="a small smoke run")
    args = p.parse_args(argv)
    if args.out is None:
        args.out = Path("results") / f"bayesian_kernel_{args.task}"
    return args


def run_sshape(args) -> dict:
    from bayeskde.apps.demo import (
        FULL,
        QUICK,
        format_sshape_summary,
        run_sshape_demo,
        write_sshape_outputs,
    )

    cfg = dict(QUICK if args.quick else FULL)
    cfg["pred_draws"] = args.pred_draws
    if args.num_samples:
        cfg.update(warmup=args.num_samples, samples=args.num_samples,
                   pred_warmup=args.num_samples, pred_samples=args.num_samples)
    result, fit, pred, arrays = run_sshape_demo(args.seed, quick=args.quick,
                                                config=cfg)
    print(format_sshape_summary(result))
    write_sshape_outputs(result, fit, pred, arrays, args.out)
    return result


def _median_gamma(v):
    d = np.sqrt(((v[:, None] - v[None]) ** 2).sum(-1))[np.triu_indices(len(v), 1)]
    return 1.0 / (2.0 * np.median(d[d > 0]) ** 2)


def run_arm(args) -> dict:
    import jax
    from pose_tgp import errors as arm_errors

    from bayeskde import infer
    from bayeskde.apps.demo import plot_degree_posterior
    from bayeskde.datasets import make_arm_pose
    from bayeskde.learn import bma_tgp_predict, fit_kernel_hyper, twin_gp_from_params
    from bayeskde.models.kernel_hyper import (
        default_kernel_hyper_prior,
        prepare_kernel_hyper_data,
    )
    from bayeskde.tgp import TwinGP, gp_predict, weighted_knn_predict

    t0 = time.perf_counter()
    n_train, n_test, n_hyper = (150, 40, 30) if args.quick else (500, 200, 60)
    n = args.num_samples or (40 if args.quick else 200)
    keys = jax.random.split(jax.random.key(args.seed), 4)
    data = make_arm_pose(keys[0], n_train, n_test)
    X, Y, Z = data.x_train, data.theta_train, data.x_test
    gx, gy = 4 * _median_gamma(X), 4 * _median_gamma(Y)
    preds = {
        "TGP-KL (4 x median heuristic, ridge 1e-3)":
            TwinGP("kl", gamma_x=gx, gamma_y=gy, ridge=1e-3).fit(X, Y).predict(Z),
        "GP (same kernel)": gp_predict(X, Y, Z, gamma=gx, ridge=1e-3),
        "weighted 1-NN": weighted_knn_predict(X, Y, Z, n_neighbors=1),
    }
    sub = np.sort(np.asarray(jax.random.choice(keys[1], n_train, (n_hyper,),
                                               replace=False)))
    hd = prepare_kernel_hyper_data(X[sub], Y[sub])
    prior = default_kernel_hyper_prior(hd, max_degree_x=2 if args.quick else 3,
                                       max_degree_y=2 if args.quick else 3)
    fit = fit_kernel_hyper(keys[2], X[sub], Y[sub], prior, num_warmup=n,
                           num_samples=n)
    preds["TGP-KL, MAP kernel (NUTS)"] = twin_gp_from_params(fit.map_params).fit(
        X, Y).predict(Z)
    preds["TGP-KL, model average"] = bma_tgp_predict(
        keys[3], fit, X, Y, Z, n_draws=2 if args.quick else 4)[0]
    preds["TGP-KL, MAP kernel, TGP ridge 1e-3"] = twin_gp_from_params(
        fit.map_params, ridge=1e-3).fit(X, Y).predict(Z)
    preds["TGP-KL, model average, TGP ridge 1e-3"] = bma_tgp_predict(
        keys[3], fit, X, Y, Z, n_draws=2 if args.quick else 4, ridge=1e-3)[0]
    errs = {k: arm_errors(v, data) for k, v in preds.items()}  # pose_tgp's metrics
    print(f"Planar arm: {n_train} training poses, {n_test} test poses; "
          f"hyperparameters learned on {n_hyper}")
    print(f"  {'method':<44}{'angle':>8}{'nearer inv.':>13}{'markers':>9}")
    for k, e in errs.items():
        print(f"  {k:<44}{e['angle_deg']:>8.2f}{e['nearest_inverse_deg']:>13.2f}"
              f"{e['reconstruction']:>9.4f}")
    print("posterior over degree pairs:\n", np.round(fit.degree_posterior, 3))
    print(infer.summary(fit.idata, var_names=["gamma_x", "gamma_y", "ridge"]))
    for m in fit.report.messages:
        print("warning:", m)
    out = args.out
    out.mkdir(parents=True, exist_ok=True)
    infer.save_inference_data(fit.idata, out / "kernel_hyper.nc")
    infer.plot_trace(fit.idata, out / "trace.png",
                     var_names=["log_gamma_x", "log_gamma_y", "log_ridge"])
    plot_degree_posterior(fit.degree_posterior, out / "degree_posterior.png")
    return {"task": "arm", "errors": errs, "map_params": fit.map_params,
            "degree_posterior": fit.degree_posterior.tolist(),
            "baseline_gammas": {"gamma_x": gx, "gamma_y": gy},
            "max_rhat": fit.report.max_rhat, "runtime_s": time.perf_counter() - t0}


def main(argv=None) -> dict:
    args = _args(argv)
    result = run_sshape(args) if args.task == "sshape" else run_arm(args)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "summary.json").write_text(
        json.dumps(result, indent=2, default=float) + "\n")
    print(f"wrote {args.out}")
    return result


if __name__ == "__main__":
    import jax

    jax.config.update("jax_enable_x64", True)
    main()
