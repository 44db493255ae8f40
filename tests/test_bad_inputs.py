"""The bad-input matrix of ``bench/bad_inputs.py`` on the cheap public entry
points (kernel functions, kernel algebra, HMM inference, padding, the ``.ts``
reader, parameter checks, use before fit, the Bayesian layer's runners, priors
and netCDF files) and on the estimators' extreme and non-finite cases: every
case ends in a ValueError/TypeError that names the user's argument or in a
finite result, never NaN, a hang or a mutated input."""

import functools
import importlib.util
import json
import os
import subprocess
import sys

import pytest

from tests.conftest import ROOT

_spec = importlib.util.spec_from_file_location(
    "bad_inputs", os.path.join(ROOT, "bench", "bad_inputs.py"))
bad_inputs = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(bad_inputs)

CHEAP = {"rbf_kernel", "polynomial_kernel", "median_heuristic", "make_kernel.gram",
         "center_kernel", "normalize_kernel", "gaussian_hyperkernel_gram",
         "forward_backward", "forward_filter", "pad_sequences", "read_ts",
         "inference data"}
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


#: The raw library messages issue 25 found (entry, case): each is in the matrix
#: above and now gets a ValueError/TypeError naming the argument.
ISSUE_25 = [
    ("KDECV", "cv=2.5"), ("KDECV", "ridges=[]"), ("KDECV", "input_param_grid={}"),
    ("KDECV", "input_param_grid={'sigma': []}"), ("fit_hmm", "key='abc'"),
    ("run_nuts", "key='abc'"), ("forward_backward", "log_likelihoods strings"),
    ("inference data", "save_inference_data(None)"),
    ("inference data", "load_inference_data(text file)"),
    ("kde_gibbs_posterior", "prior NaN log_ridge_loc"),
    ("KDE.fit", "1-D X"), ("KNN.fit", "1-D X"), ("KernelPCA.fit", "1-D X"),
]
#: Issue 40's raw messages and silent results on the inverse model's entry
#: points (an integer key, Y None, the estimator or None as the fit, a box
#: prior of the wrong dimension, a constant Y, a predictive of other rows).
ISSUE_40 = [
    ("fit_inverse_gp", "key=1"), ("fit_inverse_gp", "Y=None"),
    ("fit_inverse_gp", "constant Y"), ("inverse_gp_predictive", "fit=None"),
    ("inverse_gp_predictive", "the estimator as fit"),
    ("inverse_gp_predictive", "box prior of 2 dims for 1 output"),
    ("inverse_gp_sample", "subdivide=1, predictive of 6 rows for 4"),
]


_CHILD = """
import json, sys
sys.path.insert(0, sys.argv[1])
import bad_inputs
wanted = json.loads(sys.argv[2])
out = {}
for cat, entry, label, fn, names, inputs in bad_inputs.cases():
    if [entry, label] in wanted:
        outcome, _, message = bad_inputs.classify(fn, names, inputs, 120)
        out[entry + "|" + label] = [outcome, message, list(names)]
print(json.dumps(out))
"""


@functools.cache
def _as_a_user_sees_them() -> dict:
    """The ISSUE_25 and ISSUE_40 cases in a child process without the suite's jaxtyping
    hook (whose own TypeCheckError would answer first for annotated arguments):
    the messages a user reads. (entry|case) -> (outcome, message, names)."""
    proc = subprocess.run(
        [sys.executable, "-c", _CHILD, os.path.join(ROOT, "bench"),
         json.dumps(ISSUE_25 + ISSUE_40)], capture_output=True, text=True, timeout=600,
        env={**os.environ, "PYTHONPATH": ROOT})
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("entry, label", ISSUE_25 + ISSUE_40,
                         ids=[f"{e}-{c}" for e, c in ISSUE_25 + ISSUE_40])
def test_issue_25_and_40_cases_name_the_argument(entry, label):
    outcome, message, names = _as_a_user_sees_them()[f"{entry}|{label}"]
    assert outcome == "clear", message
    assert message.startswith(("ValueError", "TypeError")), message
    assert any(n in message for n in names), (names, message)
