"""Mean-map kernels: closed forms against Monte Carlo, LMMK against brute force."""

import itertools
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy.stats import multivariate_normal as mvn
from sklearn.exceptions import NotFittedError

from bayeskde.hmm import CategoricalEmission, GaussianEmission, HMMParams, pad_sequences
from bayeskde.meanmap import (
    LatentMeanMapKernel,
    adapt_hmms,
    categorical_gmmk,
    clique_mean_map_kernel,
    empirical_fisher_information,
    fisher_kernel,
    fisher_scores,
    gaussian_gmmk,
    gaussian_ppk,
    hmm_log_kernel,
    hmm_log_kernel_gram,
    length_normalised_fisher_kernel,
    log_hmm_product_kernel,
    log_kernel_normalize,
    relative_frobenius_error,
    sequence_cliques,
    symbol_kernel_matrix,
    taylor_dimension,
)
from tests.helpers import X64, count_compilations
from tests.meanmap.checks import RTOL, assert_psd, assert_within_3se

# One categorical and one Gaussian data set serve every HMM test, so each compiled
# function (posteriors, features, Fisher scores, EM) is traced for one shape only.
# CAT_SEQS and the EM configuration below are those of the LatentMeanMapKernel
# docstring example, which then reuses the compiled EM.
CAT_SEQS = [np.array([0, 2, 2, 1, 0, 1, 2, 0]), np.array([1, 0, 2, 2, 1]),
            np.array([2]), np.array([0, 0, 1, 2, 1, 1, 0]), np.array([2, 1, 0])]
GAUSS_SEQS = [0.5 * np.random.default_rng(1).normal(size=(len(s), 2))
              for s in CAT_SEQS]


# ---------------------------------------------------------------- toy HMMs


def _cat_params():
    pi = np.array([0.6, 0.4])
    A = np.array([[0.7, 0.3], [0.2, 0.8]])
    B = np.array([[0.5, 0.3, 0.2], [0.1, 0.2, 0.7]])
    return pi, A, B


def _gauss_params():
    pi = np.array([0.5, 0.5])
    A = np.array([[0.8, 0.2], [0.3, 0.7]])
    means = np.array([[0.0, 0.0], [1.0, -0.5]])
    var = np.array([[0.3, 0.2], [0.25, 0.4]])
    return pi, A, means, var


def _hmm(pi, A, emission):
    dt = jnp.zeros(()).dtype
    return HMMParams(jnp.asarray(np.log(pi), dt), jnp.asarray(np.log(A), dt),
                     emission)


def _cat_hmm():
    pi, A, B = _cat_params()
    return _hmm(pi, A, CategoricalEmission(jnp.asarray(np.log(B),
                                                       jnp.zeros(()).dtype)))


def _gauss_hmm():
    pi, A, m, v = _gauss_params()
    dt = jnp.zeros(()).dtype
    return _hmm(pi, A, GaussianEmission(jnp.asarray(m, dt), jnp.asarray(v, dt)))


def _brute_posteriors(pi, A, lik):
    """gamma_t(i), sum_t xi_t(i, j) and p(x) by enumerating every state path."""
    T, N = lik.shape
    gamma, xi, total = np.zeros((T, N)), np.zeros((N, N)), 0.0
    for q in itertools.product(range(N), repeat=T):
        p = pi[q[0]] * lik[0, q[0]]
        for t in range(1, T):
            p *= A[q[t - 1], q[t]] * lik[t, q[t]]
        total += p
        for t in range(T):
            gamma[t, q[t]] += p
        for t in range(T - 1):
            xi[q[t], q[t + 1]] += p
    return gamma / total, xi / total, total


def _brute_likelihoods(pi, A, lik):
    """``p(x)`` of many sequences at once, ``lik`` ``(n, T, N)``: every state path."""
    n, T, N = lik.shape
    total = np.zeros(n)
    for q in itertools.product(range(N), repeat=T):
        p = pi[q[0]] * lik[:, 0, q[0]]
        for t in range(1, T):
            p = p * A[q[t - 1], q[t]] * lik[:, t, q[t]]
        total += p
    return total


def _cat_lik(B, x):
    return B[:, x].T


def _gauss_lik(m, v, x):
    return np.stack([mvn(m[i], np.diag(v[i])).pdf(x).reshape(-1)
                     for i in range(len(m))], 1)


