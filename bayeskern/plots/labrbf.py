"""Plots for LAB-RBF: the learned local bandwidths along one input (He et al. 2023, Fig. 1 (d))."""

from __future__ import annotations

import numpy as np

from bayeskern.estimators.labrbf import LABRBFRegressor
from bayeskern.kernels.labrbf import LABRBFFeatures
from bayeskern.plots._figure import subplots
from bayeskern.plots.panels import estimator_panels, kernel_panels

__all__ = ["plot_bandwidths", "plot_bandwidth_map"]


def plot_bandwidths(
    estimator,
    X=None,
    y=None,
    *,
    feature: int = 0,
    n_grid: int = 400,
    interval: float | None = 0.9,
    ax=None,
):
    r"""Fitted function and learned bandwidths :math:`\theta_i` along input ``feature``.

    Reproduces the idea of Fig. 1 (d) of He et al. (2023): where the target varies fast the trained
    bandwidths are large (narrow kernels), where it is smooth they are small. The left axis
    shows the data ``(X, y)`` (if given), the support points and, for one-dimensional inputs,
    the predictive mean of a :class:`~bayeskern.estimators.labrbf.LABRBFRegressor` with its
    central ``interval``; the right axis shows :math:`\theta_i` (data units) at each support
    point.

    Parameters
    ----------
    estimator : fitted ``LABRBFRegressor``.
    X, y : optional data to draw as points.
    feature : int
        Input column on the horizontal axis.
    n_grid : int
        Points of the prediction curve (one-dimensional inputs only).
    interval : float or None
        Probability of the shaded predictive interval; ``None`` draws none.
    ax : matplotlib Axes or None

    Returns
    -------
    (ax, ax_bandwidth) : the two axes.
    """
    if ax is None:
        _, ax = subplots(figsize=(7, 3.5))
    sv = estimator.support_vectors_
    theta = estimator.bandwidths_[:, feature]
    if X is not None and y is not None:
        ax.plot(np.asarray(X)[:, feature], y, "k+", ms=4, alpha=0.5, label="data")
    if estimator.n_features_in_ == 1:
        lo_x = sv[:, 0].min() if X is None else min(sv[:, 0].min(), np.min(X))
        hi_x = sv[:, 0].max() if X is None else max(sv[:, 0].max(), np.max(X))
        grid = np.linspace(lo_x, hi_x, n_grid)[:, None]
        pred = estimator.predictive(grid)
        ax.plot(grid[:, 0], pred.mean(), "C0-", label="LAB-RBF mean")
        if interval is not None:
            lo, hi = pred.interval(interval)
            ax.fill_between(
                grid[:, 0],
                lo,
                hi,
                color="C0",
                alpha=0.2,
                label=f"{int(round(100 * interval))}% interval",
            )
    ax.plot(
        sv[:, feature],
        estimator.predict_krr(sv),
        "o",
        mfc="white",
        mec="C1",
        ms=5,
        label="support points",
    )
    ax.set_xlabel(f"x[{feature}]")
    ax.set_ylabel("y")
    ax2 = ax.twinx()
    order = np.argsort(sv[:, feature])
    ax2.stem(sv[order, feature], theta[order], linefmt="C3-", markerfmt="C3.", basefmt=" ")
    ax2.set_ylabel(r"bandwidth $\theta_i$", color="C3")
    ax.legend(loc="upper left", fontsize="small")
    return ax, ax2


def plot_bandwidth_map(
    support, bandwidths, *, y_support=None, feature_names=None, units: str = "data units"
):
    r"""Report panel of LAB-RBF: support points coloured by learned bandwidth, and their spread.

    The bandwidth of support point :math:`x_i` is summarized by the geometric mean of its
    per-column :math:`\theta_i` (He et al. 2023, eq. 1: large :math:`\theta_i` = narrow kernel,
    fitted where the target varies fast). Left: support points on the first two input
    columns (one column: against ``y_support``, or along a line), coloured by that
    bandwidth on a log scale. Right: histogram of :math:`\log_{10}` bandwidths.

    Returns
    -------
    matplotlib.figure.Figure
    """
    from matplotlib.colors import LogNorm

    S = np.asarray(support, dtype=float)
    T = np.abs(np.asarray(bandwidths, dtype=float))
    g = np.exp(np.mean(np.log(np.maximum(T, 1e-300)), axis=1))
    names = (
        list(feature_names) if feature_names is not None else [f"x{j}" for j in range(S.shape[1])]
    )
    fig, (ax, ax2) = subplots(
        1, 2, figsize=(10, 4), layout="constrained", gridspec_kw={"width_ratios": [3, 2]}
    )
    if S.shape[1] >= 2:
        xs, ys, ylab = S[:, 0], S[:, 1], names[1]
    elif y_support is not None:
        xs, ys, ylab = S[:, 0], np.asarray(y_support, float), "target"
    else:
        xs, ys, ylab = S[:, 0], np.zeros(len(S)), ""
    norm = LogNorm(vmin=g.min(), vmax=g.max()) if g.min() > 0 and g.max() > g.min() else None
    sc = ax.scatter(xs, ys, c=g, cmap="viridis", norm=norm, s=30, edgecolor="k", linewidth=0.3)
    fig.colorbar(sc, ax=ax, label=f"bandwidth θ ({units}, geometric mean over columns)")
    ax.set_xlabel(names[0])
    ax.set_ylabel(ylab)
    ax.set_title(f"{len(S)} support points", fontsize=9)
    ax2.hist(
        np.log10(np.maximum(g, 1e-300)),
        bins=min(30, max(5, len(g) // 3)),
        color="tab:green",
        alpha=0.8,
        edgecolor="w",
    )
    ax2.set_xlabel(r"$\log_{10}$ bandwidth θ")
    ax2.set_ylabel("support points")
    ax2.set_title("distribution of learned bandwidths", fontsize=9)
    return fig


@kernel_panels.register(LABRBFFeatures)
def _(kernel, X, y=None, theta=None, feature_names=None) -> list:
    # bandwidth map of the trained support points
    s = 1.0
    if theta and kernel.name_ is not None and kernel._site("bandwidth_scale") in theta:
        s = float(np.asarray(theta[kernel._site("bandwidth_scale")]))
    support = np.asarray(kernel.support_) * kernel.half_range_ + kernel.center_
    fig = plot_bandwidth_map(
        support,
        s * np.asarray(kernel.bandwidths_) / kernel.half_range_,
        feature_names=feature_names,
        units="per standardized unit",
    )
    return [
        (
            "LAB-RBF: learned bandwidth map",
            fig,
            "Each support point of the LAB-RBF features is coloured by its trained "
            "bandwidth θ (times the posterior-median multiplier s); large θ means a narrow "
            "kernel, which Algorithm 1 learns where the target changes fast, and the "
            "histogram on the right shows how widely the learned bandwidths spread.",
        )
    ]


@estimator_panels.register(LABRBFRegressor)
def _(est) -> list:
    sv = est.support_vectors_
    names = getattr(est, "feature_names_in_", None)
    fig = plot_bandwidth_map(
        sv,
        est.bandwidths_,
        y_support=est.predict_krr(sv),
        feature_names=None if names is None else list(names),
    )
    return [
        (
            "LAB-RBF: learned bandwidth map",
            fig,
            "Each support point is coloured by its trained bandwidth θ (per unit of the "
            "input; large θ = narrow kernel, learned where the target changes fast), and "
            "the histogram shows how widely the learned bandwidths spread.",
        )
    ]
