"""Low-rank evidence of the inverse model against the exact one.

Oracles: the exact spectra of ``prepare_inverse_gp_data(approx="exact")``
(every m x m Gram eigendecomposed) and brute-force Gaussian densities; with all
training points as Nystroem centres the low-rank map is the exact kernel, so
the evidence, the pair posterior and the predictive must equal the exact ones.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from bayeskde.datasets import make_arm_pose, make_sshape
from bayeskde.learn import (
    InverseGPRegressor,
    fit_inverse_gp,
    inverse_gp_predictive,
    quadrature_posterior,
)
from bayeskde.models import (
    InverseGPPrior,
    inverse_gp_log_probs,
    pair_log_evidence,
    prepare_inverse_gp_data,
)
from tests.helpers import X64

PRIOR = InverseGPPrior(max_degree=2, n_gamma=5, gamma_low=0.3, gamma_high=30.0)
A, S = 0.1, 0.0025


@pytest.fixture(scope="module")
def sshape():
    d = make_sshape(jax.random.key(0), 120)
    ex = prepare_inverse_gp_data(d.t_train, d.x_train, PRIOR)
    return d, ex


def _ev(data):
    dt = data.X.dtype
    return np.asarray(pair_log_evidence(data, jnp.asarray(A, dt), jnp.asarray(S, dt)),
                      np.float64)


def test_nystroem_at_full_rank_is_the_exact_evidence(sshape):
    d, ex = sshape
    lr = prepare_inverse_gp_data(d.t_train, d.x_train, PRIOR, approx="lowrank",
                                 rank=120, features="nystroem")
    assert lr.lowrank.kind == "nystroem" and lr.lowrank.rank == 120
    np.testing.assert_allclose(np.asarray(lr.alpha), np.asarray(ex.alpha),
                               atol=1e-9 if X64 else 1e-6)
    e0, e1 = _ev(ex), _ev(lr)
    # float64: the centres' floor (1e-8 of the largest eigenvalue) bounds the
    # difference; float32: the evidence's own rounding (|E| ~ 300, eps 1e-7).
    np.testing.assert_allclose(e1, e0, rtol=0, atol=1e-4 if X64 else 2e-3)
    np.testing.assert_array_equal(np.asarray(lr.n_rest) >= 0, True)


def test_hsgp_evidence_converges_to_the_exact_one(sshape):
    d, ex = sshape
    e0 = _ev(ex)
    heavy = np.asarray(quadrature_posterior(jax.random.key(0), ex, PRIOR,
                                            n_draws=4).pair_posterior) > 1e-3
    errs = []
    for r in (16, 64):
        lr = prepare_inverse_gp_data(d.t_train, d.x_train, PRIOR, approx="lowrank",
                                     rank=r, features="hsgp")
        errs.append(np.abs(_ev(lr) - e0)[heavy].max())
    assert errs[1] < errs[0]
    assert errs[1] < (0.05 if X64 else 0.05)


def test_pair_posterior_and_predictive_agree_with_exact(sshape):
    d, ex = sshape
    q0 = quadrature_posterior(jax.random.key(0), ex, PRIOR, n_draws=200)
    for feat, r in (("hsgp", 128), ("nystroem", 120)):
        lr = prepare_inverse_gp_data(d.t_train, d.x_train, PRIOR, approx="lowrank",
                                     rank=r, features=feat)
        q1 = quadrature_posterior(jax.random.key(0), lr, PRIOR, n_draws=200)
        tv = 0.5 * np.abs(q0.pair_posterior - q1.pair_posterior).sum()
        assert tv < (1e-3 if feat == "nystroem" else 5e-3), (feat, tv)
    # the predictive of one pair at one draw: feature form against the exact
    g, dd = np.unravel_index(np.argmax(q0.pair_posterior), q0.pair_posterior.shape)
    lj = np.full((1, *q0.pair_posterior.shape), -np.inf)
    lj[0, g, dd] = 0.0
    cand = np.linspace(0, 1, 41)[:, None]
    Xt = np.array([[0.45], [0.2], [0.9]])
    p0 = np.asarray(inverse_gp_log_probs(ex, [A], [S], lj, cand, Xt))
    lr = prepare_inverse_gp_data(d.t_train, d.x_train, PRIOR, approx="lowrank",
                                 rank=120, features="nystroem")
    p1 = np.asarray(inverse_gp_log_probs(lr, [A], [S], lj, cand, Xt))
    np.testing.assert_allclose(np.exp(p1), np.exp(p0), atol=1e-6 if X64 else 2e-3)


def test_arm_nystroem_full_rank_matches_exact():
    a = make_arm_pose(jax.random.key(0), 60, 3)
    ex = prepare_inverse_gp_data(a.theta_train, a.x_train, PRIOR)
    lr = prepare_inverse_gp_data(a.theta_train, a.x_train, PRIOR, approx="lowrank",
                                 rank=60)
    assert lr.lowrank.kind == "nystroem"  # the default for d_y = 3
    np.testing.assert_allclose(_ev(lr), _ev(ex), rtol=0, atol=1e-4 if X64 else 5e-3)


def test_fit_reports_the_approximation_and_predicts(sshape):
    d, _ = sshape
    fit = fit_inverse_gp(jax.random.key(1), d.x_train, d.t_train, PRIOR,
                         method="quadrature", approx="lowrank", num_samples=20,
                         num_chains=2, progress_bar=False, n_replicates=3)
    assert fit.approx == "lowrank" and fit.rank.features == "hsgp"
    assert fit.rank.chosen_by == "data" and fit.rank.rank == fit.rank.tried[-1]
    assert fit.idata.posterior_predictive["x"].shape[-2:] == (120, 1)
    pr = inverse_gp_predictive(fit, np.array([0.45]), n_draws=5, n_grid=100)
    np.testing.assert_allclose(np.exp(pr.log_probs).sum(), 1.0, rtol=1e-5)
    small = fit_inverse_gp(jax.random.key(1), d.x_train, d.t_train, PRIOR,
                           method="quadrature", num_samples=5, num_chains=1,
                           progress_bar=False, posterior_predictive=False)
    assert small.approx == "exact" and small.rank is None  # auto at m = 120


def test_svi_method(sshape):
    d, _ = sshape
    fit = fit_inverse_gp(jax.random.key(1), d.x_train, d.t_train, PRIOR,
                         method="svi", approx="lowrank", rank=64, num_steps=300,
                         num_samples=20, num_chains=1, progress_bar=False,
                         posterior_predictive=False)
    assert fit.report.guide == "lowrank" and fit.report.num_steps == 300
    np.testing.assert_allclose(fit.pair_posterior.sum(), 1.0, rtol=1e-5)
    assert fit.rank.chosen_by == "user" and fit.rank.rank == 64


def test_bad_arguments(sshape):
    d, _ = sshape
    Y, X = d.t_train, d.x_train
    with pytest.raises(ValueError, match="approx"):
        prepare_inverse_gp_data(Y, X, PRIOR, approx="foo")
    with pytest.raises(ValueError, match="rank"):
        prepare_inverse_gp_data(Y, X, PRIOR, approx="lowrank", rank=0)
    with pytest.raises(ValueError, match="rank"):
        prepare_inverse_gp_data(Y, X, PRIOR, approx="lowrank", rank=121)
    with pytest.raises(TypeError, match="rank"):
        prepare_inverse_gp_data(Y, X, PRIOR, approx="lowrank", rank=2.5)
    with pytest.raises(ValueError, match="rank"):
        prepare_inverse_gp_data(Y, X, PRIOR, approx="exact", rank=10)
    with pytest.raises(ValueError, match="features"):
        prepare_inverse_gp_data(Y, X, PRIOR, approx="lowrank", features="rff")
    with pytest.raises(ValueError, match="hsgp"):
        a = make_arm_pose(jax.random.key(0), 20, 2)
        prepare_inverse_gp_data(a.theta_train, a.x_train, PRIOR, approx="lowrank",
                                features="hsgp")
    with pytest.raises(ValueError, match="approx"):
        fit_inverse_gp(jax.random.key(0), X, Y, PRIOR, approx="foo")
    with pytest.raises(ValueError, match="method"):
        fit_inverse_gp(jax.random.key(0), X, Y, PRIOR, method="vi")
    with pytest.raises(ValueError, match="approx"):
        InverseGPRegressor(PRIOR, approx="foo").fit(X, Y)
    est = InverseGPRegressor(PRIOR, approx="lowrank", rank=7)
    assert est.get_params()["approx"] == "lowrank" and est.rank == 7
