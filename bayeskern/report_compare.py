"""Several regression models fitted to the same data, side by side, in one HTML report.

Held-out metrics, PSIS-LOO differences, forecasts with their intervals, convergence and fit
times, and for an exact-model GaBaSR fit its learned spectral density with the components
found. :func:`compare_report` writes it; :func:`held_out_predictions` gives the predictions it
shows, for reuse.
"""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path
from typing import NamedTuple

import numpy as np

from bayeskern import diagnostics, plots
from bayeskern.estimators.base import as_fitted_input
from bayeskern.models.gabasr_spectrum import mixture_components
from bayeskern.plots import panels
from bayeskern.report_html import _e, _fig_html, _page, _table, _version
from bayeskern.runs import atomic_write

__all__ = ["compare_report", "render_compare_report", "held_out_predictions", "HeldOut"]

#: held-out metrics of :func:`bayeskern.diagnostics.regression_metrics`, in table order
_METRICS = [
    ("rmse", "RMSE"),
    ("mae", "MAE"),
    ("r2", "R²"),
    ("nlpd", "NLPD (mean −log predictive density)"),
    ("crps", "CRPS"),
    ("coverage_50", "coverage of the 50 % interval"),
    ("coverage_90", "coverage of the 90 % interval"),
    ("coverage_95", "coverage of the 95 % interval"),
    ("width_95", "mean width of the 95 % interval"),
]


def _as_float(name: str, v) -> np.ndarray | None:
    """``v`` as a float array (``None`` stays ``None``); a ``ValueError`` naming ``name``."""
    if v is None:
        return None
    try:
        return np.asarray(v, dtype=float)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be numeric, got {type(v).__name__}") from None


def _check_compare(estimators, X_test, y_test, fit_times):
    """Return ``(X_test, y_test, fit_times)`` checked; a ``ValueError`` names a bad argument."""
    if not isinstance(estimators, dict) or not estimators:
        raise ValueError(
            "estimators must be a non-empty dict of name -> fitted regressor, "
            f"got {type(estimators).__name__}"
        )
    for name, est in estimators.items():
        if not isinstance(name, str) or not name:
            raise ValueError(f"estimators: names must be non-empty strings, got {name!r}")
        if not hasattr(est, "idata_") or not hasattr(est, "predictive"):
            raise ValueError(
                f"estimators[{name!r}] must be a fitted bayeskern regressor "
                f"(idata_ and predictive), got {type(est).__name__}"
            )
    X = _as_float("X_test", X_test)
    if X is None or X.ndim != 2 or not np.all(np.isfinite(X)):
        raise ValueError(
            "X_test must be a finite 2-D array (rows × input columns), got "
            f"{None if X is None else X.shape}"
        )
    y = _as_float("y_test", y_test)
    if y is None or y.shape != (len(X),) or not np.all(np.isfinite(y)):
        raise ValueError(
            f"y_test must be a finite 1-D array with one value per row of X_test "
            f"({len(X)}), got {None if y is None else y.shape}"
        )
    for name, est in estimators.items():
        if est.n_features_in_ != X.shape[1]:
            raise ValueError(
                f"X_test has {X.shape[1]} columns but estimators[{name!r}] was "
                f"fitted on {est.n_features_in_}"
            )
    if fit_times is not None and not isinstance(fit_times, dict):
        raise ValueError(f"fit_times must be a dict of name -> seconds, got {fit_times!r}")
    times = dict(fit_times or {})
    bad = {
        k: v
        for k, v in times.items()
        if k not in estimators
        or _as_float("fit_times", v).shape != ()
        or not 0 <= float(v) < np.inf
    }
    if bad:
        raise ValueError(f"fit_times must map names of estimators to seconds >= 0, got {bad}")
    return X, y, times


def _interval(q, fmt: str = "{:.4g}") -> str:
    """``median [lower, upper]`` of a ``(median, lower, upper)`` tuple."""
    m, lo, hi = q
    return f"{fmt.format(m)} [{fmt.format(lo)}, {fmt.format(hi)}]"


def _sampler(post) -> str:
    a = post.attrs
    if "num_chains" not in a:
        return str(a.get("sampler", ""))
    return (
        f"{a.get('sampler', 'MCMC')}, {a['num_chains']} chains × ({a.get('num_warmup', '?')}"
        f" warm-up + {a.get('num_samples', '?')} draws)"
    )


def _compared_html(estimators, data_name, target_name, n_test) -> str:
    rows = []
    for name, est in estimators.items():
        what = getattr(est, "model_description_", None) or f"kernel {getattr(est, 'kernel_', '')}"
        post = est.idata_.posterior
        n = est.idata_.constant_data["X"].shape[0] if "constant_data" in est.idata_.groups() else ""
        rows.append(
            (name, type(est).__name__, what, _sampler(post), n, post.attrs.get("random_state", ""))
        )
    head = (
        f"<p>data: {_e(data_name or '(in memory)')}; target: {_e(target_name or 'y')}; "
        f"held-out rows: {n_test}</p>"
    )
    return head + _table(rows, ["model", "estimator", "what", "sampler", "training rows", "seed"])


