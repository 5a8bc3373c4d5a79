"""Gaussian-process models as plain NumPyro functions.

Both models work on standardized data (the estimators centre and scale ``X`` per column and,
for regression, ``y``), so the weakly-informative priors below have a fixed meaning:

* one amplitude per additive term of the kernel, ``amplitude ~ HalfNormal(1)`` (the
  standardized ``y`` has unit variance, which the terms share);
* every hyper-parameter the user left as ``None`` gets its kernel's prior
  (length-scales ``LogNormal(0, 1)``: median one standard deviation of the inputs);
* regression noise standard deviation ``noise ~ HalfNormal(1)``.

Regression uses the exact marginal likelihood :math:`y \\sim N(0, K_\\theta + \\sigma^2 I)`
(Rasmussen & Williams 2006, eq. 2.30). Classification uses a latent GP in the whitened
(non-centred) parameterization :math:`f = L\\eta,\\ \\eta \\sim N(0, I)`, :math:`LL^\\top = K`,
with a Bernoulli-logit likelihood and a constant mean ``bias ~ Normal(0, 1.5)``.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import jax.scipy.linalg as jsl
import numpyro
import numpyro.distributions as dist

from bayeskern.kernels.base import Kernel
from bayeskern.linalg import cho_solve, safe_cholesky

__all__ = [
    "sample_kernel_hyperparameters",
    "kernel_matrix",
    "gp_regression",
    "gp_classification",
    "regression_predictive",
    "classification_predictive",
    "theta_from_draw",
    "JITTER",
]

#: jitter added to the diagonal of standardized kernel matrices inside the models
JITTER = 1e-6


def sample_kernel_hyperparameters(kernel: Kernel, x_scale) -> dict:
    """Sample (or fix) every hyper-parameter of a named kernel tree.

    Returns the flat ``theta`` dict of :mod:`bayeskern.kernels.base`. A fixed value
    given in data units is converted to standardized units with ``x_scale``; a free one
    becomes a NumPyro sample site named ``"<leaf>_<param>"`` (a vector over input columns
    when the parameter is ARD).
    """
    theta = {}
    d = len(x_scale)
    for leaf in kernel.leaves():
        for p, h in leaf.hyperparameters().items():
            site = leaf._site(p)
            if h.value is not None:
                theta[site] = h.fixed_standardized(x_scale)
            else:
                prior = h.prior()
                if h.ard:
                    prior = prior.expand([d]).to_event(1)
                theta[site] = numpyro.sample(site, prior)
    return theta


def kernel_matrix(kernel: Kernel, theta: dict, amplitude, X1, X2) -> jax.Array:
    r""":math:`K = \sum_t a_t^2\, k_t(X_1, X_2)` over the additive terms :math:`k_t`."""
    terms = kernel.terms()
    K = amplitude[0] ** 2 * terms[0].gram(theta, X1, X2)
    for a, t in zip(amplitude[1:], terms[1:]):
        K = K + a**2 * t.gram(theta, X1, X2)
    return K


def kernel_diag(kernel: Kernel, theta: dict, amplitude, X) -> jax.Array:
    """Diagonal of :func:`kernel_matrix` ``(X, X)`` without forming the matrix."""
    return sum(a**2 * t.diag(theta, X) for a, t in zip(amplitude, kernel.terms()))


def _hyper(kernel: Kernel, x_scale):
    theta = sample_kernel_hyperparameters(kernel, x_scale)
    n_terms = len(kernel.terms())
    amplitude = numpyro.sample("amplitude", dist.HalfNormal(1.0).expand([n_terms]).to_event(1))
    return theta, amplitude


def gp_regression(X, y=None, *, kernel: Kernel, x_scale):
    """GP regression with the exact Gaussian marginal likelihood.

    Parameters
    ----------
    X : (n, d) standardized inputs.
    y : (n,) standardized targets, or ``None`` for prior predictive sampling.
    kernel : a named (see :func:`bayeskern.kernels.name_leaves`), fitted kernel.
    x_scale : (d,) column scales of the raw inputs (translates fixed length values).
    """
    theta, amplitude = _hyper(kernel, x_scale)
    noise = numpyro.sample("noise", dist.HalfNormal(1.0))
    K = kernel_matrix(kernel, theta, amplitude, X, X)
    K = K + (noise**2 + JITTER) * jnp.eye(X.shape[0])
    numpyro.sample(
        "y", dist.MultivariateNormal(jnp.zeros(X.shape[0]), covariance_matrix=K), obs=y
    )


def gp_classification(X, y=None, *, kernel: Kernel, x_scale):
    """Binary GP classification, Bernoulli-logit likelihood, whitened latent GP.

    :math:`f = b + L\\eta`, :math:`\\eta \\sim N(0, I_n)`, :math:`y_i \\sim
    \\mathrm{Bernoulli}(\\sigma(f_i))`. The whitened form decouples :math:`\\eta` from the
    kernel hyper-parameters, which removes the funnel of the centred form (Murray & Adams 2010).
    """
    theta, amplitude = _hyper(kernel, x_scale)
    bias = numpyro.sample("bias", dist.Normal(0.0, 1.5))
    n = X.shape[0]
    K = kernel_matrix(kernel, theta, amplitude, X, X) + JITTER * jnp.eye(n)
    L = jnp.linalg.cholesky(K)
    eta = numpyro.sample("eta", dist.Normal(0.0, 1.0).expand([n]).to_event(1))
    f = numpyro.deterministic("f", bias + L @ eta)
    numpyro.sample("y", dist.Bernoulli(logits=f), obs=y)


def _cross(kernel, theta, amplitude, X, Xnew):
    Ks = kernel_matrix(kernel, theta, amplitude, X, Xnew)
    kss = kernel_diag(kernel, theta, amplitude, Xnew)
    return Ks, kss


def regression_predictive(kernel: Kernel, draw: dict, X, y, Xnew, x_scale):
    """Predictive mean and variance of the latent GP at ``Xnew`` for one posterior draw.

    :math:`\\mu_* = K_*^\\top (K + \\sigma^2 I)^{-1} y`,
    :math:`v_* = k_{**} - K_*^\\top (K + \\sigma^2 I)^{-1} K_*` (R&W eqs. 2.25-2.26).
    Returns ``(mean, latent variance, noise variance, jitter used)``; add the noise variance
    for the predictive distribution of new observations.
    """
    theta = theta_from_draw(kernel, draw, x_scale)
    amplitude = draw["amplitude"]
    noise2 = draw["noise"] ** 2
    K = kernel_matrix(kernel, theta, amplitude, X, X) + (noise2 + JITTER) * jnp.eye(X.shape[0])
    L, jitter = safe_cholesky(K)
    alpha = cho_solve(L, y)
    Ks, kss = _cross(kernel, theta, amplitude, X, Xnew)
    v = jsl.solve_triangular(L, Ks, lower=True)
    var = jnp.maximum(kss - jnp.sum(v * v, axis=0), 0.0)
    return Ks.T @ alpha, var, noise2, jitter


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


def theta_from_draw(kernel: Kernel, draw: dict, x_scale) -> dict:
    """The ``theta`` of one posterior draw (the sampling code, replayed on the draw)."""
    with numpyro.handlers.substitute(data=draw):
        return sample_kernel_hyperparameters(kernel, x_scale)
