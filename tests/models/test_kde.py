import functools
import importlib.util
import os

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from numpyro.infer.util import log_density
from scipy import integrate, special, stats
from sklearn.metrics.pairwise import euclidean_distances

from bayeskde import KernelDependencyEstimator
from bayeskde.infer import (
    check_convergence,
    convergence_report,
    load_inference_data,
    run_nuts,
    save_inference_data,
    to_inference_data,
)
from bayeskde.kpca import kernel_pca, kpca_transform
from bayeskde.models import (
    BayesianKDEGridPrior,
    kde_grid_bma_features,
    kde_spectra,
    n_components_for_variance,
)
from tests.conftest import ROOT
from tests.helpers import X64, count_compilations

# The GP-evidence KDE models lost to the Gibbs posterior and left the library;
# they are kept, and tested here, as references in bench/kde_evidence.py.
_spec = importlib.util.spec_from_file_location(
    "kde_evidence", os.path.join(ROOT, "bench", "kde_evidence.py"))
kde_evidence = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(kde_evidence)
LIKELIHOODS = kde_evidence.LIKELIHOODS
BayesianKDEPrior = kde_evidence.BayesianKDEPrior
bayesian_kde_grid_model = kde_evidence.bayesian_kde_grid_model
bayesian_kde_model = kde_evidence.bayesian_kde_model
kde_bma_features = kde_evidence.kde_bma_features
kde_grid_log_joint = kde_evidence.kde_grid_log_joint
kde_grid_loglik = kde_evidence.kde_grid_loglik
scale_free_gp_logpdf = kde_evidence.scale_free_gp_logpdf
_cov_chol = kde_evidence._cov_chol
_pseudo_prior = kde_evidence._pseudo_prior


def test_scale_free_evidence_equals_integral_over_amplitude(rng):
    m = 5
    A = rng.normal(size=(m, m))
    C = A @ A.T + m * np.eye(m)
    t = rng.normal(size=(m, 1)) * 3.0

    def integrand(a2):  # N(t; 0, a2 C) / a2
        return stats.multivariate_normal(np.zeros(m), a2 * C).pdf(t[:, 0]) / a2

    ref = np.log(integrate.quad(integrand, 0, np.inf, limit=200)[0])
    got = float(scale_free_gp_logpdf(jnp.asarray(t), jnp.linalg.cholesky(C))[0])
    assert got == pytest.approx(ref, rel=1e-6 if X64 else 1e-4)


def _problem(rng, m=30):
    X = rng.uniform(-1, 1, size=(m, 1))
    Y = np.c_[np.sin(3 * X[:, 0]), np.cos(3 * X[:, 0])] + 0.05 * rng.normal(size=(m, 2))
    L = np.exp(-euclidean_distances(Y, squared=True) / 2.0)
    kp = kernel_pca(L, 3)
    T = np.asarray(kpca_transform(kp, L))
    D2 = euclidean_distances(X, squared=True)
    return X, Y, D2, T


PRIOR = BayesianKDEPrior(log_sigma_loc=np.log(0.5), log_ridge_loc=np.log(1e-2))


@pytest.fixture(scope="module")
def posterior():
    """One NUTS run shared by the tests of this module (it dominates their time)."""
    _, _, D2, T = _problem(np.random.default_rng(0))
    D2j, Tj = jnp.asarray(D2), jnp.asarray(T)
    mcmc = run_nuts(jax.random.key(1), bayesian_kde_model, D2j, Tj, PRIOR,
                    num_warmup=400, num_samples=1000, num_chains=2,
                    progress_bar=False)
    return D2j, Tj, mcmc


