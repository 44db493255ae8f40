"""Data sets of the Kernel Dependency Estimation experiments (Weston et al. 2002).

* :func:`make_string_pairs`: the string-to-string toy problem of section 4.1.
* :func:`load_digits_classification`: the first 100 examples of each digit for
  the multi-class experiment of section 4.2.
* :func:`load_digits_halves`: the same digits cut into a top half (input) and a
  bottom half (output) for the image reconstruction of section 4.3.

The paper used the USPS 16x16 digits; the loaders use the 8x8 digits bundled with
scikit-learn (:func:`sklearn.datasets.load_digits`, no download), so "top half"
means the first 4 of 8 pixel rows rather than the first 8 of 16.

* :func:`make_sshape`: the S-shape inverse problem of the Twin GP paper.
* :func:`make_arm_pose`: a planar three-link arm, joint angles from noisy marker
  positions, a pose-like multi-output inverse problem with two exact inverses.

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
    "ARM_LINK_LENGTHS",
    "ARM_JOINT_LIMITS",
    "ArmPose",
    "arm_forward",
    "arm_mirror_pose",
    "make_arm_pose",
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


def _check_n_samples(n_samples, name: str = "n_samples") -> int:
    if isinstance(n_samples, bool) or not isinstance(n_samples, int | np.integer):
        raise TypeError(f"{name} must be an integer, got {n_samples!r}")
    if n_samples < 1:
        raise ValueError(f"{name} must be >= 1, got {n_samples}")
    return int(n_samples)


def _check_angles(theta, link_lengths):
    """Concrete joint angles ``(..., 3)`` and three link lengths, checked
    (traced values pass through: their shapes are checked by the trace)."""
    if isinstance(theta, jax.core.Tracer):
        return theta
    if isinstance(theta, str) or theta is None:
        raise TypeError(f"theta must be an array of joint angles of shape (..., 3), "
                        f"got {type(theta).__name__}")
    arr = np.asarray(theta)
    if arr.dtype.kind not in "fiu":
        raise TypeError(f"theta must hold numbers, got dtype {arr.dtype}")
    if arr.ndim == 0 or arr.shape[-1] != 3:
        raise ValueError(f"theta must have shape (..., 3) (three joint angles), got "
                         f"shape {arr.shape}")
    if arr.size == 0:
        raise ValueError("theta is empty")
    if not np.all(np.isfinite(arr)):
        raise ValueError("theta contains NaN or inf")
    lengths = np.asarray(link_lengths, dtype=float)
    if lengths.shape != (3,) or not np.all(np.isfinite(lengths) & (lengths > 0)):
        raise ValueError(f"link_lengths must be three finite positive lengths, got "
                         f"{link_lengths!r}")
    return theta


def _check_size(value, name) -> int:
    if isinstance(value, bool) or not isinstance(value, int | np.integer):
        raise TypeError(f"{name} must be an integer, got {value!r}")
    if value < 1:
        raise ValueError(f"{name} must be >= 1, got {value}")
    return int(value)


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
    Arrays are float64 NumPy arrays; the same key gives the same data under
    one JAX precision (JAX's generator draws other numbers with x64 on).

    Examples:
        >>> d = make_sshape(jax.random.key(0), 50)
        >>> d.x_train.shape, d.t_test[:3].tolist()
        ((50,), [0.0, 0.002, 0.004])
    """
    key = _check_key(key)
    n_train = _check_n_samples(n_train, "n_train")
    k_t, k_e = jax.random.split(key)
    t = np.asarray(jax.random.uniform(k_t, (n_train,)), dtype=np.float64)
    noise = np.asarray(jax.random.normal(k_e, (n_train,)), dtype=np.float64)
    x = t + 0.3 * np.sin(2 * np.pi * t) + SSHAPE_NOISE * noise
    t_test = np.arange(500) * 0.002
    return SShape(x, t, t_test + 0.3 * np.sin(2 * np.pi * t_test), t_test)


ARM_LINK_LENGTHS = (1.0, 0.8, 0.6)
"""Link lengths of the planar arm of :func:`make_arm_pose` (shoulder first)."""

ARM_JOINT_LIMITS = ((-np.pi / 2, np.pi / 2), (-2.0, 2.0), (-2.5, 2.5))
"""Uniform sampling ranges (radians) of the three joint angles."""


class ArmPose(NamedTuple):
    """A planar three-link arm: predict the joint angles from noisy markers.

    Attributes:
        x_train: ``(n_train, 4)`` observed markers [elbow_x, elbow_y, tip_x,
            tip_y]: :func:`arm_forward` of ``theta_train`` plus noise.
        theta_train: ``(n_train, 3)`` joint angles (radians, relative angles).
        x_test: ``(n_test, 4)`` observed test markers (noisy, like the training).
        theta_test: ``(n_test, 3)`` true test angles.
        x_test_clean: ``(n_test, 4)`` noise-free test markers.
        link_lengths: ``(3,)`` link lengths.
        noise: standard deviation of the Gaussian marker noise.
    """

    x_train: np.ndarray
    theta_train: np.ndarray
    x_test: np.ndarray
    theta_test: np.ndarray
    x_test_clean: np.ndarray
    link_lengths: np.ndarray
    noise: float


