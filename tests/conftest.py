"""Shared test configuration: strict rank promotion, a seeded key, dtype tolerances."""

import os
import subprocess
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest

jax.config.update("jax_numpy_rank_promotion", "raise")

X64 = jnp.zeros(()).dtype == jnp.float64


@pytest.fixture(autouse=True, scope="module")
def _release_compiled_programs():
    """Drop JAX's compiled programs after each test module. One process compiles
    thousands of programs over the suite; holding them all, the run crashed
    (SIGSEGV inside XLA's CPU compiler) late in both precisions, at different
    tests that pass in a fresh process. Releasing them is a mitigation; the
    cause is not established."""
    yield
    jax.clear_caches()


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


ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def run_on_host_devices(script: str, out_path, n_devices: int = 8):
    """Run ``script`` (Python source; ``{root}`` is replaced by the repository
    root, ``sys.argv[1]`` is ``out_path``) in a subprocess with ``n_devices``
    forced CPU devices and the suite's precision; return the ``.npz`` it wrote."""
    env = {**os.environ,
           "XLA_FLAGS": f"--xla_force_host_platform_device_count={n_devices}",
           "JAX_PLATFORMS": "cpu",
           "JAX_ENABLE_X64": "1" if X64 else "0"}
    proc = subprocess.run(
        [sys.executable, "-c", script.format(root=ROOT), str(out_path)],
        env=env, capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return np.load(out_path)
