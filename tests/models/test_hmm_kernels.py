"""Tests of the posterior-averaged mean-map kernels of the Bayesian HMM
(split from test_hmm.py): against the EM-layer kernels of
:mod:`bayeskde.meanmap` with identical draws, a time-domain double sum (eq. 31)
for the averaged embeddings, label switching, and recompilation."""


import jax
import jax.numpy as jnp
import numpy as np
import pytest

from bayeskde.hmm import (
    CategoricalEmission,
    GaussianEmission,
    HMMParams,
    batch_posteriors,
    pad_sequences,
)
from bayeskde.meanmap import (
    LatentMeanMapKernel,
    adapt_hmms,
    hmm_log_kernel_gram,
    log_kernel_normalize,
)
from bayeskde.models import hmm_relabel as draws_module
from bayeskde.models import (
    posterior_generative_mean_map_gram,
    posterior_latent_mean_map_gram,
    relabel_draws,
    relabel_samples,
)
from tests.helpers import X64, count_compilations
from tests.models.hmm_checks import random_hmm

# ---------------------------------------------------------------- kernels


def _categorical_params(rng, N=3, K=4):
    pi, A, em = random_hmm(rng, N, K=K)
    dt = jnp.zeros(()).dtype
    return HMMParams(jnp.asarray(np.log(pi), dt), jnp.asarray(np.log(A), dt),
                     CategoricalEmission(jnp.asarray(np.log(em["emission_probs"]),
                                                     dt)))


def _gaussian_params(rng, N=3, D=2):
    pi, A, em = random_hmm(rng, N, D=D)
    dt = jnp.zeros(()).dtype
    return HMMParams(jnp.asarray(np.log(pi), dt), jnp.asarray(np.log(A), dt),
                     GaussianEmission(jnp.asarray(em["emission_mean"], dt),
                                      jnp.asarray(em["emission_var"], dt)))


def _stack(params_list):
    return jax.tree.map(lambda *a: jnp.stack(a), *params_list)


def _sequences(rng, emission, n, lo=2, hi=9):
    # Every call pads to T_max = 8 (a sequence of length 8 first), so the kernels
    # compile once per set size across the tests below.
    lens = [hi - 1] + list(rng.integers(lo, hi, size=n - 1))
    if emission == "categorical":
        return [rng.integers(0, 4, size=t) for t in lens]
    return [rng.normal(size=(t, 2)) for t in lens]


def _params(rng, emission):
    return (_categorical_params(rng) if emission == "categorical"
            else _gaussian_params(rng))


def _psd(K, rel):
    K = np.asarray(K, np.float64)
    np.testing.assert_allclose(K, K.T, rtol=rel, atol=rel * np.abs(K).max())
    assert np.linalg.eigvalsh(K).min() > -rel * np.abs(K).max()


_REL = 1e-9 if X64 else 5e-5
_KW = dict(lam=0.7, gamma=0.5, chunk=2)  # chunk 2 of 3 draws: padded chunks


@pytest.mark.parametrize(("emission", "average"),
                         [("categorical", "features"), ("gaussian", "kernel")])
def test_posterior_lmmk_with_identical_draws_equals_em_kernel(emission, average,
                                                              rng):
    theta = _params(rng, emission)
    A = _sequences(rng, emission, 6)
    B = _sequences(rng, emission, 4)
    draws = _stack([theta] * 3)
    lmmk = LatentMeanMapKernel(3, emission, lam=0.7, key=jax.random.key(0),
                               gamma=0.5).fit(None, params=theta)
    K = posterior_latent_mean_map_gram(draws, A, average=average, **_KW)
    np.testing.assert_allclose(np.asarray(K), np.asarray(lmmk.gram(A)), rtol=_REL)
    _psd(K, _REL)
    KB = posterior_latent_mean_map_gram(draws, A, B, average=average, **_KW)
    np.testing.assert_allclose(np.asarray(KB), np.asarray(lmmk.gram(A, B)),
                               rtol=_REL)


def _eq31_oracle(draws, seqs, lam, gamma, symbol):
    """Averaged-embedding LMMK by the double sums over time of eqs. (29)/(31)
    and (32), from gamma and xi averaged over draws (NumPy, float64)."""
    padded, lengths = pad_sequences(seqs)
    posts = [batch_posteriors(jax.tree.map(lambda a, s=s: a[s], draws), padded,
                              lengths) for s in range(draws.log_initial.shape[0])]
    g = np.mean([np.asarray(p.gamma, np.float64) for p in posts], 0)
    xi = np.mean([np.asarray(p.xi, np.float64) for p in posts], 0)
    N = g.shape[-1]
    Ln = np.where(np.eye(N) > 0, 1.0, np.exp(-lam))
    n = len(seqs)
    K = np.zeros((n, n))
    for a in range(n):
        for b in range(n):
            xa, xb = np.asarray(seqs[a], np.float64), np.asarray(seqs[b], np.float64)
            ta, tb = len(xa), len(xb)
            if symbol:
                k = np.where(xa[:, None] == xb[None, :], 1.0, np.exp(-lam))
            else:
                k = np.exp(-gamma * ((xa[:, None] - xb[None]) ** 2).sum(-1))
            K[a, b] = np.sum(k * (g[a, :ta] @ Ln @ g[b, :tb].T)) / (ta * tb)
            qa, qb = xi[a] / max(ta - 1, 1), xi[b] / max(tb - 1, 1)
            K[a, b] += np.sum(qa * (Ln @ qb @ Ln))
    return K


