"""Image reconstruction from the top half, Weston et al. (2002) section 4.3, Table 3.

Given the top half of a digit, predict its bottom half. The output kernel is an
RBF on bottom halves whose width sigma' maximises the kernel alignment with a
target kernel from k-means (k = 30) on the bottom halves (K_ij = 1 when i and j
share a cluster); the loss is the one it induces,
||Phi(y) - Phi(y')||^2 = 2 - 2 exp(-||y - y'||^2 / (2 sigma'^2)). KDE (RBF input
kernel, candidate pre-images = training bottom halves) is compared to k-NN, both
trained on one fold of 200 digits and tested on the other 800, with sigma and
ridge (KDE) or k (k-NN) chosen by a further 5-fold CV on the training fold. Also
reported: how often the class of the chosen pre-image differs from the true
label, and, as in the paper's closing remark, plain classification from the top
halves alone (KDE with the 0-1 output kernel, k-NN).

Differences from the paper: scikit-learn's 8x8 digits (top half = 4 of 8 pixel
rows, 32 -> 32 pixels, values in [0, 1]) instead of USPS 16x16 (128 -> 128); the
alignment search for sigma' uses all 1000 bottom halves (it defines the loss, so
it is the same in every fold); outer folds are stratified by label (the labels
draw the folds and score pre-images, nothing else); no Hopfield net.

Run ``python models/digits_reconstruction.py`` (writes a JSON and a PNG like the
paper's Figure 2) or with ``--quick`` for a smoke test.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

# models/ is a folder of scripts, not a package: run them from anywhere.
from _common import (
    Timer,
    enable_x64,
    fmt,
    mean_se,
    parse_args,
    print_table,
    select_and_predict_kde,
    select_and_predict_knn,
    sigma_grid,
    summarise,
    write_json,
)
from digits_classification import train_on_one_fold

NAME = "digits_reconstruction"


def _add_arguments(parser) -> None:
    parser.add_argument(
        "--output-sigma", type=float, default=None,
        help="fix the output RBF width sigma' instead of the alignment choice",
    )


PAPER = {  # USPS 16x16, mean ± standard error
    "rbf_loss": {"kde": (0.8384, 0.0077), "knn": (0.8960, 0.0052)},
    "preimage_class_loss": {"kde": (0.2985, 0.0147), "knn": (0.2345, 0.0058)},
    "top_half_classification": {"kde": (0.1878, 0.0098), "knn": (0.2345, 0.0058)},
}
KS = tuple(range(1, 16))
N_CLUSTERS = 30
ALIGN_GRID = np.logspace(-2.0, 1.0, 61)  # sigma' / median distance of bottoms


def choose_output_sigma(Y, n_clusters, seed):
    """sigma' maximising the alignment of the output RBF Gram with k-means.

    Returns ``(sigma, info)`` with the whole alignment curve in ``info``.
    """
    from sklearn.cluster import KMeans

    from bayeskde.kde import input_gram_grid
    from bayeskde.kernels import alignment, median_heuristic

    clusters = KMeans(n_clusters, n_init=10, random_state=seed).fit_predict(Y)
    target = (clusters[:, None] == clusters[None, :]).astype(np.float64)
    med = median_heuristic(Y)
    sigmas = [float(med * r) for r in ALIGN_GRID]
    grams = input_gram_grid("rbf", [{"sigma": s} for s in sigmas], Y)
    align = np.array([float(alignment(G, target)) for G in grams])
    best = int(np.argmax(align))
    return sigmas[best], {
        "sigma": sigmas[best], "sigma_used": sigmas[best],
        "sigma_over_median": float(ALIGN_GRID[best]),
        "median_distance": med, "alignment": float(align[best]),
        "grid_sigmas": sigmas, "grid_alignment": align.tolist(),
        "n_clusters": n_clusters, "kmeans_random_state": seed,
    }


def plot_examples(path: Path, top, bottom, labels, test, pred_kde, pred_knn):
    """Figure 2 of the paper: true digit, KDE and k-NN reconstructions.

    Shows test digits where the k-NN pre-image has the wrong class and KDE's the
    right one (up to 8), then the reverse (up to 4); the paper picked its examples
    by eye.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ok_kde = labels[pred_kde] == labels[test]
    ok_knn = labels[pred_knn] == labels[test]
    cols = np.concatenate([np.flatnonzero(ok_kde & ~ok_knn)[:8],
                           np.flatnonzero(~ok_kde & ok_knn)[:4]])
    if cols.size == 0:
        cols = np.arange(min(8, test.size))
    fig, axes = plt.subplots(3, cols.size, figsize=(1.1 * cols.size, 3.6),
                             squeeze=False)
    rows = (("true", bottom[test]), ("KDE", bottom[pred_kde]),
            ("k-NN", bottom[pred_knn]))
    for r, (name, bottoms) in enumerate(rows):
        for c, j in enumerate(cols):
            img = np.hstack([top[test[j]], bottoms[j]]).reshape(8, 8)
            ax = axes[r, c]
            ax.imshow(img, cmap="gray_r", vmin=0.0, vmax=1.0)
            ax.axhline(3.5, color="tab:red", lw=0.8)
            ax.set_xticks([])
            ax.set_yticks([])
            if c == 0:
                ax.set_ylabel(name)
    fig.suptitle("Bottom halves from top halves (first fold): KDE right / k-NN "
                 "wrong, then the reverse", fontsize=8)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)


