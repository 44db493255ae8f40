"""Exact KDE as a few compiled programs on size buckets (the estimator's engine).

:class:`bayeskde.KernelDependencyEstimator` with ``solver="exact"`` runs three
programs (Weston et al. 2002, section 3):

1. the output program: output Gram, kernel PCA (one ``eigh``) and the training
   projections, looked up first in :mod:`bayeskde.kde.memo`;
2. the ridge program: input Gram and one Cholesky solve onto every component;
3. the predict program: test-versus-training kernel, projections f(x) and the
   pre-image (nearest candidate, or the linear one) in one call.

Size buckets. Training sets, candidate sets and blocks of test rows are padded on
the host to the sizes of :func:`bayeskde._linalg.bucket_multiple` (at most 1/8
more rows), and the real count travels as a traced number, so a cross-validation
loop whose folds differ in size, or a data set of a nearby size, reuses the
compiled programs. Padded rows enter neither the centring, the eigenproblem, the
ridge system nor the candidate set (see :func:`bayeskde.kpca.kernel_pca_padded`,
:func:`bayeskde.kde.ridge_solve_padded`), so every answer is the unpadded one
to round-off.

Vector kernels (``"rbf"``, ``"polynomial"``, ``"linear"``, ``"regression"``
without ``rbf_sigma``) are evaluated inside the programs from the data; other
kernels (strings, callables, ``"precomputed"``) enter as padded Gram matrices.
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float

from .._linalg import bucket_multiple, pad_to_multiple
from .._typing import float_dtype
from ..cache import quick_jit
from ..kernels.standard import VECTOR_KERNELS, gram_fn, split_params
from ..kpca.core import KPCAResult, kernel_pca_padded, kpca_transform_padded
from .core import KDEFit, ridge_solve, ridge_solve_padded
from .memo import fingerprint, memo_get, memo_put
from .preimage import feature_weights_padded, nearest_candidates_padded

__all__ = ["PaddedKDE", "vector_spec", "pad_host", "fit_padded", "predict_padded",
           "transform_padded", "unpad_fit"]


class PaddedKDE(NamedTuple):
    """A KDE fitted on a padded training set.

    Attributes:
        kpca: padded output kernel PCA (zero rows and components on padding).
        coef: ``(n_pad, p)`` ridge coefficients, zero on padding rows.
        train_proj: ``(n_pad, p)`` training projections, zero on padding rows.
        inputs: the padded training inputs (vector kernels) or ``None``.
        outputs: the padded training outputs (vector outputs) or ``None``.
        n: the number of real training rows.
        n_components: the number of real components (``p`` or ``n``).
    """

    kpca: KPCAResult
    coef: Float[Array, "n_pad p"]
    train_proj: Float[Array, "n_pad p"]
    inputs: Array | None
    outputs: Array | None
    n: int
    n_components: int


def vector_spec(kernel):
    """``(spec, theta)`` of a kernel evaluated inside the programs, or
    ``(None, zeros)`` for one that enters as a Gram matrix (or ``None``).
    ``theta`` is a host array."""
    if (kernel is not None and kernel.name in VECTOR_KERNELS
            and "rbf_sigma" not in kernel.params):
        try:
            items = tuple(sorted(kernel.params.items()))
            hash(items)
        except TypeError:  # unhashable parameter values: no cache
            return _split(kernel.name, kernel.params, float_dtype())
        return _split_cached(kernel.name, items, float_dtype())
    return None, np.zeros((1,), float_dtype())


def _split(name, params, dtype):
    spec, theta = split_params(name, params)
    return spec, np.asarray(theta, dtype)


@functools.lru_cache(maxsize=64)
def _split_cached(name, items, dtype):
    spec, theta = _split(name, dict(items), dtype)
    theta.setflags(write=False)
    return spec, theta


def pad_host(a, rows: int | None = None, cols: int | None = None) -> np.ndarray:
    """``a`` as a host array with its rows padded to their bucket (or to ``rows``)
    by copies of the last row, and, for a Gram block, its columns padded with
    zeros to ``cols``."""
    a = np.asarray(a)
    if cols is not None and cols > a.shape[1]:
        a = np.concatenate([a, np.zeros((a.shape[0], cols - a.shape[1]), a.dtype)],
                           axis=1)
    n = a.shape[0]
    multiple = bucket_multiple(n) if rows is None else rows
    return pad_to_multiple(a, multiple)[0]


def _finite_block(G, n_rows, n_cols):
    real = (jnp.arange(G.shape[0]) < n_rows)[:, None] & (
        jnp.arange(G.shape[1]) < n_cols)[None, :]
    return jnp.all(jnp.isfinite(jnp.where(real, G, 0.0)))


@quick_jit(static_argnames=("spec", "n_components"))
def _output_program(Y, n, theta, spec, n_components):
    L = Y if spec is None else gram_fn(spec, theta, Y, Y)
    kp = kernel_pca_padded(L, n, n_components)
    w = (jnp.arange(L.shape[0]) < n).astype(L.dtype)
    T = kpca_transform_padded(kp, L, n) * w[:, None]
    return kp, T, _finite_block(L, n, n)


@quick_jit(static_argnames="spec")
def _ridge_program(X, n, theta, ridge, T, spec):
    K = X if spec is None else gram_fn(spec, theta, X, X)
    # A non-finite K makes B non-finite: one check serves both (the fall-back
    # path then evaluates K alone and raises the kernel's own message).
    return ridge_solve_padded(K, T, ridge, n)


@quick_jit(static_argnames=("spec", "preimage"))
def _predict_program(Xt, Xfit, n, theta, coef, kpca, cand, n_cand, spec, preimage):
    Kt = Xt if spec is None else gram_fn(spec, theta, Xt, Xfit)
    finite = _finite_block(Kt, Kt.shape[0], n)
    F = Kt @ coef  # coef is zero on padding rows
    if preimage == "features":
        return F, finite
    if preimage == "linear":  # cand holds the padded training outputs
        return feature_weights_padded(kpca, F, n) @ cand, finite
    return nearest_candidates_padded(F, cand, n_cand), finite


_transform_program = quick_jit(kpca_transform_padded)


def transform_padded(fit: PaddedKDE, G) -> Float[Array, "n_pad p"]:
    """Padded projections of candidates from their ``(c, n)`` output kernel
    against the training outputs; rows padded to their bucket."""
    Gp = pad_host(G, cols=fit.kpca.alphas.shape[0])
    return _transform_program(fit.kpca, Gp, fit.n)


def fit_padded(kin, kout, X, Y, K, L, ridge: float, n_components: int | None,
               memoize: bool) -> PaddedKDE:
    """Fit exact KDE (output KPCA, then the ridge solve) on bucketed sizes.

    Args:
        kin, kout: resolved input and output kernels.
        X, Y: validated training inputs and outputs (arrays or string tuples;
            ``None`` for a precomputed side).
        K, L: the Gram matrices of the sides that enter as Grams (else ``None``).
        ridge: the paper's ridge gamma (system K + n gamma I).
        n_components: output components, ``None`` for all.
        memoize: look the output KPCA up in :mod:`bayeskde.kde.memo` first.

    Raises:
        ValueError: a Gram computed here is not finite (the kernel's own message).

    Cost: O(n^3) (one ``eigh`` unless memoized, one Cholesky), O(n^2) memory.
    """
    n = K.shape[0] if K is not None else len(X)
    step = bucket_multiple(n)
    n_pad = -(-n // step) * step
    p = n_pad if n_components is None else n_components
    spec_out, theta_out = vector_spec(kout if L is None else None)
    src_out = np.asarray(Y if spec_out is not None else L)
    key = ("kpca", spec_out, tuple(theta_out.tolist()), p, n_pad,
           fingerprint(src_out)) if memoize else None
    hit = memo_get(key, src_out) if memoize else None
    Yp = pad_host(src_out, n_pad, None if spec_out is not None else n_pad)
    if hit is None:
        kp, T, finite_l = _output_program(Yp, n, theta_out, spec_out, p)
    else:
        kp, T = hit
        finite_l = True
    spec_in, theta_in = vector_spec(kin if K is None else None)
    src_in = np.asarray(X if spec_in is not None else K)
    Xp = pad_host(src_in, n_pad, None if spec_in is not None else n_pad)
    B, finite_b = _ridge_program(Xp, n, theta_in, ridge, T, spec_in)
    finite_l, finite_b = jax.device_get((finite_l, finite_b))
    if not finite_l:
        kout.gram(Y)  # raises the kernel's own overflow message
        raise ValueError("the output Gram matrix is not finite")
    if hit is None and memoize:
        memo_put(key, src_out, (kp, T))
    if not finite_b:
        # An indefinite or singular system: the package's jitter policy, once,
        # on the unpadded system (a rare path; it compiles for this size).
        K_un = kin.gram(X) if K is None else K  # raises if K is not finite
        B_host = np.zeros(T.shape, T.dtype)
        B_host[:n] = np.asarray(ridge_solve(K_un, np.asarray(T)[:n], ridge))
        B = jnp.asarray(B_host)
    outputs = Yp if spec_out is not None else (
        pad_host(Y, n_pad) if Y is not None and not isinstance(Y, tuple) else None)
    return PaddedKDE(kp, B, T, Xp if spec_in is not None else None, outputs, n,
                     n if n_components is None else n_components)


def unpad_fit(fit: PaddedKDE) -> KDEFit:
    """The :class:`KDEFit` of the real rows and components (host slices)."""
    n, p = fit.n, fit.n_components
    kp = fit.kpca
    ev, al, col, tot, coef, T = jax.device_get(
        (kp.eigenvalues, kp.alphas, kp.col_means, kp.total_mean, fit.coef,
         fit.train_proj))
    return KDEFit(
        KPCAResult(jnp.asarray(ev[:p]), jnp.asarray(al[:n, :p]),
                   jnp.asarray(col[:n]), jnp.asarray(tot)),
        jnp.asarray(coef[:n, :p]), jnp.asarray(T[:n, :p]))


def predict_padded(fit: PaddedKDE, kin, block, preimage: str, train_inputs=None,
                   cand=None, n_cand: int | None = None):
    """Run the predict program on one block of test rows.

    Args:
        fit: the padded fit.
        kin: the resolved input kernel.
        block: validated test inputs (array, strings) or a precomputed
            ``(b, n)`` cross-kernel.
        preimage: ``"features"``, ``"linear"`` or ``"candidates"``.
        train_inputs: the unpadded training inputs (kernels that enter as Grams).
        cand, n_cand: padded candidate projections and their real count
            (``"candidates"``); default the training projections.

    Returns:
        ``(result, finite)`` as host arrays, ``result`` cut to the block's rows
        (and to the real components for ``"features"``).
    """
    b = block.shape[0] if not isinstance(block, tuple) else len(block)
    n_pad = fit.kpca.alphas.shape[0]
    spec, theta = vector_spec(kin if fit.inputs is not None else None)
    if spec is not None:
        Xt = pad_host(block)
    else:
        G = block if kin.precomputed else kin.gram(block, train_inputs)
        Xt = pad_host(G, cols=n_pad)
    if preimage == "linear":
        cand, n_cand = fit.outputs, fit.n
    elif cand is None:
        cand, n_cand = fit.train_proj, fit.n
    out, finite = _predict_program(Xt, fit.inputs, fit.n, theta, fit.coef, fit.kpca,
                                   cand, n_cand, spec, preimage)
    out, finite = jax.device_get((out, finite))
    out = out[:b, : fit.n_components] if preimage == "features" else out[:b]
    return out, bool(finite)
