import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.special as sp
from sklearn.base import clone
from sklearn.exceptions import NotFittedError
from sklearn.metrics.pairwise import rbf_kernel as sk_rbf

from bayeskde import _validation
from bayeskde.kernels import center_kernel, centered_alignment, hsic
from bayeskde.kernels.transforms import (
    PolynomialKernelTransform,
    apply_transform,
    fit_polynomial_transform,
    hsic_matrix,
    polynomial_basis,
    psd_projection,
)
from tests.helpers import X64, count_compilations

RTOL = 1e-10 if X64 else 2e-5
# SVD-derived quantities in float32 carry a few more ulps of error.
SVD_TOL = 1e-9 if X64 else 1e-4


def _grams(rng, m=30, gamma_x=2.0, gamma_y=5.0):
    t = rng.uniform(size=(m, 1))
    X = t + 0.3 * np.sin(2 * np.pi * t) + 0.05 * rng.normal(size=(m, 1))
    return sk_rbf(X, gamma=gamma_x), sk_rbf(t, gamma=gamma_y)


def _close(a, b, tol=RTOL, scale=None):
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    s = np.abs(b).max() if scale is None else scale
    np.testing.assert_allclose(a, b, rtol=tol, atol=tol * max(s, 1.0))


@pytest.fixture
def fresh_warnings(monkeypatch):
    # warn_once remembers messages per process; tests that expect a warning need a
    # clean slate.
    monkeypatch.setattr(_validation, "_WARNED", set())


# ------------------------------------------------------------ explicit construction


@pytest.mark.parametrize("shape", [(12, 12), (5, 12), (12,)])
def test_monomial_basis_is_hadamard_powers(rng, shape):
    K = rng.uniform(-1, 1, size=shape)
    stack = polynomial_basis(K, 5)
    assert stack.shape == (5, *shape)
    for i in range(5):
        ref = np.ones(shape)
        for _ in range(i + 1):
            ref = ref * K
        _close(stack[i], ref)


@pytest.mark.parametrize("lam", [0.51, 1.0, 2.5, -0.3])
def test_gegenbauer_basis_matches_scipy(rng, lam):
    K = rng.uniform(-1, 1, size=(7, 9))
    K[0, :3] = [-1.0, 0.0, 1.0]
    stack = polynomial_basis(K, 6, basis="gegenbauer", gegenbauer_lambda=lam)
    assert stack.shape == (6, 7, 9)
    for n in range(1, 7):
        ref = np.vectorize(lambda t, n=n: sp.eval_gegenbauer(n, lam, t))(K)
        _close(stack[n - 1], ref)


def test_gegenbauer_lambda_zero_is_chebyshev_limit(rng):
    K = rng.uniform(-1, 1, size=(11,))
    stack = polynomial_basis(K, 5, basis="gegenbauer", gegenbauer_lambda=0.0)
    for n in range(1, 6):
        _close(stack[n - 1], 2.0 / n * sp.eval_chebyt(n, K))
        # and the limit lambda -> 0 of C_n^lambda / lambda
        _close(stack[n - 1], sp.eval_gegenbauer(n, 1e-7, K) / 1e-7, tol=1e-5)


@pytest.mark.parametrize("basis", ["monomial", "gegenbauer"])
def test_apply_transform_is_weighted_basis_sum(rng, basis):
    K = rng.uniform(-1, 1, size=(6, 8))
    c = rng.normal(size=4)
    got = apply_transform(K, c, basis=basis, gegenbauer_lambda=0.7)
    if basis == "monomial":
        ref = sum(c[i] * K ** (i + 1) for i in range(4))
    else:
        ref = sum(c[i] * sp.eval_gegenbauer(i + 1, 0.7, K) for i in range(4))
    _close(got, ref)


def test_hsic_matrix_matches_library_hsic(rng):
    K, G = _grams(rng)
    Ks, Gs = polynomial_basis(K, 3), polynomial_basis(G, 2)
    C = hsic_matrix(Ks, Gs)
    ref = np.array([[float(hsic(Ks[i], Gs[j])) for j in range(2)] for i in range(3)])
    _close(C, ref)


# ------------------------------------------------------------------ the seed's claims


