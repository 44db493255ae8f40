"""MCMC draws of the inverse model's predictive p(y* | x*, D) in any output
dimension: NUTS's warm-up then HMC (or NUTS) on log p(x* | y, D) + log p(y),
vectorised over test inputs and chains, with split R-hat, bulk ESS,
acceptance and divergences reported (:class:`NUTSReport`).
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from .._validation import check_integer, check_key, check_nonnegative
from .evaluators import (
    SPECTRUM_TOL,
    filters,
    point_log_target,
    prune,
    truncate_spectrum,
)
from .importance import diverse_top
from .mixture import blocked_log_likelihood, fit_mixture
from .output_prior import (
    log_prior,
    resolve_output_prior,
    sample_prior,
    support_transform,
)
from .predictive import InverseGPPredictive, check_fit, model_inputs

__all__ = ["NUTSReport", "HMC_TRAJECTORY", "inverse_gp_nuts"]

class NUTSReport(NamedTuple):
    """Diagnostics of :func:`inverse_gp_nuts`, per test input.

    ``rhat`` ``(n_test, d_y)`` split R-hat and ``ess`` ``(n_test, d_y)`` bulk
    effective sample size of each output over the test input's chains
    (:mod:`numpyro.diagnostics`), ``divergences`` ``(n_test,)`` divergent
    transitions after warm-up, ``distinct`` ``(n_test,)`` distinct draws;
    ``num_chains`` a test input, ``num_warmup``, ``num_keep`` a chain;
    ``acceptance`` ``(n_test,)`` the mean acceptance probability after
    warm-up, ``sampling_kernel`` the kernel after warm-up (``"hmc"`` or
    ``"nuts"``).
    """

    rhat: np.ndarray
    ess: np.ndarray
    divergences: np.ndarray
    distinct: np.ndarray
    num_chains: int
    num_warmup: int
    num_keep: int
    acceptance: np.ndarray | None = None
    sampling_kernel: str = "nuts"


#: HMC's trajectory after warm-up as a fraction of NUTS's mean trajectory over
#: the last fifth of warm-up (:func:`inverse_gp_nuts`, ``sampling_kernel="hmc"``);
#: read when the sampler's program is traced. On the 10-D sbibm task at 1e3
#: simulations 0.3 was 11% faster but cut the smallest bulk ESS from 7,265 to
#: 2,095 of 10,000 draws (docs/sbi.md).
HMC_TRAJECTORY = 0.5

@functools.partial(jax.jit, static_argnames=(
    "kind", "num_warmup", "num_keep", "dense_mass", "max_tree_depth",
    "sampling_kernel"))
def _run_chains(mix, params, z0, xs, keys, test_noise, *, kind, num_warmup,
                num_keep, dense_mass, max_tree_depth, sampling_kernel):
    """All chains of all test inputs in one program: NUTS's warm-up, then
    ``num_keep`` states of HMC or NUTS. One module-level jit (the prior's
    parameters, a NumPyro distribution included, are pytree arguments), so a
    repeated call of the same shapes and settings does not recompile."""
    from numpyro.infer.hmc import hmc

    transform = support_transform(kind, params, z0.shape[-1])

    def log_target(z, x):
        return point_log_target(mix, transform, kind, params, z, x, test_noise)

    def gen(x):
        return lambda z: -log_target(z, x)

    init_kernel, sample_kernel = hmc(potential_fn_gen=gen, algo="NUTS")
    states = jax.vmap(lambda z, x, k: init_kernel(
        z, num_warmup, dense_mass=dense_mass, max_tree_depth=max_tree_depth,
        model_args=(x,), rng_key=k))(z0, xs, keys[0])
    step = jax.vmap(lambda st, x: sample_kernel(st, model_args=(x,)))
    tail = max(1, num_warmup // 5)

    def warm(st, i):
        st = step(st, xs)
        return st, jnp.where(i >= num_warmup - tail, st.num_steps, 0)

    states, n_steps = jax.lax.scan(warm, states, jnp.arange(num_warmup))
    if sampling_kernel == "nuts":
        kernel = states

        def advance(st, k):
            return step(st, xs)
    else:
        # HMC of the adapted step size and mass matrix for half NUTS's
        # mean trajectory over the last fifth of warm-up, the length
        # jittered uniformly in [0.5, 1.5] each iteration (Neal 2011,
        # sec. 5.4.2): every chain takes the same few leapfrog steps, where
        # NUTS's vectorised chains wait for the longest tree
        ad = states.adapt_state
        t0 = HMC_TRAJECTORY * jnp.sum(n_steps, 0) / tail * ad.step_size
        t0 = jnp.maximum(t0, 2.0 * ad.step_size)
        init_hmc, sample_hmc = hmc(potential_fn_gen=gen, algo="HMC")
        kernel = jax.vmap(lambda z, x, k, eps, imm, t: init_hmc(
            z, 0, step_size=eps, inverse_mass_matrix=imm,
            adapt_step_size=False, adapt_mass_matrix=False,
            dense_mass=dense_mass, trajectory_length=t, model_args=(x,),
            rng_key=k))(states.z, xs, keys[1], ad.step_size,
                        ad.inverse_mass_matrix, t0)
        hmc_step = jax.vmap(lambda st, x: sample_hmc(st, model_args=(x,)))

        def advance(st, k):
            u = jax.random.uniform(k, t0.shape, t0.dtype, 0.5, 1.5)
            return hmc_step(st._replace(trajectory_length=t0 * u), xs)

    def keep(st, k):
        st = advance(st, k)
        return st, (jax.vmap(transform)(st.z), st.diverging, st.accept_prob)

    _, (ys, div, acc) = jax.lax.scan(
        keep, kernel, jax.random.split(keys[2, 0], num_keep))
    return ys, div, jnp.mean(acc, 0)


class _Chains(NamedTuple):
    """What the chains share: the pruned, truncated mixture and its filters,
    the prior and its bijection, and one start per chain."""

    mix: tuple
    prior: object
    transform: object
    z0: jax.Array  # (n C, d) unconstrained starts
    xs: jax.Array  # (n C, d_x) each chain's test input
    key: jax.Array
    test_noise: jax.Array
    n: int
    d: int


def _chains(key, fit, X_test, num_chains, mode, num_draws, output_prior,
            noisy_inputs, margin, mode_radius, predictive, spectrum_tol):
    spectrum_tol = check_nonnegative(spectrum_tol, "spectrum_tol")
    data = check_fit(fit, "inverse_gp_nuts").data
    X_test = model_inputs(fit, X_test)
    Y = np.asarray(data.Y, float)
    n, d = X_test.shape[0], Y.shape[1]
    if predictive is not None:
        if (not isinstance(predictive, InverseGPPredictive)
                or predictive.log_probs.shape[0] != n):
            raise ValueError(f"predictive must be an InverseGPPredictive of these "
                             f"X_test ({n} rows)")
        mix, prior = predictive.mixture, predictive.prior
        noisy_inputs = predictive.noisy_inputs
    else:
        if mode not in ("average", "map"):
            raise ValueError(f"mode must be 'average' or 'map', got {mode!r}")
        prior = resolve_output_prior(output_prior, Y, margin)
        mix = fit_mixture(fit, mode, num_draws)
    mix = prune(mix)
    dt = data.X.dtype
    tn = jnp.asarray(float(noisy_inputs), dt)
    if mode_radius is None:
        mode_radius = 0.1 * float(np.mean(np.ptp(Y, axis=0)) or 1.0)
    k_seed, k_run = jax.random.split(key)
    seeds = jnp.asarray(Y, dt)
    if prior.kind != "kde":
        seeds = jnp.concatenate([seeds, sample_prior(
            prior.kind, prior.params, k_seed, Y.shape[0], d, dt)])
    lp_seed = np.asarray(log_prior(prior.kind, prior.params, seeds))
    score = blocked_log_likelihood(mix, seeds, jnp.asarray(X_test, dt), tn)
    score = score + lp_seed[None]
    seeds_np = np.broadcast_to(np.asarray(seeds), (n, *seeds.shape))
    top = diverse_top(seeds_np, score, min(num_chains, seeds.shape[0]),
                       mode_radius)
    top = np.concatenate([top] * (-(-num_chains // top.shape[1])), 1)[:, :num_chains]
    y0 = np.take_along_axis(seeds_np, top[..., None], 1).reshape(-1, d)
    transform = support_transform(prior.kind, prior.params, d)
    z0 = np.asarray(jax.vmap(transform.inv)(jnp.asarray(y0, dt)))
    z0 = jnp.asarray(np.where(np.isfinite(z0), z0, 0.0), dt)
    xs = jnp.asarray(np.repeat(X_test, num_chains, axis=0), dt)
    mix = truncate_spectrum(mix, spectrum_tol)
    return _Chains((mix, filters(mix)), prior, transform, z0, xs, k_run, tn, n, d)


def _report(ys, div, num_chains, num_warmup, num_samples, acceptance=None,
            sampling_kernel="nuts"):
    """Draws and :class:`NUTSReport` from the kept states ``ys`` ``(keep, n C,
    d)`` and divergences ``div`` ``(keep, n C)``."""
    from numpyro.diagnostics import effective_sample_size, split_gelman_rubin

    num_keep, nC, d = ys.shape
    n = nC // num_chains
    ys = np.asarray(ys, float).reshape(num_keep, n, num_chains, d)
    ys = np.moveaxis(ys, 0, 2)  # (n, C, keep, d)
    # numpyro's split R-hat needs 4 states a chain and its ESS 2: fewer give
    # NaN, not an assertion error
    rhat = np.stack([np.asarray(split_gelman_rubin(y))
                     if num_chains > 1 and num_keep >= 4
                     else np.full(d, np.nan) for y in ys])
    ess = np.stack([np.asarray(effective_sample_size(y)) if num_keep >= 2
                    else np.full(d, np.nan) for y in ys])
    divs = np.asarray(div).reshape(num_keep, n, num_chains).sum(axis=(0, 2))
    draws = ys.reshape(n, num_chains * num_keep, d)
    # chain-major order cut at num_samples: keep every chain's share instead
    idx = np.linspace(0, num_chains * num_keep - 1, num_samples).round().astype(int)
    draws = draws[:, idx]
    distinct = np.array([len(np.unique(dr, axis=0)) for dr in draws])
    return draws, NUTSReport(rhat, ess, divs, distinct, num_chains, num_warmup,
                             num_keep, acceptance, sampling_kernel)


def _tree_depths(max_tree_depth):
    """``(warm-up, sampling)`` tree-depth caps from an int or a pair."""
    pair = (tuple(max_tree_depth) if isinstance(max_tree_depth, (tuple, list))
            else (max_tree_depth, max_tree_depth))
    if len(pair) != 2:
        raise ValueError("max_tree_depth must be an integer or a pair of integers "
                         f"(warm-up, sampling), got {max_tree_depth!r}")
    return tuple(check_integer(v, "max_tree_depth", minimum=1) for v in pair)


def inverse_gp_nuts(
    key: jax.Array, fit, X_test, num_samples: int, *, num_chains: int = 4,
    num_warmup: int = 500, mode: str = "average", num_draws: int = 100,
    output_prior=None, noisy_inputs: bool = True, margin: float = 0.0,
    mode_radius: float | None = None, dense_mass: bool = True,
    max_tree_depth: int | tuple[int, ...] | list[int] = (4, 8),
    predictive: InverseGPPredictive | None = None,
    spectrum_tol: float = SPECTRUM_TOL, sampling_kernel: str = "hmc",
) -> tuple[np.ndarray, NUTSReport]:
    """Draws of p(y* | x*, D) proportional to p(x* | y*, D) p(y*) by NUTS
    (Hoffman and Gelman 2014; numpyro's kernel, its step size and dense mass
    matrix adapted in ``num_warmup`` steps), in any output dimension.

    ``sampling_kernel``: the kernel after warm-up. ``"hmc"`` (default): HMC
    (Neal 2011) with NUTS's adapted step size and mass matrix and a fixed
    trajectory, half NUTS's mean trajectory over the last fifth of warm-up,
    jittered uniformly in [0.5, 1.5] times each iteration (Neal 2011, sec.
    5.4.2). ``"nuts"``: NUTS throughout. The chains of all test inputs step
    together in one vectorised program, and a NUTS iteration lasts as long as
    the longest tree among them; HMC's trajectories are all about as long.
    On the 10-D sbibm task at 1e3 simulations (10 test inputs, 10,000 draws
    each, float32, 2 cores, tree depth 8) that is 64 s against 127 s for
    NUTS, bulk ESS at least 8,120 of 10,000 draws, C2ST 0.544 / 0.541
    against NUTS's 0.533 / 0.524 on observations 1 and 2 (NPE 0.70;
    docs/sbi.md).

    ``max_tree_depth``: NUTS's tree-depth cap, an int or a pair (warm-up,
    after warm-up; numpyro's tuple). The default (4, 8) caps warm-up trees at
    16 leapfrog steps: the first dense mass matrix, estimated from 25 states,
    is noisy, and with cap 8 the iterations that follow it ran trees of up to
    256 steps (29% of warm-up's cost), which every vectorised chain waits for.
    Measured on the 10-D task at 1e3 simulations (float64, 10 test inputs x
    10,000 draws, the same fit, 2 cores): draws 64 s against 102 s for cap
    8 throughout (81 s for (5, 8)); smallest bulk ESS 6,749 against 8,468;
    C2ST 0.562 / 0.548 against 0.562 / 0.550 on observations 1 and 2.

    Each test input gets ``num_chains`` chains, run side by side (one
    vectorised program for all test inputs and chains) in the unconstrained
    coordinates of the output prior's support (numpyro's ``biject_to`` of the
    box, or of the distribution's support; its log-Jacobian is added), each
    keeping ceil(num_samples / num_chains) consecutive states after warm-up:
    the draws are MCMC draws, every one a state of a chain (not an importance
    resample). The chains start at distinct high-density points among the
    training outputs and as many prior draws (one per separated region while
    there are such, ``diverse_top`` with the modes' merge radius); NUTS
    does not cross between well-separated modes, so for a multimodal
    predictive the mass between modes follows where the chains started
    (check ``rhat``; the grid serves d_y <= 2 exactly).

    The likelihood is the predictive's own (the residual density or the
    Gaussian model average of ``fit.noise``; components holding all but 1e-6
    of the weight, fewer projections per step), with each pair's eigenpairs
    of a^2 lambda_j < ``spectrum_tol`` s^2 dropped
    (:func:`~.evaluators.truncate_spectrum`; 0 keeps all).

    Returns:
        ``(draws (n_test, num_samples, d_y), report)``: a
        :class:`NUTSReport`.

    Cost: n_test num_chains num_warmup NUTS iterations of up to
    2^max_tree_depth[0] gradient evaluations each, then num_keep HMC (or NUTS)
    iterations; one evaluation O(P m r + P k r d_x + C k d_x) (Gaussian) or
    O(P m r + m d_x) (residual), r the kept eigenpairs and k the filters'
    rank (:func:`~.evaluators.filters`).
    """
    key = check_key(key)
    num_samples = check_integer(num_samples, "num_samples", minimum=1)
    num_chains = check_integer(num_chains, "num_chains", minimum=1)
    num_warmup = check_integer(num_warmup, "num_warmup", minimum=1)
    max_tree_depth = _tree_depths(max_tree_depth)
    if sampling_kernel not in ("hmc", "nuts"):
        raise ValueError(f"sampling_kernel must be 'hmc' or 'nuts', got "
                         f"{sampling_kernel!r}")
    ch = _chains(key, fit, X_test, num_chains, mode, num_draws, output_prior,
                 noisy_inputs, margin, mode_radius, predictive, spectrum_tol)
    num_keep = -(-num_samples // num_chains)
    keys = jax.random.split(ch.key, (3, ch.n * num_chains))
    ys, div, acc = _run_chains(  # (keep, n C, d)
        ch.mix, ch.prior.params, ch.z0, ch.xs, keys, ch.test_noise,
        kind=ch.prior.kind, num_warmup=num_warmup, num_keep=num_keep,
        dense_mass=bool(dense_mass), max_tree_depth=max_tree_depth,
        sampling_kernel=sampling_kernel)
    acc = np.asarray(acc, float).reshape(ch.n, num_chains).mean(1)
    return _report(ys, div, num_chains, num_warmup, num_samples, acc,
                   sampling_kernel)
