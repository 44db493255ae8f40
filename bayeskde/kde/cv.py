"""Model selection for KDE and k-NN by k-fold cross-validation on Gram matrices.

Weston et al. (2002), section 4, choose the input width sigma from
{1e-3, ..., 1e3} and the ridge gamma from {1e-4, ..., 1e1} by five-fold CV. A naive
grid search refits KDE for every (sigma, gamma, fold). Here each fold needs one
output KPCA, and each (sigma, fold) one ``eigh`` of the input Gram K = U S U^T:
the ridge then only changes the eigenvalues,
(K + m gamma I)^-1 T = U diag(1 / (S + m gamma)) U^T T,
so every ridge value costs two thin matrix products. Losses come from a loss matrix
Lambda[a, b] = loss of answering output b when the truth is output a (by default
the kernel-induced ||Phi(y_a) - Phi(y_b)||^2), which is exact for candidate
pre-images drawn from the training outputs.
"""

from __future__ import annotations

import functools
import numbers
from collections.abc import Iterable, Sequence
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float
from sklearn.base import BaseEstimator
from sklearn.model_selection import KFold
from sklearn.utils.validation import check_is_fitted

from .._typing import ArrayLike
from .._validation import as_float_array, check_integer, check_positive
from ..kernels.algebra import center_kernel, kernel_distances
from ..kernels.registry import make_kernel
from ..kpca.core import kernel_pca_eigen, kpca_transform
from .estimators import KernelDependencyEstimator

__all__ = [
    "PAPER_SIGMAS",
    "PAPER_RIDGES",
    "CVResult",
    "kde_cv_losses",
    "knn_cv_losses",
    "loss_matrix_from_kernel",
    "kfold_indices",
    "input_gram_grid",
    "KernelDependencyEstimatorCV",
]

#: Width factors and ridges of Weston et al. (2002), section 4: the defaults of
#: :class:`KernelDependencyEstimatorCV` (widths are multiples of the median
#: distance there).
PAPER_SIGMAS = (1e-3, 1e-2, 1e-1, 1e0, 1e1, 1e2, 1e3)
PAPER_RIDGES = (1e-4, 1e-3, 1e-2, 1e-1, 1e0, 1e1)

class CVResult(NamedTuple):
    """Cross-validated losses.

    Attributes:
        fold_losses: ``(n_folds, n_params, n_values)`` mean validation loss per fold.
        mean_loss: ``(n_params, n_values)`` average over folds.
        best: ``(param_index, value_index)`` of the smallest mean loss (first on ties).
    """

    fold_losses: np.ndarray
    mean_loss: np.ndarray
    best: tuple[int, int]


def kfold_indices(n: int, n_splits: int) -> list[tuple[np.ndarray, np.ndarray]]:
    """Contiguous, unshuffled k-fold (train, validation) indices (sklearn KFold)."""
    return [(tr, va) for tr, va in KFold(n_splits).split(np.arange(n))]


@jax.jit
def loss_matrix_from_kernel(L: Float[Array, "n n"]) -> Float[Array, "n n"]:
    """Kernel-induced losses ||Phi(y_a) - Phi(y_b)||^2 from an output Gram matrix."""
    d = jnp.diagonal(L)
    return kernel_distances(L, d, d)


def _setting_eval(K_tr, K_va, P, loss_va, ridges):
    """Mean validation loss for every ridge, from one eigendecomposition of K_tr.

    With T the training projections and P = T T^T, the predicted projections are
    F = K_va U D U^T T with D = diag(1 / (S + m gamma)), and the nearest-projection
    search needs only F T^T = (K_va U) D (U^T P): one (v x m)(m x m) product per
    ridge value.
    """
    m = K_tr.shape[0]
    S, U = jnp.linalg.eigh(0.5 * (K_tr + K_tr.T))
    S = jnp.maximum(S, 0.0)
    A = K_va @ U
    C = U.T @ P
    t2 = jnp.diagonal(P)

    def one_ridge(lam):
        G = (A / (S + m * lam)[None, :]) @ C  # = F T^T
        idx = jnp.argmin(t2[None, :] - 2.0 * G, axis=1)  # ||F - T_j||^2 + const
        return jnp.mean(jnp.take_along_axis(loss_va, idx[:, None], axis=1))

    return jax.vmap(one_ridge)(ridges)


