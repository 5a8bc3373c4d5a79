"""Pólya-Gamma Gibbs on the Hilbert-space basis: its Gaussian steps against dense algebra, its
posterior against NUTS on the same model, and GPClassifier(approximation="hsgp")."""

import warnings

import arviz as az
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from bayeskern.models.hsgp import (
    classification_variances,
    gaussian_evidence,
    hsgp_classification,
)
from numpyro.infer import MCMC, NUTS

import bayeskern as bk
from bayeskern.estimators.base import Standardizer
from bayeskern.hsgp import build_design
from bayeskern.inference.pg_basis import gaussian_weights, run_pg_basis
from bayeskern.kernels import RBF, name_leaves


def _spd(rng, p):
    G = rng.normal(size=(p, p))
    return G @ G.T + 0.1 * np.eye(p)


def test_gaussian_evidence_equals_the_dense_integral():
    """log int exp(c'w - w'Aw/2) N(w | 0, D) dw
    = c'(A + D^-1)^-1 c / 2 - log|D|/2 - log|A + D^-1|/2 (completing the square)."""
    rng = np.random.default_rng(0)
    A, c, d = _spd(rng, 6), rng.normal(size=6), rng.uniform(0.1, 3.0, 6)
    P = A + np.diag(1 / d)
    ref = 0.5 * c @ np.linalg.solve(P, c) - 0.5 * np.sum(np.log(d)) - 0.5 * np.linalg.slogdet(P)[1]
    got = float(gaussian_evidence(jnp.asarray(A), jnp.asarray(c), jnp.asarray(d)))
    assert got == pytest.approx(ref, rel=1e-12, abs=1e-12)


def test_gaussian_weights_have_the_conditional_mean_and_covariance():
    rng = np.random.default_rng(1)
    A, c, d = _spd(rng, 4), rng.normal(size=4), rng.uniform(0.2, 2.0, 4)
    draw = jax.jit(jax.vmap(gaussian_weights, in_axes=(0, None, None, None)))
    w = np.asarray(draw(jax.random.split(jax.random.PRNGKey(0), 40000), A, c, d))
    cov = np.linalg.inv(A + np.diag(1 / d))
    sd = np.sqrt(np.diag(cov) / len(w))
    assert np.all(np.abs(w.mean(0) - cov @ c) < 5 * sd)
    np.testing.assert_allclose(np.cov(w.T), cov, atol=0.03 * np.max(np.abs(cov)))


@pytest.fixture(scope="module")
def small_problem():
    rng = np.random.default_rng(2)
    X = rng.uniform(-2, 2, size=(150, 1))
    y = (rng.uniform(size=150) < 1 / (1 + np.exp(-3 * np.sin(2 * X[:, 0])))).astype(int)
    xs = Standardizer.fit(X)
    Xs = xs.transform(X)
    kernel = name_leaves(RBF())
    design = build_design(kernel, Xs, xs.scale, n_basis=6)
    return Xs, y, kernel, design, xs.scale


