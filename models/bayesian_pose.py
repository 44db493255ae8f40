"""Planar-arm pose: the generative inverse model's hypotheses against baselines.

The arm task of ``models/pose_tgp.py`` (600 training, 300 test poses; three
joint angles from the noisy elbow and tip markers; two exact inverse poses per
marker set). The generative inverse model (:mod:`bayeskde.models.inverse_gp`)
puts a GP on the single-valued forward kinematics, angles -> markers, learned
from all 600 poses by NUTS (4 chains; rate and transform degree summed out on
their grid), and inverts it by Bayes' rule with the training poses as
importance proposals (their empirical distribution is the prior on poses).
Its top-2 modes with masses are the pose hypotheses.

Printed: the angle error (mean absolute per-joint error, degrees) and the
marker reconstruction error of the top-mass mode, the best-of-2 angle error,
and the single-prediction errors of the baselines of ``pose_tgp.py`` (TGP-KL,
GP mean, weighted 1-NN and 5-NN, median-heuristic bandwidths x 4).

Run ``python models/bayesian_pose.py`` (``--seed``), ``--quick`` for 120 / 60.
"""

from __future__ import annotations

import numpy as np
from _common import Timer, enable_x64, parse_args, print_table, write_json
from pose_tgp import RIDGE, _wrap, errors, median_gamma


def main(argv=None) -> dict:
    args = parse_args("bayesian_pose", __doc__.splitlines()[0], None, argv)
    enable_x64()
    import jax

    from bayeskde.datasets import make_arm_pose
    from bayeskde.learn import fit_inverse_gp, inverse_gp_predictive
    from bayeskde.tgp import TwinGP, gp_predict, weighted_knn_predict

    timer = Timer()
    n_train, n_test = (120, 60) if args.quick else (600, 300)
    data = make_arm_pose(jax.random.key(args.seed), n_train, n_test)
    X, Y, Z = data.x_train, data.theta_train, data.x_test
    gx, gy = 4 * median_gamma(X), 4 * median_gamma(Y)
    res = {
        "tgp_kl": errors(TwinGP("kl", gamma_x=gx, gamma_y=gy, ridge=RIDGE)
                         .fit(X, Y).predict(Z), data),
        "gp": errors(gp_predict(X, Y, Z, gamma=gx, ridge=RIDGE), data),
        "wknn_1": errors(weighted_knn_predict(X, Y, Z, n_neighbors=1), data),
        "wknn_5": errors(weighted_knn_predict(X, Y, Z, n_neighbors=5), data),
    }
    fit = fit_inverse_gp(jax.random.key(args.seed + 1), X, Y,
                         num_warmup=50 if args.quick else 500,
                         num_samples=50 if args.quick else 500,
                         progress_bar=False, n_replicates=10)
    pr = inverse_gp_predictive(fit, Z, n_draws=20, k=2, mode_radius=0.3)
    top = pr.modes[:, 0]
    inv = errors(top, data)
    per = [np.abs(_wrap(pr.modes[:, j] - data.theta_test)).mean(1) for j in range(2)]
    inv["best_of_2_deg"] = float(np.degrees(np.minimum(*per).mean()))
    inv["second_mode_mass"] = float(pr.mode_masses[:, 1].mean())
    res["inverse_average"] = inv
    rep = fit.report
    rows = [[k, f"{v['angle_deg']:.2f}", f"{v['nearest_inverse_deg']:.2f}",
             f"{v['reconstruction']:.4f}",
             f"{v['best_of_2_deg']:.2f}" if "best_of_2_deg" in v else "-"]
            for k, v in res.items()]
    print_table(f"arm pose, seed {args.seed} ({n_train} / {n_test})",
                ["method", "angle err (deg)", "nearest inverse (deg)",
                 "marker reconstruction", "best of 2 (deg)"], rows)
    print(f"inverse model: MAP {fit.map_params}; R-hat {rep.max_rhat:.4f}, bulk "
          f"ESS {rep.min_ess_bulk:.0f}, tail ESS {rep.min_ess_tail:.0f}, "
          f"{rep.divergences} divergences; {timer():.0f} s")
    payload = {"errors": res, "map_params": fit.map_params,
               "convergence": rep._asdict(), "seconds": timer()}
    write_json(args.out, payload)
    return payload


if __name__ == "__main__":
    main()
