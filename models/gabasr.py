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
:class:`bayeskern.inference.gabasr_gibbs.GaBaSRGibbs`. What differs from a literal
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

from typing import NamedTuple

import jax
import jax.numpy as jnp
import jax.scipy.linalg as jsl
import numpy as np
import numpyro
import numpyro.distributions as dist
from jax.scipy.special import gammaln

from bayeskern.blr import (
    NIGPosterior,
    Stats,
    feature_stats,
    nig_log_marginal,
    nig_posterior,
    nig_predictive,
    scan_feature_stats,
)
from bayeskern.features import locally_stationary_features, rff_features
from bayeskern.kernels.spectral import periodogram_peaks  # noqa: F401  (re-exported)
from bayeskern.linalg import (
    DistinctPairs,
    cholesky,
    distinct_pairs,
    expand_pairs,
    gaussian_conditional,
    triangular_inverse,
)

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
    "sample_exact",
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


class SpectralSpec(NamedTuple):
    """Fixed ingredients of the spectral model (everything that is not sampled).

    Attributes
    ----------
    eps : (K, J, d)
        Standard-normal base draws of the stationary mixture (common random numbers).
    eps_v : (K2, J2, d) or None
        Base draws of the second mixture :math:`f_2` (locally stationary kernel only).
    mu_scale : (d,)
        Prior scale of the component means (standardized angular frequency).
    mu_positive : bool
        Half-normal means (default for ``d == 1``, where the sign of a frequency is not
        identified). The sampler then works on :math:`\\log\\mu_k`, which also tames the
        funnel of an unused component (weight near zero, mean free over the whole prior
        range), where a normal prior on :math:`\\mu_k` makes NUTS take its deepest trees.
    sigma_loc, sigma_scale : float
        ``log sigma ~ Normal(sigma_loc, sigma_scale)`` for the component spreads.
    """

    eps: jax.Array
    eps_v: jax.Array | None
    mu_scale: jax.Array
    mu_positive: bool
    sigma_loc: float = 0.0
    sigma_scale: float = 1.5


def make_spec(
    key,
    d,
    *,
    n_components=4,
    n_per_component=16,
    locally_stationary=False,
    n_components_v=2,
    n_per_component_v=4,
    mu_scale=None,
) -> SpectralSpec:
    """Draw the fixed base draws :math:`\\varepsilon` and assemble a :class:`SpectralSpec`."""
    k1, k2 = jax.random.split(jax.random.PRNGKey(key) if isinstance(key, int) else key)
    eps = jax.random.normal(k1, (n_components, n_per_component, d))
    eps_v = (
        jax.random.normal(k2, (n_components_v, n_per_component_v, d))
        if locally_stationary
        else None
    )
    mu_scale = jnp.ones(d) if mu_scale is None else jnp.asarray(mu_scale, dtype=float)
    return SpectralSpec(eps, eps_v, mu_scale, d == 1)


def stick_breaking(b: jax.Array) -> jax.Array:
    """Weights :math:`\\pi_k = b_k\\prod_{j<k}(1-b_j)`, the last one taking the remainder."""
    rest = jnp.concatenate([jnp.ones(1, b.dtype), jnp.cumprod(1.0 - b)])
    return jnp.concatenate([b, jnp.ones(1, b.dtype)]) * rest


def mixture_frequencies(mu, sigma, eps):
    """Frequencies ``(K*J, d)``: :math:`\\mu_k + \\sigma_k\\odot\\varepsilon_{kj}` by component."""
    return (mu[:, None, :] + sigma[:, None, :] * eps).reshape(-1, eps.shape[-1])


def _column_scale(weights, J):
    """Return the per-frequency factor :math:`\\sqrt{K\\pi_k}`, repeated ``J`` times.

    It turns ``rff_features``' :math:`1/\\sqrt{KJ}` into :math:`\\sqrt{\\pi_k/J}`.
    """
    return jnp.repeat(jnp.sqrt(weights.shape[0] * weights), J)


