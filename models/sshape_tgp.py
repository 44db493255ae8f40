"""S-shape inverse problem: Twin GP (KL) against GP regression and weighted 1-NN.

Bo and Sminchisescu (2010), section 6.1, with the original release's settings:
500 training points t ~ U(0, 1), x = t + 0.3 sin(2 pi t) + N(0, 0.05^2); 500
noise-free test points on t = 0, 0.002, ..., 0.998; mean absolute error on t.

* TGP-KL: gamma_x = 0.2, gamma_y = 20, ridge = 1e-4 (k = exp(-gamma ||.||^2));
* GP (kernel ridge mean): gamma = 20, ridge = 1e-5;
* weighted 1-NN (``WKNNRegressor`` with one neighbour).

The published MAEs are TGP-KL 0.116, GP 0.127, weighted 1-NN 0.174. The original
demo's plot title gives the GP a width of 2 while its code uses 20, so the GP with
gamma = 2 is reported too, as an extra row.

The GP gap on seed 0 (0.134 against 0.127) is seed-to-seed variation, not a
convention: over seeds 0..19 the GP MAE has mean 0.1326 and sd 0.006 (range
0.122 to 0.144); adding the ridge as 1e-4, 1e-6 or 0.05^2, or centring the
targets, moves it by under 0.001; the noise model N(0, 0.05^2) is supported by
weighted 1-NN, the most noise-sensitive method, which reproduces the published
0.174 (0.1749 over 10 NumPy-generated draws). With noise-free training inputs the
GP would reach 0.118, with sd 0.03 noise 0.119: the published GP number sits
inside the range of our draws, on their low side. Other readings of the kernel
do not close the gap (seeds 0..9, mean ± sd): exp(-gamma d^2) with gamma = 20
0.1312 ± 0.0048 (ours; gamma 10 or 40 give 0.1315, 0.1313), exp(-d^2 / (2
gamma)) 0.1909, exp(-d^2 / gamma) 0.1904, exp(-gamma |d|) 0.1625, gamma = 2
(the plot title) 0.1596; centring the targets changes nothing (0.1312), the
501-point grid with t = 1 gives 0.1310. The seed paper states only
k = exp(-gamma ||x - x'||^2) and bandwidths by CV or the median heuristic; the
GP settings come from the original release.

Run ``python models/sshape_tgp.py`` (one seed, ``--seed``), ``--seeds 10`` for
mean ± sd over seeds 0..9, or ``--quick`` (100 training points, one seed).
Writes ``results/sshape_tgp.json`` and a PNG of the predictions beside it.
"""

from __future__ import annotations

import numpy as np

# models/ is a folder of scripts, not a package: run them from anywhere.
from _common import Timer, enable_x64, parse_args, print_table, write_json

TGP = {"gamma_x": 0.2, "gamma_y": 20.0, "ridge": 1e-4}
GP = {"gamma": 20.0, "ridge": 1e-5}
GP_TITLE = {"gamma": 2.0, "ridge": 1e-5}
PUBLISHED = {"tgp_kl": 0.116, "gp": 0.127, "wknn_1": 0.174, "gp_gamma2": None}
LABELS = {
    "tgp_kl": "TGP-KL (gamma_x 0.2, gamma_y 20, ridge 1e-4)",
    "gp": "GP (gamma 20, ridge 1e-5)",
    "wknn_1": "weighted 1-NN",
    "gp_gamma2": "extra: GP gamma 2 (demo plot title)",
}


def _add_arguments(parser):
    parser.add_argument(
        "--seeds", type=int, default=None,
        help="run seeds 0..N-1 and report mean ± sd (overrides --seed)",
    )


