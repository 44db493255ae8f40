"""Twin GP energies of many test points at once: per-test-point states of a
fitted global :class:`bayeskde.tgp.TwinGP` and the batched energies E_j(y).

A fitted global TwinGP predicts test point j by minimising E_j(y), the KL
energy (Bo and Sminchisescu 2010, eq. 14) or the HSIC energy (eq. 19) of
:mod:`bayeskde.tgp.energy`. Everything that reads E_j as a function of y rather
than only minimising it (the tempered predictive exp(-E_j(y) / tau) of
:mod:`bayeskde.tgp.modes`, the NUTS model of :mod:`bayeskde.models.tgp`) starts
from :func:`tgp_energy_batch`: one row per test point of the state that E_j
depends on, with the training outputs and the static structure shared.

Cost: O(n_test N^2) for the states (one multi-right-hand-side solve), then
O(n_test N (N + d_y)) per batched energy evaluation.
"""

from __future__ import annotations

from functools import partial
from typing import NamedTuple

import jax
import jax.numpy as jnp
from jaxtyping import Array, Float

from .._validation import (
    check_data,
    check_n_features,
    check_squared_range,
)
from ..kernels.standard import rbf_gram
from .energy import (
    STATE_DTYPE,
    HSICState,
    KLState,
    hsic_coupling,
    tgp_hsic_energy,
    tgp_kl_energy,
    tgp_kl_state,
)

__all__ = [
    "TGPEnergyBatch",
    "tgp_energy_batch",
    "point_energy",
    "batch_energy",
    "batch_energy_many",
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


def check_tgp_test_inputs(tgp, X, name: str = "X"):
    """``X`` validated against a fitted TwinGP as its ``predict`` does: a finite
    numeric ``(n, d_x)`` array (1-D: one feature per point) with the fitted
    number of features, cast to the model's dtype."""
    was_1d = getattr(X, "ndim", None) == 1
    X = check_data(X, name)
    if isinstance(X, tuple):
        raise TypeError(f"TwinGP needs numeric {name}, got strings")
    check_n_features(X, tgp.n_features_in_, name, was_1d, "TwinGP")
    check_squared_range(X, name)
    return X.astype(tgp.model_.X.dtype)


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
    if tgp.criterion_ == "kl":
        # The states in float64 whatever the working precision (STATE_DTYPE).
        with jax.enable_x64(True):
            if tgp.transform_ is None:
                hi = STATE_DTYPE
                k_x = rbf_gram(X_test.astype(hi), model.X.astype(hi),
                               model.gamma_in.astype(hi))
                k_xx = jnp.ones((X_test.shape[0],), hi)
            else:
                k_x, k_xx = tgp._input_kernels(X_test)
            a, b, *_ = jax.vmap(tgp_kl_state, (None, None, None, 0, 0, None),
                         KLState(0, 0, None, None, None))(
                model.chol_in, model.whiten, model.Y, k_x, k_xx, model.ridge)
    else:
        k_x, k_xx = tgp._input_kernels(X_test)
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
