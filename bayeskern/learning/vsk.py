r"""VSK learning: fitting the scaling functions :math:`\psi` (Campi et al. 2021, section 5).

The scalings of :mod:`bayeskern.kernels.vsk_scaling` hold their fitted state and their JAX
``transform``; the fitting lives here. :func:`fit_scaling` builds a scaling from its
specification (:func:`~bayeskern.kernels.vsk_scaling.make_scaling`) and returns a fitted copy,
through the training function that :data:`SCALING_FITS` names for its class:

* :func:`fit_naive_bayes_scaling`: Gaussian naive Bayes (scikit-learn's ``GaussianNB``),
  :math:`\psi(x) = P(y=+1\mid x)` (section 5.1, with the a-priori data of section 6.1);
* :func:`fit_parametric_scaling`: least squares of a user model :math:`\mathcal{M}(x,\beta)`
  (``scipy.optimize.least_squares``, eq. 5.1);
* :func:`fit_linear_model_scaling`: its linear special case in closed form;
* :func:`fit_fixed_scaling`, :func:`fit_callable_scaling`, :func:`fit_column_scaling`: nothing
  to learn, the output is checked and its width recorded;
* :func:`fit_stacked_scaling`: every scaling of a list, side by side.
"""

from __future__ import annotations

import copy

import numpy as np
from scipy import optimize
from sklearn.naive_bayes import GaussianNB

from bayeskern.kernels.vsk_scaling import (
    CallableScaling,
    ColumnScaling,
    LinearModelScaling,
    NaiveBayesScaling,
    ParametricScaling,
    Scaling,
    StackedScaling,
    _as_psi_matrix,
    make_scaling,
)

__all__ = [
    "fit_scaling",
    "fit_naive_bayes_scaling",
    "fit_parametric_scaling",
    "fit_linear_model_scaling",
    "fit_fixed_scaling",
    "fit_callable_scaling",
    "fit_column_scaling",
    "fit_stacked_scaling",
    "SCALING_FITS",
]


def fit_naive_bayes_scaling(scaling: NaiveBayesScaling, X, y=None) -> NaiveBayesScaling:
    """Fit the Gaussian naive-Bayes classifier on ``(X, y)`` (+ ``prior_data``).

    :func:`fit_scaling` calls it for a :class:`NaiveBayesScaling`.

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


def fit_parametric_scaling(scaling: ParametricScaling, X, y=None) -> ParametricScaling:
    r"""Fit :math:`\beta^*` by least squares on ``(X, y)`` (Campi et al. 2021, eq. 5.1).

    :func:`fit_scaling` calls it for a :class:`ParametricScaling`.

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


def fit_linear_model_scaling(scaling: LinearModelScaling, X, y=None) -> LinearModelScaling:
    r"""Fit :math:`(\beta_0^*, \beta^*)` by linear least squares on ``(X, y)``.

    :func:`fit_scaling` calls it for a :class:`LinearModelScaling`; ``numpy.linalg.lstsq`` on
    ``[1, X]``.

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


def fit_fixed_scaling(scaling: Scaling, X, y=None) -> Scaling:
    """Return a fitted copy of a scaling that learns nothing: check its output, record its width.

    The default of :func:`fit_scaling` for a :class:`Scaling` subclass without a training
    function of its own.

    Parameters
    ----------
    scaling : Scaling
    X : array, shape (n, d)
    y : ignored

    Returns
    -------
    Scaling
        A copy of ``scaling`` with ``n_outputs_``.
    """
    psi = lambda s, A: np.asarray(s.transform(A))  # noqa: E731
    return _with_width(scaling, X, psi, f"scaling {type(scaling).__name__}")


def fit_callable_scaling(scaling: CallableScaling, X, y=None) -> CallableScaling:
    """Evaluate the user function once on ``X`` to check its output and record its width.

    Parameters
    ----------
    scaling : CallableScaling
        Its ``fn`` is called on the selected ``columns`` of ``X``; it must return ``(n,)``
        or ``(n, m)`` finite values.
    X : array, shape (n, d)
    y : ignored

    Returns
    -------
    CallableScaling
        A copy of ``scaling`` with ``n_outputs_`` (:math:`m`).
    """
    if not callable(scaling.fn):
        raise TypeError(f"CallableScaling: fn must be callable, got {scaling.fn!r}")
    return _with_width(scaling, X, lambda s, A: s.fn(s._cols(A)), "the scaling function")


def _with_width(scaling: Scaling, X, psi, who: str) -> Scaling:
    """Return a copy of ``scaling`` whose ``n_outputs_`` is the width of ``psi(copy, X)``."""
    X = np.asarray(X, dtype=float)
    scaling._check_columns(X.shape[1])
    s = copy.copy(scaling)
    s.n_outputs_ = _as_psi_matrix(psi(s, X), len(X), who).shape[1]
    return s


def fit_column_scaling(scaling: ColumnScaling, X, y=None) -> ColumnScaling:
    """Return a fitted copy of a :class:`ColumnScaling` (checks that the columns are named).

    Parameters
    ----------
    scaling : ColumnScaling
        Its ``columns`` are the covariates that form :math:`\\psi` (Campi et al. 2021,
        section 6.2).
    X : array, shape (n, d)
    y : ignored

    Returns
    -------
    ColumnScaling
        A copy of ``scaling`` with ``n_outputs_``, the number of covariate columns.
    """
    if scaling.columns is None:
        raise ValueError("ColumnScaling needs the list of covariate columns")
    return fit_fixed_scaling(scaling, X, y)


def fit_stacked_scaling(scaling: StackedScaling, X, y=None) -> StackedScaling:
    r"""Fit every scaling of the list: :math:`\psi = (\psi_1, \dots, \psi_k)`.

    Parameters
    ----------
    scaling : StackedScaling
    X : array, shape (n, d)
    y : array, shape (n,), optional
        Passed to every scaling.

    Returns
    -------
    StackedScaling
        A copy of ``scaling`` with the fitted ``scalings_`` and ``n_outputs_``.
    """
    s = copy.copy(scaling)
    s.scalings_ = [fit_scaling(p, X, y) for p in scaling.scalings]
    s.n_outputs_ = sum(p.n_outputs_ for p in s.scalings_)
    return s


#: Training function of each scaling class; a subclass uses that of its nearest listed base.
SCALING_FITS = {
    NaiveBayesScaling: fit_naive_bayes_scaling,
    ParametricScaling: fit_parametric_scaling,
    LinearModelScaling: fit_linear_model_scaling,
    CallableScaling: fit_callable_scaling,
    ColumnScaling: fit_column_scaling,
    StackedScaling: fit_stacked_scaling,
    Scaling: fit_fixed_scaling,
}


def fit_scaling(scaling, X, y=None) -> Scaling:
    """Return a fitted copy of a scaling function :math:`\\psi` (Campi et al. 2021, section 5).

    Parameters
    ----------
    scaling : str, Scaling, callable or list
        A scaling or its specification (:func:`~bayeskern.kernels.vsk_scaling.make_scaling`).
    X : array, shape (n, d)
    y : array, shape (n,), optional
        Labels or targets, for the scalings that learn from them.

    Returns
    -------
    Scaling
        A fitted copy, by the training function :data:`SCALING_FITS` names for its class.
    """
    scaling = make_scaling(scaling)
    # make_scaling returns a Scaling, so the walk ends at Scaling at the latest
    fn = next(SCALING_FITS[cls] for cls in type(scaling).__mro__ if cls in SCALING_FITS)
    return fn(scaling, X, y)