def test_gibbs_posterior_equals_nuts_on_the_explicit_weights(small_problem):
    """The collapsed Pólya-Gamma Gibbs sampler and NUTS on the same model with the bias and
    weights as sites (models.hsgp.hsgp_classification without stats) agree on the posterior
    of the hyper-parameters and of the class-1 probabilities at the rows."""
    Xs, y, kernel, design, x_scale = small_problem
    kw = dict(kernel=kernel, design=design, x_scale=x_scale)
    Psi = jnp.concatenate([jnp.ones((len(Xs), 1)), design.features(jnp.asarray(Xs))], axis=1)
    idata = run_pg_basis(
        hsgp_classification,
        kw,
        Psi,
        y,
        lambda draw: classification_variances(kernel, design, draw, x_scale),
        rng_key=0,
        num_warmup=300,
        num_samples=1500,
        num_chains=2,
    )
    post = idata.posterior
    gibbs_f = np.asarray(post["bias"])[..., None] + np.einsum(
        "cdm,nm->cdn", np.asarray(post["weights"]), np.asarray(Psi[:, 1:])
    )
    mcmc = MCMC(
        NUTS(hsgp_classification),
        num_warmup=500,
        num_samples=1500,
        num_chains=2,
        progress_bar=False,
        chain_method="sequential",
    )
    mcmc.run(jax.random.PRNGKey(1), X=jnp.asarray(Xs), y=jnp.asarray(y), **kw)
    s = mcmc.get_samples()
    # f at the rows under NUTS: the model's own Phi (S^1/2 w)
    sv = jax.vmap(lambda d: classification_variances(kernel, design, d, x_scale))(
        {"amplitude": s["amplitude"], "rbf_lengthscale": s["rbf_lengthscale"]}
    )
    Phi = np.asarray(design.features(jnp.asarray(Xs)))
    nuts_f = np.asarray(s["bias"])[:, None] + np.einsum(
        "dm,nm->dn", np.sqrt(np.asarray(sv)[:, 1:]) * np.asarray(s["w"]), Phi
    )
    p_gibbs = 1 / (1 + np.exp(-gibbs_f))  # (chain, draw, n)
    p_nuts = (1 / (1 + np.exp(-nuts_f))).reshape(2, -1, len(Xs))

    def mean_and_se(a):  # (chain, draw[, n]): mean and Monte Carlo standard error (ESS)
        cols = a.reshape(*a.shape[:2], -1)
        ess = np.array([float(az.ess(cols[..., i])) for i in range(cols.shape[-1])])
        flat = cols.reshape(-1, cols.shape[-1])
        return flat.mean(0), flat.std(0) / np.sqrt(ess)

    (mg, sg), (mn, sn) = mean_and_se(p_gibbs), mean_and_se(p_nuts)
    assert np.all(np.abs(mg - mn) < 4.5 * np.hypot(sg, sn))
    for name in ("amplitude", "rbf_lengthscale"):
        g = np.log(np.asarray(post[name]).reshape(2, -1))
        n = np.log(np.asarray(s[name]).reshape(2, -1))
        (mg, sg), (mn, sn) = mean_and_se(g), mean_and_se(n)
        assert abs(mg - mn) < 4.5 * np.hypot(sg, sn), name
        assert g.std() == pytest.approx(n.std(), rel=0.1), name


# --------------------------------------------------------------------------- the estimator
QUICK = dict(num_warmup=100, num_samples=100, num_chains=2, progress_bar=False, random_state=0)


