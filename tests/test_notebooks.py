"""Every notebook in notebooks/ executes (tiny sample counts) and is stored stripped."""

import os
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

NOTEBOOKS = sorted((Path(__file__).resolve().parents[1] / "notebooks").glob("*.ipynb"))


def test_there_are_notebooks():
    names = {p.stem for p in NOTEBOOKS}
    assert {"mcmc_inference", "svi_inference", "posterior_diagnostics"} <= names


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_is_stripped_and_executes(path, tmp_path, monkeypatch):
    nb = nbformat.read(path, as_version=4)
    for cell in nb.cells:
        if cell.cell_type == "code":
            assert not cell.outputs and cell.execution_count is None, (
                f"{path.name}: commit notebooks with outputs stripped"
            )
    monkeypatch.setenv("BAYESKDE_QUICK", "1")
    # The kernel is a fresh process: keep the precision the suite runs under.
    monkeypatch.setenv("JAX_ENABLE_X64", os.environ.get("JAX_ENABLE_X64", "0"))
    client = NotebookClient(
        nb, timeout=600, kernel_name="python3",
        resources={"metadata": {"path": str(tmp_path)}},
    )
    client.execute()
    errors = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs
              if o.output_type == "error"]
    assert not errors
