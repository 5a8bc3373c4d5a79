"""Tests of LAB-RBF (He et al. 2023): kernel, asymmetric KRR theorems, Algorithm 1, estimator."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from sklearn.kernel_ridge import KernelRidge
from sklearn.utils.estimator_checks import parametrize_with_checks

import bayeskern  # noqa: F401  (enables float64)
from bayeskern.estimators.labrbf import LABRBFRegressor
from bayeskern.kernels.labrbf import (
    LABRBF,
    LABRBFFeatures,
    _gram_fast,
    _labrbf_gram,
    krr_f1,
    krr_f2,
)
from bayeskern.learning import fit_kernel, fit_labrbf
from bayeskern.learning.labrbf import _masked_fit, bandwidth_floor, initial_support, select_worst

#: tiny training settings shared by the fast tests (kernel arguments)
FAST = dict(
    max_support=12, n_init_support=6, n_iter_round=20, n_iter_final=40, eval_every=20, batch_size=32
)


def _est(n_estimators=1, **kw):
    """A fast LABRBFRegressor: FAST's named settings, the rest through kernel_params."""
    named = {k: FAST[k] for k in ("max_support", "n_iter_round", "n_iter_final")}
    extra = {k: v for k, v in FAST.items() if k not in named}
    for k in list(kw):
        if k in ("support_init", "dtype", "n_init_support", "eval_every", "batch_size"):
            extra[k] = kw.pop(k)
    return LABRBFRegressor(
        **{**named, **kw}, kernel_params=extra, n_estimators=n_estimators, progress_bar=False
    )


def _toy(n=120, seed=0, noise=0.1):
    rng = np.random.default_rng(seed)
    X = rng.uniform(0, 3, (n, 1))
    y = np.sin(2 * X[:, 0] ** 3) + noise * rng.standard_normal(n)
    return X, y


# --------------------------------------------------------------------------- kernel
@pytest.mark.parametrize("p", [1, 2])
def test_gram_matches_dense_reference(p):
    rng = np.random.default_rng(1)
    T, Xs, Th = rng.normal(size=(7, 3)), rng.normal(size=(5, 3)), rng.uniform(0.1, 2, (5, 3))
    ref = np.empty((7, 5))
    for a in range(7):
        for i in range(5):
            ref[a, i] = np.exp(-(np.linalg.norm(Th[i] * (T[a] - Xs[i])) ** p))
    np.testing.assert_allclose(_labrbf_gram(T, Xs, Th, p), ref, rtol=1e-12)


@pytest.mark.parametrize("p", [1, 2])
def test_matrix_product_form_matches_reference(p):
    rng = np.random.default_rng(15)
    T, Xs, Th = rng.uniform(-1, 1, (9, 4)), rng.uniform(-1, 1, (6, 4)), rng.uniform(0.1, 3, (6, 4))
    np.testing.assert_allclose(_gram_fast(T, Xs, Th, p), _labrbf_gram(T, Xs, Th, p), rtol=1e-9)
    np.testing.assert_allclose(
        _gram_fast(Xs, Xs, Th, p, same=True), _labrbf_gram(Xs, Xs, Th, p), rtol=1e-9
    )


@pytest.mark.parametrize("p", [1, 2])
def test_gradient_finite_at_coincident_points(p):
    X = jnp.asarray(np.random.default_rng(2).normal(size=(4, 2)))
    Th = jnp.ones((4, 2))

    for gram in (_labrbf_gram, lambda a, b, t, p: _gram_fast(a, b, t, p, same=True)):

        def f(Th, X, gram=gram):
            return jnp.sum(gram(X, X, Th, p))  # diagonal: t == x_i exactly

        gT, gX = jax.grad(f, argnums=(0, 1))(Th, X)
        assert np.all(np.isfinite(gT)) and np.all(np.isfinite(gX))


def test_kernel_is_asymmetric():
    rng = np.random.default_rng(3)
    X, Th = rng.normal(size=(6, 2)), rng.uniform(0.2, 3, (6, 2))
    K = np.asarray(_labrbf_gram(X, X, Th))
    assert not np.allclose(K, K.T)
    assert LABRBF().symmetric is False