def run_seed(seed: int, n_train: int) -> tuple[dict, dict]:
    """MAEs of the four methods on ``make_sshape(key(seed), n_train)``."""
    import jax

    from bayeskde.datasets import make_sshape
    from bayeskde.tgp import TwinGP, gp_predict, weighted_knn_predict

    d = make_sshape(jax.random.key(seed), n_train)
    X, Y, Z = d.x_train[:, None], d.t_train[:, None], d.x_test[:, None]
    tgp = TwinGP("kl", **TGP).fit(X, Y)
    preds = {
        "tgp_kl": tgp.predict(Z),
        "gp": gp_predict(X, Y, Z, **GP),
        "wknn_1": weighted_knn_predict(X, Y, Z, n_neighbors=1),
        "gp_gamma2": gp_predict(X, Y, Z, **GP_TITLE),
    }
    preds = {k: np.asarray(v).ravel() for k, v in preds.items()}
    mae = {k: float(np.mean(np.abs(v - d.t_test))) for k, v in preds.items()}
    status = np.bincount(np.asarray(tgp.solution_.status), minlength=3)
    mae["tgp_bfgs_status_counts"] = status.tolist()
    return mae, {"data": d, **preds}


def plot(path, out: dict, seed: int) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    d = out["data"]
    fig, axes = plt.subplots(1, 3, figsize=(13, 4), sharey=True)
    for ax, key, name in zip(
        axes, ("tgp_kl", "gp", "wknn_1"), ("TGP-KL", "GP (gamma 20)", "weighted 1-NN"),
        strict=True,
    ):
        ax.plot(d.x_train, d.t_train, ".", color="0.75", ms=3, label="training")
        ax.plot(d.x_test, d.t_test, "k-", lw=1, label="true curve")
        ax.plot(d.x_test, out[key], "r.", ms=3, label="prediction")
        mae = np.mean(np.abs(out[key] - d.t_test))
        ax.set_title(f"{name}: MAE {mae:.3f}")
        ax.set_xlabel("x")
    axes[0].set_ylabel("t")
    axes[0].legend(loc="upper left", fontsize=8)
    fig.suptitle(f"S-shape, seed {seed}, {len(d.x_train)} training points")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv=None) -> dict:
    args = parse_args("sshape_tgp", __doc__.splitlines()[0], _add_arguments, argv)
    enable_x64()
    timer = Timer()
    n_train = 100 if args.quick else 500
    seeds = [args.seed] if args.quick or args.seeds is None else list(range(args.seeds))
    per_seed, first = [], None
    for s in seeds:
        mae, out = run_seed(s, n_train)
        per_seed.append(mae)
        first = first or out
    rows, summary = [], {}
    for key, label in LABELS.items():
        vals = np.array([m[key] for m in per_seed])
        sd = float(vals.std(ddof=1)) if len(vals) > 1 else None
        summary[key] = {"mean": float(vals.mean()), "sd": sd,
                        "per_seed": vals.tolist(), "published": PUBLISHED[key]}
        ours = f"{vals.mean():.4f}" + ("" if sd is None else f" ± {sd:.4f}")
        pub = PUBLISHED[key]
        rows.append([label, ours, "-" if pub is None else f"{pub:.3f}"])
    print_table(
        f"S-shape MAE on t ({n_train} training points, 500 test points, "
        f"seeds {seeds[0]}..{seeds[-1]}{'' if len(seeds) == 1 else ', mean ± sd'})",
        ["method", "ours", "published"], rows,
    )
    png = args.out.with_suffix(".png")
    png.parent.mkdir(parents=True, exist_ok=True)
    plot(png, first, seeds[0])
    payload = {
        "experiment": "sshape_tgp",
        "settings": {"tgp_kl": TGP, "gp": GP, "gp_gamma2": GP_TITLE,
                     "wknn": {"n_neighbors": 1}, "n_train": n_train, "n_test": 500,
                     "seeds": seeds, "quick": args.quick, "dtype": "float64"},
        "mae": summary,
        "per_seed": per_seed,
        "plot": str(png),
        "seconds": timer(),
    }
    write_json(args.out, payload)
    print(f"wrote {args.out} and {png} ({timer():.1f} s)")
    return payload


if __name__ == "__main__":
    main()