def _lmmk_definition(xs, ys, gx, gy, xix, xiy, obs_kernel, lam):
    """Eq. (23) with the clique kernels of eqs. (27)-(28), term by term."""
    N = gx.shape[1]
    lq = lambda i, j: 1.0 if i == j else math.exp(-lam)  # noqa: E731
    T, U = len(xs), len(ys)
    v = 0.0
    for s in range(T):
        for t in range(U):
            k = obs_kernel(xs[s], ys[t])
            for i in range(N):
                for j in range(N):
                    v += gx[s, i] * gy[t, j] * k * lq(i, j)
    v /= T * U
    w = 0.0
    if T > 1 and U > 1:
        for i, j, k, m in itertools.product(range(N), repeat=4):
            w += xix[i, j] * xiy[k, m] * lq(i, k) * lq(j, m)
        w /= (T - 1) * (U - 1)
    return v + w


# ------------------------------------------------------------ HMM kernels


def test_hmm_product_kernel_brute_force():
    pi, A, B = _cat_params()
    pi2, A2 = np.array([0.3, 0.7]), np.array([[0.5, 0.5], [0.9, 0.1]])
    B2 = np.array([[0.2, 0.2, 0.6], [0.6, 0.3, 0.1]])
    p1 = _cat_hmm()
    p2 = _hmm(pi2, A2, CategoricalEmission(jnp.asarray(np.log(B2),
                                                       jnp.zeros(()).dtype)))
    T, lam = 3, 0.6
    probs1, probs2 = {}, {}
    for x in itertools.product(range(3), repeat=T):
        probs1[x] = _brute_posteriors(pi, A, _cat_lik(B, list(x)))[2]
        probs2[x] = _brute_posteriors(pi2, A2, _cat_lik(B2, list(x)))[2]
    gm = sum(probs1[x] * probs2[y] * math.exp(-lam * sum(a != b for a, b in zip(
        x, y, strict=True))) for x in probs1 for y in probs2)
    ppk = sum(probs1[x] * probs2[x] for x in probs1)
    got = hmm_log_kernel(p1, p2, T, kind="gmmk", lam=lam)
    assert float(jnp.exp(got)) == pytest.approx(gm, rel=RTOL)
    assert float(jnp.exp(hmm_log_kernel(p1, p2, T))) == pytest.approx(ppk, rel=RTOL)
    # lam = inf: GMMK with the delta kernel equals the rho = 1 PPK
    got_inf = hmm_log_kernel(p1, p2, T, kind="gmmk", lam=float("inf"))
    assert float(jnp.exp(got_inf)) == pytest.approx(ppk, rel=RTOL)


def _sample_hmm_np(rng, pi, A, means, var, n, T):
    q = np.zeros((n, T), int)
    q[:, 0] = rng.choice(len(pi), n, p=pi)
    for t in range(1, T):
        u = rng.random(n)[:, None]
        q[:, t] = (u > np.cumsum(A[q[:, t - 1]], 1)).sum(1)
    return means[q] + np.sqrt(var[q]) * rng.normal(size=q.shape + (means.shape[1],))


def test_gaussian_hmm_gmmk_monte_carlo(rng):
    pi, A, m, v = _gauss_params()
    T, g, n = 4, 0.3, 100_000
    x = _sample_hmm_np(rng, pi, A, m, v, n, T)
    y = _sample_hmm_np(rng, pi[::-1], A[::-1, ::-1], m + 0.3, v, n, T)
    p2 = _hmm(pi[::-1], A[::-1, ::-1], GaussianEmission(
        jnp.asarray(m + 0.3, jnp.zeros(()).dtype), jnp.asarray(v, jnp.zeros(()).dtype)))
    got = jnp.exp(hmm_log_kernel(_gauss_hmm(), p2, T, kind="gmmk", gamma=g))
    assert_within_3se(got, np.exp(-g * ((x - y) ** 2).sum(axis=(1, 2))))
    got_ppk = jnp.exp(hmm_log_kernel(_gauss_hmm(), p2, T, kind="ppk"))
    # rho = 1 PPK = E_{x ~ HMM1} p2(x): path-enumerated likelihoods of the samples
    lik = np.stack([_gauss_lik(m + 0.3, v, x[:, t]) for t in range(T)], 1)
    assert_within_3se(got_ppk, _brute_likelihoods(pi[::-1], A[::-1, ::-1], lik))


