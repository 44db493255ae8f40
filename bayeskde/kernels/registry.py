"""Kernels by name: the small objects estimators hold.

An estimator takes a kernel as a name (``"rbf"``, ``"polynomial"``, ``"linear"``,
``"regression"``, ``"delta"``, ``"string"``, ``"precomputed"``) with a params dict,
or as any callable ``k(A, B)`` returning a ``(len(A), len(B))`` array. This module
resolves that into a :class:`Kernel` with ``gram(A, B)`` and ``diag(A)``.

Every named kernel also accepts ``rbf_sigma``: the RBF map on top of the kernel,
exp(-(k(x,x) + k(y,y) - 2k(x,y)) / (2 sigma^2)) (Weston et al. 2002, section 4.1).

Defaults, and the rule behind each:

- ``rbf``: ``gamma="median"``, the median heuristic
  (:func:`bayeskde.kernels.standard.median_gamma`: gamma = 1 / (2 m^2) with m the
  median distance between distinct training rows). A rate has no natural unit:
  it must follow the data's scale. It is resolved from the training data by
  :meth:`Kernel.fit` (every estimator calls it in ``fit`` and stores the number
  in its fitted kernel's ``params``).
- ``rbf_sigma="median"``: the median feature-space distance of the base kernel
  on the training data, resolved the same way.
- ``polynomial``: ``degree=2``, ``coef0=1`` (the paper's inhomogeneous kernel).
- ``delta``: ``scale=1/2`` (eq. (2): the induced loss is the 0-1 loss).
- ``string``: ``r=3``, ``lam=0.5``, ``mode="mean"``, ``normalize=True``: the
  per-length average of the normalised subsequence kernels, the reading that
  separates the paper's strings (``"sum"`` lets the shortest subsequences
  dominate, see :mod:`bayeskde.kernels.strings`).
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
    check_choice,
    check_data,
    check_finite_result,
    check_integer,
    check_nonnegative,
    check_params_dict,
    check_positive,
    check_squared_range,
    num_samples,
)
from . import standard as base
from .algebra import rbf_map_of_distances

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


MEDIAN = "median"


def _rate(value, name):
    """A positive number, or the string ``"median"`` (resolved at fit)."""
    if isinstance(value, str):
        if value != MEDIAN:
            raise ValueError(f"{name} must be > 0 or 'median', got {value!r}")
        return value
    return check_positive(value, name)


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
            sigma = _rate(p.pop("sigma"), "sigma")
            p["gamma"] = sigma if sigma == MEDIAN else base.sigma_to_gamma(sigma)
        p["gamma"] = _rate(p.get("gamma", MEDIAN), "gamma")
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
        p["mode"] = check_choice(p.get("mode", "mean"), "mode",
                                 ("sum", "exact", "mean"))
        p["normalize"] = check_choice(p.get("normalize", True), "normalize",
                                      (True, False))
        if p.get("block_size") is not None:
            p["block_size"] = check_integer(p["block_size"], "block_size")
    if "rbf_sigma" in p:
        p["rbf_sigma"] = _rate(p["rbf_sigma"], "rbf_sigma")
    return p


def _as_vectors(data, name):
    X = check_data(data, name)
    if isinstance(X, tuple):
        raise TypeError(f"{name}: this kernel needs numeric arrays, got strings")
    return check_squared_range(X, name)


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
    def resolved(self) -> bool:
        """False while a parameter is still ``"median"`` (see :meth:`fit`)."""
        return not any(isinstance(v, str) and v == MEDIAN
                       for v in self.params.values())

    def fit(self, X) -> Kernel:
        """This kernel with every ``"median"`` parameter resolved on data ``X``.

        ``gamma="median"`` becomes :func:`bayeskde.kernels.standard.median_gamma`
        of ``X``; ``rbf_sigma="median"`` the median feature-space distance of the
        base kernel on ``X`` (at most 2000 rows; 1 if all rows coincide). A
        resolved kernel is returned as is. Cost O(min(n, 2000)^2) kernel values.
        """
        if self.resolved:
            return self
        p = dict(self.params)
        if p.get("gamma") == MEDIAN:
            p["gamma"] = base.median_gamma(_as_vectors(X, "X"))
        if p.get("rbf_sigma") == MEDIAN:
            from .algebra import median_heuristic

            inner = Kernel(self.name, {k: v for k, v in p.items()
                                       if k != "rbf_sigma"}, self.fn)
            sub = X[:2000] if not isinstance(X, tuple | list) else list(X)[:2000]
            try:
                p["rbf_sigma"] = median_heuristic(K=inner.gram(sub))
            except ValueError:  # all items coincide in feature space
                p["rbf_sigma"] = 1.0
        return Kernel(self.name, p, self.fn)

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
        if not self.resolved:
            if B is not None:
                raise ValueError(
                    f"the {self.name} kernel's parameters {dict(self.params)} hold "
                    "'median', which is resolved on training data: call "
                    "kernel.fit(X_train) first, or gram(A) to resolve it on A"
                )
            return self.fit(A).gram(A)
        K = self._base_gram(A, B)
        if self.name in base.VECTOR_KERNELS:
            K = check_finite_result(K, "A" if B is None else "A and B",
                                    f"{self.name} Gram")
        sigma = self.params.get("rbf_sigma")
        if sigma is None:
            return K
        da = self._base_diag(A)
        db = da if B is None else self._base_diag(B)
        return rbf_map_of_distances(K, da, db, sigma)

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
        >>> import numpy as np
        >>> make_kernel("rbf").fit(np.array([[0.0], [2.0]])).params["gamma"]
        0.125
    """
    params = check_params_dict(params, "params")
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
