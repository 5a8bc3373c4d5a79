"""The report's calibration without a hold-out (PSIS-LOO), its priors table, reliability bands,
and the reports of the classical estimators with their Bayesian twins."""

import copy
import warnings

import arviz as az
import jax.numpy as jnp
import numpy as np
import pytest
from bayeskern.models.gp import JITTER, kernel_matrix, theta_from_draw
from conftest import TINY
from scipy import stats
from sklearn.base import clone

import bayeskern as bk
from bayeskern import loo_calibration as lc
from bayeskern import report_calibration as rc
from bayeskern.plots.calibration import reliability_bands
from bayeskern.report import render_report
from bayeskern.report_classical import TWINS, bayesian_twin
from bayeskern.report_priors import latent_sites, model_call, prior_rows

TWO_CHAINS = dict(TINY, num_chains=2)


@pytest.fixture(scope="module")
def reg_data():
    rng = np.random.default_rng(1)
    X = rng.uniform(-3, 3, (18, 1))
    return X, np.sin(X[:, 0]) + 0.3 * rng.standard_normal(18)


@pytest.fixture(scope="module")
def gpr(reg_data):
    return bk.GPRegressor(random_state=0, **TWO_CHAINS).fit(*reg_data)


@pytest.fixture(scope="module")
def clf_data():
    rng = np.random.default_rng(2)
    X = rng.uniform(-3, 3, (40, 2))
    return X, np.where(X[:, 0] + 0.7 * rng.standard_normal(40) > 0, "yes", "no")


@pytest.fixture(scope="module")
def gpc(clf_data):
    X, y = clf_data
    return bk.GPClassifier(random_state=0, **TWO_CHAINS).fit(X[:30], y[:30])


def _drop_one(est, draw, X, y):
    """Exact leave-one-out predictive (data units) for one draw: n solves of size n - 1."""
    kernel, xs = est.kernel_, est.x_std_.scale
    Xs = jnp.asarray(est.x_std_.transform(X))
    ys = est.y_std_.transform(y)
    K = np.asarray(
        kernel_matrix(kernel, theta_from_draw(kernel, draw, xs), draw["amplitude"], Xs, Xs)
    ) + (float(draw["noise"]) ** 2 + JITTER) * np.eye(len(y))
    mu, var = np.empty(len(y)), np.empty(len(y))
    for i in range(len(y)):
        keep = np.arange(len(y)) != i
        k = K[keep, i]
        mu[i] = k @ np.linalg.solve(K[np.ix_(keep, keep)], ys[keep])
        var[i] = K[i, i] - k @ np.linalg.solve(K[np.ix_(keep, keep)], k)
    return mu * est.y_std_.scale + est.y_std_.mean, np.sqrt(var) * est.y_std_.scale


def _draw(est, s):
    post = est.idata_.posterior
    return {v: np.asarray(post[v]).reshape((-1,) + post[v].shape[2:])[s] for v in post.data_vars}


def test_gp_loo_components_equal_exact_leave_one_out(gpr, reg_data):
    X, y = reg_data
    loc, scale = lc.gp_loo_components(gpr)
    for s in (0, 7, 39):
        mu, sd = _drop_one(gpr, _draw(gpr, s), X, y)
        np.testing.assert_allclose(loc[s], mu, rtol=1e-8, atol=1e-10)
        np.testing.assert_allclose(scale[s], sd, rtol=1e-8)
    # the same components give the log-likelihood the estimator stored (its own eq. 5.12)
    ll = np.asarray(gpr.idata_.log_likelihood["y"]).reshape(loc.shape)
    np.testing.assert_allclose(stats.norm.logpdf(y, loc, scale), ll, atol=1e-8)


def test_loo_pit_at_one_hyperparameter_value_is_the_exact_loo_pit(gpr, reg_data):
    # a posterior of one repeated draw: PSIS weights are equal and the LOO predictive is the
    # closed-form leave-one-out Gaussian of that draw, computed here by n - 1 point solves
    X, y = reg_data
    est = copy.deepcopy(gpr)
    post, ll = est.idata_.posterior, est.idata_.log_likelihood
    for v in post.data_vars:
        post[v].values[:] = post[v].values[:1, :1]
    ll["y"].values[:] = ll["y"].values[:1, :1]
    cal = lc.loo_calibration(est)
    mu, sd = _drop_one(est, _draw(est, 0), X, y)
    u = stats.norm.cdf((y - mu) / sd)
    np.testing.assert_allclose(cal.pit, u, atol=1e-10)
    for p in (0.5, 0.9, 0.95):
        exact = np.mean(np.abs(u - 0.5) <= p / 2)
        assert cal.metrics[f"coverage_{int(p * 100)}"] == pytest.approx(exact)
        width = 2 * stats.norm.ppf(0.5 + p / 2) * sd.mean()
        assert cal.metrics[f"width_{int(p * 100)}"] == pytest.approx(width, rel=1e-8)
    assert cal.metrics["rmse"] == pytest.approx(np.sqrt(np.mean((y - mu) ** 2)))


