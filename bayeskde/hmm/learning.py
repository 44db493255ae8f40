"""Batches of variable-length sequences, batched posteriors and Baum-Welch EM.

A data set of sequences is padded once (:func:`pad_sequences`) to ``(B, T_max)``
(symbols) or ``(B, T_max, D)`` (vectors) with their ``lengths``; every batched
function then runs one compiled program over the whole set, masking the padding
(see :mod:`bayeskde.hmm.inference`), with no Python loop over sequences. Padding
costs ``B * T_max`` work, so very unequal lengths are best split into buckets.

:func:`fit_hmm` is Baum-Welch EM (Rabiner 1989, eqs. 40a-40c; Gaussian re-estimation
eqs. 52-54 with one component per state) over all sequences at once, the whole loop
inside one ``lax.while_loop``, several random restarts batched with ``vmap``. Two
guards keep EM off degenerate solutions:

- ``pseudo_count`` is added to every expected count of the initial, transition and
  categorical emission probabilities (a symmetric Dirichlet prior with concentration
  ``1 + pseudo_count``, so the M-step is a MAP step): no probability becomes exactly
  zero, and a symbol never seen in training keeps a finite log likelihood;
- ``min_covariance`` is added to the diagonal of every re-estimated covariance (as
  hmmlearn's ``min_covar``), so no Gaussian collapses onto one point.

With ``pseudo_count = 0`` and a negligible ``min_covariance`` the recorded log
likelihood is non-decreasing (the EM guarantee, up to rounding); with larger values
the MAP objective is, and the likelihood may dip by about their size.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jaxtyping import Array, Bool, Float, Int

from .._linalg import float_dtype as _float_dtype
from .._typing import ArrayLike
from .._validation import check_integer, check_key, check_nonnegative
from .batch import (
    batch_smooth,
    pad_sequences,
    time_major,
)
from .emissions import (
    CategoricalEmission,
    GaussianEmission,
)
from .inference import (
    summed_xi,
    validate,
)
from .params import HMMParams

__all__ = [
    "FitResult",
    "fit_hmm",
]


class FitResult(NamedTuple):
    """Result of :func:`fit_hmm`.

    Attributes:
        params: the best restart's :class:`HMMParams`.
        log_likelihoods: ``(n_iter,)`` total log likelihood of the data at the start
            of each EM iteration of the best restart; NaN after convergence.
        converged: ``()`` bool, whether the relative improvement fell below ``tol``
            (a step that does not raise the log likelihood, the round-off floor,
            counts).
        n_iter: ``()`` EM iterations of the best restart (E-steps run).
    """

    params: HMMParams
    log_likelihoods: Float[Array, " n_iter"]
    converged: Bool[Array, ""]
    n_iter: Int[Array, ""]


# ----------------------------------------------------------------------------- EM


def _em_data(obs, n_symbols, covariance):
    """Loop-invariant per-step features of the E-step, ``(T_max, B, F)``."""
    if n_symbols is not None:
        return {"onehot": jax.nn.one_hot(obs, n_symbols, dtype=_float_dtype())}
    if covariance == "full":
        xx = (obs[..., :, None] * obs[..., None, :]).reshape(obs.shape[:2] + (-1,))
    else:
        xx = obs**2
    return {"x": obs, "xx": xx}


def _sufficient_stats(params, obs, mask, data):
    """Expected counts of one E-step (Rabiner eqs. 40a-40c, 52-54), each one
    contraction over all steps of all sequences; and the total log likelihood."""
    gamma, acc, log_lik, transition = batch_smooth(params, obs, mask, "total")
    # gamma: (T_max, B, N), zero on padding.
    stats = {
        "initial": jnp.sum(gamma[0], axis=0),
        "transition": summed_xi(transition, acc),
        "occupancy": jnp.sum(gamma, axis=(0, 1)),
    }
    if "onehot" in data:
        stats["symbols"] = jnp.einsum("tbn,tbm->nm", gamma, data["onehot"])
    else:
        stats["sum_x"] = jnp.einsum("tbn,tbd->nd", gamma, data["x"])
        stats["sum_xx"] = jnp.einsum("tbn,tbf->nf", gamma, data["xx"])
    return stats, jnp.sum(log_lik)


def _log_normalise_counts(counts):
    return jnp.log(counts) - jnp.log(jnp.sum(counts, axis=-1, keepdims=True))


def _m_step(stats, params, pseudo_count, min_covariance, covariance):
    log_initial = _log_normalise_counts(stats["initial"] + pseudo_count)
    log_transition = _log_normalise_counts(stats["transition"] + pseudo_count)
    if "symbols" in stats:
        emission = CategoricalEmission(
            _log_normalise_counts(stats["symbols"] + pseudo_count)
        )
        return HMMParams(log_initial, log_transition, emission)
    occ = stats["occupancy"]
    # A state with (numerically) no occupancy keeps its previous Gaussian.
    alive = occ > 1e-6 * jnp.sum(occ)
    occ_safe = jnp.where(alive, occ, 1.0)
    means = stats["sum_x"] / occ_safe[:, None]
    if covariance == "full":
        dim = means.shape[-1]
        sum_xx = stats["sum_xx"].reshape(-1, dim, dim)
        covs = sum_xx / occ_safe[:, None, None] - (
            means[:, :, None] * means[:, None, :]
        )
        covs = 0.5 * (covs + jnp.swapaxes(covs, 1, 2))
        covs = covs + min_covariance * jnp.eye(dim, dtype=covs.dtype)[None]
        covs = jnp.where(alive[:, None, None], covs, params.emission.covariances)
    else:
        covs = stats["sum_xx"] / occ_safe[:, None] - means**2
        covs = jnp.maximum(covs, 0.0) + min_covariance
        covs = jnp.where(alive[:, None], covs, params.emission.covariances)
    means = jnp.where(alive[:, None], means, params.emission.means)
    return HMMParams(log_initial, log_transition, GaussianEmission(means, covs))


def _exponentials(uniforms):
    # Exp(1) draws from uniforms in [0, 1), floored so that log stays finite.
    return jnp.maximum(-jnp.log1p(-uniforms), jnp.finfo(uniforms.dtype).tiny)


def _dirichlet(exponentials):
    """Symmetric Dirichlet over axis -2 with concentration ``shape[-1]``: normalised
    sums of exponentials (Gamma(k, 1) draws). Exact for integer concentrations,
    and cheap to compile, unlike a rejection sampler."""
    gammas = jnp.sum(exponentials, axis=-1)
    return gammas / jnp.sum(gammas, axis=-1, keepdims=True)


def _random_init(key, padded, lengths, n_states, n_symbols, covariance):
    # One uniform draw feeds every random choice: each call site of the PRNG costs
    # compile time inside the vmapped EM program.
    sizes = [n_states, n_states * n_states * 5]
    if n_symbols is not None:
        sizes.append(n_states * n_symbols)
    else:
        sizes.append(padded.shape[0] * padded.shape[1])
    dtype = _float_dtype()
    draws = _exponentials(jax.random.uniform(key, (sum(sizes),), dtype))
    e_init, e_trans, e_emit = jnp.split(draws, np.cumsum(sizes)[:-1].tolist())
    log_initial = jnp.log(_dirichlet(e_init.reshape(n_states, 1)))
    # Transition rows near uniform (Dirichlet(5)) with a random tilt: no zeros.
    log_transition = jnp.log(_dirichlet(e_trans.reshape(n_states, n_states, 5)))
    if n_symbols is not None:
        probs = _dirichlet(e_emit.reshape(n_states, n_symbols, 1))
        emission = CategoricalEmission(jnp.log(probs))
        return HMMParams(log_initial, log_transition, emission)
    mask = (jnp.arange(padded.shape[1])[None, :] < lengths[:, None]).ravel()
    flat = padded.reshape(-1, padded.shape[-1])
    # Means: distinct observed steps drawn uniformly (Gumbel top-k, as
    # jax.random.choice without replacement); covariances: the data's.
    gumbel = jnp.where(mask, -jnp.log(e_emit), -jnp.inf)
    _, idx = lax.top_k(gumbel, n_states)
    means = flat[idx]
    count = jnp.sum(mask)
    mean = jnp.sum(flat * mask[:, None], axis=0) / count
    centred = (flat - mean[None, :]) * mask[:, None]
    cov = centred.T @ centred / count
    dim = flat.shape[-1]
    if covariance == "full":
        cov = cov + 1e-3 * jnp.trace(cov) / dim * jnp.eye(dim, dtype=dtype)
        covs = jnp.broadcast_to(cov, (n_states, dim, dim))
    else:
        covs = jnp.broadcast_to(jnp.diagonal(cov) + 1e-3, (n_states, dim))
    return HMMParams(log_initial, log_transition, GaussianEmission(means, covs))


def _em(init, obs, mask, data, n_iter, tol, pseudo_count, min_covariance, *,
        history_size, covariance):
    dtype = _float_dtype()

    def _cond(carry):
        i, _, _, _, converged = carry
        return (i < n_iter) & ~converged

    # A step that does not raise the log likelihood (EM never lowers it in
    # exact arithmetic) stops too: that is the round-off floor of the dtype.
    def _body(carry):
        i, params, prev, history, _ = carry
        stats, ll = _sufficient_stats(params, obs, mask, data)
        history = history.at[i].set(ll)
        converged = (i > 0) & (ll - prev < tol * jnp.abs(ll))
        new = _m_step(stats, params, pseudo_count, min_covariance, covariance)
        params = jax.tree.map(lambda a, b: jnp.where(converged, a, b), params, new)
        return i + 1, params, ll, history, converged

    history = jnp.full(history_size, jnp.nan, dtype)
    carry = (0, init, jnp.array(-jnp.inf, dtype), history, jnp.array(False))
    i, params, ll, history, converged = lax.while_loop(_cond, _body, carry)
    return params, history, converged, ll, i


def _fit(key, init, use_init, padded, lengths, n_iter, tol, pseudo_count,
         min_covariance, *, n_symbols, covariance, n_restarts, history_size):
    # Only shapes and structure are static: n_iter, the tolerances and whether a
    # start was given are traced, so they do not recompile.
    n_states = init.log_initial.shape[0]
    obs, mask = time_major(padded, lengths)
    data = _em_data(obs, n_symbols, covariance)

    def _one(k):
        rand = _random_init(k, padded, lengths, n_states, n_symbols, covariance)
        start = jax.tree.map(lambda a, b: jnp.where(use_init, a, b), init, rand)
        return _em(start, obs, mask, data, n_iter, tol, pseudo_count,
                   min_covariance, history_size=history_size, covariance=covariance)

    params, history, converged, final, iters = jax.vmap(_one)(
        jax.random.split(key, n_restarts)
    )
    best = jnp.argmax(jnp.where(jnp.isnan(final), -jnp.inf, final))
    return jax.tree.map(lambda a: a[best], (params, history, converged, iters))


_fit_jit = jax.jit(
    _fit, static_argnames=("n_symbols", "covariance", "n_restarts", "history_size")
)


def _placeholder_params(n_states, n_symbols, covariance, dim):
    """Parameters of the right structure, for the traced ``use_init=False``."""
    dtype = _float_dtype()
    log_initial = jnp.zeros(n_states, dtype)
    log_transition = jnp.zeros((n_states, n_states), dtype)
    if n_symbols is not None:
        emission = CategoricalEmission(jnp.zeros((n_states, n_symbols), dtype))
    else:
        shape = (n_states, dim, dim) if covariance == "full" else (n_states, dim)
        emission = GaussianEmission(jnp.zeros((n_states, dim), dtype),
                                    jnp.zeros(shape, dtype))
    return HMMParams(log_initial, log_transition, emission)


def fit_hmm(
    key: Array,
    sequences: Sequence[ArrayLike] | ArrayLike,
    n_states: int,
    *,
    emission: str = "categorical",
    covariance: str = "diag",
    n_symbols: int | None = None,
    n_iter: int = 100,
    tol: float = 1e-6,
    n_restarts: int = 3,
    init: HMMParams | None = None,
    pseudo_count: float = 1e-2,
    min_covariance: float = 1e-3,
    pad_batch: int | None = None,
) -> FitResult:
    """Fit an HMM to a set of sequences by Baum-Welch EM with random restarts.

    All sequences are padded and processed together; the restarts run batched; the
    EM loop is one compiled ``lax.while_loop`` (recompiled only when the static
    configuration or the padded shape changes). EM stops when the relative
    improvement of the total log likelihood falls below ``tol`` or after ``n_iter``
    iterations. The restart with the largest final log likelihood wins.

    Cost: O(n_restarts * n_iter * B * T_max * (N^2 + N M)) time for symbols,
    ``N D^2`` in place of ``N M`` for full Gaussians; O(n_restarts B T_max N) memory.

    Args:
        key: PRNG key; split into one key per restart.
        sequences: list of ``(T_i,)`` int or ``(T_i, D)`` float arrays.
        n_states: number of hidden states N.
        emission: ``"categorical"`` or ``"gaussian"``.
        covariance: ``"diag"`` or ``"full"`` (Gaussian emissions).
        n_symbols: alphabet size (categorical); default ``max symbol + 1``.
        n_iter: maximum EM iterations.
        tol: relative tolerance on the log-likelihood improvement.
        n_restarts: number of random initialisations.
        init: starting parameters; when given every restart starts there (so one
            restart suffices).
        pseudo_count: Dirichlet pseudo-count added to the expected counts.
        min_covariance: added to the diagonal of the re-estimated covariances.
        pad_batch: None, or pad the batch with empty sequences (length 0: every
            step masked, nothing added to the expected counts or the log
            likelihood) up to at least this many, so that data sets of nearby
            sizes share one compiled EM program (the compilation, not the run,
            dominates a fit of a few dozen sequences). The random starts are
            unchanged: the draws of the real sequences' frames come first in the
            padded layout (``jax_threefry_partitionable``, JAX's default, makes a
            longer draw extend a shorter one).

    Returns:
        :class:`FitResult`.

    Raises:
        ValueError / TypeError: bad sequences (see :func:`pad_sequences`) or options.

    Examples:
        >>> import jax, numpy as np
        >>> seqs = [np.array([0, 0, 1, 1, 0, 0]), np.array([1, 1, 0])]
        >>> res = fit_hmm(jax.random.key(0), seqs, 2, n_iter=5, n_restarts=2)
        >>> res.params.emission.log_probs.shape, res.log_likelihoods.shape
        ((2, 2), (5,))
    """
    key = check_key(key, "key")
    n_states = check_integer(n_states, "n_states", minimum=1)
    n_iter = check_integer(n_iter, "n_iter", minimum=1)
    n_restarts = check_integer(n_restarts, "n_restarts", minimum=1)
    tol = check_nonnegative(tol, "tol")
    pseudo_count = check_nonnegative(pseudo_count, "pseudo_count")
    min_covariance = check_nonnegative(min_covariance, "min_covariance")
    if not isinstance(emission, str) or emission not in ("categorical", "gaussian"):
        raise ValueError(
            f"emission must be 'categorical' or 'gaussian', got {emission!r}"
        )
    if not isinstance(covariance, str) or covariance not in ("diag", "full"):
        raise ValueError(f"covariance must be 'diag' or 'full', got {covariance!r}")
    padded, lengths = pad_sequences(sequences, n_symbols=n_symbols)
    if pad_batch is not None:
        extra = check_integer(pad_batch, "pad_batch", minimum=1) - padded.shape[0]
        if extra > 0:  # on the host: no eager program per size
            padded = np.pad(np.asarray(padded),
                            ((0, extra),) + ((0, 0),) * (padded.ndim - 1))
            lengths = np.pad(np.asarray(lengths), (0, extra))
    if emission == "categorical":
        if padded.ndim != 2:
            raise ValueError(
                "emission='categorical' needs (T_i,) integer symbol sequences"
            )
        if n_symbols is None:
            n_symbols = int(jnp.max(padded)) + 1
        covariance = "diag"
    else:
        if padded.ndim != 3:
            raise ValueError("emission='gaussian' needs (T_i, D) float sequences")
        n_symbols = None
    dtype = _float_dtype()
    use_init = init is not None
    if use_init:
        if not isinstance(init, HMMParams):
            raise TypeError(f"init must be an HMMParams or None, got "
                            f"{type(init).__name__}")
        validate(init.log_initial, init.log_transition, np.zeros((1, n_states)), None)
        init = jax.tree.map(lambda a: jnp.asarray(a, dtype), init)
    else:
        dim = padded.shape[-1] if n_symbols is None else None
        init = _placeholder_params(n_states, n_symbols, covariance, dim)
    # The history buffer's length is static; rounding it up to a power of two lets
    # every n_iter up to it share one compiled loop.
    history_size = max(128, 1 << (n_iter - 1).bit_length())
    params, history, converged, iters = _fit_jit(
        key, init, jnp.asarray(use_init), padded, lengths,
        jnp.asarray(n_iter), jnp.asarray(tol, dtype),
        jnp.asarray(pseudo_count, dtype), jnp.asarray(min_covariance, dtype),
        n_symbols=n_symbols, covariance=covariance, n_restarts=n_restarts,
        history_size=history_size,
    )
    # Cut on the host: an on-device slice would compile a program per n_iter.
    return FitResult(params, jnp.asarray(np.asarray(history)[:n_iter]), converged,
                     iters)