def test_long_hmm_kernel_finite_and_bad_input():
    p = _cat_hmm()
    val = log_hmm_product_kernel(p.log_initial, p.log_transition, p.log_initial,
                                 p.log_transition, jnp.log(jnp.full((2, 2), 1e-3)),
                                 5000)
    assert np.isfinite(float(val))
    with pytest.raises(ValueError, match="log_pair"):
        log_hmm_product_kernel(p.log_initial, p.log_transition, p.log_initial,
                               p.log_transition, jnp.zeros((3, 2)), 4)
    with pytest.raises(ValueError, match="length"):
        hmm_log_kernel(p, p, 0)


def test_adapted_hmm_ppk_gram():
    p = _cat_hmm()
    padded, lengths = pad_sequences(CAT_SEQS)
    many = adapt_hmms(p, padded, lengths, tau=2.0)
    np.testing.assert_allclose(np.exp(many.log_transition).sum(-1), 1.0, rtol=1e-5)
    logK = hmm_log_kernel_gram(many, length=6)
    d = jnp.diagonal(logK)
    assert_psd(log_kernel_normalize(logK, d, d))
    # infinite prior strength: every object gets the pooled HMM
    same = adapt_hmms(p, padded, lengths, tau=1e9)
    np.testing.assert_allclose(same.emission.log_probs[2], p.emission.log_probs,
                               atol=1e-5)


# ------------------------------------------------------------------- LMMK


@pytest.fixture(scope="module")
def cat_brute():
    pi, A, B = _cat_params()
    return [_brute_posteriors(pi, A, _cat_lik(B, s)) for s in CAT_SEQS]


@pytest.fixture(scope="module")
def gauss_brute():
    pi, A, m, v = _gauss_params()
    return [_brute_posteriors(pi, A, _gauss_lik(m, v, s)) for s in GAUSS_SEQS]


@pytest.fixture(scope="module")
def gauss_exact():
    """Exact continuous LMMK (eq. 31) of GAUSS_SEQS, lam = 0.5, gamma = 0.5."""
    k = LatentMeanMapKernel(2, "gaussian", lam=0.5, gamma=0.5, key=jax.random.key(0))
    return k.fit(None, params=_gauss_hmm())


@pytest.fixture(scope="module")
def cat_fisher():
    return fisher_scores(_cat_hmm(), CAT_SEQS)


def _gram_np(f, lam):
    """LMMK from latent features in NumPy (eqs. 30, 32 with ``M = I``)."""
    E, X = np.asarray(f.emission, np.float64), np.asarray(f.transition, np.float64)
    L = np.asarray(symbol_kernel_matrix(E.shape[1], lam), np.float64)
    return (np.einsum("anf,nm,bmf->ab", E, L, E)
            + np.einsum("aij,ik,bkl,jl->ab", X, L, X, L))


def test_lmmk_categorical_equals_definition(cat_brute):
    lam = 0.7
    k = LatentMeanMapKernel(2, lam=lam, key=jax.random.key(0)).fit(
        None, params=_cat_hmm())
    K = k.gram(CAT_SEQS)
    sym = lambda a, b: 1.0 if a == b else math.exp(-lam)  # noqa: E731
    ref = np.array([[_lmmk_definition(x, y, px[0], py[0], px[1], py[1], sym, lam)
                     for y, py in zip(CAT_SEQS, cat_brute, strict=True)]
                    for x, px in zip(CAT_SEQS, cat_brute, strict=True)])
    np.testing.assert_allclose(K, ref, rtol=RTOL * 10)
    assert_psd(K)
    # the cross Gram (rows in another order: not the symmetric path) and eq. (24)
    np.testing.assert_allclose(k.gram(CAT_SEQS[::-1], CAT_SEQS), ref[::-1],
                               rtol=RTOL * 10)
    np.testing.assert_allclose(k.diag(CAT_SEQS), np.diag(ref), rtol=RTOL * 10)
    Kn = k.set_params(nu=0.5).fit(None, params=_cat_hmm()).gram(CAT_SEQS)
    d = np.diag(ref)
    np.testing.assert_allclose(
        Kn, np.exp(-0.5 * (d[:, None] + d[None, :] - 2 * ref)), rtol=RTOL * 10)


