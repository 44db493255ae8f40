"""Pure Gram-matrix functions and kernel-matrix algebra."""

from .algebra import alignment as alignment
from .algebra import center_cross_kernel as center_cross_kernel
from .algebra import center_diagonal as center_diagonal
from .algebra import center_kernel as center_kernel
from .algebra import centered_alignment as centered_alignment
from .algebra import distance_to_kernel as distance_to_kernel
from .algebra import frobenius as frobenius
from .algebra import hsic as hsic
from .algebra import hsic_stacks as hsic_stacks
from .algebra import kernel_distances as kernel_distances
from .algebra import kernel_rbf_map as kernel_rbf_map
from .algebra import median_heuristic as median_heuristic
from .algebra import normalize_kernel as normalize_kernel
from .composable import ChangePoint as ChangePoint
from .composable import Constant as Constant
from .composable import Linear as Linear
from .composable import Periodic as Periodic
from .composable import RationalQuadratic as RationalQuadratic
from .composable import SquaredExponential as SquaredExponential
from .composable import WhiteNoise as WhiteNoise
from .hyper import gaussian_hyperkernel as gaussian_hyperkernel
from .hyper import gaussian_hyperkernel_gram as gaussian_hyperkernel_gram
from .hyper import harmonic_hyperkernel as harmonic_hyperkernel
from .hyper import harmonic_hyperkernel_gram as harmonic_hyperkernel_gram
from .hyper import wishart_hyperkernel as wishart_hyperkernel
from .hyper import wishart_hyperkernel_gram as wishart_hyperkernel_gram
from .polynomial_transform import (
    PolynomialKernelTransform as PolynomialKernelTransform,
)
from .registry import KERNEL_NAMES as KERNEL_NAMES
from .registry import Kernel as Kernel
from .registry import make_kernel as make_kernel
from .standard import delta_kernel as delta_kernel
from .standard import gamma_to_sigma as gamma_to_sigma
from .standard import linear_kernel as linear_kernel
from .standard import median_gamma as median_gamma
from .standard import polynomial_kernel as polynomial_kernel
from .standard import rbf_kernel as rbf_kernel
from .standard import regression_kernel as regression_kernel
from .standard import sigma_to_gamma as sigma_to_gamma
from .standard import squared_distances as squared_distances
from .strings import encode_strings as encode_strings
from .strings import subsequence_diag as subsequence_diag
from .strings import subsequence_kernel as subsequence_kernel
from .transforms import PSDProjection as PSDProjection
from .transforms import TransformResult as TransformResult
from .transforms import apply_transform as apply_transform
from .transforms import fit_polynomial_transform as fit_polynomial_transform
from .transforms import hsic_matrix as hsic_matrix
from .transforms import polynomial_basis as polynomial_basis
from .transforms import psd_projection as psd_projection
from .windows import WindowMap as WindowMap
from .windows import fit_window_map as fit_window_map
from .windows import window_mean_embedding as window_mean_embedding
from .windows import window_mean_map_gram as window_mean_map_gram

__all__ = [
    "alignment",
    "center_cross_kernel",
    "center_diagonal",
    "center_kernel",
    "centered_alignment",
    "distance_to_kernel",
    "frobenius",
    "hsic",
    "hsic_stacks",
    "kernel_distances",
    "kernel_rbf_map",
    "median_heuristic",
    "median_gamma",
    "normalize_kernel",
    "delta_kernel",
    "gamma_to_sigma",
    "linear_kernel",
    "polynomial_kernel",
    "rbf_kernel",
    "regression_kernel",
    "sigma_to_gamma",
    "squared_distances",
    "gaussian_hyperkernel",
    "gaussian_hyperkernel_gram",
    "harmonic_hyperkernel",
    "harmonic_hyperkernel_gram",
    "wishart_hyperkernel",
    "wishart_hyperkernel_gram",
    "KERNEL_NAMES",
    "Kernel",
    "make_kernel",
    "encode_strings",
    "subsequence_diag",
    "subsequence_kernel",
    "PolynomialKernelTransform",
    "PSDProjection",
    "TransformResult",
    "apply_transform",
    "fit_polynomial_transform",
    "hsic_matrix",
    "polynomial_basis",
    "psd_projection",
    "WindowMap",
    "fit_window_map",
    "window_mean_embedding",
    "window_mean_map_gram",
    "ChangePoint",
    "Constant",
    "Linear",
    "Periodic",
    "RationalQuadratic",
    "SquaredExponential",
    "WhiteNoise",
]

# The estimator moved from transforms.py to polynomial_transform.py (which imports
# transforms.py); the old attribute path is kept here, without an import cycle.
from . import transforms as _transforms  # noqa: E402

_transforms.PolynomialKernelTransform = PolynomialKernelTransform