def run(args) -> dict:
    from bayeskde.apps.protocols import PAPER_RIDGES
    from bayeskde.datasets import load_digits_halves
    from bayeskde.kde import input_gram_grid
    from bayeskde.kernels import make_kernel, median_heuristic

    timer = Timer()
    top, bottom, labels = load_digits_halves()
    sigma_out, align_info = choose_output_sigma(bottom, N_CLUSTERS, args.seed)
    print(f"alignment-chosen output sigma' = {sigma_out:.4g} "
          f"({align_info['sigma_over_median']:.3g} x median distance), alignment "
          f"{align_info['alignment']:.4f}", flush=True)
    if args.output_sigma is not None:
        sigma_out = align_info["sigma_used"] = float(args.output_sigma)
        print(f"using --output-sigma {sigma_out:g} instead", flush=True)
    L = make_kernel("rbf", {"sigma": sigma_out}).gram(bottom)
    L_class = make_kernel("delta").gram(labels[:, None].astype(np.float64))
    K_lin = make_kernel("linear").gram(top)  # Euclidean ranking for k-NN

    outer = train_on_one_fold(labels, 5, args.seed)
    if args.quick:
        outer = outer[:1]
    ridges = PAPER_RIDGES
    n_inner = 5
    keys = ("kde", "knn")
    rbf_loss = {k: [] for k in keys}
    class_loss = {k: [] for k in keys}
    top_clf = {k: [] for k in keys}
    folds_info, first_fold = [], None
    for f, (train, test) in enumerate(outer):
        med = median_heuristic(top[train])
        sigmas = sigma_grid(args.sigma_grid, med)
        K_grid = input_gram_grid("rbf", [{"sigma": s} for s in sigmas], top)
        loss_te = 2.0 - 2.0 * np.asarray(L)[test]  # RBF loss against every output
        preds, info = {}, {}
        preds["kde"], info["kde"] = select_and_predict_kde(
            K_grid, L, train, test, ridges, n_inner)
        info["kde"]["sigma"] = sigmas[info["kde"].pop("param_index")]
        preds["knn"], info["knn"] = select_and_predict_knn(
            K_lin, L, train, test, KS, n_inner)
        for k in keys:
            rbf_loss[k].append(float(np.mean(loss_te[np.arange(test.size), preds[k]])))
            class_loss[k].append(float(np.mean(labels[preds[k]] != labels[test])))

        # Closing remark of section 4.3: classification from the top halves.
        pred, clf_kde = select_and_predict_kde(
            K_grid, L_class, train, test, ridges, n_inner)
        clf_kde["sigma"] = sigmas[clf_kde.pop("param_index")]
        top_clf["kde"].append(float(np.mean(labels[pred] != labels[test])))
        pred, clf_knn = select_and_predict_knn(
            K_lin, L_class, train, test, KS, n_inner)
        top_clf["knn"].append(float(np.mean(labels[pred] != labels[test])))

        if first_fold is None:
            first_fold = (test, preds["kde"], preds["knn"])
        folds_info.append({
            "fold": f, "n_train": int(train.size), "n_test": int(test.size),
            "median_distance": med, **info,
            "top_half_classification": {"kde": clf_kde, "knn": clf_knn},
            "rbf_loss": {k: rbf_loss[k][-1] for k in keys},
            "preimage_class_loss": {k: class_loss[k][-1] for k in keys},
            "top_half_classification_loss": {k: top_clf[k][-1] for k in keys},
        })
        print(f"fold {f}: RBF loss KDE {rbf_loss['kde'][-1]:.4f} k-NN "
              f"{rbf_loss['knn'][-1]:.4f}  ({timer():.0f} s)", flush=True)

    figure = Path(args.out).with_suffix(".png")
    plot_examples(figure, top, bottom, labels, *first_fold)
    return {
        "experiment": "Weston et al. 2002, section 4.3 (Table 3, Figure 2)",
        "data": "sklearn 8x8 digits, first 100 of each digit, pixels / 16; "
                "top = rows 0-3, bottom = rows 4-7",
        "protocol": (
            f"{len(outer)} stratified folds (seed {args.seed}); train on one fold, "
            f"test on the rest; {n_inner}-fold contiguous inner CV"
        ),
        "output_kernel": align_info,
        "sigma_grid": args.sigma_grid,
        "ridges": list(ridges),
        "ks": list(KS),
        "quick": bool(args.quick),
        "seed": args.seed,
        "rbf_loss": {k: summarise(v) for k, v in rbf_loss.items()},
        "preimage_class_loss": {k: summarise(v) for k, v in class_loss.items()},
        "top_half_classification_loss": {k: summarise(v) for k, v in top_clf.items()},
        "paper": {
            metric: {k: {"mean": m, "se": s} for k, (m, s) in d.items()}
            for metric, d in PAPER.items()
        },
        "folds": folds_info,
        "figure": str(figure),
        "runtime_s": timer(),
    }


