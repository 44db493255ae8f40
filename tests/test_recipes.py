"""Every script in models/ runs in its ``--quick`` form and writes its JSON.

Each runs in a fresh process (as a user runs it), in the suite's precision. The
reproduction scripts print the paper's numbers beside ours; the Bayesian recipes
print their convergence report.
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import X64

ROOT = Path(__file__).resolve().parents[1]
SCRIPTS = sorted(p.stem for p in (ROOT / "models").glob("*.py")
                 if not p.stem.startswith("_"))
REPRODUCTIONS = {"strings_to_strings", "digits_classification",
                 "digits_reconstruction", "hyperkernel_digits", "hyperkernel_pairs",
                 "sshape_tgp"}


def test_every_recipe_is_listed():
    assert len(SCRIPTS) >= 12


@pytest.mark.parametrize("name", SCRIPTS)
def test_quick_run_writes_json(name, tmp_path):
    out = tmp_path / f"{name}.json"
    env = {**os.environ, "JAX_ENABLE_X64": "1" if X64 else "0",
           "MPLBACKEND": "Agg", "PYTHONPATH": str(ROOT)}
    proc = subprocess.run(
        [sys.executable, str(ROOT / "models" / f"{name}.py"), "--quick",
         "--out", str(out)],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-4000:]
    written = [out] if out.is_file() else sorted(out.rglob("*.json"))
    assert written, f"{name} wrote no JSON under {out}"
    for path in written:
        json.loads(path.read_text())
    if name in REPRODUCTIONS:  # the paper's number is printed beside ours
        printed = proc.stdout.lower()
        assert "paper" in printed or "published" in printed
