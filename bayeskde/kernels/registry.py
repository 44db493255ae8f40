"""Kernels by name: the small objects estimators hold.

An estimator takes a kernel as a name (``"rbf"``, ``"polynomial"``, ``"linear"``,
``"regression"``, ``"delta"``, ``"string"``, ``"precomputed"``) with a params dict,
or as any callable ``k(A, B)`` returning a ``(len(A), len(B))`` array. This module
resolves that into a :class:`Kernel` with ``gram(A, B)`` and ``diag(A)``.

Every named kernel also accepts ``rbf_sigma``: the RBF map on top of the kernel,
exp(-(k(x,x) + k(y,y) - 2k(x,y)) / (2 sigma^2)) (Weston et al. 2002, section 4.1).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import Any

import jax.numpy as jnp
import numpy as np

from .._typing import float_dtype
from .._validation import (
    as_float_array,
    check_integer,
    check_nonnegative,
    check_positive,
    num_samples,
)
from . import standard as base
from .algebra import _kernel_rbf_map

__all__ = ["Kernel", "make_kernel", "KERNEL_NAMES"]

KERNEL_NAMES = (
    "rbf",
    "polynomial",
    "linear",
    "regression",
    "delta",
    "string",
    "precomputed",
)

_ALLOWED = {
    "rbf": {"gamma", "sigma"},
    "polynomial": {"degree", "coef0"},
    "linear": set(),
    "regression": set(),
    "delta": {"scale"},
    "string": {"r", "lam", "mode", "normalize", "block_size"},
    "precomputed": set(),
}


def _resolve_params(name: str, params: Mapping[str, Any]) -> dict:
    unknown = set(params) - _ALLOWED[name] - {"rbf_sigma"}
    if unknown:
        raise ValueError(
            f"unknown parameter(s) {sorted(unknown)} for kernel {name!r}; allowed: "
            f"{sorted(_ALLOWED[name] | {'rbf_sigma'})}"
        )
    p = dict(params)
    if name == "rbf":
        if "gamma" in p and "sigma" in p:
            raise ValueError("give gamma or sigma for the rbf kernel, not both")
        if "sigma" in p:
            p["gamma"] = base.sigma_to_gamma(p.pop("sigma"))
        p["gamma"] = check_positive(p.get("gamma", 1.0), "gamma")
    elif name == "polynomial":
        p["degree"] = check_integer(p.get("degree", 2), "degree", minimum=1)
        p["coef0"] = check_nonnegative(p.get("coef0", 1.0), "coef0")
    elif name == "delta":
        p["scale"] = check_positive(p.get("scale", 0.5), "scale")
    elif name == "string":
        p["r"] = check_integer(p.get("r", 3), "r", minimum=1)
        lam = check_positive(p.get("lam", 0.5), "lam")
        if lam > 1:
            raise ValueError(f"lam must be in (0, 1], got {lam}")
        p["lam"] = lam
        p.setdefault("mode", "sum")
        if p["mode"] not in ("sum", "exact", "mean"):
            raise ValueError(
                f"mode must be 'sum', 'exact' or 'mean', got {p['mode']!r}"
            )
        p["normalize"] = bool(p.get("normalize", True))
    if "rbf_sigma" in p:
        p["rbf_sigma"] = check_positive(p["rbf_sigma"], "rbf_sigma")
    return p


def _as_vectors(data, name):
    if isinstance(data, tuple | list) and data and isinstance(data[0], str):
        raise TypeError(f"{name}: this kernel needs numeric arrays, got strings")
    X = as_float_array(data, name)
    return X[:, None] if X.ndim == 1 else X


@dataclasses.dataclass(frozen=True)
class Kernel:
    """A resolved kernel: a name, its parameters and a Gram function.

    Attributes:
        name: one of :data:`KERNEL_NAMES` or ``"callable"``.
        params: the resolved parameters (``sigma`` converted to ``gamma``, defaults
            filled in), as stored by estimators.
        fn: for ``"callable"``, the user's function.
    """

    name: str
    params: Mapping[str, Any]
    fn: Callable | None = None

    @property
    def precomputed(self) -> bool:
        return self.name == "precomputed"

    @property
    def is_string(self) -> bool:
        return self.name == "string"

    def _base_gram(self, A, B):
        p = self.params
        if self.name == "string":
            from .strings import subsequence_kernel

            return subsequence_kernel(
                A,
                B,
                **{k: p[k] for k in ("r", "lam", "mode", "normalize", "block_size")
                   if k in p},
            )
        if self.name == "delta":
            return base.delta_kernel(A, B, scale=p["scale"])
        if self.name == "callable":
            K = self.fn(A, A if B is None else B)
            K = as_float_array(K, "the kernel callable's output", ndim=2)
            nb = num_samples(A if B is None else B)
            if K.shape != (num_samples(A), nb):
                raise ValueError(
                    f"the kernel callable returned shape {K.shape}, expected "
                    f"({num_samples(A)}, {nb})"
                )
            return K
        A = _as_vectors(A, "A")
        B = A if B is None else _as_vectors(B, "B")
        if A.shape[1] != B.shape[1]:
            raise ValueError(
                f"A and B must have the same number of features, got {A.shape[1]} "
                f"and {B.shape[1]}"
            )
        spec, theta = base.split_params(self.name, p)
        return base.gram_fn(spec, theta, A, B)

    def _base_diag(self, A):
        p = self.params
        if self.name == "string":
            from .strings import subsequence_diag

            return subsequence_diag(
                A, **{k: p[k] for k in ("r", "lam", "mode", "normalize") if k in p}
            )
        if self.name == "delta":
            return jnp.full((num_samples(A),), p["scale"], float_dtype())
        if self.name == "callable":
            # One 1x1 call per item: callables need not be vectorised.
            return jnp.asarray(
                [float(np.asarray(self.fn(A[i : i + 1], A[i : i + 1]))[0, 0])
                 for i in range(num_samples(A))],
                dtype=float_dtype(),
            )
        spec, theta = base.split_params(self.name, p)
        return base.diag_fn(spec, theta, _as_vectors(A, "A"))

    def gram(self, A, B=None):
        """Gram matrix ``(len(A), len(B))``; ``B=None`` means ``B = A``."""
        if self.precomputed:
            raise TypeError("a precomputed kernel has no Gram function")
        K = self._base_gram(A, B)
        sigma = self.params.get("rbf_sigma")
        if sigma is None:
            return K
        da = self._base_diag(A)
        db = da if B is None else self._base_diag(B)
        return _kernel_rbf_map(K, da, db, sigma)

    __call__ = gram

    def diag(self, A):
        """Self-similarities k(a, a) for each item of ``A``, without the full Gram."""
        if self.precomputed:
            raise TypeError("a precomputed kernel has no diagonal function")
        if "rbf_sigma" in self.params:
            return jnp.ones((num_samples(A),), float_dtype())
        return self._base_diag(A)

    def with_params(self, **updates) -> Kernel:
        """A copy with some parameters replaced (validated again)."""
        if self.name == "callable":
            raise TypeError("a callable kernel has no parameters to update")
        params = dict(self.params)
        if self.name == "rbf" and "sigma" in updates:
            params.pop("gamma", None)  # sigma replaces the stored gamma
        return make_kernel(self.name, {**params, **updates})


def make_kernel(kernel, params: Mapping[str, Any] | None = None) -> Kernel:
    """Resolve a kernel name with its params, or a callable, into a :class:`Kernel`.

    Args:
        kernel: a name from :data:`KERNEL_NAMES`, a callable ``k(A, B)``, or a
            :class:`Kernel` (returned as is when ``params`` is empty).
        params: parameters for a named kernel, e.g. ``{"gamma": 0.5}``.

    Raises:
        ValueError: for an unknown name, unknown parameter or out-of-range value.
        TypeError: for anything that is neither a name nor a callable.

    Examples:
        >>> make_kernel("rbf", {"sigma": 1.0}).params["gamma"]
        0.5
    """
    params = {} if params is None else dict(params)
    if isinstance(kernel, Kernel):
        return kernel if not params else kernel.with_params(**params)
    if isinstance(kernel, str):
        if kernel not in KERNEL_NAMES:
            raise ValueError(
                f"unknown kernel {kernel!r}; choose one of {KERNEL_NAMES} or pass a "
                "callable k(A, B)"
            )
        return Kernel(kernel, _resolve_params(kernel, params))
    if callable(kernel):
        if params:
            raise ValueError("params are only for named kernels, not callables")
        return Kernel("callable", {}, kernel)
    raise TypeError(
        f"kernel must be a name or a callable k(A, B), got {type(kernel).__name__}"
    )
