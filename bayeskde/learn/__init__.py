"""Bayesian workflows: fit the kernel models, MAP and model-averaged predictors.

- :mod:`.kernel_hyper`: the kernel hyperparameter posterior, Twin GPs and KDEs
  from its draws, and the Twin GP predictive distribution.
"""

from .kernel_hyper import KernelHyperFit as KernelHyperFit
from .kernel_hyper import TGPPredictive as TGPPredictive
from .kernel_hyper import bma_kde_predict as bma_kde_predict
from .kernel_hyper import bma_tgp_predict as bma_tgp_predict
from .kernel_hyper import calibrate_temperature as calibrate_temperature
from .kernel_hyper import fit_kernel_hyper as fit_kernel_hyper
from .kernel_hyper import sample_bma_tgp_predictive as sample_bma_tgp_predictive
from .kernel_hyper import sample_tgp_predictive as sample_tgp_predictive
from .kernel_hyper import twin_gp_from_params as twin_gp_from_params

__all__ = [
    "KernelHyperFit",
    "fit_kernel_hyper",
    "twin_gp_from_params",
    "bma_tgp_predict",
    "bma_kde_predict",
    "calibrate_temperature",
    "TGPPredictive",
    "sample_tgp_predictive",
    "sample_bma_tgp_predictive",
]
