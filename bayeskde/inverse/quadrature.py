"""The inverse model's posterior by quadrature, without MCMC.

The generative inverse model (:mod:`bayeskde.inverse`) has two
continuous parameters, u = log a^2 and v = log s^2, beside the discrete pair
p = (gamma, d) that is enumerated. Its joint posterior

    p(p, u, v | X) proportional to p(p) N(u) N(v) p(X | Y, p, e^u, e^v)

is therefore a mixture over pairs of 2-D densities, and a 2-D integral is
cheaper and more accurate by quadrature than by sampling. It is also the case
NUTS handles worst: when two pairs explain the data about equally well with
different amplitudes (the arm-pose task: three pairs hold 83%, 10% and 7% of
the mass, each at its own amplitude), the marginal of (u, v) has separated
modes and each chain stays in one (R-hat 1.6).

Per pair, :func:`quadrature_posterior`

1. finds the mode of the log joint J_p(u, v) from the best point of a coarse
   grid over +-5 prior standard deviations, by damped Newton steps (gradient
   and the 2 x 2 Hessian by automatic differentiation; each step keeps the
   best of six step lengths, so J_p never decreases);
2. lays an n x n grid over +-R standard deviations of the Laplace
   approximation (z -> mode + L z with L L^T = -H^-1) and sums

       log Z_p = log sum_k exp J_p(mode + L z_k) + log |det L| + 2 log dz,

   the rectangle rule, whose error for a smooth density that has decayed at
   the grid's edge is exponentially small in the number of points per
   standard deviation (Trefethen and Weideman 2014, SIAM Review 56(3), thm
   5.1);
3. checks itself: ``log_z_change`` is the largest change of log Z_p over the
   pairs with posterior mass above 1e-6 when every second point is dropped
   (twice the spacing), and ``edge_density`` the largest density on a grid
   edge relative to the pair's peak.

Precision: the grid of step 2 (and the Newton line search) holds the change
J_p(u, v) - J_p(mode), computed in a form whose rounding is relative to the
change (:func:`~bayeskde.inverse.pair_log_evidence_change`), and
the mode's own J_p is added in float64 on the host. J_p itself is a sum of
O(m d_x) terms (about 1e5 at m = 1e5), whose float32 rounding, about 1e-2
nats, would otherwise enter every log Z_p.

Draws: a pair from softmax(log Z), a grid point from softmax(J_p) within it,
and a uniform offset within the cell, so draws are independent (no chains to
mix, nothing to warm up).

Cost O(n_gamma D m) per evaluation of every pair's J (the spectra of
:func:`bayeskde.inverse.prepare_inverse_gp_data`), times about
3,300 for the coarse grid, 6 x 40 for Newton and n^2 for the fine grid.
"""

from __future__ import annotations

from functools import partial
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax.scipy.stats import norm
from scipy.stats import norm as _snorm

from .._validation import check_integer, check_positive
from .data import InverseGPData, InverseGPPrior
from .evidence import pair_log_evidence_change, pair_log_joint, pair_log_joint_host

__all__ = ["QuadratureReport", "QuadraturePosterior", "quadrature_posterior",
           "pair_modes"]

_STEPS = (1.0, 0.5, 0.25, 0.125, 1.0 / 16, 0.0)


class QuadratureReport(NamedTuple):
    """Accuracy of :func:`quadrature_posterior`.

    Attributes:
        n_points: grid points per pair (n^2).
        log_z_change: largest |log Z_p(dz) - log Z_p(2 dz)| over pairs holding
            at least 1e-6 of the posterior mass.
        edge_density: largest density on a grid edge relative to its pair's
            peak, over the same pairs.
        warnings: plain-language messages when either check fails (log Z
            change above 1e-3 or edge density above 1e-6).
    """

    n_points: int
    log_z_change: float
    edge_density: float
    warnings: tuple[str, ...]


