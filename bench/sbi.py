"""The inverse model's predictive on sbibm: C2ST against reference posteriors.

Issue 27's yardstick. Simulation-based inference with the generative inverse
model: for each task of :mod:`bayeskde.datasets.sbi` and each simulation
budget, ``make_sbi_pairs`` draws the training set (theta from the prior, x from
the simulator), and the model is used exactly as a user would::

    reg = InverseGPRegressor(output_prior=task.prior).fit(x, theta)
    draws = reg.sample(task.observations, 10_000, key=key)   # (10, 10000, d)

(defaults otherwise: the quadrature posterior of the kernel's parameters,
``noise="auto"``, the predictive's 100 x 100 grid for 2 parameters, the
Laplace-mixture importance sampler above; ``--sampler nuts`` runs NUTS there
instead: 4 chains a test input, 500 warm-up steps, as the default did before
2026-12-07). The line also reports the forward noise ``auto`` chose (and both
leave-one-out scores), the MAP pair's posterior mass and, for NUTS, R-hat,
bulk ESS, divergences and distinct draws. Each observation's draws are
scored by :func:`bayeskde.metrics.c2st` (sbibm's C2ST) against sbibm's 10,000
reference draws; the line reports them per observation, their mean, the fit and
sampling times (wall, and the process CPU time: on a shared machine read the
latter), and the published NPE / NLE means of Lueckmann et al.
(2021) (sbibm 1.1.0; gaussian_mixture from its rerun) for the same budget.
A figure per (task, budget) of our draws over the reference's goes to
``--out`` (pairwise panels of the first three parameters for the 10-D task).

The full references come from the sbibm 1.1.0 wheel (MIT; not installed, never
imported: it imports torch). Get it once::

    pip download --no-deps sbibm==1.1.0 -d ~/.cache/bayeskde/sbibm

or pass ``--sbibm PATH`` (the wheel, its folder, or an unpacked wheel).
``--shipped`` uses only the 1,000 draws of observation 1 that ship with
bayeskde (C2ST then 1,000 against 1,000: not comparable to the published
numbers; for smoke runs).

Usage: ``python bench/sbi.py [--tasks two_moons ...] [--budgets 1000 10000]
[--observations 1 2 ...] [--num-samples 10000] [--out DIR] [--float32]
[--npe]``. ``--npe`` also trains sbi's NPE (``pip install -e ".[bench-sbi]"``:
sbi and torch, CPU) on the same simulations in the same process, as sbibm
configures it (:func:`_npe`), and scores its draws beside ours
(``npe_sbi`` in the line: C2ST per observation, training and sampling
seconds).
One JSON line per (task, budget) on stdout (and appended to
``DIR/sbi.jsonl``).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import sys
import time
from pathlib import Path

import jax
import numpy as np

#: Published C2ST means over the 10 observations (Lueckmann et al. 2021; sbibm
#: 1.1.0, gaussian_mixture from its rerun): (npe, nle) per (task, budget).
PUBLISHED = {
    ("two_moons", 1000): (0.725, 0.773),
    ("two_moons", 10000): (0.606, 0.713),
    ("gaussian_mixture", 1000): (0.716, 0.740),
    ("gaussian_mixture", 10000): (0.615, 0.723),
    ("gaussian_linear_uniform", 1000): (0.696, 0.723),
    ("gaussian_linear_uniform", 10000): (0.553, 0.548),
}

DEFAULT_SBIBM = Path("~/.cache/bayeskde/sbibm").expanduser()
GET_WHEEL = ("pip download --no-deps sbibm==1.1.0 -d "
             "~/.cache/bayeskde/sbibm")


def _sbibm_source(path: str | None) -> Path:
    """The wheel (or folder) holding sbibm's references, or exit with what to do."""
    from bayeskde.datasets import SBIBM_VERSION

    source = Path(path).expanduser() if path else DEFAULT_SBIBM
    ok = source.is_file() or (source.is_dir() and (
        any(source.glob(f"sbibm-{SBIBM_VERSION}-*.whl"))
        or (source / "sbibm" / "tasks").is_dir()))
    if not ok:
        sys.exit(
            f"bench/sbi.py: sbibm's reference posteriors were not found at "
            f"{source}.\nThey are in the sbibm {SBIBM_VERSION} wheel (MIT, about "
            f"18 MB; it is read as a zip, never installed or imported). Get it "
            f"with\n\n    {GET_WHEEL}\n\nor pass --sbibm PATH (the wheel, its "
            f"folder, or an unpacked wheel); --shipped runs on the 1,000 draws "
            f"of observation 1 that ship with bayeskde (a smoke run).")
    return source


