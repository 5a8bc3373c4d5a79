"""Plots for variably scaled kernels (seed 000): the shape-parameter study of Fig. 2.

Each function takes an optional ``ax`` and returns the ``Axes`` it drew on.
"""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np

__all__ = ["plot_shape_sweep", "plot_psi"]

_STYLE = {0: dict(marker="^", color="tab:red"), 1: dict(marker="o", color="tab:blue")}


def _ax(ax):
    if ax is None:
        _, ax = plt.subplots(figsize=(6.4, 4.0), layout="constrained")
    return ax


def plot_shape_sweep(sweeps: dict, quantity: str = "cond", ax=None):
    """Condition number (or KRN error) against the shape parameter, semi-log (Fig. 2).

    Parameters
    ----------
    sweeps : dict name -> result of :func:`bayeskern.kernels.conditioning.shape_sweep`
        e.g. ``{"KRN": plain, "KRN-VSK": vsk}``; the paper draws the classical kernel with
        red triangles and the VSK with blue dots (the first two entries get that style).
    quantity : {"cond", "error", "spectral_ratio"}
    ax : matplotlib Axes, optional
    """
    ax = _ax(ax)
    for i, (name, res) in enumerate(sweeps.items()):
        if quantity not in res:
            raise ValueError(f"sweep {name!r} has no {quantity!r} (give targets for 'error')")
        style = _STYLE.get(i, {})
        ax.semilogy(res["shape"], res[quantity], ls="none", ms=3, label=name, **style)
    ax.set_xlabel(r"shape parameter $\gamma$")
    ax.set_ylabel({"cond": "condition number", "error": "test error",
                   "spectral_ratio": "spectral ratio S(K)"}.get(quantity, quantity))
    ax.legend()
    return ax


def plot_psi(estimator, X, feature: int = 0, y=None, ax=None):
    """The learned scaling function ψ along one input column (sorted), with optional targets.

    ``estimator`` is a fitted ``VSKClassifier`` / ``VSKRegressor`` (anything with ``psi``
    or ``scaling_``) or a fitted :class:`~bayeskern.kernels.vsk.VSK` kernel.
    """
    ax = _ax(ax)
    X = np.asarray(X, dtype=float)
    if hasattr(estimator, "psi"):
        psi = np.asarray(estimator.psi(X))
    else:
        psi = np.asarray(estimator.scaling_.transform(X))
    order = np.argsort(X[:, feature])
    for j in range(psi.shape[1]):
        ax.plot(X[order, feature], psi[order, j], label=rf"$\psi_{j + 1}$")
    if y is not None:
        ax.plot(X[:, feature], np.asarray(y), "k.", ms=3, label="data")
    ax.set_xlabel(f"x[{feature}]")
    ax.set_ylabel(r"$\psi(x)$")
    ax.legend()
    return ax
