"""Tests of bayeskde.datasets.sbi (the sbibm tasks) and bayeskde.metrics.c2st.

Oracles: the log likelihoods against SciPy's densities (Gaussian tasks) and
against grid quadrature of the simulator's own draws (two moons); sbibm's
shipped reference draws against the posterior those likelihoods imply
(importance weights, closed-form truncated moments); the reference draws pushed
through the simulators land nearer the observation than prior draws do. The
C2ST tests use small samples (its cost is the MLP's training)."""

import bz2
import functools
import json
import os
import re
import subprocess
import sys
import zipfile

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import stats

from bayeskde.datasets import (
    SBI_TASKS,
    SBITask,
    gaussian_linear_uniform,
    gaussian_mixture,
    make_sbi_pairs,
    reference_posterior,
    sbi_task,
    two_moons,
)
from bayeskde.metrics import c2st
from tests.conftest import ROOT
from tests.helpers import count_compilations

N_MC = 20_000


@pytest.fixture(scope="module", params=SBI_TASKS[:3])
def task(request):
    """The three uniform-prior tasks; the other five: test_sbi_tasks.py."""
    return sbi_task(request.param)


def _keys(seed, n):
    return jax.random.split(jax.random.key(seed), n)


def test_tasks_shapes_prior_and_shipped_files(task):
    d = {"two_moons": 2, "gaussian_mixture": 2, "gaussian_linear_uniform": 10}[
        task.name]
    assert isinstance(task, SBITask)
    assert task.dim_parameters == task.dim_data == d
    assert task.observations.shape == task.true_parameters.shape == (10, d)
    assert np.all((task.true_parameters > task.low) & (task.true_parameters
                                                        < task.high))
    draws = np.asarray(task.prior.sample(jax.random.key(0), (500,)))
    assert draws.shape == (500, d)
    assert np.all((draws >= task.low) & (draws <= task.high))
    inside = float(task.prior.log_prob(jnp.zeros(d)))
    np.testing.assert_allclose(inside, -np.sum(np.log(task.high - task.low)),
                               rtol=1e-6)
    ref = reference_posterior(task.name)
    assert ref.shape == (1000, d)
    assert np.all((ref >= task.low) & (ref <= task.high))


def test_same_key_same_draws_and_jit(task):
    theta = task.prior.sample(jax.random.key(1), (64,))
    k = jax.random.key(2)
    a, b = task.simulate(k, theta), task.simulate(k, theta)
    np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    assert not np.array_equal(np.asarray(a),
                              np.asarray(task.simulate(jax.random.key(3), theta)))
    sim = jax.jit(task.simulate)
    np.testing.assert_allclose(np.asarray(sim(k, theta)), np.asarray(a),
                               rtol=1e-6, atol=1e-6)
    with count_compilations() as c:
        sim(jax.random.key(4), theta)
    assert c.count == 0
    p1 = make_sbi_pairs(jax.random.key(5), task, 100)
    p2 = make_sbi_pairs(jax.random.key(5), task, 100)
    np.testing.assert_array_equal(p1.x, p2.x)
    assert p1.theta.shape == (100, task.dim_parameters)
    assert p1.x.shape == (100, task.dim_data)


def test_gaussian_log_likelihoods_match_scipy():
    rng = np.random.default_rng(0)
    theta = rng.uniform(-1, 1, (50, 10))
    x = theta + rng.normal(0, 0.5, (50, 10))
    glu = gaussian_linear_uniform()
    want = [stats.multivariate_normal(t, 0.1 * np.eye(10)).logpdf(xx)
            for t, xx in zip(theta, x, strict=True)]
    np.testing.assert_allclose(np.asarray(glu.log_likelihood(theta, x)), want,
                               rtol=1e-5)
    gm = gaussian_mixture()
    theta, x = theta[:, :2] * 10, x[:, :2] * 10
    want = [np.log(0.5 * stats.multivariate_normal(t, np.eye(2)).pdf(xx)
                   + 0.5 * stats.multivariate_normal(t, 0.01 * np.eye(2)).pdf(xx))
            for t, xx in zip(theta, x, strict=True)]
    np.testing.assert_allclose(np.asarray(gm.log_likelihood(theta, x)), want,
                               rtol=1e-5)
    # One observation broadcast to every parameter row.
    one = np.asarray(gm.log_likelihood(theta, x[0]))
    np.testing.assert_allclose(one[0], want[0], rtol=1e-5)