def test_lmmk_gaussian_exact_equals_definition(gauss_brute, gauss_exact):
    lam, g = 0.5, 0.5
    K = gauss_exact.gram(GAUSS_SEQS)
    rbf = lambda a, b: math.exp(-g * float(((a - b) ** 2).sum()))  # noqa: E731
    ref = np.array([[_lmmk_definition(x, y, px[0], py[0], px[1], py[1], rbf, lam)
                     for y, py in zip(GAUSS_SEQS, gauss_brute, strict=True)]
                    for x, px in zip(GAUSS_SEQS, gauss_brute, strict=True)])
    np.testing.assert_allclose(K, ref, rtol=RTOL * 10)
    np.testing.assert_allclose(gauss_exact.diag(GAUSS_SEQS), np.diag(ref),
                               rtol=RTOL * 10)
    assert_psd(K)


def test_feature_maps_converge_to_exact(gauss_exact):
    exact = gauss_exact.gram(GAUSS_SEQS)
    key, common = jax.random.key(3), dict(lam=0.5, gamma=0.5)
    err = lambda K: float(relative_frobenius_error(exact, jnp.asarray(K)))  # noqa: E731
    # One estimator per map, at its largest size; the smaller maps are prefixes of
    # it (the first m frequencies, rescaled by sqrt(M / m); the Taylor blocks of
    # order <= p), so one compiled feature map serves every size.
    big = 4096
    rff = LatentMeanMapKernel(2, "gaussian", key=key, feature_map="rff",
                              n_features=big, **common).fit(None, params=_gauss_hmm())
    f = rff.features(GAUSS_SEQS)
    rff_err = []
    for m in (8, 64, big):
        cols = np.r_[0:m, big:big + m]
        sub = f._replace(emission=np.asarray(f.emission)[:, :, cols]
                         * math.sqrt(big / m))
        rff_err.append(err(_gram_np(sub, 0.5)))
    assert rff_err[-1] < 0.01 and rff_err[-1] < rff_err[1] < rff_err[0]
    taylor = LatentMeanMapKernel(2, "gaussian", key=key, feature_map="taylor",
                                 taylor_order=8, **common).fit(None,
                                                               params=_gauss_hmm())
    f = taylor.features(GAUSS_SEQS)
    # the NumPy Gram of the features is the estimator's (same path for RFF)
    np.testing.assert_allclose(_gram_np(f, 0.5), taylor.gram(GAUSS_SEQS),
                               rtol=1e-6 if X64 else 1e-4)
    taylor_err = []
    for order in (1, 3, 8):
        sub = f._replace(emission=np.asarray(f.emission)[
            :, :, :taylor_dimension(2, order)])
        taylor_err.append(err(_gram_np(sub, 0.5)))
    assert all(b < a for a, b in itertools.pairwise(taylor_err))
    assert taylor_err[-1] < (1e-6 if X64 else 1e-4)


def test_rff_latent_features_equal_float64_definition(gauss_brute):
    # Eq. (30) with random Fourier features, computed in float64 NumPy from the
    # brute-force posteriors; the library computes the sines and cosines in
    # float32 (see continuous_latent_features), which must stay within 1e-5.
    k = LatentMeanMapKernel(2, "gaussian", lam=0.5, gamma=0.5, key=jax.random.key(4),
                            feature_map="rff", n_features=64).fit(
        None, params=_gauss_hmm())
    f = k.features(GAUSS_SEQS)
    omega = np.asarray(k.omega_, np.float64)
    for i, (x, (gamma, _, _)) in enumerate(zip(GAUSS_SEQS, gauss_brute,
                                               strict=True)):
        z = np.asarray(jnp.asarray(x), np.float64) @ omega
        phi = np.concatenate([np.cos(z), np.sin(z)], 1) / math.sqrt(64)
        want = gamma.T @ phi / len(x)
        np.testing.assert_allclose(f.emission[i], want, rtol=0,
                                   atol=1e-5 * np.abs(want).max())
    assert f.emission.dtype == jnp.zeros(()).dtype


def test_lmmk_lambda_infinity_is_length_normalised_fisher(cat_fisher):
    p = _cat_hmm()
    k = LatentMeanMapKernel(2, lam=float("inf"), key=jax.random.key(0))
    K = k.fit(None, params=p).gram(CAT_SEQS)
    F = length_normalised_fisher_kernel(cat_fisher)
    np.testing.assert_allclose(K, F, rtol=1e-8 if X64 else 1e-4)
    # large finite lambda approaches the limit
    k50 = LatentMeanMapKernel(2, lam=30.0, key=jax.random.key(0)).fit(None, params=p)
    np.testing.assert_allclose(k50.gram(CAT_SEQS), F, rtol=1e-8 if X64 else 1e-4,
                               atol=1e-12 if X64 else 1e-6)


