import itertools
import math

import numpy as np
import pytest

from bayeskde.kernels.strings import (
    encode_strings,
    subsequence_diag,
    subsequence_kernel,
)
from tests.helpers import X64, count_compilations

RTOL = 1e-10 if X64 else 2e-5


# ------------------------------------------------------------------ brute force


def _features(s, q, lam):
    """phi_u(s) = sum over index tuples i with s[i] = u of lam^(i_q - i_1 + 1)."""
    phi = {}
    for idx in itertools.combinations(range(len(s)), q):
        u = "".join(s[i] for i in idx)
        phi[u] = phi.get(u, 0.0) + lam ** (idx[-1] - idx[0] + 1)
    return phi


def _brute_levels(s, t, r, lam):
    """K_1..K_r by enumerating every index tuple (the definition, eq. (4))."""
    out = []
    for q in range(1, r + 1):
        fs, ft = _features(s, q, lam), _features(t, q, lam)
        out.append(math.fsum(v * ft.get(u, 0.0) for u, v in fs.items()))
    return out


def _brute_gram(A, B, r, lam, mode, normalize):
    def k(s, t):
        levels = _brute_levels(s, t, r, lam)
        return math.fsum(levels) if mode == "sum" else levels[-1]

    K = np.array([[k(s, t) for t in B] for s in A])
    if normalize:
        da = np.array([k(s, s) for s in A])
        db = np.array([k(t, t) for t in B])
        with np.errstate(divide="ignore", invalid="ignore"):
            K = K / np.sqrt(np.outer(da, db))
        K[da == 0, :] = 0.0
        K[:, db == 0] = 0.0
    return K


def _random_strings(rng, n, alphabet="abc", min_len=0, max_len=7):
    return [
        "".join(rng.choice(list(alphabet), size=rng.integers(min_len, max_len + 1)))
        for _ in range(n)
    ]


def _assert_close(got, ref):
    got = np.asarray(got, dtype=np.float64)
    scale = max(float(np.abs(ref).max()), np.finfo(float).tiny)
    np.testing.assert_allclose(got, ref, rtol=RTOL, atol=RTOL * scale)


@pytest.mark.parametrize("r, lam", [(1, 0.5), (2, 0.9), (3, 0.5), (4, 0.7), (3, 1.0)])
@pytest.mark.parametrize("mode", ["exact", "sum"])
@pytest.mark.parametrize("normalize", [False, True])
def test_matches_brute_force_enumeration(rng, r, lam, mode, normalize):
    A = _random_strings(rng, 9) + ["", "a"]
    B = _random_strings(rng, 6) + ["abcabca"]
    ref = _brute_gram(A, B, r, lam, mode, normalize)
    got = subsequence_kernel(A, B, r=r, lam=lam, mode=mode, normalize=normalize)
    assert got.shape == (len(A), len(B))
    _assert_close(got, ref)
    # The symmetric path (upper triangle only) against the same oracle.
    ref_sym = _brute_gram(A, A, r, lam, mode, normalize)
    got_sym = subsequence_kernel(A, r=r, lam=lam, mode=mode, normalize=normalize)
    _assert_close(got_sym, ref_sym)
    diag = subsequence_diag(A, r=r, lam=lam, mode=mode, normalize=normalize)
    _assert_close(diag, np.diagonal(ref_sym))


def test_sum_mode_is_sum_of_exact_modes(rng):
    A = _random_strings(rng, 8, max_len=9)
    total = sum(
        np.asarray(subsequence_kernel(A, r=q, lam=0.6, mode="exact", normalize=False),
                   dtype=np.float64)
        for q in range(1, 5)
    )
    got = subsequence_kernel(A, r=4, lam=0.6, mode="sum", normalize=False)
    _assert_close(got, total)


# ----------------------------------------------------------- hand-checked values


