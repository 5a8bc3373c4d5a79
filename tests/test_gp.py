"""GP regression/classification: correctness, LOO likelihood, determinism, bad input."""

import jax.numpy as jnp
import numpy as np
import pytest
import sklearn.base
from bayeskern.models.gp import kernel_matrix, theta_from_draw
from conftest import TINY
from scipy import stats

import bayeskern as bk


@pytest.fixture(scope="module")
def sine():
    rng = np.random.default_rng(1)
    X = rng.uniform(0, 6, size=(40, 1))
    y = np.sin(X[:, 0]) + 0.1 * rng.normal(size=40)
    return X, y


@pytest.fixture(scope="module")
def fitted(sine):
    X, y = sine
    return bk.GPRegressor(
        kernel=bk.kernels.RBF(),
        num_warmup=100,
        num_samples=60,
        num_chains=2,
        progress_bar=False,
        random_state=0,
    ).fit(X, y)


def test_regressor_recovers_sine_with_honest_intervals(fitted):
    Xt = np.linspace(0.3, 5.7, 50)[:, None]
    mean, sd = fitted.predict(Xt, return_std=True)
    assert np.max(np.abs(mean - np.sin(Xt[:, 0]))) < 0.15
    lo, hi = fitted.predict_interval(Xt, 0.95)
    assert np.all(lo < mean) and np.all(mean < hi)
    assert 0.05 < np.mean(sd) < 0.3
    assert set(fitted.idata_.groups()) >= {
        "posterior",
        "sample_stats",
        "log_likelihood",
        "observed_data",
        "constant_data",
    }
    assert list(fitted.idata_.posterior["amplitude"].coords["term"].values) == ["rbf"]


def test_predict_in_row_blocks_equals_one_block(fitted, monkeypatch):
    from bayeskern.estimators import prediction

    Xt = np.linspace(0.0, 6.0, 300)[:, None]
    whole = fitted.predict(Xt, return_std=True), fitted.predict_interval(Xt, 0.8)
    monkeypatch.setattr(prediction, "PREDICT_BLOCK_ELEMENTS", 5 * 120)  # 5 rows of 120 draws
    blocks = fitted.predict(Xt, return_std=True), fitted.predict_interval(Xt, 0.8)
    for a, b in zip(whole, blocks, strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-12)


def test_predictive_is_remembered_for_the_same_rows(fitted, monkeypatch):
    """predict, intervals, draws and predictive on the same rows: one computation."""
    from bayeskern.estimators import gp as gp_module

    Xt = np.linspace(0.5, 5.5, 30)[:, None]
    fitted._cache = {}  # as the fit left it
    calls = []
    original = gp_module.GPRegressor._training_draws

    def counting(self):
        calls.append(1)
        return original(self)

    monkeypatch.setattr(gp_module.GPRegressor, "_training_draws", counting)
    first = fitted.predictive(Xt)
    mean, sd = fitted.predict(Xt, return_std=True)
    fitted.predict_interval(Xt, 0.9)
    fitted.sample_posterior_predictive(Xt, n_draws=10, random_state=0)
    again = fitted.predictive(Xt.copy())  # equal values, another array
    assert len(calls) == 1
    assert again is not first
    np.testing.assert_array_equal(again.loc, first.loc)
    with pytest.raises(ValueError, match="read-only"):
        again.loc[0, 0] = 0.0  # what the next caller gets cannot be changed
    fitted.predictive(Xt + 0.1)  # other rows: computed
    assert len(calls) == 2
    saved = fitted.idata_
    try:
        fitted.idata_ = saved.copy()  # a new fit replaces idata_: computed again
        fitted.predictive(Xt)
        assert len(calls) == 3
    finally:
        fitted.idata_ = saved
    fitted.__dict__.pop("_cache")  # no cache (as after pickling): computed
    fresh = fitted.predictive(Xt)  # the same numbers as without the memory
    assert len(calls) == 4
    np.testing.assert_array_equal(fresh.loc, first.loc)
    np.testing.assert_array_equal(fresh.scale, first.scale)
    np.testing.assert_array_equal(mean, fresh.mean())
    np.testing.assert_array_equal(sd, fresh.std())


def test_loo_loglik_is_exact_leave_one_out_conditional(fitted, sine):
    X, y = sine
    Xs, ys = fitted.x_std_.transform(X), fitted.y_std_.transform(y)
    post = fitted.idata_.posterior
    draw = {k: jnp.asarray(post[k].values[0, 3]) for k in ("amplitude", "noise", "rbf_lengthscale")}
    theta = theta_from_draw(fitted.kernel_, draw, fitted.x_std_.scale)
    K = np.array(kernel_matrix(fitted.kernel_, theta, draw["amplitude"], Xs, Xs))
    K += (float(draw["noise"]) ** 2 + 1e-6) * np.eye(len(ys))
    i = 7
    keep = np.arange(len(ys)) != i
    kinv = np.linalg.solve(K[np.ix_(keep, keep)], K[keep, i])
    mu = kinv @ ys[keep]
    var = K[i, i] - K[i, keep] @ kinv
    ref = stats.norm(mu, np.sqrt(var)).logpdf(ys[i]) - np.log(fitted.y_std_.scale)
    ours = float(fitted.idata_.log_likelihood["y"].values[0, 3, i])
    assert ours == pytest.approx(ref, rel=1e-7)
    loo = fitted.loo()
    assert np.isfinite(loo.elpd_loo)


