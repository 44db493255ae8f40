"""% gain of learned polynomial kernel transforms for Twin GPs on the S-shape data.

Seed 001 (polynomial kernel transformations, section 5), the gain tables: for
degrees d1 (input) and d2 (output) in 1..6, both bases (monomial; Gegenbauer with
the seed's lambda_1 = 0.51, lambda_2 = 0.52) and both TGP criteria (KL, HSIC),

    gain = 100 (baseline MAE - learned MAE) / baseline MAE,

where the baseline is the untransformed TGP with the same criterion and the same
bandwidths. Two bandwidth choices, each giving its own set of four tables:

* ``median``: the median heuristic, gamma = 1 / (2 median^2) of the pairwise
  training distances (inputs and outputs separately);
* ``cv``: as in the paper, gamma_x and gamma_y chosen by k-fold cross-validation
  (MAE) of the *baseline* TGP of each criterion on the training set, over
  gamma_x in {0.2, 2, 20, 200} x gamma_y in {5, 20, 80} (``--quick``: a 2 x 1
  grid, 2 folds), then kept fixed for every transformed cell.

ridge = 1e-4 (the KL criterion's; the HSIC energy has none).

Data: ``make_sshape(key(seed))``, 500 training points; every second test point of
the grid is used (250 of 500). d1 = d2 = 1 reproduces the baseline (gain 0) and
is a check.

HSIC. Before the tables the script diagnoses the HSIC criterion on S-shape: for
the chosen bandwidths it compares the BFGS prediction with the global minimiser
of the HSIC energy on a fine grid of y (so the criterion and the optimiser are
judged apart), for the global model and for local models of 50 neighbours, from
the linear start and from ``TwinGP``'s default HSIC start ``init="best"`` (the
lowest energy among the linear start and the outputs of the 10 nearest training
inputs), and counts the predictions that drifted off the data (the HSIC energy
-2 c^T k_y tends to a constant as |y| grows, and from a start where c^T k_y < 0
descent runs away). All of it is recorded; the tables use global models for
both criteria (local models refuse an output transform projected onto the PSD
cone over all training points, as Gegenbauer with d2 >= 2 needs).

Resumable: every finished table (and the CV bandwidths) is written to
``<out>.partial.json`` as it completes; a rerun with the same settings skips
what is there (``--fresh`` ignores it); it is removed once the run completes.

Run ``python models/tgp_gain_tables.py`` (2,647 s wall on the shared 2-core
machine under load 8-11, all 8 tables) or ``--quick`` (degrees 1..2, 100
training points, small CV grid).
"""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import numpy as np

# models/ is a folder of scripts, not a package: run them from anywhere.
from _common import Timer, enable_x64, parse_args, print_table, write_json

BASES = ("monomial", "gegenbauer")
CRITERIA = ("kl", "hsic")
GEGENBAUER_LAMBDA = (0.51, 0.52)
RIDGE = 1e-4
HSIC_NEIGHBORS = 50
BANDWIDTHS = ("median", "cv")
CV_GAMMA_X = (0.2, 2.0, 20.0, 200.0)
CV_GAMMA_Y = (5.0, 20.0, 80.0)
CV_FOLDS = 3
HELP_THRESHOLD = 1.0  # % gain counted as help / harm beyond +-1 %


def median_gamma(v: np.ndarray) -> float:
    """gamma = 1 / (2 median^2) over the distinct pairwise distances of ``v``."""
    v = np.asarray(v, dtype=np.float64).reshape(len(v), -1)
    d = np.sqrt(((v[:, None, :] - v[None, :, :]) ** 2).sum(-1))
    med = float(np.median(d[np.triu_indices(len(v), 1)]))
    return 1.0 / (2.0 * med**2)


def _mae(pred, t):
    return float(np.mean(np.abs(np.asarray(pred).ravel() - t)))


def fit_predict(data, criterion, gx, gy, n_neighbors=None, transform=None):
    """MAE of one TGP and whether a transformed Gram was projected onto PSD."""
    from bayeskde.tgp import TwinGP

    X, Y, Z, T = data
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        try:
            tgp = TwinGP(criterion, gamma_x=gx, gamma_y=gy, ridge=RIDGE,
                         n_neighbors=n_neighbors,
                         kernel_transform=transform).fit(X, Y)
            mae = _mae(tgp.predict(Z), T)
        except (FloatingPointError, ValueError, np.linalg.LinAlgError) as err:
            return float("nan"), {"error": str(err)}
    info = {}
    tr = tgp.transform_
    if tr is not None:
        info = {"alpha": np.asarray(tr.alpha_).tolist(),
                "beta": np.asarray(tr.beta_).tolist(),
                "projected_input": tr.input_projector_ is not None,
                "projected_output": tr.output_projector_ is not None}
    return mae, info


