"""The Bayesian KDE: a Gibbs posterior, the leave-one-out pre-image loss as likelihood.

KDE (Weston et al. 2002, section 3) regresses each output principal coordinate
t_j = (v_j . Phi(y_i))_i on the inputs by kernel ridge regression with
beta = (K + m gamma I)^-1 t_j, and chooses the input width sigma from the grid
{1e-3, ..., 1e3} and the ridge gamma by 5-fold cross-validation (section 4).
This module puts a posterior on (sigma_g, gamma) instead. It is the one Bayesian
KDE of the package: one model per idea (DESIGN.md). The GP-evidence models that
lost to it on held-out data (a continuous width with one Cholesky per step, and
the grid evidence with the ridge in Carlin and Chib's product space, with
``"scale_free"`` and ``"shared"`` likelihoods) are kept, with their derivations,
only as references in ``bench/kde_evidence.py`` (``bench/bayes.py``,
``bench/scale.py`` and ``models/bayesian_kde_digits.py`` run them); importing
them from ``bayeskde.models`` raises an ImportError that names this module.

Why not the GP evidence. The evidences model each output KPCA coordinate t_j as
a GP with Gaussian noise, t_j ~ N(0, a_j^2 (K_sigma + m gamma I)). On the digits
halves (m = 200 train, output RBF width by alignment) the output spectrum is
flat: 80% of the variance needs ~96 of the 199 components. Measured per fold (5
folds, exact posteriors on the paper's width grid,
``models/bayesian_kde_digits.py``):

* ``scale_free`` (one amplitude per component, equal votes) puts all its mass on
  the two narrowest widths (1e-3 and 1e-2 x the median distance 2.1, K_g ~ I): each
  of the ~100 low-variance components is best explained as white noise, and a narrow
  width makes C_g = K_g + m gamma I ~ (1 + m gamma) I. RBF loss 1.867 against CV's
  1.399. Per component (fold 0, gamma = 1e-3), the log evidence at sigma = 1e-3 x
  median minus at CV's sigma (1 x median) is -389 nats summed over the 10 leading
  components (none favours the narrow width) and +3790 over components 50-199 (all
  favour it).
* ``shared`` (one amplitude, components weighted by their eigenvalue lambda_j,
  Q = sum_j lambda_j u_j^T C^-1 u_j) picks CV's width but a ridge of 1e-2 against
  CV's 1e-3: loss 1.481.
* per-component signal variance with a shared noise, t_j ~ N(0, b_j K_g + s^2 I)
  (b_j summed out on a log grid): the narrow widths come back (sigma <= 0.1 x median),
  since a narrow K_g lets every component have its own noise level: loss 1.802.
* per-component ridge, t_j ~ N(0, a_j^2 (K_g + rho_j I)), rho_j summed out on a
  grid (also with a hierarchical log-normal prior on rho_j): CV's width, leading
  components at gamma_j ~ 10^-3.5 (CV's ridge), but components beyond ~50 at
  gamma_j ~ 10^1.3, i.e. predicted as zero: loss 1.469-1.493.

``models/bayesian_kde_diagnosis.py`` reproduces these (not the hierarchical
variant). So the width is fixed by giving each component its own noise, but every
Gaussian model of the coordinates calls the tail components unpredictable noise, while
predicting them with a small ridge is what makes the pre-image (the training output
nearest to the predicted feature vector) pick the right neighbour. The Gaussian
likelihood is misspecified for the decision the predictor serves.

The likelihood here scores (sigma_g, gamma) by that decision (a generalised Bayesian
update, Bissiri, Holmes and Walker 2016):

    p(g, gamma | D) propto pi(g) p(gamma) exp(-(1 / tau) sum_i l_i(g, gamma)),
    l_i = Delta(y_i, y_{j*(i)}),  j*(i) = argmin_{j != i} ||f_-i(x_i) - t_j||^2,

with f_-i(x_i) the KDE prediction for point i from the other m - 1 points with the
same system matrix, exact in closed form (the leave-one-out identity of kernel ridge
regression, C = K_g + m gamma I = U diag(s + m gamma) U^T):

    f_-i(x_i) = t_i - [C^-1 T]_i / [C^-1]_ii.

tau = 1 counts one unit of loss as one nat per point. The loss is piecewise constant
in gamma, so the posterior is enumerated exactly on a ridge grid (no NUTS), and the
model average is :func:`kde_grid_bma_features` with the grid weights. On digits
(seeds 0-4 x 5 folds, 25 paired fits) the model average's RBF loss is 1.4044 +-
0.0036 against 5-fold CV's 1.4054 +- 0.0044 (paired difference -0.0010 +- 0.0027);
with tau = 0.25 or 4 the paired difference stays within -0.003..+0.011 on seeds 0-2.

The spectra. On the grid each K_g = U_g diag(s_g) U_g^T is decomposed once
(:func:`kde_spectra`, exact or Nystroem); the ridge then only moves the
eigenvalues, so every (width, ridge) costs matrix products, no factorisation.

Cost: O(G m^3) for the exact spectra, then O(G n_r m^2 q) time for G widths, n_r
ridges and q coordinates, O(m^2) memory per (width, ridge).

References: P. G. Bissiri, C. C. Holmes and S. G. Walker (2016), A general framework
for updating belief distributions, JRSS B 78(5), 1103-1130.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import numpyro.distributions as dist
from jax.scipy.special import logsumexp
from jaxtyping import Array, Float

from .._typing import ArrayLike
from .._validation import as_float_array, check_finite, check_positive
from ._kde_spectra import SOLVERS as SOLVERS
from ._kde_spectra import KDESpectra as KDESpectra
from ._kde_spectra import kde_spectra as kde_spectra
from ._kde_spectra import n_components_for_variance as n_components_for_variance

__all__ = [
    "SOLVERS",
    "KDESpectra",
    "kde_spectra",
    "n_components_for_variance",
    "BayesianKDEGridPrior",
    "KDEGibbsPosterior",
    "kde_grid_loo_losses",
    "kde_gibbs_posterior",
    "kde_grid_bma_features",
]


class BayesianKDEGridPrior(NamedTuple):
    """Priors of :func:`kde_gibbs_posterior` on (grid width, ridge).

    Attributes:
        log_ridge_loc, log_ridge_scale: log gamma ~ N(loc, scale); the defaults
            put the paper's ridge grid 1e-4..1e1 within two prior standard
            deviations of 1e-2.
        grid_logits: ``(G,)`` unnormalised log prior weights of the grid widths;
            ``None`` for the uniform prior (the paper's grid search has no
            preference).
    """

    log_ridge_loc: float = float(np.log(1e-2))
    log_ridge_scale: float = 2.0
    grid_logits: Float[ArrayLike, " grid"] | None = None


def _check_prior(prior) -> BayesianKDEGridPrior:
    """The prior's fields, checked before they reach a density (NaN would make
    every log joint NaN, silently)."""
    if not isinstance(prior, BayesianKDEGridPrior):
        raise TypeError(
            f"prior must be a BayesianKDEGridPrior or None, got {type(prior).__name__}"
        )
    check_finite(prior.log_ridge_loc, "prior.log_ridge_loc")
    check_positive(prior.log_ridge_scale, "prior.log_ridge_scale")
    if prior.grid_logits is not None:
        as_float_array(prior.grid_logits, "prior.grid_logits", ndim=1)
    return prior


def _grid_log_prior(prior, G, dtype):
    if prior.grid_logits is None:
        return jnp.full((G,), -jnp.log(G), dtype)
    logits = jnp.asarray(prior.grid_logits, dtype)
    if logits.shape != (G,):
        raise ValueError(
            f"prior.grid_logits must have shape ({G},), got {tuple(logits.shape)}"
        )
    return logits - logsumexp(logits)


class KDEGibbsPosterior(NamedTuple):
    """The Gibbs posterior of :func:`kde_gibbs_posterior` on (width grid, ridges).

    Attributes:
        log_joint: ``(G, n_ridges)`` unnormalised log posterior.
        probs: ``(G, n_ridges)`` normalised posterior probabilities.
        loo_loss: ``(G, n_ridges)`` mean leave-one-out pre-image loss.
        ridges: ``(n_ridges,)`` the ridge grid, exp(log_ridges).
        grid_weights: ``(n_ridges, G)`` the weights that make
            :func:`kde_grid_bma_features` (with ``ridges``) the
            model average: n_ridges * probs^T (it averages over rows).
    """

    log_joint: Float[Array, "grid n_ridges"]
    probs: Float[Array, "grid n_ridges"]
    loo_loss: Float[Array, "grid n_ridges"]
    ridges: Float[Array, " n_ridges"]
    grid_weights: Float[Array, "n_ridges grid"]


def _preimage_losses(F, T, loss):
    """loss[i, j*(i)], j*(i) the other training output nearest to F_i."""
    m = T.shape[0]
    t2 = jnp.sum(T * T, axis=1)
    others = jnp.where(jnp.eye(m, dtype=bool), jnp.inf, 0.0)
    j = jnp.argmin(t2[None, :] - 2.0 * F @ T.T + others, axis=1)
    return loss[jnp.arange(m), j]


@jax.jit
def _loo_losses(s, U, T, loss, log_ridges):
    m = T.shape[0]

    def one_width(args):
        s_g, U_g = args
        W = U_g.T @ T

        def one_ridge(log_ridge):
            d = 1.0 / (s_g + m * jnp.exp(log_ridge))
            CinvT = U_g @ (d[:, None] * W)
            diag = jnp.sum(U_g * U_g * d[None, :], axis=1)
            F = T - CinvT / diag[:, None]  # leave-one-out predictions
            return _preimage_losses(F, T, loss)

        return jax.lax.map(one_ridge, log_ridges)

    return jax.lax.map(one_width, (s, U))


@jax.jit
def _loo_losses_nystroem(e, P, T, loss, log_ridges):
    """The same on K~ = P P^T (P = U diag(sqrt(e)), the Nystroem spectra's
    scaled eigenvectors): with rho = m gamma,
    rho C^-1 = I - P diag(1 / (e + rho)) P^T (Woodbury), so rho C^-1 T and
    rho diag(C^-1) cost O(m M q) and O(m M), and the rho cancels in
    F = T - C^-1 T / diag(C^-1). Directions whose eigenvalue was set to zero
    (round-off) are left out, as in K~."""
    m = T.shape[0]

    def one_width(args):
        e_g, P_g = args
        Z = P_g.T @ T
        P2 = P_g * P_g
        keep = e_g > 0

        def one_ridge(log_ridge):
            d = jnp.where(keep, 1.0 / (e_g + m * jnp.exp(log_ridge)), 0.0)
            num = T - P_g @ (d[:, None] * Z)  # rho C^-1 T
            den = 1.0 - P2 @ d  # rho diag(C^-1) > 0
            return _preimage_losses(T - num / den[:, None], T, loss)

        return jax.lax.map(one_ridge, log_ridges)

    return jax.lax.map(one_width, (e, P))


def kde_grid_loo_losses(
    spectra: KDESpectra,
    T: Float[ArrayLike, "m q"],
    loss: Float[ArrayLike, "m_a m_b"],
    log_ridges: Float[ArrayLike, " n_ridges"] | Sequence[float],
) -> Float[Array, "grid n_ridges m"]:
    """Leave-one-out pre-image losses of the KDE for every (grid width, ridge).

    For point i, the KDE trained on the other m - 1 points (system matrix
    K_g + m gamma I, Weston et al. 2002, eq. (6)) predicts
    f_-i = t_i - [C^-1 T]_i / [C^-1]_ii, the pre-image is the nearest other
    training output, and l_i = loss[i, j*(i)] (module docstring).

    On Nystroem spectra (``solver="nystroem"``, the low-rank path) the
    system matrix is K~_g + m gamma I with K~_g = Phi Phi^T the Nystroem Gram,
    and the same identity holds exactly for it (the refit without point i
    keeps the centres, so its Gram is K~_g without row and column i); by
    Woodbury it costs O(m M q) a setting instead of O(m^2 q) for the system,
    with no m x m factorisation. The output side scales with it when ``T``
    holds Nystroem features of the output kernel (q = M_out columns, e.g.
    :func:`bayeskde.lowrank.nystroem_features`), whose distances are the
    Nystroem output kernel's feature-space distances.

    Args:
        spectra: :func:`bayeskde.models.kde_spectra` output, exact or
            Nystroem (any coords).
        T: ``(m, q)`` output coordinates compared by the pre-image (all KPCA
            components, as the predictor uses, or Nystroem output features).
        loss: ``(m, m)`` loss between training outputs, e.g. 2 - 2 L for an RBF L.
        log_ridges: ``(n_ridges,)`` log of the paper's ridge gamma.

    Returns:
        ``(G, n_ridges, m)`` losses.

    Raises:
        ValueError: for mismatched shapes or NaN/inf.

    Cost: O(G n_r m^2 q) time (the pre-image search; the system's part is
    O(G n_r m M q) on Nystroem spectra), O(G n_r m + m^2) memory.
    """
    m = spectra.eigenvectors.shape[1]
    T = as_float_array(T, "T", ndim=2)
    if T.shape[0] != m:
        raise ValueError(f"T must have {m} rows, got {tuple(T.shape)}")
    loss = as_float_array(loss, "loss", ndim=2)
    if loss.shape != (m, m):
        raise ValueError(f"loss must have shape ({m}, {m}), got {tuple(loss.shape)}")
    lr = as_float_array(log_ridges, "log_ridges", ndim=1)
    dtype = spectra.eigenvalues.dtype
    fn = _loo_losses if spectra.residual is None else _loo_losses_nystroem
    return fn(spectra.eigenvalues, spectra.eigenvectors, T.astype(dtype),
              loss.astype(dtype), lr.astype(dtype))


def kde_gibbs_posterior(
    spectra: KDESpectra,
    T: Float[ArrayLike, "m q"],
    loss: Float[ArrayLike, "m_a m_b"],
    log_ridges: Float[ArrayLike, " n_ridges"] | Sequence[float],
    prior: BayesianKDEGridPrior | None = None,
    temperature: float = 1.0,
) -> KDEGibbsPosterior:
    """Gibbs posterior over (grid width, ridge) from the leave-one-out loss.

    log p(g, gamma | D) = log pi(g) + log N(log gamma; prior) - sum_i l_i / tau
    + const, enumerated on ``log_ridges`` (module docstring: why this likelihood).

    Args:
        spectra, T, loss, log_ridges: as :func:`kde_grid_loo_losses`.
        prior: :class:`BayesianKDEGridPrior`; ``None`` for the defaults
            (uniform over widths, log gamma ~ N(log 1e-2, 2)).
        temperature: tau > 0, loss units per nat.

    Returns:
        :class:`KDEGibbsPosterior`.

    Raises:
        ValueError: as :func:`kde_grid_loo_losses`, for tau <= 0, or for prior
            parameters that are NaN, inf or (scale) not positive.
        TypeError: ``prior`` is not a :class:`BayesianKDEGridPrior`, or
            ``temperature`` is not a number.

    Cost: that of :func:`kde_grid_loo_losses`.

    Examples:
        >>> import numpy as np
        >>> x = np.linspace(0.0, 1.0, 8)
        >>> D2 = (x[:, None] - x[None, :]) ** 2
        >>> T = np.c_[x - x.mean()]
        >>> post = kde_gibbs_posterior(kde_spectra(D2, T, [0.1, 1.0]), T,
        ...                            D2, np.log([1e-3, 1e-1]))
        >>> bool(np.isclose(float(post.probs.sum()), 1.0, atol=1e-5))
        True
    """
    temperature = check_positive(temperature, "temperature")
    prior = _check_prior(BayesianKDEGridPrior() if prior is None else prior)
    lr = as_float_array(log_ridges, "log_ridges", ndim=1)
    losses = kde_grid_loo_losses(spectra, T, loss, lr)
    G = losses.shape[0]
    lr = lr.astype(losses.dtype)
    log_prior = _grid_log_prior(prior, G, losses.dtype)[:, None] + dist.Normal(
        prior.log_ridge_loc, prior.log_ridge_scale).log_prob(lr)[None, :]
    log_joint = log_prior - jnp.sum(losses, axis=2) / temperature
    probs = jnp.exp(log_joint - logsumexp(log_joint))
    return KDEGibbsPosterior(
        log_joint=log_joint,
        probs=probs,
        loo_loss=jnp.mean(losses, axis=2),
        ridges=jnp.exp(lr),
        grid_weights=lr.shape[0] * probs.T,
    )


@jax.jit
def _bma_jit(spectra, K_test, T_pred, ridges, weights):
    m = spectra.eigenvectors.shape[1]
    # Averaging over draws commutes with the linear predictor: only the diagonal
    # weights c_g = mean_d w_dg / (s_g + m gamma_d) depend on the draws.
    c = jnp.mean(
        weights[:, :, None]
        / (spectra.eigenvalues[None, :, :] + m * ridges[:, :, None]),
        axis=0,
    )  # (G, r)
    # Exact: (K_test U) c (U^T T_pred). Nystroem: K~_test (I - U U^T) = 0, so the
    # directions outside the span drop out, and (K~_test U) c (U^T T_pred) =
    # (Phi_test V) c ((Phi V)^T T_pred), the two sqrt(s) factors cancelling.
    right = spectra.eigenvectors if spectra.test_map is None else spectra.test_map
    A = jnp.einsum("gnc,gck->gnk", K_test, right)
    B = jnp.einsum("gmk,mq->gkq", spectra.eigenvectors, T_pred)
    return jnp.einsum("gnk,gk,gkq->nq", A, c, B)


def kde_grid_bma_features(
    spectra: KDESpectra,
    K_test: Float[ArrayLike, "grid_a n_test n_cols"],
    T_pred: Float[ArrayLike, "m_b q"],
    ridges: Float[ArrayLike, "*ridge_shape"] | Sequence[float],
    grid_weights: Float[ArrayLike, "n_draws_b grid_b"],
) -> Float[Array, "n_test q"]:
    """Bayesian-model-averaged KDE projections over (grid width, ridge) draws.

    mean_d sum_g w_dg K_test,g (K_g + m gamma_d I)^-1 T_pred (Weston et al. 2002,
    eq. (6), per (g, gamma)). With ``grid_weights`` the per-draw ``grid_probs``
    this is the Rao-Blackwellised BMA (with :attr:`KDEGibbsPosterior.ridges` and
    ``grid_weights``, the Gibbs posterior's); one-hot weights and one ridge give the MAP
    (or any single setting). On Nystroem spectra K_g and K_test,g are the Nystroem
    Grams (the Nystroem kernel ridge predictor, as
    :func:`bayeskde.lowrank.nystroem_krr`).

    Args:
        spectra: :func:`kde_spectra` output for the training Grams.
        K_test: test Grams, one per grid width: ``(G, n_test, m)`` test-by-training
            (exact), ``(G, n_test, M)`` test-by-centre (Nystroem).
        T_pred: ``(m, q)`` training coordinates to predict (e.g. all output KPCA
            components, whatever ``spectra.coords`` used).
        ridges: ``(D,)`` ridge values or draws (> 0), or ``(D, G)`` one per
            width.
        grid_weights: ``(D, G)`` weights of the grid widths per draw (rows sum
            to one).

    Returns:
        ``(n_test, q)`` averaged projections.

    Raises:
        ValueError: for mismatched shapes, NaN/inf, non-positive ridges or
            negative weights.

    Cost: O(D G r + G r (m + n_cols) (n_test + q)) time with r = m (exact) or M
    (Nystroem): the average over draws collapses to one diagonal per width.
    Memory O(G r (n_test + q)).
    """
    G, m = spectra.eigenvalues.shape[0], spectra.eigenvectors.shape[1]
    cols = m if spectra.test_map is None else spectra.test_map.shape[1]
    K_test = as_float_array(K_test, "K_test", ndim=3)
    if K_test.shape[0] != G or K_test.shape[2] != cols:
        what = "" if spectra.test_map is None else " (Nystroem: test-by-centre)"
        raise ValueError(
            f"K_test{what} must have shape ({G}, n_test, {cols}), got "
            f"{tuple(K_test.shape)}"
        )
    T_pred = as_float_array(T_pred, "T_pred", ndim=2)
    if T_pred.shape[0] != m:
        raise ValueError(f"T_pred must have {m} rows, got {tuple(T_pred.shape)}")
    ridges = as_float_array(ridges, "ridges")
    if ridges.ndim == 1:
        ridges = jnp.broadcast_to(ridges[:, None], (ridges.shape[0], G))
    if ridges.ndim != 2 or ridges.shape[1] != G:
        raise ValueError(f"ridges must have shape (D,) or (D, {G}), got "
                         f"{tuple(ridges.shape)}")
    if not np.all(np.asarray(ridges) > 0):
        raise ValueError("ridges must all be > 0")
    w = as_float_array(grid_weights, "grid_weights", ndim=2)
    if w.shape != (ridges.shape[0], G) or np.any(np.asarray(w) < 0):
        raise ValueError(
            f"grid_weights must be non-negative with shape ({ridges.shape[0]}, {G}), "
            f"got {tuple(w.shape)}"
        )
    return _bma_jit(spectra, K_test, T_pred, ridges, w)
