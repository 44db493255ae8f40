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

Where the posterior models ``log y`` (``transform="log"``), each component is a
log-normal: ``log y* ~ N(mean_c, var_c)``. The mean is ``sum_c w_c exp(mean_c +
var_c / 2)``, quantiles are ``exp`` of the log-scale mixture's, the log density
is the log-scale one minus ``log y``, draws are ``exp`` of the log-scale draws,
and the CRPS, which has no closed form for a mixture of log-normals, is
``int (F(x) - 1{x >= y})^2 dx`` by Simpson's rule on 4001 points in ``log x``
(``dx = x d log x``) on each side of ``log y`` over the components' 10-sd range
(within 1e-6 relative of the closed form of one log-normal, Baran and Lerch 2015,
and of adaptive quadrature for mixtures: ``tests/structure``).

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
from scipy.integrate import simpson
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
        log_scale: the components are log-normal (``means`` and ``sds`` are
            those of ``log y``).
    """

    weights: np.ndarray
    means: np.ndarray
    sds: np.ndarray
    structure: np.ndarray
    dropped_mass: float
    log_scale: bool = False


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
    out = []
    # in float64 whatever the working precision, as the fit (:mod:`.posterior`)
    with jax.enable_x64(True):
        tau = jnp.asarray(np.asarray(post.tau, np.float64))
        z = jnp.asarray(np.asarray(post.z, np.float64))
        for s, u in zip(post.component_structure[keep], post.component_u[keep],
                        strict=True):
            out.append(tuple(np.asarray(a) for a in _component(
                jnp.asarray(u, jnp.float64), jnp.asarray(g.masks[s], jnp.float64),
                tau, z, jnp.asarray(tau_new, jnp.float64), terms=g.terms,
                positive=tuple(bool(b) for b in g.param_positive),
                floor=post.floor, joint=joint)))
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
                             structure, dropped, post.transform == "log")


def mixture_mean(pred: MixturePredictive) -> np.ndarray:
    """``(m,)`` the posterior-averaged mean ``sum_c w_c mean_c`` (log-normal
    components: ``sum_c w_c exp(mean_c + sd_c^2 / 2)``)."""
    if pred.log_scale:
        return pred.weights @ np.exp(pred.means + 0.5 * pred.sds ** 2)
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
    out = 0.5 * (lo + hi)
    return np.exp(out) if pred.log_scale else out


def mixture_log_density(pred: MixturePredictive, y) -> Float[Array, " m"]:
    """``(m,)`` ``log sum_c w_c N(y; mean_c, sd_c^2)`` (log-normal components:
    ``log sum_c w_c N(log y; mean_c, sd_c^2) - log y``, ``-inf`` at ``y <= 0``)."""
    y = np.asarray(y, np.float64)
    if pred.log_scale:
        with np.errstate(divide="ignore", invalid="ignore"):
            x = jnp.asarray(np.where(y > 0, np.log(np.where(y > 0, y, 1.0)), -np.inf))
        lp = norm.logpdf(x[None, :], jnp.asarray(pred.means), jnp.asarray(pred.sds))
        out = logsumexp(lp + jnp.log(jnp.asarray(pred.weights))[:, None], axis=0)
        return jnp.where(jnp.asarray(y > 0), out - x, -jnp.inf)
    y = jnp.asarray(y)
    lp = norm.logpdf(y[None, :], jnp.asarray(pred.means), jnp.asarray(pred.sds))
    return logsumexp(lp + jnp.log(jnp.asarray(pred.weights))[:, None], axis=0)


def _a(m, v):
    s = np.sqrt(v)
    return m * (2.0 * ndtr(m / s) - 1.0) + 2.0 * s * np.exp(
        -0.5 * (m / s) ** 2) / np.sqrt(2 * np.pi)


def mixture_crps(pred: MixturePredictive, y) -> np.ndarray:
    """``(m,)`` the CRPS of the mixture at ``y`` in closed form (module
    docstring). O(C^2 m); log-normal components by quadrature, O(4001 C m)."""
    y = np.asarray(y, np.float64)
    if pred.log_scale:
        return _log_scale_crps(pred, y)
    w, mu, v = pred.weights, pred.means, pred.sds ** 2
    first = np.einsum("c,cm->m", w, _a(mu - y[None], v))
    second = np.einsum("c,d,cdm->m", w, w,
                       _a(mu[:, None] - mu[None], v[:, None] + v[None]))
    return first - 0.5 * second


#: Quadrature points of the log-normal mixture's CRPS.
CRPS_GRID = 4001


def _log_scale_crps(pred: MixturePredictive, y: np.ndarray) -> np.ndarray:
    """``int (F(x) - 1{x >= y})^2 dx`` with ``x = exp(w)``, by Simpson's rule in
    ``w`` on each side of ``log y`` (where the indicator jumps; module
    docstring); below the grid ``F`` is 0 and above it 1, and those pieces are
    added exactly."""
    lo = np.min(pred.means - 10 * pred.sds, axis=0)
    hi = np.max(pred.means + 10 * pred.sds, axis=0)
    out = np.empty(y.shape)

    def piece(a, b, step):
        if b <= a:
            return 0.0
        w = np.linspace(a, b, CRPS_GRID)
        cdf = pred.weights @ ndtr((w[None, :] - pred.means[:, j, None])
                                  / pred.sds[:, j, None])
        return simpson((cdf - step) ** 2 * np.exp(w), x=w)

    for j in range(y.size):
        cut = np.log(y[j]) if y[j] > 0 else -np.inf
        total = piece(lo[j], min(cut, hi[j]), 0.0) + piece(max(cut, lo[j]), hi[j], 1.0)
        # outside [x_0, x_K]: F = 0 below (the integrand is 1 on [y, x_0] if
        # y < x_0, and on [y, 0] if y < 0) and F = 1 above (1 on [x_K, y])
        x0, xk = np.exp(lo[j]), np.exp(hi[j])
        total += max(x0 - max(y[j], 0.0), 0.0) + max(y[j] - xk, 0.0)
        total += max(-y[j], 0.0)
        out[j] = total
    return out


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
    out = sc.y_mean + sc.y_sd * out
    return (np.exp(out) if post.transform == "log" else out).T
