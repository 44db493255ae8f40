"""Forward noise that depends on the outputs: a covariance function Sigma(y).

The forward model (F) of :mod:`bayeskde.inverse` has x = f(y) + eps with eps ~
N(0, s^2 I), the same for every y; the residual density (R) of
:mod:`.residual` changes the shape but not with y. Simulators whose noise
carries the information (sbibm's slcp: four draws from a Gaussian whose
covariance is a function of the parameters) need the noise's variances *and
correlations* to move with y. This module's model (H) keeps the GP's mean and
latent variance and replaces the noise by

    x | y ~ N(mu(y), Sigma(y) + var_f(y) I),      Sigma(y) = L(y) L(y)^T,       (H)

with L = S(y) C(y), S diagonal and C unit lower triangular, their entries
functions of y:

    S_jj(y) = exp(g_jj(y)),   C_jk(y) = g_jk(y)  (j > k; zero for ``"diagonal"``),
    g_q(y) = b_q + phi(z)^T w_q,   w_q ~ N(0, tau^2 I),                         (G)

so the scales carry the units and the C_jk are unit-free (for two outputs the
correlation is C_21 / sqrt(1 + C_21^2)). phi are the random Fourier features
(:func:`~bayeskde.lowrank.fourier_features`) of the RBF kernel exp(-gamma ||z
- z'||^2) on the standardised outputs z (per-dimension mean and standard
deviation of the training outputs) beside z itself and its squares and
products (the second-degree polynomial, for the smooth trends a noise scale
usually has), so each g_q is a GP with mean b_q and covariance tau^2 (k(z,
z') + p(z)^T p(z')) (Rahimi and Recht 2007), and Sigma(y) is positive
definite for every y. This is the Cholesky
parametrisation of a covariance process (Wilson and Ghahramani 2011 build the
generalised Wishart process from GP factors; Pourahmadi 1999 the modified
Cholesky decomposition for regression on the covariance), fitted here by MAP.

Fit. The GP's exact leave-one-out residuals r_i and latent variances v_i
(:func:`~.residual.gp_loo`, no refit) are draws of the noise at y_i:
r_i ~ N(0, Sigma(y_i) + v_i I). (b, w) maximise

    sum_i log N(r_i; 0, Sigma(y_i) + v_i I) - ||w||^2 / (2 tau^2)              (P)

by :data:`STEPS` Adam steps (optax) from Sigma = diag(Var(r)) (w = 0). The
structure (``"diagonal"`` or ``"full"``), gamma and tau are chosen by K-fold
cross-validation: the held-out log density log N(r_i; 0, Sigma_-k(y_i) + v_i
I) of each residual under the fit without its fold; the folds are masks on the
same arrays, so every fold and every tau is one vmapped program. The search
is staged: ``"diagonal"`` (closed-form density, O(d_x) per point) at every
gamma and tau, then ``"full"`` at the diagonal's gamma and every tau (gamma
is the noise functions' length scale in y, shared by scales and
correlations); this cut the fit of 1,000 residuals at d_x = 10 from over 9
minutes to seconds (docs/sbi.md). The features
depend on the outputs only, never on x, so the held-out points are held out of
everything the noise model learns from x. ``"full"`` is a candidate for d_x <=
12 (d_x (d_x + 1) / 2 functions).

The frequencies of phi are a fixed draw (key 0, scaled by gamma): part of
the model's definition, like a quadrature rule, so a fit is deterministic.

Cost: per Adam step O(m F Q + m d_x^3) for m residuals, F features and Q
functions (Q = d_x diagonal, d_x (d_x + 1) / 2 full); a likelihood evaluation
O(n_c (F Q + d_x^3) + n n_c d_x^2) for n test inputs at n_c outputs.
"""

from __future__ import annotations

from functools import partial
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax

from ..lowrank import fourier_features

__all__ = [
    "HeteroscedasticNoise",
    "STRUCTURES",
    "FULL_MAX_DIM",
    "GAMMA_FACTORS",
    "TAUS",
    "NUM_FREQUENCIES",
    "UNROLL_MAX_DIM",
    "noise_cholesky",
    "heteroscedastic_log_likelihood",
    "fit_heteroscedastic_noise",
]

