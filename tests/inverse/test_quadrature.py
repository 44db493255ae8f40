"""The inverse model's quadrature posterior against a dense global grid of the
joint (the oracle) and against its own float64 run."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import stats

from bayeskde.datasets import make_arm_pose
from bayeskde.inverse import (
    InverseGPData,
    InverseGPPrior,
    pair_log_joint,
    prepare_inverse_gp_data,
    quadrature_posterior,
)
from tests.helpers import EPS, LOOSE, X64

PRIOR = InverseGPPrior(max_degree=2, n_gamma=4, gamma_low=0.3, gamma_high=30.0)


@pytest.fixture(scope="module")
def small():
    r = np.random.default_rng(5)
    Y = r.uniform(size=(30, 1))
    X = np.c_[np.sin(4 * Y[:, 0]), Y[:, 0] ** 2] + 0.1 * r.normal(size=(30, 2))
    data = prepare_inverse_gp_data(jax.random.key(0), X, Y, PRIOR)
    return data, quadrature_posterior(jax.random.key(0), data, PRIOR,
                                      num_samples=4000)


@pytest.fixture(scope="module")
def brute(small):
    """The joint on a dense global grid of (u, v) = (log a^2, log s^2): the
    oracle, independent of the quadrature's mode search and Laplace grid."""
    data, _ = small
    loc = np.array([data.x_scale + PRIOR.log_amplitude_loc,
                    data.x_scale + PRIOR.log_noise_loc])
    sc = np.array([PRIOR.log_amplitude_scale, PRIOR.log_noise_scale])
    # spacing 0.05 in u and 0.044 in v, about a fifth of the posterior's sd
    u = np.linspace(loc[0] - 7 * sc[0], loc[0] + 7 * sc[0], 401)
    v = np.linspace(loc[1] - 7 * sc[1], loc[1] + 7 * sc[1], 801)
    dt = data.X.dtype

    def row(a):
        return jax.vmap(lambda b: pair_log_joint(data, jnp.exp(a), jnp.exp(b)))(
            jnp.asarray(v, dt))

    J = np.array(jax.lax.map(row, jnp.asarray(u, dt)), float)  # (U, V, G, D)
    J += (stats.norm.logpdf(u, loc[0], sc[0])[:, None, None, None]
          + stats.norm.logpdf(v, loc[1], sc[1])[None, :, None, None])
    cell = np.log((u[1] - u[0]) * (v[1] - v[0]))
    return u, v, J, cell


def test_pair_posterior_and_evidence_match_a_dense_grid(small, brute):
    _, q = small
    u, v, J, cell = brute
    log_z = np.logaddexp.reduce(J.reshape(-1, *J.shape[2:]), axis=0) + cell
    log_marginal = np.logaddexp.reduce(log_z.ravel())
    # both rules integrate a smooth integrand on grids of a fifth of its sd:
    # they agree to ~1e-9 (measured in float64), and the joint's rounding adds
    # N eps |J| for its sum of N = m d_x + 2 m terms
    data, _ = small
    m, d_x = data.X.shape
    tol = 1e-7 + (m * d_x + 2 * m) * EPS * np.abs(J).max()
    np.testing.assert_allclose(q.log_marginal, log_marginal, atol=tol)
    np.testing.assert_allclose(q.pair_posterior, np.exp(log_z - log_marginal),
                               atol=tol)
    assert q.report.warnings == ()
    assert q.report.log_z_change < 1e-3 and q.report.edge_density < 1e-6


def test_draws_match_the_dense_grid_moments(small, brute):
    """Independent draws: the mean within 4 standard errors sd / sqrt(n), the
    sd within 4 standard errors sqrt(mu_4 - sd^4) / (2 sd sqrt(n)) of a sample
    sd (delta method; mu_4 the grid marginal's fourth central moment)."""
    _, q = small
    u, v, J, _ = brute
    w = np.exp(J - J.max())
    w = w.sum(axis=(2, 3))
    w /= w.sum()
    for draws, axis, grid in ((q.log_amplitude, 1, u), (q.log_noise, 0, v)):
        p = w.sum(axis=axis)
        mean = np.sum(p * grid)
        sd = np.sqrt(np.sum(p * (grid - mean) ** 2))
        mu4 = np.sum(p * (grid - mean) ** 4)
        n = len(draws)
        assert abs(draws.mean() - mean) < 4 * sd / np.sqrt(n)
        assert abs(draws.std() - sd) < 4 * np.sqrt(mu4 - sd**4) / (2 * sd * np.sqrt(n))


