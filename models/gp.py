"""Gaussian-process models as plain NumPyro functions.

Both models work on standardized data (the estimators centre and scale ``X`` per column and,
for regression, ``y``), so the weakly-informative priors below have a fixed meaning:

* one amplitude per additive term of the kernel, ``amplitude ~ HalfNormal(1)`` (the
  standardized ``y`` has unit variance, which the terms share);
* every hyper-parameter the user left as ``None`` gets its kernel's prior
  (length-scales ``LogNormal(0, 1)``: median one standard deviation of the inputs);
* regression noise standard deviation ``noise ~ HalfNormal(1)``.

Regression uses the exact marginal likelihood :math:`y \\sim N(0, K_\\theta + \\sigma^2 I)`
(Rasmussen & Williams 2006, eq. 2.30). Classification has a Bernoulli-logit likelihood on a
latent GP :math:`f` with a constant mean ``bias ~ Normal(0, 1.5)``, in two forms of the same
model:

* :func:`gp_classification_laplace` (the default of :class:`~bayeskern.GPClassifier`)
  integrates :math:`f` out by the embedded Laplace approximation (:mod:`bayeskern.laplace`);
  the bias, a Gaussian, is integrated exactly as the constant kernel
  :math:`1.5^2\\,\\mathbf 1\\mathbf 1^\\top`, so NUTS samples only the kernel's
  hyper-parameters;
* :func:`gp_classification` samples :math:`f` in the whitened (non-centred)
  parameterization :math:`f = b + L\\eta,\\ \\eta \\sim N(0, I)`, :math:`LL^\\top = K`:
  exact, with :math:`n` more dimensions for NUTS.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import jax.scipy.linalg as jsl
import numpyro
import numpyro.distributions as dist
from bayeskern.models.gp_kernel import (  # noqa: F401  (the models' names, one import away)
    BIAS_SD,
    JITTER,
    PackedGram,
    SoftplusHalfNormal,
    ZeroMeanGaussian,
    _cross,
    _hyper,
    kernel_diag,
    kernel_matrix,
    prepare_kernel,
    sample_kernel_hyperparameters,
    theta_from_draw,
)
from bayeskern.models.gp_laplace import (  # noqa: F401
    LaplaceBernoulliGP,
    LaplaceSoftmaxGP,
    classification_covariance,
    gp_classification_laplace,
    gp_classification_softmax,
    laplace_classification_loo,
    laplace_classification_predictive,
    softmax_classification_loo,
    softmax_classification_predictive,
    softmax_covariances,
)

from bayeskern.kernels.base import Kernel
from bayeskern.linalg import gaussian_conditional, safe_cholesky, triangular_inverse

__all__ = [
    "sample_kernel_hyperparameters",
    "prepare_kernel",
    "PackedGram",
    "kernel_matrix",
    "ZeroMeanGaussian",
    "SoftplusHalfNormal",
    "gp_regression",
    "gp_classification",
    "gp_classification_laplace",
    "LaplaceBernoulliGP",
    "classification_covariance",
    "BIAS_SD",
    "regression_predictive",
    "regression_factors",
    "predict_from_factors",
    "classification_predictive",
    "laplace_classification_predictive",
    "laplace_classification_loo",
    "gp_classification_softmax",
    "LaplaceSoftmaxGP",
    "softmax_covariances",
    "softmax_classification_predictive",
    "softmax_classification_loo",
    "theta_from_draw",
    "JITTER",
]


def gp_regression(X, y=None, *, kernel: Kernel, x_scale, prepared=None):
    """GP regression with the exact Gaussian marginal likelihood.

    Parameters
    ----------
    X : (n, d) standardized inputs.
    y : (n,) standardized targets, or ``None`` for prior predictive sampling.
    kernel : a named (see :func:`bayeskern.kernels.name_leaves`), fitted kernel.
    x_scale : (d,) column scales of the raw inputs (translates fixed length values).
    prepared : optional :func:`prepare_kernel` ``(kernel, X, X, x_scale)``, computed once
        per fit so that the leapfrog steps of NUTS skip it.
    """
    theta, amplitude = _hyper(kernel, x_scale)
    noise = numpyro.sample("noise", dist.HalfNormal(1.0))
    K = kernel_matrix(kernel, theta, amplitude, X, X, prepared=prepared)
    K = K + (noise**2 + JITTER) * jnp.eye(X.shape[0])
    numpyro.sample("y", ZeroMeanGaussian(K), obs=y)


def gp_classification(X, y=None, *, kernel: Kernel, x_scale, prepared=None):
    """Binary GP classification, Bernoulli-logit likelihood, whitened latent GP.

    :math:`f = b + L\\eta`, :math:`\\eta \\sim N(0, I_n)`, :math:`y_i \\sim
    \\mathrm{Bernoulli}(\\sigma(f_i))`. The whitened form decouples :math:`\\eta` from the
    kernel hyper-parameters, which removes the funnel of the centred form (Murray & Adams 2010).
    """
    theta, amplitude = _hyper(kernel, x_scale, SoftplusHalfNormal)
    bias = numpyro.sample("bias", dist.Normal(0.0, BIAS_SD))
    n = X.shape[0]
    K = kernel_matrix(kernel, theta, amplitude, X, X, prepared=prepared) + JITTER * jnp.eye(n)
    L = jnp.linalg.cholesky(K)
    eta = numpyro.sample("eta", dist.Normal(0.0, 1.0).expand([n]).to_event(1))
    f = numpyro.deterministic("f", bias + L @ eta)
    numpyro.sample("y", dist.Bernoulli(logits=f), obs=y)


def loo_and_fitted_rows(Linv, alpha, y, noise):
    r"""LOO log densities and the predictive at the training inputs, from one factorization.

    With :math:`K_y = K_f + sI = LL^\top`, :math:`s = \sigma_n^2 + 10^{-6}` (:data:`JITTER`),
    ``Linv`` :math:`= L^{-1}`, ``alpha`` :math:`= K_y^{-1}y` and
    :math:`d = \mathrm{diag}(K_y^{-1})` (column sums of :math:`(L^{-1})^2`):

    * leave-one-out (Rasmussen & Williams 2006, eq. 5.12): :math:`\mu_i = y_i -
      \alpha_i/d_i`, :math:`v_i = 1/d_i`;
    * a new observation at training input :math:`x_i` (R&W eqs. 2.25-2.26 with
      :math:`K_* = K_f = K_y - sI`): mean :math:`[K_f\alpha]_i = y_i - s\alpha_i`, variance
      :math:`[K_f - K_fK_y^{-1}K_f]_{ii} + \sigma_n^2 = s - s^2 d_i + \sigma_n^2`,

    what the predictive at ``Xnew = X`` gives without a cross-covariance and a second
    factorization.

    Returns
    -------
    loo : (n,) log densities of the held-out :math:`y_i`.
    mean, sd : (n,) predictive mean and standard deviation of a new observation at
        :math:`x_i`.
    """
    d = jnp.sum(Linv * Linv, axis=0)
    loo = jax.scipy.stats.norm.logpdf(y, y - alpha / d, 1.0 / jnp.sqrt(d))
    s = noise**2 + JITTER
    var = jnp.maximum(s - s * s * d, 0.0) + noise**2
    return loo, y - s * alpha, jnp.sqrt(var)


def regression_factors(kernel: Kernel, draw: dict, X, y, x_scale):
    """Return the per-draw factors of GP regression prediction, computed once per fit.

    With :math:`K_y = K + \\sigma^2 I = LL^\\top`: :math:`L^{-1}` (:func:`triangular_inverse`)
    and :math:`\\alpha = K_y^{-1} y = L^{-\\top} L^{-1} y` (R&W Algorithm 2.1). Returns
    ``(L^{-1}, alpha, jitter used)``; :func:`predict_from_factors` then needs only matrix
    products per batch of new points.
    """
    _, L, jitter = _regression_cholesky(kernel, draw, X, x_scale)
    Linv = triangular_inverse(L)
    return Linv, Linv.T @ (Linv @ y), jitter


def _regression_cholesky(kernel: Kernel, draw: dict, X, x_scale):
    r"""Return the draw's kernel parameters, :math:`L` and the jitter added.

    :math:`LL^\top = K + (\sigma^2 + \text{jitter}) I` (:func:`safe_cholesky`).
    """
    theta = theta_from_draw(kernel, draw, x_scale)
    K = kernel_matrix(kernel, theta, draw["amplitude"], X, X) + (
        draw["noise"] ** 2 + JITTER
    ) * jnp.eye(X.shape[0])
    return (theta, *safe_cholesky(K))


def predict_from_factors(kernel: Kernel, draw: dict, factors, X, Xnew, x_scale):
    """Return the predictive mean, latent variance and noise variance at ``Xnew``.

    From :func:`regression_factors`: :math:`\\mu_* = K_*^\\top\\alpha`,
    :math:`v_* = k_{**} - \\lVert L^{-1} K_* \\rVert^2` (R&W eqs. 2.25-2.26), one matrix
    product with the cached :math:`L^{-1}` instead of a triangular solve.
    """
    Linv, alpha = factors[0], factors[1]
    theta = theta_from_draw(kernel, draw, x_scale)
    Ks, kss = _cross(kernel, theta, draw["amplitude"], X, Xnew)
    v = Linv @ Ks
    return Ks.T @ alpha, jnp.maximum(kss - jnp.sum(v * v, axis=0), 0.0), draw["noise"] ** 2


def regression_predictive(kernel: Kernel, draw: dict, X, y, Xnew, x_scale):
    """Predictive mean and variance of the latent GP at ``Xnew`` for one posterior draw.

    :math:`\\mu_* = K_*^\\top (K + \\sigma^2 I)^{-1} y`,
    :math:`v_* = k_{**} - K_*^\\top (K + \\sigma^2 I)^{-1} K_*` (R&W eqs. 2.25-2.26).
    Returns ``(mean, latent variance, noise variance, jitter used)``; add the noise variance
    for the predictive distribution of new observations.
    """
    theta, L, jitter = _regression_cholesky(kernel, draw, X, x_scale)
    mean, var = gaussian_conditional(L, *_cross(kernel, theta, draw["amplitude"], X, Xnew), y)
    return mean, var, draw["noise"] ** 2, jitter


def classification_predictive(kernel: Kernel, draw: dict, X, Xnew, x_scale):
    """Latent mean and variance at ``Xnew`` for one draw of the whitened classifier.

    With :math:`f = b + L\\eta`: :math:`\\mu_* = b + K_*^\\top L^{-\\top}\\eta`,
    :math:`v_* = k_{**} - \\|L^{-1}K_*\\|^2`.
    """
    theta = theta_from_draw(kernel, draw, x_scale)
    amplitude = draw["amplitude"]
    K = kernel_matrix(kernel, theta, amplitude, X, X) + JITTER * jnp.eye(X.shape[0])
    L, jitter = safe_cholesky(K)
    Ks, kss = _cross(kernel, theta, amplitude, X, Xnew)
    v = jsl.solve_triangular(L, Ks, lower=True)
    mean = draw["bias"] + v.T @ draw["eta"]
    var = jnp.maximum(kss - jnp.sum(v * v, axis=0), 0.0)
    return mean, var, jitter
