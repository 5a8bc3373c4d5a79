"""Report panels: figures describing what a fitted estimator and its kernel learned.

The HTML report (:mod:`bayeskern.report`) asks :func:`estimator_panels` for the method panels
of a fitted estimator. Both functions here are :func:`functools.singledispatch` registries:
the method modules of :mod:`bayeskern.plots` (``vsk``, ``ckrbf``, ``labrbf``, ``conformal``,
``gabasr``) register one function per kernel or estimator class. Kernels and estimators
never import plotting code; the registry lives above them.

A panel is a tuple ``(heading, figure, caption)``.
"""

from __future__ import annotations

import functools

import numpy as np

from bayeskern.estimators.gp import GPClassifier, GPRegressor
from bayeskern.kernels.base import Kernel, _Binary
from bayeskern.models.gp import theta_from_draw

__all__ = ["kernel_panels", "estimator_panels"]


@functools.singledispatch
def kernel_panels(kernel: Kernel, X, y=None, theta=None, feature_names=None) -> list:
    """Panels describing what a fitted kernel learned (none for a base kernel).

    Parameters
    ----------
    kernel : Kernel
        A fitted kernel; data-dependent kernels (VSK, CkRBF, LABRBFFeatures, Conformal) have
        panels registered, composite kernels collect their parts'.
    X, y : arrays
        The data the kernel was fitted on (the GP estimators' standardized inputs, 0/1
        labels or standardized targets).
    theta : dict, optional
        Hyper-parameter values (e.g. posterior medians), or ``None``.
    feature_names : list of str, optional
        Names of the columns of ``X``.

    Returns
    -------
    list of (str, matplotlib.figure.Figure, str)
    """
    return []


@kernel_panels.register
def _(kernel: _Binary, X, y=None, theta=None, feature_names=None) -> list:
    return kernel_panels(kernel.k1, X, y, theta, feature_names) + kernel_panels(
        kernel.k2, X, y, theta, feature_names
    )


@functools.singledispatch
def estimator_panels(est) -> list:
    """Method-specific report panels of a fitted estimator (none unless registered).

    Parameters
    ----------
    est : estimator
        A fitted bayeskern estimator.

    Returns
    -------
    list of (str, matplotlib.figure.Figure, str)
    """
    return []


@estimator_panels.register(GPRegressor)
@estimator_panels.register(GPClassifier)
def _(est) -> list:
    # the kernel's panels, drawn on the standardized training data at the posterior medians
    X = est.x_std_.transform(np.asarray(est.idata_.constant_data["X"]))
    y = np.asarray(est.idata_.observed_data["y"])
    y = y.astype(int) if hasattr(est, "classes_") else est.y_std_.transform(y)
    post = est.idata_.posterior
    med = {
        v: np.asarray(post[v].median(("chain", "draw")))
        for v in post.data_vars
        if v not in ("f", "eta")
    }
    theta = theta_from_draw(est.kernel_, med, est.x_std_.scale)
    names = getattr(est, "feature_names_in_", None)
    return kernel_panels(
        est.kernel_, X, y, theta, None if names is None else [str(c) for c in names]
    )
