"""Sharded execution (bayeskde.distributed): two processes joined by
``jax.distributed``, four CPU devices each, equal one device.

JAX is already initialised with one CPU device in the pytest process, so the
eight-device run happens in two subprocesses started with
``XLA_FLAGS=--xla_force_host_platform_device_count=4``, each calling
:func:`initialize_distributed` with a local coordinator, as the module
docstring's launch describes for real hosts; they write their results to
``.npz`` files that this process compares with the single-device results. (One
run covers what a single eight-device process and a two-process run of two
devices each used to: rows sharded over several devices of one process and
over processes.)
"""

import functools
import os
import socket
import subprocess
import sys
import textwrap

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from sklearn.metrics.pairwise import rbf_kernel

from bayeskde.distributed import (
    device_mesh,
    initialize_distributed,
    sharded_batch_map,
    sharded_sum,
)
from bayeskde.hmm import forward_backward, sharded_hmm_posteriors
from bayeskde.inverse.kernel import hsgp_eigenfunctions
from bayeskde.inverse.lowrank import lowrank_statistics
from bayeskde.lowrank import falkon, krr_predict, sharded_gram
from tests.conftest import ROOT
from tests.helpers import X64

TOL = 1e-12 if X64 else 1e-5


def _problem():
    """The same inputs in both processes (NumPy generator, fixed seed)."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(37, 3))  # 37 rows: padded to 40 on 8 devices
    n_states = 3
    log_initial = np.log(np.full(n_states, 1.0 / n_states))
    log_transition = np.log(rng.dirichlet(np.ones(n_states), n_states))
    log_lik = rng.normal(size=(11, 6, n_states))
    mask = np.ones((11, 6), bool)
    mask[3, 4:] = False
    return X, log_initial, log_transition, log_lik, mask


#: The inverse model's low-rank statistics (float64 at any precision).
STATS = ("hsgp_gram", "hsgp_cross", "hsgp_x_sq", "nys_gram", "nys_cross")


def _stats_problem():
    rng = np.random.default_rng(1)
    Y = rng.uniform(size=(101, 2))  # chunks of 5 rows a device: padded last chunk
    X = rng.normal(size=(101, 2))
    return Y, X - X.mean(0), np.array([2.0, 20.0])


def _lowrank_stats(mesh):
    Y, X, g = _stats_problem()
    key = jax.random.key(0)
    hs = lowrank_statistics(key, Y[:, :1], X, g, 2, 12, "hsgp", mesh=mesh,
                            chunk_rows=5)
    ny = lowrank_statistics(key, Y, X, g, 2, 6, "nystroem", mesh=mesh, chunk_rows=5)
    return {"hsgp_gram": hs.gram, "hsgp_cross": hs.cross, "hsgp_x_sq": hs.x_sq,
            "nys_gram": ny.gram, "nys_cross": ny.cross,
            "hsgp_box": (hs.box_centre, hs.box_half)}


def _predict(centers, coef, X):
    return jnp.exp(-0.5 * jnp.sum((X[:, None, :] - centers[None]) ** 2, -1)) @ coef


def _host(x):
    """A (possibly multi-process) global array as one NumPy array on this host."""
    if jax.process_count() > 1:
        from jax.experimental import multihost_utils

        x = multihost_utils.process_allgather(x, tiled=True)
    return np.asarray(x)


def _compute():
    """Everything compared across device counts (also run in the subprocesses)."""
    X, li, lt, ll, mask = _problem()
    mesh = device_mesh()
    K = sharded_gram("rbf", X, params={"gamma": 0.5}, mesh=mesh, block_size=3)
    K40 = sharded_gram("rbf", np.vstack([X, X[:3]]), X[:5], params={"gamma": 0.5})
    post = sharded_hmm_posteriors(li, lt, ll, mask=mask, mesh=mesh)
    fit = falkon("rbf", X, np.sin(X[:, :2]), X[:8], 1e-3, params={"gamma": 0.5})
    pred = sharded_batch_map(_predict, X, broadcast=(fit.centers, fit.coef))
    return {
        "K": _host(K),
        "K40": _host(K40),
        "K40_shards": len(K40.sharding.device_set),
        "gamma": _host(post.gamma),
        "xi": _host(post.xi),
        "loglik": _host(post.log_likelihood),
        "pred": _host(pred),
        "devices": jax.device_count(),
        **_lowrank_stats(mesh),
    }


@functools.lru_cache(maxsize=1)
def _one_device():
    """:func:`_compute` in this (one-device) process, once for the tests."""
    return _compute()


MULTIHOST = textwrap.dedent("""
    import sys
    import numpy as np
    sys.path.insert(0, {root!r})
    from bayeskde.distributed import initialize_distributed
    info = initialize_distributed("localhost:" + sys.argv[3], num_processes=2,
                                  process_id=int(sys.argv[2]))
    from tests.test_distributed import _compute
    from bayeskde.infer.samplers import _chain_method
    out = _compute()
    out.update(info)
    out["chain_method"] = _chain_method(4)
    np.savez(sys.argv[1], **out)
