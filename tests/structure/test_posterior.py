"""The enumerated structure posterior on data drawn from a known structure: the
planted structure gets most of the mass, the masses are normalised in log space
(recomputed here from the evidences and the prior), the ESS is its definition,
the same key gives the same result without recompiling."""

import jax
import numpy as np
import pytest

from bayeskde.structure import fit_structure_gp, structure_table
from tests.helpers import count_compilations

# Each fit compiles the optimiser, its line search and the Hessian (about 15 s on
# 2 cores): these run with the slow tests; the default run fits once, in the
# doctests of bayeskde/structure/estimator.py.
pytestmark = pytest.mark.slow

CONFIG = {"terms": ("LIN", "PER"), "max_terms": 2, "num_starts": 2,
          "num_steps": 30}


def planted(n, seed=0):
    """LIN + PER with period 6 and noise sd 0.3 (a draw of that GP's mean plus
    noise: a trend and an exact seasonal pattern)."""
    rng = np.random.default_rng(seed)
    t = np.arange(n, dtype=float)
    y = 0.08 * t + np.sin(2 * np.pi * t / 6) + 0.3 * rng.normal(size=n)
    return t, y


@pytest.fixture(scope="module")
def fitted():
    t, y = planted(30)
    return t, y, fit_structure_gp(jax.random.key(0), t, y, **CONFIG)


def test_planted_structure_has_most_mass(fitted):
    _, _, post = fitted
    table = structure_table(post, 3)
    assert table.expressions[0].startswith("LIN + PER(")
    assert table.probabilities[0] > 0.5
    period = float(table.expressions[0].split("PER(")[1].split(")")[0])
    assert abs(period - 6.0) < 0.3


def test_normalised_in_log_space(fitted):
    _, _, post = fitted
    joint = post.grammar.log_prior + post.log_evidence
    np.testing.assert_allclose(post.log_posterior,
                               joint - np.logaddexp.reduce(joint), atol=1e-12)
    np.testing.assert_allclose(post.probabilities.sum(), 1.0, atol=1e-12)
    np.testing.assert_allclose(post.ess, 1.0 / np.sum(post.probabilities ** 2))
    np.testing.assert_allclose(np.exp(post.component_log_weight).sum(), 1.0,
                               atol=1e-12)
    # a structure's evidence is the sum of its modes' Laplace masses
    for s in np.unique(post.component_structure):
        rows = post.component_structure == s
        lw = np.logaddexp.reduce(post.component_log_weight[rows])
        np.testing.assert_allclose(lw, post.log_posterior[s], atol=1e-9)


def test_same_key_same_result_without_recompiling(fitted):
    t, y, post = fitted
    with count_compilations() as c:
        again = fit_structure_gp(jax.random.key(0), t, y, **CONFIG)
    assert c.count == 0
    np.testing.assert_array_equal(post.log_evidence, again.log_evidence)
    np.testing.assert_array_equal(post.component_u, again.component_u)
