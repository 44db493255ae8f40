"""Kernel ridge / KDE at scale: exact vs low-rank bayeskde vs scikit-learn.

Data: ``sklearn.datasets.make_friedman1`` with 8 input features (5 informative,
uniform on [0, 1]) and noise 1.0; targets standardised with the training mean and
deviation. The test set is 2000 fresh noise-free points (seed 1), so the loss,
the test mean squared error, measures the regression function recovered. The
kernel is exp(-gamma ||x - y||^2) with ``--gamma`` (default 1.0), and the ridge
follows bayeskde's convention: the exact system is K + m ridge I (``--ridge``,
default 1e-5); a KDE with the linear output kernel and the linear pre-image is
exactly this regression (Weston et al. 2002, eqs. (3), (6)).

Per problem size m (``--sizes``), each in a fresh subprocess so that the peak
resident memory (``ru_maxrss``) belongs to that size alone:

- bayeskde low-rank: centres (``--centers``: ``sklearn``, the default, takes
  the uniform draw scikit-learn's ``Nystroem`` makes with the same seed,
  ``RandomState(seed).permutation(m)[:M]``, so both sides fit the same Nystroem
  estimator and the comparison measures the solver; or bayeskde's
  ``select_centers`` with ``uniform``, ``kmeans++`` or ``leverage``) and
  ``falkon`` (preconditioned CG on the Nystroem system, Rudi et al. 2017) with
  ``--n-centers`` M (default 1000) and ``--block-size`` (default: K_nM formed once
  when m M fits in ``--max-block-mb``, else streamed by row blocks);
- bayeskde exact (m <= ``--exact-max``, default 10^4): the Gram and
  ``bayeskde.kde.ridge_solve`` (one Cholesky), and at m = 10^4 the
  ``KernelDependencyEstimator(solver="falkon")`` facade on the same problem;
- scikit-learn peer (m <= ``--peer-max``, default 10^5): ``Nystroem(n_components=M,
  gamma)`` + ``Ridge(alpha=m ridge, fit_intercept=False)``: the same Nystroem
  estimator at the same rank.

Bayesian KDE evidence (``--evidence-centers`` M_e, default 300; 0 skips it), in
a child process of its own: ``kde_spectra(solver="nystroem")`` on 5 widths around
sqrt(1 / (2 gamma)) with the standardised target as the one output coordinate
(the linear output kernel), its time (``evidence_spectra_s``, O(G m M_e^2)), the
median time of one gradient of the grid model's log density
(``evidence_grad_ms``, O(G M_e p)), and for m <= ``--evidence-exact-max``
(default 3000) the posterior against exact spectra (``evidence_max_abs_diff_p_
sigma``, ``evidence_mean_log_ridge_diff_in_sd``).

Times are medians of ``--repeats`` runs after one warm-up call (bayeskde's
compile time is reported apart). Every run is float64 unless ``--float32``.
One JSON line per size, then a summary line with the log-log slope of time against
m for each method and the targets: loss within 2% of exact at m = 10^4; at
m = 10^5 under 120 s, at least 3x faster than scikit-learn and no worse a loss.
On a shared machine the wall times are noisy; the CPU times are reported too.

Run: ``python bench/scale.py [--quick] [--sizes 1000 10000 100000]``.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time

import numpy as np


def data(m: int, seed: int = 0):
    from sklearn.datasets import make_friedman1

    X, y = make_friedman1(m, n_features=8, noise=1.0, random_state=seed)
    Xt, yt = make_friedman1(2000, n_features=8, noise=0.0, random_state=1)
    mu, sd = y.mean(), y.std()
    return X, (y - mu) / sd, Xt, (yt - mu) / sd


def _timed(fn, repeats):
    """(first-call seconds, median wall, median CPU, last result)."""
    t0 = time.perf_counter()
    out = fn()
    first = time.perf_counter() - t0
    walls, cpus = [], []
    for _ in range(repeats):
        t0, c0 = time.perf_counter(), time.process_time()
        out = fn()
        walls.append(time.perf_counter() - t0)
        cpus.append(time.process_time() - c0)
    return first, statistics.median(walls), statistics.median(cpus), out


def _peak_mb():
    import jax

    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0  # KiB -> MiB
    dev = None
    stats = getattr(jax.devices()[0], "memory_stats", lambda: None)()
    if stats and "peak_bytes_in_use" in stats:
        dev = stats["peak_bytes_in_use"] / 2**20
    return round(rss, 1), None if dev is None else round(dev, 1)


def run_one(args) -> dict:
    """One problem size (runs in a child process)."""
    import jax

    if not args.float32:
        jax.config.update("jax_enable_x64", True)
    import jax.numpy as jnp

    from bayeskde import KernelDependencyEstimator
    from bayeskde.kde import ridge_solve
    from bayeskde.kernels.registry import make_kernel
    from bayeskde.lowrank import falkon, krr_predict, select_centers

    m = args.m
    X, y, Xt, yt = data(m, args.seed)
    dtype = jnp.float64 if not args.float32 else jnp.float32
    Xj, yj, Xtj = (jnp.asarray(a, dtype) for a in (X, y[:, None], Xt))
    M = min(args.n_centers, m)
    params = {"gamma": args.gamma}
    bs = args.block_size
    if bs is None and m * M * (4 if args.float32 else 8) > args.max_block_mb * 2**20:
        bs = max(1, int(args.max_block_mb * 2**20 // (M * (4 if args.float32 else 8))))
    key = jax.random.key(args.seed)

    def lowrank():
        if args.centers == "sklearn":
            idx = np.random.RandomState(args.seed).permutation(m)[:M]
        else:
            idx = select_centers(key, Xj, M, method=args.centers, kernel="rbf",
                                 params=params, ridge=args.ridge)
        fit = falkon("rbf", Xj, yj, Xj[idx], args.ridge, params=params,
                     block_size=bs, max_iter=args.max_iter)
        pred = krr_predict("rbf", fit, Xtj, params=params, block_size=4096)
        return jax.block_until_ready(pred), fit

    first, wall, cpu, (pred, fit) = _timed(lowrank, args.repeats)
    row = {
        "m": m, "n_centers": M, "centers": args.centers, "block_size": bs,
        "dtype": str(jnp.dtype(dtype)), "backend": jax.default_backend(),
        "devices": jax.device_count(),
        "bayeskde_s": round(wall, 3), "bayeskde_cpu_s": round(cpu, 3),
        "bayeskde_compile_s": round(max(first - wall, 0.0), 3),
        "bayeskde_loss": float(np.mean((np.asarray(pred)[:, 0] - yt) ** 2)),
        "falkon_iters": int(fit.n_iter),
    }
    if m <= args.exact_max:
        kern = make_kernel("rbf", params)

        def exact():
            K = kern.gram(Xj)
            beta = ridge_solve(K, yj, args.ridge)
            return jax.block_until_ready(kern.gram(Xtj, Xj) @ beta)

        efirst, ewall, ecpu, epred = _timed(exact, max(1, args.repeats - 2))
        row.update({
            "exact_s": round(ewall, 3), "exact_cpu_s": round(ecpu, 3),
            "exact_loss": float(np.mean((np.asarray(epred)[:, 0] - yt) ** 2)),
        })
        row["loss_rel_to_exact"] = row["bayeskde_loss"] / row["exact_loss"] - 1.0
        row["speedup_vs_exact"] = row["exact_s"] / row["bayeskde_s"]
        if m == args.kde_at:
            kde = KernelDependencyEstimator(
                "rbf", params, "linear", ridge=args.ridge, preimage="linear",
                solver="falkon", n_centers=M,
                centers="uniform" if args.centers == "sklearn" else args.centers,
                block_size=bs, max_iter=args.max_iter, key=key)
            t0 = time.perf_counter()
            kpred = kde.fit(X, y[:, None]).predict(Xt)
            row["kde_falkon_s"] = round(time.perf_counter() - t0, 3)
            row["kde_falkon_loss"] = float(np.mean((kpred[:, 0] - yt) ** 2))
    if m <= args.peer_max:
        from sklearn.kernel_approximation import Nystroem
        from sklearn.linear_model import Ridge
        from sklearn.pipeline import make_pipeline

        def peer():
            model = make_pipeline(
                Nystroem(gamma=args.gamma, n_components=M, random_state=args.seed),
                Ridge(alpha=m * args.ridge, fit_intercept=False))
            return model.fit(X, y).predict(Xt)

        _, pwall, pcpu, ppred = _timed(peer, max(1, args.repeats - 2))
        row.update({
            "sklearn_s": round(pwall, 3), "sklearn_cpu_s": round(pcpu, 3),
            "sklearn_loss": float(np.mean((ppred - yt) ** 2)),
        })
        row["speedup_vs_sklearn"] = row["sklearn_s"] / row["bayeskde_s"]
        row["cpu_speedup_vs_sklearn"] = row["sklearn_cpu_s"] / row["bayeskde_cpu_s"]
        row["loss_vs_sklearn"] = row["bayeskde_loss"] / row["sklearn_loss"] - 1.0
    row["peak_rss_mb"], row["peak_device_mb"] = _peak_mb()
    row["repeats"] = args.repeats
    return row


def run_evidence(args) -> dict:
    """The GP-evidence grid KDE (the reference model of ``bench/kde_evidence.py``;
    the library's Bayesian KDE is the Gibbs posterior, which shares these
    spectra) on Nystroem spectra at this m (a child of its own, so its peak
    memory is apart): precomputation and gradient times,
    and for m <= ``--evidence-exact-max`` the posterior against exact spectra."""
    import jax

    if not args.float32:
        jax.config.update("jax_enable_x64", True)
    import jax.numpy as jnp
    from kde_evidence import bayesian_kde_grid_model, kde_grid_log_joint
    from numpyro.infer.util import log_density
    from sklearn.metrics.pairwise import euclidean_distances

    from bayeskde.models import BayesianKDEGridPrior, kde_spectra

    m = args.m
    X, y, _, _ = data(m, args.seed)
    M = min(args.evidence_centers, m)
    idx = np.random.RandomState(args.seed).permutation(m)[:M]
    T = (y - y.mean())[:, None]  # the linear output kernel's one KPCA coordinate
    sig = np.sqrt(0.5 / args.gamma) * np.array([0.5, 0.7, 1.0, 1.4, 2.0])
    D2c = euclidean_distances(X, X[idx], squared=True)

    def spectra():
        sp = kde_spectra(D2c, T, sig, solver="nystroem", centers=idx)
        return jax.block_until_ready(sp)

    first, wall, _, sp = _timed(spectra, 1)
    prior = BayesianKDEGridPrior()

    @jax.jit
    def potential(z):
        return log_density(bayesian_kde_grid_model, (sp, prior, "shared"), {},
                           {"log_ridge_std": z})[0]

    grad = jax.jit(jax.grad(potential))
    z = jnp.zeros(len(sig))
    jax.block_until_ready(grad(z))
    times = []
    for _ in range(20):
        t0 = time.perf_counter()
        jax.block_until_ready(grad(z))
        times.append(time.perf_counter() - t0)
    out = {"n_centers": M, "grid": len(sig), "spectra_s": round(wall, 3),
           "spectra_compile_s": round(max(first - wall, 0.0), 3),
           "grad_ms": round(1e3 * statistics.median(times), 3)}
    lr = np.linspace(-16.0, 0.0, 161)
    lj = np.asarray(kde_grid_log_joint(sp, lr), np.float64)
    P = np.exp(lj - lj.max())
    P /= P.sum()
    out["map_sigma"] = float(sig[np.argmax(P.sum(1))])
    out["post_mean_log_ridge"] = float((P.sum(0) * lr).sum())
    if m <= args.evidence_exact_max:
        D2 = euclidean_distances(X, squared=True)
        t0 = time.perf_counter()
        ex = jax.block_until_ready(kde_spectra(D2, T, sig))
        out["exact_spectra_s"] = round(time.perf_counter() - t0, 3)
        le = np.asarray(kde_grid_log_joint(ex, lr), np.float64)
        Q = np.exp(le - le.max())
        Q /= Q.sum()
        mean = float((Q.sum(0) * lr).sum())
        sd = float(np.sqrt((Q.sum(0) * lr**2).sum() - mean**2))
        out["exact_post_mean_log_ridge"] = mean
        out["max_abs_diff_p_sigma"] = float(np.max(np.abs(P.sum(1) - Q.sum(1))))
        out["mean_log_ridge_diff_in_sd"] = (out["post_mean_log_ridge"] - mean) / sd
    out["peak_rss_mb"] = _peak_mb()[0]
    return out


def _slope(rows, key):
    pts = [(r["m"], r[key]) for r in rows if r.get(key)]
    if len(pts) < 2:
        return None
    m, t = np.log(np.array(pts, dtype=float)).T
    return round(float(np.polyfit(m, t, 1)[0]), 3)


def summary(rows, args) -> dict:
    out = {
        "summary": True,
        "slope_bayeskde": _slope(rows, "bayeskde_s"),
        "slope_exact": _slope(rows, "exact_s"),
        "slope_sklearn": _slope(rows, "sklearn_s"),
        "slope_evidence_spectra": _slope(rows, "evidence_spectra_s"),
        "slope_evidence_grad": _slope(rows, "evidence_grad_ms"),
        "sizes": [r["m"] for r in rows],
        "n_centers": args.n_centers,
    }
    by_m = {r["m"]: r for r in rows}
    if 10_000 in by_m and "exact_loss" in by_m[10_000]:
        rel = by_m[10_000]["loss_rel_to_exact"]
        out["m1e4_loss_rel_to_exact"] = rel
        out["m1e4_within_2pct"] = bool(rel <= 0.02)
    if 100_000 in by_m:
        r = by_m[100_000]
        out["m1e5_bayeskde_s"] = r["bayeskde_s"]
        out["m1e5_under_120s"] = bool(r["bayeskde_s"] + r["bayeskde_compile_s"] < 120)
        if "sklearn_s" in r:
            out["m1e5_speedup_vs_sklearn"] = r["speedup_vs_sklearn"]
            out["m1e5_3x_faster"] = bool(r["speedup_vs_sklearn"] >= 3.0)
            # Same centres, same estimator: "no worse" up to the CG tolerance.
            out["m1e5_loss_vs_sklearn"] = r["loss_vs_sklearn"]
            out["m1e5_loss_no_worse"] = bool(r["loss_vs_sklearn"] <= 1e-3)
    return out


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--sizes", type=int, nargs="+",
                   default=[1000, 3000, 10_000, 30_000, 100_000])
    p.add_argument("--quick", action="store_true",
                   help="sizes 500 1000 2000, 100 centres, 1 repeat")
    p.add_argument("--n-centers", type=int, default=2000)
    p.add_argument("--centers", default="sklearn",
                   choices=["sklearn", "uniform", "kmeans++", "leverage"])
    p.add_argument("--gamma", type=float, default=1.0)
    p.add_argument("--ridge", type=float, default=1e-5)
    p.add_argument("--max-iter", type=int, default=50)
    p.add_argument("--block-size", type=int, default=None)
    p.add_argument("--max-block-mb", type=float, default=2048.0,
                   help="stream K_nM by row blocks when it would exceed this")
    p.add_argument("--exact-max", type=int, default=10_000)
    p.add_argument("--peer-max", type=int, default=100_000)
    p.add_argument("--kde-at", type=int, default=10_000)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--float32", action="store_true")
    p.add_argument("--out", default=None, help="also write the JSON lines here")
    p.add_argument("--evidence-centers", type=int, default=300,
                   help="Nystroem centres of the Bayesian KDE evidence (0: skip)")
    p.add_argument("--evidence-exact-max", type=int, default=3000,
                   help="compare the evidence with exact spectra up to this m")
    p.add_argument("--m", type=int, default=None, help=argparse.SUPPRESS)
    p.add_argument("--evidence-only", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.m is not None:  # child: one size
        out = run_evidence(args) if args.evidence_only else run_one(args)
        print(json.dumps(out), flush=True)
        return
    if args.quick:
        args.sizes, args.n_centers, args.repeats = [500, 1000, 2000], 100, 1
        args.kde_at = 1000
    rows, lines = [], []
    passthrough = [a for a in (argv if argv is not None else sys.argv[1:])
                   if a != "--quick"]
    for m in args.sizes:
        cmd = [sys.executable, os.path.abspath(__file__), *passthrough, "--m", str(m)]
        if args.quick:
            cmd += ["--n-centers", "100", "--repeats", "1", "--kde-at", "1000"]
        proc = subprocess.run(cmd, capture_output=True, text=True)
        if proc.returncode != 0:
            row = {"m": m, "error": proc.stderr[-2000:]}
        else:
            row = json.loads(proc.stdout.strip().splitlines()[-1])
            if args.evidence_centers > 0:
                ev = subprocess.run(cmd + ["--evidence-only"], capture_output=True,
                                    text=True)
                if ev.returncode != 0:
                    row["evidence_error"] = ev.stderr[-2000:]
                else:
                    last = json.loads(ev.stdout.strip().splitlines()[-1])
                    row.update({f"evidence_{k}": v for k, v in last.items()})
            rows.append(row)
        lines.append(json.dumps(row))
        print(lines[-1], flush=True)
    lines.append(json.dumps(summary(rows, args)))
    print(lines[-1], flush=True)
    if args.out:
        with open(args.out, "w") as fh:
            fh.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