def arm_forward(theta, link_lengths=ARM_LINK_LENGTHS) -> np.ndarray:
    """Forward map of the planar arm: joint angles to elbow and tip positions.

    The shoulder sits at the origin; joint angles are relative, so link i points
    along phi_i = theta_1 + ... + theta_i, u(a) = (cos a, sin a). The markers are
    the elbow (end of link 1, l_1 u(phi_1)) and the tip (l_1 u(phi_1) + l_2
    u(phi_2) + l_3 u(phi_3)); the wrist (end of link 2) is not observed, so the
    map is two-to-one (:func:`arm_mirror_pose`). Works on NumPy or JAX arrays of
    shape ``(..., 3)``.

    Returns:
        ``(..., 4)`` markers [elbow_x, elbow_y, tip_x, tip_y].
    """
    theta = _check_angles(theta, link_lengths)
    xp = np if isinstance(theta, np.ndarray | list | tuple) else jnp
    theta = xp.asarray(theta)
    lengths = xp.asarray(link_lengths, dtype=theta.dtype)
    phi = xp.cumsum(theta, axis=-1)
    px = xp.cumsum(lengths * xp.cos(phi), axis=-1)
    py = xp.cumsum(lengths * xp.sin(phi), axis=-1)
    return xp.stack([px[..., 0], py[..., 0], px[..., 2], py[..., 2]], axis=-1)


def arm_mirror_pose(theta, link_lengths=ARM_LINK_LENGTHS) -> np.ndarray:
    """The other exact inverse: the pose with the same elbow and tip positions.

    With the elbow (end of link 1) fixed, links 2 and 3 form a two-link arm
    reaching the tip; its middle joint (the wrist) can be reflected across the
    line from the elbow to the tip. The reflection keeps theta_1, sets
    theta_3' = -theta_3 and turns link 2 by twice its angle to that line:
    theta_2' = theta_2 + 2 atan2(l_3 sin theta_3, l_2 + l_3 cos theta_3),
    wrapped to (-pi, pi]. Both poses give the same markers; the mirror may lie
    outside :data:`ARM_JOINT_LIMITS`. NumPy in, NumPy out, shape ``(..., 3)``.
    """
    theta = np.asarray(_check_angles(theta, link_lengths), dtype=np.float64)
    l2, l3 = float(link_lengths[1]), float(link_lengths[2])
    t1, t2, t3 = theta[..., 0], theta[..., 1], theta[..., 2]
    t2m = t2 + 2.0 * np.arctan2(l3 * np.sin(t3), l2 + l3 * np.cos(t3))
    t2m = (t2m + np.pi) % (2 * np.pi) - np.pi
    return np.stack([t1, t2m, -t3], axis=-1)


def make_arm_pose(
    key: jax.Array, n_train: int = 1000, n_test: int = 500, noise: float = 0.02
) -> ArmPose:
    """Generate the planar-arm pose problem: joint angles from noisy markers.

    Joint angles theta ~ U(:data:`ARM_JOINT_LIMITS`) independently for training
    and test poses; markers x = :func:`arm_forward`(theta) + N(0, noise^2 I_4)
    with :data:`ARM_LINK_LENGTHS`. The inverse map x -> theta is two-valued (the
    wrist reflects across the elbow-tip line, :func:`arm_mirror_pose`), and both
    branches occur in the data because theta_3 takes both signs, so a method that
    averages the branches predicts poses that explain the markers badly. Judge a
    prediction by its angle error and by how well :func:`arm_forward` of it
    reproduces the observed markers. Arrays are float64 NumPy arrays; the same
    key gives the same data.

    Args:
        key: ``jax.random`` key.
        n_train: training poses, >= 1.
        n_test: test poses, >= 1.
        noise: marker noise standard deviation, >= 0.

    Returns:
        :class:`ArmPose`.

    Raises:
        TypeError: for a non-key ``key`` or non-integer sizes.
        ValueError: for sizes < 1 or a negative or non-finite ``noise``.

    Examples:
        >>> d = make_arm_pose(jax.random.key(0), 20, 5)
        >>> d.x_train.shape, d.theta_train.shape, d.x_test_clean.shape
        ((20, 4), (20, 3), (5, 4))
    """
    key = _check_key(key)
    n_train = _check_size(n_train, "n_train")
    n_test = _check_size(n_test, "n_test")
    if isinstance(noise, bool) or not isinstance(noise, int | float | np.floating):
        raise TypeError(f"noise must be a real number, got {noise!r}")
    noise = float(noise)
    if not np.isfinite(noise) or noise < 0:
        raise ValueError(f"noise must be finite and >= 0, got {noise}")
    lo = np.array([a for a, _ in ARM_JOINT_LIMITS])
    hi = np.array([b for _, b in ARM_JOINT_LIMITS])
    k_tr, k_te, k_e1, k_e2 = jax.random.split(key, 4)

    def draw(k, n):
        u = np.asarray(jax.random.uniform(k, (n, 3)), dtype=np.float64)
        return lo + (hi - lo) * u

    theta_tr, theta_te = draw(k_tr, n_train), draw(k_te, n_test)
    lengths = np.asarray(ARM_LINK_LENGTHS, dtype=np.float64)
    clean_tr = arm_forward(theta_tr, lengths)
    clean_te = arm_forward(theta_te, lengths)
    e_tr = np.asarray(jax.random.normal(k_e1, (n_train, 4)), dtype=np.float64)
    e_te = np.asarray(jax.random.normal(k_e2, (n_test, 4)), dtype=np.float64)
    return ArmPose(
        clean_tr + noise * e_tr, theta_tr, clean_te + noise * e_te, theta_te,
        clean_te, lengths, noise,
    )
