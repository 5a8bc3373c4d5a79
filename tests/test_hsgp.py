"""Hilbert-space GP: the basis against exact kernels, the collapsed density against the dense
Gaussian and the exact GP model, and GPRegressor(approximation="hsgp") against the exact fit."""

import copy
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from bayeskern.models.gp import gp_regression
from bayeskern.models.hsgp import collapsed_log_marginal, hsgp_loo, hsgp_regression
from numpyro.infer.util import log_density
from scipy import stats

import bayeskern as bk
from bayeskern.blr import feature_stats, scan_feature_stats
from bayeskern.hsgp import (
    Basis,
    HSGPDesign,
    TermBasis,
    build_design,
    check_basis,
    choose_basis,
    hsgp_unsupported_reason,
    lengthscale_bounds,
)
from bayeskern.kernels import RBF, Linear, Periodic, default_theta, name_leaves

QUICK = dict(num_warmup=50, num_samples=50, num_chains=1, progress_bar=False, random_state=0)


def _theta(kernel, **values):
    """Fixed values and defaults (unit input scale), then ``values``."""
    return {**default_theta(kernel, np.ones(1)), **{k: jnp.asarray(v) for k, v in values.items()}}


# --------------------------------------------------------------------------- the basis
@pytest.mark.parametrize("m, L", [((12,), (1.5,)), ((5, 4), (1.0, 2.0))])
def test_eigenfunctions_are_orthonormal_on_the_box(m, L):
    basis = Basis(m, L, (0.3,) * len(m))
    # midpoint rule on the box: exact enough for sines of at most 12 half-periods
    g = 400
    axes = [c - h + (np.arange(g) + 0.5) * 2 * h / g for c, h in zip(basis.center, L, strict=True)]
    X = np.stack([a.ravel() for a in np.meshgrid(*axes, indexing="ij")], axis=1)
    Phi = np.asarray(basis(X))
    gram = Phi.T @ Phi * np.prod([2 * h / g for h in L])
    assert Phi.shape == (len(X), basis.size)
    np.testing.assert_allclose(gram, np.eye(basis.size), atol=1e-10)
    assert basis.sqrt_eigenvalues().shape == (basis.size, len(m))


def test_ellipsoid_keeps_the_lowest_frequencies_and_the_gram():
    """In 2-D the basis keeps the multi-indices inside sum(((i_j - 1/2)/m_j)^2) <= 1, and the
    Gram matrix it gives is as close to the exact RBF Gram as the full tensor grid's."""
    m, L = (20, 16), (2.5, 3.0)
    full, kept = Basis(m, L, (0.0, 0.1), truncate=False), Basis(m, L, (0.0, 0.1))
    idx = np.asarray(full.sqrt_eigenvalues()) * 2 * np.asarray(L) / np.pi  # integers i_j
    inside = np.sum(((idx - 0.5) / np.asarray(m)) ** 2, axis=1) <= 1
    assert kept.size == inside.sum() < 0.82 * full.size
    np.testing.assert_allclose(
        np.asarray(kept.sqrt_eigenvalues()), np.asarray(full.sqrt_eigenvalues())[inside]
    )
    kernel = name_leaves(RBF(lengthscale=[0.45, 0.7]))
    X = np.random.default_rng(1).uniform([-1.2, -1.6], [1.2, 1.8], size=(120, 2))
    theta = default_theta(kernel, np.ones(2))
    K = np.asarray(kernel.gram(theta, jnp.asarray(X), jnp.asarray(X)))
    err = {}
    for name, b in (("full", full), ("kept", kept)):
        Phi = np.asarray(b(X))
        s = np.asarray(kernel.spectral_density(theta, b.sqrt_eigenvalues()))
        err[name] = np.max(np.abs((Phi * s) @ Phi.T - K))
    assert err["kept"] < 0.005 and err["kept"] < 1.2 * err["full"] + 1e-5, err
    # a configuration saved before the truncation reads back as the full grid
    cfg = TermBasis("stationary", kept).to_config()
    assert TermBasis.from_config(cfg).basis == kept
    del cfg["basis"]["truncate"]
    assert TermBasis.from_config(cfg).basis.size == full.size


