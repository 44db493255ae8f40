"""Baselines of the Twin GP experiments: GP regression mean and weighted k-NN.

Bo and Sminchisescu (2010), section 6.1 (S-shape), compare Twin GPs with GP
regression (kernel ridge mean, RBF kernel) and with the weighted nearest
neighbour regressor of the original release (``WKNNRegressor.m``). Both are
re-exported by :mod:`bayeskde.tgp`.

References:
    Bo and Sminchisescu (2010), "Twin Gaussian Processes for Structured
    Prediction", IJCV 87, section 6.1.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import jax.scipy.linalg as jsl
from jaxtyping import Array, Float

from .._linalg import cholesky_with_jitter
from .._typing import ArrayLike
from .._validation import (
    check_data,
    check_integer,
    check_positive,
    check_same_length,
)
from ..kernels.standard import rbf_gram
from .neighbors import DEFAULT_BLOCK_SIZE, check_features, top_k_neighbors

__all__ = [
    "gp_predict",
    "weighted_knn_predict",
    "cholesky_with_jitter",
]


@jax.jit
def _gp_gram(X, gamma, ridge):
    K = rbf_gram(X, X, gamma)
    return K + ridge * jnp.eye(K.shape[0], dtype=K.dtype)


@jax.jit
def _gp_mean(L, X, Y, Z, gamma):
    return rbf_gram(Z, X, gamma) @ jsl.cho_solve((L, True), Y)


def _gp_predict(X, Y, Z, gamma, ridge):
    """The GP mean on validated arrays of one dtype (float32 or float64)."""
    L = cholesky_with_jitter(_gp_gram(X, gamma, ridge), "K + ridge I (GP)")
    return _gp_mean(L, X, Y, Z, gamma)


def gp_predict(
    X_train: Float[ArrayLike, "n_samples n_features"],
    Y_train: Float[ArrayLike, "n_outputs d_y"],
    X_test: Float[ArrayLike, "n_test n_features_test"],
    *,
    gamma: float,
    ridge: float,
) -> Float[Array, "n_test d_y"]:
    """GP regression mean (kernel ridge) with an RBF kernel, the TGP baseline.

    k(x)^T (K + ridge I)^-1 Y with k(x, x') = exp(-gamma ||x - x'||^2), as in the
    original S-shape demo (Bo and Sminchisescu 2010, section 6.1). 1-D
    inputs/outputs are read as one column. When K + ridge I is numerically not
    positive definite (float32 with ridge 1e-5 on S-shape) jitter is added to
    the diagonal and a warning is issued once (:func:`cholesky_with_jitter`).

    Cost: O(N^3 + T N (d + d_y)) time, O(N^2 + T N) memory.
    """
    gamma = check_positive(gamma, "gamma")
    ridge = check_positive(ridge, "ridge")
    X_train = check_data(X_train, "X_train")
    Y_train = check_data(Y_train, "Y_train")
    X_test = check_data(X_test, "X_test")
    check_same_length(X_train, Y_train, "X_train", "Y_train")
    check_features(X_test, X_train.shape[1], "X_test")
    return _gp_predict(X_train, Y_train, X_test, gamma, ridge)


@functools.partial(jax.jit, static_argnames=("k", "block_size"))
def _wknn(X, Y, Z, k, block_size):
    neg, idx = top_k_neighbors(X, Z, k, block_size)
    d = -neg
    exact = d <= 0.0
    w = jnp.where(
        jnp.any(exact, axis=1, keepdims=True),
        exact.astype(d.dtype),
        1.0 / jnp.where(exact, 1.0, d),
    )
    w = w / jnp.sum(w, axis=1, keepdims=True)
    return jnp.einsum("tk,tkd->td", w, Y[idx])


def weighted_knn_predict(
    X_train: Float[ArrayLike, "n_samples n_features"],
    Y_train: Float[ArrayLike, "n_outputs d_y"],
    X_test: Float[ArrayLike, "n_test n_features_test"],
    *,
    n_neighbors: int = 1,
    block_size: int = DEFAULT_BLOCK_SIZE,
) -> Float[Array, "n_test d_y"]:
    """Weighted k-NN regression of the original release (``WKNNRegressor.m``).

    The k nearest training inputs by Euclidean distance vote with weights
    1 / ||x - x_i||^2, normalised to sum to one; a training input equal to x takes
    all the weight. With ``n_neighbors=1`` (the paper's "weighted 1-NN") it is
    plain 1-NN. The neighbour search is blocked over ``block_size`` training rows
    (:func:`bayeskde.tgp.neighbors.nearest_neighbors`).

    Cost: O(T N d) time, O(T (k + block_size)) memory.
    """
    X_train = check_data(X_train, "X_train")
    Y_train = check_data(Y_train, "Y_train")
    X_test = check_data(X_test, "X_test")
    check_same_length(X_train, Y_train, "X_train", "Y_train")
    check_features(X_test, X_train.shape[1], "X_test")
    k = check_integer(n_neighbors, "n_neighbors", minimum=1, maximum=X_train.shape[0])
    bs = check_integer(block_size, "block_size", minimum=1)
    return _wknn(X_train, Y_train, X_test, k, min(bs, X_train.shape[0]))
