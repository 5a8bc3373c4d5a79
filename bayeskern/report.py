"""Self-contained HTML uncertainty reports.

One HTML file, figures embedded as PNG data URIs, no scripts and no external resources (a
Content-Security-Policy forbids any fetch), so it opens offline and can be shared. Every
user-provided string (column names, file names, titles) is HTML-escaped.

Sections: what was fitted (data, model, priors, sampler settings, versions, seed);
convergence (R-hat, ESS, divergences, verdict); the fit with predictive bands (regression)
or reliability diagram and ROC (classification); calibration metrics on held-out data;
PIT histogram; PSIS-LOO with Pareto-k warnings; method-specific panels supplied by the
estimator and its kernel, found through :func:`bayeskern.plots.panels.estimator_panels`.

:func:`compare_report` puts several regression models fitted to the same data side by side:
held-out metrics, PSIS-LOO differences, forecasts, convergence and fit times, and for an
exact-model GaBaSR fit its learned spectral density with the components found.

Figures are drawn on detached :class:`matplotlib.figure.Figure` objects
(:func:`bayeskern.plots.detached`): rendering a report leaves matplotlib's backend, and the
figures a notebook has open, alone.
"""

from __future__ import annotations

import base64
import dataclasses
import html
import io
import time
from pathlib import Path
from typing import NamedTuple

import matplotlib.pyplot as plt
import numpy as np

from bayeskern import diagnostics, plots, report_calibration, report_classical, report_priors
from bayeskern.estimators.base import as_fitted_input
from bayeskern.models.gabasr_spectrum import mixture_components
from bayeskern.plots import panels
from bayeskern.runs import atomic_write

__all__ = [
    "report",
    "render_report",
    "compare_report",
    "render_compare_report",
    "held_out_predictions",
    "HeldOut",
    "export_pdf",
]

_CSS = """
body{font-family:system-ui,Segoe UI,Helvetica,Arial,sans-serif;max-width:1000px;margin:2em auto;
color:#222;line-height:1.45;padding:0 1em}
h1{font-size:1.6em;margin-bottom:.2em}
h2{border-bottom:1px solid #ccc;padding-bottom:.2em;margin-top:1.8em}
table{border-collapse:collapse;font-size:.88em;margin:.6em 0}
td,th{border:1px solid #ddd;padding:3px 8px;text-align:right}
th{background:#f4f4f4}td:first-child,th:first-child{text-align:left}
.ok{background:#e7f6e7;border-left:5px solid #2a2;padding:.6em 1em}
.bad{background:#fdeaea;border-left:5px solid #c22;padding:.6em 1em}
.warn{background:#fff6e0;border-left:5px solid #e90;padding:.6em 1em}
img{max-width:100%;height:auto}.muted{color:#666;font-size:.85em}
.caption{font-size:.92em;color:#333;margin-top:.2em}
"""


def _e(s) -> str:
    return html.escape(str(s), quote=True)


def _fig_html(fig_or_ax, alt: str) -> str:
    fig = getattr(fig_or_ax, "figure", fig_or_ax)
    if isinstance(fig_or_ax, np.ndarray):
        fig = fig_or_ax.flat[0].figure
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110)
    plt.close(fig)  # a no-op for detached figures; frees a panel drawn through pyplot
    data = base64.b64encode(buf.getvalue()).decode("ascii")
    return f'<img alt="{_e(alt)}" src="data:image/png;base64,{data}">'


def _table(rows, header) -> str:
    out = ["<table><tr>" + "".join(f"<th>{_e(h)}</th>" for h in header) + "</tr>"]
    for r in rows:
        out.append("<tr>" + "".join(f"<td>{_e(_fmt(v))}</td>" for v in r) + "</tr>")
    return "".join(out) + "</table>"


def _fmt(v) -> str:
    if isinstance(v, (float, np.floating)):
        return f"{v:.4g}"
    return str(v)