@pytest.mark.parametrize("lam", [0.1, 0.5, 0.9])
def test_lodhi_cat_car_example(lam):
    # Lodhi et al.'s (2002) worked example: at length 2 only "ca" is shared, with
    # span 2 in both strings, so K_2(cat, car) = lam^4, K_2(cat, cat) = 2 lam^4 +
    # lam^6 ("ca", "at" with span 2, "ct" with span 3) and the normalised value is
    # 1 / (2 + lam^2).
    K = subsequence_kernel(["cat", "car"], r=2, lam=lam, mode="exact",
                           normalize=False)
    ref = np.array([[2 * lam**4 + lam**6, lam**4], [lam**4, 2 * lam**4 + lam**6]])
    _assert_close(K, ref)
    N = subsequence_kernel(["cat", "car"], r=2, lam=lam, mode="exact")
    assert float(N[0, 1]) == pytest.approx(1.0 / (2.0 + lam**2), rel=RTOL)


def test_subsequence_longer_than_every_string_gives_zero():
    K = subsequence_kernel(["ab", "ba", ""], r=3, mode="exact", normalize=False)
    assert np.all(np.asarray(K) == 0.0)
    N = subsequence_kernel(["ab", "ba", ""], r=3, mode="exact")
    assert np.all(np.asarray(N) == 0.0)


# ------------------------------------------------------------------- invariants


@pytest.mark.parametrize("mode", ["exact", "sum"])
def test_symmetric_psd_and_unit_diagonal(rng, mode):
    A = _random_strings(rng, 30, alphabet="abcd", max_len=12) + ["", "d"]
    K = np.asarray(subsequence_kernel(A, r=3, lam=0.5, mode=mode), dtype=np.float64)
    np.testing.assert_array_equal(K, K.T)
    assert np.linalg.eigvalsh(K).min() >= -(1e-10 if X64 else 1e-5) * len(A)
    has_features = np.array([len(s) >= (3 if mode == "exact" else 1) for s in A])
    np.testing.assert_allclose(np.diagonal(K)[has_features], 1.0, rtol=RTOL)
    # Featureless strings: zero row, column and diagonal (0, not 1).
    assert np.all(K[~has_features] == 0.0) and np.all(K[:, ~has_features] == 0.0)
    diag = np.asarray(subsequence_diag(A, r=3, lam=0.5, mode=mode))
    np.testing.assert_array_equal(diag, has_features.astype(diag.dtype))


def test_cross_gram_agrees_with_symmetric_gram(rng):
    A = _random_strings(rng, 12, max_len=9)
    sym = subsequence_kernel(A, r=3, lam=0.4)
    cross = subsequence_kernel(A, list(A), r=3, lam=0.4)
    _assert_close(cross, np.asarray(sym, dtype=np.float64))


def test_unseen_symbols_share_no_features():
    K = subsequence_kernel(["xyz"], ["abc"], r=2, mode="sum", normalize=False)
    assert float(K[0, 0]) == 0.0
    N = subsequence_kernel(["xyz", "abc", "azc"], ["abc"], r=2, mode="sum")
    assert float(N[0, 0]) == 0.0
    assert float(N[1, 0]) == pytest.approx(1.0, rel=RTOL)
    # "z" is unseen in B but still matches itself within A's own Gram matrix.
    assert float(subsequence_kernel(["xyz", "zz"], r=1)[0, 1]) > 0.0


def test_encode_strings_and_unseen_alphabet():
    codes, lengths, alphabet = encode_strings(["cab", "", "b"])
    assert alphabet == ("a", "b", "c")
    np.testing.assert_array_equal(codes, [[2, 0, 1], [-1, -1, -1], [1, -1, -1]])
    np.testing.assert_array_equal(lengths, [3, 0, 1])
    codes, _, alphabet = encode_strings(["qab", "zq"], alphabet="ab")
    # Unseen symbols get fresh codes in order of first appearance.
    assert alphabet == ("a", "b", "q", "z")
    np.testing.assert_array_equal(codes, [[2, 0, 1], [3, 2, -1]])
    with pytest.raises(ValueError, match="repeated"):
        encode_strings(["ab"], alphabet="aa")


