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

from dataclasses import dataclass
from functools import partial

import jax
import jax.numpy as jnp
import jax.scipy.linalg as jsl
import numpy as np
import numpyro
import numpyro.distributions as dist
from numpyro.distributions import constraints

from bayeskern.kernels.base import Kernel, default_theta
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
from bayeskern.linalg import (
    gaussian_conditional,
    gaussian_logpdf,
    safe_cholesky,
    triangular_inverse,
)

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


@partial(
    jax.tree_util.register_dataclass,
    data_fields=["caches", "rows", "cols", "index"],
    meta_fields=["pairwise"],
)
@dataclass(frozen=True)
class PackedGram:
    """What a symmetric Gram matrix ``K(X, X)`` needs per additive term, computed once per fit.

    Only the lower triangle is kept (:func:`prepare_kernel`).

    Attributes
    ----------
    caches : per term, the :meth:`~bayeskern.kernels.Kernel.prepare` result, packed to the
        :math:`n(n+1)/2` pairs ``(rows, cols)`` where the term's cache is pairwise.
    rows, cols : the lower-triangle indices, ``rows >= cols``.
    index : (n, n) position of pair ``(i, j)`` (or ``(j, i)``) in the packed axis.
    pairwise : per term, whether its cache was packed.
    """

    caches: list
    rows: jax.Array
    cols: jax.Array
    index: jax.Array
    pairwise: tuple


def prepare_kernel(kernel: Kernel, X1, X2, x_scale):
    """Compute once per fit what each additive term's Gram matrix needs.

    Per additive term, what its Gram matrix between ``X1`` and ``X2`` needs that no
    sampled hyper-parameter changes (:meth:`~bayeskern.kernels.Kernel.prepare`), computed once
    per fit and passed to the models as ``prepared``.

    For the symmetric ``K(X, X)`` (``X2 is X1``) the result is a :class:`PackedGram`: the terms
    whose cache is pairwise are evaluated on the lower triangle only (half the elementwise
    work, and no transposed copies of the caches), and :func:`kernel_matrix` unfolds the sum
    once. Otherwise it is a list of per-term caches.
    """
    theta0 = default_theta(kernel, x_scale)
    terms = kernel.terms()
    if X2 is not X1:
        return [t.prepare(theta0, X1, X2) for t in terms]
    n = X1.shape[0]
    rows, cols = np.tril_indices(n)
    index = np.zeros((n, n), np.int32)
    index[rows, cols] = index[cols, rows] = np.arange(len(rows))
    rows, cols = jnp.asarray(rows), jnp.asarray(cols)
    pairwise = tuple(t.pairwise_prepared() for t in terms)
    caches = []
    for t, pw in zip(terms, pairwise, strict=True):
        c = t.prepare(theta0, X1, X1)
        caches.append(jax.tree.map(lambda a: a[rows, cols], c) if pw else c)
    return PackedGram(caches, rows, cols, jnp.asarray(index), pairwise)


@jax.custom_vjp
def _unpack(packed, rows, cols, index):
    """Return the symmetric matrix whose lower triangle is ``packed``.

    Its VJP folds the cotangent of the upper triangle onto the lower one (a gather, not a
    scatter-add).
    """
    return packed[index]


def _unpack_fwd(packed, rows, cols, index):
    return packed[index], (rows, cols)


def _unpack_bwd(res, W):
    rows, cols = res
    return W[rows, cols] + jnp.where(rows != cols, W[cols, rows], 0.0), None, None, None


_unpack.defvjp(_unpack_fwd, _unpack_bwd)


