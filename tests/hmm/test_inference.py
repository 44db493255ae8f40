"""Forward-backward, filter and Viterbi against brute-force enumeration of paths."""

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
    forward_backward,
    forward_filter,
    pad_sequences,
    viterbi,
)
from bayeskde.hmm.inference import (
    forward_backward_pass,
    forward_filter_pass,
    viterbi_pass,
)
from tests.helpers import X64, count_compilations

ATOL = 1e-10 if X64 else 2e-5


def _random_hmm(rng, n, t, scale=2.0):
    pi = rng.dirichlet(np.ones(n))
    A = rng.dirichlet(np.ones(n), size=n)
    ll = rng.normal(scale=scale, size=(t, n))
    return np.log(pi), np.log(A), ll


def _brute(log_pi, log_A, ll):
    """Posterior quantities by enumerating all N^T state paths."""
    t_len, n = ll.shape
    paths = list(itertools.product(range(n), repeat=t_len))
    lp = np.array([
        log_pi[p[0]] + ll[0, p[0]]
        + sum(log_A[p[t - 1], p[t]] + ll[t, p[t]] for t in range(1, t_len))
        for p in paths
    ])
    log_z = np.logaddexp.reduce(lp)
    w = np.exp(lp - log_z)
    gamma = np.zeros((t_len, n))
    xi_t = np.zeros((max(t_len - 1, 0), n, n))
    filt = np.zeros((t_len, n))
    for p, wi in zip(paths, w, strict=True):
        for t in range(t_len):
            gamma[t, p[t]] += wi
        for t in range(t_len - 1):
            xi_t[t, p[t], p[t + 1]] += wi
    for t in range(t_len):
        # Filtered: enumerate the prefix only.
        sub = list(itertools.product(range(n), repeat=t + 1))
        lps = np.array([
            log_pi[p[0]] + ll[0, p[0]]
            + sum(log_A[p[s - 1], p[s]] + ll[s, p[s]] for s in range(1, t + 1))
            for p in sub
        ])
        ws = np.exp(lps - np.logaddexp.reduce(lps))
        for p, wi in zip(sub, ws, strict=True):
            filt[t, p[t]] += wi
    return gamma, xi_t, log_z, paths[int(np.argmax(lp))], filt


@pytest.mark.parametrize("n,t", [(2, 1), (2, 6), (3, 5), (3, 6)])
def test_forward_backward_equals_brute_force(rng, n, t):
    log_pi, log_A, ll = _random_hmm(rng, n, t)
    gamma, xi_t, log_z, path, filt = _brute(log_pi, log_A, ll)
    post = forward_backward(log_pi, log_A, ll, per_time_xi=True)
    np.testing.assert_allclose(post.gamma, gamma, atol=ATOL, rtol=0)
    np.testing.assert_allclose(post.xi_t, xi_t, atol=ATOL, rtol=0)
    np.testing.assert_allclose(post.xi, xi_t.sum(0), atol=ATOL, rtol=0)
    np.testing.assert_allclose(post.log_likelihood, log_z, atol=ATOL * 10, rtol=0)
    f = forward_filter(log_pi, log_A, ll)
    np.testing.assert_allclose(f.filtered, filt, atol=ATOL, rtol=0)
    np.testing.assert_allclose(f.log_likelihood, log_z, atol=ATOL * 10, rtol=0)
    assert tuple(np.asarray(viterbi(log_pi, log_A, ll))) == path


def test_structural_zeros_equal_brute_force(rng):
    log_pi, log_A, ll = _random_hmm(rng, 3, 6)
    A = np.exp(log_A)
    A[0, 2] = A[2, 1] = 0.0  # a left-to-right-ish structure with log 0 entries
    A /= A.sum(1, keepdims=True)
    with np.errstate(divide="ignore"):
        log_A = np.log(A)
        log_pi = np.log(np.array([1.0, 0.0, 0.0]))
    gamma, xi_t, log_z, path, _ = _brute(log_pi, log_A, ll)
    post = forward_backward(log_pi, log_A, ll, per_time_xi=True)
    np.testing.assert_allclose(post.gamma, gamma, atol=ATOL, rtol=0)
    np.testing.assert_allclose(post.xi_t, xi_t, atol=ATOL, rtol=0)
    np.testing.assert_allclose(post.log_likelihood, log_z, atol=ATOL * 10, rtol=0)
    assert tuple(np.asarray(viterbi(log_pi, log_A, ll))) == path