def test_posterior_equals_brute_force_grid(posterior):
    D2j, Tj, mcmc = posterior
    prior = PRIOR
    ls = np.linspace(-4.0, 2.0, 121)
    lr = np.linspace(-14.0, 2.0, 161)

    @jax.jit
    @jax.vmap
    def loglik(a, b):
        chol = _cov_chol(D2j, jnp.exp(a), jnp.exp(b))
        return jnp.sum(scale_free_gp_logpdf(Tj, chol))

    A, B = np.meshgrid(ls, lr, indexing="ij")
    G = np.asarray(loglik(jnp.asarray(A.ravel()), jnp.asarray(B.ravel())))
    G = G.reshape(A.shape) + stats.norm(prior.log_sigma_loc, 1).logpdf(A) \
        + stats.norm(prior.log_ridge_loc, 2).logpdf(B)
    P = np.exp(G - G.max())
    P /= P.sum()
    grid_mean = np.array([(P.sum(1) * ls).sum(), (P.sum(0) * lr).sum()])
    grid_sd = np.sqrt(np.array([(P.sum(1) * ls**2).sum(), (P.sum(0) * lr**2).sum()])
                      - grid_mean**2)
    s = mcmc.get_samples()
    nuts = np.array([s["log_sigma"].mean(), s["log_ridge"].mean()])
    nuts_sd = np.array([s["log_sigma"].std(), s["log_ridge"].std()])
    # Monte Carlo error of a mean with ~500 effective draws is ~0.045 sd.
    np.testing.assert_array_less(np.abs(nuts - grid_mean), 0.2 * grid_sd)
    np.testing.assert_allclose(nuts_sd, grid_sd, rtol=0.2)


def test_single_draw_bma_equals_kde(rng):
    X, Y, D2, T = _problem(rng)
    Z = rng.uniform(-1, 1, size=(7, 1))
    sigma, ridge = 0.4, 1e-3
    kde = KernelDependencyEstimator("rbf", {"sigma": sigma}, "rbf", {"gamma": 0.5},
                                    n_components=3, ridge=ridge).fit(X, Y)
    F = kde.predict_features(Z)
    D2t = euclidean_distances(Z, X, squared=True)
    got = kde_bma_features(jnp.asarray(D2), jnp.asarray(D2t), jnp.asarray(T),
                           jnp.asarray([sigma]), jnp.asarray([ridge]))
    np.testing.assert_allclose(got, F, atol=1e-6 if X64 else 1e-3)
    two = kde_bma_features(jnp.asarray(D2), jnp.asarray(D2t), jnp.asarray(T),
                           jnp.asarray([sigma, sigma]), jnp.asarray([ridge, 1.0]))
    other = KernelDependencyEstimator("rbf", {"sigma": sigma}, "rbf", {"gamma": 0.5},
                                      n_components=3, ridge=1.0).fit(X, Y)
    np.testing.assert_allclose(two, (F + other.predict_features(Z)) / 2,
                               atol=1e-6 if X64 else 1e-3)


def test_inference_data_has_named_dims(posterior, tmp_path):
    _, _, mcmc = posterior
    idata = to_inference_data(
        mcmc, coords={"component": [0, 1, 2], "sample": np.arange(30)},
        dims={"T": ["component", "sample"]},
    )
    for group in ("posterior", "sample_stats", "log_likelihood", "observed_data"):
        assert group in idata
    assert idata.log_likelihood["T"].dims == ("chain", "draw", "component")
    assert idata.posterior["sigma"].shape == (2, 1000)
    assert idata.observed_data["T"].dims == ("component", "sample")
    # netCDF round trip loses nothing.
    back = load_inference_data(save_inference_data(idata, tmp_path / "kde.nc"))
    for group in ("posterior", "sample_stats", "log_likelihood", "observed_data"):
        assert back[group].equals(idata[group]), group
    report = convergence_report(idata, ["log_sigma", "log_ridge"])
    assert report.max_rhat < 1.05 and report.messages == ()


def test_convergence_report_flags_disagreeing_chains():
    import arviz as az

    draws = np.random.default_rng(0).normal(size=(2, 200))
    draws[1] += 3.0  # two chains in different places
    idata = az.from_dict(posterior={"theta": draws},
                         sample_stats={"diverging": np.zeros((2, 200), bool)})
    report = convergence_report(idata)
    assert report.max_rhat > 1.5
    assert any("chains disagree" in m for m in report.messages)
    with pytest.warns(RuntimeWarning) as record:
        assert not check_convergence(idata)
    assert {"chains disagree", "too few effective draws"} <= {
        m for m in ("chains disagree", "too few effective draws")
        for w in record if m in str(w.message)}


def test_bad_arguments():
    with pytest.raises(ValueError, match="num_samples"):
        run_nuts(jax.random.key(0), bayesian_kde_model, num_samples=0)
    with pytest.raises(ValueError, match="target_accept_prob"):
        run_nuts(jax.random.key(0), bayesian_kde_model, target_accept_prob=1.5)


# ---------------------------------------------------------------------------
# Grid path: spectra, exact marginalisation of the width, product-space ridges.

GRID = np.array([0.3, 0.36, 0.42, 0.48, 0.55, 0.65])  # posterior spread over 3


