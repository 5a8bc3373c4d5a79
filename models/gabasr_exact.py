r"""The collapsed (exact) spectral-mixture GP of GaBaSR.

The kernel is the expectation of GaBaSR's random features over their base draws, the
spectral-mixture kernel (Wilson & Adams 2013) of a smooth component and :math:`K - 1`
periodic ones with a polynomial trend, so no frequency is drawn at all and the likelihood is
the exact Gaussian marginal (:func:`gabasr_exact_regression`). Its inputs are prepared once
per fit (:func:`prepare_exact`: the distinct differences of the inputs, the trend columns), its
read-outs per draw (:func:`exact_predictive`, :func:`exact_loo`). Used for up to a few
thousand rows.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import numpyro
import numpyro.distributions as dist

from bayeskern.linalg import (
    DistinctPairs,
    cholesky,
    distinct_pairs,
    expand_pairs,
    gaussian_conditional,
    triangular_inverse,
)


class ExactPrepared(NamedTuple):
    """What the exact spectral-mixture GP needs from the training inputs.

    Computed once per fit so that the leapfrog steps evaluate the spectral-mixture kernel once
    per distinct difference of the inputs (on a monthly grid about :math:`n` of the
    :math:`n(n+1)/2` pairs), then one Cholesky.

    Attributes
    ----------
    pairs : :class:`bayeskern.linalg.DistinctPairs`
        The distinct differences :math:`x_i - x_j` and where each pair finds its own.
    basis : (n, q)
        The trend columns :math:`b_p(x_i)` (:func:`polynomial_basis`).
    """

    pairs: DistinctPairs
    basis: jax.Array


class ExactSpec(NamedTuple):
    """Fixed ingredients of :func:`gabasr_exact_regression` (nothing here is sampled).

    Attributes
    ----------
    peaks : (K - 1,)
        Prior centres of the periodic components' frequencies (angular, standardized units of
        input column 0): the empirical-Bayes base measure (:func:`significant_peaks`).
    resolution : float
        Spectral resolution :math:`2\\pi/\\mathrm{span}` of column 0 (prior width of a mean).
    log_sigma0 : (d,)
        Prior median (log) of the smooth component's inverse length-scales, the centre of
        their log-normal prior.
    sigma0_gamma : (2, d) or None
        Shape and rate of a gamma prior on those inverse length-scales, in place of the
        log-normal one where given (:func:`grid_sigma0_prior`).
    """

    peaks: jax.Array
    resolution: float
    log_sigma0: jax.Array
    sigma0_gamma: jax.Array | None = None


def polynomial_basis(Z: np.ndarray, degree: int) -> np.ndarray:
    """Return the polynomial trend columns up to ``degree``.

    :math:`[1, z_1..z_d, z_1^2..z_d^2, ...]` up to ``degree`` (no
    interactions), ``(n, 1 + d\\,\\mathrm{degree})``.
    """
    Z = np.asarray(Z, float)
    return np.concatenate([np.ones((len(Z), 1))] + [Z**p for p in range(1, degree + 1)], axis=1)


def prepare_exact(X, basis) -> ExactPrepared:
    """Distinct pairwise differences (:func:`bayeskern.linalg.distinct_pairs`) and trend basis."""
    return ExactPrepared(distinct_pairs(X), jnp.asarray(np.asarray(basis, float)))


def spectral_mixture_terms(tau, params: dict) -> jax.Array:
    r"""Stationary part of the exact GaBaSR kernel at differences ``tau`` (..., d).

    .. math:: k(\tau) = a_0^2 e^{-\frac12\|\sigma_0\odot\tau\|^2}
              + \sum_{k\ge1} a_k^2 e^{-\frac12\sigma_k^2\tau_1^2}\cos(\mu_k\tau_1),

    the spectral-mixture kernel (Wilson & Adams 2013) of the Gaussian mixture spectral density
    of Pena-Llamas et al. (2023), section 3.2: component 0 at frequency zero (ARD over the columns),
    the periodic components along input column 0. ``params``: ``amplitude`` (K,), ``sigma0``
    (d,), ``mu`` and ``sigma`` (K - 1,; absent when K = 1).
    """
    a2 = params["amplitude"] ** 2
    k = a2[0] * jnp.exp(-0.5 * jnp.sum((params["sigma0"] * tau) ** 2, axis=-1))
    if "mu" in params and params["mu"].shape[-1]:
        t = tau[..., :1]
        k = k + jnp.sum(
            a2[1:] * jnp.exp(-0.5 * (params["sigma"] * t) ** 2) * jnp.cos(params["mu"] * t), axis=-1
        )
    return k


#: prior standard deviations of the log spreads: :math:`\log\sigma_{0j}` (smooth component)
#: and :math:`\log\sigma_k` (periodic components) of :func:`sample_exact`
SIGMA0_PRIOR_SD = 1.5
SIGMA_PRIOR_SD = 1.0


def sigma0_prior(spec: ExactSpec) -> dist.Distribution:
    r"""Prior of the smooth component's inverse length-scales :math:`\sigma_{0,j}`.

    :math:`\mathrm{Gamma}(\alpha_j, \beta_j)` from ``spec.sigma0_gamma`` where given (the
    inverse-gamma length-scale prior :math:`\ell_j = 1/\sigma_{0,j} \sim
    \mathrm{InvGamma}(\alpha_j, \beta_j)` of Betancourt 2017), else
    :math:`\mathrm{LogNormal}(\texttt{spec.log\_sigma0}_j, s)` with :math:`s` =
    :data:`SIGMA0_PRIOR_SD`.
    """
    if spec.sigma0_gamma is not None:
        return dist.Gamma(spec.sigma0_gamma[0], spec.sigma0_gamma[1]).to_event(1)
    return dist.LogNormal(spec.log_sigma0, SIGMA0_PRIOR_SD).to_event(1)


#: prior mass of :func:`grid_sigma0_prior` below the span's and above the spacing's frequency
GRID_PRIOR_TAIL = 0.001


def grid_sigma0_prior(Z: np.ndarray, tail: float = GRID_PRIOR_TAIL) -> np.ndarray:
    r"""Gamma prior of the inverse length-scales bounded by the span and spacing of the inputs.

    Per column :math:`j`, the shape :math:`\alpha_j` and rate :math:`\beta_j` with

    .. math:: P(\sigma_{0,j} < 1/\mathrm{span}_j) = P(\sigma_{0,j} > 1/\mathrm{gap}_j)
              = \texttt{tail},

    :math:`\mathrm{gap}_j` the smallest spacing of the column's distinct values: the
    inverse-gamma length-scale prior of Betancourt (2017) on
    :math:`\ell_j = 1/\sigma_{0,j}`, which keeps the length-scale between the spacing of the
    inputs (rougher, the smooth component is not told apart from the noise at the training
    points) and their span (smoother, it is not told apart from the trend). The ratio of the
    two quantiles fixes :math:`\alpha_j` (one root in :math:`\alpha`), the lower one then
    :math:`\beta_j`. A column with fewer than three distinct values, or whose spacing is
    above half its span, is given the ratio 2 (and a ratio above :math:`10^{15}` that ratio);
    a constant column the span 1.

    Parameters
    ----------
    Z : array, shape (n, d)
        Standardized training inputs.
    tail : float in (0, 0.5)
        Prior mass beyond each bound.

    Returns
    -------
    array, shape (2, d)
        :math:`[\alpha; \beta]`, the ``sigma0_gamma`` of
        :class:`ExactSpec`.
    """
    from scipy.optimize import brentq
    from scipy.special import gammaincinv

    if not 0 < tail < 0.5:
        raise ValueError(f"tail must be in (0, 0.5), got {tail!r}")
    out = []
    for col in np.asarray(Z, float).T:
        u = np.unique(col)
        gaps = np.diff(u)
        span = float(u[-1] - u[0]) or 1.0  # a constant column: any length-scale fits it
        gap = float(gaps[gaps > 1e-9 * span].min()) if len(u) > 2 else span
        ratio = min(max(span / gap, 2.0), 1e15)

        def excess(log_a, ratio=ratio):
            a = np.exp(log_a)
            return np.log(gammaincinv(a, 1 - tail) / gammaincinv(a, tail)) - np.log(ratio)

        a = float(np.exp(brentq(excess, np.log(0.1), np.log(1e7))))
        out.append((a, float(gammaincinv(a, tail)) * span))
    return np.asarray(out).T


def exact_form_spec(spec: ExactSpec, Z: np.ndarray) -> ExactSpec:
    """Return the spec the exact form samples: :func:`grid_sigma0_prior` for one column.

    Several columns, and the basis form (whose basis is sized by the log-normal prior, see
    :func:`bayeskern.models.gabasr_hsgp.choose_mixture_basis`), keep ``spec`` as it is.
    """
    if Z.shape[1] != 1:
        return spec
    return spec._replace(sigma0_gamma=jnp.asarray(grid_sigma0_prior(Z)))


def softplus_scaled(name: str, prior: dist.Distribution) -> jax.Array:
    r"""Sample a positive scale with prior ``prior`` on the softplus scale, not the log scale.

    The sampler moves :math:`u = \log(e^{c} - 1)` (site ``name + "_raw"``), :math:`c =
    \log(1 + e^{u})` (recorded as the deterministic site ``name``), so the prior on :math:`c`
    is ``prior`` exactly (the Jacobian :math:`\sigma(u)` is in the density). Above
    :math:`c \approx 2` the map is nearly the identity: a half-normal upper tail stays
    quadratic in :math:`u` (curvature 1) where on the log scale it is :math:`-e^{2s}/2`, whose
    curvature :math:`2c^2` sets the step size of the whole trajectory when a chain reaches it;
    below, :math:`c \approx e^{u}` as on the log scale (Stan's manual, "Reparameterization",
    for the principle; NumPyro's ``SoftplusTransform``).

    Parameters
    ----------
    name : str
        Name of the deterministic site of :math:`c`; the sampled site is ``name + "_raw"``.
    prior : numpyro.distributions.Distribution
        Prior of :math:`c`, with positive support.

    Returns
    -------
    jax.Array
        :math:`c`, shaped as a draw of ``prior``.
    """
    t = dist.transforms.SoftplusTransform()
    raw = numpyro.sample(name + "_raw", dist.TransformedDistribution(prior, t.inv))
    return numpyro.deterministic(name, t(raw))


def sample_exact(spec: ExactSpec, d: int, q: int) -> dict:
    r"""Sample the hyper-parameters of :func:`gabasr_exact_regression` (see there).

    Two parameterizations differ from the plain form, with the same prior: for one input
    column (``d == 1``) the trend scales :math:`c_p` move on the softplus scale
    (:func:`softplus_scaled`; several columns keep the log scale), and each periodic mean
    as an offset in units of its own spread, :math:`\mu_k = \hat\omega_k + \sigma_k
    \delta_k` with :math:`\delta_k \sim N(0, (2\pi/\mathrm{span})^2/\sigma_k^2)` (site
    ``mu_offset``), so that a broad line whose mean wanders with its width is not a funnel
    (the quality-factor form :math:`\mu/\sigma` of a resonance); a line the data switch off
    follows its prior, where the offset's scale shrinks as the spread grows. ``trend_amp``
    and ``mu`` are recorded as deterministic sites.
    """
    K = spec.peaks.shape[0] + 1
    res = spec.resolution
    trend_prior = dist.HalfNormal(1.0).expand([q]).to_event(1)
    params = {
        "trend_amp": (
            softplus_scaled("trend_amp", trend_prior)
            if d == 1
            else numpyro.sample("trend_amp", trend_prior)
        ),
        "amplitude": numpyro.sample("amplitude", dist.HalfNormal(1.0).expand([K]).to_event(1)),
        "sigma0": numpyro.sample("sigma0", sigma0_prior(spec)),
    }
    if K > 1:  # no sites of size zero (no significant line: the smooth component only)
        sigma = numpyro.sample(
            "sigma", dist.LogNormal(jnp.full(K - 1, np.log(res)), SIGMA_PRIOR_SD).to_event(1)
        )
        offset = numpyro.sample("mu_offset", dist.Normal(0.0, res / sigma).to_event(1))
        params["mu"] = numpyro.deterministic("mu", spec.peaks + sigma * offset)
        params["sigma"] = sigma
    params["noise"] = numpyro.sample("noise", dist.HalfNormal(1.0))
    return params


def exact_covariance(params: dict, prepared: ExactPrepared) -> jax.Array:
    r"""Training covariance :math:`K_{SM} + B\,\mathrm{diag}(c^2)B^\top + (\sigma_n^2 + 10^{-6}) I`.

    :math:`K_{SM}` from :func:`spectral_mixture_terms` at the distinct differences of
    ``prepared``, spread over the pairs by :func:`bayeskern.linalg.expand_pairs`; the trend
    term as :math:`(Bc)(Bc)^\top`, symmetric to the last bit.
    """
    from bayeskern.models.gp import JITTER

    K = expand_pairs(spectral_mixture_terms(prepared.pairs.tau, params), prepared.pairs)
    Bc = prepared.basis * params["trend_amp"]
    return K + Bc @ Bc.T + (params["noise"] ** 2 + JITTER) * jnp.eye(K.shape[0])


def gabasr_exact_regression(X, y=None, *, spec: ExactSpec, prepared: ExactPrepared, probe=None):
    r"""GaBaSR regression, exact form: the spectral-mixture GP with a polynomial trend.

    The random-feature kernel of :func:`gabasr_regression` has expectation (over its base
    draws) the spectral-mixture kernel; this model uses that expectation exactly, with the
    Fourier weights, the trend coefficients and the function values integrated out:

    .. math:: y \sim N\big(0,\ \textstyle\sum_p c_p^2\, b_p b_p^\top + K_{SM} +
              \sigma_n^2 I\big),

    :math:`K_{SM}` from :func:`spectral_mixture_terms`, :math:`b_p` the trend columns
    (:func:`polynomial_basis`; :math:`\beta_p \sim N(0, c_p^2)` marginalized). Priors
    (standardized units):

    * :math:`a_k \sim \mathrm{HalfNormal}(1)`: with :math:`a_k^2 \sim \chi^2_1 =
      \mathrm{Gamma}(\tfrac12, \tfrac12)` independent, the normalized weights
      :math:`\pi_k = a_k^2/\sum_j a_j^2` are :math:`\mathrm{Dirichlet}(\tfrac12, \dots)`,
      the finite-dimensional Dirichlet approximation of a DP with concentration
      :math:`K/2` (Ishwaran & Zarepour 2002), times an independent total variance;
    * base measure of the component means (empirical Bayes): component 0 at frequency zero,
      component :math:`k \ge 1` with :math:`\mu_k \sim N(\hat\omega_k, (2\pi/\mathrm{span})^2)`
      centred on the :math:`k`-th significant periodogram line :math:`\hat\omega_k` of the
      detrended training series (:func:`significant_peaks`);
    * spreads :math:`\sigma_k \sim \mathrm{LogNormal}(\log(2\pi/\mathrm{span}), 1)`,
      :math:`\sigma_{0,j}` from :func:`sigma0_prior`: for one input column fitted exactly a
      gamma prior with 0.1 % of its mass below :math:`1/\mathrm{span}` and 0.1 % above
      :math:`1/\mathrm{gap}`, the smallest spacing of the inputs (a smooth component rougher
      than the sampling grid is not told apart from the noise), else
      :math:`\mathrm{LogNormal}(\texttt{spec.log\_sigma0}_j, 1.5)`;
    * :math:`c_p \sim \mathrm{HalfNormal}(1)` per trend column (a degree the data do not
      support is shrunk towards zero), :math:`\sigma_n \sim \mathrm{HalfNormal}(1)`.

    The sampler moves the trend scales of one input column on the softplus scale and the
    periodic means as offsets in units of their spreads (:func:`sample_exact`); the prior is
    the one above.

    Parameters
    ----------
    X : (n, d) standardized inputs (only their shape is used; ``prepared`` holds the rest).
    y : (n,) standardized targets.
    spec : :class:`ExactSpec`.
    prepared : :class:`ExactPrepared` of ``X`` (:func:`prepare_exact`).
    probe : unused; kept for the signature of :func:`gabasr_regression`.

    Pena-Llamas et al. (2023), section 3.2 and eq. (10); the exact kernel is eq. (1).
    """
    from bayeskern.models.gp import ZeroMeanGaussian

    params = sample_exact(spec, X.shape[1], prepared.basis.shape[1])
    numpyro.sample("y", ZeroMeanGaussian(exact_covariance(params, prepared)), obs=y)


def spectral_mixture_cross(X, Xnew, params: dict) -> jax.Array:
    r""":func:`spectral_mixture_terms` between the rows of ``X`` (n, d) and ``Xnew`` (m, d).

    The same kernel, with each component's cosine by the angle-difference identity
    :math:`\cos(\mu(x - x')) = \cos\mu x\,\cos\mu x' + \sin\mu x\,\sin\mu x'`: cosines
    and sines per point, :math:`O((n + m)K)`, instead of a cosine per pair and component (the
    costliest part of a prediction, whose cross-covariance has no repeated differences to
    share as the training covariance has).
    """
    a2 = params["amplitude"] ** 2
    tau = X[:, None, :] - Xnew[None, :, :]
    k = a2[0] * jnp.exp(-0.5 * jnp.sum((params["sigma0"] * tau) ** 2, axis=-1))
    if "mu" in params and params["mu"].shape[-1]:
        mx, mn = X[:, :1] * params["mu"], Xnew[:, :1] * params["mu"]  # (n, K - 1), (m, K - 1)
        cos = jnp.cos(mx)[:, None] * jnp.cos(mn)[None] + jnp.sin(mx)[:, None] * jnp.sin(mn)[None]
        envelope = jnp.exp(-0.5 * (params["sigma"] * tau[..., :1]) ** 2)
        k = k + jnp.sum(a2[1:] * envelope * cos, axis=-1)
    return k


def exact_cross(params: dict, X, B, Xnew, Bnew):
    """Cross-covariance ``(n, m)`` and prior variance ``(m,)`` at new inputs (no noise)."""
    Ks = spectral_mixture_cross(X, Xnew, params) + (B * params["trend_amp"] ** 2) @ Bnew.T
    kss = jnp.sum(params["amplitude"] ** 2) + (Bnew**2) @ params["trend_amp"] ** 2
    return Ks, kss


def exact_factors(params: dict, prepared: ExactPrepared, y):
    r""":math:`L^{-1}` and :math:`\alpha = K_y^{-1}y` of one draw (R&W Algorithm 2.1)."""
    Linv = triangular_inverse(cholesky(exact_covariance(params, prepared)))
    return Linv, Linv.T @ (Linv @ y)


def exact_predictive(params: dict, prepared: ExactPrepared, X, B, y, Xnew, Bnew):
    r"""Return the predictive mean and standard deviation of a new observation for one draw.

    :math:`\mu_* = K_*^\top\alpha`, :math:`s_*^2 = k_{**} - \|L^{-1}K_*\|^2 + \sigma_n^2`
    (Rasmussen & Williams 2006, eqs. 2.25-2.26).
    """
    L = cholesky(exact_covariance(params, prepared))
    mean, var = gaussian_conditional(L, *exact_cross(params, X, B, Xnew, Bnew), y)
    return mean, jnp.sqrt(var + params["noise"] ** 2)


def exact_loo(params: dict, prepared: ExactPrepared, y):
    r"""Return the exact leave-one-out log densities of one draw (R&W eq. 5.12).

    :math:`\mu_i = y_i - [K^{-1}y]_i/[K^{-1}]_{ii}`, :math:`v_i = 1/[K^{-1}]_{ii}`.
    """
    return exact_fitted_rows(params, prepared, y)[0]


def exact_fitted_rows(params: dict, prepared: ExactPrepared, y):
    """LOO log densities and the predictive at the training inputs of one draw.

    :func:`bayeskern.models.gp.loo_and_fitted_rows` on :func:`exact_factors`: one
    factorization for both, what :func:`exact_predictive` gives at ``Xnew = X`` without its
    cross-covariance and second factorization. Returns ``(loo, mean, sd)``, each ``(n,)``.
    """
    from bayeskern.models.gp import loo_and_fitted_rows

    return loo_and_fitted_rows(*exact_factors(params, prepared, y), y, params["noise"])