# --------------------------------------------------------------------------- asymmetric KRR
def test_equal_bandwidths_reduce_to_sklearn_kernel_ridge():
    """Corollary 2: with one bandwidth for all points, asymmetric KRR is KRR."""
    rng = np.random.default_rng(4)
    X, T = rng.normal(size=(30, 3)), rng.normal(size=(10, 3))
    y = np.sin(X).sum(1)
    theta, lam = 0.7, 1e-2
    Th = np.full((30, 3), theta)
    K = _labrbf_gram(X, X, Th, 2)
    f1 = krr_f1(_labrbf_gram(T, X, Th, 2), K, y, lam)
    f2 = krr_f2(_labrbf_gram(T, X, Th, 2).T, K, y, lam)
    ref = KernelRidge(alpha=lam, kernel="rbf", gamma=theta**2).fit(X, y).predict(T)
    np.testing.assert_allclose(f1, ref, rtol=1e-8, atol=1e-10)
    np.testing.assert_allclose(f2, ref, rtol=1e-8, atol=1e-10)


def test_theorem1_stationary_point_of_asymmetric_krr():
    """Theorem 1: (w*, v*) of eq. (5) is a stationary point of objective (4)."""
    rng = np.random.default_rng(5)
    F, N, lam = 8, 6, 0.3
    phi, psi = rng.normal(size=(F, N)), rng.normal(size=(F, N))
    Y = rng.normal(size=N)
    w = psi @ np.linalg.solve(phi.T @ psi + lam * np.eye(N), Y)
    v = phi @ np.linalg.solve(psi.T @ phi + lam * np.eye(N), Y)

    def obj(w, v):
        a, b = phi.T @ w, psi.T @ v
        return (
            lam * w @ v
            + 0.5 * jnp.sum((a - Y) ** 2)
            + 0.5 * jnp.sum((b - Y) ** 2)
            - 0.5 * jnp.sum((b - a) ** 2)
        )

    gw, gv = jax.grad(obj, argnums=(0, 1))(jnp.asarray(w), jnp.asarray(v))
    np.testing.assert_allclose(gw, 0, atol=1e-10)
    np.testing.assert_allclose(gv, 0, atol=1e-10)
    # eq. (6): with K(x, t) = <phi(x), psi(t)>, f1 and f2 are phi(t)^T w*, psi(t)^T v*
    pt, qt = rng.normal(size=(F, 4)), rng.normal(size=(F, 4))
    K = phi.T @ psi
    np.testing.assert_allclose(krr_f1(pt.T @ psi, K, Y, lam), pt.T @ w, rtol=1e-9)
    np.testing.assert_allclose(krr_f2(phi.T @ qt, K, Y, lam), qt.T @ v, rtol=1e-9)


def test_theorem3_training_error_equals_dual_variable():
    """Theorem 3: e* = Y - f1(X) = lam (K + lam I)^{-1} Y."""
    rng = np.random.default_rng(6)
    X, Th = rng.normal(size=(20, 2)), rng.uniform(0.3, 2, (20, 2))
    y, lam = rng.normal(size=20), 0.05
    K = _labrbf_gram(X, X, Th, 1)
    e = y - krr_f1(K, K, y, lam)
    np.testing.assert_allclose(e, lam * np.linalg.solve(K + lam * np.eye(20), y), atol=1e-10)


def test_padded_support_solve_equals_unpadded():
    rng = np.random.default_rng(7)
    Z, Th, y = rng.normal(size=(9, 2)), rng.uniform(0.3, 2, (9, 2)), rng.normal(size=9)
    mask = np.arange(9) < 6
    beta, coef = _masked_fit(
        jnp.asarray(Th), jnp.asarray(Z), jnp.asarray(y), jnp.asarray(mask), 1, 1e-3
    )
    K = _labrbf_gram(Z[:6], Z[:6], Th[:6], 1)
    ref = np.linalg.solve(K + 1e-3 * np.eye(6), y[:6] - y[:6].mean())
    np.testing.assert_allclose(coef[:6], ref, rtol=1e-8)
    np.testing.assert_allclose(coef[6:], 0, atol=0)
    assert float(beta) == pytest.approx(y[:6].mean())


