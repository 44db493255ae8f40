"""Inference runners and every ArviZ call of the package.

- :mod:`.samplers`: multi-chain NUTS and SVI (NumPyro), failed-chain screen;
- :mod:`.diagnostics`: inference data (ArviZ 0.23
  InferenceData or ArviZ 1.x DataTree), convergence reports, LOO, plots, PSIS
  weights (the one module that calls ArviZ);
- :mod:`.sbc`: simulation-based calibration (Talts et al. 2018).
"""

from .diagnostics import ARVIZ_MAJOR as ARVIZ_MAJOR
from .diagnostics import ConvergenceReport as ConvergenceReport
from .diagnostics import LOOResult as LOOResult
from .diagnostics import check_convergence as check_convergence
from .diagnostics import compare_models as compare_models
from .diagnostics import convergence_report as convergence_report
from .diagnostics import group_names as group_names
from .diagnostics import load_inference_data as load_inference_data
from .diagnostics import loo as loo
from .diagnostics import plot_pit as plot_pit
from .diagnostics import plot_posterior as plot_posterior
from .diagnostics import plot_ppc as plot_ppc
from .diagnostics import plot_rank as plot_rank
from .diagnostics import plot_trace as plot_trace
from .diagnostics import psis_log_weights as psis_log_weights
from .diagnostics import save_inference_data as save_inference_data
from .diagnostics import summary as summary
from .diagnostics import to_inference_data as to_inference_data
from .samplers import SVIFit as SVIFit
from .samplers import drop_failed_chains as drop_failed_chains
from .samplers import run_nuts as run_nuts
from .samplers import run_svi as run_svi
from .sbc import SBCECDFBand as SBCECDFBand
from .sbc import SBCResult as SBCResult
from .sbc import replicated_nuts as replicated_nuts
from .sbc import sbc_ecdf_band as sbc_ecdf_band
from .sbc import sbc_rank_test as sbc_rank_test

__all__ = [
    "run_nuts",
    "run_svi",
    "SVIFit",
    "to_inference_data",
    "group_names",
    "ConvergenceReport",
    "convergence_report",
    "check_convergence",
    "summary",
    "compare_models",
    "LOOResult",
    "loo",
    "save_inference_data",
    "load_inference_data",
    "plot_trace",
    "plot_rank",
    "plot_posterior",
    "plot_ppc",
    "plot_pit",
    "psis_log_weights",
    "drop_failed_chains",
    "ARVIZ_MAJOR",
    "SBCResult",
    "sbc_rank_test",
    "SBCECDFBand",
    "sbc_ecdf_band",
    "replicated_nuts",
]
