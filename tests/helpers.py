"""The suite's one testing helper: the precision, tolerances by dtype, compile counts.

Tolerances. ``RTOL``/``ATOL`` are for comparisons of the same algebra against a
float64 reference (scikit-learn, NumPy, brute force): about 1e4 ulps of the working
dtype, so float64 runs are held to 1e-10-ish and float32 runs to 1e-4-ish. Iterative
solvers and Monte Carlo estimates state their own, larger bound next to the test,
derived from the solver's tolerance or the estimator's standard error.

Compilation. :func:`count_compilations` counts XLA backend compilations through JAX's
public monitoring events, so "a second call with the same shapes does not recompile"
is checked through the public function, never through a private jit cache.
"""

from __future__ import annotations

import contextlib

import jax
import jax.numpy as jnp
import numpy as np

__all__ = [
    "X64",
    "DTYPE",
    "EPS",
    "RTOL",
    "ATOL",
    "LOOSE",
    "assert_close",
    "count_compilations",
]

#: Whether the suite runs in float64 (``JAX_ENABLE_X64=1``).
X64 = jnp.zeros(()).dtype == jnp.float64
#: The working float dtype of this run.
DTYPE = np.dtype(jnp.result_type(float))
#: Machine epsilon of the working dtype.
EPS = float(np.finfo(DTYPE).eps)
#: Relative / absolute tolerance for the same algebra against a float64 reference.
RTOL = 1e-10 if X64 else 2e-5
ATOL = 1e-10 if X64 else 2e-5
#: For quantities that pass through an ill-conditioned step (a Cholesky or an
#: eigendecomposition with a small gap): about sqrt(eps).
LOOSE = 1e-7 if X64 else 1e-3


def assert_close(actual, desired, *, rtol: float = RTOL, atol: float = ATOL, **kw):
    """``numpy.testing.assert_allclose`` with the suite's dtype tolerances."""
    np.testing.assert_allclose(np.asarray(actual), np.asarray(desired), rtol=rtol,
                               atol=atol, **kw)


_COMPILE_EVENT = "/jax/core/compile/backend_compile_duration"
_COUNTS = {"compiles": 0}


def _listener(event: str, duration_secs: float, **kwargs) -> None:
    if event == _COMPILE_EVENT:
        _COUNTS["compiles"] += 1


jax.monitoring.register_event_duration_secs_listener(_listener)


class _Counter:
    def __init__(self):
        self._start = _COUNTS["compiles"]
        self._stop = None

    @property
    def count(self) -> int:
        stop = _COUNTS["compiles"] if self._stop is None else self._stop
        return stop - self._start


@contextlib.contextmanager
def count_compilations():
    """Count XLA backend compilations inside the ``with`` block.

    Example::

        f(x)                        # first call compiles
        with count_compilations() as c:
            f(x)                    # same shapes and static arguments
        assert c.count == 0
    """
    counter = _Counter()
    try:
        yield counter
    finally:
        counter._stop = _COUNTS["compiles"]