@jax.jit
@functools.partial(jax.vmap, in_axes=(None, None, 0, 0))
def _chol_loglik(D2j, Tj, sigma, ridge):
    """The continuous-width model's evidence: one Cholesky per (sigma, ridge)."""
    return jnp.sum(scale_free_gp_logpdf(Tj, _cov_chol(D2j, sigma, ridge)))


def test_grid_loglik_equals_cholesky_model(rng):
    _, _, D2, T = _problem(rng)
    D2j, Tj = jnp.asarray(D2), jnp.asarray(T)
    spectra = kde_spectra(D2, T, GRID)
    grams = np.exp(-D2[None] / (2 * GRID[:, None, None] ** 2))
    from_grams = kde_spectra(grams, T, GRID)
    rtol = 1e-10 if X64 else 2e-5
    # float32 round-off grows with cond(C) ~ 1 / (m gamma) on both paths alike, so
    # the smallest ridge is checked in float64 only.
    for ridge in (1e-5 if X64 else 1e-3, 1e-2, 3.0):
        got = np.asarray(kde_grid_loglik(spectra, ridge))
        ref = np.asarray(_chol_loglik(D2j, Tj, jnp.asarray(GRID),
                                      jnp.full(GRID.size, ridge)))
        np.testing.assert_allclose(got, ref, rtol=rtol)
        np.testing.assert_allclose(kde_grid_loglik(from_grams, ridge), ref, rtol=rtol)
    # The model's joint density: pseudo-priors of every ridge times the mixture
    # sum_g pi_g p(T | g, gamma_g) p(gamma_g) / psi_g(gamma_g).
    log_ridge = np.linspace(-7.0, -2.0, GRID.size)
    prior = BayesianKDEGridPrior(grid_logits=np.arange(GRID.size, dtype=float))
    for lik in LIKELIHOODS:
        loc, scale = (np.asarray(a) for a in _pseudo_prior(spectra, prior, lik))
        z = (log_ridge - loc) / scale
        got, _ = log_density(bayesian_kde_grid_model, (spectra, prior, lik), {},
                             {"log_ridge_std": jnp.asarray(z)})
        per = np.asarray(kde_grid_loglik(spectra, np.exp(log_ridge), lik))
        psi = stats.norm(loc, scale).logpdf(log_ridge)
        lp = stats.norm(prior.log_ridge_loc, prior.log_ridge_scale).logpdf(log_ridge)
        # Density of z: psi(log gamma) times the constant Jacobian prod scale.
        ref = special.logsumexp(per + np.arange(GRID.size) - special.logsumexp(
            np.arange(GRID.size)) + lp - psi) + (psi + np.log(scale)).sum()
        assert float(got) == pytest.approx(ref, rel=rtol)
    ref = _chol_loglik(D2j, Tj, jnp.asarray(GRID), jnp.asarray(np.exp(log_ridge)))
    np.testing.assert_allclose(kde_grid_loglik(spectra, np.exp(log_ridge)), ref,
                               rtol=rtol)


def test_shared_evidence_equals_integral_over_amplitude(rng):
    m, p = 5, 3
    D2 = euclidean_distances(rng.normal(size=(m, 2)), squared=True)
    T = rng.normal(size=(m, p)) * np.array([3.0, 1.0, 0.1])
    sigma, ridge = 0.8, 0.05
    C = np.exp(-D2 / (2 * sigma**2)) + m * ridge * np.eye(m)

    def log_integrand(u):  # a^2 = e^u: prod_j N(t_j; 0, a^2 C) a^-2 da^2 -> du
        return stats.multivariate_normal(np.zeros(m), np.exp(u) * C).logpdf(T.T).sum()

    us = np.linspace(-30.0, 30.0, 601)
    peak = max(log_integrand(u) for u in us)  # scale against underflow
    val, _ = integrate.quad(lambda u: np.exp(log_integrand(u) - peak), -30.0, 30.0,
                            limit=400, epsabs=0.0, epsrel=1e-10)
    ref = np.log(val) + peak
    got = float(kde_grid_loglik(kde_spectra(D2, T, [sigma]), ridge, "shared")[0])
    assert got == pytest.approx(ref, rel=1e-6 if X64 else 1e-4)


@pytest.fixture(scope="module")
def grid_posterior():
    _, _, D2, T = _problem(np.random.default_rng(0))
    spectra = kde_spectra(D2, T, GRID)
    mcmc = run_nuts(jax.random.key(2), bayesian_kde_grid_model, spectra, PRIOR_GRID,
                    "scale_free", num_warmup=500, num_samples=1500, num_chains=2,
                    progress_bar=False)
    return D2, T, spectra, mcmc


