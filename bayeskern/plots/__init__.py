"""Plots for Bayesian kernel models, built on matplotlib.

Every function takes an optional ``ax`` and returns the matplotlib ``Axes`` it drew on, so
figures can be restyled or combined. Method-specific plots live in submodules
(``bayeskern.plots.gabasr``, ``.vsk``, ``.ckrbf``, ``.labrbf``, ``.conformal``), which
register the method panels of the HTML report in :mod:`bayeskern.plots.panels`.
"""

from __future__ import annotations

import numpy as np
from sklearn import metrics as skm

from bayeskern import diagnostics
from bayeskern.plots._figure import axes_or_new, detached, subplots

__all__ = [
    "detached",
    "subplots",
    "plot_predictive_1d",
    "plot_predictive_comparison",
    "plot_observed_vs_predicted",
    "plot_pit",
    "plot_reliability",
    "plot_roc",
    "plot_trace",
    "trace_variables",
    "plot_pareto_k",
]


def plot_predictive_1d(
    x,
    predictive,
    *,
    X_train=None,
    y_train=None,
    X_test=None,
    y_test=None,
    probs=(0.5, 0.9),
    ax=None,
):
    """Predictive mean and central bands (probabilities ``probs``) along a 1-D input ``x``."""
    ax = axes_or_new(ax, (8, 4))
    x = np.ravel(x)
    order = np.argsort(x)
    for p, alpha in zip(sorted(probs, reverse=True), (0.2, 0.35, 0.5), strict=False):
        lo, hi = predictive.interval(p)
        ax.fill_between(
            x[order],
            lo[order],
            hi[order],
            alpha=alpha,
            color="C0",
            lw=0,
            label=f"{int(p * 100)} % predictive interval",
        )
    ax.plot(x[order], predictive.mean()[order], color="C0", lw=1.2, label="predictive mean")
    return _with_data(ax, X_train, y_train, X_test, y_test, size=2.5)


def plot_predictive_comparison(
    x,
    predictives: dict,
    *,
    X_test=None,
    y_test=None,
    X_train=None,
    y_train=None,
    prob: float = 0.95,
    ax=None,
):
    """Predictive means and central ``prob`` intervals of several models along a 1-D input.

    Parameters
    ----------
    x : array, shape (n,)
        Input values at which every predictive was evaluated.
    predictives : dict
        Model name -> predictive distribution at ``x``
        (:class:`bayeskern.predictive.MixturePredictive`), one colour each.
    X_test, y_test, X_train, y_train : arrays, optional
        Observed points drawn on top (held-out red, training black).
    prob : float, default 0.95
        Central probability of the intervals.
    ax : matplotlib Axes, optional

    Returns
    -------
    matplotlib Axes
    """
    ax = axes_or_new(ax, (9, 4.2))
    x = np.ravel(x)
    order = np.argsort(x)
    for i, (name, pred) in enumerate(predictives.items()):
        lo, hi = pred.interval(prob)
        color = f"C{i}"
        ax.fill_between(
            x[order],
            lo[order],
            hi[order],
            alpha=0.2,
            color=color,
            lw=0,
            label=f"{name}: {int(round(prob * 100))} % interval",
        )
        ax.plot(x[order], lo[order], color=color, lw=0.5, alpha=0.7)
        ax.plot(x[order], hi[order], color=color, lw=0.5, alpha=0.7)
        ax.plot(x[order], pred.mean()[order], color=color, lw=1.2, label=f"{name}: mean")
    return _with_data(ax, X_train, y_train, X_test, y_test, size=3)


def _with_data(ax, X_train, y_train, X_test, y_test, size):
    """Draw the training (black) and held-out (red) points on ``ax`` and its legend."""
    if X_train is not None:
        ax.plot(np.ravel(X_train), y_train, ".", ms=size, color="k", label="training data")
    if X_test is not None:
        ax.plot(np.ravel(X_test), y_test, ".", ms=size + 0.5, color="C3", label="held-out data")
    ax.legend(loc="best", fontsize=8)
    return ax


