"""GaBaSR's spectral-mixture GP on a Hilbert-space basis (``models/gabasr_hsgp.py``).

Every quantity of the basis form is checked against the exact form it approximates
(``models/gabasr.py``: the spectral-mixture kernel of Wilson & Adams 2013, GaBaSR's exact
model), and the estimator's plumbing (``GaBaSRRegressor(model="hsgp")``) end to end.
"""

import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from bayeskern.models import gabasr as G
from bayeskern.models import gabasr_hsgp as GH
from bayeskern.models.hsgp import collapsed_log_marginal
from scipy import stats

import bayeskern  # noqa: F401  (float64)
from bayeskern.estimators.gabasr import GaBaSRRegressor

FAST = dict(
    num_warmup=20,
    num_samples=20,
    num_chains=1,
    num_map_starts=2,
    progress_bar=False,
    random_state=0,
)


def _params(sigma=(0.3, 0.5)):
    return {
        "trend_amp": jnp.array([0.5, 0.3, 0.1, 0.05]),
        "amplitude": jnp.array([0.6, 0.8, 0.4]),
        "sigma0": jnp.array([1.5]),
        "mu": jnp.array([6.0, 12.0]),
        "sigma": jnp.asarray(sigma),
        "noise": jnp.asarray(0.2),
    }


def _spec(res=2 * np.pi / 2.0):
    return G.ExactSpec(jnp.array([6.0, 12.0]), float(res), jnp.zeros(1))


def test_mixture_density_is_the_fourier_transform_of_the_kernel():
    # k(tau) = (1/pi) int_0^inf S(w) cos(w tau) dw for a density symmetric in w
    p = _params()
    w = np.linspace(0.0, 40.0, 400001)
    S = np.asarray(GH.mixture_density(jnp.asarray(w)[:, None], p))
    for tau in (0.0, 0.3, 1.1, 2.5):
        k = np.trapezoid(S * np.cos(w * tau), w) / np.pi
        exact = float(G.spectral_mixture_terms(jnp.array([[tau]]), p)[0])
        assert k == pytest.approx(exact, rel=1e-7, abs=1e-10)


@pytest.mark.parametrize("sigma", [1e-4, 0.05, 0.5])
def test_cells_keep_the_variance_of_a_line_of_any_width(sigma):
    # sum_j s_j * delta / pi is the stationary variance of the lines (the cells start at
    # delta / 2, so the smooth component's density below that is not in the sum: no line)
    Z = np.linspace(-1.0, 1.0, 50)[:, None]
    basis = GH.choose_mixture_basis(Z, _spec())
    p = _params((sigma, sigma))
    p["amplitude"] = jnp.array([0.0, 0.8, 0.4])
    s = np.asarray(GH.binned_density(p, basis))
    delta = np.pi / (2 * basis.L[0])
    assert np.sum(s) * delta / np.pi == pytest.approx(0.8**2 + 0.4**2, rel=1e-6)
    # point evaluation at the basis frequencies misses a line between them
    if sigma < 1e-3:
        point = np.asarray(GH.mixture_density(basis.sqrt_eigenvalues(), p))
        assert np.sum(point) * delta / np.pi < 0.7 * (0.8**2 + 0.4**2)


def test_basis_covariance_and_evidence_approximate_the_exact_model():
    rng = np.random.default_rng(0)
    Z = np.sort(rng.uniform(-1, 1, 80))[:, None]
    y = np.sin(6 * Z[:, 0]) + 0.3 * np.sin(12 * Z[:, 0]) + 0.2 * rng.normal(size=80)
    B = G.polynomial_basis(Z, 3)
    basis = GH.choose_mixture_basis(Z, _spec())
    # lines at least twice as wide as the basis spacing pi / (2L) = 0.79: the regime of the
    # Hilbert-space approximation (a narrower line's variance would vary with x)
    p = _params((1.6, 2.0))
    K = np.asarray(G.exact_covariance(p, G.prepare_exact(Z, B)))
    Phi = np.asarray(GH.features(Z, basis, 3))
    s = np.asarray(GH.prior_variances(p, basis))
    Kh = (Phi * s) @ Phi.T + (0.2**2 + 1e-6) * np.eye(80)
    assert np.max(np.abs(K - Kh)) < 1e-2 * np.max(np.diag(K))
    exact = stats.multivariate_normal(np.zeros(80), K).logpdf(y)
    st = GH.mixture_stats(Z, y, basis, 3, None)
    approx = float(collapsed_log_marginal(st, jnp.asarray(s), 0.2**2 + 1e-6))
    assert approx == pytest.approx(exact, abs=0.1)
    # chunked statistics equal the dense ones
    chunked = GH.mixture_stats(Z, y, basis, 3, 16)
    np.testing.assert_allclose(np.asarray(chunked.PtP), np.asarray(st.PtP), rtol=1e-10)


