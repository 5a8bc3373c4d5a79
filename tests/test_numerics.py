"""Numerical robustness: Cholesky jitter escalation (recorded in the InferenceData attributes and
shown in the report), convergence warnings that name the fix, and no silent NaN in a prediction
when the kernel matrix is ill-conditioned (duplicated points, huge length-scale, near-zero noise).
"""

import warnings

import jax.numpy as jnp
import numpy as np
import pandas as pd
import pytest

import bayeskern as bk
from bayeskern import diagnostics
from bayeskern.linalg import JITTERS, gaussian_conditional, safe_cholesky
from bayeskern.report import render_report

S = dict(num_warmup=10, num_samples=10, num_chains=1, progress_bar=False, random_state=0)


# ---------------------------------------------------------------------- gaussian_conditional
def test_gaussian_conditional_equals_the_dense_formulas():
    """One triangular solve gives R&W eqs. 2.25-2.26 as written with K⁻¹."""
    rng = np.random.default_rng(0)
    X, Xn = rng.uniform(0, 3, (30, 1)), rng.uniform(0, 3, (7, 1))
    k = lambda A, B: np.exp(-0.5 * (A - B.T) ** 2)  # noqa: E731
    Ky, Ks, y = k(X, X) + 0.05 * np.eye(30), k(X, Xn), rng.normal(size=30)
    mean, var = gaussian_conditional(jnp.linalg.cholesky(Ky), Ks, np.ones(7), y)
    np.testing.assert_allclose(mean, Ks.T @ np.linalg.solve(Ky, y), rtol=1e-9, atol=1e-12)
    dense = 1.0 - np.einsum("ij,ij->j", Ks, np.linalg.solve(Ky, Ks))
    np.testing.assert_allclose(var, np.maximum(dense, 0.0), rtol=1e-8, atol=1e-12)
    # with the prior covariance K** the full conditional covariance (R&W eq. 2.24)
    mean2, cov = gaussian_conditional(jnp.linalg.cholesky(Ky), Ks, k(Xn, Xn), y)
    np.testing.assert_allclose(mean2, mean, rtol=1e-12)
    want = k(Xn, Xn) - Ks.T @ np.linalg.solve(Ky, Ks)
    np.testing.assert_allclose(cov, want, rtol=1e-8, atol=1e-12)


# --------------------------------------------------------------------------- safe_cholesky
@pytest.mark.parametrize(
    "K, expect_jitter",
    [
        (np.eye(4), 0.0),
        (np.ones((4, 4)), ">0"),  # rank 1: duplicated points
        (np.ones((4, 4)) + 1e-14 * np.eye(4), "any"),  # huge length-scale
        (np.diag([1.0, 1e-20, 1.0]), "any"),  # near-zero noise direction
        (-np.eye(3), "nan"),  # not PSD at all
        (np.full((3, 3), np.nan), "nan"),  # non-finite input
    ],
)
def test_safe_cholesky_escalates_and_never_returns_nan_silently(K, expect_jitter):
    L, jit = safe_cholesky(jnp.asarray(K))
    jit = float(jit)
    if expect_jitter == "nan":  # reported as nan so that the caller raises, never a NaN factor
        assert np.isnan(jit)
        return
    assert np.isfinite(np.asarray(L)).all()
    assert jit in {j * float(np.mean(np.diag(K))) for j in JITTERS}
    if expect_jitter == 0.0:
        assert jit == 0.0
    elif expect_jitter == ">0":
        assert jit > 0
    np.testing.assert_allclose(np.asarray(L @ L.T), K + jit * np.eye(len(K)), atol=1e-8)


# --------------------------------------------------------------------------- estimators
@pytest.fixture(scope="module")
def fitted(tiny_gp_run):
    """The shared tiny GP regression run (conftest; its data has duplicated rows)."""
    import pandas as pd

    df = pd.read_csv(tiny_gp_run / "train.csv")
    return df.drop(columns="y"), df["y"].to_numpy(), bk.load_run(tiny_gp_run / "run")


@pytest.fixture(scope="module")
def classifier(fitted):
    X, y, _ = fitted
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return bk.GPClassifier(**S).fit(X, (y > 0.5).astype(int))


def test_gp_predictive_per_chunk_equals_the_cached_factors(fitted):
    """``regression_predictive`` (one solve per draw, used when the factors are not cached)
    equals the cached-L⁻¹ path, on a posterior whose data has duplicated rows."""
    from bayeskern.models import gp as M

    X, _, est = fitted
    draws, Xt, yt = est._training_draws()
    Xn = jnp.asarray(est.x_std_.transform(X.iloc[:5]) + 0.1)
    kernel, scale = est.kernel_, est.x_std_.scale
    for i in (0, 5):
        draw = {k: jnp.asarray(v[i]) for k, v in draws.items() if not k.startswith("__")}
        got = M.regression_predictive(kernel, draw, Xt, yt, Xn, scale)
        factors = M.regression_factors(kernel, draw, Xt, yt, scale)
        want = (*M.predict_from_factors(kernel, draw, factors, Xt, Xn, scale), factors[2])
        for a, b in zip(got, want, strict=True):
            np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-7, atol=1e-10)


