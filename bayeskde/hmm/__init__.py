"""Hidden Markov models: exact inference, emissions, Baum-Welch learning.

Inference (:mod:`.inference`) works on arrays: ``log_initial`` ``(N,)``,
``log_transition`` ``(N, N)`` and ``log_likelihoods`` ``(T, N)``; emissions
(:mod:`.emissions`) turn parameters and observations into those log likelihoods;
learning (:mod:`.learning`) pads batches of variable-length sequences and fits HMMs
by EM with restarts.
"""

from .batch import batch_posteriors as batch_posteriors
from .batch import pad_sequences as pad_sequences
from .emissions import CategoricalEmission as CategoricalEmission
from .emissions import GaussianEmission as GaussianEmission
from .emissions import categorical_log_likelihoods as categorical_log_likelihoods
from .emissions import emission_log_likelihoods as emission_log_likelihoods
from .emissions import gaussian_log_likelihoods as gaussian_log_likelihoods
from .inference import HMMFilter as HMMFilter
from .inference import HMMPosterior as HMMPosterior
from .inference import forward_backward as forward_backward
from .inference import forward_filter as forward_filter
from .inference import viterbi as viterbi
from .learning import FitResult as FitResult
from .learning import fit_hmm as fit_hmm
from .params import HMMParams as HMMParams
from .params import HMMSample as HMMSample
from .params import sample_hmm as sample_hmm
from .sharded import sharded_hmm_posteriors as sharded_hmm_posteriors

__all__ = [
    "CategoricalEmission",
    "GaussianEmission",
    "categorical_log_likelihoods",
    "gaussian_log_likelihoods",
    "emission_log_likelihoods",
    "HMMFilter",
    "HMMPosterior",
    "forward_backward",
    "forward_filter",
    "viterbi",
    "FitResult",
    "HMMParams",
    "HMMSample",
    "batch_posteriors",
    "fit_hmm",
    "pad_sequences",
    "sample_hmm",
    "sharded_hmm_posteriors",
]
