"""Single-sequence HMM recursions: scaled forward-backward, filtering, Viterbi.

The ``lax.scan`` recursions behind :mod:`bayeskde.hmm.inference` (Rabiner 1989,
eqs. (19)-(25), (27), (37), (91)-(92), (30)-(35)); see that module for the
conventions, the masking of padded steps and the public functions.
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp
from jax import lax
from jaxtyping import Array, Float

from .._typing import float_dtype

__all__ = ["HMMPosterior", "HMMFilter"]


class HMMPosterior(NamedTuple):
    """Posterior of the hidden states given one observation sequence.

    Attributes:
        gamma: ``(T, N)`` smoothed marginals P(q_t = i | x) (Rabiner eq. 25); rows
            of masked steps are zero, the others sum to one.
        xi: ``(N, N)`` pairwise marginals P(q_t = i, q_{t+1} = j | x) summed over the
            T - 1 transitions (eq. 26); the zero matrix for a sequence with a single
            observed step (no transitions).
        log_likelihood: ``()`` log p(x_1, ..., x_T).
        xi_t: ``(T - 1, N, N)`` per-time pairwise marginals when requested with
            ``per_time_xi=True``, else ``None``. Entry ``t`` pairs step ``t`` with
            the next observed step; it is zero when step ``t`` is masked or is the
            last observed one.
    """

    gamma: Float[Array, "num_timesteps num_states"]
    xi: Float[Array, "num_states num_states"]
    log_likelihood: Float[Array, ""]
    xi_t: Float[Array, "num_transitions num_states num_states"] | None = None


class HMMFilter(NamedTuple):
    """Filtered marginals of one sequence.

    Attributes:
        filtered: ``(T, N)`` P(q_t = i | x_1, ..., x_t); rows of masked steps zero.
        log_likelihood: ``()`` log p(x_1, ..., x_T).
    """

    filtered: Float[Array, "num_timesteps num_states"]
    log_likelihood: Float[Array, ""]


def prepare(log_initial, log_transition, log_likelihoods, mask):
    dtype = float_dtype()
    log_initial = jnp.asarray(log_initial, dtype)
    log_transition = jnp.asarray(log_transition, dtype)
    log_likelihoods = jnp.asarray(log_likelihoods, dtype)
    if mask is None:
        mask = jnp.ones(log_likelihoods.shape[0], bool)
    return log_initial, log_transition, log_likelihoods, jnp.asarray(mask, bool)


# The recursions work on time-major arrays ``(T, N, ...)``: the state axis second,
# any batch (of sequences, say) trailing, so that one scan step is one
# ``(N, N) @ (N, B)`` product on contiguous rows of the batch. A single sequence is
# the case of no trailing axes. The emission enters through ``emit(x_t, mask_t)``,
# called inside the forward step on the step's observations, so the ``(T, N, B)``
# likelihoods are never materialised (``bench/hmm.py`` measured a gather of them
# alone at a quarter of the old total time).


def emit_log_likelihoods(x, m, axis=0):
    """``emit`` for given log likelihoods ``x`` ``(N, ...)`` (the state axis
    ``axis``): the scaled row ``exp(x - max_i x_i)`` and its shift, all-ones on
    masked steps.

    The per-step shift makes the largest likelihood 1 whatever the scale of the
    densities; an all ``-inf`` row (an observation impossible in every state) keeps
    shift 0 and yields a zero row.
    """
    shift = jnp.max(x, axis=axis)
    shift = jnp.where(jnp.isfinite(shift) & m, shift, 0.0)
    lik = jnp.exp(x - jnp.expand_dims(shift, axis))
    return jnp.where(jnp.expand_dims(m, axis), lik, 1.0), shift


def _matvec(matrix, v):
    """``matrix @ v`` for ``v`` of shape ``(N, ...)``."""
    return jnp.tensordot(matrix, v, axes=1)


def _normalise_step(pred, b, shift, m, axis):
    """One scaled forward update (Rabiner eqs. 19-20, 91) with every guard:
    ``pred * b`` normalised along ``axis`` (the state axis) and the step's log
    scale ``log c_t + shift`` (0 on masked steps).

    Underflow in every state (see the module notes) keeps the support of
    ``pred``; an observation impossible in every state gives a zero row and
    log scale -inf.
    """
    log_tiny = jnp.log(jnp.finfo(pred.dtype).tiny)
    a = pred * b
    c = jnp.sum(a, axis=axis)
    ok = c > 0
    a = jnp.where(jnp.expand_dims(ok, axis), a, jnp.where(pred > 0, b, 0.0))
    total = jnp.where(ok, c, jnp.sum(a, axis=axis))
    alpha = a / jnp.expand_dims(jnp.where(total > 0, total, 1.0), axis)
    fallback = jnp.where(total > 0, log_tiny, -jnp.inf)  # -inf: impossible
    log_c = jnp.where(ok, jnp.log(jnp.where(ok, c, 1.0)), fallback)
    return alpha, jnp.where(m, log_c + shift, 0.0)


def forward_scan(initial, transition, emit, xs, mask):
    """Forward pass (Rabiner eqs. 19-20, normalised by c_t as in eq. 91).

    A masked step has an all-ones likelihood row, so its alpha is its prediction,
    and the identity as transition, so the prediction passes on unchanged. The log
    likelihood (sum of log c_t and the shifts) is accumulated in the carry.

    Args:
        emit: ``emit(x_t, mask_t) -> (lik (N, ...), shift (...))``.
        xs: the per-step observations, leading axis time.
        mask: ``(T, ...)`` bool.

    Returns:
        ``alphas`` ``(T, N, ...)`` (on masked steps the normalised prediction) and
        the log likelihood ``(...)``.
    """
    dtype = initial.dtype
    transition_t = transition.T

    def _step(carry, x):
        pred, log_lik = carry
        obs, m = x
        b, shift = emit(obs, m)
        alpha, log_scale = _normalise_step(pred, b, shift, m, 0)
        nxt = jnp.where(m[None], _matvec(transition_t, alpha), alpha)
        return (nxt, log_lik + log_scale), alpha

    batch = mask.shape[1:]
    init = jnp.broadcast_to(initial.reshape((-1,) + (1,) * len(batch)),
                            initial.shape + batch)
    (_, log_lik), alphas = lax.scan(
        _step, (init, jnp.zeros(batch, dtype)), (xs, mask)
    )
    return alphas, log_lik


def _floor(dtype, num_states):
    # Keeps r = gamma / pred below 1 / tiny, so no sum of N terms overflows.
    return num_states * jnp.finfo(dtype).tiny


def backward_scan(initial, transition, alphas, mask, xi):
    """Backward pass in smoother form, with the pairwise marginals on the way.

    ``gamma[t] = alpha[t] * (transition @ r[t + 1])``, renormalised, with
    ``r[t] = gamma[t] / pred[t]``: ``transition @ r[t + 1]`` is Rabiner's backward
    variable scaled by the forward pass's c_t (eq. 92), i.e. ``alpha * beta`` is
    already gamma. Unlike a beta normalised on its own, this never forms the
    product of two numbers that underflow separately, so gamma stays a
    distribution when filter and future disagree by more than the floating-point
    range. On masked steps ``r`` passes unchanged (their transition is the
    identity). The one-step predictions ``pred[t]`` are recomputed from
    ``alpha[t - 1]`` rather than stored by the forward pass (one ``N x N``
    product per step is cheaper than writing and reading a ``(T, N, B)`` array).

    The pairwise marginal of step ``t`` and the next observed step is
    ``transition * outer(alpha[t], r_next)`` (eq. 26 in this scaling); ``xi``
    chooses what is kept of it: ``"each"`` accumulates ``outer(alpha, r)`` per
    batch element in the carry (``(N, N, ...)``), ``"total"`` sums it over the
    batch too (one ``(N, B) @ (B, N)`` product per step), ``"per_time"`` returns
    the ``r_next`` of every step (zero where step ``t`` is masked or the last
    observed one) and ``None`` nothing. None of them materialises ``(T, N, N)``.

    Returns:
        ``gamma`` ``(T, ..., N)`` (the state axis last, zero on masked steps) and
        the ``xi`` accumulator (``(N, N, ...)``, ``(N, N)``, ``(T, N, ...)`` or
        ``None``).
    """
    dtype = alphas.dtype
    num_states = alphas.shape[1]
    floor = _floor(dtype, num_states)
    transition_t = transition.T
    batch = mask.shape[1:]
    first = jnp.broadcast_to(initial.reshape((-1,) + (1,) * len(batch)),
                             initial.shape + batch)
    prev = jnp.concatenate([first[None], alphas[:-1]])
    prev_mask = jnp.concatenate([jnp.zeros((1,) + batch, bool), mask[:-1]])
    extra = {"each": (num_states, num_states) + batch,
             "total": (num_states, num_states)}.get(xi, ())

    def _step(carry, x):
        r, seen, acc = carry
        alpha, before, pm, m = x
        pred = jnp.where(pm[None], _matvec(transition_t, before), before)
        valid = m & seen  # an observed step with an observed successor
        # Masking the (N, ...) factor, not the (N, N, ...) product, halves the
        # per-step work of the accumulation (alpha and r are finite).
        r_next = jnp.where(valid[None], r, 0.0)
        if xi == "each":
            acc = acc + alpha[:, None] * r_next[None]
        elif xi == "total":
            acc = acc + jnp.tensordot(alpha, r_next,
                                      axes=(tuple(range(1, alpha.ndim)),) * 2)
        g = alpha * _matvec(transition, r)
        z = jnp.sum(g, axis=0)
        # z = 0 only if every term underflowed: fall back to the filter.
        gamma = jnp.where((z > 0)[None], g / jnp.where(z > 0, z, 1.0)[None], alpha)
        new_r = jnp.where(m[None], gamma / jnp.maximum(pred, floor), r)
        out = jnp.moveaxis(jnp.where(m[None], gamma, 0.0), 0, -1)
        if xi == "per_time":
            out = (out, r_next)
        return (new_r, seen | m, acc), out

    init = (jnp.ones(alphas.shape[1:], dtype), jnp.zeros(batch, bool),
            jnp.zeros(extra, dtype))
    (_, _, acc), out = lax.scan(
        _step, init, (alphas, prev, prev_mask, mask), reverse=True
    )
    if xi == "per_time":
        out, acc = out
    return out, (acc if xi is not None else None)


def summed_xi(transition, products):
    """``transition * sum_t alpha_t^T u_t``; exact zeros stay zero even where the
    sum of ``alpha * u`` (bounded by ``T / transition``) is huge."""
    return jnp.where(transition > 0, transition * products, 0.0)


def forward_backward_pass(log_initial, log_transition, log_likelihoods, mask,
                          per_time_xi):
    log_initial, log_transition, log_likelihoods, mask = prepare(
        log_initial, log_transition, log_likelihoods, mask
    )
    initial, transition = jnp.exp(log_initial), jnp.exp(log_transition)
    alphas, log_lik = forward_scan(
        initial, transition, emit_log_likelihoods, log_likelihoods, mask
    )
    gamma, acc = backward_scan(
        initial, transition, alphas, mask, "per_time" if per_time_xi else "each"
    )
    xi_t = None
    if per_time_xi:
        # acc holds r_next (zero where there is no transition), so the raw alphas
        # of masked steps drop out.
        xi_t = alphas[:-1, :, None] * transition[None] * acc[:-1, None, :]
        xi = summed_xi(transition, alphas.T @ acc)
    else:
        xi = summed_xi(transition, acc)
    return HMMPosterior(gamma, xi, log_lik, xi_t)


def forward_filter_pass(log_initial, log_transition, log_likelihoods, mask):
    log_initial, log_transition, log_likelihoods, mask = prepare(
        log_initial, log_transition, log_likelihoods, mask
    )
    alphas, log_likelihood = forward_scan(
        jnp.exp(log_initial), jnp.exp(log_transition), emit_log_likelihoods,
        log_likelihoods, mask,
    )
    return HMMFilter(jnp.where(mask[:, None], alphas, 0.0), log_likelihood)


def forward_filter_batch(log_initial, log_transition, log_likelihoods, mask):
    """The forward filter of a batch sharing its parameters, batch-major.

    ``log_likelihoods`` ``(B, T, N)``, ``mask`` ``(B, T)``; returns the filtered
    marginals ``(B, T, N)`` (zero on masked steps) and ``(B,)`` log
    likelihoods, equal to :func:`forward_filter_pass` per sequence. The scan carries
    ``(B, N)`` rows, states minor (for the filter alone this layout measured
    1.1-1.2x faster than the time-major ``(N, B)`` of the smoother, whose
    backward pass and pairwise sums want the states major).

    When every initial and transition probability exceeds 4 N tiny, each
    prediction gives every state at least (1 / N) min A > tiny (its largest
    filtered probability is at least 1 / N), so the normaliser c_t >= pred_j * 1
    at the state j of the largest likelihood cannot underflow: the guards of
    :func:`_normalise_step` (a second reduction and selects per step, 15-20% of
    its time) reduce to the two cheap ones kept here, the emission's finite
    shift for a step impossible in every state and c_t = 0 after one. Otherwise
    the guarded scan runs. (One ``lax.cond`` on the parameters chooses; each
    branch transposes its own output, which measured 1.5x faster than a
    transpose after the cond.)
    """
    initial = jnp.exp(log_initial)
    batch, n = log_likelihoods.shape[0], initial.shape[0]
    thresh = 4 * n * jnp.finfo(initial.dtype).tiny
    positive = (jnp.min(initial) > thresh) & (jnp.min(jnp.exp(log_transition)) > thresh)

    def run(guarded, log_initial, log_transition, log_likelihoods, mask):
        initial, transition = jnp.exp(log_initial), jnp.exp(log_transition)

        def _step(carry, x):
            pred, log_lik = carry
            obs, m = x  # (B, N), (B,)
            b, shift = emit_log_likelihoods(obs, m, axis=1)
            if guarded:
                alpha, log_scale = _normalise_step(pred, b, shift, m, 1)
            else:
                a = pred * b
                c = jnp.sum(a, axis=1)
                alpha = a / jnp.where(c > 0, c, 1.0)[:, None]
                log_scale = jnp.where(m, jnp.log(c) + shift, 0.0)
            nxt = jnp.where(m[:, None], alpha @ transition, alpha)
            return (nxt, log_lik + log_scale), jnp.where(m[:, None], alpha, 0.0)

        init = jnp.broadcast_to(initial[None], (batch, n))
        xs = (jnp.moveaxis(log_likelihoods, 1, 0), mask.T)  # (T, B, N), (T, B)
        (_, log_lik), alphas = lax.scan(
            _step, (init, jnp.zeros(batch, initial.dtype)), xs)
        return jnp.moveaxis(alphas, 1, 0), log_lik

    filtered, log_lik = lax.cond(
        positive, functools.partial(run, False), functools.partial(run, True),
        log_initial, log_transition, log_likelihoods, mask)
    return HMMFilter(filtered, log_lik)


def max_argmax(x: Array) -> tuple[Array, Array]:
    """``(max, argmax)`` over the last axis in one variadic reduction (ties to
    the lower index, as ``jnp.argmax``): one pass over ``x`` where ``jnp.max``
    and ``jnp.argmax`` take two (bench/README.md has the Viterbi timings)."""
    idx = lax.broadcasted_iota(jnp.int32, x.shape, x.ndim - 1)

    def pick(a, b):
        (av, ai), (bv, bi) = a, b
        first = (av > bv) | ((av == bv) & (ai < bi))
        return jnp.where(first, av, bv), jnp.where(first, ai, bi)

    init = (jnp.array(-jnp.inf, x.dtype), jnp.array(0, jnp.int32))
    return lax.reduce((x, idx), init, pick, (x.ndim - 1,))


def pointer_dtype(num_states: int):
    """The narrowest integer type holding a state index: Viterbi's (T, ..., N)
    back-pointers are its largest array (int8 for N <= 127: a quarter of the
    memory traffic of int32)."""
    return jnp.int8 if num_states <= 127 else (
        jnp.int16 if num_states <= 32767 else jnp.int32)


def viterbi_pass(log_initial, log_transition, log_likelihoods, mask):
    log_initial, log_transition, log_likelihoods, mask = prepare(
        log_initial, log_transition, log_likelihoods, mask
    )
    num_states = log_initial.shape[0]
    identity = jnp.arange(num_states, dtype=jnp.int32)

    def _step(carry, x):
        pred, pointer, last = carry  # pred: best log score entering this step
        ll, m = x
        delta = pred + ll
        best, new_pointer = max_argmax(delta[None, :] + log_transition.T)
        new_carry = (best, new_pointer, delta)
        carry = jax.tree.map(lambda n, o: jnp.where(m, n, o), new_carry, carry)
        return carry, jnp.where(m, pointer, identity)

    init = (log_initial, identity, jnp.full(num_states, -jnp.inf, log_initial.dtype))
    (_, _, last), pointers = lax.scan(_step, init, (log_likelihoods, mask))

    def _back(state, x):
        pointer, m = x
        return jnp.where(m, pointer[state], state), jnp.where(m, state, -1)

    _, path = lax.scan(_back, jnp.argmax(last), (pointers, mask), reverse=True)
    return path