def _hsic_grid_minimiser(data, gx, gy, n_neighbors):
    """Global minimiser of the HSIC energy over a fine grid of y, per test point."""
    from bayeskde.tgp import hsic_coupling

    X, Y, Z, _ = data
    grid = np.linspace(-0.5, 1.5, 801)
    K = np.exp(-gx * (X - X.T) ** 2)
    kx = np.exp(-gx * (Z - X.T) ** 2)
    out = np.empty(len(Z))
    for i in range(len(Z)):
        idx = (np.arange(len(X)) if n_neighbors is None
               else np.argsort((X[:, 0] - Z[i, 0]) ** 2)[:n_neighbors])
        c, _ = hsic_coupling(K[np.ix_(idx, idx)], kx[i, idx], np.float64(1.0))
        energy = -2.0 * np.exp(-gy * (grid[:, None] - Y[idx, 0][None]) ** 2) @ c
        out[i] = grid[np.argmin(energy)]
    return out


def check_hsic(data, gx, gy) -> dict:
    """HSIC: BFGS vs grid minimiser, global vs local, drift; which model to use."""
    from bayeskde.tgp import TwinGP, linear_init_weights

    X, Y, Z, T = data
    W = np.asarray(linear_init_weights(X, Y))
    info = {"linear_start_mae": _mae(W[0] + Z @ W[1:], T)}
    k = min(HSIC_NEIGHBORS, len(X))
    for label, nn in (("global", None), ("local", k)):
        info[label] = {
            "grid_minimiser_mae": _mae(_hsic_grid_minimiser(data, gx, gy, nn), T)}
        for init in ("linear", "best"):
            tgp = TwinGP("hsic", gamma_x=gx, gamma_y=gy, ridge=RIDGE,
                         n_neighbors=nn, init=init).fit(X, Y)
            sol = tgp.solve(Z)
            pred = np.asarray(sol.y).ravel()
            status = np.bincount(np.asarray(sol.status), minlength=3)
            info[label][init] = {
                "bfgs_mae": _mae(pred, T),
                "drifted": int(((pred < -0.25) | (pred > 1.25)).sum()),
                "iteration_limit": int(status[1]),
                "max_iter_used": int(np.max(np.asarray(sol.n_iter))),
            }
        info[label]["bfgs_mae"] = info[label]["best"]["bfgs_mae"]
    # Global models in the tables, as for KL: local models refuse an output
    # transform that had to be projected onto the PSD cone over all training
    # points (Gegenbauer, d2 >= 2), which would leave cells empty.
    info["n_neighbors"] = k
    info["hsic_model"] = "global"
    info["n_neighbors_used"] = None
    return info


def cv_bandwidths(data, criterion, folds, grid_x, grid_y, seed) -> dict:
    """gamma_x, gamma_y of the baseline TGP by k-fold CV of the MAE."""
    X, Y, _, _ = data
    rng = np.random.default_rng(seed)
    fold = rng.permutation(len(X)) % folds
    scores = {}
    for gx in grid_x:
        for gy in grid_y:
            errs = []
            for f in range(folds):
                tr, va = fold != f, fold == f
                errs.append(fit_predict(
                    (X[tr], Y[tr], X[va], Y[va, 0]), criterion, gx, gy)[0])
            scores[(gx, gy)] = float(np.mean(errs))
    finite = {k: v for k, v in scores.items() if np.isfinite(v)}
    best = min(finite, key=finite.get)
    return {"gamma_x": best[0], "gamma_y": best[1], "cv_mae": finite[best],
            "scores": {f"{a:g},{b:g}": v for (a, b), v in scores.items()}}


