"""GaBaSR as NumPyro models: Dirichlet-process spectral mixtures with random Fourier features.

Pena-Llamas et al. (2023, "Kernel Learning by Spectral Representation and Gaussian
Mixtures"), parent method BaNK (Oliva et al. 2016). The spectral density of the kernel is a
Dirichlet-process mixture of Gaussians (their section 3.2),

.. math:: \\rho(\\omega) = \\sum_k \\pi_k\\, N(\\omega \\mid \\mu_k, \\mathrm{diag}(\\sigma_k^2)),

and the kernel is approximated by random Fourier features (eq. 4). Two models live here,
both sampled by NUTS: the **random-feature DP mixture with truncated stick-breaking and
fixed base draws** (:func:`gabasr_regression`, :func:`gabasr_classification`) and the
**collapsed (exact) spectral-mixture GP** (:func:`gabasr_exact_regression`). The paper's own
model, **random features with free frequencies under a Chinese-restaurant DP mixture**, has
discrete assignments and is sampled by its Gibbs/Metropolis-Hastings sweep,
:class:`bayeskern.inference.gabasr_gibbs.GaBaSRGibbs`. This module holds the random-feature
models and their read-outs; the features are :mod:`bayeskern.models.gabasr_features`, the
exact model :mod:`bayeskern.models.gabasr_exact`, the paper's CRP model
:mod:`bayeskern.models.gabasr_crp`, the learned spectrum and its peaks
:mod:`bayeskern.models.gabasr_spectrum` (all re-exported here). What differs from a literal
transcription, and why:

* **Truncated stick-breaking DP** (Sethuraman 1994; Ishwaran & James 2001): :math:`K`
  components (the truncation level, default 4), :math:`\\pi = \\mathrm{SB}(b)`,
  :math:`b_k \\sim \\mathrm{Beta}(1, \\alpha)`, :math:`\\alpha \\sim \\mathrm{Gamma}(1, 1)`.
  The remainder :math:`\\prod_k (1-b_k)` goes to the last component, so the weights sum to 1.
* **Stratified, non-centred frequencies with common random numbers**: component :math:`k`
  owns :math:`J` frequencies :math:`\\omega_{kj} = \\mu_k + \\sigma_k \\odot \\varepsilon_{kj}`
  with *fixed* standard-normal draws :math:`\\varepsilon_{kj}` (drawn once from the seed), and
  its features are weighted by :math:`\\sqrt{\\pi_k}`:

  .. math:: \\phi(x) = \\big[\\sqrt{\\pi_k/J}\\cos(\\omega_{kj}^\\top x),\\
            \\sqrt{\\pi_k/J}\\sin(\\omega_{kj}^\\top x)\\big]_{k,j},\\qquad
            E_\\varepsilon[\\phi(x)^\\top\\phi(x')] = \\sum_k \\pi_k e^{-\\frac12
            \\|\\sigma_k\\odot\\tau\\|^2}\\cos(\\mu_k^\\top\\tau),\\ \\tau = x - x'.

  This is the same kernel as drawing all :math:`M = KJ` frequencies from :math:`\\rho` (eq. 4)
  but with the mixture weights as amplitudes instead of discrete assignments, so the
  likelihood is a smooth function of :math:`(\\pi, \\mu, \\sigma)` and NUTS applies. Sampling
  :math:`M` free frequencies instead saturates the NUTS tree depth.
* **Regression weights and noise integrated out** with the normal-inverse-gamma prior,
  giving the evidence of eq. (10) (:func:`nig_log_marginal_diag`). The prior precision of the
  Fourier weights is :math:`1/s^2` (:math:`s` = ``snr``, the signal-to-noise ratio, sampled)
  instead of the paper's fixed :math:`10^{-6}`: with a vague fixed precision the
  posterior mean is an unregularized least-squares fit on :math:`2M` sinusoids, which
  extrapolates wildly (the paper's diabetes R² of -869). The constant and linear
  mean-function columns keep the paper's vague precision :math:`10^{-6}`, quadratic columns
  get :math:`N(0, 1)` (:func:`trend_precision`); :math:`a_0 = b_0 = 10^{-3}`.
* **Classification** (eq. 11): Bernoulli-logit on :math:`B\\beta_0 + a\\,\\Phi z`,
  :math:`z \\sim N(0, I)` (non-centred weights), :math:`a \\sim \\mathrm{HalfNormal}(2)`,
  :math:`\\beta_0 \\sim N(0, 2.5^2)` on the mean-function columns :math:`B`.
* **Locally stationary kernel** (eq. 6): a second DP mixture :math:`f_2` gives frequencies
  :math:`v` (sites prefixed ``v_``). The paper's pair :math:`(\\phi, \\phi^-)` has an
  asymmetric product; a Gaussian likelihood needs a symmetric PSD covariance, so the model
  uses :math:`\\psi = (\\phi + \\phi^-)/2`, i.e.
  :math:`\\psi(x) = \\cos(v_k^\\top x/2)\\,[\\cos\\omega_n^\\top x, \\sin\\omega_n^\\top x]
  /\\sqrt{M_1M_2}`, whose covariance is PSD for every draw and has expectation
  :math:`\\tfrac12[\\kappa_1(\\tfrac{x+x'}2) + \\kappa_1(\\tfrac{x-x'}2)]\\,\\kappa_2(x-x')`:
  Silverman's locally stationary kernel (the symmetrized eq. 6) plus a stationary part.

Every model is a plain function of standardized inputs; :mod:`bayeskern.models.gabasr_setup`
builds the fixed draws, the mean-function basis and the starting values, and the estimators in
:mod:`bayeskern.estimators.gabasr` call it. For large data, :func:`design_stats` sums the
sufficient statistics over row chunks (``chunk_size``), so no model forms the ``N × M``
design.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import jax.scipy.linalg as jsl
import numpy as np
import numpyro
import numpyro.distributions as dist
from bayeskern.models.gabasr_crp import GibbsPrior, gabasr_crp_regression  # noqa: F401
from bayeskern.models.gabasr_exact import (  # noqa: F401  (the GaBaSR names, one import away)
    GRID_PRIOR_TAIL,
    SIGMA0_PRIOR_SD,
    SIGMA_PRIOR_SD,
    ExactPrepared,
    ExactSpec,
    exact_covariance,
    exact_cross,
    exact_factors,
    exact_fitted_rows,
    exact_form_spec,
    exact_loo,
    exact_predictive,
    gabasr_exact_regression,
    grid_sigma0_prior,
    polynomial_basis,
    prepare_exact,
    sample_exact,
    sigma0_prior,
    softplus_scaled,
    spectral_mixture_cross,
    spectral_mixture_terms,
)
from bayeskern.models.gabasr_features import (  # noqa: F401
    SpectralSpec,
    make_spec,
    mixture_frequencies,
    sample_spectral,
    spectral_features,
    stick_breaking,
)
from bayeskern.models.gabasr_spectrum import significant_peaks  # noqa: F401

from bayeskern.blr import (
    NIGPosterior,
    Stats,
    feature_stats,
    nig_evidence,
    nig_posterior,
    nig_predictive,
    scan_feature_stats,
)
from bayeskern.kernels.spectral import periodogram_peaks  # noqa: F401  (re-exported)

__all__ = [
    "SpectralSpec",
    "GibbsPrior",
    "gabasr_crp_regression",
    "make_spec",
    "stick_breaking",
    "mixture_frequencies",
    "spectral_features",
    "design_stats",
    "sample_spectral",
    "nig_log_marginal_diag",
    "nig_loo_logpdf",
    "gabasr_regression",
    "gabasr_classification",
    "regression_posterior",
    "regression_predictive",
    "classification_logits",
    "TREND_PRECISION",
    "QUADRATIC_PRECISION",
    "trend_precision",
    "A0",
    "B0",
    "draw_params",
    "regression_loo",
    "periodogram_peaks",
    "whitened_model",
    "significant_peaks",
    "ExactPrepared",
    "ExactSpec",
    "polynomial_basis",
    "prepare_exact",
    "spectral_mixture_terms",
    "spectral_mixture_cross",
    "sample_exact",
    "softplus_scaled",
    "GRID_PRIOR_TAIL",
    "sigma0_prior",
    "SIGMA0_PRIOR_SD",
    "SIGMA_PRIOR_SD",
    "exact_covariance",
    "gabasr_exact_regression",
    "exact_cross",
    "exact_factors",
    "exact_predictive",
    "exact_loo",
    "exact_fitted_rows",
]

#: paper's vague NIG hyper-parameters (Pena-Llamas et al. 2023, section 4):
#: a0 = b0 = 1e-3, V0 = 1e-6 I
A0 = 1e-3
B0 = 1e-3
TREND_PRECISION = 1e-6
#: prior precision of the quadratic trend coefficients (see :func:`trend_precision`)
QUADRATIC_PRECISION = 1.0


# --------------------------------------------------------------------------- NIG evidence
def nig_log_marginal_diag(stats: Stats, precision: jax.Array, a0=A0, b0=B0):
    """Evidence of eq. (10) with a diagonal prior precision ``precision`` (M,).

    :func:`bayeskern.blr.nig_evidence` (Pena-Llamas et al. 2023, eq. 10) with the paper's
    vague :data:`A0`, :data:`B0` by default. Returns ``(log_evidence, posterior)``.
    """
    return nig_evidence(stats, precision, a0, b0)


def nig_loo_logpdf(Phi, y, post):
    """Exact leave-one-out predictive log densities of the NIG regression, one per row.

    With :math:`h_i = \\phi_i^\\top\\Lambda_N^{-1}\\phi_i` and :math:`e_i = y_i - \\phi_i^\\top
    w_N`, removing row :math:`i` gives :math:`a_{-i} = a_N - \\tfrac12`,
    :math:`b_{-i} = b_N - \\tfrac12 e_i^2/(1-h_i)` and the Student-t predictive with location
    :math:`y_i - e_i/(1-h_i)`, squared scale :math:`b_{-i}/(a_{-i}(1-h_i))`, :math:`2a_{-i}`
    degrees of freedom (rank-one downdate of the NIG posterior; the regression analogue of
    Rasmussen & Williams 2006 eq. 5.12). Used for PSIS-LOO on this non-factorized model.
    """
    V = jsl.solve_triangular(post.L, Phi.T, lower=True)
    h = jnp.clip(jnp.sum(V * V, axis=0), 0.0, 1.0 - 1e-9)
    e = y - Phi @ post.w
    a = post.a - 0.5
    b = jnp.maximum(post.b - 0.5 * e**2 / (1.0 - h), 1e-300)
    scale = jnp.sqrt(b / (a * (1.0 - h)))
    return jax.scipy.stats.t.logpdf(e / (1.0 - h), 2.0 * a, 0.0, scale)


def _design(X, params, spec, mean_basis):
    Phi = spectral_features(X, params, spec)
    return Phi if mean_basis is None else jnp.concatenate([mean_basis, Phi], axis=1)


def design_stats(X, y, params, spec, mean_basis=None, chunk_size=None) -> Stats:
    r"""Sufficient statistics :math:`(\Phi^\top\Phi, \Phi^\top y, y^\top y, N)` of one draw.

    :math:`\Phi = [B \mid \phi_{\pi,\mu,\sigma}(X)]` (mean-function columns, then the
    spectral features). ``chunk_size=None`` forms :math:`\Phi`; an integer sums the
    statistics over row chunks (:func:`bayeskern.blr.scan_feature_stats`), so memory is
    :math:`O(\mathrm{chunk\_size}\cdot M + M^2)` at any :math:`N` and the evidence of
    Pena-Llamas et al. (2023), eq. (10), is unchanged (sums split over rows).
    """
    rows = (X,) if mean_basis is None else (X, mean_basis)
    return scan_feature_stats(
        lambda *r: _design(r[0], params, spec, r[1] if len(r) > 1 else None), rows, y, chunk_size
    )


def trend_precision(n_trend: int, d: int) -> np.ndarray:
    r"""Prior precisions of the mean-function coefficients (standardized units).

    The constant and linear coefficients keep the paper's vague precision
    :math:`10^{-6}` (``TREND_PRECISION``). For the ``poly2`` basis :math:`[1, x, x^2]`
    (``n_trend == 1 + 2d``) the :math:`d` quadratic coefficients get
    :math:`\beta_{2,j} \sim N(0, 1)` (``QUADRATIC_PRECISION`` = 1): a curvature that moves
    :math:`y` by one standard deviation over one robust standard deviation of :math:`x_j` is
    allowed, while the square of a clipped outlier (up to :math:`8^2` robust units) cannot
    be met by an unregularized coefficient. Like the Fourier weights, the coefficients are
    integrated out in the evidence (eq. 10).
    """
    prec = np.full(n_trend, TREND_PRECISION)
    if n_trend == 1 + 2 * d:
        prec[1 + d :] = QUADRATIC_PRECISION
    return prec


def _precision(n_fourier, n_trend, snr, dtype, d):
    return jnp.concatenate(
        [
            jnp.asarray(trend_precision(n_trend, d), dtype),
            jnp.full((n_fourier,), 1.0, dtype) / snr**2,
        ]
    )


# --------------------------------------------------------------------------- models
def gabasr_regression(
    X, y=None, *, spec: SpectralSpec, mean_basis=None, probe=None, chunk_size=None
):
    """GaBaSR regression, the weights and noise integrated out (Pena-Llamas et al. 2023, eq. 10).

    Parameters
    ----------
    X : (n, d) standardized inputs.
    y : (n,) standardized targets (required: the evidence needs them).
    spec : :class:`SpectralSpec` with the fixed base draws and prior scales.
    mean_basis : (n, p) or None
        Mean-function columns (constant / linear / quadratic trend) with vague prior.
    probe : (r, d) or None
        Points whose posterior mean ``f_probe`` is recorded: a permutation-invariant
        quantity for judging convergence (component labels switch, predictions do not).
    chunk_size : int or None
        Sum the sufficient statistics over chunks of this many rows (:func:`design_stats`):
        the ``N × M`` design is never formed, for large ``N``.

    Sites: ``alpha``, ``stick``, ``mu``, ``sigma`` (and ``v_*``), ``snr ~ LogNormal(1, 1.5)``;
    deterministic ``log_marginal``, ``noise`` (:math:`\\sqrt{b_N/a_N}`), ``f_probe``.
    """
    d = X.shape[1]
    params = sample_spectral(spec, d)
    snr = numpyro.sample("snr", dist.LogNormal(1.0, 1.5))
    stats = design_stats(X, y, params, spec, mean_basis, chunk_size)
    p = 0 if mean_basis is None else mean_basis.shape[1]
    prec = _precision(stats.Pty.shape[0] - p, p, snr, stats.Pty.dtype, X.shape[1])
    lm, post = nig_log_marginal_diag(stats, prec)
    numpyro.factor("evidence", lm)
    numpyro.deterministic("log_marginal", lm)
    numpyro.deterministic("noise", jnp.sqrt(post.b / post.a))
    if probe is not None:
        numpyro.deterministic("f_probe", _design(probe[0], params, spec, probe[1]) @ post.w)


def gabasr_classification(
    X, y=None, *, spec: SpectralSpec, mean_basis=None, probe=None, features: tuple | None = None
):
    """GaBaSR classification, Bernoulli-logit on the features (Pena-Llamas et al. 2023, eq. 11).

    :math:`\\eta = B\\beta_0 + a\\,\\Phi z`, :math:`z \\sim N(0, I_{2M})`,
    :math:`a \\sim \\mathrm{HalfNormal}(2)`, :math:`\\beta_0 \\sim N(0, 2.5^2)`,
    :math:`y_i \\sim \\mathrm{Bernoulli}(\\sigma(\\eta_i))`.

    ``features``: ``(Phi, Phi_probe)`` precomputed at fixed spectral parameters (the
    large-data path of :class:`~bayeskern.estimators.gabasr.GaBaSRClassifier`, which fits them
    by MAP first and samples only the weights); ``None`` samples the spectral parameters.
    Deterministic ``log_lik`` (total Bernoulli log-likelihood) and ``f_probe`` (logits at
    the probe points) judge convergence.
    """
    if features is None:
        params = sample_spectral(spec, X.shape[1])
        Phi = spectral_features(X, params, spec)
    else:
        Phi = features[0]
    amp = numpyro.sample("amp", dist.HalfNormal(2.0))
    z = numpyro.sample("z", dist.Normal(0.0, 1.0).expand([Phi.shape[1]]).to_event(1))
    logits = amp * (Phi @ z)
    beta0 = None
    if mean_basis is not None:
        beta0 = numpyro.sample(
            "beta0", dist.Normal(0.0, 2.5).expand([mean_basis.shape[1]]).to_event(1)
        )
        logits = logits + mean_basis @ beta0
    lik = dist.Bernoulli(logits=logits)
    if y is not None:
        numpyro.deterministic("log_lik", jnp.sum(lik.log_prob(y)))
    if probe is not None:
        Pp = spectral_features(probe[0], params, spec) if features is None else features[1]
        eta = amp * (Pp @ z)
        if beta0 is not None:
            eta = eta + probe[1] @ beta0
        numpyro.deterministic("f_probe", eta)
    numpyro.sample("y", lik, obs=y)


# --------------------------------------------------------------------------- prediction
def draw_params(draw: dict, spec: SpectralSpec) -> dict:
    """Spectral parameters of one posterior draw (``weights`` from the deterministic site)."""
    keys = ["weights", "mu", "sigma"] + (
        ["v_weights", "v_mu", "v_sigma"] if spec.eps_v is not None else []
    )
    return {k: draw[k] for k in keys}


def regression_posterior(
    draw: dict, X, y, *, spec, mean_basis=None, params=None, chunk_size=None
) -> NIGPosterior:
    r"""NIG posterior :math:`(w_N, L_N, a_N, b_N)` of the weights and noise given one draw.

    Pena-Llamas et al. (2023), eq. (10), with the draw's features :math:`\Phi = [B \mid \phi(X)]`
    and prior precision ``diag(trend precisions, 1/snr²)`` (:func:`bayeskern.blr.nig_posterior`);
    ``chunk_size`` sums the statistics over row chunks (:func:`design_stats`), so ``X``
    may have millions of rows. ``params`` overrides the spectral parameters of ``draw``.
    """
    params = draw_params(draw, spec) if params is None else params
    stats = design_stats(X, y, params, spec, mean_basis, chunk_size)
    p = 0 if mean_basis is None else mean_basis.shape[1]
    prec = _precision(stats.Pty.shape[0] - p, p, draw["snr"], stats.Pty.dtype, X.shape[1])
    return nig_posterior(stats, prec, A0, B0)


def regression_predictive(
    draw: dict,
    X,
    y,
    Xnew,
    *,
    spec,
    mean_basis=None,
    mean_new=None,
    params=None,
    chunk_size=None,
    post: NIGPosterior | None = None,
):
    """Student-t predictive ``(loc, scale, df)`` at ``Xnew`` for one posterior draw.

    The NIG posterior of the weights given the draw's features (the
    :math:`w_N, V_N, a_N, b_N` of Pena-Llamas et al. 2023, eq. 10; :func:`regression_posterior`, or
    ``post`` when it is already computed), then :func:`bayeskern.blr.nig_predictive`:
    :math:`t_{2a_N}(\\phi_*^\\top w_N,\\ \\tfrac{b_N}{a_N}(1 + \\phi_*^\\top V_N\\phi_*))`.
    ``params`` overrides the spectral parameters (a Gibbs draw: ``{"omega": ...}``);
    ``chunk_size`` sums the training statistics over row chunks (:func:`design_stats`).
    """
    params = draw_params(draw, spec) if params is None else params
    if post is None:
        post = regression_posterior(
            draw, X, y, spec=spec, mean_basis=mean_basis, params=params, chunk_size=chunk_size
        )
    return nig_predictive(post, _design(Xnew, params, spec, mean_new))


def regression_loo(draw: dict, X, y, *, spec, mean_basis=None):
    """Pointwise exact LOO log densities of one draw (standardized units)."""
    params = draw_params(draw, spec)
    Phi = _design(X, params, spec, mean_basis)
    p = 0 if mean_basis is None else mean_basis.shape[1]
    prec = _precision(Phi.shape[1] - p, p, draw["snr"], Phi.dtype, X.shape[1])
    post = nig_posterior(feature_stats(Phi, y), prec, A0, B0)
    return nig_loo_logpdf(Phi, y, post)


def classification_logits(draw: dict, Xnew, *, spec, mean_new=None, params=None):
    """Logits :math:`B\\beta_0 + a\\Phi z` at ``Xnew`` for one posterior draw."""
    params = draw_params(draw, spec) if params is None else params
    eta = draw["amp"] * (spectral_features(Xnew, params, spec) @ draw["z"])
    if mean_new is not None:
        eta = eta + mean_new @ draw["beta0"]
    return eta


# --------------------------------------------------------------------------- whitening
def whitened_model(*, base_model, base_kwargs: dict, loc, scale_tril, unravel, transforms):
    """``base_model`` re-expressed in whitened coordinates ``u`` (Laplace preconditioning).

    The unconstrained parameters are :math:`z = m + Lu` with :math:`m` the MAP point and
    :math:`LL^\\top` the inverse Hessian of the negative log posterior there, so that the
    posterior of ``u`` is close to :math:`N(0, I)` and NUTS starts well conditioned: the
    posterior of GaBaSR is very anisotropic (a spectral line's frequency is pinned to a
    fraction of a per cent while the envelope widths are loose), and with an identity mass
    matrix the first warm-up window takes 1023 leapfrog steps per draw. The density is
    unchanged: ``u`` has an improper flat prior, the base model's sites are conditioned on
    the transformed values (their prior terms stay in the joint) and the log-Jacobian of
    the constraining transforms is added (the affine map has a constant Jacobian).
    """
    D = loc.shape[0]
    u = numpyro.sample("u", dist.ImproperUniform(dist.constraints.real_vector, (), (D,)))
    z = unravel(loc + scale_tril @ u)
    values, logj = {}, 0.0
    for name, t in transforms.items():
        x = t(z[name])
        logj = logj + jnp.sum(t.log_abs_det_jacobian(z[name], x))
        values[name] = x
    numpyro.factor("jacobian", logj)
    numpyro.handlers.condition(base_model, data=values)(**base_kwargs)
