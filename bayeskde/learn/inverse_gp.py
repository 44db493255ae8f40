"""Fit and predict with the generative inverse model.

The model is :mod:`bayeskde.models.inverse_gp`.

* :func:`fit_inverse_gp`: NUTS (4 chains by default) on the amplitude and noise,
  the kernel rate and degree summed out exactly on their grid; InferenceData
  with named dims, the posterior of every (rate, degree) pair, the MAP
  parameters, a convergence report (R-hat, bulk and tail ESS, divergences) and
  a posterior predictive replicate of the inputs per draw.
* :func:`inverse_gp_predictive` and :func:`inverse_gp_sample`
  (:mod:`bayeskde.learn.inverse_predictive`): the predictive distribution
  p(y* | x*, D) on a grid with resolution per output dimension (outputs of
  dimension <= 2) or by adaptive importance sampling (above), model-averaged
  over draws or at the MAP parameters, with its refined top-k modes and their
  masses, and draws of it.
* :class:`InverseGPRegressor`: the scikit-learn facade.
"""

from __future__ import annotations

import hashlib
import time
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from sklearn.base import BaseEstimator, RegressorMixin
from sklearn.exceptions import NotFittedError

from .. import infer
from .._validation import as_float_array, check_integer
from ..models.inverse_gp import (
    InverseGPData,
    InverseGPPrior,
    inverse_gp_model,
    pair_log_joint,
)
from ..models.inverse_gp_lowrank import lowrank_replicates
from ..models.inverse_gp_predictive import (
    _projections,
    exact_replicates,
    inverse_gp_mixture,
)
from ..models.inverse_noise import ResidualNoise, fit_residual_noise, gp_loo
from ..tgp.modes import Modes
from .inverse_predictive import (
    InverseGPPredictive,
    _draws,
    inverse_gp_predictive,
)
from .inverse_rank import RankReport, prepare_for_fit
from .inverse_sample import NUTSReport, inverse_gp_nuts, inverse_gp_sample
from .inverse_svi import svi_posterior
from .quadrature import quadrature_posterior

__all__ = [
    "NOISE",
    "ForwardNoise",
    "choose_forward_noise",
    "InverseGPFit",
    "fit_inverse_gp",
    "InverseGPPredictive",
    "inverse_gp_predictive",
    "inverse_gp_sample",
    "inverse_gp_nuts",
    "NUTSReport",
    "InverseGPRegressor",
]

_CONTINUOUS = ("amplitude", "noise")
#: At most this many LOO residuals make the residual noise density
#: (:func:`choose_forward_noise`).
RESIDUAL_MAX = 4000
#: The forward-noise models of :func:`fit_inverse_gp`.
NOISE = ("auto", "gaussian", "residual")


class ForwardNoise(NamedTuple):
    """The forward noise a fit uses (:func:`choose_forward_noise`).

    Attributes:
        kind: ``"gaussian"`` (the model's N(0, s^2 I), model-averaged as the
            predictive's ``mode`` says) or ``"residual"`` (the kernel density
            (R) of the MAP GP's leave-one-out residuals,
            :mod:`bayeskde.models.inverse_noise`).
        requested: what was asked (``"auto"``, ``"gaussian"``, ``"residual"``).
        residual: the :class:`~bayeskde.models.inverse_noise.ResidualNoise`
            (``None`` for ``kind="gaussian"`` unless it was computed for
            ``"auto"``'s comparison).
        loo_gaussian, loo_residual: the mean leave-one-out log density of x
            given y over the training pairs under either noise (``None``
            where not computed).
        loo_difference_se: the standard error of the mean of the per-point
            differences (residual minus Gaussian).
        bandwidth: the residual density's h.
    """

    kind: str
    requested: str
    residual: ResidualNoise | None = None
    loo_gaussian: float | None = None
    loo_residual: float | None = None
    loo_difference_se: float | None = None
    bandwidth: float | None = None


