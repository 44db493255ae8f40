"""Draws of the inverse model's predictive p(y* | x*, D): the grid's cells for
d_y <= 2, NUTS's warm-up then HMC on log p(x* | y, D) + log p(y) above
(vectorised over test inputs and chains, with split R-hat, bulk ESS,
acceptance and divergences reported).

* :func:`inverse_gp_sample` - ``(n_test, num_samples, d_y)`` draws, the
  sampler chosen by the output dimension (``"auto"``);
* :func:`inverse_gp_nuts` - the NUTS sampler itself and its
  :class:`NUTSReport`.
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from .._validation import (
    as_float_array,
    check_integer,
    check_key,
    check_nonnegative,
)
from ..models.inverse_gp_predictive import _projections
from ._grid_draws import _inverse_cdf, _refined_grid
from ._prior_draws import _diverse_top, _log_prior, _sample_prior
from .inverse_predictive import (
    InverseGPPredictive,
    _blocked_loglik,
    _fit_mixture,
    inverse_gp_predictive,
    resolve_output_prior,
)

__all__ = ["NUTSReport", "inverse_gp_nuts", "inverse_gp_sample"]

class NUTSReport(NamedTuple):
    """Diagnostics of :func:`inverse_gp_nuts`, per test input.

    ``rhat`` ``(n_test, d_y)`` split R-hat and ``ess`` ``(n_test, d_y)`` bulk
    effective sample size of each output over the test input's chains
    (:mod:`numpyro.diagnostics`), ``divergences`` ``(n_test,)`` divergent
    transitions after warm-up, ``distinct`` ``(n_test,)`` distinct draws;
    ``num_chains`` a test input, ``num_warmup``, ``num_keep`` a chain;
    ``acceptance`` ``(n_test,)`` the mean acceptance probability after
    warm-up, ``sampling`` the kernel after warm-up (``"hmc"`` or ``"nuts"``).
    """

    rhat: np.ndarray
    ess: np.ndarray
    divergences: np.ndarray
    distinct: np.ndarray
    num_chains: int
    num_warmup: int
    num_keep: int
    acceptance: np.ndarray | None = None
    sampling: str = "nuts"


def _support_transform(kind, params, d):
    """The bijection from R^d onto the output prior's support."""
    from numpyro.distributions import constraints
    from numpyro.distributions.transforms import biject_to

    if kind == "box":
        low, high = params
        return biject_to(constraints.independent(constraints.interval(low, high), 1))
    if kind == "kde":
        return biject_to(constraints.real_vector)
    support = params.support
    if support.event_dim == 0:
        support = constraints.independent(support, 1)
    return biject_to(support)


def _prune(mix, tol=1e-6):
    """The components holding all but ``tol`` of the weight (renormalised),
    and only the pairs they use: fewer projections per NUTS step."""
    lw = np.asarray(mix.log_w, float)
    order = np.argsort(-lw)
    cum = np.cumsum(np.exp(lw[order]))
    keep = np.sort(order[:int(np.searchsorted(cum, 1.0 - tol)) + 1])
    pair = np.asarray(mix.pair)[keep]
    pairs, new_pair = np.unique(pair, return_inverse=True)
    lwk = lw[keep] - np.logaddexp.reduce(lw[keep])
    dt = mix.lam.dtype
    return mix._replace(
        U=mix.U[pairs], lam=mix.lam[pairs], proj=mix.proj[pairs],
        alpha=mix.alpha[pairs], gamma=mix.gamma[pairs],
        pair=jnp.asarray(new_pair), amplitude=mix.amplitude[keep],
        noise=mix.noise[keep], log_w=jnp.asarray(lwk, dt))


#: HMC's trajectory after warm-up as a fraction of NUTS's mean trajectory over
#: the last fifth of warm-up (:func:`inverse_gp_nuts`, ``sampling="hmc"``);
#: read when the sampler's program is traced. On the 10-D sbibm task at 1e3
#: simulations 0.3 was 11% faster but cut the smallest bulk ESS from 7,265 to
#: 2,095 of 10,000 draws (docs/sbi.md).
HMC_TRAJECTORY = 0.5

