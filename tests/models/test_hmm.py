"""Tests of the Bayesian HMM and its posterior-averaged mean-map kernels.

Oracles: brute-force enumeration of every state path, a quadrature grid
posterior, simulation-based calibration against truths drawn by NumPy, and the
EM-layer kernels of :mod:`bayeskde.meanmap` (including a time-domain double sum,
eq. 31, for the averaged embeddings).
"""

import itertools
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from numpyro import handlers
from numpyro.diagnostics import effective_sample_size
from numpyro.infer.util import log_density
from scipy import stats
from scipy.special import logsumexp

from bayeskde.hmm import (
    batch_posteriors,
    pad_sequences,
)
from bayeskde.infer import (
    replicated_nuts,
    run_nuts,
    run_svi,
    sbc_rank_test,
    to_inference_data,
)
from bayeskde.models import (
    BayesianHMMPrior,
    bayesian_hmm_model,
    check_hmm_data,
    hmm_draws,
    hmm_sequence_log_likelihoods,
    simulate_categorical_hmm,
)
from tests.helpers import X64
from tests.models.hmm_checks import random_hmm


@pytest.fixture
def numpyro_broadcasting():
    """Sampling needs NumPy broadcasting: numpyro's StickBreakingTransform (the
    unconstrained form of a batch of Dirichlet rows) subtracts a ``(K,)`` from a
    ``(N, K)`` array, which the suite's strict rank promotion refuses."""
    with jax.numpy_rank_promotion("allow"):
        yield


# ------------------------------------------------------------- brute force


def _brute_loglik(pi, A, emit):
    """log p(x) by summing over all N^T paths; ``emit`` (T, N) log densities."""
    T, N = emit.shape
    paths = np.array(list(itertools.product(range(N), repeat=T)))
    lp = np.log(pi)[paths[:, 0]] + emit[0, paths[:, 0]]
    for t in range(1, T):
        lp = lp + np.log(A)[paths[:, t - 1], paths[:, t]] + emit[t, paths[:, t]]
    return logsumexp(lp)


def _emit(em, x):
    if "emission_probs" in em:
        return np.log(em["emission_probs"][:, x].T)
    m, v = em["emission_mean"], em["emission_var"]
    return stats.norm(m[None], np.sqrt(v)[None]).logpdf(x[:, None, :]).sum(-1)


@pytest.mark.parametrize("emission", ["categorical", "gaussian"])
def test_log_likelihood_equals_brute_force_enumeration(emission, rng, tol):
    N, T_max = 3, 5
    pi, A, em = random_hmm(rng, N, K=4 if emission == "categorical" else None,
                            D=2)
    if emission == "categorical":
        seqs = [rng.integers(0, 4, size=t) for t in (5, 3, 1)]
    else:
        seqs = [rng.normal(size=(t, 2)) for t in (5, 3, 1)]
    obs, lengths = pad_sequences(seqs)
    assert obs.shape[1] == T_max
    ref = np.array([_brute_loglik(pi, A, _emit(em, s)) for s in seqs])
    values = {"initial": pi, "transition": A, **em}
    values = {k: jnp.asarray(v, jnp.zeros(()).dtype) for k, v in values.items()}
    kw = dict(n_symbols=4) if emission == "categorical" else {}
    model = partial(bayesian_hmm_model, obs, lengths, N, emission, **kw)
    tr = handlers.trace(handlers.substitute(handlers.seed(model, 0), values)
                        ).get_trace()
    site = tr["obs"]
    got = np.asarray(site["fn"].log_prob(site["value"]))
    np.testing.assert_allclose(got, ref, rtol=tol * 10, atol=0)
    # The log joint adds the priors (constrained space, as scipy writes them).
    prior = BayesianHMMPrior()
    lp = stats.dirichlet(np.ones(N)).logpdf(pi)
    lp += sum(stats.dirichlet(np.ones(N)).logpdf(r) for r in A)
    if emission == "categorical":
        lp += sum(stats.dirichlet(np.ones(4)).logpdf(r)
                  for r in em["emission_probs"])
    else:
        v, m = em["emission_var"], em["emission_mean"]
        lp += stats.invgamma(prior.var_shape, scale=prior.var_scale).logpdf(v).sum()
        lp += stats.norm(0.0, np.sqrt(v / prior.mean_precision)).logpdf(m).sum()
    joint, _ = log_density(bayesian_hmm_model, (obs, lengths, N, emission),
                           kw, values)
    np.testing.assert_allclose(float(joint), lp + ref.sum(), rtol=tol * 10)
    # the same code as the public helper and as the EM layer's posteriors
    params = hmm_draws({k: v[None] for k, v in values.items()})
    params = jax.tree.map(lambda a: a[0], params)
    np.testing.assert_allclose(
        np.asarray(hmm_sequence_log_likelihoods(params, obs, lengths)), ref,
        rtol=tol * 10)
    np.testing.assert_allclose(
        np.asarray(batch_posteriors(params, obs, lengths).log_likelihood), ref,
        rtol=tol * 10)


