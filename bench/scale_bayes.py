"""The generative inverse model at scale: exact against low-rank evidence.

Workload (issue 26): ``fit_inverse_gp`` + ``inverse_gp_predictive`` on the
S-shape (``make_sshape``, d_y = 1, so HSGP features) with the model's default
prior and the fit's default method (``--method`` to change it), on m training
points. Per size and approximation, in a fresh subprocess (so that the peak
resident memory, ``ru_maxrss``, is that run's alone):

- ``fit_s``: preparation (spectra, or the low-rank statistics with the rank
  chosen from the data) plus sampling;
- ``predict_s``: the predictive of 1,000 noise-free test inputs x = f(t) on
  the even grid t = (i + 0.5) / 1000, conditioned on x* = f(t*) exactly (the
  paper's test grid), scored by ``top_mode_error`` (mean |mode 1 - t|) and
  ``best_of_2`` (mean min over the top 2 modes);
- ``crps`` and ``coverage90``: the grid predictive of 1,000 fresh noisy
  held-out points (``make_sshape`` with another key), scored exactly on the
  grid (``crps_discrete``, ``coverage_discrete``); its time is ``score_s``;
- ``peak_rss_gb``, the rank chosen, the kept spectrum and the rank's error
  indicator.

Where both approximations run (m <= ``--exact-max``) an agreement line gives
the total variation distance between the two posteriors over (rate, degree)
and the low-rank / exact ratios of CRPS and top-mode error. One JSON line per
run. The machine may be shared: each line carries the 1-minute load average
(``load1``), and timings on a loaded machine are upper bounds.

Run: ``python bench/scale_bayes.py [--sizes 500 2000 10000 100000]
[--exact-max 2000] [--float32 | --both-precisions] [--method quadrature]``.
The data are drawn in float64 in every run (JAX's generator draws other
numbers in float32), so ``--both-precisions`` compares float32 with float64
on the same points.

Measured 2026-12-03 (``--sizes 500 1000 2000 10000 100000 --method quadrature``,
float64; 2 CPU cores shared with three other sessions, load average 4-7, so
the seconds are upper bounds; HSGP rank 128 chosen at every size, indicator 0):

======  =====================  ==========  ========  ======  ======  ========
m       fit + predict s        peak GB     top mode  best 2  CRPS    cover 90
        (exact / low rank)     (low rank)
======  =====================  ==========  ========  ======  ======  ========
500     258.0 / 67.4           0.98        0.0890    0.0485  0.0962  0.908
1000    573.7 / 56.7           0.99        0.0870    0.0473  0.0961  0.913
2000    1973.3 / 25.0          0.97        0.0833    0.0450  0.0961  0.921
1e4     - / 32.6               0.97        0.0800    0.0422  0.0961  0.910
1e5     - / 47.8               1.15        0.0956    0.0414  0.0961  0.911
======  =====================  ==========  ========  ======  ======  ========

Exact against low rank: pair-posterior TV 1e-5 at m = 500, 1000 and 2000, CRPS
ratio 1.000 and top-mode error ratio 1.0007, 0.9999, 1.000. (A float32 run
then reported TV 0.071 at m = 1e5: it had drawn other data, see below.)

Measured again 2026-12-03 after the rank choice from the captured spectrum
(2 shared cores, load 5-7, seconds upper bounds): HSGP rank 32 chosen at
every size (indicator 3e-4 at m = 2000, 1.3e-3 at 1e4), the scores equal to
the rank-128 table's to 4 digits: m = 2000 top mode 0.0833, best of 2 0.0450,
CRPS 0.0961, coverage 0.921; 1e4 0.0800, 0.0422, 0.0961, 0.910; 1e5 0.0956,
0.0414, 0.0961, 0.911 (fit + predict 45.6 s, 1.16 GB). Exact against the
data-chosen rank at m = 2000 (quadrature posteriors only): pair-posterior TV
5.9e-5.

Float32 against float64 at m = 1e5 (``--both-precisions``, the same points):
pair-posterior TV 0.00095, CRPS ratio 1.000, coverage 0.911 both, best of 2
0.0404 / 0.0414; the top-mode error ratio 1.045 is the argmax of a flat or
tied density: the sorted mode sets agree to 4e-5 (median), and the 90 of
1,000 test points whose top mode moves are where two branches tie or the
density is flat near the fold (t in 0.62-0.70, the top mode sliding along the
plateau). The TV 0.071 of the earlier float32 run came from the data: JAX's
generator draws other numbers under JAX_ENABLE_X64=0, so that run fitted
another sample (now every run draws in float64).

Measured 2026-12-04 on 2 idle cores (load 1.5; ``--sizes 100000 --method
quadrature --exact-max 0 --both-precisions``), after the residual noise
density was capped at 4,000 residuals (``RESIDUAL_MAX`` of
``bayeskde.inverse.noise``: the uncapped ``noise="auto"`` made this run
time out at 900 s per precision, its bandwidth search O(48 m^2)): m = 1e5
fit + predict 20.7 s float64 (16.4 + 4.3) at 1.47 GB peak, 18.0 s float32
at 1.54 GB; top mode 0.0956 / 0.0999, best of 2 0.0414 / 0.0405, CRPS
0.0961 both, coverage 0.911 both; float32 against float64 pair-posterior TV
0.00042, CRPS ratio 1.000. Against m = 1e4 (26.0 s, top mode 0.0800, best of
2 0.0422, CRPS 0.0961): best of 2 improves, CRPS is flat at the noise floor
(the S-shape's true-posterior CRPS, ``bench/inverse_defaults.py``), and the
top-mode error is worse (0.096 vs 0.080): the argmax of the bimodal
predictive near the fold, where the two branches' masses tie (above).

SVI against NUTS (``method="svi"``, S-shape m = 500, float64, low rank):
pair-posterior TV to the quadrature posterior 0.0083 (NUTS 0.0098), fit
14.0 s against NUTS's 21.8 s and quadrature's 16.8 s.

The two-joint planar arm (``--task planar2 --sizes 2000 --n-test 200``,
float64, quadrature, 2026-12-04, 2 cores at load 1.7): exact against low rank
(Nystroem, rank 256 chosen from the data, indicator 0.042) pair-posterior TV
0.00107, CRPS ratio 1.0027 (0.2788 / 0.2796), top-mode re-simulation error
ratio 1.000 (0.00155 both; best of 2 0.0013 both), coverage 0.878 / 0.865;
fit + predict 237.8 s at 15.9 GB peak (exact: 72 Grams of 2000 x 2000 and
their eigenvectors) against 41.9 s at 1.34 GB.

The Gibbs KDE posterior, exact against Nystroem (``--kde-gibbs``, float64):
m = 500 TV 0.061 / 0.029 / 0.0032 with 50 / 100 / 200 centres, the same MAP
(width, ridge), held-out loss 0.4804 exact against 0.4819 / 0.4801 / 0.4804;
m = 2000 with 200 centres TV 0.0 (both posteriors on one setting at tau = 1),
the same MAP, held-out loss 0.4860 both, 124.1 s exact against 18.7 s.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time

import numpy as np


def run_one(args):
    """One fit + predict; prints one JSON line and saves the pair posterior."""
    import jax

    from bayeskde.datasets import make_sshape
    from bayeskde.inverse import fit_inverse_gp, inverse_gp_predictive
    from bayeskde.metrics import best_of_k_error, coverage_discrete, crps_discrete

    # The draws in float64 whatever the working precision: JAX's generator
    # gives other numbers in float32, and a float32 run must see the same data
    # as the float64 run it is compared with.
    with jax.enable_x64(True):
        d = jax.tree.map(np.asarray, make_sshape(jax.random.key(0), args.m))
        held = jax.tree.map(np.asarray, make_sshape(jax.random.key(1000),
                                                    args.n_test))
    t = (np.arange(args.n_test) + 0.5) / args.n_test
    xt = t + 0.3 * np.sin(2 * np.pi * t)
    kw = dict(approx=args.approx, progress_bar=False)
    if args.method:
        kw["method"] = args.method
    t0 = time.perf_counter()
    fit = fit_inverse_gp(jax.random.key(1), d.x_train, d.t_train, **kw)
    t_fit = time.perf_counter() - t0
    t0 = time.perf_counter()
    pred = inverse_gp_predictive(fit, xt, k=3, noisy_inputs=False)
    t_pred = time.perf_counter() - t0
    top = np.abs(pred.modes[:, 0, 0] - t)
    best2 = np.asarray(best_of_k_error(pred.modes[:, :2, 0], t))
    t0 = time.perf_counter()
    ph = inverse_gp_predictive(fit, held.x_train, k=1, refine=False)
    t_score = time.perf_counter() - t0
    p = np.exp(ph.log_probs)
    row = {"task": "sshape", "m": args.m, "approx": fit.approx,
           "method": args.method or "default", "dtype": str(fit.data.X.dtype),
           "fit_s": round(t_fit, 1), "predict_s": round(t_pred, 1),
           "fit_predict_s": round(t_fit + t_pred, 1), "score_s": round(t_score, 1),
           "peak_rss_gb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
                                / 2**20, 3),
           "top_mode_error": round(float(top.mean()), 5),
           "best_of_2": round(float(best2.mean()), 5),
           "crps": round(float(np.mean(crps_discrete(ph.support[:, 0], p,
                                                     held.t_train))), 5),
           "coverage90": round(float(np.mean(coverage_discrete(
               ph.support[:, 0], p, held.t_train, 0.9))), 4)}
    if fit.rank is not None:
        row.update(features=fit.rank.features, rank=fit.rank.rank,
                   ranks_tried=list(fit.rank.tried), n_kept=fit.rank.n_kept,
                   rank_error_bound=round(fit.rank.error_bound[-1], 4))
    row["load1"] = round(os.getloadavg()[0], 2)
    np.savez(args.save, pair_posterior=fit.pair_posterior, top=top.mean(),
             crps=row["crps"], modes=np.asarray(pred.modes[..., 0]),
             masses=np.asarray(pred.mode_masses))
    print(json.dumps(row), flush=True)


def run_planar2(args):
    """One fit + predict on the two-joint planar arm (d_y = 2, so Nystroem
    features on the low-rank path), through the public estimator as a user
    calls it: ``InverseGPRegressor(approx=...)``, ``predict_modes(Z, 2)``,
    ``sample(Z, 400)``. Scores: re-simulation error of the top mode and the
    best of 2 (||f(y_hat) - x*||), CRPS and 90% coverage of the draws per
    joint angle (``bench/inverse_defaults.py``'s definitions). One JSON line;
    saves the pair posterior."""
    import jax
    from inverse_defaults import sample_scores, task_planar2

    from bayeskde import InverseGPRegressor

    X, Y, Z, Yt, fwd = task_planar2(0, args.m, args.n_test)
    t0 = time.perf_counter()
    reg = InverseGPRegressor(key=jax.random.key(1), approx=args.approx,
                             method=args.method or "quadrature",
                             progress_bar=False).fit(X, Y)
    t_fit = time.perf_counter() - t0
    t0 = time.perf_counter()
    modes = reg.predict_modes(Z, 2).modes
    draws = reg.sample(Z, 400, key=jax.random.key(2))
    t_pred = time.perf_counter() - t0
    e_top = np.linalg.norm(fwd(modes[:, 0]) - Z, axis=1)
    e_2 = np.minimum(e_top, np.linalg.norm(fwd(modes[:, 1]) - Z, axis=1))
    crps, cov = sample_scores(draws, Yt)
    fit = reg.fit_
    row = {"task": "planar2", "m": args.m, "approx": fit.approx,
           "method": args.method or "quadrature", "dtype": str(fit.data.X.dtype),
           "fit_s": round(t_fit, 1), "predict_s": round(t_pred, 1),
           "fit_predict_s": round(t_fit + t_pred, 1),
           "peak_rss_gb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
                                / 2**20, 3),
           "top_mode_error": round(float(e_top.mean()), 5),
           "best_of_2": round(float(e_2.mean()), 5),
           "crps": round(crps, 5), "coverage90": round(cov, 4)}
    if fit.rank is not None:
        row.update(features=fit.rank.features, rank=fit.rank.rank,
                   rank_error_bound=round(fit.rank.error_bound[-1], 4))
    row["load1"] = round(os.getloadavg()[0], 2)
    np.savez(args.save, pair_posterior=fit.pair_posterior, top=e_top.mean(),
             crps=row["crps"])
    print(json.dumps(row), flush=True)


def prepare_run(args):
    """The low-rank data pass and posterior alone (no ArviZ, no predictive):
    :func:`bayeskde.inverse.rank.prepare_for_fit` (the statistics
    sharded over every device and streamed in chunks, the rank chosen from
    the data) and the quadrature posterior, on the S-shape at size m. One
    JSON line: seconds, devices, host and device peak memory, the rank."""
    import jax

    from bayeskde.datasets import make_sshape
    from bayeskde.inverse import InverseGPPrior, quadrature_posterior
    from bayeskde.inverse.rank import prepare_for_fit

    with jax.enable_x64(True):
        d = jax.tree.map(np.asarray, make_sshape(jax.random.key(0), args.m))
    prior = InverseGPPrior()
    t0 = time.perf_counter()
    data, rep = prepare_for_fit(jax.random.key(1), d.x_train, d.t_train, prior,
                                "lowrank")
    t_prep = time.perf_counter() - t0
    t0 = time.perf_counter()
    q = quadrature_posterior(jax.random.key(1), data, prior)
    t_post = time.perf_counter() - t0
    stats = getattr(jax.devices()[0], "memory_stats", lambda: None)() or {}
    print(json.dumps({
        "task": "sshape_prepare", "m": args.m, "backend": jax.default_backend(),
        "devices": jax.device_count(), "dtype": str(data.X.dtype),
        "prepare_s": round(t_prep, 1), "posterior_s": round(t_post, 1),
        "rank": rep.rank, "ranks_tried": list(rep.tried),
        "rank_error_bound": rep.error_bound[-1], "captured": rep.captured,
        "pair_posterior_max": round(float(q.pair_posterior.max()), 4),
        "peak_rss_gb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
                             / 2**20, 3),
        "device_peak_gb": round(stats.get("peak_bytes_in_use", 0) / 2**30, 3),
        "load1": round(os.getloadavg()[0], 2)}), flush=True)


def kde_gibbs_run(args):
    """The Gibbs KDE posterior (:func:`bayeskde.models.kde_gibbs_posterior`)
    exact against low rank on the S-shape (x -> t): one JSON line.

    Exact: every m x m input Gram eigendecomposed, the output coordinates the
    KPCA components of the output RBF Gram L above 1e-10 of the largest.
    Low rank: Nystroem input spectra on ``--kde-centres`` uniformly drawn
    centres and, as output coordinates, the Nystroem KPCA of L on as many
    centres (centred Nystroem features on their principal axes). Both
    score the same (m, m) loss 2 - 2 L on the same width and ridge grids; the
    line gives the TV between the two posteriors over (width, ridge), each
    MAP, and the held-out loss of each model average (pre-image among the
    training outputs, 1,000 fresh points).
    """
    import jax
    import jax.numpy as jnp

    from bayeskde.datasets import make_sshape
    from bayeskde.kpca import kernel_pca, kpca_transform
    from bayeskde.lowrank import nystroem_features, nystroem_transform, select_centers
    from bayeskde.models import kde_gibbs_posterior, kde_grid_bma_features, kde_spectra

    with jax.enable_x64(True):
        d = jax.tree.map(np.asarray, make_sshape(jax.random.key(0), args.m))
        held = jax.tree.map(np.asarray, make_sshape(jax.random.key(1000),
                                                    args.n_test))
    x, t, xs, ts = (a[:, None] for a in (d.x_train, d.t_train, held.x_train,
                                          held.t_train))
    m, M = args.m, args.kde_centres
    D2, D2s = (x - x.T) ** 2, (xs - x.T) ** 2
    gam = 1.0 / np.median((t - t.T)[np.triu_indices(m, 1)] ** 2)
    L = np.exp(-gam * (t - t.T) ** 2)
    loss = 2.0 - 2.0 * L
    sigmas = np.sqrt(np.median(D2[np.triu_indices(m, 1)])) * np.array(
        [0.03, 0.1, 0.3, 1.0, 3.0])
    log_ridges = np.linspace(np.log(1e-8), np.log(10.0), 19)
    K_test = np.exp(-D2s[None] / (2.0 * sigmas[:, None, None] ** 2))
    ts_loss = 2.0 - 2.0 * np.exp(-gam * (ts - t.T) ** 2)  # (n_test, m)

    def run(spectra, T, K_te):
        post = kde_gibbs_posterior(spectra, T, loss, log_ridges)
        F = np.asarray(kde_grid_bma_features(spectra, K_te, T, post.ridges,
                                             post.grid_weights))
        j = np.argmin(np.sum(T * T, 1)[None] - 2.0 * F @ np.asarray(T).T, axis=1)
        return post, float(np.mean(ts_loss[np.arange(len(j)), j]))

    t0 = time.perf_counter()
    kp = kernel_pca(jnp.asarray(L))
    ev = np.asarray(kp.eigenvalues)
    T_all = np.asarray(kpca_transform(kp, jnp.asarray(L)))[:, ev > 1e-10 * ev[0]]
    ex, ex_loss = run(kde_spectra(D2, T_all, sigmas), T_all, K_test)
    t_ex = time.perf_counter() - t0
    t0 = time.perf_counter()
    k_in, k_out = jax.random.split(jax.random.key(2))
    c = np.sort(np.asarray(select_centers(k_in, x, M)))
    c_out = np.asarray(select_centers(k_out, t, M))
    rbf = {"gamma": float(gam)}
    Phi = np.asarray(nystroem_transform(
        "rbf", nystroem_features("rbf", t[c_out], params=rbf), t, params=rbf))
    # the Nystroem KPCA: the centred features rotated onto their principal
    # axes (distances kept), the negligible ones dropped as for the exact
    s_out, V_out = np.linalg.eigh((Phi - Phi.mean(0)).T @ (Phi - Phi.mean(0)))
    T_low = (Phi - Phi.mean(0)) @ V_out[:, s_out > 1e-10 * s_out[-1]]
    lr, lr_loss = run(kde_spectra(D2[:, c], T_low, sigmas, solver="nystroem",
                                  centers=c), T_low, K_test[:, :, c])
    t_lr = time.perf_counter() - t0
    pe, pl = (np.asarray(p.probs, np.float64) for p in (ex, lr))

    def map_of(p):
        g, r = np.unravel_index(int(np.argmax(p)), p.shape)
        return [round(float(sigmas[g]), 5), float(np.exp(log_ridges[r]))]

    print(json.dumps({
        "task": "sshape_kde_gibbs", "m": m, "centres": M,
        "posterior_tv": round(float(0.5 * np.abs(pe - pl).sum()), 5),
        "map_exact": map_of(pe), "map_lowrank": map_of(pl),
        "heldout_loss_exact": round(ex_loss, 5),
        "heldout_loss_lowrank": round(lr_loss, 5),
        "exact_s": round(t_ex, 1), "lowrank_s": round(t_lr, 1),
        "dtype": str(np.asarray(ex.probs).dtype),
        "load1": round(os.getloadavg()[0], 2)}), flush=True)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="+",
                    default=[500, 2000, 10000, 100000])
    ap.add_argument("--exact-max", type=int, default=2000)
    ap.add_argument("--n-test", type=int, default=1000)
    ap.add_argument("--method", default=None, choices=("nuts", "quadrature"))
    ap.add_argument("--task", default="sshape", choices=("sshape", "planar2"),
                    help="the S-shape (d_y = 1, HSGP) or the two-joint planar "
                         "arm (d_y = 2, Nystroem)")
    ap.add_argument("--float32", action="store_true")
    ap.add_argument("--both-precisions", action="store_true",
                    help="run the low-rank fits in float64 and float32 too and "
                         "print their agreement")
    ap.add_argument("--kde-gibbs", action="store_true",
                    help="instead: the Gibbs KDE posterior, exact against "
                         "Nystroem, at each size (one process)")
    ap.add_argument("--kde-centres", type=int, default=200)
    ap.add_argument("--prepare-only", action="store_true",
                    help="instead: the low-rank data pass and quadrature "
                         "posterior alone at each size (bench/gpu_bayes.sh)")
    ap.add_argument("--timeout", type=float, default=3600.0,
                    help="seconds per run before it is reported as a timeout")
    # internal: one run in this process
    ap.add_argument("--one", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--m", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--approx", default="auto", help=argparse.SUPPRESS)
    ap.add_argument("--save", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.one:
        return (run_planar2 if args.task == "planar2" else run_one)(args)
    if args.kde_gibbs or args.prepare_only:
        for m in args.sizes:
            args.m = m
            (kde_gibbs_run if args.kde_gibbs else prepare_run)(args)
        return None
    envs = {p: {**os.environ, "JAX_ENABLE_X64": "1" if p == "float64" else "0"}
            for p in ("float64", "float32")}
    env = envs["float32" if args.float32 else "float64"]
    base = [sys.executable, os.path.abspath(__file__), "--one", "--n-test",
            str(args.n_test), "--task", args.task] + (
                ["--method", args.method] if args.method else [])
    tmp = tempfile.mkdtemp(prefix="scale_bayes_")
    for m in args.sizes:
        rows = {}
        runs = [(a, env) for a in (("exact", "lowrank") if m <= args.exact_max
                                   else ("lowrank",))]
        if args.both_precisions:
            runs.append(("lowrank32", envs["float32"]))
        for approx, env_run in runs:
            save = os.path.join(tmp, f"{m}_{approx}.npz")
            try:
                out = subprocess.run(base + ["--m", str(m), "--approx",
                                             approx.removesuffix("32"),
                                             "--save", save], env=env_run,
                                     capture_output=True, text=True,
                                     timeout=args.timeout)
            except subprocess.TimeoutExpired:
                print(json.dumps({"task": args.task, "m": m, "approx": approx,
                                  "error": f"timeout after {args.timeout} s"}),
                      flush=True)
                continue
            line = [ln for ln in out.stdout.splitlines() if ln.startswith("{")]
            if out.returncode or not line:
                print(json.dumps({"task": args.task, "m": m, "approx": approx,
                                  "error": out.stderr[-1500:]}), flush=True)
                continue
            print(line[-1], flush=True)
            rows[approx] = (json.loads(line[-1]), np.load(save))
        if "lowrank" in rows and "lowrank32" in rows and args.task == "sshape":
            (r64, n64), (r32, n32) = rows["lowrank"], rows["lowrank32"]
            # the same modes in another order where their masses tie: the
            # top mode's error is then a coin flip between the branches
            flip = np.abs(n64["modes"][:, 0] - n32["modes"][:, 0]) > 0.05
            gap = np.abs(n64["masses"][:, 0] - n64["masses"][:, 1])
            print(json.dumps({
                "task": "sshape", "m": m, "precision_agreement": True,
                "sorted_modes_diff_p50": round(float(np.median(np.max(np.abs(
                    np.sort(n64["modes"], 1) - np.sort(n32["modes"], 1)),
                    axis=1))), 6),
                "top_mode_flips": int(flip.sum()),
                "flips_max_mass_gap": round(float(gap[flip].max()), 4)
                if flip.any() else 0.0,
                "pair_posterior_tv": round(float(0.5 * np.abs(
                    n64["pair_posterior"] - n32["pair_posterior"]).sum()), 5),
                "crps_ratio": round(r32["crps"] / r64["crps"], 4),
                "top_mode_error_ratio": round(r32["top_mode_error"]
                                              / r64["top_mode_error"], 4),
            }), flush=True)
        if "exact" in rows and "lowrank" in rows:
            (re_, ne), (rl, nl) = rows["exact"], rows["lowrank"]
            print(json.dumps({
                "task": args.task, "m": m, "agreement": True,
                "pair_posterior_tv": round(float(0.5 * np.abs(
                    ne["pair_posterior"] - nl["pair_posterior"]).sum()), 5),
                "crps_ratio": round(rl["crps"] / re_["crps"], 4),
                "top_mode_error_ratio": round(rl["top_mode_error"]
                                              / re_["top_mode_error"], 4),
                "speedup_fit_predict": round(re_["fit_predict_s"]
                                             / rl["fit_predict_s"], 2),
            }), flush=True)


if __name__ == "__main__":
    main()