def test_length_one_sequence(rng):
    log_pi, log_A, ll = _random_hmm(rng, 3, 1)
    post = forward_backward(log_pi, log_A, ll, per_time_xi=True)
    np.testing.assert_array_equal(post.xi, np.zeros((3, 3)))
    assert post.xi_t.shape == (0, 3, 3)
    np.testing.assert_allclose(
        post.log_likelihood, np.logaddexp.reduce(log_pi + ll[0]), atol=ATOL, rtol=0
    )
    p = np.exp(log_pi + ll[0] - np.logaddexp.reduce(log_pi + ll[0]))
    np.testing.assert_allclose(post.gamma[0], p, atol=ATOL, rtol=0)


def test_vmap_equals_loop(rng):
    log_pi, log_A, _ = _random_hmm(rng, 3, 1)
    lls = rng.normal(size=(4, 7, 3))
    batched = jax.vmap(forward_backward, in_axes=(None, None, 0))(
        jnp.asarray(log_pi), jnp.asarray(log_A), jnp.asarray(lls)
    )
    for b in range(4):
        one = forward_backward(log_pi, log_A, lls[b])
        for got, want in zip(batched[:3], one[:3], strict=True):
            np.testing.assert_allclose(got[b], want, atol=ATOL, rtol=0)


def test_padded_equals_unpadded(rng):
    log_pi, log_A, ll = _random_hmm(rng, 3, 5)
    padded = np.concatenate([ll, rng.normal(size=(4, 3))])
    mask = np.arange(9) < 5
    ref = forward_backward(log_pi, log_A, ll, per_time_xi=True)
    got = forward_backward(log_pi, log_A, padded, mask=mask, per_time_xi=True)
    np.testing.assert_allclose(got.gamma[:5], ref.gamma, atol=ATOL, rtol=0)
    np.testing.assert_array_equal(got.gamma[5:], 0.0)
    np.testing.assert_allclose(got.xi, ref.xi, atol=ATOL, rtol=0)
    np.testing.assert_allclose(got.xi_t[:4], ref.xi_t, atol=ATOL, rtol=0)
    np.testing.assert_array_equal(got.xi_t[4:], 0.0)
    np.testing.assert_allclose(got.log_likelihood, ref.log_likelihood, atol=ATOL)
    path = np.asarray(viterbi(log_pi, log_A, padded, mask=mask))
    np.testing.assert_array_equal(path[:5], viterbi(log_pi, log_A, ll))
    np.testing.assert_array_equal(path[5:], -1)


@pytest.mark.parametrize("sticky", [False, True])
def test_long_sequence_finite(rng, sticky):
    n, t = 4, 100_000
    A = rng.dirichlet(np.ones(n), size=n)
    if sticky:  # near-zero switching probabilities, one exact zero
        A = np.eye(n) + 1e-30
        A[0, 1] = 0.0
        A /= A.sum(1, keepdims=True)
    with np.errstate(divide="ignore"):
        log_A = np.log(A)
    ll = rng.normal(scale=5.0, size=(t, n))
    post = forward_backward(np.log(np.full(n, 1 / n)), log_A, ll)
    gamma = np.asarray(post.gamma)
    assert np.all(np.isfinite(gamma)) and np.isfinite(float(post.log_likelihood))
    np.testing.assert_allclose(gamma.sum(1), 1.0, atol=1e-12 if X64 else 1e-5)
    assert np.all(np.isfinite(np.asarray(post.xi)))
    np.testing.assert_allclose(float(post.xi.sum()), t - 1, rtol=1e-9 if X64 else 1e-3)


