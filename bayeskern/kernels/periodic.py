"""The periodic (exp-sine-squared) kernel and the cosine series of its one-column factor."""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
import numpyro.distributions as dist

from .base import Hyper, Kernel

__all__ = ["Periodic"]


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

    # ----------------------------------------------------------------- cosine series
    def cosine_coefficients(self, theta: dict, n_harmonics: int) -> jax.Array:
        r"""Return the coefficients of the kernel's cosine series in one input column.

        With :math:`z = 1/\ell^2` and :math:`2\sin^2(\theta/2) = 1 - \cos\theta`,
        :math:`\exp(z\cos\theta) = I_0(z) + 2\sum_{j \ge 1} I_j(z)\cos(j\theta)` gives
        (Solin & Särkkä 2014; Riutort-Mayol et al. 2023, appendix B)

        .. math:: \exp\!\Big(-\frac{2}{\ell^2}\sin^2\frac{\pi\tau}{p}\Big)
                  = \sum_{j=0}^{\infty} q_j \cos\frac{2\pi j \tau}{p}, \qquad
                  q_0 = e^{-z} I_0(z), \quad q_j = 2 e^{-z} I_j(z),

        with :math:`I_j` the modified Bessel functions of the first kind. The
        :math:`q_j` are positive and sum to :math:`k(0) = 1`, so the series truncated after
        ``n_harmonics`` terms errs by at most :math:`1 - \sum_{j \le n} q_j`, reached at
        :math:`\tau = 0` (:meth:`n_harmonics_for` picks ``n_harmonics`` for a tolerance).
        A product over columns of these series is the kernel of several columns.

        The exponentially scaled :math:`e^{-z} I_j(z)` come from their integral
        representation :math:`\frac1\pi \int_0^\pi e^{z(\cos\theta - 1)}\cos(j\theta)
        d\theta`, evaluated with the trapezoid rule on
        :math:`N = \max(64, 4(n+1))` points: exact for a periodic integrand up to aliasing,
        :math:`\sum_{k \ne 0} q_{|j + kN|}`, far below the truncation error, stable for any
        :math:`\ell` (no overflow of :math:`I_j(1/\ell^2)` for small :math:`\ell`) and
        differentiable in :math:`\ell` under JAX. NumPyro's ``contrib.hsgp`` computes the same
        coefficients unscaled, through TensorFlow Probability, which bayeskern does not need.

        Parameters
        ----------
        theta : dict
            Hyper-parameters by NumPyro site name (the period does not enter).
        n_harmonics : int
            Highest harmonic :math:`n \ge 0`.

        Returns
        -------
        jax.Array of shape (n_harmonics + 1,)
            :math:`q_0, \dots, q_n`.

        Raises
        ------
        ValueError
            If ``n_harmonics`` is not an integer >= 0.
        """
        n = _check_harmonics(n_harmonics)
        ls = jnp.asarray(self._p(theta, "lengthscale"))
        if ls.ndim > 0 and ls.size != 1:
            raise ValueError(f"Periodic's lengthscale must be a scalar, got shape {ls.shape}")
        ls = ls.reshape(())
        dtype = ls.dtype if jnp.issubdtype(ls.dtype, jnp.floating) else jnp.float64
        N = max(64, 4 * (n + 1))
        theta_k = 2.0 * np.pi * np.arange(N) / N
        basis = np.cos(np.outer(np.arange(n + 1), theta_k)) / N  # (n + 1, N)
        basis[1:] *= 2.0
        f = jnp.exp((jnp.asarray(np.cos(theta_k), dtype=dtype) - 1.0) / ls**2)
        # the q_j are positive; rounding of the sum can leave a tiny negative value in the
        # tail (float32), which a prior variance must not be
        return jnp.maximum(jnp.asarray(basis, dtype=dtype) @ f, 0.0)

    @staticmethod
    def n_harmonics_for(lengthscale: float, tol: float = 1e-8) -> int:
        r"""Return the fewest harmonics whose cosine series is within ``tol`` of the kernel.

        The smallest :math:`n` with :math:`\sum_{j > n} q_j \le` ``tol``
        (:meth:`cosine_coefficients`); this sum is the largest error of the truncated series,
        at :math:`\tau = 0`. For small :math:`\ell`, :math:`n \approx \ell^{-1}
        \sqrt{2 \log(1/\mathrm{tol})}`.

        Parameters
        ----------
        lengthscale : float
            :math:`\ell > 0` (dimensionless).
        tol : float, default 1e-8
            Largest error allowed, in ``(0, 1)``.

        Returns
        -------
        int

        Raises
        ------
        ValueError
            If ``lengthscale`` is not positive or ``tol`` is not in ``(0, 1)``.
        """
        from scipy.special import ive

        ls = float(lengthscale)
        if not (ls > 0 and math.isfinite(ls)):
            raise ValueError(f"lengthscale must be positive and finite, got {lengthscale!r}")
        tol = float(tol)
        if not 0.0 < tol < 1.0:
            raise ValueError(f"tol must be in (0, 1), got {tol!r}")
        z = 1.0 / ls**2
        # past j = sqrt(2 z * 745) + 30 every term is below the smallest double
        jmax = int(math.sqrt(2.0 * z * 745.0)) + 30
        q = ive(np.arange(jmax + 1), z)
        q[1:] *= 2.0
        tail = np.cumsum(q[::-1])[::-1]  # tail[j] = sum_{i >= j} q_i, no cancellation
        tail = np.append(tail[1:], 0.0)  # sum over i > j
        return int(np.argmax(tail <= tol))


def _check_harmonics(n_harmonics) -> int:
    if isinstance(n_harmonics, bool) or not isinstance(n_harmonics, (int, np.integer)):
        raise ValueError(f"n_harmonics must be an integer >= 0, got {n_harmonics!r}")
    if n_harmonics < 0:
        raise ValueError(f"n_harmonics must be an integer >= 0, got {n_harmonics!r}")
    return int(n_harmonics)
