"""Pre-image solvers: from a point in output feature space back to an output.

KDE (and any method that predicts in a feature space) ends with
y(x) = argmin_y || (v_1 . Phi(y), ..., v_p . Phi(y)) - (f_1(x), ..., f_p(x)) ||
(Weston et al. 2002, section 3 step 3). Three solvers:

* :func:`nearest_candidates`: search a finite candidate set (the paper's choice:
  the training outputs), in the p-dimensional projection space;
* :func:`linear_preimage`: the explicit solution for the linear output kernel (3);
* :func:`fixed_point_preimage`: the fixed-point iteration of Schölkopf et al. (1999)
  / Mika et al. (1999) for RBF output kernels, with a guard for a vanishing
  denominator and a fall-back to the best candidate.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
from jaxtyping import Array, Float, Int

from ..kernels.standard import squared_distances
from ..kpca.core import KPCAResult

__all__ = [
    "nearest_candidates",
    "nearest_candidates_padded",
    "feature_weights",
    "feature_weights_padded",
    "linear_preimage",
    "fixed_point_preimage",
    "FixedPointResult",
]


@jax.jit
def nearest_candidates(
    F: Float[Array, "n_test n_components"],
    candidate_proj: Float[Array, "n_candidates n_components"],
) -> Int[Array, " n_test"]:
    """Index of the candidate whose projection is closest to each predicted point.

    Cost: O(n_test n_candidates n_components) time and O(n_test n_candidates)
    memory (blocked callers pass slices of ``F``).
    """
    return nearest_candidates_padded(F, candidate_proj, candidate_proj.shape[0])


def nearest_candidates_padded(
    F: Float[Array, "n_test n_components"],
    candidate_proj: Float[Array, "n_pad n_components"],
    n_candidates,
) -> Int[Array, " n_test"]:
    """:func:`nearest_candidates` among the first ``n_candidates`` rows only (the
    rest are padding; ``n_candidates`` may be traced). Jit-safe."""
    d2 = squared_distances(F, candidate_proj)
    real = jnp.arange(candidate_proj.shape[0]) < n_candidates
    return jnp.argmin(jnp.where(real[None, :], d2, jnp.inf), axis=1)


@jax.jit
def feature_weights(
    kpca: KPCAResult, F: Float[Array, "n_test n_components"]
) -> Float[Array, "n_test n_samples"]:
    """Weights g with Psi = sum_i g_i Phi(y_i) for the predicted feature point.

    Psi = mu + sum_n F_n v_n with v_n = sum_i a_in (Phi(y_i) - mu) and
    mu = mean_i Phi(y_i), so g = 1/m + A F - mean(A F).
    """
    return feature_weights_padded(kpca, F, kpca.alphas.shape[0])


def feature_weights_padded(
    kpca: KPCAResult, F: Float[Array, "n_test n_components"], n
) -> Float[Array, "n_test n_pad"]:
    """:func:`feature_weights` of a KPCA fitted on a padded training set
    (:func:`bayeskde.kpca.kernel_pca_padded`): the weights of the first ``n``
    training points, zero on padding. Jit-safe."""
    w = (jnp.arange(kpca.alphas.shape[0]) < n).astype(F.dtype)
    n = jnp.asarray(n, F.dtype)
    AF = F @ kpca.alphas.T
    mean = jnp.sum(AF * w[None, :], axis=1, keepdims=True) / n
    return (AF - mean + 1.0 / n) * w[None, :]


@jax.jit
def linear_preimage(
    kpca: KPCAResult,
    F: Float[Array, "n_test n_components"],
    Y: Float[Array, "n_samples n_outputs"],
) -> Float[Array, "n_test n_outputs"]:
    """Exact pre-image for the linear (regression) output kernel, eq. (3).

    With Phi(y) = y the feature point sum_i g_i y_i is itself an output, so the
    argmin is attained there (Weston et al. 2002, section 3: "for the kernel (3)
    it is possible to compute the solution explicitly").
    """
    return feature_weights(kpca, F) @ Y


class FixedPointResult(NamedTuple):
    """Fixed-point pre-images.

    Attributes:
        preimages: ``(n_test, n_outputs)`` outputs.
        used_fallback: ``(n_test,)`` True where the best candidate was kept (the
            iteration's denominator vanished or it ended worse than the candidate).
        n_iter: ``(n_test,)`` fixed-point iterations taken.
    """

    preimages: Float[Array, "n_test n_outputs"]
    used_fallback: Array
    n_iter: Int[Array, " n_test"]


def _fixed_point_one(g, z0, Y, gamma, n_iter, tol):
    def score(z):  # <Phi(z), Psi>; ||Phi(z) - Psi||^2 = 1 - 2 score + const
        return g @ jnp.exp(-gamma * jnp.sum((Y - z[None, :]) ** 2, axis=1))

    eps = jnp.finfo(z0.dtype).eps
    # The problem's length scale: the kernel width, or the outputs' size.
    scale = jnp.maximum(jax.lax.rsqrt(gamma), jnp.max(jnp.abs(Y)))
    xtol = 4.0 * eps * scale  # a step at the round-off of z
    floor = jnp.sqrt(eps) * scale  # below this a step that stops shrinking is noise

    def going(c):
        return (c[2] < n_iter) & ~c[4]

    def _step(c):
        z, stalled, k, last, done = c
        w = g * jnp.exp(-gamma * jnp.sum((Y - z[None, :]) ** 2, axis=1))
        den = jnp.sum(w)
        bad = jnp.abs(den) < tol
        z_new = jnp.where(bad, z, (w @ Y) / jnp.where(bad, 1.0, den))
        step = jnp.max(jnp.abs(z_new - z))
        # Converged to round-off, or the steps stopped shrinking near it (the
        # float32 floor), or the denominator vanished.
        done = bad | (step <= xtol) | ((step >= last) & (step <= floor))
        return z_new, stalled | bad, k + 1, step, done

    init = (z0, jnp.zeros((), bool), jnp.zeros((), jnp.int32),
            jnp.asarray(jnp.inf, z0.dtype), jnp.zeros((), bool))
    z, stalled, k, _, _ = jax.lax.while_loop(going, _step, init)
    worse = ~(score(z) >= score(z0)) | ~jnp.all(jnp.isfinite(z))
    fallback = stalled | worse
    return jnp.where(fallback, z0, z), fallback, k


def _fixed_point(kpca, F, Y, z0, gamma, n_iter, tol):
    g = feature_weights(kpca, F)
    z, fb, k = jax.vmap(_fixed_point_one, in_axes=(0, 0, None, None, None, None))(
        g, z0, Y, gamma, n_iter, tol
    )
    return FixedPointResult(z, fb, k)


_fixed_point_jit = jax.jit(_fixed_point, static_argnames="n_iter")


def fixed_point_preimage(
    kpca: KPCAResult,
    F: Float[Array, "n_test n_components"],
    Y: Float[Array, "n_samples n_outputs"],
    z0: Float[Array, "n_test n_outputs"],
    gamma: float,
    n_iter: int = 100,
    tol: float = 1e-8,
) -> FixedPointResult:
    """Fixed-point pre-image for an RBF output kernel exp(-gamma ||y - y'||^2).

    Iterates z <- sum_i g_i k(z, y_i) y_i / sum_i g_i k(z, y_i) (Schölkopf et al.
    1999, "Input space vs. feature space", eq. (10); Mika et al. 1999), which is a
    stationary point of <Phi(z), Psi> for Psi = sum_i g_i Phi(y_i). The KDE
    weights g can be negative, so the denominator can vanish: the iteration then
    stops, and whenever it ends no better than the start ``z0`` (the best
    candidate) the candidate is returned.

    Stopping is dtype-aware: with s = max(gamma^-1/2, max |Y|) the problem's
    scale, a point stops when its step max|z_new - z| falls to 4 eps s (the
    round-off of z), or when its steps stop shrinking once below sqrt(eps) s
    (the round-off floor, which float32 reaches first), or after ``n_iter``
    iterations. Under vmap the batch runs until its slowest point stops.

    Args:
        kpca: the output kernel PCA the projections ``F`` belong to.
        F: ``(n_test, p)`` predicted projections.
        Y: ``(n_samples, n_outputs)`` training outputs.
        z0: ``(n_test, n_outputs)`` starts (the best candidates).
        gamma: the RBF rate of the output kernel.
        n_iter: most iterations.
        tol: a denominator |sum_i g_i k(z, y_i)| below this stops the point
            (its candidate is kept).

    Returns:
        :class:`FixedPointResult` (with the iterations taken).

    Cost: O(n_iter n_test n_samples n_outputs) at most.
    """
    return _fixed_point_jit(kpca, F, Y, z0, gamma, n_iter, tol)
