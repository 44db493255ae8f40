"""Bayesian HMM feeding mean-map kernels, beside the EM-fitted kernels.

On the synthetic two-class sequence tasks of ``bayeskde.datasets`` (categorical
and Gaussian HMMs that differ only in their transitions; the exon/intron task
unless ``--quick``), every outer fold:

* fits one pooled 3-state HMM to the training block by Baum-Welch EM
  (``em_lmmk``: the latent mean-map kernel, eqs. 22-32, ``lam = 1``;
  ``em_ppk``: the rho = 1 probability product kernel between per-sequence HMMs,
  one MAP EM step from the pooled HMM, over length-10 sequences);
* samples the Bayesian HMM (``bayeskde.models.bayesian_hmm_model``: Dirichlet /
  Normal-Inverse-Gamma priors, states summed out by the forward algorithm) on the
  same block with NUTS, relabels the draws (Hungarian matching of emissions), and
  builds ``bayes_lmmk`` (embeddings averaged over draws: the latent mean map under
  the joint posterior of states and parameters), ``bayes_lmmk_kernel`` (the
  per-draw LMMKs averaged) and ``bayes_ppk`` (PPK between the objects' posterior
  predictive mixtures, 8 draws);
* classifies with ``SVC(kernel="precomputed")`` on cosine-normalised kernels, C
  by inner 3-fold CV on the training block (the SVM helpers of
  ``models/sequence_classification.py``).

The data are synthetic, so the paper has no number for them; the EM kernels are
the deterministic twin printed beside the Bayesian ones. Writes, under ``--out``:
``bayesian_hmm_meanmap.json`` (accuracies, diagnostics, timings), one
InferenceData per task (``<task>.nc``, first fold, relabelled) and its trace plot
(``<task>_trace.png``).

Run ``python models/bayesian_hmm_meanmap.py`` (about 18 minutes on 2 cores: NUTS
with 4 chains x (500 warmup + 800 draws) per fold; seed 0 prints max R-hat
1.0050 / 1.0055 / 1.0058 and min tail ESS 887 / 1682 / 620 on the three tasks)
or with ``--quick`` (categorical task only, fewer sequences, 2 chains x 50 draws:
a smoke run whose diagnostics are not expected to pass, the first outer fold
only).
"""

from __future__ import annotations

import argparse
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
from _common import Timer, enable_x64, fmt, print_table, summarise, write_json
from sequence_classification import CS, _normalised, _svm_acc
from sklearn.model_selection import StratifiedKFold

from bayeskde.datasets import make_exon_intron, make_hmm_classification
from bayeskde.hmm import fit_hmm, pad_sequences
from bayeskde.infer import (
    convergence_report,
    plot_trace,
    run_nuts,
    save_inference_data,
    to_inference_data,
)
from bayeskde.meanmap import (
    LatentMeanMapKernel,
    adapt_hmms,
    hmm_log_kernel_gram,
    log_kernel_normalize,
)
from bayeskde.models import (
    bayesian_hmm_model,
    hmm_draws,
    posterior_generative_mean_map_gram,
    posterior_latent_mean_map_gram,
    relabel_samples,
)

NAME = "bayesian_hmm_meanmap"
METHODS = ("em_lmmk", "bayes_lmmk", "bayes_lmmk_kernel", "em_ppk", "bayes_ppk")
N_STATES, LAM, PPK_LENGTH, PPK_DRAWS, KERNEL_DRAWS = 3, 1.0, 10, 8, 40
TASKS = ("hmm_categorical", "hmm_gaussian", "exon_intron")


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--num-samples", type=int, default=800,
                   help="NUTS draws per chain (800)")
    p.add_argument("--num-warmup", type=int, default=500,
                   help="NUTS warmup steps per chain (500)")
    p.add_argument("--tasks", nargs="+", choices=TASKS, default=None,
                   help="run these tasks only (default: all; --quick: the first)")
    p.add_argument("--num-chains", type=int, default=4,
                   help="NUTS chains (4; --quick runs 2)")
    p.add_argument("--seed", type=int, default=0, help="random seed (0)")
    p.add_argument("--out", type=Path, default=Path("results") / NAME,
                   help=f"output directory (default results/{NAME})")
    p.add_argument("--quick", action="store_true",
                   help="smoke run: categorical task, few sequences and draws")
    return p.parse_args(argv)