def _metrics_html(metrics: dict) -> str:
    names = list(metrics)
    rows = [(label, *[metrics[n][key] for n in names]) for key, label in _METRICS]
    return (
        _table(rows, ["held-out metric", *names])
        + "<p class='muted'>RMSE, MAE, NLPD and CRPS: smaller is better. Coverage: the "
        "fraction of held-out points inside each model's central interval; close to the "
        "nominal 0.5 / 0.9 / 0.95 when the intervals are calibrated.</p>"
    )


class HeldOut(NamedTuple):
    """Held-out evaluation of one model (:func:`held_out_predictions`).

    Attributes
    ----------
    metrics : dict
        :func:`bayeskern.diagnostics.regression_metrics` on the held-out rows.
    grid : array, shape (m, 1), or None
        Inputs of the forecast figure (one input column only, else ``None``).
    forecast : MixturePredictive or None
        The predictive distribution at ``grid``.
    """

    metrics: dict
    grid: np.ndarray | None
    forecast: object | None


def _forecast_grid(X: np.ndarray) -> np.ndarray | None:
    """200 inputs over the held-out range and a quarter of it before (one column only)."""
    if X.shape[1] != 1:
        return None
    lo, hi = float(X.min()), float(X.max())
    return np.linspace(lo - 0.25 * (hi - lo), hi, 200)[:, None]


def _columns(pred, sl: slice):
    """Return the predictive distribution of the points ``sl`` (a mixture is pointwise)."""
    return dataclasses.replace(
        pred,
        loc=pred.loc[:, sl],
        scale=pred.scale[:, sl],
        df=None if pred.df is None else pred.df[:, sl],
    )


def held_out_predictions(estimators: dict, X_test, y_test) -> dict[str, HeldOut]:
    """Evaluate fitted regressors on held-out data, one predictive call per model.

    Each model's posterior predictive is computed once on the held-out rows and the forecast
    grid of :func:`render_compare_report` together (the cost of a call is mostly per
    posterior draw, not per point), then split.

    Parameters
    ----------
    estimators : dict
        Name -> fitted bayeskern regressor (``idata_``, ``predictive``).
    X_test : array, shape (n, d)
        Held-out inputs.
    y_test : array, shape (n,)
        Held-out targets.

    Returns
    -------
    dict
        Name -> :class:`HeldOut`; pass it to :func:`render_compare_report` as ``held_out``.
    """
    X, y, _ = _check_compare(estimators, X_test, y_test, None)
    grid = _forecast_grid(X)
    out = {}
    for name, est in estimators.items():
        both = X if grid is None else np.vstack([X, grid])
        pred = est.predictive(as_fitted_input(est, both))
        out[name] = HeldOut(
            diagnostics.regression_metrics(y, _columns(pred, slice(len(X)))),
            grid,
            None if grid is None else _columns(pred, slice(len(X), None)),
        )
    return out


def _forecast_html(estimators, held: dict, X, y, x_unit, target_name) -> str:
    grid = next(iter(held.values())).grid
    if grid is None:
        return "<p class='muted'>(forecast figure drawn for one input column only)</p>"
    preds = {name: h.forecast for name, h in held.items()}
    first = next(iter(estimators.values())).idata_
    Xtr = ytr = None
    if "constant_data" in first.groups():
        Xtr = np.asarray(first.constant_data["X"], dtype=float)[:, 0]
        keep = Xtr >= grid[0, 0]
        Xtr, ytr = Xtr[keep], np.asarray(first.observed_data["y"], dtype=float)[keep]
    ax = plots.plot_predictive_comparison(
        grid[:, 0], preds, X_test=X, y_test=y, X_train=Xtr, y_train=ytr, prob=0.95
    )
    ax.set_xlabel(_e(x_unit or "x"))
    ax.set_ylabel(_e(target_name or "y"))
    ax.set_title("95 % predictive intervals over the held-out range", fontsize=9)
    return _fig_html(ax, "forecasts of the compared models")


