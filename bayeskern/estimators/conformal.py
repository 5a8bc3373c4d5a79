"""Support-vector classification with Xiong's data-dependent (conformal) kernel.

Gu (2021, sections 3.1-3.2), after Xiong et al. 2005/2007: learn
the conformal factor :math:`q` of :math:`K(x,z) = q(x)K_0(x,z)q(z)` by maximizing the Fisher
ratio of the training data, then train an SVM on :math:`K`. Gu's own experiment could not
predict with its user-supplied kernel; here :class:`~bayeskern.estimators.svm.KernelSVC` builds
the Gram matrix between new points and the training points with the same fitted kernel.
"""

from __future__ import annotations

import numbers

import numpy as np
from sklearn.base import _fit_context
from sklearn.utils._param_validation import StrOptions
from sklearn.utils.metaestimators import available_if
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import check_is_fitted

from bayeskern.devices import limit_blas
from bayeskern.estimators.params import NumberInterval, count, positive
from bayeskern.estimators.svm import KernelSVC
from bayeskern.estimators.validation import validate_data
from bayeskern.kernels import name_leaves
from bayeskern.kernels.conformal import Conformal, SquaredExponential, check_class_labels
from bayeskern.learning import fit_kernel

__all__ = ["ConformalKernelClassifier", "MU_CANDIDATES"]

#: candidates of ``mu="auto"`` (relative :math:`\mu` of eq. 63; ``inf`` keeps
#: :math:`q \equiv 1`, i.e. the base RBF kernel)
MU_CANDIDATES = (1e-3, 1e-1, float("inf"))