@pytest.mark.parametrize("emission", ["categorical", "gaussian"])
def test_posterior_lmmk_averages_embeddings_and_kernels(emission, rng):
    thetas = [_params(rng, emission) for _ in range(3)]
    draws = _stack(thetas)
    seqs = _sequences(rng, emission, 6)
    # features: inner products of the averaged embeddings (independent oracle)
    K = posterior_latent_mean_map_gram(draws, seqs, relabel=False, **_KW)
    ref = _eq31_oracle(draws, seqs, 0.7, 0.5, emission == "categorical")
    np.testing.assert_allclose(np.asarray(K), ref, rtol=_REL)
    _psd(K, _REL)
    # kernel: the mean of the per-draw EM-layer kernels
    Kk = posterior_latent_mean_map_gram(draws, seqs, average="kernel", **_KW)
    per = [np.asarray(LatentMeanMapKernel(3, emission, lam=0.7, gamma=0.5,
                                          key=jax.random.key(0))
                      .fit(None, params=t).gram(seqs)) for t in thetas]
    np.testing.assert_allclose(np.asarray(Kk), np.mean(per, 0), rtol=_REL)
    _psd(Kk, _REL)
    # Jensen: the kernel average adds the embeddings' posterior variance
    assert np.all(np.diag(np.asarray(Kk)) >= np.diag(np.asarray(K)) * (1 - _REL))


def test_lmmk_is_invariant_to_label_switching(rng):
    theta = _categorical_params(rng)
    close = [jax.tree.map(lambda a: a, theta)._replace(
        log_initial=jax.nn.log_softmax(theta.log_initial + 0.05 * s))
        for s in (1.0, -1.0)]
    seqs = _sequences(rng, "categorical", 6)
    perms = np.stack([np.array([2, 0, 1]), np.array([1, 2, 0]), np.array([0, 2, 1])])
    draws = _stack([theta, *close])
    switched = draws_module._permute(draws, perms)
    for average in ("kernel", "features"):
        K1 = posterior_latent_mean_map_gram(draws, seqs, average=average, **_KW)
        K2 = posterior_latent_mean_map_gram(switched, seqs, average=average, **_KW)
        np.testing.assert_allclose(np.asarray(K2), np.asarray(K1), rtol=_REL)
    # without relabelling, averaging embeddings over switched labels blurs them
    K3 = posterior_latent_mean_map_gram(switched, seqs, relabel=False, **_KW)
    assert not np.allclose(np.asarray(K3), np.asarray(K1), rtol=1e-3)


def test_relabel_draws_undoes_random_permutations(rng):
    base = _gaussian_params(rng)
    # draws scattered around one HMM, then relabelled at random
    noisy = [jax.tree.map(lambda a: a + 0.01 * jnp.asarray(
        rng.normal(size=a.shape), a.dtype), base) for _ in range(20)]
    noisy = [t._replace(log_initial=jax.nn.log_softmax(t.log_initial),
                        log_transition=jax.nn.log_softmax(t.log_transition, -1))
             for t in noisy]
    draws = _stack(noisy)
    perms = np.stack([rng.permutation(3) for _ in range(20)])
    scrambled = draws_module._permute(draws, perms)
    aligned, found = relabel_draws(scrambled, base)
    for leaf_a, leaf_d in zip(jax.tree.leaves(aligned), jax.tree.leaves(draws),
                              strict=True):
        np.testing.assert_array_equal(np.asarray(leaf_a), np.asarray(leaf_d))
    np.testing.assert_array_equal(np.take_along_axis(perms, found, 1),
                                  np.tile(np.arange(3), (20, 1)))
    # without a reference: the labelling of the first draw
    aligned2, _ = relabel_draws(scrambled)
    first = draws_module._permute(draws, np.tile(perms[0], (20, 1)))
    np.testing.assert_array_equal(np.asarray(aligned2.emission.means),
                                  np.asarray(first.emission.means))
    # the sample-dict form permutes every state axis, leading axes kept
    samples = {"initial": np.exp(np.asarray(scrambled.log_initial)).reshape(4, 5, 3),
               "transition": np.exp(np.asarray(scrambled.log_transition)
                                    ).reshape(4, 5, 3, 3),
               "emission_mean": np.asarray(scrambled.emission.means
                                           ).reshape(4, 5, 3, 2),
               "emission_var": np.asarray(scrambled.emission.covariances
                                          ).reshape(4, 5, 3, 2)}
    out = relabel_samples(samples, base)
    np.testing.assert_allclose(out["transition"].reshape(20, 3, 3),
                               np.exp(np.asarray(draws.log_transition)), rtol=1e-6)
    assert samples["transition"].shape == (4, 5, 3, 3)  # input not mutated


