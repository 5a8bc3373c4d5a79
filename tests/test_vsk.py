"""Tests of the variably scaled kernels (Campi et al. 2021)."""

import warnings

import jax
import jax.numpy as jnp
import matplotlib
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn.model_selection import GridSearchCV
from sklearn.naive_bayes import GaussianNB
from sklearn.preprocessing import MinMaxScaler
from sklearn.utils.estimator_checks import parametrize_with_checks

import bayeskern  # noqa: F401  (float64)
from bayeskern.estimators.svm import KernelSVC
from bayeskern.estimators.vsk import VSKClassifier, VSKFeatureExtractor, VSKRegressor
from bayeskern.experiments.conditioning import shape_sweep
from bayeskern.experiments.vsk import compare_vsk, make_svm_selector, paper_param_grid
from bayeskern.kernels import RBF, Laplacian, Linear, default_theta, name_leaves
from bayeskern.kernels.base import kernel_from_config
from bayeskern.kernels.conditioning import (
    condition_number,
    kernel_diagnostics,
    krn_fit,
    separation_distance,
    spectral_ratio,
)
from bayeskern.kernels.vsk import (
    VSK,
    CallableScaling,
    ColumnScaling,
    LinearModelScaling,
    NaiveBayesScaling,
    ParametricScaling,
    make_scaling,
)
from bayeskern.learning import fit_kernel, fit_scaling

matplotlib.use("Agg")


def _fit(kernel, X, y=None):
    return name_leaves(fit_kernel(name_leaves(kernel), X, y))


def _gram(kernel, X1, X2=None):
    theta = default_theta(kernel, np.ones(X1.shape[1]))
    return np.asarray(kernel(X1, X1 if X2 is None else X2, theta))


