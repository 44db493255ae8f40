"""Simulation-based-inference tasks of sbibm (Lueckmann et al. 2021), in JAX.

The eight standard tasks of the benchmark "Benchmarking Simulation-Based
Inference" (Lueckmann, Boelts, Greenberg, Goncalves and Macke, AISTATS 2021,
appendix T), reimplemented from their definitions in sbibm 1.1.0's source
(``sbibm/tasks/<task>/task.py``; sbibm is MIT-licensed; nothing of it is
imported: its package imports torch, and its ODE tasks Julia):

- :mod:`.analytic`: :func:`two_moons`, :func:`gaussian_mixture`,
  :func:`gaussian_linear_uniform`, :func:`gaussian_linear`, :func:`slcp`;
- :mod:`.glm`: :func:`bernoulli_glm`;
- :mod:`.ode`: :func:`sir`, :func:`lotka_volterra` (ODEs solved by SciPy behind
  ``jax.pure_callback``: ``jit``/``vmap`` but not ``grad``);
- :mod:`.base`: the :class:`SBITask` record and :class:`SBIPairs`;
- :mod:`.tasks`: :data:`SBI_TASKS`, :func:`sbi_task`, :func:`make_sbi_pairs`;
- :mod:`.reference`: :func:`reference_posterior`.

Each is an :class:`SBITask`: its prior as a NumPyro distribution (and as a
box), ``simulate(key, theta)``, the exact ``log_likelihood(theta, x)``, and
sbibm's 10 observations with the parameters that generated them (shipped with
attribution in ``bayeskde/datasets/data/sbibm/``). :func:`make_sbi_pairs`
draws a simulation budget (theta from the prior, x from the simulator).

Randomness comes only from an explicit ``jax.random`` key, the first
positional argument: the same key gives the same draws (in a given precision).
"""

from .analytic import gaussian_linear as gaussian_linear
from .analytic import gaussian_linear_uniform as gaussian_linear_uniform
from .analytic import gaussian_mixture as gaussian_mixture
from .analytic import slcp as slcp
from .analytic import two_moons as two_moons
from .base import SBIBM_VERSION as SBIBM_VERSION
from .base import SBIPairs as SBIPairs
from .base import SBITask as SBITask
from .glm import bernoulli_glm as bernoulli_glm
from .ode import lotka_volterra as lotka_volterra
from .ode import sir as sir
from .reference import reference_posterior as reference_posterior
from .tasks import SBI_TASKS as SBI_TASKS
from .tasks import make_sbi_pairs as make_sbi_pairs
from .tasks import sbi_task as sbi_task

__all__ = [
    "SBI_TASKS",
    "SBIBM_VERSION",
    "SBITask",
    "SBIPairs",
    "two_moons",
    "gaussian_mixture",
    "gaussian_linear_uniform",
    "gaussian_linear",
    "slcp",
    "bernoulli_glm",
    "sir",
    "lotka_volterra",
    "sbi_task",
    "make_sbi_pairs",
    "reference_posterior",
]
