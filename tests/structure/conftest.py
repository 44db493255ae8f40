"""Shared pieces of the structure tests: a small series and a structure
posterior assembled by hand (no optimisation, so no fit is compiled)."""

import jax.numpy as jnp
import numpy as np
import pytest

from bayeskde.structure import (
    StructurePosterior,
    data_scales,
    make_grammar,
    parameter_prior,
)
from tests.helpers import DTYPE


def series(n=24, seed=0):
    rng = np.random.default_rng(seed)
    t = 2.0 + 0.5 * np.arange(n)
    y = 3.0 + 0.2 * t + np.sin(2 * np.pi * t / 3.0) + 0.2 * rng.normal(size=n)
    return t, y


@pytest.fixture(scope="module")
def handmade():
    """Two components of the grammar (LIN, PER): LIN + PER and PER alone."""
    t, y = series()
    g = make_grammar(("LIN", "PER"), max_terms=2)
    sc = data_scales(t, y)
    prior = parameter_prior(g, sc)
    tau = jnp.asarray((t - sc.t_min) / sc.span, DTYPE)
    z = jnp.asarray((y - sc.y_mean) / sc.y_sd, DTYPE)
    # layout: const, noise, LIN var, LIN offset, PER var, PER scale, PER period
    u = np.array([[np.log(0.3), np.log(0.05), np.log(0.8), 0.4, np.log(0.6),
                   0.1, np.log(3.0 / sc.span)],
                  [np.log(0.5), np.log(0.2), np.log(0.5), 0.5, np.log(0.9),
                   -0.2, np.log(3.1 / sc.span)]])
    logw = np.log(np.array([0.7, 0.3]))
    H = np.stack([np.eye(7) * 50.0, np.eye(7) * 20.0])
    num_structures = len(g.masks)
    probs = np.array([0.0, 0.0, 0.3, 0.7])  # structures 2 (PER), 3 (LIN + PER)
    with np.errstate(divide="ignore"):
        log_post = np.log(probs)
    post = StructurePosterior(
        g, sc, prior, tau, z, log_post, log_post, probs,
        float(1.0 / np.sum(probs ** 2)),
        np.array([3, 2]), u, H, logw, np.zeros((num_structures, 1, 7)),
        np.zeros((num_structures, 1)), np.zeros((num_structures, 1)), 1e-6)
    return post, t, y