def _log(msg):
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def _figure(task, budget, obs_ids, draws, refs, out_dir):
    """Our draws over the reference's for the first three observations: the
    whole posterior, and (two parameters) a zoom on the reference's region
    around its first draw, where a crescent and a blob differ."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    n_show = min(3, len(obs_ids))
    d = task.dim_parameters
    pairs = [(0, 1), (0, 1)] if d == 2 else [(0, 1), (0, 2), (1, 2)]
    fig, axes = plt.subplots(len(pairs), n_show, squeeze=False,
                             figsize=(3.2 * n_show, 3.0 * len(pairs)))
    for col in range(n_show):
        ref, ours = refs[col], draws[col]
        for row, (a, b) in enumerate(pairs):
            ax = axes[row, col]
            ax.scatter(ours[:3000, a], ours[:3000, b], s=2, c="C3", alpha=0.3,
                       label="bayeskde", rasterized=True)
            ax.scatter(ref[:3000, a], ref[:3000, b], s=2, c="k", alpha=0.3,
                       label="reference", rasterized=True)
            ax.set_xlabel(f"theta_{a + 1}")
            ax.set_ylabel(f"theta_{b + 1}")
            if d == 2 and row == 1:
                radius = 0.1 * float(np.mean(task.high - task.low))
                near = ref[np.linalg.norm(ref - ref[0], axis=1) < radius]
                lo, hi = near.min(0), near.max(0)
                pad = 0.3 * (hi - lo)
                ax.set_xlim(lo[0] - pad[0], hi[0] + pad[0])
                ax.set_ylim(lo[1] - pad[1], hi[1] + pad[1])
                ax.set_title("zoom", fontsize=8)
            elif row == 0:
                ax.set_title(f"observation {obs_ids[col]}")
    axes[0, 0].legend(loc="best", markerscale=4, fontsize=7)
    fig.suptitle(f"{task.name}, {budget} simulations: InverseGPRegressor draws "
                 "over sbibm's reference", fontsize=9)
    fig.tight_layout()
    path = Path(out_dir) / f"sbi_{task.name}_{budget}.png"
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return str(path)


def _npe(task, pairs, x_o, num_samples, seed):
    """sbi's NPE on the same simulations, as sbibm runs it (its
    ``algorithms/sbi/snpe.py`` with one round: a neural spline flow of 50
    hidden features, parameters and data z-scored independently, training
    batch min(10,000, budget), sbi's default early stopping), trained once and
    sampled at every observation (amortised, as our model is; sbibm retrains
    per observation). Returns the draws ``(n_obs, num_samples, d)``, the
    training and sampling seconds and sbi's version."""
    here = str(Path(__file__).resolve().parent)
    # this script is bench/sbi.py: its folder, first on sys.path, shadows sbi
    sys.path[:] = [q for q in sys.path if str(Path(q or ".").resolve()) != here]
    import sbi
    import torch
    from sbi.inference import NPE
    from sbi.neural_nets import posterior_nn
    from sbi.utils import BoxUniform

    torch.manual_seed(seed)
    dt = torch.float32
    prior = BoxUniform(torch.as_tensor(np.array(task.low), dtype=dt),
                       torch.as_tensor(np.array(task.high), dtype=dt))
    net = posterior_nn(model="nsf", hidden_features=50, z_score_x="independent",
                       z_score_theta="independent")
    theta = torch.as_tensor(np.array(pairs.theta), dtype=dt)
    x = torch.as_tensor(np.array(pairs.x), dtype=dt)
    t0 = time.perf_counter()
    inference = NPE(prior=prior, density_estimator=net, show_progress_bars=False)
    estimator = inference.append_simulations(theta, x).train(
        training_batch_size=min(10_000, theta.shape[0]))
    posterior = inference.build_posterior(estimator)
    train_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    draws = np.stack([posterior.sample(
        (num_samples,), x=torch.as_tensor(np.array(xo), dtype=dt),
        show_progress_bars=False).numpy() for xo in x_o])
    return draws, train_s, time.perf_counter() - t0, sbi.__version__