class InverseGPFit(NamedTuple):
    """Result of :func:`fit_inverse_gp`.

    Attributes:
        idata: InferenceData: posterior (``pair_log_joint`` on dims ``gamma``,
            ``degree``), sample_stats, posterior_predictive ``x`` (replicated
            inputs on dims ``sample``, ``input``), observed_data ``x``.
        pair_posterior: ``(n_gamma, D)`` posterior probability of every pair.
        map_params: the highest-density draw's ``amplitude``, ``noise`` and its
            most probable pair (``gamma``, ``degree``, ``pair_index``).
        report: :class:`bayeskde.infer.ConvergenceReport` (ESS threshold 400).
        runtime_s: preparation plus sampling wall time.
        data, prior: what the model saw.
        cache: the predictive's memo of the pairs' eigendecompositions (filled
            by :func:`inverse_gp_predictive`).
        approx: ``"exact"`` or ``"lowrank"`` (what ``approx="auto"`` chose).
        rank: the low-rank evidence's
            :class:`~bayeskde.learn.inverse_rank.RankReport` (``None`` exact).
    """

    idata: object
    pair_posterior: np.ndarray
    map_params: dict
    report: object
    runtime_s: float
    data: InverseGPData
    prior: InverseGPPrior
    cache: dict | None = None
    approx: str = "exact"
    rank: RankReport | None = None
    noise: ForwardNoise | None = None


def _train_U(mix, data, p):
    """The orthonormal U ``(m, r)`` of pair ``p`` of ``mix`` at the training
    outputs: the exact eigenvectors, or for a low-rank fit A(Y) Lambda^-1
    (A = k(Y)^T U = U Lambda for the feature map's Gram F F^T =
    U Lambda U^T), computed in row blocks; zero columns where lambda is."""
    if mix.basis is None:
        return mix.U[p]
    Y = jnp.asarray(data.Y, mix.lam.dtype)
    A = jnp.concatenate([_projections(mix, Y[i:i + 4096])[p]
                         for i in range(0, Y.shape[0], 4096)])
    lam = mix.lam[p]
    # A's rounding error is about eps lambda_max per entry, so A / lambda_j is
    # noise where lambda_j is within a few eps of lambda_max: in float32 on
    # two_moons at 1e4 those columns (lambda_j down to 5e-9 against 2,380)
    # made U^T U off the identity by 1.6e5 and the LOO residuals too wide (LOO
    # density 3.27 against float64's 4.04); kept above 10 eps lambda_max, U^T U
    # is the identity to 7e-3 and the LOO density 3.99
    ok = lam > 10 * jnp.finfo(lam.dtype).eps * jnp.max(lam)
    return jnp.where(ok[None], A / jnp.where(ok, lam, 1.0)[None], 0.0)


@jax.jit
def _gauss_loo_one(U, lam, X, amp, s2):
    r, var = gp_loo(U, lam, X, amp, s2)
    d = X.shape[1]
    return (-0.5 * jnp.sum(r**2, axis=1) / var
            - 0.5 * d * jnp.log(2 * jnp.pi * var))


