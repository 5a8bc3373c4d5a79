"""Tests of Xiong's data-dependent (conformal) kernel (Gu 2021, eqs. 52-63)."""

import warnings

import matplotlib

matplotlib.use("Agg")

import jax  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
from sklearn.svm import SVC  # noqa: E402
from sklearn.utils.estimator_checks import parametrize_with_checks  # noqa: E402

import bayeskern as bk  # noqa: E402
from bayeskern.estimators.conformal import ConformalKernelClassifier  # noqa: E402
from bayeskern.kernels import RBF, Linear, kernel_from_config, name_leaves  # noqa: E402
from bayeskern.kernels.conformal import Conformal, SquaredExponential  # noqa: E402
from bayeskern.learning import fit_kernel  # noqa: E402
from bayeskern.learning.conformal import (  # noqa: E402
    fisher_eigen,
    fisher_gradient_ascent,
    fisher_ratio,
    scatter_matrices,
)


def blobs(n=40, d=3, seed=0, n_classes=2, shift=1.5):
    rng = np.random.default_rng(seed)
    y = np.arange(n) % n_classes
    X = rng.standard_normal((n, d)) + shift * y[:, None] * np.linspace(1, 0.2, d)
    return X, y


def design(X, k):
    """K0 and the K1 of eq. 55 of a fitted kernel (K0 at its default values)."""
    K0 = np.asarray(k._base(X))
    K1 = np.column_stack([np.ones(len(X)), np.asarray(k._factor_gram(X))])
    return K0, K1


# ------------------------------------------------------------------------ kernel identities
@pytest.mark.parametrize("optimizer", ["eigen", "gradient"])
def test_gram_is_Q_K0_Q(optimizer):
    X, y = blobs()
    k = name_leaves(fit_kernel(name_leaves(Conformal(optimizer=optimizer)), X, y))
    theta = {"rbf_lengthscale": 0.7}
    q = np.asarray(k.factor(X))
    K0 = np.asarray(k._base.gram(theta, X, X))
    np.testing.assert_allclose(
        np.asarray(k.gram(theta, X, X)), q[:, None] * K0 * q[None, :], rtol=1e-12, atol=1e-12
    )
    # the matrix form agrees with the point-pair form, also between new and training points
    Xn = X[:5] + 0.3
    ev = jax.jit(k.evaluate)
    pair = np.array([[float(ev(theta, a, b)) for b in X[:8]] for a in Xn])
    np.testing.assert_allclose(np.asarray(k.gram(theta, Xn, X[:8])), pair, rtol=1e-10)
    np.testing.assert_allclose(
        np.asarray(k.diag(theta, Xn)), [float(ev(theta, a, a)) for a in Xn], rtol=1e-10
    )
    # q(x) = alpha_0 + sum_j alpha_j K1(x, e_j), eq. 53
    _, K1 = design(X, k)
    np.testing.assert_allclose(q, K1 @ k.alpha_, rtol=1e-12)


@pytest.mark.parametrize("optimizer", ["eigen", "gradient"])
def test_psd_when_base_is_psd(optimizer):
    # QK0Q is a congruence of K0: PSD for any real q, including the negative parts of q
    X, y = blobs(seed=3)
    k = fit_kernel(Conformal(optimizer=optimizer), X, y)
    Xall = np.vstack([X, np.random.default_rng(1).standard_normal((40, 3))])
    K = np.asarray(k(Xall))
    assert np.allclose(K, K.T)
    w = np.linalg.eigvalsh(K)
    assert w.min() > -1e-10 * w.max()


def test_square_exponential_equals_rbf():
    X, _ = blobs()
    np.testing.assert_allclose(
        np.asarray(SquaredExponential(lengthscale=1.3)(X, X[:7])),
        np.asarray(RBF(lengthscale=1.3)(X, X[:7])),
        rtol=1e-10,
        atol=1e-13,
    )