# ------------------------------------------------------- concentrated prior


def test_svi_map_under_a_concentrated_gaussian_prior_is_the_prior(
        numpyro_broadcasting):
    """Normal-Inverse-Gamma priors of strength 1e5 against 21 observations: the
    posterior is a near point mass whose mode lies within ~21/1e5 of the prior's
    (conjugate update), so the MAP that SVI with a delta guide finds is the prior
    mean. The Markov chain is fixed by conditioning, as is the initial law."""
    rng = np.random.default_rng(4)
    m0 = np.array([[-2.0, 0.5], [1.0, 3.0]])
    v0 = np.array([[0.5, 1.0], [2.0, 0.25]])
    a = 1e5
    prior = BayesianHMMPrior(mean_loc=m0, mean_precision=1e5, var_shape=a,
                             var_scale=(a - 1) * v0)
    dt = jnp.zeros(()).dtype
    model = handlers.condition(bayesian_hmm_model, data={
        "initial": jnp.asarray([0.4, 0.6], dt),
        "transition": jnp.asarray([[0.9, 0.1], [0.2, 0.8]], dt)})
    obs, lengths = pad_sequences([rng.normal(size=(t, 2)) for t in (8, 8, 5)])
    fit = run_svi(jax.random.key(2), model, obs, lengths, 2, "gaussian",
                  prior=prior, guide="delta", num_steps=1500, learning_rate=2e-2,
                  progress_bar=False)
    med = fit.guide.median(fit.params)
    assert np.all(np.isfinite(fit.losses))
    np.testing.assert_allclose(med["emission_mean"], m0, atol=1e-2)
    np.testing.assert_allclose(med["emission_var"], v0, rtol=1e-2)


# ------------------------------------------------------------ grid posterior

_GRID_PI = np.array([0.6, 0.4])
_GRID_B = np.array([[0.85, 0.15], [0.25, 0.75]])
_GRID_CONC = np.array([[2.0, 1.5], [1.5, 2.0]])


def _grid_problem():
    rng = np.random.default_rng(11)
    seqs = [rng.integers(0, 2, size=t) for t in (5, 5, 4, 5, 3)]
    return seqs, pad_sequences(seqs)


def _grid_log_likelihood(p00, p11, x):
    A = np.array([[p00, 1 - p00], [1 - p11, p11]])
    return _brute_loglik(_GRID_PI, A, np.log(_GRID_B[:, x].T))


