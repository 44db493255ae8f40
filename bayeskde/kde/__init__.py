"""Kernel Dependency Estimation (Weston et al. 2002).

- :mod:`.core`: output KPCA + one ridge solve onto all components, on Grams;
- :mod:`.preimage`: candidate, linear and fixed-point pre-images;
- :mod:`.base`: what the two dependency estimators share;
- :mod:`.padded`: the exact estimator's compiled programs on size buckets;
- :mod:`.memo`: the bounded memo of output kernel PCAs (``clear_memo``);
- :mod:`.cv`: k-fold CV that reuses one eigendecomposition per (width, fold);
- :mod:`.estimators`: :class:`KernelDependencyEstimator`,
  :class:`KNNDependencyEstimator` and :class:`KernelDependencyEstimatorCV`.
"""

from . import memo as memo
from .core import KDEFit as KDEFit
from .core import LowRankKDEFit as LowRankKDEFit
from .core import fit_kde as fit_kde
from .core import kernel_loss as kernel_loss
from .core import predict_kde_features as predict_kde_features
from .core import ridge_solve as ridge_solve
from .core import ridge_solve_padded as ridge_solve_padded
from .cv import CVResult as CVResult
from .cv import KernelDependencyEstimatorCV as KernelDependencyEstimatorCV
from .cv import input_gram_grid as input_gram_grid
from .cv import kde_cv_losses as kde_cv_losses
from .cv import kfold_indices as kfold_indices
from .cv import knn_cv_losses as knn_cv_losses
from .cv import loss_matrix_from_kernel as loss_matrix_from_kernel
from .estimators import SOLVERS as SOLVERS
from .estimators import KernelDependencyEstimator as KernelDependencyEstimator
from .estimators import KNNDependencyEstimator as KNNDependencyEstimator
from .memo import clear_memo as clear_memo
from .preimage import FixedPointResult as FixedPointResult
from .preimage import feature_weights as feature_weights
from .preimage import fixed_point_preimage as fixed_point_preimage
from .preimage import linear_preimage as linear_preimage
from .preimage import nearest_candidates as nearest_candidates

__all__ = [
    "KDEFit",
    "LowRankKDEFit",
    "fit_kde",
    "predict_kde_features",
    "ridge_solve",
    "ridge_solve_padded",
    "clear_memo",
    "kernel_loss",
    "nearest_candidates",
    "feature_weights",
    "linear_preimage",
    "fixed_point_preimage",
    "FixedPointResult",
    "CVResult",
    "kde_cv_losses",
    "knn_cv_losses",
    "loss_matrix_from_kernel",
    "kfold_indices",
    "input_gram_grid",
    "KernelDependencyEstimatorCV",
    "SOLVERS",
    "KernelDependencyEstimator",
    "KNNDependencyEstimator",
]