#: The covariance structures (H) can take.
STRUCTURES = ("diagonal", "full")
#: Largest d_x for which ``"full"`` is a candidate.
FULL_MAX_DIM = 12
#: gamma = factor / d_y on the standardised outputs (1 / d_y puts the median
#: squared distance of two standard-normal outputs, 2 d_y, at exp(-2)).
GAMMA_FACTORS = (0.25, 1.0, 4.0)
#: Prior scales tau of the functions g_q (in log-standard-deviation units on
#: the diagonal).
TAUS = (0.3, 1.0, 3.0, 10.0)
#: Largest d_x whose small Cholesky factorisations and solves are unrolled
#: into elementwise code (LAPACK above it).
UNROLL_MAX_DIM = 4
#: Frequencies of the feature map (2x as many features: a cosine and a sine).
NUM_FREQUENCIES = 128
#: Folds of the cross-validation.
FOLDS = 5
#: Adam steps per fit, and their learning rate.
STEPS = 400
LEARNING_RATE = 0.03


class HeteroscedasticNoise(NamedTuple):
    """The covariance function (H) (:func:`fit_heteroscedastic_noise`).

    ``omega`` ``(d_y, F/2)`` the feature map's frequencies (gamma included),
    ``y_mean``, ``y_scale`` ``(d_y,)`` the standardisation, ``bias`` ``(Q,)``
    and ``weights`` ``(F, Q)`` the functions g_q,
    ``lower_rows``, ``lower_cols`` the positions in L of the functions after
    the d_x diagonal ones (none for ``"diagonal"``), ``gamma`` and ``tau``
    the chosen settings, ``floor`` the smallest eigenvalue of Sigma over the
    training outputs (the narrowest noise the model uses, for
    :func:`~.evaluators.truncate_spectrum`).
    """

    omega: jax.Array
    y_mean: jax.Array
    y_scale: jax.Array
    bias: jax.Array
    weights: jax.Array
    lower_rows: jax.Array
    lower_cols: jax.Array
    floor: jax.Array
    gamma: jax.Array
    tau: jax.Array

    @property
    def structure(self) -> str:
        """``"full"`` (correlations) or ``"diagonal"`` (variances only)."""
        return "full" if self.lower_rows.shape[0] else "diagonal"


def _features(omega, y_mean, y_scale, outputs):
    """phi(z): the random Fourier features and the second-degree polynomial
    terms of the standardised outputs (scaled to unit size)."""
    z = (outputs - y_mean[None]) / y_scale[None]
    i, j = np.triu_indices(z.shape[1])
    poly = jnp.concatenate([z, z[:, i] * z[:, j] / np.sqrt(2.0)], axis=1)
    return jnp.concatenate([fourier_features(z, omega), poly], axis=1)


def _cholesky_from_g(g, d, rows, cols):
    """L = S C ``(n, d, d)`` from the functions' values ``g`` ``(n, Q)``: the
    first d columns log diag(S), the rest C's strictly lower entries."""
    n = g.shape[0]
    C = jnp.broadcast_to(jnp.eye(d, dtype=g.dtype)[None], (n, d, d))
    if rows.shape[0]:
        C = C.at[:, rows, cols].set(g[:, d:])
    return jnp.exp(g[:, :d])[:, :, None] * C


def noise_cholesky(noise: HeteroscedasticNoise, outputs) -> jax.Array:
    """L(y) of (H) at ``outputs`` ``(n_c, d_y)``: ``(n_c, d_x, d_x)``."""
    phi = _features(noise.omega, noise.y_mean, noise.y_scale, outputs)
    g = noise.bias[None] + phi @ noise.weights
    d = int(noise.bias.shape[0] - noise.lower_rows.shape[0])
    return _cholesky_from_g(g, d, noise.lower_rows, noise.lower_cols)


