"""Tests of the P_f(α) tuning-ease index and grid evaluation (Czarnecki & Tabor 2014, section 5)."""

from __future__ import annotations

import warnings

import matplotlib

matplotlib.use("Agg")

import joblib  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402
from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402
from sklearn.exceptions import FitFailedWarning  # noqa: E402
from sklearn.metrics.pairwise import euclidean_distances  # noqa: E402
from sklearn.model_selection import StratifiedKFold  # noqa: E402
from sklearn.svm import SVC  # noqa: E402

import bayeskern  # noqa: E402,F401
from bayeskern.estimators.ckrbf import CkRBFClassifier  # noqa: E402
from bayeskern.experiments.tuning import (  # noqa: E402
    grid_scores,
    pf_auc,
    pf_curve,
    pf_table,
    precomputed_grid_scores,
    window_wins,
)
from bayeskern.kernels.ckrbf import CkRBF  # noqa: E402
from bayeskern.learning import fit_kernel
from bayeskern.plots.ckrbf import plot_cells, plot_pf_curves  # noqa: E402


def _data(n=80, seed=0):
    rng = np.random.default_rng(seed)
    X = np.vstack([rng.normal(size=(n // 2, 2)) * 0.5, rng.normal(size=(n // 2, 2)) * 1.5 + 3])
    y = (X[:, 0] + 0.5 * rng.normal(size=n) > 1.2).astype(int)
    return X, y


scores_st = st.lists(st.floats(0.0, 1.0), min_size=1, max_size=30)


def test_pf_curve_values():
    alphas, p = pf_curve([0.5, 0.7, 0.7, 0.9], alphas=[0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0])
    np.testing.assert_allclose(p, [1, 1, 0.75, 0.75, 0.25, 0.25, 0])
    a, p = pf_curve(np.array([0.9, 0.5, 0.7]))
    np.testing.assert_allclose(a, [0.5, 0.7, 0.9])
    np.testing.assert_allclose(p, [1, 2 / 3, 1 / 3])


@settings(max_examples=40, deadline=None)
@given(scores_st, st.floats(0.0, 0.5))
def test_pf_auc_is_the_integral_of_the_curve(scores, a):
    """The closed form equals a Riemann sum of P̂_f over [α_min, 1]."""
    alphas = np.linspace(a, 1.0, 20001)
    _, p = pf_curve(scores, alphas)
    numeric = np.sum(p[1:]) * (alphas[1] - alphas[0])
    assert pf_auc(scores, alpha_min=a) == pytest.approx(numeric, abs=2e-4)
    assert 0.0 <= pf_auc(scores, a, normalize=True) <= 1.0


@settings(max_examples=30, deadline=None)
@given(scores_st, st.floats(0.0, 0.2))
def test_pf_auc_is_monotone_in_the_scores(scores, bump):
    s = np.asarray(scores)
    better = np.minimum(s + bump, 1.0)
    assert pf_auc(better, alpha_min=0.0) >= pf_auc(s, alpha_min=0.0) - 1e-12


def test_failed_fits_count_below_every_alpha():
    _, p = pf_curve([0.6, np.nan, 0.8, 0.8], alphas=[0.6, 0.7])
    np.testing.assert_allclose(p, [0.75, 0.5])
    assert pf_auc([0.6, np.nan, 0.8, 0.8]) == pytest.approx(np.mean([0, 0, 0.2, 0.2]))
    assert pf_table({"a": [0.6, np.nan]}).loc["a", "failed"] == 1


def test_precomputed_failed_fit_is_scored_not_raised():
    X, y = _data(40)
    q = euclidean_distances(X, squared=True)
    ell = np.full_like(q, 800.0)  # exp(800) overflows float64: scored as a failed fit
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)  # the overflow is reported, not leaked
        with pytest.warns(FitFailedWarning, match="overflows float64 at gamma=1"):
            df = precomputed_grid_scores((ell, q), y, [1.0], [1.0], cv=2)
    assert np.isnan(df["score"]).all()
    with pytest.raises(ValueError, match="overflows"):
        precomputed_grid_scores((ell, q), y, [1.0], [1.0], cv=2, error_score="raise")


def test_pf_table_shares_alpha_min():
    t = pf_table({"a": [0.6, 0.8], "b": [0.7, 0.9]})
    assert (t["alpha_min"] == 0.6).all()
    assert t.loc["a", "pf_auc"] == pytest.approx(np.mean([0.0, 0.2]))
    assert t.loc["b", "pf_auc"] == pytest.approx(np.mean([0.1, 0.3]))
    assert t.loc["b", "best"] == 0.9


def test_pf_bad_input():
    with pytest.raises(ValueError, match="NaN"):
        pf_auc([np.nan, np.nan])
    with pytest.raises(ValueError, match="empty"):
        pf_curve([])
    with pytest.raises(ValueError, match="alpha_max"):
        pf_auc([0.5], alpha_min=1.0)
    with pytest.raises(ValueError, match="param_grid"):
        grid_scores(SVC(), *_data(), {})
    with pytest.raises(ValueError, match="Cs"):
        precomputed_grid_scores((0, np.zeros((4, 4))), [0, 1, 0, 1], [], [1.0])
    with pytest.raises(ValueError, match=r"\(n, n\)"):
        precomputed_grid_scores((0, np.zeros((3, 3))), [0, 1, 0, 1], [1.0], [1.0])


def test_window_wins():
    gam = [1e-3, 1e-2, 1e-1, 1.0]
    a = pd.DataFrame({"C": 1.0, "gamma": gam, "score": [0.8, 0.6, 0.6, 0.9]})
    b = pd.DataFrame({"C": 1.0, "gamma": gam, "score": [0.7, 0.7, 0.7, 0.7]})
    # windows: {0.8,0.6,0.6} vs 0.7 -> win; {0.6,0.6,0.9} vs 0.7 -> win
    assert window_wins(a, b) == 1.0
    assert window_wins(b, a) == 0.0
    assert window_wins(a, b, window=1) == 0.5
    with pytest.raises(ValueError, match="C=10"):
        window_wins(a, b, C=10.0)


def test_precomputed_path_equals_svc_grid_search():
    """The γ-reusing fast path gives the same scores as GridSearchCV on SVC(kernel="rbf")."""
    X, y = _data()
    cv = StratifiedKFold(4, shuffle=True, random_state=0)
    grid = {"C": [0.1, 10.0], "gamma": [0.1, 1.0]}
    slow = grid_scores(SVC(kernel="rbf"), X, y, grid, cv=cv)
    fast = precomputed_grid_scores(
        (0.0, euclidean_distances(X, squared=True)), y, grid["C"], grid["gamma"], cv=cv
    )
    m = slow.merge(fast, on=["C", "gamma"], suffixes=("_slow", "_fast"))
    assert len(m) == 4
    np.testing.assert_allclose(m["score_slow"], m["score_fast"], atol=1e-12)


def test_fold_factors_equal_the_estimator_in_grid_search():
    """Per-fold cached CkRBF factors reproduce CkRBFClassifier under GridSearchCV."""
    X, y = _data(60, seed=1)
    cv = StratifiedKFold(3, shuffle=True, random_state=0)
    Cs, gammas = [1.0, 10.0], [0.1, 1.0]

    def factors(tr, te):
        k = fit_kernel(CkRBF(n_clusters=2, random_state=0), X[tr])
        return (*k.factors(X[tr]), *k.factors(X[te], X[tr]))

    fast = precomputed_grid_scores(factors, y, Cs, gammas, cv=cv)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        slow = grid_scores(CkRBFClassifier(random_state=0), X, y, {"C": Cs, "gamma": gammas}, cv=cv)
    m = slow.merge(fast, on=["C", "gamma"], suffixes=("_slow", "_fast"))
    np.testing.assert_allclose(m["score_slow"], m["score_fast"], atol=1e-12)


def test_grid_scores_runs_on_dask():
    """joblib's dask backend runs the grid (a local in-process cluster here)."""
    distributed = pytest.importorskip("distributed")
    X, y = _data(50)
    grid = {"C": [0.5, 5.0], "gamma": [0.3]}
    ref = grid_scores(SVC(), X, y, grid, cv=3)
    with distributed.Client(
        processes=False, n_workers=1, threads_per_worker=2, dashboard_address=None
    ):
        with joblib.parallel_backend("dask"):
            out = grid_scores(SVC(), X, y, grid, cv=3, n_jobs=-1)
            out2 = precomputed_grid_scores(
                (0.0, euclidean_distances(X, squared=True)), y, [0.5, 5.0], [0.3], cv=3, n_jobs=-1
            )
    np.testing.assert_allclose(out["score"], ref["score"])
    np.testing.assert_allclose(out2["score"], ref["score"])


def test_plots():
    rng = np.random.default_rng(0)
    ax = plot_pf_curves({"RBF": rng.uniform(0.6, 0.8, 20), "C2RBF": rng.uniform(0.65, 0.8, 20)})
    assert len(ax.get_lines()) == 2
    X, y = _data(40)
    k = fit_kernel(CkRBF(n_clusters=2), X)
    ax = plot_cells(k, X, y)
    assert len(ax.patches) == 2
    with pytest.raises(ValueError, match="fitted CkRBF"):
        plot_cells(CkRBF(), X)
    with pytest.raises(ValueError, match="empty"):
        plot_pf_curves({})
