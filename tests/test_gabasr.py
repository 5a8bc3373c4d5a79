"""Tests of GaBaSR's NumPyro side: features, evidence, kernel object, estimators.

Pena-Llamas et al. (2023). The Gibbs sampler's own tests (rank-updated MH equal to
full recomputation...) live in ``tests/test_gabasr_gibbs.py``.
"""

import warnings

import jax.numpy as jnp
import numpy as np
import pytest
from bayeskern.models import gabasr as G
from scipy import stats
from sklearn.utils.estimator_checks import parametrize_with_checks

import bayeskern  # noqa: F401  (float64)
from bayeskern.blr import feature_stats, nig_posterior
from bayeskern.estimators.gabasr import (
    GaBaSRClassifier,
    GaBaSRRegressor,
    RobustScaler1,
    frequency_scale,
)
from bayeskern.kernels.spectral import SpectralMixture, mixture_density, spectral_mixture_kernel

TINY = dict(
    n_features=8,
    n_components=2,
    num_warmup=15,
    num_samples=15,
    num_chains=1,
    map_steps=5,
    progress_bar=False,
    random_state=0,
)


def _mixture(d=2):
    w = jnp.array([0.6, 0.4])
    mu = jnp.array([[0.0] * d, [2.0] + [0.5] * (d - 1)])
    sig = jnp.array([[0.7] * d, [0.3] * d])
    return w, mu, sig


# --------------------------------------------------------------------------- features
def test_random_features_converge_to_exact_kernel():
    """Φ(x)ᵀΦ(x') → Σ π_k e^{-½‖σ_k τ‖²} cos(μ_kᵀτ) (eq. 4), three tolerances, error shrinking."""
    rng = np.random.default_rng(0)
    X = jnp.asarray(rng.normal(size=(40, 2)))
    w, mu, sig = _mixture()
    K_exact = SpectralMixture(2, w, mu, sig)(X)
    errs = []
    for J in (16, 256, 4096):
        spec = G.make_spec(1, 2, n_components=2, n_per_component=J)
        Phi = G.spectral_features(X, {"weights": w, "mu": mu, "sigma": sig}, spec)
        E = np.abs(np.asarray(Phi @ Phi.T - K_exact))
        errs.append((E.mean(), E.max()))
    means, maxes = zip(*errs, strict=True)
    assert means[0] > means[1] > means[2] and maxes[0] > maxes[2]
    assert means[2] < 0.01 and maxes[2] < 0.05
    # diagonal is exact: cos² + sin² = 1 per feature pair, weights sum to 1
    assert np.allclose(np.diag(Phi @ Phi.T), 1.0)


def test_locally_stationary_features_symmetrized_kernel():
    """ψ = (φ+φ⁻)/2 has E[ψψᵀ] = ½[κ1((x+x')/2) + κ1((x-x')/2)]κ2(x-x') (PSD per draw)."""
    rng = np.random.default_rng(1)
    X = jnp.asarray(rng.normal(size=(25, 1)))
    spec = G.make_spec(
        2,
        1,
        n_components=1,
        n_per_component=3000,
        locally_stationary=True,
        n_components_v=1,
        n_per_component_v=60,
    )
    params = {
        "weights": jnp.ones(1),
        "mu": jnp.zeros((1, 1)),
        "sigma": jnp.full((1, 1), 1.5),
        "v_weights": jnp.ones(1),
        "v_mu": jnp.zeros((1, 1)),
        "v_sigma": jnp.full((1, 1), 0.4),
    }
    Psi = G.spectral_features(X, params, spec)
    x = np.asarray(X[:, 0])
    k1 = lambda u: np.exp(-0.5 * (0.4 * u) ** 2)  # noqa: E731
    k2 = np.exp(-0.5 * (1.5 * (x[:, None] - x[None, :])) ** 2)
    exact = 0.5 * (k1((x[:, None] + x[None, :]) / 2) + k1((x[:, None] - x[None, :]) / 2)) * k2
    K = np.asarray(Psi @ Psi.T)
    assert np.abs(K - exact).mean() < 0.02
    assert np.linalg.eigvalsh(K).min() > -1e-8


def test_stick_breaking_sums_to_one():
    w = G.stick_breaking(jnp.array([0.3, 0.5, 0.9]))
    assert np.isclose(float(w.sum()), 1.0) and np.all(np.asarray(w) > 0)
    assert np.allclose(w[:2], [0.3, 0.35])


