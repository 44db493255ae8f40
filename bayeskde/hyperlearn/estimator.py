"""The learned kernel and the hyperkernel learner estimator.

:class:`HyperkernelLearner` solves the hyperkernel QP of :mod:`bayeskde.hyperlearn.qp`
(Ong, Smola and Williamson 2005, conic and linear variants) over the Gaussian,
Wishart or harmonic hyperkernel of :mod:`bayeskde.kernels.hyper`, and returns the
:class:`LearnedKernel` k(x, x') = sum_ij beta_i beta_j kbar((x_i, x_j), (x, x')).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from functools import partial
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float
from sklearn.base import BaseEstimator
from sklearn.utils.validation import check_is_fitted

from .._validation import (
    check_choice,
    check_data,
    check_integer,
    check_key,
    check_nonnegative,
    check_positive,
)
from ..kernels.algebra import kernel_distances
from ..kernels.hyper import (
    check_harmonic,
    check_pairs,
    check_sigmas,
    check_wishart_params,
    gaussian_log_gram,
    gaussian_log_norm,
    harmonic_gram,
    wishart_log_gram,
)
from ..kernels.standard import (
    gamma_to_sigma,
    median_gamma,
    rbf_gram,
    sigma_to_gamma,
    squared_distances,
)
from .qp import (
    VARIANTS,
    HyperkernelQPResult,
    check_pm1,
    pair_labels,
    solve_hyperkernel_qp,
)

__all__ = [
    "HYPERKERNELS",
    "VARIANTS",
    "HyperkernelQPResult",
    "solve_hyperkernel_qp",
    "pair_labels",
    "LearnedKernel",
    "HyperkernelLearner",
]

HYPERKERNELS = ("gaussian", "wishart", "harmonic")


# ------------------------------------------------------------------------------- QP


def _gaussian_terms(U, beta, sigma, sigma_h, normalize):
    dU = jnp.sum((U[:, 0] - U[:, 1]) ** 2, axis=1)
    w = beta * jnp.exp(-dU / (4.0 * sigma * sigma))
    if normalize:
        w = w * jnp.exp(gaussian_log_norm(U.shape[-1], sigma, sigma_h))
    return w, 0.5 * (U[:, 0] + U[:, 1])


def _gaussian_learned_gram(U, beta, A, B, params, normalize):
    # ||m - (a+b)/2||^2 = ||m-a||^2/2 + ||m-b||^2/2 - ||a-b||^2/4 splits the sum over
    # pairs into one matrix product; row maxima are factored out so nothing
    # overflows and the final scale is a single exponential <= 1.
    sigma, sigma_h = params["sigma"], params["sigma_h"]
    tau2 = sigma * sigma + sigma_h * sigma_h
    w, M = _gaussian_terms(U, beta, sigma, sigma_h, normalize)
    Ea = -squared_distances(A, M) / (4.0 * tau2)
    Eb = -squared_distances(B, M) / (4.0 * tau2)
    sa, sb = jnp.max(Ea, axis=1), jnp.max(Eb, axis=1)
    core = (jnp.exp(Ea - sa[:, None]) * w[None, :]) @ jnp.exp(Eb - sb[:, None]).T
    dab = squared_distances(A, B)
    scale = -dab * (1.0 / (4.0 * sigma * sigma) - 1.0 / (8.0 * tau2))
    return jnp.exp(scale + sa[:, None] + sb[None, :]) * core


def _log_hyper(kind, P, Q, params, normalize):
    if kind == "gaussian":
        return gaussian_log_gram(P, Q, params["sigma"], params["sigma_h"], normalize)
    if kind == "wishart":
        return wishart_log_gram(P, Q, params["L"], params["r"], normalize)
    return jnp.log(harmonic_gram(P, Q, params["gamma_h"], params["lambda_h"]))


@partial(jax.jit, static_argnames=("kind", "normalize"))
def _hyper_gram(kind, P, Q, params, normalize):
    return jnp.exp(_log_hyper(kind, P, Q, params, normalize))


@partial(jax.jit, static_argnames=("kind", "normalize"))
def _learned_gram(kind, U, beta, A, B, params, normalize):
    if kind == "gaussian":
        return _gaussian_learned_gram(U, beta, A, B, params, normalize)

    def _row(a):
        Qa = jnp.stack([jnp.broadcast_to(a, B.shape), B], axis=1)
        return beta @ jnp.exp(_log_hyper(kind, U, Qa, params, normalize))

    return jax.lax.map(_row, A)


@partial(jax.jit, static_argnames=("kind", "normalize"))
def _learned_diag(kind, U, beta, A, params, normalize):
    if kind == "gaussian":
        sigma, sigma_h = params["sigma"], params["sigma_h"]
        w, M = _gaussian_terms(U, beta, sigma, sigma_h, normalize)
        tau2 = sigma * sigma + sigma_h * sigma_h
        return rbf_gram(A, M, 0.5 / tau2) @ w
    Q = jnp.stack([A, A], axis=1)
    return beta @ jnp.exp(_log_hyper(kind, U, Q, params, normalize))


@dataclasses.dataclass(frozen=True)
class LearnedKernel:
    """A kernel learned with a hyperkernel: k(x, x') = sum_u beta_u K(u, (x, x')) + b.

    Usable wherever a kernel is: it is a callable ``k(A, B) -> (len(A), len(B))``
    (so ``bayeskde.KernelPCA(kernel=k)``, ``KernelDependencyEstimator(kernel=k)``
    and ``sklearn.svm.SVC(kernel="precomputed")`` on ``k(X, X)`` all accept it).
    With ``include_bias=True`` the offset b is part of k, as in the paper's
    decision rule ``k(x, x') > 0``; b adds a constant matrix, which centring (KPCA),
    an SVM's equality constraint and the induced metric all ignore. For a conic
    solution ``k - b`` is positive semi-definite and ``k`` itself is conditionally
    positive definite (and PSD when b >= 0).

    Attributes:
        kind: ``"gaussian"``, ``"wishart"`` or ``"harmonic"``.
        params: the hyperkernel's parameters (``sigma``, ``sigma_h``; ``L`` the
            Cholesky factor of C and ``r``; or ``gamma_h``, ``lambda_h``).
        pairs: ``(n_support, 2, n_features)`` training pairs with beta != 0.
        beta: ``(n_support,)`` their coefficients.
        b: the offset.
        normalize: whether the hyperkernel carries its normalising constant.
        include_bias: whether ``gram`` adds b.
    """

    kind: str
    params: Mapping[str, Any]
    pairs: Float[Array, "n_support 2 n_features"]
    beta: Float[Array, " n_support"]
    b: float
    normalize: bool = False
    include_bias: bool = True

    def _check(self, A, name):
        A = check_data(A, name)
        if isinstance(A, tuple):
            raise TypeError(f"{name}: a hyperkernel needs numeric arrays, got strings")
        if A.shape[1] != self.pairs.shape[2]:
            raise ValueError(
                f"{name} must have {self.pairs.shape[2]} features, got {A.shape[1]}"
            )
        return A

    def gram(self, A, B=None) -> Float[Array, "n_a n_b"]:
        """Gram matrix ``(len(A), len(B))``; ``B=None`` means ``B = A``.

        Cost: O((n_a + n_b) n_support n_features + n_a n_b n_support) for the
        Gaussian hyperkernel (one matrix product), O(n_a n_b n_support
        n_features^2) for the Wishart one; memory O((n_a + n_b) n_support + n_a n_b)
        and O(n_b n_support) per row respectively.
        """
        A = self._check(A, "A")
        B = A if B is None else self._check(B, "B")
        K = _learned_gram(
            self.kind, self.pairs, self.beta, A, B, dict(self.params), self.normalize
        )
        return K + self.b if self.include_bias else K

    __call__ = gram

    def diag(self, A) -> Float[Array, " n_a"]:
        """Self-similarities k(a, a), without the full Gram. Cost O(n_a n_support)."""
        A = self._check(A, "A")
        d = _learned_diag(
            self.kind, self.pairs, self.beta, A, dict(self.params), self.normalize
        )
        return d + self.b if self.include_bias else d

    def distances(self, A, B=None) -> Float[Array, "n_a n_b"]:
        """Induced squared metric d(x, x') = k(x,x) - 2 k(x,x') + k(x',x') (sec. 5).

        A metric (its square root obeys the triangle inequality) when ``k - b`` is
        PSD, i.e. for conic solutions; clipped at 0 against round-off.
        """
        Bd = A if B is None else B
        return kernel_distances(self.gram(A, B), self.diag(A), self.diag(Bd))

    def without_bias(self) -> LearnedKernel:
        """The same kernel without the offset b (PSD for a conic solution)."""
        return dataclasses.replace(self, include_bias=False)


# ------------------------------------------------------------------------ estimator


class HyperkernelLearner(BaseEstimator):
    """Learn a kernel from pair labels with a hyperkernel (Kondor and Jebara, sec. 5).

    Args:
        hyperkernel: ``"gaussian"`` (eq. (8)), ``"wishart"`` (eq. (12)) or
            ``"harmonic"`` (Ong et al.).
        sigma: Gaussian hyperkernel width, > 0, or ``"median"`` (default): the
            median distance m between distinct training rows (the median
            heuristic, :func:`bayeskde.kernels.standard.median_gamma`,
            m = sqrt(1 / (2 gamma))), the width on the data's scale.
        sigma_h: Gaussian hyperkernel's h width, >= 0, or ``"median"``
            (default): the same m.
        C: hinge constant, > 0 (the paper's 10).
        variant: ``"conic"`` (beta >= 0: a Mercer kernel) or ``"linear"``.
        max_pairs: if set, train on that many pairs drawn without replacement
            (needs ``key``); ``None`` uses all pairs.
        wishart_scale: C of the Wishart hyperkernel, ``(n_features, n_features)``
            SPD; ``None`` means the identity.
        wishart_dof: r of the Wishart hyperkernel; ``None`` means n_features + 1.
        gamma_h, lambda_h: harmonic hyperkernel parameters; ``gamma_h`` is a
            rate, > 0, or ``"median"`` (default): the median-heuristic rate
            1 / (2 m^2).
        key: ``jax.random`` key for the subsampling of pairs (keyword-only).
        tol: QP solver tolerance.

    Attributes:
        kernel_: the :class:`LearnedKernel`.
        qp_: the :class:`HyperkernelQPResult`.
        pair_index_: ``(n_pairs, 2)`` indices of the training pairs used.
        pair_weights_: ``(n_pairs,)`` hinge weights (2 for merged symmetric pairs).
        params_: the resolved hyperkernel parameters.
        X_fit_: the training inputs.

    Cost: hyperkernel Gram O(p^2 n_features) and the QP O(iterations p^3) for p
    training pairs (m (m + 1) / 2 with symmetric labels, else m^2).

    Examples:
        >>> import numpy as np
        >>> X = np.random.default_rng(0).normal(size=(8, 2))
        >>> y = (X[:, 0] > 0).astype(int)
        >>> learner = HyperkernelLearner(sigma=1.0, sigma_h=1.0).fit(X, y)
        >>> learner.kernel_(X).shape
        (8, 8)
    """

    def __init__(
        self,
        hyperkernel="gaussian",
        sigma="median",
        sigma_h="median",
        C=10.0,
        variant="conic",
        max_pairs=None,
        *,
        wishart_scale=None,
        wishart_dof=None,
        gamma_h="median",
        lambda_h=0.5,
        key=None,
        tol=1e-8,
    ):
        self.hyperkernel = hyperkernel
        self.sigma = sigma
        self.sigma_h = sigma_h
        self.C = C
        self.variant = variant
        self.max_pairs = max_pairs
        self.wishart_scale = wishart_scale
        self.wishart_dof = wishart_dof
        self.gamma_h = gamma_h
        self.lambda_h = lambda_h
        self.key = key
        self.tol = tol

    def _resolve(self, X):
        n_features = X.shape[1]

        def median(value):
            return isinstance(value, str) and value == "median"

        width = None
        if any(median(v) for v in (self.sigma, self.sigma_h, self.gamma_h)):
            width = gamma_to_sigma(median_gamma(X))
        if self.hyperkernel == "gaussian":
            sigma, sigma_h = check_sigmas(
                width if median(self.sigma) else self.sigma,
                width if median(self.sigma_h) else self.sigma_h)
            return {"sigma": sigma, "sigma_h": sigma_h}
        if self.hyperkernel == "wishart":
            C = np.eye(n_features) if self.wishart_scale is None else (
                self.wishart_scale)
            r = n_features + 1 if self.wishart_dof is None else self.wishart_dof
            L, r = check_wishart_params(C, r, n_features)
            return {"L": L, "r": r}
        if self.hyperkernel == "harmonic":
            gamma_h, lambda_h = check_harmonic(
                sigma_to_gamma(width) if median(self.gamma_h) else self.gamma_h,
                self.lambda_h)
            return {"gamma_h": gamma_h, "lambda_h": lambda_h}
        raise ValueError(
            f"hyperkernel must be one of {HYPERKERNELS}, got {self.hyperkernel!r}"
        )

    def _pairs(self, y, m):
        y = np.asarray(y)
        if y.ndim == 1:
            if y.shape[0] != m:
                raise ValueError(
                    f"class labels y must have length {m} (one per row of X), got "
                    f"{y.shape[0]}"
                )
            Y = pair_labels(y)
        elif y.ndim == 2:
            Y = check_pm1(y, "pair labels y", (m, m)).astype(int)
        else:
            raise ValueError(
                "y must be class labels of shape (m,) or pair labels of shape (m, m), "
                f"got shape {y.shape}"
            )
        if np.array_equal(Y, Y.T):
            rows, cols = np.triu_indices(m)
            w = np.where(rows == cols, 1.0, 2.0)
        else:
            rows, cols = (a.ravel() for a in np.indices((m, m)))
            w = np.ones(rows.shape[0])
        if self.max_pairs is not None:
            n_sub = check_integer(self.max_pairs, "max_pairs", minimum=1)
            if n_sub < rows.shape[0]:
                if self.key is None:
                    raise ValueError("max_pairs subsampling needs a jax.random key")
                pick = np.sort(np.asarray(jax.random.choice(
                    self.key, rows.shape[0], (n_sub,), replace=False)))
                rows, cols, w = rows[pick], cols[pick], w[pick]
        return np.stack([rows, cols], axis=1), Y[rows, cols], w

    def fit(self, X, y):
        """Learn the kernel.

        Args:
            X: ``(m, n_features)`` training inputs.
            y: ``(m,)`` class labels (pairs labelled +1 when equal), or an
                ``(m, m)`` matrix of pair labels in {-1, +1}.

        Returns:
            ``self``.

        Raises:
            ValueError: for labels that are not pairs (wrong shape, values outside
                {-1, +1}), bad hyperkernel parameters or a failed QP.
        """
        check_choice(self.variant, "variant", VARIANTS)
        check_choice(self.hyperkernel, "hyperkernel", HYPERKERNELS)
        check_key(self.key, "key", allow_none=True)
        check_positive(self.C, "C")
        check_nonnegative(self.tol, "tol")
        X = check_data(X, "X", min_samples=2)
        if isinstance(X, tuple):
            raise TypeError("X must be numeric; hyperkernels act on vectors")
        m, d = X.shape
        params = self._resolve(X)
        index, yp, w = self._pairs(y, m)
        U = jnp.stack([X[index[:, 0]], X[index[:, 1]]], axis=1)
        K = _hyper_gram(self.hyperkernel, U, U, params, False)
        qp = solve_hyperkernel_qp(
            K, yp, self.C, weights=w, variant=self.variant, tol=self.tol
        )
        beta = qp.beta
        keep = np.abs(beta) > 1e-9 * max(float(np.max(np.abs(beta))), 1e-300)
        keep[np.argmax(np.abs(beta))] = True  # k - b may be 0; keep one term
        dtype = X.dtype
        self.kernel_ = LearnedKernel(
            self.hyperkernel,
            params,
            check_pairs(U[np.flatnonzero(keep)], "pairs"),
            jnp.asarray(beta[keep], dtype=dtype),
            float(qp.b),
        )
        self.qp_ = qp
        self.pair_index_ = index
        self.pair_labels_ = yp
        self.pair_weights_ = w
        self.params_ = params
        self.X_fit_ = X
        return self

    def decision_function(self, A, B=None):
        """k(a, b) for all pairs of rows: > 0 predicts "same class"."""
        check_is_fitted(self, "kernel_")
        return self.kernel_(A, B)

    def predict_pairs(self, A, B=None):
        """Pair labels in {-1, +1}: +1 where k(a, b) > 0 (section 5)."""
        return jnp.where(self.decision_function(A, B) > 0, 1, -1)
