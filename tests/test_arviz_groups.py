"""ArviZ workflows on ``est.idata_``: posterior predictive, predictions, comparison, data units.

Also the joint latent covariance and sample paths of :class:`bayeskern.GPRegressor`
(``predict(return_cov=True)``, ``sample_y``), tested against the exact GP conditional.
"""

import copy
import warnings

import arviz as az
import jax.numpy as jnp
import matplotlib.pyplot as plt
import numpy as np
import pytest
from bayeskern.models.gp import laplace_classification_loo, laplace_classification_predictive
from conftest import TINY
from sklearn.gaussian_process import GaussianProcessRegressor
from sklearn.gaussian_process.kernels import RBF as SkRBF
from sklearn.gaussian_process.kernels import ConstantKernel

import bayeskern as bk
from bayeskern.estimators import draws
from bayeskern.estimators.base import thin_draws

SMALL = dict(TINY, num_chains=2)


def _data(n=40, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.uniform(0, 5, (n, 1))
    y = np.sin(X[:, 0]) + 0.1 * rng.standard_normal(n)
    return X, y


def _fit_all():
    X, y = _data()
    yc = np.where(y > 0, "up", "down")  # text labels: observed and replicated as 0/1 codes
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return (
            X,
            y,
            {
                "gp": bk.GPRegressor(approximation="exact", random_state=0, **SMALL).fit(X, y),
                "hsgp": bk.GPRegressor(approximation="hsgp", random_state=0, **SMALL).fit(X, y),
                "gabasr": bk.GaBaSRRegressor(n_features=8, random_state=0, **SMALL).fit(X, y),
                "gpc": bk.GPClassifier(random_state=0, **SMALL).fit(X, yc),
                "gabasrc": bk.GaBaSRClassifier(n_features=8, random_state=0, **SMALL).fit(X, yc),
                "labrbf": bk.LABRBFRegressor(
                    max_support=10, num_samples=20, num_chains=2, progress_bar=False, random_state=0
                ).fit(X, y),
                "labrbf2": bk.LABRBFRegressor(
                    max_support=10,
                    num_samples=20,
                    num_chains=2,
                    alpha=1e-2,
                    progress_bar=False,
                    random_state=0,
                ).fit(X, y),
            },
        )


@pytest.fixture(scope="module")
def fitted():
    return _fit_all()


BAYESIAN = ["gp", "hsgp", "gabasr", "gpc", "gabasrc", "labrbf"]


@pytest.mark.parametrize("name", BAYESIAN)
def test_posterior_predictive_group(fitted, name):
    X, _, ests = fitted
    idata = ests[name].idata_
    pp, obs, ll = (
        idata.posterior_predictive["y"],
        idata.observed_data["y"],
        idata.log_likelihood["y"],
    )
    assert pp.dims == ("chain", "draw", "obs")
    assert pp.sizes["chain"] == idata.posterior.sizes["chain"] == 2
    assert pp.sizes["draw"] == idata.posterior.sizes["draw"] == 20
    np.testing.assert_array_equal(pp["obs"], ll["obs"])
    assert pp.sizes["obs"] == obs.sizes["obs"]
    assert np.all(np.isfinite(pp))
    if name in ("gpc", "gabasrc"):  # Bernoulli replicates, coded as the observed 0/1
        assert set(np.unique(obs)) == {0, 1} and set(np.unique(pp)) <= {0, 1}
        assert 0.1 < float(pp.mean()) < 0.9
    else:  # replicated data spread like the data
        assert 0.3 < float(pp.std()) / float(obs.std()) < 3.0


def test_gibbs_classifier_log_likelihood_is_bernoulli_of_the_draws(fitted):
    """The Gibbs chains record log p(y_i | draw); it is the Bernoulli-logit log density of
    the draws' class-1 probabilities, draw by draw, in the posterior's chain and draw order,
    and the posterior predictive replicates are drawn from the probabilities it gives."""
    X, _, ests = fitted
    est = ests["gabasrc"]
    assert est.sampler_ == "gibbs"
    p = est._proba_draws(est.x_scaler_.transform(X))  # (chains x draws, n)
    y01 = np.asarray(est.idata_.observed_data["y"])
    ref = np.where(y01 == 1, np.log(p), np.log1p(-p))
    ll = np.asarray(est.idata_.log_likelihood["y"]).reshape(p.shape)
    np.testing.assert_allclose(ll, ref, rtol=1e-5, atol=1e-6)
    # the replicated labels come from those probabilities (same draws, same uniforms)
    post = est.idata_.posterior
    draws = thin_draws(post.sizes["chain"], post.sizes["draw"], p.shape[1])
    y_rep = est._class_replicates(p, draws, est._seed(), stream=2)
    pp = np.asarray(est.idata_.posterior_predictive["y"]).reshape(y_rep.shape)
    assert np.mean(pp == y_rep) > 0.999


@pytest.mark.parametrize("name", BAYESIAN)
def test_arviz_plots_run(fitted, name):
    idata = fitted[2][name].idata_
    # integer (discrete) data: ArviZ's kde kind draws histograms for it
    axes = az.plot_ppc(idata, num_pp_samples=10, random_seed=0)
    assert np.size(axes) >= 1
    assert az.plot_loo_pit(idata, y="y") is not None
    plt.close("all")


@pytest.mark.parametrize(
    "names", [("gp", "hsgp", "gabasr"), ("gpc", "gabasrc"), ("labrbf", "labrbf2")]
)
def test_compare_runs(fitted, names):
    ests = fitted[2]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # Pareto k warnings at 40 draws
        table = az.compare({n: ests[n].idata_ for n in names})
    assert set(table.index) == set(names)
    assert np.all(np.isfinite(table["elpd_loo"]))


@pytest.mark.parametrize("name", BAYESIAN)
def test_add_predictions(fitted, name):
    X, _, ests = fitted
    est = ests[name]
    Xn = np.linspace(-1, 6, 7)[:, None]
    idata = est.add_predictions(Xn, n_draws=10, random_state=3)
    assert idata is est.idata_
    pred = idata.predictions["y"]
    assert pred.dims == ("chain", "draw", "obs") and pred.shape == (2, 5, 7)
    np.testing.assert_array_equal(idata.predictions_constant_data["X"], Xn)
    first = pred.values.copy()
    est.add_predictions(Xn, n_draws=10, random_state=3)
    np.testing.assert_array_equal(est.idata_.predictions["y"], first)  # same seed, same draws
    est.add_predictions(Xn, n_draws=10, random_state=4)
    assert not np.array_equal(est.idata_.predictions["y"], first)
    if name not in ("gpc", "gabasrc"):  # centred on predict
        mean = est.predict(Xn)
        sd = est.predict(Xn, return_std=True)[1] if hasattr(est, "predictive") else 1.0
        est.add_predictions(Xn, random_state=0)
        emp = est.idata_.predictions["y"].mean(("chain", "draw")).values
        assert np.all(np.abs(emp - mean) < 4 * sd / np.sqrt(40) + 1e-9)


def test_add_predictions_bad_input(fitted):
    est = fitted[2]["gp"]
    with pytest.raises(ValueError, match="n_draws"):
        est.add_predictions(np.zeros((2, 1)), n_draws=0)
    with pytest.raises(ValueError, match="feature"):
        est.add_predictions(np.zeros((2, 3)))


@pytest.mark.parametrize("name", ["gp", "hsgp"])
def test_gp_replicates_from_the_loo_factorization_match_the_generic_path(fitted, name):
    # the exact GP's posterior_predictive comes from its LOO's factors (mean y - s alpha,
    # variance s - s^2 diag(K^-1) + noise^2), the basis model's from the weight posterior's
    # factors its LOO used; the generic path calls predictive() at the training inputs.
    # Same seed, same draws.
    X, _, ests = fitted
    est = ests[name]
    assert not hasattr(est, "_fitted_rows_predictive")  # handed over, not stored
    post = est.idata_.posterior
    draws = np.arange(post.sizes["chain"] * post.sizes["draw"])
    generic = est._predictive_group(X, draws, est._seed(), stream=2)
    np.testing.assert_allclose(
        np.asarray(est.idata_.posterior_predictive["y"]), generic, rtol=1e-6, atol=1e-6
    )
    if name == "hsgp":  # the factors' predictive is the one handed over, not the fallback
        ec = copy.deepcopy(est)
        handed = ec._add_hsgp_loo(ec.x_std_.transform(X), ec.y_std_.transform(fitted[1]))
        np.testing.assert_allclose(handed.loc, est.predictive(X).loc, rtol=1e-9, atol=1e-9)


def test_classifier_replicates_from_the_loo_factorization_match_the_generic_path(
    fitted, monkeypatch
):
    # the binary Laplace classifier's replicates come from its LOO's solve (latent mean f_hat
    # and variance diag(K - KRK) at the training rows); the generic path calls
    # laplace_predict at the training inputs, whose prior variance leaves out K's 1e-6
    # jitter: the same probabilities to that jitter, so the same labels from the same
    # uniforms except where a uniform falls within ~1e-6 of a probability
    X, _, ests = fitted
    est = ests["gpc"]
    post = est.idata_.posterior
    draws = np.arange(post.sizes["chain"] * post.sizes["draw"])
    generic = est._predictive_group(X, draws, est._seed(), stream=2)
    stored = np.asarray(est.idata_.posterior_predictive["y"])
    assert stored.shape == generic.shape
    assert np.mean(stored != generic) < 1e-3
    Xj = jnp.asarray(est.x_std_.transform(X))
    yj = jnp.asarray(np.asarray(est.idata_.observed_data["y"]), dtype=float)
    d = {k: v[:3] for k, v in est._draws(with_f=True).items()}
    for i in range(3):
        one = {k: jnp.asarray(v[i]) for k, v in d.items()}
        _, mean, var = laplace_classification_loo(est.kernel_, one, Xj, yj, est.x_std_.scale)
        m2, v2, _ = laplace_classification_predictive(
            est.kernel_, one, Xj, yj, Xj, est.x_std_.scale
        )
        np.testing.assert_allclose(mean, m2, rtol=0, atol=1e-5)
        np.testing.assert_allclose(var, v2, rtol=0, atol=1e-5)

    def generic_path(*args, **kwargs):
        raise AssertionError("the binary Laplace fit predicted at its training rows again")

    monkeypatch.setattr(type(est), "_predictive_group", generic_path)
    again = bk.GPClassifier(random_state=0, **SMALL).fit(
        X, np.asarray(est.classes_)[yj.astype(int)]
    )
    np.testing.assert_array_equal(again.idata_.posterior_predictive["y"], stored)


def test_posterior_predictive_same_seed_same_draws(fitted):
    X, y, ests = fitted
    again = bk.GPRegressor(approximation="exact", random_state=0, **SMALL).fit(X, y)
    np.testing.assert_array_equal(
        again.idata_.posterior_predictive["y"], ests["gp"].idata_.posterior_predictive["y"]
    )


def test_thin_draws_bounds_the_stored_values():
    assert np.array_equal(thin_draws(2, 10, 5), np.arange(20))
    keep = thin_draws(4, 1000, 10_000, max_values=10**6)  # 100 draws: 25 per chain
    assert len(keep) == 100 and len(keep) * 10_000 <= 10**6
    per_chain = keep.reshape(4, -1) % 1000
    assert np.all(per_chain == per_chain[0]) and per_chain[0, 0] == 0 and per_chain[0, -1] == 999
    assert len(thin_draws(4, 1000, 10**9, max_values=10**6)) == 4  # at least one per chain
    assert len(thin_draws(2, 50, 3, n_draws=10)) == 10


def test_posterior_predictive_thinned_when_large(fitted, monkeypatch):
    est = fitted[2]["gp"]
    monkeypatch.setattr(draws, "PREDICTIVE_MAX_VALUES", 40 * 8)  # 40 rows: 8 draws in all
    est._add_posterior_predictive()
    pp = est.idata_.posterior_predictive["y"]
    assert pp.shape == (2, 4, 40)
    np.testing.assert_array_equal(pp["draw"], [0, 6, 13, 19])
    monkeypatch.undo()
    est._add_posterior_predictive()
    assert est.idata_.posterior_predictive["y"].shape == (2, 20, 40)


# ------------------------------------------------------------------ joint latent predictive
def _one_draw(est):
    """Make every posterior draw equal to the first: the mixture is one GP conditional."""
    post = est.idata_.posterior
    est.idata_.posterior = post = post.copy(
        data={
            v: np.broadcast_to(post[v].values[0, 0], post[v].shape).copy() for v in post.data_vars
        }
    )
    est.__dict__.pop("_cache", None)
    return {v: np.asarray(post[v].values[0, 0]) for v in post.data_vars}


def test_return_cov_is_the_exact_conditional():
    X, y = _data(30, seed=1)
    est = bk.GPRegressor(approximation="exact", random_state=0, **TINY).fit(X, y)
    d = _one_draw(est)
    sx, sy = float(est.x_std_.scale[0]), float(est.y_std_.scale)
    kernel = ConstantKernel(float(d["amplitude"][0]) ** 2, "fixed") * SkRBF(
        float(d["rbf_lengthscale"]) * sx, "fixed"
    )
    ref = GaussianProcessRegressor(
        kernel, alpha=float(d["noise"]) ** 2 + 1e-6, normalize_y=True, optimizer=None
    ).fit(X, y)
    Xn = np.linspace(-1, 6, 9)[:, None]
    mean, cov = est.predict(Xn, return_cov=True)
    ref_mean, ref_cov = ref.predict(Xn, return_cov=True)
    np.testing.assert_allclose(mean, ref_mean, atol=1e-8 * sy)
    np.testing.assert_allclose(cov, ref_cov, atol=1e-8 * sy**2)
    np.testing.assert_allclose(d["rbf_lengthscale_data_units"], d["rbf_lengthscale"] * sx)
    np.testing.assert_allclose(d["noise_data_units"], d["noise"] * sy)
    # sample paths: the same conditional, jointly
    F = est.sample_y(Xn, 20_000, random_state=0)
    assert F.shape == (9, 20_000)
    np.testing.assert_allclose(F.mean(axis=1), ref_mean, atol=0.03 * sy)
    np.testing.assert_allclose(np.cov(F), ref_cov, atol=0.03 * sy**2)


@pytest.mark.parametrize("name", ["gp", "hsgp", "gabasr"])
def test_return_cov_diagonal_and_sample_y(fitted, name):
    est = fitted[2][name]
    Xn = np.linspace(-0.5, 5.5, 8)[:, None]
    mean_std, std = est.predict(Xn, return_std=True)
    mean, cov = est.predict(Xn, return_cov=True)
    np.testing.assert_allclose(mean, mean_std, atol=1e-10)
    np.testing.assert_allclose(cov, cov.T, atol=1e-12)
    assert np.linalg.eigvalsh(cov).min() > -1e-8
    # std includes the noise, cov is of the latent f: the gap is the mean noise variance
    # (plus the models' 1e-6 jitter in standardized units)
    noise2 = float((est.idata_.posterior["noise_data_units"] ** 2).mean())
    np.testing.assert_allclose(
        np.diag(cov) + noise2, std**2, atol=2e-6 * float(est.y_std_.scale) ** 2
    )
    # joint sample paths integrate over the draws: their moments are the mixture's
    F = est.sample_y(Xn, 20_000, random_state=1)
    scale = np.sqrt(np.diag(cov)).max()
    np.testing.assert_allclose(F.mean(axis=1), mean, atol=0.05 * scale)
    np.testing.assert_allclose(np.cov(F), cov, atol=0.05 * scale**2)
    np.testing.assert_array_equal(
        est.sample_y(Xn, 3, random_state=2), est.sample_y(Xn, 3, random_state=2)
    )
    with pytest.raises(ValueError, match="return_std and return_cov"):
        est.predict(Xn, return_std=True, return_cov=True)
    with pytest.raises(ValueError, match="n_samples"):
        est.sample_y(Xn, 0)


# ------------------------------------------------------------------ data units
def test_data_unit_variables_scale_with_the_data():
    X, y = _data(30, seed=2)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        a = bk.GPRegressor(approximation="exact", random_state=0, **TINY).fit(X, y)
        b = bk.GPRegressor(approximation="exact", random_state=0, **TINY).fit(10 * X, 3 * y)
        ga = bk.GaBaSRRegressor(n_features=8, random_state=0, **TINY).fit(X, y)
        gb = bk.GaBaSRRegressor(n_features=8, random_state=0, **TINY).fit(10 * X, 3 * y)
    pa, pb = a.idata_.posterior, b.idata_.posterior
    # the sampler sees the same standardized data: same draws, data units rescaled
    np.testing.assert_allclose(pb["rbf_lengthscale"], pa["rbf_lengthscale"], rtol=1e-6)
    np.testing.assert_allclose(
        pb["rbf_lengthscale_data_units"], 10 * pa["rbf_lengthscale_data_units"], rtol=1e-6
    )
    np.testing.assert_allclose(
        pa["rbf_lengthscale_data_units"].sel(feature="x0"),
        pa["rbf_lengthscale"] * X.std(),
        rtol=1e-12,
    )
    for v in ("amplitude_data_units", "noise_data_units"):
        np.testing.assert_allclose(pb[v], 3 * pa[v], rtol=1e-6)
    summary = b.summary(["rbf_lengthscale_data_units", "noise_data_units"])
    assert len(summary) == 2
    qa, qb = ga.idata_.posterior, gb.idata_.posterior
    np.testing.assert_allclose(
        qb["lengthscale_data_units"], 10 * qa["lengthscale_data_units"], rtol=1e-6
    )
    np.testing.assert_allclose(qb["noise_data_units"], 3 * qa["noise_data_units"], rtol=1e-6)
    # restatements are not judged twice by the convergence report
    assert not any(v.endswith("_data_units") for v in a.convergence_.table.index)
