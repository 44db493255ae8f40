"""Prior-predictive simulators of the NumPyro models, for calibration checks.

Simulation-based calibration (:func:`bayeskde.infer.sbc_rank_test`) draws
parameters from the prior and data from the likelihood; these functions do that
for the generative parts of :func:`bayeskde.models.kernel_hyper_model` and
:func:`bayeskde.models.bayesian_hmm_model`.
"""

from __future__ import annotations

import jax
import numpy as np

from .._validation import check_integer

__all__ = ["simulate_kernel_gp_part", "simulate_categorical_hmm"]


def simulate_kernel_gp_part(key: jax.Array, Dx2, prior, R: int):
    """Prior-predictive draws of the exact (GP) part of the kernel model.

    With d1 = d2 = 1 and no KL factor, :func:`bayeskde.models.kernel_hyper_model`
    is generative: log gamma_x, log r, log a^2 from their Normal priors, then one
    output column y ~ N(0, a^2 (exp(-gamma_x Dx2) + r I)) (eq. (A) of that module).

    Returns:
        ``(theta, Y)``: a dict of ``(R,)`` log-parameter draws (``gamma_x``,
        ``ridge``, ``amplitude``) and ``(R, m, 1)`` outputs. O(R m^3).
    """
    R = check_integer(R, "R", minimum=1)
    Dx2 = np.asarray(Dx2, float)
    names = ("gamma_x", "ridge", "amplitude")
    k_theta, k_y = jax.random.split(key)
    theta = {
        n: getattr(prior, f"log_{n}_loc") + getattr(prior, f"log_{n}_scale")
        * np.asarray(jax.random.normal(jax.random.fold_in(k_theta, i), (R,)))
        for i, n in enumerate(names)
    }
    m = Dx2.shape[0]
    z = np.asarray(jax.random.normal(k_y, (R, m)))
    Y = np.empty((R, m, 1))
    for r in range(R):
        S = np.exp(theta["amplitude"][r]) * (
            np.exp(-np.exp(theta["gamma_x"][r]) * Dx2)
            + np.exp(theta["ridge"][r]) * np.eye(m))
        Y[r, :, 0] = np.linalg.cholesky(S) @ z[r]
    return theta, Y


def simulate_categorical_hmm(rng: np.random.Generator, emission_concentration,
                             R: int, n_seq: int, length: int):
    """Prior-predictive draws of a 2-state, 2-symbol Bayesian HMM (model c).

    pi ~ Dir(1, 1), each transition row ~ Dir(1, 1), emission row i ~
    Dir(``emission_concentration[i]``); then ``n_seq`` sequences of ``length``
    symbols per replication.

    Returns:
        ``(truths, obs)``: ``(R, 5)`` = (pi_0, A_00, A_11, B_00, B_11) and
        ``(R, n_seq, length)`` int32 symbols. O(R n_seq length).
    """
    conc = np.asarray(emission_concentration, float)
    truths, data = [], []
    for _ in range(check_integer(R, "R", minimum=1)):
        pi = rng.dirichlet(np.ones(2))
        A = rng.dirichlet(np.ones(2), size=2)
        B = np.stack([rng.dirichlet(conc[i]) for i in range(2)])
        truths.append([pi[0], A[0, 0], A[1, 1], B[0, 0], B[1, 1]])
        obs = np.zeros((n_seq, length), np.int32)
        for b in range(n_seq):
            q = rng.choice(2, p=pi)
            for t in range(length):
                obs[b, t] = rng.choice(2, p=B[q])
                q = rng.choice(2, p=A[q])
        data.append(obs)
    return np.array(truths), np.stack(data)
