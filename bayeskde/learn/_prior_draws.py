"""Output-prior densities and draws, and the diverse-top selection, shared by
the inverse model's predictive (``inverse_predictive``) and its Langevin and
last-importance moves (``inverse_mcmc``)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from jax.scipy.special import logsumexp


def _log_prior(kind, params, y):
    """Normalised log p(y) for outputs ``y`` (n, d)."""
    if kind == "box":
        low, high = params
        inside = jnp.all((y >= low[None]) & (y <= high[None]), axis=-1)
        return jnp.where(inside, -jnp.sum(jnp.log(high - low)), -jnp.inf)
    if kind == "kde":
        centres, h = params
        z = (y[:, None, :] - centres[None]) / h[None, None]
        d = y.shape[-1]
        return (logsumexp(-0.5 * jnp.sum(z * z, axis=-1), axis=1)
                - jnp.log(centres.shape[0]) - jnp.sum(jnp.log(h))
                - 0.5 * d * jnp.log(2 * jnp.pi))
    # one output at a time: a batch against the distribution's own batch
    # shape would lean on implicit rank promotion
    lp = jax.vmap(params.log_prob)(y)
    return jnp.sum(lp, axis=-1) if lp.ndim == 2 else lp


def _sample_prior(kind, params, key, n, d, dtype):
    if kind == "box":
        low, high = params
        return low[None] + (high - low)[None] * jax.random.uniform(key, (n, d), dtype)
    if kind == "kde":
        centres, h = params
        k1, k2 = jax.random.split(key)
        i = jax.random.randint(k1, (n,), 0, centres.shape[0])
        return centres[i] + h[None] * jax.random.normal(k2, (n, d), dtype)
    out = params.sample(key, (n,))
    return out.reshape(n, d).astype(dtype)


def _diverse_top(pts, score, J, radius):
    """Indices ``(n, J)`` of J high-scoring points per row, each farther than
    ``radius`` from those chosen before it while such points remain (then the
    best of the rest): every separated region of high density keeps a centre,
    so one branch cannot take all of them."""
    n = score.shape[0]
    rows = np.arange(n)
    free = np.isfinite(score)
    taken = np.zeros_like(free)
    out = np.empty((n, J), dtype=int)
    for j in range(J):
        pick_free = np.where(free & ~taken, score, -np.inf)
        pick_any = np.where(~taken, score, -np.inf)
        i = np.where(np.isfinite(pick_free.max(1)), pick_free.argmax(1),
                     pick_any.argmax(1))
        out[:, j] = i
        taken[rows, i] = True
        d2 = np.sum((pts - pts[rows, i][:, None, :]) ** 2, axis=-1)
        free &= d2 > radius**2
    return out
