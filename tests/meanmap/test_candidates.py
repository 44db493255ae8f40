"""The candidate kernels a training set affords (bayeskde.meanmap.candidates)."""

import jax
import pytest

from bayeskde.meanmap.candidates import (
    candidate_families,
    candidate_specs,
    dtw_fallback,
    signature_depth,
)
from bayeskde.meanmap.sequence_kernels import FAMILIES


def test_families_by_budget_and_names():
    assert candidate_families("auto", 100, 1460) == ("window",)   # ACSF1
    assert candidate_families("auto", 67, 24) == FAMILIES         # ItalyPowerDemand
    assert candidate_families("auto", 55, 200) == FAMILIES        # PAA to 128
    assert candidate_families("auto", 55, 200, max_length=None) == ("window",)
    assert candidate_families("auto", 10**4, 10**4, budget=None) == FAMILIES
    assert candidate_families(("gak", "dtw"), 10**4, 10**4) == ("gak", "dtw")
    assert candidate_families("lmmk") == ("lmmk",)
    for bad in ((), ("window", "rocket"), "rbf"):
        with pytest.raises(ValueError, match="kernels must be"):
            candidate_families(bad, 10, 10)


def test_specs_per_family():
    key = jax.random.key(0)
    specs = candidate_specs(FAMILIES, key, 1)
    count = {f: sum(s["family"] == f for s in specs) for f in FAMILIES}
    # window: series, differences (and their sum, formed when fitted); gak:
    # 3 derivative weights x 3 bandwidths; signature: 2 x 3; lmmk: 4 and 8 states
    assert count == {"window": 2, "gak": 9, "signature": 6, "lmmk": 2}
    ragged = candidate_specs(("window",), key, 1, ragged=True)
    assert [s["representation"] for s in ragged] == ["raw", "diff", "padded"]
    fixed = candidate_specs(FAMILIES, key, 1, derivative=0.0)
    assert [s["representation"] for s in fixed if s["family"] == "window"] == ["raw"]
    assert {s["derivative"] for s in fixed if s["family"] != "window"} == {0.0}
    lmmk = candidate_specs(("lmmk",), key, 1, n_states=3)
    assert [s["n_states"] for s in lmmk] == [3]
    # the same key gives the same specs; dtw adds no kernel candidate
    again = candidate_specs((*FAMILIES, "dtw"), key, 1)
    assert len(again) == len(specs)
    for a, b in zip(specs, again, strict=True):
        assert a.keys() == b.keys()
    # two channels: path dimension 3 (depth 4), 5 with the differences (3)
    sig = [s["depth"] for s in candidate_specs(("signature",), key, 2)]
    assert sig == [4, 4, 4, 3, 3, 3]
    assert [signature_depth(d, w) for d, w in ((1, 0), (1, 1), (2, 1), (4, 1))] == [
        4, 4, 3, 2]


def test_dtw_fallback_budget(rng):
    seqs = [rng.normal(size=(int(rng.integers(8, 13)), 1)) for _ in range(6)]
    assert dtw_fallback(seqs, 12, dtw_budget=6**2 * 12**2) is not None
    assert dtw_fallback(seqs, 12, dtw_budget=6**2 * 12**2 - 1) is None
    assert dtw_fallback(seqs, 12, dtw_budget=None) is None
    assert dtw_fallback(seqs, 12, nested=False) is None
    assert dtw_fallback(seqs, 12, kernels=("window",)) is None
    # named, it is always fitted
    fit = dtw_fallback(seqs, 12, kernels=("window", "dtw"), dtw_budget=None)
    assert fit is not None and fit.D_.shape == (6, 6)
