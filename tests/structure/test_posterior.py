"""The enumerated structure posterior on data drawn from a known structure: the
planted structure gets most of the mass, the masses are normalised in log space
(recomputed here from the evidences and the prior), the ESS is its definition,
the same key gives the same result without recompiling."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from bayeskde.structure import (
    fit_structure_gp,
    laplace_log_evidence,
    lfo_log_score,
    log_joint,
    mixture_predictive,
    structure_table,
)
from tests.helpers import DTYPE, X64, count_compilations

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


def test_own_coordinates_give_the_full_layouts_laplace(fitted):
    """Each structure is fitted in its own coordinates; at its modes, the Laplace
    evidence over the whole parameter layout (the public log joint and its
    autodiff Hessian, the other terms' parameters at their prior means) is the
    same number: the left-out block's Gaussian prior integrates to one."""
    _, _, post = fitted
    g = post.grammar
    positive = tuple(bool(b) for b in g.param_positive)
    loc = jnp.asarray(post.prior.loc, DTYPE)
    scale = jnp.asarray(post.prior.scale, DTYPE)
    for c, s in enumerate(post.component_structure):
        mask = jnp.asarray(g.masks[s], DTYPE)

        def lj(u, mask=mask):
            return log_joint(u, mask, post.tau, post.z, loc, scale, terms=g.terms,
                             positive=positive, floor=post.floor)

        u = jnp.asarray(post.component_u[c], DTYPE)
        full = float(laplace_log_evidence(lj(u), -jax.hessian(lj)(u)))
        # the mode's Laplace mass, read back from its normalised mixture weight
        ours = (post.component_log_weight[c] - g.log_prior[s]
                + np.logaddexp.reduce(g.log_prior + post.log_evidence))
        np.testing.assert_allclose(full, ours, atol=1e-6 if X64 else 2e-2)


def test_multiplicative_series_chooses_the_log():
    """exp(LIN + PER) (growth by a factor, seasonality proportional to the
    level): the leave-future-out score of the last 10% in y's units (Jacobian
    included), which decides, and the evidence both prefer log y; the score is
    lfo_log_score's of each transform's fit; the additive planted series keeps
    y (its minimum is below zero: only y is fitted). Same length as the fixture,
    so the program is not compiled again."""
    t, y = planted(30)
    yy = np.exp(0.5 * y)
    post = fit_structure_gp(jax.random.key(0), t, yy, **CONFIG)
    assert post.transform == "log"
    lfo = post.transform_lfo
    assert set(lfo) == {"none", "log"} and lfo["log"] > lfo["none"]
    assert lfo["log"] == lfo_log_score(post, t, yy)
    ev = post.transform_log_evidence
    assert ev["log"] > ev["none"] + 3.0
    pred = mixture_predictive(post, np.array([30.0, 31.0]))
    assert pred.log_scale


def test_planted_structure_has_most_mass(fitted):
    _, _, post = fitted
    table = structure_table(post, 3)
    assert table.expressions[0].startswith("LIN + PER(")
    assert table.probabilities[0] > 0.5
    period = float(table.expressions[0].split("PER(")[1].split(")")[0])
    assert abs(period - 6.0) < 0.3


def test_additive_series_keeps_y(fitted):
    _, y, post = fitted
    assert post.transform == "none"
    assert y.min() <= 0
    assert set(post.transform_log_evidence) == {"none"}
    assert post.transform_lfo is None


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


def test_masses_match_importance_sampled_evidences(fitted):
    """Exact enumeration needs each structure's evidence; an independent,
    consistent estimate of it is importance sampling with the mixture of the
    structure's Laplace Gaussians as the proposal. On the planted series the
    structure masses from the two agree (the check that SMC's masses agree with
    enumeration, adapted: enumeration is the inference here, and Laplace is the
    approximation it rests on)."""
    _, _, post = fitted
    g = post.grammar
    positive = tuple(bool(b) for b in g.param_positive)
    loc = jnp.asarray(post.prior.loc, DTYPE)
    scale = jnp.asarray(post.prior.scale, DTYPE)
    p = loc.size
    num_draws = 4000
    estimate = np.full(len(g.masks), -np.inf)
    for s in np.unique(post.component_structure):
        rows = np.flatnonzero(post.component_structure == s)
        mask = jnp.asarray(g.masks[s], DTYPE)
        lj = jax.jit(jax.vmap(lambda u, mask=mask: log_joint(
            u, mask, post.tau, post.z, loc, scale, terms=g.terms,
            positive=positive, floor=post.floor)))
        w = np.exp(post.component_log_weight[rows] - post.component_log_weight[
            rows].max())
        w /= w.sum()
        k_pick, k_eps = jax.random.split(jax.random.key(int(s)))
        pick = np.asarray(jax.random.choice(k_pick, rows.size, (num_draws,),
                                            p=jnp.asarray(w)))
        eps = np.asarray(jax.random.normal(k_eps, (num_draws, p)), np.float64)
        roots = [np.linalg.cholesky(post.component_hessian[c]) for c in rows]
        u = np.empty((num_draws, p))
        for a, c in enumerate(rows):
            sel = pick == a
            u[sel] = post.component_u[c] + np.linalg.solve(roots[a].T, eps[sel].T).T
        log_q = np.logaddexp.reduce(np.stack([
            np.log(w[a]) - 0.5 * np.sum(((u - post.component_u[c]) @ roots[a]) ** 2,
                                        1)
            + np.sum(np.log(np.diag(roots[a]))) - 0.5 * p * np.log(2 * np.pi)
            for a, c in enumerate(rows)]), 0)
        log_w = np.asarray(lj(jnp.asarray(u, DTYPE)), np.float64) - log_q
        estimate[s] = np.logaddexp.reduce(log_w) - np.log(num_draws)
    joint = g.log_prior + estimate
    masses = np.exp(joint - np.logaddexp.reduce(joint))
    # Laplace's error here is a fraction of a nat per structure; the planted
    # structure holds nearly all the mass under both, so the masses agree to 0.01
    np.testing.assert_allclose(post.probabilities, masses, atol=0.01)
    assert masses[np.argmax(post.probabilities)] > 0.5