KERNELS = {
    "rbf": (lambda: RBF(), {"rbf_lengthscale": 0.4}),
    "matern32": (lambda: bk.kernels.Matern32(), {"matern32_lengthscale": 0.6}),
    "matern52": (lambda: bk.kernels.Matern52(), {"matern52_lengthscale": 0.5}),
    "rbf*periodic": (
        lambda: RBF() * Periodic(period=0.7),
        {"rbf_lengthscale": 1.0, "periodic_lengthscale": 1.2},
    ),
}


@pytest.mark.parametrize("name", KERNELS)
def test_basis_gram_converges_to_the_exact_gram(name):
    make, values = KERNELS[name]
    kernel = name_leaves(make())
    rng = np.random.default_rng(0)
    X = rng.uniform(-1.5, 1.5, size=(150, 1))
    theta = _theta(kernel, **values)
    K = np.asarray(kernel.gram(theta, jnp.asarray(X), jnp.asarray(X)))
    errors = []
    for m in (16, 32, 64, 128):
        design = build_design(kernel, X, np.ones(1), n_basis=m)
        Phi = design.features(jnp.asarray(X))
        s = design.prior_variances(kernel, theta, jnp.ones(1))
        err = np.abs(np.asarray((Phi * s) @ Phi.T) - K)
        errors.append((err.mean(), err.max()))
    errors = np.asarray(errors)
    # the mean error shrinks with m until it reaches rounding's floor (RBF × Periodic: the
    # periodic series is exhausted by m = 64, and 64 and 128 give the same error to the last
    # bit on some machines)
    mean = errors[:, 0]
    assert np.all((np.diff(mean) < 0) | (mean[1:] < 1e-9)), errors
    # scikit-learn's test_rbf_sampler tolerances, at the largest m
    tol = {"matern32": (0.01, 0.05)}.get(name, (1e-3, 1e-2))
    assert errors[-1, 0] < tol[0] and errors[-1, 1] < tol[1], errors


def test_choose_basis_follows_the_paper_relations_and_check_inverts_them():
    X = np.linspace(-2.0, 1.0, 50)[:, None]  # half-range 1.5, centre -0.5
    b = choose_basis(X, 0.2, "squared_exponential", lengthscale_upper=1.0)
    assert b.center == (-0.5,)
    assert b.L[0] == pytest.approx(max(1.2, 3.2 * 1.0 / 1.5) * 1.5)
    assert b.m[0] == int(np.ceil(1.75 * b.L[0] / 0.2))
    short, long = b.lengthscale_range("squared_exponential")
    assert short[0] <= 0.2 and long[0] == pytest.approx(1.0)
    c = check_basis(b, np.array([0.1, 0.5, 0.5, 2.0]), "squared_exponential")
    assert (c.fraction_short, c.fraction_long) == (0.25, 0.25)
    assert choose_basis(X, 0.01, "squared_exponential").m == (128,)  # capped


# --------------------------------------------------------------------------- the density
def _small_problem(seed=0, n=60, m=10):
    rng = np.random.default_rng(seed)
    X = jnp.asarray(rng.uniform(-1, 1, size=(n, 1)))
    y = jnp.asarray(np.sin(3 * X[:, 0]) + 0.1 * rng.normal(size=n))
    basis = Basis((m,), (1.4,), (0.0,))
    Phi = basis(X)
    s = jnp.asarray(np.exp(rng.normal(size=m)) * np.r_[np.ones(m - 2), 1e-250, 0.0])
    return X, y, basis, Phi, s


def test_collapsed_density_equals_the_dense_gaussian():
    X, y, _, Phi, s = _small_problem()
    noise_var = 0.05
    C = np.asarray((Phi * s) @ Phi.T) + noise_var * np.eye(len(y))
    ref = stats.multivariate_normal(np.zeros(len(y)), C).logpdf(np.asarray(y))
    ours = collapsed_log_marginal(feature_stats(Phi, y), s, noise_var)
    assert float(ours) == pytest.approx(ref, abs=1e-8)
    # prior variances that underflow to zero keep the gradient finite
    g = jax.jit(
        jax.grad(lambda v, nv: collapsed_log_marginal(feature_stats(Phi, y), v, nv), argnums=(0, 1))
    )(s, noise_var)
    assert all(np.all(np.isfinite(np.asarray(a))) for a in g)