def test_no_recompilation(rng):
    log_pi, log_A, ll = _random_hmm(rng, 3, 8)
    forward_backward(log_pi, log_A, ll)
    with count_compilations() as compiles:
        log_pi2, log_A2, ll2 = _random_hmm(rng, 3, 8)
        forward_backward(log_pi2, log_A2, ll2)
    assert compiles.count == 0


def test_bad_input(rng):
    log_pi, log_A, ll = _random_hmm(rng, 3, 4)
    with pytest.raises(ValueError, match="log_transition"):
        forward_backward(log_pi, log_A + 0.1, ll)
    with pytest.raises(ValueError, match="log_initial"):
        forward_backward(log_pi - 0.5, log_A, ll)
    with pytest.raises(ValueError, match="log_likelihoods"):
        forward_backward(log_pi, log_A, np.full((4, 3), np.nan))
    # Shape errors: ValueError from the wrapper, or TypeError from the runtime
    # shape checker when the tests run with jaxtyping's import hook.
    with pytest.raises((ValueError, TypeError)):
        forward_backward(log_pi, log_A, ll[:, :2])
    with pytest.raises(ValueError, match="T >= 1"):
        forward_backward(log_pi, log_A, np.zeros((0, 3)))
    with pytest.raises((ValueError, TypeError)):
        forward_backward(log_pi, log_A, ll, mask=np.ones(3, bool))


# hmmlearn as the reference implementation: the same HMM set by hand, its smoothed
# marginals (predict_proba) and log likelihood (score), with lengths.
HMMLEARN_ATOL = 1e-6 if X64 else 1e-4


def _hmmlearn_reference(rng, emission):
    from hmmlearn.hmm import CategoricalHMM, GaussianHMM

    n, lengths = 3, [7, 1, 12]
    pi = rng.dirichlet(np.ones(n))
    A = rng.dirichlet(np.ones(n), size=n) + 2 * np.eye(n)
    A /= A.sum(1, keepdims=True)
    if emission == "categorical":
        B = rng.dirichlet(np.ones(4), size=n)
        model = CategoricalHMM(n, init_params="", params="")
        model.emissionprob_ = B
        model.n_features = 4
        seqs = [rng.integers(0, 4, size=t) for t in lengths]
        X = np.concatenate(seqs)[:, None]
        em = CategoricalEmission(jnp.log(jnp.asarray(B)))
    else:
        means = rng.normal(scale=2.0, size=(n, 2))
        if emission == "diag":
            covs = rng.uniform(0.5, 2.0, size=(n, 2))
        else:
            L = rng.normal(size=(n, 2, 2))
            covs = L @ np.swapaxes(L, 1, 2) + 0.5 * np.eye(2)
        model = GaussianHMM(n, covariance_type=emission, init_params="", params="")
        model.means_, model.covars_ = means, covs
        seqs = [rng.normal(scale=2.0, size=(t, 2)) for t in lengths]
        X = np.concatenate(seqs)
        em = GaussianEmission(jnp.asarray(means), jnp.asarray(covs))
    model.startprob_, model.transmat_ = pi, A
    params = HMMParams(jnp.log(jnp.asarray(pi)), jnp.log(jnp.asarray(A)), em)
    return params, seqs, model.predict_proba(X, lengths), model.score(X, lengths)


