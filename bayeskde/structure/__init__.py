"""The posterior over Gaussian-process kernel structure (issue 42).

A bounded grammar of kernel expressions (sums of products of the composable base
kernels of :mod:`bayeskde.kernels.composable`) with a stated prior, each
structure's parameters integrated by Laplace's method around its modes, the
posterior over structures by exact enumeration, and forecasts as posterior
mixtures.

- :mod:`.grammar`: the terms, the enumerated structures and their prior;
- :mod:`.priors`: the data's scales and the parameters' log-normal priors;
- :mod:`.evidence`: the exact GP evidence, the log joint, Laplace and importance
  sampling;
- :mod:`.posterior`: the fits of every structure and P(S | data);
- :mod:`.predictive`: the mixture forecast and its scores;
- :mod:`.lfo`: the leave-future-out score that chooses the transform of ``y``;
- :mod:`.screen`: the first pass that screens structures on a long series;
- :mod:`.summary`: readable expressions, the table, InferenceData;
- :mod:`.estimator`: :func:`fit_structure_gp` and :class:`StructureGPRegressor`.
"""

from .estimator import MIN_POINTS as MIN_POINTS
from .estimator import TRANSFORMS as TRANSFORMS
from .estimator import StructureGPRegressor as StructureGPRegressor
from .estimator import fit_structure_gp as fit_structure_gp
from .evidence import LagTable as LagTable
from .evidence import gp_log_marginal_likelihood as gp_log_marginal_likelihood
from .evidence import importance_log_evidence as importance_log_evidence
from .evidence import lag_table as lag_table
from .evidence import laplace_log_evidence as laplace_log_evidence
from .evidence import log_joint as log_joint
from .evidence import natural_params as natural_params
from .evidence import noise_floor as noise_floor
from .evidence import structure_gram as structure_gram
from .evidence import structure_kernel as structure_kernel
from .grammar import BASE_KERNELS as BASE_KERNELS
from .grammar import DEFAULT_TERMS as DEFAULT_TERMS
from .grammar import Grammar as Grammar
from .grammar import ParamSpec as ParamSpec
from .grammar import make_grammar as make_grammar
from .grammar import parse_term as parse_term
from .grammar import structure_log_prior as structure_log_prior
from .grammar import term_kernel as term_kernel
from .lfo import LFO_FRACTION as LFO_FRACTION
from .lfo import lfo_horizon as lfo_horizon
from .lfo import lfo_log_score as lfo_log_score
from .posterior import StructurePosterior as StructurePosterior
from .posterior import active_layout as active_layout
from .posterior import periodogram_peaks as periodogram_peaks
from .posterior import structure_posterior as structure_posterior
from .predictive import MixturePredictive as MixturePredictive
from .predictive import mixture_crps as mixture_crps
from .predictive import mixture_log_density as mixture_log_density
from .predictive import mixture_mean as mixture_mean
from .predictive import mixture_predictive as mixture_predictive
from .predictive import mixture_quantiles as mixture_quantiles
from .predictive import mixture_sample as mixture_sample
from .priors import DataScales as DataScales
from .priors import ParameterPrior as ParameterPrior
from .priors import data_scales as data_scales
from .priors import parameter_prior as parameter_prior
from .screen import SCREEN_ABOVE as SCREEN_ABOVE
from .screen import SCREEN_POINTS as SCREEN_POINTS
from .screen import screen_window as screen_window
from .screen import screened_posterior as screened_posterior
from .summary import StructureTable as StructureTable
from .summary import parameter_draws as parameter_draws
from .summary import structure_expression as structure_expression
from .summary import structure_inference_data as structure_inference_data
from .summary import structure_table as structure_table

__all__ = [
    "StructureGPRegressor",
    "fit_structure_gp",
    "MIN_POINTS",
    "TRANSFORMS",
    "LagTable",
    "lag_table",
    "structure_gram",
    "active_layout",
    "gp_log_marginal_likelihood",
    "importance_log_evidence",
    "laplace_log_evidence",
    "log_joint",
    "natural_params",
    "noise_floor",
    "structure_kernel",
    "BASE_KERNELS",
    "DEFAULT_TERMS",
    "Grammar",
    "ParamSpec",
    "make_grammar",
    "parse_term",
    "structure_log_prior",
    "term_kernel",
    "LFO_FRACTION",
    "lfo_horizon",
    "lfo_log_score",
    "StructurePosterior",
    "periodogram_peaks",
    "structure_posterior",
    "MixturePredictive",
    "mixture_crps",
    "mixture_log_density",
    "mixture_mean",
    "mixture_predictive",
    "mixture_quantiles",
    "mixture_sample",
    "SCREEN_ABOVE",
    "SCREEN_POINTS",
    "screen_window",
    "screened_posterior",
    "DataScales",
    "ParameterPrior",
    "data_scales",
    "parameter_prior",
    "StructureTable",
    "parameter_draws",
    "structure_expression",
    "structure_inference_data",
    "structure_table",
]
