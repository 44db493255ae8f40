"""The tempered Twin GP predictive's modes as an estimator method: the same
answer as the function, masses against a NumPy transcription of eq. (14) on the
method's grid and against the continuous predictive on a fine grid, compile
counts and bad input."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from sklearn.exceptions import NotFittedError

from bayeskde.datasets import make_arm_pose, make_sshape
from bayeskde.tgp import (
    TwinGP,
    batch_energy_many,
    point_energy,
    tgp_energy_batch,
    tgp_grid_log_probs,
    tgp_modes,
)
from tests.helpers import X64, count_compilations

GX, GY, RIDGE, TAU = 20.0, 20.0, 1e-2, 0.05
X_TEST = np.array([0.45, 0.25, 0.55])  # three branches, one, three


@pytest.fixture(scope="module")
def sshape():
    """60 S-shape pairs, exact G^-1 (no truncated whitening) so that eq. (14)
    in NumPy is the same function."""
    d = make_sshape(jax.random.key(0), 60)
    tgp = TwinGP("kl", gamma_x=GX, gamma_y=GY, ridge=RIDGE, whiten_rtol=0.0)
    return tgp.fit(d.x_train, d.t_train)


def _rbf(A, B, g):
    return np.exp(-g * (A[:, None] - B[None, :]) ** 2)


def _kl_energy_numpy(tgp, x, y):
    """E_KL (Bo and Sminchisescu 2010, eq. 14) in float64 NumPy, ``(len(x),
    len(y))``, for 1-D inputs and outputs."""
    X = np.asarray(tgp.model_.X, float)[:, 0]
    Y = np.asarray(tgp.model_.Y, float)[:, 0]
    K = _rbf(X, X, GX) + RIDGE * np.eye(len(X))
    G = _rbf(Y, Y, GY) + RIDGE * np.eye(len(Y))
    kx, ky = _rbf(X, x, GX), _rbf(Y, y, GY)
    u = np.linalg.solve(K, kx)
    eta = 1 + RIDGE - np.sum(kx * u, axis=0)
    schur = 1 + RIDGE - np.sum(ky * np.linalg.solve(G, ky), axis=0)
    return 1 + RIDGE - 2 * u.T @ ky - eta[:, None] * np.log(schur)[None, :]


def _midpoints(tgp, n, margin=0.1):
    Y = np.asarray(tgp.model_.Y, float)[:, 0]
    lo, hi = Y.min(), Y.max()
    lo, hi = lo - margin * (hi - lo), hi + margin * (hi - lo)
    return lo + (np.arange(n) + 0.5) * (hi - lo) / n, (hi - lo) / n


def _region_masses(p, grid, modes, masses, tie=0.0):
    """Per test point, the mass of ``p`` (rows normalised) on the grid points
    nearest each distinct mode (the modes with mass > 0): ``(lower, upper)``,
    without and with the grid points whose distances to two modes differ by
    at most ``tie`` (such a point may go to either)."""
    lower, upper = np.zeros_like(masses), np.zeros_like(masses)
    for i in range(len(p)):
        dist = np.abs(grid[:, None] - modes[i][None, :])
        dist[:, masses[i] == 0] = np.inf
        nearest = dist <= dist.min(axis=1, keepdims=True) + tie
        sole = nearest & (nearest.sum(axis=1, keepdims=True) == 1)
        lower[i], upper[i] = p[i] @ sole, p[i] @ nearest
    return lower, upper


def _normalised(E, tau):
    a = -E / tau
    p = np.exp(a - a.max(axis=1, keepdims=True))
    return p / p.sum(axis=1, keepdims=True)


def _energy_gap(tgp, grid, E):
    """Half the spread over the grid of the method's energies (through the
    public batch functions) minus the NumPy ones ``E``, the worst test point:
    a constant shift of a test point's energies leaves its predictive
    unchanged, so the masses of any region differ by a factor within
    exp(+-2 gap / tau)."""
    batch = tgp_energy_batch(tgp, jnp.asarray(X_TEST[:, None]))
    Ys = np.broadcast_to(grid[:, None, None], (len(grid), len(X_TEST), 1))
    E_lib = np.asarray(batch_energy_many(batch, jnp.asarray(Ys, batch.a.dtype)),
                       float).T
    return np.max(np.ptp(E_lib - E, axis=1)) / 2


def test_method_is_the_function(sshape):
    """Given tau and with tau calibrated (both calls split with key(0))."""
    for tau in (TAU, None):
        got = sshape.predict_modes(X_TEST, 3, temperature=tau, n_grid=200)
        ref = tgp_modes(sshape, X_TEST, 3, temperature=tau, n_grid=200)
        assert got.temperature == ref.temperature
        np.testing.assert_array_equal(got.modes, ref.modes)
        np.testing.assert_array_equal(got.masses, ref.masses)


def test_method_is_the_function_on_the_laplace_path():
    """Outputs of dimension 3 (the arm's joint angles): BFGS minima with
    Laplace masses."""
    a = make_arm_pose(jax.random.key(1), 60, 2)
    tgp = TwinGP("kl", gamma_x=0.5, gamma_y=0.3, ridge=1e-3).fit(
        a.x_train, a.theta_train)
    got = tgp.predict_modes(a.x_test, 2, temperature=0.05, n_starts=3)
    ref = tgp_modes(tgp, a.x_test, 2, temperature=0.05, n_starts=3)
    assert got.modes.shape == (2, 2, 3)
    np.testing.assert_array_equal(got.modes, ref.modes)
    np.testing.assert_array_equal(got.masses, ref.masses)


def test_masses_are_the_numpy_predictive_on_the_grid(sshape):
    """Oracle: exp(-E / tau) with E from NumPy, normalised over the method's
    midpoint grid and summed over the grid points nearest each mode, within
    the factor exp(+-2 gap / tau) of :func:`_energy_gap` (float32: the Schur
    complement 1 + ridge - k_y^T G^-1 k_y of eq. (14) cancels to about the
    ridge, so the gap is far above float32's eps)."""
    res = sshape.predict_modes(X_TEST, 3, temperature=TAU, n_grid=400)
    grid, h = _midpoints(sshape, 400)
    E = _kl_energy_numpy(sshape, X_TEST, grid)
    # The modes are grid points, so a grid point's distances to two modes are
    # equal or differ by at least h; equal ones round either way (float32).
    lower, upper = _region_masses(_normalised(E, TAU), grid, res.modes[..., 0],
                                  res.masses, tie=h / 2)
    gap = _energy_gap(sshape, grid, E)
    assert gap < (1e-9 if X64 else 1e-3) * np.ptp(E)
    rtol = np.expm1(2 * gap / TAU)
    assert np.all(res.masses >= lower * (1 - rtol) - 1e-12)
    assert np.all(res.masses <= upper * (1 + rtol) + 1e-12)
    np.testing.assert_allclose(res.masses.sum(axis=1), 1.0, rtol=1e-12)
    assert np.all(np.diff(res.masses, axis=1) <= 0)
    assert np.all(res.masses[0] > 0.01)  # x = 0.45: three branches


def test_masses_approximate_the_continuous_predictive(sshape):
    """Oracle: the integrals of the normalised density f over each mode's
    region, on a grid 20 times finer. Against them the method's masses err
    by (i) the energy gap on its grid (as above), (ii) at most one cell of
    width h at each region boundary, which its grid assigns whole, and (iii)
    the midpoint rule's h^2 / 24 int |f''|, twice (region and normaliser)."""
    n = 400
    res = sshape.predict_modes(X_TEST, 3, temperature=TAU, n_grid=n)
    grid, h = _midpoints(sshape, n)
    rtol = np.expm1(2 * _energy_gap(sshape, grid,
                                    _kl_energy_numpy(sshape, X_TEST, grid)) / TAU)
    fine, hf = _midpoints(sshape, 20 * n)
    p = _normalised(_kl_energy_numpy(sshape, X_TEST, fine), TAU)
    ref, _ = _region_masses(p, fine, res.modes[..., 0], res.masses)
    f = p / hf
    for i in range(len(X_TEST)):
        m = np.sort(res.modes[i, res.masses[i] > 0, 0])
        edges = (m[1:] + m[:-1]) / 2
        boundary = sum(h * f[i, np.abs(fine - b) <= h].max() for b in edges)
        curvature = 2 * h**2 / 24 * np.sum(np.abs(np.gradient(np.gradient(
            f[i], hf), hf))) * hf
        np.testing.assert_array_less(np.abs(res.masses[i] - ref[i]),
                                     boundary + curvature + rtol * res.masses[i]
                                     + 1e-12)


def test_second_call_does_not_compile(sshape):
    sshape.predict_modes(X_TEST, 2, temperature=TAU, n_grid=100)
    with count_compilations() as c:
        sshape.predict_modes(X_TEST + 0.01, 2, temperature=TAU, n_grid=100)
    assert c.count == 0


def test_bad_input(sshape):
    with pytest.raises(NotFittedError):
        TwinGP().predict_modes(X_TEST, 2, temperature=TAU)
    with pytest.raises(ValueError, match="NaN"):
        sshape.predict_modes(np.array([0.1, np.nan]), 2, temperature=TAU)
    with pytest.raises(ValueError, match="features"):
        sshape.predict_modes(np.ones((3, 2)), 2, temperature=TAU)
    with pytest.raises(TypeError):
        sshape.predict_modes(["a", "b"], 2, temperature=TAU)
    with pytest.raises(ValueError, match="k must be"):
        sshape.predict_modes(X_TEST, 0, temperature=TAU)
    with pytest.raises(ValueError, match="temperature"):
        sshape.predict_modes(X_TEST, 2, temperature=-1.0)
    for kw in (dict(n_grid=1), dict(n_starts=0), dict(margin=-0.1),
               dict(radius=0.0)):
        with pytest.raises(ValueError, match=next(iter(kw))):
            sshape.predict_modes(X_TEST, 2, temperature=TAU, **kw)
    d = make_sshape(jax.random.key(0), 60)
    local = TwinGP("kl", gamma_x=GX, gamma_y=GY, n_neighbors=10).fit(
        d.x_train, d.t_train)
    for tau in (TAU, None):  # refused before calibrating tau
        with pytest.raises(ValueError, match="global"):
            local.predict_modes(X_TEST, 2, temperature=tau)


def _imported_modules(path, module):
    """The bayeskde modules ``path`` (module name ``module``) imports, at module
    level or inside functions (``from pkg import name`` counts pkg.name when
    that is a module)."""
    import ast

    is_pkg = path.name == "__init__.py"
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = module.split(".")[: None if is_pkg else -1]
                parts = parts[: len(parts) - node.level + 1]
                base = ".".join(parts + ([base] if base else []))
            found.add(base)
            found.update(f"{base}.{a.name}" for a in node.names)
    return {m for m in found if m.split(".")[0] == "bayeskde"}


def test_core_reaches_neither_models_nor_learn():
    """bayeskde.tgp (the estimator's predict_modes included) imports nothing
    of the Bayesian layer, directly or through other modules, not even inside
    a function: the layer above imports it (an earlier predict_modes closed the
    cycle tgp -> learn.modes -> models.tgp -> tgp)."""
    from pathlib import Path

    import bayeskde

    root = Path(bayeskde.__file__).parent

    def source(module):
        rel = Path(*module.split(".")[1:])
        for path in (root / rel / "__init__.py", (root / rel).with_suffix(".py")):
            if path.is_file():
                return path
        return None  # a name imported from a package, not a module

    todo = [f"bayeskde.tgp.{p.stem}".removesuffix(".__init__")
            for p in (root / "tgp").glob("*.py")]
    seen = set(todo)
    while todo:
        module = todo.pop()
        path = source(module)
        for m in _imported_modules(path, module) - seen:
            if source(m) is not None:
                seen.add(m)
                todo.append(m)
    assert "bayeskde.tgp.modes" in seen and "bayeskde._validation" in seen
    assert not sorted(m for m in seen if m.startswith(
        ("bayeskde.learn", "bayeskde.models")))


# --- the function tgp_modes on a 150-pair S-shape and a five-joint arm ------

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
