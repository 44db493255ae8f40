import numpy as np
import pytest

from bayeskde.kernels import make_kernel, rbf_kernel
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
