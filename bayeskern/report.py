"""Self-contained HTML uncertainty reports.

One HTML file, figures embedded as PNG data URIs, no scripts and no external resources (a
Content-Security-Policy forbids any fetch), so it opens offline and can be shared. Every
user-provided string (column names, file names, titles) is HTML-escaped.

Sections: what was fitted (data, model, priors, sampler settings, versions, seed);
convergence (R-hat, ESS, divergences, verdict); the fit with predictive bands (regression)
or reliability diagram and ROC (classification); calibration metrics on held-out data;
PIT histogram; PSIS-LOO with Pareto-k warnings; method-specific panels supplied by the
estimator and its kernel, found through :func:`bayeskern.plots.panels.estimator_panels`.

Figures are drawn on detached :class:`matplotlib.figure.Figure` objects
(:func:`bayeskern.plots.detached`): rendering a report leaves matplotlib's backend, and the
figures a notebook has open, alone.
"""

from __future__ import annotations

import base64
import html
import io
import time
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np

from bayeskern import diagnostics, plots
from bayeskern.plots import panels
from bayeskern.runs import atomic_write

__all__ = ["report", "render_report", "export_pdf"]

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


def _priors(est) -> list[tuple[str, str]]:
    rows = []
    kernel = getattr(est, "kernel_", None)
    if kernel is not None:
        for leaf in kernel.leaves():
            for p, h in leaf.hyperparameters().items():
                spec = (f"fixed at {h.value} (data units)" if h.value is not None
                        else f"{_dist_repr(h.prior())}{' per input column' if h.ard else ''}"
                        " (standardized units)")
                rows.append((leaf._site(p), spec))
    for site, spec in getattr(est, "_extra_priors", lambda: [])():
        rows.append((site, spec))
    return rows


def _dist_repr(d) -> str:
    params = {k: np.asarray(getattr(d, k)).round(4).tolist() for k in d.arg_constraints
              if hasattr(d, k)}
    return f"{type(d).__name__}({', '.join(f'{k}={v}' for k, v in params.items())})"


def _as_input(est, X):
    """``X`` as the estimator saw it in fit (a frame with its column names, if it had them)."""
    names = getattr(est, "feature_names_in_", None)
    if names is None:
        return X
    import pandas as pd

    return pd.DataFrame(np.asarray(X, dtype=float), columns=list(names))


def render_report(est, *, X_test=None, y_test=None, title=None, data_name=None,
                  target_name=None) -> str:
    """Return the report of a fitted estimator as an HTML string.

    Parameters
    ----------
    est : a fitted bayeskern Bayesian estimator (``idata_``, ``predictive`` or
        ``predict_proba``).
    X_test, y_test : optional held-out data for calibration metrics.
    title, data_name, target_name : text shown in the header (escaped).
    """
    with plots.detached():
        return _render(est, X_test=X_test, y_test=y_test, title=title, data_name=data_name,
                       target_name=target_name)


