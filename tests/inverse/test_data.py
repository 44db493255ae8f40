"""The inverse model's data: the transform weights against the HSIC of the
seed's Theorem 4.1 by dense NumPy, the exact/low-rank choice, and bad input."""

import jax
import numpy as np
import pytest

from bayeskde.datasets import make_arm_pose, make_sshape
from bayeskde.inverse import (
    EXACT_MAX_M,
    InverseGPPrior,
    InverseGPRegressor,
    fit_inverse_gp,
    prepare_inverse_gp_data,
)
from bayeskde.inverse.data import resolve_approx
from tests.helpers import LOOSE, assert_close

PRIOR = InverseGPPrior(max_degree=2, n_gamma=5, gamma_low=0.3, gamma_high=30.0)
KEY = jax.random.key(0)


def _hsic(K, L):
    m = len(K)
    H = np.eye(m) - 1.0 / m
    return np.trace(H @ K @ H @ L) / (m - 1) ** 2


def test_alpha_is_the_normalised_hsic_column():
    r = np.random.default_rng(3)
    Y = r.uniform(size=(25, 1))
    X = np.c_[np.sin(4 * Y[:, 0]), Y[:, 0] ** 2] + 0.1 * r.normal(size=(25, 2))
    data = prepare_inverse_gp_data(KEY, X, Y, PRIOR)
    Xc = X - X.mean(0)
    g = float(data.gammas[2])
    d2 = (Y - Y.T) ** 2
    C = np.array([_hsic(np.exp(-(i + 1) * g * d2), Xc @ Xc.T) for i in range(2)])
    # computed in float64, stored in the working dtype
    assert_close(data.alpha[2, 1], C / C.sum())
    assert_close(data.alpha[2, 0], [1.0, 0.0])
    # the rate grid: the prior's multiples of the median-heuristic rate
    med = 1.0 / np.median(d2[np.triu_indices(25, 1)])
    assert_close(data.gammas, med * np.geomspace(0.3, 30.0, 5), rtol=LOOSE)


def test_bad_data():
    with pytest.raises(ValueError, match="same number of rows"):
        prepare_inverse_gp_data(KEY, np.ones((4, 1)), np.zeros((5, 1)))
    with pytest.raises(ValueError, match="constant"):
        prepare_inverse_gp_data(KEY, np.ones(5), np.arange(5.0))
    with pytest.raises(ValueError, match="constant"):
        prepare_inverse_gp_data(KEY, np.arange(5.0), np.ones(5))
    with pytest.raises(ValueError, match="n_gamma"):
        prepare_inverse_gp_data(KEY, np.arange(5.0), np.arange(5.0),
                                InverseGPPrior(n_gamma=0))
    with pytest.raises(ValueError, match="at least 3"):
        prepare_inverse_gp_data(KEY, np.arange(2.0), np.arange(2.0))
    with pytest.raises(TypeError, match="key"):
        prepare_inverse_gp_data(0, np.arange(5.0), np.arange(5.0))


def test_auto_crossover():
    for d_y, kind in ((1, "hsgp"), (3, "nystroem")):
        assert resolve_approx("auto", EXACT_MAX_M[kind], d_y=d_y) == "exact"
        assert resolve_approx("auto", EXACT_MAX_M[kind] + 1, d_y=d_y) == "lowrank"
    assert resolve_approx("auto", 10, rank=5) == "lowrank"
    assert resolve_approx("exact", 10**6) == "exact"


def test_bad_arguments():
    d = make_sshape(jax.random.key(0), 50)
    Y, X = d.t_train, d.x_train
    prior = InverseGPPrior(n_gamma=8)
    with pytest.raises(ValueError, match="approx"):
        prepare_inverse_gp_data(KEY, X, Y, prior, approx="foo")
    with pytest.raises(ValueError, match="approx"):
        prepare_inverse_gp_data(KEY, X, Y, prior, approx=None)
    for bad in (0, -3):
        with pytest.raises(ValueError, match="rank"):
            prepare_inverse_gp_data(KEY, X, Y, prior, approx="lowrank", rank=bad)
    with pytest.raises(ValueError, match="rank"):
        prepare_inverse_gp_data(KEY, X, Y, prior, approx="lowrank", rank=51,
                                features="nystroem")
    with pytest.raises(TypeError, match="rank"):
        prepare_inverse_gp_data(KEY, X, Y, prior, approx="lowrank", rank=2.5)
    with pytest.raises(ValueError, match="rank"):
        prepare_inverse_gp_data(KEY, X, Y, prior, approx="exact", rank=10)
    with pytest.raises(ValueError, match="features"):
        prepare_inverse_gp_data(KEY, X, Y, prior, approx="lowrank", features="rff")
    a = make_arm_pose(jax.random.key(0), 20, 2)
    with pytest.raises(ValueError, match="hsgp"):
        prepare_inverse_gp_data(KEY, a.x_train, a.theta_train, prior,
                                approx="lowrank", features="hsgp")
    with pytest.raises(ValueError, match="NaN|finite"):
        prepare_inverse_gp_data(KEY, X, np.where(np.arange(50) == 3, np.nan, Y),
                                prior, approx="lowrank")
    with pytest.raises(ValueError, match="approx"):
        fit_inverse_gp(KEY, X, Y, prior, approx="foo")
    with pytest.raises(ValueError, match="method"):
        fit_inverse_gp(KEY, X, Y, prior, method="vi")
    with pytest.raises(ValueError, match="method"):
        fit_inverse_gp(KEY, np.ones((5, 1)), np.arange(5.0), method="mh")
    with pytest.raises(ValueError, match="rank"):
        fit_inverse_gp(KEY, X, Y, prior, approx="lowrank", rank=0)
    with pytest.raises(ValueError, match="approx"):
        InverseGPRegressor(prior, approx="foo").fit(X[:, None], Y[:, None])
    with pytest.raises(ValueError, match="rank"):
        InverseGPRegressor(prior, rank=-1).fit(X[:, None], Y[:, None])
    est = InverseGPRegressor(prior, approx="lowrank", rank=7)
    assert est.get_params()["approx"] == "lowrank" and est.get_params()["rank"] == 7
