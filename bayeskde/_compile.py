"""Jit with CPU compiler options that halve XLA's compile time of small programs.

A program that a user meets first in a fresh process (a KDE fit on a few hundred
points) pays more in compilation than in running: XLA's CPU fusion emitters and
its default LLVM optimisation level spend 0.2-0.4 s on each of the KDE engine's
programs. With the classic loop emitters and ``xla_backend_optimization_level=1``
the same programs compile in about half the time and run as fast (their work is
in LAPACK and matrix-product library calls, which the options do not touch).

:func:`quick_jit` applies these options per program, only on the CPU backend,
never as global configuration; if the installed XLA does not know an option, the
program falls back to a plain ``jax.jit`` for the rest of the process.
"""

from __future__ import annotations

import functools

import jax

__all__ = ["CPU_COMPILE_OPTIONS", "quick_jit"]

#: XLA options applied by :func:`quick_jit` on the CPU backend.
CPU_COMPILE_OPTIONS = {
    "xla_cpu_use_fusion_emitters": False,
    "xla_backend_optimization_level": 1,
}


class _QuickJit:
    def __init__(self, fun, jit_kwargs):
        self._plain = jax.jit(fun, **jit_kwargs)
        self._quick = jax.jit(fun, compiler_options=CPU_COMPILE_OPTIONS, **jit_kwargs)
        self._quick_ok = True
        functools.update_wrapper(self, fun)

    def __call__(self, *args, **kwargs):
        if self._quick_ok and jax.default_backend() == "cpu":
            try:
                return self._quick(*args, **kwargs)
            except jax.errors.JaxRuntimeError as err:
                if "compile option" not in str(err):
                    raise
                self._quick_ok = False
        return self._plain(*args, **kwargs)

    def lower(self, *args, **kwargs):
        return self._plain.lower(*args, **kwargs)


def quick_jit(fun=None, **jit_kwargs):
    """``jax.jit(fun, **jit_kwargs)`` compiled with :data:`CPU_COMPILE_OPTIONS` on
    the CPU backend (a decorator, with or without arguments)."""
    if fun is None:
        return lambda f: _QuickJit(f, jit_kwargs)
    return _QuickJit(fun, jit_kwargs)