# --------------------------------------------------------------------------- Algorithm 1
def test_select_worst_picks_largest_squared_residuals():
    r = np.array([0.1, -3.0, 0.5, 2.0, -0.2])
    assert list(select_worst(r, 2)) == [1, 3]
    assert select_worst(r, 0).size == 0


def test_initial_support_sorted_y_spans_label_range():
    y = np.random.default_rng(8).normal(size=100)
    idx = initial_support(y, 10, "sorted_y", np.random.default_rng(0))
    assert len(idx) == 10 and y.argmin() in idx and y.argmax() in idx


def test_dynamic_strategy_adds_planted_outlier():
    X, y = _toy(80, seed=9)
    seed, m0 = 3, 6
    X_idx = np.arange(len(y))
    init = initial_support(y, m0, "uniform", np.random.default_rng(seed))
    outlier = int(np.setdiff1d(X_idx, init)[17])
    y = y.copy()
    y[outlier] += 25.0
    kw = dict(max_support=m0 + 1, n_init_support=m0, n_add=1, support_init="uniform")
    kw.update(n_iter_round=10, n_iter_final=0, eval_every=10, random_state=seed)
    k = fit_kernel(LABRBF(**kw), X, y)
    assert list(np.sort(k.support_index_[:m0])) == list(init)  # same initial support
    assert k.support_index_[-1] == outlier  # the one point added is the outlier


def test_max_support_below_initial_count_is_rejected():
    X, y = _toy(50)
    with pytest.raises(ValueError, match="max_support=5 is below n_init_support=10"):
        fit_kernel(LABRBF(max_support=5, n_init_support=10), X, y)


def test_non_finite_bandwidths_raise():
    X, y = _toy(60)
    with pytest.raises(FloatingPointError, match="non-finite"):
        fit_kernel(LABRBF(learning_rate=1e38, **FAST), X, y)


@pytest.mark.parametrize(
    "bad, match",
    [
        (dict(p=3), "'p' parameter of LABRBFRegressor must be"),
        (dict(alpha=-1.0), "alpha"),
        (dict(support_init="kmeans"), "support_init"),
        (dict(dtype="float16"), "dtype"),
    ],
)
def test_bad_parameters_named(bad, match):
    X, y = _toy(40)
    with pytest.raises(ValueError, match=match):
        _est(**bad).fit(X, y)


@pytest.mark.parametrize(
    "bad, match",
    [
        (dict(kernel_params={"max_support": 5}), "kernel_params must not repeat"),
        (dict(kernel_params={"bandwidth": 5}), "kernel_params has an argument"),
        (
            dict(kernel_params=[1]),
            "'kernel_params' parameter of LABRBFRegressor must be an instance of 'dict'",
        ),
        (dict(n_estimators=0), "n_estimators"),
        (dict(n_estimators=6, calibration_fraction=0.1), "n_estimators \\* calibration_fraction"),
    ],
)
def test_bad_estimator_parameters_named(bad, match):
    X, y = _toy(40)
    with pytest.raises(ValueError, match=match):
        LABRBFRegressor(**bad, progress_bar=False).fit(X, y)


def test_bad_data_rejected():
    X, y = _toy(40)
    X[3, 0] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        _est().fit(X, y)


# --------------------------------------------------------------------------- estimator
@pytest.fixture(scope="module")
def fitted():
    X, y = _toy(200, seed=10)
    est = LABRBFRegressor(
        max_support=40,
        n_iter_round=50,
        n_iter_final=200,
        kernel_params=dict(n_init_support=20, eval_every=50),
        progress_bar=False,
        random_state=0,
    ).fit(X, y)
    return est, X, y


def test_estimator_learns_and_is_reproducible(fitted):
    est, X, y = fitted
    Xt, yt = _toy(300, seed=11)
    r2 = 1 - np.mean((est.predict(Xt) - yt) ** 2) / np.var(yt)
    assert r2 > 0.6
    again = LABRBFRegressor(**est.get_params()).fit(X, y)
    np.testing.assert_array_equal(again.predict(Xt), est.predict(Xt))
    # three cross-fitted models (the default), 40 support points each
    assert len(est.kernels_) == 3 and est.n_support_ == 120 and est.bandwidths_.shape == (120, 1)
    # disjoint calibration blocks of 10 % each, none of them seen by its own model
    assert len(est.calibration_index_) == 60 == len(np.unique(est.calibration_index_))


