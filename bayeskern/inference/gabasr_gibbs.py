"""GaBaSR's Gibbs / Metropolis-Hastings sampler with rank-updated evidence.

The paper's algorithm (Pena-Llamas et al. 2023, section 3.2; parent method BaNK,
Oliva et al. 2016) for a spectral density that is a Dirichlet-process Gaussian mixture,

.. math:: \\rho(\\omega) = \\sum_k \\pi_k\\,N(\\omega \\mid \\mu_k, \\Lambda_k^{-1}),
          \\qquad \\omega_1, \\dots, \\omega_M \\sim \\rho,

as a NumPyro ``MCMCKernel``, :class:`GaBaSRGibbs`: one ``sample`` call is one sweep, so
:class:`numpyro.infer.MCMC` gives it chains, warm-up, progress bars and ``az.from_numpyro``.
Underneath, BlackJAX's shape: a ``NamedTuple`` state, :func:`init`, a pure
``sweep(key, state) -> (state, info)`` (:func:`build_sweep`), ``lax.scan`` over frequencies
inside a sweep. :func:`gibbs_sample` runs the kernel: through ``MCMC`` for a progress bar or
parallel chains, otherwise with a compiled loop cached across calls that draws the same
chains as ``MCMC`` would. The exact random draws it needs (Polya-Gamma, Gamma, Wishart,
normal-inverse-Wishart) are in :mod:`bayeskern.random`.

The model is the paper's own: **a random-feature model whose M frequencies are free, drawn
from a Dirichlet-process Gaussian mixture in its Chinese-restaurant form** (assignments,
full-covariance components, concentration all sampled). It is not the model that NUTS
samples in :mod:`bayeskern.models.gabasr` (truncated stick-breaking, frequencies tied to
fixed base draws), nor the exact spectral-mixture GP there.

One sweep (the paper's "swap") does

1. **assignments** :math:`z_j` by the Chinese-restaurant process (section 3.2.2 step 1, Neal
   2000 algorithm 2): existing component :math:`k` with weight
   :math:`n_{-j,k}\\,N(\\omega_j\\mid\\mu_k,\\Lambda_k^{-1})`, a new component with weight
   :math:`\\alpha\\,t_{\\nu_0-d+1}(\\omega_j \\mid m_0,
   \\Psi_0(\\kappa_0+1)/(\\kappa_0(\\nu_0-d+1)))`,
   the prior predictive of the base measure. The factor :math:`\\alpha` is the one the first
   author's code omits (a bug there).
2. **component parameters** from their conjugate normal-inverse-Wishart posterior (BaNK's
   prior; the paper's section 3.2.2 step 2 writes the semi-conjugate normal-Wishart):
   :math:`\\Sigma_k \\sim IW(\\nu_0, \\Psi_0)`, :math:`\\mu_k\\mid\\Sigma_k \\sim
   N(m_0, \\Sigma_k/\\kappa_0)` with BaNK's defaults :math:`\\kappa_0 = 0.1`,
   :math:`\\nu_0 = d + 2`, :math:`m_0 = 0`, :math:`\\Psi_0 = I/\\sigma^2` where
   :math:`\\sigma^2` is the median pairwise squared distance of the (standardized) inputs, so
   that :math:`E[\\Sigma_k] = \\Psi_0/(\\nu_0-d-1) = I/\\sigma^2` is the spectral covariance of an
   RBF kernel of length-scale :math:`\\sigma`.
3. **concentration** :math:`\\alpha \\sim \\mathrm{Gamma}(a_\\alpha, b_\\alpha)` by Escobar &
   West's (1995) auxiliary variable :math:`\\eta \\sim \\mathrm{Beta}(\\alpha+1, M)`.
4. **frequencies**, in random order, each by an independence Metropolis-Hastings proposal
   :math:`\\omega_j^* \\sim N(\\mu_{z_j}, \\Lambda_{z_j}^{-1})` (section 3.2.3). The proposal is
   the conditional prior of :math:`\\omega_j`, so the acceptance probability is the
   marginal-likelihood ratio only, :math:`\\min(1, p(y\\mid\\Omega^*)/p(y\\mid\\Omega))`.
5. the weight prior precision :math:`\\lambda_0` (unless fixed) and, for classification, the
   weights; see below.

**Regression** (eq. 10): Bayesian linear regression on :math:`\\Phi = [\\cos | \\sin |
\\text{mean basis}]` with the normal-inverse-gamma prior :math:`w\\mid\\sigma^2 \\sim
N(0, \\sigma^2\\lambda_0^{-1} I)`, :math:`\\sigma^2 \\sim IG(a_0, b_0)`, the weights and noise
integrated out (:func:`bayeskern.blr.nig_log_marginal`). The paper fixes
:math:`\\lambda_0 = 10^{-6}`; here :math:`\\lambda_0 \\sim \\mathrm{Gamma}(1, 1)` by default and
is updated once per sweep by random-walk MH on :math:`\\log\\lambda_0` on the collapsed evidence,
evaluated in :math:`O(P)` per step from an eigendecomposition of :math:`\\Phi^\\top\\Phi` (the
paper's value is kept available as ``GibbsPrior(prior_precision=1e-6)``). The ratio
:math:`1/\\lambda_0` is the prior signal-to-noise ratio of :math:`f = \\Phi w`.

**Classification** (eq. 11): the Bernoulli-logit likelihood has no closed-form evidence. We
use Polya-Gamma augmentation (Polson, Scott & Windle 2013): with
:math:`\\varpi_i \\sim PG(1, \\phi_i^\\top\\beta)` and :math:`\\kappa_i = y_i - 1/2`,
:math:`\\beta \\mid \\Omega, \\varpi \\sim N(\\Lambda^{-1}\\Phi^\\top\\kappa, \\Lambda^{-1})`,
:math:`\\Lambda = \\lambda_0 I + \\Phi^\\top \\mathrm{diag}(\\varpi)\\Phi`, and the frequencies are
moved with :math:`\\beta` integrated out, :math:`\\log p(\\kappa\\mid\\varpi,\\Omega) =
\\tfrac12(P\\log\\lambda_0 - \\log|\\Lambda| + \\kappa^\\top\\Phi\\Lambda^{-1}\\Phi^\\top\\kappa)
+ \\text{const}` -- a Gaussian evidence, so the same rank-update machinery applies. A sweep is
:math:`\\varpi \\mid \\beta`, then :math:`(z, \\mu, \\Lambda, \\alpha)`, then
:math:`\\Omega \\mid \\varpi` (MH, :math:`\\beta` collapsed), then
:math:`\\beta \\mid \\Omega, \\varpi`,
then :math:`\\lambda_0 \\mid \\beta \\sim \\mathrm{Gamma}(a_\\lambda + P/2, b_\\lambda +
\\|\\beta\\|^2/2)`: each block leaves the joint posterior invariant.

**Cost of one proposal.** Changing :math:`\\omega_j` changes the columns :math:`J = \\{j, M+j\\}`
of :math:`\\Phi`. We keep :math:`A = \\Lambda_N^{-1}`, :math:`G = \\Phi^\\top W\\Phi`,
:math:`b = \\Phi^\\top y`, :math:`\\log|\\Lambda_N|` and :math:`b^\\top A b`. With
:math:`C = A - A_{:J}A_{JJ}^{-1}A_{J:}` (which is :math:`\\Lambda_{RR}^{-1}` padded with zeros,
:math:`R` the other columns), the new cross-products :math:`c = \\Phi_R^\\top W F^*` and the
Schur complement :math:`S = \\Lambda^*_{JJ} - c^\\top C c`,

.. math:: \\log|\\Lambda_N^*| = \\log|\\Lambda_N| + \\log|A_{JJ}| + \\log|S|,\\qquad
          b^{*\\top}\\Lambda_N^{*-1}b^* = b_R^\\top C b_R + g^\\top S^{-1} g,\\;
          g = b^*_J - c^\\top C b_R,

and on acceptance :math:`A^* = C + (e_J - Cc)S^{-1}(e_J - Cc)^\\top` (a rank-4 update). That is
:math:`O(N\\,P)` for the new cross-products plus :math:`O(P^2)` for the rest, instead of
:math:`O(N P^2 + P^3)` for a fresh evidence (:func:`full_log_evidence`; ``evidence="full"``
runs the same sweep that way, for timing). :math:`A` is refactorized exactly once per sweep
(eigendecomposition for regression, Cholesky for classification) so rounding does not build
up; ``info["drift"]`` reports the gap between the tracked and the exact evidence at that point.
BaNK does the same with rank-2 Cholesky up/downdates; block inverse updates are matrix-matrix
products, which JAX runs far faster than the sequential rotations of a Cholesky update.

**Locally stationary** (section 3.2.4, eq. 6): a second DP mixture :math:`f_2` for
:math:`v_1..v_{M_2}`, sampled the same way. The design of the linear model is
:math:`\\Phi = (\\phi + \\phi^-)/2` with :math:`\\phi, \\phi^-` from
:func:`bayeskern.features.locally_stationary_features` (all :math:`M_1 M_2` pairs). Why not
:math:`\\phi` alone: :math:`\\phi(x)^\\top\\phi(x')` is stationary (it is an RFF map with
frequencies :math:`v_k/2 + \\omega_n`); and the asymmetric :math:`\\phi^\\top\\phi^-` is not a
covariance. The sum is positive semi-definite by construction (Yaglom; Ton et al. 2018) with
:math:`E[\\Phi(x)^\\top\\Phi(x')] = \\tfrac12\\kappa_1(\\tfrac{x+x'}2)\\kappa_2(x-x') +
\\tfrac14(\\kappa_{p}(x-x') + \\kappa_{q}(x-x'))`, the locally stationary kernel plus the two
stationary kernels of the pair frequencies :math:`p, q = v/2 \\pm \\omega`. A move of
:math:`\\omega_n` changes :math:`2M_2` columns, a move of :math:`v_k` changes :math:`2M_1`; the
same block update handles both (keep :math:`M_2` small).

Truncation: at most ``max_components`` components are represented (default
``min(M, max(2 K_0, 20))`` with :math:`K_0 = \\max(1, \\lfloor M/10\\rfloor)` initial components,
BaNK's choice); when every slot is occupied the new-component weight is set to zero. Initial
components have mean 0 and covariances :math:`I/q_k`, :math:`q_k` quantiles (1 % to 50 %) of the
pairwise squared distances, so that the first frequencies span short to long length-scales.
"""

