"""The grid predictive's draws (d_y <= 2): inverse-CDF draws of its cells,
the most probable cells first refined by the midpoint rule."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from .._validation import as_float_array
from ._prior_draws import _log_prior
from .inverse_predictive import InverseGPPredictive, _blocked_loglik


def _inverse_cdf(key, lp, num_samples):
    """``(n, num_samples)`` indices drawn by the probabilities exp(lp) of each
    row: inverse-CDF draws, O(n n_c + n S log n_c) time and O(n (n_c + S))
    memory (jax.random.categorical's Gumbel trick with a sample shape holds
    n S n_c numbers: 8 GB for 10 x 10,000 draws on a 100 x 100 grid)."""
    n, n_c = lp.shape
    cdf = np.cumsum(np.exp(lp - lp.max(axis=1, keepdims=True)), axis=1)
    u = np.asarray(jax.random.uniform(key, (n, num_samples)), float) * cdf[:, -1:]
    return np.stack([np.minimum(np.searchsorted(c, uu, side="right"), n_c - 1)
                     for c, uu in zip(cdf, u, strict=True)])


#: Density evaluations per test input that the grid sampler spends refining
#: its most probable cells (:func:`_refined_grid`): 4 times the default
#: 100 x 100 grid, every cell of the default 512-cell 1-D grid.
GRID_REFINE_EVALS = 40_000


def _refined_grid(predictive: InverseGPPredictive, X_test, subdivide: int):
    """The grid predictive's most probable cells split into ``subdivide^d``
    sub-cells each, the rest kept: centres ``(n, N, d)``, log masses
    ``(n, N)`` and widths ``(N, d)`` of a piecewise-constant density.

    The K = min(n_c, GRID_REFINE_EVALS // subdivide^d) cells of largest mass
    (per test input) are refined by the midpoint rule on their sub-cells:
    sub-cell mass = coarse mass x p(sub-centre) / p(centre) / subdivide^d,
    with p the unnormalised density log p(x* | y, D) + log p(y) of the same
    program as the grid's. Where every cell is refined this is exactly the
    midpoint rule on a grid ``subdivide`` times finer (tested); elsewhere the
    coarse cells keep their masses. A cell wider than the density's scale
    (sbibm's gaussian_mixture: a spike of sd 0.1 in cells 0.2 wide on its
    prior box) otherwise puts a uniform square where the density has a peak.
    The masses are renormalised. Cost O(n K subdivide^d) density
    evaluations."""
    cand = np.asarray(predictive.support, float)
    cell = np.asarray(predictive.cell, float)
    lp = np.asarray(predictive.log_probs, float)
    n, n_c = lp.shape
    d = cand.shape[1]
    S = subdivide ** d
    K = int(min(n_c, max(1, GRID_REFINE_EVALS // S)))
    ax = (np.arange(subdivide) + 0.5) / subdivide - 0.5
    off = np.stack(np.meshgrid(*([ax] * d), indexing="ij"), -1).reshape(S, d) * cell
    top = np.argsort(-lp, axis=1, kind="stable")[:, :K]  # (n, K)
    mix, prior = predictive.mixture, predictive.prior
    dt = mix.Y.dtype
    tn = jnp.asarray(float(predictive.noisy_inputs), dt)
    X = np.asarray(as_float_array(X_test, "X_test"), float)
    X = jnp.asarray(X[:, None] if X.ndim == 1 else X, dt)
    if X.shape[0] != n:
        raise ValueError(f"X_test has {X.shape[0]} inputs, the predictive {n}")
    centres = np.empty((n, n_c - K + K * S, d))
    logm = np.empty((n, n_c - K + K * S))
    for i in range(n):
        c = cand[top[i]]
        pts = jnp.asarray(np.concatenate([(c[:, None] + off[None]).reshape(-1, d),
                                          c]), dt)  # K S sub-centres, K centres
        ll = (_blocked_loglik(mix, pts, X[i:i + 1], tn)[0]
              + np.asarray(_log_prior(prior.kind, prior.params, pts), float))
        sub, ctr = ll[:K * S].reshape(K, S), ll[K * S:, None]
        lc = lp[i, top[i]][:, None]
        ok = np.isfinite(ctr) & np.isfinite(lc)
        lsub = np.where(ok, lc + np.where(ok, sub - ctr, 0.0) - np.log(S), -np.inf)
        rest = np.ones(n_c, bool)
        rest[top[i]] = False
        centres[i] = np.concatenate([np.asarray(pts[:K * S], float), cand[rest]])
        logm[i] = np.concatenate([lsub.ravel(), lp[i, rest]])
    logm -= np.logaddexp.reduce(logm, axis=1, keepdims=True)
    widths = np.concatenate([np.repeat(cell[None] / subdivide, K * S, 0),
                             np.repeat(cell[None], n_c - K, 0)])
    return centres, logm, widths