def plot_observed_vs_predicted(y, predictive, *, prob=0.9, ax=None):
    """Observed against predicted with central ``prob`` intervals as error bars."""
    ax = axes_or_new(ax, (5, 5))
    m = predictive.mean()
    lo, hi = predictive.interval(prob)
    ax.errorbar(
        m,
        y,
        xerr=[m - lo, hi - m],
        fmt=".",
        ms=3,
        alpha=0.6,
        elinewidth=0.6,
        label=f"mean and {int(prob * 100)} % interval",
    )
    lims = [min(np.min(y), np.min(lo)), max(np.max(y), np.max(hi))]
    ax.plot(lims, lims, "k--", lw=0.8)
    ax.set_xlabel("predicted")
    ax.set_ylabel("observed")
    ax.legend(fontsize=8)
    return ax


def plot_pit(y, predictive, *, bins=10, ax=None):
    """Histogram of the probability integral transform :math:`F(y)`; flat when calibrated."""
    ax = axes_or_new(ax)
    pit = predictive.cdf(y)
    ax.hist(pit, bins=bins, range=(0, 1), density=True, color="C0", alpha=0.7, edgecolor="w")
    ax.axhline(1.0, color="k", ls="--", lw=0.8)
    ax.set_xlabel("PIT value F(y)")
    ax.set_ylabel("density")
    return ax


def plot_reliability(y, p, *, n_bins=10, ax=None):
    """Reliability diagram: observed frequency against predicted probability per bin."""
    ax = axes_or_new(ax, (5, 5))
    y = np.asarray(y, dtype=float)
    p = np.asarray(p, dtype=float)
    bins = np.minimum((p * n_bins).astype(int), n_bins - 1)
    centers, freq, counts = [], [], []
    for b in range(n_bins):
        m = bins == b
        if m.any():
            centers.append(p[m].mean())
            freq.append(y[m].mean())
            counts.append(m.sum())
    ax.plot([0, 1], [0, 1], "k--", lw=0.8, label="perfect calibration")
    ax.plot(centers, freq, "o-", color="C0", label="model")
    for c, f, n in zip(centers, freq, counts, strict=True):
        ax.annotate(str(n), (c, f), fontsize=6, xytext=(2, 2), textcoords="offset points")
    ax.set_xlabel("predicted probability")
    ax.set_ylabel("observed frequency")
    ax.legend(fontsize=8)
    return ax


def plot_roc(y, p, *, ax=None, label="model"):
    """ROC curve with its AUC in the legend."""
    ax = axes_or_new(ax, (5, 5))
    fpr, tpr, _ = skm.roc_curve(y, p)
    ax.plot(fpr, tpr, label=f"{label} (AUC {skm.auc(fpr, tpr):.3f})")
    ax.plot([0, 1], [0, 1], "k--", lw=0.8)
    ax.set_xlabel("false positive rate")
    ax.set_ylabel("true positive rate")
    ax.legend(fontsize=8)
    return ax


def trace_variables(idata) -> list[str]:
    """Posterior variables whose traces are worth a look.

    Those of at most one dimension besides chain and draw, without the latent function's
    values (:data:`bayeskern.diagnostics.LATENT_VARIABLES`) and the data-unit restatements
    (the variables :func:`bayeskern.diagnostics.convergence_report` judges by default), and
    without a sampler coordinate ``name_raw`` whose recorded value ``name`` is there too (the
    same draws through a monotone map: the same ranks, the same ESS).
    """
    post = idata.posterior
    return [
        v
        for v in post.data_vars
        if post[v].ndim <= 3
        and v not in diagnostics.LATENT_VARIABLES
        and not v.endswith(diagnostics.DATA_UNITS_SUFFIX)
        and not (v.endswith("_raw") and v[: -len("_raw")] in post)
    ]


