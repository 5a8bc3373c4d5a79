r"""Support-vector classifiers with the cluster-based RBF kernel (Czarnecki & Tabor 2014).

* :class:`CkRBFClassifier`: one SVM on the :math:`C_k\mathrm{RBF}` Gram matrix (the paper's
  method, section 3-4), a :class:`~bayeskern.estimators.svm.KernelSVC` whose kernel is
  :class:`~bayeskern.kernels.ckrbf.CkRBF`.
* :class:`MkRBFClassifier`: the paper's :math:`m_k\mathrm{RBF}` baseline (section 5):
  k-means first, then a separate Mahalanobis-RBF SVM in each cluster, with the cluster's
  covariance.
* :func:`loo_against_baselines`: the Bayesian use, a GP with the :math:`C_k\mathrm{RBF}`
  kernel (prior on :math:`\gamma`, amplitude and noise, NUTS) compared by PSIS-LOO with GPs
  on the RBF and Mahalanobis-RBF kernels.
"""

from __future__ import annotations

import numbers

import numpy as np
from sklearn.base import BaseEstimator, ClassifierMixin, _fit_context
from sklearn.cluster import KMeans
from sklearn.utils._param_validation import StrOptions
from sklearn.utils.metaestimators import available_if
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import check_is_fitted
from threadpoolctl import threadpool_limits

from bayeskern.devices import limit_blas
from bayeskern.estimators.params import NumberInterval, count, positive
from bayeskern.estimators.svm import KernelSVC
from bayeskern.estimators.validation import validate_data
from bayeskern.kernels.ckrbf import PARTITIONS, CkRBF
from bayeskern.learning import fit_kernel

__all__ = ["CkRBFClassifier", "MkRBFClassifier", "loo_against_baselines", "GAMMA_FACTORS"]


#: multiples of 1/d tried by ``gamma="auto"`` (the typical within-cell exponent, -1 at 1/d)
GAMMA_FACTORS = (0.25, 0.5, 1.0, 2.0, 4.0)


def _resolve_gamma(gamma, n_features: int) -> float:
    """Return ``gamma`` as a number: ``1/d`` for ``"scale"`` (and as the start of ``"auto"``)."""
    return 1.0 / n_features if isinstance(gamma, str) else float(gamma)


def _check_unlabeled(X_unlabeled, n_features: int):
    if X_unlabeled is None:
        return None
    try:
        U = np.asarray(X_unlabeled, dtype=float)
    except (TypeError, ValueError) as e:
        raise TypeError(f"X_unlabeled must be a numeric array: {e}") from None
    if U.ndim != 2 or U.shape[1] != n_features:
        raise ValueError(f"X_unlabeled must have shape (m, {n_features}) like X, got {U.shape}")
    if not np.all(np.isfinite(U)):
        raise ValueError("X_unlabeled contains NaN or infinite values")
    return U


