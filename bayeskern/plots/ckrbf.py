r"""Plots for the cluster-based RBF kernel (seed 001): :math:`P_f(\alpha)` curves and cells."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.patches import Ellipse

from bayeskern.tuning import pf_curve

__all__ = ["plot_pf_curves", "plot_cells"]


def plot_pf_curves(named_scores: dict, *, alpha_min: float | None = None, ax=None):
    r"""Step curves :math:`\hat P_f(\alpha)` of several models on one axis (seed 001, Fig. 3).

    Parameters
    ----------
    named_scores : dict of model name to grid scores (array, or a DataFrame from
        :func:`bayeskern.tuning.grid_scores` / :func:`~bayeskern.tuning.precomputed_grid_scores`).
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
        _, ax = plt.subplots(figsize=(5, 3.5))
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
    (seed 001, Fig. 2). ``y`` (optional) sets the marker per class.

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
        raise ValueError("kernel must be a fitted CkRBF (call kernel.fit(X) first)")
    X = np.asarray(X, dtype=float)
    i, j = dims
    if ax is None:
        _, ax = plt.subplots(figsize=(4.5, 4))
    cells = np.asarray(kernel.cells(X))
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    markers = "o^sDvP*"
    classes = np.unique(y) if y is not None else [None]
    for a in range(kernel.n_cells_):
        col = colors[a % len(colors)]
        for m, c in enumerate(classes):
            sel = cells == a if c is None else (cells == a) & (np.asarray(y) == c)
            ax.scatter(X[sel, i], X[sel, j], s=12, color=col, marker=markers[m % len(markers)],
                       alpha=0.7, label=f"cell {a}" if m == 0 else None)
        S = kernel.covariances_[a][np.ix_([i, j], [i, j])]
        w, v = np.linalg.eigh(S)
        angle = np.degrees(np.arctan2(v[1, -1], v[0, -1]))
        ax.add_patch(Ellipse(kernel.cell_means_[a][[i, j]], *(4 * np.sqrt(np.maximum(w[::-1], 0))),
                             angle=angle, fill=False, color=col, lw=1.5))
    ax.set_xlabel(f"x{i}")
    ax.set_ylabel(f"x{j}")
    ax.legend(frameon=False, fontsize="small")
    return ax
