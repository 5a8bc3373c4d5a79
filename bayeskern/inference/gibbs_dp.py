"""The Dirichlet-process Gaussian mixture blocks of the GaBaSR Gibbs sweep.

Pena-Llamas et al. (2023), section 3.2.2: the frequencies :math:`\\omega_1..\\omega_M` are
points of a DP mixture of full-covariance Gaussians in its Chinese-restaurant form. This
module holds that mixture's state (:class:`DPState`) and its updates: assignments by Neal's
(2000) algorithm 2 (:func:`crp_log_weights`), component parameters from their
normal-inverse-Wishart posterior, the concentration by Escobar & West (1995)
(:func:`escobar_west_alpha`), and the proposal of a frequency from its component. The
sweep that uses them is :mod:`bayeskern.inference.gibbs_sweep`.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import jax
import jax.numpy as jnp
import jax.scipy.linalg as jsl
from jax import lax
from jax.scipy.special import gammaln

from bayeskern import random as bkr
from bayeskern.models.gabasr import GibbsPrior
from bayeskern.random import niw_posterior, normal_inverse_wishart

__all__ = ["DPState", "crp_log_weights", "escobar_west_alpha"]

_LOG2PI = math.log(2 * math.pi)


class DPState(NamedTuple):
    """One Dirichlet-process Gaussian mixture over ``M`` points in ``d`` dimensions.

    ``U`` holds lower Cholesky factors of the component *precisions*,
    :math:`\\Lambda_k = U_k U_k^\\top`; ``counts[k]`` is the number of points in slot ``k``.
    """

    z: jax.Array  # (M,) int
    counts: jax.Array  # (K,) int
    mu: jax.Array  # (K, d)
    U: jax.Array  # (K, d, d)
    alpha: jax.Array  # ()


# --------------------------------------------------------------------------- DP mixture


def _mvn_logpdf_prec(x, mu, U):
    """:math:`\\log N(x \\mid \\mu, (UU^\\top)^{-1})`."""
    r = jnp.einsum("...i,...ij->...j", x - mu, U)  # U^T (x - mu)
    d = x.shape[-1]
    logdet_half = jnp.sum(jnp.log(jnp.diagonal(U, axis1=-2, axis2=-1)), -1)
    return -0.5 * d * _LOG2PI + logdet_half - 0.5 * jnp.sum(r * r, -1)


def _mvt_logpdf(x, loc, shape_chol, df):
    """Multivariate Student-t log density with shape matrix ``L L^T``."""
    d = x.shape[-1]
    r = jsl.solve_triangular(shape_chol, x - loc, lower=True)
    return (
        gammaln((df + d) / 2.0)
        - gammaln(df / 2.0)
        - 0.5 * d * jnp.log(df * math.pi)
        - jnp.sum(jnp.log(jnp.diagonal(shape_chol)))
        - 0.5 * (df + d) * jnp.log1p(r @ r / df)
    )


def _prior_predictive(m0, kappa0, nu0, Psi0):
    """Student-t prior predictive of one point under NIW: ``(loc, shape_chol, df)``."""
    d = m0.shape[-1]
    df = nu0 - d + 1.0
    shape = Psi0 * (kappa0 + 1.0) / (kappa0 * df)
    return m0, jnp.linalg.cholesky(shape), df


def crp_log_weights(x, counts_minus, mu, U, alpha, pred):
    """Unnormalized log CRP weights of one point: ``K`` existing slots, then a new one.

    Existing slot :math:`k`: :math:`\\log n_{-j,k} + \\log N(x\\mid\\mu_k,\\Lambda_k^{-1})`
    (``-inf`` for empty slots); new: :math:`\\log\\alpha + \\log t(x)` under the prior
    predictive ``pred`` (Pena-Llamas et al. 2023, section 3.2.2 step 1, with the
    :math:`\\log\\alpha` the first author's code omits), ``-inf`` when no slot is free (truncation).
    The common :math:`1/(M-1+\\alpha)` cancels.
    """
    occupied = counts_minus > 0
    lw = jnp.where(
        occupied,
        jnp.log(jnp.maximum(counts_minus, 1).astype(x.dtype)) + _mvn_logpdf_prec(x, mu, U),
        -jnp.inf,
    )
    lnew = jnp.log(alpha) + _mvt_logpdf(x, *pred)
    lnew = jnp.where(jnp.all(occupied), -jnp.inf, lnew)
    return jnp.concatenate([lw, lnew[None]])


def escobar_west_alpha(key, alpha, k, n, a, b):
    """One Escobar & West (1995, section 6) update of the DP concentration.

    :math:`\\eta \\sim \\mathrm{Beta}(\\alpha+1, n)`; with odds
    :math:`(a+k-1)/(n(b-\\log\\eta))` draw :math:`\\alpha \\sim \\mathrm{Gamma}(a+k,
    b-\\log\\eta)`, else :math:`\\mathrm{Gamma}(a+k-1, b-\\log\\eta)`. Leaves
    :math:`p(\\alpha\\mid k) \\propto \\mathrm{Gamma}(\\alpha; a,b)\\,
    \\alpha^k\\Gamma(\\alpha)/\\Gamma(\\alpha+n)`
    invariant.
    """
    dtype = jnp.result_type(alpha)
    k1, k2, k3 = jax.random.split(key, 3)
    g = bkr.gamma(k1, jnp.stack([alpha + 1.0, jnp.asarray(n, dtype)]))
    eta = g[0] / (g[0] + g[1])
    rate = b - jnp.log(eta)
    odds = (a + k - 1.0) / (n * rate)
    shape = a + k - 1.0 + (jax.random.uniform(k2, dtype=dtype) < odds / (1.0 + odds))
    return bkr.gamma(k3, shape) / rate


def _dp_update(key, dp: DPState, points, hyper, prior: GibbsPrior):
    """Run steps 1-3 of a sweep for one mixture: CRP assignments, NIW parameters, alpha."""
    m0, Psi0 = hyper
    d = points.shape[-1]
    K = dp.mu.shape[0]
    M = points.shape[0]
    dtype = points.dtype
    nu0 = d + prior.nu_offset
    pred = _prior_predictive(m0, prior.kappa0, nu0, Psi0)
    k_crp, k_par, k_alpha = jax.random.split(key, 3)
    k_crp, k_new = jax.random.split(k_crp)
    keys_new = jax.random.split(k_new, M)

    def open_component(i, x):
        """Parameters a new component gets from point ``i`` alone: drawn only when opened."""
        post = niw_posterior(1.0, x, jnp.outer(x, x), m0, prior.kappa0, nu0, Psi0)
        return normal_inverse_wishart(keys_new[i], *post)

    def crp_step(carry, inp):
        z, counts, mu, U = carry
        i, key = inp
        x = points[i]
        counts_m = counts.at[z[i]].add(-1)
        lw = crp_log_weights(x, counts_m, mu, U, dp.alpha, pred)
        c = jax.random.categorical(key, lw)
        new = c == K
        slot = jnp.where(new, jnp.argmin(counts_m > 0), c)
        mu_new, U_new = lax.cond(new, open_component, lambda i, x: (mu[slot], U[slot]), i, x)
        mu = mu.at[slot].set(mu_new)
        U = U.at[slot].set(U_new)
        return (z.at[i].set(slot.astype(z.dtype)), counts_m.at[slot].add(1), mu, U), None

    keys = jax.random.split(k_crp, M)
    (z, counts, mu, U), _ = lax.scan(
        crp_step, (dp.z, dp.counts, dp.mu, dp.U), (jnp.arange(M), keys)
    )
    cnt = counts.astype(dtype)
    s = jax.ops.segment_sum(points, z, num_segments=K)
    ss = jax.ops.segment_sum(points[:, :, None] * points[:, None, :], z, num_segments=K)
    post = jax.vmap(niw_posterior, in_axes=(0, 0, 0, None, None, None, None))(
        cnt, s, ss, m0, prior.kappa0, nu0, Psi0
    )
    mu, U = jax.vmap(normal_inverse_wishart)(jax.random.split(k_par, K), *post)
    k_occ = jnp.sum(counts > 0).astype(dtype)
    alpha = escobar_west_alpha(k_alpha, dp.alpha, k_occ, M, prior.alpha_shape, prior.alpha_rate)
    return DPState(z, counts, mu, U, alpha)


def _propose_from_component(key, dp: DPState, j):
    """:math:`\\omega^* \\sim N(\\mu_{z_j}, \\Lambda_{z_j}^{-1})`, the independence proposal."""
    k = dp.z[j]
    U = dp.U[k]
    eps = jax.random.normal(key, (U.shape[-1],), dtype=U.dtype)
    return dp.mu[k] + jsl.solve_triangular(U.T, eps, lower=False)
