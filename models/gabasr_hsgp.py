r"""GaBaSR's spectral-mixture GP on a Hilbert-space basis, weights integrated out.

The exact GaBaSR model (:func:`bayeskern.models.gabasr.gabasr_exact_regression`) has the
covariance :math:`K_{SM} + B\,\mathrm{diag}(c^2)B^\top + \sigma_n^2 I`. A stationary kernel
with spectral density :math:`S` is approximated on the Laplacian eigenfunctions
:math:`\phi_j` of a box :math:`[-L, L]^d` around the inputs (Solin & Särkkä 2020):

.. math:: k(x, x') \approx \sum_j S(\sqrt{\lambda_j})\,\phi_j(x)\phi_j(x'),

and the spectral density of the spectral-mixture kernel (Wilson & Adams 2013) is a Gaussian
mixture, so the model becomes Bayesian linear regression on the fixed features
:math:`[\phi(x), b(x)]` with prior variances :math:`[S(\sqrt\lambda), c^2]`, the density
averaged over each basis function's frequency cell (:func:`binned_density`, so that narrow
spectral lines keep their variance). Its evidence is
:func:`bayeskern.models.hsgp.collapsed_log_marginal` of the sufficient statistics
:math:`(\Phi^\top\Phi, \Phi^\top y, y^\top y)`, computed once per fit: one
:math:`M \times M` Cholesky factorization per gradient, whatever the number of rows. The
priors and sample sites are those of the exact model
(:func:`bayeskern.models.gabasr.sample_exact`), so the two forms share their posterior
summaries, plots and reports.

Limits. The approximation holds inside the box and for components wider than the basis
spacing :math:`\pi/(2L)`. A spectral line narrower than that (a periodicity that stays
coherent over more than the box) falls on one or two basis functions, whose variance
:math:`\sin^2(\omega_j(x + L))/L` varies along :math:`x`: the posterior then widens
:math:`\sigma_k` until the line covers several functions, so the spread of a long-lived
periodicity is over-estimated (``tests/test_gabasr_hsgp.py`` checks it; the results page
``gabasr_hsgp`` shows it on CO2).
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
import numpyro
from bayeskern.models.gabasr import (
    SIGMA0_PRIOR_SD,
    SIGMA_PRIOR_SD,
    ExactSpec,
    sample_exact,
)
from bayeskern.models.gp import JITTER
from bayeskern.models.hsgp import collapsed_factors, collapsed_log_marginal
from jax.scipy.special import ndtr
from scipy.stats import norm

from bayeskern.blr import Stats, scan_feature_stats
from bayeskern.hsgp import FAMILY_RULES, MAX_COLUMNS, Basis

__all__ = [
    "mixture_density",
    "binned_density",
    "choose_mixture_basis",
    "features",
    "prior_variances",
    "gabasr_hsgp_regression",
    "mixture_factors",
    "mixture_stats",
    "mass_beyond",
    "BOUNDARY_FACTOR",
    "BASIS_QUANTILE",
]

#: half-width of the box as a multiple of the inputs' half-range, :math:`L = cS`: the basis
#: holds inside the box only, so :math:`c = 2` leaves half the training range on each side
#: for forecasts (Riutort-Mayol et al. 2023 ask for :math:`c \ge 1.2` to fit the data alone)
BOUNDARY_FACTOR = 2.0
#: prior quantile of the spreads :math:`\sigma_0, \sigma_k` (and of the means' offsets from
#: their anchors) up to which the basis resolves the spectral density
BASIS_QUANTILE = 0.95


def mixture_density(omega, params: dict) -> jax.Array:
    r"""Spectral density of :func:`bayeskern.models.gabasr.spectral_mixture_terms`.

    With :math:`k(\tau) = (2\pi)^{-d}\int S(\omega)e^{i\omega^\top\tau}d\omega`:

    .. math:: S(\omega) = a_0^2\,\frac{(2\pi)^{d/2}}{\prod_j\sigma_{0j}}
              e^{-\frac12\sum_j\omega_j^2/\sigma_{0j}^2}
              + \sum_{k\ge1} a_k^2\,\frac{\sqrt{2\pi}}{2\sigma_k}\Big[
              e^{-\frac{(\omega_1-\mu_k)^2}{2\sigma_k^2}}
              + e^{-\frac{(\omega_1+\mu_k)^2}{2\sigma_k^2}}\Big]

    (Wilson & Adams 2013, eq. 12; Pena-Llamas et al. 2023, section 3.2). The periodic
    components exist for one input column only (:func:`bayeskern.models.gabasr_setup.
    exact_setup`). ``omega``: ``(M, d)`` angular frequencies.
    """
    a2 = params["amplitude"] ** 2
    s0 = params["sigma0"]
    d = s0.shape[-1]
    dens = (
        a2[0]
        * (2 * jnp.pi) ** (d / 2)
        / jnp.prod(s0)
        * jnp.exp(-0.5 * jnp.sum((omega / s0) ** 2, axis=-1))
    )
    if "mu" in params and params["mu"].shape[-1]:
        w, mu, sg = omega[:, :1], params["mu"], params["sigma"]
        dens = dens + jnp.sum(
            a2[1:]
            * jnp.sqrt(2 * jnp.pi)
            / (2 * sg)
            * (jnp.exp(-0.5 * ((w - mu) / sg) ** 2) + jnp.exp(-0.5 * ((w + mu) / sg) ** 2)),
            axis=1,
        )
    return dens


def choose_mixture_basis(
    Z: np.ndarray,
    spec: ExactSpec,
    *,
    boundary_factor: float = BOUNDARY_FACTOR,
    quantile: float = BASIS_QUANTILE,
) -> Basis:
    r"""Box and basis size that resolve the spectral-mixture prior of ``spec``.

    Per column, :math:`L_j = c\,S_j` (``boundary_factor``, :math:`S_j` the half-range of the
    standardized inputs) and :math:`m_j = \lceil 2L_j\,\omega_j/\pi\rceil`, so that the
    highest basis frequency :math:`\pi m_j/(2L_j)` reaches :math:`\omega_j`:

    * the smooth component: :math:`\omega_j = k_m\frac{\pi}{2}\sigma_{0j}^{(q)}`, the
      squared-exponential relation of Riutort-Mayol et al. (2023, section 4.3;
      :math:`k_m = 1.75`) at the length-scale :math:`1/\sigma_{0j}^{(q)}`,
      :math:`\sigma_{0j}^{(q)}` the prior's ``quantile``;
    * each periodic component (column 0): its anchor :math:`\hat\omega_k` plus the prior's
      ``quantile`` of :math:`\mu_k - \hat\omega_k` plus the same relation at
      :math:`\sigma_k^{(q)}`.

    Two or three columns keep the multi-indices inside the ellipsoid
    (:class:`bayeskern.hsgp.Basis` with ``truncate=True``).

    Parameters
    ----------
    Z : (n, d) array
        Standardized training inputs, :math:`d \le 3`.
    spec : ExactSpec
        The anchors and prior scales (:func:`bayeskern.models.gabasr_setup.exact_setup`).
    boundary_factor : float
        :math:`c`.
    quantile : float
        Prior quantile resolved.
    """
    Z = np.asarray(Z, dtype=float)
    d = Z.shape[1]
    if d > MAX_COLUMNS:
        raise ValueError(
            f"the Hilbert-space basis is built for at most {MAX_COLUMNS} input columns, got {d}"
        )
    lo, hi = Z.min(axis=0), Z.max(axis=0)
    S = np.maximum(0.5 * (hi - lo), 0.5)
    L = boundary_factor * S
    z = norm.ppf(quantile)
    k_m = FAMILY_RULES["squared_exponential"][1] * np.pi / 2
    omega = k_m * np.exp(np.asarray(spec.log_sigma0, float) + z * SIGMA0_PRIOR_SD)
    peaks = np.asarray(spec.peaks, float)
    if peaks.size:
        sigma_q = spec.resolution * math.exp(z * SIGMA_PRIOR_SD)
        omega[0] = max(omega[0], float(peaks.max()) + z * spec.resolution + k_m * sigma_q)
    m = np.maximum(np.ceil(2 * L * omega / np.pi).astype(int), 2)
    return Basis(tuple(m), tuple(L), tuple(0.5 * (lo + hi)))


def features(Z, basis: Basis, degree: int) -> jax.Array:
    """Return :math:`[\\phi(Z), b(Z)]`: the eigenfunctions and the polynomial trend columns.

    The trend columns are :func:`bayeskern.models.gabasr.polynomial_basis`'s.
    """
    Z = jnp.asarray(Z)
    return jnp.concatenate(
        [basis(Z), jnp.ones((Z.shape[0], 1), Z.dtype)] + [Z**p for p in range(1, degree + 1)],
        axis=1,
    )


def mixture_stats(Z, y, basis: Basis, degree: int, chunk_size: int | None) -> Stats:
    """Sufficient statistics of ``y`` on :func:`features`, summed over row chunks."""
    return scan_feature_stats(
        lambda z: features(z, basis, degree), (jnp.asarray(Z),), jnp.asarray(y), chunk_size
    )


def _bin_mass(lo, hi, mean, sd):
    r"""Return :math:`P(lo < \omega < hi)` for :math:`\omega \sim N(mean, sd^2)`.

    From the nearer tail: no cancellation far from the mean.
    """
    a, b = (lo - mean) / sd, (hi - mean) / sd
    return jnp.where(a > 0, ndtr(-a) - ndtr(-b), ndtr(b) - ndtr(a))


def binned_density(params: dict, basis: Basis) -> jax.Array:
    r"""Mean of :func:`mixture_density` over each basis function's frequency cell.

    Basis function :math:`j` sits at :math:`\omega_j = \sqrt{\lambda_j}`, on a grid of
    spacing :math:`\Delta_i = \pi/(2L_i)` per column; its weight's prior variance is the
    density averaged over the cell :math:`\prod_i[\omega_{ji} \pm \Delta_i/2]`,

    .. math:: s_j = \frac{1}{\prod_i\Delta_i}\int_{\mathrm{cell}_j} S(\omega)\,d\omega,

    in closed form for the Gaussian mixture
    :math:`S = a_0^2(2\pi)^d\prod_i N(\omega_i; 0, \sigma_{0i}^2) +
    \sum_{k\ge1} a_k^2\,\pi\,[N(\omega_1; \mu_k, \sigma_k^2) +
    N(\omega_1; -\mu_k, \sigma_k^2)]` (:func:`mixture_density`; normal probabilities of
    the cell). For a component wider than the spacing this is the evaluation at
    :math:`\sqrt{\lambda_j}` of Solin & Särkkä (2020) to second order; a line narrower than
    the spacing (a long-lived periodicity) keeps its whole variance, shared between the cells
    next to its frequency, and the evidence stays smooth in :math:`\mu_k` and
    :math:`\sigma_k` where point evaluation would ripple with the grid.
    """
    w = basis.sqrt_eigenvalues()  # (M, d)
    delta = jnp.pi / (2 * jnp.asarray(basis.L))
    lo, hi = w - delta / 2, w + delta / 2
    a2 = params["amplitude"] ** 2
    s0 = params["sigma0"]
    mass = a2[0] * (2 * jnp.pi) ** s0.shape[-1] * jnp.prod(_bin_mass(lo, hi, 0.0, s0), axis=1)
    if "mu" in params and params["mu"].shape[-1]:
        l1, h1, mu, sg = lo[:, :1], hi[:, :1], params["mu"], params["sigma"]
        mass = mass + jnp.pi * jnp.sum(
            a2[1:] * (_bin_mass(l1, h1, mu, sg) + _bin_mass(l1, h1, -mu, sg)), axis=1
        )
    return mass / jnp.prod(delta)


def prior_variances(params: dict, basis: Basis) -> jax.Array:
    r"""Prior variances of the weights: :math:`[s_j, c_p^2]`.

    :math:`s_j` the spectral density averaged over basis function :math:`j`'s cell
    (:func:`binned_density`), :math:`c_p` the trend amplitudes.
    """
    return jnp.concatenate([binned_density(params, basis), params["trend_amp"] ** 2])


def gabasr_hsgp_regression(stats: Stats, *, spec: ExactSpec, basis: Basis, degree: int):
    r"""GaBaSR regression on a Hilbert-space basis (the module docstring), for NUTS.

    .. math:: y = \phi(x)^\top w + b(x)^\top\beta + \varepsilon,\quad
              w_j \sim N(0, S(\sqrt{\lambda_j})),\ \beta_p \sim N(0, c_p^2),\
              \varepsilon \sim N(0, \sigma_n^2),

    :math:`w, \beta` integrated out; hyper-parameters and priors those of
    :func:`bayeskern.models.gabasr.gabasr_exact_regression` (Pena-Llamas et al. 2023,
    section 3.2). The evidence enters as the factor ``y``.

    Parameters
    ----------
    stats : Stats
        :func:`mixture_stats` of the standardized training data.
    spec : ExactSpec
    basis : Basis
        :func:`choose_mixture_basis`.
    degree : int
        Degree of the polynomial trend.
    """
    params = sample_exact(spec, basis.dim, 1 + basis.dim * degree)
    noise_var = params["noise"] ** 2 + JITTER
    numpyro.factor("y", collapsed_log_marginal(stats, prior_variances(params, basis), noise_var))


def mixture_factors(draw: dict, basis: Basis, stats: Stats):
    """Per-draw factors of prediction ``(R, w_bar, noise variance)``.

    :func:`bayeskern.models.hsgp.collapsed_factors` at :func:`prior_variances`.
    """
    noise_var = draw["noise"] ** 2 + JITTER
    R, w = collapsed_factors(stats, prior_variances(draw, basis), noise_var)
    return R, w, noise_var


def mass_beyond(draws: dict, basis: Basis) -> np.ndarray:
    r"""Per draw, the fraction of the stationary variance above the basis frequencies.

    Along column :math:`j` the basis reaches :math:`\Omega_j = \pi m_j/(2L_j)` (the top of
    its last cell: :math:`\pi(m_j + \frac12)/(2L_j)`); a Gaussian component of spread
    :math:`\sigma` and mean :math:`\mu` puts :math:`P(|\omega| > \Omega)` of its weight
    :math:`a^2` there (for the smooth component the largest over the columns). Returns
    ``(S,)`` fractions of :math:`\sum_k a_k^2`.
    """
    Om = np.pi * (np.asarray(basis.m) + 0.5) / (2 * np.asarray(basis.L))
    a2 = np.asarray(draws["amplitude"]) ** 2
    s0 = np.asarray(draws["sigma0"]).reshape(len(a2), -1)
    out = a2[:, 0] * np.max(2 * norm.sf(Om / s0), axis=1)
    if "mu" in draws and np.asarray(draws["mu"]).shape[-1]:
        mu, sg = np.abs(np.asarray(draws["mu"])), np.asarray(draws["sigma"])
        out = out + np.sum(
            a2[:, 1:] * (norm.sf((Om[0] - mu) / sg) + norm.sf((Om[0] + mu) / sg)), axis=1
        )
    return out / np.sum(a2, axis=1)
