"""The inverse model's evidence and its NumPyro model against dense Gaussians.

Oracles: scipy's multivariate normal density of the centred inputs under the
dense GP covariance a^2 phi(K) + s^2 I of every (rate, degree) pair; the same
dense covariances, mixed by the pairs' prior, for the draws NumPyro's
``Predictive`` makes through the model's observed site (Monte Carlo); the
float64 host evaluator for the change form of the evidence.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from numpyro.infer import Predictive
from numpyro.infer.util import log_density
from scipy import stats
from scipy.special import logsumexp

from bayeskde.inverse import (
    InverseGPData,
    InverseGPPrior,
    Memo,
    SpectralGPEvidence,
    inverse_gp_model,
    pair_log_evidence,
    pair_log_joint,
    prepare_inverse_gp_data,
)
from bayeskde.inverse.evidence import pair_log_evidence_change, pair_log_joint_host
from tests.helpers import EPS, RTOL, X64

PRIOR = InverseGPPrior(max_degree=2, n_gamma=5, gamma_low=0.3, gamma_high=30.0)
A2, S2 = 0.7, 0.05


def _gram(Y, gamma, alpha):
    d2 = ((Y[:, None, :] - Y[None, :, :]) ** 2).sum(-1)
    return sum(a * np.exp(-(i + 1) * gamma * d2) for i, a in enumerate(alpha))


@pytest.fixture(scope="module")
def small():
    r = np.random.default_rng(3)
    Y = r.uniform(size=(25, 1))
    X = np.c_[np.sin(4 * Y[:, 0]), Y[:, 0] ** 2] + 0.1 * r.normal(size=(25, 2))
    return Y, X, prepare_inverse_gp_data(jax.random.key(0), X, Y, PRIOR)


def _dense(Y, X, data, a, s):
    """Per pair (g, d): the scipy log evidence of the centred X, the bound on
    the working-precision evaluation's rounding, and the GP posterior mean and
    variance at the training outputs (dense solves)."""
    m, d_x = X.shape
    Xc = X - X.mean(0)
    out = {}
    for g in range(PRIOR.n_gamma):
        for d in range(PRIOR.max_degree):
            K = a * _gram(Y, float(data.gammas[g]), np.asarray(data.alpha[g, d], float))
            S = K + s * np.eye(m)
            ev = sum(stats.multivariate_normal(np.zeros(m), S).logpdf(c) for c in Xc.T)
            # (E) is a sum of N = m d_x + 2 m terms: its recursive sum in working
            # precision errs by at most N eps sum|terms| (Higham 2002, eq. 4.4)
            v = np.linalg.eigvalsh(S)
            terms = (0.5 * d_x * np.abs(np.log(v)).sum()
                     + 0.5 * np.sum(Xc * np.linalg.solve(S, Xc))
                     + 0.5 * m * d_x * np.log(2 * np.pi))
            bound = (m * d_x + 2 * m) * EPS * terms
            G = K @ np.linalg.inv(S)
            out[g, d] = (ev, bound, G @ Xc + X.mean(0), np.diag(K - G @ K) + s)
    return out


def test_evidence_matches_direct_gaussian_density(small):
    Y, X, data = small
    dt = data.X.dtype
    ev = np.asarray(pair_log_evidence(data, jnp.asarray(A2, dt), jnp.asarray(S2, dt)))
    for (g, d), (ref, bound, _, _) in _dense(Y, X, data, A2, S2).items():
        assert abs(ev[g, d] - ref) <= bound + RTOL * abs(ref), (g, d)


def test_observed_site_log_prob_sums_the_pairs(small):
    """SpectralGPEvidence.log_prob at the observed X is logsumexp over the pairs
    of the scipy evidence plus the pairs' prior; at any other X it is NaN; and
    the model's log density is that plus the two log-normal priors."""
    Y, X, data = small
    dt = data.X.dtype
    dense = _dense(Y, X, data, A2, S2)
    lpp = np.asarray(data.log_pair_prior, float)
    ref = logsumexp([dense[p][0] + lpp[p] for p in dense])
    bound = max(v[1] for v in dense.values())
    ev = SpectralGPEvidence(data, A2, S2)
    assert ev.event_shape == X.shape and ev.batch_shape == ()
    got = float(ev.log_prob(jnp.asarray(X, dt)))
    assert abs(got - ref) <= bound + RTOL * abs(ref)
    assert np.isnan(float(ev.log_prob(jnp.asarray(X + 1e-3, dt))))
    moved = X.copy()
    moved[7, 1] += 1e-2
    assert np.isnan(float(ev.log_prob(jnp.asarray(moved, dt))))
    # the model: latent log a^2, log s^2 with Normal priors, observed site x
    params = {"log_amplitude": jnp.asarray(np.log(A2), dt),
              "log_noise": jnp.asarray(np.log(S2), dt)}
    lp, trace = log_density(inverse_gp_model, (data, PRIOR, jnp.asarray(X, dt)), {},
                            params)
    assert trace["x"]["is_observed"]
    prior_lp = (stats.norm.logpdf(np.log(A2), data.x_scale + PRIOR.log_amplitude_loc,
                                  PRIOR.log_amplitude_scale)
                + stats.norm.logpdf(np.log(S2), data.x_scale + PRIOR.log_noise_loc,
                                    PRIOR.log_noise_scale))
    assert abs(float(lp) - (ref + prior_lp)) <= bound + RTOL * abs(ref)