def _select_c_and_test(K, y, train, test, seed):
    """C by inner 3-fold stratified CV on ``train``; refit; test accuracy."""
    inner = list(StratifiedKFold(3, shuffle=True, random_state=seed).split(
        np.zeros(len(train)), y[train]))
    scores = [np.mean([_svm_acc(K, y, train[a], train[b], C) for a, b in inner])
              for C in CS]
    return _svm_acc(K, y, train, test, CS[int(np.argmax(scores))])


def _thin(draws, count):
    s = draws.log_initial.shape[0]
    idx = np.unique(np.linspace(0, s - 1, min(count, s)).astype(int))
    return jax.tree.map(lambda a: a[idx], draws)


def _em_kernels(key, seqs, train, emission):
    params = fit_hmm(key, [seqs[i] for i in train], N_STATES, emission=emission,
                     n_iter=50, n_restarts=2).params
    lmmk = LatentMeanMapKernel(N_STATES, emission, LAM, key=key).fit(
        None, params=params)
    padded, lengths = pad_sequences(seqs)
    logK = hmm_log_kernel_gram(adapt_hmms(params, padded, lengths, tau=1.0),
                               length=PPK_LENGTH)
    d = jnp.diagonal(logK)
    return params, {"em_lmmk": _normalised(lmmk.gram(seqs)),
                    "em_ppk": np.asarray(log_kernel_normalize(logK, d, d),
                                         np.float64)}


def _posterior(key, seqs, train, emission, args):
    obs, lengths = pad_sequences([seqs[i] for i in train])
    kw = {"n_symbols": int(max(s.max() for s in seqs)) + 1} if (
        emission == "categorical") else {}
    mcmc = run_nuts(key, bayesian_hmm_model, obs, lengths, N_STATES, emission,
                    num_warmup=args.num_warmup, num_samples=args.num_samples,
                    num_chains=args.num_chains, progress_bar=False, **kw)
    return mcmc, relabel_samples(mcmc.get_samples(group_by_chain=True))


def _bayes_kernels(samples, seqs):
    draws = hmm_draws(samples)
    return {
        "bayes_lmmk": _normalised(posterior_latent_mean_map_gram(
            draws, seqs, lam=LAM, relabel=False)),  # relabelled already
        "bayes_lmmk_kernel": _normalised(posterior_latent_mean_map_gram(
            _thin(draws, KERNEL_DRAWS), seqs, lam=LAM, average="kernel")),
        "bayes_ppk": np.asarray(posterior_generative_mean_map_gram(
            _thin(draws, PPK_DRAWS), seqs, length=PPK_LENGTH), np.float64),
    }


def _inference_data(mcmc, samples, emission, n_train, t_max):
    em_dims = (["state", "symbol"] if emission == "categorical"
               else ["state", "feature"])
    dims = {"initial": ["state"], "transition": ["state", "next_state"],
            "emission_probs": em_dims, "emission_mean": em_dims,
            "emission_var": em_dims,
            "obs": ["sequence", "time"] + ([] if emission == "categorical"
                                           else ["feature"])}
    coords = {"sequence": np.arange(n_train), "time": np.arange(t_max)}
    idata = to_inference_data(mcmc, coords=coords, dims=dims)
    for name, value in samples.items():  # the relabelled draws
        idata.posterior[name] = (idata.posterior[name].dims, np.asarray(value))
    return idata