def test_support_bandwidths_in_data_units(fitted):
    est, X, _ = fitted
    K = np.exp(
        -np.linalg.norm(est.bandwidths_[None] * (X[:5, None] - est.support_vectors_[None]), axis=-1)
    )
    np.testing.assert_allclose(
        np.hstack([k._support_gram(X[:5]) for k in est.kernels_]), K, rtol=1e-10
    )
    f1 = est.intercept_ + K @ est.dual_coef_
    np.testing.assert_allclose(est.predict_krr(X[:5]), f1, rtol=1e-10)


def test_f2_uses_own_bandwidth_on_support_points(fitted):
    est, _, _ = fitted
    k = est.kernel_
    Z, Th = k.support_, k.bandwidths_
    Kxx = np.asarray(_labrbf_gram(Z, Z, Th, 1))
    y_sv = k.intercept_ + Kxx @ k.dual_coef_ + k.alpha_ * k.dual_coef_  # eq. (8)
    # on support points K(X_sv, t) = K(X_sv, X_sv), so f2 solves the transposed system
    f2_ref = k.intercept_ + Kxx.T @ np.linalg.solve(
        Kxx.T + k.alpha_ * np.eye(len(Z)), y_sv - k.intercept_
    )
    sv = Z * k.half_range_ + k.center_
    np.testing.assert_allclose(k.predict_f2(sv), f2_ref, rtol=1e-8)
    # with a small ridge both regression functions nearly interpolate the support data
    if float(k.alpha_) <= 1e-3:
        np.testing.assert_allclose(f2_ref, y_sv, atol=0.05 * np.ptp(y_sv))


def test_predictive_interval_and_diagnostics(fitted):
    est, _, _ = fitted
    from bayeskern import diagnostics

    Xt, yt = _toy(400, seed=12)
    m = diagnostics.regression_metrics(yt, est.predictive(Xt))
    assert 0.75 <= m["coverage_90"] <= 0.99
    mean, std = est.predict(Xt, return_std=True)
    lo, hi = est.predict_interval(Xt, 0.9)
    assert np.all(std > 0) and np.all(lo < mean) and np.all(mean < hi)
    assert {"posterior", "log_likelihood", "observed_data"} <= set(est.idata_.groups())
    assert est.convergence_.max_rhat < 1.05  # exact independent draws
    assert np.isfinite(est.loo().elpd_loo)
    draws = est.sample_posterior_predictive(Xt[:5], n_draws=50, random_state=0)
    assert draws.shape == (50, 5)


def test_float32_and_float64_training_agree_roughly():
    X, y = _toy(100, seed=13)
    kw = dict(FAST, theta0=1.0, random_state=0)
    a = fit_kernel(LABRBF(dtype="float32", **kw), X, y).predict_f1(X)
    b = fit_kernel(LABRBF(dtype="float64", **kw), X, y).predict_f1(X)
    assert np.max(np.abs(a - b)) < 1e-2 * np.ptp(y)


def test_features_kernel_is_psd_and_plugs_into_gp_model():
    from bayeskern.models.gp import gp_regression
    from numpyro.infer.util import log_density

    from bayeskern.kernels.base import name_leaves

    X, y = _toy(30, seed=14)
    fk = name_leaves(fit_kernel(LABRBFFeatures(LABRBF(**dict(FAST, theta0=1.0))), X, y))
    K = np.asarray(fk.gram({"labrbffeatures_bandwidth_scale": 1.0}, X, X))
    assert np.linalg.eigvalsh((K + K.T) / 2).min() > -1e-8 and np.allclose(K, K.T)
    assert np.mean(np.diag(K)) == pytest.approx(1.0)  # normalised by feature_norm_
    params = {"labrbffeatures_bandwidth_scale": 1.2, "amplitude": jnp.ones(1), "noise": 0.3}
    lp, _ = log_density(
        gp_regression,
        (jnp.asarray(X), jnp.asarray((y - y.mean()) / y.std())),
        {"kernel": fk, "x_scale": np.ones(1)},
        params,
    )
    assert np.isfinite(float(lp))


