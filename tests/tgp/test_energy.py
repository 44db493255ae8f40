"""The BFGS minimiser's dtype-aware stopping: float32 stops where float64 does."""

import jax
import numpy as np
import pytest

from bayeskde.tgp import TwinGP


def _fit_predict(dtype_x64, criterion):
    rng = np.random.default_rng(3)
    X = rng.uniform(-2, 2, size=(200, 1))
    Y = np.tanh(X) + 0.05 * rng.standard_normal((200, 1))
    Z = np.linspace(-1.8, 1.8, 64)[:, None]
    with jax.enable_x64(dtype_x64):
        tgp = TwinGP(criterion, gamma_x=2.0, gamma_y=20.0, ridge=1e-4, max_iter=100)
        sol = jax.tree.map(np.asarray, tgp.fit(X, Y).solve(Z))
        pred = sol.y
    return pred, sol


@pytest.fixture(scope="module", params=["kl", "hsic"])
def both(request):
    return _fit_predict(False, request.param), _fit_predict(True, request.param)


def test_float32_iterations_within_twice_float64(both):
    (p32, s32), (p64, s64) = both
    assert p32.dtype == np.float32 and p64.dtype == np.float64
    # float32 stops at its round-off floor (status 2) instead of max_iter.
    assert not np.any(s32.status == 1) and not np.any(s64.status == 1)
    assert s32.n_iter.mean() <= 2 * s64.n_iter.mean()
    assert s32.n_iter.max() <= 2 * s64.n_iter.max()


def test_float32_answers_close_to_float64(both):
    (p32, _), (p64, _) = both
    # sqrt(eps_32) ~ 3.5e-4: the minimiser of an energy known to eps is known
    # to about sqrt(eps) relative to the output scale (here 1).
    np.testing.assert_allclose(p32, p64, atol=2e-3)
