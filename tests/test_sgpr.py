"""The inducing-point GP (``models/sgpr.py``, ``GPRegressor(approximation="inducing")``).

Titsias (2009)'s collapsed bound against the exact log marginal likelihood (equal when the
inducing inputs are the rows, below it otherwise, rising as inducing inputs are added), the
per-draw predictions and leave-one-out densities against the exact GP's, and the estimator's
route: choice, plumbing, persistence and bad input.
"""

from __future__ import annotations

import copy
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from bayeskern.models.gp import (
    JITTER,
    kernel_matrix,
    loo_and_fitted_rows,
    regression_factors,
    regression_predictive,
    theta_from_draw,
)
from bayeskern.models.sgpr import (
    Z_JITTER,
    _whitened_gram,
    _whitened_stats,
    sgpr_bound,
    sgpr_factors,
    sgpr_predict,
)

import bayeskern as bk
from bayeskern.estimators.gp_regressor_inducing import choose_inducing

QUICK = dict(num_warmup=40, num_samples=40, num_chains=1, progress_bar=False, random_state=0)


@pytest.fixture(scope="module")
def table():
    rng = np.random.default_rng(5)
    X = rng.normal(size=(70, 3))
    y = np.sin(2 * X[:, 0]) + X[:, 1] * X[:, 2] + 0.1 * rng.normal(size=70)
    return X, y


@pytest.fixture(scope="module")
def setup(table):
    X, y = table
    kernel = bk.kernels.name_leaves(bk.kernels.RBF(ard=True))
    x_scale = np.ones(3)
    draw = {
        "rbf_lengthscale": jnp.asarray([0.8, 1.3, 2.0]),
        "amplitude": jnp.asarray([1.1]),
        "noise": jnp.asarray(0.3),
    }
    return kernel, x_scale, draw, jnp.asarray(X), jnp.asarray(y)


def _bound(setup, Z, chunk=None):
    kernel, x_scale, draw, X, y = setup
    theta = theta_from_draw(kernel, draw, x_scale)
    stats, trace_k, _ = _whitened_stats(kernel, theta, draw["amplitude"], Z, X, y, chunk)
    return float(sgpr_bound(stats, trace_k, draw["noise"] ** 2 + JITTER))


def _exact(setup):
    kernel, x_scale, draw, X, y = setup
    theta = theta_from_draw(kernel, draw, x_scale)
    K = kernel_matrix(kernel, theta, draw["amplitude"], X, X)
    C = K + (draw["noise"] ** 2 + JITTER) * jnp.eye(len(y))
    return float(jax.scipy.stats.multivariate_normal.logpdf(y, jnp.zeros(len(y)), C))


# ------------------------------------------------------------------ Titsias's bound (theory)
def test_bound_is_the_exact_likelihood_when_the_inducing_inputs_are_the_rows(setup):
    X, draw = setup[3], setup[2]
    # K_zz carries Z_JITTER x its mean diagonal, so Q = K - O(jitter): the trace term is
    # about N x jitter / (2 sigma^2), which bounds the difference
    jitter = Z_JITTER * float(draw["amplitude"][0]) ** 2
    atol = len(X) * jitter / float(draw["noise"]) ** 2
    np.testing.assert_allclose(_bound(setup, X), _exact(setup), rtol=0, atol=atol)
    # the chunked pass (with a padded last chunk) gives the same value
    np.testing.assert_allclose(_bound(setup, X, chunk=16), _bound(setup, X), rtol=1e-10)


def test_bound_lies_below_the_exact_likelihood_and_rises_with_more_inducing_inputs(setup):
    """Titsias (2009): F(Z) <= log p(y) for any Z, and adding inducing inputs never lowers it."""
    X = np.asarray(setup[3])
    exact = _bound(setup, jnp.asarray(X))
    values = [_bound(setup, jnp.asarray(X[:m])) for m in (5, 15, 35, 60)]
    assert all(v < exact for v in values)
    assert all(a <= b + 1e-9 for a, b in zip(values, values[1:], strict=False))