class QuadraturePosterior(NamedTuple):
    """Result of :func:`quadrature_posterior`.

    Attributes:
        log_amplitude, log_noise: ``(num_samples,)`` independent draws of u, v.
        pair: ``(num_samples,)`` the flat pair index g D + (d - 1) of each draw.
        pair_posterior: ``(n_gamma, D)`` posterior probability of every pair.
        log_marginal: log p(X | Y), the model's evidence.
        mode: ``(n_gamma, D, 2)`` each pair's (u, v) mode.
        map_pair: the flat index of the pair with the highest joint density.
        report: :class:`QuadratureReport`.
    """

    log_amplitude: np.ndarray
    log_noise: np.ndarray
    pair: np.ndarray
    pair_posterior: np.ndarray
    log_marginal: float
    mode: np.ndarray
    map_pair: int
    report: QuadratureReport


def _joint(data, loc, scale, u, v):
    """J_p(u_p, v_p) for every pair; u, v scalars or (n_gamma, D)."""
    lp = norm.logpdf(u, loc[0], scale[0]) + norm.logpdf(v, loc[1], scale[1])
    return pair_log_joint(data, jnp.exp(u), jnp.exp(v)) + lp


def _joint_change(data, loc, scale, u0, v0, u, v):
    """J_p(u, v) - J_p(u0, v0) for every pair, accurate to the change's own
    precision (:func:`~bayeskde.inverse.pair_log_evidence_change`);
    u0, v0 ``(n_gamma, D)``, u, v broadcastable to it."""
    shape = data.n_rest.shape
    u, v = jnp.broadcast_to(u, shape), jnp.broadcast_to(v, shape)
    lp = (norm.logpdf(u, loc[0], scale[0]) - norm.logpdf(u0, loc[0], scale[0])
          + norm.logpdf(v, loc[1], scale[1]) - norm.logpdf(v0, loc[1], scale[1]))
    return pair_log_evidence_change(data, u0, v0, u, v) + lp


def _joint_host(data, loc, scale, u, v):
    """J_p at every pair's (u, v) in float64 on the host (the quadrature's
    anchor, whatever JAX's precision)."""
    loc, scale = np.asarray(loc, np.float64), np.asarray(scale, np.float64)
    u, v = np.asarray(u, np.float64), np.asarray(v, np.float64)
    return (pair_log_joint_host(data, np.exp(u), np.exp(v))
            + _snorm.logpdf(u, loc[0], scale[0]) + _snorm.logpdf(v, loc[1], scale[1]))


