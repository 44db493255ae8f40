"""Cross-validated KDE on the digit reconstruction task: bayeskde vs scikit-learn.

Weston et al. (2002), section 4.3: predict the bottom half of an 8x8 digit from its
top half. Data: scikit-learn's bundled digits, the first 100 images of each digit
in the data set's order, pixels / 16, top 4 rows (32 pixels) -> bottom 4 rows. The
training set is the first ``--n-train`` of those 1000 images (200: the first block
of a contiguous 5-fold split). The CV grid is a contiguous 5-fold CV on that set
over the input RBF width sigma in PAPER_SIGMAS x (median input distance), 7 values,
times the ridge gamma in PAPER_RIDGES, 6 values. The output kernel is an RBF with a
fixed width, the median output distance; the pre-images are the training outputs
of the fold and the loss is ||Phi(y) - Phi(y_hat)||^2 = 2 - 2 l(y, y_hat).

Both sides get the same folds and the same grid:

- bayeskde: the 7 input Grams (``input_gram_grid``), the output Gram, then
  ``kde_cv_losses`` (one eigendecomposition per (sigma, fold), every ridge reusing
  it). A first call is timed apart (``bayeskde_warmup_s``; ``bayeskde_compile_s``
  is it minus the median run); the timed runs include building the Grams.
- scikit-learn: per fold ``KernelPCA(kernel="rbf", n_components=None)`` on the
  training outputs (all components with non-zero eigenvalue, as bayeskde keeps),
  then for every (sigma, ridge) ``KernelRidge(alpha=m_train * gamma, kernel="rbf")``
  onto the projections, the nearest training projection (``pairwise_distances``)
  and its output-kernel loss.

The check runs in float64 (this script, never the library, turns on x64): the same
selected (sigma, ridge), and the largest relative difference of the mean-loss grids.
bayeskde is also timed in float32 (and its selection compared with the float64 one).
Times are medians of interleaved runs: wall, plus process CPU time, which shrugs off
other load on a shared machine. BLAS/LAPACK threads are capped at ``--blas-threads``
(default 1) on both sides. Prints one JSON line; ``--profile`` adds a second with
where bayeskde's float64 time goes: the Grams, the jitted per-fold-group calls that
``kde_cv_losses`` makes (``bayeskde.kde.cv._fold_group``), and, as a floor, one bare
batched ``eigh`` of the same number and size of training Grams.

``--user``: ``KernelDependencyEstimator`` as a user meets it, per precision:
300 digits top -> bottom with built-in RBF kernels (output rate 0.1), the first
fit + predict of 400 in a fresh process (compilation included) and the repeated
one, and a 5-fold CV over 3 input rates x 3 ridges done with the estimator
itself as the first thing a fresh process does; beside scikit-learn's
KernelPCA + KernelRidge + nearest-candidate composition doing the same in the
same run (BLAS threads as ``--blas-threads``): warm in the parent process, and,
for the CV loop, also as the first work of its own fresh process
(``speedup_cv_both_fresh``; imports excluded on both sides). One JSON line per
precision.

Run: ``python bench/kde.py [--repeats 3] [--n-train 200] [--blas-threads 1]
[--profile]``.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import statistics
import sys
import time

import jax
import jax.numpy as jnp
import numpy as np
from sklearn.datasets import load_digits
from sklearn.decomposition import KernelPCA
from sklearn.kernel_ridge import KernelRidge
from sklearn.metrics import pairwise_distances
from sklearn.model_selection import KFold
from threadpoolctl import threadpool_limits

from bayeskde.apps.protocols import PAPER_RIDGES, PAPER_SIGMAS
from bayeskde.kde import input_gram_grid, kde_cv_losses, kfold_indices
from bayeskde.kernels.registry import make_kernel

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _user import (  # noqa: E402
    bench_x64,
    first_with_cache,
    fresh,
    maybe_cache,
    medians,
)
from _user import timed as timed_one  # noqa: E402

# The check runs in float64; the bench script (never the library) turns it on.
jax.config.update("jax_enable_x64", bench_x64())

N_FOLDS = 5


def digit_halves(n_per_digit: int = 100) -> tuple[np.ndarray, np.ndarray]:
    """Top and bottom halves (32 pixels each) of the first images of each digit."""
    digits = load_digits()
    keep = np.sort(np.concatenate([
        np.flatnonzero(digits.target == k)[:n_per_digit] for k in range(10)
    ]))
    images = digits.images[keep] / 16.0
    n = len(keep)
    return images[:, :4].reshape(n, 32), images[:, 4:].reshape(n, 32)


def median_distance(Z: np.ndarray) -> float:
    """Median pairwise Euclidean distance (the fixed widths; not timed)."""
    d = pairwise_distances(Z)
    return float(np.median(d[np.triu_indices(len(Z), k=1)]))


def run_bayeskde(X, Y, sigmas, gamma_y, folds):
    """The whole CV grid with bayeskde, Gram construction included."""
    K_grid = input_gram_grid("rbf", [{"sigma": s} for s in sigmas], X)
    L = make_kernel("rbf", {"gamma": gamma_y}).gram(jnp.asarray(Y))
    return kde_cv_losses(K_grid, L, PAPER_RIDGES, folds).mean_loss


def run_sklearn(X, Y, sigmas, gamma_y, folds):
    """The same grid as a composition of scikit-learn estimators."""
    losses = np.zeros((len(folds), len(sigmas), len(PAPER_RIDGES)))
    for f, (tr, va) in enumerate(folds):
        m = len(tr)
        T = KernelPCA(kernel="rbf", gamma=gamma_y).fit_transform(Y[tr])
        for i, s in enumerate(sigmas):
            for j, ridge in enumerate(PAPER_RIDGES):
                krr = KernelRidge(alpha=m * ridge, kernel="rbf", gamma=0.5 / s**2)
                F = krr.fit(X[tr], T).predict(X[va])
                idx = pairwise_distances(F, T).argmin(axis=1)
                d2 = np.sum((Y[va] - Y[tr][idx]) ** 2, axis=1)
                losses[f, i, j] = np.mean(2.0 - 2.0 * np.exp(-gamma_y * d2))
    return losses.mean(axis=0)


def timed(fns: dict, repeats: int) -> dict:
    """Median wall and CPU (process, all threads) seconds of each function.

    The functions run interleaved, one call of each per round, so that a change in
    the machine's load during the run hits every side alike. Results are pulled to
    NumPy inside the timing (that synchronises JAX). Returns ``{name: (wall, cpu,
    last result)}``.
    """
    wall = {k: [] for k in fns}
    cpu = {k: [] for k in fns}
    out = {}
    for _ in range(repeats):
        for name, fn in fns.items():
            t0, c0 = time.perf_counter(), time.process_time()
            out[name] = jax.tree.map(np.asarray, fn())
            wall[name].append(time.perf_counter() - t0)
            cpu[name].append(time.process_time() - c0)
    return {
        k: (statistics.median(wall[k]), statistics.median(cpu[k]), out[k])
        for k in fns
    }


def profile_bayeskde(X, Y, sigmas, gamma_y, folds, repeats):
    """Median time of each stage of ``run_bayeskde`` (float64, warm, synchronised).

    Mirrors ``kde_cv_losses`` with all output components: the Grams and the loss
    matrix, then one call of the library's jitted ``_fold_group`` per group of
    equal-sized folds (everything else of the CV grid happens in those calls). The
    floor is one compiled batched ``eigh`` of the same training Grams, as many and as
    large as those calls decompose. ``fold_group_matches_library`` checks that the
    mirrored calls give the library's mean-loss grid.
    """
    # Private: the profile follows the library's internals, the bench proper doesn't.
    from bayeskde.kde import loss_matrix_from_kernel
    from bayeskde.kde.cv import _fold_group

    def grams():
        K_grid = input_gram_grid("rbf", [{"sigma": s} for s in sigmas], X)
        L = make_kernel("rbf", {"gamma": gamma_y}).gram(jnp.asarray(Y))
        return K_grid, L, loss_matrix_from_kernel(L)

    K_grid, L, loss = grams()
    ridges = jnp.asarray(PAPER_RIDGES, K_grid.dtype)
    groups: dict[tuple[int, int], list[int]] = {}
    for f, (tr, va) in enumerate(folds):
        groups.setdefault((len(tr), len(va)), []).append(f)
    idx = [
        (jnp.asarray(np.stack([folds[f][0] for f in members])),
         jnp.asarray(np.stack([folds[f][1] for f in members])))
        for members in groups.values()
    ]
    # The training Grams of every (fold, sigma), batched per fold group.
    K_trs = [
        jnp.concatenate([K_grid[:, tr][:, :, tr] for tr in np.asarray(trs)])
        for trs, _ in idx
    ]
    eigh = jax.jit(jnp.linalg.eigh)
    stages = {
        "grams_and_loss": grams,
        "fold_group_calls": lambda: [
            _fold_group(K_grid, L, loss, trs, vas, ridges, None) for trs, vas in idx
        ],
        "eigh_floor": lambda: [eigh(K) for K in K_trs],
        "whole_library": lambda: run_bayeskde(X, Y, sigmas, gamma_y, folds),
    }
    for fn in stages.values():
        jax.block_until_ready(fn())
    res = timed(stages, repeats)
    fold_losses = np.concatenate(res["fold_group_calls"][2])
    order = np.argsort(np.concatenate([members for members in groups.values()]))
    mirrored = fold_losses[order].mean(axis=0)
    library = res["whole_library"][2]
    out = {k: {"wall_s": w, "cpu_s": c} for k, (w, c, _) in res.items()}
    out["eigh_floor"]["shapes"] = [list(K.shape) for K in K_trs]
    out["fold_group_matches_library"] = bool(
        np.allclose(mirrored, library, rtol=1e-10, atol=1e-12)
    )
    return out


USER_RATES = (0.05, 0.1, 0.2)
USER_RIDGES = (1e-4, 1e-3, 1e-2)
USER_GAMMA_Y = 0.1


def _user_data():
    from bayeskde.datasets import load_digits_halves

    h = load_digits_halves()
    return h.top[:300], h.bottom[:300], h.top[300:700]


def _sk_fit_predict(Xtr, Ytr, Xte, rate, ridge):
    """scikit-learn's composition: KernelPCA + KernelRidge + nearest candidate."""
    T = KernelPCA(kernel="rbf", gamma=USER_GAMMA_Y).fit_transform(Ytr)
    F = KernelRidge(alpha=len(Xtr) * ridge, kernel="rbf", gamma=rate).fit(
        Xtr, T).predict(Xte)
    return Ytr[pairwise_distances(F, T).argmin(axis=1)]


