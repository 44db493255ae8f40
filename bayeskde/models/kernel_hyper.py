"""Kernel hyperparameter model: a posterior over transform degrees and bandwidths.

Ghosh et al. ("Learning Kernels for Structured Prediction using Polynomial Kernel
Transformations", section 7) leave as future work "automated learning of kernel
parameters d1, d2 and gamma by using distributional priors on them and optimizing
for data likelihood". This module writes that model.

Parameters. Degrees d1 in 1..D1 and d2 in 1..D2 of the monomial transforms
phi(K) = sum_i alpha_i K^(i), psi(G) = sum_j beta_j G^(j) (seed eqs. 14-16; K^(i)
the i-th Hadamard power), RBF rates gamma_x, gamma_y of the base kernels
K = exp(-gamma_x D_X), G = exp(-gamma_y D_Y), a ridge r and an output amplitude a^2.
Given (d1, d2, gamma_x, gamma_y), alpha and beta are the top singular vectors of
the HSIC matrix C_ij = HSIC(K^(i), G^(j)) restricted to its leading d1 x d2 block
(seed Theorem 4.1), so they are functions of the draw, not parameters.

Input side: an exact likelihood. With the centred outputs Y_c (m x d_y), each
output column is a GP draw under the learned input kernel:

    y_k ~ N(0, S),  S = a^2 (phi(K) + r I),  k = 1..d_y, independent,

    log p(Y | theta, d) = -(d_y / 2) log|S| - (1/2) tr(S^-1 Y_c Y_c^T)
                          - (m d_y / 2) log(2 pi).                           (A)

(A) depends on the outputs only through the linear output Gram Y_c Y_c^T: it is
the (singular) Wishart density of Y_c Y_c^T ~ W_m(d_y, S) written as a density of
Y_c, i.e. the multi-output GP evidence, exact when the output kernel is linear.
The tests check (A) against a direct multivariate-normal log density.

Output side: a tempered factor. The output-side parameters (d2, gamma_y) change
the output features themselves, so there is no density of the data to write for
them; the TGP's own criterion, the KL divergence between the output and input
Gaussians (Bo and Sminchisescu 2010, eq. 13),

    KL_{d1,d2} = KL(N(0, psi(G) + r I) || N(0, phi(K) + r I))
               = (1/2) [tr(Kt^-1 Gt) - m + log|Kt| - log|Gt|],

enters as exp(-tau KL), a generalised-Bayes loss (Bissiri, Holmes and Walker 2016).
Because -KL(p||q) = E_{f~p} log q(f) + H(p), exp(-KL) is the geometric mean over
output-feature draws f ~ N(0, Gt) of their likelihood under the input GP, times an
entropy term. The temperature rule: tau = 1 counts the output kernel as one
pseudo-observation, i.e. one m-vector drawn from the output GP, worth exactly one
of the d_y observed columns in (A); it can never outweigh the real data when
d_y >= 1. ``kl_temperature=0`` drops the factor (then d2 and gamma_y are informed
only through alpha).

Discrete degrees are marginalised exactly: for every draw of the continuous
parameters the model evaluates all D1 x D2 pairs and adds
logsumexp_{d1,d2} [log p(d1, d2) + (A) - tau KL] as a factor; the posterior
probability of every pair is the average over draws of the conditional
softmax (Rao-Blackwellised), never a discrete random walk.

Only the monomial basis is modelled: its transforms of an RBF are PSD (non-negative
alpha, Schur product theorem), so every pair has a Cholesky factor. A Gegenbauer
transform can be indefinite and would need an eigendecomposition per pair, whose
gradient is unstable at the near-repeated eigenvalues of RBF Grams.

Cost per density evaluation: O(D1 D2 (m^3 + m^2 d_y)) time (two Cholesky factors
per pair), O(D1 D2 m^2) memory.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import jax
import jax.numpy as jnp
import jax.scipy.linalg as jsl
import numpy as np
import numpyro
import numpyro.distributions as dist
from jax.scipy.special import logsumexp
from jaxtyping import Array, Float

from .._typing import ArrayLike
from .._validation import (
    as_float_array,
    check_finite,
    check_integer,
    check_nonnegative,
    check_positive,
)
from ..kernels import hsic_stacks, squared_distances

__all__ = [
    "KernelHyperPrior",
    "KernelHyperData",
    "DegreeTerms",
    "prepare_kernel_hyper_data",
    "default_kernel_hyper_prior",
    "degree_terms",
    "kernel_hyper_model",
    "loo_log_likelihood",
    "posterior_predictive_draw",
    "top_singular_pair",
]


class KernelHyperPrior(NamedTuple):
    """Priors of :func:`kernel_hyper_model`.

    Attributes:
        max_degree_x, max_degree_y: the degree supports 1..D1 and 1..D2.
        degree_decay: log p(d1, d2) = -decay (d1 + d2) + const (0: uniform).
        log_gamma_x_loc, log_gamma_x_scale: Normal prior on log gamma_x.
        log_gamma_y_loc, log_gamma_y_scale: Normal prior on log gamma_y.
        log_ridge_loc, log_ridge_scale: Normal prior on log r.
        log_amplitude_loc, log_amplitude_scale: Normal prior on log a^2.
        kl_temperature: tau >= 0 of the output-side factor (module docstring).
    """

    max_degree_x: int = 4
    max_degree_y: int = 4
    degree_decay: float = 0.0
    log_gamma_x_loc: float = 0.0
    log_gamma_x_scale: float = 1.0
    log_gamma_y_loc: float = 0.0
    log_gamma_y_scale: float = 1.0
    log_ridge_loc: float = math.log(1e-2)
    log_ridge_scale: float = 2.0
    log_amplitude_loc: float = 0.0
    log_amplitude_scale: float = 1.0
    kl_temperature: float = 1.0


class KernelHyperData(NamedTuple):
    """Validated data: squared distances and centred outputs."""

    Dx2: Float[Array, "m m"]
    Dy2: Float[Array, "m m"]
    Y: Float[Array, "m d_y"]
    y_mean: Float[Array, " d_y"]


class DegreeTerms(NamedTuple):
    """Per degree pair (d1, d2) = (i + 1, j + 1) at one draw of the continuous
    parameters: ``log_evidence`` (A), ``kl``, ``log_joint`` = log p(d) + (A) -
    tau KL, and the transform weights ``alpha`` ``(D1, D2, D1)`` and ``beta``
    ``(D1, D2, D2)`` (zero beyond the pair's degrees)."""

    log_evidence: Float[Array, "n_dx n_dy"]
    kl: Float[Array, "n_dx n_dy"]
    log_joint: Float[Array, "n_dx n_dy"]
    alpha: Float[Array, "n_dx n_dy n_dx"]
    beta: Float[Array, "n_dx n_dy n_dy"]


def _as_2d(a, name):
    arr = as_float_array(a, name)
    if arr.ndim == 1:
        arr = arr[:, None]
    if arr.ndim != 2:
        raise ValueError(f"{name} must be 1- or 2-dimensional, got shape {arr.shape}")
    return arr


def prepare_kernel_hyper_data(
    X: Float[ArrayLike, "n_x ..."], Y: Float[ArrayLike, "n_y ..."],
    center: bool = True,
) -> KernelHyperData:
    """Validate ``X`` ``(m, d_x)`` and ``Y`` ``(m, d_y)`` (1-D allowed) and
    precompute squared distances and centred outputs. O(m^2 (d_x + d_y)).

    ``center=False`` keeps Y as given (a zero-mean GP prior taken literally, as
    simulation-based calibration needs).

    Raises:
        ValueError: NaN/inf, empty or mismatched data, fewer than 3 points, or
            constant outputs (no evidence to compute).
    """
    X = _as_2d(X, "X")
    Y = _as_2d(Y, "Y")
    if X.shape[0] != Y.shape[0]:
        raise ValueError(
            f"X and Y must have the same number of rows, got {X.shape[0]} and "
            f"{Y.shape[0]}"
        )
    if X.shape[0] < 3:
        raise ValueError(f"need at least 3 training points, got {X.shape[0]}")
    if not np.any(np.std(np.asarray(Y), axis=0) > 0):
        raise ValueError("Y is constant: the GP evidence has nothing to explain")
    X, Y = jnp.asarray(X), jnp.asarray(Y)
    y_mean = jnp.mean(Y, axis=0) if center else jnp.zeros(Y.shape[1], Y.dtype)
    return KernelHyperData(
        squared_distances(X, X), squared_distances(Y, Y), Y - y_mean[None, :], y_mean
    )


def _median_log_gamma(D2):
    d2 = np.asarray(D2)[np.triu_indices(D2.shape[0], 1)]
    med = float(np.median(d2[d2 > 0])) if np.any(d2 > 0) else 1.0
    return math.log(1.0 / med)


def default_kernel_hyper_prior(data: KernelHyperData, **overrides) -> KernelHyperPrior:
    """Priors centred on the data: log gamma at minus the log median squared
    distance (the median heuristic), log a^2 at the log output variance.

    Any :class:`KernelHyperPrior` field can be overridden by keyword.
    """
    base = KernelHyperPrior(
        log_gamma_x_loc=_median_log_gamma(data.Dx2),
        log_gamma_y_loc=_median_log_gamma(data.Dy2),
        log_amplitude_loc=math.log(float(jnp.mean(data.Y**2))),
    )
    bad = set(overrides) - set(KernelHyperPrior._fields)
    if bad:
        raise ValueError(f"unknown prior fields {sorted(bad)}")
    prior = base._replace(**overrides)
    _check_prior(prior)
    return prior


def _check_prior(prior: KernelHyperPrior) -> None:
    check_integer(prior.max_degree_x, "max_degree_x", minimum=1)
    check_integer(prior.max_degree_y, "max_degree_y", minimum=1)
    check_nonnegative(prior.kl_temperature, "prior.kl_temperature")
    check_finite(prior.degree_decay, "prior.degree_decay")
    for f in prior._fields:
        if f.endswith("_scale"):
            check_positive(getattr(prior, f), f"prior.{f}")
        elif f.endswith("_loc"):
            check_finite(getattr(prior, f), f"prior.{f}")


def top_singular_pair(
    C: Float[Array, "n_dx n_dy"], mask_x: Float[Array, " n_dx"],
    mask_y: Float[Array, " n_dy"], n_iter: int = 60,
) -> tuple[Float[Array, " n_dx"], Float[Array, " n_dy"]]:
    """Top singular vectors of the masked block ``C * mask_x mask_y^T`` by power
    iteration (differentiable, unlike an SVD with repeated zero singular values).

    For the monomial basis C >= 0, so the Perron vectors are non-negative and a
    positive start converges to them; the sign is fixed as in
    :func:`bayeskde.kernels.transforms.fit_polynomial_transform`. O(n_iter D1 D2).
    """
    Cm = C * mask_x[:, None] * mask_y[None, :]
    tiny = jnp.finfo(C.dtype).tiny

    def _unit(v):
        return v / jnp.maximum(jnp.linalg.norm(v), tiny)

    def _step(_, v):
        return _unit(Cm.T @ _unit(Cm @ v))

    v = jax.lax.fori_loop(0, n_iter, _step, _unit(mask_y))
    u = _unit(Cm @ v)
    sign = jnp.where(jnp.sum(u) + jnp.sum(v) < 0, -1.0, 1.0).astype(C.dtype)
    return sign * u, sign * v


def _hadamard_powers(D2, gamma, degree):
    powers = jnp.arange(1, degree + 1, dtype=D2.dtype)
    # exp(-gamma D)^i = exp(-i gamma D): the monomial basis of an RBF.
    return jnp.exp(-gamma * powers[:, None, None] * D2[None])


def _input_gram(alpha, K_stack, ridge):
    """phi(K) + r I for transform weights ``alpha`` over the Hadamard powers."""
    eye = jnp.eye(K_stack.shape[-1], dtype=K_stack.dtype)
    return jnp.tensordot(alpha, K_stack, 1) + ridge * eye


def _log_degree_prior(prior: KernelHyperPrior, dtype):
    dx = jnp.arange(1, prior.max_degree_x + 1, dtype=dtype)
    dy = jnp.arange(1, prior.max_degree_y + 1, dtype=dtype)
    logits = -prior.degree_decay * (dx[:, None] + dy[None, :])
    return logits - logsumexp(logits)


def degree_terms(
    data: KernelHyperData,
    gamma_x: Float[Array, ""],
    gamma_y: Float[Array, ""],
    ridge: Float[Array, ""],
    amplitude: Float[Array, ""],
    prior: KernelHyperPrior,
) -> DegreeTerms:
    """Evidence (A), twin KL and log joint of every degree pair (module docstring).

    Jit-safe (``prior`` is static configuration). Cost O(D1 D2 (m^3 + m^2 d_y)).
    """
    Dx, Dy = prior.max_degree_x, prior.max_degree_y
    m, d_y = data.Y.shape
    dtype = data.Dx2.dtype
    K_stack = _hadamard_powers(data.Dx2, gamma_x, Dx)
    G_stack = _hadamard_powers(data.Dy2, gamma_y, Dy)
    C = hsic_stacks(K_stack, G_stack)
    idx_x = jnp.arange(Dx)
    idx_y = jnp.arange(Dy)

    def pair(i, j):
        mask_x = (idx_x <= i).astype(dtype)
        mask_y = (idx_y <= j).astype(dtype)
        alpha, beta = top_singular_pair(C, mask_x, mask_y)
        Kt = _input_gram(alpha, K_stack, ridge)
        Gt = _input_gram(beta, G_stack, ridge)
        Lk = jnp.linalg.cholesky(Kt)
        Lg = jnp.linalg.cholesky(Gt)
        logdet_k = 2.0 * jnp.sum(jnp.log(jnp.diagonal(Lk)))
        logdet_g = 2.0 * jnp.sum(jnp.log(jnp.diagonal(Lg)))
        z = jsl.solve_triangular(Lk, data.Y, lower=True)
        evidence = (
            -0.5 * d_y * (logdet_k + m * jnp.log(amplitude))
            - 0.5 * jnp.sum(z * z) / amplitude
            - 0.5 * m * d_y * jnp.log(2.0 * jnp.pi)
        )
        M = jsl.solve_triangular(Lk, Lg, lower=True)
        kl = 0.5 * (jnp.sum(M * M) - m + logdet_k - logdet_g)
        return evidence, kl, alpha, beta

    ii, jj = jnp.meshgrid(idx_x, idx_y, indexing="ij")
    ev, kl, alpha, beta = jax.vmap(jax.vmap(pair))(ii, jj)
    log_joint = _log_degree_prior(prior, dtype) + ev - prior.kl_temperature * kl
    return DegreeTerms(ev, kl, log_joint, alpha, beta)


def kernel_hyper_model(data: KernelHyperData, prior: KernelHyperPrior) -> None:
    """NumPyro model: the posterior over (d1, d2, gamma_x, gamma_y, r, a^2).

    Sites: latent ``log_gamma_x``, ``log_gamma_y``, ``log_ridge``,
    ``log_amplitude``; deterministic ``gamma_x``, ``gamma_y``, ``ridge``,
    ``amplitude`` and ``degree_log_joint`` ``(D1, D2)`` (normalise it per draw for
    the conditional degree posterior); factor ``marginal`` (the degrees summed out).
    """

    def latent(name):
        loc = getattr(prior, f"log_{name}_loc")
        scale = getattr(prior, f"log_{name}_scale")
        log_v = numpyro.sample(f"log_{name}", dist.Normal(loc, scale))
        return numpyro.deterministic(name, jnp.exp(log_v))

    gx, gy, r, a = (latent(n) for n in ("gamma_x", "gamma_y", "ridge", "amplitude"))
    terms = degree_terms(data, gx, gy, r, a, prior)
    numpyro.deterministic("degree_log_joint", terms.log_joint)
    numpyro.factor("marginal", logsumexp(terms.log_joint))


def loo_log_likelihood(
    data: KernelHyperData,
    gamma_x: Float[Array, ""],
    gamma_y: Float[Array, ""],
    ridge: Float[Array, ""],
    amplitude: Float[Array, ""],
    prior: KernelHyperPrior,
) -> Float[Array, " m"]:
    """log p(y_i | Y_-i, theta) per training point, degrees summed out.

    The GP evidence does not factorise over points, so PSIS-LOO takes the exact
    leave-one-out predictive instead of a pointwise likelihood (Burkner, Gabry and
    Vehtari 2020): per pair, with g = S^-1 y and s_ii = [S^-1]_ii,
    log p(y_i | y_-i, d) = log N(y_i; y_i - g_i / s_ii, 1 / s_ii) summed over
    output columns, and with w_d = p(d) exp(-tau KL_d) (a data-dependent prior
    over pairs),

        log p(y_i | Y_-i) = LSE_d(log w_d + L_d) - LSE_d(log w_d + L_d - l_{d,i}).

    Cost O(D1 D2 m^3).
    """
    terms = degree_terms(data, gamma_x, gamma_y, ridge, amplitude, prior)
    Dx, Dy = prior.max_degree_x, prior.max_degree_y
    K_stack = _hadamard_powers(data.Dx2, gamma_x, Dx)
    eye = jnp.eye(data.Y.shape[0], dtype=data.Y.dtype)

    def pointwise(alpha):
        S = amplitude * _input_gram(alpha, K_stack, ridge)
        Sinv = jsl.cho_solve((jnp.linalg.cholesky(S), True), eye)
        s = jnp.diagonal(Sinv)[:, None]
        g = Sinv @ data.Y
        return jnp.sum(
            -0.5 * jnp.log(2.0 * jnp.pi / s) - 0.5 * g * g / s, axis=1
        )

    ell = jax.vmap(pointwise)(terms.alpha.reshape(Dx * Dy, Dx))  # (pairs, m)
    lj = terms.log_joint.reshape(-1)
    return logsumexp(lj) - logsumexp(lj[:, None] - ell, axis=0)


def posterior_predictive_draw(
    key: jax.Array,
    data: KernelHyperData,
    gamma_x: Float[Array, ""],
    gamma_y: Float[Array, ""],
    ridge: Float[Array, ""],
    amplitude: Float[Array, ""],
    prior: KernelHyperPrior,
) -> tuple[Float[Array, "m d_y"], Array]:
    """One replicate of the training outputs from the model at one posterior draw.

    The degree pair is drawn from its conditional posterior softmax(log_joint)
    (the same weights that sum the degrees out of the model), then every output
    column from the input-side GP (A): y_k ~ N(0, a^2 (phi_d(K) + r I)), and the
    training mean is added back. Vmap it over posterior draws for the
    ``posterior_predictive`` group. Only the input side generates data; the
    tempered KL factor weighs the pairs but has no data to replicate.

    Returns:
        ``(y_rep, pair)``: ``(m, d_y)`` outputs and the flat pair index
        ``(d1 - 1) D2 + (d2 - 1)``.

    Cost O(D1 D2 m^3) (the pair weights) + O(m^2 d_y).
    """
    terms = degree_terms(data, gamma_x, gamma_y, ridge, amplitude, prior)
    Dx, Dy = prior.max_degree_x, prior.max_degree_y
    k_pair, k_y = jax.random.split(key)
    pair = jax.random.categorical(k_pair, terms.log_joint.reshape(-1))
    alpha = terms.alpha.reshape(Dx * Dy, Dx)[pair]
    K_stack = _hadamard_powers(data.Dx2, gamma_x, Dx)
    L = jnp.linalg.cholesky(amplitude * _input_gram(alpha, K_stack, ridge))
    z = jax.random.normal(k_y, data.Y.shape, data.Y.dtype)
    return L @ z + data.y_mean[None, :], pair
