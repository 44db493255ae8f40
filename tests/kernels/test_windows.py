"""The window mean-map kernel against a loop over windows in NumPy; the map's
fit, tiling, compilation and bad inputs."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from bayeskde.kernels.windows import (
    WindowMap,
    fit_window_map,
    window_dilations,
    window_mean_embedding,
    window_mean_map_gram,
    window_projections,
    window_weights,
)
from tests.helpers import DTYPE, assert_close, count_compilations


def _brute_embedding(X, lengths, wmap):
    """mu_kj(x) = mean over counted windows t of 1[<a_k * m_k, w_t> > b_kj]."""
    W, M = np.asarray(wmap.weights, float), np.asarray(wmap.masks, float)
    B, S = np.asarray(wmap.biases, float), np.asarray(wmap.same)
    K, L = W.shape
    left = (L - 1) // 2
    out = []
    for x, n in zip(np.asarray(X, float), lengths, strict=True):
        feats = []
        for i, D in enumerate(np.asarray(wmap.dilations)):
            for k in range(K):
                hits, count = np.zeros(B.shape[2]), 0
                for t in range(n):
                    offs = [t + (j - left) * D for j in range(L)]
                    inside = [0 <= o < n for o in offs]
                    if not S[i, k] and not all(inside):
                        continue
                    w = np.stack([x[o] if ok else np.zeros(x.shape[1])
                                  for o, ok in zip(offs, inside, strict=True)])
                    z = np.sum(W[k][:, None] * M[i, k][None, :] * w)
                    hits += z > B[i, k]
                    count += 1
                feats.append(hits / count if count else hits)
        out.append(np.concatenate(feats))
    return np.asarray(out)


@pytest.fixture(scope="module")
def small():
    # integer frames and weights, biases at quarter offsets: every projection is
    # exact in float32 and none ties a bias
    rng = np.random.default_rng(3)
    X = rng.integers(-3, 4, size=(3, 14, 2)).astype(float)
    lengths = np.array([14, 9, 4])
    weights = window_weights(5, 2)                       # entries 1.5 and -1
    nd, K = 2, weights.shape[0]
    masks = np.ones((nd, K, 2))
    masks[0, ::3, 1] = 0.0
    biases = np.sort(rng.integers(-6, 7, size=(nd, K, 3)) + 0.25, axis=2)
    same = (np.arange(nd)[:, None] + np.arange(K)[None, :]) % 2 == 0
    wmap = WindowMap(dilations=jnp.asarray([1, 3]), weights=jnp.asarray(weights,
                                                                        DTYPE),
                     masks=jnp.asarray(masks, DTYPE), biases=jnp.asarray(biases, DTYPE),
                     same=jnp.asarray(same))
    return X, lengths, wmap


def test_embedding_equals_loop_over_windows(small):
    X, lengths, wmap = small
    F = window_mean_embedding(X, lengths, wmap)
    assert F.dtype == DTYPE and F.shape == (3, wmap.n_features)
    ref = _brute_embedding(X, lengths, wmap)
    # the length-4 series holds no valid window at dilation 3: zeros there
    assert_close(F, ref)
    assert_close(window_mean_embedding(X, lengths, wmap, tile_size=2), ref)


def test_gram_is_the_mean_map_inner_product(small):
    X, lengths, wmap = small
    F = np.asarray(window_mean_embedding(X, lengths, wmap), float)
    G = window_mean_map_gram(F)
    assert_close(G, F @ F.T / F.shape[1])
    assert np.linalg.eigvalsh(np.asarray(G, float)).min() > -1e-6
    assert_close(window_mean_map_gram(F[:1], F), G[:1])


def test_weights_and_dilations():
    W = window_weights()
    assert W.shape == (84, 9)
    np.testing.assert_array_equal(W.sum(axis=1), 0.0)
    np.testing.assert_array_equal((W == 2).sum(axis=1), 3)
    np.testing.assert_array_equal(window_dilations(5), [1])
    d = window_dilations(150)
    assert d[0] == 1 and d[-1] == 18 and np.all(np.diff(d) > 0)
    assert len(window_dilations(10**5, max_dilations=4)) == 4


def test_fit_map_biases_and_determinism(rng):
    X = rng.normal(size=(6, 40, 3))
    lengths = np.array([40, 30, 40, 12, 40, 25])
    a = fit_window_map(jax.random.key(1), X, lengths, n_features=500)
    b = fit_window_map(jax.random.key(1), X, lengths, n_features=500)
    for u, v in zip(a, b, strict=True):
        np.testing.assert_array_equal(u, v)
    nd = len(window_dilations(40))
    assert a.biases.shape == (nd, 84, -(-500 // (nd * 84)))
    assert np.all(np.asarray(a.masks).sum(axis=2) >= 1)
    assert np.all(np.diff(np.asarray(a.biases), axis=2) >= 0)
    F = np.asarray(window_mean_embedding(X, lengths, a))
    assert F.min() >= 0 and F.max() <= 1
    # biases are quantiles of training projections: features are not constant
    assert np.mean(F.std(axis=0) > 0) > 0.5


def test_biases_are_numpy_quantiles_of_the_chosen_series(rng):
    """Oracle: b_kj = np.quantile (linear rule) of the counted projections of series
    series[i, k], each from the one-series projection ``window_projections``."""
    from bayeskde.kernels.windows import _quantile_biases

    X = rng.normal(size=(5, 37, 2))
    lengths = np.array([37, 20, 9, 37, 3])
    W = window_weights()
    dil = window_dilations(37)
    nd, K = len(dil), W.shape[0]
    masks = (rng.random((nd, K, 2)) < 0.6).astype(float)
    masks[..., 0] = 1.0
    same = (np.arange(nd)[:, None] + np.arange(K)[None, :]) % 2 == 0
    series = rng.integers(0, 5, size=(nd, K))
    levels = (np.arange(3)[None, None, :] + rng.random((nd, K, 1))) / 3
    got = _quantile_biases(X, lengths, W, masks, same, dil, series, levels)
    ref = np.zeros_like(got)
    for i, D in enumerate(dil):
        for k in range(K):
            r = series[i, k]
            z, c = window_projections(X[r], int(lengths[r]), W, masks[i], int(D),
                                      same[i])
            v = np.asarray(z, float)[:, k][np.asarray(c)[:, k]]
            ref[i, k] = np.quantile(v, levels[i, k]) if v.size else 0.0
    tol = 1e-10 if DTYPE == jnp.float64 else 2e-5
    np.testing.assert_allclose(got, ref, rtol=tol, atol=tol)


def test_series_and_differences_share_a_compilation(rng):
    """Lengths padded to a multiple of 32: T and T - 1 frames, one program."""
    X = rng.normal(size=(3, 50, 1))
    wm = fit_window_map(jax.random.key(0), X, n_features=200)
    window_mean_embedding(X, None, wm)
    with count_compilations() as c:
        F = window_mean_embedding(np.diff(X, axis=1), None, wm)
    assert c.count == 0 and F.shape == (3, wm.n_features)


def test_second_call_does_not_recompile(small):
    X, lengths, wmap = small
    window_mean_embedding(X, lengths, wmap)
    with count_compilations() as c:
        window_mean_embedding(X + 1.0, lengths, wmap)
    assert c.count == 0


@pytest.mark.parametrize("X, lengths, match", [
    # a wrong rank or lengths' shape: jaxtyping's check names the parameter first
    # when the suite runs with it, the function's own message otherwise
    (np.zeros((2, 5)), None, r"\(n, T_max, d\)|parameter 'X'"),
    (np.full((2, 5, 2), np.nan), None, "NaN"),
    (np.zeros((0, 5, 2)), None, "non-empty"),
    (np.zeros((2, 5, 2)), np.array([5, 6]), r"lie in \[1, 5\]"),
    (np.zeros((2, 5, 2)), np.array([5]), "lengths of X|parameter 'lengths'"),
    (np.zeros((2, 14, 1)), None, "d = 2"),
])
def test_bad_inputs(small, X, lengths, match):
    with pytest.raises((TypeError, ValueError), match=match):
        window_mean_embedding(X, lengths, small[2])


def test_bad_parameters(rng, small):
    X = rng.normal(size=(2, 10, 1))
    with pytest.raises(ValueError, match="n_features"):
        fit_window_map(jax.random.key(0), X, n_features=0)
    with pytest.raises(ValueError, match="length"):
        fit_window_map(jax.random.key(0), X, length=1)
    with pytest.raises(TypeError, match="key"):
        fit_window_map(0, X)
    with pytest.raises(TypeError, match="WindowMap"):
        window_mean_embedding(X, None, (1, 2))
    with pytest.raises(ValueError, match="tile_size"):
        window_mean_embedding(small[0], None, small[2], tile_size=0)
    with pytest.raises((TypeError, ValueError), match="embeddings|parameter 'B'"):
        window_mean_map_gram(np.zeros((2, 3)), np.zeros((2, 4)))
