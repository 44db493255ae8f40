"""Tests of bayeskde.datasets: Monte Carlo checks of the string recipe; digits."""

import itertools

import jax
import numpy as np
import pytest
from sklearn.datasets import load_digits

from bayeskde.datasets import (
    STRING_ALPHABET,
    STRING_TARGETS,
    load_digits_classification,
    load_digits_halves,
    make_string_pairs,
)

N_MC = 3000


@pytest.fixture(scope="module")
def pairs():
    return make_string_pairs(jax.random.key(123), n_samples=N_MC)


def _transitions(strings):
    """Counts of (previous letter, next letter) over all adjacent pairs."""
    counts = np.zeros((4, 4))
    for s in strings:
        for a, b in itertools.pairwise(s):
            counts[STRING_ALPHABET.index(a), STRING_ALPHABET.index(b)] += 1
    return counts


def _of_class(pairs, c):
    return [s for s, k in zip(pairs.inputs, pairs.classes, strict=True) if k == c]


def _is_subsequence(short, long):
    it = iter(long)
    return all(ch in it for ch in short)


def test_same_key_same_data(key):
    a = make_string_pairs(key, n_samples=50)
    b = make_string_pairs(key, n_samples=50)
    assert a.inputs == b.inputs
    assert a.outputs == b.outputs
    np.testing.assert_array_equal(a.classes, b.classes)


def test_different_key_different_data(key):
    a = make_string_pairs(key, n_samples=50)
    b = make_string_pairs(jax.random.split(key)[0], n_samples=50)
    assert a.inputs != b.inputs


def test_legacy_uint32_key_accepted():
    pairs = make_string_pairs(jax.random.PRNGKey(0), n_samples=3)
    assert len(pairs.inputs) == 3


def test_types_and_shapes(key):
    pairs = make_string_pairs(key, n_samples=7)
    assert isinstance(pairs.inputs, list) and isinstance(pairs.outputs, list)
    assert all(isinstance(s, str) for s in pairs.inputs + pairs.outputs)
    assert pairs.classes.shape == (7,)
    assert pairs.classes.dtype.kind == "i"


def test_classes_balanced(pairs):
    counts = np.bincount(pairs.classes, minlength=3)
    assert counts.max() - counts.min() <= 1
    small = make_string_pairs(jax.random.key(5), n_samples=200).classes
    np.testing.assert_array_equal(np.bincount(small), [67, 67, 66])


def test_input_lengths_uniform_10_to_15(pairs):
    lengths = np.array([len(s) for s in pairs.inputs])
    assert lengths.min() == 10 and lengths.max() == 15
    freq = np.bincount(lengths - 10, minlength=6) / N_MC
    np.testing.assert_allclose(freq, np.full(6, 1 / 6), atol=0.025)


def test_alphabet(pairs):
    assert set("".join(pairs.inputs + pairs.outputs)) <= set(STRING_ALPHABET)
    assert set("".join(_of_class(pairs, 2))) == {"c", "d"}


def test_class0_transitions_uniform_over_all_letters(pairs):
    counts = _transitions(_of_class(pairs, 0))
    probs = counts / counts.sum(axis=1, keepdims=True)
    np.testing.assert_allclose(probs, np.full((4, 4), 0.25), atol=0.02)


def test_class1_self_transition_0_7_others_0_1(pairs):
    counts = _transitions(_of_class(pairs, 1))
    probs = counts / counts.sum(axis=1, keepdims=True)
    expected = np.full((4, 4), 0.1) + np.eye(4) * 0.6
    np.testing.assert_allclose(probs, expected, atol=0.02)


def test_class2_self_transition_0_7(pairs):
    counts = _transitions(_of_class(pairs, 2))[2:, 2:]
    probs = counts / counts.sum(axis=1, keepdims=True)
    np.testing.assert_allclose(probs, [[0.7, 0.3], [0.3, 0.7]], atol=0.02)


def test_first_letters(pairs):
    for c, letters in ((0, "abcd"), (1, "abcd"), (2, "cd")):
        firsts = [s[0] for s in _of_class(pairs, c)]
        freq = np.array([firsts.count(a) for a in letters]) / len(firsts)
        np.testing.assert_allclose(freq, 1 / len(letters), atol=0.05)


