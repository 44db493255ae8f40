"""Bayesian workflows: fit the kernel models, MAP and model-averaged predictors.

- :mod:`.kernel_hyper`: the kernel hyperparameter posterior, Twin GPs and KDEs
  from its draws, and the Twin GP predictive distribution.
- :mod:`.inverse_gp`: the generative inverse model (a GP on the forward map,
  inverted by Bayes' rule) and its multimodal predictive.
- :mod:`.quadrature`: the inverse model's posterior by per-pair adaptive
  quadrature (independent draws, no chains).
- :mod:`.modes`: top-k modes of a predictive with their masses, and of the
  tempered Twin GP predictive (:func:`tgp_modes`; re-exported from the core,
  :mod:`bayeskde.tgp.modes`, as is :func:`calibrate_temperature`).
"""

from .inverse_gp import InverseGPFit as InverseGPFit
from .inverse_gp import InverseGPPredictive as InverseGPPredictive
from .inverse_gp import InverseGPRegressor as InverseGPRegressor
from .inverse_gp import fit_inverse_gp as fit_inverse_gp
from .inverse_gp import inverse_gp_predictive as inverse_gp_predictive
from .inverse_gp import inverse_gp_sample as inverse_gp_sample
from .inverse_predictive import OutputPrior as OutputPrior
from .inverse_predictive import resolve_output_prior as resolve_output_prior
from .kernel_hyper import KernelHyperFit as KernelHyperFit
from .kernel_hyper import TGPPredictive as TGPPredictive
from .kernel_hyper import bma_kde_predict as bma_kde_predict
from .kernel_hyper import bma_tgp_predict as bma_tgp_predict
from .kernel_hyper import calibrate_temperature as calibrate_temperature
from .kernel_hyper import fit_kernel_hyper as fit_kernel_hyper
from .kernel_hyper import sample_bma_tgp_predictive as sample_bma_tgp_predictive
from .kernel_hyper import sample_tgp_predictive as sample_tgp_predictive
from .kernel_hyper import tgp_grid_log_probs as tgp_grid_log_probs
from .kernel_hyper import twin_gp_from_params as twin_gp_from_params
from .modes import Modes as Modes
from .modes import tgp_modes as tgp_modes
from .modes import top_k_modes as top_k_modes
from .quadrature import QuadraturePosterior as QuadraturePosterior
from .quadrature import QuadratureReport as QuadratureReport
from .quadrature import quadrature_posterior as quadrature_posterior

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
    "tgp_grid_log_probs",
    "InverseGPFit",
    "fit_inverse_gp",
    "InverseGPPredictive",
    "inverse_gp_predictive",
    "inverse_gp_sample",
    "OutputPrior",
    "resolve_output_prior",
    "InverseGPRegressor",
    "top_k_modes",
    "Modes",
    "tgp_modes",
    "QuadraturePosterior",
    "QuadratureReport",
    "quadrature_posterior",
]
