"""The candidate kernels a training set affords, for :class:`SequenceKernelClassifier`.

Which families are scored follows the size of the training set
(:func:`candidate_families`: the alignment, signature and HMM families only when
``n^2 T^2 <= budget``), each family's settings follow the options
(:func:`candidate_specs`: bandwidths, derivative weights, representations,
numbers of states), the 1-NN DTW fallback is fitted within its own budget
(:func:`dtw_fallback`), and :func:`fit_candidates` fits every candidate on the
training series and scores it by the exact leave-one-out error of kernel ridge
(:func:`~bayeskde.meanmap.selection.ridge_loo_score`). The choice among the
scored candidates is :mod:`bayeskde.meanmap.selection`'s.
"""

from __future__ import annotations

import itertools
from functools import partial
from typing import NamedTuple

import jax
import numpy as np

from .dtw import NearestNeighbourDTW
from .selection import ridge_loo_score
from .sequence_kernels import FAMILIES, make_component, window_sum
from .stacking import stacked_gram

__all__ = ["AUTO_STATES", "Candidates", "candidate_families", "candidate_specs",
           "component_gram", "describe_component", "dtw_fallback", "fit_candidates",
           "signature_depth"]

# the HMM family's candidate numbers of states for n_states="auto"
AUTO_STATES = (4, 8)


def _paa_length(t_max, max_length):
    return t_max if max_length is None else min(t_max, max_length)


def candidate_families(kernels, n=None, t_max=None, *, budget=5e7, max_length=128):
    """The families scored: with ``kernels="auto"`` every family when
    ``n^2 T^2 <= budget`` (``T`` the longest length after PAA; ``budget=None`` or
    an unknown size: always), else the window family alone; a family name or a
    tuple of names as given (``"dtw"`` among them names the 1-NN DTW rule).

    Raises:
        ValueError: an unknown family name or an empty tuple.
    """
    if isinstance(kernels, str):
        if kernels == "auto":
            if budget is None or n is None:
                return FAMILIES
            T = _paa_length(t_max, max_length)
            return FAMILIES if float(n) ** 2 * T**2 <= budget else ("window",)
        fams = (kernels,)
    else:
        fams = tuple(kernels)
    bad = [f for f in fams if f not in (*FAMILIES, "dtw")]
    if not fams or bad:
        raise ValueError(f"kernels must be 'auto' or names from "
                         f"{(*FAMILIES, 'dtw')}, got {kernels!r}")
    return fams


def candidate_specs(families, key, n_channels, *, derivative="auto", ragged=False,
                    max_length=128, window_features=10_000, block_size=512,
                    n_states="auto", hmm="em", n_features=64, mode_weighting="elbo"):
    """The settings of every candidate of ``families``, as keyword dicts for
    :func:`~bayeskde.meanmap.sequence_kernels.make_component` (a window ``"diff"``
    candidate also carries ``both``: the fixed weight of its sum with the series'
    kernel, None with ``derivative="auto"``).

    With ``derivative="auto"``: the window kernel of the series, of their first
    differences, of their sum and, when the training lengths vary (``ragged``),
    of the series zero-padded to the longest; the alignment kernel at derivative
    weights 0, 1, 3 and bandwidths 0.25, 0.5, 1 times the median rule; the
    signatures at weights 0, 1 and rates 0.25, 1, 4 times the median heuristic;
    the HMM kernel at weight 1 with 4 and 8 states. ``n_channels`` sets the
    signatures' depth (:func:`signature_depth`)."""
    auto_w = derivative == "auto"
    out = []
    for fam in families:
        if fam == "dtw":
            continue
        if fam == "window":
            w = None if auto_w else float(derivative)
            reps = ("raw",) if w == 0 else ("raw", "diff")
            if ragged and auto_w:  # a fixed weight keeps its documented kernel
                reps += ("padded",)
            for rep in reps:
                key, sub = jax.random.split(key)
                out.append(dict(family=fam, representation=rep,
                                n_features=window_features, key=sub,
                                both=w if rep == "diff" else None))
        elif fam == "gak":
            ws = (0.0, 1.0, 3.0) if auto_w else (float(derivative),)
            for w, s in itertools.product(ws, (0.25, 0.5, 1.0)):
                out.append(dict(family=fam, sigma_scale=s, derivative=w,
                                max_length=max_length, block_size=block_size))
        elif fam == "signature":
            ws = (0.0, 1.0) if auto_w else (float(derivative),)
            for w, g in itertools.product(ws, (0.25, 1.0, 4.0)):
                out.append(dict(family=fam, depth=signature_depth(n_channels, w),
                                gamma_scale=g, derivative=w, max_length=max_length))
        else:
            ns = AUTO_STATES if n_states == "auto" else (int(n_states),)
            w = 1.0 if auto_w else float(derivative)
            for n in ns:
                key, sub = jax.random.split(key)
                out.append(dict(family=fam, n_states=n, hmm=hmm, derivative=w,
                                max_length=max_length, nu=None,
                                n_features=n_features, n_iter=50, n_restarts=2,
                                key=sub, mode_weighting=mode_weighting))
    return out