def test_same_seed_same_numbers(fitted, sine):
    """A refit with the same settings and seed draws the same numbers (it reuses the shared
    fit's compiled programs, so only the sampling is repeated)."""
    X, y = sine
    a = fitted
    b = sklearn.base.clone(fitted).fit(X, y)
    np.testing.assert_array_equal(
        a.idata_.posterior["noise"].values, b.idata_.posterior["noise"].values
    )
    np.testing.assert_array_equal(a.predict(X[:5]), b.predict(X[:5]))


def test_classifier_learns_and_gives_probabilities(rng, monkeypatch):
    from bayeskern.estimators import gp as gp_module
    from bayeskern.estimators import gp_classifier

    X = rng.normal(size=(60, 2))
    y = np.where(X[:, 0] + 0.5 * X[:, 1] > 0, "yes", "no")
    # above LARGE_EXACT_ROWS rows the O(N^3) fit says so and names the alternatives
    monkeypatch.setattr(gp_classifier, "LARGE_EXACT_ROWS", 50)
    with pytest.warns(UserWarning, match=r"GPClassifier: 60 rows\..*O\(N\^3\).*GaBaSRClassifier"):
        clf = bk.GPClassifier(
            num_warmup=100, num_samples=60, num_chains=1, progress_bar=False, random_state=0
        ).fit(X, y)
    calls = []  # the per-draw latent predictive at the same rows is computed once
    original = gp_module.GPClassifier._draws
    monkeypatch.setattr(
        gp_module.GPClassifier, "_draws", lambda s, **k: calls.append(1) or original(s, **k)
    )
    p = clf.predict_proba(X)
    assert p.shape == (60, 2) and np.allclose(p.sum(1), 1)
    assert clf.score(X, y) > 0.85
    lo, hi = clf.predict_proba_interval(X, 0.9)
    assert len(calls) == 1 and lo.shape == p.shape and np.all(lo <= hi)
    assert set(clf.predict(X[:3])) <= {"yes", "no"}
    draws = clf.sample_posterior_predictive(X[:4], n_draws=5, random_state=0)
    assert draws.shape == (5, 4)


def test_composite_kernel_has_one_amplitude_per_term(sine):
    X, y = sine
    k = bk.kernels.Linear() + bk.kernels.RBF() * bk.kernels.Periodic(period=2.0)
    m = bk.GPRegressor(kernel=k, random_state=0, **TINY).fit(X, y)
    post = m.idata_.posterior
    assert post["amplitude"].shape[-1] == 2
    assert "periodic_period" not in post  # fixed by the user
    assert "periodic_lengthscale" in post and "rbf_lengthscale" in post


BAD = [
    (np.array([[np.nan], [1.0], [2.0]]), np.array([1.0, 2.0, 3.0]), "NaN"),
    (np.array([[np.inf], [1.0], [2.0]]), np.array([1.0, 2.0, 3.0]), "infinity"),
    (np.array([[0.0], [1.0], [2.0]]), np.array([1.0, np.nan, 3.0]), "NaN"),
    (np.array([0.0, 1.0, 2.0]), np.array([1.0, 2.0, 3.0]), "2D array"),
    (np.array([[0.0], [1.0], [2.0]]), np.array([1.0, 2.0]), "inconsistent numbers of samples"),
    (np.array([[0.0]]), np.array([1.0]), "minimum of 2"),
]


@pytest.mark.parametrize("X, y, msg", BAD)
def test_bad_input_regression(X, y, msg):
    with pytest.raises(ValueError, match=msg):
        bk.GPRegressor(**TINY).fit(X, y)


def test_bad_labels_and_settings(rng):
    X = rng.normal(size=(9, 2))
    with pytest.raises(ValueError, match="single class"):
        bk.GPClassifier(**TINY).fit(X, np.ones(9))
    with pytest.raises(ValueError, match="3 classes"):  # several classes: Laplace only
        bk.GPClassifier(inference="latent", **TINY).fit(X, np.arange(9) % 3)
    with pytest.raises(ValueError, match="unknown kernel name"):
        bk.GPRegressor(kernel="rbff", **TINY).fit(X, X[:, 0])
    for bad in (
        dict(num_samples=0),
        dict(num_chains=-1),
        dict(num_warmup=-5),
        dict(num_samples=2.5),
    ):
        settings = {**TINY, **bad}
        with pytest.raises(ValueError, match=next(iter(bad))):
            bk.GPRegressor(**settings).fit(X, X[:, 0])
    from sklearn.exceptions import NotFittedError

    with pytest.raises(NotFittedError):
        bk.GPRegressor().predict(X)


def test_ill_conditioned_kernel_is_reported_not_nan(rng):
    # duplicated points and a huge length-scale make K singular; prediction must stay finite
    X = np.repeat(rng.normal(size=(5, 1)), 4, axis=0)
    y = np.repeat(rng.normal(size=5), 4)
    m = bk.GPRegressor(kernel=bk.kernels.RBF(lengthscale=1e4), random_state=0, **TINY).fit(X, y)
    mean, sd = m.predict(X, return_std=True)
    assert np.all(np.isfinite(mean)) and np.all(np.isfinite(sd))
    assert np.isfinite(m.max_jitter_)
