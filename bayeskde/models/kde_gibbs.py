"""Bayesian KDE by a Gibbs posterior: the leave-one-out pre-image loss as likelihood.

Why not the GP evidence. The evidences of :mod:`bayeskde.models.kde` model each
output KPCA coordinate t_j as a GP with Gaussian noise. On the digits halves
(m = 200 train, output RBF width by alignment) the output spectrum is flat: 80% of
the variance needs ~96 of the 199 components. Measured per fold (5 folds, exact
posteriors on the paper's width grid, ``models/bayesian_kde_digits.py``):

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
model average is :func:`bayeskde.models.kde_grid_bma_features` with the grid
weights. On digits (seeds 0-4 x 5 folds, 25 paired fits) the model average's RBF
loss is 1.4044 +- 0.0036 against 5-fold CV's 1.4054 +- 0.0044 (paired difference
-0.0010 +- 0.0027); with tau = 0.25 or 4 the paired difference stays within
-0.003..+0.011 on seeds 0-2.

Cost: O(G n_r m^2 q) time for G widths, n_r ridges and q coordinates, O(m^2)
memory per (width, ridge).

References: P. G. Bissiri, C. C. Holmes and S. G. Walker (2016), A general framework
for updating belief distributions, JRSS B 78(5), 1103-1130.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpyro.distributions as dist
from jax.scipy.special import logsumexp
from jaxtyping import Array, Float

from .._typing import ArrayLike
from .._validation import as_float_array
from .kde_eigen import KDESpectra
from .kde_grid import BayesianKDEGridPrior, _grid_log_prior

__all__ = [
    "KDEGibbsPosterior",
    "kde_grid_loo_losses",
    "kde_gibbs_posterior",
]


class KDEGibbsPosterior(NamedTuple):
    """The Gibbs posterior of :func:`kde_gibbs_posterior` on (width grid, ridges).

    Attributes:
        log_joint: ``(G, n_ridges)`` unnormalised log posterior.
        probs: ``(G, n_ridges)`` normalised posterior probabilities.
        loo_loss: ``(G, n_ridges)`` mean leave-one-out pre-image loss.
        ridges: ``(n_ridges,)`` the ridge grid, exp(log_ridges).
        grid_weights: ``(n_ridges, G)`` the weights that make
            :func:`bayeskde.models.kde_grid_bma_features` (with ``ridges``) the
            model average: n_ridges * probs^T (it averages over rows).
    """

    log_joint: Float[Array, "grid n_ridges"]
    probs: Float[Array, "grid n_ridges"]
    loo_loss: Float[Array, "grid n_ridges"]
    ridges: Float[Array, " n_ridges"]
    grid_weights: Float[Array, "n_ridges grid"]


@jax.jit
def _loo_losses(s, U, T, loss, log_ridges):
    m = T.shape[0]
    t2 = jnp.sum(T * T, axis=1)
    others = jnp.where(jnp.eye(m, dtype=bool), jnp.inf, 0.0)

    def one_width(args):
        s_g, U_g = args
        W = U_g.T @ T

        def one_ridge(log_ridge):
            d = 1.0 / (s_g + m * jnp.exp(log_ridge))
            CinvT = U_g @ (d[:, None] * W)
            diag = jnp.sum(U_g * U_g * d[None, :], axis=1)
            F = T - CinvT / diag[:, None]  # leave-one-out predictions
            j = jnp.argmin(t2[None, :] - 2.0 * F @ T.T + others, axis=1)
            return loss[jnp.arange(m), j]

        return jax.lax.map(one_ridge, log_ridges)

    return jax.lax.map(one_width, (s, U))


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

    Args:
        spectra: exact :func:`bayeskde.models.kde_spectra` output (any coords).
        T: ``(m, q)`` output KPCA coordinates compared by the pre-image (all
            components, as the predictor uses).
        loss: ``(m, m)`` loss between training outputs, e.g. 2 - 2 L for an RBF L.
        log_ridges: ``(n_ridges,)`` log of the paper's ridge gamma.

    Returns:
        ``(G, n_ridges, m)`` losses.

    Raises:
        ValueError: for Nystroem spectra, mismatched shapes or NaN/inf.

    Cost: O(G n_r m^2 q) time, O(G n_r m + m^2) memory.
    """
    if spectra.residual is not None:
        raise ValueError("kde_grid_loo_losses needs exact spectra (solver='exact')")
    m = spectra.eigenvectors.shape[1]
    T = as_float_array(T, "T", ndim=2)
    if T.shape[0] != m:
        raise ValueError(f"T must have {m} rows, got {tuple(T.shape)}")
    loss = as_float_array(loss, "loss", ndim=2)
    if loss.shape != (m, m):
        raise ValueError(f"loss must have shape ({m}, {m}), got {tuple(loss.shape)}")
    lr = as_float_array(log_ridges, "log_ridges", ndim=1)
    dtype = spectra.eigenvalues.dtype
    return _loo_losses(spectra.eigenvalues, spectra.eigenvectors, T.astype(dtype),
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
        prior: :class:`bayeskde.models.BayesianKDEGridPrior`; ``None`` for the
            defaults (uniform over widths, log gamma ~ N(log 1e-2, 2)).
        temperature: tau > 0, loss units per nat.

    Returns:
        :class:`KDEGibbsPosterior`.

    Raises:
        ValueError: as :func:`kde_grid_loo_losses`, or for tau <= 0.

    Cost: that of :func:`kde_grid_loo_losses`.

    Examples:
        >>> import numpy as np
        >>> from bayeskde.models import kde_spectra
        >>> x = np.linspace(0.0, 1.0, 8)
        >>> D2 = (x[:, None] - x[None, :]) ** 2
        >>> T = np.c_[x - x.mean()]
        >>> post = kde_gibbs_posterior(kde_spectra(D2, T, [0.1, 1.0]), T,
        ...                            D2, np.log([1e-3, 1e-1]))
        >>> bool(np.isclose(float(post.probs.sum()), 1.0, atol=1e-5))
        True
    """
    if not float(temperature) > 0:
        raise ValueError(f"temperature must be > 0, got {temperature}")
    prior = BayesianKDEGridPrior() if prior is None else prior
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
