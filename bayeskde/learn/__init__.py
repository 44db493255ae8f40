"""The stable home of the inverse model's three entry points (DESIGN's stable
names): :class:`InverseGPRegressor`, :func:`fit_inverse_gp` and
:func:`inverse_gp_predictive`, re-exported from :mod:`bayeskde.inverse`,
where the model and the rest of its API live.
"""

from ..inverse import InverseGPRegressor as InverseGPRegressor
from ..inverse import fit_inverse_gp as fit_inverse_gp
from ..inverse import inverse_gp_predictive as inverse_gp_predictive

__all__ = [
    "InverseGPRegressor",
    "fit_inverse_gp",
    "inverse_gp_predictive",
]
