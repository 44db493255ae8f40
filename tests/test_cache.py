"""The opt-in persistent compilation cache: a second process loads, not compiles."""

import os
import subprocess
import sys

import pytest

import bayeskde
from tests.conftest import ROOT, X64

_SCRIPT = """
import sys
import jax
import jax.numpy as jnp
from jax import monitoring

events = []
monitoring.register_event_listener(lambda name, **kw: events.append(name))
import bayeskde

bayeskde.enable_compilation_cache(sys.argv[1])
from bayeskde.hmm import forward_backward

post = forward_backward(jnp.log(jnp.array([0.5, 0.5])),
                        jnp.log(jnp.array([[0.9, 0.1], [0.2, 0.8]])),
                        jnp.zeros((5, 2)))
post.gamma.block_until_ready()
print(sum(e == "/jax/compilation_cache/cache_hits" for e in events))
"""


def _run(folder):
    env = {**os.environ, "JAX_ENABLE_X64": "1" if X64 else "0",
           "JAX_PLATFORMS": "cpu"}
    proc = subprocess.run([sys.executable, "-c", _SCRIPT, str(folder)], env=env,
                          capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return int(proc.stdout.split()[-1])


def test_second_process_hits_the_cache(tmp_path):
    assert _run(tmp_path) == 0
    assert any(tmp_path.iterdir())  # programs were written
    assert _run(tmp_path) > 0


def test_import_leaves_jax_configuration_alone():
    """Importing bayeskde turns no cache on (checked in a fresh process: the
    suite itself compiles into a cache of its own, tests/conftest.py)."""
    code = ("import jax, bayeskde; "
            "print(repr(jax.config.jax_compilation_cache_dir))")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True,
                          text=True, timeout=120, cwd=ROOT,
                          env={**os.environ, "JAX_PLATFORMS": "cpu"})
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.split()[-1] in ("None", "''")


def test_bad_argument(tmp_path):
    with pytest.raises(ValueError, match="min_compile_time_s"):
        bayeskde.enable_compilation_cache(tmp_path, min_compile_time_s=-1.0)


_QUIET = """
import os
import sys

from bayeskde.cache import quiet_cache_logs

with quiet_cache_logs():
    exec(sys.argv[2])
    os.write(2, b"E0000 00:00:00.0 1 other.cc:1] a real error stays\\n")
    print("\\r 50%|#####     |", end="", file=sys.stderr, flush=True)
print("done", file=sys.stderr)
"""


def _quiet_run(folder):
    env = {**os.environ, "JAX_ENABLE_X64": "1" if X64 else "0",
           "JAX_PLATFORMS": "cpu"}
    body = _SCRIPT.replace("import sys\n", "", 1).replace("sys.argv[1]",
                                                           repr(str(folder)))
    proc = subprocess.run([sys.executable, "-c", _QUIET, str(folder), body],
                          env=env, capture_output=True, text=True, timeout=120,
                          cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc


# two more processes (about 50 s); the cache-hit test stays in the default run
@pytest.mark.slow
def test_cached_programs_load_without_xla_log_lines(tmp_path):
    """A second process loads from the cache (the raw stderr then carries a W
    and an E line of XLA's loader per program); under quiet_cache_logs only
    other lines reach stderr, in order, progress-bar fragments included."""
    _quiet_run(tmp_path)
    proc = _quiet_run(tmp_path)
    assert int(proc.stdout.split()[-1]) > 0  # it did load from the cache
    err = proc.stderr
    assert "pjrt_executable" not in err and "cpu_aot_loader" not in err
    assert "a real error stays" in err
    assert err.index("a real error stays") < err.index("50%") < err.index("done")


def test_default_folder_is_keyed_by_the_host(monkeypatch, tmp_path):
    from bayeskde.cache import default_cache_dir, host_fingerprint

    monkeypatch.setenv("BAYESKDE_CACHE_DIR", str(tmp_path))
    fp = host_fingerprint()
    assert len(fp) == 12 and fp == host_fingerprint()
    assert default_cache_dir() == tmp_path / fp
