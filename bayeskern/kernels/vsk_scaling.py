r"""Scaling functions :math:`\psi` of the variably scaled kernels (Campi et al. 2021, section 5).

A scaling reads some columns of ``X``, holds what it learned from them and maps ``(n, d)``
inputs to ``(n, m)`` values in a JAX-traceable ``transform``: :class:`NaiveBayesScaling`,
:class:`ParametricScaling`, :class:`LinearModelScaling`, :class:`CallableScaling`,
:class:`ColumnScaling` and :class:`StackedScaling`, built from a user specification by
:func:`make_scaling`. This module holds their fitted state and ``transform``; the fits
(``GaussianNB``, least squares) live in :mod:`bayeskern.learning.vsk`
(:func:`~bayeskern.learning.vsk.fit_scaling` returns a fitted copy).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from .base import register_fitted_pytree

__all__ = [
    "Scaling",
    "NaiveBayesScaling",
    "ParametricScaling",
    "LinearModelScaling",
    "CallableScaling",
    "ColumnScaling",
    "StackedScaling",
    "make_scaling",
]


def _as_psi_matrix(psi, n: int, who: str) -> np.ndarray:
    """Check a user ψ output: shape ``(n,)`` or ``(n, m)``, finite; return ``(n, m)``."""
    psi = np.asarray(psi, dtype=float)
    if psi.ndim == 1:
        psi = psi[:, None]
    if psi.ndim != 2 or psi.shape[0] != n:
        raise ValueError(
            f"{who} returned an array of shape {np.shape(psi)} for {n} points; "
            f"expected ({n},) or ({n}, m)"
        )
    bad = ~np.isfinite(psi)
    if bad.any():
        rows = np.unique(np.nonzero(bad)[0])
        raise ValueError(
            f"{who} returned NaN or inf at {len(rows)} of {n} points (first rows: "
            f"{rows[:5].tolist()})"
        )
    return psi


def _host_call(fn: Callable[[np.ndarray], Any], X, m: int, who: str) -> jax.Array:
    """Evaluate a NumPy function of ``X`` eagerly, or through ``pure_callback`` under ``jit``.

    The ψ block does not depend on the hyper-parameters, so no derivative of ``fn`` is
    ever needed; the callback lets user code written in NumPy run inside NUTS.
    """

    def host(a):
        a = np.asarray(a)
        return _as_psi_matrix(fn(a), a.shape[0], who).astype(a.dtype)

    if not isinstance(X, jax.Array):
        return host(np.asarray(X))
    if not isinstance(X, jax.core.Tracer):
        return jnp.asarray(host(np.asarray(X)))
    shape = jax.ShapeDtypeStruct((X.shape[0], m), X.dtype)
    return jax.pure_callback(host, shape, X, vmap_method="sequential")


def _xp(X):
    """``jax.numpy`` for JAX arrays and tracers, NumPy otherwise (cheap classical path)."""
    return jnp if isinstance(X, jax.Array) else np


def _sigmoid(xp, z):
    return 0.5 * (1.0 + xp.tanh(0.5 * z))


class Scaling:
    """Base class of scaling functions :math:`\\psi` (Campi et al. 2021, section 5).

    A scaling reads the columns ``columns`` of ``X`` (all when ``None``), holds what
    :func:`bayeskern.learning.vsk.fit_scaling` learned (a fitted copy) and maps ``(n, d)``
    inputs to ``(n, m)`` values in :meth:`transform` (JAX-traceable, so that the VSK can be
    sampled).
    """

    columns: Any = None
    #: number of ψ outputs, set by the fit
    n_outputs_: int

    def __init_subclass__(cls, **kw):
        super().__init_subclass__(**kw)
        # pytree nodes like the kernels, so that a fitted VSK's ψ arrays are leaves
        register_fitted_pytree(cls)

    def _cols(self, X):
        return X if self.columns is None else X[:, np.asarray(self.columns, dtype=int)]

    def _check_columns(self, d: int) -> None:
        if self.columns is None:
            return
        cols = np.atleast_1d(np.asarray(self.columns))
        if cols.dtype.kind not in "iu" or cols.ndim != 1 or len(cols) == 0:
            raise TypeError(
                f"{type(self).__name__}: columns must be a list of int indices, "
                f"got {self.columns!r}"
            )
        if cols.min() < -d or cols.max() >= d:
            raise ValueError(
                f"{type(self).__name__}: columns {cols.tolist()} out of range for "
                f"X with {d} columns"
            )

    def transform(self, X) -> jax.Array:
        """:math:`\\psi(X)`, shape ``(n, m)``."""
        raise NotImplementedError

    @property
    def is_fitted(self) -> bool:
        """Return ``True`` once fitted (:func:`bayeskern.learning.vsk.fit_scaling`)."""
        return hasattr(self, "n_outputs_")

    def __repr__(self) -> str:
        args = {k: v for k, v in vars(self).items() if not k.endswith("_")}
        return f"{type(self).__name__}({', '.join(f'{k}={v!r}' for k, v in args.items())})"


register_fitted_pytree(Scaling)


class NaiveBayesScaling(Scaling):
    r"""Naive-Bayes probability :math:`\psi(x) = P(y = +1 \mid x)` (Campi et al. 2021, section 5.1).

    A Gaussian naive-Bayes classifier (features independent given the class, Gaussian
    likelihood of section 6.1) gives

    .. math:: P_j(x) = \frac{P(C_j) \prod_i N(x_i \mid \mu_j^i, (\sigma_j^i)^2)}
              {\sum_k P(C_k) \prod_i N(x_i \mid \mu_k^i, (\sigma_k^i)^2)};

    :math:`\psi = P_{+1}`, the probability of the larger label (one column suffices since
    :math:`P_{-1} = 1 - P_{+1}`). It is fitted with scikit-learn's ``GaussianNB`` and
    evaluated in JAX.

    Parameters
    ----------
    columns : list of int, optional
        Columns of ``X`` the classifier uses (all by default); SVM-E (section 7) passes the
        columns it compresses.
    prior_data : tuple (X_prior, y_prior), optional
        Extra labelled data, in the same units and columns as the ``X`` of the fit,
        added to the training set to estimate the likelihood and prior: the a-priori
        knowledge of section 6.1 (the paper trains its NB on the training set plus the
        4900–2500 points of the generator that are not in the subset).
    var_smoothing : float
        As in ``GaussianNB``: a fraction of the largest feature variance added to every
        variance (keeps constant features finite).
    """

    def __init__(self, columns=None, prior_data=None, var_smoothing: float = 1e-9):
        self.columns = columns
        self.prior_data = prior_data
        self.var_smoothing = var_smoothing

    def joint_log_likelihood(self, X) -> jax.Array:
        """:math:`\\log P(C_j) + \\sum_i \\log N(x_i\\mid\\mu_j^i,\\sigma_j^{i2})`, ``(n, 2)``."""
        xp = _xp(X)
        Xc = self._cols(X)
        mu, var = xp.asarray(self.theta_), xp.asarray(self.var_)
        quad = xp.sum((Xc[:, None, :] - mu) ** 2 / var, axis=-1)
        return xp.asarray(self.class_log_prior_) - 0.5 * (
            xp.sum(xp.log(2 * np.pi * var), axis=-1) + quad
        )

    def transform(self, X):
        """:math:`P(y = +1 \\mid x)`, shape ``(n, 1)`` (NumPy in, NumPy out; JAX in, JAX out)."""
        jll = self.joint_log_likelihood(X)
        return _sigmoid(_xp(X), jll[:, 1] - jll[:, 0])[:, None]


class ParametricScaling(Scaling):
    r"""Least-squares fit of a parametric model, :math:`\psi(x) = \mathcal{M}(x, \beta^*)`.

    Campi et al. (2021), section 5.2, eq. (5.1):
    :math:`\beta^* = \arg\min_\beta \sum_i (y_i - \mathcal{M}(x_i, \beta))^2`, solved with
    ``scipy.optimize.least_squares`` (trust-region reflective when ``bounds`` are given).
    The paper's COVID-19 example is :math:`\mathcal{M}(x,\beta) = e^{-\beta|x-\bar p|}`.

    Parameters
    ----------
    model : callable ``model(X, beta) -> (n,)``
        NumPy function of the selected columns ``X`` ``(n, d')`` and parameters ``beta``.
    beta0 : array_like
        Starting point of the fit.
    columns : list of int, optional
        Columns of ``X`` passed to ``model`` (all by default).
    bounds : tuple (lower, upper), optional
        Bounds on ``beta`` (as in ``least_squares``).
    """

    def __init__(self, model: Callable, beta0, columns=None, bounds=None):
        self.model = model
        self.beta0 = beta0
        self.columns = columns
        self.bounds = bounds

    def transform(self, X):
        """:math:`\\mathcal{M}(x, \\beta^*)`, shape ``(n, 1)``."""
        fn = lambda a: self.model(a, self.beta_)  # noqa: E731
        return _host_call(fn, self._cols(X), 1, "ParametricScaling model")


class LinearModelScaling(Scaling):
    r"""Least-squares linear trend, :math:`\psi(x) = \beta_0^* + x^\top\beta^*`.

    The linear special case of :class:`ParametricScaling` (Campi et al. 2021, eq. 5.1 with
    :math:`\mathcal{M}(x,\beta) = \beta_0 + x^\top\beta`), solved in closed form with
    ``numpy.linalg.lstsq`` and evaluated in JAX: a generic default for regression.
    """

    def __init__(self, columns=None):
        self.columns = columns

    def transform(self, X):
        r"""Return :math:`\beta_0^* + x^\top\beta^*`, shape ``(n, 1)``."""
        Xc = self._cols(X)
        return (self.coef_[0] + Xc @ _xp(X).asarray(self.coef_[1:]))[:, None]


class CallableScaling(Scaling):
    """Any fixed user function :math:`\\psi(X) \\to (n,)` or ``(n, m)`` (NumPy).

    Nothing is learned; the output is checked for shape and finiteness when fitted and at
    every call. Under ``jit`` the function runs on the host through ``jax.pure_callback``.
    """

    def __init__(self, fn: Callable, columns=None):
        self.fn = fn
        self.columns = columns

    def transform(self, X):
        """Return ``fn`` of the selected columns, shape ``(n, m)``."""
        return _host_call(self.fn, self._cols(X), self.n_outputs_, "the scaling function")


class ColumnScaling(Scaling):
    """Extra covariate columns as the ψ block (Campi et al. 2021, section 6.2).

    The paper's COVID-19 KRN adds series observed at the same times (total, new and current
    infected) to :math:`\\psi`: pass them as columns of ``X`` and name them here (and leave
    them out of the VSK's ``columns``).
    """

    def __init__(self, columns):
        self.columns = columns

    def transform(self, X):
        """Return the covariate columns, shape ``(n, m)``."""
        return self._cols(X)


class StackedScaling(Scaling):
    """Several scalings side by side: :math:`\\psi = (\\psi_1, \\dots, \\psi_k)`."""

    def __init__(self, scalings):
        self.scalings = scalings

    def transform(self, X):
        """Return the fitted scalings' outputs side by side."""
        return jnp.concatenate([p.transform(X) for p in self.scalings_], axis=1)


def make_scaling(spec) -> Scaling:
    """Return a :class:`Scaling` from a name, a :class:`Scaling`, a callable or a list.

    Names: ``"naive_bayes"`` (:class:`NaiveBayesScaling`, classification) and ``"linear"``
    (:class:`LinearModelScaling`, regression). A callable becomes a
    :class:`CallableScaling`, a list a :class:`StackedScaling`.
    """
    if isinstance(spec, Scaling):
        return spec
    if isinstance(spec, str):
        if spec in ("naive_bayes", "nb"):
            return NaiveBayesScaling()
        if spec == "linear":
            return LinearModelScaling()
        raise ValueError(
            f"scaling: unknown scaling name {spec!r}; known: 'naive_bayes', "
            "'linear' (or "
            "pass a Scaling, a callable or a list of them)"
        )
    if isinstance(spec, (list, tuple)):
        if not spec:
            raise ValueError("scaling: an empty list of scalings")
        return StackedScaling(list(spec))
    if callable(spec):
        return CallableScaling(spec)
    raise TypeError(
        f"scaling must be 'naive_bayes', a Scaling, a callable or a list, got {type(spec).__name__}"
    )
