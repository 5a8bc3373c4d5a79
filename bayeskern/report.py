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

import time
from pathlib import Path

import numpy as np

from bayeskern import diagnostics, plots, report_calibration, report_classical, report_priors
from bayeskern.estimators.base import as_fitted_input
from bayeskern.plots import panels
from bayeskern.report_compare import (
    HeldOut,
    compare_report,
    held_out_predictions,
    render_compare_report,
)
from bayeskern.report_html import _e, _fig_html, _page, _table, _version, export_pdf, find_chromium
from bayeskern.runs import atomic_write

__all__ = [
    "report",
    "render_report",
    "compare_report",
    "render_compare_report",
    "held_out_predictions",
    "HeldOut",
    "export_pdf",
    "find_chromium",
]


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
        "approximation",
        "n_basis_total",
        "n_inducing",
        "inducing_log_density_kmeans",
        "inducing_log_density_moved",
        "loo_subsample",
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
    scalar_vars = plots.trace_variables(idata)
    if scalar_vars:
        parts.append(
            "<p>Trace plots of the quantities that mixed worst (the smallest bulk or tail "
            "ESS first; R-hat and ESS beside each).</p>"
        )
        parts.append(
            _fig_html(
                plots.plot_trace(idata, scalar_vars, convergence=conv),
                "trace plots of the quantities with the smallest ESS",
            )
        )

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