def describe(gain: np.ndarray, degrees: list[int]) -> list[str]:
    """Plain-language summary of one gain table."""
    finite = np.isfinite(gain)
    off = finite.copy()
    off[0, 0] = False  # (1, 1) is the baseline itself
    helps = int(((gain > HELP_THRESHOLD) & off).sum())
    hurts = int(((gain < -HELP_THRESHOLD) & off).sum())
    flat = int(off.sum()) - helps - hurts
    lines = [f"{helps} cells help (> +{HELP_THRESHOLD:g} %), {hurts} hurt "
             f"(< -{HELP_THRESHOLD:g} %), {flat} within ±{HELP_THRESHOLD:g} %"
             + (f", {int((~finite).sum())} failed" if (~finite).any() else "")]
    if off.any():
        g = np.where(off, gain, -np.inf)
        i, j = np.unravel_index(np.argmax(g), g.shape)
        b = np.where(off, gain, np.inf)
        p, q = np.unravel_index(np.argmin(b), b.shape)
        lines.append(f"best d1={degrees[i]}, d2={degrees[j]}: {gain[i, j]:+.1f} %; "
                     f"worst d1={degrees[p]}, d2={degrees[q]}: {gain[p, q]:+.1f} %")
        rows = np.nanmean(np.where(off, gain, np.nan), axis=1)
        cols = np.nanmean(np.where(off, gain, np.nan), axis=0)
        lines.append("mean gain by d1: " + ", ".join(
            f"{d}:{v:+.1f}" for d, v in zip(degrees, rows, strict=True)))
        lines.append("mean gain by d2: " + ", ".join(
            f"{d}:{v:+.1f}" for d, v in zip(degrees, cols, strict=True)))
    return lines


def _add_arguments(parser):
    parser.add_argument(
        "--fresh", action="store_true",
        help="ignore <out>.partial.json and recompute every table",
    )


class _Partial:
    """Finished pieces kept in ``<out>.partial.json`` so that a rerun resumes."""

    def __init__(self, out: Path, key: dict, fresh: bool):
        self.path = Path(out).with_suffix(".partial.json")
        self.key = key
        self.data = {"key": key, "items": {}}
        if not fresh and self.path.exists():
            saved = json.loads(self.path.read_text())
            if saved.get("key") == key:
                self.data = saved
                print(f"resuming from {self.path}: {len(saved['items'])} pieces done")

    def get(self, name):
        return self.data["items"].get(name)

    def put(self, name, value):
        self.data["items"][name] = value
        write_json(self.path, self.data)


