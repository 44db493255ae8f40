"""scikit-learn's estimator checks on the four scikit-learn estimators.

Checks that cannot apply are declared, each with its reason, by
:func:`bayeskde._validation.sklearn_expected_failed_checks` and passed to
scikit-learn as ``expected_failed_checks`` (a declared check that passes fails
this test, so the list cannot go stale).
"""

import warnings

from sklearn.utils.estimator_checks import parametrize_with_checks

from bayeskde import (
    KernelDependencyEstimator,
    KernelPCA,
    KNNDependencyEstimator,
    TwinGP,
)
from bayeskde._validation import sklearn_expected_failed_checks


@parametrize_with_checks(
    [KernelDependencyEstimator(), KNNDependencyEstimator(), KernelPCA(), TwinGP()],
    expected_failed_checks=sklearn_expected_failed_checks,
)
def test_sklearn_compatible_estimator(estimator, check):
    with warnings.catch_warnings():
        # Ill-conditioned toy problems warn once (jitter, clipped eigenvalues).
        warnings.simplefilter("ignore", RuntimeWarning)
        check(estimator)
