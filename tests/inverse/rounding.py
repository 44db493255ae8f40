"""The scale of the inverse model's log likelihoods, for tolerances.

Two evaluations of the same Gaussian mixture log likelihood in working
precision (other program shapes, other factorisations of the moments (M))
differ by rounding of the terms each component's log density sums, 0.5 r^2 /
var and (d_x / 2) log(2 pi var), whose size can exceed the result's (they
cancel); the variance itself is formed by cancellation, a^2 sum(alpha) -
a^2 k^T S^-1 k. :func:`term_scale` is the responsibility-weighted size of those
terms, so a tolerance ``LOOSE * term_scale`` (about sqrt(eps) of it, the
cancellation's loss) bounds the difference of two correct evaluations.
"""

import jax.numpy as jnp
import numpy as np
from scipy.special import logsumexp

from bayeskde.inverse import mixture_moments


def term_scale(mix, outputs, X, test_noise: float) -> np.ndarray:
    """``(n, n_c)``: 1 + sum_c resp_c (0.5 r^2 / var + (d_x / 2) |log(2 pi
    var)|) for test inputs ``X`` ``(n, d_x)`` at ``outputs`` ``(n_c, d_y)``
    (shared) or ``(n, n_c, d_y)`` (one set per test input), var = var_f +
    test_noise s^2 (for a residual or heteroscedastic noise model, a Gaussian
    proxy with its narrowest variance)."""
    X = np.asarray(X, float)
    outputs = np.asarray(outputs, float)
    each = outputs.ndim == 3
    rows = []
    for i in range(X.shape[0]):
        y = outputs[i] if each else outputs
        mean, var_f = (np.asarray(a, float) for a in mixture_moments(
            mix, jnp.asarray(y, mix.lam.dtype)))
        noise = np.asarray(mix.noise, float)[:, None]
        var = np.maximum(var_f, 1e-6 * noise) + test_noise * noise
        if mix.noise_model is not None and test_noise > 0:
            narrowest = getattr(mix.noise_model, "floor", None)  # (H)
            if narrowest is None:  # (R): its kernels' smallest variance
                narrowest = np.min(np.asarray(mix.noise_model.eta))
            var = np.maximum(var_f, 0.0) + float(narrowest)
        d = X.shape[1]
        r2 = np.sum((X[i][None, None] - mean) ** 2, -1)  # (C, n_c)
        ll = -0.5 * r2 / var - 0.5 * d * np.log(2 * np.pi * var)
        ll = ll + np.asarray(mix.log_w, float)[:, None]
        resp = np.exp(ll - logsumexp(ll, axis=0, keepdims=True))
        size = 0.5 * r2 / var + 0.5 * d * np.abs(np.log(2 * np.pi * var))
        rows.append(1.0 + np.sum(resp * size, axis=0))
    return np.stack(rows)