def choose_forward_noise(fit, noise: str = "auto", *, n_draws: int = 100,
                         mode: str = "average") -> ForwardNoise:
    """The forward noise of a fit: Gaussian, residual, or (``"auto"``) the
    one of higher leave-one-out (LOO) log density of x given y on the
    training pairs.

    ``"residual"`` is the density (R) of :mod:`bayeskde.models.inverse_noise`
    at the MAP (rate, degree, amplitude, noise) of the fit, not an average
    over the posterior's draws: the residual density is nonparametric, so it
    absorbs most of what the draws' spread of noise levels expresses, and
    averaging it over the predictive's up to 256 components would multiply the
    cost of every evaluation of the predictive by that many (each component
    has its own m residuals). At the sbibm tasks' 1,000 simulations the pair
    posterior is concentrated (the MAP pair's mass is reported by
    ``bench/sbi.py``).

    ``"auto"`` compares the two predictives the user would get, by their exact
    LOO log density on the training data (never on test data): the Gaussian
    noise averaged over the components of ``mode`` / ``n_draws`` (the
    predictive's defaults), the residual density at the MAP (h chosen by the
    same criterion, one parameter from a grid of 48). It keeps the residual
    density only where its mean LOO log density is higher by more than two
    standard errors of the mean per-point difference: on data with Gaussian
    noise the two are close, and the Gaussian (the model's own likelihood, with
    the model average) is kept. Measured (``bench/sbi.py``,
    ``bench/inverse_defaults.py``): see ``docs/sbi.md``.

    Above :data:`RESIDUAL_MAX` training pairs the density keeps the LOO
    residuals of an evenly strided subset of that many (the residuals
    themselves are computed from all m pairs), and ``"auto"`` compares the
    two on that subset: a kernel density of 4,000 residuals already resolves
    a two-dimensional noise density well (Scott's factor 0.25), and every
    evaluation of the predictive costs O(m_res) per cell and test point. At
    m = 1e5 the full set made the bandwidth search O(48 m^2 d_x) and the
    S-shape's fit time out (900 s, measured; 26 s at m = 1e4).

    Cost: O(C m r d_x) for the C components (the pairs' spectra are the
    predictive's, memoised in ``fit.cache``) plus O(48 m_res^2 d_x) for the
    bandwidth, m_res = min(m, RESIDUAL_MAX).
    """
    if not isinstance(noise, str) or noise not in NOISE:
        raise ValueError(f"noise must be one of {NOISE}, got {noise!r}")
    if noise == "gaussian":
        return ForwardNoise("gaussian", noise)
    data, cache = fit.data, fit.cache
    dt = data.X.dtype
    X = jnp.asarray(data.X, dt)
    amp, s2 = fit.map_params["amplitude"], fit.map_params["noise"]
    mix_map = inverse_gp_mixture(data, *_draws(fit, "map", 1), cache=cache)
    U = _train_U(mix_map, data, 0)
    r, var = gp_loo(U, mix_map.lam[0], X, jnp.asarray(amp, dt),
                    jnp.asarray(s2, dt))
    m = X.shape[0]
    keep = np.unique(np.round(np.linspace(0, m - 1, min(m, RESIDUAL_MAX)))
                     .astype(int))
    res, loo_res = fit_residual_noise(r[keep],
                                      jnp.maximum(var[keep] - s2, 0.0))
    h = float(res.bandwidth)
    if noise == "residual":
        return ForwardNoise("residual", noise, res, None,
                            float(np.mean(loo_res)), None, h)
    mix = inverse_gp_mixture(data, *_draws(fit, mode, n_draws), cache=cache)
    Us = [_train_U(mix, data, p) for p in range(mix.lam.shape[0])]
    ll = np.stack([np.asarray(_gauss_loo_one(
        Us[int(mix.pair[c])], mix.lam[int(mix.pair[c])], X, mix.amplitude[c],
        mix.noise[c]), float) for c in range(mix.log_w.shape[0])])  # (C, m)
    lw = np.asarray(mix.log_w, float)[:, None]
    loo_gauss = np.logaddexp.reduce(ll + lw, axis=0)[keep]
    diff = np.asarray(loo_res, float) - loo_gauss
    se = float(np.std(diff, ddof=1) / np.sqrt(len(diff)))
    kind = "residual" if float(np.mean(diff)) > 2.0 * se else "gaussian"
    return ForwardNoise(kind, noise, res, float(np.mean(loo_gauss)),
                        float(np.mean(loo_res)), se, h)


