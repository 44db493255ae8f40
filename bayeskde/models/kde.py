"""Bayesian KDE: a posterior over the input RBF width and the ridge.

This module holds the derivation and re-exports the public names of
:mod:`.kde_continuous` (continuous width, one Cholesky per step),
:mod:`.kde_eigen` (exact and Nystroem spectra on a width grid) and
:mod:`.kde_grid` (grid evidence, product-space model, BMA).

KDE (Weston et al. 2002, section 3) regresses each output principal coordinate
t_j = (v_j . Phi(y_i))_i on the inputs by kernel ridge regression with
beta = (K + m gamma I)^-1 t_j. That predictor is the posterior mean of a Gaussian
process f ~ GP(0, a^2 k) observed with noise variance a^2 m gamma, so the GP
evidence of the coordinates is a likelihood for the kernel width sigma and the
ridge gamma, where the paper used 5-fold cross-validation.

The likelihood. With C = K_sigma + m gamma I, each coordinate vector is
t_j | a_j, C ~ N(0, a_j^2 C). The coordinates have very different scales (their
squared norms are the KPCA eigenvalues), so each gets its own amplitude, integrated
out under the scale-invariant prior p(a_j^2) proportional to 1 / a_j^2:

    p(t_j | C) = int N(t_j; 0, a^2 C) a^-2 da^2
               = Gamma(m/2) (2 pi)^(-m/2) |C|^(-1/2) (q_j / 2)^(-m/2),
    q_j = t_j^T C^-1 t_j,

using int_0^inf x^(-m/2-1) exp(-q/(2x)) dx = Gamma(m/2) (q/2)^(-m/2). This is a
real (if improperly-normalised-prior) marginal likelihood: it is invariant to the
scale of each coordinate, and its constant does not depend on (sigma, gamma), so
posteriors and model comparisons under the same prior are exact.
``tests/models/test_kde.py`` checks it against numerical integration over a^2.

Priors: log sigma ~ N(log median distance, 1), log gamma ~ N(log 1e-2, 2) (the
paper's ridge grid spans 1e-4..1e1, four prior standard deviations).

Cost per density evaluation: one m x m Cholesky, O(m^3 + m^2 p)
(:mod:`bayeskde.models.kde_continuous`).

The grid path (:func:`bayesian_kde_grid_model`). The paper chooses sigma from a
grid {1e-3, ..., 1e3} (section 4). On a grid, each K_g = U_g diag(s_g) U_g^T is
decomposed once (:func:`kde_spectra`), and with W_g = U_g^T T the ridge only moves
the eigenvalues: C_g = K_g + m gamma I = U_g diag(s_g + m gamma) U_g^T, so

    log|C_g| = sum_i log(s_gi + m gamma),
    q_gj = t_j^T C_g^-1 t_j = sum_i W_g[i, j]^2 / (s_gi + m gamma),

O(G m p) per density and gradient for G grid values, no factorisation. The grid
index g is discrete and marginalised exactly,
log p(T | gamma) = logsumexp_g [log pi_g + log p(T | g, gamma)], and
p(g | T, gamma) = softmax_g(...) is recorded per draw (site ``grid_probs``); its
mean over draws is the (Rao-Blackwellised) posterior probability of each width.
The ridge is sampled in Carlin and Chib's product space, one ridge per width
(see :func:`bayesian_kde_grid_model` for why).

The low-rank grid path (``kde_spectra(..., solver="nystroem", centers=c)``). For
large m the exact spectra cost O(G m^3). With M Nystroem centres, K_g is replaced
by its Nystroem approximation Phi_g Phi_g^T and only the M x M matrix
Phi_g^T Phi_g is decomposed; Woodbury and the matrix determinant lemma give
log|C_g| and q_gj from its M eigenvalues plus the part of T outside their span
(:mod:`bayeskde.models.kde_eigen`): O(G m M^2) once, then O(G M p) per density
and gradient, the same model on the Nystroem Gram.

A limitation of both models: when the outputs lie numerically in the span of the
leading eigenvectors of K_g (a wide RBF or a nearly rank-deficient kernel), the
evidence keeps growing as gamma -> 0, faster than the log-normal prior falls, so
the ridge posterior runs to ridges far below the paper's grid (seen on one
strings fold, log gamma ~ -40..-78). The prior, not the data, then bounds it.

Weighting of the components. Under the scale-free likelihood above each of the p
coordinates casts an equal vote: its own amplitude absorbs its scale, so a
component with a tiny KPCA eigenvalue lambda_j (mostly output noise) pulls on
(sigma, gamma) as hard as the leading one. Two alternatives, both exact evidences:

* ``likelihood="scale_free"`` on the top components only (the caller passes the
  first :func:`n_components_for_variance` columns of T, e.g. 95% of the variance).
* ``likelihood="shared"``: one amplitude for all components, t_j ~ N(0, a^2 C)
  independently, i.e. every feature-space coordinate of the centred outputs is a
  GP with the same covariance (the multi-output GP evidence of the centred output
  features; T T^T is then Wishart_m(p, a^2 C)). With the same
  prior p(a^2) proportional to 1/a^2,

      p(T | C) = int prod_j N(t_j; 0, a^2 C) a^-2 da^2
               = Gamma(mp/2) (2 pi)^(-mp/2) |C|^(-p/2) (Q / 2)^(-mp/2),
      Q = sum_j q_j = tr(C^-1 T T^T) = sum_j lambda_j u_j^T C^-1 u_j,

  (same integral with m -> mp). Since ||t_j||^2 = lambda_j, the fit term weights
  each unit output direction u_j by its KPCA eigenvalue, so low-variance
  components barely count. (Scaling the covariance by lambda_j, t_j ~ N(0, a^2
  lambda_j C), would divide that weight out again and restore equal votes.)
  The model ignores that centred coordinates are orthogonal to the ones vector.

Neither evidence serves the digits reconstruction: each Gaussian model of the
coordinates calls the many low-variance components noise, which either pulls the
width to the narrowest grid values (``scale_free``: sigma = 1e-3 x median, RBF
loss 1.867 against 5-fold CV's 1.399) or the ridge up (``shared``: 1e-2 against
CV's 1e-3, loss 1.481), while predicting those components with a small ridge is
what lets the pre-image find the right training output. The measurements, the
per-component variants tried, and the model kept for prediction (a Gibbs posterior
whose likelihood is the exact leave-one-out pre-image loss) are in
:mod:`bayeskde.models.kde_gibbs`.
"""

