"""Why the Gaussian evidences of the Bayesian KDE fail on digits: the measurements.

Reproduces the numbers in the docstring of :mod:`bayeskde.models.kde`, on the
protocol of ``models/bayesian_kde_digits.py`` (exact posteriors on the paper's width
grid, no MCMC):

1. per component, the scale-free log evidence at the narrowest grid width minus at
   CV's width, by eigenvalue rank (outer fold 0);
2. two per-component Gaussian models, both exact by quadrature on log grids:
   ``signal``: t_j ~ N(0, b_j K_g + s^2 I) (b_j per component, one noise s^2), and
   ``ridge``: t_j ~ N(0, a_j^2 (K_g + rho_j I)) (a_j integrated out as in the
   scale-free evidence, rho_j = m gamma_j per component); their model-averaged
   KDE (posterior mean of each coordinate) against 5-fold CV, per outer fold.

Run ``python models/bayesian_kde_diagnosis.py [--seed 0] [--folds 5] [--quick]
[--out DIR]`` (~15 s; ``--quick``: one fold); writes
``DIR/bayesian_kde_diagnosis.json``.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
from _common import enable_x64, write_json

NAME = "bayesian_kde_diagnosis"


def _log_normal_table(s, W2, log_b, log_s2):
    """(G, n_s2, p, n_b): log N(t_j; 0, b K_g + s^2 I) from the spectra."""
    import jax
    import jax.numpy as jnp

    m = s.shape[1]

    def one(ls2):
        d = jnp.exp(log_b)[None, None, :] * s[:, :, None] + jnp.exp(ls2)
        q = jnp.einsum("grp,grb->gpb", W2, 1.0 / d)
        logdet = jnp.sum(jnp.log(d), axis=1)
        return -0.5 * (logdet[:, None, :] + q + m * jnp.log(2 * jnp.pi))

    return np.asarray(jax.lax.map(one, jnp.asarray(log_s2))).transpose(1, 0, 2, 3)


def _scale_free_table(s, W2, log_rho):
    """(G, 1, p, n_rho): scale-free log evidence of t_j with C = K_g + rho I."""
    m = s.shape[1]
    d = s[:, :, None] + np.exp(log_rho)[None, None, :]
    q = np.einsum("grp,grb->gpb", W2, 1.0 / d)
    return (-0.5 * np.sum(np.log(d), axis=1)[:, None, :]
            - (m / 2) * np.log(q / 2))[:, None]


def _average(tab, ridge_of, s, U, W, K_te, T, loss, train, test):
    """Posterior (uniform priors on the grids) and its model-averaged pre-images."""
    from scipy.special import logsumexp

    comp = logsumexp(tab, axis=3)  # (G, n_s2, p): b_j or rho_j summed out
    lj = comp.sum(2)
    post = np.exp(lj - logsumexp(lj))  # (G, n_s2)
    wb = np.exp(tab - comp[..., None])  # (G, n_s2, p, n_b)
    F = 0.0
    for g in np.flatnonzero(post.sum(1) > 1e-8):
        inv = 1.0 / (s[g][:, None, None] + ridge_of[None])  # (r, n_s2, n_b)
        c = np.einsum("sjb,isb,s->ij", wb[g], inv, post[g])
        F = F + (K_te[g] @ U[g]) @ (c * W[g])
    t2 = np.sum(T * T, axis=1)
    pred = train[np.argmin(t2[None, :] - 2.0 * F @ T.T, axis=1)]
    return float(np.mean(loss[test, pred])), post.sum(1)


def main(argv=None):
    from bayesian_kde_digits import cv_fold, digits_task, output_coordinates

    from bayeskde.models import kde_spectra

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--folds", type=int, default=5)
    ap.add_argument("--quick", action="store_true", help="one outer fold")
    ap.add_argument("--out", type=Path, default=Path("results") / NAME)
    args = ap.parse_args(argv)
    if args.quick:
        args.folds = 1
    votes = {}
    task = digits_task(args)
    L, loss = task["L"], task["loss"]
    rows = []
    for f, (K_grid, sigmas, train, test) in enumerate(task["folds"][:args.folds]):
        cv = cv_fold(K_grid, sigmas, train, test, L, loss)
        T, ev = output_coordinates(L[np.ix_(train, train)])
        m = T.shape[0]
        sp = kde_spectra(K_grid[:, train][:, :, train], T, sigmas)
        s, U = np.asarray(sp.eigenvalues), np.asarray(sp.eigenvectors)
        W = np.asarray(sp.coords)
        K_te = K_grid[:, test][:, :, train]
        gcv = int(np.argmin(np.abs(sigmas - cv["sigma"])))
        if f == 0:
            for ridge in (1e-3, 1e-2):
                ev_j = _scale_free_table(s, W * W, np.log([m * ridge]))[:, 0, :, 0]
                diff = ev_j[0] - ev_j[gcv]
                votes[f"ridge_{ridge:g}"] = diff.tolist()
                parts = [f"{lo}-{hi}: {diff[lo:hi].sum():+.0f} nats, "
                         f"{np.mean(diff[lo:hi] > 0):.2f} favour narrow"
                         for lo, hi in ((0, 10), (10, 50), (50, 100), (100, len(ev)))]
                print(f"fold 0, ridge {ridge:g}: scale-free evidence at sigma "
                      f"{sigmas[0]:.3g} minus {sigmas[gcv]:.3g}, components "
                      + "; ".join(parts), flush=True)
        v = ev.max() / m
        log_b = np.linspace(np.log(v) - 18, np.log(v) + 2, 48)
        log_s2 = np.linspace(np.log(v) - 18, np.log(v) + 2, 81)
        tab = _log_normal_table(s, W * W, log_b, log_s2)
        sig = _average(tab, np.exp(log_s2[:, None] - log_b[None, :]), s, U, W, K_te,
                       T, loss, train, test)
        log_rho = np.log(m) + np.linspace(np.log(1e-8), np.log(1e3), 48)
        tab = _scale_free_table(s, W * W, log_rho)
        rid = _average(tab, np.exp(log_rho)[None, :], s, U, W, K_te, T, loss, train,
                       test)
        rows.append((cv["loss"], sig[0], rid[0]))
        print(f"fold {f}: CV {cv['loss']:.4f} (sigma {cv['sigma']:.3g}); per-component "
              f"signal {sig[0]:.4f} (P(sigma) {np.round(sig[1], 2).tolist()}); "
              f"per-component ridge {rid[0]:.4f} (P(sigma) "
              f"{np.round(rid[1], 2).tolist()})", flush=True)
    r = np.array(rows)
    print("mean over folds: CV {:.4f}, per-component signal {:.4f}, per-component "
          "ridge {:.4f}".format(*r.mean(0)))
    args.out.mkdir(parents=True, exist_ok=True)
    payload = {"seed": args.seed, "folds": len(rows),
               "loss": {"cv": r[:, 0].tolist(),
                        "per_component_signal": r[:, 1].tolist(),
                        "per_component_ridge": r[:, 2].tolist()},
               "fold0_narrow_minus_cv_width_log_evidence_per_component": votes}
    write_json(args.out / f"{NAME}.json", payload)
    return payload


if __name__ == "__main__":
    enable_x64()
    main()
