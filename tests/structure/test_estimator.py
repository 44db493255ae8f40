"""The estimator's facade: its methods read the functional results (a posterior
assembled by hand, so no fit is compiled here; the doctests and
tests/structure/test_posterior.py fit), the ArviZ groups, and bad inputs refused
with errors naming the argument."""

import jax
import numpy as np
import pytest
from sklearn.exceptions import NotFittedError

from bayeskde.infer import group_names
from bayeskde.structure import (
    StructureGPRegressor,
    fit_structure_gp,
    mixture_log_density,
    mixture_mean,
    mixture_predictive,
    mixture_quantiles,
    structure_table,
)

T_NEW = np.array([13.7, 14.0, 15.2])


@pytest.fixture(scope="module")
def model(handmade):
    post, _, _ = handmade
    m = StructureGPRegressor(terms=("LIN", "PER"))
    m.posterior_ = post
    m.structure_posterior_ = structure_table(post)
    return m


def test_methods_read_the_mixture(model, handmade):
    post, _, _ = handmade
    pred = mixture_predictive(post, T_NEW)
    np.testing.assert_allclose(model.predict(T_NEW), mixture_mean(pred))
    np.testing.assert_allclose(model.predict(T_NEW[:, None]), mixture_mean(pred))
    lo, hi = model.predict_interval(T_NEW, 0.8)
    q = mixture_quantiles(pred, [0.1, 0.9])
    np.testing.assert_allclose(lo, q[0])
    np.testing.assert_allclose(hi, q[1])
    y = mixture_mean(pred)
    assert model.score(T_NEW, y) == pytest.approx(
        float(np.mean(mixture_log_density(pred, y))))
    draws = model.sample(T_NEW, 7, key=jax.random.key(0))
    assert draws.shape == (3, 7)
    text = str(model.structure_posterior_)
    assert "LIN + PER(3" in text and "ESS" in text


def test_inference_data(model):
    idata = model.inference_data(top=2, num_draws=50, key=jax.random.key(0))
    assert len(idata) == 2
    first = next(iter(idata.values()))
    assert "posterior" in group_names(first)
    names = set(first["posterior"].data_vars)
    assert "PER_PER_period" in names and "noise_variance" in names


def test_not_fitted():
    with pytest.raises(NotFittedError):
        StructureGPRegressor().predict(T_NEW)


@pytest.mark.parametrize("t, y, match", [
    (np.arange(10.0), np.r_[np.arange(9.0), np.nan], "y contains NaN"),
    (np.r_[np.arange(9.0), np.inf], np.arange(10.0), "t contains NaN or inf"),
    (np.arange(10.0), np.ones((10, 2)), "y must have shape"),
    (np.ones((10, 2)), np.arange(10.0), "t must have shape"),
    (np.arange(10.0), np.arange(9.0), "same length"),
    (np.arange(3.0), np.arange(3.0), "at least 5 points"),
    (np.ones(6), np.arange(6.0), "two distinct times"),
    (np.array([]), np.array([]), "t is empty"),
])
def test_bad_series(t, y, match):
    with pytest.raises(ValueError, match=match):
        fit_structure_gp(jax.random.key(0), t, y)


@pytest.mark.parametrize("kwargs, err, match", [
    ({"num_starts": 0}, ValueError, "num_starts"),
    ({"num_steps": 2.5}, TypeError, "num_steps"),
    ({"max_terms": 0}, ValueError, "max_terms"),
    ({"inclusion": -0.1}, ValueError, "inclusion"),
    ({"terms": ("SE", "WAVE")}, ValueError, "terms"),
    ({"transform": "sqrt"}, ValueError, "transform must be one of"),
    ({"transform": "log"}, ValueError, "needs every y > 0"),
])
def test_bad_settings(kwargs, err, match):
    t = np.arange(10.0)
    with pytest.raises(err, match=match):
        fit_structure_gp(jax.random.key(0), t, np.sin(t), **kwargs)


def test_bad_key_and_arguments(model):
    t = np.arange(10.0)
    with pytest.raises(TypeError, match="key"):
        fit_structure_gp(0, t, np.sin(t))
    with pytest.raises(ValueError, match="coverage"):
        model.predict_interval(T_NEW, 1.5)
    with pytest.raises(ValueError, match="num_samples"):
        model.sample(T_NEW, 0)
    with pytest.raises(ValueError, match="t contains NaN"):
        model.predict(np.array([1.0, np.nan]))