def test_output_length_distribution(pairs):
    # n_ins and n_del are independent with P(0, 1, 2) = (0.55, 0.3, 0.15), so the
    # length change is their difference: mean 0.6 - 0.6 = 0.
    p = np.array([0.55, 0.3, 0.15])
    expected = np.zeros(5)
    for i, d in itertools.product(range(3), range(3)):
        expected[i - d + 2] += p[i] * p[d]
    lengths = np.array([len(s) for s in pairs.outputs])
    assert lengths.min() >= 2 and lengths.max() <= 6
    freq = np.bincount(lengths - 2, minlength=5) / N_MC
    np.testing.assert_allclose(freq, expected, atol=0.025)
    assert abs(lengths.mean() - 4.0) < 0.06


def test_outputs_are_edits_of_their_class_target(pairs):
    for out, c in zip(pairs.outputs, pairs.classes, strict=True):
        target = STRING_TARGETS[c]
        if len(out) == 6:  # two insertions, no deletion
            assert _is_subsequence(target, out)
        if len(out) == 2:  # two deletions, no insertion
            assert _is_subsequence(out, target)
    # No noise at all with probability 0.55^2, so the clean target is common.
    clean = np.mean(
        [o == STRING_TARGETS[c] for o, c in zip(pairs.outputs, pairs.classes,
                                                strict=True)]
    )
    assert clean > 0.55**2 - 0.03


def test_inserted_letters_uniform(pairs):
    # Outputs of length 6 carry two insertions and no deletion: removing the
    # class target (as a subsequence) leaves the inserted letters, whose pooled
    # frequencies must be uniform; ambiguity in the alignment does not change the
    # multiset of leftover letters.
    leftovers = []
    for out, c in zip(pairs.outputs, pairs.classes, strict=True):
        if len(out) == 6:
            rest = list(out)
            for ch in STRING_TARGETS[c]:
                rest.remove(ch)
            leftovers.extend(rest)
    counts = np.array([leftovers.count(a) for a in STRING_ALPHABET])
    assert counts.sum() > 200
    np.testing.assert_allclose(counts / counts.sum(), 0.25, atol=0.05)


@pytest.mark.parametrize("n", [0, -1])
def test_bad_n_samples_raises(key, n):
    with pytest.raises(ValueError, match="n_samples"):
        make_string_pairs(key, n_samples=n)


def test_non_integer_n_samples_raises(key):
    with pytest.raises(TypeError, match="n_samples"):
        make_string_pairs(key, n_samples=2.5)


def test_non_key_raises():
    with pytest.raises(TypeError, match="key"):
        make_string_pairs(0, n_samples=5)


def _reference_digits():
    data = load_digits()
    idx = np.sort(np.concatenate([np.flatnonzero(data.target == d)[:100]
                                  for d in range(10)]))
    return data.data[idx] / 16.0, data.target[idx]


def test_digits_classification_matches_sklearn():
    d = load_digits_classification()
    images, labels = _reference_digits()
    assert d.images.shape == (1000, 64)
    np.testing.assert_array_equal(np.bincount(d.labels), np.full(10, 100))
    np.testing.assert_array_equal(d.labels, labels)
    np.testing.assert_allclose(d.images, images)
    assert d.images.min() == 0.0 and d.images.max() == 1.0


def test_digit_halves_split_rows():
    h = load_digits_halves()
    d = load_digits_classification()
    assert h.top.shape == (1000, 32) and h.bottom.shape == (1000, 32)
    np.testing.assert_array_equal(np.hstack([h.top, h.bottom]), d.images)
    np.testing.assert_array_equal(h.labels, d.labels)
    img = d.images.reshape(1000, 8, 8)
    np.testing.assert_array_equal(h.top, img[:, :4].reshape(1000, 32))
    np.testing.assert_array_equal(h.bottom, img[:, 4:].reshape(1000, 32))


def test_pinned_draw_identical_in_32_and_64_bit():
    # One float32 draw feeds everything, so the data do not depend on
    # JAX_ENABLE_X64 (the suite runs under both settings).
    pairs = make_string_pairs(jax.random.key(0), n_samples=200)
    assert pairs.inputs[:2] == ["bbbbbddaaaacdbc", "aaaabbbbccdbbbd"]
