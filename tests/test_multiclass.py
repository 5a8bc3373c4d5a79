"""Multi-class GP classification (softmax Laplace, R&W Algorithms 3.3/3.4) and credible
intervals of class probabilities (``predict_proba_interval``)."""

import itertools
import time

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from conftest import TINY
from scipy import optimize, special
from sklearn.datasets import load_breast_cancer, load_iris, load_wine
from sklearn.gaussian_process import GaussianProcessClassifier
from sklearn.metrics import accuracy_score, log_loss
from sklearn.model_selection import train_test_split

import bayeskern as bk
from bayeskern.laplace import laplace_log_marginal, laplace_mode
from bayeskern.laplace_softmax import (
    _solve_i_wk,
    softmax_expectation,
    softmax_laplace_mode,
    softmax_log_marginal,
    softmax_predict,
)


def _problem(n, C, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 2))
    d2 = ((X[:, None, :] - X[None, :, :]) ** 2).sum(-1)
    y = np.arange(n) % C
    rng.shuffle(y)
    Y = jax.nn.one_hot(y, C).T

    def K(p):  # p = (amplitude per class..., length-scale)
        return jnp.stack(
            [p[c] ** 2 * jnp.exp(-0.5 * d2 / p[C] ** 2) + 1.0 + 1e-6 * jnp.eye(n) for c in range(C)]
        )

    return X, d2, Y, K, jnp.asarray([0.8 + 0.5 * c for c in range(C)] + [1.3])


def _dense(K, pi):
    """Block-diagonal K and W = D - Pi Pi^T as dense (Cn, Cn) matrices, class-major."""
    C = K.shape[0]
    Kd = jax.scipy.linalg.block_diag(*K)
    Pi = jnp.concatenate([jnp.diag(pi[c]) for c in range(C)], axis=0)
    return Kd, jnp.diag(pi.reshape(-1)) - Pi @ Pi.T


@pytest.mark.parametrize("C", [2, 3])
def test_softmax_mode_and_marginal_match_dense_computation(C):
    """The block Newton mode equals a generic optimizer's on the unnormalized log posterior,
    and log q equals Psi(f_hat) - log|I + KW|/2 with the dense determinant."""
    n = 10
    _, _, Y, Kf, p = _problem(n, C)
    K = Kf(p)
    mode = softmax_laplace_mode(K, Y)
    assert bool(mode.converged)
    Kd, W = _dense(K, mode.pi)
    Kinv = np.linalg.inv(np.asarray(Kd))

    def neg_log_post(f):
        F = f.reshape(C, n)
        return -(np.sum(Y * F) - special.logsumexp(F, axis=0).sum() - 0.5 * f @ Kinv @ f)

    def grad(f):
        F = f.reshape(C, n)
        return -((np.asarray(Y) - special.softmax(F, axis=0)).reshape(-1) - Kinv @ f)

    ref = optimize.minimize(
        neg_log_post, np.zeros(C * n), jac=grad, method="BFGS", options=dict(gtol=1e-10)
    )
    np.testing.assert_allclose(mode.f.reshape(-1), ref.x, atol=1e-6)
    log_q = -ref.fun - 0.5 * np.linalg.slogdet(np.eye(C * n) + Kd @ W)[1]
    np.testing.assert_allclose(mode.log_marginal, log_q, rtol=0, atol=1e-8)
    v = jnp.asarray(np.random.default_rng(1).normal(size=(C, n)))
    u = _solve_i_wk(mode.E, mode.chol_m, K, v)  # the solve of the Newton step and the VJP
    np.testing.assert_allclose((jnp.eye(C * n) + W @ Kd) @ u.reshape(-1), v.reshape(-1), atol=1e-10)


