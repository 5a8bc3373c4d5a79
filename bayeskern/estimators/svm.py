"""Support-vector classification with any bayeskern kernel (the classical route of the papers).

:class:`KernelSVC` fits a (possibly data-dependent) kernel on the training data, then
scikit-learn's ``SVC(kernel="precomputed")`` on its Gram matrix. Prediction builds the
Gram matrix **between the new points and the training points** with the same fitted
kernel — the step that a user-supplied kernel needs and that the experiment of Gu (2021)
(Xiong's kernel) got wrong. Method estimators (VSK, CkRBF, Xiong) subclass it and only say how
to build their kernel in :meth:`KernelSVC._make_kernel`.
"""

from __future__ import annotations

import numbers

import numpy as np
from sklearn.base import BaseEstimator, ClassifierMixin, _fit_context
from sklearn.svm import SVC
from sklearn.utils._param_validation import StrOptions
from sklearn.utils.metaestimators import available_if
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import check_is_fitted

from bayeskern.devices import limit_blas
from bayeskern.estimators.params import NumberInterval, count, positive
from bayeskern.estimators.validation import validate_data
from bayeskern.kernels import name_leaves
from bayeskern.kernels.base import Kernel
from bayeskern.learning import fit_kernel

__all__ = ["KernelSVC"]


class KernelSVC(ClassifierMixin, BaseEstimator):
    """SVC on a precomputed Gram matrix of a bayeskern kernel.

    Bayesian twin (same kernel ``k``, with priors and a posterior; binary):
    ``bk.GPClassifier(kernel=k)``.

    Parameters
    ----------
    kernel : Kernel
        Any bayeskern kernel; data-dependent kernels are fitted on ``(X, y)`` first.
        Hyper-parameters are used at their fixed values (or defaults), unstandardized.
    C : float
        SVC regularization.
    class_weight, probability, tol, max_iter
        As in :class:`sklearn.svm.SVC`.
    """

    #: the arguments handed to :class:`sklearn.svm.SVC` (as SVC declares them)
    _SVC_CONSTRAINTS: dict = {
        "C": [positive()],
        "class_weight": [dict, StrOptions({"balanced"}), None],
        "probability": ["boolean"],
        "tol": [NumberInterval(numbers.Real, 0, None, closed="neither")],
        "max_iter": [count(-1)],
    }
    _parameter_constraints: dict = {**_SVC_CONSTRAINTS, "kernel": [Kernel, None]}

    def __init__(
        self,
        kernel=None,
        C: float = 1.0,
        class_weight=None,
        probability: bool = False,
        tol: float = 1e-3,
        max_iter: int = -1,
    ):
        self.kernel = kernel
        self.C = C
        self.class_weight = class_weight
        self.probability = probability
        self.tol = tol
        self.max_iter = max_iter

    def _make_kernel(self) -> Kernel:
        """Return the unfitted kernel; subclasses build it from their own parameters."""
        if not isinstance(self.kernel, Kernel):
            raise ValueError(f"kernel must be a bayeskern Kernel, got {self.kernel!r}")
        return self.kernel

    def _svc(self) -> SVC:
        # `probability` is passed only when asked for (scikit-learn 1.9 deprecates the flag)
        extra = {"probability": True} if self.probability else {}
        return SVC(
            C=self.C,
            kernel="precomputed",
            class_weight=self.class_weight,
            tol=self.tol,
            max_iter=self.max_iter,
            random_state=getattr(self, "random_state", None),
            **extra,
        )

    @limit_blas
    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y):
        """Fit the kernel on ``(X, y)``, then the SVC on its training Gram matrix."""
        X, y = validate_data(self, X, y, dtype=np.float64, ensure_min_samples=2)
        check_classification_targets(y)
        self.kernel_ = name_leaves(fit_kernel(name_leaves(self._make_kernel()), X, y))
        self.X_fit_ = X
        self.svc_ = self._svc().fit(np.asarray(self.kernel_(X)), y)
        self.classes_ = self.svc_.classes_
        return self

    def gram(self, X) -> np.ndarray:
        """Gram matrix between ``X`` and the training points, ``(n, n_train)``."""
        check_is_fitted(self)
        X = validate_data(self, X, reset=False, dtype=np.float64)
        return np.asarray(self.kernel_(X, self.X_fit_))

    @limit_blas
    def decision_function(self, X):
        """SVC decision values for ``X``."""
        G = self.gram(X)  # checks the fitted state first
        return self.svc_.decision_function(G)

    def predict(self, X):
        """Predicted class labels."""
        G = self.gram(X)
        return self.svc_.predict(G)

    @available_if(lambda self: self.probability)
    @limit_blas
    def predict_proba(self, X):
        """Platt-scaled probabilities (requires ``probability=True``)."""
        G = self.gram(X)
        return self.svc_.predict_proba(G)

    @property
    def support_(self) -> np.ndarray:
        """Indices of the support vectors in the training data."""
        check_is_fitted(self)
        return self.svc_.support_