def test_mass_beyond_the_basis():
    Z = np.linspace(-1.0, 1.0, 50)[:, None]
    basis = GH.choose_mixture_basis(Z, _spec())
    top = np.pi * basis.m[0] / (2 * basis.L[0])
    draws = {k: np.asarray(v)[None] for k, v in _params().items()}
    assert GH.mass_beyond(draws, basis)[0] < 1e-6
    draws["sigma0"] = np.array([[10 * top]])  # the smooth component far beyond the basis
    a2 = draws["amplitude"][0] ** 2
    assert GH.mass_beyond(draws, basis)[0] == pytest.approx(a2[0] / a2.sum(), rel=0.1)


@pytest.fixture(scope="module")
def series():
    rng = np.random.default_rng(3)
    x = np.arange(240) / 24.0
    y = 0.3 * x + np.sin(2 * np.pi * x) + 0.2 * rng.normal(size=240)
    return x[:, None], y


@pytest.fixture(scope="module")
def fitted(series):
    X, y = series
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # 20 draws: not converged
        return GaBaSRRegressor(model="hsgp", **FAST).fit(X, y)


def test_basis_form_fits_and_predicts_like_the_exact_form_at_its_draws(fitted, series):
    X, y = series
    est = fitted
    assert est.model_ == "hsgp" and est.n_components_ == 2
    assert "basis" in est.model_description_
    # the basis is sized by the log-normal prior it samples (no prior bounded by the spacing)
    assert est.exact_spec_.sigma0_gamma is None
    Z = est.x_scaler_.transform(X)
    Zn = Z[::7] + 0.01
    loc, scale, _ = est._predict_std(Zn, est._Ztrain, est._ytrain)
    # the exact model's predictive at the same posterior draws
    B, Bn = (G.polynomial_basis(A, est.trend_degree_) for A in (Z, Zn))
    prepared = G.prepare_exact(Z, B)
    draws = est._draws(est._EXACT_SITES)
    exact = []
    for i in range(len(loc)):
        d = {k: jnp.asarray(v[i]) for k, v in draws.items()}
        exact.append(
            G.exact_predictive(
                d,
                prepared,
                jnp.asarray(Z),
                jnp.asarray(B),
                jnp.asarray(est._ytrain),
                jnp.asarray(Zn),
                jnp.asarray(Bn),
            )
        )
    m, sd = (np.array([np.asarray(e[j]) for e in exact]) for j in (0, 1))
    # per draw the basis's mean is within 0.11 of the exact one (largest over 80 draws of four
    # short chains); over the draws, as the predictive mixture averages them, within 0.05
    np.testing.assert_allclose(loc, m, atol=0.15)
    np.testing.assert_allclose(loc.mean(axis=0), m.mean(axis=0), atol=0.05)
    np.testing.assert_allclose(scale, sd, rtol=0.05)
    assert est.idata_.log_likelihood["y"].shape[-1] == 240
    assert est.idata_.posterior_predictive["y"].shape[-1] == 240
    assert 0.0 <= est.basis_mass_beyond_ <= 1.0


def test_basis_form_loo_equals_the_closed_form_of_its_covariance(fitted):
    est = fitted
    Phi = np.asarray(GH.features(est._Ztrain, est.hsgp_basis_, est.trend_degree_))
    draws = est._draws(est._EXACT_SITES)
    ll = np.asarray(est.idata_.log_likelihood["y"]).reshape(-1, 240)
    y = est._ytrain
    for i in (0, 11):
        d = {k: jnp.asarray(v[i]) for k, v in draws.items()}
        s = np.asarray(GH.prior_variances(d, est.hsgp_basis_))
        C = (Phi * s) @ Phi.T + (float(d["noise"]) ** 2 + 1e-6) * np.eye(240)
        Ci = np.linalg.inv(C)
        # R&W eq. 5.12
        mu = y - (Ci @ y) / np.diag(Ci)
        ref = stats.norm.logpdf(y, mu, np.sqrt(1 / np.diag(Ci))) - np.log(est.y_std_.scale)
        np.testing.assert_allclose(ll[i], ref, rtol=1e-6, atol=1e-6)


