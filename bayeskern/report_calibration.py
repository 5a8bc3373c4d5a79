"""Calibration sections of the uncertainty report: PSIS-LOO without a hold-out, posterior bands.

* :func:`loo_section` — when no rows were held out, the calibration of the leave-one-out
  predictive (:mod:`bayeskern.loo_calibration`) instead of the in-sample fit: LOO-PIT and
  LOO interval coverage (regression), a LOO reliability diagram with posterior bands and
  LOO metrics (binary classification), with the Pareto-k warning.
* :func:`reliability_band_section` — for a binary classifier on held-out rows, the
  reliability diagram with the 90 % posterior interval of each bin's mean probability and the
  90 % posterior-predictive band of its observed frequency, from the classifier's per-draw
  probabilities.
"""

from __future__ import annotations

import html

import numpy as np

from bayeskern.estimators.gabasr_classifier import GaBaSRClassifier
from bayeskern.loo_calibration import PARETO_K_MAX, LOOCalibration, loo_calibration
from bayeskern.plots.calibration import plot_loo_pit, plot_reliability_band

__all__ = ["LOO_HEADING", "try_loo", "loo_section", "proba_draws", "reliability_band_section"]

#: the heading that says plainly where the calibration comes from
LOO_HEADING = "Calibration: leave-one-out (PSIS-LOO), no rows were held out"


def _e(s) -> str:
    return html.escape(str(s), quote=True)


def try_loo(est) -> tuple[LOOCalibration | None, str]:
    """Return ``(loo_calibration(est), "")``, or ``(None, why not)`` when it does not apply."""
    try:
        return loo_calibration(est), ""
    except (ValueError, NotImplementedError) as err:
        return None, str(err)


def _k_warning(cal: LOOCalibration) -> str:
    if not cal.n_bad_k:
        return (
            f"<div class='ok'>Pareto k ≤ {PARETO_K_MAX} for every observation: the "
            "PSIS-LOO estimates are reliable.</div>"
        )
    return (
        f"<div class='warn'>{cal.n_bad_k} of {len(cal.pareto_k)} observations have "
        f"Pareto k > {PARETO_K_MAX}: PSIS-LOO is unreliable for them (their left-out "
        "posterior differs too much from the full one); hold rows out (command line: "
        "--holdout 0.2) or use K-fold cross-validation for a dependable check.</div>"
    )


def loo_section(cal: LOOCalibration, fig_html, table_html) -> list[str]:
    """HTML parts of the LOO calibration section.

    ``fig_html(figure_or_axes, alt)`` and ``table_html(rows, header)`` are the report's
    renderers.
    """
    parts = [
        f"<h2>{_e(LOO_HEADING)}</h2>",
        "<p>No rows were held out, so calibration is judged on the leave-one-out "
        "predictive of each training row: the posterior re-weighted by Pareto-smoothed "
        "importance sampling to leave that row out (Vehtari, Gelman &amp; Gabry 2017), "
        "not the in-sample fit, which would look better calibrated than it is.</p>",
        _k_warning(cal),
        table_html([(k, v) for k, v in cal.metrics.items()], ["LOO metric", "value"]),
    ]
    if cal.kind == "regression":
        parts.append(fig_html(plot_loo_pit(cal.pit), "LOO-PIT histogram and ECDF"))
        parts.append(
            "<p class='muted'>LOO-PIT u<sub>i</sub> = Σ<sub>s</sub> w<sub>is</sub> "
            "F(y<sub>i</sub> | y<sub>−i</sub>, θ<sub>s</sub>): uniform when the "
            "leave-one-out predictive is calibrated; a U shape means intervals too "
            "narrow, a hump too wide. Coverage: the share of training rows inside "
            "the central 50/90/95 % interval of their leave-one-out predictive.</p>"
        )
    else:
        ax = plot_reliability_band(cal.y, cal.proba_draws, log_weights=cal.log_weights)
        ax.set_title("reliability (leave-one-out)", fontsize=9)
        parts.append(fig_html(ax, "LOO reliability diagram with posterior bands"))
        parts.append(
            "<p class='muted'>Points: observed frequency against the mean "
            "leave-one-out probability per bin (counts as labels); bars: 90 % "
            "interval of the bin's mean probability across the posterior draws, each "
            "row's draws re-weighted to leave it out.</p>"
        )
    return parts


def proba_draws(est, X) -> tuple[np.ndarray | None, str]:
    """Return the per-draw :math:`P(y = 1)` ``(S, n)`` of a binary Bayesian classifier at ``X``.

    From ``est._proba_draws`` (``GPClassifier`` on data units, ``GaBaSRClassifier`` on its
    scaled inputs), checked against ``predict_proba``: their draw mean must equal it. Returns
    ``(None, reason)`` when the estimator has no per-draw probabilities, more than two classes,
    or the check fails.
    """
    fn = getattr(est, "_proba_draws", None)
    if fn is None:
        return None, f"{type(est).__name__} gives no per-draw probabilities"
    if len(getattr(est, "classes_", [])) != 2:
        return None, "the posterior band is drawn for binary classification only"
    # GaBaSRClassifier's per-draw probabilities take its scaled inputs, GPClassifier's the data
    scaled = isinstance(est, GaBaSRClassifier)
    P = np.asarray(fn(est.x_scaler_.transform(np.asarray(X, dtype=float)) if scaled else X))
    p = est.predict_proba(X)[:, 1]
    if P.ndim != 2 or P.shape[1] != len(X) or not np.allclose(P.mean(axis=0), p, atol=1e-6):
        return None, "its per-draw probabilities do not average to predict_proba"
    return P, ""


def reliability_band_section(est, X, y01, fig_html) -> list[str]:
    """HTML parts: the held-out reliability diagram with its 90 % bands (binary).

    The posterior band of each bin's mean probability and the posterior-predictive band of its
    observed frequency (:func:`bayeskern.plots.calibration.reliability_bands`).
    """
    P, why = proba_draws(est, X)
    if P is None:
        return [f"<p class='muted'>No posterior band on the reliability diagram: {_e(why)}.</p>"]
    ax = plot_reliability_band(y01, P)
    ax.set_title("reliability with posterior band (held-out data)", fontsize=9)
    return [
        fig_html(ax, "reliability diagram with posterior bands"),
        "<p class='muted'>Horizontal bars: 90 % interval, across posterior draws, of the "
        "bin's mean predicted probability (bins by the posterior-mean probability). Grey "
        "vertical bars: 90 % posterior-predictive band of the bin's observed frequency "
        "(outcomes replicated from each draw's probabilities); a calibrated model puts "
        "about 9 in 10 observed frequencies inside them.</p>",
    ]