def test_whitened_gram_gradient_equals_differentiating_the_triangular_solve(setup):
    """The hand-written reverse pass against JAX's own derivative of the plain computation."""
    kernel, x_scale, draw, X, y = setup
    Z = X[::7]

    def plain(Lz, Kt, y):
        A = jax.scipy.linalg.solve_triangular(Lz, Kt.T, lower=True)
        return A @ A.T, A @ y

    def loss(gram, params):
        theta = theta_from_draw(kernel, params, x_scale)
        Kzz = kernel_matrix(kernel, theta, params["amplitude"], Z, Z)
        Lz = jnp.linalg.cholesky(Kzz + 1e-6 * jnp.eye(len(Z)))
        P, beta = gram(Lz, kernel_matrix(kernel, theta, params["amplitude"], X, Z), y * 1.3)
        # weights that are not symmetric, so that both halves of P's cotangent count
        W = jnp.arange(P.size, dtype=P.dtype).reshape(P.shape) / P.size
        return jnp.sum(W * P) + jnp.sum(jnp.sin(beta)) + jnp.linalg.slogdet(jnp.eye(len(Z)) + P)[1]

    ours = jax.grad(lambda p: loss(_whitened_gram, p))(draw)
    ref = jax.grad(lambda p: loss(plain, p))(draw)
    for k in draw:
        np.testing.assert_allclose(ours[k], ref[k], rtol=1e-7, atol=1e-9, err_msg=k)
    # and against finite differences, through every argument (y included)
    Kzz = kernel_matrix(kernel, theta_from_draw(kernel, draw, x_scale), draw["amplitude"], Z, Z)
    Lz = jnp.linalg.cholesky(Kzz + 1e-3 * jnp.eye(len(Z)))
    Kt = kernel_matrix(kernel, theta_from_draw(kernel, draw, x_scale), draw["amplitude"], X, Z)
    args = (Lz, Kt, y)

    def scalar(*a):
        P, beta = _whitened_gram(*a)
        return jnp.sum(jnp.sin(P)) + jnp.sum(beta**2)

    grads = jax.grad(scalar, argnums=(0, 1, 2))(*args)
    rng = np.random.default_rng(0)
    for i, a in enumerate(args):
        d = jnp.asarray(rng.normal(size=a.shape))
        d = jnp.tril(d) if i == 0 else d  # L_z is lower triangular
        h = 1e-5
        up, down = (
            scalar(*(b + s * h * d if j == i else b for j, b in enumerate(args))) for s in (1, -1)
        )
        np.testing.assert_allclose((up - down) / (2 * h), jnp.sum(grads[i] * d), rtol=1e-5)


def test_bound_gradient_is_the_same_chunked_and_whole(setup):
    kernel, x_scale, draw, X, y = setup

    def value(params, chunk):
        theta = theta_from_draw(kernel, params, x_scale)
        stats, trace_k, _ = _whitened_stats(kernel, theta, params["amplitude"], X[:20], X, y, chunk)
        return sgpr_bound(stats, trace_k, params["noise"] ** 2 + JITTER)

    whole, chunked = (jax.grad(value)(draw, c) for c in (None, 16))
    for k in draw:
        np.testing.assert_allclose(chunked[k], whole[k], rtol=1e-9, err_msg=k)


