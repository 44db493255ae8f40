"""scikit-learn's estimator checks on the four scikit-learn estimators.

Checks that cannot apply (only TwinGP has any) are declared, each with its
reason, by :func:`bayeskde._validation.sklearn_expected_failed_checks` and
passed to scikit-learn as ``expected_failed_checks`` (a declared check that
passes fails this test, so the list cannot go stale).
"""

import functools
import json
import os
import subprocess
import sys
import warnings

import pytest
from sklearn.utils.estimator_checks import parametrize_with_checks

from bayeskde import (
    KernelDependencyEstimator,
    KernelPCA,
    KNNDependencyEstimator,
    TwinGP,
)
from bayeskde._validation import sklearn_expected_failed_checks

# TwinGP passes these two: predict writes nothing to the estimator, and every
# test point is solved by a program of one fixed batch shape.
_TWINGP_PASSES = ("check_dict_unchanged", "check_methods_subset_invariance")


def _expected_failed_checks(estimator):
    out = sklearn_expected_failed_checks(estimator)
    if isinstance(estimator, TwinGP):
        out = {k: v for k, v in out.items() if k not in _TWINGP_PASSES}
    return out


@parametrize_with_checks(
    [KernelDependencyEstimator(), KNNDependencyEstimator(), KernelPCA(), TwinGP()],
    expected_failed_checks=_expected_failed_checks,
)
def test_sklearn_compatible_estimator(estimator, check):
    if getattr(check, "func", check).__name__ == "check_array_api_input":
        # scikit-learn skips it unless SciPy's array API support is on, which
        # SciPy reads once at import (and which slows the rest of the suite):
        # it runs in a child process with the variable set.
        error = _array_api_results(json.dumps(check.keywords, sort_keys=True))[
            type(estimator).__name__]
        assert not error, error
        return
    with warnings.catch_warnings():
        # Ill-conditioned toy problems warn once (jitter, clipped eigenvalues).
        warnings.simplefilter("ignore", RuntimeWarning)
        check(estimator)


_ARRAY_API_CHILD = """
import json, sys, traceback, warnings
from sklearn.utils.estimator_checks import check_array_api_input
from bayeskde import (KernelDependencyEstimator, KernelPCA,
                      KNNDependencyEstimator, SequenceKernelClassifier, TwinGP)
keywords = json.loads(sys.argv[1])
out = {}
for est in (KernelDependencyEstimator(), KNNDependencyEstimator(), KernelPCA(),
            TwinGP(), SequenceKernelClassifier(kernels=("signature",),
                                               derivative=0.0)):
    name = type(est).__name__
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            check_array_api_input(name, est, **keywords)
        out[name] = ""
    except Exception:
        out[name] = traceback.format_exc()
print(json.dumps(out))
"""


@functools.cache
def _array_api_results(keywords: str) -> dict:
    """``check_array_api_input`` with ``keywords`` on the four estimators (and
    the sequence classifier of tests/meanmap/test_classifier.py), in one
    child process with ``SCIPY_ARRAY_API=1``: estimator name -> error ("" if
    the check passed)."""
    env = {**os.environ, "SCIPY_ARRAY_API": "1"}
    proc = subprocess.run([sys.executable, "-c", _ARRAY_API_CHILD, keywords],
                          env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_only_twin_gp_declares_checks_that_cannot_apply():
    """The three Weston et al. estimators refuse a 1-D X as scikit-learn's own
    do (``check_fit1d`` runs and passes): nothing is declared for them."""
    for est in (KernelDependencyEstimator(), KNNDependencyEstimator(), KernelPCA()):
        assert sklearn_expected_failed_checks(est) == {}
    assert "check_fit1d" in sklearn_expected_failed_checks(TwinGP())


# InverseGPRegressor: every fit runs the quadrature posterior and the predictive
# compiles per data shape (about 10 s a check here), so the suite runs the
# checks of scikit-learn's API contract below, the ones that found its bugs
# (a 1-D X, y=None, data that is not an array, a column y, one sample, empty
# features, batch invariance of predict); `python -c "from
# sklearn.utils.estimator_checks import check_estimator; ..."` runs all 52
# (all pass; its score is the mean log predictive density, so it declares the
# poor_score tag: scikit-learn's bar score > 0.5 is one for an R^2).
_INVERSE_CHECKS = (
    "check_fit1d", "check_fit2d_predict1d", "check_requires_y_none",
    "check_regressor_data_not_an_array", "check_supervised_y_2d",
    "check_fit2d_1sample", "check_estimators_empty_data_messages",
    "check_methods_subset_invariance", "check_dict_unchanged",
    "check_dont_overwrite_parameters", "check_n_features_in_after_fitting",
    "check_estimators_nan_inf", "check_get_params_invariance",
    "check_fit_idempotent",
)


@pytest.mark.parametrize("check_name", _INVERSE_CHECKS)
def test_inverse_gp_regressor_checks(check_name):
    from sklearn.utils import estimator_checks

    from bayeskde.inverse import InverseGPPrior, InverseGPRegressor

    est = InverseGPRegressor(InverseGPPrior(max_degree=1, n_gamma=4),
                             num_samples=20, num_chains=1, num_draws=3, n_grid=64)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        if check_name == "check_regressor_data_not_an_array":
            # the same check (NotAnArray and pandas X, y give the array's
            # predictions) on 40 x 3 data instead of its 200 x 10: the fit and
            # the predictive compile per shape (25 s here against 6 s)
            from sklearn.datasets import make_regression

            X, y = make_regression(40, 3, n_informative=1, bias=5.0, noise=20,
                                   random_state=42)
            for obj_type in ("NotAnArray", "PandasDataframe"):
                estimator_checks.check_estimators_data_not_an_array(
                    "InverseGPRegressor", est, X, y, obj_type)
        else:
            getattr(estimator_checks, check_name)("InverseGPRegressor", est)


def test_inverse_gp_regressor_declares_its_poor_score():
    from sklearn.utils import get_tags

    from bayeskde import InverseGPRegressor

    assert get_tags(InverseGPRegressor()).regressor_tags.poor_score
    assert sklearn_expected_failed_checks(InverseGPRegressor()) == {}
