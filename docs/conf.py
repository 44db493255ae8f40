"""Sphinx configuration of the bayeskde documentation site.

Build (from the repository root, with the ``docs`` extra installed):

    python -m sphinx -W --keep-going -b html docs docs/_build/html

The API reference comes from the docstrings (autodoc + napoleon, Google style);
the tutorials are the notebooks in ``notebooks/``, copied here at build time and
rendered by myst-nb with the outputs stored in them: the notebooks are committed
after a full run (``BAYESKDE_QUICK`` unset), as NumPyro stores its examples, so
the site shows the full-size results and the build executes nothing. The tests
(``tests/test_notebooks.py``) check that the stored outputs are clean and
re-execute every notebook with small sample counts.
"""

import re
import shutil
import sys
from pathlib import Path

DOCS = Path(__file__).resolve().parent
ROOT = DOCS.parent
sys.path.insert(0, str(ROOT))

# The notebooks stay where the tests execute them; the site renders a copy.
_NOTEBOOKS = DOCS / "notebooks"
shutil.rmtree(_NOTEBOOKS, ignore_errors=True)
shutil.copytree(ROOT / "notebooks", _NOTEBOOKS)

project = "bayeskde"
author = "the bayeskde authors"
copyright = "the bayeskde authors, MIT licence"
release = "0.1.0"

extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.napoleon",
    "sphinx.ext.mathjax",
    "sphinx.ext.viewcode",
    "myst_nb",
]
source_suffix = {".rst": "restructuredtext", ".md": "myst-nb", ".ipynb": "myst-nb"}
exclude_patterns = ["_build", "**.ipynb_checkpoints"]

# autodoc: members in each package's __all__, in source order, with signatures
# as written (type hints in the signature, jaxtyping shapes included).
autodoc_default_options = {"members": True, "member-order": "bysource"}
autodoc_typehints = "signature"
autodoc_class_signature = "separated"
autodoc_mock_imports = []
napoleon_google_docstring = True
napoleon_numpy_docstring = False
napoleon_use_ivar = False  # "Attributes:" become attribute entries
napoleon_use_rtype = False

# myst-nb: render the stored outputs of the full runs; never execute.
nb_execution_mode = "off"
nb_merge_streams = True
myst_enable_extensions = ["dollarmath", "amsmath"]

html_theme = "furo"
html_title = "bayeskde"


# The docstrings are written to be read as plain text in a terminal (``help()``)
# as well as here: they use | for norms and determinants, trailing underscores
# for fitted attributes (``gamma_``) and * for products, which reStructuredText
# reads as substitutions, links and emphasis. Escape those characters outside
# literals, roles, math and code blocks, so the page shows what the terminal shows.
_KEEP = re.compile(r"(``.+?``|:[\w:.-]+:`[^`]+`|`[^`]+`_{0,2}|\$[^$\n]+\$)")


def _escape_prose(text: str) -> str:
    parts = _KEEP.split(text)
    for i in range(0, len(parts), 2):
        p = parts[i].replace("|", r"\|")
        p = re.sub(r"(?<=\w)_(?!\w)", r"\\_", p)
        p = re.sub(r"(?<![\\*\w])\*(?=[^\s*])", r"\\*", p)
        parts[i] = p
    return "".join(parts)


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip())


_SECTION = re.compile(r"^\s*(Args|Arguments|Attributes|Parameters|Keyword Args|"
                      r"Other Parameters|Raises|Returns|Yields|Examples?|Notes?|"
                      r"References?):\s*$")
# "name (type): text" items of Args/Attributes: napoleon reads the names itself
_ITEM = re.compile(r"^(\s+[\w*][\w*, ]*(?:\s*\([^)]*\))?:)(\s.*|$)")


def _escape_docstring(app, what, name, obj, options, lines):
    literal_above = None  # indent of the line that opened a literal block
    in_doctest = False
    section = None
    for i, line in enumerate(lines):
        stripped = line.strip()
        if not stripped:
            in_doctest = False
            continue
        if literal_above is not None:
            if _indent(line) > literal_above:
                continue
            literal_above = None
        if stripped.startswith(">>>") or in_doctest:
            in_doctest = True
            continue
        header = _SECTION.match(line)
        if header:
            section = header.group(1)
            continue
        if _indent(line) == 0:
            section = None
        item = _ITEM.match(line) if section in ("Args", "Arguments", "Attributes",
                                                "Parameters", "Keyword Args",
                                                "Other Parameters") else None
        if item:
            lines[i] = item.group(1) + _escape_prose(item.group(2))
        else:
            lines[i] = _escape_prose(line)
        if stripped.endswith("::"):
            literal_above = _indent(line)


def _escape_types(app, what, name, obj, options, lines):
    # napoleon writes attribute annotations (jaxtyping shapes such as
    # "*batch d_y") as ":type:" text, where a leading * opens emphasis
    for i, line in enumerate(lines):
        if line.lstrip().startswith(":type:"):
            lines[i] = re.sub(r"(?<!\\)\*", r"\\*", line)


def _skip_member(app, what, name, obj, skip, options):
    # scikit-learn's generated metadata-routing setters and the fields of
    # NamedTuples (documented in each class's "Attributes:" section) are not API
    # of their own.
    if name.startswith("set_") and name.endswith("_request"):
        return True
    if type(obj).__name__ == "_tuplegetter":
        return True
    return None


def setup(app):
    # before napoleon (priority 500) turns the sections into fields
    app.connect("autodoc-process-docstring", _escape_docstring, priority=400)
    app.connect("autodoc-process-docstring", _escape_types, priority=600)
    app.connect("autodoc-skip-member", _skip_member)