def spectral_features(X, params: dict, spec: SpectralSpec) -> jax.Array:
    """Feature matrix of one draw of the spectral parameters.

    ``params`` holds ``weights`` (K,), ``mu`` (K, d), ``sigma`` (K, d) and, for the locally
    stationary kernel, ``v_weights``, ``v_mu``, ``v_sigma``. Returns ``(n, 2KJ)`` (stationary)
    or ``(n, 2 K J K_2 J_2)`` (locally stationary, :math:`\\psi = (\\phi+\\phi^-)/2`).
    """
    K, J, _ = spec.eps.shape
    omega = mixture_frequencies(params["mu"], params["sigma"], spec.eps)
    s = _column_scale(params["weights"], J)
    if spec.eps_v is None:
        return rff_features(X, omega) * jnp.tile(s, 2)
    K2, J2, _ = spec.eps_v.shape
    v = mixture_frequencies(params["v_mu"], params["v_sigma"], spec.eps_v)
    phi, phi_minus = locally_stationary_features(X, omega, v)
    # pairs are ordered v-major (k2 * M1 + n) by locally_stationary_frequencies
    s2 = jnp.outer(_column_scale(params["v_weights"], J2), s).ravel()
    return 0.5 * (phi + phi_minus) * jnp.tile(s2, 2)


def _sample_mixture(prefix: str, eps, spec: SpectralSpec, d: int):
    K = eps.shape[0]
    alpha = numpyro.sample(f"{prefix}alpha", dist.Gamma(1.0, 1.0))
    if K > 1:
        b = numpyro.sample(f"{prefix}stick", dist.Beta(1.0, alpha).expand([K - 1]).to_event(1))
        weights = stick_breaking(b)
    else:
        weights = jnp.ones(1)
    numpyro.deterministic(f"{prefix}weights", weights)
    base = dist.HalfNormal(spec.mu_scale) if spec.mu_positive else dist.Normal(0.0, spec.mu_scale)
    mu = numpyro.sample(f"{prefix}mu", base.expand([K, d]).to_event(2))
    sigma = numpyro.sample(
        f"{prefix}sigma",
        dist.LogNormal(spec.sigma_loc, spec.sigma_scale).expand([K, d]).to_event(2),
    )
    return weights, mu, sigma


def sample_spectral(spec: SpectralSpec, d: int) -> dict:
    """Sample the DP-mixture parameters (and those of :math:`f_2` when locally stationary)."""
    w, mu, sigma = _sample_mixture("", spec.eps, spec, d)
    params = {"weights": w, "mu": mu, "sigma": sigma}
    if spec.eps_v is not None:
        # f2 is the spectral density of the slowly varying envelope kappa_1: centred on zero
        w2, mu2, s2 = _sample_mixture("v_", spec.eps_v, spec, d)
        params.update(v_weights=w2, v_mu=mu2, v_sigma=s2)
    return params


# --------------------------------------------------------------------------- NIG evidence
def nig_log_marginal_diag(stats: Stats, precision: jax.Array, a0=A0, b0=B0):
    """Evidence of eq. (10) with a diagonal prior precision ``precision`` (M,).

    .. math:: \\log p(y) = -\\tfrac N2\\log 2\\pi + \\tfrac12(\\log|\\Lambda_0| -
              \\log|\\Lambda_N|) + a_0\\log b_0 - a_N\\log b_N + \\log\\Gamma(a_N) -
              \\log\\Gamma(a_0)

    (Pena-Llamas et al. 2023, eq. 10; :func:`bayeskern.blr.nig_log_marginal` with a vector
    precision). Returns ``(log_evidence, posterior)``.
    """
    post = nig_posterior(stats, precision, a0, b0)
    logdet_N = 2.0 * jnp.sum(jnp.log(jnp.diagonal(post.L)))
    logdet_0 = jnp.sum(jnp.log(precision))
    lm = (
        -0.5 * stats.n * jnp.log(2 * jnp.pi)
        + 0.5 * (logdet_0 - logdet_N)
        + a0 * jnp.log(b0)
        - post.a * jnp.log(post.b)
        + gammaln(post.a)
        - gammaln(a0)
    )
    return lm, post


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


