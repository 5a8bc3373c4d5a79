"""Numerically careful linear algebra shared by the models and estimators."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import jax.scipy.linalg as jsl

__all__ = ["JITTERS", "safe_cholesky", "cho_solve"]

#: relative jitters tried in order by :func:`safe_cholesky` (times the mean diagonal)
JITTERS = (0.0, 1e-10, 1e-8, 1e-6, 1e-4, 1e-2)


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
