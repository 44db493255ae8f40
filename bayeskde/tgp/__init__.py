"""Twin Gaussian Processes (Bo and Sminchisescu 2010).

- :mod:`.energy`: the KL (eq. 14) and HSIC (eq. 19) energies, per-test-point
  states and the batched BFGS minimiser;
- :mod:`.neighbors`: nearest-neighbour search (tree on CPU, blocked top-k);
- :mod:`.baselines`: GP regression and weighted k-NN, the paper's baselines;
- :mod:`.predict`: compiled global, local and sharded predictions;
- :mod:`.batch`: per-test-point energy states of a fitted TwinGP and the
  batched energies E_j(y);
- :mod:`.modes`: the tempered predictive exp(-E(y) / tau): its temperature and
  its top-k modes with their masses;
- :mod:`.estimator`: the :class:`TwinGP` estimator.
"""

from .baselines import cholesky_with_jitter as cholesky_with_jitter
from .baselines import gp_predict as gp_predict
from .baselines import weighted_knn_predict as weighted_knn_predict
from .batch import TGPEnergyBatch as TGPEnergyBatch
from .batch import batch_energy as batch_energy
from .batch import batch_energy_many as batch_energy_many
from .batch import point_energy as point_energy
from .batch import tgp_energy_batch as tgp_energy_batch
from .energy import CRITERIA as CRITERIA
from .energy import HSICState as HSICState
from .energy import KLState as KLState
from .energy import OutputKernel as OutputKernel
from .energy import TGPSolution as TGPSolution
from .energy import hsic_coupling as hsic_coupling
from .energy import tgp_hsic_energy as tgp_hsic_energy
from .energy import tgp_hsic_state as tgp_hsic_state
from .energy import tgp_kl_energy as tgp_kl_energy
from .energy import tgp_kl_state as tgp_kl_state
from .energy import tgp_minimize as tgp_minimize
from .estimator import FORWARD_MODE_MAX_DIM as FORWARD_MODE_MAX_DIM
from .estimator import TwinGP as TwinGP
from .fitting import Whitening as Whitening
from .fitting import linear_init_weights as linear_init_weights
from .fitting import truncated_whitening as truncated_whitening
from .modes import Modes as Modes
from .modes import calibrate_temperature as calibrate_temperature
from .modes import tgp_grid_log_probs as tgp_grid_log_probs
from .modes import tgp_modes as tgp_modes
from .neighbors import DEFAULT_BLOCK_SIZE as DEFAULT_BLOCK_SIZE
from .neighbors import nearest_neighbors as nearest_neighbors
from .neighbors import neighbor_indices as neighbor_indices
from .predict import INITS as INITS
from .predict import tgp_predict_sharded as tgp_predict_sharded

__all__ = [
    "CRITERIA",
    "OutputKernel",
    "KLState",
    "HSICState",
    "TGPSolution",
    "tgp_kl_state",
    "tgp_hsic_state",
    "tgp_kl_energy",
    "tgp_hsic_energy",
    "tgp_minimize",
    "hsic_coupling",
    "Whitening",
    "truncated_whitening",
    "linear_init_weights",
    "DEFAULT_BLOCK_SIZE",
    "nearest_neighbors",
    "neighbor_indices",
    "gp_predict",
    "weighted_knn_predict",
    "cholesky_with_jitter",
    "INITS",
    "tgp_predict_sharded",
    "TGPEnergyBatch",
    "tgp_energy_batch",
    "point_energy",
    "batch_energy",
    "batch_energy_many",
    "Modes",
    "calibrate_temperature",
    "tgp_grid_log_probs",
    "tgp_modes",
    "FORWARD_MODE_MAX_DIM",
    "TwinGP",
]
