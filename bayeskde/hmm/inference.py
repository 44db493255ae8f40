"""Exact inference in a discrete-state HMM: forward filter, forward-backward, Viterbi.

All functions take the model as arrays, never an emission model: ``log_initial``
``(N,)``, ``log_transition`` ``(N, N)`` (row ``i`` is
``log P(q_{t+1} = . | q_t = i)``) and ``log_likelihoods`` ``(T, N)`` with
``log_likelihoods[t, i] = log p(x_t | q_t = i)``.
Each is a pure, jit-compiled function of one sequence that ``jax.vmap`` batches.

Recursion. Forward-backward uses Rabiner's (1989) scaled recursions in probability
space, one ``(N,) @ (N, N)`` product per step, instead of log-sum-exp over an
``N x N`` matrix per step: ``bench/hmm.py --recursions`` measures both, and the scaled
form is several times faster on CPU and GPU. To keep the dynamic range of log space:

- the likelihoods enter as ``exp(log_likelihoods[t] - max_i log_likelihoods[t, i])``,
  so their largest entry per step is 1 whatever the scale of the densities;
- forward messages are normalised at every step (Rabiner's c_t; the log likelihood
  is the sum of log c_t plus the per-step maxima); the backward pass runs in
  smoother form, ``gamma_t = alpha_t * (A @ (gamma_{t+1} / pred_{t+1}))``, which is
  Rabiner's beta scaled by the same c_t (eq. 92). A beta normalised on its own
  (as an earlier version did) makes ``alpha_t . beta_t`` underflow to zero in
  float32 when filter and future disagree by more than the float range (rows of
  gamma all zero at T = 10^5 with transition probabilities of 1e-30); in smoother
  form every factor is a ratio at most ``1 / (N * tiny)`` (``pred`` is floored
  there), so gamma stays a distribution;
- ``-inf`` entries (log 0, structural zeros) are allowed everywhere; an observation
  impossible in every reachable state gives ``log_likelihood = -inf``.
- a step whose product underflows to zero in every state (every state either
  a priori or observationally less likely than ~1e-38 in float32, ~1e-308 in
  float64, relative to the best) keeps the states that are possible under both and
  weighs them by the likelihood alone, and adds ``log(tiny)`` to the log
  likelihood: results stay finite, but are approximate in that regime. More
  generally a state whose filtered probability falls below ``tiny`` is dropped, so
  float32 with transition probabilities near 1e-30 agrees with float64 only
  approximately (finite, normalised, but ~1% of gamma rows off by > 1e-3 in the
  T = 10^5 test). A log-space step as fallback would be exact, but its
  ``log``/``exp`` per step cost 2-6x on the whole batch (measured), and float64
  pushes the regime out of reach in practice.

Masks. ``mask`` (``(T,)`` bool, True = observed) supports padded batches. A step with
``mask[t] = False`` is removed from the sequence: it contributes nothing to the log
likelihood or to ``xi``, its ``gamma`` row is zero, and the transition runs from the
previous observed step straight to the next. For the trailing padding that
:func:`~bayeskde.hmm.pad_sequences` produces this gives exactly the posterior of the
unpadded sequence.

References: L. R. Rabiner (1989), A tutorial on hidden Markov models and selected
applications in speech recognition, Proc. IEEE 77(2): eqs. (18)-(27) (forward,
backward, gamma, xi), (91)-(92) (scaling), (30)-(35) (Viterbi).
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jaxtyping import Array, Bool, Float, Int

from .._typing import ArrayLike

__all__ = [
    "HMMPosterior",
    "HMMFilter",
    "forward_filter",
    "forward_backward",
    "viterbi",
]


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


def _prepare(log_initial, log_transition, log_likelihoods, mask):
    dtype = jnp.result_type(float)
    log_initial = jnp.asarray(log_initial, dtype)
    log_transition = jnp.asarray(log_transition, dtype)
    log_likelihoods = jnp.asarray(log_likelihoods, dtype)
    if mask is None:
        mask = jnp.ones(log_likelihoods.shape[0], bool)
    return log_initial, log_transition, log_likelihoods, jnp.asarray(mask, bool)


# The recursions work on time-major arrays ``(T, N, ...)``: the state axis second,
# any batch (of sequences, say) trailing, so that one scan step is one
# ``(N, N) @ (N, B)`` product on contiguous rows of the batch. A single sequence is
# the case of no trailing axes.


def _scaled_likelihoods(log_likelihoods, mask):
    """``exp(log_likelihoods - shift)`` with all-ones rows on masked steps.

    The per-step shift makes the largest likelihood 1 whatever the scale of the
    densities; an all ``-inf`` row (an observation impossible in every state) keeps
    shift 0 and yields a zero row.
    """
    shift = jnp.max(log_likelihoods, axis=1)
    shift = jnp.where(jnp.isfinite(shift) & mask, shift, 0.0)
    lik = jnp.exp(log_likelihoods - shift[:, None])
    return jnp.where(mask[:, None], lik, 1.0), shift


def _forward_scan(initial, transition, lik, mask):
    """Forward pass (Rabiner eqs. 19-20, normalised by c_t as in eq. 91).

    A masked step has an all-ones likelihood row, so its alpha is its prediction,
    and the identity as transition, so the prediction passes on unchanged.

    Returns:
        ``alphas`` and ``preds`` (the one-step predictions), ``(T, N, ...)``, and
        ``log c_t`` ``(T, ...)`` (meaningless on masked steps).
    """
    log_tiny = jnp.log(jnp.finfo(lik.dtype).tiny)
    transition_t = transition.T

    def _step(pred, x):
        b, m = x
        a = pred * b
        c = jnp.sum(a, axis=0, keepdims=True)
        ok = c > 0
        # Underflow in every state (see the module notes): keep the support.
        a = jnp.where(ok, a, jnp.where(pred > 0, b, 0.0))
        total = jnp.where(ok, c, jnp.sum(a, axis=0, keepdims=True))
        alpha = a / jnp.where(total > 0, total, 1.0)
        fallback = jnp.where(total > 0, log_tiny, -jnp.inf)  # -inf: impossible
        log_c = jnp.where(ok, jnp.log(jnp.where(ok, c, 1.0)), fallback)
        nxt = jnp.where(m[None], transition_t @ alpha, alpha)
        return nxt, (alpha, pred, log_c[0])

    init = jnp.broadcast_to(initial.reshape((-1,) + (1,) * (lik.ndim - 2)),
                            lik.shape[1:])
    _, out = lax.scan(_step, init, (lik, mask))
    return out


def _floor(dtype, num_states):
    # Keeps r = gamma / pred below 1 / tiny, so no sum of N terms overflows.
    return num_states * jnp.finfo(dtype).tiny


def _backward_scan(transition, alphas, preds, mask):
    """Backward pass in smoother form.

    ``gamma[t] = alpha[t] * (transition @ r[t + 1])``, renormalised, with
    ``r[t] = gamma[t] / pred[t]``: ``transition @ r[t + 1]`` is Rabiner's backward
    variable scaled by the forward pass's c_t (eq. 92), i.e. ``alpha * beta`` is
    already gamma. Unlike a beta normalised on its own, this never forms the
    product of two numbers that underflow separately, so gamma stays a
    distribution when filter and future disagree by more than the floating-point
    range. On masked steps ``r`` passes unchanged (their transition is the
    identity).

    Returns:
        ``gamma`` and ``r`` ``(T, N, ...)`` (gamma meaningless on masked steps).
    """
    floor = _floor(alphas.dtype, alphas.shape[1])

    def _step(r, x):
        alpha, pred, m = x
        g = alpha * (transition @ r)
        z = jnp.sum(g, axis=0, keepdims=True)
        # z = 0 only if every term underflowed: fall back to the filter.
        gamma = jnp.where(z > 0, g / jnp.where(z > 0, z, 1.0), alpha)
        new_r = jnp.where(m[None], gamma / jnp.maximum(pred, floor), r)
        return new_r, (gamma, new_r)

    _, out = lax.scan(_step, jnp.ones_like(alphas[0]), (alphas, preds, mask),
                      reverse=True)
    return out


class _Smoothed(NamedTuple):
    alphas: Array  # (T, N, ...), zero on masked steps
    gamma: Array  # (T, N, ...), zero on masked steps
    u: Array  # (T, N, ...): xi_t[i, j] = alphas[t, i] * transition[i, j] * u[t, j]
    log_likelihood: Array  # (...)


def _smooth_scaled(initial, transition, lik, shift, mask):
    """Forward-backward on scaled likelihoods ``(T, N, ...)`` (see
    :func:`_scaled_likelihoods`); ``mask`` ``(T, ...)``."""
    alphas, preds, log_c = _forward_scan(initial, transition, lik, mask)
    log_likelihood = jnp.sum(jnp.where(mask, log_c + shift, 0.0), axis=0)
    gamma, rs = _backward_scan(transition, alphas, preds, mask)
    m = mask[:, None]
    # u[t] pairs step t with the next observed step, whose r the scan carried
    # back through any masked steps; zero when t is masked or the last observed.
    steps = jnp.arange(mask.shape[0]).reshape((-1,) + (1,) * (mask.ndim - 1))
    last = jnp.max(jnp.where(mask, steps, -1), axis=0)
    valid = (mask[:-1] & (steps[:-1] < last[None]))[:, None]
    u = jnp.concatenate([jnp.where(valid, rs[1:], 0.0), jnp.zeros_like(rs[:1])])
    return _Smoothed(
        jnp.where(m, alphas, 0.0), jnp.where(m, gamma, 0.0), u, log_likelihood
    )


def _smooth(initial, transition, log_likelihoods, mask):
    lik, shift = _scaled_likelihoods(log_likelihoods, mask)
    return _smooth_scaled(initial, transition, lik, shift, mask)


def _summed_xi(transition, products):
    """``transition * sum_t alpha_t^T u_t``; exact zeros stay zero even where the
    sum of ``alpha * u`` (bounded by ``T / transition``) is huge."""
    return jnp.where(transition > 0, transition * products, 0.0)


def _forward_backward(log_initial, log_transition, log_likelihoods, mask, per_time_xi):
    log_initial, log_transition, log_likelihoods, mask = _prepare(
        log_initial, log_transition, log_likelihoods, mask
    )
    transition = jnp.exp(log_transition)
    s = _smooth(jnp.exp(log_initial), transition, log_likelihoods, mask)
    # Summed pairwise marginals as one (N, T) @ (T, N) product (Rabiner eq. 26).
    xi = _summed_xi(transition, s.alphas.T @ s.u)
    xi_t = None
    if per_time_xi:
        xi_t = s.alphas[:-1, :, None] * transition[None] * s.u[:-1, None, :]
    return HMMPosterior(s.gamma, xi, s.log_likelihood, xi_t)


def _forward_filter(log_initial, log_transition, log_likelihoods, mask):
    log_initial, log_transition, log_likelihoods, mask = _prepare(
        log_initial, log_transition, log_likelihoods, mask
    )
    lik, shift = _scaled_likelihoods(log_likelihoods, mask)
    alphas, _, log_c = _forward_scan(
        jnp.exp(log_initial), jnp.exp(log_transition), lik, mask
    )
    log_likelihood = jnp.sum(jnp.where(mask, log_c + shift, 0.0))
    return HMMFilter(jnp.where(mask[:, None], alphas, 0.0), log_likelihood)


def _viterbi(log_initial, log_transition, log_likelihoods, mask):
    log_initial, log_transition, log_likelihoods, mask = _prepare(
        log_initial, log_transition, log_likelihoods, mask
    )
    num_states = log_initial.shape[0]
    identity = jnp.arange(num_states)

    def _step(carry, x):
        pred, pointer, last = carry  # pred: best log score entering this step
        ll, m = x
        delta = pred + ll
        scores = delta[:, None] + log_transition
        new_pointer = jnp.argmax(scores, axis=0)
        new_carry = (jnp.max(scores, axis=0), new_pointer, delta)
        carry = jax.tree.map(lambda n, o: jnp.where(m, n, o), new_carry, carry)
        return carry, jnp.where(m, pointer, identity)

    init = (log_initial, identity, jnp.full(num_states, -jnp.inf, log_initial.dtype))
    (_, _, last), pointers = lax.scan(_step, init, (log_likelihoods, mask))

    def _back(state, x):
        pointer, m = x
        return jnp.where(m, pointer[state], state), jnp.where(m, state, -1)

    _, path = lax.scan(_back, jnp.argmax(last), (pointers, mask), reverse=True)
    return path


_forward_backward_jit = jax.jit(_forward_backward, static_argnames="per_time_xi")
_forward_filter_jit = jax.jit(_forward_filter)
_viterbi_jit = jax.jit(_viterbi)


def _is_concrete(*arrays) -> bool:
    return not any(isinstance(a, jax.core.Tracer) for a in arrays)


def _validate(log_initial, log_transition, log_likelihoods, mask):
    """Shape checks always; value checks only on concrete (untraced) inputs."""
    shapes = [np.shape(a) for a in (log_initial, log_transition, log_likelihoods)]
    if len(shapes[0]) != 1 or shapes[0][0] < 1:
        raise ValueError(f"log_initial must have shape (N,), got {shapes[0]}")
    n = shapes[0][0]
    if shapes[1] != (n, n):
        raise ValueError(f"log_transition must have shape ({n}, {n}), got {shapes[1]}")
    if len(shapes[2]) != 2 or shapes[2][1] != n or shapes[2][0] < 1:
        raise ValueError(
            f"log_likelihoods must have shape (T, {n}) with T >= 1, got {shapes[2]}"
        )
    if mask is not None and np.shape(mask) != (shapes[2][0],):
        raise ValueError(
            f"mask must have shape ({shapes[2][0]},), got {np.shape(mask)}"
        )
    if not _is_concrete(log_initial, log_transition, log_likelihoods):
        return
    dtype = np.dtype(jnp.result_type(float))
    # A row normalised in float64 and rounded to float32 is off by ~N eps.
    single = {np.dtype(np.float32), np.dtype(np.float16)}
    given = {np.dtype(getattr(a, "dtype", dtype))
             for a in (log_initial, log_transition)}
    atol = 1e-4 if dtype in single or given & single else 1e-8
    for name, arr in (("log_initial", log_initial), ("log_transition", log_transition)):
        a = np.asarray(arr, dtype)
        if np.isnan(a).any() or np.isposinf(a).any():
            raise ValueError(f"{name} contains NaN or +inf")
        with np.errstate(under="ignore"):
            sums = np.exp(a).sum(axis=-1)
        if not np.allclose(sums, 1.0, rtol=0.0, atol=atol):
            raise ValueError(
                f"{name} must hold log probabilities whose exponentials sum to 1 "
                f"along the last axis; the sums are {sums}"
            )
    ll = np.asarray(log_likelihoods)
    if np.isnan(ll).any() or np.isposinf(ll).any():
        raise ValueError("log_likelihoods contains NaN or +inf")


def forward_filter(
    log_initial: Float[ArrayLike, " num_states"],
    log_transition: Float[ArrayLike, "num_states num_states"],
    log_likelihoods: Float[ArrayLike, "num_timesteps num_states"],
    *,
    mask: Bool[ArrayLike, " num_timesteps"] | None = None,
) -> HMMFilter:
    """Filtered marginals and the log likelihood (Rabiner eqs. 19-21, scaled).

    Cost: O(T N^2) time, O(T N) memory.

    Args:
        log_initial: ``(N,)`` log initial state probabilities.
        log_transition: ``(N, N)`` log transition probabilities, rows sum to one.
        log_likelihoods: ``(T, N)`` log p(x_t | q_t = i).
        mask: optional ``(T,)`` bool, False on padded steps.

    Returns:
        :class:`HMMFilter` with ``filtered`` ``(T, N)`` and ``log_likelihood`` ``()``.

    Raises:
        ValueError: on inconsistent shapes, NaN, or (for concrete inputs) initial or
            transition probabilities that do not sum to one.

    Examples:
        >>> import jax.numpy as jnp
        >>> f = forward_filter(jnp.log(jnp.array([0.5, 0.5])),
        ...                    jnp.log(jnp.array([[0.9, 0.1], [0.1, 0.9]])),
        ...                    jnp.zeros((4, 2)))
        >>> float(f.log_likelihood)
        0.0
    """
    _validate(log_initial, log_transition, log_likelihoods, mask)
    return _forward_filter_jit(log_initial, log_transition, log_likelihoods, mask)


def forward_backward(
    log_initial: Float[ArrayLike, " num_states"],
    log_transition: Float[ArrayLike, "num_states num_states"],
    log_likelihoods: Float[ArrayLike, "num_timesteps num_states"],
    *,
    mask: Bool[ArrayLike, " num_timesteps"] | None = None,
    per_time_xi: bool = False,
) -> HMMPosterior:
    """Smoothed and pairwise posterior marginals of an HMM (Rabiner eqs. 25-27).

    ``jax.vmap`` batches it (the value checks are skipped on traced inputs).

    Cost: O(T N^2) time; O(T N) memory, O(T N^2) with ``per_time_xi``.

    Args:
        log_initial: ``(N,)`` log initial state probabilities.
        log_transition: ``(N, N)`` log transition probabilities, rows sum to one;
            ``-inf`` (probability zero) entries are allowed.
        log_likelihoods: ``(T, N)`` log p(x_t | q_t = i).
        mask: optional ``(T,)`` bool, False on padded steps (see the module notes).
        per_time_xi: also return the ``(T - 1, N, N)`` per-time pairwise marginals.

    Returns:
        :class:`HMMPosterior`: ``gamma`` ``(T, N)``, ``xi`` ``(N, N)`` (zero for a
        length-1 sequence), ``log_likelihood`` ``()`` and ``xi_t``.

    Raises:
        ValueError: on inconsistent shapes, NaN, or (for concrete inputs) initial or
            transition probabilities that do not sum to one.

    Examples:
        >>> import jax.numpy as jnp
        >>> post = forward_backward(jnp.log(jnp.array([0.5, 0.5])),
        ...                         jnp.log(jnp.array([[0.9, 0.1], [0.1, 0.9]])),
        ...                         jnp.log(jnp.array([[0.9, 0.1], [0.9, 0.1]])))
        >>> post.gamma.shape, post.xi.shape, round(float(post.xi.sum()), 5)
        ((2, 2), (2, 2), 1.0)
    """
    _validate(log_initial, log_transition, log_likelihoods, mask)
    return _forward_backward_jit(
        log_initial, log_transition, log_likelihoods, mask, per_time_xi=per_time_xi
    )


def viterbi(
    log_initial: Float[ArrayLike, " num_states"],
    log_transition: Float[ArrayLike, "num_states num_states"],
    log_likelihoods: Float[ArrayLike, "num_timesteps num_states"],
    *,
    mask: Bool[ArrayLike, " num_timesteps"] | None = None,
) -> Int[Array, " num_timesteps"]:
    """Most probable state path (Rabiner eqs. 30-35, in log space).

    Cost: O(T N^2) time, O(T N) memory.

    Args:
        log_initial: ``(N,)`` log initial state probabilities.
        log_transition: ``(N, N)`` log transition probabilities.
        log_likelihoods: ``(T, N)`` log p(x_t | q_t = i).
        mask: optional ``(T,)`` bool, False on padded steps.

    Returns:
        ``(T,)`` int path; ``-1`` on masked steps.

    Raises:
        ValueError: as :func:`forward_backward`.

    Examples:
        >>> import jax.numpy as jnp
        >>> viterbi(jnp.log(jnp.array([0.5, 0.5])),
        ...         jnp.log(jnp.array([[0.9, 0.1], [0.1, 0.9]])),
        ...         jnp.log(jnp.array([[0.9, 0.1], [0.2, 0.8], [0.2, 0.8]]))).tolist()
        [0, 1, 1]
    """
    _validate(log_initial, log_transition, log_likelihoods, mask)
    return _viterbi_jit(log_initial, log_transition, log_likelihoods, mask)


