"""Top-k modes of discrete predictives (``bayeskde._modes``: no public name;
the Twin GP and the inverse model both call it)."""

import numpy as np
import pytest

from bayeskde._modes import top_k_modes


def _bump(grid, c, w):
    return np.clip(1 - ((grid - c) / w) ** 2, 0, None)


def test_two_bumps_give_centres_and_masses():
    grid = np.linspace(0, 1, 1001)
    a, b = _bump(grid, 0.2, 0.05), _bump(grid, 0.7, 0.05)
    p = np.stack([0.3 * a / a.sum() + 0.7 * b / b.sum(),
                  0.9 * a / a.sum() + 0.1 * b / b.sum()])
    modes, masses = top_k_modes(grid, p, 2, radius=0.08)
    np.testing.assert_allclose(modes[:, :, 0], [[0.7, 0.2], [0.2, 0.7]], atol=1e-9)
    np.testing.assert_allclose(masses, [[0.7, 0.3], [0.9, 0.1]], atol=1e-9)


def test_single_mode_repeats_with_zero_mass():
    grid = np.linspace(0, 1, 501)
    p = _bump(grid, 0.4, 0.05)[None]
    modes, masses = top_k_modes(grid, p, 3, radius=0.1)
    np.testing.assert_allclose(modes[0, :, 0], 0.4, atol=1e-9)
    np.testing.assert_allclose(masses[0], [1.0, 0.0, 0.0], atol=1e-12)


def test_two_dimensional_weighted_points(rng):
    centres = np.array([[0.0, 0.0], [3.0, 1.0]])
    pts = np.concatenate([c + 0.1 * rng.normal(size=(200, 2)) for c in centres])
    w = np.r_[np.full(200, 0.25 / 200), np.full(200, 0.75 / 200)][None]
    modes, masses = top_k_modes(pts, w, 2, radius=0.5)
    np.testing.assert_allclose(masses[0], [0.75, 0.25], atol=1e-6)  # float32 sums
    # each mode is a point of its cluster (equal weights within a cluster)
    # (to float32 rounding of the support)
    assert np.min(np.abs(pts[200:] - modes[0, 0]).max(1)) < 1e-6
    assert np.min(np.abs(pts[:200] - modes[0, 1]).max(1)) < 1e-6


@pytest.mark.parametrize("kw", [dict(k=0, radius=0.1), dict(k=1, radius=0.0)])
def test_bad_arguments(kw):
    with pytest.raises(ValueError):
        top_k_modes(np.arange(3.0), np.ones((1, 3)), **kw)


def test_shape_mismatch():
    with pytest.raises(ValueError):
        top_k_modes(np.arange(3.0), np.ones((1, 4)), 1, 0.1)