# ------------------------------------------------------------------------ scatter matrices
def explicit_B0_W0(K0, y):
    """B0, W0 of eqs. 57-59 exactly as printed: data sorted by class, block matrices."""
    order = np.argsort(y, kind="stable")
    Ks, ys = K0[np.ix_(order, order)], y[order]
    n = len(y)
    blocks = np.zeros_like(Ks)
    for c in np.unique(ys):
        m = np.flatnonzero(ys == c)
        blocks[np.ix_(m, m)] = Ks[np.ix_(m, m)] / len(m)
    return order, blocks - Ks / n, np.diag(np.diag(Ks)) - blocks


@pytest.mark.parametrize("n_classes", [2, 3])
def test_scatter_matrices_match_eqs_57_60(n_classes):
    X, y = blobs(n_classes=n_classes, seed=n_classes)
    rng = np.random.default_rng(0)
    y = rng.permutation(y)  # unsorted labels: the masked form must not need sorting
    k = fit_kernel(Conformal(), X, y)
    K0, K1 = design(X, k)
    M0, N0 = scatter_matrices(K0, K1, y)
    order, B0, W0 = explicit_B0_W0(K0, y)
    np.testing.assert_allclose(M0, K1[order].T @ B0 @ K1[order], atol=1e-10)
    np.testing.assert_allclose(N0, K1[order].T @ W0 @ K1[order], atol=1e-10)


@pytest.mark.parametrize("n_classes", [2, 3])
def test_fisher_ratio_in_feature_space(n_classes):
    """J = tr(S_b)/tr(S_w) of explicit feature vectors equals a'M0a / a'N0a (eq. 60)."""
    X, y = blobs(n_classes=n_classes, seed=7)
    k = fit_kernel(Conformal(n_expansion=10, random_state=0), X, y)
    K0, K1 = design(X, k)
    M0, N0 = scatter_matrices(K0, K1, y)
    rng = np.random.default_rng(1)
    for alpha in [k.alpha_, rng.standard_normal(K1.shape[1])]:
        q = K1 @ alpha
        w, V = np.linalg.eigh(K0)
        Phi = q[:, None] * (V * np.sqrt(np.maximum(w, 0.0)))  # rows: features of K = QK0Q
        m = Phi.mean(0)
        tr_sb = sum((y == c).sum() * np.sum((Phi[y == c].mean(0) - m) ** 2) for c in np.unique(y))
        tr_sw = sum(np.sum((Phi[y == c] - Phi[y == c].mean(0)) ** 2) for c in np.unique(y))
        assert fisher_ratio(alpha, M0, N0) == pytest.approx(tr_sb / tr_sw, rel=1e-8)


def test_fisher_ratio_is_scale_free():
    X, y = blobs()
    k1 = fit_kernel(Conformal(optimizer="eigen"), X, y)
    # scaling K0 (a fixed lengthscale does not scale; a Linear base does) leaves J, alpha alone
    k2 = fit_kernel(Conformal(base_kernel=Linear(), optimizer="eigen"), X, y)
    k3 = fit_kernel(Conformal(base_kernel=Linear() * 4.0, optimizer="eigen"), X, y)
    assert k2.fisher_ratio_ == pytest.approx(k3.fisher_ratio_, rel=1e-8)
    np.testing.assert_allclose(k2.alpha_, k3.alpha_, rtol=1e-6, atol=1e-10)
    assert k1.fisher_ratio_ > k1.fisher_ratio_init_


# ------------------------------------------------------------------------ optimizers
def toy_problem(seed=0, n_expansion=None, mu=1e-3):
    X, y = blobs(n=40, d=2, seed=seed, shift=1.0)
    k = fit_kernel(Conformal(n_expansion=n_expansion, random_state=0), X, y)
    K0, K1 = design(X, k)
    M0, N0 = scatter_matrices(K0, K1, y)
    return M0, N0, mu * np.trace(N0) / len(N0)


