"""The moves of the inverse model's predictive: BFGS refinement of its modes,
and the Langevin chains and last importance stage above two outputs
(:mod:`.predictive`'s module docstring describes the method and its measured
effect). Every move scores outputs by the one mixture likelihood
(:mod:`.evaluators`), Gaussian or residual noise alike."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from jax.scipy.special import logsumexp

from ..tgp import tgp_minimize
from .evaluators import dense_log_likelihood, dense_terms
from .importance import diverse_top
from .mixture import mixture_log_likelihood_each
from .output_prior import log_prior, sample_prior

__all__ = ["pad_rows", "langevin_moves", "chain_proposal", "refine_modes"]


def pad_rows(a, block):
    """``a`` with its last row repeated up to a multiple of ``block`` rows."""
    pad = -a.shape[0] % block
    return np.concatenate([a, np.repeat(a[-1:], pad, axis=0)]) if pad else a


def _mala_impl(mix, y0, xs, test_noise, kind, params, scale, eps0, key, n_warm,
               n_keep, thin):
    """Metropolis-adjusted Langevin moves (Roberts and Tweedie 1996) of the
    chains ``y0`` ``(b, N, d)`` targeting (B) for their test inputs ``xs``, in
    coordinates scaled by ``scale``; the step of each test row adapted to an
    acceptance of 0.574 during the ``n_warm`` warm-up steps (Robbins-Monro on
    its log), then held for ``n_keep`` steps of which every ``thin``-th state
    is kept. Returns the kept states ``(b, N, n_keep / thin, d)``, each
    chain's best log density after warm-up ``(b, N)`` and each row's
    acceptance rate after warm-up ``(b,)``."""
    terms = dense_terms(mix)
    dt = y0.dtype

    def log_target(z):
        y = z * scale[None, None]
        lp = jax.vmap(lambda yy: log_prior(kind, params, yy))(y)
        return dense_log_likelihood(mix, terms, y, xs, test_noise) + lp

    def value_grad(z):
        v, pull = jax.vjp(log_target, z)
        g = pull(jnp.ones_like(v))[0]
        ok = jnp.isfinite(v)
        return jnp.where(ok, v, -jnp.inf), jnp.where(
            ok[..., None] & jnp.isfinite(g), g, 0.0)

    def log_q(z_to, z_from, g_from, eps):
        mu = z_from + 0.5 * eps[:, None, None] ** 2 * g_from
        return -0.5 * jnp.sum((z_to - mu) ** 2, -1) / eps[:, None] ** 2

    def step(carry, inp):
        z, v, g, log_eps = carry
        k, gain = inp
        k1, k2 = jax.random.split(k)
        eps = jnp.exp(log_eps)
        prop = (z + 0.5 * eps[:, None, None] ** 2 * g
                + eps[:, None, None] * jax.random.normal(k1, z.shape, dt))
        v1, g1 = value_grad(prop)
        log_a = v1 - v + log_q(z, prop, g1, eps) - log_q(prop, z, g, eps)
        log_a = jnp.where(jnp.isfinite(log_a), jnp.minimum(log_a, 0.0), -jnp.inf)
        acc = jnp.log(jax.random.uniform(k2, v.shape, dt)) < log_a
        z = jnp.where(acc[..., None], prop, z)
        v = jnp.where(acc, v1, v)
        g = jnp.where(acc[..., None], g1, g)
        rate = jnp.mean(jnp.exp(log_a), axis=1)
        log_eps = log_eps + gain * (rate - 0.574)
        return (z, v, g, log_eps), (z, v, rate)

    z0 = y0 / scale[None, None]
    v0, g0 = value_grad(z0)
    n_steps = n_warm + n_keep
    t = jnp.arange(n_steps, dtype=dt)
    gain = jnp.where(t < n_warm, 2.0 / jnp.sqrt(1.0 + t), 0.0)
    log_eps0 = jnp.full((y0.shape[0],), jnp.log(eps0), dt)
    _, (zs, vs, rates) = jax.lax.scan(step, (z0, v0, g0, log_eps0),
                                      (jax.random.split(key, n_steps), gain))
    kept = jnp.moveaxis(zs[n_warm + thin - 1::thin], 0, 2)  # (b, N, n_keep/thin, d)
    best = jnp.max(vs[n_warm:], axis=0)  # (b, N)
    return kept * scale[None, None, None], best, jnp.mean(rates[n_warm:], axis=0)


_mala_jit = jax.jit(_mala_impl, static_argnames=("kind", "n_warm", "n_keep",
                                                  "thin"))
#: Test rows per MCMC program.
_MCMC_BLOCK = 8


def langevin_moves(key, mix, prior, X, test_noise, support, log_w, scale, eps0,
                n_chains, n_warm, n_keep, thin, radius):
    """Chains started, per test row, half at the importance population's
    diverse high-weight points (one per separated region, so that every mode
    found keeps a chain) and half by systematic resampling by weight, then
    moved by :func:`_mala_impl` in fixed blocks of test rows (one compiled
    program)."""
    n, n_pop, d = support.shape
    dt = mix.Y.dtype
    half = n_chains // 2
    top = diverse_top(support, log_w, n_chains - half, radius)
    u = (np.arange(half) + 0.5) / half
    cdf = np.cumsum(np.exp(log_w), axis=1)
    idx = np.minimum(np.array([np.searchsorted(c, u * c[-1]) for c in cdf]),
                     n_pop - 1)
    y0 = np.take_along_axis(support, np.concatenate([top, idx], 1)[..., None], 1)
    y0, xs = pad_rows(y0, _MCMC_BLOCK), pad_rows(X, _MCMC_BLOCK)
    keys = jax.random.split(key, y0.shape[0] // _MCMC_BLOCK)
    out = []
    sc, e0 = jnp.asarray(scale, dt), jnp.asarray(eps0, dt)
    for j, i in enumerate(range(0, y0.shape[0], _MCMC_BLOCK)):
        res = _mala_jit(mix, jnp.asarray(y0[i:i + _MCMC_BLOCK], dt),
                        jnp.asarray(xs[i:i + _MCMC_BLOCK], dt), test_noise,
                        prior.kind, prior.params, sc, e0, keys[j], n_warm, n_keep,
                        thin)
        out.append([np.asarray(r, float) for r in res])
    return tuple(np.concatenate([o[j] for o in out])[:n] for j in range(3))


def _kde_proposal_impl(mix, centres, chol, xs, test_noise, kind, params, key,
                       n_particles, eps):
    """Importance sampling of (B) from a Gaussian-kernel mixture on the
    chains' states: q = eps p(y) + (1 - eps) (1/K) sum_k N(y; c_k, L L^T) per
    test row (centres ``(b, K, d)``, Cholesky factors ``(b, d, d)``), every
    draw weighted by p(y | x*) p(y) / q(y). Returns particles
    ``(b, n_particles, d)``, their normalised log weights and ``(b,)`` the log
    importance estimate of the normaliser of p(x* | y) p(y)."""
    b, K, d = centres.shape
    dt = centres.dtype
    terms = dense_terms(mix)
    k1, k2, k3, k4 = jax.random.split(key, 4)
    pick = jax.random.randint(k1, (b, n_particles), 0, K)
    loc = jnp.take_along_axis(centres, pick[..., None], 1)
    noise = jax.random.normal(k2, (b, n_particles, d), dt)
    y = loc + jnp.einsum("bij,bnj->bni", chol, noise)
    from_prior = sample_prior(kind, params, k3, b * n_particles, d, dt
                               ).reshape(b, n_particles, d)
    y = jnp.where(jax.random.uniform(k4, (b, n_particles, 1)) < eps, from_prior, y)
    lp = jax.vmap(lambda yy: log_prior(kind, params, yy))(y)
    tgt = dense_log_likelihood(mix, terms, y, xs, test_noise) + lp

    def log_kde(yy, cc, L):
        diff = yy[:, None, :] - cc[None]  # (n, K, d)
        z = jax.scipy.linalg.solve_triangular(L, diff.reshape(-1, d).T, lower=True)
        q = -0.5 * jnp.sum(z.T.reshape(diff.shape) ** 2, -1)
        logdet = jnp.sum(jnp.log(jnp.diag(L)))
        return (logsumexp(q, axis=1) - jnp.log(K) - logdet
                - 0.5 * d * jnp.log(2 * jnp.pi))

    lq = jnp.logaddexp(jnp.log(eps) + lp,
                       jnp.log1p(-eps) + jax.vmap(log_kde)(y, centres, chol))
    log_w = jnp.where(jnp.isfinite(tgt), tgt - lq, -jnp.inf)
    total = logsumexp(log_w, axis=1, keepdims=True)
    return y, log_w - total, total[:, 0] - jnp.log(n_particles)


_kde_proposal_jit = jax.jit(_kde_proposal_impl, static_argnames=(
    "kind", "n_particles"))


def chain_proposal(key, mix, prior, X, test_noise, states, best, n_particles,
                    scale, eps=0.05, drop=12.0):
    """:func:`_kde_proposal_impl` with centres the MCMC states ``(n, N, K,
    d)`` of the chains whose best log density is within ``drop`` nats of the
    row's best chain (the others, stuck where the mass is below e^-drop of the
    best mode's, are replaced by copies of the best chain), and covariance the
    pooled within-chain covariance of those chains per test row (floored at
    1e-3 of ``scale``): a proposal shaped like each mode, whose weights restore
    the modes' masses that the chains, which do not cross between modes,
    cannot."""
    n, N, K, d = states.shape
    dt = mix.Y.dtype
    good = best >= np.max(best, axis=1, keepdims=True) - drop  # (n, N)
    first = np.argmax(best, axis=1)
    states = np.where(good[..., None, None], states,
                      states[np.arange(n), first][:, None])
    dev = (states - states.mean(axis=2, keepdims=True)) * good[..., None, None]
    dev = dev.reshape(n, -1, d)
    dof = np.maximum(good.sum(1) * (K - 1), 1)
    cov = np.einsum("nki,nkj->nij", dev, dev) / dof[:, None, None]
    cov += np.diag((1e-3 * np.asarray(scale, float)) ** 2)[None]
    chol = np.linalg.cholesky(cov)
    cen = states.reshape(n, N * K, d)
    cen, ch, xs = (pad_rows(a, _MCMC_BLOCK) for a in (cen, chol, X))
    keys = jax.random.split(key, cen.shape[0] // _MCMC_BLOCK)
    ys, ws, zs = [], [], []
    for j, i in enumerate(range(0, cen.shape[0], _MCMC_BLOCK)):
        sl = slice(i, i + _MCMC_BLOCK)
        y, lw, lz = _kde_proposal_jit(
            mix, jnp.asarray(cen[sl], dt), jnp.asarray(ch[sl], dt),
            jnp.asarray(xs[sl], dt), test_noise, prior.kind, prior.params, keys[j],
            n_particles, jnp.asarray(eps, dt))
        ys.append(np.asarray(y))
        ws.append(np.asarray(lw))
        zs.append(np.asarray(lz))
    return (np.concatenate(ys)[:n].astype(float),
            np.concatenate(ws)[:n].astype(float),
            np.concatenate(zs)[:n].astype(float))


def _energy(y, state):
    mix, x, test_noise, kind, params = state
    ll = mixture_log_likelihood_each(mix, y[None, None, :], x[None], test_noise)[0, 0]
    return -(ll + log_prior(kind, params, y[None])[0])


def refine_modes(mix, prior, X, modes, test_noise, radius):
    """Each mode moved by BFGS to the local maximum of the model-averaged
    density, kept only where that raises the density and stays within
    ``radius`` of the start (a move farther is a climb into another mode's
    basin, which would merge two modes)."""
    n, k, d = modes.shape
    dt = mix.Y.dtype
    y0 = np.asarray(modes.reshape(-1, d), dt)
    xs = np.repeat(np.asarray(X, dt), k, axis=0)
    # Blocks of one fixed size (the last padded by repeating its final row):
    # one compiled program for every number of test points, and each row's
    # result independent of the rows it is batched with.
    n_rows, block = y0.shape[0], _REFINE_BLOCK
    y0p, xsp = pad_rows(y0, block), pad_rows(xs, block)
    parts = [_refine_jit(mix, jnp.asarray(y0p[i:i + block]),
                         jnp.asarray(xsp[i:i + block]), test_noise, prior.kind,
                         prior.params) for i in range(0, y0p.shape[0], block)]
    new, e0, e1 = (np.concatenate([np.asarray(p[j]) for p in parts])[:n_rows]
                   for j in range(3))
    new = new.astype(float)
    step = np.linalg.norm(new - np.asarray(y0, float), axis=1)
    better = (np.isfinite(e1) & (e1 < e0) & np.all(np.isfinite(new), axis=1)
              & (step <= radius))
    out = np.where(better[:, None], new, np.asarray(y0, float))
    return out.reshape(n, k, d)


def _refine_impl(mix, y0, xs, test_noise, kind, params):
    tol = jnp.sqrt(jnp.finfo(y0.dtype).eps)

    def one(y, x):
        state = (mix, x, test_noise, kind, params)
        y1 = tgp_minimize(lambda yy, s: _energy(yy, (*s, kind, params)), y,
                          (mix, x, test_noise), 100, tol).y
        if kind == "box":
            y1 = jnp.clip(y1, params[0], params[1])
        return y1, _energy(y, state), _energy(y1, state)

    return jax.vmap(one)(y0, xs)


_refine_jit = jax.jit(_refine_impl, static_argnames=("kind",))
#: Rows per refinement program (test points x modes, padded to a multiple).
_REFINE_BLOCK = 32