def test_loo_pit_is_the_expectation_of_arviz_loo_pit(gpr, reg_data):
    # ArviZ's loo_pit is the weighted ECDF of one predictive draw per posterior draw; its
    # mean over predictive draws is the weighted mixture CDF computed here (same weights)
    X, y = reg_data
    cal = lc.loo_calibration(gpr)
    loc, scale = lc.gp_loo_components(gpr)
    rng = np.random.default_rng(0)
    reps = 300
    acc = np.zeros(len(y))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for _ in range(reps):
            y_hat = (loc + scale * rng.standard_normal(loc.shape)).T  # (n, samples)
            acc += np.asarray(az.loo_pit(gpr.idata_, y=y, y_hat=y_hat))
    _, k = lc.psis_log_weights(gpr.idata_)
    ok = k < 0.7  # ArviZ and bayeskern smooth identically; compare where PSIS is reliable
    np.testing.assert_allclose(acc[ok] / reps, cal.pit[ok], atol=0.05)
    assert np.all((cal.pit > 0) & (cal.pit < 1))


def test_weighted_quantile_inverts_the_weighted_cdf(rng):
    loc, scale = rng.normal(size=(30, 5)), rng.uniform(0.5, 2, (30, 5))
    lw = np.log(rng.dirichlet(np.ones(30), size=5).T)
    for q in (0.025, 0.5, 0.95):
        x = lc.weighted_mixture_quantile(q, loc, scale, lw)
        np.testing.assert_allclose(lc.weighted_mixture_cdf(x, loc, scale, lw), q, atol=1e-12)


def test_classification_loo_probabilities(gpc, clf_data):
    cal = lc.loo_calibration(gpc)
    y01 = (clf_data[1][:30] == "yes").astype(int)
    np.testing.assert_array_equal(cal.y, y01)
    ll = np.asarray(gpc.idata_.log_likelihood["y"]).reshape(cal.proba_draws.shape)
    np.testing.assert_allclose(np.where(y01 == 1, cal.proba_draws, 1 - cal.proba_draws), np.exp(ll))
    np.testing.assert_allclose(cal.proba, np.sum(np.exp(cal.log_weights) * cal.proba_draws, 0))
    assert set(cal.metrics) == {"accuracy", "auc", "brier", "log_loss", "ece"}
    # leaving a row out can only make the model less sure of that row's label (on average)
    p_in = gpc.predict_proba(clf_data[0][:30])[:, 1]
    assert np.mean(np.abs(cal.proba - y01)) >= np.mean(np.abs(p_in - y01)) - 1e-3


def test_report_without_holdout_uses_loo(gpr, gpc):
    texts = [render_report(est) for est in (gpr, gpc)]
    for text in texts:
        assert rc.LOO_HEADING in text
        assert "Calibration on training data" not in text
    assert "LOO-PIT histogram and ECDF" in texts[0]
    assert "LOO reliability diagram with posterior bands" in texts[1]


def test_pareto_k_warning():
    cal = lc.LOOCalibration(
        "classification",
        np.array([0, 1]),
        np.array([0.2, 0.93]),
        proba_draws=np.full((4, 2), 0.5),
        log_weights=np.log(np.full((4, 2), 0.25)),
    )
    assert cal.n_bad_k == 1
    text = rc._k_warning(cal)
    assert "1 of 2 observations have Pareto k > 0.7" in text
    assert "Pareto k ≤ 0.7" in rc._k_warning(
        lc.LOOCalibration("regression", np.zeros(2), np.array([0.1, 0.5]))
    )


def test_loo_refuses_what_it_cannot_do(clf_data):
    with pytest.raises(ValueError, match="no idata_"):
        lc.loo_calibration(bk.VSKClassifier().fit(*clf_data))