def _fold_eval(K_grid, L, loss, tr, va, ridges, n_components):
    L_tr = L[tr][:, tr]
    if n_components is None:
        # All components: T T^T is the centred output Gram itself, no eigh needed.
        P = center_kernel(L_tr)
    else:
        T = kpca_transform(kernel_pca_eigen(L_tr, n_components), L_tr)
        P = T @ T.T
    return jax.vmap(_setting_eval, in_axes=(0, 0, None, None, None))(
        K_grid[:, tr][:, :, tr], K_grid[:, va][:, :, tr], P, loss[va][:, tr], ridges
    )


@functools.partial(jax.jit, static_argnames="n_components")
def _fold_group(K_grid, L, loss, trs, vas, ridges, n_components):
    # lax.map runs the folds in one dispatch with the memory of one fold.
    return jax.lax.map(
        lambda f: _fold_eval(K_grid, L, loss, f[0], f[1], ridges, n_components),
        (trs, vas),
    )


def _check_folds(folds, n: int, name: str = "folds"):
    """``folds`` as a list of (train, validation) index arrays over ``n`` points:
    an integer k >= 2 (contiguous k-fold) or explicit pairs."""
    if isinstance(folds, numbers.Integral) and not isinstance(folds, bool):
        k = check_integer(folds, name, minimum=2, maximum=n)
        return kfold_indices(n, k)
    if isinstance(folds, str | bytes | numbers.Number) or not isinstance(
            folds, Iterable):
        raise TypeError(
            f"{name} must be an integer number of folds (>= 2) or a list of "
            f"(train, validation) index arrays, got {folds!r}"
        )
    out = []
    for i, pair in enumerate(folds):
        try:
            tr, va = pair
        except (TypeError, ValueError) as err:
            raise ValueError(
                f"{name}[{i}] must be a (train, validation) pair of index arrays, "
                f"got {pair!r}"
            ) from err
        idx = []
        for part, arr in (("train", tr), ("validation", va)):
            a = np.asarray(arr)
            if a.ndim != 1 or a.size == 0 or a.dtype.kind not in "iu":
                raise ValueError(
                    f"{name}[{i}] {part} indices must be a non-empty 1-D integer "
                    f"array, got {arr!r}"
                )
            if a.min() < 0 or a.max() >= n:
                raise ValueError(
                    f"{name}[{i}] {part} indices must lie in [0, {n}), got "
                    f"[{a.min()}, {a.max()}]"
                )
            idx.append(a)
        out.append(tuple(idx))
    if not out:
        raise ValueError(f"{name} is empty; need at least one (train, validation) "
                         "pair")
    return out


def _check_ridges(ridges, name: str = "ridges") -> list[float]:
    if isinstance(ridges, str | bytes | numbers.Number) or not isinstance(
            ridges, Iterable):
        raise TypeError(f"{name} must be a sequence of positive numbers, got "
                        f"{ridges!r}")
    values = [check_positive(r, name) for r in np.asarray(ridges, object).ravel()]
    if not values:
        raise ValueError(f"{name} is empty; need at least one ridge value")
    return values


def _summarise(fold_losses) -> CVResult:
    fold_losses = np.asarray(fold_losses)
    mean = fold_losses.mean(axis=0)
    best = np.unravel_index(int(np.argmin(mean)), mean.shape)
    return CVResult(fold_losses, mean, (int(best[0]), int(best[1])))


def _check_grid(K_grid, L, loss):
    K_grid = as_float_array(K_grid, "K_grid")
    if K_grid.ndim == 2:
        K_grid = K_grid[None]
    if K_grid.ndim != 3 or K_grid.shape[1] != K_grid.shape[2]:
        raise ValueError(
            f"K_grid must have shape (n_params, n, n), got {K_grid.shape}"
        )
    n = K_grid.shape[1]
    L = as_float_array(L, "L", ndim=2)
    if L.shape != (n, n):
        raise ValueError(f"L must have shape ({n}, {n}), got {L.shape}")
    loss = loss_matrix_from_kernel(L) if loss is None else as_float_array(
        loss, "loss", ndim=2)
    if loss.shape != (n, n):
        raise ValueError(f"loss must have shape ({n}, {n}), got {loss.shape}")
    return K_grid, L, loss


