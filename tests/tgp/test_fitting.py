"""The Twin GP fit as one compiled program (``bayeskde.tgp.fitting``) against
NumPy: the RBF Grams, the Cholesky factor of K_X + ridge I, the truncated
whitening of K_Y + ridge I (eigenvalues and the kept-subspace inverse from
``numpy.linalg.eigh``) and the start's ridge regression; the jitter fallback,
non-finite input, and one compiled program per shape."""

import warnings

import jax.numpy as jnp
import numpy as np
import pytest

from bayeskde import TwinGP
from bayeskde.tgp import linear_init_weights, truncated_whitening
from bayeskde.tgp.fitting import fit_rbf
from tests.helpers import X64, count_compilations

RTOL = 1e-9 if X64 else 2e-4


def _rbf(A, B, gamma):
    return np.exp(-gamma * ((A[:, None, :] - B[None]) ** 2).sum(-1))


@pytest.mark.parametrize("kl", [True, False])
def test_fit_rbf_matches_numpy(rng, kl):
    X = rng.normal(size=(60, 2))
    Y = np.sin(X @ np.array([[1.0, 0.3], [-0.5, 1.0]]))
    gx, gy, ridge = 0.7, 3.0, 1e-3
    fit = fit_rbf(jnp.asarray(X), jnp.asarray(Y), gx, gy, ridge, kl, None)
    K, G = _rbf(X, X, gx), _rbf(Y, Y, gy)
    np.testing.assert_allclose(fit.K, K, rtol=RTOL, atol=RTOL)
    np.testing.assert_allclose(fit.G, G, rtol=RTOL, atol=RTOL)
    np.testing.assert_allclose(fit.weights, linear_init_weights(X, Y),
                               rtol=RTOL, atol=RTOL)
    if not kl:
        assert fit.chol_in is None and fit.whitening is None
        return
    L = np.asarray(fit.chol_in, np.float64)
    np.testing.assert_allclose(L @ L.T, K + ridge * np.eye(60), rtol=0,
                               atol=1e-12 if X64 else 2e-5)
    assert np.allclose(L, np.tril(L))
    # The whitening is the standalone function's (same dtype-aware threshold),
    # and on its kept subspace W W^T inverts G + ridge I (NumPy's eigh).
    ref = truncated_whitening(jnp.asarray(G, fit.K.dtype), ridge)
    assert fit.whitening.rank == ref.rank and fit.whitening.clipped == ref.clipped
    lam, V = np.linalg.eigh(G + ridge * np.eye(60))
    top = V[:, -fit.whitening.rank:]
    W = np.asarray(fit.whitening.whiten, np.float64)
    inv_top = top @ np.diag(1.0 / lam[-fit.whitening.rank:]) @ top.T
    np.testing.assert_allclose(W @ W.T, inv_top, rtol=0,
                               atol=1e-7 * np.abs(inv_top).max() if X64 else
                               2e-2 * np.abs(inv_top).max())


def test_fit_rbf_jitter_fallback(monkeypatch):
    # Identical inputs: K is the all-ones matrix, so K + 1e-30 I is singular in
    # either precision and the factor needs the jitter policy's shift. The notice
    # is once per process, so another test in this worker may have used it up.
    monkeypatch.setattr("bayeskde._validation._WARNED", set())
    X = jnp.zeros((40, 1))
    Y = jnp.linspace(0.0, 1.0, 40)[:, None]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        fit = fit_rbf(X, Y, 1.0, 1.0, 1e-30, True, None)
    assert any("ill-conditioned" in str(w.message) for w in caught)
    L = np.asarray(fit.chol_in, np.float64)
    assert np.all(np.isfinite(L))
    shift = np.diag(L @ L.T - np.ones((40, 40)))
    assert np.all(shift > 0) and np.ptp(shift) < 1e-3 * shift.max() + 1e-6


@pytest.mark.parametrize("kl", [True, False])
def test_fit_rbf_rejects_non_finite_gram(kl):
    # (The estimator rejects NaN data and non-finite widths before this point;
    # an infinite width makes exp(-inf * 0) = NaN on the Gram's diagonal.)
    X = jnp.asarray(np.array([[0.0], [1.0], [2.0]]))
    with pytest.raises(ValueError, match="NaN or inf"):
        fit_rbf(X, X, np.inf, 1.0, 1e-3, kl, None)
    with pytest.raises(ValueError, match="NaN or inf"):
        fit_rbf(X, X, 1.0, np.inf, 1e-3, kl, None)


def test_twingp_fit_compiles_once_per_shape(rng):
    X = rng.normal(size=(50, 1))
    Y = np.sin(3 * X)
    TwinGP("kl", gamma_x=1.0, gamma_y=2.0).fit(X, Y)
    with count_compilations() as c:
        TwinGP("kl", gamma_x=0.5, gamma_y=4.0, ridge=1e-3).fit(X + 1.0, Y)
    assert c.count == 0
