"""Data sets of the Kernel Dependency Estimation experiments (Weston et al. 2002).

* :func:`make_string_pairs`: the string-to-string toy problem of section 4.1.
* :func:`load_digits_classification`: the first 100 examples of each digit for
  the multi-class experiment of section 4.2.
* :func:`load_digits_halves`: the same digits cut into a top half (input) and a
  bottom half (output) for the image reconstruction of section 4.3.

The paper used the USPS 16x16 digits; the loaders use the 8x8 digits bundled with
scikit-learn (:func:`sklearn.datasets.load_digits`, no download), so "top half"
means the first 4 of 8 pixel rows rather than the first 8 of 16.

Randomness comes only from an explicit ``jax.random`` key, the first positional
argument: the same key gives the same data.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

__all__ = [
    "STRING_ALPHABET",
    "STRING_TARGETS",
    "StringPairs",
    "DigitHalves",
    "Digits",
    "make_string_pairs",
    "load_digits_halves",
    "load_digits_classification",
    "SShape",
    "SSHAPE_NOISE",
    "make_sshape",
]

STRING_ALPHABET = "abcd"
"""The four letters of the string toy problem (Weston et al. 2002, section 4.1)."""

STRING_TARGETS = ("abad", "dbbd", "aabc")
"""Noise-free output string of each class (classes 0, 1, 2 = the paper's 1, 2, 3)."""

_MIN_LEN, _MAX_LEN = 10, 15
_SELF = 0.7  # self-transition probability of classes 2 and 3
_P_ONE, _P_TWO = 0.3, 0.15  # probability of one / two insertions (and deletions)
# Uniform draws per pair: class order, length, first letter, 15 stay draws, 15
# uniform letters, 15 "other letter" draws, number of insertions and of deletions,
# 2 insertion slots, 2 inserted letters, 2 deletion positions.
_DRAW_WIDTHS = (1, 1, 1, _MAX_LEN, _MAX_LEN, _MAX_LEN, 1, 1, 2, 2, 2)
_N_DRAWS = sum(_DRAW_WIDTHS)
_PER_DIGIT = 100
_N_DIGIT_PIXELS = 16.0  # sklearn's 8x8 digits hold integers 0..16


class StringPairs(NamedTuple):
    """Input/output string pairs of the toy problem.

    Attributes:
        inputs: ``n_samples`` input strings over ``abcd``, lengths 10..15.
        outputs: ``n_samples`` noisy output strings (lengths 2..6).
        classes: ``(n_samples,)`` int array, the generating class in {0, 1, 2}
            (the paper's classes one, two and three).
    """

    inputs: list[str]
    outputs: list[str]
    classes: np.ndarray


class DigitHalves(NamedTuple):
    """Digits cut into halves.

    Attributes:
        top: ``(1000, 32)`` first 4 pixel rows, row-major, values in [0, 1].
        bottom: ``(1000, 32)`` last 4 pixel rows, row-major, values in [0, 1].
        labels: ``(1000,)`` int digit labels 0..9.
    """

    top: np.ndarray
    bottom: np.ndarray
    labels: np.ndarray


class Digits(NamedTuple):
    """Whole digits.

    Attributes:
        images: ``(1000, 64)`` pixels, row-major 8x8, values in [0, 1].
        labels: ``(1000,)`` int digit labels 0..9.
    """

    images: np.ndarray
    labels: np.ndarray


def _check_n_samples(n_samples) -> int:
    if isinstance(n_samples, bool) or not isinstance(n_samples, int | np.integer):
        raise TypeError(f"n_samples must be an integer, got {n_samples!r}")
    if n_samples < 1:
        raise ValueError(f"n_samples must be >= 1, got {n_samples}")
    return int(n_samples)


def _check_key(key):
    if not isinstance(key, jax.Array):
        raise TypeError(
            "key must be a jax.random key (jax.random.key(seed)), got "
            f"{type(key).__name__}"
        )
    return key


def _markov_letters(first, u_stay, any4, other3, classes):
    """Letter indices ``(n, 15)`` of the three Markov chains, given uniform draws.

    Class 0 draws every letter uniformly from abcd (self-transitions included, so
    every transition has probability 1/4). Class 1 stays with probability 0.7 and
    moves to each of the 3 other letters with probability 0.1. Class 2 lives on
    {c, d}, stays with probability 0.7 and switches with probability 0.3.
    """
    n, width = u_stay.shape
    letters = np.empty((n, width), dtype=np.int64)
    letters[:, 0] = first
    for t in range(1, width):
        prev = letters[:, t - 1]
        stay = u_stay[:, t] < _SELF
        moved = (prev + 1 + other3[:, t]) % 4  # uniform over the 3 other letters
        switched = np.where(prev == 2, 3, 2)  # c <-> d
        letters[:, t] = np.select(
            [classes == 0, classes == 1],
            [any4[:, t], np.where(stay, prev, moved)],
            np.where(stay, prev, switched),
        )
    return letters


def _uniform_int(u, m):
    """Map uniforms in [0, 1) to integers uniform on 0..m-1."""
    return np.minimum(np.floor(u * m).astype(np.int64), m - 1)


def _n_edits(u):
    """0, 1 or 2 edits with probabilities 0.55, 0.3, 0.15 from uniform draws."""
    return (u < _P_ONE + _P_TWO).astype(np.int64) + (u < _P_TWO).astype(np.int64)


def make_string_pairs(key: jax.Array, n_samples: int = 200) -> StringPairs:
    """Generate the string-to-string toy problem (Weston et al. 2002, section 4.1).

    Each pair is drawn as follows.

    * Class: as balanced as possible (counts differ by at most one) in random
      order, a random permutation of ``[0, 1, 2, 0, 1, 2, ...]``. The paper does
      not say how classes were drawn.
    * Input: length uniform in 10..15 over the letters abcd, from a class-specific
      Markov chain. Class 0: "transitions from any letter to any other letter are
      equally likely", read as every next letter uniform over all 4 letters (so
      self-transitions have probability 1/4, like the others); first letter
      uniform. Class 1: self-transition 0.7, each other letter 0.1; first letter
      uniform. Class 2: only c and d; self-transition 0.7, switch 0.3; first
      letter c or d with probability 1/2 each.
    * Output: the class's string (``abad``, ``dbbd``, ``aabc``) corrupted by
      insertions, then deletions. Number of insertions: 1 with probability 0.3,
      2 with probability 0.15, else 0; each inserts a letter uniform over abcd at
      a slot uniform over the ``len + 1`` gaps of the current string. Then the
      number of deletions is drawn the same way, each removing a character at a
      uniform position of the current string.

    Args:
        key: a ``jax.random`` key; the same key gives the same pairs.
        n_samples: number of pairs (the paper uses 200).

    Returns:
        :class:`StringPairs` ``(inputs, outputs, classes)``.

    Raises:
        TypeError: if ``key`` is not a JAX key or ``n_samples`` not an integer.
        ValueError: if ``n_samples < 1``.

    Examples:
        >>> import jax
        >>> pairs = make_string_pairs(jax.random.key(0), n_samples=5)
        >>> len(pairs.inputs), len(pairs.outputs), pairs.classes.shape
        (5, 5, (5,))
        >>> all(10 <= len(s) <= 15 for s in pairs.inputs)
        True
    """
    key = _check_key(key)
    n = _check_n_samples(n_samples)
    # One float32 draw for everything: one compilation per n, and the same data
    # whether or not JAX runs in 64-bit mode. floor(u * m) is uniform on 0..m-1 up
    # to float32 granularity (2^-24).
    u = np.asarray(jax.random.uniform(key, (n, _N_DRAWS), dtype=jnp.float32))
    u = u.astype(np.float64)
    (u_perm, u_len, u_first, u_stay, u_any, u_other, u_ins, u_del, u_ins_pos,
     u_ins_letter, u_del_pos) = np.split(u, np.cumsum(_DRAW_WIDTHS)[:-1], axis=1)

    classes = (np.arange(n) % 3)[np.argsort(u_perm[:, 0], kind="stable")]
    lengths = _MIN_LEN + _uniform_int(u_len[:, 0], _MAX_LEN - _MIN_LEN + 1)
    u_first = u_first[:, 0]
    first = np.where(
        classes == 2, 2 + _uniform_int(u_first, 2), _uniform_int(u_first, 4)
    )
    letters = _markov_letters(
        first, u_stay, _uniform_int(u_any, 4), _uniform_int(u_other, 3), classes
    )
    n_ins = _n_edits(u_ins[:, 0])
    n_del = _n_edits(u_del[:, 0])
    ins_letter = _uniform_int(u_ins_letter, 4)

    inputs, outputs = [], []
    for i in range(n):
        inputs.append("".join(STRING_ALPHABET[c] for c in letters[i, : lengths[i]]))
        out = list(STRING_TARGETS[classes[i]])
        for j in range(n_ins[i]):
            slot = int(_uniform_int(u_ins_pos[i, j], len(out) + 1))
            out.insert(slot, STRING_ALPHABET[ins_letter[i, j]])
        for j in range(n_del[i]):
            pos = int(_uniform_int(u_del_pos[i, j], len(out)))
            del out[pos]
        outputs.append("".join(out))
    return StringPairs(inputs, outputs, classes)


def _first_per_digit(labels: np.ndarray, per_digit: int) -> np.ndarray:
    """Indices of the first ``per_digit`` examples of each label, in file order."""
    seen = np.zeros(10, dtype=np.int64)
    keep = []
    for i, y in enumerate(labels):
        if seen[y] < per_digit:
            seen[y] += 1
            keep.append(i)
    return np.asarray(keep, dtype=np.int64)


def _load_digits() -> tuple[np.ndarray, np.ndarray]:
    from sklearn.datasets import load_digits

    data = load_digits()
    labels = np.asarray(data.target, dtype=np.int64)
    idx = _first_per_digit(labels, _PER_DIGIT)
    images = np.asarray(data.data, dtype=np.float64)[idx] / _N_DIGIT_PIXELS
    return images, labels[idx]


def load_digits_classification() -> Digits:
    """The first 100 examples of each digit, for section 4.2 of Weston et al. (2002).

    From scikit-learn's bundled 8x8 digits (1797 images): for each digit 0..9 the
    first 100 occurrences, kept in the order in which they appear in the file (so
    the labels are interleaved, not sorted). Pixel values 0..16 are divided by 16
    to lie in [0, 1].

    Returns:
        :class:`Digits` with ``images`` ``(1000, 64)`` and ``labels`` ``(1000,)``.

    Examples:
        >>> d = load_digits_classification()
        >>> d.images.shape, int(d.images.max())
        ((1000, 64), 1)
    """
    images, labels = _load_digits()
    return Digits(images, labels)


def load_digits_halves() -> DigitHalves:
    """Digits split into top and bottom halves, for section 4.3 of Weston et al.

    The same 1000 digits as :func:`load_digits_classification`; the top half is
    the first 4 pixel rows (32 pixels) and the bottom half the last 4 rows (32
    pixels), each row-major, so ``np.hstack([top, bottom])`` is the whole image.

    Returns:
        :class:`DigitHalves` with ``top`` and ``bottom`` ``(1000, 32)`` and
        ``labels`` ``(1000,)``.

    Examples:
        >>> h = load_digits_halves()
        >>> h.top.shape, h.bottom.shape
        ((1000, 32), (1000, 32))
    """
    images, labels = _load_digits()
    return DigitHalves(images[:, :32].copy(), images[:, 32:].copy(), labels)


class SShape(NamedTuple):
    """The S-shape inverse problem (Bo and Sminchisescu 2010, section 6.1).

    Attributes:
        x_train: ``(n_train,)`` inputs t + 0.3 sin(2 pi t) + noise.
        t_train: ``(n_train,)`` outputs t ~ U(0, 1).
        x_test: ``(500,)`` noise-free inputs on the grid.
        t_test: ``(500,)`` the grid t = 0, 0.002, ..., 0.998.
    """

    x_train: np.ndarray
    t_train: np.ndarray
    x_test: np.ndarray
    t_test: np.ndarray


SSHAPE_NOISE = 0.05
"""Standard deviation of the Gaussian input noise of :func:`make_sshape`."""


def make_sshape(key: jax.Array, n_train: int = 500) -> SShape:
    """Generate the S-shape data: predict t from x = t + 0.3 sin(2 pi t) + noise.

    Training: t ~ U(0, 1), x = t + 0.3 sin(2 pi t) + N(0, 0.05^2). Test: the grid
    t = 0, 0.002, ..., 0.998 and its noise-free x. x is many-to-one in t for
    x in about (0.35, 0.65), so the inverse map t(x) has up to three branches.
    Arrays are float64 NumPy arrays; the same key gives the same data.

    Examples:
        >>> d = make_sshape(jax.random.key(0), 50)
        >>> d.x_train.shape, d.t_test[:3].tolist()
        ((50,), [0.0, 0.002, 0.004])
    """
    key = _check_key(key)
    n_train = _check_n_samples(n_train)
    k_t, k_e = jax.random.split(key)
    t = np.asarray(jax.random.uniform(k_t, (n_train,)), dtype=np.float64)
    noise = np.asarray(jax.random.normal(k_e, (n_train,)), dtype=np.float64)
    x = t + 0.3 * np.sin(2 * np.pi * t) + SSHAPE_NOISE * noise
    t_test = np.arange(500) * 0.002
    return SShape(x, t, t_test + 0.3 * np.sin(2 * np.pi * t_test), t_test)
