"""TGP-KL on the S-shape data: bayeskde against a plain NumPy/SciPy implementation.

Both sides fit the same model (gamma_x = 0.2, gamma_y = 20, ridge = 1e-4, the
original release's S-shape settings) on ``make_sshape(key(seed))`` and predict the
500 grid points. The peer is the original ``TGPTest.m`` loop in NumPy: per test
point u = K^-1 k_x and eta from one Cholesky factorisation, then
``scipy.optimize.minimize(method="BFGS")`` with the analytic gradient of the same
energy from the same linear-regression start and the same gradient tolerance
(1e-6). bayeskde runs ``TwinGP.predict`` (all points at once, compiled, low-rank
G^-1 with its error bound, ``truncated_whitening``). The predictions are timed
from fitted factors on both sides; the fits (the peer's two Cholesky
factorisations, bayeskde's Cholesky + ``eigh``) are timed apart and reported.
"Cold" empties JAX's compilation caches before the fit, so the timed predict
counts its own compilation.
Wall-clock and process CPU seconds are both reported (medians of ``--repeats``);
on a shared machine the CPU seconds are the steadier. Runs in float64. Prints
one JSON line.

Run: ``python bench/tgp.py [--repeats 3] [--seed 0]``.

``--user`` measures what a user meets instead, per precision (float32 and
float64): ``TwinGP`` fit + predict in a fresh process (the first call, every
compilation included) and repeated, beside the NumPy/SciPy loop (its fit +
predict) timed in the same run; medians over ``--repeats`` fresh processes,
with the float32 MAE against float64's and the BFGS iteration counts. One JSON
line per precision.

``--local-scale M`` runs the k-nearest-neighbour TGP-KL at scale instead (issue
7): M training points of the S-shape generator (``make_sshape(key(seed), M)``),
``--n-test`` noise-free test points on a uniform grid of t, ``--neighbors`` k
local neighbours, the same kernel settings. bayeskde: ``TwinGP(n_neighbors=k)``,
whose neighbour search is scikit-learn's tree on CPU (the blocked top-k scan on
accelerators) and whose local Grams are built per neighbourhood, so no M x M or
M x n_test matrix is held. The peer:
scikit-learn ``NearestNeighbors`` (k-d tree) for the neighbours, then per test
point the NumPy/SciPy local model (two Cholesky factorisations of k x k Grams)
and ``scipy.optimize.minimize(method="BFGS")`` from the same linear start. The
timed step is fit + predict on both sides. One JSON line.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time

import jax
import numpy as np
import scipy.linalg
import scipy.optimize

from bayeskde.datasets import make_sshape
from bayeskde.tgp import TwinGP, linear_init_weights
from bayeskde.tgp.neighbors import _resolve_method

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _user import (  # noqa: E402
    bench_x64,
    first_with_cache,
    fresh,
    maybe_cache,
    medians,
    timed,
)

jax.config.update("jax_enable_x64", bench_x64())

GAMMA_X, GAMMA_Y, RIDGE = 0.2, 20.0, 1e-4


def peer_fit(X, Y):
    """Cholesky factors of K = K_X + ridge I and G = K_Y + ridge I (the fit)."""
    n = len(X)
    K = np.exp(-GAMMA_X * (X[:, None, 0] - X[None, :, 0]) ** 2) + RIDGE * np.eye(n)
    G = np.exp(-GAMMA_Y * (Y[:, None, 0] - Y[None, :, 0]) ** 2) + RIDGE * np.eye(n)
    cho = scipy.linalg.cho_factor
    return cho(K, lower=True), cho(G, lower=True)


def peer_predict(factors, X, Y, Z, y0):
    """Point-by-point TGP-KL with SciPy BFGS (the original TGPTest.m loop)."""
    cK, cG = factors
    out = np.empty((len(Z), Y.shape[1]))
    for i, z in enumerate(Z):
        kx = np.exp(-GAMMA_X * (X[:, 0] - z[0]) ** 2)
        u = scipy.linalg.cho_solve(cK, kx)
        eta = 1.0 + RIDGE - kx @ u

        def energy(y, u=u, eta=eta):
            d = Y[:, 0] - y[0]
            ky = np.exp(-GAMMA_Y * d * d)
            v = scipy.linalg.cho_solve(cG, ky)
            s = 1.0 + RIDGE - ky @ v
            f = 1.0 + RIDGE - 2 * u @ ky - eta * np.log(s)
            dky = 2 * GAMMA_Y * d * ky  # d k_y / d y
            g = -2 * u @ dky + eta * 2 * (v @ dky) / s
            return f, np.array([g])

        out[i] = scipy.optimize.minimize(
            energy, y0[i], jac=True, method="BFGS", options={"gtol": 1e-6}
        ).x
    return out


def peer_local_predict(X, Y, Z, y0, k):
    """Local TGP-KL point by point: k-d tree neighbours, SciPy BFGS (TGPKNN.m)."""
    from sklearn.neighbors import NearestNeighbors

    idx = NearestNeighbors(n_neighbors=k).fit(X).kneighbors(Z)[1]
    out = np.empty((len(Z), Y.shape[1]))
    for i, z in enumerate(Z):
        Xn, Yn = X[idx[i]], Y[idx[i]]
        out[i] = peer_predict(peer_fit(Xn, Yn), Xn, Yn, z[None], y0[i:i + 1])[0]
    return out


def local_scale(args):
    """k-NN TGP-KL at M training points: bayeskde against the SciPy loop."""
    d = make_sshape(jax.random.key(args.seed), args.local_scale)
    X, Y = d.x_train[:, None], d.t_train[:, None]
    t = np.arange(args.n_test) / args.n_test
    Z = (t + 0.3 * np.sin(2 * np.pi * t))[:, None]
    k = args.neighbors

    def ours():
        tgp = TwinGP("kl", gamma_x=GAMMA_X, gamma_y=GAMMA_Y, ridge=RIDGE,
                     n_neighbors=k).fit(X, Y)
        return tgp, tgp.predict(Z)

    jax.clear_caches()
    (tgp, pred), cold, cold_cpu = _timed(ours)
    pred = pred[:, 0]  # fitted on (m, 1) outputs: predictions (n_test, 1)
    walls, cpus = [], []
    for _ in range(args.repeats):
        (tgp, pred), wall, cpu = _timed(ours)
        pred = pred[:, 0]
        walls.append(wall)
        cpus.append(cpu)
    W = np.asarray(tgp.init_weights_)
    y0 = W[0] + Z @ W[1:]
    peer_walls, peer_cpus = [], []
    for _ in range(args.peer_repeats):
        peer, wall, cpu = _timed(lambda: peer_local_predict(X, Y, Z, y0, k))
        peer_walls.append(wall)
        peer_cpus.append(cpu)
    med = statistics.median
    diff = np.abs(pred - peer[:, 0])
    # The diagnostics, untimed (predict writes nothing to the estimator).
    status = np.bincount(np.asarray(tgp.solve(Z).status), minlength=3)
    print(json.dumps({
        "bench": "tgp_local_scale",
        "n_train": len(X),
        "n_test": len(Z),
        "n_neighbors": k,
        "timed": "fit + predict (neighbour search, local factorisations, BFGS); "
                 f"medians of {args.repeats} runs (bayeskde) and "
                 f"{args.peer_repeats} (peer)",
        "bayeskde_s": med(walls),
        "bayeskde_cold_s": cold,
        "peer_s": med(peer_walls),
        "speedup": med(peer_walls) / med(walls),
        "cpu_s": {"bayeskde": med(cpus), "bayeskde_cold": cold_cpu,
                  "peer": med(peer_cpus)},
        "speedup_cpu": med(peer_cpus) / med(cpus),
        "mean_abs_diff": float(diff.mean()),
        "max_abs_diff": float(diff.max()),
        "n_points_diff_above_1e-3": int((diff > 1e-3).sum()),
        "mae_bayeskde": float(np.abs(pred - t).mean()),
        "mae_peer": float(np.abs(peer[:, 0] - t).mean()),
        "neighbour_search": _resolve_method("auto"),
        "bfgs_status_counts": status.tolist(),
        "backend": jax.default_backend(),
        "dtype": "float64",
    }))


def user_child(args):
    """In a fresh process: the first fit + predict (every compilation), then
    the repeated one, in the process's precision. One JSON line."""
    import jax.numpy as jnp

    maybe_cache()
    # The same draws in both precisions: drawn in float64 (the parent's data),
    # cast to this process's dtype (a float32 draw is another data set, whose
    # MAE differs from float64's by the draw, not by the arithmetic).
    with jax.enable_x64(True):
        d = make_sshape(jax.random.key(args.seed), n_train=500)
        X, Y, Z = (np.asarray(a)[:, None] for a in (d.x_train, d.t_train, d.x_test))
    t_test = np.asarray(d.t_test, np.float64)
    dt = np.dtype(jnp.result_type(float))
    X, Y, Z = X.astype(dt), Y.astype(dt), Z.astype(dt)

    def call():
        tgp = TwinGP("kl", gamma_x=GAMMA_X, gamma_y=GAMMA_Y, ridge=RIDGE).fit(X, Y)
        return tgp, tgp.solve(Z)

    (tgp, sol), first = timed(call)
    pred = np.asarray(sol.y)
    reps = [timed(call)[1] for _ in range(args.repeats)]
    print(json.dumps({
        "first_s": first, "repeat_s": statistics.median(reps),
        "mae": float(np.abs(pred[:, 0] - t_test).mean()),
        "n_iter_mean": float(jnp.mean(sol.n_iter)),
        "n_iter_max": int(jnp.max(sol.n_iter)),
        "status_counts": np.bincount(np.asarray(sol.status), minlength=3).tolist(),
        "whiten_rank": tgp.whiten_rank_,
        "dtype": str(pred.dtype),
        "pred": np.asarray(pred[:, 0], np.float64).tolist(),
    }))


