"""Rank-updated Gaussian evidence of the random-feature linear model, and its design.

The GaBaSR Gibbs sweep (:mod:`bayeskern.inference.gibbs_sweep`) moves one frequency at a
time by Metropolis-Hastings on the marginal likelihood of the linear model on the
random-feature design :math:`\\Phi` (:func:`design_matrix`). This module keeps that
evidence's pieces (:class:`Evidence`) and updates them for a change of a block of columns.

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
"""

from __future__ import annotations

import math
from typing import NamedTuple

import jax
import jax.numpy as jnp
import jax.scipy.linalg as jsl
from jax import lax
from jax.scipy.special import gammaln

from bayeskern import blr
from bayeskern.features import locally_stationary_features, rff_features
from bayeskern.models.gabasr import GibbsPrior

__all__ = ["Evidence", "design_matrix", "full_log_evidence"]


class Evidence(NamedTuple):
    """Rank-updatable pieces of the Gaussian / NIG evidence of the linear model on ``Phi``."""

    Phi: jax.Array  # (n, P) current design
    G: jax.Array  # (P, P) Phi^T W Phi
    b: jax.Array  # (P,) Phi^T y_eff
    A: jax.Array  # (P, P) (lam0 I + G)^{-1}
    logdet: jax.Array  # log |lam0 I + G|
    quad: jax.Array  # b^T A b


# --------------------------------------------------------------------------- evidence


def _log_evidence(task, logdet, quad, lam0, P, n, yy, prior: GibbsPrior):
    """Evidence from ``log|Lambda_N|`` and ``b^T Lambda_N^{-1} b`` (same constants as blr)."""
    half_ratio = 0.5 * (P * jnp.log(lam0) - logdet)
    if task == "classification":
        return half_ratio + 0.5 * quad
    aN = prior.a0 + 0.5 * n
    bN = prior.b0 + 0.5 * jnp.maximum(yy - quad, 0.0)
    return (
        -0.5 * n * math.log(2 * math.pi)
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


def _cross_products(Phi, F, weights, y_eff):
    """Return :math:`\\Phi^\\top W F`, :math:`F^\\top W F` (symmetrized) and :math:`F^\\top y`.

    The data-sized products of a proposal (or of a batch of proposals, ``F`` their columns
    side by side): the :math:`O(N P m)` part of :func:`_block_proposal`.
    """
    WF = F * weights[:, None]
    FtWF = F.T @ WF
    return Phi.T @ WF, 0.5 * (FtWF + FtWF.T), F.T @ y_eff  # keeps G bit-for-bit symmetric


def _block_proposal(ev: Evidence, blocks, F, weights, y_eff, lam0):
    """Evidence pieces after replacing the column ``blocks`` of ``Phi`` by ``F`` (module docstring).

    ``blocks`` is a tuple of ``(start, width)`` with static widths summing to ``m``, the
    columns :math:`J`. Returns ``(logdet, quad, ok, update)`` where ``update`` carries what
    :func:`_apply_block` needs; cost :math:`O(NP + P^2 m)`.
    """
    return _block_update(ev, blocks, *_cross_products(ev.Phi, F, weights, y_eff), lam0)


def _block_update(ev: Evidence, blocks, cross, FtWF, bJ, lam0):
    """:func:`_block_proposal` from the cross-products of the new columns, :math:`O(P^2 m)`.

    ``cross`` is :math:`\\Phi^\\top W F` (its rows :math:`J` are not read), ``FtWF``
    :math:`F^\\top W F`, ``bJ`` :math:`F^\\top y`.
    """
    m = FtWF.shape[0]
    dtype = FtWF.dtype
    cross = _put(cross, blocks, FtWF, 0)  # rows J: the new columns against themselves
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
    m = LS.shape[0]
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
    Phi = ev.Phi  # F None: the caller writes the design (a batch of moves at once)
    if F is not None:
        Phi = _put(Phi, blocks, jnp.where(accept, F, _take(Phi, blocks, 1)), 1)
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