def test_softmax_laplace_marginal_against_quadrature():
    """Two points, two classes (4 latent values): the Laplace log marginal against the exact
    integral by Gauss-Hermite quadrature; its error shrinks as the prior variance does, where
    the posterior becomes Gaussian."""
    rng = np.random.default_rng(2)
    X = rng.normal(size=(2, 1))
    d2 = (X - X.T) ** 2
    Y = jax.nn.one_hot(jnp.asarray([0, 1]), 2).T
    nodes = 24  # per dimension: within 2e-6 of 40 nodes at amp = 2, 1e-11 at the others
    t, w = np.polynomial.hermite_e.hermegauss(nodes)  # weight exp(-t^2/2)
    w = w / np.sqrt(2 * np.pi)
    grid = np.array(list(itertools.product(range(nodes), repeat=4)))
    errors = []
    for amp in (0.1, 1.0, 2.0):
        K = np.stack([amp**2 * np.exp(-0.5 * d2) + 1e-6 * np.eye(2)] * 2)
        L = np.linalg.cholesky(K)
        z = t[grid].reshape(-1, 2, 2)  # (points, class, obs) standard normals
        f = np.einsum("cij,pcj->pci", L, z)
        log_lik = np.sum(f * np.asarray(Y)[None], axis=(1, 2)) - np.sum(
            special.logsumexp(f, axis=1), axis=1
        )
        exact = special.logsumexp(log_lik, b=np.prod(w[grid], axis=1))
        errors.append(abs(float(softmax_log_marginal(jnp.asarray(K), Y)) - exact))
    assert errors[0] < 1e-4 and errors[0] < errors[1] < errors[2] < 0.2, errors


