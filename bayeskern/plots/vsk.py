"""Plots for variably scaled kernels (Campi et al. 2021): the shape-parameter study of Fig. 2.

Each function takes an optional ``ax`` and returns the ``Axes`` it drew on.
"""

from __future__ import annotations

import numpy as np

from bayeskern.kernels.vsk import VSK
from bayeskern.plots._figure import axes_or_new, subplots
from bayeskern.plots.panels import kernel_panels

__all__ = ["plot_shape_sweep", "plot_psi", "plot_vsk_panel"]

_STYLE = {0: dict(marker="^", color="tab:red"), 1: dict(marker="o", color="tab:blue")}


def plot_shape_sweep(sweeps: dict, quantity: str = "cond", ax=None):
    """Condition number (or KRN error) against the shape parameter, semi-log (Fig. 2).

    Parameters
    ----------
    sweeps : dict name -> result of :func:`bayeskern.experiments.conditioning.shape_sweep`
        e.g. ``{"KRN": plain, "KRN-VSK": vsk}``; the paper draws the classical kernel with
        red triangles and the VSK with blue dots (the first two entries get that style).
    quantity : {"cond", "error", "spectral_ratio"}
    ax : matplotlib Axes, optional
    """
    ax = axes_or_new(ax)
    for i, (name, res) in enumerate(sweeps.items()):
        if quantity not in res:
            raise ValueError(f"sweep {name!r} has no {quantity!r} (give targets for 'error')")
        style = _STYLE.get(i, {})
        ax.semilogy(res["shape"], res[quantity], ls="none", ms=3, label=name, **style)
    ax.set_xlabel(r"shape parameter $\gamma$")
    ax.set_ylabel(
        {
            "cond": "condition number",
            "error": "test error",
            "spectral_ratio": "spectral ratio S(K)",
        }.get(quantity, quantity)
    )
    ax.legend()
    return ax


def plot_psi(estimator, X, feature: int = 0, y=None, ax=None):
    """Plot the learned scaling function ψ along one input column (sorted), optionally targets.

    ``estimator`` is a fitted ``VSKClassifier`` / ``VSKRegressor`` (anything with ``psi``
    or ``scaling_``) or a fitted :class:`~bayeskern.kernels.vsk.VSK` kernel.
    """
    ax = axes_or_new(ax)
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


def plot_vsk_panel(kernel, X, y=None, theta=None, feature_names=None, max_points: int = 400):
    r"""Report panel of a fitted :class:`~bayeskern.kernels.VSK`: ψ and condition numbers.

    Left: the learned scaling function :math:`\psi` against the input column it correlates
    with most (points coloured by ``y``). Right: the 2-condition numbers
    :math:`\kappa(K) = \lambda_{\max}/\lambda_{\min}` of the base Gram matrix :math:`K` and
    of the VSK matrix :math:`K^\Psi` (Campi et al. 2021, Theorems 3/6 and Proposition 1) on (up to
    ``max_points`` of) the rows of ``X`` at the hyper-parameters ``theta`` (e.g. posterior
    medians; default: the kernel's fixed values / defaults).

    Returns
    -------
    matplotlib.figure.Figure
    """
    from bayeskern.kernels.base import default_theta
    from bayeskern.kernels.conditioning import condition_number

    X = np.asarray(X, dtype=float)[:max_points]
    y = None if y is None else np.asarray(y)[:max_points]
    theta = default_theta(kernel, np.ones(X.shape[1])) if theta is None else theta
    psi = np.asarray(kernel.psi(X))[:, 0]
    corr = [
        abs(np.corrcoef(X[:, j], psi)[0, 1]) if X[:, j].std() > 0 else 0.0
        for j in range(X.shape[1])
    ]
    j = int(np.nanargmax(corr)) if np.any(np.isfinite(corr)) else 0
    name = feature_names[j] if feature_names is not None else f"x{j}"
    fig, (ax, ax2) = subplots(
        1, 2, figsize=(10, 4), layout="constrained", gridspec_kw={"width_ratios": [2, 1]}
    )
    ax.scatter(X[:, j], psi, c=None if y is None else y, s=12, cmap="coolwarm", alpha=0.8)
    ax.set_xlabel(f"{name} (standardized)")
    ax.set_ylabel(r"$\psi(x)$")
    ax.set_title(r"learned scaling function $\psi$", fontsize=9)
    K, Kpsi = (np.asarray(a) for a in kernel.block_grams(theta, X, X))
    KP = K + Kpsi if kernel._form() == "sum" else K * Kpsi
    conds = [condition_number(K), condition_number(KP)]
    shown = [c if np.isfinite(c) else 1e17 for c in conds]
    ax2.bar(["K (base)", r"$K^\Psi$ (VSK)"], shown, color=["tab:red", "tab:blue"])
    ax2.set_yscale("log")
    for i, c in enumerate(conds):
        ax2.annotate(
            f"{c:.2e}" if np.isfinite(c) else "singular",
            (i, shown[i]),
            ha="center",
            va="bottom",
            fontsize=8,
        )
    ax2.set_ylabel("condition number")
    ax2.set_title(f"training Gram matrices ({len(X)} rows)", fontsize=9)
    return fig


@kernel_panels.register(VSK)
def _(kernel, X, y=None, theta=None, feature_names=None) -> list:
    # ψ and the condition numbers of K and K^Ψ
    fig = plot_vsk_panel(kernel, X, y, theta, feature_names)
    return [
        (
            "VSK: scaling function ψ and conditioning",
            fig,
            "Left: the learned scaling function ψ(x), which the VSK appends to the inputs "
            "as an extra coordinate so that points with different ψ are less correlated; "
            "right: condition numbers of the plain kernel matrix K and of the VSK matrix "
            "K^Ψ on the training rows at the posterior-median hyper-parameters (lower is "
            "numerically safer).",
        )
    ]
