"""The programs behind the command line and the papers' protocols.

- :mod:`.demo`: ``bayeskde demo``, Bayesian kernel learning on the S-shape;
- :mod:`.strings`: ``bayeskde strings``, Weston et al. (2002) section 4.1;
- :mod:`.protocols`: the paper's grids and nested cross-validation.
"""

from .demo import format_sshape_summary as format_sshape_summary
from .demo import plot_degree_posterior as plot_degree_posterior
from .demo import plot_sshape_demo as plot_sshape_demo
from .demo import run_sshape_demo as run_sshape_demo
from .demo import write_sshape_outputs as write_sshape_outputs
from .protocols import PAPER_RIDGES as PAPER_RIDGES
from .protocols import PAPER_SIGMAS as PAPER_SIGMAS
from .protocols import select_and_predict_kde as select_and_predict_kde
from .protocols import select_and_predict_knn as select_and_predict_knn
from .strings import PAPER_TABLE1 as PAPER_TABLE1
from .strings import format_strings_summary as format_strings_summary
from .strings import mean_se as mean_se
from .strings import plot_strings_experiment as plot_strings_experiment
from .strings import run_strings_experiment as run_strings_experiment

__all__ = [
    "PAPER_SIGMAS",
    "PAPER_RIDGES",
    "select_and_predict_kde",
    "select_and_predict_knn",
    "run_sshape_demo",
    "format_sshape_summary",
    "plot_sshape_demo",
    "plot_degree_posterior",
    "write_sshape_outputs",
    "PAPER_TABLE1",
    "mean_se",
    "run_strings_experiment",
    "format_strings_summary",
    "plot_strings_experiment",
]
