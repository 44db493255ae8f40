"""Bayesian hidden Markov model whose posterior feeds the mean-map kernels.

The model (:func:`bayesian_hmm_model`), for ``B`` padded sequences and ``N`` states:

    initial            ~ Dirichlet(a_pi)                    (N,)
    transition[i]      ~ Dirichlet(a_A[i])                  (N, N), plate ``state``
    categorical:  emission_probs[i] ~ Dirichlet(a_B[i])     (N, K)
    gaussian (diagonal Normal-Inverse-Gamma, per state i and feature d):
        emission_var[i, d]  ~ InverseGamma(var_shape, var_scale)
        emission_mean[i, d] ~ Normal(mean_loc, sqrt(emission_var / mean_precision))
    obs[b] | params    ~ HMM(params), states summed out,    plate ``sequence``

The hidden states are marginalised exactly by the forward algorithm, the same code
as the EM layer (:func:`bayeskde.hmm.forward_filter`, scaled recursions, vmapped
over sequences with the padding masked). The observed site ``obs`` has one log
likelihood per sequence, so ArviZ's ``log_likelihood`` group has a ``sequence``
dimension and LOO/WAIC treat sequences as the exchangeable units.

Label switching. The likelihood is invariant to permuting the states, so with
exchangeable priors the posterior has ``N!`` symmetric modes; a NUTS chain
usually stays in one and different chains may sit in different ones. No ordering
constraint is imposed (one coordinate of the Gaussian means can tie, as on the
circle of :func:`bayeskde.sequences.two_class_hmms`, and symbols have no order).
Instead :func:`relabel_draws` / :func:`relabel_samples` permute every draw's states
to match a reference by the Hungarian algorithm
(``scipy.optimize.linear_sum_assignment``) on the distance between emission
distributions, re-estimating the reference as the mean of the aligned draws
(Stephens 2000, Celeux 1998); summaries and R-hat are computed after relabelling.
The latent mean-map kernel of one draw is itself invariant to the labelling (the
state kernel ``L_N = exp(-lam [i != j])`` is permutation invariant), and so are
the generative kernels; only averaging *embeddings* across draws needs aligned
labels, see :func:`posterior_latent_mean_map_gram`.

Posterior-averaged mean-map kernels:

* :func:`posterior_latent_mean_map_gram`: the latent mean map (eq. 20) with the
  posterior of the hidden states integrated over the parameter posterior too;
* :func:`posterior_generative_mean_map_gram`: the GMMK (eqs. 5-6) / rho = 1 PPK
  (eq. 33) between the posterior predictive distributions of the objects.

References:
    Mehta and Gray, "Generative and Latent Mean Map Kernels", eqs. (5)-(6),
    (20)-(23), (29)-(33). Rabiner (1989), eqs. (19)-(21). M. Stephens (2000),
    "Dealing with label switching in mixture models", JRSS B 62(4).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from functools import partial
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import numpyro
import numpyro.distributions as dist
from jax.scipy.special import logsumexp
from jaxtyping import Array, Float, Shaped
from scipy.optimize import linear_sum_assignment

from .._typing import ArrayLike
from .._validation import check_integer, check_nonnegative, check_positive
from ..hmm import (
    CategoricalEmission,
    GaussianEmission,
    HMMParams,
    batch_posteriors,
    categorical_log_likelihoods,
    forward_filter,
    gaussian_log_likelihoods,
    pad_sequences,
    sample_hmm,
)
from ..meanmap import (
    LatentFeatures,
    adapt_hmms,
    continuous_emission_gram_exact,
    discrete_latent_features,
    hmm_log_kernel_gram,
    lmmk_gram_from_features,
    state_kernel_matrix,
    symbol_kernel_matrix,
)

__all__ = [
    "BayesianHMMPrior",
    "HMMSequences",
    "check_hmm_data",
    "hmm_sequence_log_likelihoods",
    "bayesian_hmm_model",
    "hmm_draws",
    "relabel_draws",
    "relabel_samples",
    "posterior_latent_mean_map_gram",
    "posterior_generative_mean_map_gram",
]

EMISSIONS = ("categorical", "gaussian")


class BayesianHMMPrior(NamedTuple):
    """Conjugate priors of :func:`bayesian_hmm_model`.

    Every field is a positive number or an array broadcastable to the shape of
    its site, so a prior can be asymmetric (e.g. ``1e4 * A0`` centres the
    transition matrix on ``A0``).

    Attributes:
        initial_concentration: Dirichlet of the initial distribution, ``(N,)``;
            default 1 (uniform on the simplex).
        transition_concentration: Dirichlet of each transition row, ``(N, N)``;
            default 1.
        emission_concentration: Dirichlet of each categorical emission row,
            ``(N, K)``; default 1.
        mean_loc: Normal-Inverse-Gamma location ``mu_0`` of the Gaussian means,
            ``(N, D)``; default 0 (standardise the data, or set it).
        mean_precision: ``kappa``: the mean's prior variance is
            ``emission_var / kappa``; default 0.1 (about 3 emission sds).
        var_shape: Inverse-Gamma shape ``a`` of the variances; default 2.
        var_scale: Inverse-Gamma scale ``b``; default 1 (prior mean
            ``b / (a - 1) = 1``).
    """

    initial_concentration: float | ArrayLike = 1.0
    transition_concentration: float | ArrayLike = 1.0
    emission_concentration: float | ArrayLike = 1.0
    mean_loc: float | ArrayLike = 0.0
    mean_precision: float | ArrayLike = 0.1
    var_shape: float | ArrayLike = 2.0
    var_scale: float | ArrayLike = 1.0


def _float():
    return jnp.zeros(()).dtype


def _is_tracer(*xs) -> bool:
    return any(isinstance(x, jax.core.Tracer) for x in xs)


def _check_prior(prior, n_states, n_symbols, n_features):
    """Positive, finite and broadcastable to each site's shape (``mean_loc`` any)."""
    shapes = {
        "initial_concentration": (n_states,),
        "transition_concentration": (n_states, n_states),
    }
    if n_symbols is not None:
        shapes["emission_concentration"] = (n_states, n_symbols)
    else:
        for name in ("mean_loc", "mean_precision", "var_shape", "var_scale"):
            shapes[name] = (n_states, n_features)
    for name, shape in shapes.items():
        value = getattr(prior, name)
        if _is_tracer(value):
            continue
        a = np.asarray(value, np.float64)
        try:
            np.broadcast_to(a, shape)
        except ValueError as err:
            raise ValueError(
                f"prior.{name} must broadcast to {shape}, got shape {a.shape}"
            ) from err
        if not np.all(np.isfinite(a)):
            raise ValueError(f"prior.{name} contains NaN or inf")
        if name != "mean_loc" and not np.all(a > 0):
            raise ValueError(f"prior.{name} must be > 0, got {value}")


