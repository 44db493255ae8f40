"""Every notebook in notebooks/ executes (tiny sample counts), shows its figures,
writes its model out and is stored stripped.

Executing the notebooks is marked ``notebooks`` and left out of the default run
(``addopts`` in pyproject.toml): CI executes every notebook twice already, in the
documentation build (Python 3.11, ArviZ 0.23, errors fail the build) and in the
Python 3.12 / ArviZ 1.x job (``pytest -m notebooks``). Run them here with
``python -m pytest -m notebooks tests/test_notebooks.py``.
"""

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
def test_notebook_is_stripped(path):
    nb = nbformat.read(path, as_version=4)
    for cell in nb.cells:
        if cell.cell_type == "code":
            assert not cell.outputs and cell.execution_count is None, (
                f"{path.name}: commit notebooks with outputs stripped"
            )


@pytest.mark.notebooks
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
    outputs = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs]
    assert not [o for o in outputs if o.output_type == "error"]
    # the rendered page shows figures (inline PNGs), not files written elsewhere
    assert any("image/png" in o.get("data", {}) for o in outputs), (
        f"{path.name}: no figure shown"
    )


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_writes_its_model_out(path):
    """Every notebook teaches: narrative cells and the model written as math."""
    nb = nbformat.read(path, as_version=4)
    text = "\n".join(c.source for c in nb.cells if c.cell_type == "markdown")
    assert nb.cells[0].cell_type == "markdown" and nb.cells[0].source.startswith("# ")
    assert "$$" in text, f"{path.name}: the model is not written out"
