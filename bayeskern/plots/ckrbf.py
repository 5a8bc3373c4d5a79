r"""Plots for the cluster-based RBF kernel: :math:`P_f(\alpha)` curves and cells.

The kernel and the :math:`P_f(\alpha)` index are those of Czarnecki & Tabor (2014).
"""

from __future__ import annotations

import matplotlib
import numpy as np
from matplotlib.patches import Ellipse

from bayeskern.experiments.tuning import pf_curve
from bayeskern.kernels.ckrbf import CkRBF
from bayeskern.plots._figure import subplots
from bayeskern.plots.panels import kernel_panels

__all__ = ["plot_pf_curves", "plot_cells", "plot_ckrbf_panel"]


def plot_pf_curves(named_scores: dict, *, alpha_min: float | None = None, ax=None):
    r"""Step curves :math:`\hat P_f(\alpha)` of several models on one axis.

    As in Czarnecki & Tabor (2014), Fig. 3.

    Parameters
    ----------
    named_scores : dict of model name to grid scores (array, or a DataFrame from
        :func:`bayeskern.experiments.tuning.grid_scores` /
        :func:`~bayeskern.experiments.tuning.precomputed_grid_scores`).
    alpha_min : left end of the :math:`\alpha` axis; default the worst score of all models
        (below it every curve is 1).
    ax : matplotlib axes, created when ``None``.

    Returns
    -------
    matplotlib.axes.Axes
    """
    if not named_scores:
        raise ValueError("named_scores is empty")
    if ax is None:
        _, ax = subplots(figsize=(5, 3.5))
    curves = {name: pf_curve(s)[0] for name, s in named_scores.items()}
    lo = min(a.min() for a in curves.values()) if alpha_min is None else float(alpha_min)
    hi = max(a.max() for a in curves.values())
    # the distinct scores are where the curves jump; a dense grid draws the flat parts
    alphas = np.unique(np.concatenate([np.linspace(lo, hi, 400), *curves.values()]))
    alphas = alphas[alphas >= lo]
    for name, s in named_scores.items():
        ax.plot(alphas, pf_curve(s, alphas)[1], drawstyle="steps-pre", label=name)
    ax.set_xlim(lo, hi)
    ax.set_ylim(0, 1.02)
    ax.set_xlabel(r"$\alpha$ (cross-validated score)")
    ax.set_ylabel(r"$\hat P_f(\alpha)$: share of grid $\geq \alpha$")
    ax.legend(frameon=False)
    return ax


def plot_cells(kernel, X, y=None, *, dims=(0, 1), ax=None):
    r"""Points coloured by their :math:`C_k\mathrm{RBF}` cell, with each cell's covariance.

    Draws the 2-sigma ellipse of :math:`\Sigma_a` projected on ``dims`` at the cell mean
    (Czarnecki & Tabor 2014, Fig. 2). ``y`` (optional) sets the marker per class.

    Parameters
    ----------
    kernel : a fitted :class:`~bayeskern.kernels.ckrbf.CkRBF`.
    X : (n, d) inputs in the units the kernel was fitted on.
    y : optional labels.
    dims : the two input columns to show.
    ax : matplotlib axes, created when ``None``.

    Returns
    -------
    matplotlib.axes.Axes
    """
    if not getattr(kernel, "is_fitted", False) or not hasattr(kernel, "covariances_"):
        raise ValueError("kernel must be a fitted CkRBF (bayeskern.learning.fit_kernel(kernel, X))")
    X = np.asarray(X, dtype=float)
    i, j = dims
    if ax is None:
        _, ax = subplots(figsize=(4.5, 4))
    cells = np.asarray(kernel.cells(X))
    colors = matplotlib.rcParams["axes.prop_cycle"].by_key()["color"]
    markers = "o^sDvP*"
    classes = np.unique(y) if y is not None else [None]
    for a in range(kernel.n_cells_):
        col = colors[a % len(colors)]
        for m, c in enumerate(classes):
            sel = cells == a if c is None else (cells == a) & (np.asarray(y) == c)
            ax.scatter(
                X[sel, i],
                X[sel, j],
                s=12,
                color=col,
                marker=markers[m % len(markers)],
                alpha=0.7,
                label=f"cell {a}" if m == 0 else None,
            )
        S = kernel.covariances_[a][np.ix_([i, j], [i, j])]
        w, v = np.linalg.eigh(S)
        angle = np.degrees(np.arctan2(v[1, -1], v[0, -1]))
        ax.add_patch(
            Ellipse(
                kernel.cell_means_[a][[i, j]],
                *(4 * np.sqrt(np.maximum(w[::-1], 0))),
                angle=angle,
                fill=False,
                color=col,
                lw=1.5,
            )
        )
    ax.set_xlabel(f"x{i}")
    ax.set_ylabel(f"x{j}")
    ax.legend(frameon=False, fontsize="small")
    return ax


