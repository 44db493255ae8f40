"""Low-rank and blocked kernel computation for large m.

Exact kernel methods cost O(m^3) time and O(m^2) memory. This package holds the
paths that avoid both:

- :mod:`.blocked`: products with a Gram matrix, its diagonal and column means, one
  block of rows at a time (never the m x m matrix);
- :mod:`.features`: Nystroem features with uniform, k-means++ or ridge-leverage
  centres, and random Fourier features for the RBF kernel;
- :mod:`.krr`: kernel ridge regression on the Nystroem subspace, direct or by
  Falkon's preconditioned conjugate gradients, streaming blocks of K_nM;
- :mod:`.sharded`: a Gram with its rows sharded over devices.

Kernel PCA by Nystroem and by a randomised eigensolver is in
:mod:`bayeskde.kpca.approximate`.

:class:`bayeskde.KernelDependencyEstimator` (``solver=``) and
:class:`bayeskde.KernelPCA` (``eigensolver=``) select these paths by a parameter.
"""

from .blocked import LOWRANK_KERNELS as LOWRANK_KERNELS
from .blocked import blocked_col_means as blocked_col_means
from .blocked import blocked_diag as blocked_diag
from .blocked import blocked_gram as blocked_gram
from .blocked import blocked_matmul as blocked_matmul
from .blocked import blocked_rmatmul as blocked_rmatmul
from .features import CENTER_METHODS as CENTER_METHODS
from .features import NystroemMap as NystroemMap
from .features import RFFMap as RFFMap
from .features import fourier_features as fourier_features
from .features import nystroem_features as nystroem_features
from .features import nystroem_transform as nystroem_transform
from .features import rff_frequencies as rff_frequencies
from .features import rff_map as rff_map
from .features import rff_transform as rff_transform
from .features import select_centers as select_centers
from .krr import KRRFit as KRRFit
from .krr import falkon as falkon
from .krr import krr_predict as krr_predict
from .krr import nystroem_krr as nystroem_krr
from .sharded import sharded_gram as sharded_gram

__all__ = [
    "LOWRANK_KERNELS",
    "blocked_col_means",
    "blocked_diag",
    "blocked_gram",
    "blocked_matmul",
    "blocked_rmatmul",
    "CENTER_METHODS",
    "NystroemMap",
    "RFFMap",
    "nystroem_features",
    "nystroem_transform",
    "fourier_features",
    "rff_frequencies",
    "rff_map",
    "rff_transform",
    "select_centers",
    "KRRFit",
    "falkon",
    "krr_predict",
    "nystroem_krr",
    "sharded_gram",
]