def test_eigen_is_the_maximum():
    M0, N0, mu = toy_problem()
    alpha, lam = fisher_eigen(M0, N0, mu)
    assert fisher_ratio(alpha, M0, N0, mu) == pytest.approx(lam, rel=1e-8)
    rng = np.random.default_rng(0)
    others = [fisher_ratio(a, M0, N0, mu) for a in rng.standard_normal((200, len(M0)))]
    assert max(others) <= lam * (1 + 1e-10)
    ga, hist = fisher_gradient_ascent(M0, N0, mu)
    assert hist[-1] <= lam * (1 + 1e-10)
    assert hist[-1] == pytest.approx(fisher_ratio(ga, M0, N0, mu), rel=1e-10)


def test_gradient_ascent_monotone_on_toy_problem():
    M0, N0, mu = toy_problem(seed=1)
    _, hist = fisher_gradient_ascent(M0, N0, mu, eta0=0.1, n_iter=300, early_stop=False)
    assert len(hist) == 301
    assert np.all(np.diff(hist) >= -1e-12 * hist[-1])
    assert hist[-1] > 1.5 * hist[0]
    # more steps climb towards the eigen optimum (and never past it)
    _, lam = fisher_eigen(M0, N0, mu)
    _, long = fisher_gradient_ascent(M0, N0, mu, eta0=0.3, n_iter=3000, early_stop=False)
    assert hist[-1] < long[-1] <= lam * (1 + 1e-10)
    assert long[-1] > 0.8 * lam


def test_gradient_early_stop_keeps_best():
    M0, N0, mu = toy_problem(seed=2)
    # a huge step overshoots: the ascent stops and keeps the last J that increased
    alpha, hist = fisher_gradient_ascent(M0, N0, mu, eta0=3.0, n_iter=1000)
    assert len(hist) > 1
    assert len(hist) < 1000
    assert np.all(np.diff(hist) >= 0)
    assert fisher_ratio(alpha, M0, N0, mu) == pytest.approx(hist[-1])


def test_gradient_starts_once_from_base_kernel():
    """Erratum of Algorithm 1: alpha starts at (1, 0, ..., 0) once, so J moves off J(base)."""
    X, y = blobs()
    k = fit_kernel(Conformal(optimizer="gradient"), X, y)
    assert k.history_[0] == pytest.approx(k.fisher_ratio_init_)
    assert k.fisher_ratio_ > k.fisher_ratio_init_
    assert len(k.history_) > 2


def test_singular_N0_needs_mu():
    X, y = blobs()
    # all points as expansion points: K1 is N x (N + 1), so N0 is singular
    with pytest.raises(ValueError, match="mu > 0"):
        fit_kernel(Conformal(mu=0.0), X, y)
    k = fit_kernel(Conformal(mu=1e-3), X, y)
    assert np.all(np.isfinite(k.alpha_)) and np.isfinite(k.fisher_ratio_)
    # a few expansion points: N0 is nonsingular and mu = 0 gives the unregularized eq. 62
    k0 = fit_kernel(Conformal(mu=0.0, n_expansion=5, random_state=0), X, y)
    K0, K1 = design(X, k0)
    M0, N0 = scatter_matrices(K0, K1, y)
    lam = np.max(np.real(np.linalg.eigvals(np.linalg.solve(N0, M0))))
    assert k0.fisher_ratio_ == pytest.approx(lam, rel=1e-6)
    assert k0.raw_fisher_ratio_ == pytest.approx(lam, rel=1e-6)


def test_sign_fix_and_scale():
    X, y = blobs(seed=4)
    k = fit_kernel(Conformal(), X, y)
    q = np.asarray(k.factor(X))
    assert np.mean(q > 0) >= 0.5 and k.positive_fraction_ == pytest.approx(np.mean(q > 0))
    assert np.sqrt(np.mean(q**2)) == pytest.approx(1.0)
    # K does not depend on the sign of alpha
    k2 = fit_kernel(Conformal(), X, y)
    k2.alpha_ = -k2.alpha_
    np.testing.assert_allclose(np.asarray(k2(X)), np.asarray(k(X)), rtol=1e-12)