def test_predictive_simulates_the_model(small):
    """numpyro.infer.Predictive on the model draws X through its observed site
    from the model itself: at fixed (a^2, s^2), columns of X independent with
    mean x_mean and the covariance sum_p p(p) a^2 phi_p(K) + s^2 I (the pairs'
    prior mixture of the dense GP covariances). Monte Carlo over n draws of
    d_x columns each: the mean within 5 standard errors sqrt(C_ii / N), every
    covariance entry within 5 standard errors sd(x_i x_j) / sqrt(N) of its
    estimate."""
    Y, X, data = small
    dt = data.X.dtype
    n, m, d_x = 3000, *X.shape
    w = np.exp(np.asarray(data.log_pair_prior, float))
    C = s2_eye = S2 * np.eye(m)
    for g in range(PRIOR.n_gamma):
        for d in range(PRIOR.max_degree):
            C = C + w[g, d] * A2 * _gram(Y, float(data.gammas[g]),
                                         np.asarray(data.alpha[g, d], float))
    assert np.ptp(np.diag(C - s2_eye)) < 1e-12  # phi(K)_ii = sum(alpha) = 1
    memo = Memo()
    samples = {"log_amplitude": jnp.full(n, np.log(A2), dt),
               "log_noise": jnp.full(n, np.log(S2), dt)}
    rep = Predictive(inverse_gp_model, posterior_samples=samples, return_sites=["x"],
                     parallel=True)(jax.random.key(5), data, PRIOR, memo=memo)["x"]
    assert rep.shape == (n, m, d_x) and rep.dtype == dt
    # each distinct pair drawn is eigendecomposed once, into the memo
    assert 1 <= len(memo) <= PRIOR.n_gamma * PRIOR.max_degree
    z = (np.asarray(rep, np.float64) - X.mean(0)).transpose(0, 2, 1).reshape(-1, m)
    N = len(z)
    assert np.max(np.abs(z.mean(0)) / np.sqrt(np.diag(C) / N)) < 5.0
    prod = z[:, :, None] * z[:, None, :]
    se = prod.std(0) / np.sqrt(N)
    assert np.max(np.abs(prod.mean(0) - C) / se) < 5.0
    # the covariance is not that of one pair: the check tells the mixture
    # from its most probable component
    g0 = 1
    one = A2 * _gram(Y, float(data.gammas[g0]), np.asarray(data.alpha[g0, 1], float))
    assert np.max(np.abs(prod.mean(0) - one - s2_eye) / se) > 5.0
    # prior predictive: no samples, a^2 and s^2 drawn from their priors
    prior_rep = Predictive(inverse_gp_model, num_samples=3, parallel=True)(
        jax.random.key(6), data, PRIOR)
    assert prior_rep["x"].shape == (3, m, d_x)
    assert np.all(np.isfinite(np.asarray(prior_rep["x"])))


