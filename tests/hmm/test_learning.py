"""Padding, batched posteriors, Baum-Welch EM and sampling."""

import itertools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from bayeskde.hmm import (
    CategoricalEmission,
    GaussianEmission,
    HMMParams,
    batch_posteriors,
    emission_log_likelihoods,
    fit_hmm,
    forward_backward,
    pad_sequences,
    sample_hmm,
)
from tests.helpers import X64, count_compilations

ATOL = 1e-10 if X64 else 2e-5


def _params(emission="categorical", covariance="diag"):
    pi = jnp.log(jnp.array([0.6, 0.3, 0.1]))
    A = jnp.log(jnp.array([[0.8, 0.15, 0.05], [0.1, 0.8, 0.1], [0.05, 0.15, 0.8]]))
    if emission == "categorical":
        B = jnp.array([[0.8, 0.1, 0.05, 0.05], [0.05, 0.8, 0.1, 0.05],
                       [0.05, 0.05, 0.1, 0.8]])
        return HMMParams(pi, A, CategoricalEmission(jnp.log(B)))
    means = jnp.array([[-4.0, 0.0], [0.0, 4.0], [4.0, 0.0]])
    if covariance == "full":
        covs = jnp.array([[[1.0, 0.3], [0.3, 0.5]], [[0.7, -0.2], [-0.2, 1.0]],
                          [[0.5, 0.0], [0.0, 0.5]]])
    else:
        covs = jnp.array([[1.0, 0.5], [0.7, 1.0], [0.5, 0.5]])
    return HMMParams(pi, A, GaussianEmission(means, covs))


def test_pad_sequences_and_errors():
    padded, lengths = pad_sequences([np.array([1, 2]), np.array([3])], n_symbols=4)
    assert padded.tolist() == [[1, 2], [3, 0]] and lengths.tolist() == [2, 1]
    padded, lengths = pad_sequences([np.ones((2, 3)), np.ones((4, 3))])
    assert padded.shape == (2, 4, 3) and lengths.tolist() == [2, 4]
    with pytest.raises(ValueError, match="empty"):
        pad_sequences([np.array([1]), np.array([], int)])
    with pytest.raises(ValueError, match="empty"):
        pad_sequences([])
    with pytest.raises(ValueError, match="ragged"):
        pad_sequences([np.ones((2, 3)), np.ones((2, 2))])
    with pytest.raises(ValueError, match="NaN"):
        pad_sequences([np.array([[0.0], [np.nan]])])
    with pytest.raises(ValueError, match="negative"):
        pad_sequences([np.array([0, -1])])
    with pytest.raises(ValueError, match="alphabet"):
        pad_sequences([np.array([0, 4])], n_symbols=4)
    with pytest.raises(ValueError, match="alphabet"):
        fit_hmm(jax.random.key(0), [np.array([0, 4])], 2, n_symbols=4)


@pytest.mark.parametrize("emission", ["categorical", "gaussian"])
def test_batch_posteriors_equal_per_sequence(key, emission):
    params = _params(emission, "full")
    sample = sample_hmm(key, params, 4, 9)
    lengths = [9, 1, 5, 7]
    seqs = [np.asarray(sample.observations[i, :n]) for i, n in enumerate(lengths)]
    padded, lens = pad_sequences(seqs)
    post = batch_posteriors(params, padded, lens)
    assert post.gamma.shape == (4, 9, 3) and post.xi.shape == (4, 3, 3)
    for i, s in enumerate(seqs):
        ll = emission_log_likelihoods(params.emission, jnp.asarray(s))
        one = forward_backward(params.log_initial, params.log_transition, ll)
        n = lengths[i]
        np.testing.assert_allclose(post.gamma[i, :n], one.gamma, atol=ATOL, rtol=0)
        np.testing.assert_array_equal(post.gamma[i, n:], 0.0)
        np.testing.assert_allclose(post.xi[i], one.xi, atol=ATOL, rtol=0)
        np.testing.assert_allclose(
            post.log_likelihood[i], one.log_likelihood, rtol=ATOL
        )
    np.testing.assert_array_equal(post.xi[1], 0.0)  # the length-1 sequence
    flipped = params._replace(log_initial=params.log_initial[::-1])
    with count_compilations() as compiles:
        batch_posteriors(flipped, padded, lens)
    assert compiles.count == 0


