"""bayeskde: Bayesian kernel learning for structured prediction on JAX and NumPyro."""

from . import hmm as hmm
from . import kernels as kernels
from . import lowrank as lowrank
from . import meanmap as meanmap
from .hyperlearn import HyperkernelLearner as HyperkernelLearner
from .hyperlearn import LearnedKernel as LearnedKernel
from .kde import KernelDependencyEstimator as KernelDependencyEstimator
from .kde import KNNDependencyEstimator as KNNDependencyEstimator
from .kde_cv import KernelDependencyEstimatorCV as KernelDependencyEstimatorCV
from .kernels.transforms import PolynomialKernelTransform as PolynomialKernelTransform
from .kpca import KernelPCA as KernelPCA
from .tgp import TwinGP as TwinGP

__version__ = "0.1.0"

__all__ = [
    "hmm",
    "kernels",
    "lowrank",
    "meanmap",
    "KernelDependencyEstimator",
    "KernelDependencyEstimatorCV",
    "KNNDependencyEstimator",
    "KernelPCA",
    "PolynomialKernelTransform",
    "HyperkernelLearner",
    "LearnedKernel",
    "TwinGP",
]