# --------------------------------------------------------------------------- evidence
def test_nig_evidence_equals_dense_student_t():
    """Eq. (10) equals the dense marginal y ~ t_{2a0}(0, (b0/a0)(I + Φ Λ0⁻¹ Φᵀ))."""
    rng = np.random.default_rng(2)
    n, P = 12, 5
    Phi = jnp.asarray(rng.normal(size=(n, P)))
    y = jnp.asarray(rng.normal(size=n))
    prec = jnp.asarray(rng.uniform(0.5, 3.0, size=P))
    a0, b0 = 2.0, 1.5
    lm, _ = G.nig_log_marginal_diag(feature_stats(Phi, y), prec, a0, b0)
    P_ = np.asarray(Phi)
    S = (b0 / a0) * (np.eye(n) + P_ @ np.diag(1 / np.asarray(prec)) @ P_.T)
    ref = stats.multivariate_t(loc=np.zeros(n), shape=S, df=2 * a0).logpdf(np.asarray(y))
    assert np.isclose(float(lm), ref, rtol=1e-10, atol=1e-8)


def test_trend_precision_quadratic_columns_unit_normal():
    """poly2 basis [1, x, x²]: vague precision on 1 and x, N(0, 1) on the d squares."""
    from bayeskern.estimators.gabasr import mean_basis

    d = 3
    Z = np.random.default_rng(4).normal(size=(6, d))
    p_lin, p_quad = mean_basis(Z, "linear").shape[1], mean_basis(Z, "poly2").shape[1]
    assert np.all(G.trend_precision(p_lin, d) == G.TREND_PRECISION)
    prec = G.trend_precision(p_quad, d)
    assert np.all(prec[: 1 + d] == G.TREND_PRECISION) and np.all(prec[1 + d :] == 1.0)
    assert GaBaSRRegressor().mean_function == "poly2"
    assert GaBaSRClassifier().mean_function == "linear"


def test_nig_loo_equals_refit():
    """Rank-one LOO formula equals the NIG predictive refitted without the row."""
    rng = np.random.default_rng(3)
    n, P = 15, 4
    Phi = jnp.asarray(rng.normal(size=(n, P)))
    y = jnp.asarray(rng.normal(size=n))
    prec = jnp.full(P, 0.7)
    post = nig_posterior(feature_stats(Phi, y), prec, G.A0, G.B0)
    loo = np.asarray(G.nig_loo_logpdf(Phi, y, post))
    for i in (0, 7, 14):
        keep = np.arange(n) != i
        p_i = nig_posterior(feature_stats(Phi[keep], y[keep]), prec, G.A0, G.B0)
        v = np.linalg.solve(np.asarray(p_i.L), np.asarray(Phi[i]))
        scale = np.sqrt(p_i.b / p_i.a * (1 + v @ v))
        ref = stats.t.logpdf(float(y[i]), 2 * float(p_i.a), float(Phi[i] @ p_i.w), float(scale))
        assert np.isclose(loo[i], ref, rtol=1e-8)


# --------------------------------------------------------------------------- kernel object
def test_spectral_mixture_kernel_properties():
    w, mu, sig = _mixture(1)
    k = SpectralMixture(2, w, mu, sig)
    X = np.linspace(-3, 3, 30)[:, None]
    K = np.asarray(k(X))
    assert np.allclose(K, K.T) and np.linalg.eigvalsh(K).min() > -1e-10
    assert np.allclose(np.diag(K), 1.0)
    # one component at zero frequency is an RBF of length-scale 1/σ
    rbf = SpectralMixture(1, [1.0], [[0.0]], [[0.5]])
    assert np.allclose(rbf(X), np.exp(-0.5 * (0.5 * (X - X.T)) ** 2))
    # the symmetrized density integrates to the total weight
    grid = np.linspace(-10, 10, 20001)
    dens = mixture_density(grid, np.asarray(w), np.asarray(mu[:, 0]), np.asarray(sig[:, 0]))
    assert np.isclose(np.trapezoid(dens, grid), 1.0, atol=1e-6)
    # Bochner: the density's cosine transform is the kernel
    tau = 0.8
    assert np.isclose(
        np.trapezoid(dens * np.cos(grid * tau), grid),
        float(spectral_mixture_kernel(jnp.array([tau]), w, mu, sig)),
        atol=1e-6,
    )


