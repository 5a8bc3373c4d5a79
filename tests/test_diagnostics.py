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


def test_divergence_sites_name_the_tail_where_divergent_draws_gather(rng):
    """A funnel in miniature: the divergent draws are the largest of one element of ``scale``
    and ordinary draws of everything else; only that element is named, on its high side."""
    from bayeskern.convergence import divergence_sites

    draws = {"scale": rng.normal(size=(4, 300, 2)), "mu": rng.normal(size=(4, 300))}
    top = np.argsort(draws["scale"][..., 1], axis=None)[-3:]  # the three largest of scale[1]
    diverging = np.zeros((4, 300), bool)
    diverging.flat[top] = True
    sites = divergence_sites(draws, diverging)
    assert len(sites) == 1 and sites[0].startswith("scale[1] high (quantile 1.00")
    # the low side, the mid-rank quantile with ties, and the most extreme first
    draws["mu"] = np.where(diverging, -5.0, draws["mu"])
    sites = divergence_sites(draws, diverging)
    assert [s.split(" (")[0] for s in sites] == ["mu low", "scale[1] high"]
    assert "quantile 0.00" in sites[0] and "value -5" in sites[0]
    assert divergence_sites(draws, diverging, most=1) == sites[:1]
    assert divergence_sites(draws, np.zeros((4, 300), bool)) == []
    # a divergent draw in the middle of every marginal names nothing
    middle = np.zeros((4, 300), bool)
    middle.flat[np.argsort(draws["scale"][..., 1], axis=None)[600]] = True
    assert divergence_sites({"scale": draws["scale"][..., 1]}, middle) == []
    with pytest.raises(ValueError, match="tail must lie between 0 and 0.5, got 0.5"):
        divergence_sites(draws, diverging, tail=0.5)


def test_convergence_report_says_where_the_divergences_sit(rng):
    import arviz as az

    a = rng.normal(size=(4, 500))
    diverging = a > np.quantile(a, 0.995)
    idata = az.from_dict(
        posterior={"a": a, "b": rng.normal(size=(4, 500))},
        sample_stats={"diverging": diverging},
    )
    with pytest.warns(UserWarning, match="divergent transitions"):
        rep = diagnostics.convergence_report(idata)
    assert not rep.ok and rep.n_divergent == diverging.sum()
    assert "10 divergent transitions (0.5 %), at a high (quantile 1.00" in rep.verdict
    assert rep.verdict.count("quantile") == 1  # b, independent of the divergences: not named


def test_chain_apart_names_the_stuck_chain_and_where(rng):
    """Four chains, one of which sits 3 sd away in one element: that chain and element are
    named, with the numbers a trace plot would show; one chain, or chains that agree
    exactly, name nothing."""
    import arviz as az

    from bayeskern.convergence import chain_apart

    draws = {"a": rng.normal(size=(4, 400)), "b": rng.normal(size=(4, 400, 2))}
    draws["b"][2, :, 1] += 3.0
    named = chain_apart(draws)
    assert named.startswith("chain 2 in b[1] (mean 3")
    assert "within-chain sd 1" in named
    assert chain_apart({"a": draws["a"][:1]}) is None
    assert chain_apart({"c": np.ones((4, 50))}) is None
    idata = az.from_dict(posterior=draws)
    with pytest.warns(UserWarning, match="furthest apart: chain 2 in b\\[1\\]"):
        rep = diagnostics.convergence_report(idata)
    assert not rep.ok and rep.max_rhat > 1.2
    calm = az.from_dict(posterior={"a": draws["a"]})
    assert "furthest apart" not in diagnostics.convergence_report(calm, warn=False).verdict


def _sticky(rng, rho, shape):
    """AR(1) draws along the draw axis (axis 1): ``rho`` near 1 mixes slowly."""
    x = rng.normal(size=shape)
    for t in range(1, shape[1]):
        x[:, t] = rho * x[:, t - 1] + np.sqrt(1 - rho**2) * x[:, t]
    return x


