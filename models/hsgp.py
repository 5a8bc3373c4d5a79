r"""GP regression on a Hilbert-space basis, weights integrated out, as a plain NumPyro function.

With the fixed features :math:`\Phi` (:class:`bayeskern.hsgp.HSGPDesign`, :math:`N \times M`)
the kernel becomes :math:`K \approx \Phi S \Phi^\top`, :math:`S = \mathrm{diag}(s(\theta))`
(Solin & Särkkä 2020; Riutort-Mayol et al. 2023), and

.. math:: y = \Phi w + \varepsilon,\quad w \sim N(0, S),\quad \varepsilon \sim N(0, \sigma^2 I)

has, with the weights integrated out, the log marginal likelihood

.. math:: \log p(y) = -\tfrac12\Big[\frac{y^\top y - b^\top A^{-1} b}{\sigma^2} + \log|B|
          + N\log\sigma^2 + N\log 2\pi\Big],\quad
          A = \Phi^\top\Phi + \sigma^2 S^{-1},\ b = \Phi^\top y,

computed in the scaled form :math:`B = I + S^{1/2}\Phi^\top\Phi S^{1/2}/\sigma^2 = LL^\top`
(eigenvalues at least one, so no jitter, and :math:`s_i \to 0` is harmless):
:math:`b^\top A^{-1}b/\sigma^2 = \lVert L^{-1}S^{1/2}b\rVert^2/\sigma^4`. The data enter only
through :math:`(\Phi^\top\Phi, \Phi^\top y, y^\top y, N)`
(:func:`bayeskern.blr.scan_feature_stats`, computed once per fit), so each log-density
evaluation is one :math:`M \times M` Cholesky factorization, whatever :math:`N`.

The priors are those of :func:`models.gp.gp_regression` (same sample sites), so the two models
differ only in :math:`K`.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import jax.scipy.linalg as jsl
import numpyro
import numpyro.distributions as dist
from bayeskern.models.gp_kernel import (
    BIAS_SD,
    JITTER,
    SoftplusHalfNormal,
    sample_kernel_hyperparameters,
    theta_from_draw,
)

from bayeskern.blr import Stats
from bayeskern.hsgp import HSGPDesign
from bayeskern.kernels.base import Kernel

__all__ = [
    "hsgp_regression",
    "collapsed_log_marginal",
    "hsgp_factors",
    "hsgp_predict",
    "hsgp_loo",
    "hsgp_loo_and_fitted",
    "collapsed_factors",
    "VARIANCE_FLOOR",
    "hsgp_classification",
    "classification_variances",
    "gaussian_evidence",
    "scaled_factor",
]

#: floor of the weights' prior variances: a spectral density that underflows to zero at high
#: frequencies would give :math:`\sqrt{s}` an infinite derivative (NaN gradients)
VARIANCE_FLOOR = 1e-200


def _scaled(stats: Stats, s, noise_var):
    """Return ``(L, sqrt(s))``, :math:`LL^\\top = I + S^{1/2}\\Phi^\\top\\Phi S^{1/2}/\\sigma^2`."""
    r = jnp.sqrt(jnp.maximum(s, VARIANCE_FLOOR))
    B = jnp.eye(r.shape[0], dtype=r.dtype) + (r[:, None] * r[None, :]) * stats.PtP / noise_var
    return jnp.linalg.cholesky(B), r


def collapsed_log_marginal(stats: Stats, s, noise_var) -> jax.Array:
    r"""Return :math:`\log N(y \mid 0, \Phi\,\mathrm{diag}(s)\,\Phi^\top + \sigma^2 I)`.

    From the sufficient statistics alone (the module docstring's formula), with a hand-written
    gradient (:func:`_collapsed`) that costs one triangular inversion besides the Cholesky
    factorization.

    Parameters
    ----------
    stats : Stats
        :math:`(\Phi^\top\Phi, \Phi^\top y, y^\top y, N)`.
    s : (M,) array
        Prior variances of the weights.
    noise_var : scalar
        :math:`\sigma^2`.
    """
    r = jnp.sqrt(jnp.maximum(s, VARIANCE_FLOOR))
    t = jnp.asarray(noise_var, r.dtype)
    return _collapsed(
        r, t, stats.PtP, stats.Pty, jnp.asarray(stats.yty, r.dtype), jnp.asarray(stats.n, r.dtype)
    )


@jax.custom_vjp
def _collapsed(r, t, G, b, yty, n):
    r"""Return the collapsed log marginal likelihood at :math:`r = \sqrt{s}`, :math:`t = \sigma^2`.

    Differentiated by hand; the statistics get zero cotangents.

    With :math:`B = I + RGR/t = LL^\top` (:math:`R = \mathrm{diag}(r)`, :math:`G =
    \Phi^\top\Phi`), :math:`C = B^{-1}`, :math:`p = r \circ b` and :math:`z = Cp`:

    .. math:: \frac{\partial \log|B|}{\partial r_i} = \frac{2}{t}\sum_j C_{ij}G_{ij}r_j
              = \frac{2(1 - C_{ii})}{r_i},\qquad
              \frac{\partial\, p^\top C p}{\partial r_i} = 2z_i b_i
              - \frac{2}{t} z_i (G(r\circ z))_i,

    .. math:: \frac{\partial \log|B|}{\partial t} = -\frac{M - \mathrm{tr}\,C}{t},\qquad
              \frac{\partial\, p^\top C p}{\partial t} = \frac{z^\top(B - I)z}{t}

    (the first equality uses :math:`\sum_j C_{ij}B_{ij} = (CB)_{ii} = 1`, :math:`B`
    symmetric), so the gradient needs only :math:`\mathrm{diag}(C)`, the column sums of
    squares of :math:`L^{-1}`, where reverse-mode differentiation of the Cholesky factor
    costs several :math:`M \times M` triangular solves and products. Where :math:`r_i` is
    tiny, :math:`1 - C_{ii}` is rounding error divided by :math:`r_i`; it reaches the
    hyper-parameters multiplied by :math:`\partial r_i/\partial\theta \propto r_i`.
    """
    return _collapsed_fwd(r, t, G, b, yty, n)[0]


def _collapsed_fwd(r, t, G, b, yty, n):
    B = jnp.eye(r.shape[0], dtype=r.dtype) + (r[:, None] * r[None, :]) * G / t
    L = jnp.linalg.cholesky(B)
    u = jsl.solve_triangular(L, r * b, lower=True)  # p'Cp = u'u
    pCp = u @ u
    logdet = 2.0 * jnp.sum(jnp.log(jnp.diagonal(L)))
    value = -0.5 * (yty / t - pCp / t**2 + logdet + n * jnp.log(2 * jnp.pi * t))
    return value, (r, t, G, b, yty, n, L, u, pCp)


def _collapsed_bwd(res, g):
    r, t, G, b, yty, n, L, u, pCp = res
    M = r.shape[0]
    L_inv = jsl.solve_triangular(L, jnp.eye(M, dtype=r.dtype), lower=True)
    c = jnp.sum(L_inv * L_inv, axis=0)  # diag(B^-1)
    z = jsl.solve_triangular(L, u, lower=True, trans=1)  # B^-1 p
    d_logdet_r = 2.0 * (1.0 - c) / r
    rz = r * z
    G_rz = G @ rz
    d_pCp_r = 2.0 * z * b - 2.0 * z * G_rz / t
    d_logdet_t = -(M - jnp.sum(c)) / t
    d_pCp_t = rz @ G_rz / t**2  # z'(B - I)z / t
    # value = -1/2 [yty/t - pCp/t^2 + logdet + n log(2 pi t)]
    g_r = -0.5 * g * (-d_pCp_r / t**2 + d_logdet_r)
    g_t = -0.5 * g * (-yty / t**2 - d_pCp_t / t**2 + 2.0 * pCp / t**3 + d_logdet_t + n / t)
    zero = jnp.zeros_like
    return g_r, g_t, zero(G), zero(b), zero(yty), zero(n)


_collapsed.defvjp(_collapsed_fwd, _collapsed_bwd)


def hsgp_regression(
    stats: Stats | None = None, X=None, y=None, *, kernel: Kernel, design: HSGPDesign, x_scale
):
    """GP regression on a Hilbert-space basis with the weights integrated out.

    Parameters
    ----------
    stats : Stats or None
        Sufficient statistics of the standardized training data on ``design``'s features.
        Given: the collapsed log marginal likelihood (:func:`collapsed_log_marginal`) enters
        as the factor ``y``.
    X : (n, d) array or None
        Without ``stats``: standardized inputs at which to draw ``y`` from the model (prior
        predictive checks), :math:`y = \\Phi(X)w + \\varepsilon`.
    y : ignored
        Accepted for the estimators' calling convention; the data are in ``stats``.
    kernel : a named, fitted kernel (the one ``design`` was built for).
    design : HSGPDesign
    x_scale : (d,) column scales of the raw inputs (translates fixed length values).
    """
    theta = sample_kernel_hyperparameters(kernel, x_scale)
    n_terms = len(kernel.terms())
    amplitude = numpyro.sample("amplitude", dist.HalfNormal(1.0).expand([n_terms]).to_event(1))
    noise = numpyro.sample("noise", dist.HalfNormal(1.0))
    s = design.prior_variances(kernel, theta, amplitude)
    noise_var = noise**2 + JITTER
    if stats is not None:
        numpyro.factor("y", collapsed_log_marginal(stats, s, noise_var))
        return
    if X is None:
        raise ValueError("hsgp_regression needs stats (fitting) or X (prior predictive)")
    w = numpyro.sample("w", dist.Normal(0.0, 1.0).expand([design.size]).to_event(1))
    f = design.features(X) @ (jnp.sqrt(s) * w)
    numpyro.sample("y", dist.Normal(f, jnp.sqrt(noise_var)).to_event(1))


def hsgp_factors(kernel: Kernel, design: HSGPDesign, draw: dict, stats: Stats, x_scale):
    r"""Return the per-draw factors of prediction: ``(R, mean weights, noise variance)``.

    The weights' posterior given the draw's hyper-parameters is
    :math:`N(\bar w, \Sigma_w)`, :math:`\Sigma_w = \sigma^2 A^{-1} = R^\top R` with
    :math:`R = L^{-1}S^{1/2}` (:math:`LL^\top = B`) and
    :math:`\bar w = \Sigma_w \Phi^\top y / \sigma^2`: :math:`M^2 + M` numbers per draw.
    """
    theta = theta_from_draw(kernel, draw, x_scale)
    s = design.prior_variances(kernel, theta, draw["amplitude"])
    noise_var = draw["noise"] ** 2 + JITTER
    return (*collapsed_factors(stats, s, noise_var), noise_var)


def collapsed_factors(stats: Stats, s, noise_var):
    r"""Return ``(R, w_bar)`` of the weights' posterior :math:`N(\bar w, R^\top R)`.

    For :math:`y = \Phi w + \varepsilon`, :math:`w \sim N(0, \mathrm{diag}(s))`:
    :math:`R = L^{-1}S^{1/2}` with :math:`LL^\top = I + S^{1/2}\Phi^\top\Phi S^{1/2}/\sigma^2`,
    so that :math:`R^\top R = (\Phi^\top\Phi/\sigma^2 + S^{-1})^{-1}`, and
    :math:`\bar w = R^\top R\,\Phi^\top y/\sigma^2` (Rasmussen & Williams 2006, eq. 2.8).
    """
    L, r = _scaled(stats, s, noise_var)
    R = jsl.solve_triangular(L, jnp.diag(r), lower=True)
    return R, R.T @ (R @ stats.Pty) / noise_var


def hsgp_predict(R, w, Phi):
    r"""Return the latent mean :math:`\Phi_*\bar w` and variance :math:`\lVert R\phi_*\rVert^2`.

    For one draw's factors (:func:`hsgp_factors`) at new features ``Phi`` ``(n, M)``.
    """
    V = R @ Phi.T
    return Phi @ w, jnp.sum(V * V, axis=0)


def hsgp_loo(R, w, noise_var, Phi, y):
    r"""Return :math:`\log p(y_i \mid y_{-i}, \theta)` of the basis model, closed form.

    For the Gaussian linear model, with the hat-matrix diagonal
    :math:`h_i = \phi_i^\top\Sigma_w\phi_i/\sigma^2` and residual
    :math:`r_i = y_i - \phi_i^\top\bar w`: the leave-one-out predictive of :math:`y_i` is
    :math:`N\big(y_i - r_i/(1 - h_i),\ \sigma^2/(1 - h_i)\big)` (from
    :math:`[C^{-1}]_{ii} = (1 - h_i)/\sigma^2` and :math:`[C^{-1}y]_i = r_i/\sigma^2`,
    :math:`C = \Phi S\Phi^\top + \sigma^2 I`; Rasmussen & Williams 2006, eq. 5.12).
    """
    return hsgp_loo_and_fitted(R, w, noise_var, Phi, y)[0]


def hsgp_loo_and_fitted(R, w, noise_var, Phi, y):
    r"""Return :func:`hsgp_loo`'s log densities and the latent mean and variance at the rows.

    ``(log p(y_i | y_-i), phi_i' w_bar, ||R phi_i||^2)``, the last two those of
    :func:`hsgp_predict`, from which the estimators draw the posterior-predictive replicates
    of the same rows without a second pass over the draws.
    """
    mean, var = hsgp_predict(R, w, Phi)
    one_minus_h = jnp.maximum(1.0 - var / noise_var, 1e-12)
    ll = jax.scipy.stats.norm.logpdf(
        (y - mean) / one_minus_h, 0.0, jnp.sqrt(noise_var / one_minus_h)
    )
    return ll, mean, var


def gaussian_evidence(A, c, d) -> jax.Array:
    r"""Return :math:`\log\int \exp(c^\top w - \tfrac12 w^\top A w)\,N(w \mid 0, D)\,dw`.

    :math:`= \tfrac12 c^\top(A + D^{-1})^{-1}c - \tfrac12\log|I + D^{1/2}AD^{1/2}|`,
    :math:`D = \mathrm{diag}(d)`: the Gaussian integral in the scaled form of
    :func:`collapsed_log_marginal` (:math:`B = I + D^{1/2}AD^{1/2} = LL^\top`,
    :math:`c^\top(A + D^{-1})^{-1}c = \lVert L^{-1}D^{1/2}c\rVert^2`). With
    :math:`A = \Psi^\top\Omega\Psi` and :math:`c = \Psi^\top(y - \tfrac12)` it is the
    Pólya-Gamma-augmented Bernoulli-logit likelihood with the weights integrated out, up to
    terms free of :math:`d` (Polson, Scott & Windle 2013).
    """
    L, r = scaled_factor(A, d)
    u = jsl.solve_triangular(L, r * c, lower=True)
    return 0.5 * (u @ u) - jnp.sum(jnp.log(jnp.diagonal(L)))


def scaled_factor(A, d):
    r"""Return ``(L, r)``: :math:`LL^\top = I + D^{1/2}AD^{1/2}`, :math:`r = \sqrt{d}`.

    The scaled form of :math:`A + D^{-1}` (:math:`D = \mathrm{diag}(d)`, floored at
    :data:`VARIANCE_FLOOR`): eigenvalues at least one, so no jitter, and :math:`d_i \to 0`
    harmless. :func:`gaussian_evidence` and the Pólya-Gamma sampler's draw of the weights
    (:func:`bayeskern.inference.pg_basis.gaussian_weights`) factor it.
    """
    r = jnp.sqrt(jnp.maximum(d, VARIANCE_FLOOR))
    return jnp.linalg.cholesky(jnp.eye(r.shape[0], dtype=r.dtype) + r[:, None] * A * r[None, :]), r


def classification_variances(kernel: Kernel, design: HSGPDesign, draw: dict, x_scale):
    """Return the prior variances of ``[bias, weights]``: :math:`[b_{sd}^2, s(\theta)]`."""
    theta = theta_from_draw(kernel, draw, x_scale)
    s = design.prior_variances(kernel, theta, draw["amplitude"])
    return jnp.concatenate([jnp.full((1,), BIAS_SD**2, s.dtype), s])


def hsgp_classification(stats=None, X=None, y=None, *, kernel: Kernel, design: HSGPDesign, x_scale):
    r"""Binary GP classification on a Hilbert-space basis, for Pólya-Gamma Gibbs sampling.

    .. math:: f = b + \Phi w,\quad b \sim N(0, b_{sd}^2),\ w \sim N(0, \mathrm{diag}(s(\theta))),
              \quad y_i \sim \mathrm{Bernoulli}(\sigma(f_i)),

    the priors of :func:`models.gp.gp_classification` (same hyper-parameter sites; the GP
    :math:`\Phi w` with :math:`K \approx \Phi S\Phi^\top`, Solin & Särkkä 2020).

    Parameters
    ----------
    stats : (A, c) or None
        Given the Pólya-Gamma variables :math:`\omega`: :math:`A = \Psi^\top\Omega\Psi`,
        :math:`c = \Psi^\top(y - \tfrac12)` for :math:`\Psi = [1, \Phi]`; the factor
        ``y`` is then :func:`gaussian_evidence`, the bias and weights integrated out
        (:class:`bayeskern.inference.pg_basis.PGBasisGibbs` samples them).
    X : (n, d) array or None
        Without ``stats``: standardized inputs at which to draw ``y`` from the model (prior
        predictive checks).
    y : ignored
        Accepted for the estimators' calling convention.
    kernel : a named, fitted kernel (the one ``design`` was built for).
    design : HSGPDesign
    x_scale : (d,) column scales of the raw inputs (translates fixed length values).
    """
    theta = sample_kernel_hyperparameters(kernel, x_scale)
    n_terms = len(kernel.terms())
    amplitude = numpyro.sample("amplitude", SoftplusHalfNormal(1.0).expand([n_terms]).to_event(1))
    s = design.prior_variances(kernel, theta, amplitude)
    if stats is not None:
        d = jnp.concatenate([jnp.full((1,), BIAS_SD**2, s.dtype), s])
        numpyro.factor("y", gaussian_evidence(stats[0], stats[1], d))
        return
    if X is None:
        raise ValueError("hsgp_classification needs stats (fitting) or X (prior predictive)")
    bias = numpyro.sample("bias", dist.Normal(0.0, BIAS_SD))
    w = numpyro.sample("w", dist.Normal(0.0, 1.0).expand([design.size]).to_event(1))
    f = bias + design.features(X) @ (jnp.sqrt(s) * w)
    numpyro.sample("y", dist.Bernoulli(logits=f).to_event(1), obs=y)
