"""NumPyro model functions whose posteriors drive kernel learning."""

from .kde import BayesianKDEPrior as BayesianKDEPrior
from .kde import bayesian_kde_model as bayesian_kde_model
from .kde import kde_bma_features as kde_bma_features
from .kde import scale_free_gp_logpdf as scale_free_gp_logpdf

__all__ = [
    "BayesianKDEPrior",
    "bayesian_kde_model",
    "kde_bma_features",
    "scale_free_gp_logpdf",
]
