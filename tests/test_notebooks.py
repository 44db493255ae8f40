"""Every notebook in notebooks/ is stored with the outputs of a full run, shows
its figures, writes its model out, and executes with tiny sample counts.

The notebooks are committed with their outputs (as NumPyro stores its examples):
the documentation site renders those outputs without executing anything
(``nb_execution_mode = "off"`` in docs/conf.py), so the stored outputs must be
clean: every code cell executed, figures present, no error, no stderr stream
(warnings, XLA log lines, progress bars). Re-executing a notebook is marked
``notebooks`` and left out of the default run (``addopts`` in pyproject.toml);
it runs each notebook in a fresh kernel with ``BAYESKDE_QUICK=1`` (tiny sample
counts) under the suite's precision:
``python -m pytest -n 0 -m notebooks tests/test_notebooks.py``.
"""

import os
import re
import time
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

NOTEBOOKS = sorted((Path(__file__).resolve().parents[1] / "notebooks").glob("*.ipynb"))

# XLA's C++ log records ("E1203 12:00:00.000000 1234 file.cc:56] ...") and
# Python warnings as the warnings module prints them
_LOG_LINE = re.compile(r"^[EWIF]\d{4} \d\d:\d\d:\d\d\.\d+\s+\d+ \S+:\d+\]", re.M)
_WARNING = re.compile(r"\b\w*Warning: ")


def _code_outputs(nb):
    return [o for c in nb.cells if c.cell_type == "code" for o in c.outputs]


def _text(output) -> str:
    if output.output_type == "stream":
        return output.text
    data = output.get("data", {})
    return str(data.get("text/plain", "")) + str(data.get("text/html", ""))


def _problems(nb) -> list[str]:
    """Errors, stderr streams, warnings and XLA log lines among the outputs."""
    found = []
    for out in _code_outputs(nb):
        if out.output_type == "error":
            found.append(f"error: {out.ename}: {out.evalue}")
        elif out.output_type == "stream" and out.name == "stderr":
            found.append(f"stderr: {out.text[:200]!r}")
        text = _text(out)
        if _LOG_LINE.search(text):
            found.append(f"XLA log line: {_LOG_LINE.search(text).group(0)!r}")
        if _WARNING.search(text):
            found.append(f"warning: {text[:200]!r}")
    return found


def _has_figure(nb) -> bool:
    return any("image/png" in o.get("data", {}) for o in _code_outputs(nb))


def test_there_are_notebooks():
    names = {p.stem for p in NOTEBOOKS}
    assert {"mcmc_inference", "svi_inference", "posterior_diagnostics",
            "hyperparameter_learning", "bayesian_hmm_meanmap",
            "kernel_structure"} <= names


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_is_stored_with_clean_outputs(path):
    """A full run's outputs are stored: every code cell executed in order, the
    figures inline, and nothing a reader would take for a failure."""
    nb = nbformat.read(path, as_version=4)
    code = [c for c in nb.cells if c.cell_type == "code"]
    counts = [c.execution_count for c in code]
    assert None not in counts, f"{path.name}: cells without a stored run"
    assert counts == list(range(1, len(code) + 1)), (
        f"{path.name}: not one run from the top (execution counts {counts})")
    assert _has_figure(nb), f"{path.name}: no figure stored"
    assert not _problems(nb), f"{path.name}: {_problems(nb)}"
    # a full run (recorded by the run in the metadata), not the quick one
    sources = "\n".join(c.source for c in code)
    assert "BAYESKDE_QUICK" in sources, f"{path.name}: does not read BAYESKDE_QUICK"
    assert nb.metadata.get("bayeskde_run", {}).get("quick") is False, (
        f"{path.name}: stored outputs are not marked as a full run")


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_writes_its_model_out(path):
    """Every notebook teaches: narrative cells and the model written as math."""
    nb = nbformat.read(path, as_version=4)
    text = "\n".join(c.source for c in nb.cells if c.cell_type == "markdown")
    assert nb.cells[0].cell_type == "markdown" and nb.cells[0].source.startswith("# ")
    assert "$$" in text, f"{path.name}: the model is not written out"
    n_md = sum(c.cell_type == "markdown" for c in nb.cells)
    assert n_md >= 4, f"{path.name}: {n_md} markdown cells, too little narrative"


@pytest.mark.notebooks
@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_executes_cleanly(path, tmp_path, monkeypatch):
    nb = nbformat.read(path, as_version=4)
    monkeypatch.setenv("BAYESKDE_QUICK", "1")
    # The kernel is a fresh process: keep the precision the suite runs under.
    monkeypatch.setenv("JAX_ENABLE_X64", os.environ.get("JAX_ENABLE_X64", "0"))
    client = NotebookClient(
        nb, timeout=600, kernel_name="python3",
        resources={"metadata": {"path": str(tmp_path)}},
    )
    start = time.perf_counter()
    client.execute()
    seconds = time.perf_counter() - start
    print(f"{path.stem}: executed in {seconds:.1f} s (BAYESKDE_QUICK=1)")
    assert not _problems(nb), f"{path.name}: {_problems(nb)}"
    # the rendered page shows figures (inline PNGs), not files written elsewhere
    assert _has_figure(nb), f"{path.name}: no figure shown"
