"""Fixed-point pre-images: dtype-aware stopping, float32 against float64."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from bayeskde import KernelDependencyEstimator
from bayeskde.kde import fixed_point_preimage, nearest_candidates


def _solve(x64):
    rng = np.random.default_rng(5)
    X = rng.uniform(-1, 1, size=(60, 2))
    Y = np.c_[np.sin(3 * X[:, 0]), np.cos(2 * X[:, 1])]
    Z = rng.uniform(-1, 1, size=(30, 2))
    with jax.enable_x64(x64):
        dtype = jnp.float64 if x64 else jnp.float32
        kde = KernelDependencyEstimator(
            "rbf", {"gamma": 3.0}, "rbf", {"gamma": 0.5}, ridge=1e-4
        ).fit(X.astype(dtype), Y.astype(dtype))
        F = kde.predict_features(Z.astype(dtype))
        Yj = jnp.asarray(Y, dtype)
        z0 = Yj[nearest_candidates(F, kde.candidate_proj_)]
        res = fixed_point_preimage(kde.fit_.kpca, F, Yj, z0, 0.5, n_iter=500)
        return jax.tree.map(np.asarray, res)


@pytest.fixture(scope="module")
def both():
    return _solve(False), _solve(True)


def test_stops_before_the_cap_in_both_precisions(both):
    r32, r64 = both
    assert r32.preimages.dtype == np.float32 and r64.preimages.dtype == np.float64
    assert r32.n_iter.max() < 500 and r64.n_iter.max() < 500
    assert r32.n_iter.mean() <= 2 * r64.n_iter.mean()
    assert r32.n_iter.max() <= 2 * r64.n_iter.max()


def test_float32_preimages_close_to_float64(both):
    r32, r64 = both
    same = r32.used_fallback == r64.used_fallback
    assert same.mean() > 0.9
    # The fixed point is known to about sqrt(eps_32) ~ 3.5e-4 of the kernel
    # width (1.4 here) in float32, divided by the contraction gap.
    np.testing.assert_allclose(r32.preimages[same], r64.preimages[same], atol=5e-3)