from .kde_continuous import BayesianKDEPrior as BayesianKDEPrior
from .kde_continuous import bayesian_kde_model as bayesian_kde_model
from .kde_continuous import kde_bma_features as kde_bma_features
from .kde_continuous import scale_free_gp_logpdf as scale_free_gp_logpdf
from .kde_eigen import SOLVERS as SOLVERS
from .kde_eigen import KDESpectra as KDESpectra
from .kde_eigen import kde_spectra as kde_spectra
from .kde_eigen import n_components_for_variance as n_components_for_variance
from .kde_gibbs import KDEGibbsPosterior as KDEGibbsPosterior
from .kde_gibbs import kde_gibbs_posterior as kde_gibbs_posterior
from .kde_gibbs import kde_grid_loo_losses as kde_grid_loo_losses
from .kde_grid import LIKELIHOODS as LIKELIHOODS
from .kde_grid import BayesianKDEGridPrior as BayesianKDEGridPrior
from .kde_grid import bayesian_kde_grid_model as bayesian_kde_grid_model
from .kde_grid import kde_grid_bma_features as kde_grid_bma_features
from .kde_grid import kde_grid_log_joint as kde_grid_log_joint
from .kde_grid import kde_grid_loglik as kde_grid_loglik

__all__ = [
    "BayesianKDEPrior",
    "scale_free_gp_logpdf",
    "bayesian_kde_model",
    "kde_bma_features",
    "LIKELIHOODS",
    "SOLVERS",
    "BayesianKDEGridPrior",
    "KDESpectra",
    "kde_spectra",
    "n_components_for_variance",
    "kde_grid_loglik",
    "kde_grid_log_joint",
    "bayesian_kde_grid_model",
    "kde_grid_bma_features",
    "KDEGibbsPosterior",
    "kde_gibbs_posterior",
    "kde_grid_loo_losses",
]
