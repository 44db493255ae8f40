"""Prior-predictive simulators of the NumPyro models, for calibration checks.

Simulation-based calibration (:func:`bayeskde.infer.sbc_rank_test`) draws
parameters from the prior and data from the likelihood; this module does that
for :func:`bayeskde.models.bayesian_hmm_model` (the inverse model simulates
through its own observed site: ``numpyro.infer.Predictive`` on
:func:`bayeskde.inverse.inverse_gp_model`).
"""

from __future__ import annotations

import numpy as np

from .._validation import check_integer

__all__ = ["simulate_categorical_hmm"]


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