@pytest.mark.parametrize("emission", ["categorical", "diag", "full"])
def test_forward_backward_equals_hmmlearn(rng, emission):
    params, seqs, proba, score = _hmmlearn_reference(rng, emission)
    gammas, total = [], 0.0
    for s in seqs:
        ll = emission_log_likelihoods(params.emission, jnp.asarray(s))
        post = forward_backward(params.log_initial, params.log_transition, ll)
        gammas.append(np.asarray(post.gamma))
        total += float(post.log_likelihood)
    np.testing.assert_allclose(np.concatenate(gammas), proba, atol=HMMLEARN_ATOL,
                               rtol=0)
    np.testing.assert_allclose(total, score, rtol=HMMLEARN_ATOL, atol=0)
    # The batched, padded path gives the same numbers.
    padded, lengths = pad_sequences(seqs)
    batch = batch_posteriors(params, padded, lengths)
    got = np.concatenate([np.asarray(batch.gamma[i, : len(s)])
                          for i, s in enumerate(seqs)])
    np.testing.assert_allclose(got, proba, atol=HMMLEARN_ATOL, rtol=0)
    np.testing.assert_allclose(float(batch.log_likelihood.sum()), score,
                               rtol=HMMLEARN_ATOL, atol=0)


def _ragged_batch(rng, n=3, t=6, b=5):
    log_pi, log_A, _ = _random_hmm(rng, n, 1)
    lls = rng.normal(scale=2.0, size=(b, t, n))
    masks = rng.random((b, t)) < 0.7
    masks[:, 0] = True
    masks[-1] = False  # a sequence with no observed step
    return log_pi, log_A, lls, masks


def test_vmapped_functions_equal_single_calls_with_masks(rng):
    """The fused batching rule (time-major batch) gives each sequence's own
    answer: forward-backward, filter and Viterbi, with gaps anywhere."""
    log_pi, log_A, lls, masks = _ragged_batch(rng)
    args = (jnp.asarray(log_pi), jnp.asarray(log_A), jnp.asarray(lls),
            jnp.asarray(masks))

    @jax.jit
    def fused(a, b, c, m):
        def one(c, m):
            return (forward_backward(a, b, c, mask=m)[:3],
                    forward_filter(a, b, c, mask=m), viterbi(a, b, c, mask=m))
        return jax.vmap(one)(c, m)

    @jax.jit
    def generic(a, b, c, m):  # the per-sequence functions, batched by JAX
        def one(c, m):
            return (forward_backward_pass(a, b, c, m, False)[:3],
                    forward_filter_pass(a, b, c, m), viterbi_pass(a, b, c, m))
        return jax.vmap(one)(c, m)

    got, want = fused(*args), generic(*args)
    for g, w in zip(jax.tree.leaves(got), jax.tree.leaves(want), strict=True):
        np.testing.assert_allclose(g, w, atol=ATOL, rtol=0)
    # Viterbi of the observed steps alone is the brute-force best path.
    path = np.asarray(got[2])
    for b in range(lls.shape[0] - 1):
        best = _brute(log_pi, log_A, lls[b][masks[b]])[3]
        np.testing.assert_array_equal(path[b][masks[b]], best)
    np.testing.assert_array_equal(path[-1], -1)


def test_vmap_over_parameters_and_gradients(rng):
    """Batched parameters take the generic rule; gradients go through the
    per-sequence function: d log p(x) / d log p(x_t | q_t = i) = gamma_t(i)."""
    log_pi, log_A, lls, _ = _ragged_batch(rng)
    pis = jnp.log(jnp.asarray(rng.dirichlet(np.ones(3), size=lls.shape[0])))
    log_A, lls = jnp.asarray(log_A), jnp.asarray(lls)

    @jax.jit
    def run(pis, ll):
        per_param = jax.vmap(forward_filter, (0, None, 0))(pis, log_A, ll)

        def total(ll):
            return jnp.sum(jax.vmap(forward_backward, (0, None, 0))(
                pis, log_A, ll).log_likelihood)

        gamma = jax.vmap(forward_backward, (0, None, 0))(pis, log_A, ll).gamma
        return per_param.log_likelihood, jax.grad(total)(ll), gamma

    loglik, grad, gamma = run(pis, lls)
    for b in range(lls.shape[0]):
        want = _brute(np.asarray(pis[b]), np.asarray(log_A), np.asarray(lls[b]))
        np.testing.assert_allclose(loglik[b], want[2], atol=ATOL, rtol=0)
        np.testing.assert_allclose(grad[b], want[0], atol=10 * ATOL, rtol=0)
        np.testing.assert_allclose(gamma[b], want[0], atol=ATOL, rtol=0)


