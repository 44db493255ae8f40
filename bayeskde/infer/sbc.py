"""Simulation-based calibration (Talts, Betancourt, Simpson, Vehtari and Gelman 2018).

For a generative model p(theta) p(y | theta): draw theta_r from the prior and y_r
from the likelihood, r = 1..R, sample L draws from p(theta | y_r), and count the
draws below theta_r. If the sampler targets the posterior, each rank is uniform
on {0, ..., L} (Talts et al., Theorem 1). :func:`sbc_rank_test` bins the ranks and
runs a chi-square test per parameter and pooled; :func:`replicated_nuts` runs R
independent NUTS chains, one per replication with its own adaptation, as one
compiled program (vmap of NumPyro's functional ``hmc`` with the data as dynamic
arguments), so R = 100s costs one compilation.

:func:`sbc_ecdf_band` gives the ECDF-difference view of the ranks (Saeilynoja,
Buerkner and Vehtari 2022): the ECDF of the scaled ranks minus the uniform CDF, with
a band that holds the whole curve of a calibrated sampler with probability
``prob`` (simultaneous, not pointwise), found by simulating uniform ranks.

The draws should be close to independent (the theorem assumes it): thin the chain
until the effective sample size is near L (:func:`replicated_nuts` returns every
``thin``-th draw; check the ESS, e.g. ``numpyro.diagnostics.effective_sample_size``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from numpyro.infer.hmc import hmc
from numpyro.infer.util import initialize_model
from scipy import stats

from .._validation import check_integer, check_key

__all__ = [
    "SBCResult",
    "SBCECDFBand",
    "sbc_ecdf_band",
    "sbc_rank_test",
    "replicated_nuts",
]


class SBCResult(NamedTuple):
    """Rank statistics and their uniformity tests.

    Attributes:
        ranks: ``(R, P)`` ranks in 0..L.
        counts: ``(P, bins)`` histogram of each parameter's ranks.
        p_each: ``(P,)`` chi-square p-value of each parameter.
        p_pooled: chi-square p-value of all ranks pooled.
        p_min_bonferroni: ``min(p_each) * P`` (capped at 1): one family-wise
            p-value for "every parameter uniform".
    """

    ranks: np.ndarray
    counts: np.ndarray
    p_each: np.ndarray
    p_pooled: float
    p_min_bonferroni: float


def sbc_rank_test(draws, truths, bins: int = 10) -> SBCResult:
    """Ranks of the truths among the posterior draws, and chi-square tests.

    Args:
        draws: ``(R, L, P)`` posterior draws per replication (or ``(R, L)``).
        truths: ``(R, P)`` the prior draws that generated each data set.
        bins: histogram bins; ``L + 1`` must be a multiple of ``bins`` so every
            bin holds the same number of rank values.

    Raises:
        ValueError: mismatched shapes, NaN, or ``L + 1`` not divisible by ``bins``.
    """
    draws, truths = np.asarray(draws, float), np.asarray(truths, float)
    if draws.ndim == 2:
        draws = draws[..., None]
    if truths.ndim == 1:
        truths = truths[:, None]
    if draws.ndim != 3 or truths.shape != (draws.shape[0], draws.shape[2]):
        raise ValueError(
            f"draws must be (R, L, P) and truths (R, P); got {draws.shape} and "
            f"{truths.shape}"
        )
    if not (np.all(np.isfinite(draws)) and np.all(np.isfinite(truths))):
        raise ValueError("draws and truths must be finite (no NaN/inf)")
    bins = check_integer(bins, "bins", minimum=2)
    L = draws.shape[1]
    if (L + 1) % bins:
        raise ValueError(f"L + 1 = {L + 1} draws must be a multiple of bins = {bins}")
    ranks = np.sum(draws < truths[:, None, :], axis=1)
    counts = np.stack([np.bincount(ranks[:, j] * bins // (L + 1), minlength=bins)
                       for j in range(ranks.shape[1])])
    p_each = np.array([stats.chisquare(c).pvalue for c in counts])
    p_pooled = float(stats.chisquare(counts.sum(0)).pvalue)
    return SBCResult(ranks, counts, p_each, p_pooled,
                     float(min(1.0, p_each.min() * len(p_each))))


class SBCECDFBand(NamedTuple):
    """ECDF difference of SBC ranks with its simultaneous band.

    Attributes:
        z: ``(Z,)`` evaluation points in (0, 1).
        ecdf_diff: ``(P, Z)`` ECDF of the scaled ranks minus the uniform CDF.
        lower, upper: ``(Z,)`` band of the ECDF difference.
        inside: ``(P,)`` whether each parameter's curve stays in the band.
        gamma: the pointwise level that gives the simultaneous ``prob``.
    """

    z: np.ndarray
    ecdf_diff: np.ndarray
    lower: np.ndarray
    upper: np.ndarray
    inside: np.ndarray
    gamma: float


def sbc_ecdf_band(key: jax.Array, ranks, L: int, prob: float = 0.95,
                  n_sims: int = 2000) -> SBCECDFBand:
    """ECDF-difference curves of SBC ranks and a simultaneous band.

    The ranks r in {0..L} are uniform under calibration, so at z_k = k / (L + 1)
    (k = 1..L, at most 99 points) R F(z_k) is Binomial(R, z_k). Each of ``n_sims``
    simulated uniform rank sets gets its smallest two-sided binomial tail
    probability over z; gamma is the (1 - prob) quantile of those minima, and the
    band is the binomial central (1 - gamma) interval at every z (Saeilynoja et
    al. 2022, section 2.2, simulation method), so a calibrated sampler's whole
    curve stays inside with probability ``prob``.

    Args:
        key: JAX PRNG key for the simulated uniform ranks.
        ranks: ``(R, P)`` or ``(R,)`` ranks (:attr:`SBCResult.ranks`).
        L: number of posterior draws per replication.
        prob: simultaneous coverage of the band.
        n_sims: simulated rank sets.

    Raises:
        ValueError: ranks outside 0..L, ``prob`` outside (0, 1).

    Cost: O(n_sims R Z) time, O(n_sims Z) memory.
    """
    key = check_key(key, "key")
    L = check_integer(L, "L", minimum=1)
    n_sims = check_integer(n_sims, "n_sims", minimum=10)
    if not 0.0 < prob < 1.0:
        raise ValueError(f"prob must be in (0, 1), got {prob}")
    ranks = np.asarray(ranks)
    ranks = ranks[:, None] if ranks.ndim == 1 else ranks
    if ranks.ndim != 2 or ranks.min() < 0 or ranks.max() > L:
        raise ValueError(f"ranks must be (R, P) integers in 0..{L}")
    R = ranks.shape[0]
    step = max(1, (L + 1) // 100)
    k = np.arange(step, L + 1, step)
    z = k / (L + 1)

    def counts(r):  # (..., R) -> (..., Z): number of ranks below z (L + 1)
        return np.sum(r[..., None] < k, axis=-2)

    def tail(c):  # two-sided binomial tail probability of the counts
        return np.minimum(1.0, 2.0 * np.minimum(stats.binom.cdf(c, R, z),
                                                stats.binom.sf(c - 1, R, z)))

    sims = np.asarray(jax.random.randint(key, (n_sims, R), 0, L + 1))
    gamma = float(np.quantile(tail(counts(sims)).min(axis=1), 1.0 - prob))
    lo = stats.binom.ppf(gamma / 2, R, z) / R - z
    hi = stats.binom.ppf(1.0 - gamma / 2, R, z) / R - z
    diff = counts(ranks.T) / R - z
    inside = np.all((diff >= lo - 1e-12) & (diff <= hi + 1e-12), axis=1)
    return SBCECDFBand(z, diff, lo, hi, inside, gamma)


def replicated_nuts(
    model: Callable, example_args: tuple, example_kwargs: dict | None = None, *,
    num_warmup: int = 200, num_draws: int = 99, thin: int = 1,
) -> Callable:
    """One NUTS chain per replication, vmapped: ``sample(key, args, kwargs)``.

    ``model(*args, **kwargs)`` is a NumPyro model whose array arguments are
    dynamic: ``args`` and ``kwargs`` passed to ``sample`` carry a leading
    replication axis R on every array leaf (static configuration must be bound
    into ``model``, e.g. with ``functools.partial``). Each replication starts
    uniformly in [-1, 1] on the unconstrained scale, adapts for ``num_warmup``
    steps, then keeps every ``thin``-th of ``num_draws * thin`` draws.

    Returns:
        ``sample(key, args, kwargs=None) -> dict`` of constrained draws, each
        ``(R, num_draws, ...)``; compiled once per shape.

    Cost: R chains of ``num_warmup + num_draws * thin`` NUTS steps, run in
    lock-step (a step waits for the deepest tree in the batch).
    """
    num_warmup = check_integer(num_warmup, "num_warmup", minimum=1)
    num_draws = check_integer(num_draws, "num_draws", minimum=1)
    thin = check_integer(thin, "thin", minimum=1)
    example_kwargs = dict(example_kwargs or {})
    with jax.numpy_rank_promotion("allow"):
        info = initialize_model(jax.random.key(0), model, model_args=example_args,
                                model_kwargs=example_kwargs, dynamic_args=True)
    init_kernel, sample_kernel = hmc(potential_fn_gen=info.potential_fn,
                                     algo="NUTS")
    shapes = info.param_info.z

    def one(key, args, kwargs):
        k_init, k_run = jax.random.split(key)
        z0 = {k: jax.random.uniform(jax.random.fold_in(k_init, i), v.shape, v.dtype,
                                    -1.0, 1.0)
              for i, (k, v) in enumerate(sorted(shapes.items()))}
        state = init_kernel(z0, num_warmup=num_warmup, model_args=args,
                            model_kwargs=kwargs, rng_key=k_run)

        def step(s, _):
            s = sample_kernel(s, model_args=args, model_kwargs=kwargs)
            return s, s.z

        _, zs = jax.lax.scan(step, state, None, length=num_warmup + num_draws * thin)
        zs = jax.tree.map(lambda a: a[num_warmup::thin], zs)
        return jax.vmap(info.postprocess_fn(*args, **kwargs))(zs)

    run = jax.jit(jax.vmap(one))

    def sample(key, args, kwargs=None):
        args = jax.tree.map(jnp.asarray, tuple(args))
        kwargs = jax.tree.map(jnp.asarray, dict(kwargs or {}))
        leaves = jax.tree.leaves((args, kwargs))
        if not leaves:
            raise ValueError("sample needs at least one array argument")
        R = leaves[0].shape[0]
        if any(leaf.shape[:1] != (R,) for leaf in leaves):
            raise ValueError(
                "every array argument needs the same leading replication axis; got "
                f"{sorted({leaf.shape[:1] for leaf in leaves})}"
            )
        with jax.numpy_rank_promotion("allow"):
            return run(jax.random.split(key, R), args, kwargs)

    return sample