def test_posterior_lmmk_does_not_recompile(rng):
    seqs = _sequences(rng, "categorical", 6)
    posterior_latent_mean_map_gram(_stack([_categorical_params(rng)] * 3), seqs,
                                   **_KW)
    with count_compilations() as compiles:
        draws = _stack([_categorical_params(rng) for _ in range(3)])
        posterior_latent_mean_map_gram(draws, _sequences(rng, "categorical", 6),
                                       lam=2.0, chunk=2)
    assert compiles.count == 0


def test_posterior_gmmk_identical_draws_and_mixture(rng):
    thetas = [_categorical_params(rng, N=2, K=4) for _ in range(2)]
    seqs = _sequences(rng, "categorical", 5)
    padded, lengths = pad_sequences(seqs, n_symbols=4)
    # one posterior draw repeated: the EM-layer PPK of the adapted HMMs
    K = posterior_generative_mean_map_gram(_stack([thetas[0]] * 2), seqs, length=6)
    objs = adapt_hmms(thetas[0], padded, lengths, tau=1.0)
    logK = hmm_log_kernel_gram(objs, objs, length=6)
    d = jnp.diagonal(logK)
    np.testing.assert_allclose(np.asarray(K),
                               np.asarray(log_kernel_normalize(logK, d, d)),
                               rtol=_REL)
    # distinct draws: the kernel between the mixtures P_x = mean_s P(theta_xs)
    draws = _stack(thetas)
    raw = posterior_generative_mean_map_gram(draws, seqs, length=6,
                                             normalize=False)
    per = [np.exp(np.asarray(hmm_log_kernel_gram(
        adapt_hmms(a, padded, lengths, tau=1.0),
        adapt_hmms(b, padded, lengths, tau=1.0), length=6), np.float64))
        for a in thetas for b in thetas]
    np.testing.assert_allclose(np.asarray(raw), np.mean(per, 0), rtol=_REL * 10)
    _psd(raw, _REL * 10)
    # a second set B (the same sequences, so nothing recompiles): the diagonal
    # blocks computed apart give the same normalisation
    full = posterior_generative_mean_map_gram(draws, seqs, length=6)
    cross = posterior_generative_mean_map_gram(draws, seqs, seqs, length=6)
    np.testing.assert_allclose(np.asarray(cross), np.asarray(full), rtol=_REL * 10)


def test_bad_kernel_input_is_refused(rng):
    draws = _stack([_categorical_params(rng) for _ in range(2)])
    seqs = [np.array([0, 1, 2]), np.array([3, 3])]
    with pytest.raises(ValueError, match="empty"):
        posterior_latent_mean_map_gram(draws, [])
    with pytest.raises(ValueError, match="outside the alphabet"):
        posterior_latent_mean_map_gram(draws, [np.array([0, 7])])
    with pytest.raises(ValueError, match="NaN"):
        posterior_latent_mean_map_gram(draws, [np.array([0.0, np.nan])])
    with pytest.raises(ValueError, match="needs"):
        posterior_latent_mean_map_gram(draws, [rng.normal(size=(4, 2))])
    with pytest.raises(ValueError, match="leading draw axis"):
        posterior_latent_mean_map_gram(jax.tree.map(lambda a: a[0], draws), seqs)
    with pytest.raises(ValueError, match="leading draw axis"):
        posterior_latent_mean_map_gram(jax.tree.map(lambda a: a[:0], draws), seqs)
    with pytest.raises(ValueError, match="average"):
        posterior_latent_mean_map_gram(draws, seqs, average="mean")
    with pytest.raises(ValueError, match="lam"):
        posterior_latent_mean_map_gram(draws, seqs, lam=-1.0)
    with pytest.raises(ValueError, match="tau"):
        posterior_generative_mean_map_gram(draws, seqs, tau=0.0)
    nan_draws = draws._replace(log_initial=draws.log_initial.at[0, 0].set(jnp.nan))
    with pytest.raises(ValueError, match="NaN"):
        posterior_latent_mean_map_gram(nan_draws, seqs)