def _our_fit_predict(Xtr, Ytr, Xte, rate, ridge):
    from bayeskde import KernelDependencyEstimator

    return KernelDependencyEstimator(
        "rbf", {"gamma": rate}, "rbf", {"gamma": USER_GAMMA_Y}, ridge=ridge
    ).fit(Xtr, Ytr).predict(Xte)


def _cv_loop(fit_predict, X, Y):
    """5-fold CV over the 3 x 3 grid (rate x ridge): mean RBF output loss."""
    losses = np.zeros((len(USER_RATES), len(USER_RIDGES)))
    for tr, va in KFold(N_FOLDS).split(X):
        for (i, rate), (j, ridge) in itertools.product(enumerate(USER_RATES),
                                                       enumerate(USER_RIDGES)):
            P = np.asarray(fit_predict(X[tr], Y[tr], X[va], rate, ridge), float)
            d2 = np.sum((Y[va] - P) ** 2, axis=1)
            losses[i, j] += np.mean(2.0 - 2.0 * np.exp(-USER_GAMMA_Y * d2))
    return losses / N_FOLDS


def user_child(args):
    """One fresh process: ``--user-child first`` times the first fit + predict
    (300 -> 400) and then the repeated one; ``--user-child cv`` times the CV loop
    as the first thing the process does. One JSON line."""
    maybe_cache()
    X, Y, Xt = _user_data()
    if args.user_child == "sklearn-cv":  # the peer, as the first work of its process
        with threadpool_limits(args.blas_threads or None):
            _, wall = timed_one(lambda: _cv_loop(_sk_fit_predict, X, Y))
        print(json.dumps({"cv_s": wall}))
        return
    if args.user_child == "cv":
        with threadpool_limits(args.blas_threads or None):
            grid, wall = timed_one(lambda: _cv_loop(_our_fit_predict, X, Y))
        print(json.dumps({"cv_s": wall, "grid": grid.tolist()}))
        return
    with threadpool_limits(args.blas_threads or None):
        _, first = timed_one(lambda: _our_fit_predict(X, Y, Xt, 0.1, 1e-3))
        reps = [timed_one(lambda: _our_fit_predict(X, Y, Xt, 0.1, 1e-3))[1]
                for _ in range(3)]
    print(json.dumps({"first_s": first, "repeat_s": statistics.median(reps)}))