def user(args):
    """What a user meets: ``TwinGP`` fit + predict on the S-shape data in a
    fresh process per precision (first call, compilation included, and the
    repeated call) beside the NumPy/SciPy per-point loop (fit + predict) in the
    same run; ``--repeats`` fresh processes each, medians. One JSON line per
    precision."""
    d = make_sshape(jax.random.key(args.seed), n_train=500)
    X, Y, Z = d.x_train[:, None], d.t_train[:, None], d.x_test[:, None]
    W = np.asarray(linear_init_weights(X, Y))
    y0 = W[0] + Z @ W[1:]

    def peer():
        return peer_predict(peer_fit(X, Y), X, Y, Z, y0)

    script = os.path.abspath(__file__)
    child = ["--user-child", "--repeats", "3", "--seed", str(args.seed)]
    rows, preds = {}, {}
    for prec in (32, 64):
        recs, peer_s = [], []
        for _ in range(args.repeats):
            recs.append(fresh(script, child, prec))
            peer_s.append(timed(peer)[1])
        m = medians(recs)
        cached = first_with_cache(script, child, prec)["first_s"]
        preds[prec] = np.asarray(recs[-1]["pred"])
        p = statistics.median(peer_s)
        rows[prec] = {
            "bench": "tgp_user", "precision": f"float{prec}",
            "timed": "TwinGP fit + predict, 500 S-shape points, predict 500; "
                     "first = fresh process (compilation included)",
            "bayeskde_first_s": m["first_s"], "bayeskde_repeat_s": m["repeat_s"],
            "peer_loop_s": p,
            "speedup_first": p / m["first_s"], "speedup_repeat": p / m["repeat_s"],
            "bayeskde_first_cached_s": cached,
            "speedup_first_cached": p / cached,
            "mae": m["mae"], "n_iter_mean": m["n_iter_mean"],
            "n_iter_max": m["n_iter_max"],
            "status_counts": recs[-1]["status_counts"],
            "whiten_rank": recs[-1]["whiten_rank"], "repeats": args.repeats,
        }
    rows[32]["float32_over_float64_repeat"] = (rows[32]["bayeskde_repeat_s"]
                                               / rows[64]["bayeskde_repeat_s"])
    rows[32]["mae_minus_float64"] = rows[32]["mae"] - rows[64]["mae"]
    rows[32]["mean_abs_diff_float64"] = float(np.abs(preds[32] - preds[64]).mean())
    for prec in (32, 64):
        print(json.dumps(rows[prec]), flush=True)