def kernel_matrix(
    kernel: Kernel, theta: dict, amplitude, X1=None, X2=None, *, prepared=None
) -> jax.Array:
    r""":math:`K = \sum_t a_t^2\, k_t(X_1, X_2)` over the additive terms :math:`k_t`.

    With ``prepared`` (from :func:`prepare_kernel` on the same inputs) the terms start from
    their cached parts and ``X1``, ``X2`` are not needed.
    """
    terms = kernel.terms()
    if isinstance(prepared, PackedGram):
        packed = 0.0
        for a, t, c, pw in zip(amplitude, terms, prepared.caches, prepared.pairwise, strict=True):
            g = t.gram_prepared(theta, c)
            packed = packed + a**2 * (g if pw else g[prepared.rows, prepared.cols])
        return _unpack(packed, prepared.rows, prepared.cols, prepared.index)
    if prepared is None:
        prepared = [t.prepare(theta, X1, X2) for t in terms]
    K = amplitude[0] ** 2 * terms[0].gram_prepared(theta, prepared[0])
    for a, t, p in zip(amplitude[1:], terms[1:], prepared[1:], strict=True):
        K = K + a**2 * t.gram_prepared(theta, p)
    return K


class ZeroMeanGaussian(dist.Distribution):
    r""":math:`N(0, K)` whose log density is :func:`bayeskern.linalg.gaussian_logpdf`.

    One Cholesky factorization forward, one inverse from it backward (Rasmussen & Williams
    2006, eq. 5.9), instead of NumPyro's ``MultivariateNormal``, which differentiates through
    the factorization. Same density; only the cost of its gradient differs.
    """

    arg_constraints = {"covariance_matrix": constraints.positive_definite}
    support = constraints.real_vector
    reparametrized_params = ["covariance_matrix"]

    def __init__(self, covariance_matrix, *, validate_args=None):
        self.covariance_matrix = covariance_matrix
        super().__init__(
            batch_shape=(), event_shape=covariance_matrix.shape[-1:], validate_args=validate_args
        )

    def sample(self, key, sample_shape=()):
        """Draw from :math:`N(0, K)` through the Cholesky factor of :math:`K`."""
        L = jnp.linalg.cholesky(self.covariance_matrix)
        eps = jax.random.normal(key, sample_shape + self.event_shape, L.dtype)
        return eps @ L.T

    def log_prob(self, value):
        """Return the Gaussian log density of ``value``."""
        return gaussian_logpdf(value, self.covariance_matrix)


def kernel_diag(kernel: Kernel, theta: dict, amplitude, X) -> jax.Array:
    """Diagonal of :func:`kernel_matrix` ``(X, X)`` without forming the matrix."""
    return sum(a**2 * t.diag(theta, X) for a, t in zip(amplitude, kernel.terms(), strict=True))


class SoftplusHalfNormal(dist.HalfNormal):
    r"""``HalfNormal(scale)`` whose sampler works on the softplus scale.

    The same distribution as :class:`numpyro.distributions.HalfNormal`; only the map to the
    unconstrained space NUTS moves in differs: :math:`a = \log(1 + e^u)` instead of
    :math:`a = e^u`. The classifiers' amplitudes need it: with well-separated classes the
    likelihood keeps rising with the amplitude and the posterior is the prior's Gaussian tail
    tilted upward, near-Gaussian in :math:`a`. Its log has a sharp right edge
    (:math:`-e^{2u}/2\sigma^2`) and a long left tail, which NUTS crosses with small steps
    and the tail quantiles mix slowly. Softplus is linear for large :math:`a` (the
    posterior stays near-Gaussian) and logarithmic near zero (as the exponential).
    """

    support = constraints.softplus_positive


def _hyper(kernel: Kernel, x_scale, amplitude_prior=dist.HalfNormal):
    theta = sample_kernel_hyperparameters(kernel, x_scale)
    n_terms = len(kernel.terms())
    amplitude = numpyro.sample("amplitude", amplitude_prior(1.0).expand([n_terms]).to_event(1))
    return theta, amplitude


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


#: prior standard deviation of the classifier's constant mean (bias)
BIAS_SD = 1.5


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


def _cross(kernel, theta, amplitude, X, Xnew):
    Ks = kernel_matrix(kernel, theta, amplitude, X, Xnew)
    kss = kernel_diag(kernel, theta, amplitude, Xnew)
    return Ks, kss


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


def theta_from_draw(kernel: Kernel, draw: dict, x_scale) -> dict:
    """Return the ``theta`` of one posterior draw (the sampling code, replayed on the draw)."""
    with numpyro.handlers.substitute(data=draw):
        return sample_kernel_hyperparameters(kernel, x_scale)
