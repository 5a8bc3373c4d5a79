r"""How easy is a model to tune? The :math:`P_f(\alpha)` curve and its area.

For a grid :math:`G` of hyper-parameters (the SVM's :math:`(C, \gamma)`) and a
cross-validated score :math:`f`, Czarnecki & Tabor (2014, section 5) define

.. math:: \hat P_f(\alpha) = \frac{\#\{g \in G : f(g) \ge \alpha\}}{\#G},

the probability that a grid point picked at random scores at least :math:`\alpha`, and
compare kernels by the area under :math:`\hat P_f` over :math:`\alpha \ge \alpha_{\min}`,
:math:`\alpha_{\min}` the worst score of all compared models (Table 6, Figure 3).

* :func:`grid_scores` evaluates any scikit-learn estimator on a grid with
  :class:`~sklearn.model_selection.GridSearchCV` (``refit=False``); it parallelizes through
  joblib, so ``with joblib.parallel_backend("dask"): grid_scores(..., n_jobs=-1)`` runs the
  grid on a Dask cluster.
* :func:`precomputed_grid_scores` is the fast path for SVMs whose kernel is
  :math:`K_\gamma = \exp(\ell - \gamma q)` with label-free, :math:`\gamma`-free factors
  (RBF, Mahalanobis RBF, :math:`C_k\mathrm{RBF}` built on all inputs): the factors are
  computed once and every :math:`\gamma` reuses them (the γ-conversion of
  Czarnecki & Tabor 2014, section 4).
* :func:`pf_curve`, :func:`pf_auc`, :func:`pf_table` and :func:`window_wins` compute the
  paper's measures from the scores.
"""

from __future__ import annotations

import numbers
import warnings

import numpy as np
import pandas as pd
from joblib import Parallel, delayed
from sklearn.base import clone
from sklearn.exceptions import FitFailedWarning
from sklearn.metrics import check_scoring
from sklearn.model_selection import GridSearchCV, check_cv
from sklearn.svm import SVC

__all__ = [
    "grid_scores",
    "precomputed_grid_scores",
    "score_table",
    "pf_curve",
    "pf_auc",
    "pf_table",
    "window_wins",
]


def grid_scores(
    estimator, X, y, param_grid: dict, *, cv=10, scoring="accuracy", n_jobs=None, error_score=np.nan
) -> pd.DataFrame:
    """Cross-validated score of ``estimator`` at every point of ``param_grid``.

    A thin layer over :class:`~sklearn.model_selection.GridSearchCV` with ``refit=False``.

    Parameters
    ----------
    estimator : any scikit-learn estimator (e.g. ``CkRBFClassifier``, ``SVC``).
    X, y : data.
    param_grid : dict of parameter name to list of values (e.g. ``{"C": [...], "gamma": [...]}``).
    cv : int or splitter, default 10 (stratified 10-fold for classifiers, as in the paper).
    scoring : scikit-learn scorer name or callable, default ``"accuracy"``.
    n_jobs : joblib workers; the active joblib backend (loky, threading, dask) is used.
    error_score : value recorded when a fit fails (``"raise"`` to raise).

    Returns
    -------
    pandas.DataFrame with one row per grid point: the parameters, ``score`` (mean over
    folds), ``std`` and ``split<i>`` (every fold's score).
    """
    if not isinstance(param_grid, dict) or not param_grid:
        raise ValueError("param_grid must be a non-empty dict of parameter lists")
    search = GridSearchCV(
        clone(estimator),
        param_grid,
        cv=cv,
        scoring=scoring,
        n_jobs=n_jobs,
        refit=False,
        error_score=error_score,
    )
    search.fit(X, y)
    res = search.cv_results_
    df = pd.DataFrame(list(res["params"]))
    df["score"] = res["mean_test_score"]
    df["std"] = res["std_test_score"]
    n_splits = search.n_splits_
    for i in range(n_splits):
        df[f"split{i}"] = res[f"split{i}_test_score"]
    return df


def _gram(log_factor, sq, gamma):
    """``exp(log_factor - gamma * sq)``; a ``ValueError`` naming gamma where it overflows."""
    with np.errstate(over="raise"):
        try:
            return np.exp(log_factor - gamma * sq)
        except FloatingPointError:
            raise ValueError(
                f"the Gram matrix exp(l - gamma q) overflows float64 at gamma={gamma:g}"
            ) from None


def _fit_score(ltr, qtr, lte, qte, ytr, yte, C, gamma, scorer, svc_params, error_score):
    try:
        svc = SVC(kernel="precomputed", C=C, **svc_params).fit(_gram(ltr, qtr, gamma), ytr)
        return scorer(svc, _gram(lte, qte, gamma), yte)
    except (ValueError, FloatingPointError) as e:
        if isinstance(error_score, str) and error_score == "raise":
            raise
        warnings.warn(
            f"SVC fit failed at C={C:g}, gamma={gamma:g}: {e}; scored {error_score}",
            FitFailedWarning,
            stacklevel=2,
        )
        return error_score