def test_fisher_scores_finite_differences(cat_fisher):
    pi, A, B = _cat_params()
    i = 1  # a padded row: the mask must hide the padding from the gradient
    x = CAT_SEQS[i].tolist()
    # brute-force log-likelihood in float64, central differences in free log-params
    theta = np.concatenate([np.log(pi), np.log(A).ravel(), np.log(B).ravel()])

    def loglik(th):
        p, a, b = np.exp(th[:2]), np.exp(th[2:6]).reshape(2, 2), np.exp(th[6:]).reshape(
            2, 3)
        return np.log(_brute_posteriors(p, a, _cat_lik(b, x))[2])

    h = 1e-6
    fd = np.array([(loglik(theta + h * e) - loglik(theta - h * e)) / (2 * h)
                   for e in np.eye(theta.size)])
    # compare leaf by leaf through the recorded flattening blocks
    blocks = cat_fisher.blocks
    got = np.asarray(cat_fisher.scores[i], np.float64)
    s, e = blocks.log_initial
    np.testing.assert_allclose(got[s:e], fd[:2], atol=1e-6 if X64 else 1e-4)
    s, e = blocks.log_transition
    np.testing.assert_allclose(got[s:e], fd[2:6], atol=1e-6 if X64 else 1e-4)
    s, e = blocks.emission.log_probs
    np.testing.assert_allclose(got[s:e], fd[6:], atol=1e-6 if X64 else 1e-4)


def test_fisher_kernels_psd_and_empirical_information():
    fs = fisher_scores(_gauss_hmm(), GAUSS_SEQS)
    K = fisher_kernel(fs.scores)
    assert_psd(K)
    info = empirical_fisher_information(fs.scores, ridge=1e-3)
    Ke = fisher_kernel(fs.scores, information=info)
    U = np.asarray(fs.scores, np.float64)
    ref = U @ np.linalg.solve(np.asarray(info, np.float64), U.T)
    np.testing.assert_allclose(Ke, ref, rtol=1e-6 if X64 else 2e-3,
                               atol=1e-6 if X64 else 2e-3)
    assert_psd(Ke)


def test_estimator_fit_same_key_and_no_recompile():
    # the docstring example's EM configuration (see CAT_SEQS)
    kw = dict(lam=1.0, n_iter=5, n_restarts=1)
    K1 = LatentMeanMapKernel(2, key=jax.random.key(5), **kw).fit(CAT_SEQS).gram(
        CAT_SEQS)
    k2 = LatentMeanMapKernel(2, key=jax.random.key(5), **kw).fit(CAT_SEQS)
    np.testing.assert_array_equal(K1, k2.gram(CAT_SEQS))
    assert_psd(K1)
    with count_compilations() as compiles:
        k2.gram(CAT_SEQS)
    assert compiles.count == 0


def test_length_one_sequences_have_no_transition_part():
    k = LatentMeanMapKernel(2, lam=0.3, key=jax.random.key(0)).fit(
        None, params=_cat_hmm())
    f = k.features(CAT_SEQS)
    assert len(CAT_SEQS[2]) == 1
    np.testing.assert_array_equal(f.transition[2], 0.0)
    np.testing.assert_allclose(np.sum(np.asarray(f.transition), (1, 2))[[0, 1, 3, 4]],
                               1.0, rtol=1e-5)