PRIOR_GRID = BayesianKDEGridPrior()


def test_grid_posterior_equals_brute_force(grid_posterior):
    D2, T, _, mcmc = grid_posterior
    D2j, Tj = jnp.asarray(D2), jnp.asarray(T)
    lr = np.linspace(-18.0, 2.0, 401)

    @jax.jit
    @jax.vmap
    def loglik(s, b):  # independent of the spectra: one Cholesky per point
        return jnp.sum(scale_free_gp_logpdf(Tj, _cov_chol(D2j, s, jnp.exp(b))))

    S, B = np.meshgrid(GRID, lr, indexing="ij")
    G = np.array(loglik(jnp.asarray(S.ravel()), jnp.asarray(B.ravel())),
                 np.float64).reshape(S.shape)
    G += stats.norm(PRIOR_GRID.log_ridge_loc, PRIOR_GRID.log_ridge_scale).logpdf(B)
    P = np.exp(G - G.max())
    P /= P.sum()
    p_grid = P.sum(1)
    mean = (P.sum(0) * lr).sum()
    sd = np.sqrt((P.sum(0) * lr**2).sum() - mean**2)
    assert np.sort(p_grid)[-2] > 0.2  # the posterior really is spread over widths

    s = mcmc.get_samples()
    w, lg = np.asarray(s["grid_probs"], np.float64), np.asarray(s["log_ridge"])
    # Rao-Blackwellised: E[g-indicator], E[log gamma_g], E[(log gamma_g)^2].
    np.testing.assert_allclose(w.mean(0), p_grid, atol=0.03)
    nuts_mean = float(np.mean(s["log_ridge_avg"]))
    nuts_sd = np.sqrt(np.mean(np.sum(w * lg**2, axis=1)) - nuts_mean**2)
    np.testing.assert_allclose(np.mean(np.sum(w * lg, 1)), nuts_mean, rtol=1e-5)
    assert abs(nuts_mean - mean) < 0.1 * sd
    assert nuts_sd == pytest.approx(sd, rel=0.1)
    # The same posterior from the exact log joint on the ridge grid (spectra path).
    lj = np.asarray(kde_grid_log_joint(grid_posterior[2], lr, PRIOR_GRID),
                    np.float64)
    Q = np.exp(lj - lj.max())
    # float32: log densities near gamma = 1e-4 carry ~3e-3 absolute round-off.
    np.testing.assert_allclose(Q.sum(1) / Q.sum(), p_grid, atol=1e-6 if X64 else 2e-3)


def test_grid_inference_data(grid_posterior):
    mcmc = grid_posterior[3]
    idata = to_inference_data(mcmc, coords={"sigma": GRID}, dims={
        k: ["sigma"] for k in ("log_ridge_std", "log_ridge", "ridge", "grid_probs")})
    assert idata.posterior["grid_probs"].dims == ("chain", "draw", "sigma")
    np.testing.assert_allclose(idata.posterior["grid_probs"].sum("sigma"), 1.0,
                               rtol=1e-5)
    report = convergence_report(idata, ["log_ridge_std", "log_ridge_avg"])
    assert report.max_rhat < 1.02 and report.divergences == 0


def test_grid_bma_equals_average_of_single_settings(rng):
    X, Y, D2, T = _problem(rng)
    Z = rng.uniform(-1, 1, size=(7, 1))
    D2t = euclidean_distances(Z, X, squared=True)
    spectra = kde_spectra(D2, T, GRID)
    K_test = np.exp(-D2t[None] / (2 * GRID[:, None, None] ** 2))
    ridges = np.array([[1e-3] * 6, [0.1] * 6])
    ridges[1, 4] = 2e-2
    w = np.zeros((2, GRID.size))
    w[0, 1], w[1, 1], w[1, 4] = 1.0, 0.25, 0.75
    got = kde_grid_bma_features(spectra, K_test, T, ridges, w)

    def single(s, r):
        return np.asarray(kde_bma_features(jnp.asarray(D2), jnp.asarray(D2t),
                                           jnp.asarray(T), jnp.asarray([s]),
                                           jnp.asarray([r])))

    ref = 0.5 * single(GRID[1], 1e-3) + 0.5 * (
        0.25 * single(GRID[1], 0.1) + 0.75 * single(GRID[4], 2e-2))
    np.testing.assert_allclose(got, ref, atol=1e-8 if X64 else 2e-4)
    one = kde_grid_bma_features(spectra, K_test, T, [1e-3], np.eye(6)[[1]])
    np.testing.assert_allclose(one, single(GRID[1], 1e-3), atol=1e-8 if X64 else 2e-4)