def _blobs(n, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.uniform(-2, 2, size=(n, 2))
    f = 2 * (np.sin(2 * X[:, 0]) + X[:, 1])
    return X, (rng.uniform(size=n) < 1 / (1 + np.exp(-f))).astype(int)


@pytest.fixture(scope="module")
def pg_fit():
    X, y = _blobs(400)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # 2 x 100 draws: the convergence verdict is noisy
        return bk.GPClassifier(n_basis=8, **QUICK).fit(X, y), X, y


def test_auto_takes_the_basis_above_the_exact_rows_and_records_it(pg_fit):
    est, X, y = pg_fit
    assert est.approximation_ == "hsgp"  # 400 > CLASSIFIER_AUTO_EXACT_MAX_ROWS, 2 columns
    post = est.idata_.posterior
    assert post.attrs["approximation"] == "hsgp"
    assert post.attrs["sampler"].startswith("Polya-Gamma Gibbs")
    assert post["weights"].shape == (2, 100, est.hsgp_design_.size)
    assert {"amplitude", "rbf_lengthscale", "bias"} <= set(post.data_vars)
    assert est.n_basis_ == {"rbf": [8, 8]}
    assert est.basis_checks_ and "rbf_lengthscale" in est.basis_checks_[0].message()
    # the pointwise log-likelihood is log sigmoid(+-f) of each draw at each row
    ll = np.asarray(est.idata_.log_likelihood["y"])
    f = np.asarray(post["bias"])[..., None] + np.einsum(
        "cdm,nm->cdn",
        np.asarray(post["weights"]),
        np.asarray(est.hsgp_design_.features(jnp.asarray(est.x_std_.transform(X)))),
    )
    np.testing.assert_allclose(ll, -np.logaddexp(0, -(2 * y - 1) * f), rtol=1e-10, atol=1e-12)
    assert est.idata_.posterior_predictive["y"].shape[-1] == len(y)


def test_basis_probabilities_average_the_draws_sigmoids(pg_fit):
    est, X, y = pg_fit
    Xn = _blobs(50, seed=5)[0]
    post = est.idata_.posterior
    f = (
        np.asarray(post["bias"]).reshape(-1, 1)
        + np.asarray(post["weights"]).reshape(-1, est.hsgp_design_.size)
        @ np.asarray(est.hsgp_design_.features(jnp.asarray(est.x_std_.transform(Xn)))).T
    )
    np.testing.assert_allclose(
        est.predict_proba(Xn)[:, 1], (1 / (1 + np.exp(-f))).mean(0), rtol=1e-10
    )
    # the Bayes classifier's decision (the sign of the true log-odds) on most rows
    assert np.mean(est.predict(X) == (np.sin(2 * X[:, 0]) + X[:, 1] > 0)) > 0.85
    lo, hi = est.predict_proba_interval(Xn, 0.9)
    p = est.predict_proba(Xn)
    assert lo.shape == hi.shape == p.shape
    assert np.all((lo <= p + 1e-12) & (p <= hi + 1e-12))


def test_basis_fit_is_reproducible_and_saves_and_loads(pg_fit, tmp_path):
    est, X, y = pg_fit
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        again = bk.GPClassifier(n_basis=8, **QUICK).fit(X, y)
    np.testing.assert_array_equal(
        np.asarray(again.idata_.posterior["weights"]), np.asarray(est.idata_.posterior["weights"])
    )
    est.save(tmp_path / "run")
    loaded = bk.load_run(tmp_path / "run")
    assert loaded.approximation_ == "hsgp" and loaded.n_basis_ == est.n_basis_
    Xn = _blobs(30, seed=6)[0]
    np.testing.assert_allclose(loaded.predict_proba(Xn), est.predict_proba(Xn), rtol=1e-12)


def test_basis_route_refuses_what_it_cannot_do():
    X, y = _blobs(60)
    y3 = np.arange(60) % 3
    with pytest.raises(ValueError, match="approximation='hsgp' handles two classes"):
        bk.GPClassifier(approximation="hsgp", **QUICK).fit(X, y3)
    with pytest.raises(ValueError, match="approximation='hsgp' handles two classes"):
        bk.GPClassifier(approximation="hsgp", inference="latent", **QUICK).fit(X, y)
    with pytest.raises(ValueError, match="'approximation' parameter of GPClassifier must be"):
        bk.GPClassifier(approximation="basis").fit(X, y)
    with pytest.raises(ValueError, match="n_basis"):
        bk.GPClassifier(approximation="hsgp", n_basis=0).fit(X, y)
    X5 = np.random.default_rng(0).normal(size=(60, 5))
    with pytest.raises(ValueError, match="cannot be used"):
        bk.GPClassifier(approximation="hsgp", **QUICK).fit(X5, y)


def test_auto_is_exact_up_to_its_rows_then_the_basis():
    from bayeskern.estimators import gp_basis

    est = bk.GPClassifier()
    est.classes_, est.kernel_ = np.array([0, 1]), name_leaves(RBF())
    n = gp_basis.CLASSIFIER_AUTO_EXACT_MAX_ROWS
    assert est._classifier_approximation(_blobs(n)[0]) == "exact"
    assert est._classifier_approximation(_blobs(n + 1)[0]) == "hsgp"
    est.classes_ = np.array([0, 1, 2])
    assert est._classifier_approximation(_blobs(n + 1)[0]) == "exact"


def test_basis_prior_predictive_draws_labels():
    X, y = _blobs(500)
    draws = bk.GPClassifier(n_basis=6).sample_prior_predictive(X, y, n_draws=20, random_state=1)
    assert draws.shape == (20, 500) and set(np.unique(draws)) <= {0, 1}


def test_basis_fit_writes_the_uncertainty_report(pg_fit, tmp_path):
    est, X, y = pg_fit
    from bayeskern.report_priors import prior_rows

    rows, _ = prior_rows(est)
    assert [r[0] for r in rows][:3] == ["rbf_lengthscale", "amplitude", "bias"]
    from bayeskern.report import report

    text = report(est, tmp_path / "r.html", X_test=X[:50], y_test=y[:50]).read_text()
    assert "Polya-Gamma Gibbs" in text and "bias" in text