def _loo_html(estimators) -> str:
    with_ll = {n: e for n, e in estimators.items() if "log_likelihood" in e.idata_.groups()}
    missing = [n for n in estimators if n not in with_ll]
    out = []
    if missing:
        out.append(
            f"<div class='warn'>no pointwise log-likelihood stored for "
            f"{_e(', '.join(missing))}: not in the LOO comparison.</div>"
        )
    if not with_ll:
        return "".join(out)
    try:
        tab = diagnostics.loo_compare(with_ll)
    except ValueError as err:
        return "".join(out) + f"<div class='warn'>{_e(err)}</div>"
    rows = [
        (n, r.elpd_loo, r.se, r.p_loo, r.elpd_diff, r.se_diff, int(r.n_pareto_k_bad))
        for n, r in tab.iterrows()
    ]
    out.append(
        _table(
            rows,
            [
                "model",
                "elpd_loo",
                "SE",
                "p_loo",
                "elpd difference to the best",
                "SE of the difference",
                "Pareto k > 0.7",
            ],
        )
    )
    out.append(
        "<p class='muted'>elpd_loo: expected log predictive density of a left-out "
        "training point, summed over the training rows (larger is better), estimated "
        "by PSIS-LOO. The difference to the best model has the standard error of the "
        "paired pointwise differences; a difference small compared with its SE does "
        "not separate the models.</p>"
    )
    bad = [n for n, r in tab.iterrows() if r.n_pareto_k_bad]
    if bad:
        out.append(
            f"<div class='warn'>Pareto k > 0.7 for some observations of "
            f"{_e(', '.join(bad))}: PSIS-LOO is unreliable there.</div>"
        )
    return "".join(out)


def _convergence_html(estimators, fit_times) -> str:
    rows, verdicts = [], []
    for name, est in estimators.items():
        conv = getattr(est, "convergence_", None) or diagnostics.convergence_report(
            est.idata_, warn=False
        )
        secs = fit_times.get(name, getattr(est, "fit_time_", None))
        word = (
            "converged"
            if conv.ok and not conv.warnings
            else "converged, with caveats"
            if conv.ok
            else "not converged"
        )
        rows.append(
            (
                name,
                word,
                conv.max_rhat,
                conv.min_ess_bulk,
                conv.min_ess_tail,
                f"{conv.n_divergent} of {conv.n_draws}",
                "not recorded" if secs is None else f"{float(secs):.1f}",
            )
        )
        cls = "ok" if conv.ok and not conv.warnings else ("warn" if conv.ok else "bad")
        verdicts.append(f"<div class='{cls}'><b>{_e(name)}</b>: {_e(conv.verdict)}</div>")
        names = plots.trace_variables(est.idata_)
        if names:
            verdicts.append(
                f"<p>{_e(name)}: the four quantities that mixed worst (smallest bulk or tail "
                "ESS first).</p>"
                + _fig_html(
                    plots.plot_trace(est.idata_, names, max_vars=4, convergence=conv),
                    f"{name}: trace plots of the quantities with the smallest ESS",
                )
            )
    return _table(
        rows,
        [
            "model",
            "verdict",
            "max R-hat",
            "min bulk ESS",
            "min tail ESS",
            "divergent transitions",
            "fit time (s)",
        ],
    ) + "\n".join(verdicts)


def _spectrum_html(name, est, x_unit) -> str:
    """Return the learned spectral density and components of an exact-model GaBaSR fit."""
    unit = x_unit or "unit of x"
    ax = plots.gabasr.plot_spectral_density_band(est, band=0.9, unit=unit)
    ax.set_title(f"{name}: learned spectral density (first input column)", fontsize=9)
    parts = [
        f"<h2>{_e(name)}: learned spectral density</h2>",
        _fig_html(ax, "learned spectral density"),
        "<p class='caption'>Posterior median (line) and pointwise 5–95 % band of the "
        "spectral density of the learned stationary kernel, "
        "S(f) = Σ<sub>k</sub> a<sub>k</sub>² N(f | ±μ<sub>k</sub>, σ<sub>k</sub>²), in "
        f"cycles per {_e(unit)} (two-sided, shown for f ≥ 0). A peak is a periodic "
        "component, its width the inverse of how long the oscillation stays coherent; "
        "mass at zero frequency is the smooth component. The polynomial trend is not "
        "part of the spectrum.</p>",
    ]
    rows = []
    for c in mixture_components(est.idata_.posterior, est.x_scaler_.scale, band=0.9):
        smooth = c["kind"] == "smooth"
        rows.append(
            (
                c["component"],
                "smooth (zero frequency)" if smooth else "periodic",
                "—" if smooth else _interval(c["period"], "{:#.4g}"),
                "0" if smooth else _interval(c["frequency"], "{:#.4g}"),
                _interval(c["share"], "{:.3f}"),
                _interval(c["length"], "{:.3g}"),
            )
        )
    parts.append("<h3>Components found</h3>")
    parts.append(
        _table(
            rows,
            [
                "component",
                "kind",
                f"period ({unit})",
                f"frequency (cycles per {unit})",
                "share of stationary variance",
                f"coherence length ℓ ({unit})",
            ],
        )
    )
    parts.append(
        "<p class='muted'>Posterior medians with 90 % intervals. Periodic components "
        "are numbered by frequency within each draw. Share: a<sub>k</sub>²/Σ<sub>j"
        "</sub> a<sub>j</sub>². Coherence length ℓ = 1/σ<sub>k</sub>, σ<sub>k</sub> "
        "the component's spread in radians per unit of the input: its correlation at "
        "lag τ is cos(2πτ/period) · exp(−τ²/2ℓ²), so the oscillation keeps its phase "
        "over lags of about ℓ; for the smooth component ℓ is its squared-exponential "
        "length-scale.</p>"
    )
    return "".join(parts)