from __future__ import annotations

import functools
import json
import math
import time
import warnings
from typing import NamedTuple

import jax
import jax.numpy as jnp
import jax.scipy.linalg as jsl
import numpy as np
from jax import lax
from jax.scipy.special import gammaln
from numpyro.infer import MCMC
from numpyro.infer.mcmc import MCMCKernel
from tqdm.auto import tqdm

from bayeskern import blr
from bayeskern import random as bkr
from bayeskern.devices import release_pmap_programs
from bayeskern.features import locally_stationary_features, rff_features
from bayeskern.inference.processes import (
    PROCESS_WORK,
    can_start_processes,
    map_in_processes,
    process_count,
)
from bayeskern.models.gabasr import GibbsPrior
from bayeskern.random import niw_posterior, normal_inverse_wishart

__all__ = [
    "GaBaSRGibbs",
    "GibbsMCMCState",
    "GibbsPrior",
    "GibbsResult",
    "GibbsState",
    "GibbsData",
    "SweepConfig",
    "DPState",
    "Evidence",
    "gibbs_sample",
    "regression_posteriors",
    "init",
    "build_sweep",
    "design_matrix",
    "full_log_evidence",
    "predict_regression",
    "predict_proba",
    "crp_log_weights",
    "escobar_west_alpha",
]

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


class Evidence(NamedTuple):
    """Rank-updatable pieces of the Gaussian / NIG evidence of the linear model on ``Phi``."""

    Phi: jax.Array  # (n, P) current design
    G: jax.Array  # (P, P) Phi^T W Phi
    b: jax.Array  # (P,) Phi^T y_eff
    A: jax.Array  # (P, P) (lam0 I + G)^{-1}
    logdet: jax.Array  # log |lam0 I + G|
    quad: jax.Array  # b^T A b


class GibbsState(NamedTuple):
    """Full sampler state; ``v``/``dp_v`` are ``None`` for the stationary kernel."""

    omega: jax.Array  # (M, d)
    dp: DPState
    v: jax.Array | None  # (M2, d)
    dp_v: DPState | None
    ev: Evidence
    lam0: jax.Array  # ()
    weights: jax.Array  # (n,) Polya-Gamma variables (ones for regression)
    beta: jax.Array  # (P,) weights (classification; zeros for regression)
    noise: jax.Array  # () noise sd draw (regression)


class SweepConfig(NamedTuple):
    """Static (hashable) settings of a sweep; the sweep is compiled once per config and shape."""

    task: str
    M: int
    M2: int
    locally_stationary: bool
    prior: GibbsPrior
    evidence: str = "rank"


class GibbsData(NamedTuple):
    """Data and data-scaled hyper-parameters, passed to the sweep as arguments (not closed over)."""

    X: jax.Array  # (n, d)
    y: jax.Array  # (n,)
    y_eff: jax.Array  # y (regression) or y - 1/2 (classification)
    yy: jax.Array  # y^T y
    m0: jax.Array  # NIW prior mean of f1
    Psi0: jax.Array  # NIW prior scale of f1
    m0_v: jax.Array | None
    Psi0_v: jax.Array | None


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

    # parameters a new component would get from point i alone (points do not move in this
    # step, so all are drawn at once, outside the sequential scan)
    one = jax.vmap(niw_posterior, in_axes=(None, 0, 0, None, None, None, None))(
        1.0, points, points[:, :, None] * points[:, None, :], m0, prior.kappa0, nu0, Psi0
    )
    k_crp, k_new = jax.random.split(k_crp)
    mus_new, Us_new = jax.vmap(normal_inverse_wishart)(jax.random.split(k_new, M), *one)

    def crp_step(carry, inp):
        z, counts, mu, U = carry
        i, key = inp
        x = points[i]
        counts_m = counts.at[z[i]].add(-1)
        lw = crp_log_weights(x, counts_m, mu, U, dp.alpha, pred)
        c = jax.random.categorical(key, lw)
        new = c == K
        slot = jnp.where(new, jnp.argmin(counts_m > 0), c)
        mu_new, U_new = mus_new[i], Us_new[i]
        mu = mu.at[slot].set(jnp.where(new, mu_new, mu[slot]))
        U = U.at[slot].set(jnp.where(new, U_new, U[slot]))
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


# --------------------------------------------------------------------------- evidence


def _log_evidence(task, logdet, quad, lam0, P, n, yy, prior: GibbsPrior):
    """Evidence from ``log|Lambda_N|`` and ``b^T Lambda_N^{-1} b`` (same constants as blr)."""
    half_ratio = 0.5 * (P * jnp.log(lam0) - logdet)
    if task == "classification":
        return half_ratio + 0.5 * quad
    aN = prior.a0 + 0.5 * n
    bN = prior.b0 + 0.5 * jnp.maximum(yy - quad, 0.0)
    return (
        -0.5 * n * _LOG2PI
        + half_ratio
        + prior.a0 * math.log(prior.b0)
        - aN * jnp.log(bN)
        + gammaln(aN)
        - gammaln(prior.a0)
    )


def full_log_evidence(Phi, y_eff, weights, lam0, task: str, prior: GibbsPrior | None = None):
    """Evidence recomputed from scratch, :math:`O(N P^2 + P^3)`: the reference for the rank updates.

    Regression: :func:`bayeskern.blr.nig_log_marginal` (Pena-Llamas et al. 2023, eq. 10).
    Classification: the Polya-Gamma-augmented Gaussian evidence of the module docstring.
    """
    prior = GibbsPrior() if prior is None else prior
    if task == "regression":
        return blr.nig_log_marginal(blr.feature_stats(Phi, y_eff), lam0, prior.a0, prior.b0)
    P = Phi.shape[1]
    Lam = (Phi * weights[:, None]).T @ Phi + lam0 * jnp.eye(P, dtype=Phi.dtype)
    L = jnp.linalg.cholesky(Lam)
    b = Phi.T @ y_eff
    r = jsl.solve_triangular(L, b, lower=True)
    return 0.5 * (P * jnp.log(lam0) - 2.0 * jnp.sum(jnp.log(jnp.diagonal(L)))) + 0.5 * r @ r