def _class_codes(est, y) -> np.ndarray:
    """Codes ``0 .. C-1`` of ``y``, given as labels or as the codes some classifiers store."""
    y = np.asarray(y)
    if np.isin(y, est.classes_).all():
        return np.searchsorted(est.classes_, y).astype(int)
    return y.astype(int)


def render_report(
    est,
    *,
    X_test=None,
    y_test=None,
    X_train=None,
    y_train=None,
    title=None,
    data_name=None,
    target_name=None,
) -> str:
    """Return the report of a fitted estimator as an HTML string.

    A Bayesian estimator (``idata_``) gets the uncertainty report; without held-out rows its
    calibration is that of the PSIS-LOO predictive (:mod:`bayeskern.loo_calibration`,
    Vehtari, Gelman & Gabry 2017). A classical estimator (the papers' SVMs and kernel
    regression) gets :func:`bayeskern.report_classical.classical_parts`: its parameters, what
    it learned, cross-validated and held-out metrics, and its Bayesian twin.

    Parameters
    ----------
    est : fitted estimator
        A bayeskern Bayesian estimator (``idata_``, ``predictive`` or ``predict_proba``) or a
        fitted classical one (e.g. :class:`~bayeskern.VSKClassifier`).
    X_test, y_test : array-like, optional
        Held-out data for calibration metrics.
    X_train, y_train : array-like, optional
        Training data, for the cross-validated metrics of a classical estimator (a Bayesian
        run stores its own).
    title, data_name, target_name : str, optional
        Text shown in the header (escaped).

    Returns
    -------
    str
    """
    if getattr(est, "idata_", None) is None:
        from sklearn.utils.validation import check_is_fitted

        check_is_fitted(est)
        with plots.detached():
            return _render_classical(
                est,
                X_train=X_train,
                y_train=y_train,
                X_test=X_test,
                y_test=y_test,
                title=title,
                data_name=data_name,
                target_name=target_name,
            )
    with plots.detached():
        return _render(
            est,
            X_test=X_test,
            y_test=y_test,
            title=title,
            data_name=data_name,
            target_name=target_name,
        )


def _render_classical(
    est, *, X_train, y_train, X_test, y_test, title, data_name, target_name
) -> str:
    name = type(est).__name__
    parts = [
        f"<h1>{_e(title or f'Report: {name} (classical fit)')}</h1>",
        f"<p class='muted'>generated {_e(time.strftime('%Y-%m-%d %H:%M:%S'))} by bayeskern"
        f" {_e(_version())}; data: {_e(data_name or '(in memory)')}, target: "
        f"{_e(target_name or 'y')}</p>",
    ]
    for part in report_classical.classical_parts(
        est, X_train=X_train, y_train=y_train, X_test=X_test, y_test=y_test, table=_table
    ):
        parts.append(part if isinstance(part, str) else _fig_html(part, "figure"))
    return _page(title or name, parts)