def check_hmm_data(
    obs: Shaped[ArrayLike, "..."],
    lengths: Shaped[ArrayLike, "..."],
    n_states: int,
    emission: str = "categorical",
    n_symbols: int | None = None,
) -> int | None:
    """Validate a padded batch for :func:`bayesian_hmm_model`; return ``n_symbols``.

    Value checks (NaN, symbol range, lengths) need concrete arrays and are skipped
    on traced ones; shape checks always run. Cost O(B T_max D).

    Args:
        obs: ``(B, T_max)`` int symbols or ``(B, T_max, D)`` floats, as
            :func:`bayeskde.hmm.pad_sequences` returns them.
        lengths: ``(B,)`` true lengths in ``[1, T_max]``.
        n_states: number of hidden states N >= 1.
        emission: ``"categorical"`` or ``"gaussian"``.
        n_symbols: alphabet size K (categorical); default ``max symbol + 1``.

    Returns:
        The alphabet size for categorical data, ``None`` for Gaussian.

    Raises:
        ValueError: no sequences, wrong ranks or shapes, NaN/inf, float symbols,
            symbols outside ``[0, n_symbols)``, lengths outside ``[1, T_max]``,
            ``n_states < 1`` or an unknown emission.
        TypeError: non-integer ``n_states`` / ``n_symbols``.
    """
    n_states = check_integer(n_states, "n_states", minimum=1)
    if emission not in EMISSIONS:
        raise ValueError(f"emission must be one of {EMISSIONS}, got {emission!r}")
    rank = 2 if emission == "categorical" else 3
    shape, lshape = np.shape(obs), np.shape(lengths)
    want = "(B, T_max)" if rank == 2 else "(B, T_max, D)"
    if len(shape) != rank:
        raise ValueError(
            f"obs must have shape {want} for emission={emission!r}, got {shape}"
        )
    if shape[0] < 1:
        raise ValueError(f"obs holds no sequences (shape {shape}); need B >= 1")
    if shape[1] < 1 or (rank == 3 and shape[2] < 1):
        raise ValueError(f"obs must have T_max >= 1 (and D >= 1), got {shape}")
    if lshape != shape[:1]:
        raise ValueError(
            f"lengths must have shape ({shape[0]},), one per sequence, got {lshape}"
        )
    if n_symbols is not None:
        n_symbols = check_integer(n_symbols, "n_symbols", minimum=1)
    if rank == 2 and n_symbols is None and _is_tracer(obs):
        raise ValueError("n_symbols must be given when obs is traced")
    if _is_tracer(obs, lengths):
        return n_symbols
    lens = np.asarray(lengths)
    if lens.dtype.kind not in "iu":
        raise ValueError(f"lengths must be integers, got dtype {lens.dtype}")
    if lens.min() < 1 or lens.max() > shape[1]:
        raise ValueError(
            f"lengths must lie in [1, {shape[1]}], got [{lens.min()}, {lens.max()}]"
        )
    a = np.asarray(obs)
    if a.dtype.kind not in "biuf":
        raise ValueError(f"obs must hold numbers, got dtype {a.dtype}")
    if not np.all(np.isfinite(a)):
        raise ValueError("obs contains NaN or inf")
    if rank == 3:
        return None
    if a.dtype.kind == "f":
        raise ValueError(
            f"categorical obs must hold integer symbols, got dtype {a.dtype}"
        )
    observed = np.arange(shape[1])[None, :] < lens[:, None]
    symbols = a[observed]
    if symbols.min() < 0:
        raise ValueError(f"obs has a negative symbol ({symbols.min()})")
    if n_symbols is None:
        n_symbols = int(symbols.max()) + 1
    elif symbols.max() >= n_symbols:
        raise ValueError(
            f"obs has symbol {symbols.max()} outside the alphabet [0, {n_symbols})"
        )
    return n_symbols


