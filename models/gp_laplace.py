r"""GP classification with the latent function integrated out by the embedded Laplace approximation.

The binary model :func:`gp_classification_laplace` (the default of
:class:`~bayeskern.GPClassifier`) and the multi-class one :func:`gp_classification_softmax`:
NUTS samples only the kernel's hyper-parameters, the latent function is integrated out at
each step by :mod:`bayeskern.laplace` / :mod:`bayeskern.laplace_softmax` (Rasmussen &
Williams 2006, sections 3.4-3.5; Margossian et al. 2020), the constant mean
``bias ~ Normal(0, 1.5)`` exactly, as the constant kernel :math:`1.5^2\,\mathbf 1\mathbf
1^\top`. With them, their predictive distributions and leave-one-out log densities per draw.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpyro
import numpyro.distributions as dist
from bayeskern.models.gp_kernel import (
    BIAS_SD,
    JITTER,
    SoftplusHalfNormal,
    ZeroMeanGaussian,
    _hyper,
    kernel_diag,
    kernel_matrix,
    sample_kernel_hyperparameters,
    theta_from_draw,
)
from numpyro.distributions import constraints

from bayeskern.kernels.base import Kernel
from bayeskern.laplace import (
    laplace_log_marginal,
    laplace_loo_and_marginals,
    laplace_mode,
    laplace_predict,
    mode_from_f,
)
from bayeskern.laplace_softmax import (
    softmax_expectation,
    softmax_laplace_mode,
    softmax_log_marginal,
    softmax_loo_logpdf,
    softmax_mode_from_f,
    softmax_predict,
)

__all__ = [
    "LaplaceBernoulliGP",
    "classification_covariance",
    "gp_classification_laplace",
    "laplace_classification_predictive",
    "laplace_classification_loo",
    "softmax_covariances",
    "LaplaceSoftmaxGP",
    "gp_classification_softmax",
    "softmax_classification_predictive",
    "softmax_classification_loo",
]


class LaplaceBernoulliGP(dist.Distribution):
    r"""Labels of a Bernoulli-logit GP with the latent function integrated out.

    Labels :math:`y \in \{0, 1\}^n`, latent function :math:`f \sim N(0, K)`.

    ``log_prob`` is the embedded Laplace approximation of :math:`\log p(y \mid K)`
    (:func:`bayeskern.laplace.laplace_log_marginal`, gradient by implicit differentiation of
    the mode); ``sample`` draws exactly, :math:`f \sim N(0, K)` then
    :math:`y_i \sim \mathrm{Bernoulli}(\sigma(f_i))` (prior predictive checks).
    ``newton_start`` (latent values, shape ``(n,)``) is where the mode search starts; the
    log density does not depend on it (:func:`bayeskern.laplace.laplace_mode`).
    """

    arg_constraints = {"covariance_matrix": constraints.positive_definite}
    support = constraints.independent(constraints.boolean, 1)

    def __init__(self, covariance_matrix, *, newton_start=None, validate_args=None):
        self.covariance_matrix = covariance_matrix
        self.newton_start = newton_start
        super().__init__(
            batch_shape=(), event_shape=covariance_matrix.shape[-1:], validate_args=validate_args
        )

    def sample(self, key, sample_shape=()):
        """Draw labels exactly: :math:`f \\sim N(0, K)`, then Bernoulli-logit labels."""
        k_f, k_y = jax.random.split(key)
        f = ZeroMeanGaussian(self.covariance_matrix).sample(k_f, sample_shape)
        return dist.Bernoulli(logits=f).sample(k_y)

    def log_prob(self, value):
        """Return the embedded Laplace approximation of the log marginal likelihood."""
        return laplace_log_marginal(self.covariance_matrix, value, self.newton_start)


def classification_covariance(kernel: Kernel, theta, amplitude, X1=None, X2=None, *, prepared=None):
    """Return the prior covariance of the classifier's latent function, bias integrated out.

    It is :math:`K + 1.5^2\\,\\mathbf 1\\mathbf 1^\\top` (a ``Normal(0, 1.5)`` constant mean).
    """
    return kernel_matrix(kernel, theta, amplitude, X1, X2, prepared=prepared) + BIAS_SD**2


def gp_classification_laplace(
    X, y=None, *, kernel: Kernel, x_scale, prepared=None, newton_start=None
):
    """Binary GP classification with the latent function integrated out (embedded Laplace).

    .. math:: y \\mid \\theta \\sim \\int \\prod_i \\mathrm{Bernoulli}(y_i \\mid \\sigma(f_i))
              \\, N(f \\mid 0, K_\\theta + 1.5^2\\mathbf 1\\mathbf 1^\\top)\\,df

    by the Laplace approximation at the mode (:class:`LaplaceBernoulliGP`), so NUTS samples
    the kernel's hyper-parameters only. The same model as :func:`gp_classification`, whose
    ``bias ~ Normal(0, 1.5)`` is here the constant kernel term. The mode :math:`\\hat f` of
    each posterior draw is kept as the deterministic site ``f`` (for predictions and LOO).
    ``newton_start`` ``(n,)``: the latent values where every draw's mode search starts (zeros
    by default). The mode does not depend on it; the estimator passes :math:`\\hat f` at the
    posterior mode of the hyper-parameters, so that each search near it takes fewer Newton
    steps.
    """
    theta, amplitude = _hyper(kernel, x_scale, SoftplusHalfNormal)
    n = X.shape[0]
    K = classification_covariance(kernel, theta, amplitude, X, X, prepared=prepared)
    K = K + JITTER * jnp.eye(n)
    if y is not None:
        # recomputed only when the posterior draws are collected (the log density does not
        # use it, so it is not part of the gradient NUTS evaluates)
        numpyro.deterministic("f", laplace_mode(K, y, f_start=newton_start).f)
    numpyro.sample("y", LaplaceBernoulliGP(K, newton_start=newton_start), obs=y)


def _laplace_factors(kernel: Kernel, draw: dict, X, y, x_scale):
    theta = theta_from_draw(kernel, draw, x_scale)
    K = classification_covariance(kernel, theta, draw["amplitude"], X, X)
    K = K + JITTER * jnp.eye(X.shape[0])
    return theta, K, mode_from_f(K, y, draw["f"])


def laplace_classification_predictive(kernel: Kernel, draw: dict, X, y, Xnew, x_scale):
    """Latent mean and variance at ``Xnew`` for one draw of the Laplace classifier.

    From the stored mode :math:`\\hat f` of the draw (R&W Algorithm 3.2):
    :math:`\\mu_* = k_*^\\top(y - \\sigma(\\hat f))`,
    :math:`v_* = k_{**} - \\|L^{-1}W^{1/2}k_*\\|^2`, :math:`LL^\\top = I + W^{1/2}KW^{1/2}`,
    with the bias variance in every covariance. Returns ``(mean, variance, 0.0)`` (no jitter:
    :math:`B` has eigenvalues of at least one).
    """
    theta, _, mode = _laplace_factors(kernel, draw, X, y, x_scale)
    Ks = classification_covariance(kernel, theta, draw["amplitude"], X, Xnew)
    kss = kernel_diag(kernel, theta, draw["amplitude"], Xnew) + BIAS_SD**2
    mean, var = laplace_predict(mode, Ks, kss)
    return mean, var, jnp.zeros((), mean.dtype)


def laplace_classification_loo(kernel: Kernel, draw: dict, X, y, x_scale):
    """LOO log probabilities and latent marginals at the training inputs for one draw.

    By :func:`bayeskern.laplace.laplace_loo_and_marginals` (the pointwise terms of PSIS-LOO,
    and the latent mean and variance that the posterior-predictive replicates at the
    training inputs need, from the same factorization): ``(loo, mean, var)``, each ``(n,)``.
    """
    _, K, mode = _laplace_factors(kernel, draw, X, y, x_scale)
    return laplace_loo_and_marginals(mode, K, y)


def softmax_covariances(kernel: Kernel, theta, amplitude, X1=None, X2=None, *, prepared=None):
    r"""Per-class prior covariances of the multi-class latent functions, ``(C, n1, n2)``.

    :math:`K_c = \sum_t a_{ct}^2 k_t + 1.5^2\,\mathbf 1\mathbf 1^\top`: the kernel's
    hyper-parameters are shared by the classes, the amplitudes ``amplitude[c]`` are per class,
    and each class has its own ``Normal(0, 1.5)`` constant mean, integrated out.
    """
    # vmap over the amplitudes only: the terms' Gram matrices are computed once
    return jax.vmap(
        lambda a: classification_covariance(kernel, theta, a, X1, X2, prepared=prepared)
    )(amplitude)


class LaplaceSoftmaxGP(dist.Distribution):
    r"""Labels of a softmax (multi-class) GP with the latent functions integrated out.

    Labels :math:`y_i \in \{0, \dots, C-1\}`, latent functions :math:`f_c \sim N(0, K_c)`,
    :math:`p(y_i = c\mid f) = \mathrm{softmax}(f_{i\cdot})_c`. ``log_prob`` is the embedded
    Laplace approximation of :math:`\log p(y\mid K)`
    (:func:`bayeskern.laplace_softmax.softmax_log_marginal`; Rasmussen & Williams 2006, Algorithm
    3.3); ``sample`` draws exactly, :math:`f_c \sim N(0, K_c)` then categorical labels.

    Parameters
    ----------
    covariance_matrix : (C, n, n) per-class prior covariances.
    newton_start : (C, n), optional
        Where the mode search starts (:func:`bayeskern.laplace_softmax.softmax_laplace_mode`); the
        log density does not depend on it.
    """

    arg_constraints = {}

    def __init__(self, covariance_matrix, *, newton_start=None, validate_args=None):
        self.covariance_matrix = covariance_matrix
        self.newton_start = newton_start
        self.n_classes = covariance_matrix.shape[0]
        super().__init__(
            batch_shape=(), event_shape=covariance_matrix.shape[-1:], validate_args=validate_args
        )

    @property
    def support(self):
        r"""Labels in :math:`\{0, \dots, C-1\}`."""
        return constraints.independent(constraints.integer_interval(0, self.n_classes - 1), 1)

    def sample(self, key, sample_shape=()):
        r"""Draw labels exactly: :math:`f_c \sim N(0, K_c)`, then categorical labels."""
        keys = jax.random.split(key, self.n_classes + 1)
        f = jnp.stack(
            [
                ZeroMeanGaussian(self.covariance_matrix[c]).sample(keys[c], sample_shape)
                for c in range(self.n_classes)
            ],
            axis=-1,
        )
        return dist.Categorical(logits=f).sample(keys[-1])

    def log_prob(self, value):
        r"""Return the embedded Laplace approximation of the log marginal likelihood."""
        Y = jax.nn.one_hot(value, self.n_classes, dtype=self.covariance_matrix.dtype).T
        return softmax_log_marginal(self.covariance_matrix, Y, self.newton_start)


def gp_classification_softmax(
    X, y=None, *, kernel: Kernel, x_scale, n_classes: int, prepared=None, newton_start=None
):
    r"""Multi-class GP classification, softmax likelihood, latent functions integrated out.

    .. math:: y \mid \theta \sim \int \prod_i \mathrm{Categorical}(y_i \mid
              \mathrm{softmax}(f_{i\cdot}))\prod_c N(f_c \mid 0, K_c)\,df,\qquad
              K_c = \textstyle\sum_t a_{ct}^2 k_t + 1.5^2\mathbf 1\mathbf 1^\top

    by the embedded Laplace approximation (:class:`LaplaceSoftmaxGP`; Williams & Barber 1998,
    Rasmussen & Williams 2006 section 3.5). The kernel hyper-parameters (length-scales...)
    are shared by the classes, under the kernel's priors; the amplitudes are per class and
    term, ``amplitude ~ HalfNormal(1)`` of shape ``(C, terms)``. The mode :math:`\hat f`,
    ``(C, n)``, of each posterior draw is kept as the deterministic site ``f``.

    Parameters
    ----------
    X : (n, d) standardized inputs.
    y : (n,) labels in ``0 .. n_classes - 1``, or ``None`` for prior predictive sampling.
    kernel, x_scale, prepared, newton_start : as :func:`gp_classification_laplace`
        (``newton_start`` of shape ``(C, n)``).
    n_classes : number of classes :math:`C \ge 2`.
    """
    theta = sample_kernel_hyperparameters(kernel, x_scale)
    amplitude = numpyro.sample(
        "amplitude",
        SoftplusHalfNormal(1.0).expand([n_classes, len(kernel.terms())]).to_event(2),
    )
    n = X.shape[0]
    K = softmax_covariances(kernel, theta, amplitude, X, X, prepared=prepared)
    K = K + JITTER * jnp.eye(n)
    if y is not None:
        Y = jax.nn.one_hot(y, n_classes, dtype=K.dtype).T
        numpyro.deterministic("f", softmax_laplace_mode(K, Y, f_start=newton_start).f)
    numpyro.sample("y", LaplaceSoftmaxGP(K, newton_start=newton_start), obs=y)


def _softmax_factors(kernel: Kernel, draw: dict, X, y, x_scale):
    theta = theta_from_draw(kernel, draw, x_scale)
    K = softmax_covariances(kernel, theta, draw["amplitude"], X, X)
    K = K + JITTER * jnp.eye(X.shape[0])
    Y = jax.nn.one_hot(y, K.shape[0], dtype=K.dtype).T
    return theta, K, Y, softmax_mode_from_f(K, Y, draw["f"])


def softmax_classification_predictive(kernel: Kernel, draw: dict, X, y, Xnew, x_scale, key):
    r"""Class probabilities and latent moments at ``Xnew`` for one draw of the softmax GP.

    From the stored mode :math:`\hat f` of the draw, R&W Algorithm 3.4: the latent mean and
    covariance (:func:`bayeskern.laplace_softmax.softmax_predict`), then
    :math:`E[\mathrm{softmax}(f_*)]` by Monte Carlo with ``key``
    (:func:`bayeskern.laplace_softmax.softmax_expectation`). Returns ``(proba (m, C), mean (m, C),
    cov (m, C, C))``.
    """
    theta, _, _, mode = _softmax_factors(kernel, draw, X, y, x_scale)
    amplitude = draw["amplitude"]
    Ks = softmax_covariances(kernel, theta, amplitude, X, Xnew)
    kss = jax.vmap(lambda a: kernel_diag(kernel, theta, a, Xnew))(amplitude) + BIAS_SD**2
    mean, cov = softmax_predict(mode, Ks, kss)
    return softmax_expectation(mean, cov, key), mean, cov


def softmax_classification_loo(kernel: Kernel, draw: dict, X, y, x_scale, key):
    r"""Return :math:`\log p(y_i \mid y_{-i}, \theta)` for one draw of the softmax GP.

    By :func:`bayeskern.laplace_softmax.softmax_loo_logpdf` (multi-class LA-LOO, Vehtari et
    al. 2016).
    """
    _, K, Y, mode = _softmax_factors(kernel, draw, X, y, x_scale)
    return softmax_loo_logpdf(mode, K, Y, key)
