"""Twin GPs at scale: blocked neighbour search against brute force, local models
without training Grams against global models on the neighbourhood, sharded
predictions on 8 fake devices against one device, and the float32 GP baseline
with jitter against float64."""

import textwrap
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from sklearn.kernel_ridge import KernelRidge

from bayeskde.tgp import (
    TwinGP,
    cholesky_with_jitter,
    nearest_neighbors,
    tgp_predict_sharded,
    weighted_knn_predict,
)
from bayeskde.tgp.baselines import _gp_predict
from tests.conftest import run_on_host_devices
from tests.helpers import X64, count_compilations

ATOL = 1e-8 if X64 else 2e-4


@pytest.mark.parametrize("block_size", [1, 4, 7, 50, 103, 4096, "tree"])
def test_blocked_search_equals_brute_force(rng, block_size):
    # "tree": scikit-learn's search (the CPU default) against the same oracle.
    method = "tree" if block_size == "tree" else "blocked"
    block_size = 7 if block_size == "tree" else block_size
    X = rng.normal(size=(103, 3))
    Q = rng.normal(size=(17, 3))
    d2_ref = ((Q[:, None] - X[None]) ** 2).sum(-1)
    for k in (1, 5, 9):
        d2, idx = nearest_neighbors(X, Q, k, block_size=block_size, method=method)
        ref = np.argsort(d2_ref, axis=1, kind="stable")[:, :k]
        np.testing.assert_array_equal(idx, ref)
        np.testing.assert_allclose(
            d2, np.take_along_axis(d2_ref, ref, 1), rtol=1e-10 if X64 else 1e-4,
            atol=1e-10 if X64 else 1e-5)
    # The blocked search returns the unblocked top_k (distances up to the
    # round-off of a differently blocked matrix product).
    full = nearest_neighbors(X, Q, 9, block_size=len(X), method="blocked")
    blocked = nearest_neighbors(X, Q, 9, block_size=block_size, method=method)
    np.testing.assert_array_equal(blocked[1], full[1])
    np.testing.assert_allclose(blocked[0], full[0], rtol=1e-12 if X64 else 1e-5)


@pytest.mark.parametrize("method", ["blocked", "tree"])
def test_search_ties_go_to_the_lower_index(method):
    X = np.array([[0.0], [1.0], [1.0], [-1.0], [1.0], [2.0], [0.0]])
    d2, idx = nearest_neighbors(X, np.array([[1.0]]), 5, block_size=2, method=method)
    assert idx.tolist() == [[1, 2, 4, 0, 5]]
    np.testing.assert_array_equal(d2, [[0.0, 0.0, 0.0, 1.0, 1.0]])


def test_search_rejects_an_unknown_method():
    with pytest.raises(ValueError, match="method must be one of"):
        nearest_neighbors(np.zeros((3, 1)), np.zeros((1, 1)), 2, method="kd")


def test_weighted_knn_blocked_equals_unblocked(rng):
    X, Y = rng.normal(size=(40, 2)), rng.normal(size=(40, 3))
    Z = rng.normal(size=(9, 2))
    np.testing.assert_allclose(
        weighted_knn_predict(X, Y, Z, n_neighbors=4, block_size=6),
        weighted_knn_predict(X, Y, Z, n_neighbors=4),
        rtol=1e-12 if X64 else 1e-5, atol=1e-12 if X64 else 1e-6)


def _data(rng, m=300):
    X = rng.uniform(-1, 1, size=(m, 2))
    Y = np.c_[np.sin(2 * X[:, 0]), X[:, 0] * X[:, 1]]
    return X, Y


@pytest.mark.parametrize("criterion", ["kl", "hsic"])
def test_local_model_equals_global_model_on_the_neighbourhood(rng, criterion):
    # The local model of a test point builds its Grams from its k neighbours
    # only (no training Gram is formed); a global TwinGP fitted on exactly those
    # k points, from the same start (the lowest-energy neighbour output), must
    # predict the same.
    X, Y = _data(rng)
    Z = rng.uniform(-0.8, 0.8, size=(3, 2))
    k = 40
    kw = dict(gamma_x=3.0, gamma_y=2.0, ridge=1e-2, init="neighbors",
              init_neighbors=5)
    loc = TwinGP(criterion, n_neighbors=k, search_block_size=64, **kw).fit(X, Y)
    assert loc.model_.K_in is None and loc.model_.K_out is None
    pred = loc.predict(Z)
    for z, p in zip(Z, pred, strict=True):
        idx = np.argsort(((X - z) ** 2).sum(1), kind="stable")[:k]
        glob = TwinGP(criterion, whiten_rtol=0.0, **kw).fit(X[idx], Y[idx])
        np.testing.assert_allclose(p, glob.predict(z[None])[0],
                                   atol=1e-6 if X64 else 3e-3)


