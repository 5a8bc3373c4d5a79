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

Multi-class (softmax) likelihood.

:math:`C` independent latent functions :math:`f_c \sim N(0, K_c)`, labels
:math:`p(y_i = c \mid f) = \pi_{ic} = \exp f_{ic} / \sum_{c'} \exp f_{ic'}` (Williams & Barber
1998; Rasmussen & Williams 2006, section 3.5). ``f`` and ``K`` are stored class-major:
``f[c]`` is the ``(n,)`` latent function of class ``c``, ``K[c]`` its ``(n, n)`` covariance
(the block-diagonal prior). The negative Hessian of the log likelihood is
:math:`W = D - \Pi\Pi^\top`, :math:`D = \mathrm{diag}(\pi)`, :math:`\Pi` the :math:`C` blocks
:math:`\mathrm{diag}(\pi_c)` stacked; per class
:math:`E_c = D_c^{1/2}(I + D_c^{1/2}K_cD_c^{1/2})^{-1}D_c^{1/2}` and
:math:`MM^\top = \sum_c E_c` (R&W Algorithm 3.3). By the matrix determinant lemma,
:math:`|I + KW| = \prod_c |I + D_c^{1/2}K_cD_c^{1/2}|\,|\sum_c E_c|`, so

.. math:: \tfrac12\log|B| = \sum_c\sum_i \log (L_c)_{ii} + \sum_i \log M_{ii}

