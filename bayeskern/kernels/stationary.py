"""Base kernels: RBF, Laplacian, Linear, Periodic and Mahalanobis RBF (pure JAX).

Every kernel here has unit variance; the Bayesian models put one amplitude on each additive
term (see ``models/gp.py``), so ``Linear() + RBF()`` has two amplitudes.
Length-scales left as ``None`` get a LogNormal(0, 1) prior in standardized input units
(median: one standard deviation of the inputs), following the advice to keep length-scales
away from both zero and infinity without fixing their order of magnitude.
"""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np
import numpyro.distributions as dist

from .base import Hyper, Kernel

__all__ = ["RBF", "Laplacian", "Linear", "Periodic", "MahalanobisRBF", "safe_norm", "sqdist"]


def _lengthscale_prior():
    return dist.LogNormal(0.0, 1.0)


def sqdist(A, B):
    r"""Return the squared Euclidean distances between the rows of ``A`` and ``B``.

    Clipped at zero against rounding, :math:`\|a\|^2 + \|b\|^2 - 2a^\top b`.
    """
    sq = jnp.sum(A * A, 1)[:, None] + jnp.sum(B * B, 1)[None, :] - 2.0 * A @ B.T
    return jnp.maximum(sq, 0.0)


def safe_norm(d, axis=-1):
    """Euclidean norm whose gradient is 0 (not NaN) at ``d = 0``."""
    sq = jnp.sum(d * d, axis=axis)
    nz = sq > 0
    return jnp.where(nz, jnp.sqrt(jnp.where(nz, sq, 1.0)), 0.0)


class _Stationary(Kernel):
    def __init__(self, lengthscale=None, ard: bool = False):
        self.lengthscale = lengthscale
        self.ard = ard

    def hyperparameters(self):
        return {
            "lengthscale": Hyper(
                self.lengthscale, _lengthscale_prior, 1.0, length=True, ard=self.ard
            )
        }

    def _scaled(self, theta, x1, x2):
        return (x1 - x2) / self._p(theta, "lengthscale")

    def _sqdist(self, theta, X1, X2):
        """Return the matrix of scaled squared distances.

        Matrix form: XLA's batched tiny dot products under a double ``vmap`` are slow on CPU.
        """
        ls = self._p(theta, "lengthscale")
        return sqdist(X1 / ls, X2 / ls)

    def prepare(self, theta, X1, X2):
        """Unscaled squared distances when one length-scale is sampled for all columns."""
        if self.ard or self.is_constant():
            return super().prepare(theta, X1, X2)
        return sqdist(X1, X2)

    def gram_prepared(self, theta, prepared):
        if self.ard or self.is_constant():
            return super().gram_prepared(theta, prepared)
        return self._from_sqdist(prepared / self._p(theta, "lengthscale") ** 2)

    def pairwise_prepared(self):
        return not self.ard or self.is_constant()

    def gram(self, theta, X1, X2):
        return self._from_sqdist(self._sqdist(theta, X1, X2))


class RBF(_Stationary):
    r"""Squared-exponential kernel.

    .. math:: k(x, x') = \exp\!\left(-\tfrac12 \sum_j (x_j - x'_j)^2 / \ell_j^2\right)

    Parameters
    ----------
    lengthscale
        :math:`\ell` in the units of ``X`` (scalar, or one per column); ``None`` samples it.
    ard
        One length-scale per input column when sampled.
    """

    def evaluate(self, theta, x1, x2):
        """Return the kernel value for one pair of points."""
        r = self._scaled(theta, x1, x2)
        return jnp.exp(-0.5 * jnp.sum(r * r))

    @staticmethod
    def _from_sqdist(sq):
        return jnp.exp(-0.5 * sq)

    def diag(self, theta, X):
        """Return ones: the kernel is 1 on the diagonal."""
        return jnp.ones(X.shape[0], dtype=X.dtype)


class Laplacian(_Stationary):
    r"""Laplacian (exponential) kernel, :math:`k(x,x') = \exp(-\|(x - x')/\ell\|_2)`.

    The norm is gradient-safe at coincident points.
    """

    def evaluate(self, theta, x1, x2):
        """Return the kernel value for one pair of points."""
        return jnp.exp(-safe_norm(self._scaled(theta, x1, x2)))

    @staticmethod
    def _from_sqdist(sq):
        nz = sq > 0
        return jnp.exp(-jnp.where(nz, jnp.sqrt(jnp.where(nz, sq, 1.0)), 0.0))

    def diag(self, theta, X):
        """Return ones: the kernel is 1 on the diagonal."""
        return jnp.ones(X.shape[0], dtype=X.dtype)


