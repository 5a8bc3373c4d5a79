"""Conjugate Bayesian linear regression on features (normal-inverse-gamma prior).

Used by the random-feature models (GaBaSR, Pena-Llamas et al. 2023, eq. 10; BaNK, Oliva et al. 2016)
and by the Bayesian last layers of the deterministic kernels (LAB-RBF). With features
:math:`\\Phi \\in \\mathbb R^{N\\times M}` and the prior

.. math:: w \\mid \\sigma^2 \\sim N(w_0, \\sigma^2 \\Lambda_0^{-1}),\\qquad
          \\sigma^2 \\sim \\mathrm{InvGamma}(a_0, b_0),

the posterior is NIG with

.. math:: \\Lambda_N = \\Lambda_0 + \\Phi^\\top\\Phi,\\quad
          w_N = \\Lambda_N^{-1}(\\Lambda_0 w_0 + \\Phi^\\top y),\\quad
          a_N = a_0 + N/2,\\quad
          b_N = b_0 + \\tfrac12(y^\\top y + w_0^\\top\\Lambda_0 w_0 - w_N^\\top\\Lambda_N w_N),

the weights and noise integrate out to the evidence (Pena-Llamas et al. 2023, eq. 10, with
:math:`V_0 = \\Lambda_0` a precision as in the paper's :math:`V_N = (V_0 + \\Phi^\\top\\Phi)^{-1}`)

.. math:: \\log p(y) = -\\tfrac N2\\log 2\\pi + \\tfrac12\\log\\frac{|\\Lambda_0|}{|\\Lambda_N|}
          + a_0\\log b_0 - a_N\\log b_N + \\log\\Gamma(a_N) - \\log\\Gamma(a_0),

and a new observation is Student-t with :math:`2a_N` degrees of freedom, location
:math:`\\phi^\\top w_N` and squared scale
:math:`\\frac{b_N}{a_N}(1 + \\phi^\\top\\Lambda_N^{-1}\\phi)`.
Everything is computed from the sufficient statistics :math:`(\\Phi^\\top\\Phi, \\Phi^\\top y,
y^\\top y, N)`, which are sums over data rows, so they can be accumulated over shards.
The prior mean is :math:`w_0 = 0` and the prior precision :math:`\\lambda_0 I`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import jax
import jax.numpy as jnp
import jax.scipy.linalg as jsl
from jax.scipy.special import gammaln

__all__ = [
    "Stats",
    "NIGPosterior",
    "feature_stats",
    "scan_feature_stats",
    "nig_posterior",
    "nig_evidence",
    "nig_log_marginal",
    "nig_predictive",
]


class Stats(NamedTuple):
    """Sufficient statistics of Bayesian linear regression (sums over rows)."""

    PtP: jax.Array  # (M, M)
    Pty: jax.Array  # (M,)
    yty: jax.Array  # ()
    n: jax.Array  # ()


class NIGPosterior(NamedTuple):
    """Normal-inverse-gamma posterior; ``L`` is the lower Cholesky factor of ``Lambda_N``."""

    w: jax.Array
    L: jax.Array
    a: jax.Array
    b: jax.Array


def feature_stats(Phi: jax.Array, y: jax.Array) -> Stats:
    """:math:`(\\Phi^\\top\\Phi, \\Phi^\\top y, y^\\top y, N)` of one block of rows."""
    return Stats(Phi.T @ Phi, Phi.T @ y, y @ y, jnp.asarray(y.shape[0], dtype=Phi.dtype))


def scan_feature_stats(
    featurize: Callable,
    rows: tuple,
    y: jax.Array,
    chunk_size: int | None,
    mask: jax.Array | None = None,
    stats: Callable | None = None,
) -> Stats:
    r"""Sufficient statistics summed over consecutive row chunks, inside a JAX trace.

    .. math:: \Phi^\top\Phi = \sum_c \Phi_c^\top\Phi_c,\quad \Phi^\top y = \sum_c
              \Phi_c^\top y_c,\quad \Phi_c = \mathrm{featurize}(\mathrm{rows}_c)

    (sums over rows split over any partition of the rows; GaBaSR's evidence,
    Pena-Llamas et al. 2023, eq. 10, needs only these). The ``N × M`` design is never formed: a
    ``lax.scan`` over chunks of ``chunk_size`` rows keeps one ``chunk_size × M`` block at a time,
    and the chunk body is ``jax.checkpoint``-ed, so reverse-mode differentiation (NUTS, MAP)
    stores only the chunks' inputs, not their features. Memory is
    :math:`O(N d + \mathrm{chunk\_size}\cdot M + M^2)`.

    Parameters
    ----------
    featurize : callable
        ``featurize(*row_chunks) -> (chunk_size, M)``, traceable (closes over the
        parameters being sampled).
    rows : tuple of arrays
        Row-aligned inputs, each with leading dimension ``N`` (e.g. ``(X, mean_basis)``).
    y : (N,) targets.
    chunk_size : int or None
        Rows per chunk; ``N`` need not be a multiple (the last chunk is zero-padded and
        masked). ``None``, or at least ``N`` rows with no ``mask``: one dense block,
        :func:`feature_stats` of ``featurize(*rows)``.
    mask : (N,) or None
        Row weights, 1 on real rows and 0 on padding (``None``: all ones).
    stats : callable or None
        ``stats(Phi_c, y_c) -> Stats`` of one chunk (``None``: :func:`feature_stats`); a model
        whose statistics are a transform of the chunk's features passes its own (e.g. one
        with a cheaper hand-written gradient).

    Returns
    -------
    Stats
        Equal (up to floating-point summation order) to ``feature_stats(featurize(*rows), y)``.
    """
    n = y.shape[0]
    stats = feature_stats if stats is None else stats
    if mask is None and (chunk_size is None or chunk_size >= n):
        return stats(featurize(*rows), y)
    chunk_size = int(max(1, min(chunk_size, n)))
    mask = jnp.ones(n, y.dtype) if mask is None else mask
    pad = (-n) % chunk_size
    if pad:
        rows = tuple(jnp.concatenate([r, jnp.zeros((pad,) + r.shape[1:], r.dtype)]) for r in rows)
        y = jnp.concatenate([y, jnp.zeros(pad, y.dtype)])
        mask = jnp.concatenate([mask, jnp.zeros(pad, mask.dtype)])
    n_chunks = (n + pad) // chunk_size
    split = lambda a: a.reshape((n_chunks, chunk_size) + a.shape[1:])  # noqa: E731

    @jax.checkpoint
    def block(rc, yc, mc):
        Phi = featurize(*rc) * mc[:, None]
        return stats(Phi, yc * mc)._replace(n=jnp.sum(mc))

    def body(acc, blk):
        return jax.tree.map(jnp.add, acc, block(*blk)), None

    rows_c, y_c, m_c = tuple(split(r) for r in rows), split(y), split(mask)
    # the first chunk's statistics start the sum (under shard_map the carry then has the
    # device-varying type of the data, with no cast needed)
    first = jax.tree.map(lambda a: a[0], (rows_c, y_c, m_c))
    rest = jax.tree.map(lambda a: a[1:], (rows_c, y_c, m_c))
    out, _ = jax.lax.scan(body, block(*first), rest)
    return out


def nig_posterior(stats: Stats, prior_precision: float, a0: float, b0: float) -> NIGPosterior:
    """Return the NIG posterior from sufficient statistics.

    The prior has mean 0 and precision ``diag(prior_precision)``; a scalar means
    ``prior_precision · I``.
    """
    M = stats.PtP.shape[0]
    prec = jnp.broadcast_to(jnp.asarray(prior_precision, dtype=stats.PtP.dtype), (M,))
    Lam = stats.PtP + jnp.diag(prec)
    L = jnp.linalg.cholesky(Lam)
    w = jsl.cho_solve((L, True), stats.Pty)
    a = a0 + 0.5 * stats.n
    # w_N^T Λ_N w_N = w_N^T Φ^T y, since Λ_N w_N = Φ^T y when w_0 = 0
    b = b0 + 0.5 * jnp.maximum(stats.yty - w @ stats.Pty, 0.0)
    return NIGPosterior(w, L, a, b)


def nig_log_marginal(stats: Stats, prior_precision: float, a0: float, b0: float) -> jax.Array:
    """Log evidence :math:`\\log p(y \\mid \\Phi)` with the weights and noise integrated out."""
    return nig_evidence(stats, prior_precision, a0, b0)[0]


def nig_evidence(
    stats: Stats, prior_precision, a0: float, b0: float
) -> tuple[jax.Array, NIGPosterior]:
    """Return the log evidence and the NIG posterior it comes from.

    .. math:: \\log p(y) = -\\tfrac N2\\log 2\\pi + \\tfrac12(\\log|\\Lambda_0| -
              \\log|\\Lambda_N|) + a_0\\log b_0 - a_N\\log b_N + \\log\\Gamma(a_N) -
              \\log\\Gamma(a_0)

    (Pena-Llamas et al. 2023, eq. 10), with the prior precision
    :math:`\\Lambda_0 = \\mathrm{diag}(` ``prior_precision`` :math:`)` (a scalar or ``(M,)``)
    and the posterior of :func:`nig_posterior`.
    """
    post = nig_posterior(stats, prior_precision, a0, b0)
    M = stats.PtP.shape[0]
    logdet_N = 2.0 * jnp.sum(jnp.log(jnp.diagonal(post.L)))
    logdet_0 = jnp.sum(jnp.log(jnp.broadcast_to(jnp.asarray(prior_precision), (M,))))
    log_evidence = (
        -0.5 * stats.n * jnp.log(2 * jnp.pi)
        + 0.5 * (logdet_0 - logdet_N)
        + a0 * jnp.log(b0)
        - post.a * jnp.log(post.b)
        + gammaln(post.a)
        - gammaln(a0)
    )
    return log_evidence, post


def nig_predictive(post: NIGPosterior, Phi_new: jax.Array):
    """Student-t predictive ``(loc, scale, df)`` of new observations with features ``Phi_new``."""
    v = jsl.solve_triangular(post.L, Phi_new.T, lower=True)
    scale2 = post.b / post.a * (1.0 + jnp.sum(v * v, axis=0))
    return Phi_new @ post.w, jnp.sqrt(scale2), 2.0 * post.a