def _forward_solve(L, r):
    """z with L z = r for lower triangular ``L`` ``(..., d, d)`` and ``r``
    ``(..., d)``, unrolled over the static d up to :data:`UNROLL_MAX_DIM`."""
    d = L.shape[-1]
    if d > UNROLL_MAX_DIM:  # L^-1 by LAPACK, then a broadcasting product
        eye = jnp.broadcast_to(jnp.eye(d, dtype=L.dtype), L.shape)
        inv = jax.scipy.linalg.solve_triangular(L, eye, lower=True)
        return jnp.sum(inv * r[..., None, :], axis=-1)
    z = []
    for i in range(d):
        acc = r[..., i]
        for k in range(i):
            acc = acc - L[..., i, k] * z[k]
        z.append(acc / L[..., i, i])
    return jnp.stack(z, -1)


def _diagonal_variance(g, extra):
    """diag(Sigma) + extra of the ``"diagonal"`` structure, ``(n, d)`` from the
    functions' values ``g`` ``(n, d)``: exp(2 g) + extra."""
    return jnp.exp(2.0 * g) + extra[:, None]


def _small_cholesky(S):
    """Cholesky factors of a batch ``(..., d, d)`` of small SPD matrices: for d
    <= :data:`UNROLL_MAX_DIM` by the column recursion unrolled over the
    static d, elementwise over the batch (LAPACK, called once per matrix, was
    4.6x slower at d = 2 with the gradient), above it by LAPACK (the unrolled
    recursion was 4x slower at d = 10; ``/tmp`` bench of 24,576 matrices,
    value and gradient, float64, one core)."""
    if S.shape[-1] > UNROLL_MAX_DIM:
        return jnp.linalg.cholesky(S)
    d = S.shape[-1]
    cols = []
    for j in range(d):
        prev = jnp.stack(cols, -1) if cols else None  # (..., d, j)
        v = S[..., :, j]
        if prev is not None:
            v = v - jnp.sum(prev * prev[..., j:j + 1, :], axis=-1)
        piv = jnp.sqrt(v[..., j])
        col = jnp.where(jnp.arange(d) >= j, v / piv[..., None], 0.0)
        cols.append(col)
    return jnp.stack(cols, -1)


def _total_cholesky(L, extra):
    """chol(L L^T + extra I) ``(n, d, d)``."""
    d = L.shape[-1]
    eye = jnp.eye(d, dtype=L.dtype)[None]
    S = L @ jnp.swapaxes(L, -1, -2) + extra[:, None, None] * eye
    return _small_cholesky(S)


def heteroscedastic_log_likelihood(noise: HeteroscedasticNoise, outputs, mean,
                                   var_f, X):
    """log N(x_n; mu(y_c), Sigma(y_c) + var_f(y_c) I) of (H) for tests ``X``
    ``(n, d_x)`` at ``outputs`` ``(n_c, d_y)`` whose GP mean is ``mean``
    ``(n_c, d_x)`` and latent variance ``var_f`` ``(n_c,)``: ``(n, n_c)``.
    Cost O(n_c (F Q + d_x^3) + n n_c d_x^2)."""
    diff = X[:, None, :] - mean[None]  # (n, n_c, d)
    d = X.shape[1]
    if noise.structure == "diagonal":
        phi = _features(noise.omega, noise.y_mean, noise.y_scale, outputs)
        var = _diagonal_variance(noise.bias[None] + phi @ noise.weights,
                                 jnp.maximum(var_f, 0.0))  # (n_c, d)
        quad = jnp.sum(diff**2 / var[None], axis=-1)
        logdet = jnp.sum(jnp.log(var), -1)
        return -0.5 * quad - 0.5 * logdet[None] - 0.5 * d * jnp.log(2 * jnp.pi)
    L = noise_cholesky(noise, outputs)
    chol = _total_cholesky(L, jnp.maximum(var_f, 0.0))  # (n_c, d, d)
    z = _forward_solve(chol[None], diff)  # (n, n_c, d)
    quad = jnp.sum(z**2, axis=-1)  # (n, n_c)
    logdet = 2.0 * jnp.sum(jnp.log(jnp.diagonal(chol, axis1=-2, axis2=-1)), -1)
    return -0.5 * quad - 0.5 * logdet[None] - 0.5 * d * jnp.log(2 * jnp.pi)