class CkRBFClassifier(KernelSVC):
    r"""SVM with the cluster-based RBF kernel :math:`C_k\mathrm{RBF}` (Czarnecki & Tabor 2014).

    .. math:: K_\gamma(x, y) = c\,\det(\Sigma_x + \Sigma_y)^{-1/2}
              \exp\!\big(-\gamma (x - y)^\top (\Sigma_x + \Sigma_y)^{-1} (x - y)\big)

    with :math:`\Sigma_x` the covariance of the cell of :math:`x` in a partition of the
    training inputs (section 3-4; see :class:`~bayeskern.kernels.ckrbf.CkRBF`), then
    scikit-learn's ``SVC(kernel="precomputed")``. New points get their cell from the fitted
    partition and the Gram matrix against the training points.

    Bayesian twin (same kernel, with priors and a posterior; binary):
    ``bk.GPClassifier(kernel=bk.kernels.CkRBF(n_clusters=2))``.

    Used as a user would: ``make_pipeline(MinMaxScaler(), CkRBFClassifier())`` (the default
    ``gamma="auto"`` adapts to the data), or a ``GridSearchCV`` over ``{"C": [0.1, 1, 10,
    100], "gamma": [0.01, 0.1, 1, 10]}`` (:math:`\gamma` multiplies a Mahalanobis distance, so
    the grid means the same for inputs of any units).

    Parameters
    ----------
    C : float, default 1.0
        SVM regularization.
    gamma : "auto", "scale" or float, default "auto"
        :math:`\gamma`; ``"scale"`` is :math:`1/d`, for which two points of one cell have a
        typical exponent of :math:`-1` (:math:`q \sim \chi^2_d` there). ``"auto"`` picks
        :math:`\gamma` from :data:`GAMMA_FACTORS` :math:`/d` = (0.25, 0.5, 1, 2, 4)/d by
        3-fold stratified CV accuracy of this SVM on the training data (ties to the value
        nearest 1/d); the partition and the γ-free factors are computed once per fold (the
        γ-conversion of Czarnecki & Tabor 2014), so it costs 15 small SVM fits and 3
        clusterings. Why: with the fixed 1/d, ``CkRBFClassifier()`` can score below
        scikit-learn's ``SVC()``, which ``"auto"`` corrects (the numbers are on the results
        pages). Numeric values are what a ``GridSearchCV`` over
        ``{"C": [...], "gamma": [...]}`` passes.
    n_clusters : int, default 2
        Number of cells :math:`k` (:math:`C_2\mathrm{RBF}` is the paper's recommendation).
    partition : {"kmeans", "gmm", "dpgmm"}, default "kmeans"
        Clustering: k-means (k-means++ seeding, 10 restarts), Gaussian mixture, or
        Dirichlet-process Gaussian mixture.
    radial : bool, default False
        Radial cell covariances :math:`\sigma_a^2 I` (Observation 3.3).
    eps : float, default 1e-10
        Regularization of singular cell covariances (Observation 3.2).
    normalize : bool, default True
        Divide the kernel by the geometric mean of its diagonal over the training points,
        so that ``C`` keeps its usual meaning whatever the units of ``X``. ``False`` is the
        paper's formula, whose scale :math:`\det(2\Sigma)^{-1/2}` multiplies the effective
        ``C`` (by orders of magnitude on data scaled to [0, 1]).
    X_unlabeled : array of shape (m, n_features) or None, default None
        Extra, unlabeled inputs used with the training inputs to build the partition and
        covariances. The construction uses no labels, so the paper clusters all data
        including the test points (section 4-5); the default ``None`` does not.
    class_weight, probability, tol, max_iter
        As in :class:`sklearn.svm.SVC`.
    random_state : int, RandomState or None
        Seed of the clustering (and of Platt scaling when ``probability=True``).

    Attributes
    ----------
    kernel_ : the fitted :class:`~bayeskern.kernels.ckrbf.CkRBF`.
    gamma_ : the :math:`\gamma` used; ``gamma_scores_`` the internal CV accuracy of each
        candidate (empty unless ``gamma="auto"``).
    svc_ : the fitted ``SVC``.
    classes_, X_fit_, n_features_in_
    """

    _parameter_constraints: dict = {
        **KernelSVC._SVC_CONSTRAINTS,
        "gamma": [positive(), StrOptions({"auto", "scale"})],
        "n_clusters": [count(1)],
        "partition": [StrOptions(set(PARTITIONS))],
        "radial": ["boolean"],
        "eps": [NumberInterval(numbers.Real, 0, 1, closed="neither")],
        "normalize": ["boolean"],
        "X_unlabeled": ["array-like", None],
        "random_state": ["random_state"],
    }

    def __init__(
        self,
        C: float = 1.0,
        gamma="auto",
        n_clusters: int = 2,
        partition: str = "kmeans",
        radial: bool = False,
        eps: float = 1e-10,
        normalize: bool = True,
        X_unlabeled=None,
        class_weight=None,
        probability: bool = False,
        tol: float = 1e-3,
        max_iter: int = -1,
        random_state=None,
    ):
        self.C = C
        self.gamma = gamma
        self.n_clusters = n_clusters
        self.partition = partition
        self.radial = radial
        self.eps = eps
        self.normalize = normalize
        self.X_unlabeled = X_unlabeled
        self.class_weight = class_weight
        self.probability = probability
        self.tol = tol
        self.max_iter = max_iter
        self.random_state = random_state

    def _make_kernel(self, gamma=None) -> CkRBF:
        # called by KernelSVC.fit after validate_data, so n_features_in_ is known
        return CkRBF(
            n_clusters=self.n_clusters,
            gamma=self.gamma_ if gamma is None else gamma,
            partition=self.partition,
            radial=self.radial,
            eps=self.eps,
            normalize=self.normalize,
            X_unlabeled=_check_unlabeled(self.X_unlabeled, self.n_features_in_),
            random_state=self.random_state,
        )

    @limit_blas
    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y):
        """Partition ``X`` (and ``X_unlabeled``), build the Gram matrix, fit the SVC."""
        X, y = validate_data(self, X, y, dtype=np.float64, ensure_min_samples=2)
        check_classification_targets(y)
        self.gamma_ = _resolve_gamma(self.gamma, X.shape[1])
        self.gamma_scores_ = {}
        if isinstance(self.gamma, str) and self.gamma == "auto":
            self.gamma_, self.gamma_scores_ = self._select_gamma(X, y)
        names = getattr(self, "feature_names_in_", None)  # validate_data on the array drops them
        super().fit(X, y)
        if names is not None:
            self.feature_names_in_ = names
        return self

    def _select_gamma(self, X, y):
        """Choose ``gamma="auto"``.

        The :math:`\\gamma` of :data:`GAMMA_FACTORS` / d with the best
        3-fold stratified CV accuracy of this SVM (this ``C``) on the training data; ties go
        to the value nearest 1/d. The partition and the :math:`\\gamma`-free factors are
        computed once per fold (the γ-conversion of Czarnecki & Tabor 2014), so only the SVMs are
        refitted.
        """
        from sklearn.model_selection import StratifiedKFold

        d = X.shape[1]
        if np.unique(y, return_counts=True)[1].min() < 3:
            return 1.0 / d, {}
        seed = self.random_state if isinstance(self.random_state, (int, np.integer)) else 0
        folds = StratifiedKFold(3, shuffle=True, random_state=int(seed)).split(X, y)
        acc = {f: [] for f in GAMMA_FACTORS}
        for tr, va in folds:
            k = fit_kernel(self._make_kernel(1.0 / d), X[tr], y[tr])
            ell, q = (np.asarray(a) for a in k.factors(X[tr]))
            ell_v, q_v = (np.asarray(a) for a in k.factors(X[va], X[tr]))
            for f in GAMMA_FACTORS:
                svc = self._svc().fit(np.exp(ell - f / d * q), y[tr])
                acc[f].append(svc.score(np.exp(ell_v - f / d * q_v), y[va]))
        scores = {f / d: float(np.mean(a)) for f, a in acc.items()}
        best = max(scores.values())
        ok = [g for g, a in scores.items() if a >= best - 1e-12]
        return min(ok, key=lambda g: abs(np.log(g * d))), scores

    # KernelSVC's methods read ``self.svc_`` before ``self.gram`` checks fitting, so an
    # unfitted call raised AttributeError instead of NotFittedError: check first
    @limit_blas
    def decision_function(self, X):
        """SVC decision values for ``X``."""
        check_is_fitted(self)
        return super().decision_function(X)

    def predict(self, X):
        """Predicted class labels."""
        check_is_fitted(self)
        return super().predict(X)

    def _has_proba(self):
        if not self.probability:
            raise AttributeError("predict_proba is available only with probability=True")
        return True

    # available_if hides the method when probability=False (as SVC does), so that
    # hasattr(clf, "predict_proba") tells the truth to scikit-learn's tools
    @available_if(_has_proba)
    @limit_blas
    def predict_proba(self, X):
        """Platt-scaled probabilities (requires ``probability=True``)."""
        check_is_fitted(self)
        return super().predict_proba(X)

    @property
    def n_iter_(self):
        """Iterations of the SVC solver (scikit-learn's convention for ``max_iter``)."""
        check_is_fitted(self)
        return self.svc_.n_iter_


