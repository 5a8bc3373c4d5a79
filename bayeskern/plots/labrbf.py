"""Plots for LAB-RBF: the learned local bandwidths along one input (seed 002, Fig. 1 (d))."""

from __future__ import annotations

import numpy as np

__all__ = ["plot_bandwidths"]


def plot_bandwidths(estimator, X=None, y=None, *, feature: int = 0, n_grid: int = 400,
                    interval: float | None = 0.9, ax=None):
    r"""Fitted function and learned bandwidths :math:`\theta_i` along input ``feature``.

    Reproduces the idea of Fig. 1 (d) of seed 002: where the target varies fast the trained
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
    import matplotlib.pyplot as plt

    if ax is None:
        _, ax = plt.subplots(figsize=(7, 3.5))
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
            ax.fill_between(grid[:, 0], lo, hi, color="C0", alpha=0.2,
                            label=f"{int(round(100 * interval))}% interval")
    ax.plot(sv[:, feature], estimator.predict_krr(sv), "o", mfc="white", mec="C1", ms=5,
            label="support points")
    ax.set_xlabel(f"x[{feature}]")
    ax.set_ylabel("y")
    ax2 = ax.twinx()
    order = np.argsort(sv[:, feature])
    ax2.stem(sv[order, feature], theta[order], linefmt="C3-", markerfmt="C3.", basefmt=" ")
    ax2.set_ylabel(r"bandwidth $\theta_i$", color="C3")
    ax.legend(loc="upper left", fontsize="small")
    return ax, ax2