def user(args):
    """KernelDependencyEstimator as a user meets it, per precision, beside
    scikit-learn's composition in the same run (``--repeats`` fresh processes
    each, medians). One JSON line per precision."""
    X, Y, Xt = _user_data()
    script = os.path.abspath(__file__)
    extra = ["--blas-threads", str(args.blas_threads)]
    sk_grid = None
    for prec in (32, 64):
        firsts, cvs, sk_one, sk_cv, sk_cv_fresh = [], [], [], [], []
        for _ in range(args.repeats):
            firsts.append(fresh(script, ["--user-child", "first", *extra], prec))
            cvs.append(fresh(script, ["--user-child", "cv", *extra], prec))
            sk_cv_fresh.append(
                fresh(script, ["--user-child", "sklearn-cv", *extra], prec)["cv_s"])
            with threadpool_limits(args.blas_threads or None):
                one = timed_one(lambda: _sk_fit_predict(X, Y, Xt, 0.1, 1e-3))
                sk_one.append(one[1])
                sk_grid, wall = timed_one(lambda: _cv_loop(_sk_fit_predict, X, Y))
                sk_cv.append(wall)
        f, c = medians(firsts), medians(cvs)
        cached = first_with_cache(script, ["--user-child", "first", *extra], prec)
        cv_cached = first_with_cache(script, ["--user-child", "cv", *extra], prec)
        med = statistics.median
        ours_grid = np.asarray(cvs[-1]["grid"])
        print(json.dumps({
            "bench": "kde_user", "precision": f"float{prec}",
            "timed": "300 digits top -> bottom, predict 400; CV: 5 folds x 3 "
                     "rates x 3 ridges, fresh process; sklearn: KernelPCA + "
                     "KernelRidge + nearest candidate",
            "bayeskde_first_s": f["first_s"], "bayeskde_repeat_s": f["repeat_s"],
            "sklearn_s": med(sk_one),
            "speedup_first": med(sk_one) / f["first_s"],
            "speedup_repeat": med(sk_one) / f["repeat_s"],
            "bayeskde_cv_fresh_s": c["cv_s"], "sklearn_cv_s": med(sk_cv),
            "speedup_cv_fresh": med(sk_cv) / c["cv_s"],
            # both sides as the first work of a fresh process (imports excluded)
            "sklearn_cv_fresh_s": med(sk_cv_fresh),
            "speedup_cv_both_fresh": med(sk_cv_fresh) / c["cv_s"],
            "bayeskde_first_cached_s": cached["first_s"],
            "speedup_first_cached": med(sk_one) / cached["first_s"],
            "bayeskde_cv_fresh_cached_s": cv_cached["cv_s"],
            "speedup_cv_fresh_cached": med(sk_cv) / cv_cached["cv_s"],
            "same_cv_selection": bool(np.argmin(ours_grid) == np.argmin(sk_grid)),
            "blas_threads": args.blas_threads, "repeats": args.repeats,
        }), flush=True)


