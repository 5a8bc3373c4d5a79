r"""Variably scaled kernel estimators: SVM-VSK, KRN-VSK and the feature extraction SVM-E.

Campi, Marchetti & Perracchione, *Learning via variably scaled kernels* (2021):

* :class:`VSKClassifier` — SVM-VSK (sections 3.1, 5.1, 6.1): min–max scale the features to
  [0, 1], append :math:`w\,\psi(x)` with :math:`\psi(x) = P(y=+1\mid x)` from a Gaussian
  naive-Bayes classifier, and train scikit-learn's ``SVC`` on the augmented points. The SVC
  kernel on :math:`\Psi(x) = (x, w\psi(x))` *is* the VSK: for ``kernel="rbf"``
  :math:`e^{-\gamma\|\Psi(x)-\Psi(y)\|^2} = e^{-\gamma\|x-y\|^2} e^{-\gamma w^2(\psi(x)-\psi(y))^2}`
  (Theorem 3) and for ``kernel="linear"`` :math:`x^\top y + w^2\psi(x)\psi(y)` (Theorem 6),
  so prediction uses the VSK Gram matrix between the new and the training points.
  ``C``, ``gamma`` and ``kernel`` are SVC's, so ``GridSearchCV`` with the paper's grid
  (:func:`bayeskern.experiments.vsk.paper_param_grid`) and ``scoring="f1_weighted"`` runs the
  paper's protocol directly.
* :class:`VSKRegressor` — KRN-VSK (sections 3.2, 5.2, 6.2): kernel regression network
  :math:`s(x) = \sum_i c_i \kappa^\Psi(x, x_i)`, :math:`c` minimizing
  :math:`\|y - K^\Psi c\|^2 + \nu\|c\|^2` (interpolation at :math:`\nu = 0`).
* :class:`VSKFeatureExtractor` — the VSK-like feature extraction SVM-E (section 7).

The Bayesian use is a GP with :class:`~bayeskern.kernels.vsk.VSK` as its kernel (NUTS over the
shape, the ψ weight and the noise); :func:`bayeskern.experiments.vsk.compare_vsk` fits it next
to the plain kernel's GP and compares them by PSIS-LOO, and the paper's SVM-S feature selection
is :func:`bayeskern.experiments.vsk.make_svm_selector`.
"""

from __future__ import annotations

import numbers

import numpy as np
from sklearn.base import BaseEstimator, ClassifierMixin, RegressorMixin, _fit_context
from sklearn.metrics.pairwise import linear_kernel, rbf_kernel
from sklearn.preprocessing import MinMaxScaler
from sklearn.svm import SVC
from sklearn.utils._param_validation import StrOptions
from sklearn.utils.multiclass import check_classification_targets, type_of_target
from sklearn.utils.validation import check_is_fitted

from bayeskern.devices import limit_blas
from bayeskern.estimators.params import count, non_negative, positive
from bayeskern.estimators.validation import validate_binary, validate_data
from bayeskern.estimators.vsk_features import (  # noqa: F401  (public here too)
    _KERNELS,
    VSKFeatureExtractor,
)
from bayeskern.kernels.conditioning import condition_number, krn_fit
from bayeskern.kernels.vsk import VSK, NaiveBayesScaling, Scaling, make_scaling
from bayeskern.learning import fit_scaling

__all__ = [
    "VSKClassifier",
    "VSKRegressor",
    "VSKFeatureExtractor",
]


def _binary_classes(y) -> np.ndarray:
    """Return the two classes of ``y``; the naive-Bayes scaling P(y=+1|x) needs exactly two."""
    check_classification_targets(y)
    if type_of_target(y, input_name="y") == "multiclass":
        raise ValueError(
            f"Only binary classification is supported. y has {len(np.unique(y))} classes "
            "(the naive-Bayes scaling is P(y=+1|x)); use sklearn.multiclass.OneVsRestClassifier"
        )
    return validate_binary(y)[0]


#: the arguments both VSK estimators take (names of ``scaling`` are checked by ``make_scaling``)
_VSK_CONSTRAINTS: dict = {
    "kernel": [StrOptions(set(_KERNELS))],
    "scaling": [Scaling, str, list, tuple, callable],
    "weight": [non_negative()],
}