def test_block_size_invariance(rng):
    A = _random_strings(rng, 13, max_len=8)
    B = _random_strings(rng, 5, max_len=8)
    for Bx in (None, B):
        results = [
            np.asarray(subsequence_kernel(A, Bx, r=3, lam=0.7, block_size=bs),
                       dtype=np.float64)
            for bs in (1, 7, 10_000)
        ]
        for other in results[1:]:
            np.testing.assert_allclose(other, results[0], rtol=RTOL, atol=RTOL)


def test_second_call_with_same_shapes_does_not_recompile(rng):
    A = _random_strings(rng, 10, min_len=7, max_len=7)
    B = _random_strings(rng, 10, min_len=7, max_len=7)
    subsequence_kernel(A, r=2, lam=0.5, block_size=16)
    with count_compilations() as compiles:
        # Same shapes (block, longest string, r, dtype); new strings, lam and mode.
        subsequence_kernel(B, r=2, lam=0.3, block_size=16)
        subsequence_kernel(B, A, r=2, lam=0.9, mode="exact", block_size=16)
        subsequence_diag(A, r=2, lam=0.2, block_size=16)
    assert compiles.count == 0


# ------------------------------------------------------------------ bad input


@pytest.mark.parametrize(
    "kwargs, error, match",
    [
        ({"r": 0}, ValueError, "r"),
        ({"r": 1.5}, TypeError, "r"),
        ({"lam": 0.0}, ValueError, "lam"),
        ({"lam": -0.1}, ValueError, "lam"),
        ({"lam": 1.5}, ValueError, "lam"),
        ({"lam": float("nan")}, ValueError, "lam"),
        ({"mode": "all"}, ValueError, "mode"),
        ({"block_size": 0}, ValueError, "block_size"),
    ],
)
def test_bad_parameters(kwargs, error, match):
    with pytest.raises(error, match=match):
        subsequence_kernel(["ab", "ba"], **kwargs)
    if "block_size" not in kwargs:
        with pytest.raises(error, match=match):
            subsequence_diag(["ab", "ba"], **{"r": 3, "lam": 0.5, **kwargs})


@pytest.mark.parametrize(
    "A, B, error",
    [
        ("abc", None, TypeError),
        (["ab", 3], None, TypeError),
        (["ab", None], None, TypeError),
        ([], None, ValueError),
        (["ab"], [], ValueError),
        (["ab"], "ab", TypeError),
        (["ab"], [b"ab"], TypeError),
    ],
)
def test_bad_strings(A, B, error):
    with pytest.raises(error):
        subsequence_kernel(A, B)


@pytest.mark.parametrize("normalize", [False, True])
def test_mean_mode_averages_normalised_lengths(rng, normalize):
    A = _random_strings(rng, 7, min_len=0, max_len=6)
    B = _random_strings(rng, 5, min_len=1, max_len=6)
    r, lam = 3, 0.3
    per = [_brute_gram(A, B, q, lam, "exact", True) for q in range(1, r + 1)]
    ref = sum(per) / r
    if normalize:
        da = sum(np.diag(_brute_gram(A, A, q, lam, "exact", True))
                 for q in range(1, r + 1)) / r
        db = sum(np.diag(_brute_gram(B, B, q, lam, "exact", True))
                 for q in range(1, r + 1)) / r
        with np.errstate(divide="ignore", invalid="ignore"):
            ref = np.nan_to_num(ref / np.sqrt(np.outer(da, db)))
    got = subsequence_kernel(A, B, r=r, lam=lam, mode="mean", normalize=normalize)
    _assert_close(got, ref)
    sym = subsequence_kernel(A, r=r, lam=lam, mode="mean", normalize=normalize)
    _assert_close(np.diag(np.asarray(sym)),
                  subsequence_diag(A, r=r, lam=lam, mode="mean", normalize=normalize))
