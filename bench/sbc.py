"""Simulation-based calibration at a larger budget than the test suite (issue 6).

Talts et al. (2018): draw theta from the prior, data from the model, sample the
posterior, and test that the rank of theta among L posterior draws is uniform.
Two models, each with one independent NUTS chain per replication
(:func:`bayeskde.infer.replicated_nuts`, one compiled program):

- ``kernel``: the exact part of the kernel hyperparameter model
  (:func:`bayeskde.models.kernel_hyper_model` with d1 = d2 = 1 and no KL factor,
  which makes it generative): log gamma_x, log r, log a^2 on ``--m`` (10) inputs.
- ``hmm``: the Bayesian HMM (:func:`bayeskde.models.bayesian_hmm_model`), 2 states,
  2 symbols, 4 sequences of 6 steps, emission prior Dir(4, 1) / Dir(1, 4) (one
  dominant labelling); pi_0, A_00, A_11, B_00, B_11.

Each prints one JSON line: R, L, thinning, the median bulk ESS of the thinned draws
per replication (near L means the draws are close to independent, as the test
assumes), the rank histograms, the chi-square p-value per parameter, pooled, and
Bonferroni over parameters, and the wall time. There is no peer: the reference is
the uniform distribution. The test suite runs the same checks with R = 40.

Run: ``python bench/sbc.py [--replications 200] [--model kernel hmm]``.
"""

from __future__ import annotations

import argparse
import json
import time
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np
from numpyro.diagnostics import effective_sample_size

from bayeskde.infer import replicated_nuts, sbc_rank_test
from bayeskde.models import (
    BayesianHMMPrior,
    bayesian_hmm_model,
    simulate_categorical_hmm,
    simulate_kernel_gp_part,
)
from bayeskde.models.kernel_hyper import (
    KernelHyperData,
    KernelHyperPrior,
    kernel_hyper_model,
)


def _median_ess(draws):
    """Median over replications and parameters of the bulk ESS, ``(R, L, P)``."""
    return float(np.median([[float(effective_sample_size(draws[r, None, :, j]))
                             for j in range(draws.shape[2])]
                            for r in range(draws.shape[0])]))


def _record(name, names, draws, truths, L, thin, wall, bins):
    res = sbc_rank_test(draws, truths, bins=bins)
    return {
        "bench": "sbc", "model": name, "replications": int(draws.shape[0]),
        "L": L, "thin": thin, "bins": bins, "parameters": list(names),
        "median_ess": _median_ess(draws),
        "counts": res.counts.tolist(),
        "p_each": dict(zip(names, res.p_each.round(4).tolist(), strict=True)),
        "p_pooled": res.p_pooled, "p_min_bonferroni": res.p_min_bonferroni,
        "uniform_at_0.01": bool(res.p_min_bonferroni > 0.01 and res.p_pooled > 0.01),
        "wall_s": wall, "dtype": str(jnp.zeros(()).dtype),
    }


def run_kernel(R, m, L, thin, warmup, seed, bins):
    x = np.linspace(0, 1, m)[:, None]
    Dx2 = (x - x.T) ** 2
    prior = KernelHyperPrior(max_degree_x=1, max_degree_y=1, kl_temperature=0.0,
                             log_gamma_x_loc=1.0, log_gamma_x_scale=0.5,
                             log_ridge_loc=np.log(0.1), log_ridge_scale=0.5,
                             log_amplitude_loc=0.0, log_amplitude_scale=0.5,
                             log_gamma_y_loc=0.0, log_gamma_y_scale=0.5)
    k_sim, k_mcmc = jax.random.split(jax.random.key(seed))
    theta, Y = simulate_kernel_gp_part(k_sim, Dx2, prior, R)
    dt = jnp.zeros(()).dtype
    D = jnp.asarray(np.broadcast_to(Dx2, (R, m, m)), dt)
    data = KernelHyperData(D, D, jnp.asarray(Y, dt), jnp.zeros((R, 1), dt))
    t = time.perf_counter()
    sample = replicated_nuts(partial(kernel_hyper_model, prior=prior),
                             (jax.tree.map(lambda a: a[0], data),),
                             num_warmup=warmup, num_draws=L, thin=thin)
    post = sample(k_mcmc, (data,))
    names = ("gamma_x", "ridge", "amplitude")
    draws = np.stack([np.asarray(post[f"log_{n}"]) for n in names], -1)
    wall = time.perf_counter() - t
    truths = np.stack([theta[n] for n in names], -1)
    return _record("kernel_gp_part", [f"log_{n}" for n in names], draws, truths, L,
                   thin, wall, bins)


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


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--replications", type=int, default=200)
    ap.add_argument("--draws", type=int, default=99, help="L (L + 1 divisible by bins)")
    ap.add_argument("--bins", type=int, default=10)
    ap.add_argument("--thin", type=int, default=4)
    ap.add_argument("--warmup", type=int, default=300)
    ap.add_argument("--m", type=int, default=10)
    ap.add_argument("--seed", type=int, default=20261130)
    ap.add_argument("--model", nargs="+", choices=("kernel", "hmm"),
                    default=["kernel", "hmm"])
    args = ap.parse_args(argv)
    out = []
    if "kernel" in args.model:
        out.append(run_kernel(args.replications, args.m, args.draws, args.thin,
                              args.warmup, args.seed, args.bins))
        print(json.dumps(out[-1]), flush=True)
    if "hmm" in args.model:
        out.append(run_hmm(args.replications, args.draws, args.thin, args.warmup,
                           args.seed, args.bins))
        print(json.dumps(out[-1]), flush=True)
    return out


if __name__ == "__main__":
    main()
