"""S-shape protocol: learned kernels and predictive distributions against CV.

One seed of the S-shape inverse problem (``make_sshape(key(seed), 500)``),
scored by point error (MAE of the top-mass mode) and by proper scores of the
predictive (CRPS, log predictive density, 90% central-interval coverage) on a
shared output grid:

* ``tgp_published``: TwinGP("kl", gamma_x=0.2, gamma_y=20, ridge=1e-4); its
  predictive is the tempered Twin GP density (:mod:`bayeskde.models.tgp`,
  temperature by held-out log density);
* ``tgp_cv``: the same with (gamma_x, gamma_y) chosen by 3-fold CV of MAE over a
  bandwidth grid;
* ``gp_cv``: a GP's Gaussian predictive, rate and noise chosen by 3-fold CV of
  CRPS (the reference the issue's CRPS target is relative to);
* ``inverse_map``, ``inverse_average``: the generative inverse model
  (:mod:`bayeskde.inverse`) learned on all training points by NUTS
  (4 chains), at the MAP parameters and model-averaged over posterior draws.

The benchmark's test inputs are noise-free (x = f(t)), so the inverse model's
predictive conditions on x* = f(t*) exactly; a second, noisy held-out set
(``make_sshape(key(seed + 1000), 500)``'s training points) checks calibration
for inputs observed with the training noise, where the Twin GP density's
held-out log density is compared with the inverse model's (candidate
likelihoods of the issue, compared on the same held-out points).
"""

from __future__ import annotations

import time

import numpy as np

__all__ = [
    "GAMMAS_X",
    "GAMMAS_Y",
    "TGP_PUBLISHED",
    "grid_scores",
    "gp_gaussian_cv",
    "tgp_cv",
    "evaluate_seed",
]

TGP_PUBLISHED = {"gamma_x": 0.2, "gamma_y": 20.0, "ridge": 1e-4}
GAMMAS_X = (0.05, 0.2, 1.0, 5.0)
GAMMAS_Y = (5.0, 20.0, 80.0)
GP_GAMMAS = (2.0, 5.0, 20.0, 80.0)
GP_NOISES = (1e-3, 3e-3, 1e-2, 3e-2, 1e-1)


def _folds(key, n, k=3):
    import jax

    perm = np.asarray(jax.random.permutation(key, n))
    size = n // k  # equal folds: one compiled shape for every fit
    return [perm[i * size:(i + 1) * size] for i in range(k)], perm[: k * size]


def grid_scores(grid, log_probs, y) -> dict:
    """CRPS, log predictive density and 90% coverage of a grid predictive."""
    from .. import metrics

    p = np.exp(log_probs)
    return {
        "crps": float(np.mean(metrics.crps_discrete(grid, p, y))),
        "lpd": float(np.mean(metrics.log_density_grid(grid, log_probs, y))),
        "coverage90": float(np.mean(metrics.coverage_discrete(grid, p, y, 0.9))),
    }


def _gp_gaussian(X, Y, Z, gamma, noise):
    amp = float(np.var(Y))
    K = amp * np.exp(-gamma * (X[:, None] - X[None]) ** 2)
    k = amp * np.exp(-gamma * (Z[:, None] - X[None]) ** 2)
    L = np.linalg.cholesky(K + noise * np.eye(len(X)))
    mu = Y.mean()
    a = np.linalg.solve(L.T, np.linalg.solve(L, Y - mu))
    v = np.linalg.solve(L, k.T)
    var = amp - np.sum(v * v, axis=0) + noise
    return k @ a + mu, np.sqrt(np.maximum(var, 1e-12))


def gp_gaussian_cv(key, X, Y, Z):
    """GP regression of Y on X (1-D) with its Gaussian predictive N(mean, var_f
    + noise); rate and noise by 3-fold CV of CRPS. Returns ``(mean, sd, best)``.
    O(grid m^3)."""
    from .. import metrics

    folds, used = _folds(key, len(X))
    best, best_s = None, np.inf
    for g in GP_GAMMAS:
        for s in GP_NOISES:
            sc = []
            for f in folds:
                tr = np.setdiff1d(used, f)
                m, sd = _gp_gaussian(X[tr], Y[tr], X[f], g, s)
                sc.append(float(np.mean(metrics.crps_gaussian(m, sd, Y[f]))))
            if np.mean(sc) < best_s:
                best, best_s = (g, s), float(np.mean(sc))
    m, sd = _gp_gaussian(X, Y, Z, *best)
    return m, sd, {"gamma": best[0], "noise": best[1], "cv_crps": best_s}


