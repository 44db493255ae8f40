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

The per-test-point energy states and batched energies (:class:`TGPEnergyBatch`,
:func:`tgp_energy_batch`, :func:`batch_energy`, ...) and the temperature rule
live in the core, :mod:`bayeskde.tgp.batch` and :mod:`bayeskde.tgp.modes`; they
are re-exported here.

Cost: O(n_test N (N + d_y)) per density evaluation (one N-vector product per test
point and criterion), O(n_test N) memory beyond the fitted TGP.
"""

from __future__ import annotations

import jax.numpy as jnp
import numpyro
import numpyro.distributions as dist
from jaxtyping import Array, Float

from ..tgp.batch import TGPEnergyBatch as TGPEnergyBatch
from ..tgp.batch import batch_energy as batch_energy
from ..tgp.batch import batch_energy_many as batch_energy_many
from ..tgp.batch import point_energy as point_energy
from ..tgp.batch import tgp_energy_batch as tgp_energy_batch

__all__ = [
    "TGPEnergyBatch",
    "tgp_energy_batch",
    "batch_energy",
    "batch_energy_many",
    "point_energy",
    "tgp_predictive_model",
]


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
