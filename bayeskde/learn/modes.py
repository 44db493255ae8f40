"""Top-k modes of predictive distributions, with their masses.

A multimodal predictive (an inverse problem's branches, a pose's mirror
images) is summarised by a few hypotheses with probabilities instead of one
averaged point. :func:`top_k_modes` works on any weighted candidate set: a grid
with a density times cell volume, or importance-weighted draws;
:func:`tgp_modes` summarises the tempered Twin GP predictive.

Both live below this layer, so that the core packages use them without
importing the Bayesian layer: :func:`top_k_modes` in ``bayeskde._modes``,
:class:`Modes` and :func:`tgp_modes` in :mod:`bayeskde.tgp.modes` (also the
estimator method :meth:`bayeskde.tgp.TwinGP.predict_modes`). They are
re-exported here unchanged.
"""

from __future__ import annotations

from .._modes import top_k_modes as top_k_modes
from ..tgp.modes import Modes as Modes
from ..tgp.modes import tgp_modes as tgp_modes

__all__ = ["top_k_modes", "Modes", "tgp_modes"]
