"""Every script in models/ runs in its ``--quick`` form and writes its JSON.

The scripts are float64 programs (each switches JAX to float64 when it runs as a
program), so the suite's precision does not change them. They run one after
another in one child process (``tests/recipe_runner.py``), started when
collection ends so that it runs beside the rest of the suite, as programs
(``__main__`` with ``--quick --out``), each with its own captured output and exit
status; one test per script reads them. The reproduction scripts print the
paper's numbers beside ours; the Bayesian recipes print their convergence report.
"""

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPTS = sorted(p.stem for p in (ROOT / "models").glob("*.py")
                 if not p.stem.startswith("_"))
REPRODUCTIONS = {"strings_to_strings", "digits_classification",
                 "digits_reconstruction", "hyperkernel_digits", "hyperkernel_pairs",
                 "sshape_tgp"}
#: The recipes whose quick runs take about a minute or more on one core (the
#: Bayesian pose and S-shape evaluations, the sequence and HMM mean-map
#: recipes, the pose Twin GP): run by the slow run, not the README's command.
SLOW_SCRIPTS = {"bayesian_pose", "sshape_bayes_eval", "sequence_classification",
                "bayesian_hmm_meanmap", "pose_tgp"}


def selected_scripts(ids) -> list[str]:
    """The scripts whose test is among the collected test ``ids``."""
    prefix = "tests/test_recipes.py::test_quick_run_writes_json["
    names = {i[len(prefix):-1] for i in ids if i.startswith(prefix)}
    return [n for n in SCRIPTS if n in names]


#: Where the session keeps the running recipe process (tests/conftest.py).
RUNS = pytest.StashKey()
#: Where the session keeps the recipes' output folder.
FOLDER = pytest.StashKey()
#: The key of that folder in a pytest-xdist worker's ``workerinput``.
RUN_DIR = "bayeskde_recipe_dir"


def recipe_folder(config) -> Path:
    """The session's folder for the recipes' outputs (made on first use)."""
    if config.stash.get(FOLDER, None) is None:
        config.stash[FOLDER] = Path(tempfile.mkdtemp(prefix="bayeskde-recipes-"))
    return config.stash[FOLDER]


def start_runs(out: Path | None = None, names=None):
    """Start one child process that runs the scripts ``names`` (``None``:
    every script); return ``(folder, proc)``.

    The suite starts it as soon as collection is done (tests/conftest.py), so
    the scripts run beside the rest of the suite; the first test here waits for
    it. The child writes ``runner.done`` holding its exit status when it ends."""
    out = Path(tempfile.mkdtemp(prefix="bayeskde-recipes-")) if out is None else out
    env = {**os.environ, "MPLBACKEND": "Agg", "PYTHONPATH": str(ROOT)}
    with open(out / "runner.log", "w") as log:
        proc = subprocess.Popen(
            [sys.executable, str(ROOT / "tests" / "recipe_runner.py"), str(out),
             *(SCRIPTS if names is None else names)], cwd=out, env=env, stdout=log,
            stderr=subprocess.STDOUT)
    (out / "runner.pid").write_text(str(proc.pid))
    return out, proc


def stop_runs(started):
    """Kill the child if it still runs and remove its folder."""
    out, proc = started
    if proc.poll() is None:
        proc.kill()
        proc.wait()
    shutil.rmtree(out, ignore_errors=True)


def _wait_for_controller_runs(out: Path, timeout: float = 850.0) -> int:
    """Under pytest-xdist the controller owns the child: wait for its
    ``runner.done`` and return the status written there."""
    done, start = out / "runner.done", time.monotonic()
    while not done.is_file():
        if time.monotonic() - start > timeout:
            raise TimeoutError(f"the recipe runs did not finish in {timeout:.0f} s")
        pid = out / "runner.pid"
        if pid.is_file() and not done.is_file() and not _alive(int(pid.read_text())):
            time.sleep(1.0)  # the file may land just after the exit
            return int(done.read_text()) if done.is_file() else 1
        time.sleep(1.0)
    return int(done.read_text() or 1)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # a zombie (exited, not yet reaped by the controller) is not running
    try:
        return Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"
    except OSError:
        return True


@pytest.fixture(scope="module")
def runs(request):
    """The folder with every script's outputs, once the child has finished."""
    config = request.config
    if hasattr(config, "workerinput"):  # pytest-xdist worker
        out = Path(config.workerinput[RUN_DIR])
        code = _wait_for_controller_runs(out)
        assert code == 0, (out / "runner.log").read_text()[-4000:]
        return out
    started = config.stash.get(RUNS, None)
    if started is None:  # collected without the session hook
        started = config.stash[RUNS] = start_runs(
            names=selected_scripts(i.nodeid for i in request.session.items))
    out, proc = started
    proc.wait(timeout=850)
    assert proc.returncode == 0, (out / "runner.log").read_text()[-4000:]
    return out


def test_every_recipe_is_listed():
    assert len(SCRIPTS) >= 12


@pytest.mark.parametrize("name", [
    pytest.param(n, marks=pytest.mark.slow) if n in SLOW_SCRIPTS else n
    for n in SCRIPTS])
def test_quick_run_writes_json(name, runs):
    status = runs / f"{name}.status"
    assert status.is_file(), f"{name} did not run"
    stderr = (runs / f"{name}.stderr").read_text()
    assert status.read_text() == "0", stderr[-4000:]
    out = runs / f"{name}.json"
    written = [out] if out.is_file() else sorted(out.rglob("*.json"))
    assert written, f"{name} wrote no JSON under {out}"
    for path in written:
        json.loads(path.read_text())
    if name in REPRODUCTIONS:  # the paper's number is printed beside ours
        printed = (runs / f"{name}.stdout").read_text().lower()
        assert "paper" in printed or "published" in printed