def test_batch_gaussian_long_sequence_finite(key):
    # T = 10^5 with outliers (likelihoods ~e^-10^5 in every state) and a padded
    # second sequence: finite, normalised, equal to the unbatched posteriors. Full
    # covariances: the whitening matrix product (the diagonal case is a special
    # case of it, checked against scipy in test_emissions).
    params = _params("gaussian", "full")
    t = 100_000
    obs = np.array(sample_hmm(key, params, 1, t).observations[0])
    obs[::997] += 300.0
    padded, lens = pad_sequences([obs, obs[:10]])
    post = batch_posteriors(params, padded, lens)
    gamma = np.asarray(post.gamma[0])
    assert np.all(np.isfinite(gamma)) and np.all(np.isfinite(post.log_likelihood))
    np.testing.assert_allclose(gamma.sum(1), 1.0, atol=1e-12 if X64 else 1e-5)
    np.testing.assert_allclose(float(post.xi[0].sum()), t - 1,
                               rtol=1e-9 if X64 else 1e-3)
    ll = emission_log_likelihoods(params.emission, jnp.asarray(obs))
    one = forward_backward(params.log_initial, params.log_transition, ll)
    # The per-step rounding of the two emission forms accumulates over 10^5 steps.
    np.testing.assert_allclose(post.log_likelihood[0], one.log_likelihood,
                               rtol=1e-12 if X64 else 1e-5)
    np.testing.assert_allclose(gamma, one.gamma, atol=1e-8 if X64 else 1e-3)


def _brute_loglik(params, obs):
    n = params.log_initial.shape[0]
    ll = np.asarray(emission_log_likelihoods(params.emission, obs), np.float64)
    pi, A = np.asarray(params.log_initial), np.asarray(params.log_transition)
    lp = [pi[p[0]] + ll[0, p[0]] + sum(A[p[t - 1], p[t]] + ll[t, p[t]]
                                       for t in range(1, len(obs)))
          for p in itertools.product(range(n), repeat=len(obs))]
    return np.logaddexp.reduce(lp)


def test_batch_loglik_equals_brute_force(key):
    params = _params()
    obs = sample_hmm(key, params, 2, 5).observations
    post = batch_posteriors(params, obs, jnp.array([5, 5]))
    for i in range(2):
        np.testing.assert_allclose(post.log_likelihood[i],
                                   _brute_loglik(params, obs[i]), rtol=ATOL)


# Compiling the EM loop dominates these tests, so they share as few static
# configurations as possible: one data set per emission, three restarts, every
# n_iter within one history bucket (n_iter, tol, pseudo_count, min_covariance
# and init are traced and do not recompile).
N_RESTARTS = 3


@pytest.fixture(scope="module")
def categorical_data():
    params = _params()
    obs = sample_hmm(jax.random.key(0), params, 100, 60).observations
    return params, list(np.asarray(obs))


@pytest.fixture(scope="module")
def gaussian_data():
    params = _params("gaussian", "full")
    obs = sample_hmm(jax.random.key(0), params, 60, 50).observations
    return params, list(np.asarray(obs))


def _monotone(history):
    h = np.asarray(history)
    h = h[~np.isnan(h)]
    slack = (1e-9 if X64 else 2e-5) * np.abs(h[1:])
    assert np.all(np.diff(h) >= -slack), np.diff(h)
    return h


@pytest.mark.parametrize(
    "emission,covariance", [("categorical", "diag"), ("gaussian", "diag"),
                            ("gaussian", "full")]
)
def test_em_monotone(categorical_data, gaussian_data, emission, covariance):
    _, seqs = categorical_data if emission == "categorical" else gaussian_data
    res = fit_hmm(jax.random.key(3), seqs, 3, emission=emission,
                  covariance=covariance, n_iter=25, tol=0.0, pseudo_count=0.0,
                  min_covariance=1e-12, n_restarts=N_RESTARTS)
    h = _monotone(res.log_likelihoods)
    # tol=0 stops only when the likelihood stops increasing (a fixed point).
    assert len(h) >= 5


def _match_states(true_means, fit_means):
    perms = list(itertools.permutations(range(len(true_means))))
    costs = [np.abs(np.asarray(fit_means)[list(p)] - true_means).sum() for p in perms]
    return list(perms[int(np.argmin(costs))])


def test_em_recovers_gaussian_hmm(gaussian_data):
    params, seqs = gaussian_data
    res = fit_hmm(jax.random.key(1), seqs, 3, emission="gaussian",
                  covariance="full", n_iter=100, n_restarts=N_RESTARTS)
    fit = res.params
    perm = _match_states(np.asarray(params.emission.means), fit.emission.means)
    np.testing.assert_allclose(np.asarray(fit.emission.means)[perm],
                               params.emission.means,
                               atol=0.1)
    np.testing.assert_allclose(np.asarray(fit.emission.covariances)[perm],
                               params.emission.covariances, atol=0.1)
    A = np.exp(np.asarray(fit.log_transition))[np.ix_(perm, perm)]
    np.testing.assert_allclose(A, np.exp(params.log_transition), atol=0.05)
    assert bool(res.converged)


