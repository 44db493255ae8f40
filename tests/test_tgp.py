"""Twin GPs: energies against NumPy transcriptions and the explicit HSIC trace,
gradients against finite differences, the minimiser against SciPy, local = global
models, transforms, baselines and bad input."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.optimize
from sklearn.exceptions import NotFittedError
from sklearn.kernel_ridge import KernelRidge

from bayeskde.kernels.transforms import PolynomialKernelTransform
from bayeskde.tgp import (
    OutputKernel,
    TwinGP,
    _hsic_from_kernels,
    _predict_global,
    _whiten,
    gp_predict,
    tgp_hsic_energy,
    tgp_hsic_state,
    tgp_kl_energy,
    tgp_kl_state,
    tgp_minimize,
    weighted_knn_predict,
)
from tests.conftest import X64

RTOL = 1e-8 if X64 else 2e-3


def _rbf(A, B, g):
    return np.exp(-g * ((A[:, None, :] - B[None, :, :]) ** 2).sum(-1))


@pytest.fixture
def problem(rng):
    X = rng.uniform(-1, 1, size=(25, 2))
    Y = np.c_[np.sin(2 * X[:, 0]), X[:, 0] * X[:, 1]]
    x = rng.uniform(-1, 1, size=2)
    return X, Y, x, 1.5, 2.0, 1e-2


def _kl_numpy(y, X, Y, x, gx, gy, ridge):
    K = _rbf(X, X, gx) + ridge * np.eye(len(X))
    G = _rbf(Y, Y, gy) + ridge * np.eye(len(Y))
    kx = _rbf(X, x[None], gx)[:, 0]
    u = np.linalg.solve(K, kx)
    eta = 1 + ridge - kx @ u
    ky = _rbf(Y, y[None], gy)[:, 0]
    schur = 1 + ridge - ky @ np.linalg.solve(G, ky)
    return 1 + ridge - 2 * u @ ky - eta * np.log(schur)


def _kl_state(X, Y, x, gx, gy, ridge):
    n = len(X)
    K = jnp.asarray(_rbf(X, X, gx) + ridge * np.eye(n))
    G = jnp.asarray(_rbf(Y, Y, gy) + ridge * np.eye(n))
    kx = jnp.asarray(_rbf(X, x[None], gx)[:, 0])
    return tgp_kl_state(
        jnp.linalg.cholesky(K), _whiten(G)[0], jnp.asarray(Y), kx,
        jnp.asarray(1.0), jnp.asarray(ridge),
    )


def _hsic_state(X, Y, x, gx):
    kx = jnp.asarray(_rbf(X, x[None], gx)[:, 0])
    return tgp_hsic_state(
        jnp.asarray(_rbf(X, X, gx)), jnp.asarray(Y), kx, jnp.asarray(1.0)
    )


def test_kl_energy_matches_numpy_transcription(problem, rng):
    X, Y, x, gx, gy, ridge = problem
    state = _kl_state(X, Y, x, gx, gy, ridge)
    out = OutputKernel(jnp.asarray(gy))
    for y in rng.uniform(-1, 1, size=(4, 2)):
        np.testing.assert_allclose(
            tgp_kl_energy(jnp.asarray(y), state, out),
            _kl_numpy(y, X, Y, x, gx, gy, ridge), rtol=RTOL, atol=RTOL,
        )


@pytest.mark.parametrize("criterion", ["kl", "hsic"])
def test_gradient_matches_central_differences(problem, rng, criterion):
    X, Y, x, gx, gy, ridge = problem
    out = OutputKernel(jnp.asarray(gy))
    if criterion == "kl":
        state, fn = _kl_state(X, Y, x, gx, gy, ridge), tgp_kl_energy
    else:
        state, fn = _hsic_state(X, Y, x, gx), tgp_hsic_energy
    y = rng.uniform(-0.5, 0.5, size=2)
    grad = jax.grad(fn)(jnp.asarray(y), state, out)
    h = 1e-5 if X64 else 1e-2
    fd = [
        (float(fn(jnp.asarray(y + h * e), state, out))
         - float(fn(jnp.asarray(y - h * e), state, out))) / (2 * h)
        for e in np.eye(2)
    ]
    np.testing.assert_allclose(grad, fd, rtol=1e-6 if X64 else 2e-2, atol=1e-8)


def test_hsic_reduction_equals_explicit_trace(problem, rng):
    # tr(H K~ H G~) = const + 2 c^T k_y + M_nn k(y,y): checked with a linear output
    # kernel, whose k(y, y) = ||y||^2 is not constant, and with the RBF.
    X, Y, x, gx, _, _ = problem
    n = len(X) + 1
    H = np.eye(n) - 1.0 / n
    Xa = np.vstack([X, x])
    Ka = _rbf(Xa, Xa, gx)
    state = _hsic_state(X, Y, x, gx)

    def trace(y, kern):
        Ya = np.vstack([Y, y])
        return np.trace(H @ Ka @ H @ kern(Ya, Ya))

    for kern in (lambda A, B: A @ B.T, lambda A, B: _rbf(A, B, 2.0)):
        ys = rng.uniform(-1, 1, size=(3, 2))
        red = []
        for y in ys:
            k_y = jnp.asarray(kern(Y, y[None])[:, 0])
            k_yy = jnp.asarray(kern(y[None], y[None])[0, 0])
            red.append(float(_hsic_from_kernels(k_y, k_yy, state)))
        full = [-trace(y, kern) for y in ys]
        np.testing.assert_allclose(
            np.diff(red), np.diff(full), rtol=RTOL, atol=10 * RTOL
        )


def test_minimiser_is_stationary_and_agrees_with_scipy(problem, rng):
    X, Y, x, gx, gy, ridge = problem
    out = OutputKernel(jnp.asarray(gy))
    for x_t in rng.uniform(-0.8, 0.8, size=(3, 2)):
        state = _kl_state(X, Y, x_t, gx, gy, ridge)
        y0 = jnp.asarray(Y.mean(0))
        sol = tgp_minimize(lambda y, s: tgp_kl_energy(y, s, out), y0, state)
        g = jax.grad(tgp_kl_energy)(sol.y, state, out)
        assert float(jnp.max(jnp.abs(g))) < (1e-5 if X64 else 5e-3)
        ref = scipy.optimize.minimize(
            _kl_numpy, np.asarray(Y.mean(0)), args=(X, Y, x_t, gx, gy, ridge),
            method="BFGS", options={"gtol": 1e-9},
        )
        np.testing.assert_allclose(sol.y, ref.x, atol=1e-5 if X64 else 5e-3)


@pytest.mark.parametrize("criterion", ["kl", "hsic"])
def test_local_model_with_all_neighbours_equals_global(problem, rng, criterion):
    X, Y, _, gx, gy, ridge = problem
    Z = rng.uniform(-0.8, 0.8, size=(6, 2))
    glob = TwinGP(criterion, gamma_x=gx, gamma_y=gy, ridge=ridge).fit(X, Y)
    loc = TwinGP(criterion, gamma_x=gx, gamma_y=gy, ridge=ridge,
                 n_neighbors=len(X)).fit(X, Y)
    np.testing.assert_allclose(
        loc.predict(Z), glob.predict(Z), atol=1e-6 if X64 else 2e-3
    )


def test_predict_compiles_once_per_shape(problem, rng):
    X, Y, _, gx, gy, ridge = problem
    tgp = TwinGP(gamma_x=gx, gamma_y=gy, ridge=ridge).fit(X, Y)
    tgp.predict(rng.uniform(size=(5, 2)))
    size = _predict_global._cache_size()
    tgp.predict(rng.uniform(size=(5, 2)))
    assert _predict_global._cache_size() == size


def test_one_dimensional_outputs_and_sshape_fit():
    t = np.linspace(0, 1, 80)
    x = t + 0.3 * np.sin(2 * np.pi * t)
    tgp = TwinGP(gamma_x=2.0, gamma_y=20.0, ridge=1e-3).fit(x, t)
    pred = tgp.predict(x[:10])
    assert pred.shape == (10,)
    # Outside the multi-valued band (x < 0.3) the inverse is unique.
    np.testing.assert_allclose(pred[:5], t[:5], atol=0.05)


def test_degree_one_transform_is_no_transform(problem, rng):
    X, Y, _, gx, gy, ridge = problem
    Z = rng.uniform(-0.8, 0.8, size=(5, 2))
    tr = PolynomialKernelTransform(degree_x=1, degree_y=1)
    for crit in ("kl", "hsic"):
        a = TwinGP(crit, gamma_x=gx, gamma_y=gy, ridge=ridge).fit(X, Y).predict(Z)
        b = TwinGP(crit, gamma_x=gx, gamma_y=gy, ridge=ridge, transform=tr).fit(
            X, Y).predict(Z)
        np.testing.assert_allclose(b, a, atol=1e-7 if X64 else 2e-3)


def test_transformed_energy_uses_transformed_kernels(problem):
    X, Y, _, gx, gy, ridge = problem
    tgp = TwinGP(gamma_x=gx, gamma_y=gy, ridge=ridge,
                 transform=PolynomialKernelTransform(degree_x=2, degree_y=3)).fit(X, Y)
    tr = tgp.transform_
    G = tr.transform_output(_rbf(Y, Y, gy))
    np.testing.assert_allclose(tgp.model_.K_out, G, rtol=RTOL, atol=RTOL)


def test_gp_predict_is_kernel_ridge(problem, rng):
    X, Y, _, gx, _, ridge = problem
    Z = rng.uniform(-1, 1, size=(4, 2))
    ref = KernelRidge(alpha=ridge, kernel="rbf", gamma=gx).fit(X, Y).predict(Z)
    np.testing.assert_allclose(gp_predict(X, Y, Z, gamma=gx, ridge=ridge), ref,
                               rtol=1e-6 if X64 else 1e-2, atol=1e-8 if X64 else 1e-3)


def test_weighted_knn_is_inverse_square_distance_vote(problem, rng):
    X, Y, _, _, _, _ = problem
    Z = rng.uniform(-1, 1, size=(4, 2))
    d2 = ((Z[:, None] - X[None]) ** 2).sum(-1)
    idx = np.argsort(d2, axis=1)[:, :3]
    w = 1 / np.take_along_axis(d2, idx, 1)
    ref = np.einsum("tk,tkd->td", w / w.sum(1, keepdims=True), Y[idx])
    np.testing.assert_allclose(weighted_knn_predict(X, Y, Z, n_neighbors=3), ref,
                               rtol=RTOL, atol=RTOL)
    np.testing.assert_allclose(weighted_knn_predict(X, Y, X[:3]), Y[:3], atol=RTOL)


def test_bad_input(problem):
    X, Y, _, _, _, _ = problem
    with pytest.raises(ValueError, match="criterion"):
        TwinGP("l2").fit(X, Y)
    with pytest.raises(ValueError, match="ridge"):
        TwinGP(ridge=-1.0).fit(X, Y)
    with pytest.raises(ValueError, match="gamma_x"):
        TwinGP(gamma_x=0.0).fit(X, Y)
    with pytest.raises(ValueError, match="n_neighbors"):
        TwinGP(n_neighbors=len(X) + 1).fit(X, Y)
    with pytest.raises(ValueError, match="NaN"):
        TwinGP().fit(np.where(X > 0.9, np.nan, X), Y)
    with pytest.raises(ValueError, match="same number"):
        TwinGP().fit(X, Y[:-1])
    with pytest.raises(NotFittedError):
        TwinGP().predict(X)
    tgp = TwinGP().fit(X, Y)
    with pytest.raises(ValueError, match="features"):
        tgp.predict(X[:, :1])
    with pytest.raises(ValueError, match="NaN"):
        tgp.predict(np.full((2, 2), np.nan))
    with pytest.raises(ValueError, match="n_neighbors"):
        weighted_knn_predict(X, Y, X, n_neighbors=100)
