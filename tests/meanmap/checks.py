"""Checks shared by the mean-map kernel tests: PSD Grams, a Monte Carlo
estimate against its closed form, random SPD matrices."""

import math

import numpy as np

from tests.helpers import X64

#: Agreement of two computations of one kernel value in the working precision.
RTOL = 1e-9 if X64 else 1e-4


def assert_psd(K):
    """``K`` symmetric and positive semi-definite up to the working precision."""
    K = np.asarray(K, np.float64)
    np.testing.assert_allclose(K, K.T, rtol=RTOL, atol=RTOL)
    tol = (1e-8 if X64 else 1e-4) * max(1.0, np.abs(K).max())
    assert np.linalg.eigvalsh(0.5 * (K + K.T)).min() > -tol


def assert_within_3se(value, samples):
    """``value`` within three standard errors of the mean of ``samples``."""
    samples = np.asarray(samples, np.float64)
    se = samples.std(ddof=1) / math.sqrt(samples.size)
    assert abs(float(value) - samples.mean()) < 3 * se, (float(value), samples.mean(),
                                                          se)


def random_spd(rng, d, scale=0.4):
    """A random symmetric positive-definite ``(d, d)`` matrix."""
    A = rng.normal(size=(d, d))
    return scale * A @ A.T + 0.1 * np.eye(d)
