"""Simulation-based calibration at a larger budget than the test suite (issue 6).

Talts et al. (2018): draw theta from the prior, data from the model, sample the
posterior, and test that the rank of theta among L posterior draws is uniform.
Two models, each with one independent NUTS chain per replication
(:func:`bayeskde.infer.replicated_nuts`, one compiled program):

- ``hmm``: the Bayesian HMM (:func:`bayeskde.models.bayesian_hmm_model`), 2 states,
  2 symbols, 4 sequences of 6 steps, emission prior Dir(4, 1) / Dir(1, 4) (one
  dominant labelling); pi_0, A_00, A_11, B_00, B_11.

- ``inverse``: the generative inverse model (:func:`bayeskde.inverse.inverse_gp_model`,
  the kept model of issue 14) with degree 1 (the transform weight is then 1, so the
  model is generative) on ``--m`` (10) fixed outputs y in [0, 1], a 6-point rate
  grid and priors centred at a fixed scale (not the data's variance, which would
  make the prior depend on the data): log a^2, log s^2 and the rate index g
  (jittered by U(0, 1), which keeps a discrete parameter's ranks uniform).

Each prints one JSON line: R, L, thinning, the median bulk ESS of the thinned draws
per replication (near L means the draws are close to independent, as the test
assumes), the rank histograms, the chi-square p-value per parameter, pooled, and
Bonferroni over parameters, whether every ECDF-difference curve stays in its 95%
simultaneous band (:func:`bayeskde.infer.sbc_ecdf_band`), and the wall time;
``--out DIR`` writes the ECDF-difference plot of the inverse model
(``sbc_inverse_gp.png``). There is no peer: the reference is the uniform
distribution. The test suite runs the same checks with R = 40.

Run: ``python bench/sbc.py [--replications 200] [--model hmm inverse]
[--out DIR] [--quick]`` (``--quick``: R = 40, L = 39, short warmup; a smoke run).
"""

from __future__ import annotations

import argparse
import json
import time
from functools import partial
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
from numpyro.diagnostics import effective_sample_size

from bayeskde.infer import replicated_nuts, sbc_ecdf_band, sbc_rank_test
from bayeskde.inverse import (
    InverseGPData,
    InverseGPPrior,
    inverse_gp_model,
    prepare_inverse_gp_data,
)
from bayeskde.inverse.evidence import observed_inputs
from bayeskde.models import (
    BayesianHMMPrior,
    bayesian_hmm_model,
    simulate_categorical_hmm,
)


def _median_ess(draws):
    """Median over replications and parameters of the bulk ESS, ``(R, L, P)``."""
    return float(np.median([[float(effective_sample_size(draws[r, None, :, j]))
                             for j in range(draws.shape[2])]
                            for r in range(draws.shape[0])]))


def _plot_ecdf(path, band, names, title):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 4))
    ax.fill_between(band.z, band.lower, band.upper, step="post", color="0.85",
                    label="95% simultaneous band")
    for j, n in enumerate(names):
        ax.step(band.z, band.ecdf_diff[j], where="post", label=n)
    ax.axhline(0.0, color="k", lw=0.5)
    ax.set_xlabel("scaled rank z")
    ax.set_ylabel("ECDF(z) - z")
    ax.set_title(title, fontsize=9)
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _record(name, names, draws, truths, L, thin, wall, bins, out=None, seed=0):
    res = sbc_rank_test(draws, truths, bins=bins)
    band = sbc_ecdf_band(jax.random.key(seed), res.ranks, L)
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
        _plot_ecdf(out / f"sbc_{name}.png", band, names,
                   f"SBC {name}: R = {draws.shape[0]}, L = {L}")
    return {
        "bench": "sbc", "model": name, "replications": int(draws.shape[0]),
        "L": L, "thin": thin, "bins": bins, "parameters": list(names),
        "median_ess": _median_ess(draws),
        "counts": res.counts.tolist(),
        "p_each": dict(zip(names, res.p_each.round(4).tolist(), strict=True)),
        "p_pooled": res.p_pooled, "p_min_bonferroni": res.p_min_bonferroni,
        "uniform_at_0.01": bool(res.p_min_bonferroni > 0.01 and res.p_pooled > 0.01),
        "ecdf_inside_95_band": dict(zip(names, band.inside.tolist(), strict=True)),
        "ecdf_max_abs_diff": float(np.abs(band.ecdf_diff).max()),
        "wall_s": wall, "dtype": str(jnp.zeros(()).dtype),
    }


def run_hmm(R, L, thin, warmup, seed, bins, n_seq=4, length=6):
    conc_b = np.array([[4.0, 1.0], [1.0, 4.0]])
    truths, obs = simulate_categorical_hmm(np.random.default_rng(seed), conc_b, R,
                                           n_seq, length)
    dt = jnp.zeros(()).dtype
    lengths = jnp.full(n_seq, length, jnp.int32)
    priors = BayesianHMMPrior(*(jnp.broadcast_to(jnp.asarray(f, dt), (R,) + np.shape(f))
                                for f in BayesianHMMPrior(1.0, 1.0, conc_b)))
    prior0 = jax.tree.map(lambda a: a[0], priors)
    t = time.perf_counter()
    sample = replicated_nuts(partial(bayesian_hmm_model, n_states=2, n_symbols=2),
                             (jnp.asarray(obs[0]), lengths), {"prior": prior0},
                             num_warmup=warmup, num_draws=L, thin=thin)
    post = sample(jax.random.key(seed), (jnp.asarray(obs),
                                         jnp.broadcast_to(lengths, (R, n_seq))),
                  {"prior": priors})
    draws = np.stack([post["initial"][..., 0], post["transition"][..., 0, 0],
                      post["transition"][..., 1, 1], post["emission_probs"][..., 0, 0],
                      post["emission_probs"][..., 1, 1]], -1)
    wall = time.perf_counter() - t
    return _record("bayesian_hmm", ["pi_0", "A_00", "A_11", "B_00", "B_11"],
                   np.asarray(draws), truths, L, thin, wall, bins)


