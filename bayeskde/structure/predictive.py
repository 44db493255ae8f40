"""Forecasts as posterior mixtures over structures.

Each component of the structure posterior (a structure and one of its parameter
modes, :mod:`.posterior`) gives a Gaussian process predictive of a new
observation ``y* = f(t*) + eps`` (Rasmussen and Williams 2006, eqs. 2.25-2.26)::

    mean_c = k_*^T (K + s2 I)^{-1} z,   var_c = k_** - k_*^T (K + s2 I)^{-1} k_* + s2,

and the forecast is the mixture ``sum_c w_c N(mean_c, var_c)`` mapped back to the
user's units. Parameters are plugged in at each mode (their Laplace spread is
not propagated into the forecast; the modes themselves are). Scores of the
mixture are exact: the log density by log-sum-exp, the CRPS in closed form
(Grimit et al. 2006, eq. 4)::

    CRPS = sum_c w_c A(mu_c - y, s_c^2) - 1/2 sum_{c,c'} w_c w_c' A(mu_c - mu_c',
           s_c^2 + s_c'^2),   A(m, v) = m (2 Phi(m / sqrt v) - 1) + 2 sqrt(v)
           phi(m / sqrt v),

and quantiles by bisection of the mixture's CDF.

Cost: O(n^3 + n^2 m) per component for ``m`` test points (O(n^2 m + m^3) for
joint draws); components with weight below ``1e-6`` of the largest are dropped
(their mass is renormalised away and reported).
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax.scipy.special import logsumexp
from jax.scipy.stats import norm
from jaxtyping import Array, Float
from scipy.special import ndtr

from .evidence import natural_params, structure_kernel
from .posterior import StructurePosterior

__all__ = [
    "MixturePredictive",
    "mixture_predictive",
    "mixture_mean",
    "mixture_quantiles",
    "mixture_log_density",
    "mixture_crps",
    "mixture_sample",
]

#: Components lighter than this fraction of the heaviest are left out.
MIN_RELATIVE_WEIGHT = 1e-6


class MixturePredictive(NamedTuple):
    """A Gaussian-mixture predictive per test point, in the user's units.

    Attributes:
        weights: ``(num_components,)`` mixture weights (sum to one).
        means: ``(num_components, m)`` component means.
        sds: ``(num_components, m)`` component standard deviations (noise
            included).
        structure: ``(num_components,)`` the structure of each component.
        dropped_mass: posterior mass of the components left out.
    """

    weights: np.ndarray
    means: np.ndarray
    sds: np.ndarray
    structure: np.ndarray
    dropped_mass: float


def _kept(post: StructurePosterior):
    w = np.exp(post.component_log_weight)
    keep = w >= MIN_RELATIVE_WEIGHT * w.max()
    return keep, float(w[~keep].sum())


@functools.partial(jax.jit, static_argnames=("terms", "positive", "floor", "joint"))
def _component(u, mask, tau, z, tau_new, *, terms, positive, floor, joint):
    theta = natural_params(u, positive)
    kernel, noise = structure_kernel(terms, theta, mask)
    n = tau.shape[0]
    L = jnp.linalg.cholesky(kernel(tau) + (noise + floor) * jnp.eye(n, dtype=z.dtype))
    Ks = kernel(tau, tau_new)
    alpha = jax.scipy.linalg.cho_solve((L, True), z)
    V = jax.scipy.linalg.solve_triangular(L, Ks, lower=True)
    mean = Ks.T @ alpha
    if joint:
        m = tau_new.shape[0]
        cov = kernel(tau_new) - V.T @ V + (noise + floor) * jnp.eye(m, dtype=z.dtype)
        return mean, cov
    var = kernel.diagonal(tau_new) - jnp.sum(V * V, axis=0) + noise + floor
    return mean, var


def _components(post, tau_new, joint):
    keep, dropped = _kept(post)
    g = post.grammar
    dtype = post.z.dtype
    out = []
    for s, u in zip(post.component_structure[keep], post.component_u[keep],
                    strict=True):
        out.append(_component(
            jnp.asarray(u, dtype), jnp.asarray(g.masks[s], dtype), post.tau, post.z,
            jnp.asarray(tau_new, dtype), terms=g.terms,
            positive=tuple(bool(b) for b in g.param_positive), floor=post.floor,
            joint=joint))
    w = np.exp(post.component_log_weight[keep])
    return out, w / w.sum(), post.component_structure[keep], dropped


def _to_tau(post, t_new):
    sc = post.scales
    return (np.asarray(t_new, np.float64) - sc.t_min) / sc.span


def mixture_predictive(post: StructurePosterior, t_new) -> MixturePredictive:
    """The marginal predictive mixture of ``y(t_new)`` (module docstring).

    Args:
        post: from :func:`~bayeskde.structure.structure_posterior`.
        t_new: ``(m,)`` times in the user's units.

    Returns:
        A :class:`MixturePredictive`. O(C (n^3 + n^2 m)) for ``C`` components.
    """
    comps, w, structure, dropped = _components(post, _to_tau(post, t_new), False)
    sc = post.scales
    means = np.stack([np.asarray(m, np.float64) for m, _ in comps])
    var = np.stack([np.asarray(v, np.float64) for _, v in comps])
    sds = np.sqrt(np.maximum(var, post.floor))
    return MixturePredictive(w, sc.y_mean + sc.y_sd * means, sc.y_sd * sds,
                             structure, dropped)


def mixture_mean(pred: MixturePredictive) -> np.ndarray:
    """``(m,)`` the posterior-averaged mean ``sum_c w_c mean_c``."""
    return pred.weights @ pred.means


def mixture_quantiles(pred: MixturePredictive, q) -> np.ndarray:
    """``(len(q), m)`` quantiles of the mixture by 80 bisection steps of its CDF
    (exact to ``2^-80`` of the bracket, far below float64's resolution)."""
    q = np.atleast_1d(np.asarray(q, np.float64))
    lo = np.min(pred.means - 10 * pred.sds, axis=0)
    hi = np.max(pred.means + 10 * pred.sds, axis=0)
    lo = np.broadcast_to(lo, (q.size,) + lo.shape).copy()
    hi = np.broadcast_to(hi, (q.size,) + hi.shape).copy()
    for _ in range(80):
        mid = 0.5 * (lo + hi)
        cdf = np.einsum("c,qcm->qm", pred.weights,
                        ndtr((mid[:, None, :] - pred.means[None]) / pred.sds[None]))
        below = cdf < q[:, None]
        lo = np.where(below, mid, lo)
        hi = np.where(below, hi, mid)
    return 0.5 * (lo + hi)


def mixture_log_density(pred: MixturePredictive, y) -> Float[Array, " m"]:
    """``(m,)`` ``log sum_c w_c N(y; mean_c, sd_c^2)``."""
    y = jnp.asarray(np.asarray(y, np.float64))
    lp = norm.logpdf(y[None, :], jnp.asarray(pred.means), jnp.asarray(pred.sds))
    return logsumexp(lp + jnp.log(jnp.asarray(pred.weights))[:, None], axis=0)


def _a(m, v):
    s = np.sqrt(v)
    return m * (2.0 * ndtr(m / s) - 1.0) + 2.0 * s * np.exp(
        -0.5 * (m / s) ** 2) / np.sqrt(2 * np.pi)


def mixture_crps(pred: MixturePredictive, y) -> np.ndarray:
    """``(m,)`` the CRPS of the mixture at ``y`` in closed form (module
    docstring). O(C^2 m)."""
    y = np.asarray(y, np.float64)
    w, mu, v = pred.weights, pred.means, pred.sds ** 2
    first = np.einsum("c,cm->m", w, _a(mu - y[None], v))
    second = np.einsum("c,d,cdm->m", w, w,
                       _a(mu[:, None] - mu[None], v[:, None] + v[None]))
    return first - 0.5 * second


def mixture_sample(key: jax.Array, post: StructurePosterior, t_new,
                   num_samples: int) -> np.ndarray:
    """``(m, num_samples)`` joint draws of ``y(t_new)`` (whole trajectories):
    a component by its weight, then a draw of the GP predictive's joint Gaussian.
    O(C (n^2 m + m^3) + num_samples m^2)."""
    comps, w, _, _ = _components(post, _to_tau(post, t_new), True)
    k_comp, k_eps = jax.random.split(key)
    idx = np.asarray(jax.random.choice(k_comp, len(w), (num_samples,),
                                       p=jnp.asarray(w)))
    m = np.asarray(t_new).shape[0]
    eps = np.asarray(jax.random.normal(k_eps, (num_samples, m)), np.float64)
    out = np.empty((num_samples, m))
    for c, (mean, cov) in enumerate(comps):
        rows = idx == c
        if not rows.any():
            continue
        cov = np.asarray(cov, np.float64)
        vals, vecs = np.linalg.eigh(0.5 * (cov + cov.T))
        root = vecs * np.sqrt(np.clip(vals, 0.0, None))
        out[rows] = np.asarray(mean, np.float64) + eps[rows] @ root.T
    sc = post.scales
    return (sc.y_mean + sc.y_sd * out).T
