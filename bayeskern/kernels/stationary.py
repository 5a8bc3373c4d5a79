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
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
import numpyro.distributions as dist
from jax.scipy.special import gammaln, logsumexp
from numpyro.contrib.hsgp.spectral_densities import (
    spectral_density_matern,
    spectral_density_squared_exponential,
)

from .base import Hyper, Kernel

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


def _matern_density(nu: float, u):
    """Matérn-ν density with unit length-scale at the rows of ``u`` (NumPyro's formula).

    One row at a time: older NumPyro releases take a single frequency vector.
    """
    d = u.shape[1]
    return jax.vmap(lambda w: spectral_density_matern(dim=d, nu=nu, w=w, alpha=1.0, length=1.0))(u)


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


class Laplacian(_Stationary):
    r"""Laplacian (exponential) kernel, :math:`k(x,x') = \exp(-\|(x - x')/\ell\|_2)`.

    The isotropic exponential kernel, the Matérn kernel with :math:`\nu = 1/2` (Rasmussen &
    Williams 2006, eq. 4.14), whose spectral density is eq. 4.15 with :math:`\nu = 1/2`
    (see :class:`Matern32`). The norm is gradient-safe at coincident points.

    Parameters
    ----------
    lengthscale
        :math:`\ell` in the units of ``X`` (scalar, or one per column); ``None`` samples it.
    ard
        One length-scale per input column when sampled.
    """

    _nu = 0.5

    @staticmethod
    def _from_sqdist(sq):
        return jnp.exp(-_safe_sqrt(sq))

    def _unit_density(self, theta, u):
        return _matern_density(self._nu, u)


