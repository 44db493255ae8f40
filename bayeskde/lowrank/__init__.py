"""Low-rank and blocked kernel computation for large m.

Exact kernel methods cost O(m^3) time and O(m^2) memory. This package holds the
paths that avoid both:

- :mod:`.blocked`: products with a Gram matrix, its diagonal and column means, one
  block of rows at a time (never the m x m matrix);
- :mod:`.features`: Nystroem features with uniform, k-means++ or ridge-leverage
  centres, and random Fourier features for the RBF kernel;
- :mod:`.krr`: kernel ridge regression on the Nystroem subspace, direct or by
  Falkon's preconditioned conjugate gradients, streaming blocks of K_nM;
- :mod:`.eigen`: kernel PCA by Nystroem and by a randomised eigensolver.

:class:`bayeskde.KernelDependencyEstimator` (``solver=``) and
:class:`bayeskde.KernelPCA` (``eigensolver=``) select these paths by a parameter.
"""

from .blocked import LOWRANK_KERNELS as LOWRANK_KERNELS
from .blocked import blocked_col_means as blocked_col_means
from .blocked import blocked_diag as blocked_diag
from .blocked import blocked_gram as blocked_gram
from .blocked import blocked_matmul as blocked_matmul
from .blocked import blocked_rmatmul as blocked_rmatmul
from .eigen import LowRankKPCA as LowRankKPCA
from .eigen import lowrank_kpca_transform as lowrank_kpca_transform
from .eigen import nystroem_kpca as nystroem_kpca
from .eigen import randomized_kpca as randomized_kpca
from .features import CENTER_METHODS as CENTER_METHODS
from .features import NystroemMap as NystroemMap
from .features import RFFMap as RFFMap
from .features import nystroem_features as nystroem_features
from .features import nystroem_transform as nystroem_transform
from .features import rff_map as rff_map
from .features import rff_transform as rff_transform
from .features import select_centers as select_centers
from .krr import KRRFit as KRRFit
from .krr import falkon as falkon
from .krr import krr_predict as krr_predict
from .krr import nystroem_krr as nystroem_krr

__all__ = [
    "LOWRANK_KERNELS",
    "blocked_col_means",
    "blocked_diag",
    "blocked_gram",
    "blocked_matmul",
    "blocked_rmatmul",
    "LowRankKPCA",
    "lowrank_kpca_transform",
    "nystroem_kpca",
    "randomized_kpca",
    "CENTER_METHODS",
    "NystroemMap",
    "RFFMap",
    "nystroem_features",
    "nystroem_transform",
    "rff_map",
    "rff_transform",
    "select_centers",
    "KRRFit",
    "falkon",
    "krr_predict",
    "nystroem_krr",
]
