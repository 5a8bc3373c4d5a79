"""Bayesian GP estimators: :class:`GPRegressor` and :class:`GPClassifier`.

NUTS samples the kernel hyper-parameters (and, for classification, the whitened latent
function); predictions average over the posterior draws, so intervals include the
hyper-parameter uncertainty that a maximum-marginal-likelihood (ML-II) fit ignores.
Any bayeskern kernel works, including the data-dependent ones (VSK, CkRBF, Xiong...), which
are fitted on the standardized training data before sampling.

The estimators live in :mod:`~bayeskern.estimators.gp_regressor` and
:mod:`~bayeskern.estimators.gp_classifier`; their shared base in
:mod:`~bayeskern.estimators.gp_base`, the Hilbert-space basis in
:mod:`~bayeskern.estimators.gp_basis`.
"""

from bayeskern.estimators.gp_classifier import GPClassifier
from bayeskern.estimators.gp_regressor import GPRegressor

__all__ = ["GPRegressor", "GPClassifier"]
