"""Planar-arm pose from noisy markers: Twin GPs against GP and weighted k-NN.

A pose-like multi-output inverse problem generated in the repository
(:func:`bayeskde.datasets.make_arm_pose`), since HumanEva and Poser cannot be
downloaded: three joint angles (outputs) from the noisy 2-D positions of the
elbow and the tip of a planar three-link arm (inputs). The wrist is not
observed, so every marker set has two exact inverse poses (the wrist reflected
across the elbow-tip line, :func:`bayeskde.datasets.arm_mirror_pose`), and the
training data hold both.

Methods, each without and with a learned polynomial kernel transform (monomial
basis, degrees d1 = d2 = ``--degree``; alpha, beta from the HSIC C-matrix, seed
001 section 4):

* TGP-KL and TGP-HSIC (Bo and Sminchisescu 2010), global models;
* GP (kernel ridge) mean with the RBF input kernel, or its transform phi(K);
* weighted k-NN (inverse squared distance votes, ``WKNNRegressor``); with the
  transform the distance is the kernel-induced one, phi(1) + phi(1) - 2 phi(k),
  which for a monotone phi keeps the neighbours and changes only the weights.

Bandwidths by the median heuristic, gamma = 1 / (2 median^2), times ``--scale``
(default 4; the plain median heuristic gives over-smooth kernels here), ridge
1e-3. Errors, on the test set:

* ``angle_deg``: mean absolute per-joint angle error to the true pose (degrees,
  wrapped to [-180, 180));
* ``nearest_inverse_deg``: the same, to the nearer of the two exact inverses;
* ``reconstruction``: mean Euclidean distance between the markers of the
  predicted pose (forward map re-applied) and the observed markers; the noise
  floor, the distance between observed and noise-free markers, is printed too.

Run ``python models/pose_tgp.py`` (600 training, 300 test poses, a few minutes
of CPU) or ``--quick`` (200 training, 100 test). No published numbers exist for
this task.
"""

from __future__ import annotations

import numpy as np

# models/ is a folder of scripts, not a package: run them from anywhere.
from _common import Timer, enable_x64, parse_args, print_table, write_json

RIDGE = 1e-3


def _add_arguments(parser):
    parser.add_argument("--degree", type=int, default=3,
                        help="transform degrees d1 = d2 (default 3)")
    parser.add_argument("--scale", type=float, default=4.0,
                        help="multiplier of the median-heuristic gammas (default 4)")


def median_gamma(v: np.ndarray) -> float:
    """gamma = 1 / (2 median^2) over the distinct pairwise distances of ``v``."""
    v = np.asarray(v, dtype=np.float64).reshape(len(v), -1)
    d = np.sqrt(((v[:, None, :] - v[None, :, :]) ** 2).sum(-1))
    return 1.0 / (2.0 * float(np.median(d[np.triu_indices(len(v), 1)])) ** 2)


def _rbf(A, B, gamma):
    return np.exp(-gamma * ((A[:, None, :] - B[None, :, :]) ** 2).sum(-1))


def _wrap(a):
    return (a + np.pi) % (2 * np.pi) - np.pi


def errors(pred, data) -> dict:
    """Angle error (true pose and nearer inverse) and marker reconstruction error."""
    from bayeskde.datasets import arm_forward, arm_mirror_pose

    pred = np.asarray(pred, dtype=np.float64)
    e_true = np.abs(_wrap(pred - data.theta_test)).mean(1)
    e_mirror = np.abs(_wrap(pred - arm_mirror_pose(data.theta_test))).mean(1)
    rec = arm_forward(pred, data.link_lengths) - data.x_test
    return {
        "angle_deg": float(np.degrees(e_true.mean())),
        "nearest_inverse_deg": float(np.degrees(np.minimum(e_true, e_mirror).mean())),
        "reconstruction": float(np.linalg.norm(rec.reshape(-1, 2, 2), axis=-1).mean()),
    }


def gp_transformed(X, Y, Z, gamma, tr):
    """Kernel ridge mean with the input kernel phi(K) of a fitted transform."""
    import scipy.linalg

    K = np.asarray(tr.transform_input(_rbf(X, X, gamma)))
    k = np.asarray(tr.transform_input(_rbf(Z, X, gamma)))
    c = scipy.linalg.cho_factor(K + RIDGE * np.eye(len(X)), lower=True)
    return k @ scipy.linalg.cho_solve(c, Y)


def wknn_kernel(X, Y, Z, gamma, tr, k):
    """Weighted k-NN by the kernel-induced distance of the (transformed) kernel."""
    kz = _rbf(Z, X, gamma)
    if tr is None:
        d2 = 2.0 - 2.0 * kz
    else:
        one = float(np.asarray(tr.transform_input(np.ones(1)))[0])
        d2 = 2.0 * one - 2.0 * np.asarray(tr.transform_input(kz))
    d2 = np.maximum(d2, 0.0)
    idx = np.argsort(d2, axis=1)[:, :k]
    d = np.take_along_axis(d2, idx, 1)
    w = np.where(d[:, :1] <= 0.0, (d <= 0.0).astype(float), 1.0 / np.maximum(d, 1e-300))
    w /= w.sum(1, keepdims=True)
    return np.einsum("tk,tkd->td", w, Y[idx])


