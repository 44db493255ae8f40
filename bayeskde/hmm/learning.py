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
from .._validation import check_integer, check_nonnegative
from .emissions import (
    CategoricalEmission,
    GaussianEmission,
    _gaussian_log_density_fn,
)
from .inference import (
    HMMPosterior,
    _backward_scan,
    _emit_log_likelihoods,
    _forward_scan,
    _summed_xi,
    _validate,
)
from .params import HMMParams

__all__ = [
    "FitResult",
    "pad_sequences",
    "batch_posteriors",
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


def pad_sequences(
    sequences: Sequence[ArrayLike] | ArrayLike, *, n_symbols: int | None = None
) -> tuple[Array, Int[Array, " n_sequences"]]:
    """Pad a list of sequences into one array, with their lengths.

    One-dimensional sequences are symbol sequences (integer values, padded with 0,
    returned as int32); two-dimensional ``(T_i, D)`` sequences are vectors (padded with
    0.0, returned in the configured float dtype). Nothing passed in is mutated.

    Cost: O(sum_i T_i) validation, O(B T_max D) memory.

    Args:
        sequences: non-empty list of ``(T_i,)`` int or ``(T_i, D)`` float arrays.
        n_symbols: alphabet size; when given, every symbol must lie in
            ``[0, n_symbols)``.

    Returns:
        ``(padded, lengths)``: ``(B, T_max)`` or ``(B, T_max, D)``, and ``(B,)``
        int32.

    Raises:
        ValueError: no sequences, an empty sequence, mixed ranks or ragged feature
            dimensions, NaN/inf, non-integer or negative symbols, or symbols
            ``>= n_symbols``.
        TypeError: non-numeric data.

    Examples:
        >>> import numpy as np
        >>> padded, lengths = pad_sequences([np.array([0, 1, 1]), np.array([2])])
        >>> padded.tolist(), lengths.tolist()
        ([[0, 1, 1], [2, 0, 0]], [3, 1])
    """
    if n_symbols is not None:
        n_symbols = check_integer(n_symbols, "n_symbols", minimum=1)
    seqs = list(sequences)
    if not seqs:
        raise ValueError("sequences is empty; need at least one sequence")
    arrays = []
    for i, s in enumerate(seqs):
        try:
            a = np.asarray(s)
        except ValueError as err:  # ragged nested lists
            raise ValueError(
                f"sequences[{i}] must be a (T,) or (T, D) array: {err}") from err
        if a.dtype.kind not in "biuf":
            raise TypeError(f"sequences[{i}] must hold numbers, got dtype {a.dtype}")
        if a.ndim not in (1, 2):
            raise ValueError(
                f"sequences[{i}] must have shape (T,) or (T, D), got {a.shape}"
            )
        if a.shape[0] == 0:
            raise ValueError(f"sequences[{i}] is empty; every sequence needs T >= 1")
        if not np.all(np.isfinite(a)):
            raise ValueError(f"sequences[{i}] contains NaN or inf")
        # Finite in the input's dtype, but symbols are stored as int32 and
        # vectors in the working float dtype, where 1e300 overflows; EM squares
        # the vectors, so their squares must be finite too.
        top = float(np.max(np.abs(a))) if a.size else 0.0
        if a.ndim == 1 and top > np.iinfo(np.int32).max:
            raise ValueError(
                f"sequences[{i}] has symbol {top:.6g}, beyond the int32 range")
        if a.ndim == 2:
            info = np.finfo(_float_dtype())
            if top * top * max(a.shape[1], 1) > float(info.max):
                raise ValueError(
                    f"sequences[{i}] overflows {np.dtype(_float_dtype()).name} "
                    f"when squared (largest |value| {top:.3g}); rescale sequences")
        arrays.append(a)
    ranks = {a.ndim for a in arrays}
    if len(ranks) > 1:
        raise ValueError("sequences mix (T,) symbol and (T, D) vector sequences")
    lengths = np.array([a.shape[0] for a in arrays], np.int32)
    t_max = int(lengths.max())
    if ranks == {1}:
        for i, a in enumerate(arrays):
            if a.dtype.kind == "f" and not np.all(a == np.round(a)):
                raise ValueError(
                    f"sequences[{i}] is 1-D with non-integer values; symbol sequences "
                    "hold integers, continuous data has shape (T, D)"
                )
            lo, hi = a.min(), a.max()
            if lo < 0:
                raise ValueError(f"sequences[{i}] has a negative symbol ({lo})")
            if n_symbols is not None and hi >= n_symbols:
                raise ValueError(
                    f"sequences[{i}] has symbol {hi} outside the alphabet "
                    f"[0, {n_symbols})"
                )
        padded = np.zeros((len(arrays), t_max), np.int32)
        for i, a in enumerate(arrays):
            padded[i, : a.shape[0]] = a
        return jnp.asarray(padded), jnp.asarray(lengths)
    dims = {a.shape[1] for a in arrays}
    if len(dims) > 1:
        raise ValueError(
            f"sequences have ragged feature dimensions {sorted(dims)}; all must "
            "share one D"
        )
    (dim,) = dims
    if dim == 0:
        raise ValueError("sequences have zero features (D = 0)")
    padded = np.zeros((len(arrays), t_max, dim), np.float64)
    for i, a in enumerate(arrays):
        padded[i, : a.shape[0]] = a
    return jnp.asarray(padded, _float_dtype()), jnp.asarray(lengths)


def _time_major(padded, lengths):
    """``(T_max, B[, D])`` observations and the ``(T_max, B)`` mask, the layout of
    the recursions (see :mod:`bayeskde.hmm.inference`)."""
    obs = jnp.swapaxes(padded, 0, 1)
    mask = jnp.arange(obs.shape[0])[:, None] < lengths[None, :]
    return obs, mask


def _batch_emit(emission):
    """``emit(obs_t, mask_t) -> (lik (N, B), shift (B,))`` for one step of a
    time-major batch (see :func:`~bayeskde.hmm.inference._forward_scan`).

    Symbols need no exponential per step: the likelihood column of symbol ``m``,
    divided by its largest entry, is looked up in a table of ``N x M`` entries.
    Gaussian factors are computed once, outside the scan, and each step's
    observations arrive feature-major, ``(D, B)``.
    """
    if isinstance(emission, CategoricalEmission):
        top = jnp.max(emission.log_probs, axis=0)
        top = jnp.where(jnp.isfinite(top), top, 0.0)
        table = jnp.exp(emission.log_probs - top[None, :])

        def _emit(obs, m):
            lik = jnp.take(table, obs, axis=1)
            return jnp.where(m[None], lik, 1.0), jnp.where(m, top[obs], 0.0)

        return _emit
    log_density = _gaussian_log_density_fn(emission)

    def _emit(obs, m):  # obs: (D, B), feature-major (see _batch_smooth)
        return _emit_log_likelihoods(log_density(obs), m)

    return _emit


def _batch_smooth(params, obs, mask, xi):
    """Forward-backward over a time-major batch: ``gamma`` ``(T_max, B, N)`` (zero
    on padding), the ``xi`` accumulator (see
    :func:`~bayeskde.hmm.inference._backward_scan`, before multiplying by the
    transition matrix), the log likelihoods ``(B,)`` and the transition matrix.

    Everything runs in the widest float dtype among the parameters and (float)
    observations, so that the scan carries keep one type."""
    floats = [obs] if jnp.issubdtype(obs.dtype, jnp.floating) else []
    dtype = jnp.result_type(*jax.tree.leaves(params), *floats)
    params = jax.tree.map(lambda a: a.astype(dtype), params)
    obs = obs.astype(dtype) if floats else obs
    initial = jnp.exp(params.log_initial)
    transition = jnp.exp(params.log_transition)
    # Vectors go feature-major, (T_max, D, B), the layout of the Gaussian step.
    xs = obs if obs.ndim == 2 else jnp.swapaxes(obs, 1, 2)
    alphas, log_lik = _forward_scan(
        initial, transition, _batch_emit(params.emission), xs, mask
    )
    gamma, acc = _backward_scan(initial, transition, alphas, mask, xi)
    return gamma, acc, log_lik, transition


def _batch_posteriors(params, padded, lengths):
    obs, mask = _time_major(padded, lengths)
    gamma, acc, log_lik, transition = _batch_smooth(params, obs, mask, "each")
    xi = _summed_xi(transition[None], jnp.moveaxis(acc, 2, 0))
    return HMMPosterior(jnp.swapaxes(gamma, 0, 1), xi, log_lik)


_batch_posteriors_jit = jax.jit(_batch_posteriors)


def _check_emission(emission, categorical):
    """Concrete emission parameters: normalised symbol rows, or finite means and
    positive (diagonal) or positive-definite (full) covariances."""
    leaves = jax.tree_util.tree_leaves(emission)
    if any(isinstance(a, jax.core.Tracer) for a in leaves):
        return
    if categorical:
        lp = np.asarray(emission.log_probs, np.float64)
        if np.isnan(lp).any() or np.isposinf(lp).any():
            raise ValueError("params.emission.log_probs contains NaN or +inf")
        sums = np.exp(lp).sum(axis=-1)
        if not np.allclose(sums, 1.0, rtol=0.0, atol=1e-4):
            raise ValueError(
                "params.emission.log_probs must hold log probabilities whose rows "
                f"sum to 1; the sums are {sums}")
        return
    means = np.asarray(emission.means, np.float64)
    cov = np.asarray(emission.covariances, np.float64)
    if not (np.all(np.isfinite(means)) and np.all(np.isfinite(cov))):
        raise ValueError("params.emission holds NaN or inf")
    if cov.ndim == 2 and np.any(cov <= 0):
        raise ValueError(
            "params.emission.covariances (diagonal variances) must be > 0, got "
            f"minimum {cov.min():.3g}")
    if cov.ndim == 3 and np.any(np.linalg.eigvalsh(cov) <= 0):
        raise ValueError(
            "params.emission.covariances must be positive definite")


def batch_posteriors(
    params: HMMParams, padded: ArrayLike, lengths: Int[ArrayLike, " n_sequences"]
) -> HMMPosterior:
    """Posteriors of a whole padded data set in one compiled call.

    Cost: O(B T_max N^2) time (plus the emissions), O(B T_max N) memory.

    Args:
        params: the HMM.
        padded: ``(B, T_max)`` symbols or ``(B, T_max, D)`` vectors, as returned by
            :func:`pad_sequences`.
        lengths: ``(B,)`` true lengths, each in ``[1, T_max]``.

    Returns:
        :class:`~bayeskde.hmm.HMMPosterior` with ``gamma`` ``(B, T_max, N)`` (zero on
        padding), ``xi`` ``(B, N, N)``, ``log_likelihood`` ``(B,)``, ``xi_t=None``.

    Raises:
        ValueError: inconsistent shapes, data of the wrong kind for the emission
            (symbols for a Gaussian HMM, another D), lengths outside
            ``[1, T_max]``, and for concrete inputs: probabilities that do not sum
            to one, symbols outside the alphabet, NaN or inf. Length-1
            sequences are fine (their ``xi`` is zero).
    """
    padded = jnp.asarray(padded)
    lengths = jnp.asarray(lengths)
    if padded.ndim not in (2, 3) or lengths.shape != padded.shape[:1]:
        raise ValueError(
            f"padded must be (B, T_max) or (B, T_max, D) and lengths (B,), got "
            f"{padded.shape} and {lengths.shape}"
        )
    n = params.log_initial.shape[0]
    _validate(params.log_initial, params.log_transition, np.zeros((1, n)), None)
    categorical = isinstance(params.emission, CategoricalEmission)
    _check_emission(params.emission, categorical)
    if categorical != (padded.ndim == 2):
        raise ValueError(
            f"padded has shape {padded.shape}, but the HMM's "
            f"{type(params.emission).__name__} needs "
            + ("(B, T_max) symbols" if categorical else "(B, T_max, D) vectors")
        )
    if not categorical and padded.shape[2] != params.emission.means.shape[1]:
        raise ValueError(
            f"padded has D = {padded.shape[2]} features, the HMM's Gaussians "
            f"D = {params.emission.means.shape[1]}"
        )
    if not isinstance(lengths, jax.core.Tracer):
        lens = np.asarray(lengths)
        if lens.min() < 1 or lens.max() > padded.shape[1]:
            raise ValueError(
                f"lengths must lie in [1, {padded.shape[1]}] (no empty sequences), "
                f"got values in [{lens.min()}, {lens.max()}]"
            )
    if not isinstance(padded, jax.core.Tracer):
        # An out-of-range symbol would be read as NaN by the gather, silently.
        x = np.asarray(padded)
        if categorical:
            n_symbols = params.emission.log_probs.shape[1]
            if not np.issubdtype(x.dtype, np.integer):
                raise ValueError(f"padded symbols must be integers, got {x.dtype}")
            if x.min() < 0 or x.max() >= n_symbols:
                raise ValueError(
                    f"padded has symbols in [{x.min()}, {x.max()}], outside the "
                    f"alphabet [0, {n_symbols})"
                )
        elif not np.all(np.isfinite(x)):
            raise ValueError("padded contains NaN or inf")
    return _batch_posteriors_jit(params, padded, lengths)


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
    gamma, acc, log_lik, transition = _batch_smooth(params, obs, mask, "total")
    # gamma: (T_max, B, N), zero on padding.
    stats = {
        "initial": jnp.sum(gamma[0], axis=0),
        "transition": _summed_xi(transition, acc),
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
    obs, mask = _time_major(padded, lengths)
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
    n_states = check_integer(n_states, "n_states", minimum=1)
    n_iter = check_integer(n_iter, "n_iter", minimum=1)
    n_restarts = check_integer(n_restarts, "n_restarts", minimum=1)
    tol = check_nonnegative(tol, "tol")
    pseudo_count = check_nonnegative(pseudo_count, "pseudo_count")
    min_covariance = check_nonnegative(min_covariance, "min_covariance")
    if emission not in ("categorical", "gaussian"):
        raise ValueError(
            f"emission must be 'categorical' or 'gaussian', got {emission!r}"
        )
    if covariance not in ("diag", "full"):
        raise ValueError(f"covariance must be 'diag' or 'full', got {covariance!r}")
    padded, lengths = pad_sequences(sequences, n_symbols=n_symbols)
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
        _validate(init.log_initial, init.log_transition, np.zeros((1, n_states)), None)
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
    return FitResult(params, history[:n_iter], converged, iters)