def fit_inverse_gp(
    key: jax.Array, X, Y, prior: InverseGPPrior | None = None, *,
    method: str = "nuts", approx="auto", rank=None,
    num_warmup: int = 500, num_samples: int = 500,
    num_chains: int = 4, progress_bar: bool = True,
    posterior_predictive: bool = True, n_replicates: int = 100,
    num_steps: int = 2000, noise: str = "auto",
) -> InverseGPFit:
    """Posterior of the forward GP (F) of :mod:`bayeskde.models.inverse_gp`.

    Args:
        key: PRNG key.
        X: ``(m, d_x)`` inputs of the inverse problem (the forward GP's targets).
        Y: ``(m, d_y)`` outputs (the forward GP's inputs); 1-D allowed.
        prior: :class:`InverseGPPrior` (default: its defaults).
        method: ``"nuts"`` (``num_chains`` chains of ``num_warmup`` +
            ``num_samples``; ``report`` is a
            :class:`bayeskde.infer.ConvergenceReport`) or ``"quadrature"``
            (:func:`bayeskde.learn.quadrature.quadrature_posterior`:
            ``num_chains`` x ``num_samples`` independent draws of the same
            posterior, ``report`` a
            :class:`~bayeskde.learn.quadrature.QuadratureReport`). Use the
            quadrature when pairs of different amplitudes share the mass
            (NUTS's chains then stay in one mode each: R-hat above 1.01).
            ``"svi"`` (:func:`bayeskde.learn.inverse_svi.svi_posterior`): a
            Gaussian guide over (log a^2, log s^2) fitted by ``num_steps`` of
            Adam, then ``num_chains`` x ``num_samples`` draws of it; ``report``
            an :class:`~bayeskde.learn.inverse_svi.SVIReport`. Minutes where
            NUTS takes longer; one mode of (a^2, s^2) only.
        approx: ``"auto"`` (exact spectra up to
            :data:`bayeskde.models.inverse_gp.EXACT_MAX_M` training points, 500
            for one output and 2000 above, the measured crossovers; low rank
            above or when ``rank`` is given), ``"exact"`` or ``"lowrank"``
            (:mod:`bayeskde.models.inverse_gp_lowrank`: HSGP features for one
            output, Nystroem above; Woodbury and the determinant lemma, no
            m x m matrix). ``fit.approx`` says which ran.
        rank: the low-rank map's rank (HSGP functions or Nystroem centres,
            >= 1); ``None``: chosen from the data
            (:func:`bayeskde.learn.inverse_rank.prepare_for_fit`), reported
            as ``fit.rank``.
        posterior_predictive: draw ``n_replicates`` replicates of X (evenly
            thinned draws) for the posterior predictive check (of the
            Gaussian noise model's x, whichever ``noise`` is chosen).
        noise: the forward noise the predictive uses
            (:func:`choose_forward_noise`): ``"auto"`` (the one of higher
            leave-one-out log density of x given y on the training data),
            ``"gaussian"`` or ``"residual"``; ``fit.noise`` says which and
            why.

    Raises:
        ValueError: bad data or sampler settings, before any sampling.

    Cost: exact O(n_gamma D m^3) once; low rank O(m R^2) (HSGP) or
    O(n_gamma m (D M)^2) (Nystroem) per rank tried, no m x m matrix; then
    O(n_gamma D r) per gradient (NUTS) or per grid point (quadrature, about
    5,000 points), r <= m the kept spectrum a pair.
    """
    if method not in ("nuts", "quadrature", "svi"):
        raise ValueError(f"method must be 'nuts', 'quadrature' or 'svi', got "
                         f"{method!r}")
    if not isinstance(noise, str) or noise not in NOISE:
        raise ValueError(f"noise must be one of {NOISE}, got {noise!r}")
    t0 = time.perf_counter()
    prior = InverseGPPrior() if prior is None else prior
    data, rank_report = prepare_for_fit(key, X, Y, prior, approx, rank,
                                        progress_bar)
    if method == "nuts":
        mcmc = infer.run_nuts(
            key, inverse_gp_model, data, prior, num_warmup=num_warmup,
            num_samples=num_samples, num_chains=num_chains,
            progress_bar=progress_bar)
        samples = {k: np.asarray(v) for k, v in
                   mcmc.get_samples(group_by_chain=True).items()}
        pe = np.asarray(mcmc.get_extra_fields(group_by_chain=True)[
            "potential_energy"])
        c, s = np.unravel_index(np.argmin(pe), pe.shape)
        lj = np.asarray(samples["pair_log_joint"], np.float64)  # (C, S, G, D)
        map_params = {k: float(samples[k][c, s]) for k in _CONTINUOUS}
        map_pair = np.unravel_index(np.argmax(lj[c, s]), lj.shape[-2:])
    elif method == "svi":
        check_integer(num_samples, "num_samples", minimum=1)
        check_integer(num_chains, "num_chains", minimum=1)
        q = svi_posterior(key, data, prior, n_draws=num_chains * num_samples,
                          num_steps=num_steps, progress_bar=progress_bar)
        mcmc, samples = None, _quadrature_samples(q, data, num_chains, num_samples)
        lj = samples["pair_log_joint"]
        dt = data.X.dtype
        at = np.asarray(pair_log_joint(data, jnp.exp(jnp.asarray(q.median[0], dt)),
                                       jnp.exp(jnp.asarray(q.median[1], dt))))
        map_pair = np.unravel_index(np.argmax(at), at.shape)
        map_params = {"amplitude": float(np.exp(q.median[0])),
                      "noise": float(np.exp(q.median[1]))}
    else:
        check_integer(num_samples, "num_samples", minimum=1)
        check_integer(num_chains, "num_chains", minimum=1)
        q = quadrature_posterior(key, data, prior,
                                 n_draws=num_chains * num_samples)
        mcmc, samples = None, _quadrature_samples(q, data, num_chains, num_samples)
        lj = samples["pair_log_joint"]
        map_pair = np.unravel_index(q.map_pair, data.n_rest.shape)
        mu, mv = q.mode[map_pair]
        map_params = {"amplitude": float(np.exp(mu)), "noise": float(np.exp(mv))}
    runtime = time.perf_counter() - t0
    cond = np.exp(lj - lj.max(axis=(-2, -1), keepdims=True))
    cond /= cond.sum(axis=(-2, -1), keepdims=True)
    g, d = (int(i) for i in map_pair)
    map_params.update(gamma=float(data.gammas[g]), degree=d + 1, pair_index=(g, d))
    coords = {"gamma": np.asarray(data.gammas),
              "degree": np.arange(1, prior.max_degree + 1),
              "point": np.arange(data.X.shape[0]),
              "input": np.arange(data.X.shape[1])}
    # "point", not "sample": ArviZ 1.x reserves "sample" for stacked draws
    dims = {"pair_log_joint": ["gamma", "degree"], "x": ["point", "input"]}
    pp, cache = None, {}
    if posterior_predictive:
        n_rep = check_integer(n_replicates, "n_replicates", minimum=1)
        size = lj.shape[0] * lj.shape[1]
        flat = np.linspace(0, size - 1, n_rep).round().astype(int)
        amp = jnp.asarray(samples["amplitude"].reshape(-1)[flat], data.X.dtype)
        noi = jnp.asarray(samples["noise"].reshape(-1)[flat], data.X.dtype)
        plj = jnp.asarray(samples["pair_log_joint"].reshape(
            size, *lj.shape[-2:])[flat], data.X.dtype)
        replicates = exact_replicates if data.lowrank is None else lowrank_replicates
        x_rep, _ = replicates(jax.random.fold_in(key, 1), data, amp, noi, plj,
                              cache)
        pp = {"x": np.asarray(x_rep)[None]}
    idata = infer.to_inference_data(
        samples if mcmc is None else mcmc, coords=coords, dims=dims,
        posterior_predictive=pp,
        observed_data={"x": np.asarray(data.X + data.x_mean[None, :])},
    )
    if method == "nuts":
        report = infer.convergence_report(
            idata, var_names=["log_amplitude", "log_noise"], ess_min=400.0)
        pair_posterior = cond.mean(axis=(0, 1))
    elif method == "svi":
        report, pair_posterior = q.report, cond.mean(axis=(0, 1))
    else:
        report, pair_posterior = q.report, q.pair_posterior
    fit = InverseGPFit(idata, pair_posterior, map_params, report, runtime, data,
                       prior, cache, "exact" if data.lowrank is None else
                       "lowrank", rank_report)
    fit = fit._replace(noise=choose_forward_noise(fit, noise))
    return fit._replace(runtime_s=time.perf_counter() - t0)


