"""Old module paths, kept importable as thin aliases that warn once.

The package was reorganised into subpackages (``kde/``, ``kpca/``, ``tgp/``,
``datasets/``, ``apps/``, ...). Importing an old path such as
``bayeskde.kde_cv`` or ``bayeskde.tgp_core`` still works: a meta-path finder
builds a module holding the public names of the new modules and raises one
:class:`DeprecationWarning` naming the new path.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import sys
import warnings

__all__ = ["MOVED_MODULES", "warn_moved"]

#: Old module path -> the new modules whose public names it re-exports.
MOVED_MODULES = {
    "bayeskde.kde_cv": ("bayeskde.kde.cv", "bayeskde.apps.protocols"),
    "bayeskde.preimage": ("bayeskde.kde.preimage",),
    "bayeskde.tgp_core": ("bayeskde.tgp.energy", "bayeskde.tgp.fitting"),
    "bayeskde.tgp_neighbors": ("bayeskde.tgp.neighbors",),
    "bayeskde.tgp_baselines": ("bayeskde.tgp.baselines",),
    "bayeskde.sequences": ("bayeskde.datasets.sequences",),
    "bayeskde.sbc": ("bayeskde.infer.sbc", "bayeskde.models.simulators"),
    "bayeskde.demo": ("bayeskde.apps.strings",),
    "bayeskde.sshape_demo": ("bayeskde.apps.demo",),
    "bayeskde.kernels.base": ("bayeskde.kernels.standard",),
    "bayeskde.lowrank.eigen": ("bayeskde.kpca.approximate",),
}

_warned: set[str] = set()


def warn_moved(old: str, new: str) -> None:
    """One :class:`DeprecationWarning` per old name per process."""
    if old in _warned:
        return
    _warned.add(old)
    warnings.warn(
        f"{old} has moved to {new}; the old path will be removed in a future "
        "release",
        DeprecationWarning,
        stacklevel=3,
    )


class _AliasLoader(importlib.abc.Loader):
    def create_module(self, spec):
        return None

    def exec_module(self, module):
        targets = MOVED_MODULES[module.__name__]
        warn_moved(module.__name__, " and ".join(targets))
        names = []
        for target in targets:
            mod = importlib.import_module(target)
            for name in mod.__all__:
                setattr(module, name, getattr(mod, name))
                names.append(name)
        module.__all__ = names
        module.__doc__ = f"Deprecated alias of {' and '.join(targets)}."


class _AliasFinder(importlib.abc.MetaPathFinder):
    def find_spec(self, fullname, path=None, target=None):
        if fullname not in MOVED_MODULES:
            return None
        return importlib.machinery.ModuleSpec(fullname, _AliasLoader())


def install() -> None:
    """Put the alias finder on ``sys.meta_path`` (once)."""
    if not any(isinstance(f, _AliasFinder) for f in sys.meta_path):
        sys.meta_path.insert(0, _AliasFinder())
