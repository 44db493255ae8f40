"""The posterior over kernel structures by exact enumeration of a bounded grammar.

For every structure ``S`` of the grammar (:mod:`.grammar`) the parameters'
posterior modes are found from several starts by L-BFGS on the log joint
(:mod:`.evidence`), polished by a Newton step, and the evidence is the sum of
the Laplace approximations at the distinct modes. Then::

    P(S | z) = P(S) p(z | S) / sum_S' P(S') p(z | S'),

normalised in log space (log-sum-exp), and the structure posterior's effective
sample size is ``1 / sum_S P(S | z)^2`` (1: one structure holds all the mass;
``num_structures``: all equal). The predictive is the mixture over
(structure, mode) components with weights ``P(S) p(z, mode | S)`` normalised
(:mod:`.predictive`).

Starts: the first puts every parameter at its prior mean and every period at the
largest peak of the data's periodogram; start ``k`` puts the periods at the
``k``-th peak and draws the other parameters from the prior shrunk to half its
spread (the key decides), so that the periodic likelihood's many modes in the
period are visited from the data's own frequencies.

Structures of more than two terms (``max_terms = 3``: 56 of the default
grammar's 93) are fitted size by size from warm starts: the best mode of each of
their ``num_warm_starts`` sub-structures (one term left out) of largest
evidence, the added term at its first start's values. Every structure is still
fitted and its evidence integrated, so the enumeration stays exact; the warm
starts bound the cost and find the modes that extend good smaller fits (a trend
added to a seasonal fit: Mauna Loa's ``LIN + PER + RQ``).

Precision: the fits (and the predictive's components) run in float64 whatever
the working precision, under ``jax.enable_x64`` (the policy of the inverse
model's spectra and the Twin GP's state). Long smooth series are
ill-conditioned: on Mauna Loa (n = 238, noise variance 1e-3 of the standardised
series) float32 fits ended with gradient norms of 25 to 5000, Hessians that were
not positive definite at most three-term structures (their evidence lost), and
the posterior on ``PER + RQ`` (CRPS 2.45 against AutoETS's 0.18); in float64 it
is on ``LIN + PER + RQ`` (CRPS 0.17). The working precision sets only the noise
floor (:func:`~.evidence.noise_floor`) and the dtype of the returned ``tau``
and ``z``.

Each structure is fitted in its own coordinates (:func:`active_layout`: the
constant, the noise and its terms' parameters, at most 10 for the default grammar
instead of the layout's 23), and its Gram matrix evaluates each stationary
formula once per distinct lag (:func:`~.evidence.structure_gram`).

Cost: ``num_small num_starts + num_large num_warm_starts`` fits (structures of
at most two terms and of more) of ``num_steps`` L-BFGS iterations, each
a few O(n^3) Cholesky factorisations, plus two O(d n^3) Hessians
(forward-over-reverse) per fit; O(batch_size n^2 num_terms) memory. All
structures share one compiled program (about 15 s of CPU to compile, once per
series length), run over the fits by ``lax.map``. Exact enumeration is the reason
for the bound: the default grammar has 93 structures and the fit is cubic in
``n``, so it serves series of a few hundred points (see ``docs/structure.md`` for
timings).
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax

from .._linalg import pad_to_multiple
from .evidence import (
    gp_log_marginal_likelihood,
    lag_table,
    laplace_log_evidence,
    natural_params,
    noise_floor,
    structure_gram,
)
from .grammar import Grammar
from .priors import DataScales, ParameterPrior

__all__ = [
    "active_layout",
    "StructurePosterior",
    "structure_posterior",
    "periodogram_peaks",
]


class StructurePosterior(NamedTuple):
    """The enumerated posterior over structures and its mixture components.

    Attributes:
        grammar: the structure space and parameter layout.
        scales: the maps between the user's units and the fit's.
        prior: the parameter prior (unconstrained scale).
        tau: ``(n,)`` training times in [0, 1] (the working precision; the fit
            used them in float64).
        z: ``(n,)`` standardised training outputs (likewise).
        log_evidence: ``(num_structures,)`` log p(z | S) (Laplace, summed over
            modes; standardised units).
        log_posterior: ``(num_structures,)`` log P(S | z), normalised.
        probabilities: ``(num_structures,)`` P(S | z).
        ess: ``1 / sum P(S | z)^2``.
        component_structure: ``(num_components,)`` structure index of each mode.
        component_u: ``(num_components, num_params)`` the modes.
        component_hessian: ``(num_components, num_params, num_params)`` negative
            Hessians of the log joint at the modes.
        component_log_weight: ``(num_components,)`` normalised log weights of the
            modes in the predictive mixture.
        start_u: ``(num_structures, num_starts, num_params)`` every start's end
            point.
        start_log_joint: ``(num_structures, num_starts)`` the log joint of the
            structure's own parameters there (the others integrated out).
        start_grad_norm: ``(num_structures, num_starts)`` the gradient's norm
            there (convergence diagnostic).
        floor: the noise-variance floor used (standardised units).
        transform: ``"none"`` or ``"log"``: the series the GP models, ``y`` or
            ``log y`` (:func:`~bayeskde.structure.fit_structure_gp` chooses it by
            evidence).
        transform_log_evidence: ``{transform: log p(y | transform)}`` in the
            user's units (the Jacobians of standardising and of the log
            included), for every transform that was fitted.
        transform_lfo: ``{transform: elpd_LFO}``, the leave-future-out log
            score of the end of the training series in the user's units
            (:func:`~bayeskde.structure.lfo_log_score`) for every transform
            that was fitted, or ``None`` where only one was.
        screen: where a long series was screened
            (:func:`~bayeskde.structure.screened_posterior`), ``{"points",
            "structures", "kept", "mass_kept"}``: the first pass's window, the
            grammar's and the kept structures' counts and the first pass's mass
            on those kept (``grammar`` then holds the kept ones); else ``None``.
    """

    grammar: Grammar
    scales: DataScales
    prior: ParameterPrior
    tau: jax.Array
    z: jax.Array
    log_evidence: np.ndarray
    log_posterior: np.ndarray
    probabilities: np.ndarray
    ess: float
    component_structure: np.ndarray
    component_u: np.ndarray
    component_hessian: np.ndarray
    component_log_weight: np.ndarray
    start_u: np.ndarray
    start_log_joint: np.ndarray
    start_grad_norm: np.ndarray
    floor: float
    transform: str = "none"
    transform_log_evidence: dict | None = None
    transform_lfo: dict | None = None
    screen: dict | None = None


def periodogram_peaks(tau: np.ndarray, z: np.ndarray, low: float, high: float,
                      num_peaks: int, num_grid: int = 400) -> np.ndarray:
    """The ``num_peaks`` periods in ``[low, high]`` with the largest local maxima
    of ``|sum_i r_i exp(-2 pi i tau_i / p)|^2``, ``r`` the residual of a linear
    fit (any spacing); strongest first, padded with the geometric midpoint of
    the range. O(n num_grid)."""
    tau = np.asarray(tau, np.float64)
    A = np.stack([np.ones_like(tau), tau], 1)
    r = np.asarray(z, np.float64) - A @ np.linalg.lstsq(A, z, rcond=None)[0]
    periods = np.exp(np.linspace(np.log(low), np.log(high), num_grid))
    phase = np.exp(-2j * np.pi * tau[None, :] / periods[:, None])
    power = np.abs(phase @ r) ** 2
    is_peak = np.r_[False, (power[1:-1] > power[:-2]) & (power[1:-1] >= power[2:]),
                    False]
    order = np.argsort(-power[is_peak])
    peaks = list(periods[is_peak][order][:num_peaks])
    peaks += [float(np.sqrt(low * high))] * (num_peaks - len(peaks))
    return np.array(peaks)


def _lbfgs(fun, u0, num_steps):
    """``num_steps`` iterations of optax's L-BFGS with a backtracking (Armijo)
    line search."""
    opt = optax.lbfgs(linesearch=optax.scale_by_backtracking_linesearch(
        max_backtracking_steps=20, store_grad=True))
    value_and_grad = optax.value_and_grad_from_state(fun)

    def _step(carry, _):
        u, state = carry
        value, grad = value_and_grad(u, state=state)
        updates, state = opt.update(grad, state, u, value=value, grad=grad,
                                    value_fn=fun)
        return (optax.apply_updates(u, updates), state), None

    (u, _), _ = jax.lax.scan(_step, (u0, opt.init(u0)), None, length=num_steps)
    return u


def _polish(fun, u, num_newton):
    """``num_newton`` Newton steps, each kept only if it lowers ``fun`` and the
    Hessian is positive definite, then the Hessian at the end point. One loop
    body, so the Hessian is compiled once."""

    def _body(k, carry):
        u, _ = carry
        g = jax.grad(fun)(u)
        H = jax.jacfwd(jax.grad(fun))(u)
        L = jnp.linalg.cholesky(0.5 * (H + H.T))
        new = u - jax.scipy.linalg.cho_solve((L, True), g)
        ok = (k < num_newton) & jnp.all(jnp.isfinite(new)) & (fun(new) <= fun(u))
        return jnp.where(ok, new, u), H

    p = u.shape[0]
    return jax.lax.fori_loop(0, num_newton + 1, _body,
                             (u, jnp.zeros((p, p), u.dtype)))


def active_layout(grammar: Grammar) -> np.ndarray:
    """``(num_structures, d_max)`` int: the indices in the parameter layout of each
    structure's parameters (the constant, the noise and its terms'), padded with
    ``num_params`` (a dummy slot) to the longest, ``d_max``.

    Each structure is fitted in these coordinates: the parameters of the terms it
    leaves out do not enter its likelihood and stay at their prior means (their
    Gaussian prior integrates to one exactly), and a dummy coordinate has a
    standard normal prior and no likelihood, so Laplace integrates it exactly too.
    """
    p = grammar.param_term.size
    rows = []
    for mask in grammar.masks:
        act = np.flatnonzero(np.concatenate([[True, True],
                                             mask[grammar.param_term[2:]] > 0]))
        rows.append(act)
    d_max = max(r.size for r in rows)
    return np.stack([np.concatenate([r, np.full(d_max - r.size, p)]) for r in rows])


def _active_log_joint(w, idx, mask, tau, z, lags, index, loc_ext, scale_ext, *,
                      terms, positive, floor):
    """The log joint in a structure's active coordinates ``w`` (``idx`` into
    the layout extended by one dummy slot): likelihood by :func:`structure_gram`
    (formulas once per distinct lag), normal priors on ``w``."""
    p = len(positive)
    u = loc_ext.at[idx].set(w)[:p]
    theta = natural_params(u, positive)
    K = structure_gram(terms, theta, mask, tau, lags, index)
    lml = gp_log_marginal_likelihood(K, theta[1] + floor, z)
    r = (w - loc_ext[idx]) / scale_ext[idx]
    return lml + jnp.sum(-0.5 * r * r - jnp.log(scale_ext[idx])
                         - 0.5 * jnp.log(2.0 * jnp.pi))


@functools.partial(jax.jit, static_argnames=("terms", "positive", "floor",
                                             "num_steps", "batch_size"))
def _fit_starts(w0, idx, masks, tau, z, lags, index, loc_ext, scale_ext, *, terms,
                positive, floor, num_steps, batch_size):
    """Modes, log joints, gradient norms, Hessians and Laplace evidences for every
    (structure, start) in active coordinates: ``w0`` is ``(num_fits, d_max)``,
    ``idx`` ``(num_fits, d_max)``, ``masks`` ``(num_fits, num_terms)``."""

    def _one(args):
        start, ix, mask = args

        def neg(w):
            return -_active_log_joint(w, ix, mask, tau, z, lags, index, loc_ext,
                                      scale_ext, terms=terms, positive=positive,
                                      floor=floor)

        w = _lbfgs(neg, start, num_steps)
        w, H = _polish(neg, w, 1)
        value, grad = jax.value_and_grad(neg)(w)
        p = len(positive)
        u = loc_ext.at[ix].set(w)[:p]
        # the dummy coordinates' standard normal log density, which Laplace
        # integrates to one, is left out of the reported log joint
        dummy = jnp.sum(jnp.where(ix == p, -0.5 * w * w - 0.5 * jnp.log(2 * jnp.pi),
                                  0.0))
        return (u, -value - dummy, jnp.linalg.norm(grad), H,
                laplace_log_evidence(-value, H))

    return jax.lax.map(_one, (w0, idx, masks), batch_size=batch_size)


def _starts(key, grammar, prior, tau, z, num_starts):
    """``(num_structures, num_starts, p)`` starting points (module docstring)."""
    loc, scale = prior.loc, prior.scale
    roles = np.array(grammar.param_roles)
    period = roles == "period"
    lo = float(np.exp(loc[period][0] - 2 * scale[period][0])) if period.any() else 0
    hi = float(np.exp(loc[period][0] + 2 * scale[period][0])) if period.any() else 0
    peaks = (periodogram_peaks(np.asarray(tau), np.asarray(z), lo, min(hi, 0.5),
                               num_starts) if period.any() else None)
    noise = np.asarray(jax.random.normal(key, (len(grammar.masks), num_starts,
                                               loc.size)), np.float64)
    u0 = loc + 0.5 * scale * noise
    u0[:, 0, :] = loc
    active = np.concatenate([np.ones((len(grammar.masks), 2), bool),
                             grammar.masks[:, grammar.param_term[2:]] > 0], 1)
    u0 = np.where(active[:, None, :], u0, loc)
    if peaks is not None:
        u0[:, :, period] = np.log(peaks)[None, :, None]
    return u0


def _full_hessians(Hw, idx, prior_scale):
    """Embed the active-coordinate Hessians ``(num_fits, d_max, d_max)`` in the
    full layout: the inactive parameters' block is their prior's,
    ``diag(1 / scale^2)``."""
    p = prior_scale.size
    H = np.tile(np.diag(1.0 / prior_scale ** 2), (Hw.shape[0], 1, 1))
    for f in range(Hw.shape[0]):
        real = idx[f] < p
        act = idx[f][real]
        H[f][np.ix_(act, act)] = Hw[f][np.ix_(real, real)]
    return H


def _distinct_modes(u, value, H, logz, active):
    """Indices of the distinct maxima among one structure's starts: a start is a
    duplicate when it lies within one posterior standard deviation (per active
    coordinate, from its Hessian's diagonal) of a better one."""
    keep = []
    for i in np.argsort(-value):
        if not np.isfinite(logz[i]):
            continue
        sd = 1.0 / np.sqrt(np.maximum(np.diag(H[i])[active], 1e-300))
        if all(np.max(np.abs(u[i, active] - u[j, active]) / sd) > 1.0 for j in keep):
            keep.append(i)
    return keep


def _parents(grammar: Grammar, s: int) -> np.ndarray:
    """Indices of the structures with one term of structure ``s`` left out."""
    mask = grammar.masks[s]
    rows = []
    for j in np.flatnonzero(mask):
        sub = mask.copy()
        sub[j] = 0
        rows.append(int(np.flatnonzero((grammar.masks == sub).all(1))[0]))
    return np.array(rows)


def structure_posterior(
    key: jax.Array, tau, z, grammar: Grammar, prior: ParameterPrior,
    scales: DataScales, *, num_starts: int = 4, num_steps: int = 100,
    batch_size: int = 1, num_warm_starts: int = 2, cold_terms: int = 2,
    init: np.ndarray | None = None,
) -> StructurePosterior:
    """P(S | z) over every structure of ``grammar`` (module docstring).

    Structures of at most ``cold_terms`` terms are fitted from ``num_starts``
    starts each (:func:`_starts`). Larger ones are fitted size by size from
    ``num_warm_starts`` warm starts: the best mode of each of the
    ``num_warm_starts`` sub-structures with one term left out of largest
    evidence, the added term's parameters at their first start's values (prior
    means, periods at the periodogram's peak). Every structure of the grammar is
    still fitted and its evidence integrated (the enumeration stays exact); the
    warm starts only bound the cost of the three-term structures, whose
    likelihoods have the most modes, and find the modes that extend the good
    smaller fits (a trend added to a seasonal fit).

    Args:
        key: a ``jax.random`` key (the random starts).
        tau: ``(n,)`` times mapped to [0, 1] (:func:`~.priors.data_scales`).
        z: ``(n,)`` standardised outputs.
        grammar: from :func:`~bayeskde.structure.make_grammar`.
        prior: from :func:`~bayeskde.structure.parameter_prior`.
        scales: from :func:`~bayeskde.structure.data_scales`.
        num_starts: optimiser starts per structure of at most ``cold_terms``
            terms.
        num_steps: L-BFGS iterations per start.
        batch_size: fits vmapped together (memory ``batch_size n^2``). 1, the
            default, is the fastest on CPU: a vmapped batch runs every line
            search as long as its slowest member's (measured 6.6 s against 24 s
            of CPU for 87 fits at n = 65).
        num_warm_starts: warm starts per structure of more than ``cold_terms``
            terms (at most its number of terms are used).
        cold_terms: the largest structure fitted from cold starts.
        init: ``(num_structures, num_init, num_params)`` starting points that
            replace the cold and warm starts (every structure fitted from
            these, in one stage; :mod:`~bayeskde.structure.screen` passes a
            first pass's modes), or ``None``.

    Returns:
        A :class:`StructurePosterior`; its ``start_*`` arrays hold
        ``max(num_starts, num_warm_starts)`` slots per structure, unused slots
        ``nan`` / ``-inf``.

    Raises:
        ValueError: every structure's evidence is non-finite.
    """
    # the fits run in float64 whatever the working precision (module docstring)
    tau = np.asarray(tau, np.float64)
    z = np.asarray(z, np.float64)
    dtype = jnp.result_type(float)
    num_structures, num_terms = grammar.masks.shape
    p = prior.loc.size
    if init is None:
        u0 = _starts(key, grammar, prior, tau, z, num_starts)
    else:
        u0 = np.asarray(init, np.float64)
        if u0.shape[0] != num_structures or u0.shape[2] != p:
            raise ValueError(f"init must have shape ({num_structures}, k, {p}), "
                             f"got {u0.shape}")
        num_starts = u0.shape[1]
        cold_terms = int(grammar.masks.sum(1).max())
    layout = active_layout(grammar)
    loc_ext = np.append(prior.loc, 0.0)
    floor = noise_floor(tau.shape[0], dtype)
    table = lag_table(tau)
    static = {"terms": grammar.terms,
              "positive": tuple(bool(b) for b in grammar.param_positive),
              "floor": floor, "num_steps": num_steps, "batch_size": batch_size}
    # every call takes `chunk` fits: one compiled program serves every stage
    chunk = batch_size * -(-8 // batch_size)
    slots = max(num_starts, num_warm_starts)
    u = np.full((num_structures, slots, p), np.nan)
    value = np.full((num_structures, slots), -np.inf)
    gnorm = np.full((num_structures, slots), np.nan)
    H = np.full((num_structures, slots, p, p), np.nan)
    logz = np.full((num_structures, slots), -np.inf)
    log_evidence = np.full(num_structures, -np.inf)
    keeps: dict[int, list[int]] = {}
    sizes = grammar.masks.sum(1)

    def _stage(structs, starts):
        """Fit every ``(structure, slot, start)`` of one stage, then each
        structure's distinct modes and evidence."""
        fs = np.array([f[0] for f in starts])
        idx = layout[fs]
        w0 = np.take_along_axis(np.concatenate(
            [np.stack([f[2] for f in starts]), np.zeros((fs.size, 1))], 1), idx, 1)
        masks = grammar.masks[fs]
        padded = [pad_to_multiple(a, chunk)[0] for a in (w0, idx, masks)]
        with jax.enable_x64(True):
            consts = (jnp.asarray(tau), jnp.asarray(z), jnp.asarray(table.lags),
                      jnp.asarray(table.index), jnp.asarray(loc_ext),
                      jnp.asarray(np.append(prior.scale, 1.0)))
            outs = [[np.asarray(o) for o in _fit_starts(
                jnp.asarray(padded[0][a:a + chunk], jnp.float64),
                jnp.asarray(padded[1][a:a + chunk]),
                jnp.asarray(padded[2][a:a + chunk], jnp.float64), *consts,
                **static)] for a in range(0, padded[0].shape[0], chunk)]
        uu, vv, gg, hh, ll = (np.concatenate([np.asarray(o[k], np.float64)
                                              for o in outs])[:fs.size]
                              for k in range(5))
        hh = _full_hessians(hh, idx, prior.scale)
        for f, (s, i, _) in enumerate(starts):
            u[s, i], value[s, i], gnorm[s, i], H[s, i] = uu[f], vv[f], gg[f], hh[f]
            ok = np.isfinite(ll[f]) and np.isfinite(vv[f])
            logz[s, i] = ll[f] if ok else -np.inf
        for s in structs:
            active = np.concatenate([[True, True],
                                     grammar.masks[s, grammar.param_term[2:]] > 0])
            keeps[s] = _distinct_modes(u[s], value[s], H[s], logz[s], active)
            if keeps[s]:
                log_evidence[s] = np.logaddexp.reduce(logz[s, keeps[s]])

    cold = np.flatnonzero(sizes <= cold_terms)
    _stage(cold, [(s, i, u0[s, i]) for s in cold for i in range(num_starts)])
    for size in range(cold_terms + 1, int(sizes.max()) + 1):
        structs = np.flatnonzero(sizes == size)
        starts = []
        for s in structs:
            parents = _parents(grammar, int(s))
            parents = parents[np.argsort(-log_evidence[parents],
                                         kind="stable")][:num_warm_starts]
            for i, q in enumerate(parents):
                if not np.isfinite(log_evidence[q]):
                    continue
                best = u[q, int(np.argmax(np.where(np.isfinite(value[q]), value[q],
                                                       -np.inf)))]
                own = np.concatenate([[False, False],
                                      grammar.masks[q, grammar.param_term[2:]] > 0])
                own[:2] = True
                starts.append((s, i, np.where(own, best, u0[s, 0])))
        if starts:
            _stage(structs, starts)
    comp_s = [s for s in range(num_structures) for _ in keeps.get(s, [])]
    comp_i = [i for s in range(num_structures) for i in keeps.get(s, [])]
    if not comp_s:
        raise ValueError("no structure has a finite evidence on this data; check "
                         "t and y (constant, or scaled beyond the working dtype?)")
    log_joint_s = grammar.log_prior + log_evidence
    log_post = log_joint_s - np.logaddexp.reduce(log_joint_s)
    probs = np.exp(log_post)
    comp_s = np.array(comp_s)
    comp_i = np.array(comp_i)
    comp_logw = grammar.log_prior[comp_s] + logz[comp_s, comp_i]
    comp_logw = comp_logw - np.logaddexp.reduce(comp_logw)
    return StructurePosterior(
        grammar, scales, prior, jnp.asarray(tau, dtype), jnp.asarray(z, dtype),
        log_evidence, log_post, probs,
        float(1.0 / np.sum(probs ** 2)), comp_s, u[comp_s, comp_i],
        H[comp_s, comp_i], comp_logw, u, value, gnorm, floor)
