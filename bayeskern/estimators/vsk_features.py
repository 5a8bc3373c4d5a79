"""The SVM-VSK paper's feature extraction SVM-E (Campi et al. 2021, section 7).

:class:`VSKFeatureExtractor` keeps some features and compresses the rest into one naive-Bayes
probability. The paper's grid and its feature selection SVM-S, with which SVM-E is compared,
are in :mod:`bayeskern.experiments.vsk`.
"""

from __future__ import annotations

import numbers

import numpy as np
from sklearn.base import BaseEstimator, TransformerMixin, _fit_context
from sklearn.naive_bayes import GaussianNB
from sklearn.preprocessing import MinMaxScaler
from sklearn.utils import check_random_state
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import check_is_fitted

from bayeskern.devices import limit_blas
from bayeskern.estimators.params import count
from bayeskern.estimators.validation import validate_data

__all__ = ["VSKFeatureExtractor"]

_KERNELS = ("rbf", "linear")


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