def _evidence_from_G(Phi, G, b, lam0):
    """Exact ``Evidence`` by Cholesky of :math:`\\lambda_0 I + G`."""
    P = G.shape[0]
    G = 0.5 * (G + G.T)  # bit-for-bit symmetric, so that row and column writes agree
    L = jnp.linalg.cholesky(G + lam0 * jnp.eye(P, dtype=G.dtype))
    A = jsl.cho_solve((L, True), jnp.eye(P, dtype=G.dtype))
    r = jsl.solve_triangular(L, b, lower=True)
    return Evidence(Phi, G, b, 0.5 * (A + A.T), 2.0 * jnp.sum(jnp.log(jnp.diagonal(L))), r @ r)


def _take(a, blocks, axis):
    """Columns (``axis=1``) or rows (``axis=0``) of the blocks ``((start, width), ...)``."""
    return jnp.concatenate([lax.dynamic_slice_in_dim(a, st, w, axis) for st, w in blocks], axis)


def _put(a, blocks, val, axis):
    """Write ``val`` into the blocks of ``a``.

    Dynamic-update-slices, so that XLA updates the
    loop-carried buffers in place (index scatters made it copy the whole design each step).
    """
    off = 0
    for st, w in blocks:
        a = lax.dynamic_update_slice_in_dim(
            a, lax.slice_in_dim(val, off, off + w, axis=axis), st, axis
        )
        off += w
    return a


def _block_proposal(ev: Evidence, blocks, F, weights, y_eff, lam0):
    """Evidence pieces after replacing the column ``blocks`` of ``Phi`` by ``F`` (module docstring).

    ``blocks`` is a tuple of ``(start, width)`` with static widths summing to ``m``, the
    columns :math:`J`. Returns ``(logdet, quad, ok, update)`` where ``update`` carries what
    :func:`_apply_block` needs; cost :math:`O(NP + P^2 m)`.
    """
    m = F.shape[1]
    dtype = F.dtype
    WF = F * weights[:, None]
    cross = ev.Phi.T @ WF  # (P, m); rows J are stale and are replaced next
    FtWF = F.T @ WF
    FtWF = 0.5 * (FtWF + FtWF.T)  # keeps G bit-for-bit symmetric
    cross = _put(cross, blocks, FtWF, 0)
    bJ = F.T @ y_eff
    cR = _put(cross, blocks, jnp.zeros((m, m), dtype), 0)
    bnew = _put(ev.b, blocks, bJ, 0)
    bR = _put(bnew, blocks, jnp.zeros(m, dtype), 0)
    AJ = _take(ev.A, blocks, 1)
    AJJ = _take(AJ, blocks, 0)
    LJ = jnp.linalg.cholesky(AJJ)
    R = jnp.concatenate([cR, bR[:, None]], axis=1)
    T = ev.A @ R
    T = T - AJ @ jsl.cho_solve((LJ, True), AJ.T @ R)  # C R, with C = A - A_J A_JJ^-1 A_J^T
    h, Cb = T[:, :m], T[:, m]
    h = _put(h, blocks, jnp.zeros((m, m), dtype), 0)  # exact zeros in exact arithmetic
    S = FtWF + lam0 * jnp.eye(m, dtype=dtype) - cR.T @ h
    S = 0.5 * (S + S.T)
    LS = jnp.linalg.cholesky(S)
    logdet = (
        ev.logdet
        + 2.0 * jnp.sum(jnp.log(jnp.diagonal(LJ)))
        + 2.0 * jnp.sum(jnp.log(jnp.diagonal(LS)))
    )
    g = bJ - h.T @ bR
    r = jsl.solve_triangular(LS, g, lower=True)
    quad = bR @ Cb + r @ r
    ok = jnp.isfinite(logdet) & jnp.isfinite(quad)
    return logdet, quad, ok, (cross, bnew, AJ, LJ, h, LS)


def _apply_block(ev: Evidence, blocks, F, accept, logdet, quad, update):
    """Write the proposal into the state when ``accept``; a no-op (bit for bit) otherwise."""
    cross, bnew, AJ, LJ, h, LS = update
    m = F.shape[1]
    E = _put(-h, blocks, jnp.eye(m, dtype=h.dtype), 0)
    # A* = A - A_J A_JJ^-1 A_J^T + E S^-1 E^T; both factors zeroed when rejected
    left = jnp.concatenate(
        [jsl.solve_triangular(LJ, AJ.T, lower=True).T, jsl.solve_triangular(LS, E.T, lower=True).T],
        axis=1,
    )
    sign = jnp.concatenate([-jnp.ones(m, h.dtype), jnp.ones(m, h.dtype)])
    left = jnp.where(accept, left, 0.0)
    A = ev.A + (left * sign) @ left.T
    col = jnp.where(accept, cross, _take(ev.G, blocks, 1))
    G = _put(_put(ev.G, blocks, col, 1), blocks, col.T, 0)
    Phi = _put(ev.Phi, blocks, jnp.where(accept, F, _take(ev.Phi, blocks, 1)), 1)
    return Evidence(
        Phi,
        G,
        jnp.where(accept, bnew, ev.b),
        A,
        jnp.where(accept, logdet, ev.logdet),
        jnp.where(accept, quad, ev.quad),
    )


# --------------------------------------------------------------------------- design


def design_matrix(X, omega, v=None, mean_basis=None):
    """Design of the linear model for frequencies ``omega`` (and ``v``): ``(n, P)``.

    Stationary: :math:`[\\cos(X\\omega^\\top), \\sin(X\\omega^\\top)]/\\sqrt M`
    (Pena-Llamas et al. 2023, eq. 4, :func:`bayeskern.features.rff_features`). Locally stationary:
    :math:`(\\phi + \\phi^-)/2` (eq. 6 made positive semi-definite; module docstring).
    ``mean_basis`` columns are appended. Use this function to predict from draws of
    :func:`gibbs_sample`.
    """
    if v is None:
        Phi = rff_features(X, omega)
    else:
        phi, phi_m = locally_stationary_features(X, omega, v)
        Phi = 0.5 * (phi + phi_m)
    if mean_basis is not None:
        Phi = jnp.concatenate([Phi, jnp.asarray(mean_basis, Phi.dtype)], axis=1)
    return Phi


def _columns_omega(X, w, v, M):
    """Return new columns (n, 2 M2) for frequency ``w`` of f1 and their indices' order."""
    if v is None:
        Z = X @ w
        return jnp.stack([jnp.cos(Z), jnp.sin(Z)], axis=1) / jnp.sqrt(M)
    M2 = v.shape[0]
    Zp = X @ (0.5 * v + w).T  # (n, M2)
    Zm = X @ (w - 0.5 * v).T
    s = 0.5 / jnp.sqrt(M * M2)
    return jnp.concatenate([jnp.cos(Zp) + jnp.cos(Zm), jnp.sin(Zp) + jnp.sin(Zm)], axis=1) * s


def _blocks_omega(j, M, M2, ls):
    """Return the column blocks of frequency ``j`` of f1.

    Its cosine and sine (one per ``v_k`` when locally
    stationary), as ``(start, width)`` blocks in the order of :func:`_columns_omega`.
    """
    if not ls:
        return ((j, 1), (M + j, 1))
    return tuple((k * M + j, 1) for k in range(M2)) + tuple(
        (M * M2 + k * M + j, 1) for k in range(M2)
    )


def _blocks_v(k, M1, M2):
    """Columns of frequency ``k`` of f2: two contiguous blocks of width ``M1``."""
    return ((k * M1, M1), (M1 * M2 + k * M1, M1))


def _columns_vk(X, omega, vk, M2):
    M1 = omega.shape[0]
    Zp = X @ (0.5 * vk + omega).T  # (n, M1)
    Zm = X @ (omega - 0.5 * vk).T
    s = 0.5 / jnp.sqrt(M1 * M2)
    return jnp.concatenate([jnp.cos(Zp) + jnp.cos(Zm), jnp.sin(Zp) + jnp.sin(Zm)], axis=1) * s


# --------------------------------------------------------------------------- init / sweep