def precomputed_grid_scores(
    factors,
    y,
    Cs,
    gammas,
    *,
    cv=10,
    scoring="accuracy",
    n_jobs=None,
    error_score=np.nan,
    **svc_params,
) -> pd.DataFrame:
    r"""Grid scores of ``SVC(kernel="precomputed")`` on :math:`K_\gamma = \exp(\ell - \gamma q)`.

    The :math:`\gamma`-free factors are computed once (per fold, or once for all inputs)
    and every grid point forms its Gram matrices from them (Czarnecki & Tabor 2014, section 4: only
    the exponent depends on :math:`\gamma`). Grid points of one fold run in parallel through
    joblib (any backend, including ``"dask"``).

    Parameters
    ----------
    factors : ``(ell, q)`` or callable
        Either two ``(n, n)`` arrays computed on all inputs without labels — e.g.
        ``fit_kernel(CkRBF(...), X).factors(X)`` (the paper's protocol, which clusters all the
        data), or ``(0, squared distances)`` for the RBF :math:`\exp(-\gamma\|x-y\|^2)` — or a
        callable ``factors(train_idx, test_idx) -> (ell_train, q_train, ell_test, q_test)``
        (train x train and test x train blocks) that may fit on the training fold only.
    y : (n,) labels.
    Cs, gammas : grid values.
    cv : int or splitter, default 10 (stratified); the same splits serve every grid point.
    scoring : scikit-learn scorer name or callable.
    n_jobs : joblib workers.
    error_score : score of a fit that fails (e.g. a Gram matrix whose entries overflow), with
        a ``FitFailedWarning``; ``"raise"`` re-raises.
    **svc_params : other :class:`~sklearn.svm.SVC` parameters (``tol``, ``max_iter``...).

    Returns
    -------
    pandas.DataFrame like :func:`grid_scores` (columns ``C``, ``gamma``, ``score``, ``std``,
    ``split<i>``).
    """
    y = np.asarray(y)
    n = len(y)
    if not callable(factors):
        ell, q = (np.asarray(f, dtype=float) for f in factors)
        if q.shape != (n, n):
            raise ValueError(
                f"factors must be (n, n) arrays with n = len(y) = {n}, got q of shape {q.shape}"
            )
        ell = np.broadcast_to(ell, q.shape)
    for name, vals in (("Cs", Cs), ("gammas", gammas)):
        if len(vals) == 0 or not all(isinstance(v, numbers.Real) and v > 0 for v in vals):
            raise ValueError(f"{name} must be a non-empty list of positive numbers, got {vals!r}")
    cv = check_cv(cv, y, classifier=True)
    scorer = check_scoring(SVC(), scoring=scoring)
    grid = [(float(C), float(g)) for C in Cs for g in gammas]
    splits = list(cv.split(np.zeros((n, 1)), y))
    scores = np.empty((len(grid), len(splits)))
    for f, (tr, te) in enumerate(splits):
        if callable(factors):
            ltr, qtr, lte, qte = (np.asarray(a, dtype=float) for a in factors(tr, te))
        else:
            ltr, qtr = ell[np.ix_(tr, tr)], q[np.ix_(tr, tr)]
            lte, qte = ell[np.ix_(te, tr)], q[np.ix_(te, tr)]
        scores[:, f] = Parallel(n_jobs=n_jobs)(
            delayed(_fit_score)(
                ltr, qtr, lte, qte, y[tr], y[te], C, g, scorer, svc_params, error_score
            )
            for C, g in grid
        )
    return score_table(grid, scores)


def score_table(grid, scores) -> pd.DataFrame:
    """Return the table of a grid search over ``(C, gamma)`` from its fold scores.

    Parameters
    ----------
    grid : sequence of (C, gamma)
        The grid points, in the order of the rows of ``scores``.
    scores : array, shape (grid points, folds)
        Each point's score on each fold.

    Returns
    -------
    pandas.DataFrame
        One row per grid point: ``C``, ``gamma``, ``score`` (mean over folds), ``std`` and
        ``split<i>`` (every fold's score): the layout of :func:`grid_scores`.
    """
    scores = np.asarray(scores, dtype=float)
    df = pd.DataFrame(list(grid), columns=["C", "gamma"])
    df["score"] = scores.mean(axis=1)
    df["std"] = scores.std(axis=1)
    for i in range(scores.shape[1]):
        df[f"split{i}"] = scores[:, i]
    return df


