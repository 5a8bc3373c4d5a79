"""Prior predictive draws of the GP estimators (Gabry et al. 2019's prior predictive check)."""

import numpy as np
import pytest

import bayeskern as bk


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(0)
    X = rng.uniform(0, 10, (25, 1))
    return X, 100.0 + 5.0 * np.sin(X[:, 0]) + rng.normal(0, 0.5, 25)


def test_regression_prior_draws_are_in_data_units_and_reproducible(data):
    X, y = data
    gp = bk.GPRegressor(random_state=0)
    a = gp.sample_prior_predictive(X, y, n_draws=400)
    b = gp.sample_prior_predictive(X, y, n_draws=400)
    assert a.shape == (400, 25) and np.isfinite(a).all()
    np.testing.assert_array_equal(a, b)
    # zero-mean prior on the standardized scale -> draws centred on the data mean, spread of
    # the order of the data sd (amplitude HalfNormal(1), noise HalfNormal(1))
    assert abs(np.median(a) - y.mean()) < 1.0 * y.std()
    assert 0.3 * y.std() < a.std() < 5 * y.std()
    assert not hasattr(gp, "idata_")  # nothing fitted


def test_classification_prior_draws_are_labels(data):
    X, y = data
    labels = np.where(y > np.median(y), "high", "low")
    draws = bk.GPClassifier(random_state=1).sample_prior_predictive(X, labels, n_draws=50)
    assert draws.shape == (50, 25)
    assert set(np.unique(draws)) == {"high", "low"}


def test_bad_n_draws(data):
    with pytest.raises(ValueError, match="n_draws"):
        bk.GPRegressor().sample_prior_predictive(*data, n_draws=0)
