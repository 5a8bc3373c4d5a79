"""Base kernels: RBF, Laplacian, Matérn, rational quadratic, Linear, Periodic, Mahalanobis RBF.

Every kernel here has unit variance; the Bayesian models put one amplitude on each additive
term (see ``models/gp.py``), so ``Linear() + RBF()`` has two amplitudes.
Length-scales left as ``None`` get a LogNormal(0, 1) prior in standardized input units
(median: one standard deviation of the inputs), following the advice to keep length-scales
away from both zero and infinity without fixing their order of magnitude.

The stationary kernels (RBF, Laplacian, Matern32, Matern52, RationalQuadratic) give their
spectral density, :meth:`~bayeskern.kernels.Kernel.spectral_density`, for Hilbert-space
approximations (Solin & Särkkä 2020; Riutort-Mayol et al. 2023); :class:`Periodic` gives the
cosine series of its one-column factor instead (Solin & Särkkä 2014),
:meth:`Periodic.cosine_coefficients`.

This module defines RBF, the Matérn family and Linear on the common base of
:mod:`bayeskern.kernels.stationary_base`; the rational quadratic kernel (with its quadrature
of the spectral density), the periodic kernel (with its cosine series) and the Mahalanobis
RBF have their own modules and are exported here too.
"""

from __future__ import annotations

import functools
import math

import jax
import jax.numpy as jnp
from numpyro.contrib.hsgp.spectral_densities import (
    spectral_density_matern,
    spectral_density_squared_exponential,
)

from .base import Kernel
from .mahalanobis import MahalanobisRBF
from .periodic import Periodic
from .rational_quadratic import RationalQuadratic
from .stationary_base import _safe_sqrt, _Stationary, safe_norm, sqdist

__all__ = [
    "RBF",
    "Laplacian",
    "Matern32",
    "Matern52",
    "RationalQuadratic",
    "Linear",
    "Periodic",
    "MahalanobisRBF",
    "safe_norm",
    "sqdist",
]


class RBF(_Stationary):
    r"""Squared-exponential kernel.

    .. math:: k(x, x') = \exp\!\left(-\tfrac12 \sum_j (x_j - x'_j)^2 / \ell_j^2\right)

    Spectral density (Rasmussen & Williams 2006, section 4.2),
    :math:`S(\omega) = (2\pi)^{d/2} \prod_j \ell_j \exp(-\tfrac12 \sum_j \ell_j^2 \omega_j^2)`.

    Parameters
    ----------
    lengthscale
        :math:`\ell` in the units of ``X`` (scalar, or one per column); ``None`` samples it.
    ard
        One length-scale per input column when sampled.
    """

    @staticmethod
    def _from_sqdist(sq):
        return jnp.exp(-0.5 * sq)

    def _unit_density(self, theta, u):
        return spectral_density_squared_exponential(dim=u.shape[1], w=u, alpha=1.0, length=1.0)


class _Matern(_Stationary):
    """Matérn kernels: the spectral density of smoothness ``_nu`` (NumPyro's formula)."""

    _nu: float

    def _unit_density(self, theta, u):
        # one row at a time: older NumPyro releases take a single frequency vector
        d = u.shape[1]
        density = functools.partial(spectral_density_matern, dim=d, nu=self._nu, alpha=1.0)
        return jax.vmap(lambda w: density(w=w, length=1.0))(u)


class Laplacian(_Matern):
    r"""Laplacian (exponential) kernel, :math:`k(x,x') = \exp(-\|(x - x')/\ell\|_2)`.

    The isotropic exponential kernel, the Matérn kernel with :math:`\nu = 1/2` (Rasmussen &
    Williams 2006, eq. 4.14), whose spectral density is eq. 4.15 with :math:`\nu = 1/2`
    (see :class:`Matern32`). The norm is gradient-safe at coincident points.

    Parameters
    ----------
    lengthscale, ard
        As for :class:`RBF`.
    """

    _nu = 0.5

    @staticmethod
    def _from_sqdist(sq):
        return jnp.exp(-_safe_sqrt(sq))


class Matern32(_Matern):
    r"""Matérn kernel with smoothness :math:`\nu = 3/2` (Rasmussen & Williams 2006, eq. 4.17).

    .. math:: k(x, x') = (1 + \sqrt3\, r)\, e^{-\sqrt3\, r}, \qquad
              r = \|(x - x') / \ell\|_2

    (element-wise division, one length-scale per column with ARD). Sample paths are once
    differentiable. Spectral density (Rasmussen & Williams 2006, eq. 4.15, in angular
    frequency), with :math:`\nu = 3/2` here, :math:`5/2` for :class:`Matern52`, :math:`1/2`
    for :class:`Laplacian`:

    .. math:: S(\omega) = \frac{2^d \pi^{d/2}\, \Gamma(\nu + d/2)\, (2\nu)^\nu}
              {\Gamma(\nu)} \prod_j \ell_j\,
              \Big(2\nu + \sum_j \ell_j^2 \omega_j^2\Big)^{-(\nu + d/2)}.

    The distance is gradient-safe at coincident points.

    Parameters
    ----------
    lengthscale, ard
        As for :class:`RBF`.
    """

    _nu = 1.5

    @staticmethod
    def _from_sqdist(sq):
        r = math.sqrt(3.0) * _safe_sqrt(sq)
        return (1.0 + r) * jnp.exp(-r)


class Matern52(_Matern):
    r"""Matérn kernel with smoothness :math:`\nu = 5/2` (Rasmussen & Williams 2006, eq. 4.17).

    .. math:: k(x, x') = \Big(1 + \sqrt5\, r + \tfrac53 r^2\Big)\, e^{-\sqrt5\, r},
              \qquad r = \|(x - x') / \ell\|_2

    Sample paths are twice differentiable. Spectral density: the Matérn formula of
    :class:`Matern32` with :math:`\nu = 5/2`.

    Parameters
    ----------
    lengthscale, ard
        As for :class:`RBF`.
    """

    _nu = 2.5

    @staticmethod
    def _from_sqdist(sq):
        r = math.sqrt(5.0) * _safe_sqrt(sq)
        return (1.0 + r + 5.0 / 3.0 * sq) * jnp.exp(-r)


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