def _inverse_data(Y, X, base, prior, dt):
    """InverseGPData of uncentred X at fixed Y (degree 1: the spectra of K_g do
    not depend on X), priors centred at x_scale = 0."""
    m = Y.shape[0]
    D2 = (Y - Y.T) ** 2
    lam, q = [], []
    for g in np.asarray(base.gammas, np.float64):
        e, U = np.linalg.eigh(np.exp(-g * D2))
        lam.append(np.maximum(e, 0.0))
        q.append(np.sum((U.T @ X) ** 2, axis=1))
    lam, q = np.array(lam), np.array(q)
    kept = lam > m * np.finfo(dt).eps * lam.max(axis=1, keepdims=True)
    seg = np.broadcast_to(np.arange(lam.shape[0])[:, None], lam.shape)[kept]
    shape = (prior.n_gamma, 1)
    return InverseGPData(
        jnp.asarray(Y, dt), jnp.asarray(X, dt), jnp.zeros(X.shape[1], dt),
        base.gammas, base.alpha, jnp.asarray(lam[kept], dt),
        jnp.asarray(q[kept], dt), jnp.asarray(seg),
        jnp.asarray((~kept).sum(1).reshape(shape), dt),
        jnp.asarray(np.where(kept, 0.0, q).sum(1).reshape(shape), dt),
        base.log_pair_prior, jnp.zeros((), dt)), kept


def run_inverse(R, m, L, thin, warmup, seed, bins, out=None):
    prior = InverseGPPrior(max_degree=1, n_gamma=6, gamma_low=0.3, gamma_high=30.0,
                           log_amplitude_scale=1.0, log_noise_loc=np.log(0.1),
                           log_noise_scale=1.0)
    rng = np.random.default_rng(seed)
    dt = jnp.zeros(()).dtype
    Y = np.linspace(0.0, 1.0, m)[:, None]
    base = prepare_inverse_gp_data(jax.random.key(seed), rng.normal(size=(m, 1)), Y,
                                   prior)
    names = ("log_amplitude", "log_noise", "rate_index")
    truths, datas = [], []
    for _ in range(R):
        log_a = rng.normal(prior.log_amplitude_loc, prior.log_amplitude_scale)
        log_s = rng.normal(prior.log_noise_loc, prior.log_noise_scale)
        g = rng.integers(prior.n_gamma)
        # X | theta from the same truncated spectrum the model uses.
        _, kept = _inverse_data(Y, np.zeros((m, 1)), base, prior, dt)
        e, U = np.linalg.eigh(np.exp(-float(base.gammas[g]) * (Y - Y.T) ** 2))
        v = np.exp(log_a) * np.where(kept[g], np.maximum(e, 0.0), 0.0) + np.exp(log_s)
        X = U @ (np.sqrt(v)[:, None] * rng.normal(size=(m, 1)))
        datas.append(_inverse_data(Y, X, base, prior, dt)[0])
        truths.append((log_a, log_s, g + rng.uniform()))
    data = jax.tree.map(lambda *a: jnp.stack(a), *datas)
    t = time.perf_counter()
    def model(data):
        inverse_gp_model(data, prior, observed_inputs(data))

    sample = replicated_nuts(model, (datas[0],),
                             num_warmup=warmup, num_draws=L, thin=thin)
    post = sample(jax.random.key(seed), (data,))
    lj = np.asarray(post["pair_log_joint"], np.float64).reshape(R, L, -1)
    p = np.exp(lj - lj.max(-1, keepdims=True))
    cum = np.cumsum(p / p.sum(-1, keepdims=True), -1)
    g_draw = (rng.uniform(size=(R, L, 1)) > cum).sum(-1)  # one pair per draw
    draws = np.stack([np.asarray(post["log_amplitude"]), np.asarray(post["log_noise"]),
                      g_draw + rng.uniform(size=(R, L))], -1)
    wall = time.perf_counter() - t
    return _record("inverse_gp", names, draws, np.array(truths), L, thin, wall, bins,
                   out, seed)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--replications", type=int, default=200)
    ap.add_argument("--draws", type=int, default=99, help="L (L + 1 divisible by bins)")
    ap.add_argument("--bins", type=int, default=10)
    ap.add_argument("--thin", type=int, default=4)
    ap.add_argument("--warmup", type=int, default=300)
    ap.add_argument("--m", type=int, default=10)
    ap.add_argument("--seed", type=int, default=20261130)
    ap.add_argument("--model", nargs="+", choices=("hmm", "inverse"),
                    default=["hmm", "inverse"])
    ap.add_argument("--out", type=Path, default=None,
                    help="folder for the ECDF-difference plots")
    ap.add_argument("--quick", action="store_true",
                    help="R = 40, L = 39, warmup 150, thin 2 (smoke run)")
    args = ap.parse_args(argv)
    if args.quick:
        args.replications, args.draws, args.warmup, args.thin = 40, 39, 150, 2
    out = []
    if "hmm" in args.model:
        out.append(run_hmm(args.replications, args.draws, args.thin, args.warmup,
                           args.seed, args.bins))
        print(json.dumps(out[-1]), flush=True)
    if "inverse" in args.model:
        out.append(run_inverse(args.replications, args.m, args.draws, args.thin,
                               args.warmup, args.seed, args.bins, args.out))
        print(json.dumps(out[-1]), flush=True)
    return out


if __name__ == "__main__":
    main()