def test_collapsed_gradient_equals_the_dense_gaussians():
    """The hand-written gradient (one triangular inversion) against reverse-mode
    differentiation of the dense N x N Gaussian density it replaces."""
    X, y, _, Phi, s = _small_problem()
    s = s.at[-2:].set(jnp.asarray([1e-12, 3e-7]))  # small variances, above the floor
    noise_var = 0.05

    def dense(v, nv):
        C = (Phi * v) @ Phi.T + nv * jnp.eye(len(y))
        L = jnp.linalg.cholesky(C)
        a = jax.scipy.linalg.solve_triangular(L, y, lower=True)
        return -0.5 * (a @ a + 2 * jnp.sum(jnp.log(jnp.diagonal(L))) + len(y) * jnp.log(2 * jnp.pi))

    ours = jax.grad(
        lambda v, nv: collapsed_log_marginal(feature_stats(Phi, y), v, nv), argnums=(0, 1)
    )(s, noise_var)
    ref = jax.grad(dense, argnums=(0, 1))(s, noise_var)
    # with respect to log s, the form in which hyper-parameters enter (ds/dθ = s dlog s/dθ):
    # d/ds_i itself carries rounding error / s_i (1 - (B^-1)_ii where s_i is tiny)
    np.testing.assert_allclose(
        np.asarray(s * ours[0]), np.asarray(s * ref[0]), rtol=1e-8, atol=1e-12
    )
    assert float(ours[1]) == pytest.approx(float(ref[1]), rel=1e-8)


def test_closed_form_loo_equals_refitting_without_the_point():
    X, y, _, Phi, s = _small_problem(n=30, m=6)
    noise_var = 0.04
    st = feature_stats(Phi, y)
    r = jnp.sqrt(s)
    B = jnp.eye(6) + (r[:, None] * r[None, :]) * st.PtP / noise_var
    R = jax.scipy.linalg.solve_triangular(jnp.linalg.cholesky(B), jnp.diag(r), lower=True)
    w = R.T @ (R @ st.Pty) / noise_var
    ours = np.asarray(hsgp_loo(R, w, noise_var, Phi, y))
    C = np.asarray((Phi * s) @ Phi.T) + noise_var * np.eye(30)
    i, keep = 4, np.arange(30) != 4
    k = np.linalg.solve(C[np.ix_(keep, keep)], C[keep, i])
    ref = stats.norm(k @ np.asarray(y)[keep], np.sqrt(C[i, i] - C[keep, i] @ k)).logpdf(y[i])
    assert ours[i] == pytest.approx(ref, rel=1e-9)