def test_reliability_bands_from_draws(rng):
    y = rng.integers(0, 2, 50)
    P = np.clip(rng.uniform(0, 1, 50) + 0.1 * rng.standard_normal((200, 50)), 0, 1)
    t = reliability_bands(y, P, n_bins=5)
    pbar = P.mean(0)
    bins = np.minimum((pbar * 5).astype(int), 4)
    for j, b in enumerate(np.unique(bins)):
        m = bins == b
        lo, hi = np.quantile(P[:, m].mean(1), [0.05, 0.95])
        assert (t["lower"][j], t["upper"][j], t["count"][j]) == pytest.approx((lo, hi, m.sum()))
        assert lo <= t["mean_predicted"][j] <= hi
    # equal weights: resampling keeps every draw, so the band is unchanged
    t_w = reliability_bands(y, P, n_bins=5, log_weights=np.full(P.shape, -np.log(200)))
    np.testing.assert_allclose(t_w["lower"], t["lower"])
    # all weight on one draw: no spread left
    lw = np.full(P.shape, -np.inf)
    lw[3] = 0.0
    t_1 = reliability_bands(y, P, n_bins=5, log_weights=lw)
    np.testing.assert_allclose(t_1["lower"], t_1["upper"])


def test_reliability_consistency_band_is_the_binomial_band_of_a_calibrated_model(rng):
    """The posterior-predictive band of a bin's observed frequency (Bröcker & Smith 2007's
    consistency bars, posterior draws in place of a point forecast): with no posterior spread
    it is the binomial band Binomial(n_b, p)/n_b; outcomes drawn from the model's own
    probabilities fall inside their bin's 90 % band in about 90 % of the bins."""
    from scipy import stats

    p = np.full(40, 0.3)
    t = reliability_bands(rng.integers(0, 2, 40), np.tile(p, (4000, 1)), n_bins=10)
    lo, hi = stats.binom.ppf([0.05, 0.95], 40, 0.3) / 40
    assert t["count"][0] == 40
    assert abs(t["observed_lower"][0] - lo) <= 1 / 40 and abs(t["observed_upper"][0] - hi) <= 1 / 40
    inside = []
    for _ in range(40):
        p_true = rng.uniform(0, 1, 200)
        P = np.clip(p_true + 0.02 * rng.standard_normal((300, 200)), 0, 1)
        t = reliability_bands(rng.random(200) < p_true, P, n_bins=10)
        obs = t["observed"]
        inside += list((t["observed_lower"] <= obs) & (obs <= t["observed_upper"]))
    assert 0.85 <= np.mean(inside) <= 0.99, np.mean(inside)


def test_held_out_report_has_reliability_band(gpc, clf_data):
    X, y = clf_data
    P, why = rc.proba_draws(gpc, X[30:])
    assert why == "" and P.shape == (40, 10)
    np.testing.assert_allclose(P.mean(0), gpc.predict_proba(X[30:])[:, 1])
    text = render_report(gpc, X_test=X[30:], y_test=y[30:])
    assert "reliability diagram with posterior bands" in text
    assert rc.LOO_HEADING not in text


@pytest.mark.slow  # 283 s on 2 shared cores at load 12 (GaBaSR compiles its model)
def test_gabasr_classifier_draws_and_loo(clf_data):
    # its per-draw probabilities take its scaled inputs: proba_draws must translate
    X, y = clf_data
    est = bk.GaBaSRClassifier(
        sampler="nuts", n_features=8, n_components=2, map_steps=5, random_state=0, **TINY
    ).fit(X[:30], y[:30])
    P, why = rc.proba_draws(est, X[30:])
    assert why == "" and P.shape == (20, 10)
    cal = lc.loo_calibration(est)
    assert cal.proba.shape == (30,) and np.all((cal.proba > 0) & (cal.proba < 1))


def test_reliability_band_skips_without_draws(clf_data):
    est = bk.KernelSVC(kernel=bk.kernels.RBF()).fit(*clf_data)
    P, why = rc.proba_draws(est, clf_data[0])
    assert P is None and "no per-draw probabilities" in why


def _periodic_kernel():
    """A sum kernel with a fixed hyperparameter (the period): a priors table lists both."""
    return bk.kernels.RBF() + bk.kernels.Periodic(period=2.0)


@pytest.fixture(scope="module")
def periodic_gpr(reg_data):
    """The regressor of :func:`test_priors_table_lists_every_latent_site`, fitted once for
    both of its classifier inferences."""
    return bk.GPRegressor(_periodic_kernel(), random_state=0, **TINY).fit(*reg_data)


