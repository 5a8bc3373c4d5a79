"""Plots for GaBaSR: the learned spectral density and the predictive bands.

Each function takes an optional matplotlib ``ax`` and returns it.
"""

from __future__ import annotations

import numpy as np

from bayeskern.estimators.gabasr import GaBaSRClassifier, GaBaSRRegressor
from bayeskern.plots._figure import subplots
from bayeskern.plots.panels import estimator_panels

__all__ = ["plot_spectral_density", "plot_predictive", "plot_invariant_traces"]


def _ax(ax):
    if ax is None:
        _, ax = subplots(figsize=(7, 3.5))
    return ax


def plot_spectral_density(est, omega_grid=None, *, cycles: bool = True, band: float = 0.9,
                          ax=None):
    """Posterior mean of the learned spectral density with a central ``band``.

    ``cycles=True`` labels the axis in cycles per unit of ``x`` (:math:`\\omega / 2\\pi`);
    ``omega_grid`` is in angular frequency (radians per unit of ``x``).
    """
    ax = _ax(ax)
    grid, mean, lo, hi = est.spectral_density(omega_grid, band=band)
    f = grid / (2 * np.pi) if cycles else grid
    scale = 2 * np.pi if cycles else 1.0  # density per cycle instead of per radian
    ax.fill_between(f, lo * scale, hi * scale, alpha=0.3, label=f"{int(band * 100)} % band")
    ax.plot(f, mean * scale, lw=1.5, label="posterior mean")
    ax.set_xlabel("frequency (cycles per unit of x)" if cycles else "ω (rad per unit of x)")
    ax.set_ylabel("spectral density")
    ax.legend(loc="upper right")
    return ax


def plot_predictive(est, X_train, y_train, X_new, y_new=None, *, prob: float = 0.95, ax=None):
    """Training data, predictive mean and central ``prob`` interval over ``X_new`` (1-D)."""
    ax = _ax(ax)
    x_new = np.asarray(X_new, float)[:, 0]
    order = np.argsort(x_new)
    pred = est.predictive(np.asarray(X_new)[order])
    lo, hi = pred.interval(prob)
    ax.plot(np.asarray(X_train)[:, 0], y_train, ".", ms=2, color="k", label="train")
    if y_new is not None:
        ax.plot(x_new[order], np.asarray(y_new)[order], ".", ms=3, color="C3", label="held out")
    ax.fill_between(x_new[order], lo, hi, alpha=0.3, color="C0",
                    label=f"{int(prob * 100)} % predictive")
    ax.plot(x_new[order], pred.mean(), color="C0", lw=1, label="predictive mean")
    ax.legend(loc="upper left")
    return ax


def plot_invariant_traces(est, ax=None):
    """Trace of the log marginal likelihood (or log-likelihood) per chain."""
    ax = _ax(ax)
    post = est.idata_.posterior
    name = "log_marginal" if "log_marginal" in post else "log_lik"
    v = np.asarray(post[name])
    for c in range(v.shape[0]):
        ax.plot(v[c], lw=0.7, label=f"chain {c}")
    ax.set_xlabel("draw")
    ax.set_ylabel(name)
    ax.legend(loc="lower right")
    return ax


@estimator_panels.register(GaBaSRRegressor)
@estimator_panels.register(GaBaSRClassifier)
def _(est) -> list:
    # the learned spectral density with its band
    ax = plot_spectral_density(est)
    ax.set_title("learned spectral density (first input column)", fontsize=9)
    held = "; ".join(f"chain {c}: " + ", ".join(f"{f:.3g}" for f in g["frequency"])
                     for c, g in est.chain_modes().groupby("chain"))
    return [("GaBaSR: learned spectral density", ax.figure,
             "The posterior mean (line) and 90 % band of the spectral density that GaBaSR "
             "learned: peaks are the frequencies (cycles per unit of the first input) at "
             "which the fitted function oscillates, and mass near zero is smooth trend. "
             f"Peaks each chain holds (cycles per unit, chain_modes()): {held}.")]