def _scaled_prior(prior_data, d):
    if prior_data is None:
        return None
    try:
        Xp, yp = prior_data
    except (TypeError, ValueError):
        raise TypeError("prior_data must be a tuple (X_prior, y_prior)") from None
    Xp = np.atleast_2d(np.asarray(Xp, dtype=float))
    if Xp.shape[1] != d or len(Xp) != len(yp):
        raise ValueError(
            f"prior_data: X_prior must have {d} columns and as many rows as "
            f"y_prior, got {Xp.shape} and {len(yp)}"
        )
    if not np.all(np.isfinite(Xp)):
        raise ValueError("prior_data: X_prior contains NaN or inf")
    return Xp, np.asarray(yp)


class VSKClassifier(ClassifierMixin, BaseEstimator):
    r"""SVM-VSK: support-vector classification with a variably scaled kernel.

    Campi et al. (2021), sections 3.1 and 5.1: :math:`\Psi(x) = (\tilde x, w\,\psi(x))` with
    :math:`\tilde x` the features min–max scaled to [0, 1] on the training set and
    :math:`\psi(x) = P(y = +1 \mid x)` of a Gaussian naive-Bayes classifier trained on the
    training set (plus ``prior_data`` when given, the a-priori knowledge of section 6.1);
    then ``SVC`` on :math:`\Psi`. The decision function is
    :math:`\mathrm{sign}(\sum_i y_i\alpha_i \kappa^\Psi(x, x_i) + b)` (section 3.1).

    Bayesian twin (same kernel, with priors and a posterior):
    ``bk.GPClassifier(kernel=bk.kernels.VSK(bk.kernels.RBF()))``.

    Parameters
    ----------
    C : float, default 1.0
        SVC regularization (the paper's :math:`\zeta`).
    kernel : {"rbf", "linear"}, default "rbf"
        Gaussian VSK (:math:`K \circ K^\psi`, Theorem 3) or linear VSK
        (:math:`K + K^\psi`, Theorem 6).
    gamma : float or {"scale", "auto"}, default "scale"
        Shape of the Gaussian kernel on the augmented points, as in ``SVC``.
    scaling : "naive_bayes", Scaling or callable, default "naive_bayes"
        The scaling function :math:`\psi`, fitted on the training data in data units
        (see :func:`bayeskern.kernels.vsk.make_scaling`).
    weight : float, default 1.0
        :math:`w`, the scale of the ψ block; 0 gives the plain SVM on scaled features.
    prior_data : tuple (X_prior, y_prior), optional
        Extra labelled data (data units) for the naive-Bayes scaling only.
    class_weight, tol, max_iter, random_state
        As in :class:`sklearn.svm.SVC`. For calibrated probabilities wrap the estimator in
        ``sklearn.calibration.CalibratedClassifierCV(..., ensemble=False)`` (SVC's own
        ``probability`` option is deprecated in scikit-learn 1.9).

    Attributes
    ----------
    svc_ : the fitted ``SVC`` on the augmented points.
    X_fit_ : the augmented training points :math:`\Psi(X)`.
    scaler_ : the ``MinMaxScaler`` of the features.
    scaling_ : the fitted scaling function.
    classes_ : the two class labels; :math:`\psi` is the probability of ``classes_[1]``.
    """

    _parameter_constraints: dict = {
        **_VSK_CONSTRAINTS,
        "C": [positive()],
        "gamma": [positive(), StrOptions({"scale", "auto"})],
        "prior_data": [tuple, list, None],
        "class_weight": [dict, StrOptions({"balanced"}), None],
        "tol": [positive()],
        "max_iter": [count(-1)],
        "random_state": ["random_state"],
    }

    def __init__(
        self,
        C: float = 1.0,
        kernel: str = "rbf",
        gamma="scale",
        scaling="naive_bayes",
        weight: float = 1.0,
        prior_data=None,
        class_weight=None,
        tol: float = 1e-3,
        max_iter: int = -1,
        random_state=None,
    ):
        self.C = C
        self.kernel = kernel
        self.gamma = gamma
        self.scaling = scaling
        self.weight = weight
        self.prior_data = prior_data
        self.class_weight = class_weight
        self.tol = tol
        self.max_iter = max_iter
        self.random_state = random_state

    @limit_blas
    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y):
        """Learn :math:`\\psi` and the min–max scaling, then the SVC on :math:`\\Psi(X)`."""
        X, y = validate_data(self, X, y, dtype=np.float64, ensure_min_samples=2)
        self.classes_ = _binary_classes(y)
        scaling = make_scaling(self.scaling)
        prior = _scaled_prior(self.prior_data, X.shape[1])
        if prior is not None:
            if not isinstance(scaling, NaiveBayesScaling):
                raise ValueError("prior_data is used only by the naive-Bayes scaling")
            scaling = NaiveBayesScaling(scaling.columns, prior, scaling.var_smoothing)
        self.scaler_ = MinMaxScaler().fit(X)
        self.scaling_ = fit_scaling(scaling, X, y)
        self.svc_ = SVC(
            C=self.C,
            kernel=self.kernel,
            gamma=self.gamma,
            class_weight=self.class_weight,
            tol=self.tol,
            max_iter=self.max_iter,
            random_state=self.random_state,
        )
        self.X_fit_ = self._augment(X)
        self.svc_.fit(self.X_fit_, y)
        return self

    def psi(self, X) -> np.ndarray:
        """Return the scaling function :math:`\\psi(X)`, shape ``(n, m)``."""
        check_is_fitted(self)
        X = validate_data(self, X, reset=False, dtype=np.float64)
        return np.asarray(self.scaling_.transform(X))

    def _augment(self, X):
        return np.hstack(
            [self.scaler_.transform(X), self.weight * np.asarray(self.scaling_.transform(X))]
        )

    def augment(self, X) -> np.ndarray:
        """Return the augmented points :math:`\\Psi(X) = (\\tilde X, w\\,\\psi(X))`."""
        check_is_fitted(self)
        return self._augment(validate_data(self, X, reset=False, dtype=np.float64))

    def gram(self, X) -> np.ndarray:
        """VSK Gram matrix between ``X`` and the training points, ``(n, n_train)``."""
        return self._kernel(self.augment(X), self.X_fit_)

    def _kernel(self, A, B):
        if self.kernel == "linear":
            return linear_kernel(A, B)
        return rbf_kernel(A, B, gamma=self.svc_._gamma)

    @limit_blas
    def decision_function(self, X):
        """SVC decision values :math:`\\sum_i y_i\\alpha_i\\kappa^\\Psi(x, x_i) + b`."""
        Z = self.augment(X)
        return self.svc_.decision_function(Z)

    def predict(self, X):
        """Predicted class labels."""
        Z = self.augment(X)
        return self.svc_.predict(Z)

    @property
    def n_iter_(self):
        """Iterations of the SVC solver."""
        check_is_fitted(self)
        return self.svc_.n_iter_

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.classifier_tags.multi_class = False
        return tags


