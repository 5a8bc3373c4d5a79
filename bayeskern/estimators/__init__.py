"""scikit-learn estimators of bayeskern."""

from .gp import GPClassifier, GPRegressor

__all__ = ["GPRegressor", "GPClassifier"]
