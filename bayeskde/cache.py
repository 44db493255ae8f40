"""Compilation: the opt-in persistent cache, and quicker CPU compile options.

Persistent cache: compiled programs kept on disk.

A fresh Python process compiles every jitted program it calls (a Twin GP
predict, a KDE fit, an HMM smoother: about a second each on CPU). With the cache
on, JAX writes each compiled program to a folder and the next process loads it
instead of compiling. This uses JAX's own persistent compilation cache
(``jax_compilation_cache_dir`` and the ``jax_persistent_cache_*`` options);
bayeskde never turns it on by itself: importing the package changes no global
configuration. ``bayeskde demo`` turns it on (``--no-cache`` turns it off).

Compile options (``quick_jit``, internal). A program that a user meets first in a
fresh process (a KDE fit on a few hundred points) pays more in compilation than
in running: XLA's CPU fusion emitters and its default LLVM optimisation level
spend 0.2-0.4 s on each of the KDE engine's programs. With the classic loop
emitters and ``xla_backend_optimization_level=1`` the same programs compile in
about half the time and run as fast (their work is in LAPACK and matrix-product
library calls, which the options do not touch).

:func:`quick_jit` applies these options per program, only on the CPU backend,
never as global configuration (an option that ``XLA_FLAGS`` sets keeps the
environment's value); if the installed XLA does not know an option, the program
falls back to a plain ``jax.jit`` for the rest of the process.
"""

from __future__ import annotations

import functools
import os
from pathlib import Path

import jax

__all__ = ["default_cache_dir", "enable_compilation_cache"]


def default_cache_dir() -> Path:
    """``$BAYESKDE_CACHE_DIR``, else ``$XDG_CACHE_HOME/bayeskde/jax`` (default
    ``~/.cache/bayeskde/jax``)."""
    env = os.environ.get("BAYESKDE_CACHE_DIR")
    if env:
        return Path(env).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base).expanduser() / "bayeskde" / "jax"


def enable_compilation_cache(
    path: str | os.PathLike | None = None, *, min_compile_time_s: float = 0.0
) -> Path:
    """Turn on JAX's persistent compilation cache in ``path``, for this process.

    Sets ``jax_compilation_cache_dir`` and lowers
    ``jax_persistent_cache_min_compile_time_secs`` (JAX caches only programs that
    took over 1 s to compile by default; bayeskde's first calls are many programs
    of 0.1-1 s each) and ``jax_persistent_cache_min_entry_size_bytes``. Programs
    compiled afterwards are written to ``path`` and read back by later
    processes; a changed jax/jaxlib version, backend, or compiler option gives a
    new key, so stale entries are never used. Safe to call more than once (the
    last path wins).

    Args:
        path: the folder (created if missing); ``None`` is
            :func:`default_cache_dir`.
        min_compile_time_s: cache only programs whose compilation took at least
            this long.

    Returns:
        The cache folder.

    Raises:
        ValueError: if ``min_compile_time_s`` is negative or not finite.

    Examples:
        >>> import tempfile, bayeskde
        >>> folder = bayeskde.enable_compilation_cache(tempfile.mkdtemp())
        >>> folder.is_dir()
        True
    """
    import math

    import jax
    from jax.experimental.compilation_cache import compilation_cache as cc

    t = float(min_compile_time_s)
    if not math.isfinite(t) or t < 0:
        raise ValueError(
            f"min_compile_time_s must be finite and >= 0, got {min_compile_time_s!r}"
        )
    folder = default_cache_dir() if path is None else Path(path).expanduser()
    folder.mkdir(parents=True, exist_ok=True)
    jax.config.update("jax_enable_compilation_cache", True)
    jax.config.update("jax_compilation_cache_dir", str(folder))
    jax.config.update("jax_persistent_cache_min_compile_time_secs", t)
    jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)
    # JAX opens its cache once, at the first compilation; start over so that a
    # process that has compiled already (or changed the path) uses this folder.
    cc.reset_cache()
    return folder


#: XLA options applied by :func:`quick_jit` on the CPU backend.
CPU_COMPILE_OPTIONS = {
    "xla_cpu_use_fusion_emitters": False,
    "xla_backend_optimization_level": 1,
}


def _quick_options() -> dict:
    """:data:`CPU_COMPILE_OPTIONS` less those that ``XLA_FLAGS`` sets: options
    given explicitly in the environment (a test suite compiling everything at
    ``--xla_backend_optimization_level=0``, say) win."""
    flags = os.environ.get("XLA_FLAGS", "")
    return {k: v for k, v in CPU_COMPILE_OPTIONS.items() if f"--{k}=" not in flags}


class _QuickJit:
    def __init__(self, fun, jit_kwargs):
        self._plain = jax.jit(fun, **jit_kwargs)
        self._quick = jax.jit(fun, compiler_options=_quick_options(), **jit_kwargs)
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

    def _cache_size(self):
        """Compiled programs held (both variants), as ``jax.jit``'s."""
        return self._plain._cache_size() + self._quick._cache_size()


def quick_jit(fun=None, **jit_kwargs):
    """``jax.jit(fun, **jit_kwargs)`` compiled with :data:`CPU_COMPILE_OPTIONS` on
    the CPU backend (a decorator, with or without arguments)."""
    if fun is None:
        return lambda f: _QuickJit(f, jit_kwargs)
    return _QuickJit(fun, jit_kwargs)