class VSKRegressor(RegressorMixin, BaseEstimator):
    r"""KRN-VSK: kernel regression network with a variably scaled kernel.

    Campi et al. (2021), sections 3.2 and 5.2. With the centres at the training points,

    .. math:: s^\Psi(x) = \sum_{i=1}^N c_i\,\kappa^\Psi(x, x_i),\qquad
              c = \arg\min_c \|y - K^\Psi c\|^2 + \nu\|c\|^2,

    :math:`K^\Psi_{ij} = \kappa(\Psi(x_i), \Psi(x_j))`, :math:`\Psi(x) = (\tilde x, w\tilde\psi(x))`
    where :math:`\tilde{\ }` denotes min–max scaling to [0, 1] on the training set
    (``normalize=True``, as the paper's "normalized dataset") and
    :math:`\psi(x) = \mathcal{M}(x, \beta^*)` a least-squares fit of a parametric model
    (eq. 5.1). :math:`\nu = 0` interpolates (:math:`c = (K^\Psi)^{-1}y`).

    Bayesian twin (same kernel, with priors and a posterior):
    ``bk.GPRegressor(kernel=bk.kernels.VSK(bk.kernels.RBF(), scaling="linear"))``.

    Parameters
    ----------
    gamma : float, default 1.0
        Shape :math:`\gamma` of the Gaussian :math:`e^{-\gamma r^2}` (eq. 4.1).
    kernel : {"rbf", "linear"}
    nu : float >= 0, default 1e-4
        Ridge parameter :math:`\nu` (the paper uses 0 and 1e-4).
    scaling : "linear", Scaling, callable or list, default "linear"
        :math:`\psi`; the default is a least-squares linear trend; pass a
        :class:`~bayeskern.kernels.vsk.ParametricScaling` for the paper's model fit, a
        :class:`~bayeskern.kernels.vsk.ColumnScaling` for covariates (section 6.2).
    weight : float, default 1.0
        :math:`w`, the scale of the ψ block (0: the classical KRN).
    columns : list of int, optional
        Columns forming the ``x`` block (covariates read by a ``ColumnScaling`` are left out).
    normalize : bool, default True
        Min–max scale the ``x`` block and each ψ output on the training set.

    Attributes
    ----------
    coef_ : (N,) the KRN coefficients :math:`c`.
    cond_ : float, 2-condition number of the training kernel matrix :math:`K^\Psi`.
    scaling_ : the fitted scaling function.
    """

    _parameter_constraints: dict = {
        **_VSK_CONSTRAINTS,
        "gamma": [positive()],
        "nu": [non_negative()],
        "columns": [numbers.Integral, "array-like", None],
        "normalize": ["boolean"],
    }

    def __init__(
        self,
        gamma: float = 1.0,
        kernel: str = "rbf",
        nu: float = 1e-4,
        scaling="linear",
        weight: float = 1.0,
        columns=None,
        normalize: bool = True,
    ):
        self.gamma = gamma
        self.kernel = kernel
        self.nu = nu
        self.scaling = scaling
        self.weight = weight
        self.columns = columns
        self.normalize = normalize

    @limit_blas
    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y):
        """Fit :math:`\\psi`, then the network coefficients."""
        X, y = validate_data(self, X, y, dtype=np.float64, ensure_min_samples=2, y_numeric=True)
        y = np.asarray(y, dtype=float)
        self.x_columns_ = VSK(columns=self.columns)._x_columns(X.shape[1])
        self.scaling_ = fit_scaling(self.scaling, X, y)
        psi = np.asarray(self.scaling_.transform(X))
        self.x_scaler_ = MinMaxScaler().fit(X[:, self.x_columns_]) if self.normalize else None
        self.psi_scaler_ = MinMaxScaler().fit(psi) if self.normalize else None
        self.X_fit_ = self._augment(X)
        K = self._kernel(self.X_fit_, self.X_fit_)
        self.cond_ = condition_number(K, symmetric=True)
        self.coef_ = krn_fit(K, y, self.nu)
        if not np.all(np.isfinite(self.coef_)):
            raise FloatingPointError(
                "VSKRegressor: the network coefficients are not finite; raise nu or lower gamma"
            )
        return self

    def psi(self, X) -> np.ndarray:
        """Return the scaling function :math:`\\psi(X)` (data units, before normalization)."""
        check_is_fitted(self)
        X = validate_data(self, X, reset=False, dtype=np.float64)
        return np.asarray(self.scaling_.transform(X))

    def _augment(self, X):
        x = X[:, self.x_columns_]
        psi = np.asarray(self.scaling_.transform(X))
        if self.normalize:
            x, psi = self.x_scaler_.transform(x), self.psi_scaler_.transform(psi)
        return np.hstack([x, self.weight * psi])

    def _kernel(self, A, B):
        if self.kernel == "linear":
            return linear_kernel(A, B)
        return rbf_kernel(A, B, gamma=self.gamma)

    def augment(self, X) -> np.ndarray:
        """Return the augmented points :math:`\\Psi(X)`."""
        check_is_fitted(self)
        return self._augment(validate_data(self, X, reset=False, dtype=np.float64))

    def gram(self, X) -> np.ndarray:
        """VSK Gram matrix between ``X`` and the training points (the centres)."""
        return self._kernel(self.augment(X), self.X_fit_)

    @limit_blas
    def predict(self, X):
        """:math:`s^\\Psi(x) = \\sum_i c_i \\kappa^\\Psi(x, x_i)`."""
        return self.gram(X) @ self.coef_