class MkRBFClassifier(ClassifierMixin, BaseEstimator):
    r"""The paper's :math:`m_k\mathrm{RBF}` baseline: k-means, then one Mahalanobis SVM per cluster.

    Each cluster :math:`W_c` gets its own SVM with the kernel
    :math:`\det(2\Sigma_c)^{-1/2}\exp(-\gamma (x - y)^\top (2\Sigma_c)^{-1}(x - y))`,
    :math:`\Sigma_c = \mathrm{cov}(X \cap W_c)` (:math:`C_1\mathrm{RBF}` on the cluster); a new
    point is classified by the SVM of its nearest centre (Czarnecki & Tabor 2014, section 5, the
    :math:`m_k\mathrm{RBF}` columns of Tables 2, 4, 6). A cluster whose training points
    carry one class predicts that class. The paper uses it to show that :math:`C_k\mathrm{RBF}`
    differs from splitting the problem by clusters.

    Bayesian twin: no one model splits by clusters; the cluster-based kernel in one Bayesian
    model is ``bk.GPClassifier(kernel=bk.kernels.CkRBF(n_clusters=2))``, and one cluster's
    Mahalanobis SVM corresponds to ``bk.GPClassifier(kernel=bk.kernels.MahalanobisRBF())`` on
    that cluster's rows.

    Parameters
    ----------
    C, gamma, eps, normalize, X_unlabeled, random_state
        As in :class:`CkRBFClassifier` (``gamma="scale"`` is :math:`1/d`).
    n_clusters : int, default 2
        Number of k-means clusters (k-means++ seeding, 10 restarts).

    Attributes
    ----------
    centers_ : (k, d) k-means centres.
    estimators_ : list of fitted :class:`CkRBFClassifier` (``n_clusters=1``) or class labels.
    classes_, n_features_in_
    """

    _parameter_constraints: dict = {
        "C": [positive()],
        "gamma": [positive(), StrOptions({"scale"})],
        "n_clusters": [count(1)],
        "eps": [NumberInterval(numbers.Real, 0, 1, closed="neither")],
        "normalize": ["boolean"],
        "X_unlabeled": ["array-like", None],
        "random_state": ["random_state"],
    }

    def __init__(
        self,
        C: float = 1.0,
        gamma="scale",
        n_clusters: int = 2,
        eps: float = 1e-10,
        normalize: bool = True,
        X_unlabeled=None,
        random_state=None,
    ):
        self.C = C
        self.gamma = gamma
        self.n_clusters = n_clusters
        self.eps = eps
        self.normalize = normalize
        self.X_unlabeled = X_unlabeled
        self.random_state = random_state

    @limit_blas
    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y):
        """Cluster ``X`` (and ``X_unlabeled``), then fit one SVM per cluster."""
        X, y = validate_data(self, X, y, dtype=np.float64, ensure_min_samples=2)
        check_classification_targets(y)
        gamma = _resolve_gamma(self.gamma, self.n_features_in_)
        U = _check_unlabeled(self.X_unlabeled, self.n_features_in_)
        Xall = X if U is None else np.vstack([X, U])
        if len(Xall) < self.n_clusters:
            raise ValueError(
                f"n_clusters={self.n_clusters} clusters need at least as many points; "
                f"got {len(Xall)}"
            )
        self.classes_ = np.unique(y)
        with threadpool_limits(limits=1):
            km = KMeans(
                self.n_clusters, init="k-means++", n_init=10, random_state=self.random_state
            ).fit(Xall)
        self.centers_ = km.cluster_centers_
        lab, lab_u = km.labels_[: len(X)], km.labels_[len(X) :]
        self.estimators_ = []
        for c in range(self.n_clusters):
            idx = lab == c
            classes_c = np.unique(y[idx])
            if len(classes_c) < 2:
                # an empty cluster falls back to the majority class of the whole training set
                if len(classes_c) == 0:
                    vals, counts = np.unique(y, return_counts=True)
                    classes_c = vals[[np.argmax(counts)]]
                self.estimators_.append(classes_c[0])
                continue
            Uc = U[lab_u == c] if U is not None and np.any(lab_u == c) else None
            self.estimators_.append(
                CkRBFClassifier(
                    C=self.C,
                    gamma=gamma,
                    n_clusters=1,
                    eps=self.eps,
                    normalize=self.normalize,
                    X_unlabeled=Uc,
                    random_state=self.random_state,
                ).fit(X[idx], y[idx])
            )
        return self

    def _clusters(self, X):
        d2 = ((X[:, None, :] - self.centers_[None]) ** 2).sum(-1)
        return np.argmin(d2, axis=1)

    @limit_blas
    def predict(self, X):
        """Class of each row of ``X`` from the SVM of its cluster."""
        check_is_fitted(self)
        X = validate_data(self, X, reset=False, dtype=np.float64)
        lab = self._clusters(X)
        out = np.empty(len(X), dtype=self.classes_.dtype)
        for c, est in enumerate(self.estimators_):
            idx = lab == c
            if not np.any(idx):
                continue
            out[idx] = est.predict(X[idx]) if isinstance(est, CkRBFClassifier) else est
        return out