def test_gaussian_simulators_have_the_likelihoods_moments():
    theta = np.tile([[0.3, -0.7, 0.1, 0.9, -0.2, 0.0, 0.5, -0.5, 0.8, -0.9]],
                    (N_MC, 1))
    x = np.asarray(gaussian_linear_uniform().simulate(jax.random.key(0), theta),
                   float)
    se = np.sqrt(0.1 / N_MC)
    assert np.all(np.abs(x.mean(0) - theta[0]) < 5 * se)
    assert np.all(np.abs(x.var(0) - 0.1) < 5 * 0.1 * np.sqrt(2 / N_MC))
    t2 = np.tile([[1.0, -2.0]], (N_MC, 1))
    x = np.asarray(gaussian_mixture().simulate(jax.random.key(1), t2), float)
    r = np.linalg.norm(x - t2, axis=1)
    # A scale mixture: half the draws within 0.3 of theta almost surely.
    p = 0.5 * (1 - np.exp(-0.09 / 0.02)) + 0.5 * (1 - np.exp(-0.09 / 2))
    assert abs(np.mean(r < 0.3) - p) < 5 * np.sqrt(p * (1 - p) / N_MC)
    assert np.all(np.abs(x.var(0) - 0.505) < 0.05)


def test_two_moons_log_likelihood_is_the_simulators_density():
    task = two_moons()
    theta0 = np.array([0.3, -0.5])
    shift = np.array([-abs(theta0.sum()) / np.sqrt(2),
                      (theta0[1] - theta0[0]) / np.sqrt(2)])
    h = 5e-4
    u = np.arange(-0.01, 0.15, h) + h / 2 + 0.25
    v = np.arange(-0.15, 0.15, h) + h / 2
    grid = np.stack(np.meshgrid(u, v, indexing="ij"), -1).reshape(-1, 2) + shift
    ll = np.asarray(task.log_likelihood(np.tile(theta0, (len(grid), 1)), grid),
                    float)
    dens = np.exp(ll) * h * h
    np.testing.assert_allclose(dens.sum(), 1.0, atol=2e-3)
    mean_q = (dens[:, None] * grid).sum(0)
    cov_q = (dens[:, None, None] * np.einsum("ni,nj->nij", grid - mean_q,
                                             grid - mean_q)).sum(0)
    x = np.asarray(task.simulate(jax.random.key(0), np.tile(theta0, (N_MC, 1))),
                   float)
    sd = np.sqrt(np.diag(cov_q))
    assert np.all(np.abs(x.mean(0) - mean_q) < 5 * sd / np.sqrt(N_MC))
    np.testing.assert_allclose(np.cov(x.T), cov_q, atol=5 * sd.max() ** 2
                               * np.sqrt(2 / N_MC))
    # Every observation lies on the crescent of its true parameters.
    ll_true = np.asarray(task.log_likelihood(task.true_parameters,
                                             task.observations))
    floor = stats.norm(0, 0.01).logpdf(0.05) - np.log(np.pi * 0.15)
    assert np.all(ll_true > floor)


def test_two_moons_reference_is_the_likelihoods_posterior():
    task = two_moons()
    ref = reference_posterior("two_moons")
    theta = np.asarray(task.prior.sample(jax.random.key(0), (200_000,)), float)
    lw = np.asarray(task.log_likelihood(theta, task.observations[0]), float)
    w = np.exp(lw - lw.max())
    w /= w.sum()
    ess = 1.0 / np.sum(w**2)
    assert ess > 500
    mean = w @ theta
    sd = np.sqrt(w @ (theta - mean) ** 2)
    se = sd * np.sqrt(1 / len(ref) + 1 / ess)
    assert np.all(np.abs(ref.mean(0) - mean) < 5 * se)
    np.testing.assert_allclose(ref.std(0), sd, rtol=0.1)
    assert np.all(np.isfinite(np.asarray(
        task.log_likelihood(ref, task.observations[0]))))


