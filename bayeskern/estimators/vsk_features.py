"""The SVM-VSK paper's grid and feature handling (Campi et al. 2021).

:func:`paper_param_grid` is its hyper-parameter grid; :class:`VSKFeatureExtractor` keeps some
features and compresses the rest into one naive-Bayes probability; :func:`make_svm_selector`
chooses features with a linear SVM.
"""

from __future__ import annotations

import numbers

import numpy as np
from sklearn.base import BaseEstimator, TransformerMixin, _fit_context
from sklearn.feature_selection import SelectFromModel
from sklearn.model_selection import GridSearchCV
from sklearn.naive_bayes import GaussianNB
from sklearn.preprocessing import MinMaxScaler
from sklearn.svm import SVC
from sklearn.utils import check_random_state
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import check_is_fitted

from bayeskern.devices import limit_blas
from bayeskern.estimators.params import count
from bayeskern.estimators.validation import validate_data

__all__ = ["paper_param_grid", "VSKFeatureExtractor", "make_svm_selector"]

_KERNELS = ("rbf", "linear")


def paper_param_grid(kernel: str = "rbf") -> dict:
    r"""Return the hyper-parameter grid of Campi et al. (2021), section 6.1.

    :math:`C \in \{2^{-6}, \dots, 2^{6}\}` (the paper's :math:`\zeta`) and, for the Gaussian
    kernel, :math:`\gamma \in \{10^{-6}, \dots, 10^{2}\}`. (The authors' public script uses
    :math:`2^{-6..5}` and :math:`10^{-6..1}`; the paper's text is followed here.)
    """
    if kernel not in _KERNELS:
        raise ValueError(f"kernel must be one of {_KERNELS}, got {kernel!r}")
    grid = {"C": [2.0**i for i in range(-6, 7)]}
    if kernel == "rbf":
        grid["gamma"] = [10.0**i for i in range(-6, 3)]
    return grid


class VSKFeatureExtractor(TransformerMixin, BaseEstimator):
    r"""VSK-like feature extraction (SVM-E, Campi et al. 2021, section 7).

    Keep :math:`\bar n - 1` of the (min–max scaled) features and replace all the others
    by one feature, the naive-Bayes probability :math:`P(y=+1\mid x_{\text{rest}})`
    computed on them: the output has :math:`\bar n` columns. An SVM on the output is the
    paper's SVM-E. With :math:`k > 2` classes (an extension; the paper is binary) the
    probabilities of all classes but the first are appended (:math:`k - 1` columns).

    Parameters
    ----------
    keep : list of int, optional
        Indices of the features kept as they are; ``None`` draws ``n_features - 1`` at random
        (the paper picks one at random and reports every choice, Table 5).
    n_features : int, default 2
        :math:`\bar n`, the number of output features when ``keep`` is None.
    random_state : int, Generator or None
        Seed of the random choice.

    Attributes
    ----------
    keep_ : kept feature indices; ``compressed_`` : indices compressed by naive Bayes.
    nb_ : the fitted ``GaussianNB``; ``scaler_`` : the ``MinMaxScaler``.
    """

    _parameter_constraints: dict = {
        "keep": [numbers.Integral, "array-like", None],
        "n_features": [count(1)],
        "random_state": ["random_state"],
    }

    def __init__(self, keep=None, n_features: int = 2, random_state=None):
        self.keep = keep
        self.n_features = n_features
        self.random_state = random_state

    @limit_blas
    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y):
        """Choose the kept features, fit the scaler and the naive-Bayes classifier."""
        X, y = validate_data(self, X, y, dtype=np.float64, ensure_min_samples=2)
        check_classification_targets(y)
        d = X.shape[1]
        if self.keep is None:
            n = self.n_features
            if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or not 1 <= n <= d:
                raise ValueError(
                    f"n_features must be an int in [1, {d}] for X with n_features = {d}, got {n!r}"
                )
            rng = check_random_state(self.random_state)
            keep = np.sort(rng.choice(d, n - 1, replace=False))
        else:
            keep = np.unique(np.atleast_1d(np.asarray(self.keep)))
            if keep.dtype.kind not in "iu" or (keep.size and (keep.min() < 0 or keep.max() >= d)):
                raise ValueError(f"keep must be int indices in [0, {d}), got {self.keep!r}")
        rest = np.setdiff1d(np.arange(d), keep)
        if rest.size == 0:
            raise ValueError("keep leaves no feature for the naive-Bayes compression")
        self.keep_, self.compressed_ = keep.astype(int), rest
        self.scaler_ = MinMaxScaler().fit(X)
        self.nb_ = GaussianNB().fit(self.scaler_.transform(X)[:, rest], y)
        return self

    @limit_blas
    def transform(self, X):
        """``[X_scaled[:, keep], P(y=+1 | X_scaled[:, rest])]``."""
        check_is_fitted(self)
        X = self.scaler_.transform(validate_data(self, X, reset=False, dtype=np.float64))
        p = self.nb_.predict_proba(X[:, self.compressed_])[:, 1:]
        return np.column_stack([X[:, self.keep_], p])

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.target_tags.required = True
        return tags


def make_svm_selector(
    n_features: int = 2, cv: int = 5, scoring: str = "f1_weighted", C_grid=None
) -> SelectFromModel:
    r"""SVM-S (Campi et al. 2021, section 7): keep the features with the largest linear-SVM weights.

    A linear ``SVC`` is tuned by ``cv``-fold grid search over ``C_grid`` (default the
    paper's :math:`2^{-6..6}`), the features are ranked by :math:`|w_j|`, and the top
    ``n_features`` (the paper's :math:`\bar n = 2`) are kept. Built from scikit-learn's
    ``SelectFromModel``; put a ``MinMaxScaler`` before it, as the paper does.
    """
    grid = {"C": paper_param_grid("linear")["C"] if C_grid is None else list(C_grid)}
    search = GridSearchCV(SVC(kernel="linear"), grid, cv=cv, scoring=scoring)
    return SelectFromModel(
        search,
        importance_getter="best_estimator_.coef_",
        max_features=n_features,
        threshold=-np.inf,
    )
