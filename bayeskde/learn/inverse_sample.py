"""Draws of the inverse model's predictive p(y* | x*, D): the grid's cells for
d_y <= 2, NUTS on log p(x* | y, D) + log p(y) above (vectorised over test
inputs and chains, with split R-hat, bulk ESS and divergences reported).

* :func:`inverse_gp_sample` - ``(n_test, num_samples, d_y)`` draws, the
  sampler chosen by the output dimension (``"auto"``);
* :func:`inverse_gp_nuts` - the NUTS sampler itself and its
  :class:`NUTSReport`.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from .._validation import as_float_array, check_integer, check_key
from ..models.inverse_gp_predictive import _projections
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
    ``num_chains`` a test input, ``num_warmup``, ``num_keep`` a chain.
    """

    rhat: np.ndarray
    ess: np.ndarray
    divergences: np.ndarray
    distinct: np.ndarray
    num_chains: int
    num_warmup: int
    num_keep: int


def _support_transform(prior, d):
    """The bijection from R^d onto the output prior's support."""
    from numpyro.distributions import constraints
    from numpyro.distributions.transforms import biject_to

    if prior.kind == "box":
        low, high = prior.params
        return biject_to(constraints.independent(constraints.interval(low, high), 1))
    if prior.kind == "kde":
        return biject_to(constraints.real_vector)
    support = prior.params.support
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


def _nuts_program(transform, kind, params, num_warmup, num_keep, dense_mass,
                  max_tree_depth):
    from numpyro.infer.hmc import hmc

    from ..models.inverse_gp_predictive import _log_likelihood

    def run(mix, z0, xs, keys, test_noise):
        def log_target(z, x):
            y = transform(z)
            ll = _log_likelihood(mix, _projections(mix, y[None]), x[None],
                                 test_noise)[0, 0]
            lp = _log_prior(kind, params, y[None])[0]
            return ll + lp + jnp.sum(transform.log_abs_det_jacobian(z, y))

        def gen(x):
            return lambda z: -log_target(z, x)

        init_kernel, sample_kernel = hmc(potential_fn_gen=gen, algo="NUTS")
        states = jax.vmap(lambda z, x, k: init_kernel(
            z, num_warmup, dense_mass=dense_mass, max_tree_depth=max_tree_depth,
            model_args=(x,), rng_key=k))(z0, xs, keys)
        step = jax.vmap(lambda st, x: sample_kernel(st, model_args=(x,)))
        states, _ = jax.lax.scan(lambda st, _: (step(st, xs), None), states, None,
                                 length=num_warmup)

        def keep(st, _):
            st = step(st, xs)
            return st, (jax.vmap(transform)(st.z), st.diverging)

        _, (ys, div) = jax.lax.scan(keep, states, None, length=num_keep)
        return ys, div

    return jax.jit(run)