def _grid_log_posterior(p00, p11, seqs):
    """Unnormalised log p(p00, p11 | x): Beta priors plus brute-force likelihood."""
    lp = stats.beta(*_GRID_CONC[0]).logpdf(p00) + stats.beta(
        *_GRID_CONC[1][::-1]).logpdf(p11)
    for s in seqs:
        emit = np.log(_GRID_B[:, s].T)
        T = len(s)
        paths = np.array(list(itertools.product(range(2), repeat=T)))
        base = np.log(_GRID_PI)[paths[:, 0]] + emit[0, paths[:, 0]]
        base = base + sum(emit[t, paths[:, t]] for t in range(1, T))
        n00 = np.sum((paths[:, :-1] == 0) & (paths[:, 1:] == 0), 1)
        n01 = np.sum((paths[:, :-1] == 0) & (paths[:, 1:] == 1), 1)
        n11 = np.sum((paths[:, :-1] == 1) & (paths[:, 1:] == 1), 1)
        n10 = np.sum((paths[:, :-1] == 1) & (paths[:, 1:] == 0), 1)
        terms = (base + np.multiply.outer(np.log(p00), n00)
                 + np.multiply.outer(np.log1p(-p00), n01)
                 + np.multiply.outer(np.log(p11), n11)
                 + np.multiply.outer(np.log1p(-p11), n10))
        lp = lp + logsumexp(terms, axis=-1)
    return lp


@pytest.fixture(scope="module")
def grid_posterior():
    seqs, (obs, lengths) = _grid_problem()
    g = (np.arange(400) + 0.5) / 400
    P00, P11 = np.meshgrid(g, g, indexing="ij")
    lp = _grid_log_posterior(P00, P11, seqs)
    w = np.exp(lp - lp.max())
    w /= w.sum()
    out = {}
    for name, P in (("p00", P00), ("p11", P11)):
        mean = np.sum(w * P)
        out[name] = (mean, np.sqrt(np.sum(w * (P - mean) ** 2)))
    return seqs, obs, lengths, out


def _conditioned_model():
    prior = BayesianHMMPrior(transition_concentration=_GRID_CONC)
    data = {"initial": jnp.asarray(_GRID_PI, jnp.zeros(()).dtype),
            "emission_probs": jnp.asarray(_GRID_B, jnp.zeros(()).dtype)}
    model = handlers.condition(bayesian_hmm_model, data=data)
    return partial(model, n_states=2, n_symbols=2, prior=prior)


def test_posterior_equals_brute_force_grid_posterior(grid_posterior,
                                                     numpyro_broadcasting):
    _, obs, lengths, ref = grid_posterior
    mcmc = run_nuts(jax.random.key(5), _conditioned_model(), obs, lengths,
                    num_warmup=300, num_samples=2000, num_chains=2,
                    progress_bar=False)
    A = np.asarray(mcmc.get_samples(group_by_chain=True)["transition"])
    # ArviZ: one log likelihood per sequence, named dims
    idata = to_inference_data(
        mcmc, coords={"sequence": np.arange(5), "state": [0, 1], "next": [0, 1]},
        dims={"obs": ["sequence", "time"], "transition": ["state", "next"]})
    assert idata.log_likelihood["obs"].dims == ("chain", "draw", "sequence")
    assert idata.posterior["transition"].dims == ("chain", "draw", "state", "next")
    ll = np.asarray(idata.log_likelihood["obs"])[0, :5]
    seqs = _grid_problem()[0]
    for d in range(5):
        ref_ll = [_grid_log_likelihood(A[0, d, 0, 0], A[0, d, 1, 1], x) for x in seqs]
        np.testing.assert_allclose(ll[d], ref_ll, rtol=1e-9 if X64 else 1e-5)
    for name, x in (("p00", A[..., 0, 0]), ("p11", A[..., 1, 1])):
        mean, sd = ref[name]
        ess = float(effective_sample_size(x))
        assert ess > 1000
        # 4 Monte Carlo standard errors (fixed seed: deterministic)
        assert abs(x.mean() - mean) < 4 * sd / np.sqrt(ess), (name, x.mean(), mean)
        assert abs(x.std() / sd - 1) < 4 / np.sqrt(2 * ess), (name, x.std(), sd)


# ----------------------------------------------------------------------- SBC

R, N_SEQ, T_SBC, L, THIN, WARMUP = 40, 4, 6, 99, 4, 200


