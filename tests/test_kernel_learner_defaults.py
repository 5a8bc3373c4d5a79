"""The kernel learners in an ordinary scikit-learn workflow (issue 14).

LAB-RBF, Xiong's conformal kernel and CkRBF must work inside ``Pipeline``, ``GridSearchCV``,
``cross_val_score`` and ``clone`` with no special handling, and the grid each docstring
documents must be made of their own ``get_params`` keys. The numbers of the issue (airfoil,
WDBC, Pima...) are long runs: ``benchmarks/defaults/defaults_kernel_learners.py``.
"""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.base import clone
from sklearn.model_selection import GridSearchCV, KFold, StratifiedKFold, cross_val_score
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import MinMaxScaler, StandardScaler

import bayeskern as bk
from bayeskern.estimators.conformal import MU_CANDIDATES

#: short LAB-RBF training (the defaults train for ~10 s per model)
LAB_FAST = dict(
    n_iter_round=10,
    n_iter_final=20,
    max_support=10,
    kernel_params=dict(eval_every=10, batch_size=16),
    num_samples=10,
    num_chains=1,
    progress_bar=False,
    random_state=0,
)


def _classification(n=120, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 4)) * [1.0, 10.0, 0.1, 1.0]  # columns of different widths
    y = (X[:, 0] + X[:, 1] / 10 + 0.5 * rng.normal(size=n) > 0).astype(int)
    return X, y


def _regression(n=80, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.uniform(-2, 2, (n, 2))
    return X, np.sin(2 * X[:, 0]) + 0.3 * X[:, 1] + 0.05 * rng.normal(size=n)


@pytest.mark.parametrize(
    "make, grid",
    [
        (
            lambda: bk.ConformalKernelClassifier(random_state=0),
            {"C": [0.1, 1, 10, 100], "gamma": [0.01, 0.03, 0.1]},
        ),
        (lambda: bk.CkRBFClassifier(random_state=0), {"C": [0.1, 1, 10], "gamma": [0.1, 1, 10]}),
    ],
)
def test_classifiers_in_pipeline_gridsearch_and_cross_val(make, grid):
    X, y = _classification()
    est = make()
    assert set(grid) <= set(est.get_params())  # the documented grid is the estimator's own
    pipe = make_pipeline(StandardScaler(), est)
    name = pipe.steps[-1][0]
    search = GridSearchCV(
        pipe,
        {f"{name}__{k}": v[:2] for k, v in grid.items()},
        cv=StratifiedKFold(3, shuffle=True, random_state=0),
    ).fit(X, y)
    assert search.best_score_ > 0.7 and search.score(X, y) > 0.7
    scores = cross_val_score(clone(pipe), X, y, cv=StratifiedKFold(3, shuffle=True, random_state=0))
    again = cross_val_score(clone(pipe), X, y, cv=StratifiedKFold(3, shuffle=True, random_state=0))
    np.testing.assert_array_equal(scores, again)  # same seed, same numbers
    assert clone(est).get_params() == est.get_params()


def test_conformal_defaults_adapt_to_the_data():
    X, y = _classification()
    Xs = StandardScaler().fit_transform(X)
    est = bk.ConformalKernelClassifier(random_state=0).fit(Xs, y)
    # gamma1 = "scale": 1 / (d Var X), i.e. 1/d on standardized inputs, whatever the user's gamma
    assert est.gamma1_ == pytest.approx(1.0 / (Xs.shape[1] * Xs.var()))
    assert est.mu_ in MU_CANDIDATES and set(est.mu_scores_) == set(MU_CANDIDATES)
    # mu chosen by internal CV: the best candidate, ties to the learned kernel (smallest mu)
    best = max(est.mu_scores_.values())
    assert est.mu_ == min(m for m, a in est.mu_scores_.items() if a == best)
    # a numeric mu skips the search; inf is the base kernel (q = 1)
    base = bk.ConformalKernelClassifier(mu=float("inf"), random_state=0).fit(Xs, y)
    assert base.mu_scores_ == {} and np.allclose(base.conformal_factor(Xs), 1.0)
    with pytest.raises(ValueError, match="'mu' parameter of ConformalKernelClassifier must be"):
        bk.ConformalKernelClassifier(mu="best").fit(Xs, y)


def test_labrbf_in_pipeline_gridsearch_and_cross_val():
    X, y = _regression()
    est = bk.LABRBFRegressor(**LAB_FAST)
    assert {"alpha", "max_support"} <= set(est.get_params())
    pipe = make_pipeline(MinMaxScaler(), est)
    cv = KFold(2, shuffle=True, random_state=0)
    search = GridSearchCV(pipe, {"labrbfregressor__alpha": [1e-3, 1e-1]}, cv=cv).fit(X, y)
    assert search.best_score_ > 0.5
    scores = cross_val_score(clone(pipe), X, y, cv=cv)
    np.testing.assert_array_equal(scores, cross_val_score(clone(pipe), X, y, cv=cv))
    assert clone(est).get_params() == est.get_params()
    # the nested kernel settings are plain parameters too
    est.set_params(kernel_params=dict(batch_size=8))
    assert est.get_params()["kernel_params"] == {"batch_size": 8}
