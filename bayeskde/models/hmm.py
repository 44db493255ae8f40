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
circle of :func:`bayeskde.datasets.two_class_hmms`, and symbols have no order).
Instead :func:`~bayeskde.models.hmm_relabel.relabel_draws` /
:func:`~bayeskde.models.hmm_relabel.relabel_samples` permute every draw's states
to match a reference by the Hungarian algorithm
(``scipy.optimize.linear_sum_assignment``) on the distance between emission
distributions, re-estimating the reference as the mean of the aligned draws
(Stephens 2000, Celeux 1998); summaries and R-hat are computed after relabelling.
The latent mean-map kernel of one draw is itself invariant to the labelling (the
state kernel ``L_N = exp(-lam [i != j])`` is permutation invariant), and so are
the generative kernels; only averaging *embeddings* across draws needs aligned
labels, see :func:`~bayeskde.models.hmm_kernels.posterior_latent_mean_map_gram`.

Posterior-averaged mean-map kernels (:mod:`bayeskde.models.hmm_kernels`):

* ``posterior_latent_mean_map_gram``: the latent mean map (eq. 20) with the
  posterior of the hidden states integrated over the parameter posterior too;
* ``posterior_generative_mean_map_gram``: the GMMK (eqs. 5-6) / rho = 1 PPK
  (eq. 33) between the posterior predictive distributions of the objects.

References:
    Mehta and Gray, "Generative and Latent Mean Map Kernels", eqs. (5)-(6),
    (20)-(23), (29)-(33). Rabiner (1989), eqs. (19)-(21). M. Stephens (2000),
    "Dealing with label switching in mixture models", JRSS B 62(4).
"""

from __future__ import annotations

import math
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import numpyro
import numpyro.distributions as dist
from jaxtyping import Array, Float, Shaped

from .._linalg import float_dtype as _float
from .._typing import ArrayLike
from .._validation import check_integer
from ..hmm import (
    CategoricalEmission,
    GaussianEmission,
    HMMParams,
    categorical_log_likelihoods,
    forward_filter,
    gaussian_log_likelihoods,
    sample_hmm,
)

__all__ = [
    "BayesianHMMPrior",
    "HMMSequences",
    "check_hmm_data",
    "hmm_sequence_log_likelihoods",
    "bayesian_hmm_model",
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