(the second sum is the determinant lemma's factor :math:`|\sum_c E_c| = |M|^2`).
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
    "SoftmaxMode",
    "softmax_laplace_mode",
    "softmax_mode_from_f",
    "softmax_log_marginal",
    "softmax_predict",
    "softmax_expectation",
    "softmax_loo_logpdf",
    "SOFTMAX_MC_DRAWS",
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


@jax.custom_vjp
def _laplace_log_marginal(K, y, f_start):
    return _fwd(K, y, f_start)[0]


def _fwd(K, y, f_start):
    mode = laplace_mode(K, y, f_start=f_start)
    value = jnp.where(mode.converged, mode.log_marginal, jnp.nan)
    return value, (K, mode)


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


_laplace_log_marginal.defvjp(_fwd, _bwd)


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


# ----------------------------------------------------------------------------- multi-class


class SoftmaxMode(NamedTuple):
    """The mode of :math:`\\log p(y\\mid f) - \\tfrac12 \\sum_c f_c^\\top K_c^{-1} f_c`.

    Attributes
    ----------
    f, a : (C, n) the mode :math:`\\hat f` and :math:`\\hat a = K^{-1}\\hat f = y - \\hat\\pi`.
    pi : (C, n) the class probabilities :math:`\\hat\\pi` at the mode.
    E : (C, n, n) :math:`E_c` of R&W Algorithm 3.3.
    chol_m : (n, n) lower Cholesky factor :math:`M` of :math:`\\sum_c E_c`.
    log_marginal : the approximate :math:`\\log q(y\\mid\\theta)`.
    converged : ``True`` when Newton's method converged within :data:`NEWTON_MAX_ITER`.
    n_iter : Newton iterations used.
    """

    f: jax.Array
    a: jax.Array
    pi: jax.Array
    E: jax.Array
    chol_m: jax.Array
    log_marginal: jax.Array
    converged: jax.Array
    n_iter: jax.Array


def _softmax_factors(K, f):
    """Return :math:`\\pi`, :math:`E_c`, :math:`M` and :math:`\\tfrac12\\log|B|` at ``f``."""
    log_pi = jax.nn.log_softmax(f, axis=0)
    sd = jnp.exp(0.5 * log_pi)  # D^{1/2}, with a finite derivative where pi underflows
    eye = jnp.eye(K.shape[-1], dtype=K.dtype)

    def per_class(args):
        Kc, sdc = args
        L = cholesky(eye + sdc[:, None] * Kc * sdc[None, :])
        return sdc[:, None] * cholesky_inverse(L) * sdc[None, :], jnp.sum(jnp.log(jnp.diagonal(L)))

    # one class after another (lax.map), not C independent factorizations: XLA:CPU runs
    # independent ones at once, and each holds a thread of the pool that jaxlib 0.10's LAPACK
    # kernels wait on (the hang that bayeskern.estimators.gp.GPClassifier._laplace_chains avoids)
    E, half_logdets = jax.lax.map(per_class, (K, sd))
    M = cholesky(jnp.sum(E, axis=0))
    half_logdet = jnp.sum(half_logdets) + jnp.sum(jnp.log(jnp.diagonal(M)))
    return jnp.exp(log_pi), E, M, half_logdet


def _solve_i_wk(E, M, K, v):
    """Return :math:`(I + WK)^{-1}v` for ``v`` of shape (C, n) (R&W Algorithm 3.3, l. 12-13)."""
    c = jnp.einsum("cij,cj->ci", E, jnp.einsum("cij,cj->ci", K, v))
    r = jsl.cho_solve((M, True), jnp.sum(c, axis=0))
    return v - c + jnp.einsum("cij,j->ci", E, r)


def _softmax_psi(Y, a, f):
    return -0.5 * jnp.sum(a * f) + jnp.sum(Y * f) - jnp.sum(jax.scipy.special.logsumexp(f, axis=0))


def softmax_laplace_mode(
    K: jax.Array,
    Y: jax.Array,
    *,
    f_start: jax.Array | None = None,
    max_iter: int = NEWTON_MAX_ITER,
    tol: float = NEWTON_TOL,
) -> SoftmaxMode:
    """Newton's method for the softmax mode (R&W Algorithm 3.3), from :math:`f = 0` or ``f_start``.

    Each step is :math:`a = (I + WK)^{-1} b`, :math:`b = Wf + y - \\pi`, :math:`f = Ka`, with
    the block structure: :math:`C` Cholesky factors of :math:`I + D_c^{1/2}K_cD_c^{1/2}` and
    one of :math:`\\sum_c E_c`, all :math:`n\\times n`. A step that lowers the objective
    :math:`\\Psi = y^\\top f - \\sum_i\\log\\sum_c e^{f_{ic}} - \\tfrac12 a^\\top f` is halved
    once (no line search: convergence within :data:`NEWTON_MAX_ITER` steps is checked, not
    assumed, and a search that does not converge gives a ``nan`` marginal). :math:`\\Psi` is
    strictly concave in :math:`f`, so the mode does not depend on the start: :math:`f = 0`
    (R&W's start) or the mode of a nearby covariance (fewer steps).

    Parameters
    ----------
    K : (C, n, n) prior covariance of each class's latent function (positive definite).
    Y : (C, n) one-hot labels, ``Y[c, i] = 1`` when point ``i`` is of class ``c``.
    f_start : (C, n) where the search starts, default zeros.
    """
    Y = Y.astype(K.dtype)

    def step(state):
        a, f, value, _, i = state
        pi, E, M, _ = _softmax_factors(K, f)
        b = pi * f - pi * jnp.sum(pi * f, axis=0) + Y - pi  # (D - Pi Pi^T) f + y - pi
        a_new = _solve_i_wk(E, M, K, b)
        f_new = jnp.einsum("cij,cj->ci", K, a_new)
        v_new = _softmax_psi(Y, a_new, f_new)
        worse = ~(v_new >= value)  # also when v_new is NaN
        a_new = jnp.where(worse, 0.5 * (a + a_new), a_new)
        f_new = jnp.where(worse, 0.5 * (f + f_new), f_new)
        v_new = jnp.where(worse, _softmax_psi(Y, a_new, f_new), v_new)
        return a_new, f_new, v_new, jnp.abs(v_new - value), i + 1

    def cond(state):
        _, _, value, change, i = state
        return (i < max_iter) & (change > tol) & (jnp.isfinite(value) | (i == 0))

    a, f, value, change, i = jax.lax.while_loop(
        cond, step, _start(f_start, Y, K.dtype, lambda a, f: _softmax_psi(Y, a, f))
    )
    return _softmax_at(K, Y, f, a, value, (change <= tol), i)


def _softmax_at(K, Y, f, a, value, converged, n_iter):
    pi, E, M, half_logdet = _softmax_factors(K, f)
    log_marginal = value - half_logdet
    return SoftmaxMode(f, a, pi, E, M, log_marginal, converged & jnp.isfinite(log_marginal), n_iter)


def softmax_mode_from_f(K: jax.Array, Y: jax.Array, f: jax.Array) -> SoftmaxMode:
    """Return the :class:`SoftmaxMode` factors at a stored mode ``f`` (no Newton iterations).

    At the mode :math:`\\hat a = y - \\pi(\\hat f)` (R&W eq. 3.39).
    """
    Y = Y.astype(K.dtype)
    a = Y - jax.nn.softmax(f, axis=0)
    return _softmax_at(K, Y, f, a, _softmax_psi(Y, a, f), jnp.asarray(True), jnp.asarray(0))


def softmax_log_marginal(K: jax.Array, Y: jax.Array, f_start: jax.Array | None = None) -> jax.Array:
    r"""Laplace approximation of :math:`\log p(y \mid K)` for softmax (multi-class) labels.

    .. math:: \log q(y\mid\theta) = -\tfrac12\hat a^\top\hat f + y^\top\hat f
              - \sum_i\log\sum_c e^{\hat f_{ic}} - \tfrac12\log|I + KW|

    (Rasmussen & Williams 2006, section 3.5, Algorithm 3.3; Williams & Barber 1998). ``nan``
    when Newton's method did not converge. The gradient is exact for the approximation, by
    implicit differentiation of the mode (R&W section 5.5.2): with
    :math:`h(K, f) = -\tfrac12\log|I + KW(f)|`,

    .. math:: \frac{\partial\log q}{\partial K_c} = \tfrac12\hat a_c\hat a_c^\top
              + \frac{\partial h}{\partial K_c}\Big|_{\hat f} + u_c\hat a_c^\top,\qquad
              u = (I + WK)^{-1}\frac{\partial h}{\partial f}\Big|_{\hat f},

    the last term being the change of the mode :math:`\partial\hat f = (I + KW)^{-1}\partial K
    \hat a`; the partial derivatives of :math:`h` (a sum of Cholesky log-diagonals) are
    taken by reverse-mode autodiff at the fixed mode.

    Parameters
    ----------
    K : (C, n, n) prior covariance of each class's latent function.
    Y : (C, n) one-hot labels.
    f_start : (C, n) where Newton's method starts (:func:`softmax_laplace_mode`); the value
        and the gradient do not depend on it beyond the iteration's tolerance.
    """
    return _softmax_log_marginal(K, Y, f_start)


@jax.custom_vjp
def _softmax_log_marginal(K, Y, f_start):
    return _softmax_fwd(K, Y, f_start)[0]


def _softmax_fwd(K, Y, f_start):
    mode = softmax_laplace_mode(K, Y, f_start=f_start)
    value = jnp.where(mode.converged, mode.log_marginal, jnp.nan)
    return value, (K, mode)


def _softmax_bwd(res, g):
    K, mode = res
    a = mode.a
    # dh/dK_c at the fixed mode, h = -1/2 log|I + KW|: -1/2 [(K + W^-1)^-1]_cc
    # = -1/2 (E_c - E_c (sum_c E_c)^-1 E_c) (R&W eq. 3.41-3.42)
    ME = jnp.moveaxis(
        jsl.solve_triangular(mode.chol_m, jnp.concatenate(mode.E, axis=1), lower=True).reshape(
            K.shape[1], *K.shape[:2]
        ),
        1,
        0,
    )
    dK = -0.5 * (mode.E - jnp.einsum("cji,cjk->cik", ME, ME))  # ME_c = M^-1 E_c
    # dh/df at fixed K: dh = -1/2 sum_i tr(S_i dW_i), S_i the latent posterior covariance
    # (C x C) at training point i and W_i = diag(pi_i) - pi_i pi_i^T
    _, S = softmax_predict(mode, K, jnp.diagonal(K, axis1=1, axis2=2))

    def h_of_f(f):
        pi = jax.nn.softmax(f, axis=0).T  # (n, C)
        tr_sw = jnp.einsum("icc,ic->", S, pi) - jnp.einsum("icd,ic,id->", S, pi, pi)
        return -0.5 * tr_sw

    u = _solve_i_wk(mode.E, mode.chol_m, K, jax.grad(h_of_f)(mode.f))
    ua = u[:, :, None] * a[:, None, :]
    G = 0.5 * a[:, :, None] * a[:, None, :] + dK + 0.5 * (ua + jnp.swapaxes(ua, 1, 2))
    return g * G, None, None


_softmax_log_marginal.defvjp(_softmax_fwd, _softmax_bwd)


def softmax_predict(mode: SoftmaxMode, K_cross: jax.Array, k_diag: jax.Array):
    r"""Latent predictive mean and covariance at new points (R&W Algorithm 3.4).

    .. math:: \mu_{*c} = k_{*c}^\top(y_c - \hat\pi_c),\qquad
              \Sigma_{*cc'} = \delta_{cc'}\big(k_c(x_*, x_*) - k_{*c}^\top E_c k_{*c}\big)
              + g_c^\top g_{c'},\quad g_c = M^{-1}E_c k_{*c}

    Parameters
    ----------
    mode : the :class:`SoftmaxMode` of the training data.
    K_cross : (C, n, m) covariances between training and new points, per class.
    k_diag : (C, m) prior variances at the new points.

    Returns
    -------
    mean : (m, C) and cov : (m, C, C).
    """
    C, n, m = K_cross.shape
    mean = jnp.einsum("cnm,cn->mc", K_cross, mode.a)
    b = jnp.einsum("cij,cjm->cim", mode.E, K_cross)  # E_c k_*c
    g = jsl.solve_triangular(mode.chol_m, jnp.moveaxis(b, 0, 1).reshape(n, C * m), lower=True)
    g = g.reshape(n, C, m)
    var = jnp.maximum(k_diag - jnp.sum(b * K_cross, axis=1), 0.0)  # (C, m)
    cov = jnp.einsum("ncm,ndm->mcd", g, g) + var.T[:, :, None] * jnp.eye(C, dtype=mean.dtype)
    return mean, cov


#: Monte Carlo draws of the latent per point for the softmax-Gaussian average
SOFTMAX_MC_DRAWS = 1000


def softmax_expectation(
    mean: jax.Array, cov: jax.Array, key: jax.Array, n_mc: int = SOFTMAX_MC_DRAWS
) -> jax.Array:
    r"""Monte Carlo :math:`E[\mathrm{softmax}(f_*)]`, :math:`f_* \sim N(\mu_*, \Sigma_*)`.

    R&W Algorithm 3.4, lines 10-13 (Rasmussen & Williams 2006): the average of the softmax
    over ``n_mc`` draws :math:`f_* = \mu_* + Lz`, :math:`z \sim N(0, I_C)`,
    :math:`LL^\top = \Sigma_*`, the same standard normals for every point (``key`` fixed:
    the same numbers at every call).

    Parameters
    ----------
    mean : (m, C), cov : (m, C, C) from :func:`softmax_predict`.
    key : JAX random key.

    Returns
    -------
    (m, C) class probabilities, each row summing to one.
    """
    z = jax.random.normal(key, (n_mc, mean.shape[-1]), mean.dtype)
    f = mean[:, None, :] + jnp.einsum("mcr,sr->msc", _small_cholesky(cov), z)
    return jnp.mean(jax.nn.softmax(f, axis=-1), axis=1)


def _small_cholesky(A):
    """Lower Cholesky factors of a stack (..., C, C) of small matrices, elementwise ops only.

    (Batched LAPACK calls inside the per-draw loops hang XLA:CPU.)
    """
    C = A.shape[-1]
    # a floor on the pivots: a singular (semi-definite) covariance gets a zero column
    floor = 1e-12 * (1.0 + jnp.max(jnp.diagonal(A, axis1=-2, axis2=-1), axis=-1))
    L = [[None] * C for _ in range(C)]
    for j in range(C):
        s = A[..., j, j] - sum((L[j][k] ** 2 for k in range(j)), 0.0)
        L[j][j] = jnp.sqrt(jnp.maximum(s, floor))
        for i in range(j + 1, C):
            s = A[..., i, j] - sum((L[i][k] * L[j][k] for k in range(j)), 0.0)
            L[i][j] = s / L[j][j]
    zero = jnp.zeros_like(A[..., 0, 0])
    return jnp.stack(
        [jnp.stack([L[i][j] if j <= i else zero for j in range(C)], -1) for i in range(C)], -2
    )


def _small_inverse(L):
    """:math:`(LL^\top)^{-1}` from a stack of small lower Cholesky factors (elementwise ops)."""
    C = L.shape[-1]
    cols = []
    for j in range(C):  # forward substitution L x = e_j
        x = []
        for i in range(C):
            s = (1.0 if i == j else 0.0) - sum((L[..., i, k] * x[k] for k in range(i)), 0.0)
            x.append(s / L[..., i, i])
        cols.append(jnp.stack(x, -1))
    Linv = jnp.stack(cols, -1)  # (..., C, C), column j = L^{-1} e_j
    return jnp.einsum("...ki,...kj->...ij", Linv, Linv)


def softmax_loo_logpdf(
    mode: SoftmaxMode, K: jax.Array, Y: jax.Array, key: jax.Array, n_mc: int = SOFTMAX_MC_DRAWS
) -> jax.Array:
    r"""Leave-one-out predictive log probabilities for the softmax Laplace approximation.

    The multi-class form of LA-LOO (Vehtari et al. 2016, JMLR 17(103)): the Laplace
    approximation gives point :math:`i` a Gaussian site of precision
    :math:`W_i = \mathrm{diag}(\hat\pi_i) - \hat\pi_i\hat\pi_i^\top` (:math:`C\times C`);
    removing it from the marginal :math:`N(\hat f_i, \Sigma_i)` (R&W Algorithm 3.4 at the
    training input) gives the cavity of precision :math:`\Lambda = \Sigma_i^{-1} - W_i` and
    mean :math:`\mu_{-i} = \Lambda^{-1}(\Lambda\hat f_i - \hat a_i)`, over which
    :math:`\log E[\pi_{y_i}]` is averaged by Monte Carlo (:func:`softmax_expectation`).

    Parameters
    ----------
    mode : the :class:`SoftmaxMode` of the training data.
    K : (C, n, n) prior covariances, Y : (C, n) one-hot labels.
    key : JAX random key of the Monte Carlo average.
    """
    _, cov = softmax_predict(mode, K, jnp.diagonal(K, axis1=1, axis2=2))
    C = K.shape[0]
    pi, f, a = mode.pi.T, mode.f.T, mode.a.T  # (n, C)
    W = pi[:, :, None] * jnp.eye(C, dtype=K.dtype) - pi[:, :, None] * pi[:, None, :]
    lam = _small_inverse(_small_cholesky(cov)) - W
    cav = _small_inverse(_small_cholesky(lam))
    mean = f - jnp.einsum("icd,id->ic", cav, a)
    p = softmax_expectation(mean, cav, key, n_mc)
    return jnp.log(jnp.sum(p * Y.T, axis=1))
