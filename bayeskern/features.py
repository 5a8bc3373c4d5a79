"""Random Fourier features for stationary and locally stationary kernels.

Stationary (Bochner; Rahimi & Recht 2007; GaBaSR, Pena-Llamas et al. 2023, eq. 4): with frequencies
:math:`\\omega_j \\sim \\rho`, the spectral density of :math:`\\kappa`,

.. math:: \\phi(x) = \\tfrac{1}{\\sqrt M}\\,[\\cos(\\omega_1^\\top x), \\dots,
          \\cos(\\omega_M^\\top x), \\sin(\\omega_1^\\top x), \\dots, \\sin(\\omega_M^\\top x)],
          \\qquad \\phi(x)^\\top\\phi(x') \\to \\kappa(x - x').

Locally stationary (Silverman 1957; Pena-Llamas et al. 2023, eqs. 5-6):
:math:`\\kappa(x,x') = \\kappa_1\\big(\\tfrac{x+x'}2\\big)\\,\\kappa_2(x - x')` with
:math:`\\omega_n \\sim f_1` (spectral density of :math:`\\kappa_2`) and :math:`v_k \\sim f_2`
(of :math:`\\kappa_1`). Using :math:`\\cos(a)\\cos(b)` product identities, the features with
frequencies :math:`v_k/2 + \\omega_n` (for :math:`\\phi`) and :math:`v_k/2 - \\omega_n` (for
:math:`\\phi^-`) give the asymmetric product :math:`\\phi(x)^\\top\\phi^-(x')`, an unbiased
estimate of :math:`\\kappa(x,x')`; scaling is :math:`1/\\sqrt{M_1 M_2}` on each side
(the :math:`1/M` of one public code is a bug: it makes the kernel shrink with M).
:math:`\\kappa_1` must be non-negative for :math:`\\kappa` to be a valid (PSD) kernel; the
random-feature estimate is PSD only in expectation.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

__all__ = ["rff_features", "locally_stationary_frequencies", "locally_stationary_features"]


def rff_features(X: jax.Array, omega: jax.Array) -> jax.Array:
    """Stationary random Fourier features ``(n, 2M)`` for frequencies ``omega`` ``(M, d)``."""
    Z = X @ omega.T
    return jnp.concatenate([jnp.cos(Z), jnp.sin(Z)], axis=-1) / jnp.sqrt(omega.shape[0])


def locally_stationary_frequencies(omega: jax.Array, v: jax.Array) -> tuple[jax.Array, jax.Array]:
    """All pairs :math:`(v_k/2 + \\omega_n, v_k/2 - \\omega_n)`, each ``(M_1 M_2, d)``."""
    half = 0.5 * v[:, None, :]
    plus = (half + omega[None, :, :]).reshape(-1, omega.shape[-1])
    minus = (half - omega[None, :, :]).reshape(-1, omega.shape[-1])
    return plus, minus


def locally_stationary_features(X: jax.Array, omega: jax.Array, v: jax.Array):
    """Return the features ``(phi, phi_minus)``, each ``(n, 2 M_1 M_2)``.

    They satisfy :math:`\\phi(x)^\\top\\phi^-(x') \\approx \\kappa_1((x+x')/2)\\,\\kappa_2(x-x')`.
    """
    plus, minus = locally_stationary_frequencies(omega, v)
    # cos(a'x + b'x') = cos(a'x)cos(b'x') - sin(a'x)sin(b'x'): the sine of phi_minus carries a
    # minus sign, i.e. phi_minus uses the frequencies -(v/2 - omega)
    return rff_features(X, plus), rff_features(X, -minus)