#: Eigenpairs of a pair's spectrum that NUTS drops: a^2 lambda_j below this
#: fraction of s^2 (the largest amplitude and smallest noise of the pair's
#: components), see :func:`_truncate_spectrum`.
SPECTRUM_TOL = 1e-2


def _truncate_spectrum(mix, tol=SPECTRUM_TOL):
    """The mixture with each pair's eigenpairs of a^2 lambda_j < tol s^2 dropped
    (the pairs re-padded to the largest kept count; s^2 the residual density's
    smallest kernel variance where that is smaller).

    In (M) an eigenpair j enters the mean as a^2 lambda_j phi_j(y) proj_j /
    (a^2 lambda_j + s^2) and the latent variance as a^4 lambda_j^2 phi_j(y)^2 /
    (a^2 lambda_j + s^2), with A_j = k(y)^T U_j = lambda_j phi_j(y) (phi_j
    the Nystroem extension of eigenvector j, bounded): both shrink with
    a^2 lambda_j / s^2, so the dropped pairs move the log likelihood by
    O(tol) (measured on the 10-D sbibm task at 1e3 simulations: tol 1e-4
    keeps 406 of 1000 eigenpairs, |delta log p| <= 5e-4 nats out to the
    posterior's tails; the default 1e-2 keeps 156, |delta log p| <= 1e-2 nats,
    and the same C2ST; tested against the full spectrum). ``tol`` 0 keeps
    every nonzero eigenpair.
    Cost per NUTS gradient O(m r_kept) instead of O(m r)."""
    lam = np.asarray(mix.lam, float)  # (P, r)
    pair = np.asarray(mix.pair)
    P = lam.shape[0]
    amp = np.array([np.max(np.asarray(mix.amplitude)[pair == p]) for p in range(P)])
    s2 = np.array([np.min(np.asarray(mix.noise)[pair == p]) for p in range(P)])
    if mix.noise_model is not None:  # the residual density's kernel is narrower
        s2 = np.minimum(s2, float(np.min(np.asarray(mix.noise_model.eta))))
    kept = (amp[:, None] * lam >= tol * s2[:, None]) & (lam > 0)
    r = max(1, int(kept.sum(axis=1).max()))
    if r == lam.shape[1]:
        return mix
    idx = np.argsort(-lam, axis=1, kind="stable")[:, :r]  # (P, r): largest first
    U = jnp.stack([mix.U[p][..., idx[p]] for p in range(P)])
    return mix._replace(
        U=U, lam=jnp.take_along_axis(mix.lam, jnp.asarray(idx), 1),
        proj=jnp.take_along_axis(mix.proj, jnp.asarray(idx)[..., None], 1))


class _Filters(NamedTuple):
    """The components' spectral filters G_cj = 1 / (lambda_j + s_c^2 / a_c^2)
    of their pair, factored G = W V (:func:`_filters`): ``W`` ``(C, k)``,
    ``V`` ``(P, k, r)``."""

    W: jax.Array
    V: jax.Array


#: Relative singular value below which a pair's filter matrix is cut.
FILTER_RTOL = 1e-12