def _emission_log_likelihoods(emission, x):
    if isinstance(emission, CategoricalEmission):
        return categorical_log_likelihoods(emission, x)
    return gaussian_log_likelihoods(emission, x)


def hmm_sequence_log_likelihoods(
    params: HMMParams,
    obs: Shaped[ArrayLike, "..."],
    lengths: Shaped[ArrayLike, "..."],
) -> Float[Array, " n_sequences"]:
    """``log p(x_b | params)`` of each padded sequence, states summed out.

    The forward filter of :mod:`bayeskde.hmm` (scaled recursions) vmapped over
    sequences, padding masked (Rabiner 1989, eqs. 19-21). Differentiable in
    ``params``; jit- and vmap-safe.

    Cost: O(B T_max (N^2 + N F)) time (F = 1 for symbols, D for Gaussians),
    O(B T_max N) memory.

    Args:
        params: the HMM (diagonal covariances for Gaussian emissions).
        obs: ``(B, T_max)`` symbols or ``(B, T_max, D)`` vectors.
        lengths: ``(B,)`` true lengths.

    Returns:
        ``(B,)`` log likelihoods.
    """
    obs = jnp.asarray(obs)
    lengths = jnp.asarray(lengths)
    mask = jnp.arange(obs.shape[1])[None, :] < lengths[:, None]

    def one(x, m):
        ll = _emission_log_likelihoods(params.emission, x)
        return forward_filter(
            params.log_initial, params.log_transition, ll, mask=m
        ).log_likelihood

    return jax.vmap(one)(obs, mask)


class HMMSequences(dist.Distribution):
    """A batch of padded HMM sequences as one NumPyro distribution.

    Batch shape ``(B,)`` (one log likelihood per sequence, the ``sequence``
    plate), event shape ``(T_max,)`` or ``(T_max, D)``. ``log_prob`` is
    :func:`hmm_sequence_log_likelihoods`; ``sample`` draws ``T_max`` steps per
    sequence and zeroes the padding.
    """

    arg_constraints = {}
    support = dist.constraints.real
    pytree_data_fields = ("params", "lengths")

    def __init__(self, params: HMMParams, lengths, event_shape):
        self.params = params
        self.lengths = jnp.asarray(lengths)
        super().__init__(batch_shape=self.lengths.shape, event_shape=event_shape)

    def log_prob(self, value):
        return hmm_sequence_log_likelihoods(self.params, value, self.lengths)

    def sample(self, key, sample_shape=()):
        n, t_max = self.lengths.shape[0], self.event_shape[0]

        def one(k):
            obs = sample_hmm(k, self.params, n, t_max).observations
            mask = jnp.arange(t_max)[None, :] < self.lengths[:, None]
            mask = mask.reshape(mask.shape + (1,) * (obs.ndim - 2))
            return jnp.where(mask, obs, 0)

        count = math.prod(sample_shape)
        keys = jax.random.split(key, max(count, 1))
        out = jax.vmap(one)(keys)
        return out.reshape(tuple(sample_shape) + out.shape[1:])