def _timed(fn):
    t0, c0 = time.perf_counter(), time.process_time()
    out = fn()
    return out, time.perf_counter() - t0, time.process_time() - c0


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--local-scale", type=int, default=None, metavar="M",
                        help="k-NN TGP at M training points instead")
    parser.add_argument("--n-test", type=int, default=1000)
    parser.add_argument("--neighbors", type=int, default=100)
    parser.add_argument("--peer-repeats", type=int, default=1)
    parser.add_argument("--user", action="store_true",
                        help="what a user meets: fresh processes, both precisions")
    parser.add_argument("--user-child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.user_child:
        user_child(args)
        return
    if args.user:
        user(args)
        return
    if args.local_scale is not None:
        local_scale(args)
        return
    d = make_sshape(jax.random.key(args.seed))
    X, Y, Z = d.x_train[:, None], d.t_train[:, None], d.x_test[:, None]

    def ours_fit():
        return TwinGP("kl", gamma_x=GAMMA_X, gamma_y=GAMMA_Y, ridge=RIDGE).fit(X, Y)

    # Cold: every jit cache is emptied first, so fit and predict compile afresh
    # and the timed predict pays all of its own compilation.
    cold, cold_cpu = [], []
    for _ in range(args.repeats):
        jax.clear_caches()
        tgp = ours_fit()
        ours, wall, cpu = _timed(lambda tgp=tgp: tgp.predict(Z))
        cold.append(wall)
        cold_cpu.append(cpu)
    warm, warm_cpu, fit_wall = [], [], []
    for _ in range(args.repeats):
        tgp, wall, _ = _timed(ours_fit)
        fit_wall.append(wall)
        ours, wall, cpu = _timed(lambda tgp=tgp: tgp.predict(Z))
        warm.append(wall)
        warm_cpu.append(cpu)
    y0 = np.asarray(tgp.init_weights_[0] + Z @ tgp.init_weights_[1:])
    peer_wall, peer_cpu, peer_fit_wall = [], [], []
    for _ in range(args.repeats):
        factors, wall, _ = _timed(lambda: peer_fit(X, Y))
        peer_fit_wall.append(wall)
        peer, wall, cpu = _timed(lambda f=factors: peer_predict(f, X, Y, Z, y0))
        peer_wall.append(wall)
        peer_cpu.append(cpu)
    med = statistics.median
    diff = np.abs(ours - peer)
    sol = tgp.solve(Z)  # the diagnostics, untimed
    status = np.bincount(np.asarray(sol.status), minlength=3)
    print(json.dumps({
        "bench": "tgp_sshape",
        "n_train": len(X),
        "n_test": len(Z),
        "timed": "predict of all test points from fitted factors (the peer: "
                 "500 BFGS runs); medians of --repeats runs; fit timed apart",
        "bayeskde_s": med(warm),
        "bayeskde_cold_s": med(cold),
        "peer_s": med(peer_wall),
        "speedup": med(peer_wall) / med(warm),
        "speedup_incl_compile": med(peer_wall) / med(cold),
        "fit_s": {"bayeskde": med(fit_wall), "peer": med(peer_fit_wall)},
        "cpu_s": {"bayeskde": med(warm_cpu), "bayeskde_cold": med(cold_cpu),
                  "peer": med(peer_cpu)},
        "speedup_cpu": med(peer_cpu) / med(warm_cpu),
        "speedup_cpu_incl_compile": med(peer_cpu) / med(cold_cpu),
        "mean_abs_diff": float(diff.mean()),
        "max_abs_diff": float(diff.max()),
        "n_points_diff_above_1e-3": int((diff > 1e-3).sum()),
        "mae_bayeskde": float(np.abs(ours[:, 0] - d.t_test).mean()),
        "mae_peer": float(np.abs(peer[:, 0] - d.t_test).mean()),
        "whiten_rank": tgp.whiten_rank_,
        "bfgs_status_counts": status.tolist(),
        "bfgs_max_iter": int(np.max(np.asarray(sol.n_iter))),
        "backend": jax.default_backend(),
        "dtype": "float64",
        "repeats": args.repeats,
    }))


if __name__ == "__main__":
    main()
