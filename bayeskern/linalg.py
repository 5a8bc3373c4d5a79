"""Numerically careful linear algebra shared by the models and estimators.

The Gaussian log density :func:`gaussian_logpdf` is the inner loop of every GP fit: NUTS
evaluates it and its gradient at every leapfrog step. It costs one Cholesky factorization
forward and one inverse from that factor backward (a custom VJP), instead of
differentiating through the factorization.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import jax
import jax.numpy as jnp
import jax.scipy.linalg as jsl
import numpy as np

__all__ = [
    "JITTERS",
    "safe_cholesky",
    "cho_solve",
    "cholesky",
    "triangular_inverse",
    "cholesky_inverse",
    "gaussian_conditional",
    "gaussian_logpdf",
    "DistinctPairs",
    "distinct_pairs",
    "group_pairs",
    "expand_pairs",
]

#: relative jitters tried in order by :func:`safe_cholesky` (times the mean diagonal)
JITTERS = (0.0, 1e-10, 1e-8, 1e-6, 1e-4, 1e-2)

#: block size below which :func:`cholesky_inverse` hands a triangle to LAPACK's ``trsm``
_INVERSE_BLOCK = 64


def safe_cholesky(K: jax.Array) -> tuple[jax.Array, jax.Array]:
    """Cholesky factor of ``K`` with adaptive jitter.

    Tries :math:`K + \\epsilon\\,\\overline{\\mathrm{diag}(K)}\\,I` for
    :math:`\\epsilon \\in` :data:`JITTERS` and returns the first factor that is finite,
    together with the absolute jitter added (``nan`` if every attempt failed, so the caller
    can report it rather than return NaN silently). Jit- and vmap-compatible.
    """
    n = K.shape[-1]
    scale = jnp.mean(jnp.diagonal(K, axis1=-2, axis2=-1))
    scale = jnp.where(jnp.isfinite(scale) & (scale > 0), scale, 1.0)
    eye = jnp.eye(n, dtype=K.dtype)
    jitters = jnp.asarray(JITTERS, dtype=K.dtype) * scale

    def attempt(j):
        L = jnp.linalg.cholesky(K + j * eye)
        return L, jnp.all(jnp.isfinite(L))

    def cond(state):
        i, _, ok = state
        return (~ok) & (i < len(JITTERS))

    def body(state):
        i, _, _ = state
        L, ok = attempt(jitters[i])
        return i + 1, L, ok

    L0, ok0 = attempt(jitters[0])
    i, L, ok = jax.lax.while_loop(cond, body, (jnp.asarray(1), L0, ok0))
    used = jnp.where(ok, jitters[jnp.maximum(i - 1, 0)], jnp.nan)
    return L, used


def cho_solve(L: jax.Array, b: jax.Array) -> jax.Array:
    """Solve :math:`(LL^\\top) x = b` given the lower Cholesky factor ``L``."""
    return jsl.cho_solve((L, True), b)


def cholesky(K: jax.Array) -> jax.Array:
    """Lower Cholesky factor of a symmetric ``K`` (LAPACK ``potrf``; NaN if not PD).

    Unlike :func:`jax.numpy.linalg.cholesky` it does not symmetrize ``K`` first: every
    caller here builds ``K`` symmetric.
    """
    return jax.lax.linalg.cholesky(K, symmetrize_input=False)


def _lower_times(T: jax.Array, M: jax.Array) -> jax.Array:
    """Compute :math:`TM` for a lower-triangular ``T`` (BLAS ``trmm``) by block recursion.

    The zero upper triangle of ``T`` is not multiplied.
    """
    m = T.shape[0]
    if m <= _INVERSE_BLOCK:
        return T @ M
    h = m // 2
    top = _lower_times(T[:h, :h], M[:h])
    bottom = T[h:, :h] @ M[:h] + _lower_times(T[h:, h:], M[h:])
    return jnp.concatenate([top, bottom], axis=0)


def _times_lower(M: jax.Array, T: jax.Array) -> jax.Array:
    """:math:`MT` for a lower-triangular ``T``, by block recursion (see :func:`_lower_times`)."""
    m = T.shape[0]
    if m <= _INVERSE_BLOCK:
        return M @ T
    h = m // 2
    left = _times_lower(M[:, :h], T[:h, :h]) + M[:, h:] @ T[h:, :h]
    right = _times_lower(M[:, h:], T[h:, h:])
    return jnp.concatenate([left, right], axis=1)


def triangular_inverse(L: jax.Array) -> jax.Array:
    r"""Compute :math:`L^{-1}` of a lower-triangular ``L`` by 2×2 block recursion.

    As LAPACK ``trtri``, :math:`\begin{pmatrix}L_{11}&0\\L_{21}&L_{22}\end{pmatrix}^{-1} =
    \begin{pmatrix}X_{11}&0\\-X_{22}L_{21}X_{11}&X_{22}\end{pmatrix}`.
    """
    n = L.shape[-1]
    if n <= _INVERSE_BLOCK:
        return jsl.solve_triangular(L, jnp.eye(n, dtype=L.dtype), lower=True)
    h = n // 2
    X11 = triangular_inverse(L[:h, :h])
    X22 = triangular_inverse(L[h:, h:])
    X21 = -_lower_times(X22, _times_lower(L[h:, :h], X11))
    return jnp.block([[X11, jnp.zeros((h, n - h), L.dtype)], [X21, X22]])


def _lower_gram(A: jax.Array) -> jax.Array:
    """Compute :math:`A^\top A` of a lower-triangular ``A`` by block recursion (``lauum``).

    As LAPACK ``lauum``, the products skip the zero upper triangle.
    """
    n = A.shape[-1]
    if n <= _INVERSE_BLOCK:
        return A.T @ A
    h = n // 2
    A21 = A[h:, :h]
    top = _lower_gram(A[:h, :h]) + A21.T @ A21
    off = _times_lower(A21.T, A[h:, h:])  # A21^T A22
    return jnp.block([[top, off], [off.T, _lower_gram(A[h:, h:])]])


def cholesky_inverse(L: jax.Array) -> jax.Array:
    """:math:`K^{-1} = L^{-\\top}L^{-1}` from the lower Cholesky factor ``L`` of ``K``.

    The LAPACK ``potri`` algorithm (triangular inverse, then :math:`A^\\top A` of the
    triangle) written as block recursions of matrix products that skip the zero triangles
    (JAX exposes no ``potri``): :math:`2n^3/3` flops, twice one Cholesky, where
    ``cho_solve(L, I)`` (two triangular solves with :math:`n` right-hand sides) takes
    :math:`2n^3`.
    """
    if L.ndim > 2:
        return jax.vmap(cholesky_inverse)(L)
    return _lower_gram(triangular_inverse(L))


def gaussian_conditional(L: jax.Array, Ks: jax.Array, kss: jax.Array, y: jax.Array):
    r"""Mean and variance of :math:`f_*` given :math:`y` for a Gaussian process.

    With :math:`K_y = LL^\top` (noise included), the cross-covariance :math:`K_*`
    ``(n, m)`` and the prior variances :math:`k_{**}` ``(m,)``: one triangular solve
    :math:`[V, w] = L^{-1}[K_*, y]` gives :math:`\mu_* = V^\top w` and
    :math:`v_* = k_{**} - \lVert V\rVert^2` column by column, clipped at zero (Rasmussen &
    Williams 2006, Algorithm 2.1 and eqs. 2.25-2.26). Given the prior covariance
    :math:`K_{**}` ``(m, m)`` instead, the covariance :math:`K_{**} - V^\top V` (eq. 2.24).
    Cheaper than forming :math:`L^{-1}` when the factor is used once.
    """
    V = jsl.solve_triangular(L, jnp.concatenate([Ks, y[:, None]], axis=1), lower=True)
    v, w = V[:, :-1], V[:, -1]
    if kss.ndim == 2:
        return v.T @ w, kss - v.T @ v
    return v.T @ w, jnp.maximum(kss - jnp.sum(v * v, axis=0), 0.0)


@jax.custom_vjp
def gaussian_logpdf(y: jax.Array, K: jax.Array) -> jax.Array:
    r"""Log density of :math:`y \sim N(0, K)` with a cheap exact gradient.

    .. math:: \log p(y) = -\tfrac12 y^\top K^{-1} y - \tfrac12\log|K| - \tfrac n2\log 2\pi,
       \qquad \frac{\partial \log p}{\partial K} = \tfrac12(\alpha\alpha^\top - K^{-1}),
       \quad \alpha = K^{-1}y

    (Rasmussen & Williams 2006, eqs. 2.30 and 5.9). The forward pass is one Cholesky
    factorization; the backward pass forms :math:`K^{-1}` from that factor
    (:func:`cholesky_inverse`) and hands :math:`\tfrac12(\alpha\alpha^\top - K^{-1})` to
    whatever built ``K``, whose own derivative is elementwise. Differentiating through the
    Cholesky factorization instead costs several triangular solves with ``n`` right-hand
    sides. ``K`` must be symmetric; a ``K`` that is not positive definite gives ``nan``
    (NUTS rejects the step).

    Parameters
    ----------
    y : (n,) observations.
    K : (n, n) symmetric covariance.
    """
    return _gaussian_fwd(y, K)[0]


def _gaussian_fwd(y, K):
    L = cholesky(K)
    alpha = cho_solve(L, y)
    n = y.shape[-1]
    logp = (
        -0.5 * jnp.dot(y, alpha)
        - jnp.sum(jnp.log(jnp.diagonal(L)))
        - 0.5 * n * math.log(2 * math.pi)
    )
    return logp, (L, alpha)


def _gaussian_bwd(res, g):
    L, alpha = res
    W = 0.5 * (jnp.outer(alpha, alpha) - cholesky_inverse(L))
    return -g * alpha, g * W


gaussian_logpdf.defvjp(_gaussian_fwd, _gaussian_bwd)


class DistinctPairs(NamedTuple):
    r"""The distinct pairwise differences of a set of inputs, and where each pair finds its own.

    A stationary kernel's Gram matrix :math:`K_{ij} = k(x_i - x_j)` has as many distinct
    entries as there are distinct differences :math:`\tau_u`: on a regular grid (a monthly
    series) about :math:`n` of the :math:`n(n+1)/2` pairs. :func:`expand_pairs` builds
    :math:`K` from :math:`k(\tau_u)`, so the kernel and its derivatives are evaluated once per
    distinct difference.

    Attributes
    ----------
    tau : (U, d)
        The distinct differences :math:`x_i - x_j`, :math:`i \ge j`, bit for bit.
    index : (n, n) int32
        Position in ``tau`` of the difference of pair :math:`(i, j)` (or :math:`(j, i)`).
    rows, cols : (P,) int32
        The :math:`P = n(n+1)/2` lower-triangle pairs, ordered by ``segment``.
    segment : (P,) int32
        Position in ``tau`` of each of those pairs (sorted).
    """

    tau: jax.Array
    index: jax.Array
    rows: jax.Array
    cols: jax.Array
    segment: jax.Array


def distinct_pairs(X) -> DistinctPairs:
    """Return the :class:`DistinctPairs` of the rows of ``X`` (n, d), computed once per fit."""
    X = np.asarray(X, float)
    rows, cols = np.tril_indices(X.shape[0])
    tau, segment = np.unique(X[rows] - X[cols], axis=0, return_inverse=True)
    return group_pairs(tau, segment, rows, cols)


def group_pairs(tau, segment, rows, cols) -> DistinctPairs:
    """Return the :class:`DistinctPairs` of lower-triangle pairs grouped by ``segment``.

    Parameters
    ----------
    tau : (U, d)
        One input difference per group.
    segment : (P,) int
        The group of each pair ``(rows[p], cols[p])``, in ``0..U-1``.
    rows, cols : (P,) int
        The :math:`P = n(n+1)/2` lower-triangle pairs of ``np.tril_indices(n)``.
    """
    rows, cols = np.asarray(rows), np.asarray(cols)
    segment = np.asarray(segment).reshape(-1).astype(np.int32)
    n = int(rows.max()) + 1 if rows.size else 0
    index = np.empty((n, n), np.int32)
    index[rows, cols] = index[cols, rows] = segment
    order = np.argsort(segment, kind="stable")
    return DistinctPairs(
        jnp.asarray(tau),
        jnp.asarray(index),
        jnp.asarray(rows[order].astype(np.int32)),
        jnp.asarray(cols[order].astype(np.int32)),
        jnp.asarray(segment[order]),
    )


def _materialize(values: jax.Array) -> jax.Array:
    r"""Return ``values`` computed into a buffer of their own before a gather reads them.

    XLA fuses an elementwise producer into the gather that consumes it, so a kernel
    evaluated on the distinct pairs and then spread over the :math:`n \times n` matrix
    (:func:`expand_pairs`) would be evaluated once per matrix entry. A conditional is a
    fusion boundary: ``values`` pass through one whose predicate is that they are all
    finite (the other branch returns NaN, which a Cholesky factorization then reports and
    NUTS rejects), so the kernel is evaluated once per value. Under ``vmap`` the
    conditional becomes a select and the batched gather is not fused anyway.
    """
    return jax.lax.cond(
        jnp.all(jnp.isfinite(values)), lambda v: v, lambda v: jnp.full_like(v, jnp.nan), values
    )


@jax.custom_vjp
def _expand(values, index, rows, cols, segment):
    return values[index]


def _expand_fwd(values, index, rows, cols, segment):
    return values[index], (rows, cols, segment, values)


def _expand_bwd(res, W):
    rows, cols, segment, values = res
    w = W[rows, cols] + jnp.where(rows != cols, W[cols, rows], 0.0)
    return (
        jax.ops.segment_sum(w, segment, num_segments=values.shape[0], indices_are_sorted=True),
        None,
        None,
        None,
        None,
    )


_expand.defvjp(_expand_fwd, _expand_bwd)


def expand_pairs(values: jax.Array, pairs: DistinctPairs) -> jax.Array:
    r"""Return the symmetric ``(n, n)`` matrix :math:`K_{ij} = v_{u(i,j)}`.

    ``values`` (U,) holds one value per distinct difference of ``pairs``
    (:func:`distinct_pairs`). The vector-Jacobian product is
    :math:`\bar v_u = \sum_{i \ge j:\ u(i,j) = u} (\bar K_{ij} + [i \ne j]\,\bar K_{ji})`:
    two gathers and one sorted segment sum over the :math:`n(n+1)/2` pairs, no scatter into
    an ``(n, n)`` matrix.
    """
    values = _materialize(values)
    return _expand(values, pairs.index, pairs.rows, pairs.cols, pairs.segment)