@pytest.mark.slow
def test_spectral_mixture_in_gp_regressor():
    from bayeskern.estimators.gp import GPRegressor

    rng = np.random.default_rng(4)
    X = np.sort(rng.uniform(0, 10, 40))[:, None]
    y = np.sin(2 * np.pi * X[:, 0] / 2.5) + 0.1 * rng.normal(size=40)
    gp = GPRegressor(
        kernel=SpectralMixture(2),
        num_warmup=20,
        num_samples=20,
        num_chains=1,
        progress_bar=False,
        random_state=0,
    ).fit(X, y)
    assert np.sqrt(np.mean((gp.predict(X) - y) ** 2)) < 0.5


# --------------------------------------------------------------------------- estimators
def test_robust_scaler_and_frequency_scale():
    X = np.c_[np.arange(100.0), np.r_[np.zeros(99), 1e6]]
    sc = RobustScaler1.fit(X)
    Z = sc.transform(X)
    assert np.abs(Z).max() <= sc.clip and np.isclose(np.ptp(Z[:, 0]), 99 / (49.5 / 1.349))
    f = frequency_scale(np.arange(10.0)[:, None] / 2)
    assert np.isclose(f[0], 2 * np.pi)


@pytest.mark.parametrize(
    "kw, msg",
    [
        (dict(n_features=0), "n_features"),
        (dict(n_components=0), "n_components"),
        (dict(sampler="hmc"), "sampler"),
        (dict(mean_function="cubic"), "mean_function"),
        (dict(model="gp"), "model"),
        (dict(trend_degree=-1), "trend_degree"),
        (dict(num_map_starts=0), "num_map_starts"),
        (dict(model="exact", sampler="gibbs"), "model='exact'"),
        (dict(sampler="gibbs", chain_method="vectorized"), "chain_method='vectorized'"),
        (dict(sampler="gibbs", chain_method="parallel"), "chain_method='parallel'"),
        (dict(num_samples=0), "num_samples"),
    ],
)
def test_bad_parameters(kw, msg):
    X, y = np.random.default_rng(0).normal(size=(10, 1)), np.arange(10.0)
    with pytest.raises(ValueError, match=msg):
        GaBaSRRegressor(**kw).fit(X, y)


def test_bad_data():
    X = np.random.default_rng(0).normal(size=(10, 2))
    with pytest.raises(ValueError, match="NaN|infinity"):
        GaBaSRRegressor(**TINY).fit(np.r_[X[:-1], [[np.nan, 0]]], np.arange(10.0))
    with pytest.raises(ValueError, match="single class"):
        GaBaSRClassifier(**TINY).fit(X, np.ones(10))


@pytest.fixture(scope="module")
def sm_data():
    """1-D series from a known 2-component spectral density (RBF + quasi-periodic at ω=6)."""
    rng = np.random.default_rng(5)
    X = np.sort(rng.uniform(0, 8, 150))[:, None]
    k = SpectralMixture(2, [0.4, 0.6], [[0.0], [6.0]], [[0.5], [0.15]])
    K = np.asarray(k(X)) + 1e-8 * np.eye(150)
    y = np.linalg.cholesky(K) @ rng.normal(size=150) + 0.05 * rng.normal(size=150)
    return X, y


@pytest.mark.slow
def test_regressor_recovers_two_component_density(sm_data):
    X, y = sm_data
    est = GaBaSRRegressor(
        **{
            **TINY,
            "n_features": 32,
            "n_components": 3,
            "map_steps": 30,
            "num_warmup": 40,
            "num_samples": 40,
            "model": "features",
        }
    ).fit(X, y)
    grid, mean, lo, hi = est.spectral_density(np.linspace(0.5, 12, 300))
    # the periodic line (ω = 6 rad per unit of x) is the highest peak away from zero
    assert abs(grid[np.argmax(mean)] - 6.0) < 0.5
    assert np.all(lo <= mean + 1e-12) and np.all(mean <= hi + 1e-12)
    pred = est.predictive(X)
    assert pred.mean().shape == (150,) and np.all(pred.std() > 0)
    lo90, hi90 = est.predict_interval(X, 0.9)
    assert np.mean((y >= lo90) & (y <= hi90)) > 0.7
    assert est.idata_.log_likelihood["y"].shape[-1] == 150
    assert set(est.convergence_vars_) >= {"log_marginal", "noise", "snr", "f_probe"}
    draws = est.sample_posterior_predictive(X[:5], n_draws=7)
    assert draws.shape == (7, 5)


@pytest.mark.slow
def test_regressor_same_seed_same_numbers(sm_data):
    X, y = sm_data
    X, y = X[:40], y[:40]
    p1 = GaBaSRRegressor(**TINY, model="features").fit(X, y).predict(X[:5])
    p2 = GaBaSRRegressor(**TINY, model="features").fit(X, y).predict(X[:5])
    assert np.array_equal(p1, p2)