@pytest.mark.parametrize("chunk", [1, 7, 25, 59, None])
def test_chunked_statistics_equal_the_dense_ones(chunk):
    X, y, basis, Phi, _ = _small_problem()
    dense = feature_stats(Phi, y)
    chunked = jax.jit(lambda X, y: scan_feature_stats(basis, (X,), y, chunk))(X, y)
    for a, b in zip(dense, chunked, strict=True):
        np.testing.assert_allclose(np.asarray(b), np.asarray(a), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("name", ["rbf", "matern32", "co2"])
def test_basis_model_density_approaches_the_exact_gp_model(name):
    rng = np.random.default_rng(2)
    X = rng.uniform(-1.7, 1.7, size=(80, 1))
    y = np.sin(2 * X[:, 0]) + 0.3 * np.cos(9 * X[:, 0]) + 0.1 * rng.normal(size=80)
    kernel = {
        "rbf": RBF(),
        "matern32": bk.kernels.Matern32(),
        "co2": Linear() + RBF() + RBF() * Periodic(period=0.7),
    }[name]
    kernel = name_leaves(kernel)
    x_scale = np.ones(1)
    params = {
        k: jnp.asarray(0.8)
        for leaf in kernel.leaves()
        for k in [
            leaf._site(p) for p in leaf.hyperparameters() if leaf.hyperparameters()[p].value is None
        ]
    }
    params.update(amplitude=jnp.linspace(0.5, 1.0, len(kernel.terms())), noise=jnp.asarray(0.3))
    Xj, yj = jnp.asarray(X), jnp.asarray(y)

    def logp(model, **kwargs):
        return float(jax.jit(lambda p: log_density(model, (), kwargs, p)[0])(params))

    exact = logp(gp_regression, X=Xj, y=yj, kernel=kernel, x_scale=x_scale)
    gaps = []
    # the seasonal term has m * (2J + 1) functions: fewer m for it
    for m in (8, 16, 40) if name == "co2" else (8, 32, 128):
        design = build_design(kernel, X, x_scale, n_basis=m)
        st = scan_feature_stats(design.features, (Xj,), yj, None)
        approx = logp(hsgp_regression, stats=st, kernel=kernel, design=design, x_scale=x_scale)
        gaps.append(abs(approx - exact))
    # relative gap of the log density: 1e-3 (squared exponential), 1e-2 (Matérn-3/2, whose
    # spectral density decays only like omega^-4)
    assert gaps[-1] < {"matern32": 1e-2}.get(name, 1e-3) * abs(exact), gaps
    assert gaps[2] < gaps[1] < gaps[0]


# --------------------------------------------------------------------------- the estimator
@pytest.fixture(scope="module")
def wave():
    rng = np.random.default_rng(3)
    X = rng.uniform(0, 10, size=(120, 1))
    y = np.sin(X[:, 0]) + 0.5 * np.sin(3 * X[:, 0]) + 0.2 * rng.normal(size=120)
    return X, y


@pytest.fixture(scope="module")
def hsgp_fit(wave):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # 50 draws: not converged, basis check noisy
        return bk.GPRegressor(approximation="hsgp", **QUICK).fit(*wave)


def test_hsgp_fit_records_what_ran(hsgp_fit, wave):
    est = hsgp_fit
    assert est.approximation_ == "hsgp"
    assert est.idata_.posterior.attrs["approximation"] == "hsgp"
    assert set(est.n_basis_) == {"rbf"} and len(est.boundary_["rbf"]) == 1
    assert est.hsgp_design_.size == est.n_basis_["rbf"][0]
    assert set(est.idata_.groups()) >= {
        "posterior",
        "sample_stats",
        "log_likelihood",
        "observed_data",
        "constant_data",
    }
    assert est.idata_.log_likelihood["y"].shape == (1, 50, len(wave[1]))
    assert np.isfinite(est.loo().elpd_loo)
    Xt = np.linspace(0, 10, 30)[:, None]
    lo, hi = est.predict_interval(Xt, 0.9)
    assert np.all(lo < hi)
    assert est.sample_posterior_predictive(Xt, n_draws=7).shape == (7, 30)


def test_loo_on_a_row_subset_is_the_full_loo_at_those_rows(hsgp_fit, wave, monkeypatch):
    """Above the work budget the closed-form LOO densities are computed on a seeded random
    subset of at least LOO_MIN_ROWS rows, recorded in the posterior's attrs; at those rows
    they are the same numbers as the full computation's."""
    from bayeskern.estimators import gp_basis as gp_module

    est = copy.deepcopy(hsgp_fit)
    Xs, ys = est.x_std_.transform(wave[0]), est.y_std_.transform(wave[1])
    full = np.asarray(est.idata_.log_likelihood["y"])
    assert "loo_subsample" not in est.idata_.posterior.attrs
    monkeypatch.setattr(gp_module, "LOO_MAX_WORK", 1)
    monkeypatch.setattr(gp_module, "LOO_MIN_ROWS", 40)
    est._add_hsgp_loo(Xs, ys)
    rows = np.asarray(est.idata_.log_likelihood["obs"])
    assert est.idata_.posterior.attrs["loo_subsample"] == len(rows) == 40
    assert len(np.unique(rows)) == 40
    np.testing.assert_allclose(
        np.asarray(est.idata_.log_likelihood["y"]), full[..., rows], rtol=1e-10
    )


def test_hsgp_predictions_match_the_exact_gp_on_the_same_draws(hsgp_fit, wave):
    # the exact conditionals for the very same posterior draws: only the basis differs
    exact = copy.copy(hsgp_fit)
    exact.__dict__.pop("_cache", None)
    exact.approximation_ = "exact"
    y = np.sin(np.linspace(0, 10, 200)) + 0.5 * np.sin(3 * np.linspace(0, 10, 200))
    Xt = np.linspace(0, 10, 200)[:, None]
    ph, pe = hsgp_fit.predictive(Xt), exact.predictive(Xt)
    assert np.mean(np.abs(ph.mean() - pe.mean()) / pe.std()) < 0.05
    assert abs(np.mean(-ph.logpdf(y)) - np.mean(-pe.logpdf(y))) < 0.02


def test_hsgp_predict_moments_equal_the_mixture_of_draws(hsgp_fit):
    # predict() reads the mixture's mean and sd off the weights' moments (law of total
    # variance); predictive() keeps every draw: both must give the same numbers
    Xt = np.linspace(0.5, 9.5, 40)[:, None]
    mean, sd = hsgp_fit.predict(Xt, return_std=True)
    pred = hsgp_fit.predictive(Xt)
    np.testing.assert_allclose(mean, pred.mean(), rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(sd, pred.std(), rtol=1e-7)
    big = np.linspace(0.5, 9.5, 5000)[:, None]  # a row's prediction ignores the other rows
    np.testing.assert_allclose(
        hsgp_fit.predict(big)[::1000], hsgp_fit.predict(big[::1000]), rtol=1e-10
    )


def test_hsgp_run_saves_and_loads(hsgp_fit, tmp_path):
    hsgp_fit.save(tmp_path / "run")
    loaded = bk.load_run(tmp_path / "run")
    assert loaded.approximation_ == "hsgp" and loaded.n_basis_ == hsgp_fit.n_basis_
    assert loaded.num_samples_ == hsgp_fit.num_samples_
    Xt = np.linspace(0, 10, 25)[:, None]
    np.testing.assert_allclose(loaded.predict(Xt), hsgp_fit.predict(Xt), rtol=1e-10)


def test_auto_is_exact_for_small_data_or_kernels_without_a_basis():
    rbf, maha = name_leaves(RBF()), name_leaves(bk.kernels.MahalanobisRBF())
    est = bk.GPRegressor()
    small, large = np.zeros((425, 1)), np.zeros((5000, 1))
    assert est._resolve_approximation(rbf, small) == "exact"  # the CO2 demo's size
    assert est._resolve_approximation(rbf, large) == "hsgp"
    # above the exact rows, inputs or a kernel without a basis: the regressor's inducing
    # points, without a warning
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert est._resolve_approximation(rbf, np.zeros((5000, 4))) == "inducing"
        assert est._resolve_approximation(maha, large) == "inducing"
        assert est._resolve_approximation(rbf, np.zeros((1000, 5))) == "exact"
    # the classifier has no inducing route: it falls back to the exact GP and warns with the
    # size and the alternatives
    clf = bk.GPClassifier()
    with pytest.warns(
        UserWarning, match=r"1202 x 1202 kernel matrix .*subset of at most 300 rows, or at most 3"
    ):
        assert clf._resolve_approximation(rbf, np.zeros((1202, 5))) == "exact"
    # a kernel the basis cannot represent: fewer columns would not help, so not suggested
    with pytest.warns(UserWarning, match=r"300 rows$"):
        assert clf._resolve_approximation(maha, np.zeros((1202, 2))) == "exact"


def test_chunk_size_does_not_change_the_draws(hsgp_fit, wave):
    # the same statistics up to summation order (~1e-15), which the trajectories amplify
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        other = bk.GPRegressor(approximation="hsgp", chunk_size=7, **QUICK).fit(*wave)
    for site in ("rbf_lengthscale", "noise"):
        np.testing.assert_allclose(
            np.asarray(other.idata_.posterior[site]),
            np.asarray(hsgp_fit.idata_.posterior[site]),
            rtol=1e-4,
        )


def test_pilot_basis_finds_a_lengthscale_below_the_priors_range():
    # wiggles at ~0.08 standardized units: below the prior's 5 % quantile (0.19), which a
    # basis chosen from the prior alone cannot resolve (100 % of draws outside it); the
    # pilot's mode search moves the basis there before sampling, so no refit is needed
    rng = np.random.default_rng(5)
    X = rng.uniform(0, 10, size=(1500, 1))
    y = np.sin(2 * X[:, 0]) + 0.3 * np.sin(7 * X[:, 0]) + 0.2 * rng.normal(size=1500)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        est = bk.GPRegressor(approximation="hsgp", **QUICK).fit(X, y)
    assert not [w for w in caught if "does not resolve" in str(w.message)]
    leaf = est.kernel_.leaves()[0]
    lower = lengthscale_bounds(leaf, est.x_std_.scale)[0]
    ls = np.asarray(est.idata_.posterior["rbf_lengthscale"]).ravel()
    assert np.all(ls < lower)
    assert all(c.fraction_short == 0 and c.fraction_long == 0 for c in est.basis_checks_)
    prior_only = build_design(est.kernel_, est.x_std_.transform(X), est.x_std_.scale)
    assert check_basis(prior_only.terms[0].basis, ls, "squared_exponential").fraction_short == 1


def test_too_small_a_basis_warns_with_the_numbers(wave):
    with pytest.warns(UserWarning, match=r"shorter than the .* the basis resolves"):
        bk.GPRegressor(
            approximation="hsgp", n_basis=3, **{**QUICK, "num_warmup": 10, "num_samples": 10}
        ).fit(*wave)


@pytest.mark.parametrize(
    "kernel, n_cols, match",
    [
        (bk.kernels.MahalanobisRBF(), 1, "MahalanobisRBF has no spectral density"),
        (RBF(), 4, "at most 3 columns"),
        (RBF() * Periodic(), 1, "period is sampled"),
        (Linear() * RBF(), 1, "product"),
    ],
)
def test_hsgp_refuses_what_the_basis_cannot_represent(kernel, n_cols, match):
    rng = np.random.default_rng(0)
    X, y = rng.normal(size=(20, n_cols)), rng.normal(size=20)
    with pytest.raises(ValueError, match=match):
        bk.GPRegressor(kernel, approximation="hsgp", **QUICK).fit(X, y)
    assert hsgp_unsupported_reason(name_leaves(kernel), n_cols) is not None


@pytest.mark.parametrize(
    "params, match",
    [
        (dict(approximation="fast"), "'approximation' parameter of GPRegressor must be"),
        (dict(n_basis=0), "'n_basis' parameter of GPRegressor must be"),
        (dict(chunk_size=-1), "'chunk_size' parameter of GPRegressor must be"),
    ],
)
def test_bad_approximation_parameters_name_the_argument(params, match):
    X, y = np.random.default_rng(0).normal(size=(10, 1)), np.arange(10.0)
    with pytest.raises(ValueError, match=match):
        bk.GPRegressor(**params, **QUICK).fit(X, y)


def test_design_round_trips_through_its_config():
    kernel = name_leaves(Linear() + RBF() + RBF() * Periodic(period=0.5))
    X = np.linspace(-1, 2, 30)[:, None]
    design = build_design(kernel, X, np.ones(1))
    assert HSGPDesign.from_config(design.to_config()) == design
    assert [t.kind for t in design.terms] == ["linear", "stationary", "stationary*periodic"]
    assert design.size <= 400
    assert isinstance(design.terms[0], TermBasis)


@pytest.mark.slow
def test_hsgp_fit_matches_an_exact_fit():
    rng = np.random.default_rng(0)
    X = rng.uniform(0, 10, size=(300, 1))
    y = np.sin(X[:, 0]) + 0.5 * np.sin(3 * X[:, 0]) + 0.2 * rng.normal(size=300)
    Xt = np.linspace(0, 10, 200)[:, None]
    yt = np.sin(Xt[:, 0]) + 0.5 * np.sin(3 * Xt[:, 0])
    settings = dict(
        num_warmup=300, num_samples=300, num_chains=2, progress_bar=False, random_state=0
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        pe = bk.GPRegressor(approximation="exact", **settings).fit(X, y).predictive(Xt)
        ph = bk.GPRegressor(approximation="hsgp", **settings).fit(X, y).predictive(Xt)
    assert np.mean(np.abs(ph.mean() - pe.mean()) / pe.std()) < 0.05
    assert abs(np.mean(-ph.logpdf(yt)) - np.mean(-pe.logpdf(yt))) < 0.02