def test_local_predict_compiles_once_per_shape(rng):
    X, Y = _data(rng, 120)
    tgp = TwinGP(gamma_x=3.0, gamma_y=2.0, ridge=1e-2, n_neighbors=20,
                 search_block_size=32).fit(X, Y)
    tgp.predict(rng.uniform(size=(5, 2)))
    with count_compilations() as compiles:
        tgp.predict(rng.uniform(size=(5, 2)))
    assert compiles.count == 0


def _shard_cases():
    """Fitted models and test points, the same in every process (fixed seed)."""
    rng = np.random.default_rng(1)
    X, Y = _data(rng, 60)
    Z = rng.uniform(-0.8, 0.8, size=(13, 2))  # 13 rows: padded to 16 on 8 devices
    kw = dict(gamma_x=1.5, gamma_y=2.0, ridge=1e-2)
    models = {
        "kl": TwinGP("kl", **kw),
        "hsic_best": TwinGP("hsic", **kw),
        "kl_local": TwinGP("kl", n_neighbors=20, search_block_size=16, **kw),
    }
    return {name: m.fit(X, Y) for name, m in models.items()}, Z


def _sharded_predictions():
    models, Z = _shard_cases()
    out = {name: tgp_predict_sharded(m, Z) for name, m in models.items()}
    out["shard_param"] = models["kl"].set_params(shard=True).predict(Z)
    out["devices"] = jax.device_count()
    return out


SCRIPT = textwrap.dedent("""
    import sys
    import numpy as np
    sys.path.insert(0, {root!r})
    from tests.tgp.test_scale import _sharded_predictions
    np.savez(sys.argv[1], **_sharded_predictions())
""")


@pytest.mark.slow
def test_sharded_predictions_on_eight_devices_equal_one(tmp_path):
    many = run_on_host_devices(SCRIPT, tmp_path / "out.npz")
    assert int(many["devices"]) == 8
    models, Z = _shard_cases()
    for name, m in models.items():
        np.testing.assert_allclose(many[name], m.predict(Z), rtol=ATOL, atol=ATOL,
                                   err_msg=name)
    np.testing.assert_allclose(many["shard_param"], many["kl"], rtol=0, atol=0)


def test_gp_float32_adds_jitter_and_stays_close_to_float64():
    # S-shape GP baseline (gamma 20, ridge 1e-5): in float32 the Cholesky factor
    # of K + 1e-5 I fails (the ridge is below round-off, eps N ~ 6e-5), so jitter
    # is added with a warning; the answer is finite and close to the float64
    # kernel ridge reference (measured: mean |diff| 0.009-0.010, MAE 0.1323 to
    # 0.1331 against 0.1337; a float32 ridge of 1e-5 is round-off, so closer
    # agreement is not possible).
    from bayeskde.datasets import make_sshape

    d = make_sshape(jax.random.key(0), 500)
    X, Y, Z = d.x_train[:, None], d.t_train[:, None], d.x_test[:, None]
    ref = KernelRidge(alpha=1e-5, kernel="rbf", gamma=20.0).fit(X, Y).predict(Z)
    f32 = [jnp.asarray(a, jnp.float32) for a in (X, Y, Z)]
    with warnings.catch_warnings(record=True):
        warnings.simplefilter("always")
        pred = np.asarray(_gp_predict(*f32, 20.0, 1e-5), np.float64)
    assert pred.dtype == np.float64 and np.all(np.isfinite(pred))
    assert np.mean(np.abs(pred - ref)) < 0.015
    mae = np.mean(np.abs(pred.ravel() - d.t_test))
    assert abs(mae - np.mean(np.abs(ref.ravel() - d.t_test))) < 0.0025


def test_cholesky_jitter_warns_and_raises():
    A = jnp.asarray([[1.0, 1.0], [1.0, 1.0 - 1e-3]])  # indefinite, eigenvalue < 0
    with pytest.warns(RuntimeWarning, match="jitter"):
        L = cholesky_with_jitter(A, "test matrix A")
    assert bool(jnp.all(jnp.isfinite(L)))
    with pytest.raises(np.linalg.LinAlgError, match="not positive definite"):
        cholesky_with_jitter(jnp.asarray([[-1e4, 0.0], [0.0, 1.0]]), "B")


def test_scale_bad_input(rng):
    X, Y = _data(rng, 20)
    with pytest.raises(ValueError, match="n_neighbors"):
        nearest_neighbors(X, X, 21)
    with pytest.raises(ValueError, match="features"):
        nearest_neighbors(X, X[:, :1], 3)
    with pytest.raises(ValueError, match="block_size"):
        nearest_neighbors(X, X, 3, block_size=0)
    with pytest.raises(ValueError, match="NaN"):
        nearest_neighbors(np.where(X > 0.9, np.nan, X), X, 3)