def loo_against_baselines(
    X,
    y,
    *,
    n_clusters: int = 2,
    classification: bool = True,
    kernels: dict | None = None,
    **gp_params,
):
    r"""Bayesian :math:`C_k\mathrm{RBF}` against RBF and Mahalanobis-RBF GPs, by PSIS-LOO.

    Fits ``bk.GPClassifier`` (or ``bk.GPRegressor``) once per kernel — by default
    ``CkRBF(n_clusters)`` (prior :math:`\gamma \sim \mathrm{LogNormal}(-\ln d, 1)`),
    ``RBF()`` and ``MahalanobisRBF()`` (length-scales ``LogNormal(0, 1)``), each with the
    models' ``amplitude ~ HalfNormal(1)`` (and ``noise ~ HalfNormal(1)`` for regression) —
    and ranks them with :func:`bayeskern.diagnostics.compare` (expected log pointwise
    predictive density by Pareto-smoothed importance sampling, Vehtari, Gelman & Gabry 2017).

    Parameters
    ----------
    X, y : training data (binary labels when ``classification``).
    n_clusters : number of cells of the CkRBF kernel.
    classification : GP classification (Bernoulli-logit) or regression.
    kernels : optional ``{name: kernel}`` replacing the default three.
    **gp_params : sampler settings passed to the GP estimator (``num_warmup``,
        ``num_samples``, ``num_chains``, ``random_state``, ``progress_bar``...).

    Returns
    -------
    table : pandas.DataFrame from :func:`bayeskern.diagnostics.compare` (best model first).
    fitted : dict of the fitted estimators by name (each with ``idata_``, ``convergence_``).
    """
    from bayeskern import diagnostics
    from bayeskern.estimators.gp import GPClassifier, GPRegressor
    from bayeskern.kernels import RBF, MahalanobisRBF

    if kernels is None:
        kernels = {
            f"C{n_clusters}RBF": CkRBF(n_clusters=n_clusters),
            "RBF": RBF(),
            "MahalanobisRBF": MahalanobisRBF(),
        }
    Est = GPClassifier if classification else GPRegressor
    fitted = {name: Est(kernel=k, **gp_params).fit(X, y) for name, k in kernels.items()}
    return diagnostics.compare(fitted), fitted