def test_predictions_and_loo_equal_the_exact_gp_when_the_inducing_inputs_are_the_rows(setup):
    from bayeskern.estimators.gp_regressor_inducing import _loo_one

    kernel, x_scale, draw, X, y = setup
    Xn = jnp.asarray(np.random.default_rng(1).normal(size=(9, 3)))
    f = sgpr_factors(kernel, draw, X, y, X, x_scale)
    mean, var = sgpr_predict(kernel, draw, f, X, Xn, x_scale)
    m0, v0, _, _ = regression_predictive(kernel, draw, X, y, Xn, x_scale)
    # equal up to the effect of K_zz's jitter (Z_JITTER x the mean diagonal)
    np.testing.assert_allclose(mean, m0, rtol=0, atol=1e-4)
    np.testing.assert_allclose(var, v0, rtol=0, atol=1e-4)
    mj, cov = sgpr_predict(kernel, draw, f, X, Xn, x_scale, joint=True)
    np.testing.assert_allclose(mj, mean, rtol=1e-12)
    np.testing.assert_allclose(np.diag(cov), var, rtol=1e-6, atol=1e-9)
    ll, _, _ = _loo_one(kernel, x_scale, X, y, X, draw, f)
    Linv, alpha, _ = regression_factors(kernel, draw, X, y, x_scale)
    exact_ll = loo_and_fitted_rows(Linv, alpha, y, draw["noise"])[0]
    np.testing.assert_allclose(ll, exact_ll, rtol=0, atol=1e-3)


def test_loo_is_that_of_the_nystrom_model_for_fewer_inducing_inputs(setup):
    """With Z a subset, the LOO densities are those of y ~ N(0, Q + sigma^2 I), Q = A'A,
    formed densely (Rasmussen & Williams 2006, eq. 5.12), and the fitted means are Q C^-1 y."""
    from bayeskern.models.sgpr import sgpr_features

    from bayeskern.estimators.gp_regressor_inducing import _loo_one

    kernel, x_scale, draw, X, y = setup
    Z = X[::4]
    theta = theta_from_draw(kernel, draw, x_scale)
    A, _ = sgpr_features(kernel, theta, draw["amplitude"], Z, X)
    nv = float(draw["noise"]) ** 2 + JITTER
    C = np.asarray(A @ A.T) + nv * np.eye(len(y))
    Ci = np.linalg.inv(C)
    d = np.diag(Ci)
    yy = np.asarray(y)
    loo = -0.5 * np.log(2 * np.pi / d) - 0.5 * (Ci @ yy) ** 2 / d
    ll, mean, _ = _loo_one(
        kernel, x_scale, X, y, Z, draw, sgpr_factors(kernel, draw, X, y, Z, x_scale)
    )
    np.testing.assert_allclose(ll, loo, rtol=1e-8)
    np.testing.assert_allclose(mean, np.asarray(A @ A.T) @ Ci @ yy, rtol=1e-8, atol=1e-10)


def test_latent_variance_lies_between_zero_and_the_prior_variance(setup):
    """With S = R'R = (I + P/sigma^2)^-1 <= I the latent variance k** - ||a||^2 + ||Ra||^2 lies
    in [0, k**] (Titsias 2009, eq. 6), for any inducing inputs."""
    kernel, x_scale, draw, X, y = setup
    Xn = jnp.asarray(np.random.default_rng(2).normal(size=(20, 3)) * 3)
    prior = float(draw["amplitude"][0]) ** 2
    for Z in (X[:1], X[:8], X):
        f = sgpr_factors(kernel, draw, X, y, Z, x_scale)
        var = np.asarray(sgpr_predict(kernel, draw, f, Z, Xn, x_scale)[1])
        assert np.all(var >= 0) and np.all(var <= prior + 1e-9)
        assert np.max(var) > 0.5 * prior  # far rows: near the prior, so the bound is reached


def test_choose_inducing_takes_kmeans_centres_or_every_row():
    X = np.random.default_rng(0).normal(size=(300, 2))
    np.testing.assert_array_equal(choose_inducing(X, 300, 0), X)
    Z = choose_inducing(X, 20, 0)
    assert Z.shape == (20, 2)
    np.testing.assert_array_equal(Z, choose_inducing(X, 20, 0))  # seeded