""")


# two JAX processes started and compiled (about 90 s); the one-process sharded maps stay
# in the default run
@pytest.mark.slow
def test_two_processes_of_four_devices_equal_one(tmp_path):
    """Eight devices in two processes (four each) give the one-device numbers:
    rows spread over every device of both processes (37 padded to 40), the
    HMM posteriors, Falkon's predictions and the low-rank statistics."""
    with socket.socket() as sock:  # a free port for the coordinator
        sock.bind(("localhost", 0))
        port = str(sock.getsockname()[1])
    # The children compile with this process's options (tests/conftest.py), so
    # both sides run the same programs.
    env = {**os.environ, "XLA_FLAGS": f"{os.environ.get('XLA_FLAGS', '')} "
                                      "--xla_force_host_platform_device_count=4",
           "JAX_PLATFORMS": "cpu", "JAX_ENABLE_X64": "1" if X64 else "0"}
    procs = [subprocess.Popen(
        [sys.executable, "-c", MULTIHOST.format(root=ROOT),
         str(tmp_path / f"p{rank}.npz"), str(rank), port],
        env=env, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for rank in (0, 1)]
    try:
        logs = [p.communicate(timeout=300) for p in procs]
    finally:
        for p in procs:
            p.kill()
    for p, (_, err) in zip(procs, logs, strict=True):
        assert p.returncode == 0, err[-3000:]
    one = _one_device()
    for rank in (0, 1):
        out = np.load(tmp_path / f"p{rank}.npz")
        assert int(out["process_index"]) == rank and int(out["process_count"]) == 2
        assert int(out["device_count"]) == 8 and int(out["local_device_count"]) == 4
        assert int(out["devices"]) == 8 and one["devices"] == 1
        assert int(out["K40_shards"]) == 8  # rows spread over both processes
        assert str(out["chain_method"]) == "parallel"  # 4 NUTS chains, 4 devices
        for name in ("K", "K40", "gamma", "xi", "loglik", "pred"):
            np.testing.assert_allclose(out[name], one[name], rtol=TOL, atol=TOL,
                                       err_msg=f"process {rank}: {name}")
        for name in STATS:
            np.testing.assert_allclose(out[name], one[name], rtol=1e-12,
                                       atol=1e-12, err_msg=f"process {rank}: {name}")


def test_single_device_oracles():
    X, li, lt, ll, mask = _problem()
    out = _one_device()
    np.testing.assert_allclose(out["K"], rbf_kernel(X, gamma=0.5), atol=10 * TOL)
    ref = jax.vmap(lambda a, m: forward_backward(li, lt, a, mask=m))(
        jnp.asarray(ll), jnp.asarray(mask))
    np.testing.assert_allclose(out["gamma"], ref.gamma, atol=10 * TOL)
    np.testing.assert_allclose(out["loglik"], ref.log_likelihood, rtol=10 * TOL)
    fit = falkon("rbf", X, np.sin(X[:, :2]), X[:8], 1e-3, params={"gamma": 0.5})
    np.testing.assert_allclose(
        out["pred"], krr_predict("rbf", fit, X, params={"gamma": 0.5}),
        atol=10 * TOL)
    # the streamed statistics against Psi^T Psi, Psi^T X formed whole
    Y, Xs, _ = _stats_problem()
    with jax.enable_x64(True):
        Psi = np.asarray(hsgp_eigenfunctions(jnp.asarray(Y[:, 0]), *out["hsgp_box"],
                                             12))
    np.testing.assert_allclose(out["hsgp_gram"], Psi.T @ Psi, rtol=1e-12,
                               atol=1e-12)
    np.testing.assert_allclose(out["hsgp_cross"], Psi.T @ Xs, rtol=1e-12,
                               atol=1e-12)
    np.testing.assert_allclose(out["hsgp_x_sq"], np.sum(Xs**2), rtol=1e-12)


def test_bad_input():
    X, li, lt, ll, mask = _problem()
    with pytest.raises(ValueError, match="at least one array"):
        sharded_batch_map(jnp.sin)
    with pytest.raises(ValueError, match="leading batch length"):
        sharded_batch_map(jnp.add, np.ones(3), np.ones(4))
    with pytest.raises(ValueError, match="devices is empty"):
        device_mesh([])
    with pytest.raises(ValueError, match="NaN"):
        sharded_gram("rbf", np.full((3, 2), np.nan))
    with pytest.raises(ValueError, match="kernel"):
        sharded_gram("string", X)
    with pytest.raises(ValueError, match="block_size"):
        sharded_gram("rbf", X, block_size=0)
    with pytest.raises(ValueError, match=r"\(B, T, N\)"):
        sharded_hmm_posteriors(li, lt, ll[0])
    with pytest.raises(ValueError, match="mask"):
        sharded_hmm_posteriors(li, lt, ll, mask=mask[:, :3])
    with pytest.raises(ValueError, match="NaN"):
        sharded_hmm_posteriors(li, lt, np.full_like(ll, np.nan))
    with pytest.raises(ValueError):
        sharded_hmm_posteriors(li + 1.0, lt, ll)  # probabilities not summing to 1
    with pytest.raises(ValueError, match="at least one array"):
        sharded_sum(jnp.sum)
    with pytest.raises(ValueError, match="leading batch length"):
        sharded_sum(jnp.add, np.ones(3), np.ones(4))
    with pytest.raises(ValueError, match="chunk_rows"):
        sharded_sum(jnp.add, np.ones(3), chunk_rows=0)
    with pytest.raises(ValueError, match="num_processes"):
        initialize_distributed("localhost:1", num_processes=0, process_id=0)
    with pytest.raises(ValueError, match="process_id"):
        initialize_distributed("localhost:1", num_processes=2, process_id=2)
