"""Input checks shared by every public entry point.

Each check raises a ``ValueError`` or ``TypeError`` that names the argument, what was
expected and what was given. Nothing here mutates its input: arrays are copied to
fresh NumPy/JAX arrays before anything else touches them.
"""

from __future__ import annotations

import numbers
import warnings
from collections.abc import Sequence

import jax.numpy as jnp
import numpy as np

from ._typing import float_dtype as _float_dtype

__all__ = [
    "as_float_array",
    "check_data",
    "check_gram",
    "check_positive",
    "check_nonnegative",
    "check_integer",
    "check_same_length",
    "is_string_data",
    "num_samples",
    "warn_once",
]

_WARNED: set[str] = set()


def warn_once(message: str, category: type[Warning] = RuntimeWarning) -> None:
    """Emit ``message`` once per process (ill-conditioning notices and the like)."""
    if message not in _WARNED:
        _WARNED.add(message)
        warnings.warn(message, category, stacklevel=3)


def is_string_data(data) -> bool:
    """True when ``data`` is a non-array sequence whose items are all ``str``."""
    if isinstance(data, str):
        return False
    if isinstance(data, np.ndarray | jnp.ndarray):
        return data.dtype.kind in ("U", "S", "O") and all(
            isinstance(s, str) for s in np.asarray(data).ravel()
        )
    return isinstance(data, Sequence) and all(isinstance(s, str) for s in data)


def num_samples(data) -> int:
    """Number of objects in ``data`` (rows of an array or items of a list)."""
    if isinstance(data, np.ndarray | jnp.ndarray):
        return int(data.shape[0]) if data.ndim else 0
    return len(data)




def as_float_array(x, name: str, *, ndim: int | None = None, allow_empty=False):
    """Convert ``x`` to a finite floating JAX array of the configured precision.

    Args:
        x: array-like.
        name: the argument's name, used in error messages.
        ndim: required number of dimensions, or ``None`` for any.
        allow_empty: whether a zero-size array is acceptable.

    Raises:
        TypeError: if ``x`` is not numeric.
        ValueError: on the wrong number of dimensions, empty input or NaN/inf.
    """
    try:
        arr = np.asarray(x)
    except Exception as err:  # ragged lists and the like
        raise TypeError(f"{name} must be array-like, got {type(x).__name__}") from err
    if arr.dtype.kind not in "biuf":
        raise TypeError(
            f"{name} must hold numbers, got an array of dtype {arr.dtype}"
        )
    if ndim is not None and arr.ndim != ndim:
        raise ValueError(
            f"{name} must be {ndim}-dimensional, got shape {arr.shape}"
        )
    if not allow_empty and arr.size == 0:
        raise ValueError(f"{name} is empty (shape {arr.shape}); need at least one")
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{name} contains NaN or inf")
    return jnp.asarray(arr, dtype=_float_dtype())


def check_gram(K, name: str, *, what: str = "a square Gram matrix"):
    """A finite, square 2-D float array (a Gram or precomputed kernel matrix).

    Raises:
        TypeError: if ``K`` is not numeric.
        ValueError: if ``K`` is not 2-D and square, is empty or holds NaN/inf.
    """
    K = as_float_array(K, name, ndim=2)
    if K.shape[0] != K.shape[1]:
        raise ValueError(f"{name} must be {what}, got shape {K.shape}")
    return K


def check_data(data, name: str, *, min_samples: int = 1):
    """Validate a data set: a 1-D/2-D numeric array or a list of strings.

    A 1-D numeric array is treated as one feature per sample (shape ``(n, 1)``).
    Returns a JAX float array of shape ``(n, d)`` or a tuple of strings.

    Raises:
        TypeError: for data that is neither numeric nor a list of strings.
        ValueError: for empty data, NaN/inf, or more than two dimensions.
    """
    if data is None:
        raise ValueError(f"{name} is None; expected an array or a list of strings")
    if isinstance(data, str):
        raise TypeError(
            f"{name} must be a list of strings or an array, got a single str"
        )
    if is_string_data(data):
        strings = tuple(str(s) for s in (np.asarray(data).ravel() if isinstance(
            data, np.ndarray) else data))
        if len(strings) < min_samples:
            raise ValueError(
                f"{name} needs at least {min_samples} strings, got {len(strings)}"
            )
        return strings
    arr = np.asarray(data) if not isinstance(data, jnp.ndarray) else data
    if getattr(arr, "ndim", 0) == 1:
        arr = arr[:, None]
    out = as_float_array(arr, name, ndim=2, allow_empty=True)
    if out.shape[0] < min_samples or out.shape[1] == 0:
        raise ValueError(
            f"{name} needs at least {min_samples} samples with at least one feature, "
            f"got shape {out.shape}"
        )
    return out


def check_same_length(a, b, name_a: str, name_b: str) -> None:
    """Raise if ``a`` and ``b`` hold different numbers of samples."""
    na, nb = num_samples(a), num_samples(b)
    if na != nb:
        raise ValueError(
            f"{name_a} and {name_b} must have the same number of samples, "
            f"got {na} and {nb}"
        )


def _check_real(value, name):
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        try:
            value = float(np.asarray(value))
        except Exception as err:
            raise TypeError(f"{name} must be a real number, got {value!r}") from err
    value = float(value)
    if not np.isfinite(value):
        raise ValueError(f"{name} must be finite, got {value}")
    return value


def check_positive(value, name: str) -> float:
    """Return ``value`` as a float, raising unless it is finite and > 0."""
    value = _check_real(value, name)
    if value <= 0:
        raise ValueError(f"{name} must be > 0, got {value}")
    return value


def check_nonnegative(value, name: str) -> float:
    """Return ``value`` as a float, raising unless it is finite and >= 0."""
    value = _check_real(value, name)
    if value < 0:
        raise ValueError(f"{name} must be >= 0, got {value}")
    return value


def check_integer(value, name: str, *, minimum: int = 1, maximum=None) -> int:
    """Return ``value`` as an int in ``[minimum, maximum]`` or raise."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{name} must be an integer, got {value!r}")
    value = int(value)
    if value < minimum or (maximum is not None and value > maximum):
        hi = "" if maximum is None else f" and <= {maximum}"
        raise ValueError(f"{name} must be >= {minimum}{hi}, got {value}")
    return value
