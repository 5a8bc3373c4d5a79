"""Tests of GaBaSR's exact form: the collapsed spectral-mixture GP (``models/gabasr.py``).

Pena-Llamas et al. (2023): the random-feature kernel's expectation is the
spectral-mixture kernel; the exact model uses it with the trend and weights integrated out.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from bayeskern.models import gabasr as G
from scipy import stats

import bayeskern  # noqa: F401  (float64)
from bayeskern.estimators.gabasr import GaBaSRRegressor
from bayeskern.kernels.spectral import spectral_mixture_kernel

FAST = dict(
    num_warmup=20,
    num_samples=20,
    num_chains=1,
    num_map_starts=2,
    progress_bar=False,
    random_state=0,
)


def _params(d=1, K=3):
    return {
        "trend_amp": jnp.array([0.5, 0.3] + [0.2] * (d - 1) if d > 1 else [0.5, 0.3]),
        "amplitude": jnp.linspace(0.4, 0.9, K),
        "sigma0": jnp.full(d, 0.8),
        "mu": jnp.linspace(2.0, 5.0, K - 1),
        "sigma": jnp.linspace(0.1, 0.3, K - 1),
        "noise": jnp.asarray(0.2),
    }


def test_line_search_resolves_lines_among_many_irregular_rows():
    """Thousands of random inputs put the Nyquist-like frequency (pi / median gap) over a
    thousand resolutions up: the search grid must still resolve a line. Before the grid kept
    four points per resolution, 4 000 points over 3 000 resolutions put the first line 0.3
    resolution off."""
    from bayeskern.models import gabasr_setup as S

    rng = np.random.default_rng(0)
    x = rng.uniform(0.0, 10.0, size=(2000, 1))
    y = np.sin(2 * x[:, 0]) + 0.3 * np.sin(7 * x[:, 0]) + 0.2 * rng.normal(size=2000)
    Z, ys = (x - 5.0) / 2.5, (y - y.mean()) / y.std()
    res = 2 * np.pi / np.ptp(Z)
    assert S.frequency_scale(Z)[0] > S.MAX_LINE_CYCLES * res  # the band is capped
    _, spec, _ = S.exact_setup(
        Z, ys, trend_degree="auto", n_components="auto", freq_scale=S.frequency_scale(Z)
    )
    np.testing.assert_allclose(np.sort(np.asarray(spec.peaks)), [5.0, 17.5], atol=0.2 * res)
    # the grid itself: a band of 3 000 resolutions searched with the default 4 000 points
    band = dict(w_min=2 * res, w_max=3000 * res)
    pk = np.sort(G.significant_peaks(Z[:, 0], ys, **band))
    np.testing.assert_allclose(pk, [5.0, 17.5], atol=0.2 * res)


def test_significant_peaks_finds_lines_and_rejects_noise():
    rng = np.random.default_rng(0)
    x = np.sort(rng.uniform(0, 20, 200))
    band = dict(w_min=2 * 2 * np.pi / 20, w_max=np.pi / np.median(np.diff(x)))
    y = np.sin(2 * np.pi * x / 3) + 0.5 * np.sin(2 * np.pi * x / 0.7) + 0.3 * rng.normal(size=200)
    pk = np.sort(G.significant_peaks(x, y, **band)) / (2 * np.pi)
    assert len(pk) == 2 and np.allclose(pk, [1 / 3, 1 / 0.7], rtol=0.02)
    assert len(G.significant_peaks(x, rng.normal(size=200), **band)) == 0
    # a random walk (red noise) is smooth variation, not a line
    assert len(G.significant_peaks(x, np.cumsum(rng.normal(size=200)), **band)) == 0
    assert len(G.significant_peaks(x[:5], y[:5], **band)) == 0
    assert len(G.significant_peaks(x, np.zeros(200), **band)) == 0


def test_significant_peaks_keeps_only_interior_maxima_away_from_zero_frequency():
    """A line is a local maximum of the periodogram at least ``LINE_SEPARATION`` resolutions
    from zero frequency (the smooth component's centre) and from the other lines. Before,
    the 2.5 cycles of a single wave over the span (the motorcycle data's bump) were
    anchored as a line beside the smooth component, and the flank of a line below the band
    was kept at the band's edge."""
    from bayeskern.models.gabasr_spectrum import LINE_SEPARATION

    assert LINE_SEPARATION == 3
    rng = np.random.default_rng(0)
    x = np.sort(rng.uniform(0.0, 10.0, 200))
    res = 2 * np.pi / np.ptp(x)
    noise = 0.3 * rng.normal(size=200)
    band = dict(w_min=2 * res, w_max=np.pi / np.median(np.diff(x)))
    # 2.5 cycles over the span: a strong local maximum, but too close to zero frequency
    assert len(G.significant_peaks(x, np.sin(2.5 * res * x) + noise, **band)) == 0
    # 4 cycles: a line, found where it is
    pk = G.significant_peaks(x, np.sin(4 * res * x) + noise, **band)
    np.testing.assert_allclose(pk, [4 * res], atol=0.2 * res)
    # a line half a resolution below the band: its flank is highest at the band's lower
    # edge (there the old search kept a line), yet no line is in the band
    flank = dict(w_min=12 * res, w_max=band["w_max"])
    assert len(G.significant_peaks(x, np.sin(11.5 * res * x) + noise, **flank)) == 0
    pk = G.significant_peaks(x, np.sin(11.5 * res * x) + np.sin(20 * res * x) + noise, **flank)
    np.testing.assert_allclose(pk, [20 * res], atol=0.2 * res)


def test_exact_covariance_equals_dense_kernel():
    rng = np.random.default_rng(1)
    for d in (1, 2):
        X = rng.normal(size=(12, d))
        B = G.polynomial_basis(X, 2)
        p = _params(d)
        p["trend_amp"] = jnp.linspace(0.2, 0.6, B.shape[1])
        K = np.asarray(jax.jit(G.exact_covariance)(p, G.prepare_exact(X, B)))
        tau = X[:, None, :] - X[None, :, :]
        a2 = np.asarray(p["amplitude"]) ** 2
        means = np.zeros((3, d))
        means[1:, 0] = p["mu"]
        scales = np.zeros((3, d))
        scales[0] = p["sigma0"]
        scales[1:, 0] = p["sigma"]
        dense = (
            np.asarray(spectral_mixture_kernel(tau, a2, means, scales))
            + (B * np.asarray(p["trend_amp"]) ** 2) @ B.T
            + (0.2**2 + 1e-6) * np.eye(12)
        )
        np.testing.assert_allclose(K, dense, rtol=1e-10, atol=1e-12)
        # the cross-covariance at the training points is the same matrix without noise
        Ks, kss = jax.jit(G.exact_cross)(
            p, jnp.asarray(X), jnp.asarray(B), jnp.asarray(X), jnp.asarray(B)
        )
        np.testing.assert_allclose(np.asarray(Ks), dense - (0.04 + 1e-6) * np.eye(12), atol=1e-10)
        np.testing.assert_allclose(np.asarray(kss), np.diag(np.asarray(Ks)), atol=1e-10)
        # between other points, far out (large angles mu x): the angle-difference identity of
        # spectral_mixture_cross against the kernel of the differences
        Xn = 5.0 * rng.normal(size=(7, d))
        np.testing.assert_allclose(
            np.asarray(G.spectral_mixture_cross(jnp.asarray(5.0 * X), jnp.asarray(Xn), p)),
            np.asarray(G.spectral_mixture_terms(jnp.asarray(5.0 * X[:, None] - Xn[None]), p)),
            rtol=1e-10,
            atol=1e-12,
        )


def test_exact_loo_equals_refit():
    rng = np.random.default_rng(2)
    X = np.sort(rng.uniform(0, 3, 15))[:, None]
    y = np.sin(3 * X[:, 0]) + 0.1 * rng.normal(size=15)
    B = G.polynomial_basis(X, 1)
    p = _params()
    loo = np.asarray(jax.jit(G.exact_loo)(p, G.prepare_exact(X, B), jnp.asarray(y)))
    predictive = jax.jit(G.exact_predictive)  # one compilation for the three refits
    for i in (0, 7, 14):
        keep = np.arange(15) != i
        mu, sd = predictive(
            p,
            G.prepare_exact(X[keep], B[keep]),
            jnp.asarray(X[keep]),
            jnp.asarray(B[keep]),
            jnp.asarray(y[keep]),
            jnp.asarray(X[i : i + 1]),
            jnp.asarray(B[i : i + 1]),
        )
        # the noise jitter 1e-6 sits in K_y but not in the predictive variance
        assert np.isclose(loo[i], stats.norm.logpdf(y[i], float(mu[0]), float(sd[0])), atol=1e-4)


def test_fitted_rows_predictive_equals_predictive_at_the_training_inputs():
    # exact_fitted_rows: the predictive at Xnew = X from the LOO's one factorization
    rng = np.random.default_rng(4)
    X = np.sort(rng.uniform(0, 3, 15))[:, None]
    y = np.sin(3 * X[:, 0]) + 0.1 * rng.normal(size=15)
    B = G.polynomial_basis(X, 1)
    prepared, jX, jB, jy = G.prepare_exact(X, B), jnp.asarray(X), jnp.asarray(B), jnp.asarray(y)
    for noise in (0.2, 1e-3):  # the second: predictive variance close to zero at the data
        p = {**_params(), "noise": jnp.asarray(noise)}
        loo, mean, sd = jax.jit(G.exact_fitted_rows)(p, prepared, jy)
        mu, s = jax.jit(G.exact_predictive)(p, prepared, jX, jB, jy, jX, jB)
        np.testing.assert_allclose(np.asarray(mean), np.asarray(mu), rtol=1e-7, atol=1e-9)
        np.testing.assert_allclose(np.asarray(sd), np.asarray(s), rtol=1e-5, atol=1e-7)
        np.testing.assert_allclose(
            np.asarray(loo), np.asarray(jax.jit(G.exact_loo)(p, prepared, jy))
        )


@pytest.fixture(scope="module")
def sine_fit():
    rng = np.random.default_rng(5)
    x = np.arange(60) / 12.0
    y = np.sin(2 * np.pi * x) + 0.2 * rng.normal(size=60)
    return x, GaBaSRRegressor(**FAST).fit(x[:, None], y)


def test_posterior_predictive_group_from_the_fitted_rows(sine_fit):
    # the fit's posterior_predictive group (from exact_fitted_rows) is what the generic
    # path (predictive() at the training inputs, in row blocks) draws with the same seed
    x, est = sine_fit
    assert not hasattr(est, "_fitted_rows_predictive")  # handed over, not stored
    pp = np.asarray(est.idata_.posterior_predictive["y"])
    post = est.idata_.posterior
    draws = np.arange(post.sizes["chain"] * post.sizes["draw"])
    generic = est._predictive_group(x[:, None], draws, est._seed(), stream=2)
    np.testing.assert_allclose(pp, generic, rtol=1e-6, atol=1e-6)


def test_repeated_predictions_compile_once(sine_fit, monkeypatch):
    # the per-draw predictive is mapped by one compiled program per fitted estimator and
    # shape: a second predict (new rows, same count) traces nothing and gives the same
    # numbers as a fresh estimator's
    x, est = sine_fit
    traces, original = [], G.exact_predictive

    def counted(*args):
        traces.append(1)
        return original(*args)

    monkeypatch.setattr(G, "exact_predictive", counted)
    est.__dict__.pop("_cache", None)  # the fitted estimator's compiled maps, built anew
    first = est.predict(x[:7, None] + 5.0, return_std=True)
    n = len(traces)
    assert n >= 1
    second = est.predict(x[7:14, None] + 5.0, return_std=True)
    assert len(traces) == n
    assert not np.allclose(first[0], second[0])
    np.testing.assert_array_equal(est.predict(x[:7, None] + 5.0, return_std=True), first)


@pytest.mark.parametrize(
    "x",
    [
        np.arange(425.0),  # a monthly grid
        np.sort(np.random.default_rng(0).uniform(0, 7, 60)),  # irregular
        np.repeat(np.arange(12.0) ** 1.5, 3),  # repeated values, growing spacing
    ],
)
def test_grid_sigma0_prior_puts_its_tail_beyond_the_span_and_the_spacing(x):
    for Z in (x[:, None], (x[:, None] - 3.0) / 2.0):  # the bounds move with the units
        (a,), (b,) = G.grid_sigma0_prior(Z)
        s, g = np.ptp(Z), np.diff(np.unique(Z)).min()
        tail = G.GRID_PRIOR_TAIL
        assert stats.gamma.cdf(1 / s, a, scale=1 / b) == pytest.approx(tail, rel=1e-6)
        assert stats.gamma.sf(1 / g, a, scale=1 / b) == pytest.approx(tail, rel=1e-6)


def test_grid_sigma0_prior_degenerate_columns_and_bad_tail():
    # two distinct values: the spacing is the span, given the ratio 2; columns independent
    Z = np.c_[np.arange(10.0), np.arange(10.0) % 2]
    ab = G.grid_sigma0_prior(Z)
    assert ab.shape == (2, 2)
    a, b = ab[:, 1]
    assert stats.gamma.cdf(1.0, a, scale=1 / b) == pytest.approx(G.GRID_PRIOR_TAIL, rel=1e-6)
    assert stats.gamma.sf(2.0, a, scale=1 / b) == pytest.approx(G.GRID_PRIOR_TAIL, rel=1e-6)
    np.testing.assert_array_equal(ab[:, :1], G.grid_sigma0_prior(Z[:, :1]))
    # a constant column: span 1, ratio 2 (finite, whatever the length-scale does there)
    np.testing.assert_array_equal(
        G.grid_sigma0_prior(np.full((5, 1), 3.0)), G.grid_sigma0_prior(Z[:2, :1])
    )
    with pytest.raises(ValueError, match="tail must be in"):
        G.grid_sigma0_prior(Z, tail=0.5)


def test_sigma0_prior_is_the_gamma_where_given_else_the_log_normal():
    from numpyro.handlers import seed, trace

    spec = G.ExactSpec(jnp.array([2.0]), 0.5, jnp.array([-0.3]))
    gamma = jnp.array([[1.5], [0.2]])
    for s, logpdf in (
        (spec, lambda v: stats.lognorm.logpdf(v, G.SIGMA0_PRIOR_SD, scale=np.exp(-0.3))),
        (spec._replace(sigma0_gamma=gamma), lambda v: stats.gamma.logpdf(v, 1.5, scale=5.0)),
    ):
        site = trace(seed(G.sample_exact, 0)).get_trace(s, 1, 2)["sigma0"]
        v = np.asarray(site["value"])
        got = float(site["fn"].log_prob(site["value"]))
        assert got == pytest.approx(float(np.sum(logpdf(v))), rel=1e-10)


def test_reparameterized_trend_scales_and_means_keep_the_prior():
    """Softplus trend scales and mean offsets sample the model's prior: c ~ HalfNormal(1),
    mu ~ N(peaks, res) independent of sigma; the raw sites' densities carry the Jacobians."""
    from numpyro.handlers import seed, substitute, trace
    from numpyro.infer import Predictive

    spec = G.ExactSpec(jnp.array([2.0, 5.0]), 0.5, jnp.array([-0.3]))
    draws = Predictive(G.sample_exact, num_samples=4000)(jax.random.PRNGKey(1), spec, 1, 4)
    c = np.asarray(draws["trend_amp"]).ravel()
    assert stats.kstest(c, stats.halfnorm.cdf).pvalue > 0.01
    z = (np.asarray(draws["mu"]) - np.array([2.0, 5.0])) / 0.5
    assert stats.kstest(z.ravel(), stats.norm.cdf).pvalue > 0.01
    rho = stats.spearmanr(z[:, 0], np.asarray(draws["sigma"])[:, 0]).statistic
    assert abs(rho) < 0.05
    # pointwise: the raw densities are the plain ones times |d(plain)/d(raw)|
    u, off, sig = jnp.array([-2.0, 0.1, 1.0, 3.0]), jnp.array([0.7, -1.2]), jnp.array([0.3, 2.0])
    tr = trace(
        substitute(seed(G.sample_exact, 0), {"trend_amp_raw": u, "mu_offset": off, "sigma": sig})
    ).get_trace(spec, 1, 4)
    sp = np.log1p(np.exp(np.asarray(u)))
    want = stats.halfnorm.logpdf(sp) - np.log1p(np.exp(-np.asarray(u)))
    got = float(tr["trend_amp_raw"]["fn"].log_prob(u))
    assert got == pytest.approx(want.sum(), rel=1e-10)
    mu = np.array([2.0, 5.0]) + np.asarray(sig) * np.asarray(off)
    np.testing.assert_allclose(np.asarray(tr["mu"]["value"]), mu, rtol=1e-14)
    want = stats.norm.logpdf(mu, [2.0, 5.0], 0.5) + np.log(np.asarray(sig))
    assert float(tr["mu_offset"]["fn"].log_prob(off)) == pytest.approx(want.sum(), rel=1e-10)
    # several input columns keep the trend scales on the log scale (a plain sample site)
    site = trace(seed(G.sample_exact, 0)).get_trace(spec, 2, 3)["trend_amp"]
    fn = site["fn"]
    while hasattr(fn, "base_dist"):
        fn = fn.base_dist
    assert site["type"] == "sample" and type(fn).__name__ == "HalfNormal"


def test_default_regressor_is_exact_and_anchored(tmp_path):
    rng = np.random.default_rng(3)
    x = np.arange(120) / 12.0
    y = 0.3 * x + np.sin(2 * np.pi * x) + 0.2 * rng.normal(size=120)
    est = GaBaSRRegressor(**FAST).fit(x[:, None], y)
    assert est.model_ == "exact" and est.trend_degree_ == 3
    # one column, exact: the grid-bounded prior of the standardized inputs, kept by a saved run
    gamma = G.grid_sigma0_prior(est.x_scaler_.transform(x[:, None]))
    np.testing.assert_array_equal(np.asarray(est.exact_spec_.sigma0_gamma), gamma)
    bayeskern.save_run(est, tmp_path / "run")
    again = bayeskern.load_run(tmp_path / "run")
    np.testing.assert_array_equal(np.asarray(again.exact_spec_.sigma0_gamma), gamma)
    # one significant line at 1 cycle per unit of x, plus the zero-frequency component
    assert est.n_components_ == 2
    peak = float(est.exact_spec_.peaks[0]) / (2 * np.pi * est.x_scaler_.scale[0])
    assert abs(peak - 1.0) < 0.02
    pred = est.predictive(x[:, None] + 1.0)
    assert pred.loc.shape == (20, 120) and np.all(pred.scale > 0)
    assert est.idata_.log_likelihood["y"].shape[-1] == 120
    grid, mean, lo, hi = est.spectral_density(np.linspace(0.5, 10, 50))
    assert np.all(np.isfinite(mean)) and np.all(lo <= mean + 1e-12)
    # same seed, same numbers
    assert np.array_equal(
        est.predict(x[:5, None]), GaBaSRRegressor(**FAST).fit(x[:, None], y).predict(x[:5, None])
    )


def test_exact_multicolumn_and_constant_series():
    rng = np.random.default_rng(4)
    X = rng.normal(size=(40, 3))
    y = X[:, 0] + np.sin(2 * X[:, 1]) + 0.1 * rng.normal(size=40)
    est = GaBaSRRegressor(**FAST).fit(X, y)
    assert est.model_ == "exact" and est.n_components_ == 1 and est.trend_degree_ == 1
    assert est.exact_spec_.sigma0_gamma is None  # several columns: the log-normal prior
    assert np.corrcoef(est.predict(X), y)[0, 1] > 0.9
    # a constant series falls back to the zero-frequency component and predicts the constant
    est = GaBaSRRegressor(**FAST).fit(X[:20, :1], np.full(20, 3.0))
    assert est.n_components_ == 1 and np.allclose(est.predict(X[:3, :1]), 3.0, atol=1e-3)


@pytest.mark.parametrize("n", [2, 5])
def test_exact_too_few_rows(n):
    X = np.arange(float(n))[:, None]
    est = GaBaSRRegressor(**FAST).fit(X, np.sin(X[:, 0]))
    assert est.n_components_ == 1 and np.all(np.isfinite(est.predict(X)))
