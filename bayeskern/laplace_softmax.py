r"""The Laplace approximation of a multi-class GP classifier (softmax likelihood), embedded in NUTS.

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

The binary (Bernoulli-logit) case, the Newton iteration's settings and the adjoint gradient
this module follows are in :mod:`bayeskern.laplace`.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import jax.scipy.linalg as jsl

from bayeskern.laplace import NEWTON_MAX_ITER, NEWTON_TOL, _start, implicit_log_marginal
from bayeskern.linalg import cholesky, cholesky_inverse

__all__ = [
    "SoftmaxMode",
    "softmax_laplace_mode",
    "softmax_mode_from_f",
    "softmax_log_marginal",
    "softmax_predict",
    "softmax_expectation",
    "softmax_loo_logpdf",
    "SOFTMAX_MC_DRAWS",
]


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


_softmax_log_marginal = implicit_log_marginal(softmax_laplace_mode, _softmax_bwd)


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
