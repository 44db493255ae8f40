"""UCR/UEA archive problems from ``.ts`` files, offline.

:func:`load_ucr` reads a problem's fixed ``TRAIN`` or ``TEST`` split with
:func:`bayeskde.datasets.read_ts` from, in this order, a folder the caller names,
the files shipped with bayeskde (ItalyPowerDemand, see
``bayeskde/datasets/data/ItalyPowerDemand/README.md`` for its source), or the
``.ts`` files inside an installed ``aeon`` package (ACSF1, ArrowHead,
BasicMotions, GunPoint, ItalyPowerDemand, OSULeaf, ...), found without importing
aeon. Nothing is downloaded.

:func:`ts_to_array` turns the ragged cases into one padded ``(n, T_max, d)``
array with their lengths, or an equal-length ``(n, T, d)`` array as it is.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import NamedTuple

import numpy as np

from ..kernels.sequence import pad_series
from .sequences import TsDataset, read_ts

__all__ = ["UcrSplit", "load_ucr", "ucr_problems", "ts_to_array"]

_SHIPPED = Path(__file__).parent / "data"
_SPLITS = ("train", "test")


class UcrSplit(NamedTuple):
    """One split of a UCR/UEA problem.

    Attributes:
        X: list of ``(T_i, d)`` float64 arrays (``d = 1`` for univariate problems).
        y: ``(n,)`` string class labels as they appear in the file.
        name: the problem's name.
        path: the file read.
    """

    X: list
    y: np.ndarray
    name: str
    path: Path


def _aeon_data_dir() -> Path | None:
    spec = importlib.util.find_spec("aeon")
    if spec is None or not spec.submodule_search_locations:
        return None
    folder = Path(list(spec.submodule_search_locations)[0]) / "datasets" / "data"
    return folder if folder.is_dir() else None


def _folders(extract_path):
    if extract_path is not None:
        return [Path(extract_path)]
    folders = [_SHIPPED]
    aeon = _aeon_data_dir()
    if aeon is not None:
        folders.append(aeon)
    return folders


def ucr_problems(extract_path: str | Path | None = None) -> list[str]:
    """Names of the problems with both ``.ts`` splits in the searched folders."""
    names = set()
    for folder in _folders(extract_path):
        for train in folder.glob("*/*_TRAIN.ts"):
            if (train.parent / train.name.replace("_TRAIN", "_TEST")).is_file():
                names.add(train.parent.name)
    return sorted(names)


def load_ucr(
    name: str, split: str = "train", *, extract_path: str | Path | None = None
) -> UcrSplit:
    """Read the fixed ``split`` (``"train"`` or ``"test"``) of problem ``name``.

    Args:
        name: the problem, e.g. ``"ItalyPowerDemand"`` (case as in the archive).
        split: ``"train"`` or ``"test"``.
        extract_path: a folder holding ``<name>/<name>_TRAIN.ts``; default: the
            shipped files, then an installed aeon's.

    Returns:
        :class:`UcrSplit`.

    Raises:
        ValueError: an unknown split, a problem not found (the message lists the
            folders searched), or a file without class labels.

    Examples:
        >>> tr = load_ucr("ItalyPowerDemand", "train")
        >>> len(tr.X), tr.X[0].shape, sorted(set(tr.y.tolist()))
        (67, (24, 1), ['1', '2'])
    """
    if not isinstance(name, str) or not name or "/" in name or "\\" in name:
        raise ValueError(
            f"name must be a problem name such as 'GunPoint', got {name!r}")
    if not isinstance(split, str) or split.lower() not in _SPLITS:
        raise ValueError(f"split must be 'train' or 'test', got {split!r}")
    fname = f"{name}_{split.upper()}.ts"
    searched = _folders(extract_path)
    for folder in searched:
        path = folder / name / fname
        if path.is_file():
            break
    else:
        raise ValueError(
            f"no {fname} under {', '.join(str(f) for f in searched)}; install "
            f"aeon (pip install 'bayeskde[bench]') or pass extract_path")
    ds: TsDataset = read_ts(path)
    if ds.labels is None or not ds.class_names:
        raise ValueError(f"{path} holds no class labels")
    y = np.asarray(ds.class_names, dtype=object)[ds.labels].astype(str)
    return UcrSplit(list(ds.sequences), y, name, path)


def ts_to_array(X) -> tuple[np.ndarray, np.ndarray]:
    """Pad a list of ``(T_i, d)`` cases into ``(n, T_max, d)`` with lengths
    (:func:`bayeskde.kernels.sequence.pad_series`: each case's last frame is
    repeated, so differences and path increments vanish on the padding).

    Raises:
        ValueError: no cases, an empty or non-finite case, unequal ``d``.
    """
    return pad_series(X)
