r"""The VSK paper's study of the shape parameter (Campi et al. 2021, section 6.2 and Fig. 2).

:func:`shape_sweep` records the condition number and the spectral ratio of a kernel matrix,
and the test error of a kernel regression network, along a grid of shape parameters: how a
kernel and its variably scaled version trade stability for accuracy. The quantities are
:mod:`bayeskern.kernels.conditioning`'s.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from bayeskern.kernels.conditioning import _gram_np, condition_number, krn_fit, spectral_ratio

__all__ = ["shape_sweep"]


def _mae(y, p):
    return float(np.mean(np.abs(np.asarray(y) - np.asarray(p))))


def shape_sweep(
    make_kernel: Callable[[float], object],
    shapes,
    X,
    y=None,
    X_test=None,
    y_test=None,
    *,
    nu: float = 0.0,
    error: Callable = _mae,
) -> dict:
    r"""Condition number (and KRN test error) along a grid of shape parameters.

    For each shape :math:`\gamma` in ``shapes``, ``make_kernel(gamma)`` gives a kernel
    (a bayeskern :class:`Kernel`, fitted if data-dependent, or a callable
    ``(X1, X2) -> Gram``); the sweep records :math:`\operatorname{cond}(K)` and
    :math:`S(K)` on ``X`` and, when targets are given, fits a KRN (:func:`krn_fit` with
    ``nu``) on ``(X, y)`` and evaluates ``error(y_test, prediction)`` on the test points.
    This is the experiment of Campi et al. (2021), section 6.2 and Fig. 2 (200 shapes in [0.5, 20]).

    Returns
    -------
    dict of arrays ``shape``, ``cond``, ``spectral_ratio`` and (with targets) ``error``.
    """
    shapes = np.asarray(shapes, dtype=float).ravel()
    if shapes.size == 0 or not np.all(np.isfinite(shapes)):
        raise ValueError("shapes must be a non-empty array of finite numbers")
    want_error = y is not None and X_test is not None and y_test is not None
    out = {"shape": shapes, "cond": np.empty(len(shapes)), "spectral_ratio": np.empty(len(shapes))}
    if want_error:
        out["error"] = np.empty(len(shapes))
    for i, g in enumerate(shapes):
        kern = make_kernel(float(g))
        K = _gram_np(kern, X)
        out["cond"][i] = condition_number(K, symmetric=True)
        out["spectral_ratio"][i] = spectral_ratio(K)
        if want_error:
            c = krn_fit(K, y, nu)
            pred = _gram_np(kern, X_test, X) @ c
            out["error"][i] = error(y_test, pred) if np.all(np.isfinite(pred)) else np.inf
    return out