def _priors(initial, transition, emission):
    """R copies of a prior as arrays (a pytree that vmap can batch)."""
    dt = jnp.zeros(()).dtype
    fields = BayesianHMMPrior(initial, transition, emission)
    return BayesianHMMPrior(*(jnp.broadcast_to(jnp.asarray(f, dt),
                                               (R,) + np.shape(f))
                              for f in fields))


@pytest.fixture(scope="module")
def vmapped_nuts():
    """NUTS for R data sets and priors at once: one compiled program
    (``bayeskde.infer.replicated_nuts``). Each replication: WARMUP adaptation
    steps, then L * THIN draws thinned by THIN. Returns
    ``sample(key, obs, priors) -> constrained draws``."""
    lengths = jnp.full(N_SEQ, T_SBC, jnp.int32)
    model = partial(bayesian_hmm_model, n_states=2, n_symbols=2)
    obs0 = jnp.zeros((N_SEQ, T_SBC), jnp.int32)
    prior0 = jax.tree.map(lambda a: a[0], _priors(1.0, 1.0, 1.0))
    run = replicated_nuts(model, (obs0, lengths), {"prior": prior0},
                          num_warmup=WARMUP, num_draws=L, thin=THIN)

    def sample(key, obs, priors):
        return run(key, (jnp.asarray(obs), jnp.broadcast_to(lengths, (R, N_SEQ))),
                   {"prior": priors})

    return sample


def _sbc_data(rng, conc_b):
    return simulate_categorical_hmm(rng, conc_b, R, N_SEQ, T_SBC)


@pytest.mark.slow
def test_simulation_based_calibration(vmapped_nuts, numpyro_broadcasting):
    """SBC (Talts et al. 2018) for a 2-state, 2-symbol HMM, 5 scalar parameters.

    R = 40 truths are drawn from the prior and data simulated with NumPy; each
    replication's posterior is sampled by NUTS (200 warmup, 396 draws thinned by
    4 to L = 99 nearly independent draws: the rank test assumes independent
    draws, and the assertion on the ESS checks that thinning achieved it). Ranks
    (0..L, 100 values) fall in 10 bins; chi-square tests per parameter
    (Bonferroni) and pooled. The emission prior is asymmetric (state 0 favours
    symbol 0) so the posterior has one dominant labelling: with exchangeable
    priors a chain that stays in one of the two symmetric modes is not a sample
    of the full posterior and SBC would (rightly) flag it.
    """
    conc_b = np.array([[4.0, 1.0], [1.0, 4.0]])
    truths, obs = _sbc_data(np.random.default_rng(20240611), conc_b)
    post = vmapped_nuts(jax.random.key(1), obs, _priors(1.0, 1.0, conc_b))
    draws = np.stack([post["initial"][..., 0], post["transition"][..., 0, 0],
                      post["transition"][..., 1, 1], post["emission_probs"][..., 0, 0],
                      post["emission_probs"][..., 1, 1]], -1)  # (R, L, 5)
    assert draws.shape == (R, L, 5)
    ess = np.array([[float(effective_sample_size(draws[r, None, :, j]))
                     for j in range(5)] for r in range(R)])
    assert np.median(ess) > 0.5 * L
    res = sbc_rank_test(draws, truths, bins=10)
    assert res.p_min_bonferroni > 0.01, res.p_each  # Bonferroni over 5 parameters
    assert res.p_pooled > 0.01, res.p_pooled


@pytest.mark.slow
def test_concentrated_prior_posterior_recovers_the_prior(vmapped_nuts,
                                                         numpyro_broadcasting):
    """Priors of strength 1e5 per row against 24 observations per data set: the
    conjugate posterior mean lies within ~24/1e5 of the prior mean, and the NUTS
    mean of 99 draws within ~1e-3 / sqrt(99) of that (40 data sets at once)."""
    pi0, A0 = np.array([0.3, 0.7]), np.array([[0.8, 0.2], [0.35, 0.65]])
    B0 = np.array([[0.6, 0.4], [0.1, 0.9]])
    _, obs = _sbc_data(np.random.default_rng(7), np.ones((2, 2)))
    post = vmapped_nuts(jax.random.key(2), obs,
                        _priors(1e5 * pi0, 1e5 * A0, 1e5 * B0))
    for name, ref in (("initial", pi0), ("transition", A0), ("emission_probs", B0)):
        mean = np.asarray(post[name]).mean(axis=1)  # (R, ...)
        np.testing.assert_allclose(mean, np.broadcast_to(ref, mean.shape),
                                   atol=1e-3)


