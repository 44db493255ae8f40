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

__all__ = [
    "default_cache_dir",
    "enable_compilation_cache",
    "host_fingerprint",
    "quiet_cache_logs",
]


def host_fingerprint() -> str:
    """A short hash of this host's CPU (architecture, model name and feature
    flags, from ``/proc/cpuinfo`` where there is one) and of the jaxlib
    version. XLA's CPU executables are compiled for the host's instruction
    set, and JAX's cache key does not include it: an executable loaded on a
    CPU that lacks an instruction it uses dies of SIGILL. Keying the cache
    folder by this fingerprint keeps each CPU type to its own entries (a home
    folder shared by machines of different CPUs is then safe)."""
    import hashlib
    import platform

    import jaxlib

    parts = [platform.machine(), platform.processor(), jaxlib.__version__]
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                key = line.split(":", 1)[0].strip()
                if key in ("model name", "flags", "Features", "CPU part"):
                    parts.append(line.strip())
                if not line.strip() and len(parts) > 3:
                    break  # the first processor describes the others
    except OSError:
        pass
    return hashlib.sha1("\n".join(parts).encode()).hexdigest()[:12]


def default_cache_dir() -> Path:
    """``$BAYESKDE_CACHE_DIR``, else ``$XDG_CACHE_HOME/bayeskde/jax`` (default
    ``~/.cache/bayeskde/jax``), with a subfolder per :func:`host_fingerprint`."""
    env = os.environ.get("BAYESKDE_CACHE_DIR")
    if env:
        base = Path(env).expanduser()
    else:
        home = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
        base = Path(home).expanduser() / "bayeskde" / "jax"
    return base / host_fingerprint()


#: Lines XLA's C++ runtime writes to the stderr file descriptor each time it
#: loads a program from the persistent cache, none of them an error: JAX does not
#: version executables (a W line per program), and the AOT loader compares the
#: compile-time target's tuning pseudo-features (``+prefer-no-gather``,
#: ``+prefer-no-scatter``: scheduling hints, not instructions) with the host's
#: instruction set, which never lists them (an E line "could lead to ... SIGILL"
#: per program, on the very machine that compiled it; the folder is keyed by
#: :func:`host_fingerprint`, so no other CPU ever reads these entries).
BENIGN_CACHE_LOG = (
    "] Assume version compatibility. PjRt-IFRT does not track XLA executable",
    "] Loading XLA:CPU AOT result. Target machine feature +prefer-no-",
)


class quiet_cache_logs:
    """Context manager: drop the :data:`BENIGN_CACHE_LOG` lines from the
    process's stderr file descriptor and pass everything else through, in
    order (a thread relays a pipe put in place of fd 2; progress bars' partial
    lines go through at once). Only those two messages are dropped: any other
    XLA warning or error still shows. A no-op where fd 2 cannot be replaced."""

    def __enter__(self):
        import sys
        import threading

        try:
            sys.stderr.flush()
            self._saved = os.dup(2)
            r, w = os.pipe()
        except OSError:
            self._saved = None
            return self
        os.dup2(w, 2)
        os.close(w)
        self._thread = threading.Thread(target=self._relay, args=(r,), daemon=True)
        self._thread.start()
        return self

    def _relay(self, r):
        out = self._saved
        buf = b""
        while True:
            chunk = os.read(r, 65536)
            if not chunk:
                break
            buf += chunk
            *lines, buf = buf.split(b"\n")
            keep = [ln for ln in lines
                    if not any(p.encode() in ln for p in BENIGN_CACHE_LOG)]
            data = b"".join(ln + b"\n" for ln in keep)
            # a partial line that cannot be a log record (a progress bar's
            # carriage-return update) goes through now
            if buf and buf[:1] not in (b"W", b"E", b"I"):
                data, buf = data + buf, b""
            if data:
                os.write(out, data)
        if buf:
            os.write(out, buf)
        os.close(r)

    def __exit__(self, *exc):
        import sys

        if self._saved is None:
            return False
        sys.stderr.flush()
        os.dup2(self._saved, 2)  # closes the pipe's last write end
        self._thread.join(timeout=5)
        os.close(self._saved)
        return False


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
