"""Tests of the Twin GP data: make_sshape (S-shape) and make_arm_pose (planar arm)."""

import jax
import numpy as np
import pytest

from bayeskde.datasets import (
    ARM_JOINT_LIMITS,
    ARM_LINK_LENGTHS,
    SSHAPE_NOISE,
    arm_forward,
    arm_mirror_pose,
    make_arm_pose,
    make_sshape,
)

N_MC = 20000


def _curve(t):
    return t + 0.3 * np.sin(2 * np.pi * t)


@pytest.fixture(scope="module")
def big():
    return make_sshape(jax.random.key(7), n_train=N_MC)


def test_same_key_same_data_other_key_other_data(key):
    a, b = make_sshape(key, 50), make_sshape(key, 50)
    for u, v in zip(a, b, strict=True):
        np.testing.assert_array_equal(u, v)
    c = make_sshape(jax.random.key(1), 50)
    assert not np.array_equal(a.t_train, c.t_train)
    np.testing.assert_array_equal(a.t_test, c.t_test)


def test_shapes_and_dtypes(key):
    d = make_sshape(key, 37)
    assert d.x_train.shape == d.t_train.shape == (37,)
    assert d.x_test.shape == d.t_test.shape == (500,)
    assert all(a.dtype == np.float64 for a in d)
    assert make_sshape(key).x_train.shape == (500,)


def test_test_grid_is_noise_free(key):
    d = make_sshape(key, 10)
    np.testing.assert_allclose(d.t_test, np.arange(500) * 0.002, rtol=0, atol=1e-15)
    assert d.t_test[0] == 0.0
    np.testing.assert_allclose(d.t_test[-1], 0.998, rtol=0, atol=1e-15)
    np.testing.assert_allclose(d.x_test, _curve(d.t_test), rtol=0, atol=1e-15)


def test_outputs_uniform_on_unit_interval(big):
    t = big.t_train
    assert t.min() >= 0.0 and t.max() < 1.0
    # Monte Carlo: mean 1/2 and variance 1/12, within 4 standard errors.
    assert abs(t.mean() - 0.5) < 4 * np.sqrt(1 / 12 / N_MC)
    assert abs(t.var() - 1 / 12) < 4 * np.sqrt(1 / 180 / N_MC)
    # Kolmogorov-Smirnov distance to U(0, 1); 1.63 / sqrt(n) is the 1 % level.
    s = np.sort(t)
    ks = np.max(np.abs(s - np.arange(1, N_MC + 1) / N_MC))
    assert ks < 1.63 / np.sqrt(N_MC)


def test_input_noise_level(big):
    r = big.x_train - _curve(big.t_train)
    assert SSHAPE_NOISE == 0.05
    # Mean 0 and sd 0.05, each within 4 standard errors (se of the sd ~ sd/sqrt(2n)).
    assert abs(r.mean()) < 4 * SSHAPE_NOISE / np.sqrt(N_MC)
    assert abs(r.std(ddof=1) - SSHAPE_NOISE) < 4 * SSHAPE_NOISE / np.sqrt(2 * N_MC)
    # Gaussian: about 68.3 % within one sd (binomial se ~ 0.0033).
    inside = np.mean(np.abs(r) < SSHAPE_NOISE)
    assert abs(inside - 0.6827) < 4 * np.sqrt(0.6827 * 0.3173 / N_MC)


@pytest.mark.parametrize("bad", [0, -5])
def test_bad_n_train_value(key, bad):
    with pytest.raises(ValueError, match=">= 1"):
        make_sshape(key, bad)


@pytest.mark.parametrize("bad", [2.5, "10", True, None])
def test_bad_n_train_type(key, bad):
    # Under the test-time jaxtyping/beartype hook the annotation ``n_train: int``
    # rejects it first; without the hook the library's own check does.
    with pytest.raises(TypeError, match="integer|n_train"):
        make_sshape(key, bad)


def test_bad_key():
    with pytest.raises(TypeError, match="key"):
        make_sshape(0, 10)


