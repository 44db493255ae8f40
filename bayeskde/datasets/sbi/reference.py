"""sbibm's reference posteriors (10,000 draws per observation).

:func:`reference_posterior` reads them from the sbibm 1.1.0 wheel, which the
caller downloads (``pip download --no-deps sbibm==1.1.0 -d DIR``); only the
first 1,000 draws of observation 1 of each task ship with bayeskde, for the
tests.
"""

from __future__ import annotations

import bz2
import io
import os
import zipfile
from pathlib import Path

import numpy as np

from ..._validation import check_integer
from .base import DATA_DIR, SBIBM_VERSION, read_csv
from .tasks import check_task_name

__all__ = ["reference_posterior"]

_GET_WHEEL = (f"pip download --no-deps sbibm=={SBIBM_VERSION} -d "
              "~/.cache/bayeskde/sbibm")


def _wheel_in(folder: Path) -> Path | None:
    found = sorted(folder.glob(f"sbibm-{SBIBM_VERSION}-*.whl"))
    return found[0] if found else None


def _read_reference(source, name: str, num_observation: int) -> np.ndarray:
    member = (f"sbibm/tasks/{name}/files/num_observation_{num_observation}/"
              "reference_posterior_samples.csv.bz2")
    path = Path(source).expanduser()
    how = (f"get the wheel with `{_GET_WHEEL}` and pass its path (or that "
           "folder) as source")
    if path.is_dir():
        unpacked = path / member
        if unpacked.is_file():
            raw = unpacked.read_bytes()
        else:
            wheel = _wheel_in(path)
            if wheel is None:
                raise FileNotFoundError(
                    f"no sbibm-{SBIBM_VERSION} wheel and no unpacked {member} in "
                    f"{path}; {how}")
            path = wheel
    if path.is_file():
        try:
            with zipfile.ZipFile(path) as zf:
                raw = zf.read(member)
        except (zipfile.BadZipFile, KeyError) as err:
            raise FileNotFoundError(
                f"{path} is not an sbibm {SBIBM_VERSION} wheel holding {member} "
                f"({err}); {how}") from err
    elif not path.is_dir():
        raise FileNotFoundError(f"sbibm source {path} does not exist; {how}")
    text = bz2.decompress(raw).decode()
    return np.atleast_2d(np.loadtxt(io.StringIO(text), delimiter=",", skiprows=1))


def reference_posterior(name: str, num_observation: int = 1, *, source=None
                        ) -> np.ndarray:
    """sbibm's reference posterior draws ``(n_ref, dim_parameters)`` (float64)
    of observation ``num_observation`` (1..10) of task ``name``.

    Args:
        name: one of :data:`SBI_TASKS`.
        num_observation: 1..10.
        source: ``None``: the 1,000 draws of observation 1 shipped with
            bayeskde (the first 1,000 of sbibm's 10,000). Otherwise a path to
            the sbibm 1.1.0 wheel, to a folder holding it, or to an unpacked
            wheel (a folder with ``sbibm/tasks/...``): all 10,000 draws.

    Raises:
        ValueError: an unknown task or observation number, or
            ``source=None`` with an observation other than 1.
        TypeError: a ``name`` that is not a str, a non-integer
            ``num_observation``, a ``source`` that is not a path.
        FileNotFoundError: ``source`` does not hold the file (the message says
            how to get the wheel: ``pip download --no-deps sbibm==1.1.0 -d
            DIR``).

    Examples:
        >>> reference_posterior("two_moons").shape
        (1000, 2)
    """
    name = check_task_name(name)
    i = check_integer(num_observation, "num_observation", minimum=1, maximum=10)
    if source is None:
        if i != 1:
            raise ValueError(
                f"only observation 1's reference (1,000 draws) ships with "
                f"bayeskde, got num_observation={i}; for the full references "
                f"run `{_GET_WHEEL}` and pass source=<that wheel or folder>")
        return read_csv(DATA_DIR / f"{name}_reference_1.csv")
    if not isinstance(source, str | os.PathLike):
        raise TypeError(f"source must be None or a path (str or os.PathLike) to "
                        f"the sbibm {SBIBM_VERSION} wheel or a folder, got "
                        f"{type(source).__name__} {source!r}")
    return _read_reference(source, name, i)
