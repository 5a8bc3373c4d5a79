r"""VSK learning: fitting the scaling functions :math:`\psi` (Campi et al. 2021, section 5).

The scalings of :mod:`bayeskern.kernels.vsk_scaling` are scikit-learn-style transformers: their
fitted state and their JAX ``transform`` live there, the fitting lives here. Each function
below is registered as the learner of one scaling class, so ``scaling.fit(X, y)`` runs it:

* :func:`fit_naive_bayes_scaling`: Gaussian naive Bayes (scikit-learn's ``GaussianNB``),
  :math:`\psi(x) = P(y=+1\mid x)` (section 5.1, with the a-priori data of section 6.1);
* :func:`fit_parametric_scaling`: least squares of a user model :math:`\mathcal{M}(x,\beta)`
  (``scipy.optimize.least_squares``, eq. 5.1);
* :func:`fit_linear_model_scaling`: its linear special case in closed form.
"""

from __future__ import annotations

import copy

import numpy as np
from scipy import optimize
from sklearn.naive_bayes import GaussianNB

from bayeskern.kernels.base import register_learner
from bayeskern.kernels.vsk_scaling import (
    LinearModelScaling,
    NaiveBayesScaling,
    ParametricScaling,
    _as_psi_matrix,
)

__all__ = ["fit_naive_bayes_scaling", "fit_parametric_scaling", "fit_linear_model_scaling"]


@register_learner(NaiveBayesScaling)
def fit_naive_bayes_scaling(scaling: NaiveBayesScaling, X, y=None) -> NaiveBayesScaling:
    """Fit the Gaussian naive-Bayes classifier on ``(X, y)`` (+ ``prior_data``).

    ``NaiveBayesScaling.fit`` calls it.

    Parameters
    ----------
    scaling : NaiveBayesScaling
        The scaling with its settings.
    X : array, shape (n, d)
    y : array, shape (n,)
        Binary class labels.

    Returns
    -------
    NaiveBayesScaling
        A fitted copy of ``scaling``.
    """
    if y is None:
        raise ValueError("NaiveBayesScaling needs class labels y to fit")
    X = np.asarray(X, dtype=float)
    scaling._check_columns(X.shape[1])
    Xc, yc = scaling._cols(X), np.asarray(y)
    if scaling.prior_data is not None:
        try:
            Xp, yp = scaling.prior_data
        except (TypeError, ValueError):
            raise TypeError("prior_data must be a tuple (X_prior, y_prior)") from None
        Xp = np.atleast_2d(np.asarray(Xp, dtype=float))
        if Xp.shape[1] != X.shape[1]:
            raise ValueError(f"prior_data: X_prior has {Xp.shape[1]} columns, X has {X.shape[1]}")
        Xc = np.vstack([Xc, scaling._cols(Xp)])
        yc = np.concatenate([yc, np.asarray(yp)])
    classes = np.unique(yc)
    if len(classes) != 2 or (yc.dtype.kind == "f" and len(np.unique(yc)) > 2):
        raise ValueError(
            f"scaling 'naive_bayes' needs binary class labels y, got {len(classes)} "
            "distinct values; for regression use a ParametricScaling or a callable"
        )
    nb = GaussianNB(var_smoothing=scaling.var_smoothing).fit(Xc, yc)
    s = copy.copy(scaling)
    s.classes_ = nb.classes_
    s.theta_ = nb.theta_
    # GaussianNB smooths by a fraction of the largest variance, which is 0 when every
    # feature is constant: fall back to that fraction of the squared scale of the values
    s.var_ = np.where(
        nb.var_ > 0, nb.var_, max(scaling.var_smoothing, 1e-12) * max(float(np.max(Xc**2)), 1.0)
    )
    s.class_log_prior_ = np.log(nb.class_prior_)
    s.n_outputs_ = 1
    return s


@register_learner(ParametricScaling)
def fit_parametric_scaling(scaling: ParametricScaling, X, y=None) -> ParametricScaling:
    r"""Fit :math:`\beta^*` by least squares on ``(X, y)`` (Campi et al. 2021, eq. 5.1).

    ``ParametricScaling.fit`` calls it.

    Parameters
    ----------
    scaling : ParametricScaling
        The scaling with its model, starting point and bounds.
    X : array, shape (n, d)
    y : array, shape (n,)
        Targets.

    Returns
    -------
    ParametricScaling
        A fitted copy of ``scaling`` (``beta_``).
    """
    if not callable(scaling.model):
        raise TypeError(f"ParametricScaling: model must be callable, got {scaling.model!r}")
    if y is None:
        raise ValueError("ParametricScaling needs targets y to fit the model")
    X = np.asarray(X, dtype=float)
    scaling._check_columns(X.shape[1])
    Xc, y = scaling._cols(X), np.asarray(y, dtype=float)

    def residual(beta):
        out = np.asarray(scaling.model(Xc, beta), dtype=float).reshape(-1)
        if out.shape != y.shape:
            raise ValueError(
                f"ParametricScaling: model returned shape {out.shape} for "
                f"{len(y)} points; expected ({len(y)},)"
            )
        return y - out

    kw = {} if scaling.bounds is None else {"bounds": scaling.bounds}
    try:
        res = optimize.least_squares(
            residual, np.atleast_1d(np.asarray(scaling.beta0, float)), **kw
        )
    except ValueError as e:
        raise ValueError(f"ParametricScaling: the model could not be fitted: {e}") from e
    if res.status <= 0 or not np.all(np.isfinite(res.x)) or not np.isfinite(res.cost):
        raise ValueError(
            f"ParametricScaling: the least-squares fit failed ({res.message}); check "
            "the model and beta0"
        )
    s = copy.copy(scaling)
    s.beta_ = res.x
    s.n_outputs_ = 1
    _as_psi_matrix(scaling.model(Xc, s.beta_), len(Xc), "ParametricScaling model")
    return s


@register_learner(LinearModelScaling)
def fit_linear_model_scaling(scaling: LinearModelScaling, X, y=None) -> LinearModelScaling:
    r"""Fit :math:`(\beta_0^*, \beta^*)` by linear least squares on ``(X, y)``.

    ``LinearModelScaling.fit`` calls it; ``numpy.linalg.lstsq`` on ``[1, X]``.

    Parameters
    ----------
    scaling : LinearModelScaling
        The scaling with its columns.
    X : array, shape (n, d)
    y : array, shape (n,)
        Finite targets.

    Returns
    -------
    LinearModelScaling
        A fitted copy of ``scaling`` (``coef_``).
    """
    if y is None:
        raise ValueError("LinearModelScaling needs targets y to fit")
    X = np.asarray(X, dtype=float)
    scaling._check_columns(X.shape[1])
    y = np.asarray(y, dtype=float)
    if y.ndim != 1 or not np.all(np.isfinite(y)):
        raise ValueError("LinearModelScaling: y must be a finite 1-D array")
    A = np.column_stack([np.ones(len(X)), scaling._cols(X)])
    s = copy.copy(scaling)
    s.coef_ = np.linalg.lstsq(A, y, rcond=None)[0]
    s.n_outputs_ = 1
    return s
