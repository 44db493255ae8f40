"""Empirical, generative and latent mean-map kernels, the probability product
kernel and the Fisher kernel baseline (Mehta and Gray, seed 004)."""

from .classifier import SequenceKernelClassifier as SequenceKernelClassifier
from .closed_forms import categorical_gmmk as categorical_gmmk
from .closed_forms import categorical_ppk as categorical_ppk
from .closed_forms import clique_mean_map_kernel as clique_mean_map_kernel
from .closed_forms import empirical_mean_map_kernel as empirical_mean_map_kernel
from .closed_forms import gaussian_gmmk as gaussian_gmmk
from .closed_forms import gaussian_ppk as gaussian_ppk
from .closed_forms import log_gaussian_gmmk as log_gaussian_gmmk
from .closed_forms import log_gaussian_ppk as log_gaussian_ppk
from .closed_forms import log_hmm_product_kernel as log_hmm_product_kernel
from .closed_forms import mean_map_gram as mean_map_gram
from .closed_forms import sequence_cliques as sequence_cliques
from .closed_forms import symbol_kernel_matrix as symbol_kernel_matrix
from .dtw import dtw_distances as dtw_distances
from .estimator import LatentMeanMapKernel as LatentMeanMapKernel
from .fisher import FisherScores as FisherScores
from .fisher import empirical_fisher_information as empirical_fisher_information
from .fisher import fisher_kernel as fisher_kernel
from .fisher import fisher_scores as fisher_scores
from .fisher import hmm_log_likelihood as hmm_log_likelihood
from .fisher import length_normalised_fisher_kernel as length_normalised_fisher_kernel
from .generative import adapt_hmms as adapt_hmms
from .generative import emission_pair_log_kernel as emission_pair_log_kernel
from .generative import hmm_log_kernel as hmm_log_kernel
from .generative import hmm_log_kernel_gram as hmm_log_kernel_gram
from .generative import log_kernel_normalize as log_kernel_normalize
from .latent import LatentFeatures as LatentFeatures
from .latent import continuous_emission_gram_exact as continuous_emission_gram_exact
from .latent import continuous_latent_features as continuous_latent_features
from .latent import discrete_latent_features as discrete_latent_features
from .latent import lmmk_diag_from_features as lmmk_diag_from_features
from .latent import lmmk_gram_from_features as lmmk_gram_from_features
from .latent import relative_frobenius_error as relative_frobenius_error
from .latent import rff_frequencies as rff_frequencies
from .latent import state_kernel_matrix as state_kernel_matrix
from .latent import taylor_dimension as taylor_dimension
from .latent import taylor_map as taylor_map
from .stacking import StackingWeights as StackingWeights
from .stacking import simplex_grid as simplex_grid
from .stacking import stacking_weights as stacking_weights
from .variational import VariationalHMM as VariationalHMM
from .variational import fit_variational_hmm as fit_variational_hmm
from .variational import mode_weights as mode_weights
from .variational import variational_elbo as variational_elbo
from .variational import variational_posteriors as variational_posteriors

__all__ = [
    "LatentMeanMapKernel",
    "SequenceKernelClassifier",
    "dtw_distances",
    "StackingWeights",
    "simplex_grid",
    "stacking_weights",
    "VariationalHMM",
    "fit_variational_hmm",
    "mode_weights",
    "variational_elbo",
    "variational_posteriors",
    "FisherScores",
    "empirical_fisher_information",
    "fisher_kernel",
    "fisher_scores",
    "hmm_log_likelihood",
    "length_normalised_fisher_kernel",
    "adapt_hmms",
    "emission_pair_log_kernel",
    "hmm_log_kernel",
    "hmm_log_kernel_gram",
    "log_kernel_normalize",
    "categorical_gmmk",
    "categorical_ppk",
    "clique_mean_map_kernel",
    "empirical_mean_map_kernel",
    "gaussian_gmmk",
    "gaussian_ppk",
    "log_gaussian_gmmk",
    "log_gaussian_ppk",
    "log_hmm_product_kernel",
    "mean_map_gram",
    "sequence_cliques",
    "symbol_kernel_matrix",
    "LatentFeatures",
    "continuous_emission_gram_exact",
    "continuous_latent_features",
    "discrete_latent_features",
    "lmmk_diag_from_features",
    "lmmk_gram_from_features",
    "relative_frobenius_error",
    "rff_frequencies",
    "state_kernel_matrix",
    "taylor_dimension",
    "taylor_map",
]