def _render(est, *, X_test, y_test, title, data_name, target_name) -> str:
    idata = est.idata_
    post = idata.posterior
    # training data as fitted (LAB-RBF's last layer keeps only calibration residuals)
    stored = "constant_data" in idata.groups()
    X = np.asarray(idata.constant_data["X"]) if stored else None
    y = np.asarray(idata.observed_data["y"]) if stored else None
    is_clf = hasattr(est, "predict_proba")
    name = type(est).__name__
    parts = [
        f"<h1>{_e(title or f'Uncertainty report: {name}')}</h1>",
        f"<p class='muted'>generated {_e(time.strftime('%Y-%m-%d %H:%M:%S'))} by bayeskern"
        f" {_e(post.attrs.get('bayeskern_version', ''))}</p>",
    ]

    # ---------------------------------------------------------------- what was fitted
    feats = getattr(est, "feature_names_in_", None)
    feats = list(feats) if feats is not None else [f"x{j}" for j in range(est.n_features_in_)]
    parts.append("<h2>What was fitted</h2>")
    n_rows = X.shape[0] if stored else "(not stored in the run)"
    rows = [
        ("model", name),
        ("kernel", getattr(est, "kernel_", "")),
        ("data", data_name or "(in memory)"),
        ("target", target_name or "y"),
        ("training rows × features", f"{n_rows} × {est.n_features_in_}"),
        ("features", ", ".join(map(str, feats[:30])) + (" …" if len(feats) > 30 else "")),
        ("held-out rows", 0 if y_test is None else len(y_test)),
    ]
    if is_clf:
        rows.append(("classes", ", ".join(map(str, est.classes_))))
    elif stored:
        rows.append(("target mean / sd", f"{np.mean(y):.4g} / {np.std(y):.4g}"))
    for k in (
        "sampler",
        "num_warmup",
        "num_samples",
        "num_chains",
        "chain_method",
        "target_accept_prob",
        "random_state",
    ):
        if k in post.attrs:
            rows.append((k.replace("_", " "), post.attrs[k]))
    parts.append(_table(rows, ["item", "value"]))
    pri, note = report_priors.prior_rows(est)
    if pri:
        parts.append(
            "<h3>Priors</h3>"
            + _table(pri, ["site", "prior", "shape"])
            + f"<p class='muted'>{_e(note)}</p>"
        )
    from bayeskern.runs import _versions

    parts.append(
        "<p class='muted'>versions: "
        + _e(", ".join(f"{k} {v}" for k, v in _versions().items()))
        + "</p>"
    )

    # ---------------------------------------------------------------- convergence
    conv = getattr(est, "convergence_", None) or diagnostics.convergence_report(idata, warn=False)
    cls = "ok" if conv.ok and not conv.warnings else ("warn" if conv.ok else "bad")
    parts.append("<h2>Convergence</h2>")
    parts.append(f"<div class='{cls}'>{_e(conv.verdict)}</div>")
    tab = conv.table
    cols = [c for c in ("r_hat", "ess_bulk", "ess_tail", "mcse_mean") if c in tab.columns]
    parts.append(
        _table([(i, *[tab.loc[i, c] for c in cols]) for i in tab.index[:40]], ["quantity", *cols])
    )
    steps = post.attrs.get("mean_steps_per_draw")
    steps = (
        f"; mean leapfrog steps per draw: {float(steps):.1f}"
        if steps is not None and np.isfinite(float(steps))
        else ""
    )
    parts.append(
        f"<p>divergent transitions: {conv.n_divergent} of {conv.n_draws} draws; "
        f"maximum tree depth reached: {conv.tree_depth_hits}{_e(steps)}</p>"
    )
    scalar_vars = [
        v
        for v in post.data_vars
        if post[v].ndim <= 3
        and v not in ("f", "eta")
        and not v.endswith(diagnostics.DATA_UNITS_SUFFIX)
    ]  # restatements: not sampled
    if scalar_vars:
        parts.append(_fig_html(plots.plot_trace(idata, scalar_vars), "trace plots"))

    # ---------------------------------------------------------------- fit and calibration
    parts.append("<h2>Fit</h2>")
    has_test = X_test is not None and y_test is not None
    Xe, ye = (np.asarray(X_test, dtype=float), np.asarray(y_test)) if has_test else (X, y)
    where = "held-out data" if has_test else "training data (no held-out data given)"
    loo_cal, loo_why = (None, "") if has_test or Xe is None else report_calibration.try_loo(est)
    if Xe is None:
        parts.append(
            "<div class='warn'>This run stores no training rows and no held-out data "
            "was given, so there is nothing to evaluate the fit on: pass X_test and "
            "y_test (command line: fit with --holdout 0.2).</div>"
        )
    elif is_clf and len(est.classes_) > 2:
        P = est.predict_proba(as_fitted_input(est, Xe))
        codes = _class_codes(est, ye)
        correct = (P.argmax(axis=1) == codes).astype(int)
        ax = plots.plot_reliability(correct, P.max(axis=1))
        ax.set_title(f"top-label reliability ({where})", fontsize=9)
        parts.append(_fig_html(ax, "top-label reliability diagram"))
        m = diagnostics.multiclass_metrics(codes, P)
    elif is_clf:
        p = est.predict_proba(as_fitted_input(est, Xe))[:, 1]
        y01 = _class_codes(est, ye)
        fig, axes = plots.subplots(1, 2, figsize=(10, 4.6), layout="constrained")
        plots.plot_reliability(y01, p, ax=axes[0])
        if len(np.unique(y01)) == 2:
            plots.plot_roc(y01, p, ax=axes[1])
        axes[0].set_title(f"reliability ({where})", fontsize=9)
        parts.append(_fig_html(fig, "reliability diagram and ROC"))
        if has_test:
            parts += report_calibration.reliability_band_section(
                est, as_fitted_input(est, Xe), y01, _fig_html
            )
        m = diagnostics.classification_metrics(y01, p)
    else:
        pred_e = est.predictive(as_fitted_input(est, Xe))
        if Xe.shape[1] == 1:
            lo_x = min(Xe.min(), X.min() if stored else np.inf)
            hi_x = max(Xe.max(), X.max() if stored else -np.inf)
            grid = np.linspace(lo_x, hi_x, 400)[:, None]
            ax = plots.plot_predictive_1d(
                grid[:, 0],
                est.predictive(as_fitted_input(est, grid)),
                X_train=X,
                y_train=y,
                X_test=X_test if has_test else None,
                y_test=y_test if has_test else None,
            )
            ax.set_xlabel(_e(feats[0]))
            ax.set_ylabel(_e(target_name or "y"))
            parts.append(_fig_html(ax, "predictive bands"))
        ax = plots.plot_observed_vs_predicted(np.asarray(ye, dtype=float), pred_e)
        ax.set_title(where, fontsize=9)
        parts.append(_fig_html(ax, "observed against predicted"))
        m = diagnostics.regression_metrics(np.asarray(ye, dtype=float), pred_e)
        ax = plots.plot_pit(np.asarray(ye, dtype=float), pred_e)
        ax.set_title(f"PIT histogram ({where})", fontsize=9)
        pit_html = _fig_html(ax, "PIT histogram")
    if loo_cal is not None:
        parts += report_calibration.loo_section(loo_cal, _fig_html, _table)
    elif Xe is not None:
        parts.append(f"<h2>Calibration on {_e(where)}</h2>")
        if not has_test:
            parts.append(
                "<div class='warn'>In-sample calibration (optimistic): no rows were "
                f"held out and leave-one-out calibration is not available ({_e(loo_why)})."
                "</div>"
            )
        parts.append(_table(list(m.items()), ["metric", "value"]))
    jitter = getattr(est, "max_jitter_", post.attrs.get("max_jitter"))
    if jitter is not None:  # GP estimators: adaptive Cholesky jitter (bayeskern.linalg)
        parts.append(
            f"<p>largest Cholesky jitter added to a kernel matrix in prediction: "
            f"{float(jitter):.1e}{' (ill-conditioned)' if jitter > 1e-6 else ''}</p>"
        )
    if not is_clf and Xe is not None and loo_cal is None:
        parts.append(pit_html)
        parts.append(
            "<p class='muted'>Coverage should be close to the nominal 50/90/95 %; a "
            "U-shaped PIT histogram means intervals are too narrow, a hump too wide."
            "</p>"
        )

    # ---------------------------------------------------------------- LOO
    if "log_likelihood" in idata.groups():
        parts.append("<h2>Leave-one-out cross-validation (PSIS-LOO)</h2>")
        import warnings

        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            loo = diagnostics.loo(idata)
        k = np.asarray(loo.pareto_k)
        parts.append(
            _table(
                [
                    ("elpd_loo", loo.elpd_loo),
                    ("SE", loo.se),
                    ("p_loo", loo.p_loo),
                    ("Pareto k > 0.7", int((k > 0.7).sum())),
                ],
                ["quantity", "value"],
            )
        )
        for msg in w:
            parts.append(f"<div class='warn'>{_e(msg.message)}</div>")
        parts.append(_fig_html(plots.plot_pareto_k(loo), "Pareto k"))

    # ---------------------------------------------------------------- method panels
    for heading, fig, *caption in panels.estimator_panels(est):
        parts.append(f"<h2>{_e(heading)}</h2>" + _fig_html(fig, heading))
        if caption:
            parts.append(f"<p class='caption'>{_e(caption[0])}</p>")

    return _page(title or name, parts)


