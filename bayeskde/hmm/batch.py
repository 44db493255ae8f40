"""Batches of variable-length sequences: padding and batched posteriors.

A data set of sequences is padded once (:func:`pad_sequences`) to ``(B, T_max)``
(symbols) or ``(B, T_max, D)`` (vectors) with their ``lengths``; every batched
function then runs one compiled program over the whole set, masking the padding
(see :mod:`bayeskde.hmm.inference`), with no Python loop over sequences. Padding
costs ``B * T_max`` work, so very unequal lengths are best split into buckets.
"""

from __future__ import annotations

from collections.abc import Sequence

import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Int

from .._linalg import float_dtype as _float_dtype
from .._typing import ArrayLike
from .._validation import check_integer
from .emissions import (
    CategoricalEmission,
    gaussian_log_density_fn,
)
from .inference import (
    HMMPosterior,
    backward_scan,
    emit_log_likelihoods,
    forward_scan,
    summed_xi,
    validate,
)
from .params import HMMParams

__all__ = ["pad_sequences", "batch_posteriors"]


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


def time_major(padded, lengths):
    """``(T_max, B[, D])`` observations and the ``(T_max, B)`` mask, the layout of
    the recursions (see :mod:`bayeskde.hmm.inference`)."""
    obs = jnp.swapaxes(padded, 0, 1)
    mask = jnp.arange(obs.shape[0])[:, None] < lengths[None, :]
    return obs, mask


def _batch_emit(emission):
    """``emit(obs_t, mask_t) -> (lik (N, B), shift (B,))`` for one step of a
    time-major batch (see :func:`~bayeskde.hmm.inference.forward_scan`).

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
    log_density = gaussian_log_density_fn(emission)

    def _emit(obs, m):  # obs: (D, B), feature-major (see batch_smooth)
        return emit_log_likelihoods(log_density(obs), m)

    return _emit


def batch_smooth(params, obs, mask, xi):
    """Forward-backward over a time-major batch: ``gamma`` ``(T_max, B, N)`` (zero
    on padding), the ``xi`` accumulator (see
    :func:`~bayeskde.hmm.inference.backward_scan`, before multiplying by the
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
    alphas, log_lik = forward_scan(
        initial, transition, _batch_emit(params.emission), xs, mask
    )
    gamma, acc = backward_scan(initial, transition, alphas, mask, xi)
    return gamma, acc, log_lik, transition


def _batch_posteriors(params, padded, lengths):
    obs, mask = time_major(padded, lengths)
    gamma, acc, log_lik, transition = batch_smooth(params, obs, mask, "each")
    xi = summed_xi(transition[None], jnp.moveaxis(acc, 2, 0))
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
    validate(params.log_initial, params.log_transition, np.zeros((1, n)), None)
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
