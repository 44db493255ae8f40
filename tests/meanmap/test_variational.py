"""The variational Bayesian HMM: its evidence lower bound against a Monte Carlo
reference over ``q(theta)`` with every state path enumerated, the bound's ascent,
and bad inputs."""

import itertools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import stats

from bayeskde.hmm import fit_hmm, pad_sequences
from bayeskde.meanmap import (
    VariationalHMM,
    fit_variational_hmm,
    mode_weights,
    variational_elbo,
)
from tests.helpers import RTOL, assert_close

N, D, LENGTHS = 2, 2, (4, 3)


def _tiny_q():
    return VariationalHMM(
        initial=jnp.asarray([1.5, 2.5]),
        transition=jnp.asarray([[3.0, 1.0], [0.5, 2.0]]),
        means=jnp.asarray([[-1.0, 0.5], [1.0, -0.2]]), beta=jnp.asarray([2.0, 3.0]),
        shape=jnp.asarray([[2.0, 4.0], [3.0, 2.5]]),
        rate=jnp.asarray([[1.0, 2.0], [2.0, 1.5]]))


def _mc_elbo(q, X, lengths, alpha0, strength, rng, draws):
    """``E_q[log p(X, z, theta)] - E_q[log q(z)] - E_q[log q(theta)]`` with ``q(z)``
    the optimal one, ``softmax_z E_q[log p(x, z | theta)]``: every path scored
    for each draw of ``q(theta)``, densities from scipy; returns the estimate
    and its Monte Carlo standard error."""
    q = {k: np.asarray(v, np.float64) for k, v in q._asdict().items()}
    frames = np.concatenate([x[:n] for x, n in zip(X, lengths, strict=True)])
    m0, var = frames.mean(0), frames.var(0)
    b0 = strength * var
    pi = rng.dirichlet(q["initial"], draws)
    A = np.stack([rng.dirichlet(q["transition"][i], draws) for i in range(N)], 1)
    lam = rng.gamma(q["shape"], 1.0 / q["rate"], (draws, N, D))
    mu = q["means"] + rng.normal(size=(draws, N, D)) / np.sqrt(q["beta"][:, None]
                                                              * lam)
    log_prior = (stats.dirichlet.logpdf(pi.T, np.full(N, alpha0))
                 + sum(stats.dirichlet.logpdf(A[:, i].T, np.full(N, alpha0))
                       for i in range(N))
                 + np.sum(stats.norm.logpdf(mu, m0, 1 / np.sqrt(strength * lam))
                          + stats.gamma.logpdf(lam, 1.0, scale=1 / b0), (1, 2)))
    log_q = (stats.dirichlet.logpdf(pi.T, q["initial"])
             + sum(stats.dirichlet.logpdf(A[:, i].T, q["transition"][i])
                   for i in range(N))
             + np.sum(stats.norm.logpdf(mu, q["means"],
                                        1 / np.sqrt(q["beta"][:, None] * lam))
                      + stats.gamma.logpdf(lam, q["shape"], scale=1 / q["rate"]),
                      (1, 2)))
    total, per_draw = 0.0, log_prior - log_q
    for x, n in zip(X, lengths, strict=True):
        # log N(x_t | mu_i, 1 / lambda_i) per draw, step and state: (S, T, N)
        ell = np.sum(stats.norm.logpdf(x[None, :n, None, :], mu[:, None],
                                       1 / np.sqrt(lam[:, None])), -1)
        paths = list(itertools.product(range(N), repeat=n))
        lp = np.stack([np.log(pi[:, z[0]])
                       + sum(np.log(A[:, z[t], z[t + 1]]) for t in range(n - 1))
                       + sum(ell[:, t, z[t]] for t in range(n)) for z in paths], 1)
        e_lp = lp.mean(0)
        qz = np.exp(e_lp - e_lp.max())
        qz /= qz.sum()
        total += np.sum(qz * (e_lp - np.log(qz)))
        per_draw = per_draw + lp @ qz
    # the path term's estimate is linear in the draws' scores to first order
    est = total + np.mean(log_prior - log_q)
    return est, np.std(per_draw) / np.sqrt(draws)


def test_elbo_equals_monte_carlo_over_paths_and_draws(rng):
    X = np.zeros((2, 4, D))
    X[0] = rng.normal(size=(4, D))
    X[1, :3] = rng.normal(size=(3, D))
    lengths = np.asarray(LENGTHS)
    q = _tiny_q()
    for alpha0, strength in ((1.0, 1e-2), (0.3, 0.5)):
        elbo = float(variational_elbo(q, jnp.asarray(X), jnp.asarray(lengths),
                                      concentration=alpha0,
                                      prior_strength=strength))
        ref, se = _mc_elbo(q, X, lengths, alpha0, strength,
                           np.random.default_rng(1), 200_000)
        assert abs(elbo - ref) < 4 * se + 1e-4, (elbo, ref, se)


@pytest.fixture(scope="module")
def two_regimes():
    rng = np.random.default_rng(3)
    seqs = []
    for _ in range(6):
        z = np.repeat(rng.integers(0, 2, 6), 5)
        seqs.append(np.where(z[:, None] == 1, 2.0, -1.0) + rng.normal(size=(30, D)))
    X, lengths = pad_sequences(seqs)
    init = fit_hmm(jax.random.key(0), seqs, 3, emission="gaussian", n_iter=5,
                   n_restarts=1).params
    return init, jnp.asarray(X, init.emission.means.dtype), jnp.asarray(lengths)


def test_elbo_rises_with_every_round(two_regimes):
    init, X, lengths = two_regimes
    elbos = [float(variational_elbo(fit_variational_hmm(init, X, lengths, n_iter=k),
                                    X, lengths)) for k in (0, 1, 3)]
    assert np.all(np.diff(elbos) >= -10 * RTOL * abs(elbos[0])), elbos


@pytest.mark.parametrize("kw", [dict(concentration=0.0), dict(prior_strength=-1.0),
                                dict(concentration=float("nan"))])
def test_elbo_bad_priors(two_regimes, kw):
    init, X, lengths = two_regimes
    q = fit_variational_hmm(init, X, lengths, n_iter=1)
    with pytest.raises(ValueError):
        variational_elbo(q, X, lengths, **kw)


def test_mode_weights_maximise_the_mixture_elbo(rng):
    # sum_m w_m (F_m - log w_m) over the simplex: its maximum is logsumexp(F),
    # reached by the weights; no random point of the simplex beats them
    F = np.asarray([-3.0, 0.5, 0.2, -40.0])
    w = mode_weights(F)

    def mixture_elbo(v):
        v = np.maximum(v, 1e-300)
        return np.sum(v * (F - np.log(v)), axis=-1)

    best = np.log(np.sum(np.exp(F - F.max()))) + F.max()
    assert_close(mixture_elbo(w), best, rtol=1e-12, atol=1e-12)
    assert_close(np.sum(w), 1.0, rtol=1e-12, atol=1e-12)
    others = rng.dirichlet(np.ones(4), 20_000)
    assert np.all(mixture_elbo(others) <= best + 1e-12)
    # a gap of hundreds of nats (separate HMM optima) leaves one mode
    assert_close(mode_weights([1000.0, 500.0]), [1.0, 0.0], rtol=0, atol=1e-200)


@pytest.mark.parametrize("bad", [[], [[1.0, 2.0]], [1.0, float("nan")],
                                 [float("inf")]])
def test_mode_weights_bad_input(bad):
    with pytest.raises(ValueError):
        mode_weights(bad)