def _point_log_density(g, r, v, d, rows, cols):
    """log N(r_i; 0, L(g_i) L(g_i)^T + v_i I) ``(m,)``; in closed form when
    L is diagonal (no strictly lower functions)."""
    if not rows.shape[0]:
        var = _diagonal_variance(g, v)
        return (-0.5 * jnp.sum(r**2 / var + jnp.log(var), -1)
                - 0.5 * d * jnp.log(2 * jnp.pi))
    L = _cholesky_from_g(g, d, rows, cols)
    chol = _total_cholesky(L, v)
    z = _forward_solve(chol, r)
    logdet = 2.0 * jnp.sum(jnp.log(jnp.diagonal(chol, axis1=-2, axis2=-1)), -1)
    return -0.5 * jnp.sum(z**2, -1) - 0.5 * logdet - 0.5 * d * jnp.log(2 * jnp.pi)


def _fit_one(phi, r, v, bias0, mask, tau, rows, cols, steps):
    """MAP (P) of (b, w) on the points where ``mask`` is 1; returns the
    parameters and the per-point log densities of all points."""
    d = r.shape[1]
    F, Q = phi.shape[1], bias0.shape[0]
    n_fit = jnp.sum(mask)

    def objective(params):
        b, w = params
        ll = _point_log_density(b[None] + phi @ w, r, v, d, rows, cols)
        return -(jnp.sum(mask * ll) - 0.5 * jnp.sum(w**2) / tau**2) / n_fit

    opt = optax.adam(LEARNING_RATE)
    params = (bias0, jnp.zeros((F, Q), phi.dtype))
    grad = jax.grad(objective)

    def step(carry, _):
        params, state = carry
        updates, state = opt.update(grad(params), state, params)
        return (optax.apply_updates(params, updates), state), None

    (params, _), _ = jax.lax.scan(step, (params, opt.init(params)), None,
                                  length=steps)
    b, w = params
    return b, w, _point_log_density(b[None] + phi @ w, r, v, d, rows, cols)


def _lower(d, structure):
    """Row and column indices of L's strictly lower entries (none diagonal)."""
    if structure == "full":
        rows, cols = np.tril_indices(d, -1)
    else:
        rows = cols = np.zeros(0, int)
    return jnp.asarray(rows), jnp.asarray(cols)


def _initial_bias(r, v, weight, Q):
    """b at Sigma = diag(Var(r) - mean(v)) over the rows of ``weight`` 1 (the
    latent variance taken out)."""
    d = r.shape[1]
    n = jnp.sum(weight)
    mean = weight @ r / n
    var_r = weight @ (r - mean[None]) ** 2 / n
    var = jnp.maximum(var_r - weight @ v / n, 1e-12 * var_r)
    return jnp.zeros((Q,), r.dtype).at[:d].set(0.5 * jnp.log(var))


@partial(jax.jit, static_argnames=("structure", "steps"))
def _fit_grid(phis, r, v, masks, taus, structure, steps):
    """(P) of one structure at every feature map x tau x mask: ``(b, w, ll)``
    with leading axes ``(n_gamma, n_tau, n_mask)``, ``ll`` every point's log
    density under each fit. One program: the folds' masks and the all-ones
    mask of the final fit share it."""
    rows, cols = _lower(r.shape[1], structure)
    bias0 = _initial_bias(r, v, masks[-1], r.shape[1] + rows.shape[0])

    def one(phi, mk, t):
        return _fit_one(phi, r, v, bias0, mk, t, rows, cols, steps)

    f = jax.vmap(one, (None, 0, None))
    f = jax.vmap(f, (None, None, 0))
    return jax.vmap(f, (0, None, None))(phis, masks, taus)