def test_em_recovers_categorical_hmm(categorical_data):
    params, seqs = categorical_data
    res = fit_hmm(jax.random.key(2), seqs, 3, n_iter=128, n_restarts=N_RESTARTS,
                  n_symbols=4)
    B_true = np.exp(np.asarray(params.emission.log_probs))
    B_fit = np.exp(np.asarray(res.params.emission.log_probs))
    perm = _match_states(B_true, B_fit)
    np.testing.assert_allclose(B_fit[perm], B_true, atol=0.06)
    A = np.exp(np.asarray(res.params.log_transition))[np.ix_(perm, perm)]
    np.testing.assert_allclose(A, np.exp(params.log_transition), atol=0.06)


def test_fit_same_key_same_result_and_init(categorical_data):
    params, seqs = categorical_data
    a = fit_hmm(jax.random.key(5), seqs, 3, n_iter=5, n_restarts=N_RESTARTS)
    c = fit_hmm(jax.random.key(5), seqs, 3, n_iter=5, init=params,
                n_restarts=N_RESTARTS)
    other = params._replace(log_initial=params.log_initial[::-1])
    with count_compilations() as compiles:
        b = fit_hmm(jax.random.key(5), seqs, 3, n_iter=5, n_restarts=N_RESTARTS)
        # n_iter and the init values are traced: no new program for either.
        fit_hmm(jax.random.key(5), seqs, 3, n_iter=17, n_restarts=N_RESTARTS)
        fit_hmm(jax.random.key(6), seqs, 3, n_iter=9, init=other,
                n_restarts=N_RESTARTS)
    np.testing.assert_array_equal(a.params.log_transition, b.params.log_transition)
    assert a.log_likelihoods.shape == (5,)
    assert np.isfinite(np.asarray(c.log_likelihoods)).all()
    # Every restart starts at init: the first recorded value is init's likelihood.
    padded, lengths = pad_sequences(seqs)
    start = float(jnp.sum(batch_posteriors(params, padded, lengths).log_likelihood))
    np.testing.assert_allclose(c.log_likelihoods[0], start, rtol=1e-10 if X64 else 1e-5)
    assert compiles.count == 0


def test_fit_bad_options(key):
    seqs = [np.array([0, 1, 1])]
    with pytest.raises(ValueError, match="emission"):
        fit_hmm(key, seqs, 2, emission="poisson")
    with pytest.raises(ValueError, match="gaussian"):
        fit_hmm(key, seqs, 2, emission="gaussian")
    with pytest.raises(ValueError, match="covariance"):
        fit_hmm(key, [np.ones((3, 2))], 2, emission="gaussian", covariance="tied")
    bad = _params()._replace(log_transition=jnp.zeros((3, 3)))
    with pytest.raises(ValueError, match="log_transition"):
        batch_posteriors(bad, jnp.zeros((1, 3), jnp.int32), jnp.array([3]))


def test_sample_shapes(key):
    s = sample_hmm(key, _params("gaussian", "full"), 5, 7)
    assert s.states.shape == (5, 7) and s.observations.shape == (5, 7, 2)
    assert s.observations.dtype == jnp.zeros(()).dtype


def test_batch_posteriors_bad_input_and_length_one():
    params, gparams = _params(), _params("gaussian")
    padded, lengths = pad_sequences([np.array([0, 1, 3]), np.array([2])])
    post = batch_posteriors(params, padded, lengths)
    np.testing.assert_array_equal(post.xi[1], 0.0)  # length 1: no transitions
    np.testing.assert_allclose(post.gamma[1].sum(), 1.0, rtol=1e-6)
    with pytest.raises(ValueError, match="alphabet"):
        batch_posteriors(params, jnp.array([[0, 4]]), jnp.array([2]))
    with pytest.raises(ValueError, match="empty"):
        batch_posteriors(params, padded, jnp.array([3, 0]))
    with pytest.raises(ValueError, match="vectors"):
        batch_posteriors(gparams, padded, lengths)
    with pytest.raises(ValueError, match="symbols"):
        batch_posteriors(params, jnp.zeros((1, 2, 2)), jnp.array([2]))
    with pytest.raises(ValueError, match="D = 3"):
        batch_posteriors(gparams, jnp.zeros((1, 2, 3)), jnp.array([2]))
    with pytest.raises(ValueError, match="NaN"):
        batch_posteriors(gparams, jnp.full((1, 2, 2), jnp.nan), jnp.array([2]))