@pytest.mark.slow
def test_features_kernel_in_gp_regressor():
    from bayeskern.estimators.gp import GPRegressor

    X, y = _toy(30, seed=14)
    kern = LABRBFFeatures(LABRBF(**dict(FAST, theta0=1.0)))
    gp = GPRegressor(
        kernel=kern, num_warmup=50, num_samples=50, num_chains=2, progress_bar=False, random_state=0
    ).fit(X, y)
    assert np.all(np.isfinite(gp.predict(X[:5])))
    assert "labrbffeatures_bandwidth_scale" in gp.idata_.posterior


def test_plot_bandwidths(fitted):
    import matplotlib

    matplotlib.use("Agg")
    from bayeskern.plots.labrbf import plot_bandwidths

    est, X, y = fitted
    ax, ax2 = plot_bandwidths(est, X, y)
    assert ax.get_ylabel() == "y" and "bandwidth" in ax2.get_ylabel()


# --------------------------------------------------------------------------- sklearn contract
@parametrize_with_checks(
    [
        LABRBFRegressor(
            max_support=16,
            theta0=1.0,
            alpha=1e-3,
            n_iter_round=2,
            n_iter_final=4,
            kernel_params=dict(n_init_support=16, eval_every=4, batch_size=16),
            n_estimators=1,
            num_samples=10,
            num_chains=2,
            progress_bar=False,
            random_state=0,
        )
    ]
)
def test_sklearn_contract(estimator, check):
    check(estimator)


def test_save_load_roundtrip(fitted, tmp_path):
    from bayeskern.runs import load_run, save_run

    est, X, _ = fitted
    save_run(est, tmp_path / "run")
    back = load_run(tmp_path / "run")
    np.testing.assert_allclose(back.predict(X[:20]), est.predict(X[:20]), rtol=1e-12)
    lo, hi = back.predict_interval(X[:20])
    lo0, hi0 = est.predict_interval(X[:20])
    np.testing.assert_allclose(lo, lo0, rtol=1e-9)
    np.testing.assert_allclose(est.predict_krr(X[:5], "f2"), back.predict_krr(X[:5], "f2"))


def test_loo_residuals_match_explicit_refit(fitted):
    est, _, _ = fitted
    k = est.kernel_
    Z, Th, lam = k.support_, k.bandwidths_, k.alpha_
    K = np.asarray(_labrbf_gram(Z, Z, Th, 1))
    yc = K @ k.dual_coef_ + lam * k.dual_coef_  # Y_sv - beta, from eq. (8)
    loo = k.loo_residuals()
    for i in (0, 7, len(Z) - 1):
        keep = np.arange(len(Z)) != i
        c = np.linalg.solve(K[np.ix_(keep, keep)] + lam * np.eye(len(Z) - 1), yc[keep])
        assert loo[i] == pytest.approx(yc[i] - K[i, keep] @ c, rel=1e-6)


def test_alpha_auto_picks_from_grid_and_larger_for_noisy_labels():
    X, y = _toy(120, seed=16, noise=0.0)
    rng = np.random.default_rng(0)
    kw = dict(FAST, n_iter_round=0, n_iter_final=0, alpha="auto")
    clean = fit_kernel(LABRBF(**kw), X, y)
    noisy = fit_kernel(LABRBF(**kw), X, y + 0.8 * rng.standard_normal(len(y)))
    assert float(clean.alpha_) in (1e-3, 1e-2, 1e-1, 1.0)
    assert float(noisy.alpha_) >= float(clean.alpha_)


