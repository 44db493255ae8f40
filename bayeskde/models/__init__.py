"""NumPyro model functions whose posteriors drive kernel learning.

One model per idea: the Bayesian KDE is the Gibbs posterior of :mod:`.kde`; the
GP-evidence KDE models it replaced were removed (reading one of their names
here raises an ImportError naming the replacement).
"""

from .hmm import BayesianHMMPrior as BayesianHMMPrior
from .hmm import HMMSequences as HMMSequences
from .hmm import bayesian_hmm_model as bayesian_hmm_model
from .hmm import check_hmm_data as check_hmm_data
from .hmm import hmm_sequence_log_likelihoods as hmm_sequence_log_likelihoods
from .hmm_kernels import (
    posterior_generative_mean_map_gram as posterior_generative_mean_map_gram,
)
from .hmm_kernels import (
    posterior_latent_mean_map_gram as posterior_latent_mean_map_gram,
)
from .hmm_relabel import hmm_draws as hmm_draws
from .hmm_relabel import relabel_draws as relabel_draws
from .hmm_relabel import relabel_samples as relabel_samples
from .inverse_gp import InverseGPData as InverseGPData
from .inverse_gp import InverseGPPoint as InverseGPPoint
from .inverse_gp import InverseGPPrior as InverseGPPrior
from .inverse_gp import inverse_gp_log_density as inverse_gp_log_density
from .inverse_gp import inverse_gp_model as inverse_gp_model
from .inverse_gp import inverse_gp_point as inverse_gp_point
from .inverse_gp import inverse_gp_replicate as inverse_gp_replicate
from .inverse_gp import pair_log_evidence as pair_log_evidence
from .inverse_gp import pair_log_evidence_change as pair_log_evidence_change
from .inverse_gp import pair_log_joint as pair_log_joint
from .inverse_gp import prepare_inverse_gp_data as prepare_inverse_gp_data
from .inverse_gp_predictive import InverseGPMixture as InverseGPMixture
from .inverse_gp_predictive import exact_replicates as exact_replicates
from .inverse_gp_predictive import inverse_gp_log_probs as inverse_gp_log_probs
from .inverse_gp_predictive import inverse_gp_mixture as inverse_gp_mixture
from .inverse_gp_predictive import mixture_log_likelihood as mixture_log_likelihood
from .inverse_gp_predictive import (
    mixture_log_likelihood_each as mixture_log_likelihood_each,
)
from .kde import BayesianKDEGridPrior as BayesianKDEGridPrior
from .kde import KDEGibbsPosterior as KDEGibbsPosterior
from .kde import KDESpectra as KDESpectra
from .kde import kde_gibbs_posterior as kde_gibbs_posterior
from .kde import kde_grid_bma_features as kde_grid_bma_features
from .kde import kde_grid_loo_losses as kde_grid_loo_losses
from .kde import kde_spectra as kde_spectra
from .kde import n_components_for_variance as n_components_for_variance
from .kernel_hyper import KernelHyperData as KernelHyperData
from .kernel_hyper import KernelHyperPrior as KernelHyperPrior
from .kernel_hyper import default_kernel_hyper_prior as default_kernel_hyper_prior
from .kernel_hyper import degree_terms as degree_terms
from .kernel_hyper import kernel_hyper_model as kernel_hyper_model
from .kernel_hyper import loo_log_likelihood as loo_log_likelihood
from .kernel_hyper import posterior_predictive_draw as posterior_predictive_draw
from .kernel_hyper import prepare_kernel_hyper_data as prepare_kernel_hyper_data
from .simulators import simulate_categorical_hmm as simulate_categorical_hmm
from .simulators import simulate_kernel_gp_part as simulate_kernel_gp_part
from .tgp import TGPEnergyBatch as TGPEnergyBatch
from .tgp import batch_energy as batch_energy
from .tgp import point_energy as point_energy
from .tgp import tgp_energy_batch as tgp_energy_batch
from .tgp import tgp_predictive_model as tgp_predictive_model

__all__ = [
    "InverseGPData",
    "InverseGPPrior",
    "inverse_gp_log_probs",
    "InverseGPMixture",
    "inverse_gp_mixture",
    "mixture_log_likelihood",
    "mixture_log_likelihood_each",
    "inverse_gp_model",
    "inverse_gp_replicate",
    "exact_replicates",
    "pair_log_evidence",
    "pair_log_evidence_change",
    "pair_log_joint",
    "inverse_gp_log_density",
    "inverse_gp_point",
    "InverseGPPoint",
    "prepare_inverse_gp_data",
    "KernelHyperData",
    "KernelHyperPrior",
    "default_kernel_hyper_prior",
    "degree_terms",
    "kernel_hyper_model",
    "posterior_predictive_draw",
    "loo_log_likelihood",
    "prepare_kernel_hyper_data",
    "TGPEnergyBatch",
    "batch_energy",
    "point_energy",
    "tgp_energy_batch",
    "tgp_predictive_model",
    "BayesianHMMPrior",
    "HMMSequences",
    "check_hmm_data",
    "hmm_sequence_log_likelihoods",
    "bayesian_hmm_model",
    "hmm_draws",
    "relabel_draws",
    "relabel_samples",
    "posterior_latent_mean_map_gram",
    "posterior_generative_mean_map_gram",
    "BayesianKDEGridPrior",
    "KDESpectra",
    "kde_grid_bma_features",
    "KDEGibbsPosterior",
    "kde_gibbs_posterior",
    "kde_grid_loo_losses",
    "kde_spectra",
    "n_components_for_variance",
    "simulate_kernel_gp_part",
    "simulate_categorical_hmm",
]


def __getattr__(name):
    from .._compat import removed_name

    raise removed_name(__name__, name)
