"""Twin GP predictive model: the TGP energy as an unnormalised predictive density.

A Twin GP (Bo and Sminchisescu 2010) predicts by minimising an energy E(y) over the
output y* of each test input: the KL energy (eq. 14) or the HSIC energy (eq. 19),
see :mod:`bayeskde.tgp`. Where the inverse map is multivalued (S-shape) the energy
has several minima and one minimiser hides the others. This module turns the
energy into a density over y*,

    p(y* | x*) proportional to exp(-E(y*) / tau) on the box B of outputs,   (P)

with a uniform prior on B (the training outputs' range widened by ``margin`` on
each side), and samples it with NUTS for every test point at once: the density of
all test points factorises, so one NumPyro site ``y`` of shape ``(n_test, d_y)``
carries them all and the diagonal mass matrix adapts per test point.

The temperature. E is not a log density (at tau = 1 the S-shape KL energy varies
by under one nat over the whole output range, so (P) would be nearly flat), so tau
is chosen by a stated rule: the tau that maximises the held-out log predictive
density of (P) on a validation split of the training data,
sum_v [-E_v(y_v) / tau - log Z_v(tau)], Z_v(tau) = int_B exp(-E_v(y) / tau) dy
(empirical Bayes for the one scale parameter the energy lacks). Z is computed by
the midpoint rule on a grid for d_y <= 2 and by Monte Carlo over B otherwise.

NUTS cannot move between well-separated modes, so chains start spread over B and
the draws are then reweighted per test point by importance sampling: the proposal
is the equal mixture of Gaussians fitted to each chain's draws, the weights are
Pareto-smoothed (PSIS, Vehtari et al. 2024) and their Pareto k is reported; k >
0.7 flags a test point whose predictive is unreliable. The result has both the
local shapes NUTS found and the right mass on every mode.

Cost: O(n_test N (N + d_y)) per density evaluation (one N-vector product per test
point and criterion), O(n_test N) memory beyond the fitted TGP.
"""

from __future__ import annotations

from functools import partial
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpyro
import numpyro.distributions as dist
from jaxtyping import Array, Float

from ..tgp import (
    HSICState,
    KLState,
    hsic_coupling,
    tgp_hsic_energy,
    tgp_kl_energy,
)

__all__ = [
    "TGPEnergyBatch",
    "tgp_energy_batch",
    "batch_energy",
    "batch_energy_many",
    "point_energy",
    "tgp_predictive_model",
]


class TGPEnergyBatch(NamedTuple):
    """Per-test-point energy states of a fitted :class:`bayeskde.TwinGP`.

    ``a`` is u (KL) or c (HSIC), ``b`` is eta (KL) or M_nn (HSIC), one row per
    test point; the rest is shared. Static structure (criterion, basis) is kept
    in :attr:`static`.
    """

    a: Float[Array, "n_test n"]
    b: Float[Array, " n_test"]
    outputs: Float[Array, "n d_y"]
    whiten: Float[Array, "n n"] | None
    ridge: Float[Array, ""]
    out: object
    static: tuple


def tgp_energy_batch(tgp, X_test: Float[Array, "n_test d_x"]) -> TGPEnergyBatch:
    """States of every test point of a fitted global (``n_neighbors=None``) TwinGP.

    Cost O(n_test N^2) (one multi-right-hand-side solve).
    """
    if getattr(tgp, "n_neighbors_", None) is not None:
        raise ValueError(
            "the predictive model needs a global TwinGP (n_neighbors=None)"
        )
    model = tgp.model_
    X_test = jnp.asarray(X_test, model.X.dtype)
    k_x, k_xx = tgp._input_kernels(X_test)
    if tgp.criterion_ == "kl":
        u = jax.scipy.linalg.cho_solve((model.chol_in, True), k_x.T).T
        a, b = u, k_xx + model.ridge - jnp.sum(k_x * u, axis=1)
    else:
        a, b = jax.vmap(hsic_coupling, (None, 0, 0))(model.K_in, k_x, k_xx)
    static = (tgp.criterion_, tgp._static["basis"], tgp._static["gegenbauer_lambda"])
    return TGPEnergyBatch(a, b, model.Y, model.whiten, model.ridge, model.out, static)


def _energy_one(y, a, b, outputs, whiten, ridge, out, static):
    criterion, basis, lam = static
    if criterion == "kl":
        state = KLState(a, b, outputs, whiten, ridge)
        return tgp_kl_energy(y, state, out, basis, lam)
    return tgp_hsic_energy(y, HSICState(a, b, outputs), out, basis, lam)


def point_energy(
    y: Float[Array, " d_y"], j_state: tuple, batch: TGPEnergyBatch
) -> Float[Array, ""]:
    """E_j(y) of one test point, ``j_state = (batch.a[j], batch.b[j])``
    (differentiable in y; traceable inside jit/vmap). O(N^2)."""
    a, b = j_state
    return _energy_one(y, a, b, *batch[2:-1], batch.static)


@partial(jax.jit, static_argnames="static")
def _energies(Y, a, b, outputs, whiten, ridge, out, static):
    def one(y, a_j, b_j):
        return _energy_one(y, a_j, b_j, outputs, whiten, ridge, out, static)

    return jax.vmap(one)(Y, a, b)


@partial(jax.jit, static_argnames="static")
def _energies_many(Ys, a, b, outputs, whiten, ridge, out, static):
    return jax.lax.map(
        lambda Y: _energies(Y, a, b, outputs, whiten, ridge, out, static), Ys
    )


def batch_energy(
    batch: TGPEnergyBatch, Y: Float[Array, "n_test d_y"]
) -> Float[Array, " n_test"]:
    """E_j(y_j) for every test point j (KL: eq. 14; HSIC: eq. 19). O(n_test N^2)."""
    return _energies(Y, *batch[:-1], static=batch.static)


def batch_energy_many(
    batch: TGPEnergyBatch, Ys: Float[Array, "n_sets n_test d_y"]
) -> Float[Array, "n_sets n_test"]:
    """:func:`batch_energy` at several output sets (``lax.map``: O(n_test N) memory)."""
    return _energies_many(Ys, *batch[:-1], static=batch.static)


def tgp_predictive_model(
    batch: TGPEnergyBatch,
    lower: Float[Array, " d_y"],
    upper: Float[Array, " d_y"],
    temperature: float,
) -> None:
    """NumPyro model of (P): site ``y`` ``(n_test, d_y)``, uniform on the box
    [lower, upper], with the factor ``energy`` = -sum_j E_j(y_j) / tau."""
    shape = (batch.a.shape[0], batch.outputs.shape[1])
    box = dist.Uniform(jnp.broadcast_to(lower, shape), jnp.broadcast_to(upper, shape))
    y = numpyro.sample("y", box.to_event(2))
    numpyro.factor("energy", -jnp.sum(batch_energy(batch, y)) / temperature)