def _quadrature_samples(q, data, num_chains, num_samples):
    """Quadrature draws laid out as NUTS's (chain, draw) samples."""
    dt = data.X.dtype
    lj = jax.lax.map(lambda a: pair_log_joint(data, jnp.exp(a[0]), jnp.exp(a[1])),
                     (jnp.asarray(q.log_amplitude, dt), jnp.asarray(q.log_noise, dt)),
                     batch_size=256)
    shape = (num_chains, num_samples)
    u, v = q.log_amplitude.reshape(shape), q.log_noise.reshape(shape)
    return {"log_amplitude": u, "log_noise": v, "amplitude": np.exp(u),
            "noise": np.exp(v), "pair_log_joint": np.asarray(lj, np.float64)
            .reshape(*shape, *data.n_rest.shape)}


def _estimator_X(X, what: str, n_features: int | None = None):
    """scikit-learn's conventions for the estimator's ``X``: 2-D ``(n, d_x)``
    (a 1-D array is refused with scikit-learn's wording, as its own
    regressors do; the pure functions accept it as one feature), and at
    predict time the number of features seen in fit."""
    if X is None:
        raise ValueError(f"InverseGPRegressor.{what}: X is None; expected an "
                         "array of shape (n, d_x)")
    shape = np.shape(X) if hasattr(X, "shape") else np.asarray(X).shape
    ndim = len(shape)
    if ndim != 2:
        raise ValueError(
            f"InverseGPRegressor.{what}: expected a 2-D X of shape (n, d_x), got "
            f"{ndim} dimension(s). Reshape your data either using "
            "array.reshape(-1, 1) if your data has a single feature or "
            "array.reshape(1, -1) if it contains a single sample.")
    if shape[1] == 0:
        raise ValueError(f"InverseGPRegressor.{what}: found array with 0 feature(s) "
                         f"(shape={shape}) while a minimum of 1 is required.")
    if n_features is not None and shape[1] != n_features:
        raise ValueError(f"X has {shape[1]} features, but InverseGPRegressor "
                         f"is expecting {n_features} features as input.")
    return as_float_array(X, "X")