def test_kde_spectra_does_not_recompile(rng):

    _, _, D2, T = _problem(rng)
    kde_spectra(D2, T, GRID)
    with count_compilations() as compiles:
        again = kde_spectra(D2 * 1.5, T * 2.0, GRID * 0.5)
    assert compiles.count == 0
    assert np.all(np.isfinite(np.asarray(again.eigenvalues)))


def test_n_components_for_variance():
    ev = np.array([5.0, 3.0, 1.5, 0.5])  # cumulative 0.5, 0.8, 0.95, 1.0
    assert [n_components_for_variance(ev, f) for f in (0.5, 0.51, 0.95, 0.96, 1.0)] \
        == [1, 2, 3, 4, 4]
    with pytest.raises(ValueError, match="fraction"):
        n_components_for_variance(ev, 0.0)


def test_bad_input_is_refused_before_sampling(rng):
    _, _, D2, T = _problem(rng)
    bad = D2.copy()
    bad[0, 1] = np.nan
    cases = [
        ((bad, T, GRID), "D2_or_grams"),
        ((D2, np.full_like(T, np.nan), GRID), "T contains NaN"),
        ((D2[:, :5], T, GRID), "D2_or_grams"),
        ((D2, T[:5], GRID), "T must have shape"),
        ((np.zeros((0, 0)), T, GRID), "D2_or_grams"),
        ((D2, np.zeros((30, 0)), GRID), "p >= 1"),
        ((D2, T, [0.5, 0.0]), "sigmas"),
        ((D2, T, [0.5, -1.0]), "sigmas"),
        ((D2, T, []), "sigmas"),
        ((np.zeros((2, 30, 30)), T, GRID), "one entry per Gram"),
        ((D2[:2, :2], T[:2], GRID), "at least 3"),
        ((D2 - 1.0, T, GRID), "non-negative"),
        ((D2 + np.triu(D2), T, GRID), "symmetric"),
        ((D2, np.c_[T, np.zeros(30)], GRID), "all-zero columns"),
    ]
    for args, match in cases:
        with pytest.raises(ValueError, match=match):
            kde_spectra(*args)
    spectra = kde_spectra(D2, T, GRID)
    key = jax.random.key(0)
    with pytest.raises(ValueError, match="likelihood"):
        run_nuts(key, bayesian_kde_grid_model, spectra, None, "wishart",
                 num_warmup=1, num_samples=1)
    with pytest.raises(ValueError, match="grid_logits"):
        run_nuts(key, bayesian_kde_grid_model, spectra,
                 BayesianKDEGridPrior(grid_logits=np.zeros(3)), num_warmup=1,
                 num_samples=1)
    with pytest.raises(TypeError, match="KDESpectra|spectra"):
        run_nuts(key, bayesian_kde_grid_model, (D2, T), num_warmup=1, num_samples=1)
    # The continuous-width model refuses the same data before sampling.
    for args, match in [((jnp.asarray(bad), jnp.asarray(T)), "D2 contains NaN"),
                        ((jnp.asarray(D2), jnp.asarray(T[:, :0])), "p >= 1"),
                        ((jnp.asarray(D2), jnp.asarray(T[:7])), "T must have shape")]:
        with pytest.raises(ValueError, match=match):
            run_nuts(key, bayesian_kde_model, *args, num_warmup=1, num_samples=1,
                     progress_bar=False)
    K_test = np.ones((GRID.size, 4, 30))
    with pytest.raises(ValueError, match="ridges"):
        kde_grid_bma_features(spectra, K_test, T, [0.0], np.eye(6)[[0]])
    with pytest.raises(ValueError, match="grid_weights"):
        kde_grid_bma_features(spectra, K_test, T, [1.0], np.ones((1, 5)))
    with pytest.raises(ValueError, match="K_test"):
        kde_grid_bma_features(spectra, K_test[:, :, :4], T, [1.0], np.eye(6)[[0]])
    with pytest.raises(ValueError, match="ridge must"):
        kde_grid_loglik(spectra, np.ones(4))