def bayesian_hmm_model(
    obs: Shaped[ArrayLike, "..."],
    lengths: Shaped[ArrayLike, "..."],
    n_states: int,
    emission: str = "categorical",
    n_symbols: int | None = None,
    prior: BayesianHMMPrior | None = None,
) -> None:
    """NumPyro model: a Bayesian HMM over a padded batch of sequences.

    See the module docstring for the priors. Data are validated before anything
    is sampled (:func:`check_hmm_data`), so ``run_nuts`` / ``run_svi`` raise a
    ``ValueError`` on bad input instead of sampling.

    Sites: ``initial`` ``(N,)``; ``transition`` ``(N, N)`` (plate ``state``);
    ``emission_probs`` ``(N, K)``, or ``emission_var`` and ``emission_mean``
    ``(N, D)`` (plate ``state``, features an event axis); ``obs`` (observed, plate
    ``sequence``, one log likelihood per sequence).

    Cost per density evaluation: O(B T_max (N^2 + N F)) time, O(B T_max N)
    memory (the forward filter of every sequence).

    Args:
        obs: ``(B, T_max)`` int symbols or ``(B, T_max, D)`` floats from
            :func:`bayeskde.hmm.pad_sequences`.
        lengths: ``(B,)`` true lengths.
        n_states: number of hidden states N.
        emission: ``"categorical"`` or ``"gaussian"`` (diagonal).
        n_symbols: alphabet size K (categorical); default ``max symbol + 1``;
            required when ``obs`` is traced (``jit_model_args=True``).
        prior: :class:`BayesianHMMPrior`; ``None`` for the defaults.

    Raises:
        ValueError: bad data or prior (see :func:`check_hmm_data`).

    Examples:
        >>> import jax, numpy as np
        >>> from numpyro import handlers
        >>> from bayeskde.hmm import pad_sequences
        >>> obs, lengths = pad_sequences([np.array([0, 1, 1]), np.array([1, 0])])
        >>> tr = handlers.trace(handlers.seed(bayesian_hmm_model, 0)).get_trace(
        ...     obs, lengths, 2, n_symbols=2)
        >>> tr["transition"]["value"].shape, tr["obs"]["fn"].batch_shape
        ((2, 2), (2,))
    """
    n_symbols = check_hmm_data(obs, lengths, n_states, emission, n_symbols)
    prior = BayesianHMMPrior() if prior is None else prior
    if not isinstance(prior, BayesianHMMPrior):
        raise TypeError(
            f"prior must be a BayesianHMMPrior, got {type(prior).__name__}"
        )
    obs = jnp.asarray(obs)
    n = n_states
    n_features = obs.shape[2] if emission == "gaussian" else None
    _check_prior(prior, n, n_symbols, n_features)
    dtype = _float()

    def conc(value, shape):
        return jnp.broadcast_to(jnp.asarray(value, dtype), shape)

    initial = numpyro.sample(
        "initial", dist.Dirichlet(conc(prior.initial_concentration, (n,)))
    )
    with numpyro.plate("state", n, dim=-1):
        transition = numpyro.sample(
            "transition", dist.Dirichlet(conc(prior.transition_concentration, (n, n)))
        )
    if emission == "categorical":
        with numpyro.plate("state", n, dim=-1):
            probs = numpyro.sample(
                "emission_probs",
                dist.Dirichlet(conc(prior.emission_concentration, (n, n_symbols))),
            )
        em = CategoricalEmission(jnp.log(probs))
    else:
        shape = (n, n_features)
        # The feature axis is an event axis, so that the plate ``state`` keeps
        # one dim (-1) for every site, as autoguides require.
        with numpyro.plate("state", n, dim=-1):
            var = numpyro.sample(
                "emission_var",
                dist.InverseGamma(conc(prior.var_shape, shape),
                                  conc(prior.var_scale, shape)).to_event(1),
            )
            mean = numpyro.sample(
                "emission_mean",
                dist.Normal(conc(prior.mean_loc, shape),
                            jnp.sqrt(var / conc(prior.mean_precision, shape))
                            ).to_event(1),
            )
        em = GaussianEmission(mean, var)
    params = HMMParams(jnp.log(initial), jnp.log(transition), em)
    with numpyro.plate("sequence", obs.shape[0]):
        numpyro.sample("obs", HMMSequences(params, lengths, obs.shape[1:]), obs=obs)


# ------------------------------------------------------------------ draws


def hmm_draws(samples: Mapping) -> HMMParams:
    """Posterior draws as one :class:`~bayeskde.hmm.HMMParams` with a draw axis.

    Args:
        samples: ``mcmc.get_samples()`` (or with ``group_by_chain=True``): the
            sites of :func:`bayesian_hmm_model` with any leading axes, which are
            flattened into one axis of ``S`` draws.

    Returns:
        ``HMMParams`` whose leaves have a leading axis ``S`` (log probabilities,
        diagonal Gaussian variances).
    """
    n = np.shape(samples["initial"])[-1]
    flat = {k: jnp.asarray(v).reshape((-1,) + np.shape(v)[-(1 if k == "initial"
                                                              else 2):])
            for k, v in samples.items()
            if k in ("initial", "transition", "emission_probs", "emission_mean",
                     "emission_var")}
    if flat["transition"].shape[-2:] != (n, n):
        raise ValueError("samples['transition'] must end in (N, N)")
    if "emission_probs" in flat:
        em = CategoricalEmission(jnp.log(flat["emission_probs"]))
    else:
        em = GaussianEmission(flat["emission_mean"], flat["emission_var"])
    return HMMParams(jnp.log(flat["initial"]), jnp.log(flat["transition"]), em)


