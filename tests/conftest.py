"""Shared test configuration: strict rank promotion, a seeded key, dtype tolerances."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

jax.config.update("jax_numpy_rank_promotion", "raise")

X64 = jnp.zeros(()).dtype == jnp.float64


@pytest.fixture
def key():
    return jax.random.key(0)


@pytest.fixture
def rng():
    return np.random.default_rng(0)


@pytest.fixture
def tol():
    """Relative tolerance for comparisons against float64 references."""
    return 1e-10 if X64 else 2e-5
