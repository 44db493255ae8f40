"""Composable covariance functions on a scalar input (time), in tinygp's style.

Each base kernel is a small frozen dataclass whose fields are its parameters
(JAX pytree leaves, so a kernel built from traced values can be jitted, vmapped
and differentiated) and whose :meth:`Kernel.evaluate` holds its formula, written
once. ``k1 + k2`` and ``k1 * k2`` build :class:`Sum` and :class:`Product`;
:class:`ChangePoint` switches between two kernels. The structure search
(:mod:`bayeskde.structure`) composes these objects and never re-derives a formula.

Formulas (``r = t - t'``):

* :class:`Constant`: ``k = c``;
* :class:`WhiteNoise`: ``k = v [t == t']``;
* :class:`SquaredExponential`: ``k = exp(-r^2 / (2 l^2))``
  (Rasmussen and Williams 2006, eq. 4.9);
* :class:`RationalQuadratic`: ``k = (1 + r^2 / (2 alpha l^2))^(-alpha)``
  (Rasmussen and Williams 2006, eq. 4.19);
* :class:`Exponential`: ``k = exp(-|r| / l)``, the Matern-1/2 kernel, the
  covariance of the Ornstein-Uhlenbeck process (Rasmussen and Williams 2006,
  eq. 4.14 with nu = 1/2; section 4.2.1);
* :class:`Periodic`: ``k = exp(-2 sin^2(pi |r| / p) / l^2)`` (MacKay 1998;
  Rasmussen and Williams 2006, eq. 4.31);
* :class:`Linear`: ``k = (t - c)(t' - c)`` (Rasmussen and Williams 2006, eq. 4.11
  with an offset);
* :class:`ChangePoint`: ``k = (1 - s(t))(1 - s(t')) k_1 + s(t) s(t') k_2``,
  ``s(t) = sigmoid((t - location) / steepness)`` (Lloyd et al. 2014, section 3).

Base kernels carry unit scale except :class:`Constant` and :class:`WhiteNoise`; a
variance enters as a product with :class:`Constant` (``Constant(v) * SE(l)``), as
in tinygp and scikit-learn.

A kernel whose value depends on ``t - t'`` alone says so (:attr:`Kernel.stationary`;
sums and products of stationary kernels are stationary) and can be evaluated on
lags (:meth:`Kernel.on_lags`, ``k(r, 0)`` by the same formula): a Gram matrix on a
regular grid has only ``n`` distinct lags, so the structure search evaluates the
formulas ``n`` times and gathers instead of ``n^2`` times.

Cost: a Gram matrix of ``n x m`` inputs is O(n m) per base kernel (formulas are
vmapped over both inputs), O(n m) memory.
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
from jaxtyping import Array, Float

from .._typing import ArrayLike

#: A kernel parameter: a Python float or a scalar array (possibly traced).
Scalar = float | Float[ArrayLike, ""]

__all__ = [
    "Kernel",
    "Sum",
    "Product",
    "Constant",
    "WhiteNoise",
    "SquaredExponential",
    "RationalQuadratic",
    "Exponential",
    "Periodic",
    "Linear",
    "ChangePoint",
]


class Kernel:
    """A covariance function ``k(t, t')`` of scalar inputs.

    Subclasses define :meth:`evaluate` on two scalars; :meth:`__call__` gives the
    Gram matrix and :meth:`diagonal` its diagonal. ``+`` and ``*`` compose.

    Examples:
        >>> import jax.numpy as jnp
        >>> k = Constant(2.0) * SquaredExponential(1.0) + Linear(0.0)
        >>> k(jnp.array([0.0, 1.0])).shape
        (2, 2)
    """

    #: Whether ``k(t, t')`` depends on ``t - t'`` alone (class-level, static).
    stationary: bool = False

    def evaluate(self, t1: Float[Array, ""], t2: Float[Array, ""]) -> Float[Array, ""]:
        """``k(t1, t2)`` for two scalar inputs."""
        raise NotImplementedError

    def on_lags(self, lags: Float[ArrayLike, " num_lags"]) -> Float[Array, " num_lags"]:
        """``k(r, 0)`` for each lag ``r`` of a stationary kernel (its formula,
        evaluated once per lag). O(num_lags).

        Raises:
            TypeError: the kernel is not stationary.
        """
        if not self.stationary:
            raise TypeError(f"{type(self).__name__} is not stationary; evaluate it "
                            "on pairs of times with kernel(t1, t2)")
        lags = jnp.asarray(lags)
        zero = jnp.zeros((), lags.dtype)
        return jax.vmap(self.evaluate, in_axes=(0, None))(lags, zero)

    def __call__(
        self, t1: Float[ArrayLike, " n"], t2: Float[ArrayLike, " m"] | None = None
    ) -> Float[Array, "n m"]:
        """The Gram matrix ``K[i, j] = k(t1[i], t2[j])`` (``t2`` defaults to
        ``t1``). O(n m)."""
        t1 = jnp.asarray(t1)
        t2 = t1 if t2 is None else jnp.asarray(t2)
        row = jax.vmap(self.evaluate, in_axes=(None, 0))
        return jax.vmap(row, in_axes=(0, None))(t1, t2)

    def diagonal(self, t: Float[ArrayLike, " n"]) -> Float[Array, " n"]:
        """``k(t[i], t[i])`` without forming the Gram matrix. O(n)."""
        t = jnp.asarray(t)
        return jax.vmap(self.evaluate)(t, t)

    def __add__(self, other: Kernel) -> Sum:
        return Sum(self, other)

    def __mul__(self, other: Kernel) -> Product:
        return Product(self, other)


def _kernel(cls):
    """Freeze ``cls`` as a dataclass and register it as a pytree (its fields are
    leaves)."""
    cls = dataclasses.dataclass(frozen=True, repr=True, eq=False)(cls)
    return jax.tree_util.register_dataclass(cls)


@_kernel
class Sum(Kernel):
    """``k = k1 + k2``."""

    k1: Kernel
    k2: Kernel

    @property
    def stationary(self) -> bool:
        return self.k1.stationary and self.k2.stationary

    def evaluate(self, t1, t2):
        return self.k1.evaluate(t1, t2) + self.k2.evaluate(t1, t2)


@_kernel
class Product(Kernel):
    """``k = k1 k2`` (a product of PSD kernels is PSD, Schur's theorem)."""

    k1: Kernel
    k2: Kernel

    @property
    def stationary(self) -> bool:
        return self.k1.stationary and self.k2.stationary

    def evaluate(self, t1, t2):
        return self.k1.evaluate(t1, t2) * self.k2.evaluate(t1, t2)


@_kernel
class Constant(Kernel):
    """``k = value`` (a variance when multiplied into another kernel)."""

    value: Scalar
    stationary = True

    def evaluate(self, t1, t2):
        return jnp.asarray(self.value, jnp.result_type(t1, float))


@_kernel
class WhiteNoise(Kernel):
    """``k = variance`` where ``t == t'``, else 0 (independent noise)."""

    variance: Scalar
    stationary = True

    def evaluate(self, t1, t2):
        return jnp.where(t1 == t2, self.variance, 0.0).astype(jnp.result_type(t1))


@_kernel
class SquaredExponential(Kernel):
    """``k = exp(-(t - t')^2 / (2 scale^2))`` (Rasmussen and Williams 2006,
    eq. 4.9)."""

    scale: Scalar
    stationary = True

    def evaluate(self, t1, t2):
        r = (t1 - t2) / self.scale
        return jnp.exp(-0.5 * r * r)


@_kernel
class RationalQuadratic(Kernel):
    """``k = (1 + (t - t')^2 / (2 alpha scale^2))^(-alpha)`` (Rasmussen and
    Williams 2006, eq. 4.19): a scale mixture of squared exponentials."""

    scale: Scalar
    alpha: Scalar
    stationary = True

    def evaluate(self, t1, t2):
        r = (t1 - t2) / self.scale
        return (1.0 + 0.5 * r * r / self.alpha) ** (-self.alpha)


@_kernel
class Exponential(Kernel):
    """``k = exp(-|t - t'| / scale)``: the Matern-1/2 kernel (Rasmussen and
    Williams 2006, eq. 4.14 with nu = 1/2), the covariance of the stationary
    Ornstein-Uhlenbeck process ``df = -f / scale dt + dW``. Its paths are
    continuous and nowhere differentiable, and it is Markov: a forecast depends
    on the last observation alone and reverts to the mean as ``exp(-h /
    scale)``, so a long ``scale`` extrapolates a local level (the random walk's
    forecast, as exponential smoothing's), a short one an AR(1) series."""

    scale: Scalar
    stationary = True

    def evaluate(self, t1, t2):
        return jnp.exp(-jnp.abs(t1 - t2) / self.scale)


@_kernel
class Periodic(Kernel):
    """``k = exp(-2 sin^2(pi |t - t'| / period) / scale^2)`` (Rasmussen and
    Williams 2006, eq. 4.31; scikit-learn's ``ExpSineSquared``); ``scale`` is
    dimensionless (relative to the period)."""

    scale: Scalar
    period: Scalar
    stationary = True

    def evaluate(self, t1, t2):
        s = jnp.sin(jnp.pi * (t1 - t2) / self.period) / self.scale
        return jnp.exp(-2.0 * s * s)


@_kernel
class Linear(Kernel):
    """``k = (t - offset)(t' - offset)`` (Rasmussen and Williams 2006, eq. 4.11,
    with the origin moved to ``offset``)."""

    offset: Scalar

    def evaluate(self, t1, t2):
        return (t1 - self.offset) * (t2 - self.offset)


@_kernel
class ChangePoint(Kernel):
    """``k = (1 - s(t))(1 - s(t')) k1 + s(t) s(t') k2`` with ``s(t) =
    sigmoid((t - location) / steepness)``: ``k1`` before ``location``, ``k2``
    after (Lloyd et al. 2014, section 3); PSD as a sum of products of PSD kernels.
    """

    k1: Kernel
    k2: Kernel
    location: Scalar
    steepness: Scalar

    def evaluate(self, t1, t2):
        s1 = jax.nn.sigmoid((t1 - self.location) / self.steepness)
        s2 = jax.nn.sigmoid((t2 - self.location) / self.steepness)
        return ((1.0 - s1) * (1.0 - s2) * self.k1.evaluate(t1, t2)
                + s1 * s2 * self.k2.evaluate(t1, t2))
