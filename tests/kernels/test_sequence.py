"""Global alignment and truncated signature kernels against brute force."""

import itertools
import math

import numpy as np
import pytest

from bayeskde.kernels.sequence import (
    gak_sigma,
    global_alignment_gram,
    log_global_alignment,
    pad_series,
    signature_dimension,
    signature_features,
    truncated_signature_kernel,
)
from tests.helpers import RTOL, assert_close


def _alignments(n, m):
    """Every monotone lattice path (0, 0) -> (n-1, m-1), steps (1,0), (0,1), (1,1)."""
    def walk(i, j):
        if (i, j) == (n - 1, m - 1):
            yield [(i, j)]
            return
        for di, dj in ((1, 0), (0, 1), (1, 1)):
            if i + di < n and j + dj < m:
                for rest in walk(i + di, j + dj):
                    yield [(i, j)] + rest
    return list(walk(0, 0))


def _brute_gak(x, y, sigma, band=0):
    """Cuturi (2011) eq. (2) by enumerating the alignments, eq. (4) kappa."""
    total = 0.0
    for path in _alignments(len(x), len(y)):
        prod = 1.0
        for i, j in path:
            a = np.sum((x[i] - y[j]) ** 2) / (2 * sigma**2)
            k = math.exp(-(a + math.log(2 - math.exp(-a))))
            if band:
                k *= max(0.0, 1 - abs(i - j) / band)
            prod *= k
        total += prod
    return total


def test_alignment_count_is_delannoy():
    # the number of alignments is the Delannoy number D(n-1, m-1)
    assert len(_alignments(3, 3)) == 13 and len(_alignments(4, 5)) == 129


@pytest.mark.parametrize("band", [0, 2, 3])
def test_log_gak_equals_sum_over_alignments(rng, band):
    X = rng.normal(size=(4, 5, 2))
    lengths = np.array([5, 3, 4, 1])
    L = log_global_alignment(X, sigma=0.9, triangular=band, lengths_a=lengths,
                             block_size=3)
    for i, j in itertools.product(range(4), repeat=2):
        ref = _brute_gak(X[i, : lengths[i]], X[j, : lengths[j]], 0.9, band)
        if ref == 0.0:
            assert L[i, j] == -np.inf
        else:
            assert_close(L[i, j], math.log(ref), rtol=10 * RTOL, atol=10 * RTOL)


def test_cross_block_equals_symmetric_block(rng):
    X = rng.normal(size=(5, 6, 1))
    lengths = np.array([6, 2, 5, 6, 4])
    K = global_alignment_gram(X, sigma=1.3, lengths_a=lengths, block_size=4)
    K2 = global_alignment_gram(X[:2], X, sigma=1.3, lengths_a=lengths[:2],
                               lengths_b=lengths, block_size=7)
    assert_close(K2, K[:2])
    assert_close(np.diag(K), np.ones(5))
    assert_close(K, K.T)
    # normalised GAK is positive definite (Cuturi 2011, theorem 1)
    assert np.linalg.eigvalsh(K).min() > -1e-6


def test_padding_is_inert(rng):
    x, y = rng.normal(size=(4, 2)), rng.normal(size=(6, 2))
    Xp, lengths = pad_series([x, y])
    padded = Xp.copy()
    padded[0, 4:] = 1e3  # what lies beyond a series' end is never read
    a = log_global_alignment(Xp, sigma=1.0, lengths_a=lengths)
    b = log_global_alignment(padded, sigma=1.0, lengths_a=lengths)
    assert_close(a, b)


def test_gak_sigma_median_rule():
    X = np.zeros((2, 9, 1))
    X[1] = 2.0  # every cross-series frame distance is 2, every same-series one 0
    assert_close(gak_sigma(X, max_samples=500), 2.0 * 3.0)


@pytest.mark.parametrize("bad, match", [
    (dict(A=np.full((2, 3, 1), np.nan)), "NaN"),
    (dict(A=np.zeros((2, 3, 1)), sigma=0.0), "sigma"),
    (dict(A=np.zeros((2, 3, 1)), lengths_a=np.array([0, 3])), "lengths"),
    (dict(A=np.zeros((2, 3, 1)), triangular=-1), "triangular"),
])
def test_gak_bad_inputs(bad, match):
    kw = dict(sigma=1.0) | bad
    with pytest.raises(ValueError, match=match):
        log_global_alignment(kw.pop("A"), kw.pop("B", None), **kw)


def test_gak_wrong_rank_names_the_argument():
    # a 2-D array is refused by the shape annotation (a TypeError under the
    # suite's jaxtyping checks) or by the function's own check (a ValueError)
    with pytest.raises((TypeError, ValueError), match="A"):
        log_global_alignment(np.zeros((2, 3)), sigma=1.0)
    with pytest.raises((TypeError, ValueError), match="B"):
        log_global_alignment(np.zeros((2, 3, 1)), np.zeros((2, 3, 2)), sigma=1.0)


def _brute_signature(x, depth):
    """Levels 1..depth of prod_k exp(dx_k) expanded: the sum over non-decreasing
    segment tuples, a run of r equal segments weighted 1 / r!."""
    inc = np.diff(x, axis=0)
    out = []
    for m in range(1, depth + 1):
        acc = np.zeros((x.shape[1],) * m)
        for idx in itertools.combinations_with_replacement(range(len(inc)), m):
            t = np.ones(())
            for k in idx:
                t = np.multiply.outer(t, inc[k])
            runs = [len(list(g)) for _, g in itertools.groupby(idx)]
            acc += t / math.prod(math.factorial(r) for r in runs)
        out.append(acc.ravel())
    return np.concatenate(out)


def test_signature_equals_expanded_product(rng):
    X = rng.normal(size=(3, 5, 2))
    lengths = np.array([5, 2, 4])
    S = signature_features(X, lengths, depth=4)
    assert S.shape == (3, signature_dimension(2, 4))
    for i in range(3):
        assert_close(S[i], _brute_signature(X[i, : lengths[i]], 4),
                     rtol=100 * RTOL, atol=100 * RTOL)


def test_signature_invariances(rng):
    x = rng.normal(size=(6, 3))
    S = np.asarray(signature_features(x[None], depth=3))[0]
    # level 1 is the total increment; the symmetric part of level 2 is half
    # its square (shuffle product)
    d = x[-1] - x[0]
    assert_close(S[:3], d)
    L2 = S[3:12].reshape(3, 3)
    assert_close(0.5 * (L2 + L2.T), 0.5 * np.outer(d, d))
    # translation and repeated frames (a reparametrisation) change nothing
    y = np.repeat(x + 5.0, 2, axis=0)
    assert_close(np.asarray(signature_features(y[None], depth=3))[0], S,
                 rtol=100 * RTOL, atol=100 * RTOL)


def test_truncated_signature_kernel_is_inner_product(rng):
    A, B = rng.normal(size=(3, 4, 2)), rng.normal(size=(2, 5, 2))
    K = truncated_signature_kernel(A, B, depth=3)
    ref = np.array([[1 + _brute_signature(a, 3) @ _brute_signature(b, 3) for b in B]
                    for a in A])
    assert_close(K, ref, rtol=100 * RTOL, atol=100 * RTOL)


def test_pad_series_errors():
    with pytest.raises(ValueError, match="empty"):
        pad_series([])
    with pytest.raises(ValueError, match="NaN"):
        pad_series([np.array([1.0, np.nan])])
    with pytest.raises(ValueError, match="one d"):
        pad_series([np.zeros((3, 1)), np.zeros((3, 2))])