def test_gaussian_references_match_closed_form_posteriors():
    glu = gaussian_linear_uniform()
    ref = reference_posterior("gaussian_linear_uniform")
    x_o, s = glu.observations[0], np.sqrt(0.1)
    tn = stats.truncnorm((-1 - x_o) / s, (1 - x_o) / s, loc=x_o, scale=s)
    assert np.all(np.abs(ref.mean(0) - tn.mean()) < 5 * tn.std() / np.sqrt(1000))
    np.testing.assert_allclose(ref.std(0), tn.std(), rtol=0.15)
    gm = gaussian_mixture()
    ref = reference_posterior("gaussian_mixture")
    x_o = gm.observations[0]
    # Posterior: 0.5 N(x_o, I) + 0.5 N(x_o, 0.01 I) cut to the box [-10, 10]^2.
    mass = {sc: np.prod(stats.norm(x_o, sc).cdf(10) - stats.norm(x_o, sc).cdf(-10))
            for sc in (1.0, 0.1)}
    near = {sc: (1 - np.exp(-0.09 / (2 * sc * sc))) for sc in (1.0, 0.1)}
    p = (near[1.0] + near[0.1]) / (mass[1.0] + mass[0.1])
    got = np.mean(np.linalg.norm(ref - x_o, axis=1) < 0.3)
    assert abs(got - p) < 5 * np.sqrt(p * (1 - p) / len(ref))


def test_reference_draws_reproduce_the_observation_better_than_prior(task):
    x_o = task.observations[0]
    ref = reference_posterior(task.name)
    prior = task.prior.sample(jax.random.key(0), (len(ref),))
    h = {"two_moons": 0.05, "gaussian_mixture": 0.3,
         "gaussian_linear_uniform": 0.3}[task.name]

    def kde_at_obs(theta, key):
        x = np.asarray(task.simulate(key, theta), float)
        d2 = np.sum((x - x_o) ** 2, axis=1) / h**2
        return np.log(np.mean(np.exp(-0.5 * d2)) + 1e-300)

    gain = kde_at_obs(ref, jax.random.key(1)) - kde_at_obs(prior,
                                                           jax.random.key(1))
    assert gain > np.log(5.0)


def test_reference_posterior_from_a_wheel(tmp_path):
    rows = np.arange(12.0).reshape(6, 2)
    csv = "parameter_1,parameter_2\n" + "\n".join(f"{a},{b}" for a, b in rows)
    member = ("sbibm/tasks/two_moons/files/num_observation_3/"
              "reference_posterior_samples.csv.bz2")
    wheel = tmp_path / "sbibm-1.1.0-py2.py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as zf:
        zf.writestr(member, bz2.compress(csv.encode()))
    for source in (wheel, tmp_path):
        np.testing.assert_array_equal(
            reference_posterior("two_moons", 3, source=source), rows)
    unpacked = tmp_path / "unpacked"
    (unpacked / member).parent.mkdir(parents=True)
    (unpacked / member).write_bytes(bz2.compress(csv.encode()))
    np.testing.assert_array_equal(
        reference_posterior("two_moons", 3, source=unpacked), rows)
    with pytest.raises(FileNotFoundError, match="pip download --no-deps sbibm"):
        reference_posterior("two_moons", 4, source=wheel)
    with pytest.raises(FileNotFoundError, match="pip download --no-deps sbibm"):
        reference_posterior("two_moons", 3, source=tmp_path / "absent")
    with pytest.raises(FileNotFoundError, match="no sbibm-1.1.0 wheel"):
        reference_posterior("two_moons", 3, source=unpacked / "sbibm")
    with pytest.raises(ValueError, match="pip download --no-deps sbibm"):
        reference_posterior("two_moons", 2)


def test_sbi_bad_inputs_are_refused():
    task = two_moons()
    key = jax.random.key(0)
    with pytest.raises(ValueError, match=r"theta must have shape \(n, 2\)"):
        task.simulate(key, jnp.zeros(2))
    with pytest.raises(ValueError, match=r"theta must have shape \(n, 2\)"):
        task.simulate(key, jnp.zeros((4, 3)))
    with pytest.raises(ValueError, match="theta contains NaN"):
        task.simulate(key, jnp.full((4, 2), jnp.nan))
    with pytest.raises(TypeError, match="key must be a jax.random key"):
        task.simulate(0, jnp.zeros((4, 2)))
    with pytest.raises(ValueError, match=r"x must have shape \(2,\) or \(4, 2\)"):
        task.log_likelihood(jnp.zeros((4, 2)), jnp.zeros((3, 2)))
    with pytest.raises(ValueError, match="x contains NaN"):
        task.log_likelihood(jnp.zeros((4, 2)), jnp.array([np.nan, 0.0]))
    with pytest.raises(ValueError, match="name must be a task name, one of"):
        sbi_task("slcp_distractors")
    with pytest.raises(ValueError, match="name must be a task name, one of"):
        reference_posterior("slcp_distractors")
    with pytest.raises(ValueError, match="num_observation must be >= 1"):
        reference_posterior("two_moons", 11)
    with pytest.raises(ValueError, match="num_simulations must be >= 1"):
        make_sbi_pairs(key, task, 0)
    with pytest.raises(TypeError, match="task must be an SBITask"):
        make_sbi_pairs(key, "two_moons", 10)


