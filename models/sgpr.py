r"""GP regression on inducing points (Titsias 2009's collapsed bound), as a NumPyro function.

For any kernel and :math:`M` inducing inputs :math:`Z` (fixed, chosen before sampling), with
:math:`K_{zz} = L_zL_z^\top` and the whitened cross-covariance
:math:`A = L_z^{-1}K_{zx}` (:math:`M \times N`), the kernel is replaced by the Nyström
approximation :math:`Q = A^\top A` and the log likelihood of the hyper-parameters by

.. math:: \mathcal F = \log N(y \mid 0,\ A^\top A + \sigma^2 I)
          - \frac{1}{2\sigma^2}\Big(\textstyle\sum_i k(x_i, x_i) - \mathrm{tr}\,AA^\top\Big)

(Titsias 2009, eq. 9), a lower bound on the exact :math:`\log p(y \mid \theta)` that equals it
when :math:`Z = X`. Sampling the hyper-parameters with this bound in place of the likelihood is
the fully Bayesian sparse GP of Lalchand et al. (2022). The data enter through
:math:`AA^\top`, :math:`Ay`, :math:`y^\top y` and :math:`\sum_i k(x_i, x_i)`, summed over
row chunks whose :math:`A` is formed by a triangular solve (one pass over the rows per
evaluation, :func:`bayeskern.blr.scan_feature_stats`): each log-density evaluation costs
:math:`O(NM^2)` time and :math:`O(\text{chunk}\cdot M + M^2)` memory.

Given a draw, :math:`A^\top v` with :math:`v \sim N(0, I)` is the model of :math:`f`, and
:math:`v`'s posterior is that of the Hilbert-space basis model with features :math:`A^\top`
and unit prior variances (:func:`models.hsgp.collapsed_factors`), so prediction, leave-one-out
densities and the fitted values reuse :mod:`models.hsgp`. The predictive variance adds the
Nyström residual :math:`k(x_*, x_*) - \lVert L_z^{-1}k_z(x_*)\rVert^2` (Titsias 2009, eq. 6).

The priors are those of :func:`models.gp.gp_regression` (same sample sites).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import jax.scipy.linalg as jsl
import numpyro
import numpyro.distributions as dist
from bayeskern.models.gp_kernel import JITTER, _hyper, kernel_diag, kernel_matrix, theta_from_draw
from bayeskern.models.hsgp import collapsed_factors

from bayeskern.blr import Stats, scan_feature_stats
from bayeskern.kernels.base import Kernel

__all__ = [
    "sgpr_regression",
    "sgpr_bound",
    "sgpr_factors",
    "sgpr_predict",
    "sgpr_features",
    "Z_JITTER",
]

#: jitter on :math:`K_{zz}`, relative to its mean diagonal
Z_JITTER = 1e-6


def _z_factor(kernel: Kernel, theta, amplitude, Z):
    """Cholesky factor of :math:`K_{zz}` plus :data:`Z_JITTER` times its mean diagonal."""
    Kzz = kernel_matrix(kernel, theta, amplitude, Z, Z)
    jitter = Z_JITTER * jnp.mean(jnp.diagonal(Kzz)) + 1e-12
    return jnp.linalg.cholesky(Kzz + jitter * jnp.eye(Z.shape[0], dtype=Kzz.dtype))


def _whitened(kernel: Kernel, theta, amplitude, Z, Lz, Xc):
    """:math:`A^\top = (L_z^{-1}K_{zx})^\top` for the rows ``Xc``, ``(n, M)``."""
    K = kernel_matrix(kernel, theta, amplitude, Z, Xc)
    return jsl.solve_triangular(Lz, K, lower=True).T


@jax.custom_vjp
def _whitened_gram(Lz, Kt, y):
    r"""``(AA^T, Ay)`` with :math:`A = L_z^{-1}K_{zx}`, ``Kt`` :math:`= K_{xz}` ``(n, M)``.

    The reverse pass is written out in :math:`M \times M` quantities: with cotangents
    :math:`\bar P` of :math:`P = AA^\top` and :math:`\bar\beta` of :math:`\beta = Ay`, and
    :math:`S = \bar P + \bar P^\top`,

    .. math:: \bar K = L_z^{-\top}SL_z^{-1}K + L_z^{-\top}\bar\beta\,y^\top,\qquad
              \bar L_z = -\mathrm{tril}\big(L_z^{-\top}(SP + \bar\beta\beta^\top)\big),

    one :math:`O(nM^2)` product where differentiating the triangular solve and the product
    takes three.
    """
    return _whitened_gram_fwd(Lz, Kt, y)[0]


def _whitened_gram_fwd(Lz, Kt, y):
    A = jsl.solve_triangular(Lz, Kt.T, lower=True)
    P, beta = A @ A.T, A @ y
    return (P, beta), (Lz, Kt, y, P, beta)


def _whitened_gram_bwd(res, cot):
    Lz, Kt, y, P, beta = res
    gP, gb = cot
    S = gP + gP.T
    LtS = jsl.solve_triangular(Lz, S, lower=True, trans=1)  # L^-T S
    C = jsl.solve_triangular(Lz, LtS.T, lower=True, trans=1)  # L^-T S L^-1 (symmetric)
    c = jsl.solve_triangular(Lz, gb, lower=True, trans=1)
    gKt = Kt @ C + jnp.outer(y, c)
    gL = -jnp.tril(jsl.solve_triangular(Lz, S @ P + jnp.outer(gb, beta), lower=True, trans=1))
    return gL, gKt, Kt @ c


_whitened_gram.defvjp(_whitened_gram_fwd, _whitened_gram_bwd)


def _gram_stats(Lz):
    """``stats(K_xz, y) -> Stats`` of the whitened features, for ``scan_feature_stats``."""

    def stats(Kt, y):
        P, beta = _whitened_gram(Lz, Kt, y)
        return Stats(P, beta, y @ y, jnp.asarray(y.shape[0], dtype=P.dtype))

    return stats


def _whitened_stats(kernel: Kernel, theta, amplitude, Z, X, y, chunk_size):
    r"""``(Stats of A^T, sum_i k(x_i, x_i), L_z)``: :math:`(AA^\top, Ay, y^\top y, N)`.

    :math:`A` is formed chunk by chunk by a triangular solve, not as :math:`L_z^{-1}
    (K_{zx}K_{xz})L_z^{-\top}`: that product amplifies the rounding of
    :math:`K_{zx}K_{xz}` by :math:`\lVert L_z^{-1}\rVert^2` (up to the inverse jitter),
    enough on :math:`10^4` rows to make the bound rough at the scale of NUTS's steps.
    """
    Lz = _z_factor(kernel, theta, amplitude, Z)
    stats = scan_feature_stats(
        lambda Xc: kernel_matrix(kernel, theta, amplitude, Xc, Z),
        (X,),
        y,
        chunk_size,
        stats=_gram_stats(Lz),
    )
    return stats, jnp.sum(kernel_diag(kernel, theta, amplitude, X)), Lz


def sgpr_bound(stats: Stats, trace_k, noise_var):
    r"""Titsias's collapsed bound :math:`\mathcal F` from the whitened statistics.

    With :math:`P = AA^\top`, :math:`\beta = Ay` and :math:`LL^\top = I + P/\sigma^2`:

    .. math:: \mathcal F = -\tfrac12\Big[N\log 2\pi\sigma^2 + 2\textstyle\sum_i\log L_{ii}
              + \frac{y^\top y - \lVert L^{-1}\beta\rVert^2/\sigma^2}{\sigma^2}\Big]
              - \frac{\sum_i k(x_i, x_i) - \mathrm{tr}\,P}{2\sigma^2}.

    Differentiated by JAX through every argument (unlike
    :func:`models.hsgp.collapsed_log_marginal`, whose statistics are constants).
    """
    M = stats.PtP.shape[0]
    L = jnp.linalg.cholesky(jnp.eye(M, dtype=stats.PtP.dtype) + stats.PtP / noise_var)
    u = jsl.solve_triangular(L, stats.Pty, lower=True)
    quad = (stats.yty - u @ u / noise_var) / noise_var
    logdet = 2.0 * jnp.sum(jnp.log(jnp.diagonal(L)))
    dtc = -0.5 * (stats.n * jnp.log(2.0 * jnp.pi * noise_var) + logdet + quad)
    return dtc - 0.5 * jnp.maximum(trace_k - jnp.trace(stats.PtP), 0.0) / noise_var


def sgpr_regression(X, y=None, *, kernel: Kernel, x_scale, Z, chunk_size: int | None = None):
    """GP regression with the collapsed inducing-point bound as the likelihood.

    Parameters
    ----------
    X : (n, d) standardized inputs.
    y : (n,) standardized targets, or ``None`` for prior predictive sampling (then
        :math:`y = A^\\top v + \\varepsilon` with the Nyström residual variance added to
        the noise, :math:`v \\sim N(0, I)`).
    kernel : a named, fitted kernel.
    x_scale : (d,) column scales of the raw inputs (translates fixed length values).
    Z : (M, d) standardized inducing inputs.
    chunk_size : rows per chunk of the pass over the data (``None``: one block).
    """
    theta, amplitude = _hyper(kernel, x_scale)
    noise = numpyro.sample("noise", dist.HalfNormal(1.0))
    noise_var = noise**2 + JITTER
    if y is not None:
        stats, trace_k, _ = _whitened_stats(kernel, theta, amplitude, Z, X, y, chunk_size)
        numpyro.factor("y", sgpr_bound(stats, trace_k, noise_var))
        return
    A, resid = sgpr_features(kernel, theta, amplitude, Z, X)
    v = numpyro.sample("v", dist.Normal(0.0, 1.0).expand([Z.shape[0]]).to_event(1))
    numpyro.sample("y", dist.Normal(A @ v, jnp.sqrt(resid + noise_var)).to_event(1))


def sgpr_features(kernel: Kernel, theta, amplitude, Z, Xnew, Lz=None):
    r"""Whitened features :math:`A_*^\top = (L_z^{-1}K_{z*})^\top` and the Nyström residual.

    Returns ``(A_*^T (n, M), k(x_*, x_*) - ||L_z^{-1} k_z(x_*)||^2 (n,))``; ``Lz``: the
    factor of :math:`K_{zz}` (:func:`sgpr_factors`), computed when not given.
    """
    Lz = _z_factor(kernel, theta, amplitude, Z) if Lz is None else Lz
    A = _whitened(kernel, theta, amplitude, Z, Lz, Xnew)
    resid = kernel_diag(kernel, theta, amplitude, Xnew) - jnp.sum(A * A, axis=1)
    return A, jnp.maximum(resid, 0.0)


def sgpr_factors(kernel: Kernel, draw: dict, X, y, Z, x_scale, chunk_size=None):
    r"""Return one draw's factors of prediction ``(L_z, R, w_bar, noise variance)``.

    The whitened weights' posterior is :math:`N(\bar w, R^\top R)`
    (:func:`models.hsgp.collapsed_factors` with features :math:`A^\top` and unit prior
    variances); at new inputs, with :math:`a_* = L_z^{-1}k_z(x_*)`, the latent mean is
    :math:`a_*^\top\bar w` and its variance
    :math:`\lVert Ra_*\rVert^2 + k_{**} - \lVert a_*\rVert^2` (:func:`sgpr_predict`):
    :math:`2M^2 + M + 1` numbers per draw, no pass over the rows.
    """
    theta = theta_from_draw(kernel, draw, x_scale)
    noise_var = draw["noise"] ** 2 + JITTER
    stats, _, Lz = _whitened_stats(kernel, theta, draw["amplitude"], Z, X, y, chunk_size)
    R, w = collapsed_factors(stats, jnp.ones(Z.shape[0], dtype=stats.PtP.dtype), noise_var)
    return Lz, R, w, noise_var


def sgpr_predict(kernel: Kernel, draw: dict, factors, Z, Xnew, x_scale, joint: bool = False):
    r"""Latent mean and variance (or covariance, ``joint``) at ``Xnew`` for one draw.

    From :func:`sgpr_factors`, with :math:`A_* = L_z^{-1}K_{z*}`: :math:`\mu_* = A_*^\top\bar w`,
    :math:`\Sigma_* = K_{**} - A_*^\top A_* + (RA_*)^\top RA_*` (Titsias 2009, eq. 6).
    """
    Lz, R, w, _ = factors
    theta = theta_from_draw(kernel, draw, x_scale)
    amp = draw["amplitude"]
    A_T, resid = sgpr_features(kernel, theta, amp, Z, Xnew, Lz)
    V = R @ A_T.T
    if joint:
        cov = kernel_matrix(kernel, theta, amp, Xnew, Xnew) - A_T @ A_T.T + V.T @ V
        return A_T @ w, cov
    return A_T @ w, jnp.sum(V * V, axis=0) + resid