def test_degree_one_returns_base_kernel(rng):
    K, G = _grams(rng)
    res = fit_polynomial_transform(K, G, 1, 1)
    _close(res.alpha, [1.0])
    _close(res.beta, [1.0])
    _close(res.hsic, float(hsic(K, G)))
    tr = PolynomialKernelTransform(degree_x=1, degree_y=1).fit(K, G)
    _close(tr.transform_input(K), K)
    _close(tr.transform_output(G[:4]), G[:4])
    # Gegenbauer degree 1 is C_1 = 2 lambda t: the base kernel up to scale.
    g = PolynomialKernelTransform("gegenbauer", 1, 1, gegenbauer_lambda=0.6).fit(K, G)
    _close(g.alpha_, [1.0])
    _close(g.transform_input(K), 1.2 * K)


@pytest.mark.parametrize("basis", ["monomial", "gegenbauer"])
def test_degree_y_one_weights_proportional_to_alignment(rng, basis):
    K, G = _grams(rng)
    res = fit_polynomial_transform(K, G, 4, 1, basis=basis, gegenbauer_lambda=0.51)
    Ks = np.asarray(polynomial_basis(K, 4, basis, 0.51), np.float64)
    h = np.array([float(hsic(Ks[i], G)) for i in range(4)])
    # Cortes et al. (2012): the numerator <H K_i H, H G H>_F of the centred alignment.
    num = np.array([
        float(centered_alignment(Ks[i], G))
        * np.linalg.norm(center_kernel(Ks[i]))
        * np.linalg.norm(center_kernel(G))
        for i in range(4)
    ])
    G1 = np.asarray(polynomial_basis(G, 1, basis, 0.51)[0], np.float64)
    scale = G1[0, 1] / G[0, 1]  # 1 for monomial, 2 lambda for Gegenbauer
    _close(res.alpha, h / np.linalg.norm(h) * np.sign(h.sum()), tol=SVD_TOL)
    _close(num / ((len(K) - 1) ** 2), h, tol=SVD_TOL)
    _close(res.hsic, scale * np.linalg.norm(h), tol=SVD_TOL)


@pytest.mark.parametrize("basis", ["monomial", "gegenbauer"])
def test_hsic_of_transformed_kernels_is_top_singular_value(rng, basis):
    K, G = _grams(rng)
    res = fit_polynomial_transform(K, G, 4, 3, basis, gegenbauer_lambda=(0.51, 0.52))
    Kt = apply_transform(K, res.alpha, basis, 0.51)
    Gt = apply_transform(G, res.beta, basis, 0.52)
    C = np.asarray(res.C, np.float64)
    s = np.linalg.svd(C, compute_uv=False)
    _close(res.hsic, s[0], tol=SVD_TOL)
    _close(hsic(Kt, Gt), s[0], tol=SVD_TOL)
    _close(np.linalg.norm(res.alpha), 1.0, tol=SVD_TOL)
    _close(np.linalg.norm(res.beta), 1.0, tol=SVD_TOL)
    # alpha, beta maximise: no other unit pair does better.
    rand = rng.normal(size=(200, 4)), rng.normal(size=(200, 3))
    a = rand[0] / np.linalg.norm(rand[0], axis=1, keepdims=True)
    b = rand[1] / np.linalg.norm(rand[1], axis=1, keepdims=True)
    assert np.all(np.einsum("ki,ij,kj->k", a, C, b) <= s[0] * (1 + SVD_TOL))


@pytest.mark.parametrize("seed", range(4))
def test_monomial_weights_nonnegative(seed):
    rng = np.random.default_rng(seed)
    K, G = _grams(rng, gamma_x=rng.uniform(0.2, 20), gamma_y=rng.uniform(0.2, 20))
    res = fit_polynomial_transform(K, G, 5, 4)
    assert np.all(np.asarray(res.C) >= 0)
    assert np.all(np.asarray(res.alpha) >= 0)
    assert np.all(np.asarray(res.beta) >= 0)


# ------------------------------------------------------------------------ new points