def test_basis_form_joint_save_load_and_box(fitted, series, tmp_path):
    X, y = series
    est = fitted
    Xn = X[::40] + 0.05
    mean, cov = est.predict(Xn, return_cov=True)
    pred = est.predictive(Xn)
    assert cov.shape == (len(Xn), len(Xn)) and np.allclose(cov, cov.T)
    np.testing.assert_allclose(mean, pred.mean(), rtol=1e-8)
    assert est.sample_y(Xn, 3, random_state=0).shape == (len(Xn), 3)
    path = tmp_path / "run"
    bayeskern.save_run(est, path)
    again = bayeskern.load_run(path)
    assert again.model_ == "hsgp" and again.hsgp_basis_ == est.hsgp_basis_
    np.testing.assert_allclose(again.predict(Xn), est.predict(Xn), rtol=1e-10)
    far = np.array([[X.max() + 3 * np.ptp(X)]])
    with pytest.warns(UserWarning, match="outside the box"):
        est.predict(far)


def test_auto_picks_the_basis_form_for_many_rows_in_few_columns():
    rng = np.random.default_rng(1)
    x = np.sort(rng.uniform(0, 10, 1000))
    y = np.sin(2 * np.pi * x) + 0.1 * rng.normal(size=1000)
    est = GaBaSRRegressor(**FAST)
    est._check_params()
    Z, _ = est._setup(x[:, None])
    assert est._choose_model(Z, (y - y.mean()) / y.std()) == "hsgp"
    assert est._choose_model(Z[:999], y[:999]) == "exact"
    X4 = rng.normal(size=(50, 4))
    est = GaBaSRRegressor(model="hsgp", **FAST)
    with pytest.raises(ValueError, match="at most 3 input columns"):
        est.fit(X4, X4[:, 0])
    with pytest.raises(ValueError, match="hsgp_boundary"):
        GaBaSRRegressor(hsgp_boundary=1.0).fit(x[:20, None], y[:20])
    with pytest.raises(ValueError, match="'model' parameter of GaBaSRRegressor must be"):
        GaBaSRRegressor(model="basis").fit(x[:20, None], y[:20])


def test_same_seed_same_numbers(fitted, series):
    X, y = series
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        again = GaBaSRRegressor(model="hsgp", **FAST).fit(X, y)
    assert np.array_equal(again.predict(X[:5]), fitted.predict(X[:5]))


def test_jitted_prior_variances_have_finite_gradients_at_extremes():
    Z = np.linspace(-1.0, 1.0, 50)[:, None]
    basis = GH.choose_mixture_basis(Z, _spec())

    def f(logs):
        p = _params()
        p["sigma"] = jnp.exp(logs)
        return jnp.sum(jnp.log(GH.prior_variances(p, basis) + 1e-300))

    for logs in (jnp.array([-12.0, -12.0]), jnp.array([3.0, 3.0])):
        g = jax.jit(jax.grad(f))(logs)
        assert np.all(np.isfinite(np.asarray(g)))


def test_periodogram_on_an_even_spread_of_rows_above_its_limit(monkeypatch):
    from bayeskern.models import gabasr_setup

    rng = np.random.default_rng(2)
    x = rng.uniform(0, 10, 4000)
    y = np.sin(2 * np.pi * x / 0.7) + 0.3 * rng.normal(size=4000)
    Z, ys = ((x - 5) / 3)[:, None], (y - y.mean()) / y.std()
    kw = dict(trend_degree="auto", n_components="auto", freq_scale=np.array([200.0]))
    full = gabasr_setup.exact_setup(Z, ys, **kw)[1].peaks
    monkeypatch.setattr(gabasr_setup, "PERIODOGRAM_ROWS", 600)
    spread = gabasr_setup.exact_setup(Z, ys, **kw)[1].peaks
    assert len(full) == len(spread) == 1
    assert float(spread[0]) == pytest.approx(float(full[0]), rel=2e-3)
    assert float(full[0]) == pytest.approx(2 * np.pi * 3 / 0.7, rel=2e-3)


def test_a_forced_basis_far_larger_than_the_exact_form_warns_before_sampling():
    """``model="hsgp"`` on two columns whose spectral peaks need thousands of basis functions
    (here 74 x 56 on 80 rows) would run for hours without a word; the fit says so, with the
    size, before its first gradient (the warning turned into an error stops it there)."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(80, 2))
    y = np.sin(X[:, 0]) + 0.1 * rng.normal(size=80)
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)
        with pytest.raises(UserWarning, match=r"has \d{4} functions.*can take hours"):
            GaBaSRRegressor(model="hsgp", **FAST).fit(X, y)
