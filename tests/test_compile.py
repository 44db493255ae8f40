"""quick_jit: CPU compile options per program, and the fall-back when XLA lacks one."""

import jax.numpy as jnp
import numpy as np

from bayeskde import cache as _compile
from tests.helpers import assert_close, count_compilations


def test_quick_jit_matches_jit_and_does_not_recompile():
    f = _compile.quick_jit(lambda x, k: jnp.exp(-x) * k, static_argnames="k")
    x = jnp.linspace(0.0, 1.0, 7)
    assert_close(f(x, k=2), np.exp(-np.asarray(x, float)) * 2)
    x2 = jnp.linspace(1.0, 2.0, 7)
    with count_compilations() as c:
        f(x2, k=2)
    assert c.count == 0


def test_quick_jit_falls_back_when_an_option_is_unknown(monkeypatch):
    monkeypatch.setattr(_compile, "CPU_COMPILE_OPTIONS", {"xla_no_such_option": 1})
    f = _compile.quick_jit(lambda x: x + 1.0)
    np.testing.assert_array_equal(f(jnp.ones(3)), 2.0 * np.ones(3))
    assert not f._quick_ok


def test_quick_options_leave_what_xla_flags_sets(monkeypatch):
    monkeypatch.setenv("XLA_FLAGS", "--xla_backend_optimization_level=0 --foo=1")
    opts = _compile._quick_options()
    assert "xla_backend_optimization_level" not in opts
    assert opts["xla_cpu_use_fusion_emitters"] is False
    monkeypatch.setenv("XLA_FLAGS", "")
    assert _compile._quick_options() == _compile.CPU_COMPILE_OPTIONS
