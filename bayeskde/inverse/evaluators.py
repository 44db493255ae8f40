"""Fast evaluators of the inverse model's mixture likelihood for the samplers.

:func:`~.mixture.mixture_log_likelihood` scans over the components, each
scored by the one likelihood :func:`~.mixture.component_log_likelihood` on the
one predictive (M) :func:`~.mixture.component_moments`. The samplers evaluate
few outputs many times, so this module holds two factorisations of the same
moments, scored by the same likelihood:

* :func:`dense_log_likelihood` (Langevin moves, last importance stage): every
  component's mean and variance at once by two matrix products of
  :func:`dense_terms`;
* :func:`point_log_likelihood` (NUTS): the components' spectral filters
  factored by an SVD (:func:`filters`), after :func:`prune` drops components
  of negligible weight and :func:`truncate_spectrum` the eigenpairs whose
  a^2 lambda is negligible against s^2.

Both serve every noise model (Gaussian, residual, covariance function). The
tests check both against the scan.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax.scipy.special import logsumexp

from .heteroscedastic import HeteroscedasticNoise
from .mixture import InverseGPMixture, component_log_likelihood, projections
from .output_prior import log_prior

__all__ = [
    "dense_terms",
    "dense_log_likelihood",
    "prune",
    "SPECTRUM_TOL",
    "truncate_spectrum",
    "FILTER_RTOL",
    "Filters",
    "filters",
    "point_moments",
    "point_log_likelihood",
    "point_log_target",
]


def dense_terms(mix: InverseGPMixture):
    """The y-independent factors of (M) for every component, stacked so that a
    batch of outputs takes two matrix products instead of a scan: per pair p,
    ``B[p]`` ``(r, C d_x)`` = a_c^2 diag(1/v_c) U^T X and ``V[p]`` ``(r, C)`` =
    a_c^2 / v_c in the columns of the components of pair p (zero elsewhere)."""
    P, C = mix.lam.shape[0], mix.log_w.shape[0]
    d_x = mix.proj.shape[2]
    inv_v = 1.0 / (mix.amplitude[:, None] * mix.lam[mix.pair] + mix.noise[:, None])
    own = (mix.pair[None, :] == jnp.arange(P)[:, None]).astype(inv_v.dtype)  # (P, C)
    B = (mix.amplitude[:, None, None] * inv_v[:, :, None]
         * mix.proj[mix.pair])  # (C, r, d_x)
    B = jnp.einsum("pc,crd->prcd", own, B).reshape(P, -1, C * d_x)
    V = jnp.einsum("pc,cr->prc", own, mix.amplitude[:, None] ** 2 * inv_v)
    prior_var = mix.amplitude * jnp.sum(mix.alpha[mix.pair], axis=1)  # (C,)
    return B, V, prior_var


def dense_log_likelihood(mix: InverseGPMixture, terms, y, xs, test_noise):
    """log p(x_i | y_ij, D) for outputs ``y`` ``(b, N, d_y)`` and their test
    inputs ``xs`` ``(b, d_x)``: :func:`~.mixture.mixture_log_likelihood_each`
    with every component's moments (M) at once from :func:`dense_terms` (two
    matrix products instead of a scan; for the small batches of the Langevin
    moves), each scored by :func:`~.mixture.component_log_likelihood`."""
    b, N, d = y.shape
    B, V, prior_var = terms
    C, d_x = mix.log_w.shape[0], xs.shape[1]
    A = projections(mix, y.reshape(b * N, d))  # (P, bN, r)
    mean = (jnp.einsum("pnr,prk->nk", A, B).reshape(b, N, C, d_x)
            + mix.x_mean[None, None, None])
    var_f = (prior_var[None] - jnp.einsum("pnr,prc->nc", A**2, V)).reshape(b, N, C)

    def per_row(mean_b, var_b, x_b, y_b):
        def per_comp(mu, vf, s2):
            return component_log_likelihood(mu, vf, s2, x_b[None], test_noise,
                                            mix.noise_model, y_b)[0]

        ll = jax.vmap(per_comp, in_axes=(1, 1, 0), out_axes=1)(
            mean_b, var_b, mix.noise)  # (N, C)
        return logsumexp(ll + mix.log_w[None], axis=-1)

    return jax.vmap(per_row)(mean, var_f, xs, y)


def prune(mix: InverseGPMixture, tol: float = 1e-6) -> InverseGPMixture:
    """The components holding all but ``tol`` of the weight (renormalised),
    and only the pairs they use: fewer projections per NUTS step."""
    lw = np.asarray(mix.log_w, float)
    order = np.argsort(-lw)
    cum = np.cumsum(np.exp(lw[order]))
    keep = np.sort(order[:int(np.searchsorted(cum, 1.0 - tol)) + 1])
    pair = np.asarray(mix.pair)[keep]
    pairs, new_pair = np.unique(pair, return_inverse=True)
    lwk = lw[keep] - np.logaddexp.reduce(lw[keep])
    dt = mix.lam.dtype
    return mix._replace(
        U=mix.U[pairs], lam=mix.lam[pairs], proj=mix.proj[pairs],
        alpha=mix.alpha[pairs], gamma=mix.gamma[pairs],
        pair=jnp.asarray(new_pair), amplitude=mix.amplitude[keep],
        noise=mix.noise[keep], log_w=jnp.asarray(lwk, dt))


#: Eigenpairs of a pair's spectrum that NUTS drops: a^2 lambda_j below this
#: fraction of s^2 (the largest amplitude and smallest noise of the pair's
#: components), see :func:`truncate_spectrum`.
SPECTRUM_TOL = 1e-2


def truncate_spectrum(mix: InverseGPMixture, tol: float = SPECTRUM_TOL
                      ) -> InverseGPMixture:
    """The mixture with each pair's eigenpairs of a^2 lambda_j < tol s^2 dropped
    (the pairs re-padded to the largest kept count; s^2 the residual density's
    smallest kernel variance where that is smaller).

    In (M) an eigenpair j enters the mean as a^2 lambda_j phi_j(y) proj_j /
    (a^2 lambda_j + s^2) and the latent variance as a^4 lambda_j^2 phi_j(y)^2 /
    (a^2 lambda_j + s^2), with A_j = k(y)^T U_j = lambda_j phi_j(y) (phi_j
    the Nystroem extension of eigenvector j, bounded): both shrink with
    a^2 lambda_j / s^2, so the dropped pairs move the log likelihood by
    O(tol) (measured on the 10-D sbibm task at 1e3 simulations: tol 1e-4
    keeps 406 of 1000 eigenpairs, |delta log p| <= 5e-4 nats out to the
    posterior's tails; the default 1e-2 keeps 156, |delta log p| <= 1e-2 nats,
    and the same C2ST; tested against the full spectrum). ``tol`` 0 keeps
    every nonzero eigenpair.
    Cost per NUTS gradient O(m r_kept) instead of O(m r)."""
    lam = np.asarray(mix.lam, float)  # (P, r)
    pair = np.asarray(mix.pair)
    P = lam.shape[0]
    amp = np.array([np.max(np.asarray(mix.amplitude)[pair == p]) for p in range(P)])
    s2 = np.array([np.min(np.asarray(mix.noise)[pair == p]) for p in range(P)])
    if isinstance(mix.noise_model, HeteroscedasticNoise):  # its narrowest noise
        s2 = np.minimum(s2, float(mix.noise_model.floor))
    elif mix.noise_model is not None:  # the residual density's kernel is narrower
        s2 = np.minimum(s2, float(np.min(np.asarray(mix.noise_model.eta))))
    kept = (amp[:, None] * lam >= tol * s2[:, None]) & (lam > 0)
    r = max(1, int(kept.sum(axis=1).max()))
    if r == lam.shape[1]:
        return mix
    idx = np.argsort(-lam, axis=1, kind="stable")[:, :r]  # (P, r): largest first
    U = jnp.stack([mix.U[p][..., idx[p]] for p in range(P)])
    return mix._replace(
        U=U, lam=jnp.take_along_axis(mix.lam, jnp.asarray(idx), 1),
        proj=jnp.take_along_axis(mix.proj, jnp.asarray(idx)[..., None], 1))


class Filters(NamedTuple):
    """The components' spectral filters G_cj = 1 / (lambda_j + s_c^2 / a_c^2)
    of their pair, factored G = W V (:func:`filters`): ``W`` ``(C, k)``,
    ``V`` ``(P, k, r)``."""

    W: jax.Array
    V: jax.Array


#: Relative singular value below which a pair's filter matrix is cut.
FILTER_RTOL = 1e-12


def filters(mix: InverseGPMixture, rtol: float = FILTER_RTOL) -> Filters:
    """(M) of component c is mu_c = sum_j A_j proj_j G_cj and var_f,c = a_c^2
    (sum_i alpha_i - sum_j A_j^2 G_cj) with G_cj = 1 / (lambda_j + s_c^2 /
    a_c^2) (the amplitude cancels): one pair's components differ only in the
    shift t_c = s_c^2 / a_c^2, and the Cauchy matrix [1 / (lambda_j + t_c)]
    over a posterior's narrow range of t has a rapidly decaying spectrum, so
    its SVD cut at ``rtol`` (k of a few, measured) factors every component's
    mean into k filtered projections of the pair: O(P k r d_x + C k d_x) a
    point instead of O(C r d_x)."""
    lam = np.asarray(mix.lam, float)
    pair = np.asarray(mix.pair)
    t = np.asarray(mix.noise, float) / np.asarray(mix.amplitude, float)
    P, r = lam.shape
    parts = []
    for p in range(P):
        c = np.nonzero(pair == p)[0]
        u, sv, vt = np.linalg.svd(1.0 / (lam[p][None] + t[c][:, None]),
                                  full_matrices=False)
        k = max(1, int(np.sum(sv > rtol * sv[0])))
        parts.append((c, u[:, :k] * sv[:k], vt[:k]))
    k = max(w.shape[1] for _, w, _ in parts)
    W = np.zeros((t.shape[0], k))
    V = np.zeros((P, k, r))
    for p, (c, w, v) in enumerate(parts):
        W[c, :w.shape[1]] = w
        V[p, :v.shape[0]] = v
    dt = mix.lam.dtype
    return Filters(jnp.asarray(W, dt), jnp.asarray(V, dt))


def point_moments(mix: InverseGPMixture, filt: Filters, y):
    """Every component's moments (M) at one output ``y`` ``(d_y,)`` through the
    factored filters ``filt`` (:func:`filters`): means ``(C, d_x)`` and
    variances of f ``(C,)``. Cost O(P m r + P k r d_x + C k d_x)."""
    A = projections(mix, y[None])[:, 0]  # (P, r)
    amp = mix.amplitude
    B = jnp.einsum("pkr,pr,prd->pkd", filt.V, A, mix.proj)
    Q = jnp.einsum("pkr,pr->pk", filt.V, A**2)
    mu = jnp.einsum("ck,ckd->cd", filt.W, B[mix.pair]) + mix.x_mean[None, :]
    vf = amp * (jnp.sum(mix.alpha[mix.pair], 1)
                - jnp.einsum("ck,ck->c", filt.W, Q[mix.pair]))
    return mu, vf


def point_log_likelihood(mix: InverseGPMixture, filt: Filters, y, x, test_noise):
    """log p(x | y, D) of one output ``y`` ``(d_y,)`` and input ``x``
    ``(d_x,)``: every component's moments (:func:`point_moments`) instead of a
    scan over components, each scored by
    :func:`~.mixture.component_log_likelihood`."""
    mu, vf = point_moments(mix, filt, y)
    ll = jax.vmap(lambda m, v, s: component_log_likelihood(
        m[None], v[None], s, x[None], test_noise, mix.noise_model, y[None])[0, 0])(
        mu, vf, mix.noise)
    return logsumexp(ll + mix.log_w)


def point_log_target(mix, transform, kind, params, z, x, test_noise):
    """log p(x | y, D) + log p(y) + log |dy/dz| at y = transform(z), the
    predictive's unnormalised log density in the prior's unconstrained
    coordinates z (the samplers' target); ``mix`` a (mixture, filters) pair
    (:func:`filters`), ``kind`` and ``params`` the output prior's."""
    y = transform(z)
    ll = point_log_likelihood(*mix, y, x, test_noise)
    lp = log_prior(kind, params, y[None])[0]
    return ll + lp + jnp.sum(transform.log_abs_det_jacobian(z, y))