def test_fit_hmm_bad_sequences_and_length_one(key):
    with pytest.raises(ValueError, match="empty"):
        fit_hmm(key, [], 2)
    with pytest.raises(ValueError, match="empty"):
        fit_hmm(key, [np.array([0, 1]), np.array([], int)], 2)
    with pytest.raises(ValueError, match="NaN"):
        fit_hmm(key, [np.array([[0.0], [np.nan]])], 2, emission="gaussian")
    with pytest.raises(ValueError, match="ragged"):
        fit_hmm(key, [np.zeros((3, 2)), np.zeros((3, 1))], 2, emission="gaussian")
    # Only length-1 sequences: no transition is ever observed, so the transition
    # rows stay at the pseudo-count prior (uniform); the rest is finite.
    res = fit_hmm(key, [np.array([0]), np.array([1]), np.array([1])], 2,
                  n_iter=5, n_restarts=1)
    np.testing.assert_allclose(np.exp(res.params.log_transition), 0.5, rtol=1e-5)
    assert np.all(np.isfinite(np.asarray(res.params.emission.log_probs)))


@pytest.mark.parametrize("fn", [forward_backward, "filter", "viterbi"])
def test_single_sequence_functions_bad_input(fn):
    from bayeskde.hmm import forward_filter, viterbi

    fn = {"filter": forward_filter, "viterbi": viterbi}.get(fn, fn)
    p = _params()
    with pytest.raises(ValueError, match="NaN"):
        fn(p.log_initial, p.log_transition, jnp.full((3, 3), jnp.nan))
    with pytest.raises(ValueError, match="T >= 1"):
        fn(p.log_initial, p.log_transition, jnp.zeros((0, 3)))
    with pytest.raises(ValueError, match="log_transition"):
        fn(p.log_initial, p.log_transition + 0.1, jnp.zeros((3, 3)))


def test_em_float32_iterations_within_twice_float64(categorical_data):
    """The same EM in both precisions: float32 neither runs to the cap nor stops
    far earlier, and ends at float64's log likelihood."""
    _, seqs = categorical_data
    # The same start in both precisions (random starts differ by dtype).
    start = HMMParams(np.log(np.full(3, 1 / 3)),
                      np.log(np.full((3, 3), 0.1) + 0.7 * np.eye(3)),
                      CategoricalEmission(np.log(np.array(
                          [[0.4, 0.2, 0.2, 0.2], [0.2, 0.4, 0.2, 0.2],
                           [0.2, 0.2, 0.2, 0.4]]))))
    res = {}
    for x64 in (False, True):
        with jax.enable_x64(x64):
            res[x64] = fit_hmm(jax.random.key(2), seqs[:50], 3, n_iter=200,
                               n_restarts=1, n_symbols=4, tol=1e-5, init=start)
    n32, n64 = int(res[False].n_iter), int(res[True].n_iter)
    assert bool(res[False].converged) and bool(res[True].converged)
    assert n64 / 2 <= n32 <= 2 * n64
    h32 = np.asarray(res[False].log_likelihoods)[n32 - 1]
    h64 = np.asarray(res[True].log_likelihoods)[n64 - 1]
    np.testing.assert_allclose(h32, h64, rtol=1e-4)


def test_pad_batch_same_fit_one_program(gaussian_data):
    """Empty padding rows change nothing (same starts, same statistics), and two
    data sets of different sizes padded to one size share one EM program."""
    _, seqs = gaussian_data
    # the settings of test_em_recovers_gaussian_hmm: its program serves the
    # plain fit
    kw = dict(emission="gaussian", covariance="full", n_iter=8, tol=0.0,
              n_restarts=N_RESTARTS)
    plain = fit_hmm(jax.random.key(4), seqs, 3, **kw)
    padded = fit_hmm(jax.random.key(4), seqs, 3, pad_batch=64, **kw)
    for a, b in zip(jax.tree.leaves(plain.params), jax.tree.leaves(padded.params),
                    strict=True):
        np.testing.assert_allclose(np.asarray(b), np.asarray(a), rtol=10 * ATOL,
                                   atol=10 * ATOL)
    np.testing.assert_allclose(padded.log_likelihoods, plain.log_likelihoods,
                               rtol=10 * ATOL)
    pad_sequences(seqs[:45])  # its eager conversions are per shape
    with count_compilations() as compiles:
        fit_hmm(jax.random.key(4), seqs[:45], 3, pad_batch=64, **kw)
    assert compiles.count == 0
    # fewer than the sequences given: no padding, the plain fit
    same = fit_hmm(jax.random.key(4), seqs, 3, pad_batch=8, **kw)
    np.testing.assert_array_equal(same.params.log_transition,
                                  plain.params.log_transition)
    with pytest.raises(ValueError, match="pad_batch"):
        fit_hmm(jax.random.key(4), seqs[:4], 3, pad_batch=0, **kw)