def signature_depth(d, derivative):
    """Signature depth for ``d`` channels (doubled with a derivative weight) and
    the time channel: 4 up to 3 path dimensions, 3 up to 8, else 2."""
    dim = (d * 2 if derivative > 0 else d) + 1
    return 4 if dim <= 3 else (3 if dim <= 8 else 2)


def dtw_fallback(sequences, t_max, *, kernels="auto", nested=True,
                 dtw_budget=1e9, max_length=128, block_size=512):
    """The fitted 1-NN DTW rule, or None: always when ``kernels`` names
    ``"dtw"``; with ``kernels="auto"`` and the nested choice, when ``n^2 T^2 <=
    dtw_budget`` (``T`` after PAA)."""
    named = not isinstance(kernels, str) and "dtw" in tuple(kernels) or (
        kernels == "dtw")
    if named:
        return NearestNeighbourDTW(max_length, block_size).fit(sequences)
    if not nested or kernels != "auto" or dtw_budget is None:
        return None
    T = _paa_length(t_max, max_length)
    if float(len(sequences)) ** 2 * T**2 > dtw_budget:
        return None
    return NearestNeighbourDTW(max_length, block_size).fit(sequences)


class Candidates(NamedTuple):
    """The fitted candidates of :func:`fit_candidates`.

    Attributes:
        components: the fitted kernel components (``K_``, ``cross``).
        families: each one's family name.
        scores: each one's ``(loo_error, loo_accuracy, alpha, loo_error_se)``
            on the rows the choice is made on.
        sizes: how many kernels each counts as in the one-standard-error rule.
    """

    components: list
    families: list
    scores: list
    sizes: list


def fit_candidates(specs, sequences, Y, rows=None):
    """Fit the candidates ``specs`` on ``sequences`` and score each by exact LOO
    kernel ridge on the one-hot codes ``Y (n, c)`` (on the rows ``rows`` only,
    when given). The window kernel of the differences is followed by the sum with
    the series' kernel (one candidate, or the only one with a fixed weight); the
    HMM kernel by its RBF maps ``nu`` = 1 and 4 (Mehta and Gray eq. (24)).

    Returns:
        :class:`Candidates`. Cost: each component's fit, and one ``s x s``
        eigendecomposition per candidate (``s`` rows).
    """
    y_idx = np.argmax(Y, axis=1)
    Ys, ys = (Y, y_idx) if rows is None else (Y[rows], y_idx[rows])
    comps, scores = [], []
    for spec in specs:
        spec = dict(spec)
        both = spec.pop("both", None)
        comp = make_component(**spec)
        # the Bayesian HMM's stacking weights its modes by the labels
        comp = (comp.fit(sequences, weigh=partial(stacked_gram, Y=Y))
                if spec["family"] == "lmmk" else comp.fit(sequences))
        variants = [comp]
        if spec["family"] == "lmmk":
            variants += [comp.with_nu(nu) for nu in (1.0, 4.0)]
        if spec["family"] == "window" and spec["representation"] == "diff":
            raw = next(c for c in comps if c.family == "window"
                       and c.representation == "raw")
            sums = [window_sum(raw, comp, 1.0 if both is None else both)]
            # a fixed derivative weight keeps the sum only
            variants = sums if both is not None else variants + sums
            if both is not None:
                i = comps.index(raw)
                del comps[i], scores[i]
        for c in variants:
            comps.append(c)
            scores.append(ridge_loo_score(component_gram(c, rows), Ys, ys))
    # the window sum of the series and their differences is one candidate to
    # the one-standard-error rule: counted as two kernels it kept the series
    # alone on Beef (test 0.767 -> 0.867) and on ArrowHead (0.886 -> 0.851, a
    # development set: six-set mean 0.947 -> 0.941), docs/ucr.md
    return Candidates(comps, [c.family for c in comps], scores, [1] * len(comps))


def component_gram(comp, rows=None):
    """A component's training Gram, or its rows and columns ``rows``."""
    if rows is None:
        return comp.K_
    if hasattr(comp, "sub_gram"):
        return comp.sub_gram(rows)
    return comp.K_[np.ix_(rows, rows)]


def describe_component(comp):
    """A component's settings as a dict (family, representation, bandwidth,
    derivative weight, depth, states, ...; the Bayesian HMM's mode weights)."""
    keep = ("representation", "sigma_scale", "derivative", "depth", "gamma_scale",
            "n_states", "hmm", "nu", "max_length")
    out = dict(family=comp.family, **{k: getattr(comp, k) for k in keep
                                      if hasattr(comp, k)})
    if getattr(comp, "hmm", None) == "bayes":
        out["mode_weighting"] = comp.mode_weighting
        out["mode_weights"] = [float(w) for w in comp.all_mode_weights_]
    return out
