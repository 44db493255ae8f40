import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import integrate, stats
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
    BayesianKDEPrior,
    bayesian_kde_model,
    kde_bma_features,
    scale_free_gp_logpdf,
)
from bayeskde.models.kde import _cov_chol
from tests.conftest import X64


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
