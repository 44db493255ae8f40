"""Sequential Monte Carlo draws of the inverse model's predictive
p(y* | x*, D) proportional to p(x* | y*, D) p(y*), with its normaliser.

Likelihood tempering (Chopin 2002; Del Moral, Doucet and Jasra 2006, sec.
3.3.2): N particles per test input start as draws of the output prior p(y)
and move through the bridge

    pi_t(y) proportional to p(x* | y, D)^beta_t p(y),  0 = beta_0 < ... < beta_T = 1.

Each stage (i) picks beta_{t+1} by bisection so that the effective sample
size of the incremental weights w_i = p(x* | y_i, D)^(beta_{t+1} - beta_t)
is ``target_ess`` N (Jasra et al. 2011's adaptive rule), (ii) adds log mean w
to the running log evidence, (iii) resamples systematically (Kitagawa 1996)
and (iv) moves every particle by ``num_moves`` random-walk Metropolis steps
on pi_{t+1} in the unconstrained coordinates z of the prior's support
(:func:`~.output_prior.support_transform`, its log-Jacobian added), the
proposal N(z, s^2 Sigma) with Sigma the particles' covariance and s
starting at 2.38 / sqrt(d_y) (Roberts and Rosenthal 2001), multiplied by
exp(acceptance - 0.234) a stage. The weights carry the modes' relative
masses from stage to stage, which a chain cannot: where NUTS's chains sit in
the modes they started in (sbibm's slcp: four sign-symmetric modes, R-hat
14), each mode keeps the share its tempered mass gives it.

Because p(y) is normalised, the product of the stages' mean incremental
weights is an unbiased estimate of p(x* | D) = int p(x* | y, D) p(y) dy
(Del Moral et al. 2006, sec. 3.2.1): its log is ``log_evidence``, the
normaliser of the predictive's density.

After the last stage the particles are the draws; where more draws than
particles are asked for, further sweeps of ``num_moves`` moves on the target
add ``num_particles`` draws each. The likelihood is the predictive's own
(:func:`~.evaluators.dense_log_likelihood`, blocked so that a program holds
at most :data:`~.mixture.BLOCK_NUMBERS` numbers of the pairs' projections).
"""

from __future__ import annotations

import functools
import math
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax.scipy.special import logsumexp

from .._validation import check_integer, check_key, check_nonnegative
from .evaluators import (
    SPECTRUM_TOL,
    dense_log_likelihood,
    dense_terms,
    prune,
    truncate_spectrum,
)
from .mixture import BLOCK_NUMBERS, fit_mixture
from .output_prior import (
    log_prior,
    resolve_output_prior,
    sample_prior,
    support_transform,
)
from .predictive import InverseGPPredictive, check_fit, model_inputs

__all__ = ["SMCReport", "SMC_BLOCK", "TARGET_ACCEPT", "MOVE_CAP", "inverse_gp_smc"]

#: Most particles per likelihood program (fewer where the pairs' projections
#: of a block would pass :data:`~.mixture.BLOCK_NUMBERS`).
SMC_BLOCK = 1024
#: The random-walk acceptance rate the proposal's scale is steered to
#: (Roberts, Gelman and Gilks 1997).
TARGET_ACCEPT = 0.234
#: Most Metropolis steps a stage takes, as a multiple of ``num_moves``.
MOVE_CAP = 4
#: Bisection steps for the next temperature (resolution 2^-40 of what is left).
_BISECT = 40


class SMCReport(NamedTuple):
    """Diagnostics of :func:`inverse_gp_smc`, per test input.

    ``num_stages`` ``(n_test,)`` tempering stages to beta = 1; ``betas``,
    ``ess`` and ``acceptance`` ``(n_test, max_stages)``: each stage's
    temperature, its incremental weights' effective sample size as a
    fraction of the particles, and the mean Metropolis acceptance of its
    moves (NaN past the last stage); ``moves`` ``(stages,)`` the Metropolis
    steps each stage took (shared by the test inputs); ``log_evidence``
    ``(n_test,)`` the tempering path's estimate of log p(x* | D) (the
    predictive density's log normaliser); ``log_evidence_se`` ``(n_test,)``
    its standard error from the stages' incremental weights (the delta
    method, stages taken as independent: a guide, not a bound);
    ``distinct`` ``(n_test,)`` distinct draws; ``num_particles``,
    ``num_moves`` the settings; ``reached`` whether every test input reached
    beta = 1 within ``max_stages`` (else its last stage jumped there and its
    ESS says how far to trust it).
    """

    num_stages: np.ndarray
    betas: np.ndarray
    ess: np.ndarray
    acceptance: np.ndarray
    moves: np.ndarray
    log_evidence: np.ndarray
    log_evidence_se: np.ndarray
    distinct: np.ndarray
    num_particles: int
    num_moves: int
    reached: bool


