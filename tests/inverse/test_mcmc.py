"""The inverse model's MCMC and refinement of modes: refined modes are local
maxima of the model-averaged density (Newton's step there within BFGS's
gradient tolerance), never lower than where they started."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from bayeskde.datasets import make_arm_pose
from bayeskde.inverse import (
    InverseGPPrior,
    fit_inverse_gp,
    inverse_gp_predictive,
    predictive_log_density,
)
from bayeskde.inverse.mixture import mixture_log_likelihood_each
from bayeskde.inverse.output_prior import log_prior
from tests.helpers import EPS, RTOL
from tests.inverse.rounding import term_scale


@pytest.fixture(scope="module")
def arm():
    d = make_arm_pose(jax.random.key(2), 80, 4)
    prior = InverseGPPrior(max_degree=2, n_gamma=6)
    fit = fit_inverse_gp(jax.random.key(3), d.x_train, d.theta_train, prior,
                         method="quadrature", num_chains=2, num_samples=100,
                         num_replicates=2, progress_bar=False)
    return d, fit


# BFGS refinement of every mode of a 4-D arm (about 60 s); the Langevin chain's tests
# stay in the default run
@pytest.mark.slow
def test_refined_modes_are_local_maxima(arm):
    """Refinement (on the adaptive importance path) moves each mode to a
    stationary point of the model-averaged density, never lowers it, and keeps
    the masses."""
    d, fit = arm
    raw = inverse_gp_predictive(fit, d.x_test, k=2, num_draws=10, refine=False,
                                sampler="importance")
    ref = inverse_gp_predictive(fit, d.x_test, k=2, num_draws=10,
                                sampler="importance")
    assert ref.sampler == "importance"
    np.testing.assert_array_equal(raw.mode_masses, ref.mode_masses)
    before = predictive_log_density(ref, raw.modes, d.x_test)
    after = predictive_log_density(ref, ref.modes, d.x_test)
    assert np.all(after >= before - RTOL * np.abs(before))
    mix, prior = ref.mixture, ref.prior
    dt = mix.Y.dtype

    def f(y, x):
        ll = mixture_log_likelihood_each(mix, y[None, None], x[None],
                                         jnp.asarray(1.0, dt))[0, 0]
        return ll + log_prior(prior.kind, prior.params, y[None])[0]

    grad, hess = jax.jit(jax.grad(f)), jax.jit(jax.hessian(f))
    with jax.enable_x64(True):  # the same density in float64: the gradient's
        mix64 = jax.tree_util.tree_map(  # rounding in the working precision
            lambda a: jnp.asarray(a, jnp.float64) if jnp.issubdtype(
                jnp.asarray(a).dtype, jnp.floating) else a, mix)
        params64 = jax.tree_util.tree_map(lambda a: jnp.asarray(a, jnp.float64),
                                          prior.params)

        def f64(y, x):
            ll = mixture_log_likelihood_each(mix64, y[None, None], x[None],
                                             jnp.asarray(1.0))[0, 0]
            return ll + log_prior(prior.kind, params64, y[None])[0]

        grad64 = jax.jit(jax.grad(f64))
    moved = 0
    for i in range(len(d.x_test)):
        for j in range(2):
            y, x = jnp.asarray(ref.modes[i, j], dt), jnp.asarray(d.x_test[i], dt)
            if np.allclose(ref.modes[i, j], raw.modes[i, j]):
                continue  # refinement declined: the BFGS end point was lower
            span = prior.high - prior.low
            if np.any(np.minimum(ref.modes[i, j] - prior.low,
                                 prior.high - ref.modes[i, j]) < 1e-4 * span):
                continue  # clipped to the box prior's edge: not stationary
            moved += 1
            g = np.asarray(grad(y, x), float)
            with jax.enable_x64(True):
                g64 = np.asarray(grad64(jnp.asarray(ref.modes[i, j], jnp.float64),
                                        jnp.asarray(d.x_test[i], jnp.float64)))
            # stationary: BFGS stops where its working-precision gradient's
            # largest entry is below sqrt(eps), so the true (float64) gradient
            # is below sqrt(d eps) + twice the working gradient's rounding
            # |g - g64|, and Newton's step at most ||H^-1|| of that; or where
            # no step lowers f any more, within sqrt(2 ||H^-1|| eps T) of the
            # maximum (a maximum located to sqrt(eps): f's terms, of size T,
            # round at eps T)
            H = np.asarray(hess(y, x), float)
            step = np.linalg.solve(H, g64)
            dim = len(g)
            h_inv = np.linalg.norm(np.linalg.inv(H), 2)
            T = term_scale(mix, ref.modes[i, j][None], d.x_test[i][None], 1.0)[0, 0]
            bound = (h_inv * (np.sqrt(dim * EPS) + 2 * np.linalg.norm(g - g64))
                     + np.sqrt(2 * h_inv * EPS * T))
            assert np.linalg.norm(step) <= bound, (step, bound)
    # not vacuous: at least 3 of the 8 modes moved and were checked (which of
    # them BFGS improves depends on float32 rounding: 3 or 4 across machines)
    assert moved >= 3
    # (No claim on the markers' reconstruction: the density's maximum is not
    # its minimiser, and the raw modes now come from the chains' importance
    # stage already close to the maxima; the oracle is stationarity above.)