def test_moving_the_inducing_inputs_raises_the_density_and_tightens_the_bound(setup):
    """Titsias (2009, §3): Z are variational parameters; the search raises the log density
    (bound + prior), and at the hyper-parameters it ends at the bound stays below the exact
    log likelihood and closer to it than with the k-means centres."""
    from bayeskern.models.sgpr import sgpr_regression
    from numpyro.infer.util import constrain_fn, potential_energy

    from bayeskern.estimators.gp_regressor_inducing import optimize_inducing

    kernel, x_scale, draw, X, y = setup
    Z0 = jnp.asarray(choose_inducing(np.asarray(X), 8, 0))
    kwargs = dict(X=X, y=y, kernel=kernel, x_scale=x_scale, Z=Z0, chunk_size=None)
    out = optimize_inducing(sgpr_regression, kwargs, draw, 60)
    assert out.log_density > out.log_density_start
    assert float(jnp.max(jnp.abs(out.Z - Z0))) > 1e-3
    start = {k: v for k, v in draw.items()}
    np.testing.assert_allclose(
        -potential_energy(sgpr_regression, (), {**kwargs, "Z": out.Z}, out.z), out.log_density
    )
    at = constrain_fn(sgpr_regression, (), kwargs, out.z)
    moved, kmeans = (
        _bound((kernel, x_scale, at, X, y), out.Z),
        _bound((kernel, x_scale, at, X, y), Z0),
    )
    exact = _exact((kernel, x_scale, at, X, y))
    assert kmeans < moved < exact
    # no iterations: the start, unchanged
    same = optimize_inducing(sgpr_regression, kwargs, start, 0)
    np.testing.assert_array_equal(same.Z, Z0)


# ------------------------------------------------------------------------- the estimator
@pytest.fixture(scope="module")
def fitted(table):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # 40 draws: not converged
        return bk.GPRegressor(
            approximation="inducing", n_inducing=25, optimize_inducing=60, **QUICK
        ).fit(*table)


def test_inducing_fit_records_what_ran(fitted, table):
    est = fitted
    assert est.approximation_ == "inducing"
    attrs = est.idata_.posterior.attrs
    assert attrs["approximation"] == "inducing"
    assert attrs["n_inducing"] == 25
    # the inducing inputs moved from the k-means centres at the mode, raising the density
    assert attrs["inducing_log_density_moved"] > attrs["inducing_log_density_kmeans"]
    # the chains start at the mode found again on the moved inputs (refind_mode), whose
    # density is at least where the search over inputs and hyper-parameters ended
    assert attrs["map_log_density"] >= attrs["inducing_log_density_moved"] - 1e-6
    kmeans = choose_inducing(est.x_std_.transform(table[0]), 25, est._seed())
    assert not np.allclose(est.x_std_.transform(est.inducing_points_), kmeans)
    assert est.inducing_points_.shape == (25, 3)
    # the default kernel on inducing points: one length-scale per column
    assert est.idata_.posterior["rbf_lengthscale"].shape[2:] == (3,)
    assert est.hsgp_design_ is None
    assert est.idata_.log_likelihood["y"].shape == (1, 40, len(table[1]))
    assert np.isfinite(est.loo().elpd_loo)
    Xt = np.random.default_rng(3).normal(size=(11, 3))
    mean, std = est.predict(Xt, return_std=True)
    assert mean.shape == std.shape == (11,) and np.all(std > 0)
    lo, hi = est.predict_interval(Xt, 0.9)
    assert np.all(lo < hi)


