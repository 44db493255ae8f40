"""The polynomial kernel transform as an estimator (Ghosh et al., section 4).

:class:`PolynomialKernelTransform` learns the monomial or Gegenbauer coefficients of
the input and output kernel transformations phi, psi by maximising HSIC
(:func:`bayeskde.kernels.fit_polynomial_transform`) and applies them to new kernel
values, projecting onto the PSD cone where the transformed Gram needs it.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from sklearn.base import BaseEstimator
from sklearn.utils.validation import check_is_fitted

from .._validation import as_float_array, warn_once
from .transforms import (
    DEFAULT_GEGENBAUER_LAMBDA,
    as_array,
    check_lambdas,
    combine_jit,
    eigh_jit,
    fit_polynomial_transform,
    psd_tolerance,
)

__all__ = ["PolynomialKernelTransform"]




class PolynomialKernelTransform(BaseEstimator):
    """Learn input and output kernel transformations phi, psi (seed 001, section 4).

    ``fit(K, G)`` takes the normalised base Gram matrices of the training inputs
    and outputs and learns alpha, beta by :func:`fit_polynomial_transform`;
    :meth:`transform_input` / :meth:`transform_output` apply them to any kernel
    values against the training points.

    Positive semi-definiteness. Monomial expansions with non-negative weights of a
    PSD kernel are PSD (Schur product theorem), so they are not checked. A
    Gegenbauer expansion can lose PSD (the constant terms of C_2, C_4, ... that HSIC
    cannot see, and negative weights), so for it, and for any negative weight, the
    transformed training Gram matrix is eigendecomposed in ``fit``; if its smallest
    eigenvalue is below -100 eps max|e| a warning is issued once and, with
    ``project_psd=True``, negative eigenvalues are clipped. There is no exact
    projection for new points; the one used is the Nyström-consistent map

        K'(x, X) -> K'(x, X) U diag(max(e, 0) / e) U^T = K'(x, X) (I - U_- U_-^T),

    with U_- the eigenvectors of the negative eigenvalues of the transformed
    training Gram. It is linear, costs O(n_test m q) for q negative eigenvalues, and
    for the training points themselves it returns exactly the projected Gram
    U diag(max(e, 0)) U^T. Consequently 2-D inputs to the transform methods must
    be kernels against the training points (last axis of length m). 1-D diagonals
    ``k(x, x)`` are returned as the polynomial transform gives them: the
    projection's correction of a self-similarity needs the point's kernel row, and
    for the training points diag(projected Gram) exceeds the transformed diagonal by
    at most the sum of |negative eigenvalues| (``input_clipped_mass_``).

    Args:
        basis: ``"monomial"`` or ``"gegenbauer"``.
        degree_x: input expansion degree d_1 >= 1 (1 keeps the base kernel).
        degree_y: output expansion degree d_2 >= 1.
        gegenbauer_lambda: lambda > -1/2 for both sides or a pair
            ``(lambda_x, lambda_y)``; the seed uses ``(0.51, 0.52)``.
        project_psd: clip negative eigenvalues of a non-PSD transformed Gram.

    Attributes:
        alpha_, beta_, C_, hsic_: see :class:`TransformResult`.
        lambda_x_, lambda_y_: the resolved Gegenbauer parameters.
        n_train_: number of training points m.
        input_min_eigenvalue_, output_min_eigenvalue_: smallest eigenvalue of the
            transformed training Gram matrices, or ``None`` when not checked
            (PSD by construction).
        input_projector_, output_projector_: ``(m, q)`` eigenvectors U_- removed by
            the projection, or ``None`` when nothing is projected.
        input_clipped_mass_, output_clipped_mass_: sum of |clipped eigenvalues|.

    Cost: ``fit`` O((d_1 + d_2 + d_1 d_2) m^2), plus O(m^3) per checked side; the
    transforms O(d size(K)), plus O(n_test m q) when projecting.

    Examples:
        >>> import numpy as np
        >>> from bayeskde.kernels import rbf_kernel
        >>> X = np.linspace(0, 1, 30)[:, None]
        >>> K, G = rbf_kernel(X, X, gamma=5.0), rbf_kernel(X**2, X**2, gamma=5.0)
        >>> tr = PolynomialKernelTransform(degree_x=3, degree_y=2).fit(K, G)
        >>> tr.transform_input(K[:5]).shape, tr.transform_output(np.ones(4)).shape
        ((5, 30), (4,))
    """

    def __init__(
        self,
        basis="monomial",
        degree_x=2,
        degree_y=2,
        gegenbauer_lambda=DEFAULT_GEGENBAUER_LAMBDA,
        project_psd=True,
    ):
        self.basis = basis
        self.degree_x = degree_x
        self.degree_y = degree_y
        self.gegenbauer_lambda = gegenbauer_lambda
        self.project_psd = project_psd

    def fit(self, K, G):
        """Learn alpha, beta from training Gram matrices ``K``, ``G`` ``(m, m)``."""
        K = as_float_array(K, "K", ndim=2)
        G = as_float_array(G, "G", ndim=2)
        res = fit_polynomial_transform(
            K, G, self.degree_x, self.degree_y, self.basis, self.gegenbauer_lambda
        )
        self.lambda_x_, self.lambda_y_ = check_lambdas(self.gegenbauer_lambda)
        self.alpha_, self.beta_, self.C_, self.hsic_ = res
        self.n_train_ = K.shape[0]
        for side, base, coeffs, lam in (
            ("input", K, res.alpha, self.lambda_x_),
            ("output", G, res.beta, self.lambda_y_),
        ):
            self._check_psd(side, base, coeffs, lam)
        return self

    def _check_psd(self, side, base, coeffs, lam):
        setattr(self, f"{side}_min_eigenvalue_", None)
        setattr(self, f"{side}_projector_", None)
        setattr(self, f"{side}_clipped_mass_", 0.0)
        if self.basis == "monomial" and bool(jnp.all(coeffs >= 0)):
            return  # Schur product theorem: PSD whenever the base kernel is.
        evals, evecs = eigh_jit(combine_jit(base, coeffs, lam, basis=self.basis))
        min_eig = float(evals[0])
        setattr(self, f"{side}_min_eigenvalue_", min_eig)
        if min_eig >= -psd_tolerance(evals):
            return
        if not self.project_psd:
            warn_once(
                f"the transformed {side} Gram matrix is not positive semi-definite "
                "and project_psd=False: it is used as it is"
            )
            return
        warn_once(
            f"the transformed {side} Gram matrix is not positive semi-definite; "
            "its negative eigenvalues are clipped (project_psd=True)"
        )
        neg = np.asarray(evals) < 0
        setattr(self, f"{side}_projector_", evecs[:, neg])
        setattr(self, f"{side}_clipped_mass_", float(-np.asarray(evals)[neg].sum()))

    def _transform(self, K, side, name):
        check_is_fitted(self, "alpha_")
        K = as_array(K, name, (1, 2))
        coeffs, lam = (
            (self.alpha_, self.lambda_x_) if side == "input"
            else (self.beta_, self.lambda_y_)
        )
        out = combine_jit(K, coeffs, lam, basis=self.basis)
        proj = getattr(self, f"{side}_projector_")
        if proj is None or K.ndim == 1:
            return out
        if K.shape[1] != self.n_train_:
            raise ValueError(
                f"{name} must be a kernel against the {self.n_train_} training points "
                f"(shape (n, {self.n_train_})) when the {side} transform is projected "
                f"onto the PSD cone, got shape {K.shape}"
            )
        return _project_rows(out, proj)

    def transform_input(self, K):
        """phi(K) for input kernel values, ``(n, m)`` against training or ``(n,)``."""
        return self._transform(K, "input", "K")

    def transform_output(self, G):
        """psi(G) for output kernel values, ``(n, m)`` against training or ``(n,)``."""
        return self._transform(G, "output", "G")


@jax.jit
def _project_rows(K, U_neg):
    # K (I - U_- U_-^T), without forming the m x m projector.
    return K - (K @ U_neg) @ U_neg.T