def kde_cv_losses(
    K_grid: Float[ArrayLike, "*grid n_a n_b"],
    L: Float[ArrayLike, "n_c n_d"],
    ridges: Sequence[float] = PAPER_RIDGES,
    folds: Sequence[tuple[np.ndarray, np.ndarray]] | int = 5,
    loss: Float[ArrayLike, "n_e n_f"] | None = None,
    n_components: int | None = None,
) -> CVResult:
    """Cross-validated KDE losses over input Grams x ridges (candidate pre-images).

    Args:
        K_grid: input Gram matrices over all n points, one per input kernel setting.
        L: output Gram matrix over all n points.
        ridges: the paper's ridge values gamma (each > 0).
        folds: number of contiguous folds, or explicit (train, validation) indices.
        loss: loss matrix Lambda; default the kernel-induced loss of ``L``.
        n_components: output KPCA components per fold; ``None`` keeps all.

    Returns:
        :class:`CVResult` with ``mean_loss`` of shape ``(n_params, n_ridges)``.

    Cost: per fold O(n_params m^3) for the input eigendecompositions (m training
    points), O(m^3) for the output KPCA only when ``n_components`` is set, and
    O(n_params v m^2) per ridge value (v validation points); memory O(n_params m^2).
    """
    K_grid, L, loss = _check_grid(K_grid, L, loss)
    ridges = jnp.asarray(_check_ridges(ridges), K_grid.dtype)
    n = K_grid.shape[1]
    folds = _check_folds(folds, n)
    p = None if n_components is None else check_integer(
        n_components, "n_components", minimum=1,
        maximum=min(len(tr) for tr, _ in folds))
    # Folds of equal sizes share one compiled call (k-fold sizes differ by <= 1).
    groups: dict[tuple[int, int], list[int]] = {}
    for i, (tr, va) in enumerate(folds):
        groups.setdefault((len(tr), len(va)), []).append(i)
    out = [None] * len(folds)
    for members in groups.values():
        trs = jnp.asarray(np.stack([folds[i][0] for i in members]))
        vas = jnp.asarray(np.stack([folds[i][1] for i in members]))
        res = _fold_group(K_grid, L, loss, trs, vas, ridges, p)
        for j, i in enumerate(members):
            out[i] = res[j]
    return _summarise(out)


@jax.jit
def _knn_fold(K_tr_diag, K_va_tr, L_tr, loss_va, ks_onehot):
    D = K_tr_diag[None, :] - 2.0 * K_va_tr
    order = jnp.argsort(D, axis=1)
    l_diag = jnp.diagonal(L_tr)

    def one_k(mask):
        # Average of the first k neighbours' features; pre-image = closest training
        # output: argmin_j L_jj - (2/k) sum_nb L_j,nb.
        w = jnp.zeros_like(D).at[jnp.arange(D.shape[0])[:, None], order].set(
            jnp.broadcast_to(mask, D.shape)
        )
        w = w / jnp.sum(mask)
        score = l_diag[None, :] - 2.0 * w @ L_tr
        idx = jnp.argmin(score, axis=1)
        return jnp.mean(jnp.take_along_axis(loss_va, idx[:, None], axis=1))

    return jax.vmap(one_k)(ks_onehot)


