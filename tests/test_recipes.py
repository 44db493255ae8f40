"""Every script in models/ runs in its ``--quick`` form and writes its JSON.

The scripts are float64 programs (each switches JAX to float64 when it runs as a
program), so the suite's precision does not change them. They run one after
another in one child process (``tests/recipe_runner.py``), as programs
(``__main__`` with ``--quick --out``), each with its own captured output and exit
status; one test per script reads them. The reproduction scripts print the
paper's numbers beside ours; the Bayesian recipes print their convergence report.
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPTS = sorted(p.stem for p in (ROOT / "models").glob("*.py")
                 if not p.stem.startswith("_"))
REPRODUCTIONS = {"strings_to_strings", "digits_classification",
                 "digits_reconstruction", "hyperkernel_digits", "hyperkernel_pairs",
                 "sshape_tgp"}


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """Run every script once; return the folder with their outputs."""
    out = tmp_path_factory.mktemp("recipes")
    env = {**os.environ, "MPLBACKEND": "Agg", "PYTHONPATH": str(ROOT)}
    proc = subprocess.run(
        [sys.executable, str(ROOT / "tests" / "recipe_runner.py"), str(out), *SCRIPTS],
        cwd=out, env=env, capture_output=True, text=True, timeout=850)
    assert proc.returncode == 0, proc.stderr[-4000:]
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
