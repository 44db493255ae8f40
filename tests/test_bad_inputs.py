"""The bad-input matrix of ``bench/bad_inputs.py`` on the cheap public entry
points (kernel functions, kernel algebra, HMM inference, padding, the ``.ts``
reader, parameter checks, use before fit) and on the estimators' extreme and
non-finite cases: every case ends in a ValueError/TypeError that names the
user's argument or in a finite result, never NaN, a hang or a mutated input."""

import importlib.util
import os

import pytest

from tests.conftest import ROOT

_spec = importlib.util.spec_from_file_location(
    "bad_inputs", os.path.join(ROOT, "bench", "bad_inputs.py"))
bad_inputs = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(bad_inputs)

CHEAP = {"rbf_kernel", "polynomial_kernel", "median_heuristic", "make_kernel.gram",
         "center_kernel", "normalize_kernel", "gaussian_hyperkernel_gram",
         "forward_backward", "forward_filter", "pad_sequences", "read_ts"}
ESTIMATORS = {"KDE.fit", "KDE.predict", "KernelPCA.fit", "TwinGP.fit",
              "TwinGP.fit(Y)", "TwinGP.predict", "HyperkernelLearner.fit",
              "fit_hmm"}
CASES = [c for c in bad_inputs.cases()
         if c[1] in CHEAP or c[0] in ("params", "before_fit")
         or (c[1] in ESTIMATORS and c[0] in ("extreme", "nonfinite"))]


@pytest.mark.parametrize(
    "case", CASES, ids=[f"{c[1]}-{c[0]}-{c[2]}" for c in CASES])
def test_bad_input_gets_a_clear_error_or_a_finite_answer(case):
    category, entry, label, fn, names, inputs = case
    outcome, mutated, message = bad_inputs.classify(fn, names, inputs, timeout=120)
    assert outcome in ("clear", "accepted"), (outcome, message)
    assert not mutated