def plot_ckrbf_panel(kernel, X, y=None, *, tuning_scores: dict | None = None, feature_names=None):
    r"""Report panel of a fitted :class:`~bayeskern.kernels.CkRBF`.

    Left: the points in a 2-D projection (the first two principal axes of ``X``; the input
    itself when it has one or two columns), coloured by cell, with each cell's 2-sigma
    ellipse of :math:`P^\top\Sigma_a P` (Czarnecki & Tabor 2014, Fig. 2). Middle: each cell's size
    and its bandwidth :math:`\sqrt{\mathrm{tr}\,\Sigma_a / d}`. Right (only with
    ``tuning_scores``, a dict of model name to grid scores): the :math:`\hat P_f(\alpha)`
    curves of :func:`plot_pf_curves` (Czarnecki & Tabor 2014, Fig. 3).

    Returns
    -------
    matplotlib.figure.Figure
    """
    X = np.asarray(X, dtype=float)
    n, d = X.shape
    ncols = 3 if tuning_scores else 2
    fig, axes = subplots(1, ncols, figsize=(4.2 * ncols, 4), layout="constrained")
    ax = axes[0]
    cells = np.asarray(kernel.cells(X))
    mean = X.mean(axis=0)
    if d == 1:
        P = np.eye(1)
        Z = np.column_stack([X[:, 0], np.zeros(n) if y is None else np.asarray(y, float)])
        labels = [
            feature_names[0] if feature_names is not None else "x0",
            "0" if y is None else "y",
        ]
    elif d == 2:
        P = np.eye(2)
        Z = X
        labels = list(feature_names[:2]) if feature_names is not None else ["x0", "x1"]
    else:
        P = np.linalg.svd(X - mean, full_matrices=False)[2][:2].T
        Z = (X - mean) @ P + mean @ P
        labels = ["principal axis 1", "principal axis 2"]
    colors = matplotlib.rcParams["axes.prop_cycle"].by_key()["color"]
    for a in range(kernel.n_cells_):
        col = colors[a % len(colors)]
        sel = cells == a
        ax.scatter(Z[sel, 0], Z[sel, 1], s=12, color=col, alpha=0.7, label=f"cell {a}")
        if d >= 2:
            S = P.T @ kernel.covariances_[a] @ P
            w, v = np.linalg.eigh(S)
            angle = np.degrees(np.arctan2(v[1, -1], v[0, -1]))
            ax.add_patch(
                Ellipse(
                    kernel.cell_means_[a] @ P,
                    *(4 * np.sqrt(np.maximum(w[::-1], 0))),
                    angle=angle,
                    fill=False,
                    color=col,
                    lw=1.5,
                )
            )
    ax.set_xlabel(f"{labels[0]} (standardized)" if d <= 2 else labels[0])
    ax.set_ylabel(labels[1])
    ax.legend(frameon=False, fontsize="small")
    ax.set_title("cells", fontsize=9)
    ax = axes[1]
    sizes = np.bincount(cells, minlength=kernel.n_cells_)
    bw = np.sqrt(np.trace(kernel.covariances_, axis1=1, axis2=2) / d)
    idx = np.arange(kernel.n_cells_)
    ax.bar(idx - 0.2, sizes, width=0.4, color="tab:gray", label="points")
    ax.set_xticks(idx, [f"cell {a}" for a in idx])
    ax.set_ylabel("points in cell")
    ax_r = ax.twinx()
    ax_r.bar(idx + 0.2, bw, width=0.4, color="tab:orange", label="bandwidth")
    ax_r.set_ylabel(r"bandwidth $\sqrt{\mathrm{tr}\,\Sigma_a/d}$", color="tab:orange")
    ax.set_title("cell sizes (grey) and bandwidths (orange)", fontsize=9)
    if tuning_scores:
        plot_pf_curves(tuning_scores, ax=axes[2])
        axes[2].set_title(r"$\hat P_f(\alpha)$ of the tuning grid", fontsize=9)
    return fig


@kernel_panels.register(CkRBF)
def _(kernel, X, y=None, theta=None, feature_names=None) -> list:
    # cells and per-cell bandwidths
    scores = getattr(kernel, "tuning_scores_", None)
    fig = plot_ckrbf_panel(kernel, X, y, tuning_scores=scores, feature_names=feature_names)
    pf = (
        "the right plot is the share of the (C, γ) tuning grid that scores at least α, "
        "P_f(α): higher curves mean a model that is easier to tune"
        if scores
        else "no P_f(α) curve is shown because no tuning-grid scores are attached (a Bayesian GP "
        "samples γ instead of tuning it; see bayeskern.experiments.tuning.grid_scores)"
    )
    return [
        (
            "CkRBF: clusters and per-cell bandwidths",
            fig,
            f"The training points are split into {kernel.n_cells_} cells, each with its own "
            "covariance Σ_a (ellipse: 2 standard deviations) that sets the kernel's "
            f"bandwidth near those points (bars: cell size and √(tr Σ_a/d)); {pf}.",
        )
    ]
