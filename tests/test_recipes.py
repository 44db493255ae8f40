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
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPTS = sorted(p.stem for p in (ROOT / "models").glob("*.py")
                 if not p.stem.startswith("_"))
REPRODUCTIONS = {"strings_to_strings", "digits_classification",
                 "digits_reconstruction", "hyperkernel_digits", "hyperkernel_pairs",
                 "sshape_tgp"}


#: Where the session keeps the running recipe process (tests/conftest.py).
RUNS = pytest.StashKey()


def start_runs():
    """Start one child process that runs every script; return ``(folder, proc)``.

    The suite starts it as soon as collection is done (``pytest_collection_finish``
    in tests/conftest.py), so the scripts run on the second core beside the rest of
    the suite; the first test here waits for it."""
    out = Path(tempfile.mkdtemp(prefix="bayeskde-recipes-"))
    env = {**os.environ, "MPLBACKEND": "Agg", "PYTHONPATH": str(ROOT)}
    with open(out / "runner.log", "w") as log:
        proc = subprocess.Popen(
            [sys.executable, str(ROOT / "tests" / "recipe_runner.py"), str(out),
             *SCRIPTS], cwd=out, env=env, stdout=log, stderr=subprocess.STDOUT)
    return out, proc


def stop_runs(started):
    """Kill the child if it still runs and remove its folder."""
    out, proc = started
    if proc.poll() is None:
        proc.kill()
        proc.wait()
    shutil.rmtree(out, ignore_errors=True)


@pytest.fixture(scope="module")
def runs(request):
    """The folder with every script's outputs, once the child has finished."""
    started = request.config.stash.get(RUNS, None)
    if started is None:  # collected without the session hook
        started = request.config.stash[RUNS] = start_runs()
    out, proc = started
    proc.wait(timeout=850)
    assert proc.returncode == 0, (out / "runner.log").read_text()[-4000:]
    return out


def test_every_recipe_is_listed():
    assert len(SCRIPTS) >= 12


@pytest.mark.parametrize("name", SCRIPTS)
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