def test_max_argmax_is_jnp_max_and_argmax_with_ties_and_minus_inf():
    from bayeskde.hmm.recursions import max_argmax

    r = np.random.default_rng(0)
    x = r.integers(0, 3, size=(50, 7)).astype(float)  # many ties
    x[::5] = -np.inf  # all impossible rows: argmax 0, max -inf
    x[1, 2] = -np.inf
    xs = jnp.asarray(x)
    best, idx = max_argmax(xs)
    np.testing.assert_array_equal(best, jnp.max(xs, axis=-1))
    np.testing.assert_array_equal(idx, jnp.argmax(xs, axis=-1))


@pytest.mark.parametrize("zeros", [True, False])
def test_vmapped_filter_guards_underflow_and_impossible_steps(rng, zeros):
    """The batched filter (its guarded scan when a transition is zero, its plain
    scan otherwise) equals the per-sequence filter on a batch holding a step
    impossible in every state (log likelihood -inf everywhere: zero row, log
    likelihood -inf), likelihoods that underflow in every state the prediction
    supports (with structural zeros), and ordinary and padded sequences; the
    ordinary ones also equal the brute force."""
    n, t, b = 3, 8, 4
    log_pi, log_A, _ = _random_hmm(rng, n, 1)
    if zeros:
        A = np.array([[0.5, 0.5, 0.0], [0.0, 0.5, 0.5], [0.5, 0.0, 0.5]])
        with np.errstate(divide="ignore"):
            log_A = np.log(A)
    huge = 1e4 if X64 else 1e3  # exp(-huge) underflows in either precision
    lls = rng.normal(size=(b, t, n))
    lls[0, 3] = -np.inf  # impossible at step 3
    lls[1, 3] = [-huge, 0.0, -huge]  # state 1 now; states 1, 2 next ...
    lls[1, 4] = [0.0, -huge, -huge]  # ... where only state 0 is likely
    masks = np.ones((b, t), bool)
    masks[2, 5:] = False
    args = tuple(jnp.asarray(v) for v in (log_pi, log_A, lls, masks))

    @jax.jit
    def fused(a, b_, c, m):
        return jax.vmap(lambda c, m: forward_filter(a, b_, c, mask=m))(c, m)

    @jax.jit
    def generic(a, b_, c, m):
        return jax.vmap(lambda c, m: forward_filter_pass(a, b_, c, m))(c, m)

    got, want = fused(*args), generic(*args)
    np.testing.assert_allclose(got.filtered, want.filtered, atol=ATOL, rtol=0)
    np.testing.assert_array_equal(np.isfinite(got.log_likelihood),
                                  np.isfinite(want.log_likelihood))
    fin = np.isfinite(np.asarray(want.log_likelihood))
    np.testing.assert_allclose(np.asarray(got.log_likelihood)[fin],
                               np.asarray(want.log_likelihood)[fin],
                               rtol=ATOL, atol=ATOL)
    assert float(got.log_likelihood[0]) == -np.inf
    np.testing.assert_array_equal(got.filtered[0, 3], 0.0)
    np.testing.assert_allclose(np.asarray(got.filtered[1, :4]).sum(1), 1.0,
                               atol=ATOL)
    if zeros:  # every supported state's likelihood underflows at step 4 (a
        # scaled filter cannot tell that from impossible: -inf, as the generic rule)
        np.testing.assert_array_equal(got.filtered[1, 4], 0.0)
    else:
        assert np.isfinite(float(got.log_likelihood[1]))
    for i in (2, 3):  # ordinary sequences: the brute force
        obs = masks[i]
        want_z = _brute(log_pi, log_A, lls[i][obs])[2]
        np.testing.assert_allclose(float(got.log_likelihood[i]), want_z,
                                   atol=ATOL * 10, rtol=0)
