"""Calibration of the inverse model's posteriors on sbibm's tasks: expected
coverage and simulation-based calibration over held-out simulations.

Per task: ``--budget`` (1,000) simulations train ``InverseGPRegressor`` with
the task's prior as its output prior and its defaults otherwise; then ``R``
(200) further pairs (theta_i, x_i), theta_i from the prior and x_i simulated
from it, are each inverted to ``L`` (1,000) posterior draws in one call. Two
checks, neither with a peer (the reference is calibration itself):

- **Expected coverage** (sbi's ``expected_coverage``, Hermans et al. 2022,
  "A trust crisis in simulation-based inference?"): for each level 1 - a the
  share of the R true parameters inside the posterior's highest-density
  region of mass 1 - a, the region read off the ranks of the posterior's log
  density at its own draws against its log density at theta_i
  (:func:`bayeskde.inverse.predictive_log_density`, normalisation not
  needed). A calibrated posterior's curve is the diagonal; below it is
  overconfident. The 95% band is the binomial interval of R at each level.
- **SBC per parameter** (Talts et al. 2018): the rank of theta_i,j among the
  L draws of parameter j, with the ECDF-difference curves and their 95%
  simultaneous band (:func:`bayeskde.infer.sbc_ecdf_band`, Saeilynoja et al.
  2022). The draws are importance resamples (d_y > 2) or grid draws (d_y <= 2),
  not independent: the ranks are thinned to ``--thin`` draws.

Prints one JSON line per task (fit and sampling seconds, the largest
distance of the coverage curve below and above the diagonal, the levels
outside the band, whether every SBC curve stays in its band) and, with
``--out DIR``, writes ``sbi_coverage_<task>.png``.

Run: ``python bench/sbi_coverage.py [--tasks two_moons slcp ...]
[--budget 1000] [--replications 200] [--draws 1000] [--out DIR]
[--float32]``.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import jax
import numpy as np
from scipy import stats

LEVELS = np.linspace(0.05, 0.95, 19)


def expected_coverage(lp_true, lp_draws, levels=LEVELS):
    """Share of true parameters inside each HPD region: theta_i is inside the
    region of mass q when the share of draws with a higher density than
    theta_i's is below q. ``lp_true`` ``(R,)``, ``lp_draws`` ``(R, L)``."""
    above = np.mean(lp_draws > lp_true[:, None], axis=1)  # (R,)
    return np.array([np.mean(above < q) for q in levels])


def binomial_band(R, levels=LEVELS, prob=0.95):
    lo = stats.binom.ppf((1 - prob) / 2, R, levels) / R
    hi = stats.binom.ppf(1 - (1 - prob) / 2, R, levels) / R
    return lo, hi


def run(name, budget, R, L, thin, seed, out_dir):
    from bayeskde import InverseGPRegressor
    from bayeskde.datasets import make_sbi_pairs, sbi_task
    from bayeskde.infer import sbc_ecdf_band
    from bayeskde.inverse import (
        inverse_gp_predictive,
        inverse_gp_sample,
        predictive_log_density,
    )

    task = sbi_task(name)
    train = make_sbi_pairs(jax.random.key(seed), task, budget)
    held = make_sbi_pairs(jax.random.key(seed + 1000), task, R)
    reg = InverseGPRegressor(output_prior=task.prior)
    t0 = time.perf_counter()
    reg.fit(train.x, train.theta)
    fit_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    d = task.prior.event_shape[0] if task.prior.event_shape else 1
    kw = dict(n_particles=max(256, L // 2)) if d > 2 else {}
    pred = inverse_gp_predictive(reg.fit_, held.x, output_prior=task.prior,
                                 refine=False, **kw)
    draws = np.asarray(inverse_gp_sample(jax.random.key(seed + 2), reg.fit_, held.x,
                                         L, predictive=pred))
    lp_draws = np.asarray(predictive_log_density(pred, draws, held.x))
    lp_true = np.asarray(
        predictive_log_density(pred, held.theta[:, None], held.x))[:, 0]
    sample_s = time.perf_counter() - t0
    cov = expected_coverage(lp_true, lp_draws)
    lo, hi = binomial_band(R)
    sub = draws[:, ::thin]
    ranks = np.sum(sub < held.theta[:, None, :], axis=1)  # (R, d)
    band = sbc_ecdf_band(jax.random.key(seed + 3), ranks, sub.shape[1])
    row = {
        "task": name, "budget": budget, "replications": R, "draws": L,
        "precision": "float64" if jax.config.jax_enable_x64 else "float32",
        "fit_s": round(fit_s, 1), "sample_s": round(sample_s, 1),
        "noise": reg.fit_.noise.kind,
        "coverage": [round(float(c), 3) for c in cov],
        "levels": [round(float(q), 2) for q in LEVELS],
        "max_below": round(float(np.max(LEVELS - cov)), 3),
        "max_above": round(float(np.max(cov - LEVELS)), 3),
        "levels_outside_band": int(np.sum((cov < lo) | (cov > hi))),
        "sbc_inside": [bool(b) for b in band.inside],
        "median_ess": (float(np.median(pred.ess)) if pred.ess is not None else None),
    }
    if out_dir:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        fig, ax = plt.subplots(1, 2, figsize=(9, 4))
        ax[0].fill_between(LEVELS, lo, hi, color="0.85", label="95% band")
        ax[0].plot(LEVELS, cov, "o-", label="inverse GP")
        ax[0].plot([0, 1], [0, 1], "k:", lw=1)
        ax[0].set(xlabel="credibility level", ylabel="expected coverage",
                  title=f"{name}, {budget} simulations")
        ax[0].legend()
        ax[1].fill_between(band.z, band.lower, band.upper, color="0.85")
        for j, curve in enumerate(band.ecdf_diff):
            ax[1].plot(band.z, curve, label=f"theta {j + 1}")
        ax[1].set(xlabel="fractional rank", ylabel="ECDF difference", title="SBC")
        ax[1].legend(fontsize=7)
        fig.tight_layout()
        fig.savefig(Path(out_dir) / f"sbi_coverage_{name}.png", dpi=110)
        plt.close(fig)
    return row


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--tasks", nargs="+", default=["two_moons", "slcp", "sir"])
    p.add_argument("--budget", type=int, default=1000)
    p.add_argument("--replications", type=int, default=200)
    p.add_argument("--draws", type=int, default=1000)
    p.add_argument("--thin", type=int, default=10)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", default=None)
    p.add_argument("--float32", action="store_true")
    args = p.parse_args(argv)
    jax.config.update("jax_enable_x64", not args.float32)
    if args.out:
        Path(args.out).mkdir(parents=True, exist_ok=True)
    rows = []
    for name in args.tasks:
        row = run(name, args.budget, args.replications, args.draws, args.thin,
                  args.seed, args.out)
        print(json.dumps(row), flush=True)
        rows.append(row)
    return rows


if __name__ == "__main__":
    main()