# =========================================================================== CRP model
class GibbsPrior(NamedTuple):
    """Priors and sampler constants of the Gibbs sampler (all on standardized data).

    Parameters
    ----------
    a0, b0 : float
        Inverse-gamma prior of the noise variance (regression), Pena-Llamas et al. (2023), eq. 10;
        the paper's experiments use ``1e-3``.
    prior_precision : float or None
        :math:`\\lambda_0`, weight prior precision (``V_0^{-1}``); ``None`` samples it with a
        ``Gamma(lam_shape, lam_rate)`` prior (the paper fixes ``1e-6``).
    lam_shape, lam_rate : float
        Gamma prior of :math:`\\lambda_0` when it is sampled.
    alpha_shape, alpha_rate : float
        Gamma prior of the DP concentration :math:`\\alpha`.
    kappa0, nu_offset : float
        Normal-inverse-Wishart :math:`\\kappa_0` and :math:`\\nu_0 = d` + ``nu_offset``
        (BaNK: 0.1 and 2).
    psi_quantile : float
        :math:`\\Psi_0 = I/\\sigma^2` with :math:`\\sigma^2` this quantile of the pairwise squared
        distances (median).
    init_quantiles : tuple of float
        Range of quantile levels for the initial component covariances.
    max_components : int or None
        Truncation level of the DP representation (see the module docstring).
    init_components : int or None
        Initial number of components (default :math:`\\max(1, \\lfloor M/10\\rfloor)`).
    lam_steps, lam_step_size : int, float
        Random-walk MH steps on :math:`\\log\\lambda_0` per sweep and their scale (regression).
    """

    a0: float = 1e-3
    b0: float = 1e-3
    prior_precision: float | None = None
    lam_shape: float = 1.0
    lam_rate: float = 1.0
    alpha_shape: float = 1.0
    alpha_rate: float = 1.0
    kappa0: float = 0.1
    nu_offset: float = 2.0
    psi_quantile: float = 0.5
    init_quantiles: tuple = (0.01, 0.5)
    max_components: int | None = None
    init_components: int | None = None
    lam_steps: int = 20
    lam_step_size: float = 0.5


def gabasr_crp_regression(
    X, y=None, *, n_features: int, psi0, mean_basis=None, prior: GibbsPrior | None = None
):
    r"""Sample the paper's GaBaSR regression: free frequencies under a CRP mixture.

    What :class:`bayeskern.inference.gabasr_gibbs.GaBaSRGibbs` samples (Pena-Llamas et al. 2023,
    section 3.2), as a NumPyro model (for its log density, prior predictive draws and checks; NUTS
    cannot sample its discrete assignments):

    .. math::
        \alpha &\sim \mathrm{Gamma}(a_\alpha, b_\alpha), \qquad
        z_j \mid z_{<j} \sim \mathrm{CRP}(\alpha):\ P(z_j = k) = \frac{n_k}{j - 1 + \alpha},\
        P(z_j = \text{new}) = \frac{\alpha}{j - 1 + \alpha},\\
        \Lambda_k &\sim \mathrm{Wishart}(\nu_0, \Psi_0^{-1})\ (\Sigma_k = \Lambda_k^{-1} \sim
        \mathrm{IW}(\nu_0, \Psi_0)), \qquad \mu_k \mid \Lambda_k \sim N(m_0, (\kappa_0
        \Lambda_k)^{-1}),\\
        \omega_j &\sim N(\mu_{z_j}, \Lambda_{z_j}^{-1}), \qquad \lambda_0 \sim
        \mathrm{Gamma}(a_\lambda, b_\lambda),\qquad
        p(y \mid \Omega, \lambda_0) = \text{eq. (10) with } \Phi = [\cos X\Omega^\top,
        \sin X\Omega^\top]/\sqrt M \mid B],

    the weights :math:`w \mid \sigma^2 \sim N(0, \sigma^2 \lambda_0^{-1} I)` and the noise
    :math:`\sigma^2 \sim \mathrm{IG}(a_0, b_0)` integrated out
    (:func:`bayeskern.blr.nig_log_marginal`). Tables are labelled in order of appearance (the
    first empty label is the new table), so the assignments' law is exactly the CRP's;
    labels that no frequency uses carry prior draws of :math:`(\mu_k, \Lambda_k)` and do
    not touch the rest of the model. :math:`m_0 = 0`, :math:`\nu_0 = d` + ``nu_offset``.

    Parameters
    ----------
    X : (n, d) standardized inputs; y : (n,) standardized targets or None.
    n_features : int
        Number of frequencies :math:`M` (:math:`2M` Fourier columns).
    psi0 : (d, d)
        :math:`\Psi_0`; the sampler uses :math:`I/\sigma^2`, :math:`\sigma^2` the median
        pairwise squared distance of the inputs (BaNK).
    mean_basis : (n, p) or None
        Mean-function columns appended to :math:`\Phi` (prior precision :math:`\lambda_0`).
    prior : GibbsPrior or None
        The constants (``prior_precision`` fixes :math:`\lambda_0`); ``None``: the defaults.

    Sites: ``alpha``, ``z_0 ... z_{M-1}``, ``precision`` (M, d, d), ``mu`` (M, d), ``omega``
    (M, d), ``prior_precision`` (unless fixed); the factor ``evidence``.
    """
    prior = GibbsPrior() if prior is None else prior
    d = X.shape[1]
    M = int(n_features)
    alpha = numpyro.sample("alpha", dist.Gamma(prior.alpha_shape, prior.alpha_rate))
    counts, zs = jnp.zeros(M), []
    for j in range(M):
        new = jnp.argmin(counts > 0)  # the first empty table
        w = counts + alpha * jax.nn.one_hot(new, M)
        z = numpyro.sample(f"z_{j}", dist.Categorical(probs=w / jnp.sum(w)))
        counts = counts.at[z].add(1.0)
        zs.append(z)
    z = jnp.stack(zs)
    Lam = numpyro.sample(
        "precision",
        dist.Wishart(d + prior.nu_offset, scale_matrix=jnp.linalg.inv(jnp.asarray(psi0)))
        .expand([M])
        .to_event(1),
    )
    mu = numpyro.sample(
        "mu", dist.MultivariateNormal(jnp.zeros(d), precision_matrix=prior.kappa0 * Lam).to_event(1)
    )
    omega = numpyro.sample(
        "omega", dist.MultivariateNormal(mu[z], precision_matrix=Lam[z]).to_event(1)
    )
    lam0 = prior.prior_precision
    if lam0 is None:
        lam0 = numpyro.sample("prior_precision", dist.Gamma(prior.lam_shape, prior.lam_rate))
    Phi = rff_features(X, omega)
    if mean_basis is not None:
        Phi = jnp.concatenate([Phi, jnp.asarray(mean_basis, Phi.dtype)], axis=1)
    if y is not None:
        numpyro.factor(
            "evidence", nig_log_marginal(feature_stats(Phi, y), lam0, prior.a0, prior.b0)
        )