def _filters(mix, rtol=FILTER_RTOL):
    """(M) of component c is mu_c = sum_j A_j proj_j G_cj and var_f,c = a_c^2
    (sum_i alpha_i - sum_j A_j^2 G_cj) with G_cj = 1 / (lambda_j + s_c^2 /
    a_c^2) (the amplitude cancels): one pair's components differ only in the
    shift t_c = s_c^2 / a_c^2, and the Cauchy matrix [1 / (lambda_j + t_c)]
    over a posterior's narrow range of t has a rapidly decaying spectrum, so
    its SVD cut at ``rtol`` (k of a few, measured) factors every component's
    mean into k filtered projections of the pair: O(P k r d_x + C k d_x) a
    point instead of O(C r d_x)."""
    lam = np.asarray(mix.lam, float)
    pair = np.asarray(mix.pair)
    t = np.asarray(mix.noise, float) / np.asarray(mix.amplitude, float)
    P, r = lam.shape
    parts = []
    for p in range(P):
        c = np.nonzero(pair == p)[0]
        u, sv, vt = np.linalg.svd(1.0 / (lam[p][None] + t[c][:, None]),
                                  full_matrices=False)
        k = max(1, int(np.sum(sv > rtol * sv[0])))
        parts.append((c, u[:, :k] * sv[:k], vt[:k]))
    k = max(w.shape[1] for _, w, _ in parts)
    W = np.zeros((t.shape[0], k))
    V = np.zeros((P, k, r))
    for p, (c, w, v) in enumerate(parts):
        W[c, :w.shape[1]] = w
        V[p, :v.shape[0]] = v
    dt = mix.lam.dtype
    return _Filters(jnp.asarray(W, dt), jnp.asarray(V, dt))


def _point_log_likelihood(mix, filt, y, x, test_noise):
    """log p(x | y, D) of one output ``y`` ``(d_y,)`` and input ``x``
    ``(d_x,)``: :func:`~bayeskde.models.inverse_gp_predictive._log_likelihood`
    with the components' moments through the factored filters ``filt``
    (:func:`_filters`) instead of a scan over components. Cost O(P m r +
    P k r d_x + C k d_x)."""
    from ..models.inverse_noise import residual_log_likelihood

    A = _projections(mix, y[None])[:, 0]  # (P, r)
    amp, s2 = mix.amplitude, mix.noise
    B = jnp.einsum("pkr,pr,prd->pkd", filt.V, A, mix.proj)
    Q = jnp.einsum("pkr,pr->pk", filt.V, A**2)
    mu = jnp.einsum("ck,ckd->cd", filt.W, B[mix.pair]) + mix.x_mean[None, :]
    vf = amp * (jnp.sum(mix.alpha[mix.pair], 1)
                - jnp.einsum("ck,ck->c", filt.W, Q[mix.pair]))
    var = jnp.maximum(vf, 1e-6 * s2) + test_noise * s2  # (C,)
    d_x = x.shape[0]
    ll = -0.5 * jnp.sum((x[None] - mu) ** 2, 1) / var - 0.5 * d_x * jnp.log(
        2 * jnp.pi * var)
    if mix.noise_model is not None:
        ll = jnp.where(test_noise > 0, residual_log_likelihood(
            mix.noise_model, mu, jnp.maximum(vf, 0.0), x[None])[0], ll)
    return jax.nn.logsumexp(ll + mix.log_w)


def _log_target(mix, transform, kind, params, z, x, test_noise):
    """log p(x | y, D) + log p(y) + log |dy/dz| at y = transform(z); ``mix``
    a (mixture, filters) pair."""
    y = transform(z)
    ll = _point_log_likelihood(*mix, y, x, test_noise)
    lp = _log_prior(kind, params, y[None])[0]
    return ll + lp + jnp.sum(transform.log_abs_det_jacobian(z, y))


@functools.partial(jax.jit, static_argnames=(
    "kind", "num_warmup", "num_keep", "dense_mass", "max_tree_depth", "sampling"))
def _run_chains(mix, params, z0, xs, keys, test_noise, *, kind, num_warmup,
                num_keep, dense_mass, max_tree_depth, sampling):
    """All chains of all test inputs in one program: NUTS's warm-up, then
    ``num_keep`` states of HMC or NUTS. One module-level jit (the prior's
    parameters, a NumPyro distribution included, are pytree arguments), so a
    repeated call of the same shapes and settings does not recompile."""
    from numpyro.infer.hmc import hmc

    transform = _support_transform(kind, params, z0.shape[-1])

    def log_target(z, x):
        return _log_target(mix, transform, kind, params, z, x, test_noise)

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
    if sampling == "nuts":
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