def _emission_table(em):
    """Per-state coordinates of the emission distributions, ``(S, N, F)``."""
    if isinstance(em, CategoricalEmission):
        return np.exp(np.asarray(em.log_probs, np.float64))
    means = np.asarray(em.means, np.float64)
    sds = np.sqrt(np.asarray(em.covariances, np.float64))
    # Means in units of the draws' typical sd, and log sds: a Hellinger-like
    # distance that does not depend on the data's scale.
    scale = np.median(sds, axis=(0, 1), keepdims=True)
    return np.concatenate([means / scale, np.log(sds)], axis=-1)


def _permute(params: HMMParams, perms) -> HMMParams:
    perms = jnp.asarray(perms)
    take = jax.vmap(lambda a, p: a[p])
    trans = jax.vmap(lambda a, p: a[p][:, p])(params.log_transition, perms)
    em = jax.tree.map(lambda a: take(a, perms), params.emission)
    return HMMParams(take(params.log_initial, perms), trans, em)


def relabel_draws(
    draws: HMMParams, reference: HMMParams | None = None, *, n_iter: int = 3
) -> tuple[HMMParams, np.ndarray]:
    """Undo label switching: permute each draw's states to match a reference.

    For every draw the permutation minimising the summed squared distance between
    its states' emission distributions and the reference's is found by the
    Hungarian algorithm. Without a reference, the first draw starts it and the
    mean of the aligned draws replaces it ``n_iter`` times (Stephens 2000).
    Emission-based matching assumes the states' emissions differ; when two
    states emit alike the labelling is not identified by them.

    Cost: O(n_iter S (N^2 F + N^3)) on the host.

    Args:
        draws: ``HMMParams`` with a leading draw axis (:func:`hmm_draws`).
        reference: an un-batched ``HMMParams`` (e.g. the EM fit) to match.
        n_iter: reference re-estimation passes when ``reference`` is None.

    Returns:
        ``(aligned_draws, perms)``; ``perms`` ``(S, N)`` with
        ``aligned[s] state i = draws[s] state perms[s, i]``.
    """
    n_iter = check_integer(n_iter, "n_iter", minimum=1)
    table = _emission_table(draws.emission)
    if reference is not None:
        ref = _emission_table(jax.tree.map(lambda a: a[None], reference.emission))[0]
        n_iter = 1
    else:
        ref = table[0]
    n_draws, n_states = table.shape[:2]
    perms = np.tile(np.arange(n_states), (n_draws, 1))
    for _ in range(n_iter):
        cost = np.sum((table[:, None, :, :] - ref[None, :, None, :]) ** 2, -1)
        for s in range(n_draws):
            # cost[s, j, i]: reference state j vs draw state i
            _, perms[s] = linear_sum_assignment(cost[s])
        ref = np.mean(np.take_along_axis(table, perms[:, :, None], axis=1), axis=0)
    return _permute(draws, perms), perms


def relabel_samples(samples: Mapping, reference: HMMParams | None = None) -> dict:
    """:func:`relabel_draws` on a dict of sites with any leading axes.

    Sites of :func:`bayeskde.models.bayesian_hmm_model` are permuted along their
    state axes; other entries are passed through. Use it on
    ``mcmc.get_samples(group_by_chain=True)`` before diagnostics.

    Returns:
        A new dict; nothing passed in is mutated.
    """
    lead = np.shape(samples["initial"])[:-1]
    _, perms = relabel_draws(hmm_draws(samples), reference)
    perms = perms.reshape(lead + perms.shape[-1:])
    out = dict(samples)
    for name, value in samples.items():
        if name not in ("initial", "transition", "emission_probs", "emission_mean",
                        "emission_var"):
            continue
        a = np.asarray(value)
        ax = len(lead)
        p = perms.reshape(perms.shape + (1,) * (a.ndim - ax - 1))
        a = np.take_along_axis(a, p, axis=ax)
        if name == "transition":
            a = np.take_along_axis(a, perms[..., None, :], axis=ax + 1)
        out[name] = a
    return out


# ----------------------------------------------------------------- kernels


def _check_draws(draws):
    if not isinstance(draws, HMMParams):
        raise TypeError(f"draws must be HMMParams, got {type(draws).__name__}")
    shape = np.shape(draws.log_initial)
    if len(shape) != 2 or shape[0] < 1:
        raise ValueError(
            f"draws must have a leading draw axis, log_initial (S, N) with S >= 1, "
            f"got {shape}"
        )
    em = draws.emission
    logs = [draws.log_initial, draws.log_transition]
    if isinstance(em, CategoricalEmission):
        logs.append(em.log_probs)
    else:
        for name, leaf in (("means", em.means), ("covariances", em.covariances)):
            if not np.all(np.isfinite(np.asarray(leaf))):
                raise ValueError(f"draws.emission.{name} contain NaN or inf")
        if not np.all(np.asarray(em.covariances) > 0):
            raise ValueError("draws.emission.covariances must be > 0")
    for leaf in logs:  # log probabilities: -inf (probability 0) is allowed
        a = np.asarray(leaf)
        if np.isnan(a).any() or np.isposinf(a).any():
            raise ValueError("draws contain NaN or +inf log probabilities")
    return shape[0]