def tgp_cv(key, X, Y):
    """(gamma_x, gamma_y) of TwinGP("kl", ridge=1e-4) by 3-fold CV of MAE over
    :data:`GAMMAS_X` x :data:`GAMMAS_Y`. Returns ``(best, table)``."""
    from ..tgp import TwinGP

    folds, used = _folds(key, len(X))
    table = {}
    for gx in GAMMAS_X:
        for gy in GAMMAS_Y:
            err = []
            for f in folds:
                tr = np.setdiff1d(used, f)
                p = TwinGP("kl", gamma_x=gx, gamma_y=gy, ridge=1e-4).fit(
                    X[tr, None], Y[tr, None]).predict(X[f, None])
                err.append(float(np.mean(np.abs(np.ravel(p) - Y[f]))))
            table[f"{gx}_{gy}"] = float(np.mean(err))
    k = min(table, key=table.get)
    gx, gy = (float(v) for v in k.split("_"))
    return {"gamma_x": gx, "gamma_y": gy, "ridge": 1e-4}, table


def evaluate_seed(
    seed: int, *, n_train: int = 500, num_warmup: int = 500, num_samples: int = 500,
    num_chains: int = 4, num_draws: int = 20, n_grid: int = 1000,
    progress_bar: bool = False, return_objects: bool = False,
):
    """Every method of the module docstring on one seed; a JSON-able dict.

    ``return_objects=True`` returns ``(result, objects)`` with the data set
    ``data``, the inverse model ``fit``, its model-averaged predictive on the
    test grid ``predictive`` and on the training inputs ``train_predictive``,
    and the published Twin GP's predictions ``tgp_pred``.
    """
    import jax

    from .. import metrics
    from ..datasets import make_sshape
    from ..inverse import fit_inverse_gp, inverse_gp_predictive
    from ..tgp import TwinGP, calibrate_temperature, tgp_grid_log_probs

    t0 = time.perf_counter()
    keys = jax.random.split(jax.random.key(seed), 4)
    d = make_sshape(jax.random.key(seed), n_train)
    held = make_sshape(jax.random.key(seed + 1000), n_train)
    X, Y, Z, t = d.x_train, d.t_train, d.x_test, d.t_test
    out = {"seed": seed}

    fit = fit_inverse_gp(keys[0], X, Y, num_warmup=num_warmup,
                         num_samples=num_samples, num_chains=num_chains,
                         progress_bar=progress_bar, num_replicates=20)
    rep = fit.report
    out["convergence"] = {"max_rhat": rep.max_rhat, "min_ess_bulk": rep.min_ess_bulk,
                          "min_ess_tail": rep.min_ess_tail,
                          "divergences": rep.divergences}
    out["map_params"] = {k: v for k, v in fit.map_params.items()
                         if k != "pair_index"}
    grid = None
    objects = {"data": d, "fit": fit}
    for name, mode in (("inverse_map", "map"), ("inverse_average", "average")):
        pr = inverse_gp_predictive(fit, Z, mode=mode, num_draws=num_draws,
                                   n_grid=n_grid, margin=0.05, noisy_inputs=False)
        grid = pr.support[:, 0]
        res = {"mae": float(np.mean(np.abs(pr.modes[:, 0, 0] - t))),
               "best_of_2": float(np.mean(metrics.best_of_k_error(
                   pr.modes[:, :2, :], t[:, None]))),
               **grid_scores(grid, pr.log_probs, t)}
        ph = inverse_gp_predictive(fit, held.x_train, mode=mode, num_draws=num_draws,
                                   n_grid=n_grid, margin=0.05, noisy_inputs=True)
        res["heldout_noisy"] = grid_scores(grid, ph.log_probs, held.t_train)
        out[name] = res
        objects["predictive"] = pr

    best_cv, cv_table = tgp_cv(keys[1], X, Y)
    out["tgp_cv_params"] = best_cv
    out["tgp_cv_table"] = cv_table
    for name, params in (("tgp_published", TGP_PUBLISHED), ("tgp_cv", best_cv)):
        tgp = TwinGP("kl", **params).fit(X[:, None], Y[:, None])
        pred = np.ravel(tgp.predict(Z[:, None]))
        objects.setdefault("tgp_pred", pred)
        tau, _ = calibrate_temperature(keys[2], tgp, X, Y)
        lp = tgp_grid_log_probs(tgp, Z, grid, tau)
        res = {"mae": float(np.mean(np.abs(pred - t))), "temperature": tau,
               **grid_scores(grid, lp, t)}
        lph = tgp_grid_log_probs(tgp, held.x_train, grid, tau)
        res["heldout_noisy"] = grid_scores(grid, lph, held.t_train)
        out[name] = res

    m, sd, best = gp_gaussian_cv(keys[3], X, Y, Z)
    out["gp_cv"] = {
        "mae": float(np.mean(np.abs(m - t))),
        "crps": float(np.mean(metrics.crps_gaussian(m, sd, t))),
        "lpd": float(np.mean(metrics.log_density_gaussian(m, sd, t))),
        "coverage90": float(np.mean(np.abs(m - t) <= 1.6448536 * sd)),
        "params": best,
    }
    out["runtime_s"] = time.perf_counter() - t0
    if return_objects:
        objects["train_predictive"] = inverse_gp_predictive(
            fit, X, mode="average", num_draws=num_draws, n_grid=n_grid, margin=0.05,
            noisy_inputs=True)
        return out, objects
    return out