def main(argv=None) -> dict:
    args = parse_args("tgp_gain_tables", __doc__.splitlines()[0], _add_arguments,
                      argv)
    enable_x64()
    import jax

    from bayeskde.datasets import make_sshape
    from bayeskde.kernels import PolynomialKernelTransform

    timer = Timer()
    n_train, stride = (100, 5) if args.quick else (500, 2)
    degrees = [1, 2] if args.quick else [1, 2, 3, 4, 5, 6]
    d = make_sshape(jax.random.key(args.seed), n_train)
    data = (d.x_train[:, None], d.t_train[:, None], d.x_test[::stride, None],
            d.t_test[::stride])
    gx, gy = median_gamma(d.x_train), median_gamma(d.t_train)
    print(f"S-shape, seed {args.seed}: {n_train} training points, "
          f"{len(data[3])} test points (every {stride}th of the 500-point grid); "
          f"ridge {RIDGE:g}")

    bandwidths = {"median": {c: {"gamma_x": gx, "gamma_y": gy} for c in CRITERIA}}
    if args.quick:
        grid_x, grid_y, folds = (2.0, 20.0), (20.0,), 2
    else:
        grid_x, grid_y, folds = CV_GAMMA_X, CV_GAMMA_Y, CV_FOLDS
    partial = _Partial(args.out, {
        "seed": args.seed, "n_train": n_train, "stride": stride,
        "degrees": degrees, "grid": [list(grid_x), list(grid_y), folds],
        "ridge": RIDGE, "version": 2}, args.fresh)
    bandwidths["cv"] = {}
    for c in CRITERIA:
        got = partial.get(f"cv/{c}")
        if got is None:
            got = cv_bandwidths(data, c, folds, grid_x, grid_y, args.seed)
            partial.put(f"cv/{c}", got)
        bandwidths["cv"][c] = got
    print(f"median heuristic: gamma_x = {gx:.4g}, gamma_y = {gy:.4g}")
    for c in CRITERIA:
        b = bandwidths["cv"][c]
        print(f"{folds}-fold CV of the baseline {c.upper()}: gamma_x = "
              f"{b['gamma_x']:g}, gamma_y = {b['gamma_y']:g} (CV MAE "
              f"{b['cv_mae']:.4f})")

    tables, summary, checks, baselines = {}, {}, {}, {}
    for bw in BANDWIDTHS:
        hb = bandwidths[bw]["hsic"]
        check = check_hsic(data, hb["gamma_x"], hb["gamma_y"])
        checks[bw] = check
        print(f"\nHSIC check ({bw} bandwidths): linear start MAE "
              f"{check['linear_start_mae']:.4f}")
        for label in ("global", "local"):
            c = check[label]
            print(f"  {label:6s}: grid minimiser of the energy "
                  f"{c['grid_minimiser_mae']:.4f}; BFGS MAE (drifted off the data, "
                  "at the iteration limit) " + "; ".join(
                      f"from {init} start {c[init]['bfgs_mae']:.4f} "
                      f"({c[init]['drifted']}, {c[init]['iteration_limit']})"
                      for init in ("linear", "best")))
        print(f"  -> tables use the {check['hsic_model']} HSIC model")
        neighbors = {"kl": None, "hsic": check["n_neighbors_used"]}
        base = {}
        for c in CRITERIA:
            b = bandwidths[bw][c]
            base[c] = fit_predict(data, c, b["gamma_x"], b["gamma_y"], neighbors[c])[0]
        baselines[bw] = base
        print(f"baseline MAE ({bw} bandwidths, untransformed TGP): " + ", ".join(
            f"{c.upper()} {base[c]:.4f}" for c in CRITERIA))
        for basis in BASES:
            for crit in CRITERIA:
                name = f"{bw}/{basis}/{crit}"
                b = bandwidths[bw][crit]
                done = partial.get(f"table/{name}")
                if done is not None and done["baseline"] == base[crit]:
                    mae = np.array(done["mae"], dtype=float)
                    cells = done["cells"]
                else:
                    mae = np.full((len(degrees),) * 2, np.nan)
                    cells = {}
                    for i, d1 in enumerate(degrees):
                        for j, d2 in enumerate(degrees):
                            tr = PolynomialKernelTransform(
                                basis=basis, degree_x=d1, degree_y=d2,
                                gegenbauer_lambda=GEGENBAUER_LAMBDA,
                            )
                            mae[i, j], cells[f"{d1},{d2}"] = fit_predict(
                                data, crit, b["gamma_x"], b["gamma_y"],
                                neighbors[crit], tr)
                    partial.put(f"table/{name}", {
                        "baseline": base[crit], "mae": mae.tolist(),
                        "cells": cells})
                gain = 100.0 * (base[crit] - mae) / base[crit]
                rows = [[f"d1={d1}"] + [f"{g:+.1f}" for g in gain[i]]
                        for i, d1 in enumerate(degrees)]
                print()
                print_table(
                    f"% gain, {bw} bandwidths, {basis} basis, {crit.upper()} "
                    f"(baseline MAE {base[crit]:.4f}; rows d1 input, columns d2 "
                    f"output)", [""] + [f"d2={d2}" for d2 in degrees], rows)
                lines = describe(gain, degrees)
                for line in lines:
                    print("  " + line)
                tables[name] = {"mae": mae, "gain_percent": gain, "cells": cells}
                summary[name] = lines
                print(f"  ({timer():.0f} s so far)")

    print()
    print("Where the transforms help and where not:")
    for name, lines in summary.items():
        print(f"  {name}: {lines[0]}; {lines[1] if len(lines) > 1 else ''}")

    payload = {
        "experiment": "tgp_gain_tables",
        "settings": {"seed": args.seed, "n_train": n_train,
                     "n_test": len(data[3]), "test_stride": stride,
                     "degrees": degrees, "bandwidth_choices": list(BANDWIDTHS),
                     "median_heuristic": "gamma = 1/(2 median^2)",
                     "cv": {"folds": folds, "gamma_x_grid": list(grid_x),
                            "gamma_y_grid": list(grid_y),
                            "criterion": "MAE of the baseline TGP"},
                     "ridge": RIDGE, "gegenbauer_lambda": list(GEGENBAUER_LAMBDA),
                     "quick": args.quick, "dtype": "float64"},
        "bandwidths": bandwidths,
        "hsic_check": checks,
        "baseline_mae": baselines,
        "tables": tables,
        "summary": summary,
        "seconds": timer(),
    }
    write_json(args.out, payload)
    partial.path.unlink(missing_ok=True)  # complete: nothing left to resume
    print(f"wrote {args.out} ({timer():.0f} s)")
    return payload


if __name__ == "__main__":
    main()