def test_expansion_subsample_is_seeded():
    X, y = blobs()
    a = fit_kernel(Conformal(n_expansion=8, random_state=3), X, y)
    b = fit_kernel(Conformal(n_expansion=8, random_state=3), X, y)
    c = fit_kernel(Conformal(n_expansion=8, random_state=4), X, y)
    assert a.expansion_.shape == (8, 3)
    np.testing.assert_array_equal(a.alpha_, b.alpha_)
    assert not np.array_equal(a.expansion_, c.expansion_)


# ------------------------------------------------------------------------ bad input
@pytest.mark.parametrize(
    "y, msg",
    [
        (np.zeros(10, int), "single class"),
        (np.r_[np.zeros(9, int), 1], "fewer than 2 points"),
        (None, "y is required"),
        (np.zeros(7, int), "1-d array of 10"),
    ],
)
def test_bad_labels(y, msg):
    X = np.random.default_rng(0).standard_normal((10, 2))
    with pytest.raises(ValueError, match=msg):
        fit_kernel(Conformal(), X, y)
    if y is not None and len(y) == 10:
        with pytest.raises(ValueError, match=msg):
            ConformalKernelClassifier().fit(X, y)


@pytest.mark.parametrize(
    "kw, msg",
    [
        ({"optimizer": "newton"}, "optimizer"),
        ({"mu": -1.0}, "mu"),
        ({"gamma1": 0.0}, "gamma1"),
        ({"n_expansion": 0}, "n_expansion"),
        ({"eta0": 0.0}, "eta0"),
        ({"n_iter": 0}, "n_iter"),
    ],
)
def test_bad_kernel_parameters(kw, msg):
    X, y = blobs(n=10)
    with pytest.raises(ValueError, match=msg):
        fit_kernel(Conformal(**kw), X, y)


def test_bad_estimator_parameters():
    X, y = blobs(n=20)
    with pytest.raises(ValueError, match="gamma"):
        ConformalKernelClassifier(gamma="wide").fit(X, y)
    with pytest.raises(ValueError, match="gamma1"):
        ConformalKernelClassifier(gamma1=-1.0).fit(X, y)
    with pytest.raises(ValueError, match="C"):
        ConformalKernelClassifier(C=0.0).fit(X, y)
    Xbad = X.copy()
    Xbad[0, 0] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        ConformalKernelClassifier().fit(Xbad, y)
    with pytest.raises(TypeError, match="base_kernel"):
        fit_kernel(Conformal(base_kernel="rbf"), X, y)


# ------------------------------------------------------------------------ estimator
def test_classifier_uses_test_vs_train_gram():
    """The experiment of Gu (2021) failed at prediction: the Gram must be K(X_new, X_train)."""
    X, y = blobs(seed=5, shift=3.0)
    Xte, yte = blobs(seed=6, shift=3.0)
    # the setup of Gu (2021): K1 shares gamma with K0 (gamma1=None), a fixed mu
    est = ConformalKernelClassifier(C=1.0, gamma=0.2, gamma1=None, mu=1e-3, random_state=0).fit(
        X, y
    )
    assert est.gamma_ == 0.2 and est.gamma1_ == 0.2
    Ktr = np.asarray(est.kernel_(X))
    Kte = np.asarray(est.kernel_(Xte, X))
    q_tr, q_te = est.conformal_factor(X), est.conformal_factor(Xte)
    K0 = np.exp(-0.2 * ((Xte[:, None] - X[None]) ** 2).sum(-1))
    np.testing.assert_allclose(Kte, q_te[:, None] * K0 * q_tr[None], rtol=1e-10)
    ref = SVC(kernel="precomputed", C=1.0).fit(Ktr, y)
    np.testing.assert_array_equal(est.predict(Xte), ref.predict(Kte))
    np.testing.assert_allclose(est.decision_function(Xte), ref.decision_function(Kte))
    # one point at a time gives the same predictions as the batch
    np.testing.assert_array_equal([est.predict(x[None])[0] for x in Xte[:5]], est.predict(Xte[:5]))
    # it predicts sensibly (Gu 2021 predicted one class for everything); chance is 0.5
    assert est.score(Xte, yte) > 0.75 and len(np.unique(est.predict(Xte))) == 2
    assert est.fisher_ratio_ > est.fisher_ratio_init_


