"""The report of a classical (non-Bayesian) kernel estimator, and its Bayesian twin.

The paper estimators (SVM-VSK, KRN-VSK, CkRBF and mkRBF SVMs, Xiong's conformal-kernel SVM,
:class:`~bayeskern.KernelSVC`) are fitted by optimization: no posterior, no ``idata_``. Their
report says so, names the Bayesian estimator carrying the same kernel (:func:`bayesian_twin`),
and shows what such an estimator has: its parameters, what it learned, cross-validated metrics
(scikit-learn's ``cross_validate``, when the training data are given), held-out metrics, and
calibration where ``predict_proba`` allows (out-of-fold probabilities from
``cross_val_predict``, or the held-out rows).
"""

from __future__ import annotations

import html

import numpy as np
from sklearn import metrics as skm
from sklearn.base import clone, is_classifier
from sklearn.model_selection import (
    KFold,
    StratifiedKFold,
    cross_val_predict,
    cross_validate,
)

from bayeskern import diagnostics, plots
from bayeskern.kernels.base import Kernel
from bayeskern.plots import panels

__all__ = ["TWINS", "bayesian_twin", "classical_parts"]

#: class name -> the Bayesian estimator carrying the same kernel (an expression in ``bk``)
TWINS = {
    "VSKClassifier": "bk.GPClassifier(kernel=bk.kernels.VSK(bk.kernels.RBF()))",
    "VSKRegressor": "bk.GPRegressor(kernel=bk.kernels.VSK(bk.kernels.RBF(), scaling='linear'))",
    "CkRBFClassifier": "bk.GPClassifier(kernel=bk.kernels.CkRBF(n_clusters=2))",
    "MkRBFClassifier": "bk.GPClassifier(kernel=bk.kernels.CkRBF(n_clusters=2))",
    "ConformalKernelClassifier": "bk.GPClassifier(kernel=bk.kernels.Conformal())",
}
_NOTES = {
    "MkRBFClassifier": "mkRBF's per-cluster kernel is the Mahalanobis RBF "
    "(bk.GPClassifier(kernel=bk.kernels.MahalanobisRBF()) on one cluster's "
    "rows); the cluster-based kernel in one Bayesian model is CkRBF.",
}
_CV_FOLDS = 5


def _e(s) -> str:
    return html.escape(str(s), quote=True)


def bayesian_twin(est) -> str:
    """Return the Bayesian estimator carrying ``est``'s kernel, as a ``bk.`` expression.

    ``KernelSVC(kernel=k)`` gives ``bk.GPClassifier(kernel=k)``; the method estimators the
    entry of :data:`TWINS` (the kernel at its default settings: pass the same arguments as
    to the classical estimator where they exist).
    """
    name = type(est).__name__
    if name in TWINS:
        return TWINS[name]
    kernel = getattr(est, "kernel", None)
    if isinstance(kernel, Kernel):
        cls = "GPClassifier" if is_classifier(est) else "GPRegressor"
        return f"bk.{cls}(kernel=k), k = this estimator's kernel {kernel!r}"
    return "bk.GPClassifier(kernel=...)" if is_classifier(est) else "bk.GPRegressor(kernel=...)"


def _describe(v) -> str:
    """Return a short text for a fitted attribute."""
    if isinstance(v, (bool, int, float, str, np.integer, np.floating, Kernel)):
        return f"{v:.4g}" if isinstance(v, (float, np.floating)) else str(v)
    if isinstance(v, np.ndarray):
        if v.size <= 6 and v.ndim <= 1:
            return np.array2string(v, precision=4)
        return f"array of shape {v.shape}"
    if isinstance(v, dict):
        return "{" + ", ".join(f"{k}: {_describe(x)}" for k, x in list(v.items())[:6]) + "}"
    if isinstance(v, (list, tuple)):
        return f"{len(v)} items"
    if hasattr(v, "get_params"):  # a fitted scikit-learn estimator
        n_sv = getattr(v, "n_support_", None)
        return type(v).__name__ + (
            "" if n_sv is None else f" ({int(np.sum(n_sv))} support vectors)"
        )
    return type(v).__name__


def _learned_rows(est) -> list[tuple[str, str]]:
    rows = []
    for k in sorted(vars(est)):
        if k.endswith("_") and not k.startswith("_"):
            rows.append((k, _describe(vars(est)[k])))
    return rows


def _scores(est, X):
    """Continuous scores for ROC AUC: P(classes_[1]) or the decision function, or ``None``."""
    if hasattr(est, "predict_proba"):
        return est.predict_proba(X)[:, 1]
    if hasattr(est, "decision_function"):
        return est.decision_function(X)
    return None


def _scoring(est, binary: bool) -> dict:
    if not is_classifier(est):
        return {"R²": "r2", "RMSE": "neg_root_mean_squared_error", "MAE": "neg_mean_absolute_error"}
    out = {"accuracy": "accuracy", "weighted f1": "f1_weighted"}
    if binary and (hasattr(est, "predict_proba") or hasattr(est, "decision_function")):
        out["ROC AUC"] = "roc_auc"
    return out


