"""Sequence classification with mean-map kernels (Mehta and Gray, seed 004).

SVMs (scikit-learn ``SVC(kernel="precomputed")``) on cosine-normalised kernels
against the generative classifier. Every kernel method chooses its
hyperparameters by an inner 3-fold stratified CV on the outer training block only
(the outer test block is never seen before the final prediction):

* ``lmmk_paper``: the paper's setting (section 3: "we push lambda toward
  infinity and consider different values of nu"), one 3-state HMM fitted by EM on
  the pooled training block, ``lam = inf``, ``nu`` and C by inner CV;
* ``lmmk``: the latent mean-map kernel (eqs. 22-32) of the pooled HMM with
  (number of states, ``lam``, C) chosen by inner CV;
* ``lmmk_rbf``: as ``lmmk`` plus its RBF map (eq. 24) with ``nu`` in the search;
* ``lmmk_class``: *our extension* (the seed only says the HMM "should be
  estimated from the examples, or a subset of the examples"): one HMM per class,
  the latent mean maps under each class model concatenated, i.e. the average of
  the normalised per-class LMMKs, optionally through eq. (24); (states, lam, nu,
  C) by inner CV. The class HMMs see the labels of the whole training block, so
  the inner-CV scores of this kernel are optimistic; the outer test is not;
* ``lmmk_select``: *the principled version of the two above*: the kernel family
  (pooled HMM as ``lmmk_rbf``, or class HMMs as ``lmmk_class``), the states,
  ``lam``, ``nu`` and C all chosen by one inner CV in which the class HMMs of each
  inner fold are fitted on that fold's training part only, so pooled and
  per-class candidates are scored alike and no label of a validation sequence is
  seen; the class HMMs are then refitted on the whole training block;
* ``fisher``: the plain Fisher kernel (identity information) of the pooled HMM,
  (states, C) by inner CV;
* ``ppk``: the rho = 1 probability product kernel between per-sequence HMMs
  (one MAP EM step from the pooled 3-state HMM, tau = 1) over length-10
  sequences; C by inner CV;
* ``bayes``: the generative classifier, one 3-state HMM per class (the true
  structure), argmax of log likelihood plus log prior.

Tasks (``bayeskde.datasets``): two-class HMMs with categorical and with Gaussian
emissions that differ only in their transition matrices, and the DNA-like
exon/intron task. All sequences of a run share one length and every training
block one size, so each EM configuration compiles once. Gaussian LMMKs are exact
(eq. 31): the emission part is linear in ``e^-lam``, so two exact matrices (at
``lam = inf`` and ``lam = 0``) give it for every ``lam``.

Accuracy is mean ± standard error over stratified outer folds. ``--seeds S``
repeats the whole experiment for seeds ``--seed .. --seed + S - 1`` (new data and
new folds each) and adds, per task, every method's mean accuracy ± standard
error over seeds and the paired differences ``lmmk_select - fisher`` and
``lmmk_select - bayes`` (mean ± SE over seeds, seeds won/tied/lost). The JSON records
each fold's chosen setting as a dict (``lam`` infinite is the string ``"inf"``,
the delta-kernel limit; ``nu: null`` means no RBF map). Run ``python
models/sequence_classification.py`` (17 minutes on a loaded 2-core machine,
most of it ``lmmk_select`` refitting the class HMMs in every inner fold) or
``--quick`` (symbol tasks only, fewer sequences, three states only).
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
from _common import (
    Timer,
    enable_x64,
    fmt,
    parse_args,
    print_table,
    summarise,
    write_json,
)
from sklearn.model_selection import StratifiedKFold
from sklearn.svm import SVC

from bayeskde.datasets import make_exon_intron, make_hmm_classification
from bayeskde.hmm import batch_posteriors, fit_hmm, pad_sequences
from bayeskde.meanmap import (
    LatentFeatures,
    adapt_hmms,
    continuous_emission_gram_exact,
    discrete_latent_features,
    fisher_kernel,
    fisher_scores,
    hmm_log_kernel_gram,
    lmmk_gram_from_features,
    log_kernel_normalize,
    state_kernel_matrix,
    symbol_kernel_matrix,
)

NAME = "sequence_classification"
METHODS = ("lmmk_paper", "lmmk", "lmmk_rbf", "lmmk_class", "lmmk_select", "fisher",
           "ppk", "bayes")
# The fields of each method's candidate keys (then C), for the JSON and the log.
FIELDS = {
    "lmmk_paper": ("states", "lam", "nu"),
    "lmmk": ("states", "lam"),
    "lmmk_rbf": ("states", "lam", "nu"),
    "lmmk_class": ("states", "lam", "nu"),
    "lmmk_select": ("hmm", "states", "lam", "nu"),
    "fisher": ("states",),
    "ppk": ("states",),
}
CS = (0.1, 1.0, 10.0, 100.0)
LAMS = (0.5, 1.0, 2.0, 4.0, math.inf)
NUS = (0.3, 1.0, 3.0, 10.0)
EM = dict(n_iter=50, n_restarts=2)


def _normalised(K):
    K = np.asarray(K, np.float64)
    d = np.sqrt(np.maximum(np.diag(K), 1e-300))
    return K / d[:, None] / d[None, :]


def _rbf(Kn, nu):
    """Eq. (24) on a normalised kernel: ``K_ii = 1``."""
    return np.exp(-nu * np.maximum(2.0 - 2.0 * Kn, 0.0))


# ---------------------------------------------------------------- kernels


def _lmmk_factory(params, padded, lengths, emission, gamma=1.0):
    """``lam -> raw LMMK`` on all sequences under one HMM (eqs. 29-32)."""
    post = batch_posteriors(params, padded, lengths)
    n_states = params.log_initial.shape[0]
    if emission == "categorical":
        n_sym = params.emission.log_probs.shape[1]
        f = discrete_latent_features(post.gamma, padded, post.xi, lengths, n_sym)

        def gram(lam):
            return lmmk_gram_from_features(f, f, state_kernel_matrix(n_states, lam),
                                           symbol_kernel_matrix(n_sym, lam))
        return gram
    g = jnp.asarray(gamma, padded.dtype)
    args = (padded, post.gamma, lengths) * 2
    # v_xq is linear in e = e^-lam: (1 - e) v_xq(lam = inf) + e v_xq(lam = 0)
    matched = np.asarray(continuous_emission_gram_exact(
        *args, g, jnp.eye(n_states, dtype=padded.dtype)))
    every = np.asarray(continuous_emission_gram_exact(
        *args, g, jnp.ones((n_states, n_states), padded.dtype)))
    zero = jnp.zeros((padded.shape[0], n_states, 1), padded.dtype)
    trans = post.xi / jnp.maximum(lengths - 1, 1)[:, None, None]
    f = LatentFeatures(zero, trans.astype(padded.dtype))
    one = jnp.eye(1, dtype=padded.dtype)

    def gram(lam):
        e = math.exp(-lam)
        k_qq = lmmk_gram_from_features(f, f, state_kernel_matrix(n_states, lam), one)
        return (1 - e) * matched + e * every + np.asarray(k_qq)
    return gram


def _fit(key, seqs, n_states, emission):
    return fit_hmm(key, seqs, n_states, emission=emission, **EM).params


def _class_kernels(key, seqs, y, fit, padded, lengths, emission, states):
    """Normalised LMMKs under one HMM per class fitted on ``seqs[fit]`` only, the
    per-class kernels averaged (the latent mean maps concatenated), for every
    (states, lam, nu); and the per-class log likelihoods of 3-state models."""
    classes = np.unique(y)
    out, loglik = {}, None
    for n_states in states:
        key, sub = jax.random.split(key)
        per_class, ll = [], []
        for c, kc in zip(classes, jax.random.split(sub, len(classes)), strict=True):
            p = _fit(kc, [seqs[i] for i in fit if y[i] == c], n_states, emission)
            per_class.append(_lmmk_factory(p, padded, lengths, emission))
            ll.append(np.asarray(batch_posteriors(p, padded, lengths).log_likelihood))
        if n_states == 3:
            loglik = np.stack(ll, 1)
        for lam in LAMS:
            Kc = np.mean([_normalised(g(lam)) for g in per_class], axis=0)
            out[(n_states, lam, None)] = Kc
            for nu in NUS:
                out[(n_states, lam, nu)] = _rbf(Kc, nu)
    return out, loglik


def _candidates(key, seqs, y, train, inner, emission, states):
    """Every candidate kernel of every SVM method, the kernels of ``lmmk_select``
    for each inner fold, and the Bayes log posteriors (up to a constant)."""
    padded, lengths = pad_sequences(seqs)
    train_seqs = [seqs[i] for i in train]
    classes = np.unique(y)
    cand = {m: {} for m in METHODS if m != "bayes"}
    k_pool, k_cls, k_inner = jax.random.split(key, 3)
    for n_states in states:
        k_pool, sub = jax.random.split(k_pool)
        pooled = _fit(sub, train_seqs, n_states, emission)
        gram = _lmmk_factory(pooled, padded, lengths, emission)
        for lam in LAMS:
            Kn = _normalised(gram(lam))
            cand["lmmk"][(n_states, lam)] = Kn
            cand["lmmk_rbf"][(n_states, lam, None)] = Kn
            for nu in NUS:
                cand["lmmk_rbf"][(n_states, lam, nu)] = _rbf(Kn, nu)
            if n_states == 3 and math.isinf(lam):
                for nu in NUS:
                    cand["lmmk_paper"][(3, lam, nu)] = _rbf(Kn, nu)
        scores = fisher_scores(pooled, seqs).scores
        cand["fisher"][(n_states,)] = _normalised(fisher_kernel(scores))
        if n_states == 3:
            many = adapt_hmms(pooled, padded, lengths, tau=1.0)
            logK = hmm_log_kernel_gram(many, length=10)
            d = jnp.diagonal(logK)
            cand["ppk"][(3,)] = np.asarray(log_kernel_normalize(logK, d, d),
                                           np.float64)
    cand["lmmk_class"], loglik = _class_kernels(
        k_cls, seqs, y, train, padded, lengths, emission, states)
    prior = np.log([np.mean(y[train] == c) for c in classes])
    bayes = loglik + prior
    # lmmk_select: pooled candidates as they are (the pooled HMM sees no labels);
    # class candidates refitted inside each inner fold.
    select = {("pooled", *k): K for k, K in cand["lmmk_rbf"].items()}
    select.update({("class", *k): K for k, K in cand["lmmk_class"].items()})
    per_fold = {}
    for (a, _), kf in zip(inner, jax.random.split(k_inner, len(inner)),
                          strict=True):
        fold, _ = _class_kernels(kf, seqs, y, train[a], padded, lengths, emission,
                                 states)
        for k, K in fold.items():
            per_fold.setdefault(("class", *k), []).append(K)
    cand["lmmk_select"] = select
    return cand, per_fold, bayes


def _svm_acc(K, y, train, test, C):
    svm = SVC(kernel="precomputed", C=C).fit(K[np.ix_(train, train)], y[train])
    return float(np.mean(svm.predict(K[np.ix_(test, train)]) == y[test]))


def _select_and_test(kernels, y, train, test, inner, per_fold=None):
    """Inner CV on ``train`` over (kernel, C); refit; test accuracy.

    ``inner`` holds the inner folds (index pairs into ``train``); a kernel named
    in ``per_fold`` is scored in inner fold ``f`` with ``per_fold[name][f]``.
    """
    per_fold = per_fold or {}
    best, best_score = None, -1.0
    for name, K in kernels.items():
        Ks = per_fold.get(name, [K] * len(inner))
        for C in CS:
            score = np.mean([_svm_acc(Kf, y, train[a], train[b], C)
                             for Kf, (a, b) in zip(Ks, inner, strict=True)])
            if score > best_score + 1e-12:
                best, best_score = (name, C), score
    name, C = best
    return _svm_acc(kernels[name], y, train, test, C), (*name, C)


def _setting(method, choice):
    """A chosen (key..., C) as a JSON-safe dict: infinite lam as ``"inf"``."""
    out = {}
    for field, v in zip((*FIELDS[method], "C"), choice, strict=True):
        if isinstance(v, str) or v is None:
            out[field] = v
        elif field == "lam" and math.isinf(v):
            out[field] = "inf"
        elif field in ("states", "hmm"):
            out[field] = int(v)
        else:
            out[field] = float(v)
    return out


def _describe(setting):
    return " ".join(f"{k}={'-' if v is None else v}" for k, v in setting.items())


def run_task(key, data, emission, states, n_folds, seed):
    seqs, y = data.sequences, np.asarray(data.labels)
    folds = StratifiedKFold(n_folds, shuffle=True, random_state=seed)
    acc = {m: [] for m in METHODS}
    chosen = {m: [] for m in METHODS if m != "bayes"}
    for train, test in folds.split(np.zeros(len(y)), y):
        key, sub = jax.random.split(key)
        inner = list(StratifiedKFold(3, shuffle=True, random_state=seed).split(
            np.zeros(len(train)), y[train]))
        cand, per_fold, bayes = _candidates(sub, seqs, y, train, inner, emission,
                                            states)
        for m, kernels in cand.items():
            a, choice = _select_and_test(
                kernels, y, train, test, inner,
                per_fold if m == "lmmk_select" else None)
            acc[m].append(a)
            chosen[m].append(_setting(m, choice))
        acc["bayes"].append(float(np.mean(np.argmax(bayes[test], 1) == y[test])))
    return acc, chosen


def run_seed(seed, quick, timer):
    """Every task for one seed: its own data draw and its own outer folds."""
    # n per class a multiple of the fold count: every training block one size
    n, folds, length = (18, 3, 60) if quick else (60, 5, 80)
    states = (3,) if quick else (3, 6)
    key = jax.random.key(seed)
    k_cat, k_gau, k_dna, k_run = jax.random.split(key, 4)
    tasks = {
        "hmm_categorical": (make_hmm_classification(k_cat, n, length,
                                                    kind="categorical"),
                            "categorical"),
        "hmm_gaussian": (make_hmm_classification(k_gau, n, length, kind="gaussian",
                                                 noise=0.6), "gaussian"),
        "exon_intron": (make_exon_intron(k_dna, n, length), "categorical"),
    }
    if quick:
        del tasks["hmm_gaussian"]
    results, rows = {}, []
    for name, (data, emission) in tasks.items():
        k_run, sub = jax.random.split(k_run)
        acc, chosen = run_task(sub, data, emission, states, folds, seed)
        results[name] = {m: summarise(v) for m, v in acc.items()}
        results[name]["chosen"] = chosen
        rows.append([name] + [fmt(results[name][m]["mean"], results[name][m]["se"], 3)
                              for m in METHODS])
        print(f"seed {seed} {name}: done ({timer():.0f} s); settings chosen per "
              "outer fold:", flush=True)
        for m, settings in chosen.items():
            print(f"  {m:12s} " + " | ".join(_describe(c) for c in settings))
    print_table(f"Seed {seed}: accuracy (mean ± SE over {folds} folds, {2 * n} "
                f"sequences of length {length} per task; lmmk_class's inner CV is "
                "optimistic, lmmk_select's is not)", ["task", *METHODS], rows)
    config = {"n_per_class": n, "folds": folds, "length": length,
              "states": list(states)}
    return results, config


# The claim compares the principled LMMK with the two baselines.
PAIRS = (("lmmk_select", "fisher"), ("lmmk_select", "bayes"))


def summarise_seeds(per_seed):
    """Across seeds (each seed: new data and new folds), per task: the mean of
    every method's per-seed accuracy with its standard error over seeds, and the
    paired differences of :data:`PAIRS` (per seed, then mean ± SE over seeds),
    with how many seeds each side won."""
    tasks = next(iter(per_seed.values())).keys()
    out = {}
    for task in tasks:
        acc = {m: [per_seed[s][task][m]["mean"] for s in per_seed] for m in METHODS}
        entry = {m: summarise(v) for m, v in acc.items()}
        for a, b in PAIRS:
            d = np.subtract(acc[a], acc[b])
            entry[f"{a}-{b}"] = {**summarise(d), "wins": int(np.sum(d > 0)),
                                 "ties": int(np.sum(d == 0)),
                                 "losses": int(np.sum(d < 0))}
        out[task] = entry
    return out


def _config_payload(args, config):
    return {"name": NAME, "quick": args.quick, **config,
            "lams": ["inf" if math.isinf(v) else v for v in LAMS],
            "nus": list(NUS), "cs": list(CS)}


def main(argv=None):
    args = parse_args(
        NAME, __doc__.splitlines()[0], argv=argv,
        add_arguments=lambda p: p.add_argument(
            "--seeds", type=int, default=1,
            help="run seeds --seed, ..., --seed + SEEDS - 1 (new data and folds "
            "each) and report mean ± SE over seeds and the paired differences "
            "lmmk_select - fisher and lmmk_select - bayes (default 1)"),
    )
    if args.seeds < 1:
        raise SystemExit(f"--seeds must be >= 1, got {args.seeds}")
    enable_x64()
    timer = Timer()
    if args.seeds == 1:
        results, config = run_seed(args.seed, args.quick, timer)
        payload = {**_config_payload(args, config), "seed": args.seed,
                   "results": results, "seconds": timer()}
        write_json(args.out, payload)
        print(f"wrote {args.out} ({timer():.0f} s)")
        return
    per_seed = {}
    for seed in range(args.seed, args.seed + args.seeds):
        per_seed[seed], config = run_seed(seed, args.quick, timer)
        summary = summarise_seeds(per_seed)
        # Written after every seed, so that an interrupted run keeps its seeds.
        write_json(args.out, {**_config_payload(args, config),
                              "seeds": list(per_seed), "summary": summary,
                              "per_seed": per_seed, "seconds": timer()})
    rows = [[task] + [fmt(s[m]["mean"], s[m]["se"], 3) for m in METHODS]
            for task, s in summary.items()]
    print_table(f"Accuracy over {args.seeds} seeds (mean ± SE over seeds of each "
                "seed's mean over its outer folds)", ["task", *METHODS], rows)
    rows = [[task] + [f"{fmt(s[k]['mean'], s[k]['se'], 3)} "
                      f"({s[k]['wins']}/{s[k]['ties']}/{s[k]['losses']})"
                      for k in (f"{a}-{b}" for a, b in PAIRS)]
            for task, s in summary.items()]
    print_table("Paired differences over seeds (mean ± SE; seeds won/tied/lost)",
                ["task", *(f"{a} - {b}" for a, b in PAIRS)], rows)
    print(f"wrote {args.out} ({timer():.0f} s)")


if __name__ == "__main__":
    main()
