"""NumPyro models of the families below the Bayesian layer and their workflows.

One model per idea: the Bayesian KDE is the Gibbs posterior of :mod:`.kde`
(the GP-evidence KDE models it replaced were removed); the Bayesian HMM that
feeds the mean-map kernels (:mod:`.hmm`); the Twin GP's tempered predictive
(:mod:`.tgp`, kept as a reference: it lost to the inverse model). The
generative inverse model has its own subpackage, :mod:`bayeskde.inverse`.
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
from .kde import BayesianKDEGridPrior as BayesianKDEGridPrior
from .kde import KDEGibbsPosterior as KDEGibbsPosterior
from .kde import KDESpectra as KDESpectra
from .kde import kde_gibbs_posterior as kde_gibbs_posterior
from .kde import kde_grid_bma_features as kde_grid_bma_features
from .kde import kde_grid_loo_losses as kde_grid_loo_losses
from .kde import kde_spectra as kde_spectra
from .kde import n_components_for_variance as n_components_for_variance
from .simulators import simulate_categorical_hmm as simulate_categorical_hmm
from .tgp import TGPPredictive as TGPPredictive
from .tgp import sample_tgp_predictive as sample_tgp_predictive
from .tgp import tgp_predictive_model as tgp_predictive_model

__all__ = [
    "tgp_predictive_model",
    "TGPPredictive",
    "sample_tgp_predictive",
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
    "simulate_categorical_hmm",
]