@pytest.mark.parametrize("basis", ["monomial", "gegenbauer"])
def test_cross_kernel_and_diagonal_are_blocks_of_joint_transform(rng, basis):
    Z = rng.normal(size=(36, 2))
    K_joint = sk_rbf(Z, gamma=0.5)
    train, test = slice(0, 30), slice(30, 36)
    K, K_cross = K_joint[train, train], K_joint[test, train]
    _, G = _grams(rng)
    tr = PolynomialKernelTransform(basis, degree_x=4, degree_y=2, project_psd=False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # PSD loss is not the topic
        tr.fit(K, G)
    joint = apply_transform(K_joint, tr.alpha_, basis, tr.lambda_x_)
    _close(tr.transform_input(K_cross), joint[test, train])
    _close(tr.transform_input(np.diag(K_joint)[test]), np.diag(joint)[test])
    if basis == "gegenbauer":
        # k(x, x) = 1 maps to sum_i alpha_i C_i^lambda(1), no longer 1.
        ref = sum(
            a * sp.eval_gegenbauer(i + 1, tr.lambda_x_, 1.0)
            for i, a in enumerate(np.asarray(tr.alpha_))
        )
        _close(tr.transform_input(np.ones(3)), np.full(3, ref))


# -------------------------------------------------------------------------------- PSD


def _separated_grams(rng, m=30):
    # Far-apart points: K ~ I, so C_2(K) ~ lambda(2 + 2 lambda) I - lambda 11^T has
    # the eigenvalue lambda(2 + 2 lambda - m) < 0 along 1, which HSIC cannot see.
    X = np.arange(m)[:, None] * 3.0 + 0.3 * rng.normal(size=(m, 1))
    return sk_rbf(X, gamma=0.3), sk_rbf(X, gamma=0.05)


def test_psd_projection_matches_eigh_clip(rng):
    A = rng.normal(size=(9, 9))
    A = A + A.T
    e, U = np.linalg.eigh(A)
    proj = psd_projection(A)
    _close(proj.min_eigenvalue, e[0])
    _close(proj.gram, (U * np.maximum(e, 0)) @ U.T)
    assert np.linalg.eigvalsh(np.asarray(proj.gram, np.float64)).min() >= -SVD_TOL * 10


def test_gegenbauer_psd_loss_detected_and_projected(rng, fresh_warnings):
    K, G = _separated_grams(rng)
    tr = PolynomialKernelTransform("gegenbauer", degree_x=2, degree_y=2)
    with pytest.warns(RuntimeWarning) as record:
        tr.fit(K, G)
    messages = [str(w.message) for w in record]
    assert any("input Gram matrix is not positive" in msg for msg in messages)
    raw = np.asarray(apply_transform(K, tr.alpha_, "gegenbauer", tr.lambda_x_))
    e = np.linalg.eigvalsh(raw.astype(np.float64))
    assert e[0] < -1.0  # a real loss of PSD, not round-off
    _close(tr.input_min_eigenvalue_, e[0], tol=SVD_TOL)
    assert tr.input_projector_ is not None
    _close(tr.input_clipped_mass_, -e[e < 0].sum(), tol=SVD_TOL * 10)
    Kp = np.asarray(tr.transform_input(K), np.float64)
    scale = np.abs(e).max()
    assert np.linalg.eigvalsh(Kp).min() >= -SVD_TOL * scale
    _close(Kp, psd_projection(raw).gram, tol=SVD_TOL, scale=scale)
    # Consistency: the cross-kernel of training points is the projected Gram.
    _close(tr.transform_input(K[3:9]), Kp[3:9], tol=SVD_TOL, scale=scale)
    # Diagonals are not projected; the gap is bounded by the clipped mass.
    d = np.asarray(tr.transform_input(np.diag(K)))
    _close(d, np.diag(raw))
    assert np.all(np.diag(Kp) - d <= tr.input_clipped_mass_ * (1 + SVD_TOL))
    with pytest.raises(ValueError, match="against the 30 training points"):
        tr.transform_input(K[:, :10])


def test_unprojected_when_project_psd_false(rng, fresh_warnings):
    K, G = _separated_grams(rng)
    tr = PolynomialKernelTransform("gegenbauer", 2, 2, project_psd=False)
    with pytest.warns(RuntimeWarning, match="project_psd=False"):
        tr.fit(K, G)
    assert tr.input_projector_ is None and tr.input_min_eigenvalue_ < 0
    raw = apply_transform(K, tr.alpha_, "gegenbauer", tr.lambda_x_)
    _close(tr.transform_input(K), raw)


def test_monomial_psd_not_checked(rng):
    K, G = _grams(rng)
    tr = PolynomialKernelTransform("monomial", 3, 3).fit(K, G)
    assert tr.input_min_eigenvalue_ is None and tr.output_projector_ is None


# ------------------------------------------------------------------------------- JAX


def test_no_recompilation_on_second_call(rng):
    K, G = _grams(rng)
    K2, G2 = _grams(rng)
    fit_polynomial_transform(K, G, 3, 2, "gegenbauer", 0.51)
    apply_transform(K, np.ones(3), "gegenbauer", 0.51)
    polynomial_basis(K, 3, "gegenbauer", 0.51)
    with count_compilations() as compiles:
        fit_polynomial_transform(K2, G2, 3, 2, "gegenbauer", 0.8)
        apply_transform(K2, np.ones(3) / 2, "gegenbauer", 0.8)
        polynomial_basis(K2, 3, "gegenbauer", 0.9)
    assert compiles.count == 0


def test_traceable_under_jit_and_grad(rng):
    K, G = _grams(rng)

    def objective(gamma):
        Kg = jnp.exp(gamma * jnp.log(jnp.asarray(K)))  # RBF with scaled rate
        return fit_polynomial_transform(Kg, jnp.asarray(G), 3, 2).hsic

    jitted = jax.jit(objective)
    _close(jitted(1.0), fit_polynomial_transform(K, G, 3, 2).hsic, tol=SVD_TOL)
    g = jax.jit(jax.grad(objective))(1.0)
    h = 1e-4 if X64 else 1e-2
    fd = (jitted(1.0 + h) - jitted(1.0 - h)) / (2 * h)
    _close(g, fd, tol=1e-5 if X64 else 5e-2)


@pytest.mark.parametrize("basis", ["monomial", "gegenbauer"])
def test_dtype_follows_configuration(rng, basis):
    K, G = _grams(rng)
    res = fit_polynomial_transform(K, G, 2, 2, basis)
    want = jnp.float64 if X64 else jnp.float32
    assert res.alpha.dtype == want and res.C.dtype == want
    assert polynomial_basis(K, 2, basis).dtype == want


# --------------------------------------------------------------------------- sklearn


def test_estimator_params_clone_and_pair_lambda(rng):
    K, G = _grams(rng)
    tr = PolynomialKernelTransform("gegenbauer", 3, 2, gegenbauer_lambda=(0.51, 0.52))
    assert clone(tr).get_params() == tr.get_params()
    tr.fit(K, G)
    res = fit_polynomial_transform(K, G, 3, 2, "gegenbauer", (0.51, 0.52))
    _close(tr.alpha_, res.alpha)
    _close(tr.hsic_, res.hsic)
    assert (tr.lambda_x_, tr.lambda_y_) == (0.51, 0.52)
    if tr.output_projector_ is None:
        _close(tr.transform_output(G), apply_transform(G, tr.beta_, "gegenbauer", 0.52))


# ------------------------------------------------------------------------- bad input


def test_bad_input_errors(rng):
    K, G = _grams(rng, m=10)
    with pytest.raises(ValueError, match="degree"):
        polynomial_basis(K, 0)
    with pytest.raises(TypeError, match="degree"):
        polynomial_basis(K, 1.5)
    with pytest.raises(ValueError, match="degree_x"):
        PolynomialKernelTransform(degree_x=0).fit(K, G)
    with pytest.raises(TypeError, match="degree_y"):
        PolynomialKernelTransform(degree_y=1.5).fit(K, G)
    for lam in (-0.5, -1.0):
        with pytest.raises(ValueError, match="-1/2"):
            PolynomialKernelTransform("gegenbauer", gegenbauer_lambda=lam).fit(K, G)
        with pytest.raises(ValueError, match="-1/2"):
            polynomial_basis(K, 2, "gegenbauer", lam)
    with pytest.raises(ValueError, match="basis"):
        PolynomialKernelTransform("hermite").fit(K, G)
    bad = K.copy()
    bad[1, 2] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        PolynomialKernelTransform().fit(bad, G)
    with pytest.raises(ValueError, match="NaN"):
        apply_transform(bad, np.ones(2))
    with pytest.raises(ValueError, match="square"):
        fit_polynomial_transform(K[:, :5], G, 2, 2)
    with pytest.raises(ValueError, match="same samples"):
        fit_polynomial_transform(K, G[:8, :8], 2, 2)
    with pytest.raises(ValueError, match="same samples"):
        hsic_matrix(polynomial_basis(K, 2), polynomial_basis(G[:8, :8], 2))
    with pytest.raises(ValueError, match="square"):
        psd_projection(K[:, :5])
    with pytest.raises(NotFittedError):
        PolynomialKernelTransform().transform_input(K)
    with pytest.raises(NotFittedError):
        PolynomialKernelTransform().transform_output(G)