@jax.jit
def _coarse(data, loc, scale):
    us = loc[0] + scale[0] * jnp.linspace(-5.0, 5.0, 41, dtype=loc.dtype)
    vs = loc[1] + scale[1] * jnp.linspace(-5.0, 5.0, 81, dtype=loc.dtype)
    row = jax.vmap(lambda u, v: _joint(data, loc, scale, u, v), (None, 0))
    J = jax.lax.map(lambda u: row(u, vs), us)  # (41, 81, G, D)
    flat = J.reshape(-1, *J.shape[2:])
    best = jnp.argmax(flat, axis=0)
    return us[best // vs.shape[0]], vs[best % vs.shape[0]]


def _hessian(data, loc, scale, u, v):
    """Gradient and the per-pair 2 x 2 Hessian (pairs are independent)."""

    def total(u, v):
        return jnp.sum(_joint(data, loc, scale, u, v))

    grad = jax.grad(total, argnums=(0, 1))
    one, zero = jnp.ones_like(u), jnp.zeros_like(u)
    g, (huu, hvu) = jax.jvp(grad, (u, v), (one, zero))
    _, (huv, hvv) = jax.jvp(grad, (u, v), (zero, one))
    H = jnp.stack([jnp.stack([huu, huv], -1), jnp.stack([hvu, hvv], -1)], -2)
    return jnp.stack(g, -1), H


@jax.jit
def _newton(data, loc, scale, u, v):
    steps = jnp.asarray(_STEPS, u.dtype)

    def step(_, uv):
        u, v = uv
        g, H = _hessian(data, loc, scale, u, v)
        det = H[..., 0, 0] * H[..., 1, 1] - H[..., 0, 1] * H[..., 1, 0]
        concave = (H[..., 0, 0] < 0) & (det > 0)
        inv = jnp.stack([jnp.stack([H[..., 1, 1], -H[..., 0, 1]], -1),
                         jnp.stack([-H[..., 1, 0], H[..., 0, 0]], -1)], -2)
        newton = -jnp.einsum("...ij,...j->...i", inv, g) / jnp.where(
            concave, det, 1.0)[..., None]
        d = jnp.where(concave[..., None], newton, 0.1 * g)
        d = d / jnp.maximum(1.0, jnp.linalg.norm(d, axis=-1, keepdims=True))
        # Changes from the current point: their float32 error is relative to
        # the change, so the step choice holds at any m.
        J = jax.vmap(lambda t: _joint_change(data, loc, scale, u, v,
                                             u + t * d[..., 0],
                                             v + t * d[..., 1]))(steps)  # (6, G, D)
        t = steps[jnp.argmax(jnp.where(jnp.isfinite(J), J, -jnp.inf), axis=0)]
        return u + t * d[..., 0], v + t * d[..., 1]

    return jax.lax.fori_loop(0, 40, step, (u, v))


@partial(jax.jit, static_argnames="n")
def _fine(data, loc, scale, u, v, radius, n):
    _, H = _hessian(data, loc, scale, u, v)
    # Covariance of the Laplace approximation; a Hessian that is not negative
    # definite (a flat direction) falls back to its absolute eigenvalues.
    lam, V = jnp.linalg.eigh(-H)
    lam = jnp.maximum(jnp.abs(lam), 1e-12)
    L = V * (1.0 / jnp.sqrt(lam))[..., None, :]  # (G, D, 2, 2), L L^T = cov
    z1 = jnp.linspace(-radius, radius, n, dtype=u.dtype)
    z = jnp.stack(jnp.meshgrid(z1, z1, indexing="ij"), -1).reshape(-1, 2)
    off = jnp.einsum("gdij,kj->kgdi", L, z)  # (n^2, G, D, 2)
    J = jax.lax.map(lambda o: _joint_change(data, loc, scale, u, v, u + o[..., 0],
                                            v + o[..., 1]), off, batch_size=64)
    return J, L, jnp.log(jnp.abs(jnp.linalg.det(L)))


def quadrature_posterior(
    key: jax.Array, data: InverseGPData, prior: InverseGPPrior, *,
    num_samples: int = 2000, n_grid: int = 41, radius: float = 8.0,
) -> QuadraturePosterior:
    """Posterior of :func:`~bayeskde.inverse.inverse_gp_model` by
    per-pair adaptive quadrature (module docstring).

    Args:
        key: PRNG key for the draws.
        data, prior: as for the model.
        num_samples: independent posterior draws.
        n_grid: odd number of grid points per axis and pair.
        radius: grid half-width in Laplace standard deviations.

    Raises:
        ValueError: ``n_grid`` even or below 5, ``radius`` not positive.

    Cost: see the module docstring; about 1 s for 72 pairs and m = 600 on
    2 CPU cores once compiled.
    """
    num_samples = check_integer(num_samples, "num_samples", minimum=1)
    n = check_integer(n_grid, "n_grid", minimum=5)
    if n % 2 == 0:
        raise ValueError(f"n_grid must be odd (its every second point is the "
                         f"coarse check), got {n}")
    radius = check_positive(radius, "radius")
    dt = data.X.dtype
    loc = jnp.asarray([data.x_scale + prior.log_amplitude_loc,
                       data.x_scale + prior.log_noise_loc], dt)
    scale = jnp.asarray([prior.log_amplitude_scale, prior.log_noise_scale], dt)
    u, v = _newton(data, loc, scale, *_coarse(data, loc, scale))
    J, L, logdet = _fine(data, loc, scale, u, v, jnp.asarray(radius, dt), n)
    # The grid holds changes from each pair's mode; the mode's own value is
    # added in float64 (at m = 1e5 the log joint is ~1e5, whose float32
    # rounding, ~1e-2 nats, would otherwise enter every log Z).
    peak = _joint_host(data, loc, scale, u, v)
    J = np.asarray(J, np.float64).reshape(n * n, -1) + peak.reshape(1, -1)  # (n^2, P)
    J = np.where(np.isfinite(J), J, -np.inf)
    dz = 2.0 * radius / (n - 1)
    logdet = np.asarray(logdet, np.float64).reshape(-1)
    log_z = np.logaddexp.reduce(J, axis=0) + logdet + 2 * np.log(dz)
    coarse = J.reshape(n, n, -1)[::2, ::2].reshape(-1, J.shape[1])
    log_z2 = np.logaddexp.reduce(coarse, axis=0) + logdet + 2 * np.log(2 * dz)
    log_marginal = float(np.logaddexp.reduce(log_z))
    if not np.isfinite(log_marginal):
        raise ValueError(
            "the evidence is not finite on any (rate, degree) pair's quadrature "
            f"grid (the noise's posterior mode is at log s^2 = {float(np.max(v)):.3g}"
            ", the edge of working precision): X looks like a noise-free "
            "function of Y, which the Gaussian noise of the quadrature fit "
            "cannot resolve; use method='nuts' or add the simulator's noise")
    post = np.exp(log_z - log_marginal)
    heavy = post >= 1e-6
    edge = np.ones((n, n), bool)
    edge[1:-1, 1:-1] = False
    rel = J.reshape(n, n, -1)[edge].max(axis=0) - J.max(axis=0)
    change = float(np.max(np.abs(log_z - log_z2)[heavy]))
    edge_density = float(np.exp(np.max(rel[heavy])))
    msgs = []
    if not change <= 1e-3:
        msgs.append(f"the quadrature is coarse: log Z of a pair moves by "
                    f"{change:.2g} at twice the spacing; raise n_grid")
    if not edge_density <= 1e-6:
        msgs.append(f"the grid cuts off mass: density {edge_density:.2g} of the "
                    f"peak on its edge; raise radius")
    k_pair, k_cell, k_off = jax.random.split(key, 3)
    pair = np.asarray(jax.random.categorical(
        k_pair, jnp.asarray(log_z - log_marginal), shape=(num_samples,)))
    cell = np.asarray(jax.random.categorical(k_cell, jnp.asarray(J.T[pair])))
    # Uniform within the cell, in the grid's z coordinates (z -> mode + L z).
    z = np.stack(np.divmod(cell, n), -1) * dz - radius
    z = z + dz * np.asarray(jax.random.uniform(k_off, (num_samples, 2),
                                               minval=-0.5,
                                               maxval=0.5))
    L = np.asarray(L, np.float64).reshape(-1, 2, 2)[pair]
    mode = np.stack([np.asarray(u, np.float64), np.asarray(v, np.float64)], -1)
    uv = mode.reshape(-1, 2)[pair] + np.einsum("kij,kj->ki", L, z)
    return QuadraturePosterior(
        uv[:, 0], uv[:, 1], pair, post.reshape(data.n_rest.shape), log_marginal, mode,
        int(np.argmax(peak)), QuadratureReport(n * n, change, edge_density,
                                               tuple(msgs)))


def pair_modes(data: InverseGPData, prior: InverseGPPrior
               ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Every pair's mode of the log joint J_p(u, v) (step 1 of
    :func:`quadrature_posterior`: the coarse grid, then damped Newton).

    Returns ``(u, v, J)``, each ``(n_gamma, D)``: log a^2, log s^2 and the log
    joint at the mode. Cost about 3,500 evaluations of every pair's J."""
    dt = data.X.dtype
    loc = jnp.asarray([data.x_scale + prior.log_amplitude_loc,
                       data.x_scale + prior.log_noise_loc], dt)
    scale = jnp.asarray([prior.log_amplitude_scale, prior.log_noise_scale], dt)
    u, v = _newton(data, loc, scale, *_coarse(data, loc, scale))
    return (np.asarray(u, np.float64), np.asarray(v, np.float64),
            _joint_host(data, loc, scale, u, v))