def knn_cv_losses(
    K: Float[ArrayLike, "n_a n_b"],
    L: Float[ArrayLike, "n_c n_d"],
    ks: Sequence[int] = (1, 3, 5, 7, 9),
    folds: Sequence[tuple[np.ndarray, np.ndarray]] | int = 5,
    loss: Float[ArrayLike, "n_e n_f"] | None = None,
) -> CVResult:
    """Cross-validated losses of the general-output k-NN for each k.

    For k = 1 the nearest neighbour's output is used (the average of one feature
    vector has that output as its exact pre-image).

    Returns:
        :class:`CVResult` with ``mean_loss`` of shape ``(1, len(ks))``.
    """
    K_grid, L, loss = _check_grid(K, L, loss)
    K = K_grid[0]
    n = K.shape[0]
    folds = _check_folds(folds, n)
    if isinstance(ks, str | bytes) or not isinstance(ks, Iterable):
        raise TypeError(f"ks must be a sequence of integers, got {ks!r}")
    ks = [check_integer(k, "ks", minimum=1) for k in ks]
    if not ks:
        raise ValueError("ks is empty; need at least one number of neighbours")
    out = []
    for tr, va in folds:
        m = len(tr)
        if max(ks) > m or min(ks) < 1:
            raise ValueError(f"ks must lie in [1, {m}] (training fold size), got {ks}")
        mask = jnp.asarray(
            [[1.0 if j < k else 0.0 for j in range(m)] for k in ks], K.dtype
        )
        out.append(
            _knn_fold(jnp.diagonal(K)[tr], K[va][:, tr], L[tr][:, tr],
                      loss[va][:, tr], mask)[None]
        )
    return _summarise(out)


def input_gram_grid(kernel, grid: Sequence[dict], X) -> Float[Array, "n_params n n"]:
    """Input Gram matrices for each parameter setting in ``grid``.

    The expensive part is shared: an RBF grid over ``sigma``/``gamma`` computes the
    squared distances once, and a grid over ``rbf_sigma`` (the RBF map on top of a
    kernel, e.g. the string kernel) computes the base Gram matrix once.
    """
    from ..kernels.registry import Kernel
    from ..kernels.standard import squared_distances

    k = make_kernel(kernel) if not isinstance(kernel, Kernel) else kernel
    keys = {frozenset(g) for g in grid}
    if k.name == "rbf" and keys <= {frozenset({"sigma"}), frozenset({"gamma"})}:
        Xa = as_float_array(X, "X")
        d2 = squared_distances(Xa, Xa)
        gammas = [k.with_params(**g).params["gamma"] for g in grid]
        return jnp.stack([jnp.exp(-g * d2) for g in gammas])
    if keys == {frozenset({"rbf_sigma"})}:
        base = make_kernel(
            k.name, {a: b for a, b in k.params.items() if a != "rbf_sigma"}
        ) if k.name != "callable" else k
        K0 = base.gram(X)
        d = jnp.diagonal(K0)
        D = kernel_distances(K0, d, d)
        sig = [check_positive(g["rbf_sigma"], "rbf_sigma") for g in grid]
        return jnp.stack([jnp.exp(-D / (2.0 * s * s)) for s in sig])
    return jnp.stack([k.with_params(**g).gram(X) for g in grid])


def _expand_grid(grid) -> list[dict]:
    if grid is None:
        return [{}]
    if isinstance(grid, dict):
        if len(grid) != 1:
            raise ValueError(
                "input_param_grid as a dict takes one parameter and its values "
                f"(pass a list of dicts for several), got {grid!r}")
        ((name, values),) = grid.items()
        if isinstance(values, str | bytes) or not isinstance(values, Iterable):
            raise TypeError(f"input_param_grid[{name!r}] must be a sequence of "
                            f"values, got {values!r}")
        out = [{name: v} for v in values]
        if not out:
            raise ValueError(f"input_param_grid[{name!r}] is empty; need at least "
                             "one value")
        return out
    if isinstance(grid, str | bytes) or not isinstance(grid, Iterable):
        raise TypeError("input_param_grid must be a dict or a non-empty list of "
                        f"dicts, got {grid!r}")
    grid = list(grid)
    if not grid or not all(isinstance(g, dict) for g in grid):
        raise ValueError("input_param_grid must be a dict or a non-empty list of "
                         f"dicts, got {grid!r}")
    return grid


