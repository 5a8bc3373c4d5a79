"""The Mahalanobis RBF kernel, whose metric is the precision of the training inputs."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from .base import Hyper, Kernel
from .stationary_base import _lengthscale_prior, sqdist

__all__ = ["MahalanobisRBF"]


class MahalanobisRBF(Kernel):
    r"""Mahalanobis RBF kernel (a data-dependent kernel).

    .. math:: k(x, x') = \exp\!\left(-\frac{1}{2\ell^2}(x - x')^\top \Sigma^{-1} (x - x')\right)

    :math:`\Sigma` is the covariance of the training inputs, learned in :meth:`fit`
    (or given as ``covariance``). It is the :math:`k = 1` case of the cluster-based RBF of
    Czarnecki & Tabor (2014, section 3).
    """

    def __init__(self, lengthscale=None, covariance=None):
        self.lengthscale = lengthscale
        self.covariance = covariance
        if covariance is not None:
            self.precision_ = np.linalg.inv(np.atleast_2d(np.asarray(covariance, dtype=float)))

    def hyperparameters(self):
        """Return the hyper-parameter ``lengthscale``."""
        return {"lengthscale": Hyper(self.lengthscale, _lengthscale_prior, 1.0)}

    def fit(self, X, y=None):
        """Return a copy with the precision of ``X``'s covariance (unless one was given)."""
        import copy

        k = copy.copy(self)
        X = np.asarray(X, dtype=float)
        if self.covariance is None:
            if len(X) < 2:
                raise ValueError("X needs at least 2 rows to estimate MahalanobisRBF's covariance")
            cov = np.atleast_2d(np.cov(X, rowvar=False))
            # a constant feature has zero variance, up to the rounding of its mean (about
            # 1e-34 for a column of equal values near 1; its inverse overflows float32): give
            # it unit variance (it adds nothing to distances between the training points);
            # then regularize a singular sample covariance towards its diagonal
            const = np.diag(cov) <= (1e-12 * np.abs(X).max(axis=0)) ** 2
            cov[const, const] = 1.0
            # (relative 1e-8; 1e-5 when JAX computes in float32, whose Cholesky factor of the
            # precision needs a condition number well below 1 / eps = 8e6)
            rel = 1e-8 if jax.config.jax_enable_x64 else 1e-5
            cov = cov + rel * np.trace(cov) / len(cov) * np.eye(len(cov))
            k.precision_ = np.linalg.inv(cov)
        return k

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