def run(name, budget, obs_ids, num_samples, source, seed, out_dir,
        output_prior="distribution", npe=False, noise="auto", sampler="auto",
        transform="auto"):
    from bayeskde import InverseGPRegressor
    from bayeskde.datasets import make_sbi_pairs, reference_posterior, sbi_task
    from bayeskde.inverse import inverse_gp_nuts
    from bayeskde.metrics import c2st

    task = sbi_task(name)
    pairs = make_sbi_pairs(jax.random.key(seed), task, budget)
    prior = task.prior if output_prior == "distribution" else (task.low, task.high)
    reg = InverseGPRegressor(output_prior=prior, noise=noise,
                             input_transform=transform)
    t0, c0 = time.perf_counter(), time.process_time()
    reg.fit(pairs.x, pairs.theta)
    fit_s, fit_cpu = time.perf_counter() - t0, time.process_time() - c0
    _log(f"{name} {budget}: fit {fit_s:.1f} s")
    x_o = task.observations[np.asarray(obs_ids) - 1]
    t0, c0 = time.perf_counter(), time.process_time()
    if reg.n_outputs_ > 2 and sampler == "nuts":  # NUTS, with its diagnostics
        draws, srep = inverse_gp_nuts(jax.random.key(seed + 2), reg.fit_, x_o,
                                      num_samples, output_prior=prior)
    else:
        draws, srep = reg.sample(x_o, num_samples, key=jax.random.key(seed + 2)), None
    draws = np.asarray(draws)
    sample_s, sample_cpu = time.perf_counter() - t0, time.process_time() - c0
    if out_dir:
        np.savez_compressed(Path(out_dir) / f"sbi_{name}_{budget}_draws.npz",
                            draws=draws.astype(np.float32), observations=obs_ids)
    _log(f"{name} {budget}: {len(obs_ids)} x {num_samples} draws {sample_s:.1f} s")
    npe_row = None
    if npe:
        npe_draws, train_s, npe_sample_s, version = _npe(task, pairs, x_o,
                                                         num_samples, seed)
        _log(f"{name} {budget}: sbi {version} NPE train {train_s:.1f} s, "
             f"draws {npe_sample_s:.1f} s")
        if out_dir:
            np.savez_compressed(
                Path(out_dir) / f"sbi_{name}_{budget}_npe_draws.npz",
                draws=npe_draws.astype(np.float32), observations=obs_ids)
        npe_row = {"sbi_version": version, "train_s": round(train_s, 1),
                   "sample_s": round(npe_sample_s, 1), "c2st": []}
    scores, refs, c2st_s = [], [], 0.0
    for j, (i, ours) in enumerate(zip(obs_ids, draws, strict=True)):
        ref = reference_posterior(name, i, source=source)
        if ref.shape[0] > ours.shape[0]:  # as many as ours: a C2ST of unequal
            # classes scores the larger one's share (10,000 vs 2,000: 0.833)
            ref = ref[np.linspace(0, ref.shape[0] - 1, ours.shape[0]).round()
                      .astype(int)]
        refs.append(ref)
        t0 = time.perf_counter()
        scores.append(c2st(ref, ours))
        c2st_s += time.perf_counter() - t0
        line = f"{name} {budget}: observation {i} C2ST {scores[-1]:.3f}"
        if npe_row is not None:
            npe_row["c2st"].append(round(c2st(ref, npe_draws[j]), 4))
            line += f" (sbi NPE {npe_row['c2st'][-1]:.3f})"
        _log(line)
    if npe_row is not None:
        npe_row["c2st_mean"] = round(float(np.mean(npe_row["c2st"])), 4)
    rep = reg.fit_.report
    report = {k: round(float(v), 4) for k, v in rep._asdict().items()
              if isinstance(v, float | int)}
    npe, nle = PUBLISHED.get((name, budget), (None, None))
    nz = reg.fit_.noise
    noise = {"kind": nz.kind, "loo_gaussian": nz.loo_gaussian,
             "loo_residual": nz.loo_residual, "loo_difference_se":
             nz.loo_difference_se, "bandwidth": nz.bandwidth,
             "loo_heteroscedastic": nz.loo_heteroscedastic,
             "structure": (None if nz.heteroscedastic is None
                           else nz.heteroscedastic.structure),
             "map_pair_mass": round(float(np.max(reg.fit_.pair_posterior)), 4)}
    tr = reg.fit_.transform
    transform = {"kind": tr.kind, "scores": {k: round(float(v), 4)
                                             for k, v in (tr.scores or {}).items()}}
    nuts = None if srep is None else {
        "rhat_max": round(float(np.nanmax(srep.rhat)), 4),
        "ess_bulk_min": round(float(np.min(srep.ess)), 1),
        "divergences": [int(v) for v in srep.divergences],
        "distinct": [int(v) for v in srep.distinct],
        "num_chains": srep.num_chains, "num_warmup": srep.num_warmup}
    row = {
        "task": name, "budget": budget, "observations": list(obs_ids),
        "num_samples": num_samples, "n_reference": int(refs[0].shape[0]),
        "c2st": [round(s, 4) for s in scores],
        "c2st_mean": round(float(np.mean(scores)), 4),
        "npe_published": npe, "nle_published": nle,
        "fit_s": round(fit_s, 1), "sample_s": round(sample_s, 1),
        "fit_plus_sample_s": round(fit_s + sample_s, 1),
        "fit_cpu_s": round(fit_cpu, 1), "sample_cpu_s": round(sample_cpu, 1),
        "c2st_s": round(c2st_s, 1),
        "method": reg.method, "approx": getattr(reg.fit_, "approx", None),
        "fit_report": {"kind": type(rep).__name__, **report},
        "noise": noise, "transform": transform, "sampler": sampler, "nuts": nuts,
        "npe_sbi": npe_row,
        "distinct_draws_obs1": int(len(np.unique(draws[0], axis=0))),
        "output_prior": output_prior, "seed": seed,
        "precision": "float64" if jax.config.jax_enable_x64 else "float32",
        "load_avg_1min": round(os.getloadavg()[0], 2),
        "peak_rss_gb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
                             / 2**20, 2),
    }
    if out_dir:
        row["figure"] = _figure(task, budget, obs_ids, draws, refs, out_dir)
    return row


