"""KernelDependencyEstimator.predict_modes against brute force."""

import numpy as np
import pytest

from bayeskde import KernelDependencyEstimator
from bayeskde.tgp.modes import Modes


@pytest.fixture(scope="module")
def fitted():
    r = np.random.default_rng(0)
    X = r.normal(size=(60, 3))
    Y = np.c_[np.sin(X[:, 0]), X[:, 1] * X[:, 2]]
    Y[30:35] = Y[:5]  # duplicated outputs: their mass is pooled
    kde = KernelDependencyEstimator("rbf", {"gamma": 0.5}, "rbf", {"gamma": 1.0},
                                    ridge=1e-3).fit(X, Y)
    return X, Y, kde, r.normal(size=(7, 3))


def test_masses_are_the_softmax_of_the_preimage_distances(fitted):
    X, Y, kde, Z = fitted
    res = kde.predict_modes(Z, 3, temperature=0.3)
    assert isinstance(res, Modes) and res.temperature == 0.3
    modes, masses = res.modes, res.masses
    F = np.asarray(kde.predict_features(Z), float)
    T = np.asarray(kde.candidate_proj_, float)
    d2 = ((F[:, None, :] - T[None]) ** 2).sum(-1)
    p = np.exp(-(d2 - d2.min(1, keepdims=True)) / 0.3)
    p /= p.sum(1, keepdims=True)
    # pool the duplicated candidates by their outputs (brute force)
    keys = [tuple(y) for y in Y]
    uniq = sorted(set(keys), key=keys.index)
    pooled = np.stack([p[:, [i for i, kk in enumerate(keys) if kk == u]].sum(1)
                       for u in uniq], 1)
    order = np.argsort(-pooled, axis=1, kind="stable")[:, :3]
    np.testing.assert_allclose(masses, np.take_along_axis(pooled, order, 1),
                               rtol=1e-5, atol=1e-9)
    np.testing.assert_allclose(modes, np.asarray(uniq)[order], atol=1e-12)
    # as tau -> 0 the first mode is the paper's candidate pre-image (at larger
    # tau a duplicated output's pooled mass may outweigh the nearest one)
    cold = kde.predict_modes(Z, 1, temperature=1e-4).modes
    np.testing.assert_allclose(cold[:, 0], kde.predict(Z), atol=1e-12)


def test_estimated_temperature_is_the_heldout_residual(fitted):
    X, Y, kde, Z = fitted
    res = kde.predict_modes(Z, 2)
    tau = kde._mode_temperature()
    assert res.temperature == pytest.approx(tau, rel=1e-12)
    perm = np.random.default_rng(0).permutation(len(X))
    val, keep = perm[:12], perm[12:]
    sub = KernelDependencyEstimator(
        "rbf", {"gamma": 0.5}, "rbf", {"gamma": 1.0}, ridge=1e-3,
        candidates=Y[val]).fit(X[keep], Y[keep])
    R = np.asarray(sub.predict_features(X[val])) - np.asarray(sub.candidate_proj_)
    np.testing.assert_allclose(tau, 2 * np.mean(R**2), rtol=1e-5)
    np.testing.assert_allclose(res.masses,
                               kde.predict_modes(Z, 2, temperature=tau).masses)


def test_string_outputs_and_bad_input():
    X = np.linspace(0, 1, 12)[:, None]
    Y = ["ab", "ba", "aab", "abb", "bba", "bab"] * 2
    kde = KernelDependencyEstimator("rbf", {"gamma": 5.0}, "string",
                                    ridge=1e-2).fit(X, Y)
    modes, masses, tau = kde.predict_modes(X[:3], 2, temperature=1.0)
    assert tau == 1.0 and masses.shape == (3, 2)
    assert len(modes) == 3 and all(len(m) == 2 for m in modes)
    assert all(isinstance(s, str) for m in modes for s in m)
    assert modes[0][0] != modes[0][1]  # identical strings are pooled
    with pytest.raises(ValueError, match="k"):
        kde.predict_modes(X[:3], 0, temperature=1.0)
    with pytest.raises(ValueError, match="temperature"):
        kde.predict_modes(X[:3], 2, temperature=0.0)
    K = np.exp(-((X - X.T) ** 2))
    pre = KernelDependencyEstimator("precomputed", output_kernel="string").fit(K, Y)
    with pytest.raises(ValueError, match="precomputed"):
        pre.predict_modes(K[:2], 2)
