"""The two-pass fit of a long series against the exact enumeration of the whole
series (oracle): the screen keeps the planted structure, and each kept
structure's evidence is the one the enumeration finds (same modes, so the same
Laplace evidences), its posterior the enumeration's conditioned on the kept
set."""

import jax
import numpy as np
import pytest

from bayeskde.structure import (
    SCREEN_POINTS,
    data_scales,
    fit_structure_gp,
    make_grammar,
    parameter_prior,
    screen_window,
    structure_posterior,
    structure_table,
)

# three compiled fits (the window, the whole series, the second pass): slow tier
pytestmark = pytest.mark.slow


def test_screen_matches_exact_enumeration():
    rng = np.random.default_rng(3)
    n = 80
    t = np.arange(n, dtype=float)
    y = 0.05 * t + np.sin(2 * np.pi * t / 6) + 0.3 * rng.normal(size=n)
    config = {"terms": ("LIN", "PER", "SE"), "max_terms": 2, "num_starts": 2,
              "num_steps": 60}
    post = fit_structure_gp(jax.random.key(0), t, y, screen_above=SCREEN_POINTS,
                            **config)
    assert post.screen["points"] == SCREEN_POINTS
    assert post.screen["structures"] == 7
    assert 1 <= post.screen["kept"] <= 7 and post.screen["mass_kept"] > 0.99
    assert structure_table(post, 1).expressions[0].startswith("LIN + PER(")
    # the last 64 by time, in time order, whatever the order given
    np.testing.assert_array_equal(screen_window(t[::-1]),
                                  np.arange(SCREEN_POINTS - 1, -1, -1))
    # oracle: every structure fitted on the whole series from cold starts
    g = make_grammar(config["terms"], 2)
    sc = data_scales(t, y)
    exact = structure_posterior(
        jax.random.key(0), (t - sc.t_min) / sc.span, (y - sc.y_mean) / sc.y_sd,
        g, parameter_prior(g, sc), sc, num_starts=2, num_steps=60)
    for row, mask in enumerate(post.grammar.masks):
        s = int(np.flatnonzero((g.masks == mask).all(1))[0])
        # the optimiser's and Laplace's agreement across two runs: 0.04 nats
        # measured (float32)
        assert abs(post.log_evidence[row] - exact.log_evidence[s]) < 0.1
    kept = [int(np.flatnonzero((g.masks == m).all(1))[0]) for m in post.grammar.masks]
    conditioned = exact.probabilities[kept] / exact.probabilities[kept].sum()
    np.testing.assert_allclose(post.probabilities, conditioned, atol=0.02)
