"""Shared pieces of the user-level benchmarks (``--user`` in each bench script).

A user meets bayeskde in a fresh Python process, in JAX's default float32 or in
float64, through the public estimators and functions. ``fresh`` runs one
measurement in a new process (so the first call pays every compilation) with
the precision set through ``JAX_ENABLE_X64`` and returns the JSON line it
printed; ``median_of`` repeats it.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def fresh(script: str, args: list[str], precision: int, cache: str | None = None
          ) -> dict:
    """Run ``python script *args`` in a fresh process; its last stdout line as JSON.

    ``cache``: a folder for the persistent compilation cache
    (``bayeskde.enable_compilation_cache``, what ``bayeskde demo`` does), which
    the child turns on before its first call (:func:`maybe_cache`).
    """
    x64 = "1" if precision == 64 else "0"
    env = {**os.environ, "JAX_ENABLE_X64": x64, "BAYESKDE_BENCH_X64": x64,
           "BAYESKDE_BENCH_CACHE": cache or "",
           "PYTHONPATH": os.pathsep.join(
               [ROOT, *filter(None, [os.environ.get("PYTHONPATH")])])}
    proc = subprocess.run([sys.executable, script, *args], env=env, cwd=ROOT,
                          capture_output=True, text=True, timeout=1800)
    if proc.returncode != 0:
        raise RuntimeError(proc.stderr[-3000:])
    return json.loads(proc.stdout.strip().splitlines()[-1])


def bench_x64() -> bool:
    """The precision of a bench process: float64 unless a parent asked for 32."""
    return os.environ.get("BAYESKDE_BENCH_X64", "1") != "0"


def maybe_cache() -> None:
    """In a child: turn the persistent compilation cache on if the parent asked."""
    folder = os.environ.get("BAYESKDE_BENCH_CACHE")
    if folder:
        import bayeskde

        bayeskde.enable_compilation_cache(folder)


def first_with_cache(script: str, args: list[str], precision: int) -> dict:
    """The child's record in a fresh process whose compiled programs are already
    in a persistent cache (one earlier process filled it)."""
    import tempfile

    with tempfile.TemporaryDirectory() as folder:
        fresh(script, args, precision, folder)
        return fresh(script, args, precision, folder)


def timed(fn):
    """(result, wall seconds) of ``fn()``."""
    t0 = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - t0


def medians(records: list[dict]) -> dict:
    """Field-wise median of the numeric fields of ``records``."""
    keys = [k for k, v in records[0].items() if isinstance(v, (int, float))
            and not isinstance(v, bool)]
    return {k: statistics.median(r[k] for r in records) for k in keys}
