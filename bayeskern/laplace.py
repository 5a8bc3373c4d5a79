r"""The Laplace approximation of a GP classifier's latent function, embedded in NUTS.

For binary GP classification :math:`f \sim N(0, K)`, :math:`y_i \sim
\mathrm{Bernoulli}(\sigma(f_i))`, the latent function is integrated out by a Laplace
approximation at its mode :math:`\hat f` (Rasmussen & Williams 2006, section 3.4), so that
NUTS samples the kernel hyper-parameters only, not :math:`n` latent values. This is the
"embedded Laplace approximation" of Margossian et al. (2020, NeurIPS, "Hamiltonian Monte Carlo
using an adjoint-differentiated Laplace approximation"), the method of Stan's
``laplace_marginal``:

* the mode by Newton's method in the stable form of R&W Algorithm 3.1
  (:math:`B = I + W^{1/2} K W^{1/2}`, never :math:`K^{-1}`), :func:`laplace_mode`;
* the approximate log marginal likelihood (R&W eq. 3.32)

  .. math:: \log q(y \mid \theta) = -\tfrac12 \hat a^\top \hat f + \log p(y \mid \hat f)
            - \sum_i \log L_{ii},\qquad \hat f = K \hat a,\ LL^\top = B;

* its exact gradient with respect to :math:`K` by implicit differentiation of the mode
  (R&W Algorithm 5.1, the adjoint method of Margossian et al.), as a custom VJP of
  :func:`laplace_log_marginal`: with :math:`R = W^{1/2}B^{-1}W^{1/2}`,
  :math:`\Sigma = (K^{-1} + W)^{-1} = K - KRK` and
  :math:`s_2 = \tfrac12\,\mathrm{diag}(\Sigma)\circ\nabla^3\log p(y\mid\hat f)`
  (:math:`=\partial(-\tfrac12\log|B|)/\partial\hat f`; R&W's Algorithm 5.1 prints this with a
  minus sign, their GPML code ``infLaplace.m`` has it positive, and the test against
  finite differences agrees with the code),

  .. math:: \frac{\partial \log q}{\partial K} = \tfrac12\hat a\hat a^\top - \tfrac12 R
            + u\,\hat a^\top,\qquad u = (I - RK)\,s_2 ,

  where the last term is the change of the mode itself (:math:`\partial\hat f/\partial K`).
  Since :math:`W^{1/2}KW^{1/2} = B - I`, :math:`W^{1/2}\,KRK\,W^{1/2} = B - 2I + B^{-1}`,
  so :math:`\mathrm{diag}(\Sigma)_i = (1 - [B^{-1}]_{ii})/W_{ii}` and
  :math:`s_{2,i} = -\tfrac12(1 - 2\pi_i)(1 - [B^{-1}]_{ii})`: no :math:`n^3` product
  :math:`RK` and no division by :math:`W` (which underflows where :math:`\pi` saturates).

The likelihood is the Bernoulli-logit one with labels in {0, 1}:
:math:`\nabla\log p = y - \pi`, :math:`W = \pi(1-\pi)`,
:math:`\nabla^3\log p = -\pi(1-\pi)(1-2\pi)`, :math:`\pi = \sigma(\hat f)`.

The multi-class (softmax) likelihood is :mod:`bayeskern.laplace_softmax`.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import jax.scipy.linalg as jsl

from bayeskern.linalg import cholesky, cholesky_inverse

__all__ = [
    "LaplaceMode",
    "laplace_mode",
    "mode_from_f",
    "laplace_log_marginal",
    "laplace_predict",
    "laplace_loo_and_marginals",
    "probit_logit",
    "NEWTON_MAX_ITER",
]

#: Newton iterations allowed before the mode search is declared failed
NEWTON_MAX_ITER = 50
#: convergence: change of the Newton objective below this (it is O(n), in nats)
NEWTON_TOL = 1e-9


class LaplaceMode(NamedTuple):
    """The mode of :math:`\\log p(y\\mid f) - \\tfrac12 f^\\top K^{-1} f` and its factors.

    Attributes
    ----------
    f, a : (n,) the mode :math:`\\hat f` and :math:`\\hat a = K^{-1}\\hat f = \\nabla\\log p`.
    sqrt_w : (n,) :math:`W^{1/2}` at the mode.
    chol_b : (n, n) lower Cholesky factor of :math:`B = I + W^{1/2} K W^{1/2}`.
    log_marginal : the approximate :math:`\\log q(y\\mid\\theta)`.
    converged : ``True`` when Newton's method converged within :data:`NEWTON_MAX_ITER`.
    n_iter : Newton iterations used.
    """

    f: jax.Array
    a: jax.Array
    sqrt_w: jax.Array
    chol_b: jax.Array
    log_marginal: jax.Array
    converged: jax.Array
    n_iter: jax.Array


def _loglik(y, f):
    # log sigma(f) for y = 1 and log sigma(-f) for y = 0, summed: y f - log(1 + e^f)
    return jnp.sum(y * f - jnp.logaddexp(0.0, f))


def _b_factor(K, f):
    pi = jax.nn.sigmoid(f)
    sw = jnp.sqrt(pi * (1.0 - pi))
    B = jnp.eye(K.shape[0], dtype=K.dtype) + sw[:, None] * K * sw[None, :]
    return pi, sw, cholesky(B)


def laplace_mode(
    K: jax.Array,
    y: jax.Array,
    *,
    f_start: jax.Array | None = None,
    max_iter: int = NEWTON_MAX_ITER,
    tol: float = NEWTON_TOL,
) -> LaplaceMode:
    """Newton's method for the mode (R&W Algorithm 3.1), from :math:`f = 0` or ``f_start``.

    Each step solves with :math:`B = I + W^{1/2}KW^{1/2}` (eigenvalues in
    :math:`[1, 1 + n\\max K/4]`, so its Cholesky factor is safe where :math:`K`'s is not); a
    step that lowers the objective :math:`\\Psi(a) = \\log p(y\\mid Ka) - \\tfrac12 a^\\top Ka` is
    halved (the logistic likelihood is log-concave, so the damped iteration converges).

    The objective is strictly concave in :math:`f`, so the mode does not depend on the start:
    :math:`f = 0` (R&W's start) or the mode of a nearby covariance (fewer steps).

    Parameters
    ----------
    K : (n, n) prior covariance of the latent function (positive definite).
    y : (n,) labels in {0, 1}.
    f_start : (n,) where the search starts, default zeros.
    """
    y = y.astype(K.dtype)

    def psi(a, f):
        return _loglik(y, f) - 0.5 * jnp.dot(a, f)

    def step(state):
        a, f, value, _, i = state
        pi, sw, L = _b_factor(K, f)
        b = pi * (1.0 - pi) * f + (y - pi)
        c = jsl.solve_triangular(L, sw * (K @ b), lower=True)
        a_new = b - sw * jsl.solve_triangular(L.T, c, lower=False)
        f_new = K @ a_new
        v_new = psi(a_new, f_new)
        worse = ~(v_new >= value)  # also when v_new is NaN
        a_new = jnp.where(worse, 0.5 * (a + a_new), a_new)
        f_new = jnp.where(worse, 0.5 * (f + f_new), f_new)
        v_new = jnp.where(worse, psi(a_new, f_new), v_new)
        return a_new, f_new, v_new, jnp.abs(v_new - value), i + 1

    def cond(state):
        _, _, value, change, i = state
        return (i < max_iter) & (change > tol) & (jnp.isfinite(value) | (i == 0))

    a, f, value, change, i = jax.lax.while_loop(cond, step, _start(f_start, y, K.dtype, psi))
    _, sw, L = _b_factor(K, f)
    log_marginal = value - jnp.sum(jnp.log(jnp.diagonal(L)))
    converged = (change <= tol) & jnp.isfinite(log_marginal)
    return LaplaceMode(f, a, sw, L, log_marginal, converged, i)


def _start(f_start, y, dtype, psi):
    """Newton's first state ``(a, f, objective, change, iterations)``.

    From :math:`f = 0`: :math:`a = 0` and its objective. From ``f_start``: :math:`a` is
    unknown until the first step, so the objective starts at :math:`-\\infty` (the first step
    is taken whole).
    """
    zero = jnp.zeros(y.shape, dtype)
    inf = jnp.asarray(jnp.inf, dtype)
    if f_start is None:
        return zero, zero, psi(zero, zero), inf, 0
    return zero, jnp.asarray(f_start, dtype), -inf, inf, 0


def mode_from_f(K: jax.Array, y: jax.Array, f: jax.Array) -> LaplaceMode:
    r"""Return the :class:`LaplaceMode` factors at a stored mode ``f`` (no Newton iterations).

    They are :math:`\hat a = y - \sigma(\hat f)` and the Cholesky factor of :math:`B`.
    """
    y = y.astype(K.dtype)
    pi, sw, L = _b_factor(K, f)
    a = y - pi
    log_marginal = _loglik(y, f) - 0.5 * jnp.dot(a, f) - jnp.sum(jnp.log(jnp.diagonal(L)))
    return LaplaceMode(f, a, sw, L, log_marginal, jnp.asarray(True), jnp.asarray(0))


def laplace_log_marginal(K: jax.Array, y: jax.Array, f_start: jax.Array | None = None) -> jax.Array:
    """Laplace approximation of :math:`\\log p(y \\mid K)` for Bernoulli-logit labels.

    ``nan`` when Newton's method did not converge (NUTS then rejects the step, and the mode
    search of :func:`bayeskern.inference.find_map` steps back). The gradient is exact for the
    approximation, by implicit differentiation of the mode (see the module docstring).

    Parameters
    ----------
    K : (n, n) prior covariance of the latent function.
    y : (n,) labels in {0, 1}.
    f_start : (n,) where Newton's method starts (:func:`laplace_mode`); the value and the
        gradient do not depend on it beyond the iteration's tolerance.
    """
    return _laplace_log_marginal(K, y, f_start)


def implicit_log_marginal(mode_fn, bwd):
    """Return ``(K, y, f_start) -> log marginal`` with the gradient ``bwd`` of the mode.

    The value is the Laplace log marginal of ``mode_fn(K, y, f_start=f_start)``'s mode,
    ``nan`` when Newton's method did not converge; ``bwd(res, g)`` with ``res = (K, mode)``
    returns the cotangents of ``(K, y, f_start)`` by implicit differentiation of the mode
    (Rasmussen & Williams 2006, section 5.5.1). One wrapper for the binary and the softmax
    likelihoods.
    """

    def fwd(K, y, f_start):
        mode = mode_fn(K, y, f_start=f_start)
        return jnp.where(mode.converged, mode.log_marginal, jnp.nan), (K, mode)

    log_marginal = jax.custom_vjp(lambda K, y, f_start: fwd(K, y, f_start)[0])
    log_marginal.defvjp(fwd, bwd)
    return log_marginal


def _bwd(res, g):
    K, mode = res
    sw, a = mode.sqrt_w, mode.a
    B_inv = cholesky_inverse(mode.chol_b)
    R = sw[:, None] * B_inv * sw[None, :]
    pi = jax.nn.sigmoid(mode.f)
    # d(-log|B|/2)/d f_hat = diag(Sigma) * d3 / 2, Sigma_ii = (1 - B^-1_ii) / W_ii (module doc)
    s2 = -0.5 * (1.0 - 2.0 * pi) * (1.0 - jnp.diagonal(B_inv))
    u = s2 - R @ (K @ s2)  # (I - R K) s2
    ua = jnp.outer(u, a)
    W = 0.5 * jnp.outer(a, a) - 0.5 * R + 0.5 * (ua + ua.T)
    return g * W, None, None


_laplace_log_marginal = implicit_log_marginal(laplace_mode, _bwd)


def laplace_predict(mode: LaplaceMode, K_cross: jax.Array, k_diag: jax.Array):
    """Latent predictive mean and variance at new points (R&W Algorithm 3.2).

    .. math:: \\mu_* = k_*^\\top \\hat a,\\qquad
              v_* = k_{**} - \\|L^{-1} W^{1/2} k_*\\|^2

    Parameters
    ----------
    mode : the :class:`LaplaceMode` of the training data.
    K_cross : (n, m) covariances between training and new points.
    k_diag : (m,) prior variances at the new points.
    """
    v = jsl.solve_triangular(mode.chol_b, mode.sqrt_w[:, None] * K_cross, lower=True)
    return K_cross.T @ mode.a, jnp.maximum(k_diag - jnp.sum(v * v, axis=0), 0.0)


def probit_logit(mean, var):
    r"""Return :math:`\mu/\sqrt{1 + \pi v/8}`, MacKay's probit approximation of the logit.

    :math:`\int\sigma(f)\,N(f\mid\mu, v)\,df \approx \sigma\big(\mu/\sqrt{1 + \pi v/8}\big)`
    (MacKay 1992, "The evidence framework applied to classification networks"; Rasmussen &
    Williams 2006, section 3.4).
    """
    return mean / jnp.sqrt(1.0 + jnp.pi * var / 8.0)


def laplace_loo_and_marginals(mode: LaplaceMode, K: jax.Array, y: jax.Array):
    r"""Leave-one-out log probabilities and the latent marginals at the training inputs.

    The Laplace posterior of :math:`f` is :math:`N(\hat f, \Sigma)`,
    :math:`\Sigma = K - KRK` with :math:`\mathrm{diag}(KRK)` the column sums of
    :math:`(L^{-1}W^{1/2}K)^2`, :math:`LL^\top = B` (R&W Algorithm 3.2 at the training
    inputs). The approximation replaces each likelihood term by a Gaussian site of precision
    :math:`W_{ii}`; removing site :math:`i` from the marginal :math:`N(\hat f_i,
    \Sigma_{ii})` gives the cavity :math:`N(\mu_{-i}, v_{-i})` with
    :math:`v_{-i}^{-1} = \Sigma_{ii}^{-1} - W_{ii}`,
    :math:`\mu_{-i} = v_{-i}(\hat f_i/\Sigma_{ii} - W_{ii}\hat f_i - \nabla_i\log p)`
    (Vehtari et al. 2016, JMLR 17(103), "Bayesian leave-one-out cross-validation
    approximations for Gaussian latent variable models", LA-LOO), and the logistic
    likelihood is averaged over it with MacKay's probit approximation. These are the
    pointwise terms PSIS-LOO needs for this non-factorizing marginal likelihood.

    Returns
    -------
    loo : (n,) :math:`\log p(y_i \mid y_{-i}, \theta)`.
    mean, var : (n,) :math:`\hat f_i` and :math:`\Sigma_{ii}`: the latent predictive at the
        training inputs (with ``K``'s jitter in the prior variance), from the same solve.
    """
    sw = mode.sqrt_w
    w = sw * sw
    v = jsl.solve_triangular(mode.chol_b, sw[:, None] * K, lower=True)
    sigma = jnp.maximum(jnp.diagonal(K) - jnp.sum(v * v, axis=0), 1e-12)
    var = 1.0 / jnp.maximum(1.0 / sigma - w, 1e-12)
    mean = var * (mode.f / sigma - w * mode.f - mode.a)
    z = probit_logit(mean, var)
    loo = jnp.where(y > 0, jax.nn.log_sigmoid(z), jax.nn.log_sigmoid(-z))
    return loo, mode.f, sigma
