"""Proper scores against closed forms and brute force; bad input refused by name."""

import functools
import json
import os
import re
import subprocess
import sys

import numpy as np
import pytest
from scipy import integrate, stats

from bayeskde import metrics
from tests.conftest import ROOT, X64


def test_crps_gaussian_matches_integral_definition(tol):
    # CRPS = int (Phi((z - mu) / sd) - 1{z >= y})^2 dz, integrated numerically.
    mu, sd, y = np.array([0.3, -1.0, 2.0]), np.array([0.5, 2.0, 0.1]), np.array(
        [0.1, 1.5, 2.05])
    ref = []
    for m, s, yy in zip(mu, sd, y, strict=True):
        f_lo = integrate.quad(lambda z, m=m, s=s: stats.norm.cdf(z, m, s) ** 2,
                              -np.inf, yy, epsabs=1e-13)[0]
        f_hi = integrate.quad(lambda z, m=m, s=s: stats.norm.sf(z, m, s) ** 2,
                              yy, np.inf, epsabs=1e-13)[0]
        ref.append(f_lo + f_hi)
    got = np.asarray(metrics.crps_gaussian(mu, sd, y))
    np.testing.assert_allclose(got, ref, rtol=max(tol, 1e-9) * 10)


def test_log_density_gaussian_matches_scipy(tol):
    mu, sd, y = np.array([0.3, -1.0]), np.array([0.5, 2.0]), np.array([0.1, 1.5])
    np.testing.assert_allclose(metrics.log_density_gaussian(mu, sd, y),
                               stats.norm.logpdf(y, mu, sd), rtol=tol * 10)


def test_crps_samples_equals_energy_form_brute_force(rng, tol):
    X = rng.normal(size=(4, 37))
    y = rng.normal(size=4)
    ref = (np.abs(X - y[:, None]).mean(1)
           - 0.5 * np.abs(X[:, :, None] - X[:, None, :]).mean((1, 2)))
    np.testing.assert_allclose(metrics.crps_samples(X, y), ref, rtol=tol * 10,
                               atol=tol)


def test_crps_discrete_weighted_brute_force(rng, tol):
    z = rng.normal(size=25)
    p = rng.random((3, 25))
    y = rng.normal(size=3)
    q = p / p.sum(1, keepdims=True)
    ref = (q * np.abs(z[None] - y[:, None])).sum(1) - 0.5 * np.einsum(
        "ni,nj,ij->n", q, q, np.abs(z[:, None] - z[None]))
    np.testing.assert_allclose(metrics.crps_discrete(z, p, y), ref, rtol=tol * 10,
                               atol=tol)


def test_discretised_gaussian_approaches_closed_form():
    grid = np.linspace(-8, 8, 4001)
    dz = grid[1] - grid[0]
    p = stats.norm.pdf(grid)[None] * dz
    got = float(metrics.crps_discrete(grid, p, np.array([0.7]))[0])
    exact = float(metrics.crps_gaussian(np.zeros(1), np.ones(1), np.array([0.7]))[0])
    # a grid of cell dz carries an O(dz) discretisation error
    assert abs(got - exact) < dz


def test_log_density_grid_interpolates_a_normalised_density():
    grid = np.linspace(-6, 6, 2001)
    logd = stats.norm.logpdf(grid)[None].repeat(2, 0) + 3.0  # unnormalised
    y = np.array([0.3, -1.2])
    got = np.asarray(metrics.log_density_grid(grid, logd, y))
    # linear interpolation of a smooth density: O(dz^2) error
    np.testing.assert_allclose(got, stats.norm.logpdf(y), atol=1e-4)
    assert np.isneginf(metrics.log_density_grid(grid, logd[:1], np.array([7.0]))[0])