def _page(title: str, parts: list[str]) -> str:
    """Return the HTML page: a Content-Security-Policy forbidding any fetch, the CSS, ``parts``."""
    head = (
        "<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>"
        "<meta http-equiv='Content-Security-Policy' content=\"default-src 'none'; "
        "img-src data:; style-src 'unsafe-inline'\">"
        f"<title>{_e(title)}</title><style>{_CSS}</style></head><body>"
    )
    return head + "\n".join(parts) + "</body></html>"


def report(est, path, *, pdf: bool = False, **kwargs) -> Path:
    """Write the HTML report of a fitted estimator to ``path`` (atomically).

    See :func:`render_report` for the keyword arguments. ``pdf=True`` also prints it to
    ``path`` with the suffix ``.pdf`` (:func:`export_pdf`, needs Chromium).
    """
    text = render_report(est, **kwargs)
    atomic_write(path, lambda tmp: tmp.write_text(text, encoding="utf-8"))
    if pdf:
        export_pdf(path, Path(path).with_suffix(".pdf"))
    return Path(path)


# ------------------------------------------------------------------------ model comparison
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


def _version() -> str:
    from bayeskern._version import __version__

    return __version__


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


def find_chromium() -> str | None:
    """Return the path of a Chromium/Chrome executable, or ``None`` if absent.

    ``$BAYESKERN_CHROMIUM`` or the first of ``chromium``, ``chromium-browser``,
    ``google-chrome`` on ``PATH``.
    """
    import os
    import shutil

    env = os.environ.get("BAYESKERN_CHROMIUM")
    if env:
        return env if Path(env).is_file() else shutil.which(env)
    for name in ("chromium", "chromium-browser", "google-chrome"):
        if shutil.which(name):
            return shutil.which(name)
    return None


