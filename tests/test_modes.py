"""Top-k modes of discrete predictives."""

import numpy as np
import pytest

from bayeskde.learn import top_k_modes


def _bump(grid, c, w):
    return np.clip(1 - ((grid - c) / w) ** 2, 0, None)


def test_two_bumps_give_centres_and_masses():
    grid = np.linspace(0, 1, 1001)
    a, b = _bump(grid, 0.2, 0.05), _bump(grid, 0.7, 0.05)
    p = np.stack([0.3 * a / a.sum() + 0.7 * b / b.sum(),
                  0.9 * a / a.sum() + 0.1 * b / b.sum()])
    modes, masses = top_k_modes(grid, p, 2, radius=0.08)
    np.testing.assert_allclose(modes[:, :, 0], [[0.7, 0.2], [0.2, 0.7]], atol=1e-9)
    np.testing.assert_allclose(masses, [[0.7, 0.3], [0.9, 0.1]], atol=1e-9)


def test_single_mode_repeats_with_zero_mass():
    grid = np.linspace(0, 1, 501)
    p = _bump(grid, 0.4, 0.05)[None]
    modes, masses = top_k_modes(grid, p, 3, radius=0.1)
    np.testing.assert_allclose(modes[0, :, 0], 0.4, atol=1e-9)
    np.testing.assert_allclose(masses[0], [1.0, 0.0, 0.0], atol=1e-12)


def test_two_dimensional_weighted_points(rng):
    centres = np.array([[0.0, 0.0], [3.0, 1.0]])
    pts = np.concatenate([c + 0.1 * rng.normal(size=(200, 2)) for c in centres])
    w = np.r_[np.full(200, 0.25 / 200), np.full(200, 0.75 / 200)][None]
    modes, masses = top_k_modes(pts, w, 2, radius=0.5)
    np.testing.assert_allclose(masses[0], [0.75, 0.25], atol=1e-6)  # float32 sums
    # each mode is a point of its cluster (equal weights within a cluster)
    # (to float32 rounding of the support)
    assert np.min(np.abs(pts[200:] - modes[0, 0]).max(1)) < 1e-6
    assert np.min(np.abs(pts[:200] - modes[0, 1]).max(1)) < 1e-6


@pytest.mark.parametrize("kw", [dict(k=0, radius=0.1), dict(k=1, radius=0.0)])
def test_bad_arguments(kw):
    with pytest.raises(ValueError):
        top_k_modes(np.arange(3.0), np.ones((1, 3)), **kw)


def test_shape_mismatch():
    with pytest.raises(ValueError):
        top_k_modes(np.arange(3.0), np.ones((1, 4)), 1, 0.1)


# --- Twin GP modes (tgp_modes) -----------------------------------------------

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402

from bayeskde.datasets import make_arm_pose, make_sshape  # noqa: E402
from bayeskde.learn import tgp_grid_log_probs, tgp_modes  # noqa: E402
from bayeskde.models import point_energy, tgp_energy_batch  # noqa: E402
from bayeskde.tgp import TwinGP  # noqa: E402
from tests.helpers import X64  # noqa: E402


@pytest.fixture(scope="module")
def sshape_tgp():
    d = make_sshape(jax.random.key(0), 150)
    return TwinGP("kl", gamma_x=0.2, gamma_y=20.0, ridge=1e-4).fit(
        d.x_train[:, None], d.t_train[:, None])


def test_tgp_grid_modes_carry_the_grid_predictive_mass(sshape_tgp):
    """Masses: the tempered predictive on the same grid (the public
    tgp_grid_log_probs), summed over the grid points nearest each mode."""
    x = np.array([0.45, 0.25, 0.7])
    res = tgp_modes(sshape_tgp, x, 3, temperature=0.2, n_grid=300, margin=0.1)
    Y = np.asarray(sshape_tgp.model_.Y, float)
    lo, hi = Y.min() - 0.1 * np.ptp(Y), Y.max() + 0.1 * np.ptp(Y)
    grid = lo + (np.arange(300) + 0.5) * (hi - lo) / 300
    p = np.exp(tgp_grid_log_probs(sshape_tgp, x, grid, 0.2))
    for i in range(len(x)):
        near = np.argmin(np.abs(grid[:, None] - res.modes[i, :, 0][None]), axis=1)
        ref = [p[i, near == j].sum() for j in range(3)]
        distinct = res.masses[i] > 0
        np.testing.assert_allclose(res.masses[i, distinct],
                                   np.asarray(ref)[distinct], rtol=1e-6, atol=1e-9)
    assert np.all(np.diff(res.masses, axis=1) <= 0)


@pytest.fixture(scope="module")
def arm_tgp():
    a = make_arm_pose(jax.random.key(1), 120, 5)
    return a, TwinGP("kl", gamma_x=0.5, gamma_y=0.3, ridge=1e-3).fit(
        a.x_train, a.theta_train)


def test_tgp_laplace_modes_are_minima_with_laplace_masses(arm_tgp):
    a, tgp = arm_tgp
    tau = 0.05
    res = tgp_modes(tgp, a.x_test, 2, temperature=tau, n_starts=6)
    batch = tgp_energy_batch(tgp, jnp.asarray(a.x_test))
    dt = batch.outputs.dtype
    def E(y, a_i, b_i):
        return point_energy(jnp.asarray(y, dt), (a_i, b_i), batch)

    val, grad, hess = jax.jit(E), jax.jit(jax.grad(E)), jax.jit(jax.hessian(E))
    for i in range(len(a.x_test)):
        logw = []
        for j in range(2):
            y, st = res.modes[i, j], (batch.a[i], batch.b[i])
            g, H = np.asarray(grad(y, *st)), np.asarray(hess(y, *st))
            assert np.all(np.linalg.eigvalsh(H) > 0)  # a minimum
            # stationary to BFGS's tolerance: the Newton step is tiny
            assert np.max(np.abs(np.linalg.solve(H, g))) < (1e-5 if X64 else 1e-2)
            logw.append(-float(val(y, *st)) / tau
                        - 0.5 * np.linalg.slogdet(H / tau)[1])
        if res.masses[i, 1] > 1e-6:  # two distinct minima: the Laplace ratio
            np.testing.assert_allclose(np.log(res.masses[i, 0] / res.masses[i, 1]),
                                       logw[0] - logw[1], atol=1e-6 if X64 else 0.05)
    assert np.all(res.masses.sum(1) <= 1 + 1e-9)
    assert np.all(np.diff(res.masses, axis=1) <= 0)


def test_tgp_modes_bad_input(arm_tgp, sshape_tgp):
    a, tgp = arm_tgp
    with pytest.raises(ValueError, match="k"):
        tgp_modes(tgp, a.x_test, 0, temperature=0.1)
    with pytest.raises(ValueError, match="temperature"):
        tgp_modes(tgp, a.x_test, 2, temperature=-1.0)
    local = TwinGP("kl", gamma_x=0.5, gamma_y=0.3, n_neighbors=20).fit(
        a.x_train, a.theta_train)
    with pytest.raises(ValueError, match="global"):
        tgp_modes(local, a.x_test, 2, temperature=0.1)
    with pytest.raises(ValueError):
        tgp_modes(sshape_tgp, np.array([np.nan]), 2, temperature=0.1)