def test_estimator_bad_input():
    k = LatentMeanMapKernel(2, key=jax.random.key(0))
    with pytest.raises(NotFittedError):
        k.gram([np.array([0, 1])])
    with pytest.raises(TypeError, match="key"):
        LatentMeanMapKernel(2).fit(None, params=_cat_hmm())
    k.fit(None, params=_cat_hmm())
    with pytest.raises(ValueError, match="empty"):
        k.gram([np.array([0, 1]), np.array([], dtype=int)])
    with pytest.raises(ValueError, match="empty"):
        k.gram([])
    with pytest.raises(ValueError, match="alphabet"):
        k.gram([np.array([0, 3])])
    with pytest.raises(ValueError, match="categorical"):
        k.gram([np.zeros((3, 2))])
    kg = LatentMeanMapKernel(2, "gaussian", key=jax.random.key(0)).fit(
        None, params=_gauss_hmm())
    with pytest.raises(ValueError, match="ragged"):
        kg.gram([np.zeros((3, 2)), np.zeros((3, 3))])
    with pytest.raises(ValueError, match="NaN"):
        kg.gram([np.array([[0.0, np.nan]])])
    with pytest.raises(ValueError, match="D = 3"):
        kg.gram([np.zeros((3, 3))])
    with pytest.raises(ValueError, match="emission"):
        LatentMeanMapKernel(2, "gaussian", key=jax.random.key(0)).fit(
            None, params=_cat_hmm())
    with pytest.raises(ValueError, match="feature_map"):
        LatentMeanMapKernel(2, feature_map="nope", key=jax.random.key(0)).fit(
            None, params=_cat_hmm())


def test_fisher_scores_bad_input_and_length_one():
    params, gparams = _cat_hmm(), _gauss_hmm()
    s = fisher_scores(params, CAT_SEQS)  # CAT_SEQS[2] has length 1
    assert np.all(np.isfinite(np.asarray(s.scores)))
    with pytest.raises(ValueError, match="empty"):
        fisher_scores(params, [])
    with pytest.raises(ValueError, match="empty"):
        fisher_scores(params, [np.array([0, 1]), np.array([], int)])
    with pytest.raises(ValueError, match="alphabet"):
        fisher_scores(params, [np.array([0, 3])])
    with pytest.raises(ValueError, match="symbols"):
        fisher_scores(params, [np.zeros((3, 2))])
    with pytest.raises(ValueError, match="ragged"):
        fisher_scores(gparams, [np.zeros((3, 2)), np.zeros((3, 3))])
    with pytest.raises(ValueError, match="NaN"):
        fisher_scores(gparams, [np.array([[0.0, np.nan]])])
    with pytest.raises(ValueError, match="D = 3"):
        fisher_scores(gparams, [np.zeros((3, 3))])


def test_remaining_grams_symmetric_psd(rng):
    """The Gram matrices not checked above: GMMK and PPK over a set of
    distributions, the RBF map of eq. (24) with cosine normalisation, the RFF and
    Taylor LMMKs and the length-normalised Fisher kernel."""
    means = rng.normal(size=(6, 2))
    covs = [a @ a.T + 0.2 * np.eye(2) for a in rng.normal(size=(6, 2, 2))]
    for fn, kw in ((gaussian_gmmk, {"gamma": 0.7}), (gaussian_ppk, {"rho": 1.0})):
        assert_psd([[float(fn(means[i], covs[i], means[j], covs[j], **kw))
               for j in range(6)] for i in range(6)])
    probs = rng.dirichlet(np.ones(4), size=6)
    L = symbol_kernel_matrix(4, 0.7)
    assert_psd([[float(categorical_gmmk(p, q, L)) for q in probs] for p in probs])
    k = LatentMeanMapKernel(2, lam=0.5, nu=0.8, normalize=True,
                            key=jax.random.key(0)).fit(None, params=_cat_hmm())
    K = np.asarray(k.gram(CAT_SEQS))
    assert_psd(K)
    np.testing.assert_allclose(np.diag(K), 1.0, rtol=RTOL)
    for fmap in ("rff", "taylor"):
        kg = LatentMeanMapKernel(2, "gaussian", lam=0.5, key=jax.random.key(1),
                                 feature_map=fmap, n_features=64).fit(
            None, params=_gauss_hmm())
        assert_psd(kg.gram(GAUSS_SEQS))
    assert_psd(length_normalised_fisher_kernel(fisher_scores(_cat_hmm(), CAT_SEQS)))


def test_clique_kernel_bad_input():
    with pytest.raises(ValueError, match="empty"):
        sequence_cliques(np.zeros((0, 2)))
    with pytest.raises(ValueError, match="NaN"):
        sequence_cliques(np.array([[0.0], [np.nan]]))
    with pytest.raises(ValueError, match="features"):
        clique_mean_map_kernel([np.zeros((3, 2))], [np.zeros((3, 3))])
    with pytest.raises(ValueError, match="NaN"):
        clique_mean_map_kernel([np.array([[np.nan]])], [np.zeros((1, 1))])
    with pytest.raises(ValueError, match="clique types"):
        clique_mean_map_kernel([np.zeros((1, 1))], [])