@pytest.mark.slow
def test_classifier_small():
    rng = np.random.default_rng(6)
    X = rng.normal(size=(80, 2))
    y = (X[:, 0] ** 2 + X[:, 1] ** 2 < 1.4).astype(int)
    clf = GaBaSRClassifier(**{**TINY, "n_features": 16}).fit(X, y)
    p = clf.predict_proba(X)
    assert p.shape == (80, 2) and np.allclose(p.sum(1), 1)
    assert np.mean(clf.predict(X) == y) > 0.75
    assert clf.sample_posterior_predictive(X[:3], n_draws=4).shape == (4, 3)
    # the large-data path: MAP spectral parameters, NUTS on the weights
    clf2 = GaBaSRClassifier(
        **{**TINY, "n_features": 16, "full_bayes_max_n": 10, "sampler": "nuts"}
    ).fit(X, y)
    assert not clf2.full_bayes_ and np.mean(clf2.predict(X) == y) > 0.75


@pytest.mark.slow
def test_locally_stationary_runs(sm_data):
    X, y = sm_data
    est = GaBaSRRegressor(**{**TINY, "locally_stationary": True, "n_features": 16}).fit(X, y)
    assert np.isfinite(est.predict(X)).all()
    assert "v_mu" in est.idata_.posterior


def test_default_sampler_resolves_per_task():
    """``sampler="auto"``: NUTS (exact model) for regression, Gibbs for classification."""
    reg, clf = GaBaSRRegressor(), GaBaSRClassifier()
    assert reg.sampler == clf.sampler == "auto"
    reg._check_params()
    clf._check_params()
    assert (reg.sampler_, clf.sampler_) == ("nuts", "gibbs")
    clf.set_params(sampler="nuts")._check_params()
    assert clf.sampler_ == "nuts"


@pytest.mark.slow
def test_gibbs_sampler_wired(sm_data):
    X, y = sm_data
    est = GaBaSRRegressor(
        sampler="gibbs",
        n_features=16,
        num_warmup=2,
        num_samples=3,
        num_chains=1,
        progress_bar=False,
        random_state=0,
    ).fit(X, y)
    pred = est.predictive(X[:10])
    assert pred.loc.shape == (3, 10)
    grid, mean, lo, hi = est.spectral_density(np.linspace(0, 10, 50))
    assert np.all(np.isfinite(mean))


@pytest.mark.slow
@parametrize_with_checks(
    [GaBaSRRegressor(**TINY), GaBaSRRegressor(**TINY, model="features"), GaBaSRClassifier(**TINY)],
    expected_failed_checks=lambda est: {},
)
def test_sklearn_contract(estimator, check):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        check(estimator)


def test_random_feature_predictions_compile_once(sm_data, monkeypatch):
    # the random-feature regressor's and the NUTS classifier's per-draw predictions are one
    # function per fit: a second predict of the same shape traces nothing
    X, y = sm_data
    traces = []
    for name in ("regression_predictive", "classification_logits"):
        original = getattr(G, name)
        monkeypatch.setattr(G, name, lambda *a, _f=original, **k: traces.append(1) or _f(*a, **k))
    reg = GaBaSRRegressor(**TINY, model="features").fit(X[:40], y[:40])
    clf = GaBaSRClassifier(**TINY, sampler="nuts").fit(X[:40], (y[:40] > 0).astype(int))
    for predict in (lambda Z: reg.predict(Z, return_std=True), clf.predict_proba):
        first = predict(X[40:47])
        n = len(traces)
        second = predict(X[47:54])
        assert len(traces) == n
        assert not np.allclose(first[0], second[0])


def test_auto_on_many_columns_above_the_exact_rows_warns_before_sampling():
    # more rows than the exact form takes and more columns than the basis: "auto" falls to
    # the random-feature model with NUTS, whose trajectories can reach the tree-depth limit
    # at every draw on many columns (hours), so the user is told before sampling
    rng = np.random.default_rng(0)
    X, y = rng.normal(size=(2001, 4)), rng.normal(size=2001)
    est = GaBaSRRegressor()
    est._check_params()
    Z, _ = est._setup(X)
    with pytest.warns(UserWarning, match=r"2001 rows x 4 columns .*tree-depth limit"):
        assert est._choose_model(Z, y) == "features"
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert est._choose_model(Z[:2000], y[:2000]) == "exact"  # the exact form's rows
        forced = GaBaSRRegressor(model="features")
        forced._check_params()
        assert forced._choose_model(Z, y) == "features"  # asked for: no warning
