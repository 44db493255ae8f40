"""TGP-KL on the S-shape data: bayeskde against a plain NumPy/SciPy implementation.

Both sides fit the same model (gamma_x = 0.2, gamma_y = 20, ridge = 1e-4, the
original release's S-shape settings) on ``make_sshape(key(seed))`` and predict the
500 grid points. The peer is the original ``TGPTest.m`` loop in NumPy: per test
point u = K^-1 k_x and eta from one Cholesky factorisation, then
``scipy.optimize.minimize(method="BFGS")`` with the analytic gradient of the same
energy from the same linear-regression start. bayeskde runs ``TwinGP.predict``
(all points at once, compiled). Runs in float64. Prints one JSON line.

Run: ``python bench/tgp.py [--repeats 3] [--seed 0]``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import jax
import numpy as np
import scipy.linalg
import scipy.optimize

from bayeskde.datasets import make_sshape
from bayeskde.tgp import TwinGP

jax.config.update("jax_enable_x64", True)

GAMMA_X, GAMMA_Y, RIDGE = 0.2, 20.0, 1e-4


def peer_predict(X, Y, Z, y0):
    """Point-by-point TGP-KL with SciPy BFGS (the original TGPTest.m loop)."""
    n = len(X)
    K = np.exp(-GAMMA_X * (X[:, None, 0] - X[None, :, 0]) ** 2) + RIDGE * np.eye(n)
    G = np.exp(-GAMMA_Y * (Y[:, None, 0] - Y[None, :, 0]) ** 2) + RIDGE * np.eye(n)
    cK = scipy.linalg.cho_factor(K, lower=True)
    cG = scipy.linalg.cho_factor(G, lower=True)
    out = np.empty((len(Z), Y.shape[1]))
    for i, z in enumerate(Z):
        kx = np.exp(-GAMMA_X * (X[:, 0] - z[0]) ** 2)
        u = scipy.linalg.cho_solve(cK, kx)
        eta = 1.0 + RIDGE - kx @ u

        def energy(y, u=u, eta=eta):
            d = Y[:, 0] - y[0]
            ky = np.exp(-GAMMA_Y * d * d)
            v = scipy.linalg.cho_solve(cG, ky)
            s = 1.0 + RIDGE - ky @ v
            f = 1.0 + RIDGE - 2 * u @ ky - eta * np.log(s)
            dky = 2 * GAMMA_Y * d * ky  # d k_y / d y
            g = -2 * u @ dky + eta * 2 * (v @ dky) / s
            return f, np.array([g])

        out[i] = scipy.optimize.minimize(
            energy, y0[i], jac=True, method="BFGS", options={"gtol": 1e-6}
        ).x
    return out


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    d = make_sshape(jax.random.key(args.seed))
    X, Y, Z = d.x_train[:, None], d.t_train[:, None], d.x_test[:, None]
    tgp = TwinGP("kl", gamma_x=GAMMA_X, gamma_y=GAMMA_Y, ridge=RIDGE).fit(X, Y)
    t0 = time.perf_counter()
    ours = tgp.predict(Z)
    first = time.perf_counter() - t0
    times = []
    for _ in range(args.repeats):
        t0 = time.perf_counter()
        ours = tgp.predict(Z)
        times.append(time.perf_counter() - t0)
    y0 = np.asarray(tgp.init_weights_[0] + Z @ tgp.init_weights_[1:])
    peer_times = []
    for _ in range(args.repeats):
        t0 = time.perf_counter()
        peer = peer_predict(X, Y, Z, y0)
        peer_times.append(time.perf_counter() - t0)
    med, peer_med = statistics.median(times), statistics.median(peer_times)
    diff = np.abs(ours - peer)
    print(json.dumps({
        "bench": "tgp_sshape",
        "n_train": len(X),
        "n_test": len(Z),
        "bayeskde_s": med,
        "bayeskde_compile_s": first - med,
        "peer_s": peer_med,
        "speedup": peer_med / med,
        "speedup_incl_compile": peer_med / first,
        "mean_abs_diff": float(diff.mean()),
        "max_abs_diff": float(diff.max()),
        "n_points_diff_above_1e-3": int((diff > 1e-3).sum()),
        "mae_bayeskde": float(np.abs(ours[:, 0] - d.t_test).mean()),
        "mae_peer": float(np.abs(peer[:, 0] - d.t_test).mean()),
        "backend": jax.default_backend(),
        "repeats": args.repeats,
    }))


if __name__ == "__main__":
    main()