# --------------------------------------------------------------------------- data-driven defaults
def test_bandwidth_floor_formula_and_training_respects_it():
    Z = np.array([[0.0], [1.0]])
    rng = np.random.default_rng(0)
    assert bandwidth_floor(Z, 1, rng) == pytest.approx(0.1)  # median distance 1
    assert bandwidth_floor(Z, 2, rng) == pytest.approx(np.sqrt(0.1))
    X, y = _toy(80, seed=20, noise=0.5)
    k = fit_kernel(LABRBF(**dict(FAST, n_iter_final=200), random_state=0), X, y)
    floor = float(k.min_bandwidth_)
    assert floor > 0 and k.bandwidths_.min() >= floor * (1 - 1e-6)
    assert float(k.theta0_) >= floor * (1 - 1e-6)
    off = fit_kernel(LABRBF(**dict(FAST, min_bandwidth=0.0), random_state=0), X, y)
    assert float(off.min_bandwidth_) == 0.0


def test_max_support_auto_is_a_third_of_the_rows_capped():
    X, y = _toy(90, seed=21)
    kw = dict(FAST, max_support="auto", n_init_support=None, n_iter_round=1, n_iter_final=1)
    k = fit_kernel(LABRBF(**kw, random_state=0), X, y)
    assert int(k.max_support_) == 30 and len(k.support_index_) == 30
    from bayeskern.learning.labrbf import _auto_support

    assert _auto_support(5000) == 300


def test_ensemble_interval_is_narrowed_by_the_models_spread(fitted):
    """predictive(): scale^2 = max(s^2 - spread, s^2 / E) of the single-model scale s."""
    est, X, _ = fitted
    from bayeskern.estimators.labrbf import _nig_predictive_np

    Xt, _ = _toy(50, seed=22)
    _, s, _ = _nig_predictive_np(est.posterior_, est._features(Xt))
    s = s * est.y_scale_
    F = np.stack([k.predict_f1(Xt) for k in est.kernels_])
    got = est.predictive(Xt).scale[0]
    np.testing.assert_allclose(got, np.sqrt(np.maximum(s**2 - F.var(0), s**2 / 3)), rtol=1e-10)
    np.testing.assert_allclose(
        est.predictive(Xt).loc[0] - F.mean(0),
        est.y_scale_ * (est._features(Xt) @ np.asarray(est.posterior_.w)),
        rtol=1e-8,
        atol=1e-10,
    )


def test_validation_rows_keep_the_untrained_model_when_training_hurts():
    """The two-way stopping rule: a training that ruins the fit (a huge step size drives the
    bandwidths far up, every kernel becomes a spike) is undone on the validation rows."""
    rng = np.random.default_rng(24)
    X = rng.uniform(0, 3, (120, 1))
    y = np.sin(X[:, 0]) + 0.05 * rng.standard_normal(120)  # smooth: one bandwidth fits it
    val = np.arange(0, 120, 4)
    kw = dict(FAST, n_iter_final=100, theta0=1.0)
    good = fit_kernel(LABRBF(**kw, random_state=0), X, y, validation_index=val)
    bad = fit_kernel(
        LABRBF(**dict(kw, learning_rate=50.0), random_state=0), X, y, validation_index=val
    )
    for k in (good, bad):
        assert not np.intersect1d(k.support_index_, val).size
        v0, v1 = k.validation_mse_
        assert bool(k.trained_) == (v1 <= v0)
    assert not bad.trained_  # reverted: the initial support with the one global bandwidth
    assert len(bad.support_index_) == 6 and np.allclose(bad.bandwidths_, float(bad.theta0_))
    assert good.trained_ and len(good.support_index_) == 12
    with pytest.raises(ValueError, match="validation_index"):
        fit_kernel(LABRBF(**FAST), X, y, validation_index=[500])


def test_fit_kernel_on_a_labrbf_is_fit_labrbf():
    """The kernel holds fitted state; Algorithm 1 is fit_labrbf, which fit_kernel calls."""
    X, y = _toy(60, seed=5)
    kernel = LABRBF(**FAST, random_state=3)
    a, b = fit_kernel(kernel, X, y), fit_labrbf(kernel, X, y)
    assert not kernel.is_fitted and a.is_fitted
    for name in ("support_index_", "support_", "bandwidths_", "dual_coef_", "intercept_"):
        np.testing.assert_array_equal(getattr(a, name), getattr(b, name))
    with pytest.raises(ValueError, match="needs the labels y"):
        fit_kernel(kernel, X)
