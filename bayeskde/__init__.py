"""bayeskde: Bayesian kernel learning for structured prediction on JAX and NumPyro.

Subpackages, bottom to top: ``kernels`` (kernel definitions and algebra),
``lowrank`` (blocked Grams, Nystroem, random features, Falkon), ``kpca``,
``kde``, ``tgp``, ``hmm``, ``meanmap``, ``hyperlearn``; the Bayesian layer
``models`` (NumPyro models), ``infer`` (NUTS/SVI, ArviZ) and ``learn``
(workflows); ``datasets`` and ``apps`` (the command-line programs).
"""

from . import hmm as hmm
from . import kernels as kernels
from . import lowrank as lowrank
from . import meanmap as meanmap
from .cache import enable_compilation_cache as enable_compilation_cache
from .hyperlearn import HyperkernelLearner as HyperkernelLearner
from .hyperlearn import LearnedKernel as LearnedKernel
from .kde import KernelDependencyEstimator as KernelDependencyEstimator
from .kde import KernelDependencyEstimatorCV as KernelDependencyEstimatorCV
from .kde import KNNDependencyEstimator as KNNDependencyEstimator
from .kernels import PolynomialKernelTransform as PolynomialKernelTransform
from .kpca import KernelPCA as KernelPCA
from .learn import InverseGPRegressor as InverseGPRegressor
from .meanmap import SequenceKernelClassifier as SequenceKernelClassifier
from .tgp import TwinGP as TwinGP

__version__ = "0.1.0"

__all__ = [
    "enable_compilation_cache",
    "hmm",
    "kernels",
    "lowrank",
    "meanmap",
    "KernelDependencyEstimator",
    "KernelDependencyEstimatorCV",
    "KNNDependencyEstimator",
    "KernelPCA",
    "InverseGPRegressor",
    "PolynomialKernelTransform",
    "HyperkernelLearner",
    "LearnedKernel",
    "TwinGP",
    "SequenceKernelClassifier",
]