def _pairwise_sq_quantiles(key, X, levels):
    n = X.shape[0]
    idx = jax.random.choice(key, n, (min(n, 500),), replace=False)
    Xs = X[idx]
    D = jnp.sum((Xs[:, None, :] - Xs[None, :, :]) ** 2, -1)
    iu = jnp.triu_indices(Xs.shape[0], 1)
    D = D[iu]
    q = jnp.quantile(D, jnp.asarray(levels, X.dtype))
    # duplicated rows make small quantiles zero; fall back to the smallest positive distance
    pos = jnp.min(jnp.where(D > 0, D, jnp.inf))
    return jnp.maximum(q, jnp.where(jnp.isfinite(pos), pos, 1.0))


def _init_dp(key, M, d, K, K0, prec_init, dtype):
    """BaNK's initialization: ``K0`` components at 0 with covariances ``I/q_k``, round robin."""
    z = jnp.arange(M) % K0
    counts = jnp.bincount(z, length=K)
    prec_sd = jnp.concatenate([jnp.sqrt(prec_init), jnp.ones(K - K0, dtype)])
    U = jnp.eye(d, dtype=dtype)[None] * prec_sd[:, None, None]
    mu = jnp.zeros((K, d), dtype)
    eps = jax.random.normal(key, (M, d), dtype)
    points = eps / prec_sd[z][:, None]
    dp = DPState(z.astype(jnp.int32), counts.astype(jnp.int32), mu, U, jnp.asarray(1.0, dtype))
    return dp, points