def _large_spectra(dt, m=100_000, G=4, D=2, r=64, seed=0):
    """Spectra shaped like the low-rank path's at m = 1e5 (r kept eigenvalues
    a pair, the rest in n_rest / q_rest): a log joint of about 1e5 nats."""
    rng = np.random.default_rng(seed)
    lam = np.tile(np.sort(rng.gamma(0.5, 20.0, r))[::-1] * m / 100, G * D)
    q = rng.gamma(1.0, 1.0, G * D * r) * (lam + 0.01 * m / 100) * 0.2
    # q_rest / s^2 ~ 1e5 nats; pairs 0-2 nats apart, so every pair has mass
    q_rest = 0.01 * (m - r) * (1 + 4e-5 * rng.uniform(size=(G, D)))
    q = q.reshape(G * D, r)
    q = (q * (q.sum(1, keepdims=True).mean() / q.sum(1, keepdims=True))).reshape(-1)
    X = jnp.zeros((m, 1), dt)
    return InverseGPData(
        X, X, jnp.zeros(1, dt), jnp.ones(G, dt), jnp.ones((G, D, D), dt),
        jnp.asarray(lam, dt), jnp.asarray(q, dt), jnp.repeat(jnp.arange(G * D), r),
        jnp.full((G, D), m - r, dt), jnp.asarray(q_rest, dt),
        jnp.full((G, D), -np.log(G * D), dt), float(np.log(0.3)))


def test_evidence_change_keeps_the_precision_of_the_change():
    """pair_log_evidence_change against the float64 difference of the host
    evaluator at a log joint of ~1e5 nats: exact to the change's precision,
    where the difference of two float32 evidences is off by ~3e-2."""
    dt = jnp.zeros(()).dtype
    d = _large_spectra(dt)
    G, D = d.n_rest.shape
    r = int(d.lam.shape[0] // (G * D))
    w = (np.full((G, D), 0.5), np.full((G, D), np.log(0.01)))
    w = w + (w[0] + np.linspace(-0.02, 0.02, G * D).reshape(G, D), w[1] - 0.003)
    u0, v0, u, v = (np.asarray(jnp.asarray(a, dt), np.float64) for a in w)
    ref = (pair_log_joint_host(d, np.exp(u), np.exp(v))
           - pair_log_joint_host(d, np.exp(u0), np.exp(v0)))
    assert np.abs(ref).max() > 0.5
    got = np.asarray(pair_log_evidence_change(
        d, *(jnp.asarray(a, dt) for a in (u0, v0, u, v))), np.float64)
    # the change form sums r + 2 terms a pair, each carrying a few eps of
    # itself: its error is a few eps times the sum of their magnitudes (about
    # 300 nats here: the n_rest and q_rest terms, which cancel), not of the
    # evidence (1e5); the float64 oracle is a difference of two evidences
    # and errs by a few float64 eps of them
    lam, q = np.asarray(d.lam, float), np.asarray(d.q, float)
    seg = np.asarray(d.segment)
    a0, s0 = np.exp(u0).ravel()[seg], np.exp(v0).ravel()[seg]
    w0 = a0 * lam + s0
    dw = a0 * np.expm1(u.ravel()[seg] - u0.ravel()[seg]) * lam + s0 * np.expm1(
        v.ravel()[seg] - v0.ravel()[seg])
    n_rest, q_rest = np.asarray(d.n_rest, float), np.asarray(d.q_rest, float)
    terms = (np.bincount(seg, np.abs(np.log1p(dw / w0)) + np.abs(q * dw / (w0 * (
        w0 + dw))), G * D).reshape(G, D) + n_rest * np.abs(v - v0)
        + q_rest * np.exp(-v0) * np.abs(np.expm1(v0 - v)))
    host = np.abs(pair_log_joint_host(d, np.exp(u0), np.exp(v0)))
    bound = 8 * (r + 2) * (EPS * terms + np.finfo(np.float64).eps * host)
    assert np.all(np.abs(got - ref) <= bound)
    direct = np.asarray(
        pair_log_evidence(d, jnp.exp(jnp.asarray(u, dt)), jnp.exp(jnp.asarray(v, dt)))
        - pair_log_evidence(d, jnp.exp(jnp.asarray(u0, dt)),
                            jnp.exp(jnp.asarray(v0, dt))), np.float64)
    if not X64:  # the case the change form is for
        assert np.abs(direct - ref).max() > 30 * np.abs(got - ref).max()


def test_host_log_joint_is_the_model_log_joint():
    with jax.enable_x64(True):
        d = _large_spectra(jnp.float64, m=5000)
        a, s = np.linspace(0.5, 2.0, 8).reshape(4, 2), np.full((4, 2), 0.02)
        ref = np.asarray(pair_log_joint(d, jnp.asarray(a), jnp.asarray(s)))
    # both in float64 (the host evaluator always), summed in different orders
    np.testing.assert_allclose(pair_log_joint_host(d, a, s), ref,
                               rtol=1e3 * np.finfo(np.float64).eps)
