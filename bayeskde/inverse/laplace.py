"""Multistart mode search and Laplace-mixture importance sampling of the inverse
model's predictive p(y* | x*, D) proportional to p(x* | y*, D) p(y*).

Per test input, in the output prior's unconstrained coordinates z (y = T(z),
:func:`~.output_prior.support_transform`; the target pi(z) = p(x* | T(z), D)
p(T(z)) |dT/dz|, :func:`~.evaluators.point_log_target`):

1. **Starts.** The ``n_starts`` training outputs of highest target that lie
   farther apart than the modes' merge radius (:func:`~.importance.diverse_top`,
   NUTS's seeds), and the ``n_starts`` training outputs whose inputs are
   nearest x* (each input dimension scaled by its standard deviation). The
   second set is what finds a deterministic simulator's solutions: there the
   noise posterior sits near 1e-11, every training output scores about -1e8
   nats and the target's ranking of them says little, while the nearest
   inputs' outputs lie in the solutions' basins.
2. **Modes.** BFGS (:func:`~bayeskde.tgp.tgp_minimize`) on -log pi from every
   start: local maxima z_k, their energies E_k = -log pi(z_k) and Hessians H_k
   (automatic second derivatives). Each H_k is floored below at 1 / s_max^2
   in its eigenvalues (s_max the largest standard deviation of the training
   outputs in z), so a flat or saddle direction gets the prior's width and
   never an infinite one.
3. **Importance sampling** (the Laplace mixture as proposal; Geweke 1989 for
   Student-t proposals, Oh and Berger 1993 for mixtures of them):
   q(z) = eps p_z(z) + (1 - eps) sum_k pi_k t_nu(z; z_k, H_k^-1), nu = 5,
   pi_k = 1/2 softmax_k(-E_k - 1/2 log |H_k|) + 1/(2K) (the Laplace masses,
   half of the share spread evenly so that a mode the Laplace mass
   underrates keeps draws), eps = 0.05 of the prior (bounded weights in the
   tails). Each of ``n_particles`` draws is weighted by pi(z) / q(z) with the
   exact mixture likelihood (:func:`~.evaluators.dense_log_likelihood`); the
   mean weight estimates p(x* | D), the predictive's normaliser. Where the
   posterior is close to a mixture of Gaussians (narrow noise, a
   deterministic simulator) the weights are near equal; where it is curved
   the Student tails keep them bounded and the ESS says how far to trust them.

Modes: the optima T(z_k), merged within the merge radius in order of
increasing energy, ranked by the weight of the particles nearest each.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
from jax.scipy.special import gammaln, logsumexp

from ..tgp import tgp_minimize
from .evaluators import (
    SPECTRUM_TOL,
    dense_log_likelihood,
    dense_terms,
    filters,
    point_log_target,
    point_moments,
    prune,
    truncate_spectrum,
)
from .importance import diverse_top
from .mcmc import pad_rows
from .mixture import blocked_log_likelihood
from .output_prior import log_prior, sample_prior, support_transform

__all__ = ["LAPLACE_DOF", "laplace_importance", "rank_optima"]

#: Degrees of freedom of the Student-t components of the proposal.
LAPLACE_DOF = 5.0
#: Levenberg-Marquardt steps from every start.
_LM_STEPS = 20
#: Optimisation lanes (test inputs x starts) per compiled BFGS program.
_LANES = 64
#: Test inputs per importance program.
_ROWS = 8
#: Where a box prior's training outputs sit on its edges (T^-1 infinite), the
#: starts are moved this share of the box's width inside.
_EDGE = 1e-3


def _levenberg_marquardt(mixf, y0, x, low, high, x_scale, n_iter):
    """Levenberg-Marquardt (Marquardt 1963, his diagonal scaling) on the
    scaled residual r(y) = (x - sum_c w_c mu_c(y)) / x_scale of the model
    average's mean (:func:`~.evaluators.point_moments`), every step projected
    onto [low, high]: a step whose residual is not smaller is refused and the
    damping multiplied by 4, an accepted one divides it by 3. ``n_iter``
    fixed steps (one program for every lane)."""
    mix, filt = mixf
    w = jnp.exp(mix.log_w)

    def resid(y):
        mu, _ = point_moments(mix, filt, y)
        return (x - w @ mu) / x_scale

    def step(i, carry):
        y, f, damp = carry
        r = resid(y)
        J = jax.jacfwd(resid)(y)
        JtJ = J.T @ J
        g = J.T @ r
        A = JtJ + damp * (jnp.diag(jnp.diag(JtJ)) + 1e-9 * jnp.eye(y.shape[0]))
        y_new = jnp.clip(y - jnp.linalg.solve(A, g), low, high)
        f_new = jnp.sum(resid(y_new) ** 2)
        ok = jnp.isfinite(f_new) & (f_new < f)
        return (jnp.where(ok, y_new, y), jnp.where(ok, f_new, f),
                jnp.where(ok, damp / 3.0, damp * 4.0))

    f0 = jnp.sum(resid(y0) ** 2)
    y, _, _ = jax.lax.fori_loop(0, n_iter, step,
                                (y0, f0, jnp.asarray(1e-2, y0.dtype)))
    return y


@functools.partial(jax.jit, static_argnames=("kind", "max_iter"))
def _optimise(mixf, params, y0, xs, test_noise, lam_min, low, high, x_scale,
              radius, *, kind, max_iter):
    """From every lane's start ``y0`` ``(L, d)`` for its input ``xs``
    ``(L, d_x)``: Levenberg-Marquardt on the mean, then BFGS on -log pi in z
    (kept where it lowers the energy and moves the output less than
    ``radius``); the optima in z, energies and floored inverse-Hessian
    Cholesky factors with their log-determinants."""
    d = y0.shape[-1]
    transform = support_transform(kind, params, d)
    tol = jnp.sqrt(jnp.finfo(y0.dtype).eps)

    def energy(z, x):
        return -point_log_target(mixf, transform, kind, params, z, x, test_noise)

    def one(y, x):
        y = _levenberg_marquardt(mixf, y, x, low, high, x_scale, _LM_STEPS)
        z0 = transform.inv(y)
        e0 = energy(z0, x)
        z1 = tgp_minimize(energy, z0, x, max_iter, tol).y
        e1 = energy(z1, x)
        near = jnp.sqrt(jnp.sum((transform(z1) - y) ** 2)) <= radius
        better = jnp.isfinite(e1) & (e1 < e0) & near
        z1, e1 = jnp.where(better, z1, z0), jnp.where(better, e1, e0)
        H = jax.hessian(energy)(z1, x)
        lam, V = jnp.linalg.eigh(0.5 * (H + H.T))
        lam = jnp.where(jnp.isfinite(lam), jnp.maximum(lam, lam_min), lam_min)
        chol = jnp.linalg.cholesky((V / lam[None]) @ V.T)
        return z1, e1, chol, -jnp.sum(jnp.log(lam))

    return jax.vmap(one)(y0, xs)


def _student_logpdf(z, centres, chol, logdet_cov, dof):
    """log t_nu(z; c_k, L_k L_k^T) for particles ``z`` ``(N, d)`` and every
    component ``(K, d)``, ``(K, d, d)`` -> ``(N, K)``."""
    d = z.shape[-1]
    diff = z[:, None, :] - centres[None]
    sol = jax.vmap(lambda L, r: jax.scipy.linalg.solve_triangular(
        L, r.T, lower=True).T, in_axes=(0, 1), out_axes=1)(chol, diff)
    q = jnp.sum(sol**2, -1)
    return (gammaln(0.5 * (dof + d)) - gammaln(0.5 * dof)
            - 0.5 * d * jnp.log(dof * jnp.pi) - 0.5 * logdet_cov[None]
            - 0.5 * (dof + d) * jnp.log1p(q / dof))


@functools.partial(jax.jit, static_argnames=("kind", "n_particles"))
def _importance(mix, terms, params, centres, chol, logdet, log_pi, xs, test_noise,
                key, eps, *, kind, n_particles):
    """The importance stage for a block of test inputs: centres ``(b, K, d)``,
    Cholesky factors ``(b, K, d, d)`` and log-determinants ``(b, K)`` of the
    components' covariances, mixture weights ``log_pi`` ``(b, K)``. Returns
    outputs ``(b, N, d)``, normalised log weights and ``(b,)`` log normaliser
    estimates."""
    b, K, d = centres.shape
    dt = centres.dtype
    dof = jnp.asarray(LAPLACE_DOF, dt)
    transform = support_transform(kind, params, d)
    k1, k2, k3, k4, k5 = jax.random.split(key, 5)
    pick = jax.random.categorical(k1, log_pi[:, None, :], shape=(b, n_particles))
    loc = jnp.take_along_axis(centres, pick[..., None], 1)
    L = jnp.take_along_axis(chol, pick[..., None, None], 1)
    g = jax.random.gamma(k3, 0.5 * dof, (b, n_particles, 1), dt) / (0.5 * dof)
    noise = jax.random.normal(k2, (b, n_particles, d), dt) / jnp.sqrt(g)
    z = loc + jnp.einsum("bnij,bnj->bni", L, noise)
    from_prior = sample_prior(kind, params, k4, b * n_particles, d, dt)
    z_prior = jax.vmap(transform.inv)(from_prior).reshape(b, n_particles, d)
    z = jnp.where(jax.random.uniform(k5, (b, n_particles, 1)) < eps, z_prior, z)
    y = jax.vmap(jax.vmap(transform))(z)
    log_pz = (jax.vmap(lambda yy: log_prior(kind, params, yy))(y)
              + jax.vmap(jax.vmap(lambda zz, yy: jnp.sum(
                  transform.log_abs_det_jacobian(zz, yy))))(z, y))
    tgt = dense_log_likelihood(mix, terms, y, xs, test_noise) + log_pz
    lt = jax.vmap(_student_logpdf, in_axes=(0, 0, 0, 0, None))(
        z, centres, chol, logdet, dof)
    lq = jnp.logaddexp(jnp.log(eps) + log_pz,
                       jnp.log1p(-eps) + logsumexp(lt + log_pi[:, None, :], -1))
    log_w = jnp.where(jnp.isfinite(tgt) & jnp.isfinite(lq), tgt - lq, -jnp.inf)
    total = logsumexp(log_w, axis=1, keepdims=True)
    return y, log_w - total, total[:, 0] - jnp.log(n_particles)


def _starts(mix, prior, Y, X_train, X_test, test_noise, n_starts, radius, dt):
    """``(n, 2 n_starts, d)`` starts: the diverse best training outputs by
    target and the outputs of the nearest training inputs (module docstring)."""
    n = X_test.shape[0]
    seeds = jnp.asarray(Y, dt)
    score = (blocked_log_likelihood(mix, seeds, jnp.asarray(X_test, dt), test_noise)
             + np.asarray(log_prior(prior.kind, prior.params, seeds))[None])
    J = min(n_starts, Y.shape[0])
    top = diverse_top(np.broadcast_to(Y, (n, *Y.shape)), score, J, radius)
    sd = X_train.std(axis=0)
    sd = np.where(sd > 0, sd, 1.0)
    a, b = X_test / sd, X_train / sd
    d2 = np.sum(a**2, 1)[:, None] - 2 * a @ b.T + np.sum(b**2, 1)[None]
    near = np.argsort(d2, axis=1)[:, :J]
    return _inside(prior, Y[np.concatenate([top, near], axis=1)])


def _bounds(prior):
    """Where the starts' solves may go: a box prior's box (off its edges by
    :data:`_EDGE`), else the prior's box widened by a tenth of its width."""
    low, high = np.asarray(prior.low, float), np.asarray(prior.high, float)
    w = high - low
    e = _EDGE if prior.kind == "box" else -0.1
    return low + e * w, high - e * w