def fit_heteroscedastic_noise(outputs, residuals, latent_var, *, structures=None,
                              gamma_factors=GAMMA_FACTORS, taus=TAUS,
                              num_frequencies=NUM_FREQUENCIES, folds=FOLDS,
                              steps=STEPS):
    """(H) on the GP's leave-one-out ``residuals`` ``(m, d_x)`` with latent
    variances ``latent_var`` ``(m,)`` at the training ``outputs`` ``(m,
    d_y)``: the structure, gamma and tau of highest K-fold held-out log
    density (module docstring), refitted on all points.

    Returns ``(noise, held_out)``: the :class:`HeteroscedasticNoise` and the
    per-point held-out log densities ``(m,)`` at the chosen settings (what
    ``noise="auto"`` compares with the other noise models' LOO densities).
    """
    Y = jnp.asarray(outputs)
    r = jnp.asarray(residuals, Y.dtype)
    v = jnp.asarray(latent_var, Y.dtype)
    m, d = r.shape
    d_y = Y.shape[1]
    if structures is None:
        structures = STRUCTURES if d <= FULL_MAX_DIM else ("diagonal",)
    structures = tuple(structures)
    if not structures or any(st not in STRUCTURES for st in structures):
        raise ValueError(f"structures must be a non-empty subset of {STRUCTURES}, "
                         f"got {structures!r}")
    y_mean = jnp.mean(Y, 0)
    y_scale = jnp.where(jnp.std(Y, 0) > 0, jnp.std(Y, 0), 1.0)
    base = jax.random.normal(jax.random.key(0), (d_y, num_frequencies), Y.dtype)
    fold = np.arange(m) % folds
    fold = fold[np.random.default_rng(0).permutation(m)]
    # padded to a power of two (rows of weight zero in every mask): one
    # program serves every m up to the bucket's size
    m_pad = max(64, 1 << (m - 1).bit_length())
    pad = m_pad - m
    masks = np.vstack([fold[None] != np.arange(folds)[:, None], np.ones((1, m), bool)])
    masks = np.pad(masks, ((0, 0), (0, pad)))
    held_mask = np.pad(fold[None] == np.arange(folds)[:, None], ((0, 0), (0, pad)))
    r_pad = jnp.concatenate([r, jnp.zeros((pad, d), r.dtype)])
    v_pad = jnp.concatenate([v, jnp.ones((pad,), r.dtype)])
    taus_a = jnp.asarray(taus, Y.dtype)
    omegas = [base * np.sqrt(2.0 * gf / d_y) for gf in gamma_factors]
    phis = jnp.stack([_features(o, y_mean, y_scale, Y) for o in omegas])
    phis_pad = jnp.concatenate([phis, jnp.zeros((len(omegas), pad, phis.shape[2]),
                                                 phis.dtype)], axis=1)
    masks_a = jnp.asarray(masks, Y.dtype)

    def held_out(ll):  # (G, T, folds + 1, m_pad) -> (G, T, m), score (G, T)
        held = np.sum(np.asarray(ll, float)[..., :folds, :] * held_mask, axis=-2)
        held = held[..., :m]
        return held, np.where(np.all(np.isfinite(held), -1), held.mean(-1), -np.inf)

    # Staged search: the diagonal structure at every gamma and tau; the full
    # one (d_x (d_x + 1) / 2 functions and a d_x x d_x factorisation per
    # point, where the diagonal density is closed-form) at the diagonal's
    # gamma and every tau (every gamma when it is the only structure).
    best = None  # (score, structure, gamma index, b, w, held, tau index)
    gammas = list(range(len(omegas)))
    for structure in STRUCTURES:
        if structure not in structures:
            continue
        b, w, ll = _fit_grid(phis_pad[jnp.asarray(gammas)], r_pad, v_pad, masks_a,
                             taus_a, structure, steps)
        held, score = held_out(ll)
        i, t = np.unravel_index(int(np.argmax(score)), score.shape)
        if best is None or score[i, t] > best[0]:
            best = (score[i, t], structure, gammas[i], b[i, t, folds], w[i, t, folds],
                    held[i, t], t)
        if structure == "diagonal":
            gammas = [gammas[i]]
    _, structure, g, b, w, held, t = best
    rows, cols = _lower(d, structure)
    L = _cholesky_from_g(b[None] + phis[g] @ w, d, rows, cols)
    eig = np.linalg.eigvalsh(np.asarray(L @ jnp.swapaxes(L, -1, -2), float))
    noise = HeteroscedasticNoise(
        omegas[g], y_mean, y_scale, b, w, rows, cols,
        jnp.asarray(max(float(eig.min()), 0.0), r.dtype),
        jnp.asarray(gamma_factors[g] / d_y, r.dtype), jnp.asarray(taus[t], r.dtype))
    return noise, held
