"""The evidence: the exact GP marginal likelihood against scikit-learn's
GaussianProcessRegressor (oracle), its hand-written gradient against automatic
differentiation through the Cholesky factor, and the Laplace and importance
estimates of a structure's integrated evidence against 2-D quadrature."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.optimize
from sklearn.gaussian_process import GaussianProcessRegressor
from sklearn.gaussian_process import kernels as sk

from bayeskde.structure import (
    DEFAULT_TERMS,
    data_scales,
    gp_log_marginal_likelihood,
    importance_log_evidence,
    lag_table,
    laplace_log_evidence,
    log_joint,
    make_grammar,
    natural_params,
    parameter_prior,
    structure_gram,
    structure_kernel,
)
from tests.helpers import DTYPE, LOOSE, RTOL, X64, assert_close
from tests.structure.conftest import series

TERMS = ("LIN", "PER*SE", "RQ")


def _setup():
    t, y = series()
    g = make_grammar(TERMS, max_terms=3)
    sc = data_scales(t, y)
    tau = (t - sc.t_min) / sc.span
    z = (y - sc.y_mean) / sc.y_sd
    return g, sc, tau, z


@pytest.mark.filterwarnings("ignore:divide by zero:RuntimeWarning")  # DotProduct(0)
def test_marginal_likelihood_matches_sklearn():
    g, _, tau, z = _setup()
    # const, noise, LIN (var, offset 0), PER*SE (var, per scale, period, se
    # scale), RQ (var, scale, alpha)
    theta = np.array([0.4, 0.07, 0.9, 0.0, 0.6, 1.2, 0.3, 0.8, 0.5, 0.2, 1.5])
    kernel, noise = structure_kernel(g.terms, jnp.asarray(theta, DTYPE),
                                     jnp.ones(3, DTYPE))
    ours = gp_log_marginal_likelihood(kernel(jnp.asarray(tau, DTYPE)),
                                      jnp.asarray(noise), jnp.asarray(z, DTYPE))
    ref_kernel = (sk.ConstantKernel(0.4) + sk.ConstantKernel(0.9) * sk.DotProduct(0.0)
                  + sk.ConstantKernel(0.6) * sk.ExpSineSquared(1.2, 0.3) * sk.RBF(0.8)
                  + sk.ConstantKernel(0.5) * sk.RationalQuadratic(0.2, 1.5))
    gpr = GaussianProcessRegressor(ref_kernel, alpha=0.07, optimizer=None).fit(
        tau[:, None], z)
    # float32: the Cholesky of a Gram with condition ~1e3 loses ~3 digits
    assert_close(ours, gpr.log_marginal_likelihood_value_, rtol=RTOL if X64 else 1e-4)


def test_gradient_matches_autodiff_through_cholesky():
    """The hand-written VJP of the evidence in (K, noise, z) against automatic
    differentiation through the Cholesky factor."""
    g, _, tau, z = _setup()
    theta = jnp.asarray([0.4, 0.07, 0.9, 0.1, 0.6, 1.2, 0.3, 0.8, 0.5, 0.2, 1.5],
                        DTYPE)
    kernel, _ = structure_kernel(g.terms, theta, jnp.ones(3, DTYPE))
    K = kernel(jnp.asarray(tau, DTYPE))
    z = jnp.asarray(z, DTYPE)
    noise = jnp.asarray(0.07, DTYPE)

    def reference(K, noise, z):
        L = jnp.linalg.cholesky(K + noise * jnp.eye(z.shape[0], dtype=K.dtype))
        a = jax.scipy.linalg.solve_triangular(L, z, lower=True)
        return (-0.5 * a @ a - jnp.sum(jnp.log(jnp.diagonal(L)))
                - 0.5 * z.shape[0] * jnp.log(2.0 * jnp.pi))

    ours = jax.grad(gp_log_marginal_likelihood, argnums=(0, 1, 2))(K, noise, z)
    ref = jax.grad(reference, argnums=(0, 1, 2))(K, noise, z)
    # autodiff's dK is not symmetric (it reads the lower triangle); compare the
    # directional derivatives along symmetric directions, which both define
    sym = 0.5 * (ref[0] + ref[0].T)
    assert_close(ours[0], sym, rtol=LOOSE, atol=LOOSE)
    assert_close(ours[1], ref[1], rtol=LOOSE, atol=LOOSE)
    assert_close(ours[2], ref[2], rtol=LOOSE, atol=LOOSE)


def _const_structure():
    """The structure with no term (constant + noise): two active parameters."""
    g, sc, tau, z = _setup()
    prior = parameter_prior(g, sc)
    mask = jnp.zeros(3, DTYPE)
    loc, scale = jnp.asarray(prior.loc, DTYPE), jnp.asarray(prior.scale, DTYPE)
    positive = tuple(bool(b) for b in g.param_positive)

    def lj(u):
        return log_joint(u, mask, jnp.asarray(tau, DTYPE), jnp.asarray(z, DTYPE),
                         loc, scale, terms=g.terms, positive=positive, floor=0.0)

    return lj, np.asarray(prior.loc)


def _quadrature(lj, mode2, sd2):
    """log of the integral over the two active coordinates on a 201^2 grid of
    +-8 sd (the inactive ones integrate their normalised prior to one)."""
    a = np.linspace(mode2[0] - 8 * sd2[0], mode2[0] + 8 * sd2[0], 201)
    b = np.linspace(mode2[1] - 8 * sd2[1], mode2[1] + 8 * sd2[1], 201)
    A, B = np.meshgrid(a, b, indexing="ij")
    return A, B, (a[1] - a[0]) * (b[1] - b[0])


@pytest.mark.slow  # 40,000 evidence evaluations on the grid
def test_laplace_and_importance_against_quadrature():
    lj, loc = _const_structure()
    f64 = jax.jit(lambda u: lj(jnp.asarray(u, DTYPE)))

    def neg(v):
        u = loc.copy()
        u[:2] = v
        return -float(f64(u))

    mode2 = scipy.optimize.minimize(neg, loc[:2], method="Nelder-Mead",
                                    options={"xatol": 1e-8, "fatol": 1e-10}).x
    mode = loc.copy()
    mode[:2] = mode2
    u_hat = jnp.asarray(mode, DTYPE)
    H = -jax.hessian(lj)(u_hat)
    laplace = float(laplace_log_evidence(lj(u_hat), H))
    sd2 = 1.0 / np.sqrt(np.diag(np.asarray(H))[:2])
    A, B, cell = _quadrature(lj, mode2, sd2)
    grid = np.tile(loc, (A.size, 1))
    grid[:, 0], grid[:, 1] = A.ravel(), B.ravel()
    vals = np.asarray(jax.jit(jax.vmap(lj))(jnp.asarray(grid, DTYPE)), np.float64)
    g, sc, _, _ = _setup()
    prior_scale = parameter_prior(g, sc).scale[2:]
    # the log prior of the inactive coordinates at their means, removed so that
    # the grid integrates the two active ones only
    inactive_at_mean = np.sum(-np.log(prior_scale) - 0.5 * np.log(2 * np.pi))
    quad = np.logaddexp.reduce(vals - inactive_at_mean) + np.log(cell)
    # Laplace: O(1/n) relative error in the evidence; measured 0.012 nats at n=24
    assert abs(laplace - quad) < 0.05
    log_z, log_w = importance_log_evidence(jax.random.key(0), lj, u_hat, H, 4000)
    w = np.exp(np.asarray(log_w, np.float64) - float(np.max(log_w)))
    se = np.std(w) / np.mean(w) / np.sqrt(w.size)  # delta method on log mean
    assert abs(float(log_z) - quad) < 5 * se + (0 if X64 else 1e-3)


def test_natural_params():
    u = jnp.asarray([0.0, np.log(2.0), -0.5], DTYPE)
    assert_close(natural_params(u, (True, True, False)), [1.0, 2.0, -0.5])


@pytest.mark.parametrize("regular", [True, False])
def test_gram_by_lags_equals_the_kernel(regular):
    """The Gram matrix from formulas evaluated once per distinct lag equals the
    composed kernel's, every default term on, on a regular grid (n lags) and on
    irregular times (n (n - 1) / 2 + 1 lags)."""
    rng = np.random.default_rng(1)
    tau = np.linspace(0, 1, 31) if regular else np.sort(rng.uniform(size=31))
    table = lag_table(tau)
    assert table.lags.size == (31 if regular else 31 * 30 // 2 + 1)
    np.testing.assert_array_equal(table.index, table.index.T)
    g = make_grammar(DEFAULT_TERMS, max_terms=2)
    theta = np.exp(rng.normal(scale=0.3, size=len(g.param_names)))
    theta[np.array(g.param_roles) == "location"] = 0.3
    theta = jnp.asarray(theta, DTYPE)
    mask = jnp.asarray([1, 0, 1, 1, 1, 1, 0], DTYPE)
    kernel, _ = structure_kernel(g.terms, theta, mask)
    want = kernel(jnp.asarray(tau, DTYPE))
    got = structure_gram(g.terms, theta, mask, jnp.asarray(tau, DTYPE),
                         jnp.asarray(table.lags, DTYPE), jnp.asarray(table.index))
    assert_close(got, want, rtol=RTOL * 10, atol=RTOL * 10)


def test_hessian_matches_autodiff_through_cholesky():
    """The written-out derivative differentiates again: the Hessian of the log
    joint in its parameters (forward over reverse through the JVP rule) against
    automatic differentiation of a plain Cholesky evidence."""
    g, sc, tau, z = _setup()
    prior = parameter_prior(g, sc)
    positive = tuple(bool(b) for b in g.param_positive)
    tau_j, z_j = jnp.asarray(tau, DTYPE), jnp.asarray(z, DTYPE)
    loc, scale = jnp.asarray(prior.loc, DTYPE), jnp.asarray(prior.scale, DTYPE)
    mask = jnp.ones(3, DTYPE)

    def ours(u):
        return log_joint(u, mask, tau_j, z_j, loc, scale, terms=g.terms,
                         positive=positive, floor=0.0)

    def reference(u):
        kernel, noise = structure_kernel(g.terms, natural_params(u, positive), mask)
        K = kernel(tau_j) + noise * jnp.eye(tau.size, dtype=DTYPE)
        L = jnp.linalg.cholesky(K)
        a = jax.scipy.linalg.solve_triangular(L, z_j, lower=True)
        r = (u - loc) / scale
        return (-0.5 * a @ a - jnp.sum(jnp.log(jnp.diagonal(L)))
                - 0.5 * tau.size * jnp.log(2.0 * jnp.pi)
                + jnp.sum(-0.5 * r * r - jnp.log(scale) - 0.5 * jnp.log(2 * jnp.pi)))

    u = jnp.asarray(np.asarray(prior.loc) + 0.1, DTYPE)
    H = jax.jit(jax.jacfwd(jax.grad(ours)))(u)
    want = jax.jit(jax.hessian(reference))(u)
    scale_h = float(np.abs(np.asarray(want)).max())
    assert_close(H, want, rtol=LOOSE, atol=LOOSE * scale_h)
