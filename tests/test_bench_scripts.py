"""The prepared bench scripts run end to end at toy sizes (their figures are the
benches' business; here only that they run and print what they promise)."""

import json
import os
import subprocess
import sys

import pytest

from tests.conftest import ROOT


@pytest.mark.slow  # an end-to-end run of bench/scale.py in a fresh process (20 s)
def test_gpu_script_dry_run_on_cpu(tmp_path):
    # bench/gpu.sh is meant for one call of the device tool when a GPU is lent;
    # ALLOW_CPU=1 runs its steps on the CPU backend so the script cannot rot.
    env = {**os.environ, "ALLOW_CPU": "1", "OUT": str(tmp_path), "PY": sys.executable,
           "N_CENTERS": "50", "EXACT_MAX": "400", "PEER_MAX": "400", "REPEATS": "1",
           "EVIDENCE_CENTERS": "0"}
    proc = subprocess.run(["bash", "bench/gpu.sh", "400"], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    rows = [json.loads(line) for line in
            (tmp_path / "scale_gpu.jsonl").read_text().splitlines()]
    size = next(r for r in rows if r.get("m") == 400)
    assert size["n_centers"] == 50 and size["dtype"] == "float64"
    # Falkon at M = 50 against the exact solve and scikit-learn's Nystroem + Ridge
    # on the same centres: the same estimator up to the CG tolerance.
    assert abs(size["loss_vs_sklearn"]) < 1e-3
    assert "exact_loss" in size
    assert (tmp_path / "gpu_log.txt").read_text().count('"m": 400') >= 1