def _render(est, *, X_test, y_test, title, data_name, target_name) -> str:
    idata = est.idata_
    post = idata.posterior
    # training data as fitted (LAB-RBF's last layer keeps only calibration residuals)
    stored = "constant_data" in idata.groups()
    X = np.asarray(idata.constant_data["X"]) if stored else None
    y = np.asarray(idata.observed_data["y"]) if stored else None
    is_clf = hasattr(est, "predict_proba")
    name = type(est).__name__
    parts = [f"<h1>{_e(title or f'Uncertainty report: {name}')}</h1>",
             f"<p class='muted'>generated {_e(time.strftime('%Y-%m-%d %H:%M:%S'))} by bayeskern"
             f" {_e(post.attrs.get('bayeskern_version', ''))}</p>"]

    # ---------------------------------------------------------------- what was fitted
    feats = getattr(est, "feature_names_in_", None)
    feats = list(feats) if feats is not None else [f"x{j}" for j in range(est.n_features_in_)]
    parts.append("<h2>What was fitted</h2>")
    n_rows = X.shape[0] if stored else "(not stored in the run)"
    rows = [("model", name), ("kernel", getattr(est, "kernel_", "")),
            ("data", data_name or "(in memory)"), ("target", target_name or "y"),
            ("training rows × features", f"{n_rows} × {est.n_features_in_}"),
            ("features", ", ".join(map(str, feats[:30])) + (" …" if len(feats) > 30 else "")),
            ("held-out rows", 0 if y_test is None else len(y_test))]
    if is_clf:
        rows.append(("classes", ", ".join(map(str, est.classes_))))
    elif stored:
        rows.append(("target mean / sd", f"{np.mean(y):.4g} / {np.std(y):.4g}"))
    for k in ("sampler", "num_warmup", "num_samples", "num_chains", "chain_method",
              "target_accept_prob", "random_state"):
        if k in post.attrs:
            rows.append((k.replace("_", " "), post.attrs[k]))
    parts.append(_table(rows, ["item", "value"]))
    pri = _priors(est)
    if pri:
        parts.append("<h3>Priors</h3>" + _table(pri, ["parameter", "prior"]))
    from bayeskern.runs import _versions

    parts.append("<p class='muted'>versions: " + _e(", ".join(f"{k} {v}" for k, v in
                                                               _versions().items())) + "</p>")

    # ---------------------------------------------------------------- convergence
    conv = getattr(est, "convergence_", None) or diagnostics.convergence_report(idata, warn=False)
    cls = "ok" if conv.ok and not conv.warnings else ("warn" if conv.ok else "bad")
    parts.append("<h2>Convergence</h2>")
    parts.append(f"<div class='{cls}'>{_e(conv.verdict)}</div>")
    tab = conv.table
    cols = [c for c in ("r_hat", "ess_bulk", "ess_tail", "mcse_mean") if c in tab.columns]
    parts.append(_table([(i, *[tab.loc[i, c] for c in cols]) for i in tab.index[:40]],
                        ["quantity", *cols]))
    steps = post.attrs.get("mean_steps_per_draw")
    steps = (f"; mean leapfrog steps per draw: {float(steps):.1f}"
             if steps is not None and np.isfinite(float(steps)) else "")
    parts.append(f"<p>divergent transitions: {conv.n_divergent} of {conv.n_draws} draws; "
                 f"maximum tree depth reached: {conv.tree_depth_hits}{_e(steps)}</p>")
    scalar_vars = [v for v in post.data_vars if post[v].ndim <= 3 and v not in ("f", "eta")]
    if scalar_vars:
        parts.append(_fig_html(plots.plot_trace(idata, scalar_vars), "trace plots"))

    # ---------------------------------------------------------------- fit and calibration
    parts.append("<h2>Fit</h2>")
    has_test = X_test is not None and y_test is not None
    Xe, ye = (np.asarray(X_test, dtype=float), np.asarray(y_test)) if has_test else (X, y)
    where = "held-out data" if has_test else "training data (no held-out data given)"
    if Xe is None:
        parts.append("<div class='warn'>This run stores no training rows and no held-out data "
                     "was given, so there is nothing to evaluate the fit on: pass X_test and "
                     "y_test (command line: fit with --holdout 0.2).</div>")
    elif is_clf:
        p = est.predict_proba(_as_input(est, Xe))[:, 1]
        # labels as given, or the 0/1 codes that some classifiers store as observed data
        y01 = ((ye == est.classes_[1]) if np.isin(ye, est.classes_).all() else ye).astype(int)
        fig, axes = plots.subplots(1, 2, figsize=(10, 4.6), layout="constrained")
        plots.plot_reliability(y01, p, ax=axes[0])
        if len(np.unique(y01)) == 2:
            plots.plot_roc(y01, p, ax=axes[1])
        axes[0].set_title(f"reliability ({where})", fontsize=9)
        parts.append(_fig_html(fig, "reliability diagram and ROC"))
        m = diagnostics.classification_metrics(y01, p)
    else:
        pred_e = est.predictive(_as_input(est, Xe))
        if Xe.shape[1] == 1:
            lo_x = min(Xe.min(), X.min() if stored else np.inf)
            hi_x = max(Xe.max(), X.max() if stored else -np.inf)
            grid = np.linspace(lo_x, hi_x, 400)[:, None]
            ax = plots.plot_predictive_1d(grid[:, 0], est.predictive(_as_input(est, grid)),
                                          X_train=X, y_train=y,
                                          X_test=X_test if has_test else None,
                                          y_test=y_test if has_test else None)
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
    if Xe is not None:
        parts.append(f"<h2>Calibration on {_e(where)}</h2>")
        parts.append(_table(list(m.items()), ["metric", "value"]))
    jitter = getattr(est, "max_jitter_", post.attrs.get("max_jitter"))
    if jitter is not None:  # GP estimators: adaptive Cholesky jitter (bayeskern.linalg)
        parts.append(f"<p>largest Cholesky jitter added to a kernel matrix in prediction: "
                     f"{float(jitter):.1e}{' (ill-conditioned)' if jitter > 1e-6 else ''}</p>")
    if not is_clf and Xe is not None:
        parts.append(pit_html)
        parts.append("<p class='muted'>Coverage should be close to the nominal 50/90/95 %; a "
                     "U-shaped PIT histogram means intervals are too narrow, a hump too wide."
                     "</p>")

    # ---------------------------------------------------------------- LOO
    if "log_likelihood" in idata.groups():
        parts.append("<h2>Leave-one-out cross-validation (PSIS-LOO)</h2>")
        import warnings

        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            loo = diagnostics.loo(idata)
        k = np.asarray(loo.pareto_k)
        parts.append(_table([("elpd_loo", loo.elpd_loo), ("SE", loo.se), ("p_loo", loo.p_loo),
                             ("Pareto k > 0.7", int((k > 0.7).sum()))], ["quantity", "value"]))
        for msg in w:
            parts.append(f"<div class='warn'>{_e(msg.message)}</div>")
        parts.append(_fig_html(plots.plot_pareto_k(loo), "Pareto k"))

    # ---------------------------------------------------------------- method panels
    for heading, fig, *caption in panels.estimator_panels(est):
        parts.append(f"<h2>{_e(heading)}</h2>" + _fig_html(fig, heading))
        if caption:
            parts.append(f"<p class='caption'>{_e(caption[0])}</p>")

    head = ("<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>"
            "<meta http-equiv='Content-Security-Policy' content=\"default-src 'none'; "
            "img-src data:; style-src 'unsafe-inline'\">"
            f"<title>{_e(title or name)}</title><style>{_CSS}</style></head><body>")
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
            "the HTML report itself was written")

    def write(tmp):
        with tempfile.TemporaryDirectory() as profile:
            cmd = [browser, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                   "--disable-background-networking", "--disable-component-update",
                   "--disable-sync", f"--user-data-dir={profile}", "--no-pdf-header-footer",
                   f"--print-to-pdf={tmp}", html_path.resolve().as_uri()]
            res = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout,
                                 check=False)
        if not tmp.is_file() or tmp.stat().st_size == 0 or tmp.read_bytes()[:5] != b"%PDF-":
            last = (res.stderr.strip().splitlines() or ["no message"])[-1]
            raise RuntimeError(f"Chromium did not produce a PDF (exit {res.returncode}): {last}")

    atomic_write(pdf_path, write, suffix=".pdf")
    return Path(pdf_path)
