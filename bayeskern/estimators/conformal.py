"""Support-vector classification with Xiong's data-dependent (conformal) kernel.

Seed ``004_ee76f0359d4ed0f2.txt`` (Gu, after Xiong et al. 2005/2007), sections 3.1-3.2: learn
the conformal factor :math:`q` of :math:`K(x,z) = q(x)K_0(x,z)q(z)` by maximizing the Fisher
ratio of the training data, then train an SVM on :math:`K`. The seed's own experiment could not
predict with its user-supplied kernel; here :class:`~bayeskern.estimators.svm.KernelSVC` builds
the Gram matrix between new points and the training points with the same fitted kernel.
"""

from __future__ import annotations

import numbers

import numpy as np
from sklearn.svm import SVC
from sklearn.utils.metaestimators import available_if
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import check_is_fitted

from bayeskern.estimators.base import validate_data
from bayeskern.estimators.svm import KernelSVC
from bayeskern.kernels.conformal import Conformal, SquaredExponential, check_class_labels

__all__ = ["ConformalKernelClassifier"]


class ConformalKernelClassifier(KernelSVC):
    r"""SVM on Xiong's data-dependent kernel :math:`K(x,z) = q(x)K_0(x,z)q(z)` (seed 004).

    :math:`K_0(x,z) = \exp(-\gamma\|x-z\|^2)` (scikit-learn's ``SVC`` meaning of ``gamma``)
    and :math:`q(x) = \alpha_0 + \sum_j \alpha_j \exp(-\gamma_1\|x - e_j\|^2)`, with
    :math:`\alpha` maximizing the Fisher ratio :math:`J = \alpha^\top M_0\alpha /
    \alpha^\top (N_0 + \mu I)\alpha` (eqs. 52-63; see :mod:`bayeskern.kernels.conformal`).
    No scaling is applied to ``X`` (as in ``SVC``); standardize it first, e.g. in a pipeline.
    With more than two classes, one kernel is learned from the c-class Fisher ratio (the
    class blocks of eqs. 58-59, one per class) and ``SVC`` runs one-vs-one on it.

    Parameters
    ----------
    C : float
        SVC regularization (the learned kernel keeps the magnitude of :math:`K_0`: the
        root mean square of :math:`q` on the training data is 1).
    gamma : float or {"scale", "auto"}
        :math:`\gamma` of the base kernel; ``"scale"`` is :math:`1/(d\,\mathrm{Var}(X))`,
        ``"auto"`` is :math:`1/d`, as in ``SVC``.
    gamma1 : float, {"scale", "auto"} or None
        :math:`\gamma_1` of the factor kernel :math:`K_1`; ``None`` uses ``gamma`` (the
        seed's setup: both kernels share :math:`\gamma`).
    optimizer : {"eigen", "gradient"}
        Generalized eigenproblem (eq. 63) or the seed's gradient ascent (Algorithm 1).
    mu : float
        Relative regularization of eq. 63 (absolute :math:`\mu = \text{mu}\cdot
        \mathrm{tr}(N_0)/(m+1)`).
    n_expansion : int or None
        Number of expansion points of :math:`q`, subsampled from the training points
        (``None``: all, as in the seed; set it for large ``N``: the cost is
        :math:`O(N^2 m)`).
    eta0, n_iter : float, int
        Step size and number of steps of the gradient ascent.
    class_weight, probability, tol, max_iter
        As in :class:`sklearn.svm.SVC`.
    random_state : int or None
        Seed of the expansion-point subsample and of SVC's probability calibration.

    Attributes
    ----------
    kernel_ : the fitted, named :class:`~bayeskern.kernels.conformal.Conformal` kernel.
    gamma_, gamma1_ : the numeric :math:`\gamma`, :math:`\gamma_1` used.
    fisher_ratio_init_, fisher_ratio_ : Fisher ratio :math:`J_\mu` of the base kernel
        (:math:`q \equiv 1`) and of the learned kernel on the training data.
    svc_ : the fitted ``SVC(kernel="precomputed")``.
    n_iter_ : iterations of the SVC solver (the largest over its binary problems).
    classes_ : class labels.
    """

    def __init__(self, C: float = 1.0, gamma="scale", gamma1=None, optimizer: str = "eigen",
                 mu: float = 1e-3, n_expansion=None, eta0: float = 0.01, n_iter: int = 1000,
                 class_weight=None, probability: bool = False, tol: float = 1e-3,
                 max_iter: int = -1, random_state=None):
        self.C = C
        self.gamma = gamma
        self.gamma1 = gamma1
        self.optimizer = optimizer
        self.mu = mu
        self.n_expansion = n_expansion
        self.eta0 = eta0
        self.n_iter = n_iter
        self.class_weight = class_weight
        self.probability = probability
        self.tol = tol
        self.max_iter = max_iter
        self.random_state = random_state

    @staticmethod
    def _resolve_gamma(value, X, name: str) -> float:
        if isinstance(value, str):
            if value == "scale":
                var = X.var()
                return 1.0 / (X.shape[1] * var) if var > 0 else 1.0
            if value == "auto":
                return 1.0 / X.shape[1]
            raise ValueError(f"{name} must be a positive float, 'scale' or 'auto', got {value!r}")
        if isinstance(value, numbers.Real) and not isinstance(value, bool) and value > 0:
            return float(value)
        raise ValueError(f"{name} must be a positive float, 'scale' or 'auto', got {value!r}")

    def _svc(self) -> SVC:
        # SVC warns that `probability` is deprecated (scikit-learn 1.9) even when it is False:
        # pass it only when it is asked for
        kw = {"probability": True} if self.probability else {}
        return SVC(C=self.C, kernel="precomputed", class_weight=self.class_weight, tol=self.tol,
                   max_iter=self.max_iter, random_state=self.random_state, **kw)

    def _make_kernel(self) -> Conformal:
        # SVC's exp(-gamma |x - z|^2) is the RBF with lengthscale 1/sqrt(2 gamma)
        base = SquaredExponential(lengthscale=float(1.0 / np.sqrt(2.0 * self.gamma_)))
        return Conformal(base_kernel=base,
                         gamma1=self.gamma1_, optimizer=self.optimizer, mu=self.mu,
                         n_expansion=self.n_expansion, eta0=self.eta0, n_iter=self.n_iter,
                         random_state=self.random_state)

    def fit(self, X, y):
        """Learn the conformal factor on ``(X, y)``, then the SVC on :math:`K = QK_0Q`."""
        X, y = validate_data(self, X, y, dtype=np.float64, ensure_min_samples=2)
        check_classification_targets(y)
        check_class_labels(y, X.shape[0])
        self.gamma_ = self._resolve_gamma(self.gamma, X, "gamma")
        self.gamma1_ = (self.gamma_ if self.gamma1 is None
                        else self._resolve_gamma(self.gamma1, X, "gamma1"))
        names = getattr(self, "feature_names_in_", None)  # validate_data on the array drops them
        super().fit(X, y)
        if names is not None:
            self.feature_names_in_ = names
        self.fisher_ratio_init_ = self.kernel_.fisher_ratio_init_
        self.fisher_ratio_ = self.kernel_.fisher_ratio_
        self.n_iter_ = int(np.max(self.svc_.n_iter_))
        return self

    # KernelSVC reads ``self.svc_`` before checking that the estimator is fitted (an
    # AttributeError instead of NotFittedError) and offers predict_proba unconditionally:
    # check first, and expose predict_proba only when ``probability=True`` (as SVC does)
    def decision_function(self, X):
        """SVC decision values for ``X`` (Gram between ``X`` and the training points)."""
        check_is_fitted(self)
        return super().decision_function(X)

    def predict(self, X):
        """Predicted class labels."""
        check_is_fitted(self)
        return super().predict(X)

    @available_if(lambda self: self.probability)
    def predict_proba(self, X):
        """Platt-scaled probabilities (only with ``probability=True``)."""
        check_is_fitted(self)
        return self.svc_.predict_proba(self.gram(X))

    def conformal_factor(self, X) -> np.ndarray:
        """The learned :math:`q(x)` at the rows of ``X``."""
        check_is_fitted(self)
        X = validate_data(self, X, reset=False, dtype=np.float64)
        return np.asarray(self.kernel_.factor(X))