def test_pit_interval_and_coverage_match_numpy(rng):
    X = rng.normal(size=(5, 101))
    y = rng.normal(size=5)
    p = np.ones_like(X)
    np.testing.assert_allclose(metrics.pit_discrete(X, p, y),
                               (X <= y[:, None]).mean(1), atol=1e-6)
    lo, hi = metrics.interval_discrete(X, p, 0.8)
    ref_lo = np.quantile(X, 0.1, axis=1, method="inverted_cdf")
    ref_hi = np.quantile(X, 0.9, axis=1, method="inverted_cdf")
    np.testing.assert_allclose(lo, ref_lo, rtol=1e-6)
    np.testing.assert_allclose(hi, ref_hi, rtol=1e-6)
    cov = metrics.coverage_discrete(X, p, y, 0.8)
    np.testing.assert_array_equal(np.asarray(cov),
                                  ((ref_lo <= y) & (y <= ref_hi)).astype(float))


def test_coverage_of_calibrated_samples_is_nominal():
    r = np.random.default_rng(1)
    X = r.normal(size=(2000, 200))
    y = r.normal(size=2000)
    cov = float(np.mean(metrics.coverage_discrete(X, np.ones_like(X), y, 0.9)))
    assert abs(cov - 0.9) < 3 * np.sqrt(0.09 / 2000) + 0.01  # + quantile noise


def test_best_of_k_brute_force(rng, tol):
    H = rng.normal(size=(6, 3, 2))
    y = rng.normal(size=(6, 2))
    ref = [min(np.linalg.norm(H[i, j] - y[i]) for j in range(3)) for i in range(6)]
    np.testing.assert_allclose(metrics.best_of_k_error(H, y), ref, rtol=tol * 10)
    h1 = rng.normal(size=(4, 2))
    y1 = rng.normal(size=4)
    np.testing.assert_allclose(metrics.best_of_k_error(h1, y1),
                               np.abs(h1 - y1[:, None]).min(1), rtol=tol * 10)


@pytest.mark.parametrize("bad", [
    lambda: metrics.crps_gaussian(np.zeros(1), np.zeros(1), np.ones(1)),
    lambda: metrics.crps_discrete(np.arange(3.0), np.ones((2, 4)), np.zeros(2)),
    lambda: metrics.crps_discrete(np.arange(3.0), -np.ones((2, 3)), np.zeros(2)),
    lambda: metrics.interval_discrete(np.arange(3.0), np.ones((2, 3)), 1.5),
    lambda: metrics.best_of_k_error(np.zeros((2, 3, 2)), np.zeros((3, 2))),
])
def test_bad_input_raises(bad):
    with pytest.raises(ValueError):
        bad()


