"""The inverse model's forward noise: Gaussian, the residual density (R) or
the covariance function (H), chosen per data set by the leave-one-out log
density of x given y on the training pairs (:func:`choose_forward_noise`).
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from .data import InverseGPData
from .heteroscedastic import HeteroscedasticNoise, fit_heteroscedastic_noise
from .kernel import kept_eigenvalues
from .mixture import InverseGPMixture, inverse_gp_mixture, posterior_draws, projections
from .residual import ResidualNoise, fit_residual_noise, gp_loo

__all__ = [
    "NOISE",
    "RESIDUAL_MAX",
    "ForwardNoise",
    "training_basis",
    "gaussian_loo_log_density",
    "choose_forward_noise",
    "model_average_loo",
]

#: At most this many LOO residuals make the residual noise density
#: (:func:`choose_forward_noise`).
RESIDUAL_MAX = 4000
#: The forward-noise models of :func:`~bayeskde.inverse.fit_inverse_gp`.
NOISE = ("auto", "gaussian", "residual", "heteroscedastic")


class ForwardNoise(NamedTuple):
    """The forward noise a fit uses (:func:`choose_forward_noise`).

    Attributes:
        kind: ``"gaussian"`` (the model's N(0, s^2 I), model-averaged as the
            predictive's ``mode`` says), ``"residual"`` (the kernel density
            (R) of the MAP GP's leave-one-out residuals, :mod:`.residual`) or
            ``"heteroscedastic"`` (the covariance function (H) fitted to those
            residuals, :mod:`.heteroscedastic`).
        requested: what was asked (one of :data:`NOISE`).
        residual: the :class:`~.residual.ResidualNoise`
            (``None`` for ``kind="gaussian"`` unless it was computed for
            ``"auto"``'s comparison).
        loo_gaussian, loo_residual: the mean leave-one-out log density of x
            given y over the training pairs under either noise (``None``
            where not computed).
        loo_difference_se: the standard error of the mean of the per-point
            differences (the better of the other two minus Gaussian).
        bandwidth: the residual density's h.
        heteroscedastic: the :class:`~.heteroscedastic.HeteroscedasticNoise`
            (``None`` where not computed).
        loo_heteroscedastic: its mean held-out log density (K-fold, each
            residual scored by the fit without its fold).
    """

    kind: str
    requested: str
    residual: ResidualNoise | None = None
    loo_gaussian: float | None = None
    loo_residual: float | None = None
    loo_difference_se: float | None = None
    bandwidth: float | None = None
    heteroscedastic: HeteroscedasticNoise | None = None
    loo_heteroscedastic: float | None = None


def training_basis(mix: InverseGPMixture, data: InverseGPData, p: int):
    """The orthonormal U ``(m, r)`` of pair ``p`` of ``mix`` at the training
    outputs: the exact eigenvectors, or for a low-rank fit A(Y) Lambda^-1
    (A = k(Y)^T U = U Lambda for the feature map's Gram F F^T =
    U Lambda U^T), computed in row blocks; zero columns where lambda is
    below the kept-eigenvalue rule (:func:`~.kernel.kept_eigenvalues`) at
    ``size`` 10 in working precision. Cost O(m R r)."""
    if mix.basis is None:
        return mix.U[p]
    Y = jnp.asarray(data.Y, mix.lam.dtype)
    A = jnp.concatenate([projections(mix, Y[i:i + 4096])[p]
                         for i in range(0, Y.shape[0], 4096)])
    lam = mix.lam[p]
    # A's rounding error is about eps lambda_max per entry, so A / lambda_j is
    # noise where lambda_j is within a few eps of lambda_max: in float32 on
    # two_moons at 1e4 those columns (lambda_j down to 5e-9 against 2,380)
    # made U^T U off the identity by 1.6e5 and the LOO residuals too wide (LOO
    # density 3.27 against float64's 4.04); kept above 10 eps lambda_max, U^T U
    # is the identity to 7e-3 and the LOO density 3.99
    ok = jnp.asarray(kept_eigenvalues(np.asarray(lam), 10))
    return jnp.where(ok[None], A / jnp.where(ok, lam, 1.0)[None], 0.0)


@jax.jit
def gaussian_loo_log_density(U, lam, X, amp, s2):
    """Per training point, log N(r_i; 0, sigma_i^2 I): the exact LOO log
    density of x_i given the other points under the Gaussian noise
    (:func:`~.residual.gp_loo`). ``(m,)``."""
    r, var = gp_loo(U, lam, X, amp, s2)
    d = X.shape[1]
    return (-0.5 * jnp.sum(r**2, axis=1) / var
            - 0.5 * d * jnp.log(2 * jnp.pi * var))


def model_average_loo(fit, mode: str = "average", num_draws: int = 100
                      ) -> np.ndarray:
    """Per training point, the exact leave-one-out log density of x_i under
    the Gaussian noise averaged over the predictive's components (``mode``,
    ``num_draws``: :func:`~.mixture.posterior_draws`): log sum_c w_c
    N(r_ic; 0, sigma_ic^2 I). ``(m,)``. Cost O(C m r d_x)."""
    data = fit.data
    X = jnp.asarray(data.X, data.X.dtype)
    mix = inverse_gp_mixture(data, *posterior_draws(fit, mode, num_draws),
                             memo=fit.memo)
    Us = [training_basis(mix, data, p) for p in range(mix.lam.shape[0])]
    ll = np.stack([np.asarray(gaussian_loo_log_density(
        Us[int(mix.pair[c])], mix.lam[int(mix.pair[c])], X, mix.amplitude[c],
        mix.noise[c]), float) for c in range(mix.log_w.shape[0])])  # (C, m)
    lw = np.asarray(mix.log_w, float)[:, None]
    return np.logaddexp.reduce(ll + lw, axis=0)


def choose_forward_noise(fit, noise: str = "auto", *, num_draws: int = 100,
                         mode: str = "average") -> ForwardNoise:
    """The forward noise of a fit: Gaussian, residual, or (``"auto"``) the
    one of higher leave-one-out (LOO) log density of x given y on the
    training pairs.

    ``"residual"`` is the density (R) of :mod:`.residual`
    at the MAP (rate, degree, amplitude, noise) of the fit, not an average
    over the posterior's draws: the residual density is nonparametric, so it
    absorbs most of what the draws' spread of noise levels expresses, and
    averaging it over the predictive's up to 256 components would multiply the
    cost of every evaluation of the predictive by that many (each component
    has its own m residuals). At the sbibm tasks' 1,000 simulations the pair
    posterior is concentrated (the MAP pair's mass is reported by
    ``bench/sbi.py``).

    ``"auto"`` compares the two predictives the user would get, by their exact
    LOO log density on the training data (never on test data): the Gaussian
    noise averaged over the components of ``mode`` / ``num_draws`` (the
    predictive's defaults), the residual density at the MAP (h chosen by the
    same criterion, one parameter from a grid of 48). It keeps the residual
    density only where its mean LOO log density is higher by more than two
    standard errors of the mean per-point difference: on data with Gaussian
    noise the two are close, and the Gaussian (the model's own likelihood, with
    the model average) is kept. Measured (``bench/sbi.py``,
    ``bench/inverse_defaults.py``): see ``docs/sbi.md``.

    Above :data:`RESIDUAL_MAX` training pairs the density keeps the LOO
    residuals of an evenly strided subset of that many (the residuals
    themselves are computed from all m pairs), and ``"auto"`` compares the
    two on that subset: a kernel density of 4,000 residuals already resolves
    a two-dimensional noise density well (Scott's factor 0.25), and every
    evaluation of the predictive costs O(m_res) per cell and test point. At
    m = 1e5 the full set made the bandwidth search O(48 m^2 d_x) and the
    S-shape's fit time out (900 s, measured; 26 s at m = 1e4).

    Cost: O(C m r d_x) for the C components (the pairs' spectra are the
    predictive's, memoised in ``fit.memo``) plus O(48 m_res^2 d_x) for the
    bandwidth, m_res = min(m, RESIDUAL_MAX).
    """
    if not isinstance(noise, str) or noise not in NOISE:
        raise ValueError(f"noise must be one of {NOISE}, got {noise!r}")
    if noise == "gaussian":
        return ForwardNoise("gaussian", noise)
    data, memo = fit.data, fit.memo
    dt = data.X.dtype
    X = jnp.asarray(data.X, dt)
    amp, s2 = fit.map_params["amplitude"], fit.map_params["noise"]
    mix_map = inverse_gp_mixture(data, *posterior_draws(fit, "map", 1), memo=memo)
    U = training_basis(mix_map, data, 0)
    r, var = gp_loo(U, mix_map.lam[0], X, jnp.asarray(amp, dt),
                    jnp.asarray(s2, dt))
    m = X.shape[0]
    keep = np.unique(np.round(np.linspace(0, m - 1, min(m, RESIDUAL_MAX)))
                     .astype(int))
    latent = jnp.maximum(var[keep] - s2, 0.0)
    res = het = loo_res = held = h = None
    if noise in ("auto", "residual"):
        res, loo_res = fit_residual_noise(r[keep], latent)
        h = float(res.bandwidth)
        if noise == "residual":
            return ForwardNoise("residual", noise, res, None,
                                float(np.mean(loo_res)), None, h)
    if noise in ("auto", "heteroscedastic"):
        het, held = fit_heteroscedastic_noise(
            jnp.asarray(data.Y, dt)[keep], r[keep], latent)
        if noise == "heteroscedastic":
            return ForwardNoise("heteroscedastic", noise, heteroscedastic=het,
                                loo_heteroscedastic=float(np.mean(held)))
    loo_gauss = model_average_loo(fit, mode, num_draws)[keep]
    others = {"residual": np.asarray(loo_res, float),
              "heteroscedastic": np.asarray(held, float)}
    best = max(others, key=lambda k: np.mean(others[k]))
    diff = others[best] - loo_gauss
    se = float(np.std(diff, ddof=1) / np.sqrt(len(diff)))
    kind = best if float(np.mean(diff)) > 2.0 * se else "gaussian"
    return ForwardNoise(kind, noise, res, float(np.mean(loo_gauss)),
                        float(np.mean(loo_res)), se, h, het,
                        float(np.mean(held)))
