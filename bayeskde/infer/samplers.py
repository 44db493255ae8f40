"""Samplers: multi-chain NUTS and SVI with NumPyro, and the screen for failed
chains. They call no ArviZ; their results go to :mod:`.diagnostics`.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import NamedTuple

import jax
import numpy as np
from numpyro.infer import MCMC, NUTS, SVI, Trace_ELBO, autoguide

from .._validation import check_integer, check_key, check_positive

__all__ = ["run_nuts", "run_svi", "SVIFit", "drop_failed_chains"]


def _chain_method(num_chains: int) -> str:
    return "parallel" if jax.local_device_count() >= num_chains else "vectorized"


def run_nuts(
    key: jax.Array,
    model: Callable,
    *args,
    num_warmup: int = 500,
    num_samples: int = 500,
    num_chains: int = 2,
    target_accept_prob: float = 0.8,
    dense_mass: bool = False,
    max_tree_depth: int = 10,
    progress_bar: bool = True,
    init_params: dict | None = None,
    jit_model_args: bool = False,
    **kwargs,
) -> MCMC:
    """Run NUTS on ``model(*args, **kwargs)`` and return the fitted ``MCMC``.

    The chain method is ``"parallel"`` when JAX sees at least ``num_chains``
    devices and ``"vectorized"`` otherwise (one compiled program for all chains).
    ``init_params`` (unconstrained values, leading axis ``num_chains``) starts the
    chains at chosen points; ``jit_model_args=True`` passes the data as traced
    arguments, so repeated runs on new data of the same shape do not recompile.

    Raises:
        TypeError: ``key`` is not a ``jax.random`` key, or ``model`` is not
            callable.
        ValueError: for non-positive sample or chain counts, or a target
            acceptance probability outside (0, 1).
    """
    key = check_key(key, "key")
    _check_model(model)
    num_warmup = check_integer(num_warmup, "num_warmup", minimum=1)
    num_samples = check_integer(num_samples, "num_samples", minimum=1)
    num_chains = check_integer(num_chains, "num_chains", minimum=1)
    target_accept_prob = check_positive(target_accept_prob, "target_accept_prob")
    if not target_accept_prob < 1.0:
        raise ValueError(
            f"target_accept_prob must be in (0, 1), got {target_accept_prob}"
        )
    max_tree_depth = check_integer(max_tree_depth, "max_tree_depth", minimum=1)
    kernel = NUTS(model, target_accept_prob=target_accept_prob, dense_mass=dense_mass,
                  max_tree_depth=max_tree_depth)
    mcmc = MCMC(
        kernel,
        num_warmup=num_warmup,
        num_samples=num_samples,
        num_chains=num_chains,
        chain_method=_chain_method(num_chains),
        progress_bar=progress_bar,
        jit_model_args=jit_model_args,
    )
    mcmc.run(
        key, *args,
        extra_fields=("diverging", "potential_energy", "accept_prob", "num_steps"),
        init_params=init_params, **kwargs,
    )
    return mcmc


def _check_model(model) -> None:
    if not callable(model):
        raise TypeError(
            "model must be a NumPyro model function (a callable), got "
            f"{type(model).__name__} {model!r}"
        )


class SVIFit(NamedTuple):
    """Result of :func:`run_svi`: the guide, its parameters and the loss trace."""

    guide: Callable
    params: dict
    losses: np.ndarray


_GUIDES = {
    "normal": autoguide.AutoNormal,
    "lowrank": autoguide.AutoLowRankMultivariateNormal,
    "delta": autoguide.AutoDelta,
}


def run_svi(
    key: jax.Array,
    model: Callable,
    *args,
    guide: str = "normal",
    num_steps: int = 2000,
    learning_rate: float = 1e-2,
    progress_bar: bool = True,
    **kwargs,
) -> SVIFit:
    """Fit an automatic guide by SVI (Trace_ELBO, optax Adam).

    Args:
        guide: ``"normal"`` (AutoNormal), ``"lowrank"``
            (AutoLowRankMultivariateNormal) or ``"delta"`` (AutoDelta: MAP).

    Raises:
        TypeError: ``key`` is not a ``jax.random`` key, or ``model`` is not
            callable.
        ValueError: for an unknown guide, non-positive step count or rate.
    """
    import optax

    key = check_key(key, "key")
    _check_model(model)
    if not isinstance(guide, str) or guide not in _GUIDES:
        raise ValueError(f"guide must be one of {sorted(_GUIDES)}, got {guide!r}")
    num_steps = check_integer(num_steps, "num_steps", minimum=1)
    learning_rate = check_positive(learning_rate, "learning_rate")
    g = _GUIDES[guide](model)
    svi = SVI(model, g, optax.adam(learning_rate), Trace_ELBO())
    res = svi.run(key, num_steps, *args, progress_bar=progress_bar, **kwargs)
    return SVIFit(g, res.params, np.asarray(res.losses))


def drop_failed_chains(mcmc, *, min_accept: float = 0.05):
    """Split a run's chains into usable and failed ones, keeping the good draws.

    A chain fails when any of its draws is not finite or its mean acceptance
    probability is below ``min_accept`` (stuck). Returns ``(samples, failed)``:
    the per-chain samples dict (``(chain, draw, ...)`` arrays) of the usable
    chains and the indices of the failed ones, so one bad chain never loses the
    others' draws. Warns naming the failed chains.
    """
    samples = mcmc.get_samples(group_by_chain=True)
    n_chains = next(iter(samples.values())).shape[0]
    bad = np.zeros(n_chains, bool)
    for v in samples.values():
        v = np.asarray(v).reshape(n_chains, -1)
        bad |= ~np.all(np.isfinite(v), axis=1)
    extra = mcmc.get_extra_fields(group_by_chain=True)
    if "accept_prob" in extra:
        acc = np.asarray(extra["accept_prob"]).mean(axis=1)
        bad |= acc < min_accept
    failed = tuple(int(i) for i in np.flatnonzero(bad))
    if failed:
        warnings.warn(
            f"chains {list(failed)} failed (non-finite draws or acceptance below "
            f"{min_accept}); their draws are dropped, the other "
            f"{n_chains - len(failed)} chains are kept",
            RuntimeWarning,
            stacklevel=2,
        )
    keep = ~bad
    return {k: np.asarray(v)[keep] for k, v in samples.items()}, failed
