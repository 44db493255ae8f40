"""% gain of learned polynomial kernel transforms for Twin GPs on the S-shape data.

Seed 001 (polynomial kernel transformations, section 5), the gain tables: for
degrees d1 (input) and d2 (output) in 1..6, both bases (monomial; Gegenbauer with
the seed's lambda_1 = 0.51, lambda_2 = 0.52) and both TGP criteria (KL, HSIC),

    gain = 100 (baseline MAE - learned MAE) / baseline MAE,

where the baseline is the untransformed TGP with the same criterion and the same
bandwidths. Bandwidths by the median heuristic, gamma = 1 / (2 median^2) of the
pairwise training distances (inputs and outputs separately), as in the paper;
ridge = 1e-4 (the KL criterion's; HSIC has none). The paper's CV bandwidths are
not reproduced here.

Data: ``make_sshape(key(seed))``, 500 training points; to keep the 144 fits in a
few minutes every second test point of the grid is used (250 of 500). d1 = d2 = 1
reproduces the baseline (gain 0) and is a check.

HSIC with local models. The original code runs HSIC-TGP on k-nearest-neighbour
local models; before the tables the script compares HSIC with 50 neighbours, the
global HSIC model and the linear-regression start. If the local model is worse
than the start it is not a sensible baseline and the global HSIC model is used;
which one was used is printed and recorded.

Run ``python models/tgp_gain_tables.py`` (about 5 minutes) or ``--quick``
(degrees 1..2, 100 training points).
"""

from __future__ import annotations

import warnings

import numpy as np

# models/ is a folder of scripts, not a package: run them from anywhere.
from _common import Timer, enable_x64, parse_args, print_table, write_json

BASES = ("monomial", "gegenbauer")
CRITERIA = ("kl", "hsic")
GEGENBAUER_LAMBDA = (0.51, 0.52)
RIDGE = 1e-4
HSIC_NEIGHBORS = 50
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
                         n_neighbors=n_neighbors, transform=transform).fit(X, Y)
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


def check_hsic_local(data, gx, gy) -> dict:
    """HSIC with local models vs global vs the linear start; which to use."""
    from bayeskde.tgp import linear_init_weights

    X, Y, Z, T = data
    W = np.asarray(linear_init_weights(X, Y))
    start = _mae(W[0] + Z @ W[1:], T)
    k = min(HSIC_NEIGHBORS, len(X))
    local = fit_predict(data, "hsic", gx, gy, n_neighbors=k)[0]
    glob = fit_predict(data, "hsic", gx, gy)[0]
    use_local = bool(np.isfinite(local) and local < start)
    return {"linear_start_mae": start, "local_mae": local, "n_neighbors": k,
            "global_mae": glob, "kl_global_mae": None,
            "hsic_model": f"local ({k} neighbours)" if use_local else "global",
            "n_neighbors_used": k if use_local else None}


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


def main(argv=None) -> dict:
    args = parse_args("tgp_gain_tables", __doc__.splitlines()[0], None, argv)
    enable_x64()
    import jax

    from bayeskde.datasets import make_sshape
    from bayeskde.kernels.transforms import PolynomialKernelTransform

    timer = Timer()
    n_train, stride = (100, 5) if args.quick else (500, 2)
    degrees = [1, 2] if args.quick else [1, 2, 3, 4, 5, 6]
    d = make_sshape(jax.random.key(args.seed), n_train)
    data = (d.x_train[:, None], d.t_train[:, None], d.x_test[::stride, None],
            d.t_test[::stride])
    gx, gy = median_gamma(d.x_train), median_gamma(d.t_train)
    print(f"S-shape, seed {args.seed}: {n_train} training points, "
          f"{len(data[3])} test points (every {stride}th of the 500-point grid); "
          f"median heuristic gamma_x = {gx:.4g}, gamma_y = {gy:.4g}; ridge {RIDGE:g}")

    check = check_hsic_local(data, gx, gy)
    print(f"HSIC check: linear start MAE {check['linear_start_mae']:.4f}, HSIC with "
          f"{check['n_neighbors']} neighbours {check['local_mae']:.4f}, global HSIC "
          f"{check['global_mae']:.4f} -> tables use the {check['hsic_model']} model")
    neighbors = {"kl": None, "hsic": check["n_neighbors_used"]}

    baseline = {c: fit_predict(data, c, gx, gy, neighbors[c])[0] for c in CRITERIA}
    check["kl_global_mae"] = baseline["kl"]
    print("baseline MAE (untransformed TGP): " + ", ".join(
        f"{c.upper()} {baseline[c]:.4f}" for c in CRITERIA))

    tables, summary = {}, {}
    for basis in BASES:
        for crit in CRITERIA:
            name = f"{basis}/{crit}"
            mae = np.full((len(degrees),) * 2, np.nan)
            cells = {}
            for i, d1 in enumerate(degrees):
                for j, d2 in enumerate(degrees):
                    tr = PolynomialKernelTransform(
                        basis=basis, degree_x=d1, degree_y=d2,
                        gegenbauer_lambda=GEGENBAUER_LAMBDA,
                    )
                    mae[i, j], cells[f"{d1},{d2}"] = fit_predict(
                        data, crit, gx, gy, neighbors[crit], tr)
            gain = 100.0 * (baseline[crit] - mae) / baseline[crit]
            rows = [[f"d1={d1}"] + [f"{g:+.1f}" for g in gain[i]]
                    for i, d1 in enumerate(degrees)]
            print()
            print_table(
                f"% gain, {basis} basis, {crit.upper()} criterion "
                f"(baseline MAE {baseline[crit]:.4f}; rows d1 input, columns d2 "
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
                     "degrees": degrees, "gamma_x": gx, "gamma_y": gy,
                     "bandwidths": "median heuristic, gamma = 1/(2 median^2)",
                     "ridge": RIDGE, "gegenbauer_lambda": list(GEGENBAUER_LAMBDA),
                     "quick": args.quick, "dtype": "float64"},
        "hsic_check": check,
        "baseline_mae": baseline,
        "tables": tables,
        "summary": summary,
        "seconds": timer(),
    }
    write_json(args.out, payload)
    print(f"wrote {args.out} ({timer():.0f} s)")
    return payload


if __name__ == "__main__":
    main()