def _poison(est, **values):
    """Overwrite every posterior draw of the named variables (an ill-conditioned posterior)."""
    for k, v in values.items():
        est.idata_.posterior[k].values[...] = v
    est.__dict__.pop("_cache", None)


@pytest.mark.parametrize(
    "case",
    [
        dict(noise=1e-12),  # near-zero noise with duplicated points
        dict(rbf_lengthscale=1e6),  # K ≈ all ones: rank one
        dict(rbf_lengthscale=1e6, noise=1e-12),  # both
        dict(rbf_lengthscale=1e-9),  # K ≈ identity, far from the data
        dict(amplitude=1e12, rbf_lengthscale=1e6),  # the model's fixed 1e-6 jitter is negligible
    ],
)
def test_ill_conditioned_gp_regressor_predicts_finite_or_raises(fitted, case):
    import copy

    X, y, reg = fitted
    est = copy.deepcopy(reg)
    _poison(est, **case)
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        try:
            pred = est.predictive(
                pd.concat([X, pd.DataFrame([[1.5, 0.0], [10.0, 9.0]], columns=X.columns)])
            )
        except FloatingPointError as e:  # the clear error, never a NaN prediction
            assert "not positive definite" in str(e) or "ill-conditioned" in str(e)
            return
    assert np.isfinite(pred.mean()).all() and np.isfinite(pred.std()).all()
    assert (pred.std() > 0).all()
    jit = est.idata_.posterior.attrs["max_jitter"]  # recorded with the posterior
    assert jit == est.max_jitter_ >= 0
    if jit > 1e-6:  # a large jitter is announced
        assert any("jitter" in str(x.message) for x in w)


@pytest.mark.slow  # a classifier fit of its own
def test_ill_conditioned_gp_classifier_probabilities_finite(fitted, classifier):
    import copy

    X = fitted[0]
    est = copy.deepcopy(classifier)
    _poison(est, rbf_lengthscale=1e6)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        p = est.predict_proba(X)
    assert np.isfinite(p).all() and np.allclose(p.sum(axis=1), 1.0)
    assert est.idata_.posterior.attrs["max_jitter"] >= 0


def test_jitter_is_shown_in_the_report(fitted):
    import copy

    X, y, reg = fitted
    est = copy.deepcopy(reg)
    _poison(est, amplitude=1e12, rbf_lengthscale=1e6, noise=1e-12)
    with pytest.warns(UserWarning, match="Cholesky needed jitter"):
        html = render_report(est, X_test=X[:5], y_test=y[:5])
    assert est.max_jitter_ > 1e-6
    assert "largest Cholesky jitter added to a kernel matrix" in html
    assert "(ill-conditioned)" in html
    assert f"{est.max_jitter_:.1e}" in html


# --------------------------------------------------------------------------- convergence
def _idata(n_chains, diverging=0, stuck=False):
    rng = np.random.default_rng(0)
    a = rng.normal(size=(n_chains, 200))
    if stuck:  # chains at different places: R-hat >> 1, tiny ESS
        a = a * 0.01 + np.arange(n_chains)[:, None]
    div = np.zeros((n_chains, 200), dtype=bool)
    div[0, :diverging] = True
    return diagnostics.from_samples({"a": a}, sample_stats={"diverging": div})


@pytest.mark.parametrize(
    "kind, fix",
    [
        ("divergent", "raise target_accept_prob"),
        ("rhat", "run longer (num_warmup, num_samples)"),
        ("ess", "increase num_samples"),
        ("one_chain", "run num_chains >= 4"),
    ],
)
def test_convergence_failures_warn_and_name_the_fix(kind, fix):
    idata = {
        "divergent": lambda: _idata(4, diverging=7),
        "rhat": lambda: _idata(4, stuck=True),
        "ess": lambda: _idata(4, stuck=True),
        "one_chain": lambda: _idata(1),
    }[kind]()
    with pytest.warns(UserWarning, match="Not converged") as w:
        rep = diagnostics.convergence_report(idata)
    assert not rep.ok and fix in str(w[0].message) and fix in rep.verdict


@pytest.mark.parametrize("used, higher", [(0.8, "0.9"), (0.95, "0.975")])
def test_divergence_fix_names_a_higher_target_than_the_one_used(used, higher):
    idata = _idata(4, diverging=7)
    diagnostics.set_attrs(idata, target_accept_prob=used)
    rep = diagnostics.convergence_report(idata, warn=False)
    assert f"above the {used:g} used (e.g. {higher})" in rep.verdict


def test_converged_run_does_not_warn():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        rep = diagnostics.convergence_report(_idata(4))
    assert rep.ok and rep.verdict.startswith("Converged")