def test_classifier_same_seed_same_numbers():
    X, y = blobs(seed=8)
    kw = dict(n_expansion=10, optimizer="gradient", n_iter=50)
    a = ConformalKernelClassifier(random_state=1, **kw).fit(X, y)
    b = ConformalKernelClassifier(random_state=1, **kw).fit(X, y)
    np.testing.assert_array_equal(a.decision_function(X), b.decision_function(X))


def test_config_round_trip_without_pickle():
    X, y = blobs()
    k = name_leaves(fit_kernel(Conformal(n_expansion=10, random_state=0), X, y))
    k2 = name_leaves(kernel_from_config(k.get_config(), k.get_state()))
    np.testing.assert_allclose(np.asarray(k2(X)), np.asarray(k(X)), rtol=1e-12)


@parametrize_with_checks([ConformalKernelClassifier()])
def test_sklearn_compatible(estimator, check):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", category=UserWarning)
        check(estimator)


# ------------------------------------------------------------------------ Bayesian use
def test_gp_classifier_with_conformal_kernel_and_loo():
    X, y = blobs(n=24, d=2, seed=9, shift=1.2)
    settings = dict(num_warmup=15, num_samples=15, num_chains=1, progress_bar=False, random_state=0)
    gp_c = bk.GPClassifier(kernel=Conformal(), **settings).fit(X, y)
    gp_b = bk.GPClassifier(kernel=RBF(), **settings).fit(X, y)
    post = gp_c.idata_.posterior
    assert "rbf_lengthscale" in post and "amplitude" in post
    assert post["amplitude"].shape[-1] == 1  # one additive term
    # q is learned once on the standardized data; the sampled length-scale only changes K0
    k = gp_c.kernel_
    Xs = gp_c.x_std_.transform(X)
    draw = {"rbf_lengthscale": float(post["rbf_lengthscale"][0, 0])}
    q = np.asarray(k.factor(Xs))
    K0 = np.asarray(k._base.gram(draw, Xs, Xs))
    np.testing.assert_allclose(np.asarray(k.gram(draw, Xs, Xs)), q[:, None] * K0 * q[None])
    p = gp_c.predict_proba(X)
    assert p.shape == (24, 2) and np.all(np.isfinite(p))
    table = bk.diagnostics.compare({"conformal": gp_c, "rbf": gp_b})
    assert set(table.index) == {"conformal", "rbf"}
    assert np.all(np.isfinite(table["elpd_loo"]))


# ------------------------------------------------------------------------ plots
def test_plots():
    import matplotlib.pyplot as plt

    from bayeskern.plots.conformal import plot_conformal_factor, plot_mds

    X, y = blobs(seed=10)
    Xte, yte = blobs(seed=11)
    est = ConformalKernelClassifier(random_state=0).fit(X, y)
    ax = plot_mds(est, X, y, Xte, yte)
    assert len(ax.collections) == 5  # 2 classes x (train, test) + support vectors
    ax = plot_mds(est, X, y, space="input")
    assert len(ax.collections) == 3
    with pytest.raises(ValueError, match="space"):
        plot_mds(est, X, y, space="feature")
    ax = plot_conformal_factor(est, X, y)
    assert len(ax.patches) > 0
    k1 = fit_kernel(Conformal(), X[:, :1], y)
    ax = plot_conformal_factor(k1, X[:, :1], y)
    assert len(ax.lines) >= 3
    plt.close("all")
