"""scikit-learn estimators of bayeskern."""

from .ckrbf import CkRBFClassifier, MkRBFClassifier
from .conformal import ConformalKernelClassifier
from .gabasr import GaBaSRClassifier, GaBaSRRegressor
from .gp import GPClassifier, GPRegressor
from .labrbf import LABRBFRegressor
from .svm import KernelSVC
from .vsk import VSKClassifier, VSKFeatureExtractor, VSKRegressor

__all__ = [
    "GPRegressor",
    "GPClassifier",
    "GaBaSRRegressor",
    "GaBaSRClassifier",
    "VSKClassifier",
    "VSKRegressor",
    "VSKFeatureExtractor",
    "CkRBFClassifier",
    "MkRBFClassifier",
    "LABRBFRegressor",
    "ConformalKernelClassifier",
    "KernelSVC",
]