# =========================================================================== exact model
# The collapsed (exact) spectral-mixture GP: the kernel is the expectation of the random
# features above over their base draws, so no frequency is drawn at all and the likelihood is
# the exact Gaussian marginal. Used for N up to a few thousand rows (the default there).


def significant_peaks(
    x: np.ndarray,
    r: np.ndarray,
    *,
    w_min: float,
    w_max: float,
    max_peaks: int = 3,
    fap: float = 1e-3,
    n_grid: int = 4000,
) -> np.ndarray:
    r"""Significant spectral lines of a residual series by iterative pre-whitening.

    At each step the periodogram of the current residual :math:`r`,

    .. math:: z(\omega) = \frac{\mathrm{RSS}_0 - \mathrm{RSS}(\omega)}
              {\mathrm{med}_{|\omega'-\omega| \le 10\Delta}[\mathrm{RSS}_0 -
              \mathrm{RSS}(\omega')] / \ln 2},

    is the drop of the residual sum of squares when :math:`a\cos\omega x + b\sin\omega x` is
    fitted by least squares (Lomb 1976; Scargle 1982), relative to its running median over
    :math:`\pm 10` resolutions :math:`\Delta = 2\pi/\mathrm{span}` (the local continuum:
    under locally white noise :math:`z(\omega) \sim \mathrm{Exp}(1)`, whose median is
    :math:`\ln 2`; smooth red-noise variation raises the continuum, not :math:`z`). The
    highest peak on the grid over :math:`[w_{min}, w_{max}]` is kept when (with :math:`z` the
    smaller of the ratios to the continuum and to the white level :math:`\mathrm{RSS}_0/n`,
    and at least 3 resolutions from the lines already found) its false-alarm probability
    :math:`1 - (1 - e^{-z})^{M}`, :math:`M = (w_{max} - w_{min}) / (2\pi/\mathrm{span})`
    independent frequencies (Horne & Baliunas 1986), is below ``fap``; the fitted sinusoid is
    then removed and the search repeats, up to ``max_peaks`` lines.

    Parameters
    ----------
    x : (n,) input column; r : (n,) residuals (detrended targets).
    w_min, w_max : angular-frequency search band (radians per unit of ``x``).
    max_peaks : int
        Most lines returned.
    fap : float
        False-alarm probability of a kept line.
    n_grid : int
        Grid size of the search.

    Returns
    -------
    (p,) angular frequencies, ``p <= max_peaks``, in the order found (strongest first);
    empty when no line is significant, the band is empty, or there are fewer than 8 rows.
    """
    x = np.asarray(x, float)
    r = np.asarray(r, float) - np.mean(r)
    n = len(x)
    span = float(np.ptp(x)) if n else 0.0
    if n < 8 or span <= 0 or not w_max > w_min or max_peaks < 1:
        return np.zeros(0)
    grid = np.linspace(w_min, w_max, n_grid)
    n_indep = max((w_max - w_min) * span / (2 * np.pi), 1.0)
    peaks: list[float] = []
    for _ in range(max_peaks):
        rss0 = float(r @ r)
        if rss0 <= 1e-12 * n:
            break
        z = np.empty(n_grid)
        for sl in np.array_split(np.arange(n_grid), max(1, n_grid * n // 2_000_000)):
            ph = np.outer(grid[sl], x)
            c, s = np.cos(ph), np.sin(ph)
            cc, ss, cs = (c * c).sum(1), (s * s).sum(1), (c * s).sum(1)
            cr, sr = c @ r, s @ r
            det = np.maximum(cc * ss - cs**2, 1e-300)
            z[sl] = (ss * cr**2 - 2 * cs * cr * sr + cc * sr**2) / det
        # against the local continuum (running median over +-10 resolutions, over ln 2, the
        # median of Exp(1)), not the total residual variance: smooth (red-noise) residual
        # variation, which the zero-frequency component models, must not count as a line
        half = max(1, int(round(10 * n_grid / n_indep)))
        step = max(1, half // 8)
        padded = np.pad(z, half, mode="reflect")
        windows = np.lib.stride_tricks.sliding_window_view(padded, 2 * half + 1)[::step]
        continuum = np.repeat(np.median(windows, axis=1), step)[:n_grid] / np.log(2.0)
        # a line must stand out both from the white-noise level and from the continuum
        z = np.minimum(z / (2 * rss0 / n), z / np.maximum(continuum, 1e-300))
        # leakage of an amplitude-modulated line already found is not a new line
        for q in peaks:
            z[np.abs(grid - q) < 3 * (2 * np.pi / span)] = 0.0
        i = int(np.argmax(z))
        if -np.expm1(n_indep * np.log1p(-np.exp(-z[i]))) > fap:
            break
        w = float(grid[i])
        A = np.column_stack([np.cos(w * x), np.sin(w * x)])
        r = r - A @ np.linalg.lstsq(A, r, rcond=None)[0]
        peaks.append(w)
    return np.asarray(peaks)


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
        Prior median (log) of the smooth component's inverse length-scales.
    """

    peaks: jax.Array
    resolution: float
    log_sigma0: jax.Array


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


def sample_exact(spec: ExactSpec, d: int, q: int) -> dict:
    """Sample the hyper-parameters of :func:`gabasr_exact_regression` (see there)."""
    K = spec.peaks.shape[0] + 1
    res = spec.resolution
    params = {
        "trend_amp": numpyro.sample("trend_amp", dist.HalfNormal(1.0).expand([q]).to_event(1)),
        "amplitude": numpyro.sample("amplitude", dist.HalfNormal(1.0).expand([K]).to_event(1)),
        "sigma0": numpyro.sample(
            "sigma0", dist.LogNormal(spec.log_sigma0, SIGMA0_PRIOR_SD).to_event(1)
        ),
    }
    if K > 1:  # no sites of size zero (no significant line: the smooth component only)
        params["mu"] = numpyro.sample("mu", dist.Normal(spec.peaks, res).to_event(1))
        params["sigma"] = numpyro.sample(
            "sigma", dist.LogNormal(jnp.full(K - 1, np.log(res)), SIGMA_PRIOR_SD).to_event(1)
        )
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
      :math:`\sigma_{0,j} \sim \mathrm{LogNormal}(\texttt{spec.log\_sigma0}_j, 1.5)`;
    * :math:`c_p \sim \mathrm{HalfNormal}(1)` per trend column (a degree the data do not
      support is shrunk towards zero), :math:`\sigma_n \sim \mathrm{HalfNormal}(1)`.

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


def exact_cross(params: dict, X, B, Xnew, Bnew):
    """Cross-covariance ``(n, m)`` and prior variance ``(m,)`` at new inputs (no noise)."""
    Ks = (
        spectral_mixture_terms(X[:, None, :] - Xnew[None, :, :], params)
        + (B * params["trend_amp"] ** 2) @ Bnew.T
    )
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
