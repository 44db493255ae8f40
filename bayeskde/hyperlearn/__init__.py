"""Kernel learning with hyperkernels (Ong, Smola and Williamson 2005).

- :mod:`.qp`: the hyperkernel QP (conic and linear) and pair labels;
- :mod:`.estimator`: the learned kernel and the :class:`HyperkernelLearner`
  estimator.
"""

from .estimator import HYPERKERNELS as HYPERKERNELS
from .estimator import VARIANTS as VARIANTS
from .estimator import HyperkernelLearner as HyperkernelLearner
from .estimator import HyperkernelQPResult as HyperkernelQPResult
from .estimator import LearnedKernel as LearnedKernel
from .estimator import pair_labels as pair_labels
from .estimator import solve_hyperkernel_qp as solve_hyperkernel_qp

__all__ = [
    "HYPERKERNELS",
    "VARIANTS",
    "HyperkernelQPResult",
    "solve_hyperkernel_qp",
    "pair_labels",
    "LearnedKernel",
    "HyperkernelLearner",
]
