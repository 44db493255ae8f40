"""The generative inverse model: a GP on the forward map, inverted by Bayes' rule.

An inverse problem such as the S-shape (predict t from x = t + 0.3 sin(2 pi t)
+ noise) or an arm pose (predict joint angles from markers) is one-to-many from
inputs x to outputs y, but its forward map y -> x is a function. This
subpackage models the forward map with a GP and a density on the outputs,

    x_k = f_k(y) + eps,  f_k ~ GP(0, a^2 phi(K)),  eps ~ N(0, s^2),  k = 1..d_x,
    phi(K) = sum_{i <= d} alpha_i K^(i),  K = exp(-gamma ||y - y'||^2),      (F)

and predicts by Bayes' rule,

    p(y* | x*, D, theta) proportional to p(x* | y*, D, theta) p(y*),          (B)

with p(x* | y*, D, theta) the GP's Gaussian predictive of (F): multimodal in y*
by construction wherever several outputs map to the same input. (F) is a
proper likelihood of all the data (the multi-output GP evidence of X given Y),
so its posterior needs no temperature. Why this model and not the Twin GP's
tempered density: see :mod:`bayeskde.models.tgp` and ``docs/inverse.md``.

Modules, bottom to top: :mod:`.kernel` (phi(K), its weights, the
kept-eigenvalue rule), :mod:`~bayeskde.inverse.lowrank` (HSGP and Nystroem features),
:mod:`.data` (the prior and the spectral precomputation), :mod:`.replicates`,
:mod:`.evidence` (the evidence and the NumPyro model with its observed site),
:mod:`.quadrature`, :mod:`.svi`, :mod:`.rank`, :mod:`.residual` (the residual
noise density), :mod:`.heteroscedastic` (the noise covariance as a function of
the outputs), :mod:`.mixture` (the predictive's components, the one GP
predictive (M) and the one likelihood), :mod:`.evaluators` (its fast
factorisations), :mod:`.output_prior`, :mod:`.importance`, :mod:`.mcmc`,
:mod:`.predictive`, :mod:`.noise` (the forward-noise choice), :mod:`.nuts`,
:mod:`.smc` (tempered SMC and the log evidence), :mod:`.sample`, :mod:`.fit`,
:mod:`.estimator`.
"""

from .data import APPROX as APPROX
from .data import EXACT_MAX_M as EXACT_MAX_M
from .data import InverseGPData as InverseGPData
from .data import InverseGPPrior as InverseGPPrior
from .data import Memo as Memo
from .data import prepare_inverse_gp_data as prepare_inverse_gp_data
from .estimator import InverseGPRegressor as InverseGPRegressor
from .evidence import SpectralGPEvidence as SpectralGPEvidence
from .evidence import inverse_gp_model as inverse_gp_model
from .evidence import pair_log_evidence as pair_log_evidence
from .evidence import pair_log_joint as pair_log_joint
from .fit import InverseGPFit as InverseGPFit
from .fit import fit_inverse_gp as fit_inverse_gp
from .heteroscedastic import HeteroscedasticNoise as HeteroscedasticNoise
from .lowrank import LowRankBasis as LowRankBasis
from .mixture import InverseGPMixture as InverseGPMixture
from .mixture import inverse_gp_mixture as inverse_gp_mixture
from .mixture import mixture_log_likelihood as mixture_log_likelihood
from .mixture import mixture_moments as mixture_moments
from .noise import ForwardNoise as ForwardNoise
from .noise import choose_forward_noise as choose_forward_noise
from .nuts import NUTSReport as NUTSReport
from .nuts import inverse_gp_nuts as inverse_gp_nuts
from .output_prior import OutputPrior as OutputPrior
from .output_prior import resolve_output_prior as resolve_output_prior
from .predictive import InverseGPPredictive as InverseGPPredictive
from .predictive import inverse_gp_predictive as inverse_gp_predictive
from .predictive import predictive_log_density as predictive_log_density
from .quadrature import QuadraturePosterior as QuadraturePosterior
from .quadrature import QuadratureReport as QuadratureReport
from .quadrature import quadrature_posterior as quadrature_posterior
from .rank import RankReport as RankReport
from .residual import ResidualNoise as ResidualNoise
from .sample import inverse_gp_sample as inverse_gp_sample
from .smc import SMCReport as SMCReport
from .smc import inverse_gp_smc as inverse_gp_smc
from .svi import SVIPosterior as SVIPosterior
from .svi import SVIReport as SVIReport
from .svi import svi_posterior as svi_posterior
from .transform import TRANSFORMS as TRANSFORMS
from .transform import InputTransform as InputTransform

__all__ = [
    "InverseGPRegressor",
    "fit_inverse_gp",
    "InverseGPFit",
    "inverse_gp_predictive",
    "InverseGPPredictive",
    "predictive_log_density",
    "inverse_gp_sample",
    "inverse_gp_nuts",
    "NUTSReport",
    "inverse_gp_smc",
    "SMCReport",
    "InverseGPPrior",
    "OutputPrior",
    "resolve_output_prior",
    "ForwardNoise",
    "choose_forward_noise",
    "ResidualNoise",
    "HeteroscedasticNoise",
    "InputTransform",
    "TRANSFORMS",
    "RankReport",
    "QuadratureReport",
    "QuadraturePosterior",
    "quadrature_posterior",
    "SVIReport",
    "SVIPosterior",
    "svi_posterior",
    "InverseGPData",
    "prepare_inverse_gp_data",
    "APPROX",
    "EXACT_MAX_M",
    "Memo",
    "LowRankBasis",
    "inverse_gp_model",
    "SpectralGPEvidence",
    "pair_log_evidence",
    "pair_log_joint",
    "InverseGPMixture",
    "inverse_gp_mixture",
    "mixture_moments",
    "mixture_log_likelihood",
]