def _scores(scores) -> np.ndarray:
    s = scores["score"] if isinstance(scores, pd.DataFrame) else scores
    s = np.asarray(s, dtype=float).ravel()
    if s.size == 0:
        raise ValueError("scores is empty")
    if np.isnan(s).all():
        raise ValueError("every score is NaN (every fit failed)")
    return s


def pf_curve(scores, alphas=None) -> tuple[np.ndarray, np.ndarray]:
    r""":math:`\hat P_f(\alpha)`, the fraction of grid points scoring at least :math:`\alpha`.

    Failed fits (NaN scores) count in the grid and never reach :math:`\alpha`.

    Parameters
    ----------
    scores : the grid's scores (array or a :func:`grid_scores` DataFrame).
    alphas : thresholds; default: the sorted distinct scores, where the step function jumps.

    Returns
    -------
    alphas, P : arrays of equal length.
    """
    s = _scores(scores)
    alphas = np.unique(s[~np.isnan(s)]) if alphas is None else np.asarray(alphas, dtype=float)
    return alphas, (s[None, :] >= alphas[:, None]).mean(axis=1)


def pf_auc(
    scores, alpha_min: float | None = None, alpha_max: float = 1.0, normalize: bool = False
) -> float:
    r"""Area under :math:`\hat P_f(\alpha)` for :math:`\alpha \in [\alpha_{\min}, \alpha_{\max}]`.

    Exact for the step function: :math:`\int_{a}^{b} \hat P_f(\alpha)\,d\alpha =
    \overline{\min(\max(f(g), a), b) - a}` over the grid. A failed fit (NaN score) counts
    as a grid point below every :math:`\alpha`. Czarnecki & Tabor (2014, Table 6) integrate from
    the worst score of all compared models (below it every curve is 1); use
    :func:`pf_table` to share that bound. ``normalize`` divides by :math:`b - a` (the
    paper's text does not say whether its AUCs are normalized; this package reports the
    plain area by default).
    """
    s = _scores(scores)
    a = np.nanmin(s) if alpha_min is None else float(alpha_min)
    b = float(alpha_max)
    if not b > a:
        raise ValueError(f"alpha_max ({b}) must exceed alpha_min ({a})")
    # a failed fit (NaN) reaches no alpha: it stays in the denominator and adds no area
    area = float(np.mean(np.nan_to_num(np.clip(s, a, b) - a, nan=0.0)))
    return area / (b - a) if normalize else area


def pf_table(
    named_scores: dict,
    alpha_min: float | None = None,
    alpha_max: float = 1.0,
    normalize: bool = False,
) -> pd.DataFrame:
    r"""Best score and :math:`P_f` AUC of several models over a common :math:`\alpha` range.

    ``alpha_min`` defaults to the worst score of all models, as in Czarnecki & Tabor
    (2014, Table 6). Returns a DataFrame indexed by model name with ``best`` and ``pf_auc``.
    """
    s = {k: _scores(v) for k, v in named_scores.items()}
    if not s:
        raise ValueError("named_scores is empty")
    a = min(np.nanmin(v) for v in s.values()) if alpha_min is None else float(alpha_min)
    return (
        pd.DataFrame(
            {
                "best": {k: np.nanmax(v) for k, v in s.items()},
                "failed": {k: int(np.isnan(v).sum()) for k, v in s.items()},
                "pf_auc": {k: pf_auc(v, a, alpha_max, normalize) for k, v in s.items()},
            }
        )
        .rename_axis("model")
        .assign(alpha_min=a)
    )


def window_wins(
    scores_a: pd.DataFrame, scores_b: pd.DataFrame, *, C: float = 1.0, window: int = 3
) -> float:
    r"""Fraction of :math:`\gamma`-windows where model A's best score beats model B's.

    With ``C`` fixed, every run of ``window`` consecutive grid values of :math:`\gamma`
    (Czarnecki & Tabor 2014, Table 5: :math:`\{10^i, 10^{i+1}, 10^{i+2}\}`) is a small
    search; A wins a window when its best score there is strictly higher than B's.
    """

    def best_by_gamma(df):
        sub = df[np.isclose(df["C"], C)]
        if sub.empty:
            raise ValueError(f"C={C} is not on the grid")
        return sub.groupby("gamma")["score"].max().sort_index()

    a, b = best_by_gamma(scores_a), best_by_gamma(scores_b)
    if not np.allclose(a.index, b.index):
        raise ValueError("the two grids have different gamma values")
    if len(a) < window:
        raise ValueError(f"the grid has {len(a)} gamma values, fewer than window={window}")
    wins = [
        a.iloc[i : i + window].max() > b.iloc[i : i + window].max()
        for i in range(len(a) - window + 1)
    ]
    return float(np.mean(wins))