def test_inducing_predictions_are_the_mixture_of_the_per_draw_formulas(fitted):
    est = fitted
    Xt = np.random.default_rng(4).normal(size=(6, 3))
    pred = est.predictive(Xt)
    draws = est._draws()
    Xtr = jnp.asarray(est.x_std_.transform(np.asarray(est.idata_.constant_data["X"])))
    ytr = jnp.asarray(est.y_std_.transform(np.asarray(est.idata_.observed_data["y"])))
    Z, Xn = jnp.asarray(est.x_std_.transform(est.inducing_points_)), est.x_std_.transform(Xt)
    for s in (0, 17, 39):
        d = {k: jnp.asarray(v[s]) for k, v in draws.items()}
        f = sgpr_factors(est.kernel_, d, Xtr, ytr, Z, est.x_std_.scale)
        m, v = sgpr_predict(est.kernel_, d, f, Z, jnp.asarray(Xn), est.x_std_.scale)
        sy = est.y_std_.scale
        np.testing.assert_allclose(pred.loc[s], np.asarray(m) * sy + est.y_std_.mean, rtol=1e-8)
        np.testing.assert_allclose(pred.scale[s], np.sqrt(np.asarray(v) + f[3]) * sy, rtol=1e-8)
    # the joint: diag(cov) + mean noise variance = std^2
    mean, cov = est.predict(Xt, return_cov=True)
    _, std = est.predict(Xt, return_std=True)
    nv = np.mean(np.asarray(est.idata_.posterior["noise"]) ** 2) * est.y_std_.scale**2
    np.testing.assert_allclose(np.diag(cov) + nv, std**2, rtol=1e-3)
    assert est.sample_y(Xt, n_samples=4).shape == (6, 4)


def test_inducing_run_saves_and_loads(fitted, tmp_path):
    path = tmp_path / "run"
    bk.runs.save_run(fitted, path)
    again = bk.runs.load_run(path)
    Xt = np.random.default_rng(6).normal(size=(5, 3))
    np.testing.assert_allclose(again.predict(Xt), fitted.predict(Xt), rtol=1e-10)
    np.testing.assert_array_equal(again.inducing_points_, fitted.inducing_points_)


def test_the_default_kernel_has_one_lengthscale_per_column_on_inducing_points_only(table):
    Xs = np.asarray(table[0])

    def ard(est, route, Xs=Xs):
        kernel = est._route_kernel(est._fit_kernel(Xs, table[1]), Xs, table[1], route)
        return kernel.leaves()[0].ard

    assert ard(bk.GPRegressor(), "inducing")
    assert not ard(bk.GPRegressor(), "exact") and not ard(bk.GPRegressor(), "hsgp")
    assert not ard(bk.GPRegressor(bk.kernels.RBF()), "inducing")  # a kernel given is kept
    assert not ard(bk.GPRegressor(), "inducing", Xs[:, :1])


def test_inducing_prior_predictive(table):
    est = bk.GPRegressor(approximation="inducing", n_inducing=10, random_state=0)
    draws = est.sample_prior_predictive(*table, n_draws=5)
    assert draws.shape == (5, len(table[1])) and np.all(np.isfinite(draws))


def test_auto_takes_the_inducing_points_above_the_exact_rows_on_many_columns():
    """Above AUTO_EXACT_MAX_ROWS with 4+ columns (no basis): the inducing points, no warning;
    the classifier, which has no inducing route, still falls back to the exact GP and warns."""
    from bayeskern.estimators.gp_basis import AUTO_EXACT_MAX_ROWS

    kernel = bk.kernels.name_leaves(bk.kernels.RBF())
    Xs = np.zeros((AUTO_EXACT_MAX_ROWS + 1, 5))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert bk.GPRegressor()._resolve_approximation(kernel, Xs) == "inducing"
        assert bk.GPRegressor()._resolve_approximation(kernel, Xs[:, :2]) == "hsgp"
        assert bk.GPRegressor()._resolve_approximation(kernel, Xs[:-1]) == "exact"
    with pytest.warns(UserWarning, match="runs the exact GP"):
        assert bk.GPClassifier()._resolve_approximation(kernel, Xs, warn=True) == "exact"


@pytest.mark.parametrize("bad", [0, -3, 2.5, "many"])
def test_bad_n_inducing_is_refused(table, bad):
    with pytest.raises(ValueError, match="n_inducing"):
        bk.GPRegressor(approximation="inducing", n_inducing=bad).fit(*table)