def _cv_parts(est, X, y, table) -> list[str]:
    clf = is_classifier(est)
    binary = clf and len(np.unique(y)) == 2
    if clf:
        folds = min(_CV_FOLDS, int(np.min(np.unique(y, return_counts=True)[1])))
        cv = StratifiedKFold(folds, shuffle=True, random_state=0) if folds >= 2 else None
    else:
        folds = min(_CV_FOLDS, len(y))
        cv = KFold(folds, shuffle=True, random_state=0) if folds >= 2 else None
    if cv is None:
        return ["<p class='muted'>Too few training rows per class for cross-validation.</p>"]
    scoring = _scoring(est, binary)
    res = cross_validate(clone(est), X, y, cv=cv, scoring=scoring)
    rows = []
    for label in scoring:
        s = np.asarray(res[f"test_{label}"], dtype=float)
        s = -s if scoring[label].startswith("neg_") else s
        rows.append((label, float(s.mean()), float(s.std())))
    parts = [
        f"<h2>Cross-validated metrics ({folds}-fold, computed by this report)</h2>",
        table(rows, ["metric", "mean over folds", "sd over folds"]),
    ]
    if binary and hasattr(est, "predict_proba"):
        p = cross_val_predict(clone(est), X, y, cv=cv, method="predict_proba")[:, 1]
        y01 = (np.asarray(y) == np.unique(y)[1]).astype(int)
        parts += _calibration_parts(y01, p, "out-of-fold probabilities", table)
    return parts


def _calibration_parts(y01, p, where, table) -> list[str]:
    ax = plots.plot_reliability(y01, p)
    ax.set_title(f"reliability ({where})", fontsize=9)
    m = diagnostics.classification_metrics(y01, p)
    return [
        f"<h3>Calibration of the {_e(where)}</h3>",
        table(list(m.items()), ["metric", "value"]),
        ax,
    ]


def _held_out_parts(est, X, y, table) -> list:
    pred = est.predict(X)
    if not is_classifier(est):
        y = np.asarray(y, dtype=float)
        rows = [
            ("R²", skm.r2_score(y, pred)),
            ("RMSE", float(np.sqrt(skm.mean_squared_error(y, pred)))),
            ("MAE", skm.mean_absolute_error(y, pred)),
        ]
        return ["<h2>Held-out metrics</h2>", table(rows, ["metric", "value"])]
    rows = [
        ("accuracy", skm.accuracy_score(y, pred)),
        ("weighted f1", skm.f1_score(y, pred, average="weighted")),
    ]
    parts = ["<h2>Held-out metrics</h2>"]
    binary = len(est.classes_) == 2
    s = _scores(est, X) if binary else None
    if s is not None:
        y01 = (np.asarray(y) == est.classes_[1]).astype(int)
        if len(np.unique(y01)) == 2:
            rows.append(("ROC AUC", skm.roc_auc_score(y01, s)))
            parts.append(plots.plot_roc(y01, s))
    parts.insert(1, table(rows, ["metric", "value"]))
    if binary and hasattr(est, "predict_proba"):
        parts += _calibration_parts(y01, s, "held-out probabilities", table)
    elif is_classifier(est):
        parts.append(
            "<p class='muted'>No calibration: this estimator gives decision values, "
            "not probabilities (its Bayesian twin gives posterior predictive "
            "probabilities).</p>"
        )
    return parts


def classical_parts(
    est, *, X_train=None, y_train=None, X_test=None, y_test=None, table=None
) -> list:
    """Parts of the report of a classical estimator: HTML strings and figures (axes).

    Parameters
    ----------
    est : fitted scikit-learn estimator without ``idata_``
    X_train, y_train : optional
        The training data, for cross-validated metrics (and the kernel's panels).
    X_test, y_test : optional
        Held-out data.
    table : callable
        ``table(rows, header)`` -> HTML, the report's table renderer.

    Returns
    -------
    list of str or matplotlib Axes/Figure (the caller embeds figures)
    """
    name = type(est).__name__
    twin = bayesian_twin(est)
    parts = [
        f"<div class='warn'><b>Not a Bayesian fit.</b> {_e(name)} is fitted by "
        "optimization as its paper does: it has no posterior, so this report has no "
        "predictive intervals, no convergence diagnostics and no PSIS-LOO. The Bayesian "
        f"estimator carrying the same kernel is <code>{_e(twin)}</code>: it samples the "
        "kernel's hyper-parameters and gives a posterior, predictive intervals and the "
        f"full uncertainty report. {_e(_NOTES.get(name, ''))}</div>",
        "<h2>Parameters</h2>",
        table(
            [(k, repr(v)[:200]) for k, v in est.get_params(deep=False).items()],
            ["parameter", "value"],
        ),
        "<h2>What it learned</h2>",
        table(_learned_rows(est), ["fitted attribute", "value"]),
    ]
    if X_train is not None and y_train is not None:
        parts += _cv_parts(est, X_train, y_train, table)
    else:
        parts.append(
            "<p class='muted'>No training data given: pass X_train and y_train for "
            "cross-validated metrics.</p>"
        )
    if X_test is not None and y_test is not None:
        parts += _held_out_parts(est, X_test, y_test, table)
    kernel = getattr(est, "kernel_", None)
    if isinstance(kernel, Kernel) and X_train is not None:
        for heading, fig, *caption in panels.kernel_panels(
            kernel, np.asarray(X_train, float), np.asarray(y_train)
        ):
            parts += [f"<h2>{_e(heading)}</h2>", fig] + (
                [f"<p class='caption'>{_e(caption[0])}</p>"] if caption else []
            )
    for heading, fig, *caption in panels.estimator_panels(est):
        parts += [f"<h2>{_e(heading)}</h2>", fig] + (
            [f"<p class='caption'>{_e(caption[0])}</p>"] if caption else []
        )
    return parts