def _replot(args):
    """The figures again from ``--out``'s saved draws (no fit, no C2ST)."""
    from bayeskde.datasets import reference_posterior, sbi_task

    source = None if args.shipped else _sbibm_source(args.sbibm)
    out = []
    for budget in args.budgets:
        for name in args.tasks:
            path = Path(args.out) / f"sbi_{name}_{budget}_draws.npz"
            if not path.is_file():
                continue
            saved = np.load(path)
            obs = [int(i) for i in saved["observations"]]
            refs = [reference_posterior(name, i, source=source)
                    for i in obs[:3]]
            out.append(_figure(sbi_task(name), budget, obs, saved["draws"], refs,
                               args.out))
    print(json.dumps({"figures": out}))
    return out


def main(argv=None):
    from bayeskde.datasets import SBI_TASKS

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--tasks", nargs="+", default=list(SBI_TASKS), choices=SBI_TASKS)
    p.add_argument("--budgets", nargs="+", type=int, default=[1000, 10000])
    p.add_argument("--observations", nargs="+", type=int,
                   default=list(range(1, 11)))
    p.add_argument("--num-samples", type=int, default=10_000)
    p.add_argument("--sbibm", default=None,
                   help="the sbibm 1.1.0 wheel, its folder or an unpacked wheel "
                        f"(default {DEFAULT_SBIBM})")
    p.add_argument("--shipped", action="store_true",
                   help="observation 1's 1,000 shipped reference draws only")
    p.add_argument("--output-prior", choices=["distribution", "box"],
                   default="distribution")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", default=None, help="folder for figures and sbi.jsonl")
    p.add_argument("--replot", action="store_true",
                   help="redraw the figures from the draws saved in --out; no fit")
    p.add_argument("--float32", action="store_true")
    p.add_argument("--sampler", default="auto", choices=["auto", "nuts"],
                   help="above two parameters: reg.sample's default (the Laplace "
                        "sampler) or NUTS with its diagnostics")
    p.add_argument("--noise", default="auto",
                   choices=["auto", "gaussian", "residual", "heteroscedastic"],
                   help="the forward noise (default: chosen by leave-one-out)")
    p.add_argument("--transform", default="auto", choices=["auto", "none", "log"],
                   help="what the model describes in place of x (default: x or "
                        "log x, chosen by leave-one-out)")
    p.add_argument("--npe", action="store_true",
                   help="also train sbi's NPE on the same simulations and score "
                        "it (needs the bench-sbi extra: sbi, CPU torch)")
    args = p.parse_args(argv)
    jax.config.update("jax_enable_x64", not args.float32)
    if args.replot:
        return _replot(args)
    if args.shipped:
        source, obs, n = None, [1], min(args.num_samples, 1000)
    else:
        source = _sbibm_source(args.sbibm)
        obs, n = args.observations, args.num_samples
    if args.out:
        Path(args.out).mkdir(parents=True, exist_ok=True)
    rows = []
    for budget in args.budgets:
        for name in args.tasks:
            row = run(name, budget, obs, n, source, args.seed, args.out,
                      args.output_prior, args.npe, args.noise, args.sampler,
                      args.transform)
            print(json.dumps(row), flush=True)
            rows.append(row)
            if args.out:
                with open(Path(args.out) / "sbi.jsonl", "a") as fh:
                    fh.write(json.dumps(row) + "\n")
    return rows


if __name__ == "__main__":
    main()
