"""Plots for GaBaSR: the learned spectral density and the predictive bands.

Each function takes an optional matplotlib ``ax`` and returns it.
"""

from __future__ import annotations

import numpy as np

from bayeskern.estimators.gabasr import GaBaSRClassifier, GaBaSRRegressor
from bayeskern.models.gabasr_spectrum import mixture_components, spectral_density_band
from bayeskern.plots._figure import axes_or_new, subplots
from bayeskern.plots.panels import estimator_panels

__all__ = [
    "plot_spectral_density",
    "plot_spectral_density_band",
    "plot_predictive",
    "plot_invariant_traces",
]


def plot_spectral_density(est, omega_grid=None, *, cycles: bool = True, band: float = 0.9, ax=None):
    """Posterior mean of the learned spectral density with a central ``band``.

    ``cycles=True`` labels the axis in cycles per unit of ``x`` (:math:`\\omega / 2\\pi`);
    ``omega_grid`` is in angular frequency (radians per unit of ``x``).
    """
    ax = axes_or_new(ax, (7, 3.5), layout=None)
    grid, mean, lo, hi = est.spectral_density(omega_grid, band=band)
    f = grid / (2 * np.pi) if cycles else grid
    scale = 2 * np.pi if cycles else 1.0  # density per cycle instead of per radian
    ax.fill_between(f, lo * scale, hi * scale, alpha=0.3, label=f"{int(band * 100)} % band")
    ax.plot(f, mean * scale, lw=1.5, label="posterior mean")
    ax.set_xlabel("frequency (cycles per unit of x)" if cycles else "ω (rad per unit of x)")
    ax.set_ylabel("spectral density")
    ax.legend(loc="upper right")
    return ax


def _check_exact(est, name: str = "est") -> None:
    if getattr(est, "model_", None) not in ("exact", "hsgp") or not hasattr(est, "y_std_"):
        raise ValueError(
            f"{name} must be a GaBaSRRegressor fitted with the spectral-"
            f"mixture GP (model_ 'exact' or 'hsgp'), got {type(est).__name__} "
            f"with model_ = {getattr(est, 'model_', None)!r}"
        )


def plot_spectral_density_band(
    est, frequency=None, *, band: float = 0.9, unit: str = "unit of x", log: bool = True, ax=None
):
    """Median and central ``band`` of the learned spectral density of an exact-model fit.

    The density of every posterior draw, :math:`S(f) = s_y^2 \\sum_k a_k^2 N(f\\mid\\pm\\mu_k',
    \\sigma_k'^2)` (:func:`bayeskern.models.gabasr_spectrum.spectral_density_band`; GaBaSR,
    Pena-Llamas et al. 2023; the spectral-mixture kernel, Wilson & Adams 2013), in target
    units squared per (cycle per ``unit``), against frequency :math:`f \\ge 0` in cycles per
    ``unit`` of the first input column. The density is two-sided (symmetric in :math:`f`), so
    twice the area over :math:`f \\ge 0` is the stationary variance. Dotted lines mark the
    median frequency of each periodic component.

    Parameters
    ----------
    est : GaBaSRRegressor
        Fitted with the spectral-mixture GP (``model_`` ``"exact"`` or ``"hsgp"``).
    frequency : array, optional
        Cycles per ``unit``; default
        :func:`bayeskern.models.gabasr_spectrum.frequency_grid`.
    band : float, default 0.9
        Central probability of the pointwise band.
    unit : str, default "unit of x"
        Name of the unit of the first input column (axis label only).
    log : bool, default True
        Logarithmic density axis (a small harmonic next to a large annual peak).
    ax : matplotlib Axes, optional

    Returns
    -------
    matplotlib Axes
    """
    _check_exact(est)
    post = est.idata_.posterior
    b = spectral_density_band(
        post, est.x_scaler_.scale, frequency, y_scale=est.y_std_.scale, band=band
    )
    if ax is None:
        _, ax = subplots(figsize=(8, 3.8), layout="constrained")
    ax.fill_between(
        b.frequency,
        b.lower,
        b.upper,
        alpha=0.3,
        color="C0",
        lw=0,
        label=f"{int(round(band * 100))} % band (pointwise)",
    )
    ax.plot(b.frequency, b.median, color="C0", lw=1.2, label="posterior median")
    for c in mixture_components(post, est.x_scaler_.scale, band=band)[1:]:
        f, period = c["frequency"][0], c["period"][0]
        ax.axvline(f, color="C3", ls=":", lw=0.8)
        ax.annotate(
            f"period {period:#.4g} {unit}",
            (f, 0),
            xycoords=("data", "axes fraction"),
            xytext=(3, 4),
            textcoords="offset points",
            fontsize=7,
            color="C3",
            rotation=90,
            va="bottom",
        )
    if log:
        top = float(np.max(b.upper))
        ax.set_yscale("log")
        ax.set_ylim(top * 1e-6, top * 3)
    ax.set_xlim(float(b.frequency.min()), float(b.frequency.max()))
    ax.set_xlabel(f"frequency (cycles per {unit})")
    ax.set_ylabel(f"spectral density (variance per cycle/{unit})")
    ax.legend(loc="best", fontsize=8)
    return ax


def plot_predictive(est, X_train, y_train, X_new, y_new=None, *, prob: float = 0.95, ax=None):
    """Training data, predictive mean and central ``prob`` interval over ``X_new`` (1-D)."""
    ax = axes_or_new(ax, (7, 3.5), layout=None)
    x_new = np.asarray(X_new, float)[:, 0]
    order = np.argsort(x_new)
    pred = est.predictive(np.asarray(X_new)[order])
    lo, hi = pred.interval(prob)
    ax.plot(np.asarray(X_train)[:, 0], y_train, ".", ms=2, color="k", label="train")
    if y_new is not None:
        ax.plot(x_new[order], np.asarray(y_new)[order], ".", ms=3, color="C3", label="held out")
    ax.fill_between(
        x_new[order], lo, hi, alpha=0.3, color="C0", label=f"{int(prob * 100)} % predictive"
    )
    ax.plot(x_new[order], pred.mean(), color="C0", lw=1, label="predictive mean")
    ax.legend(loc="upper left")
    return ax


def plot_invariant_traces(est, ax=None):
    """Trace of the log marginal likelihood (or log-likelihood) per chain."""
    ax = axes_or_new(ax, (7, 3.5), layout=None)
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
    held = "; ".join(
        f"chain {c}: " + ", ".join(f"{f:.3g}" for f in g["frequency"])
        for c, g in est.chain_modes().groupby("chain")
    )
    return [
        (
            "GaBaSR: learned spectral density",
            ax.figure,
            "The posterior mean (line) and 90 % band of the spectral density that GaBaSR "
            "learned: peaks are the frequencies (cycles per unit of the first input) at "
            "which the fitted function oscillates, and mass near zero is smooth trend. "
            f"Peaks each chain holds (cycles per unit, chain_modes()): {held}.",
        )
    ]
