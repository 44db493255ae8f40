"""Smoke runs of the reproduction scripts in models/ (their --quick mode)."""

import importlib.util
import json
from pathlib import Path

import pytest

MODELS = Path(__file__).resolve().parents[1] / "models"


def _load(name):
    import sys

    sys.path.insert(0, str(MODELS))
    try:
        spec = importlib.util.spec_from_file_location(name, MODELS / f"{name}.py")
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
    finally:
        sys.path.remove(str(MODELS))
    return mod


@pytest.mark.parametrize(
    "name", ["strings_to_strings", "digits_classification", "digits_reconstruction"]
)
def test_quick_run_writes_json_with_paper_numbers(name, tmp_path, capsys):
    out = tmp_path / f"{name}.json"
    _load(name).main(["--quick", "--out", str(out)])
    res = json.loads(out.read_text())
    assert "paper" in res and res["folds"]
    printed = capsys.readouterr().out
    assert "paper" in printed
