"""Sequence data: synthetic two-class HMM tasks and a UEA/UCR ``.ts`` reader.

* :func:`two_class_hmms` / :func:`make_hmm_classification`: two HMMs that share
  their initial distribution and emissions and differ only in their transition
  matrices. Both transition matrices are doubly stochastic (circulant), so both
  chains have the uniform stationary distribution and, from the uniform start,
  every ``x_t`` has the same marginal under both classes: a bag-of-observations
  kernel cannot tell the classes apart, only the latent dynamics can.
* :func:`exon_intron_hmms` / :func:`make_exon_intron`: a DNA-like 4-symbol task.
  "Exons" come from a three-state codon-position cycle (1 -> 2 -> 3 -> 1 with
  probability ``1 - slip``), whose positions prefer purines (A, G), anything, and
  pyrimidines (C, T) respectively: the RNY codon pattern, a period-3 signal in
  coding DNA. "Introns" use the same three emission distributions with an
  aperiodic doubly stochastic transition matrix, so both classes have the same
  base composition and differ only in the period-3 dynamics.
* :func:`read_ts`: the UEA/UCR multivariate time-series text format.

Symbols are coded 0..K-1 (DNA: A=0, C=1, G=2, T=3). Sequences are NumPy arrays:
``(T,)`` int64 for symbols, ``(T, D)`` float for continuous data.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from .._typing import float_dtype
from ..hmm import CategoricalEmission, GaussianEmission, HMMParams, sample_hmm

__all__ = [
    "SequenceDataset",
    "TsDataset",
    "two_class_hmms",
    "make_hmm_classification",
    "exon_intron_hmms",
    "make_exon_intron",
    "read_ts",
    "DNA_ALPHABET",
]

DNA_ALPHABET = "ACGT"


class SequenceDataset(NamedTuple):
    """Labelled sequences.

    Attributes:
        sequences: list of ``(T_i,)`` int or ``(T_i, D)`` float arrays.
        labels: ``(n,)`` int class labels.
        params: the generating HMM of each class (``None`` for read data).
    """

    sequences: list
    labels: np.ndarray
    params: tuple | None


class TsDataset(NamedTuple):
    """A data set read from a ``.ts`` file.

    Attributes:
        sequences: list of ``(T_i, D)`` float64 arrays; missing values ('?') are
            NaN (the kernels refuse NaN: impute or drop them first).
        labels: ``(n,)`` int indices into ``class_names`` (class problems), float
            targets (``@targetLabel``), or ``None`` when the file has no labels.
        class_names: the ``@classLabel`` values, in file order (empty otherwise).
        metadata: the header fields, keys lower-case (``problemname``,
            ``timestamps``, ``univariate``, ``dimensions``, ...).
        timestamps: per case a ``(T_i,)`` array of time stamps as strings when
            ``@timeStamps true``, else ``None``.
    """

    sequences: list
    labels: np.ndarray | None
    class_names: tuple
    metadata: dict
    timestamps: list | None


def _check_key(key):
    if not isinstance(key, jax.Array):
        raise TypeError(
            f"key must be a jax.random key (jax.random.key(seed)), got "
            f"{type(key).__name__}"
        )
    return key


def _circulant(first_row):
    n = len(first_row)
    return np.stack([np.roll(first_row, i) for i in range(n)])


def _log(p):
    dtype = float_dtype()
    with np.errstate(divide="ignore"):
        return jnp.asarray(np.log(np.asarray(p, dtype=np.float64)), dtype=dtype)


def two_class_hmms(
    kind: str = "categorical",
    *,
    n_states: int = 3,
    n_symbols: int = 4,
    n_features: int = 2,
    stay: float = 0.6,
    noise: float = 0.35,
) -> tuple:
    """Two HMMs that differ only in their transition structure.

    Class 0 is "sticky": stay with probability ``stay``, else move to another
    state uniformly. Class 1 is "cyclic": stay with probability ``1 - stay``,
    advance to the next state ``i + 1 (mod N)`` with the rest. Both matrices are
    circulant (doubly stochastic), the initial distribution is uniform, so the
    marginal of every ``x_t`` is the same under both classes.

    Emissions (shared): categorical state ``i`` emits symbol ``i mod K`` with
    probability ``1 - noise`` and the others uniformly; Gaussian state ``i`` has
    mean on the unit circle at angle ``2 pi i / N`` (first two coordinates, the
    rest zero) and isotropic variance ``noise``.

    Returns:
        ``(params_class0, params_class1)`` as ``bayeskde.hmm.HMMParams``.
    """
    if kind not in ("categorical", "gaussian"):
        raise ValueError(f"kind must be 'categorical' or 'gaussian', got {kind!r}")
    if n_states < 2:
        raise ValueError(f"n_states must be >= 2, got {n_states}")
    if not 0.0 < stay < 1.0:
        raise ValueError(f"stay must be in (0, 1), got {stay}")
    if not noise > 0.0:
        raise ValueError(f"noise must be > 0, got {noise}")
    n = n_states
    row0 = np.full(n, (1.0 - stay) / (n - 1))
    row0[0] = stay
    row1 = np.zeros(n)
    row1[0] = 1.0 - stay
    row1[1] += stay
    init = _log(np.full(n, 1.0 / n))
    if kind == "categorical":
        if not noise < 1.0:
            raise ValueError(f"noise must be < 1 for symbols, got {noise}")
        B = np.full((n, n_symbols), noise / max(n_symbols - 1, 1))
        B[np.arange(n), np.arange(n) % n_symbols] = 1.0 - noise
        B /= B.sum(1, keepdims=True)
        emission = CategoricalEmission(_log(B))
    else:
        if n_features < 2:
            raise ValueError(f"n_features must be >= 2, got {n_features}")
        ang = 2 * np.pi * np.arange(n) / n
        means = np.zeros((n, n_features))
        means[:, 0], means[:, 1] = np.cos(ang), np.sin(ang)
        dtype = float_dtype()
        emission = GaussianEmission(
            jnp.asarray(means, dtype), jnp.full((n, n_features), noise, dtype)
        )
    return tuple(
        HMMParams(init, _log(_circulant(row)), emission) for row in (row0, row1)
    )


def exon_intron_hmms(*, slip: float = 0.1, purity: float = 0.9) -> tuple:
    """The exon (codon-cycle) and intron (aperiodic) HMMs of the DNA-like task.

    Position 1 emits a purine (A or G) with probability ``purity``, position 3 a
    pyrimidine (C or T) with probability ``purity``, position 2 any base
    uniformly. Exon: 1 -> 2 -> 3 -> 1 with probability ``1 - slip``, the slip
    split between staying and skipping a position. Intron: each state moves to
    each state with probability 1/3 except that it stays with probability ``slip``
    more (still doubly stochastic). Returns ``(exon, intron)`` ``HMMParams``.
    """
    if not 0.0 < slip < 1.0:
        raise ValueError(f"slip must be in (0, 1), got {slip}")
    if not 0.5 <= purity < 1.0:
        raise ValueError(f"purity must be in [0.5, 1), got {purity}")
    r, y = purity / 2, (1 - purity) / 2
    # columns A C G T
    B = np.array([[r, y, r, y], [0.25] * 4, [y, r, y, r]])
    exon = _circulant(np.array([slip / 2, 1 - slip, slip / 2]))
    intron = _circulant(np.array([1 / 3 + slip, 1 / 3 - slip / 2, 1 / 3 - slip / 2]))
    init = _log(np.full(3, 1 / 3))
    emission = CategoricalEmission(_log(B))
    return HMMParams(init, _log(exon), emission), HMMParams(init, _log(intron),
                                                             emission)


def _lengths(key, n, length):
    if isinstance(length, int | np.integer):
        if length < 1:
            raise ValueError(f"length must be >= 1, got {length}")
        return np.full(n, int(length)), int(length)
    lo, hi = (int(v) for v in length)
    if not 1 <= lo <= hi:
        raise ValueError(f"length range must satisfy 1 <= min <= max, got {length}")
    return np.asarray(jax.random.randint(key, (n,), lo, hi + 1)), hi


def _sample_classes(key, params, n_per_class, length):
    if isinstance(n_per_class, bool) or int(n_per_class) != n_per_class or (
        n_per_class < 1
    ):
        raise ValueError(f"n_per_class must be a positive integer, got {n_per_class}")
    key = _check_key(key)
    sequences, labels = [], []
    for c, p in enumerate(params):
        key, k_len, k_seq = jax.random.split(key, 3)
        lens, t_max = _lengths(k_len, int(n_per_class), length)
        obs = np.asarray(sample_hmm(k_seq, p, int(n_per_class), t_max).observations)
        sequences += [obs[i, : lens[i]] for i in range(int(n_per_class))]
        labels += [c] * int(n_per_class)
    return SequenceDataset(sequences, np.asarray(labels), tuple(params))


def make_hmm_classification(
    key: jax.Array,
    n_per_class: int = 50,
    length: int | tuple[int, int] = (40, 80),
    *,
    kind: str = "categorical",
    **hmm_kwargs,
) -> SequenceDataset:
    """Two-class sequences from :func:`two_class_hmms` (class 0 first).

    Args:
        key: ``jax.random`` key.
        n_per_class: sequences per class.
        length: a fixed length, or ``(min, max)`` for lengths drawn uniformly.
        kind: ``"categorical"`` or ``"gaussian"`` emissions.
        **hmm_kwargs: passed to :func:`two_class_hmms`.
    """
    return _sample_classes(key, two_class_hmms(kind, **hmm_kwargs), n_per_class,
                           length)


def make_exon_intron(
    key: jax.Array,
    n_per_class: int = 50,
    length: int | tuple[int, int] = (60, 120),
    **hmm_kwargs,
) -> SequenceDataset:
    """DNA-like exon (label 0) / intron (label 1) sequences, see
    :func:`exon_intron_hmms`; symbols A=0, C=1, G=2, T=3."""
    return _sample_classes(key, exon_intron_hmms(**hmm_kwargs), n_per_class, length)


# ----------------------------------------------------------------- .ts reader

_TUPLE = re.compile(r"\(([^()]*),([^(),]*)\)")


def _parse_value(tok, where):
    tok = tok.strip()
    if tok in ("?", ""):
        return np.nan
    try:
        value = float(tok)
    except ValueError as err:
        raise ValueError(f"{where}: cannot read {tok!r} as a number") from err
    if not np.isfinite(value):
        raise ValueError(
            f"{where}: {tok!r} is not a finite float64 number (missing values are "
            "written '?')")
    return value


def _parse_dimension(text, timestamps, where):
    if timestamps:
        pairs = _TUPLE.findall(text)
        if not pairs and text.strip():
            raise ValueError(f"{where}: expected (timestamp,value) tuples")
        return ([_parse_value(v, where) for _, v in pairs],
                [t.strip() for t, _ in pairs])
    return [_parse_value(v, where) for v in text.split(",")], None


def _bool(value, name, where):
    v = value.lower()
    if v not in ("true", "false"):
        raise ValueError(f"{where}: @{name} must be true or false, got {value!r}")
    return v == "true"


def read_ts(source: str | Path) -> TsDataset:
    """Read a UEA/UCR ``.ts`` time-series file.

    The header holds ``@problemName``, ``@timeStamps``, ``@missing``,
    ``@univariate``, ``@dimensions``, ``@equalLength``, ``@seriesLength``,
    ``@classLabel true <labels...>`` (or ``false``) or ``@targetLabel``, then
    ``@data``. Each data line is one case: its dimensions separated by ``:``,
    each a comma-separated list of values (``?`` = missing, read as NaN), or with
    ``@timeStamps true`` a list of ``(timestamp,value)`` tuples; the last field is
    the class label (or target) when the header announces one. Lines starting
    with ``#`` and blank lines are skipped; keywords are case-insensitive.

    Args:
        source: a path, or the file's text itself (anything containing a newline).

    Returns:
        :class:`TsDataset`; each case is a ``(T_i, D)`` array. Dimensions of one
        case must have equal lengths.

    Raises:
        ValueError: missing ``@data``, an unknown class label, a case with the
            wrong number of dimensions or dimensions of unequal length, or a
            value that is not a number; the message names the line.
    """
    if not isinstance(source, str | Path):
        raise TypeError(
            f"source must be a path or the file's text, got {type(source).__name__}")
    text = str(source)
    if "\n" not in text:
        try:
            text = Path(source).read_text(encoding="utf-8")
        except UnicodeDecodeError as err:
            raise ValueError(
                f"source {str(source)!r} is not a UTF-8 text .ts file ({err.reason} "
                f"at byte {err.start})") from err
    meta: dict = {}
    class_names: tuple = ()
    has_class = has_target = timestamps = False
    in_data = False
    cases, labels, stamps = [], [], []
    for lineno, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        where = f"line {lineno}"
        if not line or line.startswith("#"):
            continue
        if not in_data:
            if not line.startswith("@"):
                raise ValueError(f"{where}: expected a @keyword before @data")
            parts = line[1:].split()
            key, args = parts[0].lower(), parts[1:]
            if key == "data":
                in_data = True
                continue
            if key == "classlabel":
                if not args:
                    raise ValueError(f"{where}: @classLabel needs true or false")
                has_class = _bool(args[0], "classLabel", where)
                class_names = tuple(args[1:]) if has_class else ()
                if has_class and not class_names:
                    raise ValueError(f"{where}: @classLabel true lists no labels")
                meta[key] = has_class
            elif key == "targetlabel":
                has_target = _bool(args[0], "targetLabel", where) if args else False
                meta[key] = has_target
            elif key in ("timestamps", "missing", "univariate", "equallength"):
                meta[key] = _bool(args[0] if args else "", parts[0], where)
                timestamps = meta.get("timestamps", False)
            elif key in ("dimensions", "serieslength"):
                if len(args) != 1 or not args[0].isdigit() or int(args[0]) < 1:
                    raise ValueError(
                        f"{where}: @{parts[0]} needs one positive integer, got "
                        f"{' '.join(args)!r}")
                meta[key] = int(args[0])
            else:
                meta[key] = " ".join(args)
            continue
        fields = line.split(":")
        label = None
        if has_class or has_target:
            label, fields = fields[-1].strip(), fields[:-1]
        dims, dim_stamps = [], None
        for f in fields:
            values, ts = _parse_dimension(f, timestamps, where)
            dims.append(values)
            dim_stamps = dim_stamps or ts
        if "dimensions" in meta and len(dims) != meta["dimensions"]:
            raise ValueError(
                f"{where}: expected {meta['dimensions']} dimensions, got {len(dims)}"
            )
        if cases and len(dims) != cases[0].shape[1]:
            raise ValueError(
                f"{where}: expected {cases[0].shape[1]} dimensions like the first "
                f"case, got {len(dims)}"
            )
        lens = {len(d) for d in dims}
        if len(lens) != 1:
            raise ValueError(
                f"{where}: dimensions of one case have unequal lengths {sorted(lens)}"
            )
        cases.append(np.asarray(dims, dtype=np.float64).T)
        stamps.append(np.asarray(dim_stamps) if timestamps else None)
        if has_class:
            if label not in class_names:
                raise ValueError(
                    f"{where}: class label {label!r} not among {class_names}"
                )
            labels.append(class_names.index(label))
        elif has_target:
            labels.append(_parse_value(label, where))
    if not in_data:
        raise ValueError("source has no @data section (not a .ts file?)")
    if has_class:
        y = np.asarray(labels, dtype=np.int64)
    elif has_target:
        y = np.asarray(labels, dtype=np.float64)
    else:
        y = None
    return TsDataset(cases, y, class_names, meta, stamps if timestamps else None)
