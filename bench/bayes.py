"""Bayesian KDE on the width grid: spectra (bayeskde) vs a Cholesky per step (peer).

Workload (issue 6, part 3): the posterior of ``bayesian_kde_grid_model`` (the
GP-evidence grid model, a reference in ``bench/kde_evidence.py`` since the Gibbs
posterior of :mod:`bayeskde.models.kde` replaced it) on the digits halves (top
half -> bottom half, the first ``--n-train`` (500) digits of
:func:`bayeskde.datasets.load_digits_halves`): input RBF widths on the paper's
grid (7 values x the median distance), output RBF at the median output distance,
the first ``--n-components`` (50) output KPCA coordinates,
``--likelihood`` (``shared``) evidence, one ridge per width (product space with the
library's pseudo-priors).

- bayeskde: ``kde_spectra`` once (one ``eigh`` per width), then NUTS on
  ``bayesian_kde_grid_model``: every density and gradient is O(G m p).
- peer: a plain NumPyro model of the same posterior, the same sites, priors and
  pseudo-priors, that forms C_g = K_g + m gamma_g I and factorises it (one Cholesky
  per width per gradient, O(G m^3)).

Both run through ``bayeskde.infer.run_nuts`` (one chain, same key, same warm-up;
the peer draws ``--peer-samples`` because it is slow). Reported per side: the
bulk ESS of each continuous parameter (``log_ridge_std``, G of them, and the
Rao-Blackwellised ``log_ridge_avg``), the minimum over them, wall seconds of the
whole call (spectra and compilation included for bayeskde) and of the sampling
alone (the whole call minus a 1-warm-up, 1-draw call: compilation and
initialisation), and ESS per second of each. A first line gives the median CPU
and wall seconds of one potential-energy gradient on each side. The check: the
posterior means of every continuous parameter agree within 2 Monte Carlo
standard errors (combined), and the posterior probabilities of the widths agree
within 0.02. Everything runs in float64. Times are medians of ``--repeats`` runs
on a shared machine: noisy.

Run: ``python bench/bayes.py [--repeats 3] [--n-train 500]``. Prints JSON lines.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import jax

jax.config.update("jax_enable_x64", True)

import arviz as az  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import jax.scipy.linalg as jsl  # noqa: E402
import numpy as np  # noqa: E402
import numpyro  # noqa: E402
import numpyro.distributions as dist  # noqa: E402
from jax.scipy.special import gammaln, logsumexp  # noqa: E402
from kde_evidence import _pseudo_prior, bayesian_kde_grid_model  # noqa: E402
from numpyro.infer.util import potential_energy  # noqa: E402

from bayeskde.datasets import load_digits_halves  # noqa: E402
from bayeskde.infer import run_nuts, to_inference_data  # noqa: E402
from bayeskde.kde import PAPER_SIGMAS  # noqa: E402
from bayeskde.kernels import median_heuristic  # noqa: E402
from bayeskde.kpca import kernel_pca, kpca_transform  # noqa: E402
from bayeskde.models import BayesianKDEGridPrior, kde_spectra  # noqa: E402

PARAMS = ("log_ridge_std", "log_ridge_avg")


def peer_model(K_grid, T, psi_loc, psi_scale, prior, likelihood):
    """The same posterior, written plainly: one Cholesky per width per step."""
    G, m = K_grid.shape[0], K_grid.shape[1]
    p = T.shape[1]
    with numpyro.plate("sigma", G):
        z = numpyro.sample("log_ridge_std", dist.Normal(0.0, 1.0))
    log_ridge = numpyro.deterministic("log_ridge", psi_loc + psi_scale * z)

    def loglik(K, r):
        chol = jnp.linalg.cholesky(K + m * r * jnp.eye(m, dtype=K.dtype))
        Z = jsl.solve_triangular(chol, T, lower=True)
        q = jnp.sum(Z * Z, axis=0)
        logdet = 2.0 * jnp.sum(jnp.log(jnp.diagonal(chol)))
        c = jnp.log(2.0 * jnp.pi)
        if likelihood == "scale_free":
            return p * (gammaln(m / 2.0) - m / 2.0 * c) - 0.5 * p * logdet \
                - m / 2.0 * jnp.sum(jnp.log(q / 2.0))
        n = m * p
        return gammaln(n / 2.0) - n / 2.0 * c - 0.5 * p * logdet \
            - n / 2.0 * jnp.log(jnp.sum(q) / 2.0)

    # A Python loop (unrolled by jit): XLA's batched Cholesky under vmap is slower.
    ll = jnp.stack([loglik(K_grid[g], jnp.exp(log_ridge[g])) for g in range(G)])
    joint = (-jnp.log(G) + ll
             + dist.Normal(prior.log_ridge_loc, prior.log_ridge_scale).log_prob(
                 log_ridge)
             - dist.Normal(psi_loc, psi_scale).log_prob(log_ridge))
    total = logsumexp(joint)
    probs = numpyro.deterministic("grid_probs", jnp.exp(joint - total))
    numpyro.deterministic("log_ridge_avg", jnp.sum(probs * log_ridge))
    numpyro.factor("evidence", total)


def problem(n_train, n_components):
    top, bottom, _ = load_digits_halves()
    X, Y = top[:n_train], bottom[:n_train]
    D2 = ((X[:, None, :] - X[None, :, :]) ** 2).sum(-1)
    L = np.exp(-((Y[:, None, :] - Y[None, :, :]) ** 2).sum(-1)
               / (2 * median_heuristic(Y) ** 2))
    T = np.asarray(kpca_transform(kernel_pca(L, n_components), L))
    sigmas = np.asarray(PAPER_SIGMAS) * median_heuristic(X)
    return D2, T, sigmas


def timed(fn):
    t = time.perf_counter()
    out = fn()
    jax.block_until_ready(out.get_samples())
    return out, time.perf_counter() - t


def side_stats(mcmc, total_s, overhead_s):
    idata = to_inference_data(mcmc)
    ess = az.ess(idata, var_names=list(PARAMS), method="bulk")
    mcse = az.mcse(idata, var_names=list(PARAMS))
    per = np.concatenate([np.atleast_1d(np.asarray(ess[v])) for v in PARAMS])
    s = mcmc.get_samples()
    # On a loaded machine the short overhead call can outlast the real one: then
    # the sampling time is unknown (None), not a tiny positive number.
    sampling_s = total_s - overhead_s if total_s > 1.2 * overhead_s else None
    return {
        "ess_bulk": per.tolist(), "min_ess": float(per.min()),
        "total_s": total_s, "sampling_s": sampling_s,
        "ess_per_s_total": float(per.min() / total_s),
        "ess_per_s_sampling": None if sampling_s is None
        else float(per.min() / sampling_s),
        "mean": {v: np.atleast_1d(np.asarray(s[v]).mean(0)).tolist() for v in PARAMS},
        "mcse": {v: np.atleast_1d(np.asarray(mcse[v])).tolist() for v in PARAMS},
        "grid_probs": np.asarray(s["grid_probs"]).mean(0).tolist(),
        "divergences": int(np.asarray(mcmc.get_extra_fields()["diverging"]).sum()),
    }


def gradient_seconds(model, args, G, n=5):
    """Median process-CPU and wall seconds of one potential-energy gradient."""
    f = jax.jit(jax.grad(lambda p: potential_energy(model, args, {}, p)))
    z = {"log_ridge_std": jnp.zeros(G)}
    jax.block_until_ready(f(z))
    cpu, wall = [], []
    for _ in range(n):
        c, w = time.process_time(), time.perf_counter()
        jax.block_until_ready(f(z))
        cpu.append(time.process_time() - c)
        wall.append(time.perf_counter() - w)
    return statistics.median(cpu), statistics.median(wall)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--n-train", type=int, default=500)
    ap.add_argument("--n-components", type=int, default=50)
    ap.add_argument("--likelihood", choices=("shared", "scale_free"),
                    default="shared")
    ap.add_argument("--num-warmup", type=int, default=200)
    ap.add_argument("--num-samples", type=int, default=1000)
    ap.add_argument("--peer-samples", type=int, default=300)
    ap.add_argument("--gradient-only", action="store_true",
                    help="print the per-gradient line and stop (no NUTS runs)")
    args = ap.parse_args(argv)

    D2, T, sigmas = problem(args.n_train, args.n_components)
    prior = BayesianKDEGridPrior()
    K_grid = jnp.asarray(np.exp(-D2[None] / (2 * sigmas[:, None, None] ** 2)))
    Tj = jnp.asarray(T)
    psi = _pseudo_prior(kde_spectra(D2, T, sigmas), prior, args.likelihood)

    def ours(n_warm, n_samp, seed):
        def go():
            spectra = kde_spectra(D2, T, sigmas)
            return run_nuts(jax.random.key(seed), bayesian_kde_grid_model, spectra,
                            prior, args.likelihood, num_warmup=n_warm,
                            num_samples=n_samp, num_chains=1, progress_bar=False)
        return timed(go)

    def peer(n_warm, n_samp, seed):
        return timed(lambda: run_nuts(
            jax.random.key(seed), peer_model, K_grid, Tj, psi[0], psi[1], prior,
            args.likelihood, num_warmup=n_warm, num_samples=n_samp, num_chains=1,
            progress_bar=False))

    G = len(sigmas)
    spectra0 = kde_spectra(D2, T, sigmas)
    grad = {
        "bayeskde": gradient_seconds(bayesian_kde_grid_model,
                                     (spectra0, prior, args.likelihood), G),
        "peer": gradient_seconds(peer_model, (K_grid, Tj, psi[0], psi[1], prior,
                                              args.likelihood), G),
    }
    print(json.dumps({"gradient_cpu_s": {k: v[0] for k, v in grad.items()},
                      "gradient_wall_s": {k: v[1] for k, v in grad.items()},
                      "gradient_cpu_ratio": grad["peer"][0] / grad["bayeskde"][0],
                      "n_train": args.n_train}), flush=True)
    if args.gradient_only:
        return grad
    rows = {"bayeskde": [], "peer": []}
    for rep in range(args.repeats):
        for name, fn, n in (("bayeskde", ours, args.num_samples),
                            ("peer", peer, args.peer_samples)):
            _, overhead = fn(1, 1, rep)
            mcmc, total = fn(args.num_warmup, n, rep)
            rows[name].append(side_stats(mcmc, total, overhead))

    def med(name, key):
        vals = [r[key] for r in rows[name] if r[key] is not None]
        return statistics.median(vals) if vals else None

    a, b = rows["bayeskde"][0], rows["peer"][0]
    z = []
    for v in PARAMS:
        for ma, mb, sa, sb in zip(a["mean"][v], b["mean"][v], a["mcse"][v],
                                  b["mcse"][v], strict=True):
            z.append(abs(ma - mb) / np.hypot(sa, sb))
    probs_diff = float(np.max(np.abs(np.subtract(a["grid_probs"], b["grid_probs"]))))
    out = {
        "bench": "bayesian_kde_grid", "n_train": args.n_train,
        "n_components": args.n_components, "grid": len(sigmas),
        "likelihood": args.likelihood, "num_warmup": args.num_warmup,
        "num_samples": {"bayeskde": args.num_samples, "peer": args.peer_samples},
        "repeats": args.repeats, "backend": jax.default_backend(),
        "gradient_cpu_s": {k: v[0] for k, v in grad.items()},
        "bayeskde_ess_per_s_total": med("bayeskde", "ess_per_s_total"),
        "peer_ess_per_s_total": med("peer", "ess_per_s_total"),
        "bayeskde_ess_per_s_sampling": med("bayeskde", "ess_per_s_sampling"),
        "peer_ess_per_s_sampling": med("peer", "ess_per_s_sampling"),
        "bayeskde_total_s": med("bayeskde", "total_s"),
        "peer_total_s": med("peer", "total_s"),
        "bayeskde_min_ess": med("bayeskde", "min_ess"),
        "peer_min_ess": med("peer", "min_ess"),
        "divergences": {k: [r["divergences"] for r in v] for k, v in rows.items()},
        "max_mean_diff_in_mcse": float(max(z)),
        "means_within_2_mcse": bool(max(z) <= 2.0),
        "n_within_2_mcse": f"{sum(x <= 2.0 for x in z)}/{len(z)}",
        "max_grid_prob_diff": probs_diff,
        "log_ridge_avg_mean": {"bayeskde": a["mean"]["log_ridge_avg"][0],
                               "peer": b["mean"]["log_ridge_avg"][0]},
        "grid_probs": {"bayeskde": a["grid_probs"], "peer": b["grid_probs"]},
    }
    out["speedup_total"] = out["bayeskde_ess_per_s_total"] / out[
        "peer_ess_per_s_total"]
    a_s, b_s = out["bayeskde_ess_per_s_sampling"], out["peer_ess_per_s_sampling"]
    out["speedup_sampling"] = None if a_s is None or b_s is None else a_s / b_s
    print(json.dumps(out))
    assert probs_diff < 0.02, probs_diff
    return out


if __name__ == "__main__":
    main()