def _data(n=40, d=3, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    y = (X[:, 0] + 0.5 * X[:, 1] + 0.3 * rng.normal(size=n) > 0).astype(int)
    return X, y


# ============================================================ kernel identities
def test_theorem3_gaussian_vsk_is_hadamard_product_and_definition2():
    """Theorem 3: K^Psi = K o K^psi; with w = 1/l it is the RBF on (x, psi(x)) (Def. 2)."""
    X, _ = _data()
    psi = lambda A: np.column_stack([np.sin(A[:, 0]), A[:, 1] ** 2])  # noqa: E731
    ell = 0.7
    k = _fit(VSK(RBF(lengthscale=ell), scaling=psi, weight=1 / ell), X)
    P = psi(X)
    K = np.exp(-0.5 * ((X[:, None] - X[None]) ** 2).sum(-1) / ell**2)
    Kpsi = np.exp(-0.5 * ((P[:, None] - P[None]) ** 2).sum(-1) / ell**2)
    np.testing.assert_allclose(_gram(k, X), K * Kpsi, rtol=1e-12, atol=1e-14)
    Z = np.hstack([X, P])
    literal = _gram(name_leaves(RBF(lengthscale=ell)), Z)
    np.testing.assert_allclose(_gram(k, X), literal, rtol=1e-12, atol=1e-14)


def test_theorem6_linear_vsk_is_sum():
    """Theorem 6: K^Psi = K + K^psi, K^psi = psi psi^T (times w^2)."""
    X, y = _data()
    k = _fit(VSK(Linear(), weight=1.5), X, y)
    assert k._form() == "sum"
    P = GaussianNB().fit(X, y).predict_proba(X)[:, 1:]
    np.testing.assert_allclose(_gram(k, X), X @ X.T + 2.25 * P @ P.T, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(
        np.asarray(k.diag(default_theta(k, np.ones(3)), X)), np.diag(_gram(k, X)), rtol=1e-12
    )


@pytest.mark.parametrize("base", [RBF(), Linear(), Laplacian()])
def test_psi_zero_or_weight_zero_gives_base_kernel(base):
    """Remark 3: psi = 0 (or w = 0) gives back the base kernel."""
    X, y = _data()
    plain = _gram(name_leaves(base), X)
    k0 = _fit(VSK(base, scaling=lambda A: np.zeros((len(A), 2))), X)
    np.testing.assert_allclose(_gram(k0, X), plain, rtol=1e-12, atol=1e-14)
    kw = _fit(VSK(base, weight=0.0), X, y)
    np.testing.assert_allclose(_gram(kw, X), plain, rtol=1e-12, atol=1e-14)


def test_vsk_cross_gram_and_columns_and_covariates():
    """Cross Gram between new and training points; ColumnScaling moves covariates to psi."""
    X, _ = _data(n=30, d=3)
    Xn, _ = _data(n=7, d=3, seed=1)
    k = _fit(VSK(RBF(lengthscale=1.0), scaling=ColumnScaling([2]), columns=[0, 1], weight=1.0), X)
    expected = _gram(name_leaves(RBF(lengthscale=1.0)), Xn, X)  # (x, x2) == all three columns
    np.testing.assert_allclose(_gram(k, Xn, X), expected, rtol=1e-12)


def test_vsk_ard_base_with_column_subset():
    """ARD length-scales of the base are cut to the x-block columns."""
    X, y = _data(n=20, d=4)
    k = _fit(VSK(RBF(ard=True), columns=[0, 2]), X, y)
    theta = default_theta(k, np.ones(4))
    theta["vsk_rbf_lengthscale"] = jnp.array([0.5, 9.0, 2.0, 9.0])
    K = np.asarray(k.gram(theta, jnp.asarray(X), jnp.asarray(X)))
    Xc = X[:, [0, 2]] / np.array([0.5, 2.0])
    P = np.asarray(k.psi(X))
    ref = np.exp(-0.5 * ((Xc[:, None] - Xc[None]) ** 2).sum(-1)) * np.exp(
        -0.5 * ((P[:, None] - P[None]) ** 2).sum(-1)
    )
    np.testing.assert_allclose(K, ref, rtol=1e-12)


def test_vsk_jit_and_grad_through_user_callable():
    """A NumPy psi runs under jit via pure_callback; gradients w.r.t. theta are finite."""
    X, _ = _data(n=15)
    k = _fit(VSK(RBF(), scaling=lambda A: np.tanh(A[:, :2])), X)
    theta = default_theta(k, np.ones(3))
    f = jax.jit(lambda t: jnp.sum(k.gram(t, jnp.asarray(X), jnp.asarray(X))))
    g = jax.grad(f)(theta)
    assert np.isfinite(float(f(theta)))
    assert all(np.isfinite(float(v)) for v in g.values())
    np.testing.assert_allclose(float(f(theta)), _gram(k, X).sum(), rtol=1e-12)


def test_vsk_save_roundtrip_without_pickle():
    X, y = _data()
    k = _fit(VSK(RBF(lengthscale=0.8)), X, y)
    k2 = name_leaves(kernel_from_config(k.get_config(), k.get_state()))
    np.testing.assert_allclose(_gram(k2, X), _gram(k, X), rtol=1e-12)
    with pytest.raises(TypeError, match="cannot be saved"):
        VSK(scaling=lambda A: A).get_config()


# ============================================================ theorems as properties
def _random_case(seed, n, d, m, gamma):
    """Gaussian kernel matrices K and K^Psi = K o K^psi on random data (NumPy: the identity
    with the VSK kernel class is checked by the Theorem 3 test above)."""
    rng = np.random.default_rng(seed)
    X = rng.uniform(size=(n, d))
    P = rng.uniform(size=(n, m))
    sq = lambda A: ((A[:, None] - A[None]) ** 2).sum(-1)  # noqa: E731
    K = np.exp(-gamma * sq(X))
    return X, P, K, np.exp(-gamma * sq(np.hstack([X, P])))


@settings(max_examples=25, deadline=None)
@given(
    seed=st.integers(0, 10_000),
    n=st.integers(2, 25),
    d=st.integers(1, 4),
    m=st.integers(1, 3),
    gamma=st.floats(0.5, 50.0),
)
def test_corollary1_theorem5_spectral_ratio_grows(seed, n, d, m, gamma):
    """Theorem 5: ||K^Psi||_F <= ||K||_F; Corollary 1: S(K^Psi) >= S(K) (Gaussian)."""
    _, _, K, Kv = _random_case(seed, n, d, m, gamma)
    assert np.linalg.norm(Kv) <= np.linalg.norm(K) * (1 + 1e-12)
    assert spectral_ratio(Kv) >= spectral_ratio(K) * (1 - 1e-12)
    assert 1 - 1e-12 <= spectral_ratio(K) <= np.sqrt(n) + 1e-12


@settings(max_examples=25, deadline=None)
@given(
    seed=st.integers(0, 10_000),
    n=st.integers(2, 25),
    d=st.integers(1, 4),
    m=st.integers(1, 3),
    gamma=st.floats(1.0, 50.0),
)
def test_proposition1_condition_number_shrinks(seed, n, d, m, gamma):
    """Proposition 1 (and Schur's Theorem 4): cond(K o K^psi) <= cond(K).

    Checked where double precision resolves the spectrum (cond(K) < 1e10).
    """
    _, _, K, Kv = _random_case(seed, n, d, m, gamma)
    c = condition_number(K)
    if not c < 1e10:
        return
    lam, lamv = np.linalg.eigvalsh(K), np.linalg.eigvalsh(Kv)
    tol = 1e-12 * lam[-1]
    assert lamv[0] >= lam[0] - tol and lamv[-1] <= lam[-1] + tol  # Theorem 4 bounds
    assert condition_number(Kv) <= c * (1 + 1e-6)


def test_proposition2_linear_vsk_ratios_and_weyl():
    """Proposition 2: for non-negative data tr-ratio <= S-ratio <= F-ratio, and the linear VSK
    can be *less* expressive (S-ratio > 1); Weyl: lambda_min(K + K^psi) >= lambda_min(K)."""
    rng = np.random.default_rng(3)
    for _ in range(20):
        n = int(rng.integers(3, 30))
        X = rng.uniform(size=(n, 2))
        P = rng.uniform(size=(n, 1))
        K, Kv = X @ X.T, X @ X.T + P @ P.T
        a, b = np.trace(K) / np.trace(Kv), spectral_ratio(K) / spectral_ratio(Kv)
        c = np.linalg.norm(Kv) / np.linalg.norm(K)
        assert a <= b + 1e-12 and b <= c + 1e-12
        assert np.linalg.eigvalsh(Kv)[0] >= np.linalg.eigvalsh(K)[0] - 1e-12


def test_separation_distance_grows_with_psi():
    """q_Xi <= q_Xi^Psi (section 4.1), and the k-d tree value equals brute force."""
    rng = np.random.default_rng(0)
    X = rng.uniform(size=(50, 2))
    P = rng.uniform(size=(50, 1))
    brute = 0.5 * min(np.linalg.norm(X[i] - X[j]) for i in range(50) for j in range(i))
    assert separation_distance(X) == pytest.approx(brute, rel=1e-12)
    assert separation_distance(np.hstack([X, P])) >= separation_distance(X)


# ============================================================ diagnostics
def test_conditioning_helpers_against_numpy():
    rng = np.random.default_rng(1)
    X = rng.uniform(size=(30, 2))
    k = name_leaves(RBF(lengthscale=0.3))
    K = _gram(k, X)
    assert condition_number(K) == pytest.approx(np.linalg.cond(K), rel=1e-6)
    A = rng.normal(size=(5, 5))
    assert condition_number(A) == pytest.approx(np.linalg.cond(A), rel=1e-10)
    diag = kernel_diagnostics(k, X)
    assert diag["spectral_ratio"] == pytest.approx(np.trace(K) / np.linalg.norm(K))
    assert diag["lambda_min"] > 0 and diag["cond"] == pytest.approx(
        diag["lambda_max"] / diag["lambda_min"], rel=1e-8
    )
    assert condition_number(np.ones((3, 3))) > 1e15  # singular: inf or at the precision limit
    with pytest.raises(ValueError, match="square"):
        spectral_ratio(np.ones((2, 3)))
    with pytest.raises(ValueError, match="NaN"):
        spectral_ratio(np.array([[1.0, np.nan], [0.0, 1.0]]))


def test_krn_fit_interpolates_and_ridge_is_the_least_squares_minimizer():
    rng = np.random.default_rng(2)
    X = rng.uniform(size=(25, 1))
    y = np.sin(6 * X[:, 0])
    K = _gram(name_leaves(RBF(lengthscale=0.2)), X)
    np.testing.assert_allclose(K @ krn_fit(K, y), y, atol=1e-6)
    nu = 1e-3
    c = krn_fit(K, y, nu)
    np.testing.assert_allclose(
        c, np.linalg.solve(K.T @ K + nu * np.eye(25), K.T @ y), rtol=1e-6, atol=1e-8
    )
    with pytest.raises(ValueError, match="nu"):
        krn_fit(K, y, -1.0)


def test_shape_sweep_and_plot():
    from bayeskern.plots.vsk import plot_psi, plot_shape_sweep

    X = np.linspace(0, 1, 15)[:, None]
    y = np.exp(-3 * np.abs(X[:, 0] - 0.6))
    Xt = np.linspace(0.02, 0.98, 7)[:, None]
    yt = np.exp(-3 * np.abs(Xt[:, 0] - 0.6))
    psi = lambda A: np.exp(-3 * np.abs(A[:, 0] - 0.6))  # noqa: E731
    shapes = np.linspace(0.5, 20, 6)
    plain = shape_sweep(lambda g: RBF(lengthscale=(2 * g) ** -0.5), shapes, X, y, Xt, yt)
    vsk = shape_sweep(
        lambda g: _fit(
            VSK(RBF(lengthscale=(2 * g) ** -0.5), scaling=psi, weight=(2 * g) ** 0.5), X
        ),
        shapes,
        X,
        y,
        Xt,
        yt,
    )
    assert np.all(vsk["cond"] <= plain["cond"] * (1 + 1e-6))
    assert set(plain) == {"shape", "cond", "spectral_ratio", "error"}
    ax = plot_shape_sweep({"KRN": plain, "KRN-VSK": vsk}, "cond")
    assert len(ax.lines) == 2
    plot_shape_sweep({"KRN": plain}, "error", ax=ax)
    reg = VSKRegressor(scaling=psi).fit(X, y)
    assert plot_psi(reg, X, y=y).get_ylabel()


# ============================================================ scaling functions
def test_naive_bayes_scaling_matches_sklearn_and_uses_prior_data():
    X, y = _data(n=60)
    s = fit_scaling(NaiveBayesScaling(), X, y)
    ref = GaussianNB().fit(X, y).predict_proba(X)[:, 1]
    np.testing.assert_allclose(np.asarray(s.transform(X))[:, 0], ref, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(
        np.asarray(s.transform(jnp.asarray(X)))[:, 0], ref, rtol=1e-9, atol=1e-12
    )
    Xp, yp = _data(n=200, seed=5)
    sp = fit_scaling(NaiveBayesScaling(prior_data=(Xp, yp)), X, y)
    ref = GaussianNB().fit(np.vstack([X, Xp]), np.r_[y, yp]).predict_proba(X)[:, 1]
    np.testing.assert_allclose(np.asarray(sp.transform(X))[:, 0], ref, rtol=1e-9, atol=1e-12)
    with pytest.raises(ValueError, match="binary"):
        fit_scaling(NaiveBayesScaling(), X, np.arange(len(X)) % 3)


def test_parametric_scaling_recovers_the_model_of_section_6_2():
    """psi = M(x, beta*) with M = exp(-beta |x - p|) (the COVID-19 model, eq. 5.1)."""
    x = np.linspace(0, 60, 58)[:, None]
    y = 3.0 * np.exp(-0.08 * np.abs(x[:, 0] - 42))
    model = lambda A, b: b[0] * np.exp(-b[1] * np.abs(A[:, 0] - 42))  # noqa: E731
    s = fit_scaling(ParametricScaling(model, beta0=[1.0, 0.01]), x, y)
    np.testing.assert_allclose(s.beta_, [3.0, 0.08], rtol=1e-6)
    np.testing.assert_allclose(np.asarray(s.transform(x))[:, 0], y, rtol=1e-6)
    lin = fit_scaling(LinearModelScaling(), x, 2 + 0.5 * x[:, 0])
    np.testing.assert_allclose(lin.coef_, [2.0, 0.5], atol=1e-10)


def test_bad_scaling_functions_give_clear_errors():
    X, y = _data(n=20)
    with pytest.raises(ValueError, match=r"shape \(20, 2, 2\)"):
        fit_scaling(CallableScaling(lambda A: np.zeros((len(A), 2, 2))), X)
    with pytest.raises(ValueError, match="shape"):
        fit_kernel(VSK(scaling=lambda A: np.zeros(len(A) + 1)), X, y)
    with pytest.raises(ValueError, match="NaN or inf at 1 of 20"):
        fit_kernel(VSK(scaling=lambda A: np.where(np.arange(len(A)) == 3, np.nan, 1.0)), X, y)
    with pytest.raises(ValueError, match="could not be fitted"):
        fit_scaling(ParametricScaling(lambda A, b: np.full(len(A), np.nan), [1.0]), X, 1.0 * y)
    with pytest.raises(ValueError, match="model returned shape"):
        fit_scaling(ParametricScaling(lambda A, b: np.ones((len(A), 3)), [1.0]), X, 1.0 * y)
    with pytest.raises(ValueError, match="unknown scaling"):
        make_scaling("magic")
    with pytest.raises(TypeError, match="scaling must be"):
        make_scaling(3)
    with pytest.raises(ValueError, match="form"):
        fit_kernel(VSK(form="hadamard"), X, y)
    with pytest.raises(ValueError, match="out of range"):
        fit_kernel(VSK(columns=[0, 7]), X, y)
    with pytest.raises(RuntimeError, match="not fitted"):
        name_leaves(VSK()).psi(X)


# ============================================================ classical estimators
def test_svm_vsk_predicts_through_the_test_vs_train_vsk_gram():
    """The SVC decision on new points is sum_i y_i a_i k^Psi(x, x_i) + b with the VSK Gram."""
    X, y = _data(n=80)
    Xn, _ = _data(n=20, seed=7)
    m = VSKClassifier(C=2.0, gamma=0.5).fit(X, y)
    G = m.gram(Xn)
    dec = G[:, m.svc_.support_] @ m.svc_.dual_coef_[0] + m.svc_.intercept_[0]
    np.testing.assert_allclose(dec, m.decision_function(Xn), rtol=1e-10, atol=1e-10)
    # Theorem 3 at the estimator level: the augmented RBF Gram is K o K^psi
    Xs, Xsn = m.scaler_.transform(X), m.scaler_.transform(Xn)
    psi, psin = m.psi(X)[:, 0], m.psi(Xn)[:, 0]
    K = np.exp(-0.5 * ((Xsn[:, None] - Xs[None]) ** 2).sum(-1))
    np.testing.assert_allclose(G, K * np.exp(-0.5 * (psin[:, None] - psi[None]) ** 2), rtol=1e-10)


def test_svm_vsk_equals_kernel_svc_with_the_vsk_kernel():
    """The foundation's precomputed-Gram KernelSVC with VSK(RBF) gives the same classifier."""
    X, y = _data(n=60)
    Xs = MinMaxScaler().fit_transform(X)  # both routes then see the same [0, 1] inputs
    Xn = np.random.default_rng(9).uniform(size=(15, 3))
    gamma, w = 2.0, 1.0
    # a tight solver tolerance: both routes must reach the same optimum, not just 1e-3 of it
    a = VSKClassifier(C=1.0, gamma=gamma, weight=w, tol=1e-10).fit(Xs, y)
    kern = VSK(RBF(lengthscale=(2 * gamma) ** -0.5), weight=w * (2 * gamma) ** 0.5)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)  # SVC(probability=...) deprecation
        b = KernelSVC(kernel=kern, C=1.0, tol=1e-10).fit(Xs, y)
    np.testing.assert_allclose(a.decision_function(Xn), b.decision_function(Xn), atol=1e-6)


def test_grid_search_with_the_paper_grid_and_weighted_f1():
    X, y = _data(n=60)
    grid = paper_param_grid("rbf")
    assert len(grid["C"]) == 13 and grid["C"][0] == 2**-6 and grid["gamma"][-1] == 100.0
    small = {"C": grid["C"][::6], "gamma": grid["gamma"][::4], "kernel": ["rbf", "linear"]}
    gs = GridSearchCV(VSKClassifier(), small, cv=3, scoring="f1_weighted").fit(X, y)
    assert gs.best_score_ > 0.7
    assert gs.predict(X[:5]).shape == (5,)


def test_svm_vsk_prior_data_and_string_labels():
    X, y = _data(n=40)
    Xp, yp = _data(n=300, seed=3)
    labels = np.array(["benign", "malignant"])
    m = VSKClassifier(prior_data=(Xp, labels[yp])).fit(X, labels[y])
    ref = GaussianNB().fit(np.vstack([X, Xp]), labels[np.r_[y, yp]]).predict_proba(X)[:, 1]
    np.testing.assert_allclose(m.psi(X)[:, 0], ref, rtol=1e-9, atol=1e-12)
    assert set(m.predict(X)) <= set(labels)


def test_classifier_bad_input():
    X, y = _data(n=30)
    for kw, msg in (
        ({"kernel": "poly"}, "'kernel' parameter of VSKClassifier must be"),
        ({"weight": -1.0}, "weight"),
        ({"C": 0.0}, "'C' parameter of VSKClassifier must be"),
        ({"scaling": "magic"}, "unknown scaling"),
    ):
        with pytest.raises(ValueError, match=msg):
            VSKClassifier(**kw).fit(X, y)
    with pytest.raises(ValueError, match="3 classes"):
        VSKClassifier().fit(X, np.arange(30) % 3)
    with pytest.raises(ValueError, match="NaN"):
        VSKClassifier().fit(np.where(X > 1.5, np.nan, X), y)
    with pytest.raises(ValueError, match="prior_data"):
        VSKClassifier(prior_data=(np.ones((3, 2)), [0, 1, 0])).fit(X, y)


def test_krn_vsk_interpolates_and_is_better_conditioned():
    """KRN-VSK with nu = 0 interpolates; weight 0 is the classical KRN; cond(K^Psi) <= cond(K)."""
    x = np.linspace(0, 1, 30)[:, None]
    y = np.exp(-4 * np.abs(x[:, 0] - 0.6)) + 0.1 * x[:, 0]
    model = lambda A, b: np.exp(-b[0] * np.abs(A[:, 0] - 0.6))  # noqa: E731
    scaling = ParametricScaling(model, beta0=[1.0])
    vsk = VSKRegressor(gamma=5.0, nu=0.0, scaling=scaling).fit(x, y)
    plain = VSKRegressor(gamma=5.0, nu=0.0, scaling=scaling, weight=0.0).fit(x, y)
    np.testing.assert_allclose(vsk.predict(x), y, atol=1e-5)
    K = np.exp(-5.0 * (x - x.T) ** 2)
    np.testing.assert_allclose(plain.gram(x), K, rtol=1e-10)
    assert vsk.cond_ <= plain.cond_
    ridge = VSKRegressor(gamma=5.0, nu=1e-2, scaling=scaling).fit(x, y)
    Kv = ridge.gram(x)
    np.testing.assert_allclose(
        ridge.coef_, np.linalg.solve(Kv.T @ Kv + 1e-2 * np.eye(30), Kv.T @ y), rtol=1e-5, atol=1e-7
    )
    with pytest.raises(ValueError, match="nu"):
        VSKRegressor(nu=-1.0).fit(x, y)
    with pytest.raises(ValueError, match="gamma"):
        VSKRegressor(gamma=0).fit(x, y)


def test_krn_vsk_with_covariate_columns():
    rng = np.random.default_rng(0)
    t = np.linspace(0, 1, 40)
    cov = np.cumsum(rng.uniform(size=40))
    X = np.column_stack([t, cov])
    y = np.sin(3 * t) + 0.1 * cov
    m = VSKRegressor(
        columns=[0], scaling=[LinearModelScaling(columns=[0]), ColumnScaling([1])], gamma=2.0
    ).fit(X, y)
    assert m.X_fit_.shape == (40, 3)  # t, linear trend in t, covariate
    assert m.score(X, y) > 0.99


def test_svm_e_feature_extraction_and_svm_s_selection():
    rng = np.random.default_rng(0)
    X = rng.uniform(size=(120, 6))
    y = (X[:, 1] + X[:, 4] > 1).astype(int)
    fe = VSKFeatureExtractor(keep=[1]).fit(X, y)
    Z = fe.transform(X)
    assert Z.shape == (120, 2) and list(fe.compressed_) == [0, 2, 3, 4, 5]
    Xs = fe.scaler_.transform(X)
    ref = GaussianNB().fit(Xs[:, [0, 2, 3, 4, 5]], y).predict_proba(Xs[:, [0, 2, 3, 4, 5]])[:, 1]
    np.testing.assert_allclose(Z[:, 1], ref)
    rand = VSKFeatureExtractor(n_features=3, random_state=0).fit(X, y)
    assert len(rand.keep_) == 2
    sel = make_svm_selector(n_features=2).fit(X, y)
    assert set(np.flatnonzero(sel.get_support())) == {1, 4}


@parametrize_with_checks([VSKClassifier(), VSKRegressor(), VSKFeatureExtractor()])
def test_sklearn_compatible(estimator, check):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        check(estimator)


# ============================================================ Bayesian VSK
def test_bayesian_vsk_classifier_and_loo_comparison():
    """VSK as the kernel of GPClassifier: NUTS samples the shape and the psi weight; one call
    compares it with the plain kernel by PSIS-LOO."""
    X, y = _data(n=20)
    table = compare_vsk(
        X, y, num_warmup=10, num_samples=10, num_chains=1, progress_bar=False, random_state=0
    )
    assert set(table.index) == {"plain", "vsk"}
    vsk = table.attrs["models"]["vsk"]
    post = vsk.idata_.posterior
    assert "vsk_weight" in post and "vsk_rbf_lengthscale" in post
    assert np.all(np.asarray(post["vsk_weight"]) >= 0)
    p = vsk.predict_proba(X[:5])
    assert p.shape == (5, 2) and np.all(np.isfinite(p))


def test_bayesian_vsk_regressor_with_a_numpy_parametric_scaling():
    """A NumPy parametric psi runs inside NUTS (pure_callback) and in prediction."""
    from bayeskern.estimators.gp import GPRegressor

    x = np.linspace(0, 1, 20)[:, None]
    y = np.exp(-4 * np.abs(x[:, 0] - 0.6)) + 0.05 * np.random.default_rng(0).normal(size=20)
    model = lambda A, b: np.exp(-b[0] * np.abs(A[:, 0] - b[1]))  # noqa: E731
    kern = VSK(RBF(), scaling=ParametricScaling(model, beta0=[1.0, 0.0]))
    m = GPRegressor(
        kernel=kern, num_warmup=10, num_samples=10, num_chains=1, progress_bar=False, random_state=0
    ).fit(x, y)
    mean, std = m.predict(x[:4], return_std=True)
    assert np.all(np.isfinite(mean)) and np.all(std > 0)
    with pytest.raises(ValueError, match="binary class labels"):
        GPRegressor(
            kernel=VSK(), num_warmup=5, num_samples=5, num_chains=1, progress_bar=False
        ).fit(x, y)