def export_pdf(html_path, pdf_path, *, timeout: float = 120.0) -> Path:
    """Print a (self-contained) HTML report to PDF with headless Chromium's ``--print-to-pdf``.

    The PDF is written to a temporary file and renamed onto ``pdf_path`` (atomic). Raises
    ``FileNotFoundError`` naming what to install when no Chromium is found, and
    ``RuntimeError`` when Chromium fails to produce a PDF.
    """
    import subprocess
    import tempfile

    html_path = Path(html_path)
    if not html_path.is_file():
        raise FileNotFoundError(f"html_path {str(html_path)!r} does not exist")
    browser = find_chromium()
    if browser is None:
        raise FileNotFoundError(
            "PDF export needs headless Chromium, which was not found: install it (Debian/"
            "Ubuntu: apt-get install chromium) or set BAYESKERN_CHROMIUM to its executable; "
            "the HTML report itself was written"
        )

    def write(tmp):
        with tempfile.TemporaryDirectory() as profile:
            cmd = [
                browser,
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--no-first-run",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
                f"--user-data-dir={profile}",
                "--no-pdf-header-footer",
                f"--print-to-pdf={tmp}",
                html_path.resolve().as_uri(),
            ]
            res = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=False)
        if not tmp.is_file() or tmp.stat().st_size == 0 or tmp.read_bytes()[:5] != b"%PDF-":
            last = (res.stderr.strip().splitlines() or ["no message"])[-1]
            raise RuntimeError(f"Chromium did not produce a PDF (exit {res.returncode}): {last}")

    atomic_write(pdf_path, write, suffix=".pdf")
    return Path(pdf_path)