class InverseGPRegressor(RegressorMixin, BaseEstimator):
    """scikit-learn facade of the generative inverse model.

    ``fit(X, Y)`` runs :func:`fit_inverse_gp`; ``predict(X)`` returns the mode
    of highest posterior mass per test point, ``predict_modes(X, k)`` the top-k
    modes and their masses as a :class:`bayeskde.learn.Modes`,
    ``predict_distribution(X)`` the full :class:`InverseGPPredictive` and
    ``sample(X, num_samples, key=...)`` draws ``(n_test, num_samples, d_y)`` of
    the model-averaged predictive. ``prior`` is the kernel prior
    (:class:`~bayeskde.models.InverseGPPrior`), ``output_prior`` the prior over
    outputs p(y) (``None``: data-driven; ``"uniform"``, ``"kde"``, a box
    ``(low, high)`` or a NumPyro distribution; see
    :func:`inverse_gp_predictive`). ``n_grid`` is per output dimension.
    ``approx`` and ``rank`` select the exact or low-rank evidence
    (:func:`fit_inverse_gp`); ``fit_.approx`` and ``fit_.rank`` say which ran.
    ``method`` defaults to ``"quadrature"``: the posterior over (log amplitude,
    log noise) is two-dimensional per (rate, degree) pair, so adaptive
    quadrature gives independent draws of it, where NUTS's chains stay in one
    pair each when pairs of different amplitudes share the mass (R-hat 1.54 on
    ``models/pose_tgp.py``'s arm); ``"nuts"`` is kept for its diagnostics.
    ``X`` is 2-D ``(m, d_x)`` as in scikit-learn (``x[:, None]`` for one
    feature); ``Y`` may be 1-D.

    ``noise`` is the forward noise (:func:`choose_forward_noise`):
    ``"auto"`` (default) keeps the model's Gaussian noise unless a kernel
    density of the GP's leave-one-out residuals has a higher leave-one-out
    log density of the training inputs given their outputs (by more than two
    standard errors); ``"gaussian"``, ``"residual"`` force one. ``fit_.noise``
    says which was chosen and the two scores. ``sample`` draws by the grid
    for one or two outputs and by NUTS above (``sample_report_`` then holds
    the chains' R-hat, ESS and divergences).

    Example (``X`` ``(m, d_x)``, ``Y`` ``(m, d_y)``, ``X_new`` ``(n, d_x)``)::

        reg = InverseGPRegressor(key=jax.random.key(0)).fit(X, Y)
        reg.predict_modes(X_new, 2).modes        # (n, 2, d_y)
        reg.sample(X_new, 500, key=jax.random.key(1)).shape   # (n, 500, d_y)
    """

    def __init__(self, prior=None, *, key=None, output_prior=None,
                 method="quadrature",
                 approx="auto", rank=None, num_warmup=500, num_samples=500,
                 num_chains=4, mode="average", n_draws=100, n_grid=None,
                 noisy_inputs=True, progress_bar=False, noise="auto"):
        self.prior = prior
        self.key = key
        self.output_prior = output_prior
        self.method = method
        self.approx = approx
        self.rank = rank
        self.num_warmup = num_warmup
        self.num_samples = num_samples
        self.num_chains = num_chains
        self.mode = mode
        self.n_draws = n_draws
        self.n_grid = n_grid
        self.noisy_inputs = noisy_inputs
        self.progress_bar = progress_bar
        self.noise = noise

    def fit(self, X, Y):
        if Y is None:
            raise ValueError("InverseGPRegressor requires y to be passed, but the "
                             "target y is None")
        X = _estimator_X(X, "fit")
        Y = as_float_array(Y, "Y")
        key = jax.random.key(0) if self.key is None else self.key
        self.fit_ = fit_inverse_gp(
            key, X, Y, self.prior, method=self.method, approx=self.approx,
            rank=self.rank, num_warmup=self.num_warmup,
            num_samples=self.num_samples, num_chains=self.num_chains,
            progress_bar=self.progress_bar, noise=self.noise)
        self.n_outputs_ = self.fit_.data.Y.shape[1]
        self.n_features_in_ = self.fit_.data.X.shape[1]
        return self

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.target_tags.required = True
        tags.target_tags.multi_output = True
        return tags

    def _check_fitted(self):
        if not hasattr(self, "fit_"):
            raise NotFittedError("InverseGPRegressor is not fitted yet; call fit")

    def _memo(self, X):
        """The fit's cache (so that predict writes nothing to the estimator)
        and the key of ``X`` with the predictive's settings."""
        tag = (hashlib.sha1(np.asarray(X).tobytes()).hexdigest(), np.shape(X),
               repr((self.mode, self.n_draws, self.n_grid, self.output_prior,
                     self.noisy_inputs)))
        return (self.fit_.cache if self.fit_.cache is not None else {}), tag

    def predict_distribution(self, X, k: int = 3) -> InverseGPPredictive:
        self._check_fitted()
        X = _estimator_X(X, "predict", self.n_features_in_)
        # The last predictive is kept: predict_modes then sample on the same X
        # compute it once.
        memo, tag = self._memo(X)
        last = memo.get("_last_predictive")
        if last is not None and last[:2] == (tag, k):
            return last[2]
        pred = inverse_gp_predictive(
            self.fit_, X, mode=self.mode, n_draws=self.n_draws, n_grid=self.n_grid,
            k=k, output_prior=self.output_prior, noisy_inputs=self.noisy_inputs)
        memo["_last_predictive"] = (tag, k, pred)
        return pred

    def predict_modes(self, X, k: int = 2) -> Modes:
        """The top-k modes ``(n, k, d_y)`` and masses ``(n, k)``, highest mass
        first, as a :class:`bayeskde.learn.Modes` (temperature 1: the masses
        are the posterior's own); the modes are sought among 3 or more (so that
        the first is the same for every k)."""
        pred = self.predict_distribution(X, max(check_integer(k, "k"), 3))
        return Modes(pred.modes[:, :k], pred.mode_masses[:, :k], 1.0)

    def predict(self, X):
        out = self.predict_modes(X, 1).modes[:, 0, :]
        return out[:, 0] if self.n_outputs_ == 1 else out

    def sample(self, X, num_samples: int = 1000, *, key=None) -> np.ndarray:
        """``(n_test, num_samples, d_y)`` draws of p(y* | x*, D)
        (:func:`inverse_gp_sample`: the grid for d_y <= 2, its most probable
        cells refined 8-fold per dimension, NUTS's warm-up then HMC above,
        whose
        :class:`NUTSReport` is kept as ``sample_report_``); ``key`` defaults
        to ``key(1)``."""
        self._check_fitted()
        X = _estimator_X(X, "sample", self.n_features_in_)
        key = jax.random.key(1) if key is None else key
        # draws need the predictive's candidates and probabilities, not its
        # modes: the one predict_modes kept for this X (any k), or one computed
        # without refining the modes
        memo, tag = self._memo(X)
        last = memo.get("_last_predictive")
        if last is not None and last[0] == tag:
            draws, report = inverse_gp_sample(key, self.fit_, X, num_samples,
                                              predictive=last[2],
                                              return_report=True)
        else:
            draws, report = inverse_gp_sample(
                key, self.fit_, X, num_samples, mode=self.mode,
                n_draws=self.n_draws, n_grid=self.n_grid,
                output_prior=self.output_prior, noisy_inputs=self.noisy_inputs,
                return_report=True)
        self.sample_report_ = report
        return draws
