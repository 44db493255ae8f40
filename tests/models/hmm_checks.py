"""Shared constructions of the HMM tests (tests/models/test_hmm*.py)."""

import numpy as np


def random_hmm(rng, N, K=None, D=None):
    """A random HMM of N states: initial probabilities, transition matrix and
    categorical (``K`` symbols) or diagonal Gaussian (``D`` dimensions)
    emission parameters."""
    pi = rng.dirichlet(np.ones(N))
    A = rng.dirichlet(np.ones(N), size=N)
    if K is not None:
        return pi, A, {"emission_probs": rng.dirichlet(np.ones(K), size=N)}
    return pi, A, {"emission_mean": rng.normal(size=(N, D)),
                   "emission_var": rng.uniform(0.3, 2.0, size=(N, D))}
