"""The BFGS minimiser's dtype-aware stopping (float32 stops where float64
does), and the HSIC energy and its minimiser for multi-output targets against a
brute-force evaluation of eq. (19)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from bayeskde.tgp import TwinGP, point_energy, tgp_energy_batch
from tests.helpers import EPS, X64


def _fit_predict(dtype_x64, criterion):
    rng = np.random.default_rng(3)
    X = rng.uniform(-2, 2, size=(200, 1))
    Y = np.tanh(X) + 0.05 * rng.standard_normal((200, 1))
    Z = np.linspace(-1.8, 1.8, 64)[:, None]
    with jax.enable_x64(dtype_x64):
        tgp = TwinGP(criterion, gamma_x=2.0, gamma_y=20.0, ridge=1e-4, max_iter=100)
        sol = jax.tree.map(np.asarray, tgp.fit(X, Y).solve(Z))
        pred = sol.y
    return pred, sol


@pytest.fixture(scope="module", params=["kl", "hsic"])
def both(request):
    return _fit_predict(False, request.param), _fit_predict(True, request.param)


def test_float32_iterations_within_twice_float64(both):
    (p32, s32), (p64, s64) = both
    assert p32.dtype == np.float32 and p64.dtype == np.float64
    # float32 stops at its round-off floor (status 2) instead of max_iter.
    assert not np.any(s32.status == 1) and not np.any(s64.status == 1)
    assert s32.n_iter.mean() <= 2 * s64.n_iter.mean()
    assert s32.n_iter.max() <= 2 * s64.n_iter.max()


def test_float32_answers_close_to_float64(both):
    (p32, _), (p64, _) = both
    # sqrt(eps_32) ~ 3.5e-4: the minimiser of an energy known to eps is known
    # to about sqrt(eps) relative to the output scale (here 1).
    np.testing.assert_allclose(p32, p64, atol=2e-3)


# ------------------------------------------------------------------ HSIC, d_y > 1
# Brute force for the HSIC criterion (Bo and Sminchisescu 2010, eq. (19)) with
# multi-output targets: the energy is -tr(H K~ H G~) up to a constant, evaluated
# literally in NumPy float64 (the augmented Grams built in full for every
# candidate y), and the library's minimiser is the argmin of that literal
# energy on a dense grid of 2-D outputs.

GX, GY = 8.0, 6.0


def _rbf(A, B, gamma):
    return np.exp(-gamma * ((A[:, None, :] - B[None, :, :]) ** 2).sum(-1))


def _two_output_problem():
    # A smooth one-to-one map of 2-D outputs to 2-D inputs, so that every test
    # input has one clear HSIC minimum (no tie between branches).
    rng = np.random.default_rng(11)
    Y = rng.uniform(-1.0, 1.0, size=(80, 2))
    X = np.stack([Y[:, 0] + 0.3 * np.sin(2.0 * Y[:, 1]),
                  Y[:, 1] + 0.2 * Y[:, 0] ** 2], axis=1)
    return X, Y


def _literal_energies(X, Y, x, ys, gx=GX, gy=GY):
    """-tr(H K_{X+x} H G_{Y+y}) for every row y of ``ys``, NumPy float64, the
    (N + 1) x (N + 1) output Gram built in full for each y."""
    n = len(X) + 1
    H = np.eye(n) - 1.0 / n
    Xa = np.vstack([X, x[None]])
    M = H @ _rbf(Xa, Xa, gx) @ H
    out = np.empty(len(ys))
    for i0 in range(0, len(ys), 500):
        chunk = ys[i0:i0 + 500]
        Ya = np.concatenate(
            [np.broadcast_to(Y, (len(chunk), *Y.shape)), chunk[:, None, :]], axis=1)
        G = np.exp(-gy * ((Ya[:, :, None, :] - Ya[:, None, :, :]) ** 2).sum(-1))
        out[i0:i0 + len(chunk)] = -np.einsum("ij,bij->b", M, G)
    return out


def _library_energies(tgp, x, ys):
    batch = tgp_energy_batch(tgp, jnp.asarray(x[None], tgp.model_.X.dtype))
    state = (batch.a[0], batch.b[0])
    energy = jax.jit(jax.vmap(lambda y: point_energy(y, state, batch)))
    return np.asarray(energy(jnp.asarray(ys, tgp.model_.X.dtype)), np.float64)


@pytest.fixture(scope="module")
def hsic_2d():
    X, Y = _two_output_problem()
    tgp = TwinGP("hsic", gamma_x=GX, gamma_y=GY, ridge=1e-3).fit(X, Y)
    return X, Y, tgp


def test_hsic_energy_equals_the_literal_trace_on_a_2d_grid(hsic_2d):
    X, Y, tgp = hsic_2d
    g = np.linspace(-1.2, 1.2, 41)
    ys = np.stack(np.meshgrid(g, g, indexing="ij"), -1).reshape(-1, 2)
    for x in (X[3], np.array([0.1, -0.4]), np.array([-0.7, 0.6])):
        lit = _literal_energies(X, Y, x, ys)
        lib = _library_energies(tgp, x, ys)
        # Equal up to the y-independent constant <M_{1:N,1:N}, G>_F.
        diff = lib - lit
        scale = np.abs(lit).max()
        assert np.ptp(diff) <= 1e4 * EPS * scale, (np.ptp(diff), scale)


def test_hsic_energy_equals_the_literal_trace_with_three_outputs():
    rng = np.random.default_rng(12)
    Y = rng.uniform(-1.0, 1.0, size=(50, 3))
    X = np.stack([Y[:, 0] + 0.2 * Y[:, 2], Y[:, 1] - 0.3 * Y[:, 0] * Y[:, 2]], 1)
    tgp = TwinGP("hsic", gamma_x=GX, gamma_y=GY, ridge=1e-3).fit(X, Y)
    ys = rng.uniform(-1.2, 1.2, size=(200, 3))
    x = np.array([0.2, -0.1])
    diff = _library_energies(tgp, x, ys) - _literal_energies(X, Y, x, ys)
    assert np.ptp(diff) <= 1e4 * EPS * np.abs(diff).max()


def test_hsic_gradient_matches_differences_of_the_literal_trace(hsic_2d):
    X, Y, tgp = hsic_2d
    x = np.array([0.1, -0.4])
    batch = tgp_energy_batch(tgp, jnp.asarray(x[None], tgp.model_.X.dtype))
    state = (batch.a[0], batch.b[0])
    h = 1e-5
    for y in (np.array([0.05, -0.45]), np.array([0.3, 0.2])):
        grad = np.asarray(jax.grad(lambda v: point_energy(v, state, batch))(
            jnp.asarray(y, tgp.model_.X.dtype)), np.float64)
        pts = np.concatenate([y + h * np.eye(2), y - h * np.eye(2)])
        E = _literal_energies(X, Y, x, pts)
        fd = (E[:2] - E[2:]) / (2 * h)
        np.testing.assert_allclose(grad, fd, rtol=1e-6 if X64 else 2e-3,
                                   atol=1e-6 * np.abs(fd).max())


def _grid(centre, half_width, step):
    g = np.arange(-half_width, half_width + step / 2, step)
    return centre + np.stack(np.meshgrid(g, g, indexing="ij"), -1).reshape(-1, 2)


# a dense grid of the literal energy (about 20 s); the KL energy's grid test stays in
# the default run
@pytest.mark.slow
def test_hsic_minimiser_is_the_grid_argmin_of_the_literal_energy(hsic_2d):
    X, Y, tgp = hsic_2d
    Z = np.array([[0.1, -0.4], [-0.6, 0.5], [0.5, 0.3], [-0.2, -0.8]])
    sol = tgp.solve(Z)
    assert np.all(np.asarray(sol.status) != 1)
    h = 0.004
    for x, y_lib in zip(Z, np.asarray(sol.y, np.float64), strict=True):
        # The literal energy on a grid of step 0.04 over the outputs' box (the
        # output kernel's length scale is 1 / sqrt(2 gamma_y) = 0.29), then of
        # step h = 0.004 over the two coarse cells around its argmin.
        coarse = _grid(np.zeros(2), 1.2, 0.04)
        E = _literal_energies(X, Y, x, coarse)
        fine = _grid(coarse[np.argmin(E)], 0.08, h)
        E = _literal_energies(X, Y, x, fine)
        y_grid = fine[np.argmin(E)]
        # The continuous minimiser lies within one grid step of the grid argmin
        # (the energy is smooth on the scale h), and is at least as low.
        np.testing.assert_array_less(np.abs(y_lib - y_grid), h * (1 + 1e-6))
        E_lib = _literal_energies(X, Y, x, y_lib[None])[0]
        assert E_lib <= E.min() + 1e4 * EPS * np.abs(E.min())