class ConformalKernelClassifier(KernelSVC):
    r"""SVM on Xiong's data-dependent kernel :math:`K(x,z) = q(x)K_0(x,z)q(z)` (Gu 2021).

    :math:`K_0(x,z) = \exp(-\gamma\|x-z\|^2)` (scikit-learn's ``SVC`` meaning of ``gamma``)
    and :math:`q(x) = \alpha_0 + \sum_j \alpha_j \exp(-\gamma_1\|x - e_j\|^2)`, with
    :math:`\alpha` maximizing the Fisher ratio :math:`J = \alpha^\top M_0\alpha /
    \alpha^\top (N_0 + \mu I)\alpha` (eqs. 52-63; see :mod:`bayeskern.kernels.conformal`).
    No scaling is applied to ``X`` (as in ``SVC``); standardize it first, e.g. in a pipeline.

    The grid a user searches is the ``SVC`` one, ``{"C": [0.1, 1, 10, 100], "gamma": [0.01,
    0.03, 0.1]}`` behind a ``StandardScaler``; everything conformal-specific adapts to the
    training data (``gamma1="scale"``, ``mu="auto"``).
    With more than two classes, one kernel is learned from the c-class Fisher ratio (the
    class blocks of eqs. 58-59, one per class) and ``SVC`` runs one-vs-one on it.

    Bayesian twin (same kernel, with priors and a posterior; binary):
    ``bk.GPClassifier(kernel=bk.kernels.Conformal())``.

    Parameters
    ----------
    C : float
        SVC regularization (the learned kernel keeps the magnitude of :math:`K_0`: the
        root mean square of :math:`q` on the training data is 1).
    gamma : float or {"scale", "auto"}
        :math:`\gamma` of the base kernel; ``"scale"`` is :math:`1/(d\,\mathrm{Var}(X))`,
        ``"auto"`` is :math:`1/d`, as in ``SVC``.
    gamma1 : float, {"scale", "auto"} or None
        :math:`\gamma_1` of the factor kernel :math:`K_1`. Default ``"scale"``:
        :math:`1/(d\,\mathrm{Var}(X))`, i.e. :math:`1/d` on standardized inputs, so that the
        typical exponent :math:`\gamma_1\|x - e_j\|^2 \approx 2` whatever the number of
        features. ``None`` uses ``gamma`` (the setup of Gu 2021: both kernels share
        :math:`\gamma`); then a user's grid value such as :math:`\gamma = 0.1` on 30
        standardized features makes :math:`K_1(x, e_j) \approx e^{-6}` for every pair but
        :math:`x = e_j`, :math:`q` spikes at its own expansion points and the SVM overfits.
    optimizer : {"eigen", "gradient"}
        Generalized eigenproblem (eq. 63) or the gradient ascent of Gu (2021, Algorithm 1).
    mu : "auto" or float
        Relative regularization of eq. 63 (absolute :math:`\mu = \text{mu}\cdot
        \mathrm{tr}(N_0)/(m+1)`; ``inf`` keeps :math:`q \equiv 1`, the base kernel).
        Default ``"auto"``: chosen from :data:`MU_CANDIDATES` = (1e-3, 1e-1, inf) by 3-fold
        stratified CV accuracy of this SVM on the training data (ties to the learned kernel).
        Why: the Fisher-optimal :math:`q` has one coefficient per expansion point and can
        overfit noisy classes (then it does worse than the RBF SVC); the internal CV falls
        back to the base kernel where the learned one does not help. Choosing ``mu`` by the
        held-out Fisher ratio instead does worse. Cost: 9 extra kernel + SVC fits.
    n_expansion : int or None
        Number of expansion points of :math:`q`, subsampled from the training points
        (``None``: all, as in Gu 2021; set it for large ``N``: the cost is
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
    mu_, mu_scores_ : the relative :math:`\mu` used and the internal CV accuracy of each
        candidate (empty unless ``mu="auto"``).
    fisher_ratio_init_, fisher_ratio_ : Fisher ratio :math:`J_\mu` of the base kernel
        (:math:`q \equiv 1`) and of the learned kernel on the training data.
    svc_ : the fitted ``SVC(kernel="precomputed")``.
    n_iter_ : iterations of the SVC solver (the largest over its binary problems).
    classes_ : class labels.
    """

    _parameter_constraints: dict = {
        **KernelSVC._SVC_CONSTRAINTS,
        "gamma": [positive(), StrOptions({"scale", "auto"})],
        "gamma1": [positive(), StrOptions({"scale", "auto"}), None],
        "optimizer": [StrOptions({"eigen", "gradient"})],
        # inf: the base kernel (q = 1)
        "mu": [NumberInterval(numbers.Real, 0, None, closed="both"), StrOptions({"auto"})],
        "n_expansion": [count(1), None],
        "eta0": [positive()],
        "n_iter": [count(1)],
        "random_state": ["random_state"],
    }

    def __init__(
        self,
        C: float = 1.0,
        gamma="scale",
        gamma1="scale",
        optimizer: str = "eigen",
        mu="auto",
        n_expansion=None,
        eta0: float = 0.01,
        n_iter: int = 1000,
        class_weight=None,
        probability: bool = False,
        tol: float = 1e-3,
        max_iter: int = -1,
        random_state=None,
    ):
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
    def _resolve_gamma(value, X) -> float:
        """Return ``gamma`` or ``gamma1`` as a number (``"scale"`` and ``"auto"`` as SVC's)."""
        if isinstance(value, str):
            if value == "scale":
                var = X.var()
                return 1.0 / (X.shape[1] * var) if var > 0 else 1.0
            return 1.0 / X.shape[1]
        return float(value)

    def _make_kernel(self, mu=None) -> Conformal:
        # SVC's exp(-gamma |x - z|^2) is the RBF with lengthscale 1/sqrt(2 gamma)
        base = SquaredExponential(lengthscale=float(1.0 / np.sqrt(2.0 * self.gamma_)))
        return Conformal(
            base_kernel=base,
            gamma1=self.gamma1_,
            optimizer=self.optimizer,
            mu=self.mu_ if mu is None else mu,
            n_expansion=self.n_expansion,
            eta0=self.eta0,
            n_iter=self.n_iter,
            random_state=self.random_state,
        )

    @limit_blas
    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y):
        """Learn the conformal factor on ``(X, y)``, then the SVC on :math:`K = QK_0Q`."""
        X, y = validate_data(self, X, y, dtype=np.float64, ensure_min_samples=2)
        check_classification_targets(y)
        check_class_labels(y, X.shape[0])
        self.gamma_ = self._resolve_gamma(self.gamma, X)
        self.gamma1_ = self.gamma_ if self.gamma1 is None else self._resolve_gamma(self.gamma1, X)
        if isinstance(self.mu, str):
            self.mu_, self.mu_scores_ = self._select_mu(X, y)
        else:
            self.mu_, self.mu_scores_ = self.mu, {}
        names = getattr(self, "feature_names_in_", None)  # validate_data on the array drops them
        super().fit(X, y)
        if names is not None:
            self.feature_names_in_ = names
        self.fisher_ratio_init_ = self.kernel_.fisher_ratio_init_
        self.fisher_ratio_ = self.kernel_.fisher_ratio_
        self.n_iter_ = int(np.max(self.svc_.n_iter_))
        return self

    def _select_mu(self, X, y):
        """Choose ``mu="auto"``.

        The candidate of :data:`MU_CANDIDATES` with the best 3-fold
        stratified CV accuracy of the SVM (this ``C``, ``gamma``) on the training data; ties
        go to the weaker regularization, i.e. to the learned kernel (``inf`` is
        :math:`q \\equiv 1`, the base kernel, chosen only when it is strictly better).
        Returns the choice and ``{mu: mean CV accuracy}``.
        """
        from sklearn.model_selection import StratifiedKFold

        if np.unique(y, return_counts=True)[1].min() < 3:
            return MU_CANDIDATES[0], {}
        folds = list(StratifiedKFold(3, shuffle=True, random_state=self._cv_seed()).split(X, y))
        scores = {}
        for mu in MU_CANDIDATES:
            acc = []
            for tr, va in folds:
                k = name_leaves(fit_kernel(name_leaves(self._make_kernel(mu)), X[tr], y[tr]))
                svc = self._svc().fit(np.asarray(k(X[tr])), y[tr])
                acc.append(svc.score(np.asarray(k(X[va], X[tr])), y[va]))
            scores[mu] = float(np.mean(acc))
        best = max(scores.values())
        return min(mu for mu, a in scores.items() if a >= best - 1e-12), scores

    def _cv_seed(self) -> int:
        rs = self.random_state
        return int(rs) if isinstance(rs, (int, np.integer)) else 0

    # KernelSVC reads ``self.svc_`` before checking that the estimator is fitted (an
    # AttributeError instead of NotFittedError) and offers predict_proba unconditionally:
    # check first, and expose predict_proba only when ``probability=True`` (as SVC does)
    @limit_blas
    def decision_function(self, X):
        """SVC decision values for ``X`` (Gram between ``X`` and the training points)."""
        check_is_fitted(self)
        return super().decision_function(X)

    def predict(self, X):
        """Predicted class labels."""
        check_is_fitted(self)
        return super().predict(X)

    @available_if(lambda self: self.probability)
    @limit_blas
    def predict_proba(self, X):
        """Platt-scaled probabilities (only with ``probability=True``)."""
        check_is_fitted(self)
        return self.svc_.predict_proba(self.gram(X))

    def conformal_factor(self, X) -> np.ndarray:
        """Return the learned :math:`q(x)` at the rows of ``X``."""
        check_is_fitted(self)
        X = validate_data(self, X, reset=False, dtype=np.float64)
        return np.asarray(self.kernel_.factor(X))