class KernelDependencyEstimatorCV(BaseEstimator):
    """KDE with the input kernel parameter and ridge chosen by k-fold CV.

    The paper's protocol (Weston et al. 2002, section 4): the input width over
    {1e-3, ..., 1e3} and the ridge over {1e-4, ..., 1e1} by five-fold CV, here with
    one eigendecomposition per (setting, fold) shared by every ridge
    (:func:`kde_cv_losses`), then a refit on all data.

    Args:
        input_param_grid: ``{"sigma": [...]}`` (one parameter) or a list of param
            dicts merged over ``input_kernel_params``. ``None``: for ``"rbf"`` the
            paper's sigma values times the median pairwise distance (the paper's
            scaling of sigma was lost in extraction; this keeps the grid
            scale-free), for a kernel with ``rbf_sigma`` the same over the
            feature-space median distance, otherwise no input search.
        ridges: ridge values (paper's gamma).
        cv: number of contiguous folds or explicit (train, validation) indices.
        Other arguments: as :class:`bayeskde.KernelDependencyEstimator`; the
        selection uses candidate pre-images (training outputs).

    Attributes:
        cv_result_: :class:`CVResult` (``mean_loss`` is settings x ridges).
        best_params_: ``{"input_kernel_params": ..., "ridge": ...}``.
        best_estimator_: the refitted :class:`KernelDependencyEstimator`.
    """

    def __init__(
        self,
        input_kernel="rbf",
        input_kernel_params=None,
        output_kernel="rbf",
        output_kernel_params=None,
        input_param_grid=None,
        ridges=PAPER_RIDGES,
        cv=5,
        n_components=None,
        preimage="candidates",
        candidates=None,
    ):
        self.input_kernel = input_kernel
        self.input_kernel_params = input_kernel_params
        self.output_kernel = output_kernel
        self.output_kernel_params = output_kernel_params
        self.input_param_grid = input_param_grid
        self.ridges = ridges
        self.cv = cv
        self.n_components = n_components
        self.preimage = preimage
        self.candidates = candidates

    def _default_grid(self, kernel, X):
        from ..kernels.algebra import median_heuristic

        if self.input_param_grid is not None:
            return _expand_grid(self.input_param_grid)
        if kernel.name == "rbf":
            med = median_heuristic(X)
            return [{"sigma": s * med} for s in PAPER_SIGMAS]
        if "rbf_sigma" in kernel.params:
            base = make_kernel(kernel.name, {
                a: b for a, b in kernel.params.items() if a != "rbf_sigma"})
            med = median_heuristic(K=base.gram(X))
            return [{"rbf_sigma": s * med} for s in PAPER_SIGMAS]
        return [{}]

    def fit(self, X, Y):
        """Select parameters by CV on (X, Y), then refit on all of it."""
        est = KernelDependencyEstimator(
            self.input_kernel, self.input_kernel_params, self.output_kernel,
            self.output_kernel_params, self.n_components, 1.0, self.preimage,
            self.candidates,
        )
        K_unused, L = est._setup(X, Y)  # validates X, Y and both kernels
        del K_unused
        kx = est.input_kernel_
        if kx.precomputed:
            raise ValueError("KernelDependencyEstimatorCV needs a named or callable "
                             "input kernel, not 'precomputed'")
        # Checked here, before the Grams, so that the messages name these
        # arguments (not kde_cv_losses's folds).
        ridges = _check_ridges(self.ridges)
        folds = _check_folds(self.cv, L.shape[0], "cv")
        grid = self._default_grid(kx, est.X_fit_)
        K_grid = input_gram_grid(kx, grid, est.X_fit_)
        self.cv_result_ = kde_cv_losses(
            K_grid, L, ridges, folds, n_components=self.n_components
        )
        gi, ri = self.cv_result_.best
        params = {**kx.params, **grid[gi]} if kx.name != "callable" else None
        if kx.name == "rbf" and "sigma" in grid[gi]:
            params = kx.with_params(**grid[gi]).params
        self.grid_ = grid
        self.best_params_ = {
            "input_kernel_params": params, "ridge": ridges[ri]
        }
        self.best_estimator_ = KernelDependencyEstimator(
            self.input_kernel if kx.name == "callable" else kx.name, params,
            self.output_kernel, self.output_kernel_params, self.n_components,
            ridges[ri], self.preimage, self.candidates,
        ).fit(X, Y)
        return self

    def predict(self, X):
        """Predict with the refitted best estimator."""
        check_is_fitted(self, "best_estimator_")
        return self.best_estimator_.predict(X)

    def score(self, X, Y):
        """Minus the mean kernel-induced output loss of the best estimator."""
        check_is_fitted(self, "best_estimator_")
        return self.best_estimator_.score(X, Y)