def test_softmax_gradient_matches_finite_differences():
    """The custom VJP (implicit differentiation at the mode) against central differences of
    tightly converged log marginals, through a kernel parameterization."""
    _, _, Y, Kf, p = _problem(12, 3)
    g = jax.grad(lambda q: softmax_log_marginal(Kf(q), Y))(p)

    @jax.jit  # one compiled Newton loop for the 4 x len(p) evaluations
    def tight(q):
        return softmax_laplace_mode(Kf(q), Y, tol=1e-15, max_iter=200).log_marginal

    # the five-point stencil, error O(h⁴), at a step where the log marginal's rounding
    # (about 1e-10) costs a few 1e-8: the three-point one at h = 1e-4 mixed an O(h²) error
    # with a rounding error near 1e-6, over the tolerance on some machines
    h = 4e-3

    def fd(e):
        return (
            -tight(p + 2 * h * e)
            + 8 * tight(p + h * e)
            - 8 * tight(p - h * e)
            + tight(p - 2 * h * e)
        ) / (12 * h)

    np.testing.assert_allclose(g, np.array([fd(e) for e in np.eye(len(p))]), rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("C", [2, 3])
def test_newton_start_changes_neither_the_mode_nor_the_gradient(C):
    """Newton's method from the mode of a nearby covariance (the hyper-parameters' posterior
    mode, as the classifiers start every draw) or from a far start finds the mode found from
    f = 0; the log marginal and its gradient agree; the nearby start takes fewer steps.
    Binary (Bernoulli-logit, R&W Algorithm 3.1) with C = 2 labels, softmax (Algorithm 3.3)
    for every C."""
    n = 30
    _, _, Y, Kf, p = _problem(n, C, seed=4)
    # compiled once each, as inside the models (op by op every Newton loop compiles anew)
    mode_of, binary_mode_of = jax.jit(softmax_laplace_mode), jax.jit(laplace_mode)
    near = p * 1.15  # another draw of the hyper-parameters
    far = 3.0 * jnp.asarray(np.random.default_rng(5).normal(size=(C, n)))
    f_near = mode_of(Kf(near), Y).f
    zero = mode_of(Kf(p), Y)
    for start in (f_near, far):
        mode = mode_of(Kf(p), Y, f_start=start)
        assert bool(mode.converged)
        np.testing.assert_allclose(mode.f, zero.f, atol=1e-6)
        np.testing.assert_allclose(mode.log_marginal, zero.log_marginal, rtol=0, atol=1e-7)
    assert int(mode_of(Kf(p), Y, f_start=f_near).n_iter) < int(zero.n_iter)
    g0 = jax.grad(lambda q: softmax_log_marginal(Kf(q), Y))(p)
    g1 = jax.grad(lambda q: softmax_log_marginal(Kf(q), Y, f_near))(p)
    np.testing.assert_allclose(g1, g0, rtol=1e-6, atol=1e-8)
    if C == 2:
        y = Y[1]
        K1 = lambda q: Kf(q)[1]  # noqa: E731
        f1 = binary_mode_of(K1(near), y).f
        m0, m1 = binary_mode_of(K1(p), y), binary_mode_of(K1(p), y, f_start=f1)
        np.testing.assert_allclose(m1.f, m0.f, atol=1e-6)
        assert bool(m1.converged) and int(m1.n_iter) < int(m0.n_iter)
        g0 = jax.grad(lambda q: laplace_log_marginal(K1(q), y))(p)
        g1 = jax.grad(lambda q: laplace_log_marginal(K1(q), y, f1))(p)
        np.testing.assert_allclose(g1, g0, rtol=1e-6, atol=1e-8)


def test_softmax_predict_matches_dense_formulas():
    """R&W Algorithm 3.4's mean and covariance against k*^T (y - pi) and
    k** - k*^T (K + W^-1)^-1 k* = k** - k*^T W (I + KW)^-1 k* computed densely."""
    n, C, m = 10, 3, 4
    X, _, Y, Kf, p = _problem(n, C)
    K = Kf(p)
    mode = softmax_laplace_mode(K, Y)
    Xs = np.random.default_rng(3).normal(size=(m, 2))
    d2 = ((X[:, None, :] - Xs[None, :, :]) ** 2).sum(-1)
    Ks = jnp.stack([p[c] ** 2 * jnp.exp(-0.5 * d2 / p[C] ** 2) + 1.0 for c in range(C)])
    kss = jnp.stack([jnp.full(m, p[c] ** 2 + 1.0) for c in range(C)])
    mean, cov = softmax_predict(mode, Ks, kss)
    Kd, W = _dense(K, mode.pi)
    Q = W @ jnp.linalg.inv(jnp.eye(C * n) + Kd @ W)
    for j in range(m):
        ks = jax.scipy.linalg.block_diag(*[Ks[c][:, j : j + 1] for c in range(C)])  # (Cn, C)
        np.testing.assert_allclose(
            mean[j], ks.T @ (Y.reshape(-1) - mode.pi.reshape(-1)), atol=1e-10
        )
        np.testing.assert_allclose(cov[j], jnp.diag(kss[:, j]) - ks.T @ Q @ ks, atol=1e-10)


def test_softmax_expectation():
    """Rows sum to one; a zero covariance gives softmax(mean); the Monte Carlo average of a
    wide Gaussian agrees with a quadrature of the same integral (two classes: one dimension of
    f_1 - f_0)."""
    key = jax.random.PRNGKey(0)
    mean = jnp.asarray([[0.3, -1.0, 2.0], [0.0, 0.0, 0.0]])
    p0 = softmax_expectation(mean, jnp.zeros((2, 3, 3)), key)
    np.testing.assert_allclose(p0, jax.nn.softmax(mean, axis=1), atol=1e-12)
    cov = jnp.asarray([[[2.0, 0.0], [0.0, 1.0]]])
    p = softmax_expectation(jnp.asarray([[0.5, -0.5]]), cov, key, n_mc=200_000)
    np.testing.assert_allclose(p.sum(1), 1.0, atol=1e-12)
    t, w = np.polynomial.hermite_e.hermegauss(80)
    exact = np.sum(w / np.sqrt(2 * np.pi) * special.expit(-1.0 + np.sqrt(3.0) * t))
    np.testing.assert_allclose(p[0, 1], exact, atol=3e-3)


@pytest.fixture(scope="module")
def iris_fit():
    X, y = load_iris(return_X_y=True)
    names = np.array(["setosa", "versicolor", "virginica"])[y]
    est = bk.GPClassifier(random_state=0, **TINY).fit(X[::3], names[::3])
    return est, X[1::3], names[1::3]


def test_multiclass_classifier_tiny(iris_fit):
    est, X, y = iris_fit
    assert list(est.classes_) == ["setosa", "versicolor", "virginica"]
    assert est.idata_.posterior["amplitude"].shape[2:] == (3, 1)
    assert est.idata_.posterior["f"].shape[2:] == (3, 50)
    p = est.predict_proba(X)
    assert p.shape == (50, 3) and np.allclose(p.sum(1), 1.0) and np.all(p >= 0)
    pred = est.predict(X)
    assert set(pred) <= set(est.classes_)
    assert np.array_equal(pred, est.classes_[p.argmax(1)])
    assert est.score(X, y) > 0.8  # iris: even 20 draws separate the classes
    np.testing.assert_array_equal(p, est.predict_proba(X))  # fixed Monte Carlo seeds
    np.testing.assert_allclose(est.predict_proba(X[:5]), p[:5], rtol=0, atol=1e-12)
    draws = est.sample_posterior_predictive(X[:6], n_draws=300, random_state=0)
    assert draws.shape == (300, 6) and set(draws.ravel()) <= set(est.classes_)
    freq = (draws[:, :, None] == est.classes_).mean(0)
    assert np.abs(freq - p[:6]).max() < 0.12
    ll = est.idata_.log_likelihood["y"].values
    assert ll.shape == (1, 20, 50) and np.all(np.isfinite(ll)) and np.all(ll <= 0)


def test_draws_started_at_the_posterior_mode_keep_the_modes_found_from_zero(iris_fit):
    """The fit starts every draw's Newton iterations at the latent mode of the hyper-parameters'
    posterior mode; the stored modes equal those found from f = 0 at the same draws."""
    from bayeskern.models.gp import JITTER, softmax_covariances, theta_from_draw

    est, _, _ = iris_fit
    X, y = load_iris(return_X_y=True)  # the fixture's training rows
    X, Y = jnp.asarray(est.x_std_.transform(X[::3])), jax.nn.one_hot(y[::3], 3).T
    post = est.idata_.posterior
    for draw in (0, 7, 19):
        d = {k: jnp.asarray(post[k].values[0, draw]) for k in ("rbf_lengthscale", "amplitude")}
        theta = theta_from_draw(est.kernel_, d, est.x_std_.scale)
        K = softmax_covariances(est.kernel_, theta, d["amplitude"], X, X) + JITTER * jnp.eye(len(X))
        np.testing.assert_allclose(
            post["f"].values[0, draw], softmax_laplace_mode(K, Y).f, atol=1e-5
        )


def test_multiclass_report_and_priors(iris_fit, tmp_path):
    """The report of a three-class fit: top-label reliability and multi-class metrics equal to
    scikit-learn's on the held-out rows; the priors table traced from the softmax model
    (one amplitude per class and term)."""
    from sklearn.metrics import log_loss

    from bayeskern import diagnostics
    from bayeskern.report_priors import prior_rows

    est, X, y = iris_fit
    html = bk.report(est, tmp_path / "r.html", X_test=X, y_test=y).read_text()
    assert "top-label reliability" in html and "auc_ovr_macro" in html
    codes = np.searchsorted(est.classes_, y)
    m = diagnostics.multiclass_metrics(codes, est.predict_proba(X))
    assert m["log_loss"] == pytest.approx(log_loss(y, est.predict_proba(X), labels=est.classes_))
    assert m["accuracy"] == pytest.approx(est.score(X, y))
    rows = {site: shape for site, _, shape in prior_rows(est)[0]}
    assert rows["amplitude"] == "3×1"


def test_multiclass_posterior_predictive_group(iris_fit):
    """Replicated class codes (as observed_data stores them), drawn per posterior draw."""
    import arviz as az
    import matplotlib.pyplot as plt

    est, _, _ = iris_fit
    rep = est.idata_.posterior_predictive["y"].values
    obs = est.idata_.observed_data["y"].values
    assert rep.shape == (1, 20, 50) and set(np.unique(rep)) <= {0, 1, 2}
    assert set(np.unique(obs)) == {0, 1, 2}
    # a replicate equals the observed class as often as the draws' probability of that class
    P = est._class_proba_draws(est.idata_.constant_data["X"].values)  # (20, 50, 3)
    p_obs = np.take_along_axis(P, obs[None, :, None].astype(int), axis=-1)[..., 0].mean()
    assert abs((rep == obs).mean() - p_obs) < 0.05  # 1000 replicates: sd about 0.013
    az.plot_ppc(est.idata_, kind="scatter")
    plt.close("all")


def test_predict_proba_interval_multiclass(iris_fit):
    est, X, _ = iris_fit
    p = est.predict_proba(X)
    lo, hi = est.predict_proba_interval(X)
    assert lo.shape == hi.shape == (50, 3)
    assert np.all(lo <= p + 1e-12) and np.all(p <= hi + 1e-12)
    lo5, hi5 = est.predict_proba_interval(X, interval=0.5)
    assert np.all(hi5 - lo5 <= hi - lo + 1e-12) and np.any(hi5 - lo5 < hi - lo)
    P = est._class_proba_draws(X)
    np.testing.assert_allclose(lo, np.quantile(P, 0.05, axis=0))
    np.testing.assert_allclose(hi, np.quantile(P, 0.95, axis=0))


@pytest.mark.parametrize("bad", [0.0, 1.0, 1.5, -0.1, "0.9", True, None])
def test_interval_validation(iris_fit, bad):
    with pytest.raises(ValueError, match="interval"):
        iris_fit[0].predict_proba_interval(iris_fit[1], interval=bad)


def test_binary_unchanged_and_interval(rng):
    """Two classes keep the Bernoulli-logit model; the interval brackets the mean and the
    per-draw P(y=1) of _proba_draws."""
    X = rng.normal(size=(30, 2))
    y = np.where(X[:, 0] > 0, "b", "a")
    est = bk.GPClassifier(random_state=0, **TINY).fit(X, y)
    assert "class" not in est.idata_.posterior["amplitude"].dims
    P1 = est._proba_draws(X[:7])
    assert P1.shape == (20, 7)
    np.testing.assert_allclose(est.predict_proba(X[:7])[:, 1], P1.mean(0))
    lo, hi = est.predict_proba_interval(X[:7], interval=0.8)
    assert lo.shape == (7, 2)
    np.testing.assert_allclose(hi[:, 1], np.quantile(P1, 0.9, axis=0))
    np.testing.assert_allclose(lo[:, 0], 1.0 - np.quantile(P1, 0.9, axis=0))


def test_latent_inference_refuses_multiclass():
    X = np.random.default_rng(0).normal(size=(12, 2))
    with pytest.raises(ValueError, match="y has 3 classes.*inference='laplace'"):
        bk.GPClassifier(inference="latent", **TINY).fit(X, np.arange(12) % 3)


def test_multiclass_prior_predictive_draws_every_class_evenly():
    """Prior predictive draws for three (string) classes come from the softmax model: labels
    from the classes seen, and, the prior being symmetric in the classes, each class drawn
    with frequency near 1/3 (400 draws x 30 rows)."""
    X = np.random.default_rng(0).normal(size=(30, 2))
    y = np.array(["a", "b", "c"])[np.arange(30) % 3]
    draws = bk.GPClassifier(**TINY).sample_prior_predictive(X, y, n_draws=400, random_state=0)
    assert draws.shape == (400, 30)
    freq = [np.mean(draws == c) for c in "abc"]
    assert set(np.unique(draws)) == {"a", "b", "c"}
    np.testing.assert_allclose(freq, 1 / 3, atol=0.05)


G = dict(n_features=8, n_components=2, map_steps=5)


def test_gabasr_interval_and_multiclass_error(rng):
    X = rng.normal(size=(30, 2))
    y = (X[:, 0] > 0).astype(int)
    est = bk.GaBaSRClassifier(random_state=0, **G, **TINY).fit(X, y)
    p = est.predict_proba(X[:5])
    lo, hi = est.predict_proba_interval(X[:5], interval=0.9)
    assert lo.shape == hi.shape == (5, 2)
    assert np.all(lo <= p + 1e-12) and np.all(p <= hi + 1e-12)
    P1 = est._proba_draws(est.x_scaler_.transform(X[:5]))
    np.testing.assert_allclose(hi[:, 1], np.quantile(P1, 0.95, axis=0))
    with pytest.raises(ValueError, match="interval"):
        est.predict_proba_interval(X[:5], interval=2)
    with pytest.raises(ValueError, match="y has 3 classes.*GPClassifier"):
        bk.GaBaSRClassifier(**G, **TINY).fit(X, np.arange(30) % 3)


# ------------------------------------------------------------------------------ slow
@pytest.mark.slow
@pytest.mark.parametrize("data", ["iris", "wine"])
def test_multiclass_against_sklearn(data):
    """Default GPClassifier() against scikit-learn's GaussianProcessClassifier() (defaults) on
    stratified 70/30 splits, seeds 0-2: accuracy at least sklearn's, lower log-loss, converged,
    fit within 120 s."""
    X, y = {"iris": load_iris, "wine": load_wine}[data](return_X_y=True)
    for seed in (0, 1, 2):
        Xtr, Xte, ytr, yte = train_test_split(X, y, test_size=0.3, stratify=y, random_state=seed)
        sk = GaussianProcessClassifier().fit(Xtr, ytr)
        t0 = time.perf_counter()
        est = bk.GPClassifier(progress_bar=False, random_state=seed).fit(Xtr, ytr)
        fit_s = time.perf_counter() - t0
        p_sk, p_bk = sk.predict_proba(Xte), est.predict_proba(Xte)
        acc_sk, acc_bk = accuracy_score(yte, sk.predict(Xte)), accuracy_score(yte, est.predict(Xte))
        ll_sk, ll_bk = log_loss(yte, p_sk), log_loss(yte, p_bk)
        msg = (
            f"{data} seed {seed}: accuracy {acc_bk:.3f} vs {acc_sk:.3f}, log-loss "
            f"{ll_bk:.4f} vs {ll_sk:.4f}, fit {fit_s:.0f} s, {est.convergence_}"
        )
        print(msg)
        assert acc_bk >= acc_sk and ll_bk < ll_sk and est.convergence_.ok and fit_s <= 120, msg


def calibration_bins(p1, lo1, hi1, y, n_bins=10):
    """Per bin of predicted P(y=1) (equal width): observed frequency, mean lower, mean upper."""
    which = np.minimum((p1 * n_bins).astype(int), n_bins - 1)
    return [
        (
            float(y[which == b].mean()),
            float(lo1[which == b].mean()),
            float(hi1[which == b].mean()),
            int((which == b).sum()),
        )
        for b in range(n_bins)
        if np.any(which == b)
    ]


@pytest.mark.slow
def test_breast_cancer_interval_covers_observed_frequency():
    """Default GPClassifier() on breast_cancer (stratified 80/20, seed 0): held-out points in
    10 bins of predicted probability. The observed frequency of class 1 in each bin falls
    inside the 90 % posterior-predictive band of that frequency (replicated outcomes from the
    posterior's per-draw probabilities: the consistency bars of Bröcker & Smith 2007) in at
    least 8 of the non-empty bins. (The 90 % interval of the bin's mean probability alone
    cannot hold a frequency of a few 0/1 outcomes; it is printed for the record.)"""
    from bayeskern.plots.calibration import reliability_bands
    from bayeskern.report_calibration import proba_draws

    X, y = load_breast_cancer(return_X_y=True)
    Xtr, Xte, ytr, yte = train_test_split(X, y, test_size=0.2, stratify=y, random_state=0)
    est = bk.GPClassifier(progress_bar=False, random_state=0).fit(Xtr, ytr)
    p1 = est.predict_proba(Xte)[:, 1]
    lo, hi = est.predict_proba_interval(Xte, interval=0.9)
    bins = calibration_bins(p1, lo[:, 1], hi[:, 1], yte)
    in_proba_band = sum(lo_b <= f <= hi_b for f, lo_b, hi_b, _ in bins)
    P, why = proba_draws(est, Xte)
    assert P is not None, why
    t = reliability_bands(yte, P, n_bins=10, prob=0.9)
    inside = int(
        np.sum((t["observed_lower"] <= t["observed"]) & (t["observed"] <= t["observed_upper"]))
    )
    print(
        f"{inside} of {len(t['count'])} bins inside the posterior-predictive band; "
        f"{in_proba_band} inside the band of the mean probability; {t}"
    )
    assert inside >= min(8, len(t["count"])), t