def _sizes(M, prior: GibbsPrior):
    K0 = prior.init_components or max(1, M // 10)
    K0 = min(K0, M)
    K = prior.max_components or min(M, max(2 * K0, 20))
    return max(K, K0), K0


def init(
    key, X, y, *, task, n_features, n_features_v=0, mean_basis=None, prior: GibbsPrior | None = None
):
    """Build the initial :class:`GibbsState`, static :class:`SweepConfig` and :class:`GibbsData`.

    Returns ``(state, config, data)``; pass them to :func:`build_sweep`.
    """
    prior = GibbsPrior() if prior is None else prior
    n, d = X.shape
    dtype = X.dtype
    M, M2 = n_features, n_features_v
    ls = M2 > 0
    k1, k2 = jax.random.split(key)
    # fixed key: the data-scaled prior must not differ between chains
    kq = jax.random.PRNGKey(0)
    K, K0 = _sizes(M, prior)
    lev = np.linspace(prior.init_quantiles[0], prior.init_quantiles[1], K0)
    q = _pairwise_sq_quantiles(kq, X, np.concatenate([lev, [prior.psi_quantile]]))
    hyper_1 = (jnp.zeros(d, dtype), jnp.eye(d, dtype=dtype) / q[-1])
    # component k starts as the spectral density of an RBF of squared length-scale q_k
    dp, omega = _init_dp(k1, M, d, K, K0, q[:-1], dtype)
    dp_v, v, hyper_2 = None, None, None
    if ls:
        K2, K02 = _sizes(M2, prior)
        lev2 = np.linspace(prior.init_quantiles[0], prior.init_quantiles[1], K02)
        q2 = _pairwise_sq_quantiles(kq, X, np.concatenate([lev2, [prior.psi_quantile]]))
        dp_v, v = _init_dp(k2, M2, d, K2, K02, q2[:-1], dtype)
        hyper_2 = (jnp.zeros(d, dtype), jnp.eye(d, dtype=dtype) / q2[-1])
    Phi = design_matrix(X, omega, v, mean_basis)
    P = Phi.shape[1]
    lam0 = jnp.asarray(prior.prior_precision if prior.prior_precision is not None else 1.0, dtype)
    weights = jnp.ones(n, dtype) if task == "regression" else jnp.full(n, 0.25, dtype)
    y_eff = y if task == "regression" else y - 0.5
    G = (Phi * weights[:, None]).T @ Phi
    ev = _evidence_from_G(Phi, G, Phi.T @ y_eff, lam0)
    state = GibbsState(
        omega, dp, v, dp_v, ev, lam0, weights, jnp.zeros(P, dtype), jnp.asarray(1.0, dtype)
    )
    cfg = SweepConfig(task, M, M2, ls, prior)
    hv = (None, None) if hyper_2 is None else hyper_2
    data = GibbsData(X, y, y_eff, y @ y, *hyper_1, *hv)
    return state, cfg, data


def _mh_moves(key, ev, data: GibbsData, weights, lam0, cfg: SweepConfig, params, dp, which, other):
    """Random-order independence-MH moves of every frequency of one mixture."""
    X, y_eff = data.X, data.y_eff
    n = X.shape[0]
    P = ev.Phi.shape[1]
    M, M2, ls = cfg.M, cfg.M2, cfg.locally_stationary
    task, prior = cfg.task, cfg.prior
    kperm, kmove = jax.random.split(key)
    count = params.shape[0]
    order = jax.random.permutation(kperm, count)

    def ell(logdet, quad):
        return _log_evidence(task, logdet, quad, lam0, P, n, data.yy, prior)

    def step(carry, inp):
        ev, params, ell_cur, n_acc = carry
        j, key = inp
        k1, k2 = jax.random.split(key)
        w = _propose_from_component(k1, dp, j)
        if which == "omega":
            F = _columns_omega(X, w, other, M)
            J = _blocks_omega(j, M, M2, ls)
        else:
            F = _columns_vk(X, other, w, M2)
            J = _blocks_v(j, M, M2)
        if cfg.evidence == "full":
            Phi_new = _put(ev.Phi, J, F, 1)
            ell_new = full_log_evidence(Phi_new, y_eff, weights, lam0, task, prior)
            ok = jnp.isfinite(ell_new)
            accept = ok & (jnp.log(jax.random.uniform(k2, dtype=X.dtype)) < ell_new - ell_cur)
            ev = ev._replace(Phi=jnp.where(accept, Phi_new, ev.Phi))
        else:
            logdet, quad, ok, upd = _block_proposal(ev, J, F, weights, y_eff, lam0)
            ell_new = ell(logdet, quad)
            accept = ok & (jnp.log(jax.random.uniform(k2, dtype=X.dtype)) < ell_new - ell_cur)
            ev = _apply_block(ev, J, F, accept, logdet, quad, upd)
        params = params.at[j].set(jnp.where(accept, w, params[j]))
        ell_cur = jnp.where(accept, ell_new, ell_cur)
        return (ev, params, ell_cur, n_acc + accept), None

    ell0 = ell(ev.logdet, ev.quad)
    (ev, params, ell_end, n_acc), _ = lax.scan(
        step, (ev, params, ell0, jnp.asarray(0)), (order, jax.random.split(kmove, count))
    )
    return ev, params, ell_end, n_acc / count


def build_sweep(cfg: SweepConfig, data: GibbsData):
    """Build the BlackJAX-style sweep ``(key, state) -> (state, info)`` for ``data``.

    Pure; jit it.

    ``info`` holds ``accept_rate`` (and ``accept_rate_v``), ``drift`` (absolute gap between
    the rank-updated and the exactly refactorized log evidence before the refresh),
    ``log_marginal`` (regression) or ``log_lik`` (classification).
    """
    return lambda key, state: _sweep(cfg, key, state, data)


def _sweep(cfg: SweepConfig, key, state: GibbsState, data: GibbsData):
    """One sweep (module docstring); ``cfg`` static, everything else traced."""
    task, prior = cfg.task, cfg.prior
    X, y, y_eff = data.X, data.y, data.y_eff
    n = X.shape[0]
    dtype = X.dtype
    hyper_1, hyper_2 = (data.m0, data.Psi0), (data.m0_v, data.Psi0_v)
    keys = jax.random.split(key, 8)
    ev, lam0, weights, beta = state.ev, state.lam0, state.weights, state.beta
    P = ev.Phi.shape[1]
    if task == "classification":
        # Polya-Gamma variables given the current weights, then an exact refactorization
        weights = bkr.polya_gamma(keys[0], ev.Phi @ beta)
        G = (ev.Phi * weights[:, None]).T @ ev.Phi
        ev = _evidence_from_G(ev.Phi, G, ev.b, lam0)
    dp = _dp_update(keys[1], state.dp, state.omega, hyper_1, prior)
    ev, omega, ell_end, acc = _mh_moves(
        keys[2], ev, data, weights, lam0, cfg, state.omega, dp, "omega", state.v
    )
    info = {"accept_rate": acc}
    dp_v, v = state.dp_v, state.v
    if cfg.locally_stationary:
        dp_v = _dp_update(keys[3], state.dp_v, state.v, hyper_2, prior)
        ev, v, ell_end, acc_v = _mh_moves(
            keys[4], ev, data, weights, lam0, cfg, state.v, dp_v, "v", omega
        )
        info["accept_rate_v"] = acc_v
    if cfg.evidence == "full":
        G = (ev.Phi * weights[:, None]).T @ ev.Phi
        ev = ev._replace(G=0.5 * (G + G.T), b=ev.Phi.T @ y_eff)
    noise = state.noise
    if task == "regression":
        s, Q = jnp.linalg.eigh(ev.G)
        s = jnp.maximum(s, 0.0)
        c2 = (Q.T @ ev.b) ** 2

        def ell_lam(lam):
            return _log_evidence(
                task, jnp.sum(jnp.log(lam + s)), jnp.sum(c2 / (lam + s)), lam, P, n, data.yy, prior
            )

        info["drift"] = jnp.abs(ell_end - ell_lam(lam0))
        if prior.prior_precision is None:

            def lam_target(u):  # log lambda_0, Gamma prior plus the Jacobian
                lam = jnp.exp(u)
                return ell_lam(lam) + prior.lam_shape * u - prior.lam_rate * lam

            def rw(carry, k):
                u, lp = carry
                ka, kb = jax.random.split(k)
                u_new = u + prior.lam_step_size * jax.random.normal(ka, dtype=dtype)
                lp_new = lam_target(u_new)
                acc = jnp.log(jax.random.uniform(kb, dtype=dtype)) < lp_new - lp
                return (jnp.where(acc, u_new, u), jnp.where(acc, lp_new, lp)), None

            u0 = jnp.log(lam0)
            (u, _), _ = lax.scan(
                rw, (u0, lam_target(u0)), jax.random.split(keys[5], prior.lam_steps)
            )
            lam0 = jnp.exp(u)
        A = (Q / (lam0 + s)) @ Q.T
        ev = ev._replace(
            A=0.5 * (A + A.T), logdet=jnp.sum(jnp.log(lam0 + s)), quad=jnp.sum(c2 / (lam0 + s))
        )
        info["log_marginal"] = _log_evidence(task, ev.logdet, ev.quad, lam0, P, n, data.yy, prior)
        aN = prior.a0 + 0.5 * n
        bN = prior.b0 + 0.5 * jnp.maximum(data.yy - ev.quad, 0.0)
        noise = jnp.sqrt(bN / bkr.gamma(keys[6], jnp.asarray(aN, dtype)))
    else:
        L = jnp.linalg.cholesky(ev.G + lam0 * jnp.eye(P, dtype=dtype))
        exact = _log_evidence(
            task,
            2 * jnp.sum(jnp.log(jnp.diagonal(L))),
            jnp.sum(jsl.solve_triangular(L, ev.b, lower=True) ** 2),
            lam0,
            P,
            n,
            0.0,
            prior,
        )
        info["drift"] = jnp.abs(ell_end - exact)
        eps = jax.random.normal(keys[5], (P,), dtype)
        beta = jsl.cho_solve((L, True), ev.b) + jsl.solve_triangular(L.T, eps, lower=False)
        if prior.prior_precision is None:
            lam0 = bkr.gamma(keys[6], jnp.asarray(prior.lam_shape + 0.5 * P, dtype)) / (
                prior.lam_rate + 0.5 * beta @ beta
            )
        psi = ev.Phi @ beta
        info["log_lik"] = jnp.sum(y * psi - jnp.logaddexp(0.0, psi))
    state = GibbsState(omega, dp, v, dp_v, ev, lam0, weights, beta, noise)
    return state, info


def _record(state: GibbsState, info, cfg: SweepConfig):
    out = {
        "omega": state.omega,
        "z": state.dp.z,
        "alpha": state.dp.alpha,
        "n_components": jnp.sum(state.dp.counts > 0),
        "weights": state.dp.counts / cfg.M,
        "mu": state.dp.mu,
        "prec_chol": state.dp.U,
        "prior_precision": state.lam0,
    }
    if cfg.locally_stationary:
        out.update(
            v=state.v,
            z_v=state.dp_v.z,
            alpha_v=state.dp_v.alpha,
            n_components_v=jnp.sum(state.dp_v.counts > 0),
            weights_v=state.dp_v.counts / cfg.M2,
            mu_v=state.dp_v.mu,
            prec_chol_v=state.dp_v.U,
        )
    if cfg.task == "regression":
        out.update(log_marginal=info["log_marginal"], noise=state.noise)
    else:
        out.update(beta=state.beta, log_lik=info["log_lik"])
    stats = {k: v for k, v in info.items() if k not in ("log_marginal", "log_lik")}
    return out, stats


# --------------------------------------------------------------------------- driver


def _validate(
    X,
    y,
    task,
    n_features,
    n_features_v,
    num_warmup,
    num_samples,
    num_chains,
    mean_basis,
    dtype,
    chain_method,
    evidence,
):
    if task not in ("regression", "classification"):
        raise ValueError(f"task must be 'regression' or 'classification', got {task!r}")
    for name, val, lo in (
        ("n_features", n_features, 1),
        ("n_features_v", n_features_v, 0),
        ("num_warmup", num_warmup, 0),
        ("num_samples", num_samples, 1),
        ("num_chains", num_chains, 1),
    ):
        if isinstance(val, bool) or not isinstance(val, (int, np.integer)) or val < lo:
            raise ValueError(f"{name} must be an integer >= {lo}, got {val!r}")
    if dtype not in ("float64", "float32", np.float64, np.float32):
        raise ValueError(f"dtype must be 'float64' or 'float32', got {dtype!r}")
    if chain_method not in ("auto", "sequential", "processes", "vectorized", "parallel"):
        raise ValueError(
            "chain_method must be 'auto', 'sequential', 'processes', 'vectorized' or "
            f"'parallel', got {chain_method!r}"
        )
    if chain_method == "processes" and jax.default_backend() != "cpu":
        raise ValueError(
            "chain_method='processes' shares the chains out to CPU cores, but JAX runs on "
            f"{jax.default_backend()!r} here (each process would claim the device); use "
            "'vectorized' or 'sequential'"
        )
    if evidence not in ("rank", "full"):
        raise ValueError(f"evidence must be 'rank' or 'full', got {evidence!r}")
    try:
        X = np.asarray(X, dtype=np.float64)
        y = np.asarray(y, dtype=np.float64)
    except (TypeError, ValueError) as err:
        raise TypeError(f"X and y must be numeric arrays: {err}") from None
    if X.ndim != 2 or X.shape[0] < 2 or X.shape[1] < 1:
        raise ValueError(f"X must be a 2-D array with at least 2 rows, got shape {X.shape}")
    if y.shape != (X.shape[0],):
        raise ValueError(f"y must have shape ({X.shape[0]},) to match X, got {y.shape}")
    if not np.all(np.isfinite(X)):
        raise ValueError("X contains NaN or infinite values")
    if not np.all(np.isfinite(y)):
        raise ValueError("y contains NaN or infinite values")
    if task == "classification":
        labels = np.unique(y)
        if not np.all(np.isin(labels, (0.0, 1.0))):
            raise ValueError(f"y must hold 0/1 labels for classification, got {labels[:5]}")
        if labels.size < 2:
            raise ValueError("y has one class only; classification needs both 0 and 1")
    if mean_basis is not None:
        mean_basis = np.asarray(mean_basis, dtype=np.float64)
        if mean_basis.ndim != 2 or mean_basis.shape[0] != X.shape[0]:
            raise ValueError(
                f"mean_basis must have shape ({X.shape[0]}, p), got {mean_basis.shape}"
            )
        if not np.all(np.isfinite(mean_basis)):
            raise ValueError("mean_basis contains NaN or infinite values")
    return X, y, mean_basis


class GibbsMCMCState(NamedTuple):
    """State of :class:`GaBaSRGibbs` as :class:`numpyro.infer.MCMC` carries it.

    ``draws`` (the ``sample_field``) holds what one sweep records (:func:`_record`);
    ``accept_rate``, ``accept_rate_v`` and ``drift`` are per-sweep statistics that
    ``MCMC.run(..., extra_fields=...)`` collects.
    """

    rng_key: jax.Array
    sampler: GibbsState
    data: GibbsData
    draws: dict
    accept_rate: jax.Array
    accept_rate_v: jax.Array
    drift: jax.Array


class GaBaSRGibbs(MCMCKernel):
    """The GaBaSR Gibbs/Metropolis-Hastings sweep as a NumPyro ``MCMCKernel``.

    It samples the paper's model (Pena-Llamas et al. 2023, sections 3.2 and eqs.
    10-11; parent BaNK, Oliva et al. 2016):

    .. math:: G \\sim \\mathrm{DP}(\\alpha, NIW(m_0, \\kappa_0, \\nu_0, \\Psi_0)),\\quad
              \\omega_j \\mid G \\sim \\int N(\\mu, \\Sigma)\\,dG,\\quad
              y \\mid \\Omega \\sim \\text{linear model on }
              \\Phi_\\Omega(x) = [\\cos(\\Omega x), \\sin(\\Omega x)]/\\sqrt M

    with the weights integrated out (normal-inverse-gamma evidence for regression,
    Polya-Gamma-augmented Gaussian evidence for classification).

    One :meth:`sample` call is one sweep of the paper's sampler (module docstring;
    Pena-Llamas et al. 2023, section 3.2): CRP assignments, normal-inverse-Wishart component draws,
    the DP concentration, independence-MH moves of every frequency with the weights integrated
    out, then the weight prior precision (and, for classification, Polya-Gamma variables
    and the weights). :class:`numpyro.infer.MCMC` drives it, so chains, ``num_warmup``
    (discarded sweeps), progress bars and ``az.from_numpyro`` work as for NUTS. The model
    is not a NumPyro function: it is the random-feature model with free frequencies drawn
    from a Dirichlet-process mixture (CRP form) of Pena-Llamas et al. (2023), given to
    :meth:`MCMC.run <numpyro.infer.MCMC.run>` as data: ``mcmc.run(key, X=X, y=y, mean_basis=B)``.

    Parameters
    ----------
    task : {"regression", "classification"}
        Regression: NIG evidence (eq. 10); classification: Bernoulli-logit (eq. 11) with
        Polya-Gamma augmentation.
    n_features : int
        Number of frequencies :math:`M` (:math:`M_1` when locally stationary).
    n_features_v : int, default 0
        :math:`M_2`, frequencies of the envelope :math:`\\kappa_1` (eq. 6); 0 for the
        stationary kernel.
    prior : GibbsPrior, optional
    evidence : {"rank", "full"}
        Rank-updated or recomputed evidence for each proposal (same chain, different cost).

    Examples
    --------
    >>> from numpyro.infer import MCMC
    >>> mcmc = MCMC(GaBaSRGibbs("regression", 16), num_warmup=5, num_samples=20)
    >>> mcmc.run(jax.random.PRNGKey(0), X=X, y=y)  # doctest: +SKIP
    >>> mcmc.get_samples()["log_marginal"]  # doctest: +SKIP
    """

    sample_field = "draws"

    def __init__(
        self,
        task: str = "regression",
        n_features: int = 250,
        *,
        n_features_v: int = 0,
        prior: GibbsPrior | None = None,
        evidence: str = "rank",
    ):
        if task not in ("regression", "classification"):
            raise ValueError(f"task must be 'regression' or 'classification', got {task!r}")
        for name, val, lo in (("n_features", n_features, 1), ("n_features_v", n_features_v, 0)):
            if isinstance(val, bool) or not isinstance(val, (int, np.integer)) or val < lo:
                raise ValueError(f"{name} must be an integer >= {lo}, got {val!r}")
        if evidence not in ("rank", "full"):
            raise ValueError(f"evidence must be 'rank' or 'full', got {evidence!r}")
        prior = GibbsPrior() if prior is None else prior
        if not isinstance(prior, GibbsPrior):
            raise TypeError(f"prior must be a GibbsPrior, got {type(prior).__name__}")
        self.config = SweepConfig(
            task, int(n_features), int(n_features_v), n_features_v > 0, prior, evidence
        )
        self.model = None  # no NumPyro model function: az.from_numpyro then skips the trace

    def __eq__(self, other):
        return type(other) is type(self) and other.config == self.config

    def __hash__(self):  # equal settings share compiled loops (_compiled_chain)
        return hash((type(self), self.config))

    def init(self, rng_key, num_warmup, init_params, model_args, model_kwargs):
        """Return BaNK's initial state from ``model_kwargs`` ``X``, ``y`` (and ``mean_basis``)."""
        cfg = self.config
        k_init, k_run = jax.random.split(rng_key)
        st, _, data = init(
            k_init,
            model_kwargs["X"],
            model_kwargs["y"],
            task=cfg.task,
            n_features=cfg.M,
            n_features_v=cfg.M2,
            mean_basis=model_kwargs.get("mean_basis"),
            prior=cfg.prior,
        )
        info = jax.eval_shape(functools.partial(_sweep, cfg), k_run, st, data)[1]
        info = jax.tree.map(lambda a: jnp.zeros(a.shape, a.dtype), info)
        return self._state(k_run, st, data, info)

    def _state(self, key, st, data, info):
        draws, stats = _record(st, info, self.config)
        zero = jnp.zeros((), stats["accept_rate"].dtype)
        return GibbsMCMCState(
            key,
            st,
            data,
            draws,
            stats["accept_rate"],
            stats.get("accept_rate_v", zero),
            stats["drift"],
        )

    def sample(self, state, model_args, model_kwargs):
        """One sweep (module docstring)."""
        key, sub = jax.random.split(state.rng_key)
        st, info = _sweep(self.config, sub, state.sampler, state.data)
        return self._state(key, st, state.data, info)


class GibbsResult(NamedTuple):
    """Draws of :func:`gibbs_sample`, the chains' last state and the sampling time.

    Dicts of arrays shaped ``(chain, draw, ...)``, the last
    :class:`GibbsMCMCState` of the chains (``None`` when they ran in worker processes), and
    the sampling wall time in seconds.
    """

    samples: dict
    sample_stats: dict
    last_state: object
    wall_time: float


@functools.lru_cache(maxsize=32)
def _compiled_chain(kernel: GaBaSRGibbs, num_warmup: int, num_samples: int, vectorized: bool):
    """Return the compiled chain ``(state) -> (last_state, draws, stats)``.

    ``num_warmup + num_samples`` calls of
    ``kernel.sample`` in one ``lax.scan``, keeping the last ``num_samples``: what
    ``numpyro.infer.MCMC`` does with the kernel, compiled once per kernel, settings and
    shapes (``MCMC`` builds a new loop, and XLA recompiles the sweep, at every ``run``).
    """
    fields = ("accept_rate", "drift") + (("accept_rate_v",) if kernel.config.M2 else ())

    def run(state):
        def step(s, _):
            s = kernel.sample(s, (), {})
            return s, (s.draws, {f: getattr(s, f) for f in fields})

        state, (draws, stats) = lax.scan(step, state, None, length=num_warmup + num_samples)
        return state, *jax.tree.map(lambda a: a[num_warmup:], (draws, stats))

    return jax.jit(jax.vmap(run) if vectorized else run)


def _chains_in_process(config: str, num_warmup: int, num_samples: int, keys, X, y, mean_basis):
    """Run the chains of ``keys`` one after another: a worker of ``chain_method="processes"``.

    The same chains as the ``"sequential"`` method (same initial states, same compiled
    loop). ``config`` is the :class:`SweepConfig` as JSON (:func:`_config_json`). Returns
    ``draws/<name>`` and ``stats/<name>`` arrays, chains first.
    """
    c = json.loads(config)
    prior = GibbsPrior(**{k: tuple(v) if isinstance(v, list) else v for k, v in c["prior"].items()})
    kernel = GaBaSRGibbs(
        c["task"], c["M"], n_features_v=c["M2"], prior=prior, evidence=c["evidence"]
    )
    data = {
        k: None if v is None else jnp.asarray(v)
        for k, v in dict(X=X, y=y, mean_basis=mean_basis).items()
    }
    run = _compiled_chain(kernel, num_warmup, num_samples, False)
    per_chain = [run(kernel.init(jnp.asarray(k), num_warmup, None, (), data))[1:] for k in keys]
    draws, stats = jax.tree.map(lambda *a: np.stack(a), *per_chain)
    return {
        **{f"draws/{k}": v for k, v in draws.items()},
        **{f"stats/{k}": v for k, v in stats.items()},
    }


def _config_json(config: SweepConfig) -> str:
    """``config`` as JSON for a worker process (no pickle)."""
    return json.dumps({**config._asdict(), "prior": config.prior._asdict()})


def _auto_chain_method(n: int, n_columns: int, sweeps: int, num_chains: int) -> str:
    """Return ``"processes"`` when the chains' work pays for starting processes.

    The work of a sweep grows as :math:`n P^2` for :math:`P` design columns (the
    rank-updated evidence and the weights' factorizations), so the chains' total is
    ``num_chains * sweeps * n * P**2``, compared with
    :data:`bayeskern.inference.processes.PROCESS_WORK`. On an accelerator (JAX's default
    backend is not the CPU) the chains are batched into one program instead
    (``"vectorized"``): processes would each claim the device.
    """
    if jax.default_backend() != "cpu":
        return "vectorized" if num_chains > 1 else "sequential"
    work = float(num_chains) * sweeps * n * n_columns**2
    if num_chains > 1 and work >= PROCESS_WORK and can_start_processes():
        return "processes"
    return "sequential"


def _run_in_processes(kernel, key, data, num_warmup, num_samples, num_chains, progress_bar):
    """Run the chains of ``"sequential"``, shared out to :func:`process_count` processes."""
    keys = np.asarray(jax.random.split(key, num_chains) if num_chains > 1 else key[None])
    X, y, B = (None if data[k] is None else np.asarray(data[k]) for k in ("X", "y", "mean_basis"))
    config = _config_json(kernel.config)
    groups = np.array_split(keys, process_count(num_chains))
    bar = tqdm(total=num_chains, desc="chains", disable=not progress_bar)
    with bar:
        outs = map_in_processes(
            _chains_in_process,
            [(config, num_warmup, num_samples, g, X, y, B) for g in groups],
            on_done=lambda: bar.update(num_chains // len(groups)),
        )
    joined = {k: np.concatenate([o[k] for o in outs]) for k in outs[0]}
    samples = {k.split("/", 1)[1]: v for k, v in joined.items() if k.startswith("draws/")}
    stats = {k.split("/", 1)[1]: v for k, v in joined.items() if k.startswith("stats/")}
    return samples, stats, None


def gibbs_sample(
    key,
    X,
    y,
    *,
    task: str = "regression",
    n_features: int = 250,
    locally_stationary: bool = False,
    n_features_v: int | None = None,
    num_warmup: int = 5,
    num_samples: int = 20,
    num_chains: int = 1,
    prior: GibbsPrior | None = None,
    mean_basis=None,
    progress_bar: bool = False,
    dtype: str = "float64",
    chain_method: str = "sequential",
    evidence: str = "rank",
) -> GibbsResult:
    """Run the GaBaSR Gibbs/MH sampler (Pena-Llamas et al. 2023, section 3.2) and return its draws.

    Builds :class:`GaBaSRGibbs` and runs it with :class:`numpyro.infer.MCMC`.

    Parameters
    ----------
    key : jax PRNG key or int
        Same key and settings give the same draws.
    X : (n, d) array
        Inputs, already standardized by the caller.
    y : (n,) array
        Standardized targets (regression) or 0/1 labels (classification).
    task : {"regression", "classification"}
    n_features : int
        Number of frequencies :math:`M` (``M_1`` when locally stationary); the design has
        :math:`2M` feature columns (stationary).
    locally_stationary : bool
        Use the locally stationary kernel (eq. 6) with a second mixture over ``v``.
    n_features_v : int, optional
        :math:`M_2`, frequencies of :math:`\\kappa_1` (default 4); the design then has
        :math:`2 M_1 M_2` feature columns.
    num_warmup, num_samples : int
        Sweeps discarded, sweeps recorded (one draw per sweep).
    num_chains : int
        Independent chains, each from its own initialization.
    prior : GibbsPrior
    mean_basis : (n, p) array, optional
        Fixed extra columns of the design (a trend), with the same weight prior.
    progress_bar : bool
        NumPyro's progress bar over sweeps (the sweeps then run one jitted call each
        instead of one compiled loop; rounding may differ in the last bits between the two).
    dtype : {"float64", "float32"}
    chain_method : {"sequential", "processes", "auto", "vectorized", "parallel"}
        ``"sequential"``: the chains one after the other in one compiled loop;
        ``"processes"``: the same chains (the same draws) shared out to one new Python process
        per core (:mod:`bayeskern.inference.processes`; a progress bar then counts finished
        chains); ``"auto"``: ``"processes"`` when the chains' work, ``chains * sweeps * n *
        P**2`` for ``P`` design columns, reaches
        :data:`bayeskern.inference.processes.PROCESS_WORK` and this process may start others,
        else ``"sequential"``; on a GPU or another accelerator ``"auto"`` is ``"vectorized"``
        and ``"processes"`` is refused (each process would claim the device).
        ``"vectorized"`` and ``"parallel"``: ``numpyro.infer.MCMC``'s (batched with ``vmap``,
        one chain per device), which can hang XLA:CPU.
    evidence : {"rank", "full"}
        ``"full"`` recomputes the evidence from scratch for every proposal (reference for
        timing; same algorithm, :math:`O(NP^2+P^3)` per proposal).

    Returns
    -------
    GibbsResult
        ``samples`` with ``omega`` (chain, draw, M, d), ``z``, ``alpha``, ``n_components``,
        ``weights`` (component fractions, (chain, draw, K)), ``mu``, ``cov`` (component
        parameters, (chain, draw, K, d[, d])), ``prior_precision``; ``log_marginal`` and
        ``noise`` (regression), ``beta`` (chain, draw, P) and ``log_lik`` (classification);
        with ``locally_stationary`` also ``v``, ``z_v``, ``alpha_v``, ``n_components_v``,
        ``weights_v``, ``mu_v``, ``cov_v``. ``sample_stats`` has ``accept_rate``
        (``accept_rate_v``) and ``drift``. Predict with :func:`design_matrix`,
        :func:`predict_regression` or :func:`predict_proba`.
    """
    prior = GibbsPrior() if prior is None else prior
    if not isinstance(prior, GibbsPrior):
        raise TypeError(f"prior must be a GibbsPrior, got {type(prior).__name__}")
    n_features_v = (4 if n_features_v is None else n_features_v) if locally_stationary else 0
    X, y, mean_basis = _validate(
        X,
        y,
        task,
        n_features,
        n_features_v,
        num_warmup,
        num_samples,
        num_chains,
        mean_basis,
        dtype,
        chain_method,
        evidence,
    )
    jdtype = jnp.float64 if np.dtype(dtype) == np.float64 else jnp.float32
    if jdtype == jnp.float64 and not jax.config.jax_enable_x64:
        raise ValueError("dtype='float64' needs jax_enable_x64 (import bayeskern turns it on)")
    if isinstance(key, (int, np.integer)):
        key = jax.random.PRNGKey(int(key))
    kernel = GaBaSRGibbs(
        task, n_features, n_features_v=n_features_v, prior=prior, evidence=evidence
    )
    data = dict(
        X=jnp.asarray(X, jdtype),
        y=jnp.asarray(y, jdtype),
        mean_basis=None if mean_basis is None else jnp.asarray(mean_basis, jdtype),
    )
    t0 = time.perf_counter()
    if chain_method == "auto":
        columns = 2 * n_features * max(n_features_v, 1)
        columns += 0 if mean_basis is None else mean_basis.shape[1]
        chain_method = _auto_chain_method(len(X), columns, num_warmup + num_samples, num_chains)
    if chain_method == "processes":
        samples, stats, last = _run_in_processes(
            kernel, key, data, num_warmup, num_samples, num_chains, progress_bar
        )
    elif progress_bar or chain_method == "parallel":
        mcmc = MCMC(
            kernel,
            num_warmup=num_warmup,
            num_samples=num_samples,
            num_chains=num_chains,
            chain_method=chain_method,
            progress_bar=progress_bar,
        )
        fields = ("accept_rate", "drift") + (("accept_rate_v",) if locally_stationary else ())
        with warnings.catch_warnings():
            # "not enough devices to run parallel chains": MCMC then runs them one by one
            warnings.filterwarnings("ignore", message=".*enough devices.*")
            mcmc.run(key, extra_fields=fields, **data)
        samples = mcmc.get_samples(group_by_chain=True)
        stats = mcmc.get_extra_fields(group_by_chain=True)
        last = mcmc.last_state
        if chain_method == "parallel":  # NumPyro pmaps a new closure per run
            release_pmap_programs()
    else:
        # the same chains as MCMC(kernel).run(key, **data) (its key split and collection),
        # with the compiled loop cached across calls
        keys = jax.random.split(key, num_chains) if num_chains > 1 else key[None]
        states = [kernel.init(k, num_warmup, None, (), data) for k in keys]
        if chain_method == "vectorized":
            run = _compiled_chain(kernel, num_warmup, num_samples, True)
            last, samples, stats = run(jax.tree.map(lambda *a: jnp.stack(a), *states))
        else:
            run = _compiled_chain(kernel, num_warmup, num_samples, False)
            out = [run(st) for st in states]
            last = [o[0] for o in out]
            samples, stats = jax.tree.map(lambda *a: jnp.stack(a), *[o[1:] for o in out])
    samples, stats = jax.tree.map(np.asarray, (samples, stats))
    wall = time.perf_counter() - t0
    for suffix in ("", "_v"):
        if "prec_chol" + suffix in samples:
            U = samples.pop("prec_chol" + suffix)
            samples["cov" + suffix] = np.linalg.inv(U @ np.swapaxes(U, -1, -2))
    for k in list(samples) + list(stats):
        d = samples if k in samples else stats
        if not np.all(np.isfinite(d[k])):
            raise FloatingPointError(
                f"the Gibbs sampler produced non-finite values in {k!r}; the design is "
                "probably ill-conditioned (try dtype='float64' or a larger prior_precision)"
            )
    return GibbsResult(samples, stats, last, wall)


# --------------------------------------------------------------------------- prediction


def _flat_regression_draws(samples):
    """Draws ``(omega, prior_precision, v)`` with chains and draws flattened into one axis."""
    om = np.asarray(samples["omega"])
    om = om.reshape((-1,) + om.shape[-2:])
    lam = np.asarray(samples["prior_precision"]).reshape(-1)
    if "v" in samples:
        vv = np.asarray(samples["v"])
        vv = vv.reshape((-1,) + vv.shape[-2:])
        return jnp.asarray(om), jnp.asarray(lam), jnp.asarray(vv), True
    return jnp.asarray(om), jnp.asarray(lam), jnp.zeros((om.shape[0], 1, 1)), False


def regression_posteriors(
    samples,
    X_train,
    y_train,
    *,
    mean_basis=None,
    prior: GibbsPrior | None = None,
    chunk_size: int | None = None,
    draws=None,
) -> blr.NIGPosterior:
    """Stacked NIG posteriors of weights and noise, one per draw (Pena-Llamas et al. 2023, eq. 10).

    :math:`\\Lambda_N = \\Phi^\\top\\Phi + \\lambda_0 I`,
    :math:`w_N = \\Lambda_N^{-1}\\Phi^\\top y`,
    :math:`a_N = a_0 + N/2`, :math:`b_N = b_0 + (y^\\top y - w_N^\\top\\Phi^\\top y)/2` with the
    draw's design (:func:`design_matrix`). ``chunk_size`` sums the statistics over row chunks
    (:func:`bayeskern.blr.scan_feature_stats`), so ``X_train`` may have millions of rows;
    ``draws`` (indices into the flattened draws) restricts the computation to those draws.
    """
    prior = GibbsPrior() if prior is None else prior
    om, lam, vs, has_v = _flat_regression_draws(samples)
    if draws is not None:
        om, lam, vs = om[draws], lam[draws], vs[draws]
    return _posteriors_per_draw(
        (om, lam, vs),
        jnp.asarray(X_train),
        jnp.asarray(y_train),
        mean_basis,
        prior.a0,
        prior.b0,
        has_v=has_v,
        chunk_size=chunk_size,
    )


# The maps over draws below are module-level jitted functions with the data as arguments, so
# that repeated predictions of the same shapes compile nothing.
@functools.partial(jax.jit, static_argnames=("has_v", "chunk_size"))
def _posteriors_per_draw(draws, Xt, yt, mean_basis, a0, b0, *, has_v, chunk_size):
    def one(t):
        omega, lam0, v = t[0], t[1], t[2] if has_v else None
        rows = (Xt,) if mean_basis is None else (Xt, mean_basis)
        stats = blr.scan_feature_stats(
            lambda *r: design_matrix(r[0], omega, v, r[1] if len(r) > 1 else None),
            rows,
            yt,
            chunk_size,
        )
        return blr.nig_posterior(stats, lam0, a0, b0)

    return lax.map(one, draws)


@functools.partial(jax.jit, static_argnames=("has_v",))
def _predictive_per_draw(draws, Xn, mean_basis_new, *, has_v):
    def one(t):
        post, omega, v = t[0], t[1], t[2] if has_v else None
        return blr.nig_predictive(post, design_matrix(Xn, omega, v, mean_basis_new))

    return lax.map(one, draws)


@functools.partial(jax.jit, static_argnames=("has_v",))
def _proba_per_draw(draws, Xn, mean_basis_new, *, has_v):
    def one(t):
        Phi = design_matrix(Xn, t[0], t[2] if has_v else None, mean_basis_new)
        return jax.nn.sigmoid(Phi @ t[1])

    return lax.map(one, draws)


def predict_regression(
    samples,
    X_train,
    y_train,
    X_new,
    *,
    mean_basis=None,
    mean_basis_new=None,
    prior: GibbsPrior | None = None,
    posteriors: blr.NIGPosterior | None = None,
    draws=None,
):
    """Student-t predictive ``(loc, scale, df)`` per draw, each ``(S, n_new)``.

    For every draw the NIG posterior of the weights (Pena-Llamas et al. 2023, eq. 10) given the
    design of its frequencies (:func:`design_matrix`) and its ``prior_precision`` is recomputed
    (:func:`regression_posteriors`), unless ``posteriors`` holds them already (for the
    draws ``draws``, indices into the flattened draws); pass ``loc, scale, df`` to
    :class:`bayeskern.predictive.MixturePredictive`.
    """
    if posteriors is None:
        posteriors = regression_posteriors(
            samples, X_train, y_train, mean_basis=mean_basis, prior=prior, draws=draws
        )
    om, _, vs, has_v = _flat_regression_draws(samples)
    if draws is not None:
        om, vs = om[draws], vs[draws]
    loc, scale, df = _predictive_per_draw(
        (posteriors, om, vs), jnp.asarray(X_new), mean_basis_new, has_v=has_v
    )
    return np.asarray(loc), np.asarray(scale), np.asarray(df)


def predict_proba(samples, X_new, *, mean_basis_new=None):
    """Probabilities :math:`\\sigma(\\beta^\\top\\Phi(x))` per draw, ``(S, n_new)`` (eq. 11)."""
    om = np.asarray(samples["omega"])
    om = om.reshape((-1,) + om.shape[-2:])
    beta = np.asarray(samples["beta"]).reshape(om.shape[0], -1)
    vv = None
    if "v" in samples:
        vv = np.asarray(samples["v"]).reshape((-1,) + np.asarray(samples["v"]).shape[-2:])
    vs = jnp.zeros((om.shape[0], 1, 1)) if vv is None else jnp.asarray(vv)
    draws = (jnp.asarray(om), jnp.asarray(beta), vs)
    return np.asarray(
        _proba_per_draw(draws, jnp.asarray(X_new), mean_basis_new, has_v=vv is not None)
    )
