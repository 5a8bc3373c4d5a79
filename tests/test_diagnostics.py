"""Calibration metrics and convergence verdicts."""

import numpy as np
import pytest
from scipy import stats

from bayeskern import diagnostics
from bayeskern.predictive import MixturePredictive


def test_crps_matches_gaussian_closed_form(rng):
    y, mu, sd = 0.7, 0.2, 1.3
    z = (y - mu) / sd
    exact = sd * (z * (2 * stats.norm.cdf(z) - 1) + 2 * stats.norm.pdf(z) - 1 / np.sqrt(np.pi))
    draws = rng.normal(mu, sd, size=(200_000, 1))
    assert diagnostics.crps_ensemble(np.array([y]), draws)[0] == pytest.approx(exact, rel=0.01)


def test_regression_metrics_on_calibrated_predictive(rng):
    n = 4000
    mu = rng.normal(size=n)
    y = mu + rng.normal(size=n)
    m = diagnostics.regression_metrics(y, MixturePredictive(mu[None], np.ones((1, n))))
    assert m["coverage_90"] == pytest.approx(0.9, abs=0.02)
    assert m["coverage_50"] == pytest.approx(0.5, abs=0.03)
    assert m["nlpd"] == pytest.approx(0.5 * np.log(2 * np.pi) + 0.5, abs=0.05)
    assert m["rmse"] == pytest.approx(1.0, abs=0.05)


def test_classification_metrics_and_ece(rng):
    p = rng.uniform(size=20000)
    y = (rng.uniform(size=p.size) < p).astype(int)
    m = diagnostics.classification_metrics(y, p)
    assert m["ece"] < 0.02
    assert diagnostics.expected_calibration_error(y, np.clip(p + 0.3, 0, 1)) > 0.15
    assert 0.7 < m["auc"] < 0.9


def test_convergence_report_flags_bad_chains(rng):
    import arviz as az

    good = az.from_dict(posterior={"a": rng.normal(size=(4, 500))})
    rep = diagnostics.convergence_report(good, warn=False)
    assert rep.ok and rep.max_rhat < 1.01
    bad = az.from_dict(posterior={"a": rng.normal(size=(4, 500)) + np.arange(4)[:, None]})
    with pytest.warns(UserWarning, match="R-hat"):
        rep = diagnostics.convergence_report(bad)
    assert not rep.ok and "Not converged" in rep.verdict