def main() -> None:
    """Parse the arguments and run the benchmark."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--n-train", type=int, default=200)
    parser.add_argument("--profile", action="store_true")
    parser.add_argument(
        "--blas-threads", type=int, default=1,
        help="BLAS/LAPACK threads of numpy, scipy and JAX's CPU LAPACK, both sides "
        "(default 1: these are 160 x 160 problems; 0 leaves the environment's)",
    )
    parser.add_argument("--user", action="store_true",
                        help="KernelDependencyEstimator as a user meets it: fresh "
                        "processes, both precisions, a CV loop")
    parser.add_argument("--user-child", choices=("first", "cv", "sklearn-cv"),
                        help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.user_child:
        user_child(args)
        return
    if args.user:
        user(args)
        return
    with threadpool_limits(args.blas_threads or None):
        bench(args)


def best_index(grid: np.ndarray) -> tuple[int, int]:
    """(setting, ridge) of the smallest mean loss, first on ties (as CVResult)."""
    i, j = np.unravel_index(int(np.argmin(grid)), grid.shape)
    return int(i), int(j)


def bench(args) -> None:
    """Run both sides on the same folds and grid; print the JSON line(s)."""
    X_all, Y_all = digit_halves()
    X, Y = X_all[: args.n_train], Y_all[: args.n_train]
    sigmas = [s * median_distance(X) for s in PAPER_SIGMAS]
    gamma_y = 0.5 / median_distance(Y) ** 2
    folds = list(KFold(N_FOLDS).split(X))
    assert all(  # the library's own contiguous folds, passed explicitly to both
        np.array_equal(a, c) and np.array_equal(b, d)
        for (a, b), (c, d) in zip(folds, kfold_indices(len(X), N_FOLDS), strict=True)
    )
    data = (X, Y, sigmas, gamma_y, folds)

    t0 = time.perf_counter()
    np.asarray(run_bayeskde(*data))
    warmup_s = time.perf_counter() - t0
    sides = {"bayeskde": run_bayeskde, "sklearn": run_sklearn}
    res = timed({k: lambda f=f: f(*data) for k, f in sides.items()}, args.repeats)
    (bk_s, bk_cpu, bk_loss), (sk_s, sk_cpu, sk_loss) = res["bayeskde"], res["sklearn"]
    profile = profile_bayeskde(*data, args.repeats) if args.profile else None

    jax.config.update("jax_enable_x64", False)
    t0 = time.perf_counter()
    np.asarray(run_bayeskde(*data))
    warmup32_s = time.perf_counter() - t0
    bk32_s, bk32_cpu, bk32_loss = timed(
        {"bayeskde": lambda: run_bayeskde(*data)}, args.repeats
    )["bayeskde"]
    jax.config.update("jax_enable_x64", True)

    (bi, bj), (si, sj) = best_index(bk_loss), best_index(sk_loss)
    rel = np.abs(bk_loss - sk_loss) / np.maximum(np.abs(sk_loss), 1e-12)
    print(json.dumps({
        "bench": "kde_cv_reconstruction",
        "n_train": len(X),
        "grid": [len(sigmas), len(PAPER_RIDGES)],
        "folds": N_FOLDS,
        "bayeskde_s": bk_s,
        "bayeskde_compile_s": warmup_s - bk_s,
        "bayeskde_warmup_s": warmup_s,
        "sklearn_s": sk_s,
        "speedup": sk_s / bk_s,
        "bayeskde_cpu_s": bk_cpu,
        "sklearn_cpu_s": sk_cpu,
        "cpu_speedup": sk_cpu / bk_cpu,
        "same_selection": (bi, bj) == (si, sj),
        "max_rel_loss_diff": float(rel.max()),
        "selected": {
            "sigma_factor": PAPER_SIGMAS[bi], "sigma": sigmas[bi],
            "ridge": PAPER_RIDGES[bj], "mean_loss": float(bk_loss[bi, bj]),
            "sklearn_sigma_factor": PAPER_SIGMAS[si],
            "sklearn_ridge": PAPER_RIDGES[sj],
        },
        "bayeskde_f32_s": bk32_s,
        "bayeskde_f32_cpu_s": bk32_cpu,
        "bayeskde_f32_compile_s": warmup32_s - bk32_s,
        "f32_same_selection": best_index(bk32_loss) == (bi, bj),
        "output_gamma": gamma_y,
        "backend": jax.default_backend(),
        "blas_threads": args.blas_threads,
        "repeats": args.repeats,
    }))
    if profile is not None:
        print(json.dumps({"bench": "kde_cv_reconstruction_profile_f64", **profile}))


if __name__ == "__main__":
    main()
