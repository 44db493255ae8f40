"""HMM posteriors for a batch of sequences: bayeskde vs dynamax vs hmmlearn.

Workload (issue 4): smoothed marginals for ``--n-seq`` (1000) sequences of ``--length``
(200) steps from an ``--n-states`` (8) state HMM with random parameters, once with
categorical emissions (``--n-symbols`` 10) and once with diagonal Gaussian emissions
(``--dim`` 3). The data are drawn from the same HMM with ``bayeskde.hmm.sample_hmm``.

- bayeskde: ``batch_posteriors(params, padded, lengths)``: emission log likelihoods,
  then the vmapped scaled forward-backward (gamma and summed xi), one jitted call.
- dynamax: ``hmm_smoother`` (with its transition probabilities, the counterpart of
  xi) vmapped over the batch inside one jitted function that computes the same
  log likelihoods with bayeskde's emission functions.
- hmmlearn: ``CategoricalHMM`` / ``GaussianHMM(covariance_type="diag")`` with the same
  parameters set by hand, ``predict_proba`` on the concatenated sequences with
  ``lengths`` (``implementation="log"``, its default, and ``"scaling"``).

The check (asserted): the largest absolute difference of the smoothed marginals to
each peer is below 1e-6. This is where bayeskde's agreement with hmmlearn is shown:
hmmlearn is a bench dependency, not a test one. Everything runs in float64 (this
script, never the library, turns on x64). Times are medians of ``--repeats`` runs
after a warm-up call, whose excess over the median is reported as compile time.

``--recursions`` adds a line measuring the choice made in
``bayeskde.hmm.inference``: the library's scaled recursions against a log-space
(log-sum-exp over an N x N matrix per step) forward-backward written here, same
batch, same outputs (gamma, summed xi, log likelihood).

Run: ``python bench/hmm.py [--repeats 3] [--recursions]``. Prints JSON lines.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import jax

jax.config.update("jax_enable_x64", True)

import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from dynamax.hidden_markov_model import hmm_smoother  # noqa: E402
from hmmlearn.hmm import CategoricalHMM, GaussianHMM  # noqa: E402
from jax import lax  # noqa: E402
from jax.scipy.special import logsumexp  # noqa: E402

from bayeskde.hmm import (  # noqa: E402
    CategoricalEmission,
    GaussianEmission,
    HMMParams,
    batch_posteriors,
    emission_log_likelihoods,
    sample_hmm,
)


def _batch_log_likelihoods(emission, padded):
    batch, t_max = padded.shape[:2]
    flat = padded.reshape((batch * t_max,) + padded.shape[2:])
    return emission_log_likelihoods(emission, flat).reshape(batch, t_max, -1)


def _random_params(rng, n_states, emission, n_symbols, dim):
    pi = rng.dirichlet(np.ones(n_states))
    # Sticky transitions, as in most applications.
    A = rng.dirichlet(np.ones(n_states), size=n_states) + 4 * np.eye(n_states)
    A /= A.sum(1, keepdims=True)
    if emission == "categorical":
        em = CategoricalEmission(
            jnp.log(rng.dirichlet(np.ones(n_symbols), size=n_states))
        )
    else:
        em = GaussianEmission(
            jnp.asarray(rng.normal(scale=2.0, size=(n_states, dim))),
            jnp.asarray(rng.uniform(0.5, 2.0, size=(n_states, dim))),
        )
    return HMMParams(jnp.log(pi), jnp.log(A), em)


def _timed(fn, repeats):
    t0 = time.perf_counter()
    out = jax.block_until_ready(fn())
    first = time.perf_counter() - t0
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        jax.block_until_ready(fn())
        times.append(time.perf_counter() - t0)
    med = statistics.median(times)
    return out, med, first - med


@jax.jit
def _dynamax_posteriors(params, padded):
    ll = _batch_log_likelihoods(params.emission, padded)
    smooth = jax.vmap(hmm_smoother, in_axes=(None, None, 0))(
        jnp.exp(params.log_initial), jnp.exp(params.log_transition), ll
    )
    return smooth.smoothed_probs


def _hmmlearn_model(params, emission, implementation):
    n = params.log_initial.shape[0]
    if emission == "categorical":
        m = CategoricalHMM(n, implementation=implementation, init_params="", params="")
        m.emissionprob_ = np.exp(np.asarray(params.emission.log_probs))
        m.n_features = m.emissionprob_.shape[1]
    else:
        m = GaussianHMM(
            n, covariance_type="diag", implementation=implementation,
            init_params="", params="",
        )
        m.means_ = np.asarray(params.emission.means)
        m.covars_ = np.asarray(params.emission.covariances)
    m.startprob_ = np.exp(np.asarray(params.log_initial))
    m.transmat_ = np.exp(np.asarray(params.log_transition))
    return m


def _log_space_fb(log_initial, log_transition, ll):
    """Reference log-space forward-backward (logsumexp over N x N per step)."""

    def _fwd(carry, x):
        la = logsumexp(carry[:, None] + log_transition, axis=0) + x
        return la, la

    first = log_initial + ll[0]
    _, rest = lax.scan(_fwd, first, ll[1:])
    log_alpha = jnp.concatenate([first[None], rest])

    def _bwd(carry, x):
        lb = logsumexp(log_transition + (x + carry)[None, :], axis=1)
        return lb, lb

    last = jnp.zeros_like(log_initial)
    _, rest_b = lax.scan(_bwd, last, ll[1:], reverse=True)
    log_beta = jnp.concatenate([rest_b, last[None]])
    log_z = logsumexp(log_alpha[-1])
    gamma = jnp.exp(log_alpha + log_beta - log_z)
    log_xi = (
        log_alpha[:-1, :, None]
        + log_transition[None]
        + (ll[1:] + log_beta[1:])[:, None, :]
        - log_z
    )
    return gamma, jnp.exp(logsumexp(log_xi, axis=0)), log_z


@jax.jit
def _log_space_posteriors(params, padded):
    ll = _batch_log_likelihoods(params.emission, padded)
    return jax.vmap(_log_space_fb, in_axes=(None, None, 0))(
        params.log_initial, params.log_transition, ll
    )


def run(args, emission):
    rng = np.random.default_rng(0)
    params = _random_params(rng, args.n_states, emission, args.n_symbols, args.dim)
    sample = sample_hmm(jax.random.key(1), params, args.n_seq, args.length)
    padded = sample.observations
    lengths = jnp.full(args.n_seq, args.length, jnp.int32)

    post, ours_s, ours_compile = _timed(
        lambda: batch_posteriors(params, padded, lengths), args.repeats
    )
    dyn, dyn_s, dyn_compile = _timed(
        lambda: _dynamax_posteriors(params, padded), args.repeats
    )
    gamma = np.asarray(post.gamma)
    record = {
        "bench": "hmm_posteriors",
        "emission": emission,
        "n_seq": args.n_seq,
        "length": args.length,
        "n_states": args.n_states,
        "n_symbols" if emission == "categorical" else "dim": (
            args.n_symbols if emission == "categorical" else args.dim
        ),
        "dtype": "float64",
        "backend": jax.default_backend(),
        "repeats": args.repeats,
        "bayeskde_s": ours_s,
        "bayeskde_compile_s": ours_compile,
        "dynamax_s": dyn_s,
        "dynamax_compile_s": dyn_compile,
        "speedup_vs_dynamax": dyn_s / ours_s,
        "max_abs_diff_dynamax": float(np.abs(gamma - np.asarray(dyn)).max()),
    }
    obs = np.asarray(padded)
    X = obs.reshape(-1, 1) if emission == "categorical" else obs.reshape(-1, args.dim)
    hl_lengths = np.full(args.n_seq, args.length)
    for impl in ("log", "scaling"):
        model = _hmmlearn_model(params, emission, impl)
        times = []
        for _ in range(args.repeats):
            t0 = time.perf_counter()
            ref = model.predict_proba(X, hl_lengths)
            times.append(time.perf_counter() - t0)
        hl_s = statistics.median(times)
        record[f"hmmlearn_{impl}_s"] = hl_s
        record[f"speedup_vs_hmmlearn_{impl}"] = hl_s / ours_s
        record[f"max_abs_diff_hmmlearn_{impl}"] = float(
            np.abs(gamma.reshape(-1, args.n_states) - ref).max()
        )
    # The log likelihood too, against hmmlearn's score.
    score = _hmmlearn_model(params, emission, "log").score(X, hl_lengths)
    record["loglik_rel_diff_hmmlearn"] = float(
        abs(float(jnp.sum(post.log_likelihood)) - score) / abs(score)
    )
    for key in ("max_abs_diff_dynamax", "max_abs_diff_hmmlearn_log",
                "max_abs_diff_hmmlearn_scaling"):
        assert record[key] < 1e-6, (key, record[key])
    assert record["loglik_rel_diff_hmmlearn"] < 1e-9, record
    print(json.dumps(record), flush=True)

    # Float32: the same data and parameters rounded; checked against float64.
    params32 = jax.tree.map(lambda a: a.astype(jnp.float32), params)
    padded32 = padded if emission == "categorical" else padded.astype(jnp.float32)
    post32, ours32_s, ours32_compile = _timed(
        lambda: batch_posteriors(params32, padded32, lengths), args.repeats
    )
    dyn32, dyn32_s, dyn32_compile = _timed(
        lambda: _dynamax_posteriors(params32, padded32), args.repeats
    )
    rec32 = {
        "bench": "hmm_posteriors", "emission": emission, "dtype": "float32",
        "backend": jax.default_backend(), "repeats": args.repeats,
        "bayeskde_s": ours32_s, "bayeskde_compile_s": ours32_compile,
        "dynamax_s": dyn32_s, "dynamax_compile_s": dyn32_compile,
        "speedup_vs_dynamax": dyn32_s / ours32_s,
        "speedup_vs_hmmlearn_log_f64": record["hmmlearn_log_s"] / ours32_s,
        "max_abs_diff_float64": float(np.abs(np.asarray(post32.gamma) - gamma).max()),
        "max_abs_diff_dynamax": float(
            np.abs(np.asarray(post32.gamma) - np.asarray(dyn32)).max()
        ),
    }
    assert rec32["max_abs_diff_float64"] < 1e-3, rec32
    print(json.dumps(rec32), flush=True)

    if args.recursions:
        ref_gamma, ref_xi, ref_z = _log_space_posteriors(params, padded)
        _, log_s, log_compile = _timed(
            lambda: _log_space_posteriors(params, padded), args.repeats
        )
        rec = {
            "bench": "hmm_recursions",
            "emission": emission,
            "scaled_s": ours_s,
            "log_space_s": log_s,
            "log_space_compile_s": log_compile,
            "log_space_over_scaled": log_s / ours_s,
            "max_abs_diff_gamma": float(np.abs(gamma - np.asarray(ref_gamma)).max()),
            "max_abs_diff_xi": float(
                np.abs(np.asarray(post.xi) - np.asarray(ref_xi)).max()
            ),
            "max_abs_diff_loglik": float(
                np.abs(np.asarray(post.log_likelihood) - np.asarray(ref_z)).max()
            ),
        }
        print(json.dumps(rec), flush=True)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--n-seq", type=int, default=1000)
    p.add_argument("--length", type=int, default=200)
    p.add_argument("--n-states", type=int, default=8)
    p.add_argument("--n-symbols", type=int, default=10)
    p.add_argument("--dim", type=int, default=3)
    p.add_argument("--recursions", action="store_true")
    p.add_argument("--emission", choices=("categorical", "gaussian", "both"),
                   default="both")
    args = p.parse_args()
    kinds = ("categorical", "gaussian") if args.emission == "both" else (args.emission,)
    for emission in kinds:
        run(args, emission)


if __name__ == "__main__":

    main()