# --- C2ST ------------------------------------------------------------------------

@pytest.fixture(scope="module")
def moons_ref():
    return reference_posterior("two_moons")


def test_c2st_same_distribution_is_about_half(moons_ref):
    score = c2st(moons_ref[:400], moons_ref[400:800])
    # 800 held-out decisions a run: the chance level's standard error is 0.018.
    assert abs(score - 0.5) < 0.08
    assert c2st(moons_ref[:400], moons_ref[400:800]) == score  # seeded


def test_c2st_prior_against_reference_is_near_one(moons_ref):
    prior = np.asarray(two_moons().prior.sample(jax.random.key(0), (400,)))
    assert c2st(moons_ref[:400], prior) > 0.9


#: (call, error, message pattern), run in a child process without the suite's
#: jaxtyping hook (its TypeCheckError would answer first for annotated
#: arguments): the messages a user reads.
BAD = [
    # Issue 40: a list as a task name gave Python's "unhashable type".
    ("sbi_task(['two_moons'])", "TypeError",
     r"name must be a task name, a str among .*got list"),
    ("sbi_task(None)", "TypeError", r"name must be a task name"),
    ("reference_posterior(['two_moons'])", "TypeError", r"name must be a task name"),
    ("reference_posterior('two_moons', '1')", "TypeError",
     r"num_observation must be an integer"),
    ("reference_posterior('two_moons', 2, source=5)", "TypeError",
     r"source must be None or a path"),
    ("make_sbi_pairs(jax.random.key(0), two_moons(), 10.0)", "TypeError",
     r"num_simulations must be an integer"),
    ("two_moons().simulate(jax.random.key(0), 'abc')", "TypeError",
     r"theta must hold numbers"),
    ("two_moons().simulate(jax.random.key(0), None)", "TypeError",
     r"theta must be an array of numbers, got None"),
    ("two_moons().simulate(jax.random.key(0), np.zeros((0, 2)))", "ValueError",
     r"theta is empty"),
    ("gaussian_mixture().log_likelihood(np.zeros((3, 2)), 'ab')", "TypeError",
     r"x must hold numbers"),
    ("gaussian_linear_uniform().log_likelihood(np.zeros((3, 10)), np.zeros(3))",
     "ValueError", r"x must have shape \(10,\) or \(3, 10\)"),
]

_CHILD = """
import json, sys
import jax
import numpy as np
from bayeskde.datasets import *
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
def test_sbi_bad_inputs_name_the_argument(call, error, match):
    got, message = _as_a_user_sees_them()[call]
    assert got == error, (got, message)
    assert re.search(match, message), message


def test_log_likelihood_still_traces_under_jit():
    # The checks skip tracers: NUTS and the inverse model call it inside jit.
    task = gaussian_linear_uniform()
    out = jax.jit(task.log_likelihood)(jnp.zeros((2, 10)), jnp.zeros(10))
    np.testing.assert_allclose(out, task.log_likelihood(np.zeros((2, 10)),
                                                        np.zeros(10)), rtol=1e-6)


def test_c2st_bad_inputs_are_refused(moons_ref):
    with pytest.raises(ValueError, match="same number of features"):
        c2st(moons_ref, moons_ref[:, :1])
    with pytest.raises(ValueError, match="samples must be 2-dimensional"):
        c2st(moons_ref, moons_ref[:, 0])
    with pytest.raises(ValueError, match="samples contains NaN"):
        c2st(moons_ref, np.full((10, 2), np.nan))
    with pytest.raises(ValueError, match="needs at least n_folds=5 rows"):
        c2st(moons_ref, moons_ref[:3])
    with pytest.raises(ValueError, match="zero spread in feature"):
        c2st(np.c_[moons_ref[:, 0], np.ones(len(moons_ref))], moons_ref)
    with pytest.raises(ValueError, match="n_folds must be >= 2"):
        c2st(moons_ref, moons_ref, n_folds=1)