def plot_trace(idata, var_names=None, *, max_vars=6, convergence=None):
    """Trace and per-chain marginal of up to ``max_vars`` scalar posterior quantities.

    Each element of each variable in ``var_names`` (default :func:`trace_variables`) is one
    row of panels: its draws against the iteration, one colour per chain, and its histogram
    per chain (chains that disagree show as shifted histograms). With ``convergence``, the
    :class:`~bayeskern.convergence.ConvergenceReport` of the same draws, the rows show the
    quantities that mixed worst (Vehtari et al. 2021): ordered by the smaller of their bulk
    and tail ESS, those without an ESS (too few draws) first, each labelled with its R-hat
    and ESS; otherwise the first ``max_vars`` in the order of ``var_names``.
    """
    post = idata.posterior
    var_names = trace_variables(idata) if var_names is None else var_names
    series = []
    for v in var_names:
        a = np.asarray(post[v])
        flat = a.reshape(a.shape[0], a.shape[1], -1)
        names = [v] if a.ndim == 2 else [f"{v}[{j}]" for j in range(flat.shape[-1])]
        series += list(zip(names, np.moveaxis(flat, -1, 0), strict=True))
    if convergence is not None:
        series = _worst_mixed_first(series, var_names, convergence.table)
    series = series[:max_vars]
    fig, axes = subplots(
        len(series), 2, figsize=(9, 1.6 * len(series) + 0.4), layout="constrained", squeeze=False
    )
    for (name, a), (ax_t, ax_h) in zip(series, axes, strict=True):
        for c in range(a.shape[0]):
            ax_t.plot(a[c], lw=0.5, alpha=0.8)
            ax_h.hist(a[c], bins=30, histtype="step", density=True)
        ax_t.set_ylabel(name, fontsize=8)
    axes[0, 0].set_title("trace (one colour per chain)", fontsize=9)
    axes[0, 1].set_title("marginal per chain", fontsize=9)
    return axes


def _worst_mixed_first(series, var_names, table):
    """``series`` sorted by the smaller ESS of their rows of a convergence ``table``.

    The table (ArviZ's summary) lists a variable's elements in the order its values flatten,
    so the k-th row labelled ``var[...]`` is element k of ``var``. Quantities the table lacks
    go last, in their order; each label gets its R-hat and bulk/tail ESS.
    """
    rows = {}
    for v in var_names:
        labels = [lab for lab in table.index if lab.split("[", 1)[0] == v]
        for j, lab in enumerate(labels):
            rows[v if len(labels) == 1 and lab == v else f"{v}[{j}]"] = table.loc[lab]

    def key(item):
        row = rows.get(item[0])
        if row is None:
            return np.inf
        ess = min(float(row["ess_bulk"]), float(row["ess_tail"]))
        return -np.inf if np.isnan(ess) else ess

    out = []
    for name, a in sorted(series, key=key):
        row = rows.get(name)
        if row is not None:
            name = (
                f"{name}\nR-hat {float(row['r_hat']):.3f}\n"
                f"ESS {float(row['ess_bulk']):.0f} / {float(row['ess_tail']):.0f}"
            )
        out.append((name, a))
    return out


def plot_pareto_k(loo_result, *, ax=None):
    """Pareto k of each observation (PSIS-LOO), with the 0.7 reliability threshold.

    Non-finite k (PSIS could not fit the tail) are drawn as red crosses at the top of the axis.
    """
    ax = axes_or_new(ax, (8, 3))
    k = np.asarray(loo_result.pareto_k, dtype=float).ravel()
    idx = np.arange(k.size)
    ok = np.isfinite(k)
    ax.plot(idx[ok], k[ok], ".", ms=3)
    if not ok.all():
        top = max(1.0, float(k[ok].max()) if ok.any() else 1.0)
        ax.plot(idx[~ok], np.full((~ok).sum(), top), "x", color="C3", label="k not finite")
    ax.set_xlim(-0.5, max(k.size - 0.5, 0.5))
    ax.axhline(0.7, color="C3", ls="--", lw=0.8, label="k = 0.7")
    ax.set_xlabel("observation")
    ax.set_ylabel("Pareto k")
    ax.legend(fontsize=8)
    return ax


# method-specific plots: bk.plots.vsk, .ckrbf, .labrbf, .conformal, .gabasr (importing them
# registers their report panels in bayeskern.plots.panels)
from bayeskern.plots import ckrbf, conformal, gabasr, labrbf, panels, vsk  # noqa: E402, F401