def _pad(sequences, name, draws):
    if sequences is None or isinstance(sequences, np.ndarray | jax.Array):
        raise TypeError(f"{name} must be a list of sequences")
    categorical = isinstance(draws.emission, CategoricalEmission)
    n_symbols = draws.emission.log_probs.shape[-1] if categorical else None
    try:
        padded, lengths = pad_sequences(list(sequences), n_symbols=n_symbols)
    except (ValueError, TypeError) as err:
        raise type(err)(f"{name}: {err}") from err
    if categorical != (padded.ndim == 2):
        raise ValueError(
            f"{name}: the draws have {type(draws.emission).__name__}, which needs "
            + ("(T_i,) int symbols" if categorical else "(T_i, D) floats")
        )
    if not categorical and padded.shape[2] != draws.emission.means.shape[-1]:
        raise ValueError(
            f"{name}: sequences have D = {padded.shape[2]}, the draws "
            f"D = {draws.emission.means.shape[-1]}"
        )
    return padded, lengths


def _chunked(draws, chunk):
    """Draws as ``(n_chunks, chunk, ...)`` plus weights ``1/S`` (0 on padding)."""
    s = draws.log_initial.shape[0]
    n_chunks = -(-s // chunk)
    idx = np.minimum(np.arange(n_chunks * chunk), s - 1)
    w = np.where(np.arange(n_chunks * chunk) < s, 1.0 / s, 0.0)
    dtype = draws.log_initial.dtype
    shaped = jax.tree.map(lambda a: a[idx].reshape((n_chunks, chunk) + a.shape[1:]),
                          draws)
    return shaped, jnp.asarray(w.reshape(n_chunks, chunk), dtype)


def _draw_mean(fn, draws, weights, init):
    """``sum_s w_s fn(draw_s)``: ``vmap`` within a chunk, ``scan`` over chunks."""

    def _step(acc, x):
        d, w = x
        out = jax.vmap(fn)(d)
        return jax.tree.map(
            lambda a, o: a + jnp.tensordot(w, o, axes=1), acc, out
        ), None

    total, _ = jax.lax.scan(_step, init, (draws, weights))
    return total


def _lmmk_from_posteriors(pa, pb, L, M, gamma, n_symbols):
    """LMMK (eqs. 22, 29-32) from ``(padded, lengths, gamma, xi)`` of A and B;
    ``L`` the state kernel, ``M`` the symbol kernel (unused for Gaussians)."""
    xa, la, ga, xia = pa
    xb, lb, gb, xib = pb
    if n_symbols is not None:
        fa = discrete_latent_features(ga, xa, xia, la, n_symbols)
        fb = discrete_latent_features(gb, xb, xib, lb, n_symbols)
        return lmmk_gram_from_features(fa, fb, L, M)

    def trans(xi, lengths):
        zero = jnp.zeros(xi.shape[:2] + (1,), xi.dtype)
        return LatentFeatures(zero, xi / jnp.maximum(lengths - 1, 1)[:, None, None])

    one = jnp.eye(1, dtype=ga.dtype)
    k_qq = lmmk_gram_from_features(trans(xia, la), trans(xib, lb), L, one)
    return k_qq + continuous_emission_gram_exact(xa, ga, la, xb, gb, lb, gamma, L)


@partial(jax.jit, static_argnames=("average", "n_symbols", "same"))
def _posterior_lmmk(draws, weights, xa, la, xb, lb, L, M, gamma, *, average,
                    n_symbols, same):
    n_states = L.shape[0]

    def post(p, x, lens):
        q = batch_posteriors(p, x, lens)
        return q.gamma, q.xi

    def zeros(x):
        return (jnp.zeros(x.shape[:2] + (n_states,), weights.dtype),
                jnp.zeros((x.shape[0], n_states, n_states), weights.dtype))

    if average == "features":
        if same:
            ga, xia = _draw_mean(lambda p: post(p, xa, la), draws, weights, zeros(xa))
            gb, xib = ga, xia
        else:
            (ga, xia), (gb, xib) = _draw_mean(
                lambda p: (post(p, xa, la), post(p, xb, lb)), draws, weights,
                (zeros(xa), zeros(xb)))
        return _lmmk_from_posteriors((xa, la, ga, xia), (xb, lb, gb, xib), L, M,
                                     gamma, n_symbols)

    def gram(p):
        ga, xia = post(p, xa, la)
        gb, xib = (ga, xia) if same else post(p, xb, lb)
        return _lmmk_from_posteriors((xa, la, ga, xia), (xb, lb, gb, xib), L, M,
                                     gamma, n_symbols)

    init = jnp.zeros((xa.shape[0], xb.shape[0]), weights.dtype)
    return _draw_mean(gram, draws, weights, init)


def posterior_latent_mean_map_gram(
    draws: HMMParams,
    sequences_A: Sequence[ArrayLike],
    sequences_B: Sequence[ArrayLike] | None = None,
    lam: float = 1.0,
    *,
    average: str = "features",
    gamma: float = 1.0,
    relabel: bool = True,
    chunk: int = 16,
) -> Float[Array, "n_a n_b"]:
    """Latent mean-map kernel averaged over posterior draws of the HMM.

    ``average="features"`` (default): the embedding of a sequence ``x`` is the
    posterior expectation of its clique features under the *joint* posterior of
    the hidden states and the parameters,
    ``mu(x) = E_{theta | D} E_{Y | x, theta} phi(x, Y)``: eq. (20) with
    ``P(Y | x, theta)`` replaced by ``P(Y | x, D) = E_theta P(Y | x, theta)``.
    That is what eq. (20) asks for once ``theta`` is uncertain, and the LMMK is
    the inner product of these averaged embeddings (eq. 22). Because the clique
    features enter linearly, averaging them is averaging the marginals
    ``gamma_t(i)`` and ``xi_t(i, j)`` over draws and using the averages in eqs.
    (29)-(32) (eq. 31 exactly for Gaussian emissions, RBF rate ``gamma``). It
    needs the draws' labels aligned, so ``relabel=True`` first applies
    :func:`relabel_draws`.

    ``average="kernel"``: the mean over draws of each draw's LMMK,
    ``E_theta <mu_theta(x), mu_theta(x')>`` (the inner product of the draws'
    stacked embeddings). It is invariant to the labelling, adds the posterior
    variance of the embeddings to every entry, and costs a Gram per draw.

    Both are positive semi-definite; with every draw equal to one ``theta`` both
    equal the LMMK of ``theta`` (:class:`bayeskde.meanmap.LatentMeanMapKernel`).

    Cost: ``features``: O(S (n_a + n_b) T N^2) for the marginals plus one Gram,
    O(n_a n_b N (N + K)) for symbols, O(n_a n_b T^2 (D + N)) for Gaussians;
    ``kernel``: S Grams. Memory O(chunk (n_a + n_b) T N + n_a n_b).

    Args:
        draws: ``HMMParams`` with a leading axis of ``S`` draws (:func:`hmm_draws`).
        sequences_A: list of ``(T_i,)`` int or ``(T_i, D)`` float sequences.
        sequences_B: second list (default ``sequences_A``).
        lam: ``lambda >= 0`` of the state and symbol kernels ``exp(-lam [i != j])``
            (eqs. 27-32); ``inf`` gives delta kernels.
        average: ``"features"`` or ``"kernel"`` (see above).
        gamma: RBF rate of the observation kernel (Gaussian emissions).
        relabel: align the draws' labels first (``average="features"`` only).
        chunk: draws processed together by ``vmap``.

    Returns:
        ``(n_a, n_b)`` raw kernel matrix (cosine-normalise it for an SVM).

    Raises:
        ValueError / TypeError: bad draws, sequences or options.
    """
    if average not in ("features", "kernel"):
        raise ValueError(f"average must be 'features' or 'kernel', got {average!r}")
    n_draws = _check_draws(draws)
    lam = float(lam)
    lam = lam if lam == math.inf else check_nonnegative(lam, "lam")
    gamma = check_positive(gamma, "gamma")
    chunk = check_integer(chunk, "chunk", minimum=1)
    dtype = _float()
    draws = jax.tree.map(lambda a: jnp.asarray(a, dtype), draws)
    xa, la = _pad(sequences_A, "sequences_A", draws)
    xb, lb = (xa, la) if sequences_B is None else _pad(sequences_B, "sequences_B",
                                                      draws)
    if average == "features" and relabel and n_draws > 1:
        draws, _ = relabel_draws(draws)
    categorical = isinstance(draws.emission, CategoricalEmission)
    n_symbols = int(draws.emission.log_probs.shape[-1]) if categorical else None
    n_states = draws.log_initial.shape[-1]
    L = state_kernel_matrix(n_states, lam).astype(dtype)
    M = symbol_kernel_matrix(n_symbols if categorical else 1, lam).astype(dtype)
    shaped, weights = _chunked(draws, min(chunk, n_draws))
    return _posterior_lmmk(
        shaped, weights, xa, la, xb, lb, L, M, jnp.asarray(gamma, dtype),
        average=average, n_symbols=n_symbols, same=sequences_B is None,
    )


def _stack_objects(draws, padded, lengths, tau):
    """Per-draw, per-object HMMs ``adapt_hmms(theta_s, x)``, flattened to
    ``(S n, ...)`` with the object index fastest."""
    many = jax.vmap(lambda p: adapt_hmms(p, padded, lengths, tau=tau))(draws)
    return jax.tree.map(lambda a: a.reshape((-1,) + a.shape[2:]), many)


def _block_logsumexp(logG, s, n_a, n_b):
    """``log mean_{s, s'} exp(logG[(s, a), (s', b)])``: ``(n_a, n_b)``."""
    blocks = logG.reshape(s, n_a, s, n_b)
    return logsumexp(blocks, axis=(0, 2)) - 2.0 * math.log(s)


def posterior_generative_mean_map_gram(
    draws: HMMParams,
    sequences_A: Sequence[ArrayLike],
    sequences_B: Sequence[ArrayLike] | None = None,
    *,
    length: int = 10,
    kind: str = "ppk",
    gamma: float = 1.0,
    lam: float = math.inf,
    tau: float = 1.0,
    normalize: bool = True,
) -> Float[Array, "n_a n_b"]:
    """GMMK / PPK between the posterior predictive distributions of objects.

    Each posterior draw ``theta_s`` of the pooled HMM gives object ``x`` its own
    HMM ``theta_{x,s}`` by one conjugate (MAP) update towards ``x`` with prior
    strength ``tau`` (:func:`bayeskde.meanmap.adapt_hmms`). Object ``x``'s
    posterior predictive over length-``length`` sequences is the mixture
    ``P_x = (1/S) sum_s P(. | theta_{x,s})``. The mean map is linear in the
    distribution, so the GMMK of eqs. (5)-(6) (or the rho = 1 PPK of eq. 33)
    between two such mixtures is exactly the mean of the ``S x S`` kernels
    between their components: ``K(x, y) = (1/S^2) sum_{s,s'}
    k(theta_{x,s}, theta_{y,s'})``, a positive semi-definite kernel; it is
    computed in log space (``logsumexp`` over the blocks of
    :func:`bayeskde.meanmap.hmm_log_kernel_gram`). Invariant to the labelling.

    Cost: O((S n_a) (S n_b) length N^3) time, O(S^2 n_a n_b) memory: thin the
    draws (S of 5-20 is typical).

    Args:
        draws: ``HMMParams`` with a leading axis of ``S`` draws.
        sequences_A, sequences_B: lists of sequences (B defaults to A).
        length: sequence length of the predictive distributions compared.
        kind: ``"ppk"`` or ``"gmmk"`` (see :func:`bayeskde.meanmap.hmm_log_kernel`).
        gamma: RBF rate (Gaussian ``gmmk``); lam: symbol kernel (categorical).
        tau: prior strength of the per-object update (> 0).
        normalize: cosine-normalise (in log space); otherwise return the raw
            kernel, which can under- or overflow for long ``length``.

    Returns:
        ``(n_a, n_b)`` kernel matrix.
    """
    n_draws = _check_draws(draws)
    length = check_integer(length, "length", minimum=1)
    tau = check_positive(tau, "tau")
    dtype = _float()
    draws = jax.tree.map(lambda a: jnp.asarray(a, dtype), draws)
    xa, la = _pad(sequences_A, "sequences_A", draws)
    objs_a = _stack_objects(draws, xa, la, tau)
    kw = dict(length=length, kind=kind, gamma=gamma, lam=lam)

    def self_log_diag(x, objs):
        # k(x, x) needs only the S x S block of each object with itself.
        n = x.shape[0]
        per = jax.tree.map(lambda a: jnp.swapaxes(
            a.reshape((n_draws, n) + a.shape[1:]), 0, 1), objs)
        blocks = jax.vmap(lambda p: logsumexp(hmm_log_kernel_gram(p, **kw)))(per)
        return blocks - 2.0 * math.log(n_draws)

    if sequences_B is None:
        log_k = _block_logsumexp(hmm_log_kernel_gram(objs_a, **kw), n_draws,
                                 xa.shape[0], xa.shape[0])
        if not normalize:
            return jnp.exp(log_k)
        d = jnp.diagonal(log_k)
        return jnp.exp(log_k - 0.5 * (d[:, None] + d[None, :]))
    xb, lb = _pad(sequences_B, "sequences_B", draws)
    objs_b = _stack_objects(draws, xb, lb, tau)
    log_k = _block_logsumexp(hmm_log_kernel_gram(objs_a, objs_b, **kw), n_draws,
                             xa.shape[0], xb.shape[0])
    if not normalize:
        return jnp.exp(log_k)
    da = self_log_diag(xa, objs_a)
    db = self_log_diag(xb, objs_b)
    return jnp.exp(log_k - 0.5 * (da[:, None] + db[None, :]))
