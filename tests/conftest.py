"""Shared test configuration: compile options, strict rank promotion, a seeded
key, dtype tolerances."""

import os
import shutil
import subprocess
import sys
import tempfile

# The suite compiles about 7,700 XLA programs per precision, almost all of them
# once, and spent two thirds of its time in XLA's CPU compiler. It compiles them
# with LLVM optimisation level 0 and XLA's classic loop emitters (as quick_jit
# does for the KDE engine's programs at level 1): under half the compile time,
# the same programs. The results are IEEE arithmetic either way, rounded in a
# different order: tolerances are bounds derived from the algebra's conditioning,
# never the last digits one code generator happens to produce.
# Speed is measured in bench/ with XLA's defaults. BAYESKDE_TEST_XLA_DEFAULTS=1
# runs the suite with XLA's default options. Set before JAX creates its backend;
# the suite's subprocesses inherit it.
SUITE_XLA_FLAGS = ("--xla_backend_optimization_level=0 "
                   "--xla_cpu_use_fusion_emitters=false")
_flags = os.environ.get("XLA_FLAGS", "")
if not os.environ.get("BAYESKDE_TEST_XLA_DEFAULTS") and SUITE_XLA_FLAGS not in _flags:
    os.environ["XLA_FLAGS"] = f"{_flags} {SUITE_XLA_FLAGS}".strip()

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402

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
           "XLA_FLAGS": f"{os.environ.get('XLA_FLAGS', '')} "
                        f"--xla_force_host_platform_device_count={n_devices}",
           "JAX_PLATFORMS": "cpu",
           "JAX_ENABLE_X64": "1" if X64 else "0"}
    proc = subprocess.run(
        [sys.executable, "-c", script.format(root=ROOT), str(out_path)],
        env=env, capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return np.load(out_path)


def _is_worker(config) -> bool:
    return hasattr(config, "workerinput")  # a pytest-xdist worker


def _suite_cache_dir(controller_pid: int) -> str:
    return os.path.join(tempfile.gettempdir(), "bayeskde-suite-xla",
                        f"{controller_pid}-{'x64' if X64 else 'x32'}")


def pytest_configure(config):
    """pytest-xdist workers run at a lower priority (nice 5) than the recipe
    runs beside them: the recipes, one process, then finish while the workers
    still have tests left, instead of holding the last minute on one core.

    Every process of the run compiles into one persistent compilation cache
    (:func:`bayeskde.enable_compilation_cache`, a folder of the controller's,
    removed at the end): the fixture below drops the compiled programs after
    each module, and the many modules that compile the same programs (the
    inverse model's fits, the HMM's recursions) then load them from disk
    instead of compiling them again; the two workers share them too.
    ``BAYESKDE_TEST_NO_CACHE=1`` turns it off."""
    if _is_worker(config) and hasattr(os, "nice"):
        os.nice(5)
    if not os.environ.get("BAYESKDE_TEST_NO_CACHE"):
        import bayeskde

        pid = os.getppid() if _is_worker(config) else os.getpid()
        bayeskde.enable_compilation_cache(_suite_cache_dir(pid))


#: The slowest test files (``--durations``), handed out first under pytest-xdist
#: so that no worker is left with a long file while the other is idle.
HEAVY_FIRST = ("test_readme.py", "test_cli.py", "inverse/test_lowrank.py",
               "tgp/test_scale.py", "models/test_hmm.py", "inverse/test_noise.py",
               "infer/test_diagnostics.py", "test_distributed.py",
               "inverse/test_evaluators.py", "test_bench_scripts.py",
               "inverse/test_quadrature.py")


def _listed_slow() -> set[str]:
    """The node ids of tests/slow_tests.txt."""
    path = os.path.join(os.path.dirname(__file__), "slow_tests.txt")
    with open(path) as fh:
        lines = (line.split("#", 1)[0].strip() for line in fh)
        return {line for line in lines if line}


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(session, config, items):
    """The tests listed in tests/slow_tests.txt get the ``slow`` mark (before
    ``-m`` deselects). The slowest files first, the recipe tests last: these
    wait for the recipe runs, which by then have run beside the rest of the
    suite (under pytest-xdist's ``loadfile`` distribution the worker that gets
    them would otherwise sit idle)."""
    slow = _listed_slow()
    for item in items:
        if item.nodeid in slow:
            item.add_marker(pytest.mark.slow)

    def rank(item):
        path = item.path.as_posix()
        if item.path.name == "test_recipes.py":
            return len(HEAVY_FIRST) + 1
        return next((i for i, h in enumerate(HEAVY_FIRST) if path.endswith(
            "tests/" + h)), len(HEAVY_FIRST))

    items.sort(key=rank)


def pytest_collection_finish(session):
    """Start the runs of the ``models/`` scripts (tests/test_recipes.py) in a
    child process now, when they are selected: the rest of the suite compiles
    beside them. Under pytest-xdist the controller starts them instead
    (``pytest_xdist_node_collection_finished``), once for all workers."""
    if _is_worker(session.config):
        return
    from tests.test_recipes import RUNS, selected_scripts, start_runs

    names = selected_scripts(item.nodeid for item in session.items)
    if names:
        session.config.stash[RUNS] = start_runs(names=names)


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node):
    """pytest-xdist controller: tell each worker where the recipe runs write."""
    from tests.test_recipes import RUN_DIR, recipe_folder

    node.workerinput[RUN_DIR] = str(recipe_folder(node.config))


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_node_collection_finished(node, ids):
    """pytest-xdist controller: start the recipe runs when a worker has
    collected tests/test_recipes.py (the first such worker; once)."""
    from tests.test_recipes import RUNS, recipe_folder, selected_scripts, start_runs

    config = node.config
    names = selected_scripts(ids)
    if config.stash.get(RUNS, None) is None and names:
        config.stash[RUNS] = start_runs(recipe_folder(config), names)


def _remove_suite_cache(session):
    if not _is_worker(session.config):
        shutil.rmtree(_suite_cache_dir(os.getpid()), ignore_errors=True)


def pytest_sessionfinish(session):
    from tests.test_recipes import RUNS, stop_runs

    _remove_suite_cache(session)
    started = session.config.stash.get(RUNS, None)
    if started is not None:
        stop_runs(started)
