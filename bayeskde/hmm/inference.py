"""Exact inference in a discrete-state HMM: forward filter, forward-backward, Viterbi.

All functions take the model as arrays, never an emission model: ``log_initial``
``(N,)``, ``log_transition`` ``(N, N)`` (row ``i`` is
``log P(q_{t+1} = . | q_t = i)``) and ``log_likelihoods`` ``(T, N)`` with
``log_likelihoods[t, i] = log p(x_t | q_t = i)``.
Each is a pure, jit-compiled function of one sequence that ``jax.vmap`` batches.

Recursion. Forward-backward uses Rabiner's (1989) scaled recursions in probability
space, one ``(N,) @ (N, N)`` product per step, instead of log-sum-exp over an
``N x N`` matrix per step: ``bench/hmm.py --recursions`` measures both, and the scaled
form is faster on CPU (``bench/README.md``). Choices of the implementation, each
measured by ``bench/hmm.py``: the emission likelihoods are computed inside the
forward step rather than materialised as a ``(T, N, B)`` array; the log likelihood
and the summed ``xi`` are accumulated in the scan carries (summing
``outer(alpha_t, r_{t+1})`` afterwards with an einsum over stored messages was
1.8x slower overall); the
one-step predictions are recomputed in the backward pass instead of stored;
batches are time-major with the batch axis last, gamma is emitted per step with
the state axis last; no unrolling (``unroll=2, 4`` measured slower). A
sequential scan, not ``lax.associative_scan`` (not measured): its combine costs
O(N^3) per step instead of O(N^2), N times the work, which pays only where the
batch is too small to fill the hardware. To keep the dynamic range of log
space:

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

import functools

import jax
import jax.numpy as jnp
import numpy as np
from jax import custom_batching, lax
from jaxtyping import Array, Bool, Float, Int

from .._typing import ArrayLike, float_dtype
from .recursions import (
    HMMFilter,
    HMMPosterior,
    backward_scan,
    emit_log_likelihoods,
    forward_backward_pass,
    forward_filter_batch,
    forward_filter_pass,
    forward_scan,
    max_argmax,
    pointer_dtype,
    prepare,
    summed_xi,
    viterbi_pass,
)

__all__ = [
    "HMMPosterior",
    "HMMFilter",
    "forward_filter",
    "forward_backward",
    "viterbi",
]


def _viterbi_batch(log_initial, log_transition, log_likelihoods, mask):
    """:func:`viterbi_pass` of a batch ``log_likelihoods`` ``(B, T, N)``, ``mask``
    ``(B, T)``: ``(B, T)`` paths.

    The scores are laid out ``(B, N_to, N_from)`` so that the max and argmax
    reduce over the minor axis (over a leading axis XLA's CPU argmax was 2x
    slower).
    """
    num_states = log_initial.shape[0]
    batch = mask.shape[0]
    log_transition_t = log_transition.T  # [to, from]

    small = pointer_dtype(num_states)

    def _step(carry, x):
        pred, last = carry  # pred: best log score entering this step, (B, N)
        ll, m = x
        delta = pred + ll
        scores = delta[:, None, :] + log_transition_t[None]  # (B, N_to, N_from)
        best, pointer = max_argmax(scores)
        carry = (jnp.where(m[:, None], best, pred),
                 jnp.where(m[:, None], delta, last))
        return carry, pointer.astype(small)

    init = (jnp.broadcast_to(log_initial[None], (batch, num_states)),
            jnp.full((batch, num_states), -jnp.inf, log_initial.dtype))
    xs = (jnp.moveaxis(log_likelihoods, 1, 0), mask.T)
    (_, last), pointers = lax.scan(_step, init, xs)
    # pointers[t] maps a state at the next observed step to its best
    # predecessor at step t; the last observed step takes argmax(last).
    rows = jnp.arange(batch)

    def _back(carry, x):
        state, started = carry  # state: at the next observed step
        pointer, m = x
        here = jnp.where(started, pointer[rows, state].astype(state.dtype), state)
        return ((jnp.where(m, here, state), started | m),
                jnp.where(m, here, -1))

    init = (jnp.argmax(last, axis=-1), jnp.zeros((batch,), bool))
    _, path = lax.scan(_back, init, (pointers, mask.T), reverse=True)
    return path.T


def time_major(log_likelihoods, mask):
    """``(B, T, N)``, ``(B, T)`` -> ``(T, N, B)``, ``(T, B)``."""
    return jnp.moveaxis(log_likelihoods, 0, -1), mask.T


def _fused(single, batched):
    """``single(log_initial, log_transition, log_likelihoods, mask)`` whose
    ``jax.vmap`` over sequences (shared parameters) runs ``batched`` on the
    time-major batch, one ``(N, N) @ (N, B)`` product per step, instead of the
    generic batching of ``single`` (1.2-1.4x faster for forward-backward at
    1,000 x 200 x 8; ``bench/hmm.py --vmapped``). A vmap over the parameters too
    falls back to the generic rule. Differentiation goes through ``single``
    (``custom_vmap`` has no differentiation rule of its own).
    """

    @custom_batching.custom_vmap
    def fused(log_initial, log_transition, log_likelihoods, mask):
        return single(log_initial, log_transition, log_likelihoods, mask)

    @fused.def_vmap
    def _rule(axis_size, in_batched, log_initial, log_transition, log_likelihoods,
              mask):
        b_init, b_trans, b_ll, b_mask = in_batched
        args = (log_initial, log_transition, log_likelihoods, mask)
        if b_init or b_trans:
            axes = tuple(0 if b else None for b in in_batched)
            out = jax.vmap(single, in_axes=axes)(*args)
        else:
            if not b_ll:
                log_likelihoods = jnp.broadcast_to(
                    log_likelihoods, (axis_size, *log_likelihoods.shape))
            if not b_mask:
                mask = jnp.broadcast_to(mask, (axis_size, *mask.shape))
            out = batched(log_initial, log_transition, log_likelihoods, mask)
        return out, jax.tree.map(lambda _: True, out)

    @jax.custom_jvp
    def fn(log_initial, log_transition, log_likelihoods, mask):
        return fused(log_initial, log_transition, log_likelihoods, mask)

    @fn.defjvp
    def _jvp(primals, tangents):
        return jax.jvp(single, primals, tangents)

    return fn


def _with_mask(fn):
    def call(log_initial, log_transition, log_likelihoods, mask):
        args = prepare(log_initial, log_transition, log_likelihoods, mask)
        return fn(*args)
    return call


def _forward_backward_batched(log_initial, log_transition, log_likelihoods, mask):
    initial, transition = jnp.exp(log_initial), jnp.exp(log_transition)
    xs, m = time_major(log_likelihoods, mask)
    alphas, log_lik = forward_scan(initial, transition, emit_log_likelihoods, xs, m)
    gamma, acc = backward_scan(initial, transition, alphas, m, "each")
    xi = summed_xi(transition[:, :, None], acc)
    return HMMPosterior(jnp.moveaxis(gamma, 1, 0), jnp.moveaxis(xi, -1, 0), log_lik)


def _fb_single(log_initial, log_transition, log_likelihoods, mask):
    return forward_backward_pass(log_initial, log_transition, log_likelihoods, mask,
                             False)


_fb_fused = _fused(_fb_single, _forward_backward_batched)
_ff_fused = _fused(forward_filter_pass, forward_filter_batch)
_vit_fused = _fused(viterbi_pass, _viterbi_batch)


@functools.partial(jax.jit, static_argnames="per_time_xi")
def _forward_backward_jit(log_initial, log_transition, log_likelihoods, mask,
                          per_time_xi):
    args = prepare(log_initial, log_transition, log_likelihoods, mask)
    if per_time_xi:
        return forward_backward_pass(*args, True)
    return _fb_fused(*args)


_forward_filter_jit = jax.jit(_with_mask(_ff_fused))
_viterbi_jit = jax.jit(_with_mask(_vit_fused))


def _is_concrete(*arrays) -> bool:
    return not any(isinstance(a, jax.core.Tracer) for a in arrays)


def validate(log_initial, log_transition, log_likelihoods, mask):
    """Type and shape checks always; value checks only on concrete (untraced)
    inputs."""
    for name, arr in (("log_initial", log_initial), ("log_transition", log_transition),
                      ("log_likelihoods", log_likelihoods), ("mask", mask)):
        if arr is None and name == "mask":
            continue
        dtype = getattr(arr, "dtype", None)
        if dtype is None:
            try:
                dtype = np.asarray(arr).dtype
            except (TypeError, ValueError) as err:  # ragged lists and the like
                raise TypeError(
                    f"{name} must be an array of numbers, got {type(arr).__name__}"
                ) from err
        kinds = "biu" if name == "mask" else "biuf"
        if np.dtype(dtype).kind not in kinds:
            what = "booleans" if name == "mask" else "real numbers"
            raise TypeError(
                f"{name} must be an array of {what}, got dtype {np.dtype(dtype)}")
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
    dtype = np.dtype(float_dtype())
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
    # Finite in the input's dtype is not enough: the computation runs in the
    # working dtype, where 1e300 is +inf.
    top = float(np.max(ll)) if ll.size else 0.0
    if top > float(np.finfo(dtype).max):
        raise ValueError(
            f"log_likelihoods overflows {dtype.name}: its largest value is {top:.3g}")


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
    validate(log_initial, log_transition, log_likelihoods, mask)
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
    validate(log_initial, log_transition, log_likelihoods, mask)
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
    validate(log_initial, log_transition, log_likelihoods, mask)
    return _viterbi_jit(log_initial, log_transition, log_likelihoods, mask)