#: (call, error, message pattern): run in a child process without the suite's
#: jaxtyping hook, whose own TypeCheckError would answer first for annotated
#: arguments; these are the messages a user reads.
BAD = [
    # Gaussian scores: mismatched shapes (issue 40), sd <= 0, NaN, empty, strings.
    ("crps_gaussian(Y, Y, np.ones(4))", "ValueError",
     r"mean must have y's shape \(4,\)"),
    ("crps_gaussian(Y, np.ones(2), Y)", "ValueError", r"sd must have y's shape"),
    ("log_density_gaussian(Y, Y, np.ones(4))", "ValueError", r"mean must have y's"),
    ("log_density_gaussian(Y, -Y, Y)", "ValueError", r"sd must be > 0"),
    ("crps_gaussian(Y, Y, [np.nan, 0, 0])", "ValueError", r"y contains NaN"),
    ("crps_gaussian([], [], [])", "ValueError", r"is empty"),
    ("crps_gaussian('a', Y, Y)", "TypeError", r"mean must hold numbers"),
    # Discrete scores: a row without mass (issue 40: NaN), shapes, y, support.
    ("crps_discrete(S, ZERO_ROW, Y)", "ValueError",
     r"probs must have positive mass in every row; row\(s\) \[0\]"),
    ("pit_discrete(S, ZERO_ROW, Y)", "ValueError", r"positive mass"),
    ("interval_discrete(S, np.zeros((3, 4)))", "ValueError", r"positive mass"),
    ("crps_discrete(S, P, np.ones(5))", "ValueError",
     r"y must have shape \(3,\).*got \(5,\)"),
    ("crps_discrete(S, P, np.ones((3, 2)))", "ValueError",
     r"y must have shape \(3,\).*got \(3, 2\)"),
    ("crps_discrete(np.linspace(0, 1, 5), P, Y)", "ValueError",
     r"support must have shape \(4,\) \(shared\) or \(3, 4\)"),
    ("crps_discrete(S, P * np.nan, Y)", "ValueError", r"probs contains NaN"),
    ("crps_discrete('abcd', P, Y)", "TypeError", r"support must hold numbers"),
    ("crps_samples(np.ones((3, 5)), np.ones(4))", "ValueError",
     r"y must have shape \(3,\)"),
    ("coverage_discrete(S, P, np.ones(5))", "ValueError", r"y must have shape"),
    ("interval_discrete(S, None)", "TypeError",
     r"probs must be an array of numbers, got None"),
    ("interval_discrete(S, P, 'a')", "TypeError", r"level must be a real number"),
    ("coverage_discrete(S, P, Y, np.nan)", "ValueError", r"level must be finite"),
    # Gridded log density: the grid, a row of zero density, strings.
    ("log_density_grid(np.zeros(1), np.zeros((3, 1)), Y)", "ValueError",
     r"grid needs at least 2 points"),
    ("log_density_grid(S[::-1], np.zeros((3, 4)), Y)", "ValueError",
     r"grid must be increasing"),
    ("log_density_grid(np.array([0, 0.1, 0.5, 1]), np.zeros((3, 4)), Y)",
     "ValueError", r"uniform spacing"),
    ("log_density_grid(np.ones((2, 2)), np.zeros((3, 4)), Y)", "ValueError",
     r"grid must be 1-dimensional"),
    ("log_density_grid(S, np.array([[-np.inf] * 4, [0] * 4, [0] * 4]), Y)",
     "ValueError", r"row\(s\) \[0\] are -inf everywhere"),
    ("log_density_grid(S, 'abcd', Y)", "TypeError", r"log_density must hold"),
    ("log_density_grid(S, np.zeros((3, 4)), np.ones(5))", "ValueError",
     r"y must have shape \(3,\)"),
    # C2ST's settings.
    ("c2st(np.ones((10, 2)), np.ones((10, 2)), seed='a')", "TypeError",
     r"seed must be an integer"),
    ("c2st(np.ones((10, 2)), np.ones((10, 2)), seed=-1)", "ValueError",
     r"seed must be >= 0"),
    ("c2st(np.ones((10, 2)), np.ones((10, 2)), scoring='nope')", "ValueError",
     r"scoring must be a scikit-learn scorer name"),
    ("c2st(np.ones((10, 2)), np.ones((10, 2)), scoring=len)", "TypeError",
     r"scoring must be a scikit-learn scorer name \(a str\)"),
    ("c2st(np.ones((10, 2)), np.ones((10, 2)), z_score='no')", "ValueError",
     r"z_score must be one of \(True, False\)"),
]

_CHILD = """
import json, sys
import numpy as np
from bayeskde.metrics import *
S, P, Y = np.linspace(0.0, 1.0, 4), np.full((3, 4), 0.25), np.array([0.1, 0.5, 0.9])
ZERO_ROW = np.array([[0.0, 0, 0, 0], [1, 1, 1, 1], [1, 0, 0, 0]])
out = {}
for call in json.loads(sys.argv[1]):
    try:
        eval(call)
        out[call] = ["no error", ""]
    except Exception as err:
        out[call] = [type(err).__name__, str(err)]
print(json.dumps(out))
"""


@functools.cache
def _as_a_user_sees_them() -> dict:
    proc = subprocess.run(
        [sys.executable, "-c", _CHILD, json.dumps([c for c, _, _ in BAD])],
        capture_output=True, text=True, timeout=600,
        env={**os.environ, "PYTHONPATH": ROOT})
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("call, error, match", BAD, ids=[c for c, _, _ in BAD])
def test_bad_input_names_the_argument(call, error, match):
    got, message = _as_a_user_sees_them()[call]
    assert got == error, (got, message)
    assert re.search(match, message), message


def test_dtype_follows_precision():
    out = metrics.crps_samples(np.ones((2, 3)), np.zeros(2))
    assert out.dtype == (np.float64 if X64 else np.float32)