def main(argv=None) -> dict:
    args = parse_args("pose_tgp", __doc__.splitlines()[0], _add_arguments, argv)
    enable_x64()
    import jax

    from bayeskde.datasets import make_arm_pose
    from bayeskde.kernels import PolynomialKernelTransform
    from bayeskde.tgp import TwinGP, gp_predict, weighted_knn_predict

    timer = Timer()
    n_train, n_test = (200, 100) if args.quick else (600, 300)
    data = make_arm_pose(jax.random.key(args.seed), n_train, n_test)
    X, Y, Z = data.x_train, data.theta_train, data.x_test
    gx = args.scale * median_gamma(X)
    gy = args.scale * median_gamma(Y)
    floor = float(np.linalg.norm((data.x_test - data.x_test_clean).reshape(
        -1, 2, 2), axis=-1).mean())
    print(f"planar arm, seed {args.seed}: {n_train} training / {n_test} test poses, "
          f"marker noise {data.noise}; gamma_x {gx:.4g}, gamma_y {gy:.4g} "
          f"({args.scale:g} x median heuristic), ridge {RIDGE:g}")

    def transform():
        return PolynomialKernelTransform(
            basis="monomial", degree_x=args.degree, degree_y=args.degree)

    # The transform of the input kernel alone (GP, k-NN) is learned against the
    # output kernel like the TGP's.
    tr_in = transform().fit(_rbf(X, X, gx), _rbf(Y, Y, gy))
    results, seconds, learned = {}, {}, {}
    runs = {
        "tgp_kl": lambda t: TwinGP("kl", gamma_x=gx, gamma_y=gy, ridge=RIDGE,
                                   kernel_transform=t).fit(X, Y).predict(Z),
        "tgp_hsic": lambda t: TwinGP("hsic", gamma_x=gx, gamma_y=gy, ridge=RIDGE,
                                     kernel_transform=t).fit(X, Y).predict(Z),
        "gp": lambda t: (gp_predict(X, Y, Z, gamma=gx, ridge=RIDGE) if t is None
                         else gp_transformed(X, Y, Z, gx, tr_in)),
        "wknn_1": lambda t: (weighted_knn_predict(X, Y, Z, n_neighbors=1)
                             if t is None else wknn_kernel(X, Y, Z, gx, tr_in, 1)),
        "wknn_5": lambda t: (weighted_knn_predict(X, Y, Z, n_neighbors=5)
                             if t is None else wknn_kernel(X, Y, Z, gx, tr_in, 5)),
    }
    for name, run in runs.items():
        for variant, t in (("base", None), ("learned", transform())):
            t0 = timer()
            results[f"{name}/{variant}"] = errors(run(t), data)
            seconds[f"{name}/{variant}"] = timer() - t0
    learned = {"alpha": np.asarray(tr_in.alpha_).tolist(),
               "beta": np.asarray(tr_in.beta_).tolist(), "hsic": float(tr_in.hsic_)}

    rows = []
    for key, r in results.items():
        name, variant = key.split("/")
        rows.append([name, variant, f"{r['angle_deg']:.2f}",
                     f"{r['nearest_inverse_deg']:.2f}", f"{r['reconstruction']:.4f}"])
    print_table(
        f"Planar-arm pose, test errors (no published numbers; marker noise floor "
        f"{floor:.4f}; learned = monomial d1 = d2 = {args.degree})",
        ["method", "kernel", "angle err (deg)", "nearest inverse (deg)",
         "marker reconstruction"], rows)
    print(f"learned alpha {np.round(learned['alpha'], 3).tolist()}, "
          f"beta {np.round(learned['beta'], 3).tolist()}")
    payload = {
        "experiment": "pose_tgp",
        "settings": {"seed": args.seed, "n_train": n_train, "n_test": n_test,
                     "noise": data.noise, "gamma_x": gx, "gamma_y": gy,
                     "gamma_scale": args.scale, "ridge": RIDGE,
                     "transform": {"basis": "monomial", "degree_x": args.degree,
                                   "degree_y": args.degree},
                     "quick": args.quick, "dtype": "float64"},
        "noise_floor_reconstruction": floor,
        "errors": results,
        "learned_input_transform": learned,
        "method_seconds": seconds,
        "seconds": timer(),
    }
    write_json(args.out, payload)
    print(f"wrote {args.out} ({timer():.1f} s)")
    return payload


if __name__ == "__main__":
    main()