@pytest.mark.parametrize("inference", ["laplace", "latent"])
def test_priors_table_lists_every_latent_site(clf_data, periodic_gpr, inference):
    X, y = clf_data
    est = bk.GPClassifier(_periodic_kernel(), inference=inference, random_state=0, **TINY).fit(X, y)
    reg = periodic_gpr
    for e in (est, reg):
        rows, note = prior_rows(e)
        names = [r[0] for r in rows]
        sites = latent_sites(*model_call(e))
        assert set(sites) <= set(names) and "NumPyro trace" in note
        # every sampled posterior variable is listed (not the deterministic latent f, nor the
        # restatements of sampled values in data units)
        sampled = {
            v
            for v in e.idata_.posterior.data_vars
            if v != "f" and not v.endswith(bk.diagnostics.DATA_UNITS_SUFFIX)
        }
        assert sampled and sampled <= set(names)
        assert {"amplitude"} <= set(names)
        assert any("fixed at 2.0" in r[1] for r in rows)  # the fixed period, not sampled
    assert "noise" in [r[0] for r in prior_rows(reg)[0]]
    if inference == "latent":
        assert {"bias", "eta"} <= set(r[0] for r in prior_rows(est)[0])
    assert "HalfNormal(scale=1.0)" in render_report(reg)


def test_prior_of_a_site_sampled_on_another_scale_names_the_prior_and_the_map():
    import numpyro.distributions as dist

    from bayeskern.report_priors import dist_repr

    t = dist.transforms.SoftplusTransform()
    d = dist.TransformedDistribution(dist.HalfNormal(2.0).expand([3]).to_event(1), t.inv)
    assert dist_repr(d) == "HalfNormal(scale=2.0) through inverse SoftplusTransform"
    d = dist.TransformedDistribution(dist.Normal(0.0, 1.0), dist.transforms.ExpTransform())
    assert dist_repr(d) == "Normal(loc=0.0, scale=1.0) through ExpTransform"


def _classical():
    return [
        bk.VSKClassifier(),
        bk.CkRBFClassifier(),
        bk.MkRBFClassifier(),
        bk.ConformalKernelClassifier(mu=1e-3),
        bk.KernelSVC(kernel=bk.kernels.RBF()),
        bk.VSKRegressor(),
    ]


@pytest.mark.parametrize("est", _classical(), ids=lambda e: type(e).__name__)
def test_classical_report(est, clf_data, reg_data, tmp_path):
    X, y = reg_data if type(est).__name__ == "VSKRegressor" else clf_data
    n = len(y) * 3 // 4
    est.fit(X[:n], y[:n])
    path = bk.report(est, tmp_path / "r.html")  # no data at all: what the estimator has
    text = path.read_text()
    assert "Not a Bayesian fit" in text and bayesian_twin(est).split(",")[0] in text
    assert "pass X_train and y_train" in text
    path = bk.report(
        est, tmp_path / "r.html", X_train=X[:n], y_train=y[:n], X_test=X[n:], y_test=y[n:]
    )
    text = path.read_text()
    assert "Cross-validated metrics" in text and "Held-out metrics" in text
    assert ("ROC AUC" in text) == (type(est).__name__ not in ("VSKRegressor", "MkRBFClassifier"))


@pytest.mark.parametrize("name", sorted(TWINS) + ["KernelSVC"])
def test_bayesian_twin_fits(name, clf_data, reg_data):
    X, y = reg_data if name == "VSKRegressor" else clf_data
    if name == "KernelSVC":
        twin = bk.GPClassifier(kernel=bk.kernels.RBF())
        assert bayesian_twin(bk.KernelSVC(kernel=bk.kernels.RBF())).startswith(
            "bk.GPClassifier(kernel=k)"
        )
    else:
        twin = eval(TWINS[name], {"bk": bk})  # the call the report and docstring name
    twin.set_params(random_state=0, **TINY).fit(X, y)
    assert "log_likelihood" in twin.idata_.groups()
    assert np.isfinite(twin.score(X, y))


@pytest.mark.slow
def test_labrbf_gp_twin_fits(reg_data):
    # the GP on LAB-RBF's learned features that LABRBFRegressor's docstring names
    twin = bk.GPRegressor(kernel=bk.kernels.LABRBFFeatures(), random_state=0, **TINY)
    twin.fit(*reg_data)
    assert np.isfinite(twin.score(*reg_data))


def test_kernel_svc_clones_for_cross_validation():
    est = bk.KernelSVC(kernel=bk.kernels.RBF(lengthscale=2.0))
    c = clone(est)
    assert c.kernel is not est.kernel and repr(c.kernel) == repr(est.kernel)