def _block(mix, N):
    """Particles per likelihood program: at most :data:`SMC_BLOCK` and N,
    halved while the block's projections and component means, block x (P r
    + C d_x) numbers, would pass BLOCK_NUMBERS."""
    P, r = mix.lam.shape
    width = P * r + mix.log_w.shape[0] * mix.proj.shape[2]
    b = SMC_BLOCK
    while b > 16 and b * width > BLOCK_NUMBERS:
        b //= 2
    return min(b, N)


def _next_delta(ll, left, target):
    """The temperature increment in (0, left] whose incremental weights
    exp(delta ll) have ESS = target N (bisection; ``left`` where even that
    keeps the ESS above target). ``ll`` ``(N,)`` with -inf allowed."""
    N = ll.shape[0]

    def ess(delta):
        lw = jnp.where(jnp.isfinite(ll), delta * ll, -jnp.inf)
        return jnp.exp(2 * logsumexp(lw) - logsumexp(2 * lw)) / N

    def step(i, lohi):
        lo, hi = lohi
        mid = 0.5 * (lo + hi)
        ok = ess(mid) >= target
        return jnp.where(ok, mid, lo), jnp.where(ok, hi, mid)

    lo, hi = jax.lax.fori_loop(0, _BISECT, step, (jnp.zeros_like(left), left))
    delta = jnp.where(ess(left) >= target, left, lo)
    # all but nothing moves: at least the bisection's resolution, no stall
    return jnp.maximum(delta, jnp.minimum(left, left * 2.0**-_BISECT))


def _systematic(key, log_w):
    """Systematic resampling (Kitagawa 1996): ``(N,)`` indices."""
    N = log_w.shape[0]
    w = jnp.exp(log_w - logsumexp(log_w))
    cdf = jnp.cumsum(w)
    u = (jnp.arange(N, dtype=w.dtype) + jax.random.uniform(key, (), w.dtype)) / N
    return jnp.minimum(jnp.searchsorted(cdf, u * cdf[-1]), N - 1)


@functools.partial(jax.jit, static_argnames=(
    "kind", "num_particles", "num_moves", "max_stages", "num_sweeps", "block"))