@pytest.mark.parametrize("bad", [-1, 2.5, None])
def test_bad_optimize_inducing_is_refused(table, bad):
    with pytest.raises(ValueError, match="optimize_inducing"):
        bk.GPRegressor(approximation="inducing", optimize_inducing=bad).fit(*table)


def test_optimize_inducing_0_keeps_the_kmeans_centres(table):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # 10 draws: not converged
        est = bk.GPRegressor(
            approximation="inducing",
            n_inducing=12,
            optimize_inducing=0,
            **dict(QUICK, num_warmup=10, num_samples=10),
        ).fit(*table)
    kmeans = choose_inducing(est.x_std_.transform(table[0]), 12, est._seed())
    np.testing.assert_allclose(est.x_std_.transform(est.inducing_points_), kmeans, atol=1e-12)
    assert "inducing_log_density_moved" not in est.idata_.posterior.attrs
    # the default kernel there is RBF(ard=True): the same fit as asking for it
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ard = bk.GPRegressor(
            bk.kernels.RBF(ard=True),
            approximation="inducing",
            n_inducing=12,
            optimize_inducing=0,
            **dict(QUICK, num_warmup=10, num_samples=10),
        ).fit(*table)
    for v in ("rbf_lengthscale", "amplitude", "noise"):
        np.testing.assert_array_equal(est.idata_.posterior[v], ard.idata_.posterior[v])


def test_classifier_refuses_the_inducing_route(table):
    X, y = table
    with pytest.raises(ValueError, match="approximation"):
        bk.GPClassifier(approximation="inducing").fit(X, (y > 0).astype(int))


def test_inducing_copy_predicts_the_same(fitted):
    other = copy.deepcopy(fitted)
    Xt = np.random.default_rng(8).normal(size=(4, 3))
    np.testing.assert_allclose(other.predict(Xt), fitted.predict(Xt), rtol=1e-12)


def test_inducing_fit_reports_its_priors_and_writes_a_report(fitted, tmp_path):
    from bayeskern.report_priors import latent_sites, model_call, prior_rows

    model, kwargs = model_call(fitted)
    assert model.__name__ == "sgpr_regression" and kwargs["Z"].shape == (25, 3)
    sites = latent_sites(model, kwargs)
    assert set(sites) == {"amplitude", "noise", "rbf_lengthscale"}
    assert set(sites) <= {r[0] for r in prior_rows(fitted)[0]}
    out = bk.report(fitted, tmp_path / "report.html")
    text = out.read_text()
    assert "approximation" in text and "inducing" in text and "n inducing" in text
    assert "inducing log density moved" in text


def test_predictions_thin_the_draws_when_their_factors_exceed_the_budget(fitted, monkeypatch):
    """Above the factor budget predictions mix over evenly spaced draws; the LOO densities
    still use every draw, in blocks, and are the same numbers."""
    from bayeskern.estimators import gp_regressor_inducing as module

    Xt = np.zeros((3, 3))
    every = fitted.predictive(Xt)
    assert every.loc.shape == (40, 3)
    est = copy.deepcopy(fitted)
    full_ll = np.asarray(est.idata_.log_likelihood["y"])
    M = len(est.inducing_points_)
    monkeypatch.setattr(module, "FACTOR_CACHE_BYTES", 8 * (2 * M * M + M + 1) * 7)
    est._cache = {}
    pred = est.predictive(Xt)
    pick = np.linspace(0, 39, 7).round().astype(int)
    np.testing.assert_allclose(pred.loc, every.loc[pick], rtol=1e-10)
    np.testing.assert_allclose(pred.scale, every.scale[pick], rtol=1e-10)
    Xs = est.x_std_.transform(np.asarray(est.idata_.constant_data["X"]))
    ys = est.y_std_.transform(np.asarray(est.idata_.observed_data["y"]))
    est._add_inducing_loo(Xs, ys)
    np.testing.assert_allclose(np.asarray(est.idata_.log_likelihood["y"]), full_ll, rtol=1e-10)
