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
from bayeskern.linalg import JITTERS, safe_cholesky
from bayeskern.report import render_report

S = dict(num_warmup=10, num_samples=10, num_chains=1, progress_bar=False, random_state=0)


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


def test_converged_run_does_not_warn():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        rep = diagnostics.convergence_report(_idata(4))
    assert rep.ok and rep.verdict.startswith("Converged")