def _chains(key, fit, X_test, num_chains, mode, n_draws, output_prior,
            noisy_inputs, margin, mode_radius, predictive, spectrum_tol):
    spectrum_tol = check_nonnegative(spectrum_tol, "spectrum_tol")
    data = fit.data
    X_test = np.asarray(as_float_array(X_test, "X_test"), float)
    X_test = X_test[:, None] if X_test.ndim == 1 else X_test
    if X_test.ndim != 2 or X_test.shape[1] != data.X.shape[1]:
        raise ValueError(f"X_test must have shape (n_test, {data.X.shape[1]}), got "
                         f"{X_test.shape}")
    Y = np.asarray(data.Y, float)
    n, d = X_test.shape[0], Y.shape[1]
    if predictive is not None:
        mix, prior = predictive.mixture, predictive.prior
        noisy_inputs = predictive.noisy_inputs
    else:
        if mode not in ("average", "map"):
            raise ValueError(f"mode must be 'average' or 'map', got {mode!r}")
        prior = resolve_output_prior(output_prior, Y, margin)
        mix = _fit_mixture(fit, mode, n_draws)
    mix = _prune(mix)
    dt = data.X.dtype
    tn = jnp.asarray(float(noisy_inputs), dt)
    if mode_radius is None:
        mode_radius = 0.1 * float(np.mean(np.ptp(Y, axis=0)) or 1.0)
    k_seed, k_run = jax.random.split(key)
    seeds = jnp.asarray(Y, dt)
    if prior.kind != "kde":
        seeds = jnp.concatenate([seeds, _sample_prior(
            prior.kind, prior.params, k_seed, Y.shape[0], d, dt)])
    lp_seed = np.asarray(_log_prior(prior.kind, prior.params, seeds))
    score = _blocked_loglik(mix, seeds, jnp.asarray(X_test, dt), tn)
    score = score + lp_seed[None]
    seeds_np = np.broadcast_to(np.asarray(seeds), (n, *seeds.shape))
    top = _diverse_top(seeds_np, score, min(num_chains, seeds.shape[0]),
                       mode_radius)
    top = np.concatenate([top] * (-(-num_chains // top.shape[1])), 1)[:, :num_chains]
    y0 = np.take_along_axis(seeds_np, top[..., None], 1).reshape(-1, d)
    transform = _support_transform(prior.kind, prior.params, d)
    z0 = np.asarray(jax.vmap(transform.inv)(jnp.asarray(y0, dt)))
    z0 = jnp.asarray(np.where(np.isfinite(z0), z0, 0.0), dt)
    xs = jnp.asarray(np.repeat(X_test, num_chains, axis=0), dt)
    mix = _truncate_spectrum(mix, spectrum_tol)
    return _Chains((mix, _filters(mix)), prior, transform, z0, xs, k_run, tn, n, d)


def _report(ys, div, num_chains, num_warmup, num_samples, acceptance=None,
            sampling="nuts"):
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
                             num_keep, acceptance, sampling)


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
    num_warmup: int = 500, mode: str = "average", n_draws: int = 100,
    output_prior=None, noisy_inputs: bool = True, margin: float = 0.0,
    mode_radius: float | None = None, dense_mass: bool = True,
    max_tree_depth: int | tuple[int, ...] | list[int] = (4, 8),
    predictive: InverseGPPredictive | None = None,
    spectrum_tol: float = SPECTRUM_TOL, sampling: str = "hmc",
) -> tuple[np.ndarray, NUTSReport]:
    """Draws of p(y* | x*, D) proportional to p(x* | y*, D) p(y*) by NUTS
    (Hoffman and Gelman 2014; numpyro's kernel, its step size and dense mass
    matrix adapted in ``num_warmup`` steps), in any output dimension.

    ``sampling``: the kernel after warm-up. ``"hmc"`` (default): HMC
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
    there are such, :func:`_diverse_top` with the modes' merge radius); NUTS
    does not cross between well-separated modes, so for a multimodal
    predictive the mass between modes follows where the chains started
    (check ``rhat``; the grid serves d_y <= 2 exactly).

    The likelihood is the predictive's own (the residual density or the
    Gaussian model average of ``fit.noise``; components holding all but 1e-6
    of the weight, fewer projections per step), with each pair's eigenpairs
    of a^2 lambda_j < ``spectrum_tol`` s^2 dropped (:func:`_truncate_spectrum`;
    0 keeps all).

    Returns:
        ``(draws (n_test, num_samples, d_y), report)``: a
        :class:`NUTSReport`.

    Cost: n_test num_chains num_warmup NUTS iterations of up to
    2^max_tree_depth[0] gradient evaluations each, then num_keep HMC (or NUTS)
    iterations; one evaluation O(P m r + P k r d_x + C k d_x) (Gaussian) or
    O(P m r + m d_x) (residual), r the kept eigenpairs and k the filters'
    rank (:func:`_filters`).
    """
    key = check_key(key)
    num_samples = check_integer(num_samples, "num_samples", minimum=1)
    num_chains = check_integer(num_chains, "num_chains", minimum=1)
    num_warmup = check_integer(num_warmup, "num_warmup", minimum=1)
    max_tree_depth = _tree_depths(max_tree_depth)
    if sampling not in ("hmc", "nuts"):
        raise ValueError(f"sampling must be 'hmc' or 'nuts', got {sampling!r}")
    ch = _chains(key, fit, X_test, num_chains, mode, n_draws, output_prior,
                 noisy_inputs, margin, mode_radius, predictive, spectrum_tol)
    num_keep = -(-num_samples // num_chains)
    keys = jax.random.split(ch.key, (3, ch.n * num_chains))
    ys, div, acc = _run_chains(  # (keep, n C, d)
        ch.mix, ch.prior.params, ch.z0, ch.xs, keys, ch.test_noise,
        kind=ch.prior.kind, num_warmup=num_warmup, num_keep=num_keep,
        dense_mass=bool(dense_mass), max_tree_depth=max_tree_depth,
        sampling=sampling)
    acc = np.asarray(acc, float).reshape(ch.n, num_chains).mean(1)
    return _report(ys, div, num_chains, num_warmup, num_samples, acc, sampling)


def inverse_gp_sample(
    key: jax.Array, fit, X_test, num_samples: int, *,
    predictive: InverseGPPredictive | None = None, sampler: str = "auto",
    num_chains: int = 4, num_warmup: int = 500, subdivide: int = 8,
    return_report: bool = False, **kwargs,
):
    """Draws of the predictive p(y* | x*, D).

    ``sampler``:

    * ``"grid"`` (``"auto"`` for d_y <= 2): a cell of the grid predictive by
      its probability, then uniform within it (exact for the
      piecewise-constant density on the grid), its most probable cells first
      split into ``subdivide^d_y`` sub-cells by the midpoint rule
      (:func:`_refined_grid`; ``subdivide=1`` draws from the grid's own
      cells). On sbibm at 1e4 simulations the 100 x 100 grid's cells are
      twice the posterior's finest scale (0.2 against gaussian_mixture's
      spike of sd 0.1; 0.02 against two_moons' crescent width 0.01), and
      the draws of the unrefined grid scored C2ST 0.596 and 0.583 there
      (docs/sbi.md).
    * ``"nuts"`` (``"auto"`` for d_y > 2): :func:`inverse_gp_nuts`,
      ``num_chains`` chains a test input after ``num_warmup`` steps of NUTS
      (then HMC of the adapted step size and mass matrix, or NUTS with
      ``sampling="nuts"``); the draws are the chains' states.
    * ``"importance"``: an importance resample of the last importance stage
      of :func:`inverse_gp_predictive` (the behaviour above two outputs before
      NUTS: at most 4 n_particles distinct points, check its ``ess``).

    Args:
        key: PRNG key.
        fit: :func:`bayeskde.learn.fit_inverse_gp` result.
        X_test: ``(n_test, d_x)``.
        num_samples: draws per test input.
        predictive: a :func:`inverse_gp_predictive` result for these
            ``X_test`` to reuse (its mixture and prior serve NUTS too);
            otherwise computed with ``kwargs`` (those of
            :func:`inverse_gp_predictive`; ``mode``, ``n_draws``,
            ``output_prior``, ``noisy_inputs``, ``margin``, ``sampling``,
            ``spectrum_tol``, ``dense_mass``, ``max_tree_depth`` for NUTS).
        subdivide: sub-cells per dimension of each refined grid cell (the
            grid sampler; 1 turns the refinement off).
        return_report: also return NUTS's :class:`NUTSReport` (``None`` for
            the other samplers).

    Returns:
        ``(n_test, num_samples, d_y)`` draws (and the report).

    Cost: that of :func:`inverse_gp_predictive` plus the refinement's
    O(n_test min(n_c subdivide^d_y, GRID_REFINE_EVALS)) density evaluations
    and O(n_test (n_c + num_samples log n_c)) time and O(n_test (n_c +
    num_samples)) memory for the n_c candidates, or that of
    :func:`inverse_gp_nuts` (no grid or importance stage).
    """
    key = check_key(key)
    num_samples = check_integer(num_samples, "num_samples", minimum=1)
    subdivide = check_integer(subdivide, "subdivide", minimum=1)
    if sampler not in ("auto", "grid", "nuts", "importance"):
        raise ValueError(f"sampler must be 'auto', 'grid', 'nuts' or "
                         f"'importance', got {sampler!r}")
    d = fit.data.Y.shape[1]
    if sampler == "auto":
        imp = kwargs.get("method") == "importance" or (
            predictive is not None and predictive.method == "importance")
        sampler = "nuts" if d > 2 else ("importance" if imp else "grid")
    if sampler == "nuts":
        nuts_kw = {k: v for k, v in kwargs.items()
                   if k in ("mode", "n_draws", "output_prior", "noisy_inputs",
                            "margin", "mode_radius", "dense_mass",
                            "max_tree_depth", "spectrum_tol", "sampling")}
        draws, report = inverse_gp_nuts(
            key, fit, X_test, num_samples, num_chains=num_chains,
            num_warmup=num_warmup, predictive=predictive, **nuts_kw)
        return (draws, report) if return_report else draws
    if predictive is None:
        kwargs.setdefault("refine", False)
        if sampler == "importance":
            kwargs.setdefault("method", "importance")
        predictive = inverse_gp_predictive(fit, X_test, **kwargs)
    if sampler == "grid" and predictive.method != "grid":
        raise ValueError("sampler='grid' needs a grid predictive (d_y <= 2)")
    lp = np.asarray(predictive.log_probs, float)
    n = lp.shape[0]
    k1, k2 = jax.random.split(key)
    if predictive.method == "grid":
        d = predictive.support.shape[1]
        if subdivide > 1:
            cand, lp, width = _refined_grid(predictive, X_test, subdivide)
        else:
            cand = np.broadcast_to(np.asarray(predictive.support, float),
                                   (n,) + predictive.support.shape)
            width = np.asarray(predictive.cell, float)[None]
        idx = _inverse_cdf(k1, lp, num_samples)
        u = np.asarray(jax.random.uniform(k2, (n, num_samples, d)), float)
        out = np.take_along_axis(cand, idx[..., None], axis=1) + (u - 0.5) * (
            width[idx] if width.shape[0] > 1 else width)
    else:
        idx = _inverse_cdf(k1, lp, num_samples)
        sup = np.asarray(predictive.support, float)
        out = np.take_along_axis(sup, idx[..., None], axis=1)
    return (out, None) if return_report else out