class Linear(Kernel):
    r"""Linear (dot-product) kernel on the standardized inputs, :math:`k(x,x') = x^\top x'`.

    The estimators centre the inputs, so this is the covariance of a linear trend through
    the data mean; its scale is the term's amplitude.
    """

    def evaluate(self, theta, x1, x2):
        """Return the dot product of the two points."""
        return jnp.dot(x1, x2)

    def gram(self, theta, X1, X2):
        """Return the Gram matrix ``X1 @ X2.T``."""
        return X1 @ X2.T

    def diag(self, theta, X):
        """Return the squared norms of the rows of ``X``."""
        return jnp.sum(X * X, axis=1)


class Periodic(Kernel):
    r"""Periodic (exp-sine-squared) kernel (MacKay 1998).

    .. math:: k(x, x') = \exp\!\left(-\frac{2}{\ell^2} \sum_j \sin^2\!\left(\pi\,
              \frac{x_j - x'_j}{p_j}\right)\right)

    Parameters
    ----------
    period
        :math:`p` in the units of ``X``; ``None`` samples it (LogNormal(0, 1), standardized).
    lengthscale
        :math:`\ell`, dimensionless (it scales the sine, not the inputs).
    """

    def __init__(self, period=None, lengthscale=None):
        self.period = period
        self.lengthscale = lengthscale

    def hyperparameters(self):
        """Return the hyper-parameters ``period`` and ``lengthscale``."""
        return {
            "period": Hyper(self.period, lambda: dist.LogNormal(0.0, 1.0), 1.0, length=True),
            "lengthscale": Hyper(self.lengthscale, lambda: dist.LogNormal(0.0, 1.0), 1.0),
        }

    def evaluate(self, theta, x1, x2):
        """Return the kernel value for one pair of points."""
        s = jnp.sin(jnp.pi * (x1 - x2) / self._p(theta, "period"))
        return jnp.exp(-2.0 * jnp.sum(s * s) / self._p(theta, "lengthscale") ** 2)

    def _sin2(self, theta, X1, X2):
        s = jnp.sin(jnp.pi * (X1[:, None, :] - X2[None, :, :]) / self._p(theta, "period"))
        return jnp.sum(s * s, axis=-1)

    def gram(self, theta, X1, X2):
        """Return the Gram matrix."""
        return jnp.exp(-2.0 * self._sin2(theta, X1, X2) / self._p(theta, "lengthscale") ** 2)

    def prepare(self, theta, X1, X2):
        """Return the sin² matrix when the period is fixed (the usual case: a known season)."""
        if self.period is None or self.is_constant():
            return super().prepare(theta, X1, X2)
        return self._sin2(theta, X1, X2)

    def gram_prepared(self, theta, prepared):
        """Return the Gram matrix from :meth:`prepare`'s output."""
        if self.period is None or self.is_constant():
            return super().gram_prepared(theta, prepared)
        return jnp.exp(-2.0 * prepared / self._p(theta, "lengthscale") ** 2)

    def pairwise_prepared(self):
        """Return ``True`` when :meth:`prepare` returns the pairwise sin² matrix."""
        return self.period is not None or self.is_constant()

    def diag(self, theta, X):
        """Return ones: the kernel is 1 on the diagonal."""
        return jnp.ones(X.shape[0], dtype=X.dtype)


class MahalanobisRBF(Kernel):
    r"""Mahalanobis RBF kernel (a data-dependent kernel).

    .. math:: k(x, x') = \exp\!\left(-\frac{1}{2\ell^2}(x - x')^\top \Sigma^{-1} (x - x')\right)

    :math:`\Sigma` is the covariance of the training inputs, learned in :meth:`fit`
    (or given as ``covariance``). It is the :math:`k = 1` case of the cluster-based RBF of
    Czarnecki & Tabor (seed 001, section 3).
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
            # a constant feature has zero variance: give it unit variance (it adds nothing to
            # distances between the training points); then regularize a singular sample
            # covariance towards its diagonal
            const = np.diag(cov) <= 1e-300
            cov[const, const] = 1.0
            cov = cov + 1e-8 * np.trace(cov) / len(cov) * np.eye(len(cov))
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
