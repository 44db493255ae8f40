"""The reference GP-evidence KDE (bench/kde_evidence.py) on Nystroem spectra
(kde_spectra(solver="nystroem")), and the kept model's averaged predictor on them.

Oracles: the exact spectra path (all points as centres), the dense evidence of the
Nystroem Gram K~ = K_nM K_MM^+ K_Mn written out in NumPy float64, and the Nystroem
kernel ridge predictor K~_test (K~ + m gamma I)^-1 T solved by NumPy.
"""

import importlib.util
import os

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from numpyro.infer.util import log_density
from scipy.special import gammaln, logsumexp
from sklearn.metrics.pairwise import euclidean_distances

from bayeskde.lowrank.features import rel_floor
from bayeskde.models import (
    BayesianKDEGridPrior,
    kde_grid_bma_features,
    kde_spectra,
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
bayesian_kde_grid_model = kde_evidence.bayesian_kde_grid_model
kde_grid_log_joint = kde_evidence.kde_grid_log_joint
kde_grid_loglik = kde_evidence.kde_grid_loglik
_pseudo_prior = kde_evidence._pseudo_prior

GRID = np.array([0.4, 0.6, 0.9, 1.3, 2.0])
DTYPE = np.float64 if X64 else np.float32


def _problem(rng, m=60, noise=0.3, n_test=5):
    X = rng.uniform(-1, 1, size=(m + n_test, 3))
    T = np.c_[np.sin(2 * X[:, 0]) + X[:, 1] * X[:, 2], np.cos(2 * X[:, 1])]
    T = T[:m] + noise * rng.normal(size=(m, 2))
    D2 = euclidean_distances(X[:m], squared=True)
    D2t = euclidean_distances(X[m:], X[:m], squared=True)
    return D2, D2t, T - T.mean(0)


def _grams(D2):
    return np.exp(-D2[None] / (2 * GRID[:, None, None] ** 2))


def _nystroem(Kc, idx):
    """(Phi, K_MM^-1/2) in float64, eigenvalues of K_MM below the float floor of
    the test's dtype dropped (part of the approximation's definition)."""
    s, U = np.linalg.eigh(Kc[idx])
    keep = s > rel_floor(DTYPE, len(idx)) * s[-1]
    Wn = U[:, keep] / np.sqrt(s[keep])
    return Kc @ Wn, Wn


def _dense_loglik(K, T, ridge, likelihood):
    """log p(T | K + m ridge I), the evidences of bayeskde.models.kde's module
    docstring, by slogdet and a dense solve."""
    m, p = T.shape
    C = K + m * ridge * np.eye(m)
    logdet = np.linalg.slogdet(C)[1]
    q = np.sum(T * np.linalg.solve(C, T), axis=0)
    if likelihood == "scale_free":
        return np.sum(gammaln(m / 2) - m / 2 * np.log(2 * np.pi) - logdet / 2
                      - m / 2 * np.log(q / 2))
    n = m * p
    return (gammaln(n / 2) - n / 2 * np.log(2 * np.pi) - p * logdet / 2
            - n / 2 * np.log(q.sum() / 2))


def test_all_centres_equal_exact_spectra(rng):
    D2, D2t, T = _problem(rng)
    idx = rng.permutation(D2.shape[0])  # every point a centre, shuffled
    ex = kde_spectra(D2, T, GRID)
    ny = kde_spectra(D2[:, idx], T, GRID, solver="nystroem", centers=idx)
    assert ny.eigenvalues.shape == (GRID.size, idx.size)
    # Round-off of the squared Nystroem system grows as its condition number,
    # up to about 1 / (m ridge)^2 ~ 1e8 here: float64 differs from the exact
    # spectra by up to 3e-8 relative (under 1e-9 with XLA's default code
    # generation, 3e-8 with the suite's -O0), float32 by up to 2e-4.
    # two eigensolver routes (Nystroem with every centre vs eigh of the Gram)
    # on an ill-conditioned Gram: measured 1.02e-7 in float64
    rtol = 1e-6 if X64 else 2e-4
    for lik in LIKELIHOODS:
        for ridge in (1e-4 if X64 else 1e-2, 0.1, 3.0):
            np.testing.assert_allclose(kde_grid_loglik(ny, ridge, lik),
                                       kde_grid_loglik(ex, ridge, lik), rtol=rtol)
    lr = np.linspace(-4.0, 1.0, 6)
    np.testing.assert_allclose(kde_grid_log_joint(ny, lr), kde_grid_log_joint(ex, lr),
                               rtol=rtol)
    # BMA: the Nystroem path takes the test-by-centre Grams.
    K_test = _grams(D2t)
    ridges = np.array([1e-2, 0.3])
    w = np.array([[0.2, 0.8, 0.0, 0.0, 0.0], [0.0, 0.0, 0.5, 0.5, 0.0]])
    np.testing.assert_allclose(
        kde_grid_bma_features(ny, K_test[:, :, idx], T, ridges, w),
        kde_grid_bma_features(ex, K_test, T, ridges, w), atol=1e-8 if X64 else 2e-4)


def test_subset_evidence_equals_dense_nystroem_gram(rng):
    D2, D2t, T = _problem(rng)
    idx = rng.permutation(D2.shape[0])[:15]
    ny = kde_spectra(D2[:, idx], T, GRID, solver="nystroem", centers=idx)
    # float32 keeps about 4 digits of the evidence at m gamma = 0.6 (cond ~ 1e2).
    rtol = 1e-9 if X64 else 1e-3
    for lik in LIKELIHOODS:
        for ridge in (1e-2, 0.3):
            ref = [_dense_loglik(Phi @ Phi.T, T, ridge, lik) for Phi, _ in
                   (_nystroem(K[:, idx], idx) for K in _grams(D2))]
            np.testing.assert_allclose(kde_grid_loglik(ny, ridge, lik), ref, rtol=rtol)
    # BMA on one width: the Nystroem kernel ridge predictor K~_t (K~ + m g I)^-1 T.
    g, ridge = 2, 0.05
    Phi, Wn = _nystroem(_grams(D2)[g][:, idx], idx)
    K_test = _grams(D2t)[:, :, idx]
    Pt = K_test[g] @ Wn
    ref = Pt @ Phi.T @ np.linalg.solve(Phi @ Phi.T + 60 * ridge * np.eye(60), T)
    got = kde_grid_bma_features(ny, K_test, T, [ridge], np.eye(GRID.size)[[g]])
    np.testing.assert_allclose(got, ref, atol=1e-9 if X64 else 1e-4)


def test_subset_posterior_is_close_to_exact(rng):
    """Measured closeness of the posterior over (width, ridge) with M = m / 3."""
    D2, _, T = _problem(rng, m=150)
    idx = rng.permutation(150)[:50]
    lr = np.linspace(-10.0, 2.0, 121)
    post = []
    for spectra in (kde_spectra(D2, T, GRID), kde_spectra(
            D2[:, idx], T, GRID, solver="nystroem", centers=idx)):
        lj = np.asarray(kde_grid_log_joint(spectra, lr), np.float64)
        P = np.exp(lj - logsumexp(lj))
        post.append((P.sum(1), (P.sum(0) * lr).sum(), P))
    (p_ex, mean_ex, P), (p_ny, mean_ny, _) = post
    sd = np.sqrt((P.sum(0) * lr**2).sum() - mean_ex**2)
    np.testing.assert_allclose(p_ny, p_ex, atol=0.05)
    assert abs(mean_ny - mean_ex) < 0.25 * sd


def test_grid_model_on_nystroem_spectra(rng):
    D2, _, T = _problem(rng)
    idx = rng.permutation(D2.shape[0])[:20]
    ny = kde_spectra(D2[:, idx], T, GRID, solver="nystroem", centers=idx)
    prior = BayesianKDEGridPrior()
    log_ridge = np.linspace(-5.0, -1.0, GRID.size)
    loc, scale = (np.asarray(a) for a in _pseudo_prior(ny, prior, "shared"))
    z0 = jnp.asarray((log_ridge - loc) / scale)

    @jax.jit
    def potential(z):
        return log_density(bayesian_kde_grid_model, (ny, prior, "shared"), {},
                           {"log_ridge_std": z})[0]

    per = np.asarray(kde_grid_loglik(ny, np.exp(log_ridge), "shared"), np.float64)
    lp = -0.5 * ((log_ridge - prior.log_ridge_loc) / prior.log_ridge_scale) ** 2 \
        - np.log(prior.log_ridge_scale * np.sqrt(2 * np.pi))
    psi = -0.5 * ((log_ridge - loc) / scale) ** 2 - np.log(scale * np.sqrt(2 * np.pi))
    ref = logsumexp(per - np.log(GRID.size) + lp - psi) + (psi + np.log(scale)).sum()
    assert float(potential(z0)) == pytest.approx(ref, rel=1e-9 if X64 else 1e-5)
    # What NUTS differentiates: the gradient matches a finite difference.
    grad = np.asarray(jax.grad(potential)(z0), np.float64)
    h = 1e-5 if X64 else 1e-2
    fd = [(float(potential(z0.at[i].add(h))) - float(potential(z0.at[i].add(-h))))
          / (2 * h) for i in range(GRID.size)]
    np.testing.assert_allclose(grad, fd, rtol=1e-5 if X64 else 2e-2,
                               atol=1e-6 if X64 else 2e-2)


def test_nystroem_spectra_do_not_recompile(rng):
    D2, _, T = _problem(rng)
    idx = np.arange(0, 60, 3)
    kde_spectra(D2[:, idx], T, GRID, solver="nystroem", centers=idx)
    with count_compilations() as compiles:
        other = idx + 1
        again = kde_spectra(1.5 * D2[:, other], 2.0 * T, 0.5 * GRID, solver="nystroem",
                            centers=other)
    assert compiles.count == 0
    assert np.all(np.isfinite(np.asarray(kde_grid_loglik(again, 0.1))))


def test_bad_nystroem_input(rng):
    D2, D2t, T = _problem(rng)
    idx = np.arange(10)
    cols = D2[:, idx]
    cases = [
        (dict(solver="svd"), cols, "solver must be"),
        (dict(solver="nystroem"), cols, "needs centers"),
        (dict(centers=idx), D2, "only used with solver='nystroem'"),
        (dict(solver="nystroem", centers=idx[:5]), cols, "columns of the 5 centres"),
        (dict(solver="nystroem", centers=idx + 55), cols, r"distinct indices in \[0"),
        (dict(solver="nystroem", centers=np.r_[idx[:9], 0]), cols, "distinct"),
        (dict(solver="nystroem", centers=idx), np.zeros((0, 10)), "to the centres"),
        (dict(solver="nystroem", centers=idx), D2[:, 1:11], "symmetric"),
        (dict(solver="nystroem", centers=idx), cols - 1.0, "non-negative"),
        (dict(solver="nystroem", centers=idx), np.where(cols > 1, np.nan, cols),
         "D2_or_grams"),
    ]
    for kw, data, match in cases:
        with pytest.raises(ValueError, match=match):
            kde_spectra(data, T, GRID, **kw)
    with pytest.raises(ValueError, match="one entry per Gram"):
        kde_spectra(_grams(D2)[:3][:, :, idx], T, GRID, solver="nystroem", centers=idx)
    ny = kde_spectra(cols, T, GRID, solver="nystroem", centers=idx)
    with pytest.raises(ValueError, match=r"test-by-centre.*\(5, n_test, 10\)"):
        kde_grid_bma_features(ny, _grams(D2t), T, [0.1], np.eye(GRID.size)[[0]])