def _run_smc(mix, terms, params, xs, key, test_noise, target_ess, *, kind,
             num_particles, num_moves, max_stages, num_sweeps, block):
    """All test inputs' particle systems in one program (module docstring).
    One module-level jit, the prior's parameters a pytree argument: a
    repeated call of the same shapes and settings does not recompile."""
    n, N = xs.shape[0], num_particles
    d = mix.Y.shape[1]
    dt = mix.lam.dtype
    transform = support_transform(kind, params, d)
    n_blk = -(-N // block)
    pad = n_blk * block - N

    def log_lik(z):  # (n, N, d) -> (n, N)
        y = jax.vmap(jax.vmap(transform))(z)
        if pad:
            y = jnp.concatenate([y, jnp.repeat(y[:, -1:], pad, axis=1)], 1)
        yb = y.reshape(n * n_blk, block, d)
        xb = jnp.repeat(xs, n_blk, axis=0)
        ll = jax.lax.map(lambda a: dense_log_likelihood(
            mix, terms, a[0][None], a[1][None], test_noise)[0], (yb, xb))
        ll = ll.reshape(n, n_blk * block)[:, :N]
        return jnp.where(jnp.isnan(ll), -jnp.inf, ll)

    def log_base(z):  # log p(y) + log |dy/dz|, (n, N)
        def one(zz):
            y = transform(zz)
            return (log_prior(kind, params, y[None])[0]
                    + jnp.sum(transform.log_abs_det_jacobian(zz, y)))
        lb = jax.vmap(jax.vmap(one))(z)
        return jnp.where(jnp.isnan(lb), -jnp.inf, lb)

    def tempered(ll, lb, beta):  # beta ll + lb, the likelihood off at beta 0
        b = beta[:, None]
        return jnp.where(b > 0, b * ll, 0.0) + lb

    def moves(key, z, ll, lb, beta, scale):
        """Random-walk Metropolis steps on beta ll + lb, the proposal
        covariance the particles' (per test input) times scale^2, the scale
        multiplied by exp(acceptance - 0.234) after each step: at least
        ``num_moves`` steps, more (up to MOVE_CAP num_moves) until the
        particles have made num_moves x 0.234 accepted moves each on
        average (every test input), so that a low acceptance buys more
        steps instead of leaving duplicates."""
        zc = z - jnp.mean(z, axis=1, keepdims=True)
        cov = jnp.einsum("nid,nie->nde", zc, zc) / N
        jit_ = 1e-6 * jnp.mean(jnp.diagonal(cov, axis1=1, axis2=2), -1) + 1e-12
        eye = jnp.eye(d, dtype=dt)[None]
        chol = jnp.linalg.cholesky(cov + jit_[:, None, None] * eye)
        chol = jnp.where(jnp.isfinite(chol), chol, 0.0)
        need = num_moves * TARGET_ACCEPT

        def _cond(c):
            k, acc = c[0], c[-2]
            return (k < num_moves) | ((k < MOVE_CAP * num_moves)
                                      & jnp.any(acc < need))

        def _step(c):
            k, z, ll, lb, scale, acc, key = c
            key, k1, k2 = jax.random.split(key, 3)
            eps = jax.random.normal(k1, z.shape, dt)
            zp = z + scale[:, None, None] * jnp.einsum("nde,nie->nid", chol, eps)
            llp, lbp = log_lik(zp), log_base(zp)
            new, old = tempered(llp, lbp, beta), tempered(ll, lb, beta)
            # a proposal of zero target density (-inf) is refused; one from
            # such a state is taken
            log_a = jnp.where(jnp.isfinite(old), new - old, jnp.inf)
            u = jax.random.uniform(k2, ll.shape, dt)
            take = jnp.isfinite(new) & (jnp.log(u) < log_a)
            z = jnp.where(take[..., None], zp, z)
            ll, lb = jnp.where(take, llp, ll), jnp.where(take, lbp, lb)
            rate = jnp.mean(take.astype(dt), 1)
            scale = scale * jnp.exp(rate - TARGET_ACCEPT)
            return k + 1, z, ll, lb, scale, acc + rate, key

        k, z, ll, lb, scale, acc, _ = jax.lax.while_loop(
            _cond, _step, (jnp.asarray(0), z, ll, lb, scale, jnp.zeros(n, dt), key))
        return z, ll, lb, scale, acc / k, k

    k0, k_loop, k_sweep = jax.random.split(key, 3)
    y0 = sample_prior(kind, params, k0, n * N, d, dt)
    z0 = jax.vmap(transform.inv)(y0).reshape(n, N, d)
    z0 = jnp.where(jnp.isfinite(z0), z0, 0.0)
    ll0, lb0 = log_lik(z0), log_base(z0)
    nan_rec = jnp.full((max_stages, n), jnp.nan, dt)
    scale0 = jnp.full((n,), 2.38 / math.sqrt(d), dt)

    def cond(c):
        return (c["t"] < max_stages) & jnp.any(c["beta"] < 1)

    def body(c):
        t, beta = c["t"], c["beta"]
        live = beta < 1
        left = 1.0 - beta
        last = t == max_stages - 1
        delta = jax.vmap(_next_delta, (0, 0, None))(c["ll"], left, target_ess)
        delta = jnp.where(last, left, delta)
        delta = jnp.where(live, delta, 0.0)
        lw = jnp.where(jnp.isfinite(c["ll"]), delta[:, None] * c["ll"], -jnp.inf)
        lw = jnp.where(live[:, None], lw, 0.0)
        lse = logsumexp(lw, axis=1)
        inc = lse - math.log(N)
        ess = jnp.exp(2 * lse - logsumexp(2 * lw, axis=1)) / N
        # the incremental mean's relative variance (delta method) for the se
        rel_var = (jnp.exp(logsumexp(2 * lw, axis=1) - 2 * lse) * N - 1.0) / N
        k_res, k_mv = jax.random.split(jax.random.fold_in(k_loop, t))
        idx = jax.vmap(_systematic)(jax.random.split(k_res, n), lw)

        def take(a):
            return jnp.take_along_axis(a, idx, axis=1)

        z = jnp.take_along_axis(c["z"], idx[..., None], axis=1)
        beta = jnp.where(live, jnp.where(delta >= left, 1.0, beta + delta), beta)
        z, ll, lb, scale, acc, k = moves(k_mv, z, take(c["ll"]), take(c["lb"]),
                                         beta, c["scale"])

        def rec(r, v):
            return r.at[t].set(jnp.where(live, v, jnp.nan))

        return dict(
            t=t + 1, beta=beta, z=z, ll=ll, lb=lb, scale=scale,
            log_z=c["log_z"] + jnp.where(live, inc, 0.0),
            var_z=c["var_z"] + jnp.where(live, rel_var, 0.0),
            stages=c["stages"] + live.astype(jnp.int32),
            betas=rec(c["betas"], beta), ess=rec(c["ess"], ess),
            acc=rec(c["acc"], acc), moves=c["moves"].at[t].set(k))

    c = dict(t=jnp.asarray(0), beta=jnp.zeros(n, dt), z=z0, ll=ll0, lb=lb0,
             scale=scale0, log_z=jnp.zeros(n, dt), var_z=jnp.zeros(n, dt),
             stages=jnp.zeros(n, jnp.int32), betas=nan_rec, ess=nan_rec,
             acc=nan_rec, moves=jnp.zeros(max_stages, jnp.int32))
    c = jax.lax.while_loop(cond, body, c)
    ones = jnp.ones(n, dt)

    def sweep(carry, k):
        z, ll, lb = carry
        z, ll, lb, _, _, _ = moves(k, z, ll, lb, ones, c["scale"])
        return (z, ll, lb), jax.vmap(jax.vmap(transform))(z)

    first = jax.vmap(jax.vmap(transform))(c["z"])
    if num_sweeps > 1:
        _, more = jax.lax.scan(sweep, (c["z"], c["ll"], c["lb"]),
                               jax.random.split(k_sweep, num_sweeps - 1))
        ys = jnp.concatenate([first[:, None], jnp.moveaxis(more, 0, 1)], axis=1)
        ys = ys.reshape(n, num_sweeps * N, d)
    else:
        ys = first
    return (ys, c["stages"], c["betas"].T, c["ess"].T, c["acc"].T, c["moves"],
            c["log_z"], jnp.sqrt(c["var_z"]), jnp.all(c["beta"] >= 1))


def _smc_mixture(fit, data, predictive, n, mode, num_draws, output_prior,
                 noisy_inputs, margin):
    """The pruned, truncated mixture, the resolved prior and test_noise."""
    if predictive is not None:
        if (not isinstance(predictive, InverseGPPredictive)
                or predictive.log_probs.shape[0] != n):
            raise ValueError(f"predictive must be an InverseGPPredictive of these "
                             f"X_test ({n} rows)")
        return predictive.mixture, predictive.prior, predictive.noisy_inputs
    if mode not in ("average", "map"):
        raise ValueError(f"mode must be 'average' or 'map', got {mode!r}")
    prior = resolve_output_prior(output_prior, np.asarray(data.Y, float), margin)
    return fit_mixture(fit, mode, num_draws), prior, noisy_inputs


def inverse_gp_smc(
    key: jax.Array, fit, X_test, num_samples: int, *,
    num_particles: int = 2048, num_moves: int = 5, target_ess: float = 0.5,
    max_stages: int = 200, mode: str = "average", num_draws: int = 100,
    output_prior=None, noisy_inputs: bool = True, margin: float = 0.0,
    predictive: InverseGPPredictive | None = None,
    spectrum_tol: float = SPECTRUM_TOL,
) -> tuple[np.ndarray, SMCReport]:
    """Draws of p(y* | x*, D) proportional to p(x* | y*, D) p(y*) by SMC with
    adaptive likelihood tempering (module docstring; Chopin 2002, Del Moral,
    Doucet and Jasra 2006), and the log evidence log p(x* | D).

    Each test input gets its own ``num_particles`` particles; all test inputs
    step together in one vectorised program. ``target_ess`` in (0, 1): the
    incremental weights' ESS fraction each stage aims at (higher: more,
    gentler stages). ``max_stages`` caps the stages (the last one jumps to
    beta = 1; ``report.reached`` says whether any had to). The draws are the
    final particles, then (for ``num_samples > num_particles``) the particles
    after each further sweep of ``num_moves`` moves at beta = 1: every draw a
    state of the particle system, weights equal. The prior is the output
    prior of :func:`~.output_prior.resolve_output_prior` (a box, a NumPyro
    distribution or Scott's KDE of the training outputs); the likelihood is
    the predictive's (components holding all but 1e-6 of the weight, each
    pair's eigenpairs of a^2 lambda_j < ``spectrum_tol`` s^2 dropped as for
    NUTS: :func:`~.evaluators.truncate_spectrum`; 0 keeps all).

    Args:
        key: PRNG key (the only randomness).
        fit: :func:`~bayeskde.inverse.fit_inverse_gp` result.
        X_test: ``(n_test, d_x)`` test inputs.
        num_samples: draws per test input.
        predictive: a :func:`~.predictive.inverse_gp_predictive` result for
            these ``X_test`` whose mixture, prior and ``noisy_inputs`` to use;
            otherwise ``mode``, ``num_draws``, ``output_prior``,
            ``noisy_inputs`` and ``margin`` as there.

    Returns:
        ``(draws (n_test, num_samples, d_y), report)``: an :class:`SMCReport`.

    Raises:
        ValueError: bad settings, ``X_test`` of the wrong width, empty or not
            finite.
        TypeError: ``fit`` not an :class:`~bayeskde.inverse.InverseGPFit`.

    Cost: n_test N (T num_moves + (S - 1) num_moves + 1) likelihood
    evaluations for N particles, T stages (about log of the likelihood's
    spread over the prior, measured 10-40) and S = ceil(num_samples / N)
    sweeps, each O(P m r + C r d_x) (Gaussian noise; the heteroscedastic
    covariance adds O(F Q + d_x^3), the residual density O(C m d_x)); the
    bisection O(n_test N) per stage. Memory O(n_test (N d_y + num_samples
    d_y)) plus one block's P x block x r projections.
    """
    key = check_key(key)
    num_samples = check_integer(num_samples, "num_samples", minimum=1)
    num_particles = check_integer(num_particles, "num_particles", minimum=2)
    num_moves = check_integer(num_moves, "num_moves", minimum=1)
    max_stages = check_integer(max_stages, "max_stages", minimum=1)
    spectrum_tol = check_nonnegative(spectrum_tol, "spectrum_tol")
    target_ess = float(target_ess)
    if not 0.0 < target_ess < 1.0:
        raise ValueError(f"target_ess must lie in (0, 1), got {target_ess}")
    data = check_fit(fit, "inverse_gp_smc").data
    X_test = model_inputs(fit, X_test)
    if not np.all(np.isfinite(X_test)):
        raise ValueError("X_test must be finite (no NaN or inf)")
    n = X_test.shape[0]
    mix, prior, noisy = _smc_mixture(fit, data, predictive, n, mode, num_draws,
                                     output_prior, noisy_inputs, margin)
    mix = truncate_spectrum(prune(mix), spectrum_tol)
    dt = data.X.dtype
    num_sweeps = -(-num_samples // num_particles)
    ys, stages, betas, ess, acc, steps, log_z, se, reached = _run_smc(
        mix, dense_terms(mix), prior.params, jnp.asarray(X_test, dt), key,
        jnp.asarray(float(noisy), dt), jnp.asarray(target_ess, dt),
        kind=prior.kind, num_particles=num_particles, num_moves=num_moves,
        max_stages=max_stages, num_sweeps=num_sweeps,
        block=_block(mix, num_particles))
    draws = np.asarray(ys, float)[:, :num_samples]
    distinct = np.array([len(np.unique(dr, axis=0)) for dr in draws])
    return draws, SMCReport(
        np.asarray(stages), np.asarray(betas, float), np.asarray(ess, float),
        np.asarray(acc, float), np.asarray(steps)[:int(np.max(stages))],
        np.asarray(log_z, float), np.asarray(se, float), distinct,
        num_particles, num_moves, bool(reached))
