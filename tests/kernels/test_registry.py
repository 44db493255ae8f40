import numpy as np
import pytest

from bayeskde.kernels import make_kernel, median_gamma, median_heuristic, rbf_kernel
from tests.helpers import X64

RTOL = 1e-10 if X64 else 1e-5


def test_sigma_resolved_to_gamma():
    k = make_kernel("rbf", {"sigma": 2.0})
    assert k.params == {"gamma": 0.125}
    assert make_kernel(k) is k


def test_gram_and_diag_agree_for_every_named_kernel(rng):
    X = rng.normal(size=(5, 3))
    for name, p in [("rbf", {"gamma": 0.3}), ("polynomial", {"degree": 3}),
                    ("linear", {}), ("regression", {}), ("delta", {}),
                    ("rbf", {"gamma": 0.3, "rbf_sigma": 0.5})]:
        k = make_kernel(name, p)
        np.testing.assert_allclose(np.diag(np.asarray(k.gram(X))), k.diag(X),
                                   rtol=RTOL * 10, err_msg=name)


def test_rbf_sigma_map_on_top(rng):
    X = rng.normal(size=(5, 2))
    k = make_kernel("linear", {"rbf_sigma": 1.5})
    np.testing.assert_allclose(k.gram(X), rbf_kernel(X, gamma=1 / (2 * 1.5**2)),
                               rtol=1e-4, atol=1e-6)


def test_callable_kernel(rng):
    X = rng.normal(size=(4, 2))
    k = make_kernel(lambda A, B: np.asarray(A) @ np.asarray(B).T)
    np.testing.assert_allclose(k.gram(X), X @ X.T, rtol=RTOL * 10)
    np.testing.assert_allclose(k.diag(X), (X**2).sum(1), rtol=RTOL * 10)
    bad = make_kernel(lambda A, B: np.ones((2, 2)))
    with pytest.raises(ValueError, match="shape"):
        bad.gram(X)


def test_bad_kernels():
    with pytest.raises(ValueError, match="unknown kernel"):
        make_kernel("gaussian")
    with pytest.raises(ValueError, match="unknown parameter"):
        make_kernel("rbf", {"width": 1.0})
    with pytest.raises(ValueError, match="not both"):
        make_kernel("rbf", {"sigma": 1.0, "gamma": 1.0})
    with pytest.raises(ValueError, match="gamma"):
        make_kernel("rbf", {"gamma": -1.0})
    with pytest.raises(ValueError, match="lam"):
        make_kernel("string", {"lam": 1.5})
    with pytest.raises(TypeError, match="name or a callable"):
        make_kernel(3.0)
    with pytest.raises(ValueError, match="only for named"):
        make_kernel(lambda A, B: A, {"gamma": 1.0})
    with pytest.raises(TypeError, match="precomputed"):
        make_kernel("precomputed").gram(np.eye(2))


def test_rbf_defaults_to_the_median_heuristic_resolved_at_fit(rng):
    X = rng.normal(size=(10, 3)) * 40.0
    k = make_kernel("rbf")
    assert k.params["gamma"] == "median" and not k.resolved
    fitted = k.fit(X)
    assert fitted.resolved
    assert fitted.params["gamma"] == pytest.approx(median_gamma(X))
    np.testing.assert_allclose(k.gram(X), fitted.gram(X), rtol=RTOL * 10)
    Z = rng.normal(size=(3, 3))
    with pytest.raises(ValueError, match="median"):
        k.gram(Z, X)  # resolved on which data? refused
    np.testing.assert_allclose(
        fitted.gram(Z, X), rbf_kernel(Z, X, gamma=fitted.params["gamma"]),
        rtol=RTOL * 10, atol=RTOL)
    assert make_kernel("rbf", {"sigma": "median"}).params["gamma"] == "median"


def test_rbf_sigma_median_is_the_feature_space_median(rng):
    X = rng.normal(size=(7, 2))
    k = make_kernel("linear", {"rbf_sigma": "median"}).fit(X)
    assert k.params["rbf_sigma"] == pytest.approx(median_heuristic(X), rel=1e-5)


def test_string_kernel_defaults_to_mean_mode():
    assert make_kernel("string").params["mode"] == "mean"


@pytest.mark.parametrize("params, name", [
    ({"gamma": "x"}, "gamma"), ({"gamma": "0.5"}, "gamma"), ({"gamma": None}, "gamma"),
])
def test_bad_rates_name_the_argument(params, name):
    with pytest.raises((TypeError, ValueError), match=name):
        make_kernel("rbf", params)


@pytest.mark.parametrize("params, name", [
    ({"lam": "a"}, "lam"), ({"normalize": "no"}, "normalize"), ({"mode": 1}, "mode"),
    ({"r": 2.5}, "r"),
])
def test_bad_string_params_name_the_argument(params, name):
    with pytest.raises((TypeError, ValueError), match=name):
        make_kernel("string", params)


def test_params_must_be_a_mapping():
    with pytest.raises(TypeError, match="params"):
        make_kernel("rbf", "gamma")
