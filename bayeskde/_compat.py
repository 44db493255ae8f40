"""Old module paths, kept importable as thin aliases that warn once.

The package was reorganised into subpackages (``kde/``, ``kpca/``, ``tgp/``,
``datasets/``, ``apps/``, ...). Importing an old path such as
``bayeskde.kde_cv`` or ``bayeskde.tgp_core`` still works: a meta-path finder
builds a module holding the public names of the new modules and raises one
:class:`DeprecationWarning` naming the new path. Names that were removed rather
than moved (:data:`REMOVED_NAMES`: models that lost to the one kept for the same
job) raise an ImportError naming the replacement.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import sys
import warnings

__all__ = ["MOVED_MODULES", "REMOVED_NAMES", "removed_name", "warn_moved"]

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
    # Five Bayesian-KDE modules became one (the Gibbs posterior and its
    # spectra); the GP-evidence models they held were removed (REMOVED_NAMES).
    "bayeskde.models.kde_gibbs": ("bayeskde.models.kde",),
    "bayeskde.models.kde_eigen": ("bayeskde.models.kde",),
    "bayeskde.models.kde_grid": ("bayeskde.models.kde",),
    "bayeskde.models.kde_continuous": ("bayeskde.models.kde",),
}

_EVIDENCE_KDE = (
    "the GP-evidence Bayesian KDE lost to the Gibbs posterior on held-out data "
    "and was removed (one model per idea): use bayeskde.models.kde_gibbs_posterior "
    "(with kde_spectra and kde_grid_bma_features for the model average); the old "
    "model survives only as a reference, in bench/kde_evidence.py of the source "
    "tree"
)

#: Public names that were removed, not moved -> why, and what replaces them.
#: Reading one from its old module raises an ImportError saying so.
REMOVED_NAMES = {
    name: _EVIDENCE_KDE for name in (
        "BayesianKDEPrior", "bayesian_kde_model", "kde_bma_features",
        "scale_free_gp_logpdf", "LIKELIHOODS", "bayesian_kde_grid_model",
        "kde_grid_loglik", "kde_grid_log_joint",
    )
}


def removed_name(module: str, name: str) -> Exception:
    """The error for reading ``module.name``: an ImportError naming the
    replacement for a removed public name (so ``from module import name`` shows
    it), else the usual AttributeError."""
    if name in REMOVED_NAMES:
        return ImportError(f"{module}.{name}: {REMOVED_NAMES[name]}", name=module)
    return AttributeError(f"module {module!r} has no attribute {name!r}")

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
        old = module.__name__

        def __getattr__(name):
            raise removed_name(old, name)

        module.__getattr__ = __getattr__


class _AliasFinder(importlib.abc.MetaPathFinder):
    def find_spec(self, fullname, path=None, target=None):
        if fullname not in MOVED_MODULES:
            return None
        return importlib.machinery.ModuleSpec(fullname, _AliasLoader())


def install() -> None:
    """Put the alias finder on ``sys.meta_path`` (once)."""
    if not any(isinstance(f, _AliasFinder) for f in sys.meta_path):
        sys.meta_path.insert(0, _AliasFinder())
