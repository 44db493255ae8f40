"""Kernel PCA: exact, randomised and Nystroem solvers, and the estimator.

- :mod:`.core`: the exact eigendecomposition of a centred Gram (Schölkopf et al.
  1998) as pure functions;
- :mod:`.approximate`: Nystroem and randomised (Halko et al. 2011) kernel PCA on
  blocked Grams;
- :mod:`.estimator`: :class:`KernelPCA`, the scikit-learn facade.
"""

from .approximate import LowRankKPCA as LowRankKPCA
from .approximate import lowrank_kpca_transform as lowrank_kpca_transform
from .approximate import nystroem_kpca as nystroem_kpca
from .approximate import randomized_kpca as randomized_kpca
from .core import KPCAResult as KPCAResult
from .core import kernel_pca as kernel_pca
from .core import kernel_pca_padded as kernel_pca_padded
from .core import kpca_transform as kpca_transform
from .core import kpca_transform_padded as kpca_transform_padded
from .estimator import EIGENSOLVERS as EIGENSOLVERS
from .estimator import KernelPCA as KernelPCA

__all__ = [
    "KPCAResult",
    "kernel_pca",
    "kpca_transform",
    "kernel_pca_padded",
    "kpca_transform_padded",
    "LowRankKPCA",
    "nystroem_kpca",
    "lowrank_kpca_transform",
    "randomized_kpca",
    "EIGENSOLVERS",
    "KernelPCA",
]