class Matern32(_Stationary):
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
    lengthscale
        :math:`\ell` in the units of ``X`` (scalar, or one per column); ``None`` samples it.
    ard
        One length-scale per input column when sampled.
    """

    _nu = 1.5

    @staticmethod
    def _from_sqdist(sq):
        r = math.sqrt(3.0) * _safe_sqrt(sq)
        return (1.0 + r) * jnp.exp(-r)

    def _unit_density(self, theta, u):
        return _matern_density(self._nu, u)


class Matern52(_Stationary):
    r"""Matérn kernel with smoothness :math:`\nu = 5/2` (Rasmussen & Williams 2006, eq. 4.17).

    .. math:: k(x, x') = \Big(1 + \sqrt5\, r + \tfrac53 r^2\Big)\, e^{-\sqrt5\, r},
              \qquad r = \|(x - x') / \ell\|_2

    Sample paths are twice differentiable. Spectral density: the Matérn formula of
    :class:`Matern32` with :math:`\nu = 5/2`.

    Parameters
    ----------
    lengthscale
        :math:`\ell` in the units of ``X`` (scalar, or one per column); ``None`` samples it.
    ard
        One length-scale per input column when sampled.
    """

    _nu = 2.5

    @staticmethod
    def _from_sqdist(sq):
        r = math.sqrt(5.0) * _safe_sqrt(sq)
        return (1.0 + r + 5.0 / 3.0 * sq) * jnp.exp(-r)

    def _unit_density(self, theta, u):
        return _matern_density(self._nu, u)


#: nodes of the trapezoid rule on log u in :func:`_rq_unit_density`
_RQ_NODES = 96
#: the window on log u ends where the integrand is e^-_RQ_WINDOW times its maximum
_RQ_WINDOW = 40.0


def _log_gamma_ratio(alpha):
    r""":math:`\alpha\log\alpha - \alpha - \log\Gamma(\alpha)`, without cancellation.

    Past :math:`\alpha = 10` by Stirling's series, :math:`\tfrac12\log(\alpha/2\pi) -
    \sum_k B_{2k} / (2k(2k-1)\alpha^{2k-1})` with five terms (remainder below
    :math:`2\cdot10^{-14}`; Abramowitz & Stegun 1964, eq. 6.1.40); below, directly.
    """
    a = jnp.maximum(alpha, 10.0)
    inv2 = 1.0 / (a * a)
    series = (
        1.0 / 12.0
        - inv2 * (1.0 / 360.0 - inv2 * (1.0 / 1260.0 - inv2 * (1.0 / 1680.0 - inv2 / 1188.0)))
    ) / a
    large = 0.5 * jnp.log(a / (2.0 * math.pi)) - series
    b = jnp.minimum(alpha, 10.0)
    small = b * jnp.log(b) - b - gammaln(b)
    return jnp.where(alpha >= 10.0, large, small)


@jax.jit  # one compilation per shape instead of ~80 small ones when called eagerly
def _rq_unit_density(alpha, u):
    r"""Spectral density of the rational quadratic kernel with unit length-scale.

    The kernel is a Gamma(α, rate α) mixture of RBF precisions :math:`v`,
    :math:`k = \int \mathrm{RBF}(\tau; 1/\sqrt v)\, \mathrm{Gamma}(v \mid \alpha, \alpha)\,
    dv`, so with :math:`q = \|u\|^2` and :math:`t = \log v`

    .. math:: S(u) = (2\pi)^{d/2} \frac{\alpha^\alpha}{\Gamma(\alpha)}
              \int_{-\infty}^{\infty} \exp\big(G(t)\big)\, dt, \qquad
              G(t) = (\alpha - d/2)\, t - \alpha e^t - \tfrac{q}{2} e^{-t},

    (in closed form :math:`2 (q/2\alpha)^{p/2} K_p(\sqrt{2\alpha q})` with
    :math:`p = \alpha - d/2`, which needs a Bessel function of real order that JAX lacks).
    :math:`G` is concave, with its maximum at :math:`e^{t^*}` the positive root of
    :math:`-\alpha x^2 + p x + q/2`. The integral is a trapezoid rule with
    ``_RQ_NODES`` nodes on the window where :math:`G \ge G(t^*) - 40`; the window is found
    from a curvature bound and refined by Newton steps from outside (for a concave function
    they never cross the end point), and held out of the gradient: the derivatives in
    α and the length-scale are the trapezoid sums of the integrand's derivatives, whose
    nodes do not move with α. The tests compare it with the closed form (scipy's ``kve``)
    to a relative 1e-9 for α in [0.05, 1e5].
    At ``u = 0`` with α ≤ d/2 the density is infinite.
    """
    d = u.shape[1]
    dtype = u.dtype
    q_raw = jnp.sum(u * u, axis=1)
    # q = 0 would put the window's left end at -inf; past 1e300 the density underflows anyway
    big = min(1e300, float(jnp.finfo(dtype).max) * 1e-8)  # 1e300 in float64, 3e30 in float32
    q = jnp.clip(q_raw, jnp.finfo(dtype).tiny, big)
    p = alpha - 0.5 * d

    def G(t, a, pp):
        return pp * t - a * jnp.exp(t) - 0.5 * q * jnp.exp(-t)

    def dG(t, a, pp):
        return pp - a * jnp.exp(t) + 0.5 * q * jnp.exp(-t)

    # the window: found without gradients (the integral does not depend on it)
    a_, p_ = jax.lax.stop_gradient(alpha), jax.lax.stop_gradient(p)
    q_ = jax.lax.stop_gradient(q)
    disc = jnp.sqrt(p_ * p_ + 2.0 * a_ * q_)
    x = jnp.where(p_ >= 0, (p_ + disc) / (2.0 * a_), q_ / (disc - jnp.minimum(p_, 0.0)))
    t_star = jnp.log(x)
    g_star = G(t_star, a_, p_)

    def reach(curv):  # a Δ with e^Δ - 1 - Δ >= 40 / curv (G'' <= -curv e^{±Δ} beyond t*)
        r = jnp.minimum(_RQ_WINDOW / curv, big)  # finite: Newton below needs a finite start
        return jnp.minimum(jnp.sqrt(2.0 * r), jnp.log1p(r) + 1.0)

    lo = t_star - reach(0.5 * q_ / x)
    hi = t_star + reach(a_ * x)
    for _ in range(6):
        lo = lo - (G(lo, a_, p_) - g_star + _RQ_WINDOW) / dG(lo, a_, p_)
        hi = hi - (G(hi, a_, p_) - g_star + _RQ_WINDOW) / dG(hi, a_, p_)
    lo, hi = jax.lax.stop_gradient(lo), jax.lax.stop_gradient(hi)

    s = jnp.linspace(0.0, 1.0, _RQ_NODES, dtype=dtype)
    w = jnp.full(_RQ_NODES, 1.0 / (_RQ_NODES - 1), dtype=dtype).at[jnp.array([0, -1])].mul(0.5)
    t = lo[:, None] + (hi - lo)[:, None] * s[None, :]  # (m, nodes)
    h = (hi - lo)[:, None] * w[None, :]
    # G + α and log c - α: the two large terms α log α - log Γ(α) and -α e^t cancel in the
    # product, exactly here (Stirling's series past α = 10) instead of in the rounding
    g = p * t - alpha * jnp.expm1(t) - 0.5 * q[:, None] * jnp.exp(-t)
    log_c = 0.5 * d * math.log(2.0 * math.pi) + _log_gamma_ratio(alpha)
    out = jnp.exp(log_c + logsumexp(g, b=h, axis=1))
    return jnp.where((q_raw == 0) & (p <= 0), jnp.inf, out)


class RationalQuadratic(_Stationary):
    r"""Rational quadratic kernel (Rasmussen & Williams 2006, eq. 4.19).

    .. math:: k(x, x') = \Big(1 + \frac{r^2}{2\alpha}\Big)^{-\alpha}, \qquad
              r = \|(x - x') / \ell\|_2

    A scale mixture of RBF kernels: the inverse squared length-scale
    :math:`v / \ell^2` has a Gamma(α, rate α) distribution (mean 1), so small α mixes
    many length-scales and :math:`\alpha \to \infty` gives the RBF kernel. The spectral
    density is the same mixture of RBF densities,

    .. math:: S(\omega) = \int_0^\infty (2\pi)^{d/2} \prod_j \frac{\ell_j}{\sqrt v}
              \exp\Big(-\frac{1}{2v}\sum_j \ell_j^2 \omega_j^2\Big)\,
              \mathrm{Gamma}(v \mid \alpha, \alpha)\, dv,

    computed by quadrature on :math:`\log v` (differentiable in α and :math:`\ell`, see
    :func:`_rq_unit_density`). It is infinite at :math:`\omega = 0` when
    :math:`\alpha \le d/2`.

    Parameters
    ----------
    lengthscale
        :math:`\ell` in the units of ``X`` (scalar, or one per column); ``None`` samples it.
    alpha
        Shape :math:`\alpha > 0` of the mixture, dimensionless; ``None`` samples it from
        LogNormal(0, 1) (median 1).
    ard
        One length-scale per input column when sampled.

    Raises
    ------
    ValueError
        If a fixed ``alpha`` is not positive.
    """

    def __init__(self, lengthscale=None, alpha=None, ard: bool = False):
        if alpha is not None and not (np.all(np.asarray(alpha, dtype=float) > 0)):
            raise ValueError(f"alpha must be positive, got {alpha!r}")
        super().__init__(lengthscale=lengthscale, ard=ard)
        self.alpha = alpha

    def hyperparameters(self):
        """Return the hyper-parameters ``lengthscale`` and ``alpha``."""
        return {
            **super().hyperparameters(),
            "alpha": Hyper(self.alpha, lambda: dist.LogNormal(0.0, 1.0), 1.0),
        }

    def _rq(self, theta, sq):
        alpha = self._p(theta, "alpha")
        return jnp.exp(-alpha * jnp.log1p(sq / (2.0 * alpha)))

    def evaluate(self, theta, x1, x2):
        """Return the kernel value for one pair of points."""
        s = self._scaled(theta, x1, x2)
        return self._rq(theta, jnp.sum(s * s))

    def gram(self, theta, X1, X2):
        """Return the Gram matrix."""
        return self._rq(theta, self._sqdist(theta, X1, X2))

    def gram_prepared(self, theta, prepared):
        """Return the Gram matrix from :meth:`prepare`'s output."""
        if self.ard or self.is_constant():
            return super().gram_prepared(theta, prepared)
        return self._rq(theta, prepared / self._p(theta, "lengthscale") ** 2)

    def _unit_density(self, theta, u):
        return _rq_unit_density(jnp.asarray(self._p(theta, "alpha"), dtype=u.dtype), u)


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
