"""Calibration and accuracy of a posterior predictive distribution on held-out data.

Regression: RMSE, MAE, R², NLPD, central-interval coverage and width, and the continuous
ranked probability score (Gneiting & Raftery 2007). Classification: accuracy, AUC, Brier
score, log-loss and expected calibration error (Naeini et al. 2015), binary and multi-class.
Plain NumPy and scikit-learn: :mod:`bayeskern.diagnostics` re-exports them next to the
convergence checks and model comparison.
"""

from __future__ import annotations

import numpy as np
from sklearn import metrics as skm

__all__ = [
    "crps_ensemble",
    "regression_metrics",
    "expected_calibration_error",
    "multiclass_metrics",
    "classification_metrics",
]


def crps_ensemble(y, samples) -> np.ndarray:
    """Continuous ranked probability score from predictive draws ``(m, n)``.

    :math:`\\mathrm{CRPS} = E|X - y| - \\tfrac12 E|X - X'|`, computed in
    :math:`O(m \\log m)` per point with sorted draws (Gneiting & Raftery 2007).
    """
    x = np.sort(np.asarray(samples, dtype=float), axis=0)
    m = x.shape[0]
    y = np.asarray(y, dtype=float)
    term1 = np.abs(x - y).mean(axis=0)
    w = (2 * np.arange(1, m + 1) - m - 1)[:, None]
    term2 = (w * x).sum(axis=0) / m**2
    return term1 - term2


def regression_metrics(y, predictive, *, seed: int = 0, n_crps_draws: int = 2000) -> dict:
    """Calibration and accuracy of a predictive distribution on held-out ``y``.

    ``predictive`` is a :class:`bayeskern.predictive.MixturePredictive`. Returns RMSE, MAE,
    R², NLPD (mean negative log predictive density), coverage of the central 50/90/95 %
    intervals and their mean widths, and CRPS (from ``n_crps_draws`` predictive draws with a
    fixed ``seed``).
    """
    y = np.asarray(y, dtype=float)
    mean = predictive.mean()
    out = {
        "rmse": float(np.sqrt(np.mean((y - mean) ** 2))),
        "mae": float(np.mean(np.abs(y - mean))),
        "r2": float(skm.r2_score(y, mean)) if len(y) > 1 else float("nan"),
        "nlpd": float(-np.mean(predictive.logpdf(y))),
    }
    for p in (0.5, 0.9, 0.95):
        lo, hi = predictive.interval(p)
        out[f"coverage_{int(p * 100)}"] = float(np.mean((y >= lo) & (y <= hi)))
        out[f"width_{int(p * 100)}"] = float(np.mean(hi - lo))
    draws = predictive.sample(n_crps_draws, np.random.default_rng(seed))
    out["crps"] = float(np.mean(crps_ensemble(y, draws)))
    return out


def expected_calibration_error(y, p, n_bins: int = 10) -> float:
    """ECE with equal-width bins: :math:`\\sum_b \\frac{n_b}{n}|\\bar y_b - \\bar p_b|`."""
    y = np.asarray(y, dtype=float)
    p = np.asarray(p, dtype=float)
    bins = np.minimum((p * n_bins).astype(int), n_bins - 1)
    ece = 0.0
    for b in range(n_bins):
        m = bins == b
        if m.any():
            ece += m.mean() * abs(y[m].mean() - p[m].mean())
    return float(ece)


def multiclass_metrics(y, P, *, n_bins: int = 10) -> dict:
    r"""Accuracy, one-vs-rest macro ROC AUC, Brier score, log-loss and top-label ECE.

    ``y`` holds class codes ``0 .. C-1`` and ``P`` the ``(n, C)`` class probabilities. The
    Brier score is the multi-class one of Brier (1950),
    :math:`\frac1n\sum_i\sum_c (P_{ic} - [y_i = c])^2`; the ECE is that of the top label
    (confidence :math:`\max_c P_{ic}` against the accuracy of :math:`\arg\max_c P_{ic}`;
    Guo et al. 2017).
    """
    y = np.asarray(y).astype(int)
    P = np.asarray(P, dtype=float)
    labels = np.arange(P.shape[1])
    onehot = (y[:, None] == labels[None, :]).astype(float)
    try:
        auc = float(skm.roc_auc_score(y, P, multi_class="ovr", labels=labels))
    except ValueError:  # a class absent from y
        auc = float("nan")
    return {
        "accuracy": float(np.mean(P.argmax(axis=1) == y)),
        "auc_ovr_macro": auc,
        "brier": float(np.mean(np.sum((P - onehot) ** 2, axis=1))),
        "log_loss": float(skm.log_loss(y, np.clip(P, 1e-12, 1.0), labels=labels)),
        "ece_top_label": expected_calibration_error(P.argmax(axis=1) == y, P.max(axis=1), n_bins),
    }


def classification_metrics(y, p, *, n_bins: int = 10) -> dict:
    """Accuracy, ROC AUC, Brier score, log-loss and ECE of probabilities ``p = P(y=1)``."""
    y = np.asarray(y).astype(int)
    p = np.clip(np.asarray(p, dtype=float), 1e-12, 1 - 1e-12)
    both = len(np.unique(y)) == 2
    return {
        "accuracy": float(np.mean((p >= 0.5) == y)),
        "auc": float(skm.roc_auc_score(y, p)) if both else float("nan"),
        "brier": float(np.mean((p - y) ** 2)),
        "log_loss": float(skm.log_loss(y, p, labels=[0, 1])),
        "ece": expected_calibration_error(y, p, n_bins),
    }
