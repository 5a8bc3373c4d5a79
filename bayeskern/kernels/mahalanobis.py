"""The Mahalanobis RBF kernel, whose metric is the precision of the training inputs."""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np

from .base import Hyper, Kernel
from .stationary_base import _lengthscale_prior, sqdist

__all__ = ["MahalanobisRBF"]


class MahalanobisRBF(Kernel):
    r"""Mahalanobis RBF kernel (a data-dependent kernel).

    .. math:: k(x, x') = \exp\!\left(-\frac{1}{2\ell^2}(x - x')^\top \Sigma^{-1} (x - x')\right)

    :math:`\Sigma` is the covariance of the training inputs, learned by
    :func:`bayeskern.learning.fit_mahalanobis_rbf` (or given as ``covariance``). It is the
    :math:`k = 1` case of the cluster-based RBF of Czarnecki & Tabor (2014, section 3).
    """

    def __init__(self, lengthscale=None, covariance=None):
        self.lengthscale = lengthscale
        self.covariance = covariance
        if covariance is not None:
            self.precision_ = np.linalg.inv(np.atleast_2d(np.asarray(covariance, dtype=float)))

    def hyperparameters(self):
        """Return the hyper-parameter ``lengthscale``."""
        return {"lengthscale": Hyper(self.lengthscale, _lengthscale_prior, 1.0)}

    @property
    def is_fitted(self):
        """Return ``True`` once the precision is known."""
        return hasattr(self, "precision_")

    def evaluate(self, theta, x1, x2):
        """Return the kernel value for one pair of points."""
        d = x1 - x2
        q = d @ jnp.asarray(self.precision_) @ d
        return jnp.exp(-0.5 * q / self._p(theta, "lengthscale") ** 2)

    def _whitened_sqdist(self, X1, X2):
        # whiten with the Cholesky factor of the precision, then squared distances
        W = jnp.linalg.cholesky(jnp.asarray(self.precision_))
        return sqdist(X1 @ W, X2 @ W)

    def gram(self, theta, X1, X2):
        """Return the Gram matrix."""
        return self.gram_prepared(theta, self._whitened_sqdist(X1, X2))

    def prepare(self, theta, X1, X2):
        """Return the Mahalanobis squared distances (the precision is fitted, not sampled)."""
        return self._whitened_sqdist(X1, X2)

    def gram_prepared(self, theta, prepared):
        """Return the Gram matrix from the prepared squared distances."""
        return jnp.exp(-0.5 * prepared / self._p(theta, "lengthscale") ** 2)

    def pairwise_prepared(self):
        """Return ``True``: the prepared distances are pairwise."""
        return True

    def diag(self, theta, X):
        """Return ones: the kernel is 1 on the diagonal."""
        return jnp.ones(X.shape[0], dtype=X.dtype)
