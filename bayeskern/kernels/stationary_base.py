r"""The common part of the stationary kernels: squared distances and their base class.

``_Stationary`` is a unit-variance kernel of the scaled difference :math:`(x - x') / \ell`
(one length-scale, or one per column with ARD), evaluated from the scaled squared distance,
with a spectral density for Hilbert-space approximations. Length-scales left as ``None``
get a LogNormal(0, 1) prior in standardized input units (median: one standard deviation of
the inputs), which keeps them away from both zero and infinity without fixing their order
of magnitude.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpyro.distributions as dist

from .base import Hyper, Kernel

__all__ = ["safe_norm", "sqdist"]


def _lengthscale_prior():
    return dist.LogNormal(0.0, 1.0)


def sqdist(A, B):
    r"""Return the squared Euclidean distances between the rows of ``A`` and ``B``.

    In float64 :math:`\|a\|^2 + \|b\|^2 - 2a^\top b` (one matrix product), clipped at zero
    against rounding. That form errs by about :math:`\epsilon\|a\|^2`, so :math:`r` errs by
    :math:`\sqrt{\epsilon}\|a\|` near :math:`r = 0`: harmless in float64, but in float32
    (:math:`\sqrt\epsilon \approx 3\cdot10^{-4}`) it shows in kernels with a slope at
    :math:`r = 0` (Laplacian); float32 therefore sums the squared differences.
    """
    if A.dtype == jnp.float32 or B.dtype == jnp.float32:
        return jnp.sum(jnp.square(A[:, None, :] - B[None, :, :]), axis=-1)
    sq = jnp.sum(A * A, 1)[:, None] + jnp.sum(B * B, 1)[None, :] - 2.0 * A @ B.T
    return jnp.maximum(sq, 0.0)


def _safe_sqrt(sq):
    """Square root whose gradient is 0 (not infinite) at ``sq = 0``."""
    nz = sq > 0
    return jnp.where(nz, jnp.sqrt(jnp.where(nz, sq, 1.0)), 0.0)


def safe_norm(d, axis=-1):
    """Euclidean norm whose gradient is 0 (not NaN) at ``d = 0``."""
    return _safe_sqrt(jnp.sum(d * d, axis=axis))


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

    def evaluate(self, theta, x1, x2):
        """Return the kernel value for one pair of points, from the scaled squared distance."""
        r = self._scaled(theta, x1, x2)
        return self._from_sqdist(jnp.sum(r * r))

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

    def diag(self, theta, X):
        """Return ones: the kernel is 1 on the diagonal."""
        return jnp.ones(X.shape[0], dtype=X.dtype)

    # ----------------------------------------------------------------- spectral density
    def has_spectral_density(self) -> bool:
        """Return ``True``: every stationary kernel here has a spectral density."""
        return True

    def spectral_density(self, theta: dict, omega: jax.Array) -> jax.Array:
        r"""Return the spectral density :math:`S(\omega)` at each row of ``omega``.

        The kernel is a function of :math:`\tau / \ell` (element-wise, one length-scale per
        column with ARD), :math:`k(\tau) = k_1(\tau/\ell)`, so substituting
        :math:`\tilde\omega_j = \ell_j \omega_j` in the Fourier integral gives

        .. math:: S(\omega) = \Big(\prod_j \ell_j\Big)\, S_1(\ell \odot \omega),

        with :math:`S_1` the density of the unit-length-scale kernel (:meth:`_unit_density`).
        Convention: :math:`k(\tau) = (2\pi)^{-d} \int S(\omega) e^{i \omega^\top \tau}
        d\omega`, so :math:`(2\pi)^{-d} \int S = k(0) = 1`.

        Parameters
        ----------
        theta : dict
            Hyper-parameters by NumPyro site name; the length-scale in the units of
            ``omega``'s inverse (standardized inputs in the models).
        omega : jax.Array of shape (m, d)
            Angular frequencies.

        Returns
        -------
        jax.Array of shape (m,)
        """
        omega = jnp.asarray(omega)
        if omega.ndim != 2:
            raise ValueError(f"omega must have shape (m, d), got shape {omega.shape}")
        d = omega.shape[1]
        ls = jnp.asarray(self._p(theta, "lengthscale"), dtype=omega.dtype)
        if ls.ndim > 1 or (ls.ndim == 1 and ls.shape[0] not in (1, d)):
            raise ValueError(
                f"omega has {d} columns but {type(self).__name__}'s lengthscale has shape "
                f"{ls.shape}; expected a scalar or one per column"
            )
        ls = jnp.broadcast_to(ls, (d,))
        return jnp.prod(ls) * self._unit_density(theta, omega * ls)

    def _unit_density(self, theta, u):
        """Spectral density of the kernel with unit length-scales at the rows of ``u``."""
        raise NotImplementedError