def run_task(key, name, data, emission, args, folds):
    seqs, y = data.sequences, np.asarray(data.labels)
    acc = {m: [] for m in METHODS}
    diag, timer = {}, Timer()
    splitter = StratifiedKFold(folds, shuffle=True, random_state=args.seed)
    for f, (train, test) in enumerate(splitter.split(np.zeros(len(y)), y)):
        key, k_em, k_nuts = jax.random.split(key, 3)
        _, kernels = _em_kernels(k_em, seqs, train, emission)
        mcmc, samples = _posterior(k_nuts, seqs, train, emission, args)
        kernels.update(_bayes_kernels(samples, seqs))
        for m in METHODS:
            acc[m].append(_select_c_and_test(kernels[m], y, train, test, args.seed))
        if f == 0:
            t_max = max(len(seqs[i]) for i in train)
            idata = _inference_data(mcmc, samples, emission, len(train), t_max)
            var_names = ["initial", "transition"] + (
                ["emission_probs"] if emission == "categorical"
                else ["emission_mean", "emission_var"])
            rep = convergence_report(idata, var_names)
            diag = {"max_rhat": rep.max_rhat, "min_ess_bulk": rep.min_ess_bulk,
                    "min_ess_tail": rep.min_ess_tail,
                    "divergences": rep.divergences, "warnings": list(rep.messages)}
            print(f"  {name} posterior (fold 0, {args.num_chains} chains x "
                  f"{args.num_warmup} + {args.num_samples}): max R-hat "
                  f"{rep.max_rhat:.4f}, min ESS bulk {rep.min_ess_bulk:.0f} / tail "
                  f"{rep.min_ess_tail:.0f}, divergences {rep.divergences}")
            for msg in rep.messages:
                print(f"  {name}: {msg}")
            save_inference_data(idata, args.out / f"{name}.nc")
            plot_trace(idata, args.out / f"{name}_trace.png",
                       var_names=["transition"])
        print(f"{name} fold {f}: " + ", ".join(
            f"{m} {acc[m][-1]:.3f}" for m in METHODS) + f" ({timer():.0f} s)",
            flush=True)
        if args.quick:  # a smoke run: one outer fold exercises every step
            break
    return acc, diag, timer()


def main(argv=None):
    args = parse_args(argv)
    enable_x64()
    timer = Timer()
    if args.quick:  # a smoke run: its diagnostics are not expected to pass
        args.num_samples = min(args.num_samples, 50)
        args.num_warmup = min(args.num_warmup, 50)
        args.num_chains = min(args.num_chains, 2)
    n, folds, length = (12, 2, 40) if args.quick else (40, 3, 60)
    key = jax.random.key(args.seed)
    k_cat, k_gau, k_dna, k_run = jax.random.split(key, 4)
    tasks = {"hmm_categorical": (make_hmm_classification(
        k_cat, n, length, kind="categorical"), "categorical")}
    if not args.quick:
        tasks["hmm_gaussian"] = (make_hmm_classification(
            k_gau, n, length, kind="gaussian", noise=0.6), "gaussian")
        tasks["exon_intron"] = (make_exon_intron(k_dna, n, length), "categorical")
    results, rows = {}, []
    for name, (data, emission) in tasks.items():
        k_run, sub = jax.random.split(k_run)  # the same keys whatever --tasks
        if args.tasks and name not in args.tasks:
            continue
        acc, diag, secs = run_task(sub, name, data, emission, args, folds)
        results[name] = {m: summarise(v) for m, v in acc.items()}
        results[name].update(diagnostics=diag, seconds=secs)
        rows.append([name] + [fmt(results[name][m]["mean"], results[name][m]["se"],
                                  3) for m in METHODS])
    n_folds = 1 if args.quick else folds
    print_table(f"Accuracy (mean ± SE over {n_folds} folds, {2 * n} sequences of "
                f"length {length} per task; EM = deterministic twin)",
                ["task", *METHODS], rows)
    payload = {"name": NAME, "seed": args.seed, "quick": args.quick,
               "num_samples": args.num_samples, "num_warmup": args.num_warmup,
               "num_chains": args.num_chains,
               "n_per_class": n, "folds": folds, "length": length,
               "n_states": N_STATES, "lam": LAM, "results": results,
               "seconds": timer()}
    write_json(args.out / f"{NAME}.json", payload)
    print(f"wrote {args.out} ({timer():.0f} s)")


if __name__ == "__main__":
    main()
