"""The inverse model's evidence and its NumPyro model.

The forward GP (F) of :mod:`bayeskde.inverse`,

    x_k = f_k(y) + eps,  f_k ~ GP(0, a^2 phi(K)),  eps ~ N(0, s^2),  k = 1..d_x,

has, for a (rate, degree) pair with phi(K) = U diag(lambda) U^T and
v_j = a^2 lambda_j + s^2, the log evidence

    log p(X | Y, gamma, d, a^2, s^2) = -(d_x / 2) sum_j log v_j
        - (1/2) sum_{j,k} (U^T X)_jk^2 / v_j - (m d_x / 2) log 2 pi      (E)

(Rasmussen and Williams 2006, eq. (2.30), in the eigenbasis), read from the
spectra of :func:`~.data.prepare_inverse_gp_data`. The pairs are summed out
exactly: p(X | Y, a^2, s^2) = sum_p p(p) p(X | Y, p, a^2, s^2).

:func:`inverse_gp_model` is the NumPyro model: log-normal priors on a^2 and
s^2 and an observed site ``x`` whose distribution, :class:`SpectralGPEvidence`,
has that sum as its ``log_prob`` and the model's own draw of X
(:func:`~.replicates.simulate`) as its ``sample``, so
``numpyro.infer.Predictive`` simulates from the model (prior or posterior
predictive) and simulation-based calibration runs from the library.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import numpyro
import numpyro.distributions as dist
from jax.scipy.special import logsumexp
from jaxtyping import Array, Float
from numpyro.distributions import constraints

from .data import InverseGPData, InverseGPPrior, Memo
from .replicates import simulate

__all__ = [
    "pair_log_evidence",
    "pair_log_evidence_change",
    "pair_log_joint_host",
    "pair_log_joint",
    "per_pair",
    "SpectralGPEvidence",
    "observed_inputs",
    "inverse_gp_model",
]


def pair_log_evidence(
    data: InverseGPData, amplitude: Float[Array, "*pairs"],
    noise: Float[Array, "*pairs"],
) -> Float[Array, "n_gamma n_deg"]:
    """log p(X | Y, gamma, d, a^2, s^2) of (F) for every grid pair, from the
    spectra: with v = a^2 lambda + s^2 (lambda = 0 for the eigenvalues below
    working precision),

        -(d_x / 2) sum_j log v_j - (1/2) sum_{j,k} (U^T X)_jk^2 / v_j
        - (m d_x / 2) log 2 pi.

    ``amplitude`` and ``noise`` are scalars shared by every pair or
    ``(n_gamma, D)`` arrays, one value per pair.

    Cost O(n_kept) <= O(n_gamma D m).
    """
    m, d_x = data.X.shape
    shape = data.n_rest.shape
    amplitude, noise = jnp.asarray(amplitude), jnp.asarray(noise)
    if amplitude.ndim or noise.ndim:
        amp = jnp.broadcast_to(amplitude, shape).reshape(-1)[data.segment]
        v = amp * data.lam + jnp.broadcast_to(noise, shape).reshape(-1)[data.segment]
    else:
        v = amplitude * data.lam + noise

    logdet = per_pair(data, jnp.log(v)) + data.n_rest * jnp.log(noise)
    quad = per_pair(data, data.q / v) + data.q_rest / noise
    return (-0.5 * d_x * logdet - 0.5 * quad
            - 0.5 * m * d_x * jnp.log(2.0 * jnp.pi))


def per_pair(data, a):
    """Sum ``a`` (one value per kept eigenvalue) over each pair: ``(n_gamma, D)``."""
    shape = data.n_rest.shape
    return jax.ops.segment_sum(a, data.segment, shape[0] * shape[1]).reshape(shape)


def pair_log_evidence_change(
    data: InverseGPData, log_amplitude0: Float[Array, "n_gamma n_deg"],
    log_noise0: Float[Array, "n_gamma n_deg"],
    log_amplitude: Float[Array, "n_gamma n_deg"],
    log_noise: Float[Array, "n_gamma n_deg"],
) -> Float[Array, "n_gamma n_deg"]:
    """log p(X | Y, p, a^2, s^2) - log p(X | Y, p, a0^2, s0^2) of every pair p,
    in a form whose rounding error is relative to the change, not to the
    evidence (u = log a^2, v = log s^2, one value per pair).

    :func:`pair_log_evidence` is a sum of O(m d_x) terms whose total reaches
    1e5 at m = 1e5, so in float32 its value carries an absolute error of about
    1e-2 nats, larger than the differences a quadrature grid resolves. Here,
    with w0 = a0^2 lambda + s0^2 and dw = a0^2 expm1(u - u0) lambda
    + s0^2 expm1(v - v0) (so w = w0 + dw exactly in real arithmetic), it is::

        -(d_x / 2) [sum_j log1p(dw_j / w0_j) + n_rest (v - v0)]
        - (1/2) [-sum_j q_j dw_j / (w0_j (w0_j + dw_j))
                 + q_rest e^{-v0} expm1(v0 - v)],

    each term small where the change is small, so the error of the sum is
    relative to the change. Cost O(n_kept).
    """
    d_x = data.X.shape[1]
    seg = data.segment

    def each(a):
        return a.reshape(-1)[seg]

    a0, s0 = jnp.exp(log_amplitude0), jnp.exp(log_noise0)
    da = a0 * jnp.expm1(log_amplitude - log_amplitude0)
    ds = s0 * jnp.expm1(log_noise - log_noise0)
    w0 = each(a0) * data.lam + each(s0)
    dw = each(da) * data.lam + each(ds)
    logdet = (per_pair(data, jnp.log1p(dw / w0))
              + data.n_rest * (log_noise - log_noise0))
    quad = (-per_pair(data, data.q * dw / (w0 * (w0 + dw)))
            + data.q_rest * jnp.exp(-log_noise0) * jnp.expm1(log_noise0 - log_noise))
    return -0.5 * d_x * logdet - 0.5 * quad


def pair_log_joint_host(
    data: InverseGPData, amplitude: np.ndarray, noise: np.ndarray,
) -> np.ndarray:
    """:func:`pair_log_joint` evaluated in float64 with NumPy, whatever JAX's
    precision: the anchor that :func:`pair_log_evidence_change` is added to
    (``amplitude`` and ``noise`` ``(n_gamma, D)`` arrays). Cost O(n_kept)."""
    shape = data.n_rest.shape
    n_pairs = shape[0] * shape[1]
    m, d_x = data.X.shape
    seg = np.asarray(data.segment)
    lam, q = (np.asarray(a, np.float64) for a in (data.lam, data.q))
    amp = np.broadcast_to(np.asarray(amplitude, np.float64), shape).reshape(-1)
    noi = np.broadcast_to(np.asarray(noise, np.float64), shape).reshape(-1)
    w = amp[seg] * lam + noi[seg]
    n_rest = np.asarray(data.n_rest, np.float64).reshape(-1)
    q_rest = np.asarray(data.q_rest, np.float64).reshape(-1)
    logdet = np.bincount(seg, np.log(w), n_pairs) + n_rest * np.log(noi)
    quad = np.bincount(seg, q / w, n_pairs) + q_rest / noi
    ev = -0.5 * d_x * logdet - 0.5 * quad - 0.5 * m * d_x * np.log(2.0 * np.pi)
    return ev.reshape(shape) + np.asarray(data.log_pair_prior, np.float64)


def pair_log_joint(
    data: InverseGPData, amplitude: Float[Array, "*pairs"],
    noise: Float[Array, "*pairs"],
) -> Float[Array, "n_gamma n_deg"]:
    """log p(gamma, d) + log p(X | Y, gamma, d, a^2, s^2) for every grid pair
    (:func:`pair_log_evidence` plus the pairs' prior): the conditional
    posterior of the pairs given (a^2, s^2) up to a constant."""
    return data.log_pair_prior + pair_log_evidence(data, amplitude, noise)


class SpectralGPEvidence(dist.Distribution):
    """p(X | Y, a^2, s^2) of (F) with the (rate, degree) pairs summed out: a
    distribution over the ``(m, d_x)`` inputs X at the training outputs Y.

    ``log_prob(X)`` is logsumexp over the pairs of :func:`pair_log_joint`
    (eq. (E) plus the pairs' prior), read from the precomputed spectra of
    ``data``: it is defined at the X those spectra were computed from (the
    observed inputs, as NumPyro and ArviZ evaluate an observed site) and is NaN
    at any other value, never a silently wrong number. ``sample`` draws X
    from the model at Y (:func:`~.replicates.simulate`: a pair from its
    prior, f from the GP prior, then the noise), run on the host through
    ``jax.pure_callback`` so it serves the exact and the low-rank evidence
    alike and batches over draws under ``vmap``: ``numpyro.infer.Predictive``
    gives prior-predictive draws and, from posterior draws of (a^2, s^2),
    the marginal posterior predictive. (The fit's posterior predictive check
    uses the sharper conditional replicates of
    :func:`~.replicates.replicates`, f from its posterior.)

    Args:
        data: :class:`~.data.InverseGPData`.
        amplitude, noise: a^2 and s^2 (scalars or a batch).
        log_joint: the pairs' :func:`pair_log_joint` at (a^2, s^2) if already
            computed.
        memo: a :class:`~.data.Memo` for the replicates' eigensystems.

    Cost: ``log_prob`` O(n_kept); ``sample`` O(m^3) per distinct pair drawn
    (memoised) plus O(n m r d_x) for n draws.
    """

    arg_constraints = {"amplitude": constraints.positive,
                       "noise": constraints.positive}
    support = constraints.real_matrix
    pytree_data_fields = ("amplitude", "noise", "log_joint")
    pytree_aux_fields = ("data", "memo")

    def __init__(self, data: InverseGPData, amplitude, noise, log_joint=None,
                 *, memo: Memo | None = None, validate_args=None):
        self.data = data
        self.memo = memo
        self.amplitude = jnp.asarray(amplitude, data.X.dtype)
        self.noise = jnp.asarray(noise, data.X.dtype)
        batch_shape = jnp.broadcast_shapes(jnp.shape(self.amplitude),
                                           jnp.shape(self.noise))
        if log_joint is None:
            log_joint = jnp.vectorize(lambda a, s: pair_log_joint(data, a, s),
                                      signature="(),()->(g,d)")(self.amplitude,
                                                                self.noise)
        self.log_joint = log_joint
        super().__init__(batch_shape=batch_shape, event_shape=tuple(data.X.shape),
                         validate_args=validate_args)

    def log_prob(self, value):
        data = self.data
        ev = logsumexp(self.log_joint, axis=(-2, -1))
        observed = observed_inputs(data)
        scale = jnp.max(jnp.abs(observed))
        tol = 64 * jnp.finfo(observed.dtype).eps * jnp.maximum(scale, 1.0)
        same = jnp.all(jnp.abs(jnp.asarray(value, observed.dtype) - observed) <= tol,
                       axis=(-2, -1))
        return jnp.where(same, ev, jnp.nan)

    def sample(self, key, sample_shape=()):
        data, memo = self.data, self.memo
        shape = tuple(sample_shape) + tuple(self.batch_shape)
        amp = jnp.broadcast_to(self.amplitude, shape)
        noi = jnp.broadcast_to(self.noise, shape)
        typed = jnp.issubdtype(key.dtype, jax.dtypes.prng_key)
        key_data = jax.random.key_data(key) if typed else key
        out_shape = jax.ShapeDtypeStruct(shape + tuple(data.X.shape), data.X.dtype)

        def host(kd, a, s):
            kd = np.asarray(kd)
            k = jax.random.wrap_key_data(kd.reshape(-1, kd.shape[-1])[0])
            lead = np.shape(a)
            x, _ = simulate(k, data, np.reshape(a, -1), np.reshape(s, -1), memo)
            return np.asarray(x, data.X.dtype).reshape(lead + tuple(data.X.shape))

        return jax.pure_callback(host, out_shape, key_data, amp, noi,
                                 vmap_method="broadcast_all")


def observed_inputs(data: InverseGPData) -> Float[Array, "m d_x"]:
    """The observed inputs X the spectra of ``data`` were computed from (the
    value of the model's observed site ``x``)."""
    return data.X + data.x_mean[None, :]


def inverse_gp_model(data: InverseGPData, prior: InverseGPPrior, X=None, *,
                     memo: Memo | None = None) -> None:
    """NumPyro model of (F) with (gamma, d) summed out.

    Sites: latent ``log_amplitude``, ``log_noise`` (Normal priors centred on
    the log variance of the targets, :class:`~.data.InverseGPPrior`);
    deterministic ``amplitude``, ``noise``, ``pair_log_joint`` ``(n_gamma, D)``
    (normalise it per draw for the conditional posterior of the pairs);
    observed ``x`` ``(m, d_x)`` (:class:`SpectralGPEvidence`; ``X`` the
    observed inputs, ``None`` to simulate them, e.g. with
    ``numpyro.infer.Predictive``).
    """
    log_a = numpyro.sample("log_amplitude", dist.Normal(
        data.x_scale + prior.log_amplitude_loc, prior.log_amplitude_scale))
    log_s = numpyro.sample("log_noise", dist.Normal(
        data.x_scale + prior.log_noise_loc, prior.log_noise_scale))
    a = numpyro.deterministic("amplitude", jnp.exp(log_a))
    s = numpyro.deterministic("noise", jnp.exp(log_s))
    lj = numpyro.deterministic("pair_log_joint", pair_log_joint(data, a, s))
    numpyro.sample("x", SpectralGPEvidence(data, a, s, lj, memo=memo), obs=X)