# ------------------------------------------------------------------- planar arm


def test_arm_pose_shapes_ranges_and_determinism(key):
    d = make_arm_pose(key, 30, 7)
    assert d.x_train.shape == (30, 4) and d.theta_train.shape == (30, 3)
    assert d.x_test.shape == d.x_test_clean.shape == (7, 4)
    assert d.theta_test.shape == (7, 3)
    for a in (d.x_train, d.theta_train, d.x_test, d.theta_test, d.x_test_clean):
        assert a.dtype == np.float64
    for j, (lo, hi) in enumerate(ARM_JOINT_LIMITS):
        assert np.all((d.theta_train[:, j] >= lo) & (d.theta_train[:, j] <= hi))
    e = make_arm_pose(key, 30, 7)
    for u, v in zip(d[:5], e[:5], strict=True):
        np.testing.assert_array_equal(u, v)
    assert not np.array_equal(make_arm_pose(jax.random.key(1), 30, 7).x_train,
                              d.x_train)


def test_arm_forward_against_explicit_geometry(rng):
    th = rng.uniform(-2, 2, size=(6, 3))
    l1, l2, l3 = ARM_LINK_LENGTHS
    for t, x in zip(th, arm_forward(th), strict=True):
        a1, a2, a3 = t[0], t[0] + t[1], t[0] + t[1] + t[2]
        elbow = l1 * np.array([np.cos(a1), np.sin(a1)])
        tip = elbow + l2 * np.array([np.cos(a2), np.sin(a2)]) + l3 * np.array(
            [np.cos(a3), np.sin(a3)])
        np.testing.assert_allclose(x, np.r_[elbow, tip], rtol=0, atol=1e-12)


def test_arm_mirror_pose_is_another_exact_inverse(rng):
    th = rng.uniform(-1.5, 1.5, size=(50, 3))
    m = arm_mirror_pose(th)
    np.testing.assert_allclose(arm_forward(m), arm_forward(th), rtol=0, atol=1e-12)
    moved = np.abs(th[:, 2]) > 0.1
    assert np.all(np.abs(m[moved] - th[moved]).max(1) > 0.1)  # a different pose
    np.testing.assert_allclose(arm_mirror_pose(m), th, atol=1e-12)  # involution


def test_arm_noise_level_and_both_branches():
    d = make_arm_pose(jax.random.key(3), 4000, 4000, noise=0.05)
    r = (d.x_test - d.x_test_clean).ravel()
    # sd 0.05 within 4 standard errors (se of the sd ~ sd / sqrt(2n)).
    assert abs(r.std(ddof=1) - 0.05) < 4 * 0.05 / np.sqrt(2 * r.size)
    clean = arm_forward(d.theta_train)
    s = (d.x_train - clean).ravel()
    assert abs(s.std(ddof=1) - 0.05) < 4 * 0.05 / np.sqrt(2 * s.size)
    # Both wrist branches occur: theta_3 takes both signs in about equal shares.
    share = np.mean(d.theta_train[:, 2] > 0)
    assert abs(share - 0.5) < 4 * np.sqrt(0.25 / 4000)
    assert make_arm_pose(jax.random.key(3), 5, 5, noise=0.0).x_test.tolist() == (
        arm_forward(make_arm_pose(jax.random.key(3), 5, 5).theta_test).tolist())


def test_arm_pose_bad_input(key):
    with pytest.raises(ValueError, match="n_train"):
        make_arm_pose(key, 0)
    with pytest.raises(ValueError, match="n_test"):
        make_arm_pose(key, 5, -1)
    with pytest.raises(ValueError, match="noise"):
        make_arm_pose(key, 5, 5, noise=-0.1)
    with pytest.raises(ValueError, match="noise"):
        make_arm_pose(key, 5, 5, noise=float("nan"))
    with pytest.raises(TypeError, match="key"):
        make_arm_pose(0, 5)
    with pytest.raises(TypeError, match="integer|n_train"):
        make_arm_pose(key, 2.5)