def test_trace_plot_shows_the_worst_mixed_quantities_first(rng):
    import arviz as az

    from bayeskern import plots

    b = rng.normal(size=(4, 400, 3))
    b[:, :, 1] = _sticky(rng, 0.99, (4, 400))
    c = rng.normal(size=(4, 400, 2, 2))
    c[:, :, 1, 0] = _sticky(rng, 0.9, (4, 400))  # element 2 in C order
    idata = az.from_dict(
        posterior={
            "a": rng.normal(size=(4, 400)),
            "b": b,
            "c": c,
            "f": rng.normal(size=(4, 400, 5)),  # latent values and restatements: no traces
            "a_data_units": rng.normal(size=(4, 400)),
            "a_raw": rng.normal(size=(4, 400)),  # a sampler coordinate of the recorded a
            "d_raw": rng.normal(size=(4, 400)),  # no recorded d: kept
        },
        dims={"b": ["column"], "c": ["r", "s"]},
        coords={"column": ["x0", "x1", "x2"]},  # ArviZ labels b[x1], c[1, 0]
    )
    rep = diagnostics.convergence_report(idata, warn=False)
    assert plots.trace_variables(idata) == ["a", "b", "d_raw"]  # and no matrix-valued c
    axes = plots.plot_trace(idata, ["a", "b", "c"], max_vars=3, convergence=rep)
    labels = [ax.get_ylabel().split("\n") for ax in axes[:, 0]]
    assert [lab[0] for lab in labels[:2]] == ["b[1]", "c[2]"]
    ess = rep.table.loc["b[x1]", ["ess_bulk", "ess_tail"]]
    assert labels[0][2] == f"ESS {ess['ess_bulk']:.0f} / {ess['ess_tail']:.0f}"
    assert min(ess) < 100 < min(rep.table.loc["a", ["ess_bulk", "ess_tail"]])
    np.testing.assert_array_equal(axes[0, 0].lines[2].get_ydata(), b[2, :, 1])
    np.testing.assert_array_equal(axes[1, 0].lines[0].get_ydata(), c[0, :, 1, 0])
    # without a report: the first quantities in the order asked, unlabelled
    axes = plots.plot_trace(idata, max_vars=2)
    assert [ax.get_ylabel() for ax in axes[:, 0]] == ["a", "b[0]"]


@pytest.mark.parametrize("draws", [1, 2])
def test_convergence_report_on_too_few_draws_says_so_without_numpy_warnings(rng, draws):
    import warnings

    import arviz as az

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # ArviZ: "More chains than draws"
        idata = az.from_dict(posterior={"a": rng.normal(size=(4, draws)), "b": np.ones((4, draws))})
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)  # no "All-NaN axis" from NumPy
        rep = diagnostics.convergence_report(idata, warn=False)
    assert not rep.ok
    assert np.isnan(rep.max_rhat) and np.isnan(rep.min_ess_bulk)
    assert f"cannot be computed from {draws} draws per chain" in rep.verdict


def _with_log_lik(rng, shift, n=40):
    import arviz as az

    idata = az.from_dict(posterior={"a": rng.normal(size=(2, 200))})
    ll = rng.normal(-1.0 - shift, 0.05, size=(2, 200, n))
    return diagnostics.add_group(idata, "log_likelihood", {"y": ll}, dims={"y": ["obs"]})


def test_loo_compare_differences_to_the_best(rng):
    good, bad = _with_log_lik(rng, 0.0), _with_log_lik(rng, 0.5)
    tab = diagnostics.loo_compare({"bad": bad, "good": good})
    assert list(tab.index) == ["good", "bad"]
    assert tab.loc["good", "elpd_diff"] == 0 and tab.loc["good", "se_diff"] == 0
    assert tab.loc["bad", "elpd_diff"] == pytest.approx(
        tab.loc["good", "elpd_loo"] - tab.loc["bad", "elpd_loo"]
    )
    assert tab.loc["bad", "elpd_diff"] == pytest.approx(0.5 * 40, rel=0.1)
    pointwise = [np.asarray(diagnostics.loo(m).loo_i) for m in (good, bad)]
    diff = pointwise[0] - pointwise[1]
    assert tab.loc["bad", "se_diff"] == pytest.approx(np.sqrt(diff.size * np.var(diff)))
    assert tab.loc["bad", "se"] == pytest.approx(float(diagnostics.loo(bad).se))
    assert set(tab.columns) == {"elpd_loo", "se", "p_loo", "elpd_diff", "se_diff", "n_pareto_k_bad"}


def test_loo_compare_bad_input(rng):
    import arviz as az

    good = _with_log_lik(rng, 0.0)
    with pytest.raises(ValueError, match="models must be a non-empty dict"):
        diagnostics.loo_compare({})
    with pytest.raises(ValueError, match=r"models\['none'\] has no log_likelihood"):
        diagnostics.loo_compare({"g": good, "none": az.from_dict(posterior={"a": np.ones((2, 5))})})
    with pytest.raises(ValueError, match="different numbers of rows"):
        diagnostics.loo_compare({"g": good, "short": _with_log_lik(rng, 0.0, n=30)})