def _inside(prior, y):
    """``y`` moved off a box prior's edges by :data:`_EDGE` of its width."""
    if prior.kind != "box":
        return y
    low, high = (np.asarray(p, float) for p in prior.params)
    w = high - low
    return np.clip(y, low + _EDGE * w, high - _EDGE * w)


def laplace_importance(key, mix, prior, Y, X_train, X_test, test_noise, *,
                       n_starts: int = 8, n_particles: int = 1024,
                       radius: float, eps: float = 0.05, max_iter: int = 10,
                       spectrum_tol: float = SPECTRUM_TOL):
    """Modes and importance draws of the predictive (module docstring).

    Args:
        key: PRNG key of the importance draws.
        mix: the model average (:func:`~.mixture.fit_mixture`).
        prior: the resolved :class:`~.output_prior.OutputPrior`.
        Y, X_train: ``(m, d_y)``, ``(m, d_x)`` training outputs and inputs.
        X_test: ``(n, d_x)`` test inputs.
        test_noise: 1.0 where the test inputs carry the training noise.
        n_starts: starts of each kind (2 ``n_starts`` BFGS runs a test input).
        n_particles: importance draws a test input.
        radius: the modes' merge radius.

    Returns:
        ``(particles (n, N, d), log_w (n, N), log_z (n,), optima (n, K, d),
        energies (n, K))``: normalised log weights, the log of the importance
        estimate of p(x* | D), the BFGS optima in y and -log pi at them.

    Cost: n (m + 2 n_starts (I + d)) point evaluations of the likelihood for
    I BFGS evaluations a run (at most ``max_iter`` iterations and their line
    searches), and n n_particles dense evaluations.
    """
    dt = mix.Y.dtype
    n, d = X_test.shape[0], Y.shape[1]
    Y = np.asarray(Y, float)
    X_test = np.asarray(X_test, float)
    y0 = _starts(mix, prior, Y, np.asarray(X_train, float), X_test, test_noise,
                 n_starts, radius, dt)
    K = y0.shape[1]
    transform = support_transform(prior.kind, prior.params, d)
    zY = np.asarray(jax.vmap(transform.inv)(jnp.asarray(_inside(prior, Y), dt)))
    s_max = float(np.max(np.std(np.where(np.isfinite(zY), zY, 0.0), axis=0)))
    lam_min = jnp.asarray(1.0 / max(s_max, 1e-6) ** 2, dt)
    low, high = _bounds(prior)
    x_scale = np.asarray(X_train, float).std(axis=0)
    x_scale = np.where(x_scale > 0, x_scale, 1.0)
    consts = tuple(jnp.asarray(a, dt) for a in (lam_min, low, high, x_scale, radius))
    mixp = truncate_spectrum(prune(mix), spectrum_tol)
    mixf = (mixp, filters(mixp))
    xs = np.repeat(X_test, K, axis=0)
    yp, xp = pad_rows(y0.reshape(-1, d), _LANES), pad_rows(xs, _LANES)
    parts = [_optimise(mixf, prior.params, jnp.asarray(yp[i:i + _LANES], dt),
                       jnp.asarray(xp[i:i + _LANES], dt), test_noise, *consts,
                       kind=prior.kind, max_iter=max_iter)
             for i in range(0, yp.shape[0], _LANES)]
    z1, e1, chol, logdet = (np.concatenate([np.asarray(p[j]) for p in parts])[:n * K]
                            for j in range(4))
    z0 = np.asarray(jax.vmap(transform.inv)(jnp.asarray(y0.reshape(-1, d), dt)))
    z0 = np.where(np.isfinite(z0), z0, 0.0)
    e1 = np.where(np.isfinite(e1), e1, np.inf).reshape(n, K)
    ok = np.all(np.isfinite(z1), axis=1) & np.all(np.isfinite(chol), axis=(1, 2))
    z1 = np.where(ok[:, None], z1, z0).reshape(n, K, d)
    chol = np.where(ok[:, None, None], chol, np.eye(d) * np.sqrt(1 / float(lam_min))
                    ).reshape(n, K, d, d)
    logdet = np.where(ok, logdet, -d * np.log(float(lam_min))).reshape(n, K)
    lap = -e1 + 0.5 * logdet
    lap = np.where(np.isfinite(lap), lap, -np.inf)
    # rows where no optimum has a finite energy get even masses
    top = np.max(lap, axis=1, keepdims=True)
    soft = np.exp(lap - np.where(np.isfinite(top), top, 0.0))
    total = soft.sum(1, keepdims=True)
    soft = np.where(total > 0, soft / np.where(total > 0, total, 1.0), 0.0)
    log_pi = np.log(0.5 * soft + 0.5 / K)
    terms = dense_terms(mix)
    args = [pad_rows(a, _ROWS) for a in (z1, chol, logdet, log_pi, X_test)]
    keys = jax.random.split(key, args[0].shape[0] // _ROWS)
    out = []
    for j, i in enumerate(range(0, args[0].shape[0], _ROWS)):
        sl = slice(i, i + _ROWS)
        res = _importance(mix, terms, prior.params, *(jnp.asarray(a[sl], dt)
                                                      for a in args),
                          test_noise, keys[j], jnp.asarray(eps, dt),
                          kind=prior.kind, n_particles=n_particles)
        out.append([np.asarray(r, float) for r in res])
    y, log_w, log_z = (np.concatenate([o[j] for o in out])[:n] for j in range(3))
    optima = np.asarray(jax.vmap(transform)(jnp.asarray(z1.reshape(-1, d), dt)),
                        float).reshape(n, K, d)
    return y, log_w, log_z, optima, e1


def rank_optima(optima, energies, particles, log_w, k, radius):
    """The top-``k`` modes ``(n, k, d)`` and their masses ``(n, k)``: the
    optima merged within ``radius`` in order of increasing energy, each given
    the weight of the particles nearest it; fewer than ``k`` distinct optima
    are padded by the next optima in energy order (mass 0)."""
    n, K, d = optima.shape
    modes = np.empty((n, k, d))
    masses = np.zeros((n, k))
    w = np.exp(log_w)
    for i in range(n):
        order = np.argsort(energies[i])
        kept = []
        for j in order:
            if all(np.linalg.norm(optima[i, j] - optima[i, q]) > radius for q in kept):
                kept.append(j)
        cen = optima[i, kept]
        near = np.argmin(np.sum((particles[i][:, None] - cen[None]) ** 2, -1), 1)
        mass = np.bincount(near, weights=w[i], minlength=len(kept))
        rank = [kept[q] for q in np.argsort(-mass, kind="stable")]
        rest = [j for j in order if j not in kept]
        pick = (rank + rest)[:k]
        pick += [pick[0]] * (k - len(pick))
        modes[i] = optima[i, pick]
        mm = dict(zip(kept, mass, strict=True))
        masses[i] = [mm.get(j, 0.0) if q < len(rank) else 0.0
                     for q, j in enumerate(pick)]
    return modes, masses