def _method_html(name, est, x_unit) -> str:
    if getattr(est, "model_", None) in ("exact", "hsgp") and hasattr(est, "x_scaler_"):
        return _spectrum_html(name, est, x_unit)
    out = []
    for heading, fig, *caption in panels.estimator_panels(est):
        out.append(f"<h2>{_e(name)}: {_e(heading)}</h2>" + _fig_html(fig, heading))
        if caption:
            out.append(f"<p class='caption'>{_e(caption[0])}</p>")
    return "".join(out)


def render_compare_report(
    estimators: dict,
    *,
    X_test,
    y_test,
    fit_times=None,
    title=None,
    data_name=None,
    target_name=None,
    x_unit=None,
    held_out=None,
) -> str:
    """Return an HTML report comparing fitted regressors on the same held-out data.

    Sections: the models compared; held-out metrics side by side
    (:func:`bayeskern.diagnostics.regression_metrics`); forecasts with 95 % intervals and the
    observed held-out points (one input column); PSIS-LOO with each model's difference to
    the best and its standard error (:func:`bayeskern.diagnostics.loo_compare`);
    convergence and fit time; then per model what it learned: for an exact-model
    :class:`~bayeskern.GaBaSRRegressor` (Pena-Llamas et al. 2023) the spectral density of
    its spectral-mixture kernel (Wilson & Adams 2013) with a posterior band and the
    components found, otherwise the estimator's registered report panels.

    Parameters
    ----------
    estimators : dict
        Name -> fitted bayeskern regressor (``idata_``, ``predictive``), in display order.
    X_test : array, shape (n, d)
        Held-out inputs.
    y_test : array, shape (n,)
        Held-out targets.
    fit_times : dict, optional
        Name -> fit time in seconds, for estimators without ``fit_time_``.
    title, data_name, target_name : str, optional
        Text shown in the header (escaped).
    x_unit : str, optional
        Unit of the first input column, e.g. ``"year"`` (axis labels, periods).
    held_out : dict, optional
        :func:`held_out_predictions` of these estimators on ``X_test``, ``y_test``, if
        already computed; computed here otherwise.

    Returns
    -------
    str
    """
    X, y, times = _check_compare(estimators, X_test, y_test, fit_times)
    if held_out is None:
        held_out = held_out_predictions(estimators, X, y)
    elif not isinstance(held_out, dict) or list(held_out) != list(estimators):
        raise ValueError(
            "held_out must be held_out_predictions(estimators, X_test, y_test), "
            f"with the names {list(estimators)}"
        )
    metrics = {name: h.metrics for name, h in held_out.items()}
    with plots.detached():
        title = title or "Model comparison: " + ", ".join(estimators)
        parts = [
            f"<h1>{_e(title)}</h1>",
            f"<p class='muted'>generated {_e(time.strftime('%Y-%m-%d %H:%M:%S'))} by "
            f"bayeskern {_e(_version())}</p>",
            "<h2>Models compared</h2>",
            _compared_html(estimators, data_name, target_name, len(y)),
            "<h2>Held-out accuracy and calibration</h2>",
            _metrics_html(metrics),
            "<h2>Forecasts</h2>",
            _forecast_html(estimators, held_out, X, y, x_unit, target_name),
            "<h2>Leave-one-out cross-validation (PSIS-LOO)</h2>",
            _loo_html(estimators),
            "<h2>Convergence and fit time</h2>",
            _convergence_html(estimators, times),
        ]
        parts += [_method_html(name, est, x_unit) for name, est in estimators.items()]
    return _page(title, parts)


def compare_report(estimators: dict, path, **kwargs) -> Path:
    """Write the comparison report of fitted regressors to ``path`` (atomically).

    See :func:`render_compare_report` for the arguments.

    Parameters
    ----------
    estimators : dict
        Name -> fitted bayeskern regressor.
    path : str or Path
        HTML file to write.
    **kwargs
        ``X_test``, ``y_test`` (required), ``fit_times``, ``title``, ``data_name``,
        ``target_name``, ``x_unit``, ``held_out``.

    Returns
    -------
    Path
    """
    text = render_compare_report(estimators, **kwargs)
    atomic_write(path, lambda tmp: tmp.write_text(text, encoding="utf-8"))
    return Path(path)