def test_pairs_of_the_draws_follow_the_pair_posterior(small):
    _, q = small
    counts = np.bincount(q.pair, minlength=q.pair_posterior.size)
    p = q.pair_posterior.ravel()
    se = np.sqrt(p * (1 - p) / len(q.pair))
    assert np.all(np.abs(counts / len(q.pair) - p) <= 4 * se + 1e-12)


def test_bad_settings(small):
    data, _ = small
    with pytest.raises(ValueError, match="odd"):
        quadrature_posterior(jax.random.key(0), data, PRIOR, n_grid=36)
    with pytest.raises(ValueError, match="radius"):
        quadrature_posterior(jax.random.key(0), data, PRIOR, radius=0.0)


def test_working_precision_gives_the_float64_posterior():
    """The spectra are computed in float64 whatever the working precision, so a
    float32 run reaches the float64 posterior on the same data (before, float32
    spectra dropped the eigenvalues near the noise level and moved the arm's
    posterior to another kernel)."""
    a = make_arm_pose(jax.random.key(4), 150, 2)
    X = np.asarray(a.x_train, np.float64)
    Y = np.asarray(a.theta_train, np.float64)
    prior = InverseGPPrior(max_degree=2, n_gamma=6)
    key = jax.random.key(0)
    data = prepare_inverse_gp_data(key, X, Y, prior)
    q = quadrature_posterior(key, data, prior, num_samples=10)
    with jax.enable_x64(True):
        ref = quadrature_posterior(key, prepare_inverse_gp_data(key, X, Y, prior),
                                   prior, num_samples=10)
    # the working precision's evidence sums N = m d_x + 2 m terms: its error,
    # N eps |log joint|, bounds the pairs' probabilities' change; a mode moves
    # by at most sd sqrt(2 error) (the joint is flat to second order there),
    # sd <= the prior's scale 2.5
    m, d_x = data.X.shape
    tol = (m * d_x + 2 * m) * EPS * abs(ref.log_marginal)
    np.testing.assert_allclose(q.pair_posterior, ref.pair_posterior, atol=tol)
    np.testing.assert_allclose(q.mode, ref.mode, atol=2.5 * np.sqrt(2 * tol))


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


def test_quadrature_at_a_large_log_joint_is_precision_independent():
    """The quadrature on spectra of m = 1e5 in float32 against float64 (same
    numbers): the evidence to 2e-3 nats, the pair posterior to 1e-4."""
    prior = InverseGPPrior(max_degree=2, n_gamma=4)
    dt = jnp.zeros(()).dtype
    q = quadrature_posterior(jax.random.key(0), _large_spectra(dt), prior,
                             num_samples=10)
    with jax.enable_x64(True):
        ref = quadrature_posterior(jax.random.key(0), _large_spectra(jnp.float64),
                                   prior, num_samples=10)
    # the change form's error: a few eps of the ~300 nats of its terms that
    # cancel (tests/inverse/test_evidence.py), 64 of them
    assert abs(q.log_marginal - ref.log_marginal) < 64 * 300 * EPS
    assert (ref.pair_posterior > 0.05).sum() >= 3  # the mass is spread
    np.testing.assert_allclose(q.pair_posterior, ref.pair_posterior, atol=1e-4)
    # a maximiser located to sqrt(eps) (flat to second order at the mode)
    np.testing.assert_allclose(q.mode, ref.mode, atol=LOOSE)


def test_noise_free_data_gets_a_clear_error():
    """X an exact function of Y: the noise's mode sits at the edge of working
    precision (log s^2 about -28 in float32). In float32 no pair's grid then
    has a finite evidence and the fit says so, naming the way out, instead
    of failing inside NumPy; float64 resolves the grid (log s^2 about -37)."""
    from bayeskde.inverse import fit_inverse_gp

    rng = np.random.default_rng(0)
    t = rng.uniform(0.0, 1.0, 200)
    x = t + 0.3 * np.sin(2 * np.pi * t)

    def fit():
        return fit_inverse_gp(jax.random.key(0), x[:, None], t[:, None],
                              method="quadrature", progress_bar=False,
                              noise="gaussian")

    if X64:
        f = fit()
        assert np.log(f.map_params["noise"]) < -30
        assert np.isfinite(f.report.log_z_change)
    else:
        with pytest.raises(ValueError, match="noise-free function of Y"):
            fit()