def inverse_gp_nuts(
    key: jax.Array, fit, X_test, num_samples: int, *, num_chains: int = 4,
    num_warmup: int = 500, mode: str = "average", n_draws: int = 100,
    output_prior=None, noisy_inputs: bool = True, margin: float = 0.0,
    mode_radius: float | None = None, dense_mass: bool = True,
    max_tree_depth: int = 8, predictive: InverseGPPredictive | None = None,
) -> tuple[np.ndarray, NUTSReport]:
    """Draws of p(y* | x*, D) proportional to p(x* | y*, D) p(y*) by NUTS
    (Hoffman and Gelman 2014; numpyro's kernel, its step size and dense mass
    matrix adapted in ``num_warmup`` steps), in any output dimension.

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
    of the weight, fewer projections per step).

    Returns:
        ``(draws (n_test, num_samples, d_y), report)``: a
        :class:`NUTSReport`.

    Cost: n_test num_chains (num_warmup + num_keep) NUTS iterations of up to
    2^max_tree_depth gradient evaluations each, one evaluation O(P m r + C r
    d_x) (Gaussian) or O(m r + m d_x) (residual).
    """
    from numpyro.diagnostics import effective_sample_size, split_gelman_rubin

    key = check_key(key)
    num_samples = check_integer(num_samples, "num_samples", minimum=1)
    num_chains = check_integer(num_chains, "num_chains", minimum=1)
    num_warmup = check_integer(num_warmup, "num_warmup", minimum=1)
    max_tree_depth = check_integer(max_tree_depth, "max_tree_depth", minimum=1)
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
    score = _blocked_loglik(mix, seeds, jnp.asarray(X_test, dt), tn) + lp_seed[None]
    seeds_np = np.broadcast_to(np.asarray(seeds), (n, *seeds.shape))
    top = _diverse_top(seeds_np, score, min(num_chains, seeds.shape[0]),
                       mode_radius)
    top = np.concatenate([top] * (-(-num_chains // top.shape[1])), 1)[:, :num_chains]
    y0 = np.take_along_axis(seeds_np, top[..., None], 1).reshape(-1, d)
    transform = _support_transform(prior, d)
    z0 = np.asarray(jax.vmap(transform.inv)(jnp.asarray(y0, dt)))
    z0 = jnp.asarray(np.where(np.isfinite(z0), z0, 0.0), dt)
    num_keep = -(-num_samples // num_chains)
    run = _nuts_program(transform, prior.kind, prior.params, num_warmup, num_keep,
                        bool(dense_mass), max_tree_depth)
    xs = jnp.asarray(np.repeat(X_test, num_chains, axis=0), dt)
    keys = jax.random.split(k_run, n * num_chains)
    ys, div = run(mix, z0, xs, keys, tn)  # (keep, n C, d), (keep, n C)
    ys = np.asarray(ys, float).reshape(num_keep, n, num_chains, d)
    ys = np.moveaxis(ys, 0, 2)  # (n, C, keep, d)
    rhat = np.stack([np.asarray(split_gelman_rubin(y)) if num_chains > 1
                     else np.full(d, np.nan) for y in ys])
    ess = np.stack([np.asarray(effective_sample_size(y)) for y in ys])
    divs = np.asarray(div).reshape(num_keep, n, num_chains).sum(axis=(0, 2))
    draws = ys.reshape(n, num_chains * num_keep, d)
    # chain-major order cut at num_samples: keep every chain's share instead
    idx = np.linspace(0, num_chains * num_keep - 1, num_samples).round().astype(int)
    draws = draws[:, idx]
    distinct = np.array([len(np.unique(dr, axis=0)) for dr in draws])
    return draws, NUTSReport(rhat, ess, divs, distinct, num_chains, num_warmup,
                             num_keep)


def inverse_gp_sample(
    key: jax.Array, fit, X_test, num_samples: int, *,
    predictive: InverseGPPredictive | None = None, sampler: str = "auto",
    num_chains: int = 4, num_warmup: int = 500, return_report: bool = False,
    **kwargs,
):
    """Draws of the predictive p(y* | x*, D).

    ``sampler``:

    * ``"grid"`` (``"auto"`` for d_y <= 2): a cell of the grid predictive by
      its probability, then uniform within it (exact for the
      piecewise-constant density on the grid).
    * ``"nuts"`` (``"auto"`` for d_y > 2): :func:`inverse_gp_nuts`,
      ``num_chains`` chains a test input after ``num_warmup`` steps; the
      draws are the chains' states.
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
            ``output_prior``, ``noisy_inputs``, ``margin`` for NUTS).
        return_report: also return NUTS's :class:`NUTSReport` (``None`` for
            the other samplers).

    Returns:
        ``(n_test, num_samples, d_y)`` draws (and the report).

    Cost: that of :func:`inverse_gp_predictive` plus O(n_test (n_c +
    num_samples log n_c)) time and O(n_test (n_c + num_samples)) memory for
    the n_c candidates, or that of :func:`inverse_gp_nuts` (no grid or
    importance stage).
    """
    key = check_key(key)
    num_samples = check_integer(num_samples, "num_samples", minimum=1)
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
                            "margin", "mode_radius")}
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
    n, n_c = lp.shape
    k1, k2 = jax.random.split(key)
    # inverse-CDF draws, O(n n_c + n S log n_c) time and O(n (n_c + S))
    # memory (jax.random.categorical's Gumbel trick with a sample shape holds
    # n S n_c numbers: 8 GB for 10 x 10,000 draws on a 100 x 100 grid)
    cdf = np.cumsum(np.exp(lp - lp.max(axis=1, keepdims=True)), axis=1)
    u = np.asarray(jax.random.uniform(k1, (n, num_samples)), float) * cdf[:, -1:]
    idx = np.stack([np.minimum(np.searchsorted(c, uu, side="right"), n_c - 1)
                    for c, uu in zip(cdf, u, strict=True)])
    if predictive.method == "grid":
        cand = np.asarray(predictive.support, float)
        u = np.asarray(jax.random.uniform(k2, (n, num_samples, cand.shape[1])),
                       float)
        out = cand[idx] + (u - 0.5) * np.asarray(predictive.cell, float)
    else:
        sup = np.asarray(predictive.support, float)
        out = np.take_along_axis(sup, idx[..., None], axis=1)
    return (out, None) if return_report else out