# -------------------------------------------------------------- bad input


def _nuts(obs, lengths, n_states=2, **kw):
    return run_nuts(jax.random.key(0), bayesian_hmm_model, obs, lengths, n_states,
                    num_warmup=1, num_samples=1, num_chains=1, progress_bar=False,
                    **kw)


def test_bad_data_is_refused_before_sampling(numpyro_broadcasting):
    obs, lengths = pad_sequences([np.array([0, 1, 2]), np.array([1, 0])])
    x = np.random.default_rng(0).normal(size=(2, 4, 2))
    bad_x = x.copy()
    bad_x[1, 2, 0] = np.nan
    cases = [
        (dict(obs=bad_x, lengths=np.array([4, 3]), emission="gaussian"), "NaN"),
        (dict(obs=np.asarray(obs)[0], lengths=lengths), r"\(B, T_max\)"),
        (dict(obs=x, lengths=np.array([4, 3])), r"\(B, T_max\)"),
        (dict(obs=obs, lengths=np.array([3, 2, 1])), "lengths must have shape"),
        (dict(obs=obs, lengths=np.array([3, 4])), r"lengths must lie in \[1, 3\]"),
        (dict(obs=np.zeros((0, 3), np.int32), lengths=np.zeros(0, np.int32)),
         "no sequences"),
        (dict(obs=np.zeros((2, 0), np.int32), lengths=np.zeros(2, np.int32)),
         "T_max >= 1"),
        (dict(obs=obs, lengths=lengths, n_states=0), "n_states must be >= 1"),
        (dict(obs=obs, lengths=lengths, n_symbols=2), "outside the alphabet"),
        (dict(obs=-np.asarray(obs), lengths=lengths), "negative symbol"),
        (dict(obs=np.asarray(obs, np.float64) + 0.5, lengths=lengths),
         "integer symbols"),
        (dict(obs=obs, lengths=lengths, emission="poisson"), "emission must be"),
        (dict(obs=obs, lengths=lengths,
              prior=BayesianHMMPrior(transition_concentration=-1.0)), "> 0"),
        (dict(obs=obs, lengths=lengths,
              prior=BayesianHMMPrior(emission_concentration=np.ones((2, 5)))),
         "broadcast"),
    ]
    for kw, match in cases:
        with pytest.raises(ValueError, match=match):
            _nuts(**kw)
    with pytest.raises(TypeError, match="n_states"):
        check_hmm_data(obs, lengths, 2.5)


def test_observed_site_samples_padded_sequences():
    obs, lengths = pad_sequences([np.array([0, 1, 1, 0]), np.array([1, 1])])
    values = {"initial": jnp.array([0.5, 0.5]),
              "transition": jnp.array([[0.9, 0.1], [0.2, 0.8]]),
              "emission_probs": jnp.array([[1.0, 0.0], [0.0, 1.0]])}
    model = handlers.substitute(partial(bayesian_hmm_model, n_states=2,
                                        n_symbols=2), values)
    fn = handlers.trace(model).get_trace(obs, lengths)["obs"]["fn"]
    draw = np.asarray(fn.sample(jax.random.key(1), (400,)))
    assert draw.shape == (400, 2, 4)
    assert np.all(draw[:, 1, 2:] == 0) and set(np.unique(draw)) <= {0, 1}
    # emissions are the identity: the symbols are the states, a Markov chain
    x = draw[:, 0]
    stay0 = np.mean(x[:, 1:][x[:, :-1] == 0] == 0)
    assert abs(stay0 - 0.9) < 4 * np.sqrt(0.09 / np.sum(x[:, :-1] == 0))
