"""Bayesian KDE against the paper's 5-fold CV: digits halves (and strings).

Weston et al. (2002), section 4, choose the input RBF width sigma from
{1e-3, ..., 1e3} (times the median distance here, see ``models/_common.py``) and the
ridge gamma from {1e-4, ..., 1e1} by five-fold cross-validation. This recipe puts a
posterior on the same choice instead: the library's model
(:mod:`bayeskde.models.kde`, which says why it was kept):

* ``gibbs_loo``: a Gibbs posterior over (width, ridge) whose likelihood is
  exp(-sum_i l_i / tau), l_i the exact leave-one-out pre-image loss of training
  point i; enumerated exactly on the width grid x a 67-point log-ridge grid.

The GP-evidence models it replaced (they put their mass on the narrowest widths
or a ridge ten times CV's and lose to CV on digits) are references in
``bench/kde_evidence.py``, compared by ``bench/bayes.py``; this recipe does
not import them.

It gives a Bayesian-model-averaged predictor (average over the posterior of
(width, ridge)) and a MAP (argmax of the exact log joint on the grid).
Predictions use all output components and pre-images from the training
outputs, exactly as the CV path, so only the selection differs. Protocol of
``models/digits_reconstruction.py``: 1000 digits, 5 stratified folds, train on
one (m = 200), test on the other four; output RBF width by alignment with
k-means clusters; RBF loss 2 - 2 L(y, y_hat).

``--strings`` adds the string-to-string task of section 4.1 (200 pairs, 4 outer
folds, string kernel with the RBF map on the input side, string loss).

Run ``python models/bayesian_kde_digits.py [--quick] [--strings]
[--temperature TAU] --out DIR``;
writes ``DIR/bayesian_kde_digits.json`` and ``DIR/bayesian_kde_digits.png``
(posterior over the width grid and the ridge, first fold).
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np

# models/ is a folder of scripts, not a package: run them from anywhere.
from _common import (
    Timer,
    enable_x64,
    fmt,
    mean_se,
    print_table,
    select_and_predict_kde,
    summarise,
    write_json,
)

NAME = "bayesian_kde_digits"
GIBBS = "gibbs_loo"  # the kept model: Gibbs posterior from the leave-one-out loss
GIBBS_LOG_RIDGES = np.linspace(np.log(1e-8), np.log(1e3), 67)


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    p.add_argument("--out", type=Path, default=Path("results") / NAME,
                   help=f"output folder (default results/{NAME})")
    p.add_argument("--quick", action="store_true",
                   help="one outer fold (smoke run, ~30 s)")
    p.add_argument("--temperature", type=float, default=1.0,
                   help="tau of the Gibbs posterior (loss units per nat, default 1)")
    p.add_argument("--strings", action="store_true",
                   help="also run the string-to-string task (section 4.1)")
    p.add_argument("--no-digits", action="store_true",
                   help="skip the digits task (with --strings: strings only)")
    return p.parse_args(argv)


def output_coordinates(L_tr):
    """All output KPCA coordinates with a non-negligible eigenvalue, descending."""
    from bayeskde.kpca import kernel_pca, kpca_transform

    kp = kernel_pca(L_tr)
    ev = np.asarray(kp.eigenvalues)
    keep = int(np.sum(ev > 1e-10 * ev[0]))
    T = np.asarray(kpca_transform(kp, L_tr))[:, :keep]
    return T, ev[:keep]


def gibbs_fold(K_grid, sigmas, train, test, L, loss, args):
    """Gibbs posterior (:mod:`bayeskde.models.kde`) on ``train``: BMA, MAP."""
    from bayeskde.models import (
        BayesianKDEGridPrior,
        kde_gibbs_posterior,
        kde_grid_bma_features,
        kde_spectra,
    )

    start = time.perf_counter()
    K_tr = K_grid[:, train][:, :, train]
    T_all, _ = output_coordinates(L[np.ix_(train, train)])
    spectra = kde_spectra(K_tr, T_all, sigmas)
    post = kde_gibbs_posterior(spectra, T_all, loss[np.ix_(train, train)],
                               GIBBS_LOG_RIDGES, BayesianKDEGridPrior(),
                               args.temperature)
    K_te = K_grid[:, test][:, :, train]
    F = np.asarray(kde_grid_bma_features(spectra, K_te, T_all, post.ridges,
                                         post.grid_weights))
    t2 = np.sum(T_all * T_all, axis=1)
    pred_bma = train[np.argmin(t2[None, :] - 2.0 * F @ T_all.T, axis=1)]
    time_bma = time.perf_counter() - start
    lj = np.asarray(post.log_joint, np.float64)
    gi, ri = np.unravel_index(int(np.argmax(lj)), lj.shape)
    F_map = np.asarray(kde_grid_bma_features(
        spectra, K_te, T_all, [float(post.ridges[ri])], np.eye(len(sigmas))[[gi]]))
    pred_map = train[np.argmin(t2[None, :] - 2.0 * F_map @ T_all.T, axis=1)]
    P = np.asarray(post.probs, np.float64)
    info = {
        "likelihood": "gibbs_loo", "temperature": args.temperature,
        "n_components": int(T_all.shape[1]),
        "n_components_available": int(T_all.shape[1]),
        "grid_posterior_exact": P.sum(1).tolist(),
        "log_ridge_mean_exact": float(P.sum(0) @ GIBBS_LOG_RIDGES),
        "map": {"sigma": float(sigmas[gi]), "ridge": float(post.ridges[ri])},
        "map_loo_loss": float(post.loo_loss[gi, ri]),
        "bma_loss": float(np.mean(loss[test, pred_bma])),
        "map_loss": float(np.mean(loss[test, pred_map])),
        "time_s": time_bma, "max_rhat": float("nan"),
    }
    curve = {"ridge_marginal": P.sum(0), "grid": P.sum(1), "ridge_draws": None,
             "log_ridges": GIBBS_LOG_RIDGES}
    return info, curve


def cv_fold(K_grid, sigmas, train, test, L, loss):
    start = time.perf_counter()
    pred, info = select_and_predict_kde(K_grid, L, train, test, _ridges(), 5)
    info = {"sigma": float(sigmas[info["param_index"]]), "ridge": info["ridge"],
            "loss": float(np.mean(loss[test, pred])),
            "time_s": time.perf_counter() - start}
    return info


def _ridges():
    from bayeskde.apps.protocols import PAPER_RIDGES

    return PAPER_RIDGES


def digits_task(args):
    """Grams, losses and outer folds of the digits-halves reconstruction."""
    from digits_classification import train_on_one_fold
    from digits_reconstruction import N_CLUSTERS, choose_output_sigma

    from bayeskde.apps.protocols import PAPER_SIGMAS
    from bayeskde.datasets import load_digits_halves
    from bayeskde.kde import input_gram_grid
    from bayeskde.kernels import make_kernel, median_heuristic

    top, bottom, labels = load_digits_halves()
    sigma_out, _ = choose_output_sigma(bottom, N_CLUSTERS, args.seed)
    L = np.asarray(make_kernel("rbf", {"sigma": sigma_out}).gram(bottom))
    loss = 2.0 - 2.0 * L  # RBF loss, as models/digits_reconstruction.py
    folds = []
    for train, test in train_on_one_fold(labels, 5, args.seed):
        med = median_heuristic(top[train])
        sigmas = np.asarray(PAPER_SIGMAS) * med
        K_grid = np.asarray(input_gram_grid(
            "rbf", [{"sigma": float(s)} for s in sigmas], top))
        folds.append((K_grid, sigmas, train, test))
    return {"L": L, "loss": loss, "folds": folds, "loss_name": "RBF loss",
            "output_sigma": sigma_out}


def strings_task(args):
    """The string-to-string task of section 4.1 (Table 1 protocol)."""
    import jax

    from bayeskde.apps.protocols import PAPER_SIGMAS
    from bayeskde.datasets import make_string_pairs
    from bayeskde.kde import kfold_indices, loss_matrix_from_kernel
    from bayeskde.kernels import kernel_rbf_map, make_kernel, median_heuristic

    pairs = make_string_pairs(jax.random.key(args.seed), n_samples=200)
    kernel = make_kernel("string", {"r": 3, "lam": 0.01, "mode": "mean"})
    K0 = np.asarray(kernel.gram(pairs.inputs))
    L = np.asarray(kernel.gram(pairs.outputs))
    loss = np.asarray(loss_matrix_from_kernel(L))
    d0 = np.diagonal(K0).copy()
    folds = []
    for train, test in kfold_indices(200, 4):
        med = median_heuristic(K=K0[np.ix_(train, train)])
        sigmas = np.asarray(PAPER_SIGMAS) * med
        K_grid = np.stack([np.asarray(kernel_rbf_map(K0, d0, d0, float(s)))
                           for s in sigmas])
        folds.append((K_grid, sigmas, train, test))
    return {"L": L, "loss": loss, "folds": folds, "loss_name": "string loss"}


def run_task(name, task, args):
    folds = task["folds"][:1] if args.quick else task["folds"]
    out = {"cv": [], GIBBS: []}
    curves = {}
    for f, (K_grid, sigmas, train, test) in enumerate(folds):
        out["cv"].append(cv_fold(K_grid, sigmas, train, test, task["L"],
                                 task["loss"]))
        line = [f"{name} fold {f}: CV {out['cv'][-1]['loss']:.4f} "
                f"(sigma {out['cv'][-1]['sigma']:.3g}, ridge "
                f"{out['cv'][-1]['ridge']:.0e}, {out['cv'][-1]['time_s']:.1f} s)"]
        info, curve = gibbs_fold(K_grid, sigmas, train, test, task["L"],
                                 task["loss"], args)
        out[GIBBS].append(info)
        if f == 0:
            curves[GIBBS] = curve
        line.append(f"{GIBBS} BMA {info['bma_loss']:.4f} MAP {info['map_loss']:.4f}"
                    f" ({info['time_s']:.1f} s)")
        print("\n  ".join(line), flush=True)
    res = {"loss_name": task["loss_name"], "n_train": int(folds[0][2].size),
           "n_test": int(folds[0][3].size), "n_folds": len(folds),
           "sigma_grid_fold0": folds[0][1].tolist(), "folds": out}
    res["summary"] = {
        "cv": {"loss": summarise([i["loss"] for i in out["cv"]]),
               "time_s": float(np.median([i["time_s"] for i in out["cv"]]))},
        **{v: {"bma_loss": summarise([i["bma_loss"] for i in out[v]]),
               "map_loss": summarise([i["map_loss"] for i in out[v]]),
               "time_s": float(np.median([i["time_s"] for i in out[v]]))}
           for v in [GIBBS]},
    }
    return res, curves, folds[0]


def plot(path, results):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    tasks = list(results)
    fig, axes = plt.subplots(2, len(tasks), figsize=(5.5 * len(tasks), 6.5),
                             squeeze=False)
    for c, name in enumerate(tasks):
        res, curves, (_, sigmas, _, _) = results[name]
        cv = res["folds"]["cv"][0]
        ax = axes[0, c]
        width = 0.8 / len(curves)
        x = np.arange(len(sigmas))
        for j, (v, cur) in enumerate(curves.items()):
            ax.bar(x + (j - (len(curves) - 1) / 2) * width, cur["grid"], width, label=v)
        ax.axvline(int(np.argmin(np.abs(sigmas - cv["sigma"]))), color="k", ls="--",
                   lw=1, label="5-fold CV choice")
        ax.set_xticks(x, [f"{s:.2g}" for s in sigmas], rotation=45, fontsize=7)
        ax.set_xlabel("input width sigma (grid)")
        ax.set_ylabel("posterior probability")
        ax.set_title(f"{name}: posterior over the width grid (fold 0)", fontsize=9)
        ax.legend(fontsize=7)
        ax = axes[1, c]
        ln10 = np.log(10.0)
        for v, cur in curves.items():
            grid = cur["log_ridges"]
            step = (grid[1] - grid[0]) / ln10
            line, = ax.plot(grid / ln10, cur["ridge_marginal"] / step,
                            label=f"{v} (exact)")
            if cur["ridge_draws"] is not None:
                ax.hist(cur["ridge_draws"] / ln10, bins=40, density=True,
                        alpha=0.3, color=line.get_color())
        ax.axvline(np.log10(cv["ridge"]), color="k", ls="--", lw=1, label="CV ridge")
        ax.set_xlabel("log10 ridge gamma")
        ax.set_ylabel("density of log10 gamma (NUTS: bars, exact: line)")
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def report(results) -> None:
    for name, (res, _, _) in results.items():
        s = res["summary"]
        rows = [["5-fold CV (paper protocol)", fmt(*mean_se(s["cv"]["loss"]["folds"])),
                 "", f"{s['cv']['time_s']:.2f}"]]
        variants = [GIBBS]
        for v in variants:
            rows.append([f"Bayes {v}", fmt(*mean_se(s[v]["bma_loss"]["folds"])),
                         fmt(*mean_se(s[v]["map_loss"]["folds"])),
                         f"{s[v]['time_s']:.2f}"])
        print_table(
            f"{name}: {res['loss_name']} (m = {res['n_train']} train, "
            f"{res['n_test']} test, {res['n_folds']} folds); time per fold, median",
            ["selection", "BMA / CV loss", "MAP loss", "time s"], rows)
        for f, cv in enumerate(res["folds"]["cv"]):
            parts = [f"CV sigma {cv['sigma']:.3g} ridge {cv['ridge']:.0e}"]
            for v in variants:
                i = res["folds"][v][f]
                parts.append(f"{v} MAP sigma {i['map']['sigma']:.3g} ridge "
                             f"{i['map']['ridge']:.1e} p={i['n_components']} "
                             + ("exact" if v == GIBBS else
                                f"R-hat {i['max_rhat']:.3f}, ESS bulk "
                                f"{i['min_ess_bulk']:.0f} / tail "
                                f"{i['min_ess_tail']:.0f}, "
                                f"{i['divergences']} divergences"))
            d = res["folds"][GIBBS][f]["bma_loss"] - cv["loss"]
            parts.append(f"{GIBBS} BMA - CV {d:+.4f}")
            print(f"  fold {f}: " + "; ".join(parts))
        diff = [g["bma_loss"] - c["loss"]
                for g, c in zip(res["folds"][GIBBS], res["folds"]["cv"], strict=True)]
        print(f"  {GIBBS} BMA - CV, paired over folds: {fmt(*mean_se(diff))}")


def main(argv=None) -> dict:

    args = parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    timer = Timer()
    results = {}
    tasks = ([] if args.no_digits else [("digits", digits_task)]) + (
        [("strings", strings_task)] if args.strings else [])
    if not tasks:
        raise SystemExit("nothing to run: --no-digits needs --strings")
    for name, make in tasks:
        task = make(args)
        res, curves, fold0 = run_task(name, task, args)
        results[name] = (res, curves, fold0)
    figure = args.out / f"{NAME}.png"
    plot(figure, results)
    report(results)
    payload = {
        "experiment": "Bayesian KDE (issue 6, part 1d) vs the 5-fold CV of Weston "
                      "et al. 2002, section 4",
        "variants": {GIBBS: {"likelihood": "gibbs_loo", "components": "all",
                             "temperature": args.temperature}},
        "prior": {"log_ridge": "N(log 1e-2, 2)", "sigma": "uniform over the grid"},
        "seed": args.seed, "quick": bool(args.quick),
        "tasks": {k: v[0] for k, v in results.items()},
        "figure": str(figure), "runtime_s": timer(),
    }
    write_json(args.out / f"{NAME}.json", payload)
    print(f"wrote {args.out / (NAME + '.json')} ({payload['runtime_s']:.1f} s)")
    return payload


if __name__ == "__main__":
    enable_x64()  # scripts run in float64; importers keep their own setting
    main()
