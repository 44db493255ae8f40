"""The inverse model's predictive p(y* | x*, D): grid, importance, modes, draws.

Bayes' rule (B) of :mod:`bayeskde.inverse` with the model average of
:mod:`.mixture`,

    p(y* | x*, D) proportional to p(y*) sum_c w_c N(x*; mu_c(y*), v_c(y*) I),

is evaluated in one of three ways, the first two chosen by the output
dimension d_y:

* ``sampler="grid"`` (d_y <= 2): the midpoint rule on ``n_grid`` cells *per output
  dimension* over the prior's box. Exact up to the cell width; draws are exact
  for the piecewise-constant density (a cell by its mass, then uniform in it).
* ``sampler="laplace"`` (d_y > 2, where a grid cannot serve): modes found by
  Levenberg-Marquardt and BFGS from the outputs of the training inputs
  nearest x* and from the training outputs of highest density, then one
  importance stage whose proposal is a mixture of Student-t densities at the
  modes shaped by their Hessians (:mod:`.laplace`). Its modes are the
  optima themselves, ranked by the weight of the draws nearest each. It
  finds the solutions of a deterministic simulator, where the density is
  so narrow that sampling from the training outputs never reaches them
  (noise-free four-joint arm: top mode re-simulates within 8e-4 against
  0.67 for the adaptive importance sampler below), and it is 2-4x faster.
* ``sampler="importance"`` (the default above two outputs before
  ``"laplace"``): adaptive importance
  sampling (population Monte Carlo with deterministic-mixture weights; Cappe et
  al. 2004, Cornuet et al. 2012). Seeds: the training outputs (and, for a prior
  given by the user, as many prior draws), scored by the target. Then
  ``n_stages`` stages of ``n_particles`` draws each from
  q_t = eps p(y) + (1 - eps) (1/J) sum_j N(y; c_j, diag(h_t^2)). The centres
  are the J = 8 best points found so far that lie farther apart than the
  modes' merge radius (so that every branch keeps its centres); h_1 is Scott's
  bandwidth of the training outputs, shrunk by 0.3 a stage; eps = 0.1 is a
  defensive share of the prior (it keeps the weights bounded in the tails).
  Every particle of every stage is weighted by p(y | x*) / (1/T sum_t q_t(y)),
  so the candidates are not limited to the training outputs; the effective
  sample size per test input is returned. That population alone degenerates
  above two outputs (median ESS 7 of 1,024 on a three-joint arm: the modes
  are narrower than any isotropic proposal), so it only starts
  ``num_chains`` Langevin chains per test input (MALA, Roberts and Tweedie
  1996; half at its diverse high-weight points, one per separated region,
  half resampled by weight; the step adapted per test input to an acceptance
  of 0.574 in the first 60% of ``n_mcmc_steps``). The chains do not cross
  between modes, so their states are not the draws: they are the centres of
  a last importance stage, q = 0.05 p(y) + 0.95 (1/K) sum_k N(y; c_k, S),
  S the chains' pooled within-chain covariance (a proposal shaped like each
  mode), whose 4 ``n_particles`` weighted draws restore the modes' relative
  masses (median ESS 550 of 1,024 on the same arm). Draws are an importance
  resample of that last stage (consistent as it grows; the ESS says how far to
  trust them).

Either way the top-k modes of highest mass are then moved by BFGS to the local
maxima of the model-averaged density, and a move is kept
only where it raises the density and stays within the modes' merge radius
(``refine``, on by default): a refinement sharpens a mode, it never trades it
for another.

The output prior p(y) is :mod:`.output_prior`'s.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from .._modes import top_k_modes
from .._validation import as_float_array, check_integer, check_key, check_positive
from .importance import adaptive_importance
from .laplace import laplace_importance, rank_optima
from .mcmc import chain_proposal, langevin_moves, refine_modes
from .mixture import (
    InverseGPMixture,
    blocked_log_likelihood,
    fit_mixture,
    mixture_log_likelihood_each,
)
from .output_prior import OutputPrior, log_prior, resolve_output_prior, scott_bandwidth
from .transform import apply_transform, log_jacobian

__all__ = [
    "DEFAULT_GRID",
    "InverseGPPredictive",
    "inverse_gp_predictive",
    "predictive_log_density",
    "check_fit",
    "check_test_inputs",
    "model_inputs",
]

#: Default grid cells per output dimension (d_y = 1, 2): 512 and 100 x 100.
DEFAULT_GRID = {1: 512, 2: 100}


class InverseGPPredictive(NamedTuple):
    """Result of :func:`inverse_gp_predictive`.

    Attributes:
        support: grid cell centres ``(n_c, d_y)`` shared by the test inputs
            (``sampler="grid"``), or importance particles ``(n_test, n_c, d_y)``.
        log_probs: ``(n_test, n_c)`` normalised log probabilities.
        modes: ``(n_test, k, d_y)`` the top-k modes by mass (refined).
        mode_masses: ``(n_test, k)`` their posterior masses.
        cell: grid cell widths ``(d_y,)`` (``None`` for importance sampling).
        sampler: ``"grid"`` or ``"importance"``.
        ess: ``(n_test,)`` effective sample size of the weights (Kish).
        grid_shape: cells per dimension (``None`` for importance sampling).
        mixture: the :class:`~.mixture.InverseGPMixture` evaluated.
        prior: the resolved :class:`OutputPrior`.
        noisy_inputs: as given.
        log_normalizer: ``(n_test,)`` log of int p(x* | y, D) p(y) dy (the
            grid's midpoint rule, or the importance estimate; the density of
            x* itself, the transform's Jacobian included): subtracted from
            :func:`predictive_log_density` it gives the normalised density.
        transform: the fit's transform of x (:mod:`~.transform`), applied to
            the test inputs by :func:`predictive_log_density`.
    """

    support: np.ndarray
    log_probs: np.ndarray
    modes: np.ndarray
    mode_masses: np.ndarray
    cell: np.ndarray | None
    sampler: str = "grid"
    ess: np.ndarray | None = None
    grid_shape: tuple | None = None
    mixture: InverseGPMixture | None = None
    prior: OutputPrior | None = None
    noisy_inputs: bool = True
    log_normalizer: np.ndarray | None = None
    transform: str = "none"


def _grid(low, high, per):
    d = len(low)
    cell = (high - low) / per
    axes = [low[j] + (np.arange(per[j]) + 0.5) * cell[j] for j in range(d)]
    pts = np.stack(np.meshgrid(*axes, indexing="ij"), -1).reshape(-1, d)
    return pts, cell


def check_fit(fit, where: str):
    """Refuse anything but an :class:`~bayeskde.inverse.InverseGPFit` (a
    fitted estimator's ``fit_`` is one; the estimator itself is not)."""
    from .fit import InverseGPFit  # the fit module imports this one

    if not isinstance(fit, InverseGPFit):
        hint = (" (pass the estimator's fit_)" if hasattr(fit, "fit_") else "")
        raise TypeError(f"{where}: fit must be an InverseGPFit from "
                        f"fit_inverse_gp{hint}, got {type(fit).__name__}")
    return fit


def check_test_inputs(X_test, d_x: int) -> np.ndarray:
    """``X_test`` as a float ``(n_test, d_x)`` array (1-D as one feature),
    finite and non-empty, with the training inputs' width."""
    X_test = np.asarray(as_float_array(X_test, "X_test"), float)
    X_test = X_test[:, None] if X_test.ndim == 1 else X_test
    if X_test.ndim != 2 or X_test.shape[1] != d_x:
        raise ValueError(f"X_test must have shape (n_test, {d_x}), got "
                         f"{X_test.shape}")
    if X_test.shape[0] == 0:
        raise ValueError("X_test is empty")
    return X_test


def model_inputs(fit, X_test) -> np.ndarray:
    """The test inputs as the fit's model sees them: validated
    (:func:`check_test_inputs`), then the fit's transform t(x)
    (:mod:`~.transform`) applied."""
    X_test = check_test_inputs(X_test, fit.data.X.shape[1])
    return apply_transform(fit.transform.kind, X_test, "X_test")


def inverse_gp_predictive(
    fit, X_test, *, mode: str = "average", num_draws: int = 100,
    sampler: str = "auto", n_grid: int | None = None, margin: float = 0.0,
    k: int = 3, output_prior=None, mode_radius: float | None = None,
    noisy_inputs: bool = True, refine: bool = True, n_particles: int = 256,
    n_stages: int = 4, num_chains: int = 32, n_mcmc_steps: int = 100,
    key: jax.Array | None = None,
) -> InverseGPPredictive:
    """p(y* | x*, D) of (B) for every test input (module docstring).

    Args:
        fit: :func:`~bayeskde.inverse.fit_inverse_gp` result.
        X_test: ``(n_test, d_x)`` test inputs.
        mode: ``"average"`` (Bayesian model average over ``num_draws`` evenly
            thinned draws, pairs Rao-Blackwellised) or ``"map"`` (the MAP
            draw and pair only).
        sampler: ``"auto"`` (``"grid"`` for d_y <= 2, else ``"laplace"``),
            ``"grid"``, ``"laplace"`` or ``"importance"``.
        n_grid: grid cells *per output dimension* (default 512 for one
            output, 100 x 100 for two).
        margin: the default box is the training outputs' widened by
            ``margin`` times their range on each side.
        k: number of modes returned.
        output_prior: p(y) (:func:`~.output_prior.resolve_output_prior`);
            default data-driven.
        mode_radius: merge radius of the modes (default 0.1 of the outputs'
            mean range).
        noisy_inputs: whether the test inputs carry the training noise (False:
            x* = f(y*) exactly).
        refine: move the modes to the local maxima of the density (BFGS from
            each mode, kept only where it raises the density and moves less
            than ``mode_radius``).
        n_particles, n_stages: importance sampling's draws per stage and
            stages (``"laplace"``: 4 ``n_particles`` draws in its one stage).
        num_chains, n_mcmc_steps: the MCMC moves after importance sampling
            (module docstring; ``num_chains=0`` skips them): chains per test
            input and Langevin steps per chain (60% warm-up).
        key: PRNG key of the importance sampler and the chains (default
            ``key(0)``).

    Raises:
        ValueError: bad settings or test inputs with the wrong width, NaN/inf.
        TypeError: ``fit`` not an :class:`~bayeskde.inverse.InverseGPFit`.

    Cost: O(P m^3) for the P kept pairs, then with C = P num_draws components
    and r kept eigenvectors a pair: the grid O(n_c (P m r + C r d_x) +
    C n_test n_c d_x) time for n_c = n_grid^d_y cells, O(C n_c d_x + 256 n_c)
    memory; importance O(n_test (m + n_stages n_particles) (P m r + C r d_x))
    time; the MCMC moves add n_test n_chains n_mcmc_steps gradient
    evaluations and 4 n_particles n_test evaluations of the final importance
    stage (together about 5x the adaptive stages' cost at the defaults).
    Refinement adds about 100 evaluations of one output per mode.
    """
    if mode not in ("average", "map"):
        raise ValueError(f"mode must be 'average' or 'map', got {mode!r}")
    if sampler not in ("auto", "grid", "importance", "laplace"):
        raise ValueError(f"sampler must be 'auto', 'grid', 'importance' or "
                         f"'laplace', got {sampler!r}")
    k = check_integer(k, "k", minimum=1)
    if margin is None or not np.isfinite(margin) or margin < 0:
        raise ValueError(f"margin must be a finite number >= 0, got {margin!r}")
    data = check_fit(fit, "inverse_gp_predictive").data
    X_raw = check_test_inputs(X_test, data.X.shape[1])
    X_test = model_inputs(fit, X_raw)
    Y = np.asarray(data.Y, float)
    d = Y.shape[1]
    sampler = ("grid" if d <= 2 else "laplace") if sampler == "auto" else sampler
    if sampler == "grid" and d > 2:
        raise ValueError(f"sampler='grid' serves outputs of dimension <= 2, got "
                         f"{d}; use sampler='laplace'")
    prior = resolve_output_prior(output_prior, Y, margin)
    dt = data.X.dtype
    mix = fit_mixture(fit, mode, num_draws)
    tn = jnp.asarray(float(noisy_inputs), dt)
    Xj = jnp.asarray(X_test, dt)
    if mode_radius is None:
        mode_radius = 0.1 * float(np.mean(np.ptp(Y, axis=0)) or 1.0)
    mode_radius = check_positive(mode_radius, "mode_radius")
    if sampler == "grid":
        per = np.full(d, DEFAULT_GRID[d] if n_grid is None else check_integer(
            n_grid, "n_grid", minimum=2))
        cand, cell = _grid(prior.low, prior.high, per)
        cj = jnp.asarray(cand, dt)
        lpc = np.asarray(log_prior(prior.kind, prior.params, cj), float)
        lp = (blocked_log_likelihood(mix, cj, Xj, tn) + lpc[None]
              + np.log(np.prod(cell)))
        log_z = np.logaddexp.reduce(lp, axis=1)
        lp -= log_z[:, None]
        modes, masses = top_k_modes(cand, np.exp(lp), k, radius=mode_radius,
                                    grid_shape=tuple(per))
        support, shape = cand, tuple(int(p) for p in per)
    elif sampler == "laplace":
        n_particles = check_integer(n_particles, "n_particles", minimum=2)
        key = jax.random.key(0) if key is None else check_key(key)
        support, lp, log_z, optima, energies = laplace_importance(
            key, mix, prior, Y, np.asarray(data.X + data.x_mean[None], float),
            X_test, tn,
            n_particles=4 * n_particles, radius=mode_radius)
        modes, masses = rank_optima(optima, energies, support, lp, k, mode_radius)
        cell, shape = None, None
    else:
        n_particles = check_integer(n_particles, "n_particles", minimum=2)
        n_stages = check_integer(n_stages, "n_stages", minimum=1)
        key = jax.random.key(0) if key is None else check_key(key)
        num_chains = check_integer(num_chains, "num_chains", minimum=0)
        n_mcmc_steps = check_integer(n_mcmc_steps, "n_mcmc_steps", minimum=5)
        k_is, k_mc, k_q = jax.random.split(key, 3)
        support, lp, log_z = adaptive_importance(
            k_is, mix, prior, Y, X_test, tn, n_particles, n_stages, mode_radius)
        if num_chains >= 2:
            n_warm = int(round(0.6 * n_mcmc_steps))
            thin = max(1, (n_mcmc_steps - n_warm) // 10)
            n_keep = thin * ((n_mcmc_steps - n_warm) // thin)
            scale = scott_bandwidth(Y)
            states, best, _ = langevin_moves(
                k_mc, mix, prior, X_test, tn, support, lp, scale,
                0.3 ** (n_stages - 1), num_chains, n_warm, n_keep, thin,
                0.5 * mode_radius)
            support, lp, log_z = chain_proposal(k_q, mix, prior, X_test, tn,
                                                states, best, 4 * n_particles,
                                                scale)
        modes, masses = top_k_modes(support, np.exp(lp), k, radius=mode_radius)
        cell, shape = None, None
    if refine:
        modes = refine_modes(mix, prior, X_test, modes, tn, mode_radius)
    ess = 1.0 / np.sum(np.exp(2 * lp), axis=1)
    kind = fit.transform.kind
    return InverseGPPredictive(support, lp, modes, masses, cell, sampler, ess,
                               shape, mix, prior, bool(noisy_inputs),
                               np.asarray(log_z, float) + log_jacobian(kind, X_raw),
                               kind)


def predictive_log_density(predictive: InverseGPPredictive, Y_eval, X_test, *,
                           normalized: bool = False) -> np.ndarray:
    """log p(x*_i | y_ij, D) + log p(y_ij): the unnormalised log density of
    (B) at outputs ``Y_eval`` ``(n_test, n_e, d_y)`` for the test inputs
    ``X_test`` ``(n_test, d_x)``, under the mixture and prior of
    ``predictive``; ``normalized=True`` subtracts the predictive's
    ``log_normalizer`` (log p(y_ij | x*_i, D), a proper log density of y).
    Cost O(n_test n_e (P m r + C r d_x))."""
    if not isinstance(predictive, InverseGPPredictive):
        raise TypeError("predictive must be an InverseGPPredictive from "
                        f"inverse_gp_predictive, got {type(predictive).__name__}")
    mix, prior = predictive.mixture, predictive.prior
    dt = mix.Y.dtype
    Ye = jnp.asarray(as_float_array(Y_eval, "Y_eval", ndim=3), dt)
    X_raw = np.asarray(as_float_array(X_test, "X_test", ndim=2), np.float64)
    Xt = jnp.asarray(apply_transform(predictive.transform, X_raw, "X_test"), dt)
    if Ye.shape[0] != Xt.shape[0] or Ye.shape[2] != mix.Y.shape[1]:
        raise ValueError(f"Y_eval must have shape (n_test, n_e, {mix.Y.shape[1]}) "
                         f"with n_test = {Xt.shape[0]}, got {Ye.shape}")
    tn = jnp.asarray(float(predictive.noisy_inputs), dt)
    ll = mixture_log_likelihood_each(mix, Ye, Xt, tn)
    lp = jax.vmap(lambda y: log_prior(prior.kind, prior.params, y))(Ye)
    out = (np.asarray(ll + lp, float)
           + log_jacobian(predictive.transform, X_raw)[:, None])
    if normalized:
        out = out - np.asarray(predictive.log_normalizer, float)[:, None]
    return out