def report(res: dict) -> None:
    metrics = (
        ("rbf_loss", "RBF loss"),
        ("preimage_class_loss", "pre-image class loss"),
        ("top_half_classification", "classification from top half"),
    )
    rows = []
    for metric, label in metrics:
        ours = res["top_half_classification_loss"] if metric.startswith("top") \
            else res[metric]
        for k, name in (("kde", "KDE"), ("knn", "k-NN")):
            rows.append([f"{label}, {name}", fmt(*PAPER[metric][k]),
                         fmt(*mean_se(ours[k]["folds"]))])
    print_table(
        "Table 3 and section 4.3 (paper: USPS 16x16; ours: sklearn 8x8 digits)",
        ["quantity", "paper", "ours"], rows,
    )
    for f in res["folds"]:
        print(f"  fold {f['fold']}: KDE sigma {f['kde']['sigma']:.3g} ridge "
              f"{f['kde']['ridge']:.0e}; k-NN k {f['knn']['k']}")
    print(f"figure: {res['figure']}")


def main(argv=None) -> dict:
    args = parse_args(NAME, __doc__.splitlines()[0], _add_arguments, argv=argv)
    if args.output_sigma is not None and not args.output_sigma > 0:
        raise SystemExit("--output-sigma must be > 0")
    res = run(args)
    report(res)
    write_json(args.out, res)
    print(f"wrote {args.out} ({res['runtime_s']:.1f} s)")
    return res


if __name__ == "__main__":
    enable_x64()  # scripts run in float64; importers keep their own setting
    main()
