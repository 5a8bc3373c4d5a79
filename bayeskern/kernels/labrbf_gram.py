r"""The LAB-RBF kernel's functions of arrays (He et al. 2023).

The two kernel ridge predictors and the nearest support point, public; and the kernel's
evaluation from the support points and bandwidths as arrays (JAX, its training form with
three matrix products, and NumPy in row blocks), private: outside the kernel, its Gram
matrix is ``kernel(X1, X2)``. :class:`~bayeskern.kernels.labrbf.LABRBF` holds the fitted
state and calls them.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from .stationary import safe_norm

__all__ = ["krr_f1", "krr_f2", "nearest_support"]


def _labrbf_gram(T: jax.Array, X_sv: jax.Array, Theta: jax.Array, p: int = 1) -> jax.Array:
    r"""Asymmetric LAB-RBF matrix :math:`K[a, i] = \exp(-\|\theta_i\odot(t_a - x_i)\|_2^p)`.

    He et al. (2023), eq. (1), for ``p = 2``; ``p = 1`` is the form of the authors' public
    code. The norm is gradient-safe at :math:`t_a = x_i` (its derivative there is 0, not NaN).

    Parameters
    ----------
    T : (n, d) evaluation points.
    X_sv : (m, d) support points.
    Theta : (m, d) one bandwidth vector per support point (the sign is irrelevant).
    p : 1 or 2.

    Returns
    -------
    (n, m) array.
    """
    D = (T[:, None, :] - X_sv[None, :, :]) * Theta[None, :, :]
    r = jnp.sum(D * D, axis=-1) if p == 2 else safe_norm(D)
    return jnp.exp(-r)


def _gram_fast(T, X_sv, Theta, p, same=False):
    r""":func:`_labrbf_gram` through three matrix products (the training hot path).

    :math:`\|\theta_i\odot(t-x_i)\|^2 = \sum_k \theta_{ik}^2 t_k^2 - 2\theta_{ik}^2 t_k x_{ik}
    + \theta_{ik}^2 x_{ik}^2`: no ``(n, m, d)`` tensor, which made the backward pass 7 ms of a
    9 ms step at m = 350, d = 20. Cancellation can leave tiny negative values (clamped to 0);
    ``same=True`` (``T`` is ``X_sv``) sets the exact zero diagonal.
    """
    T2 = Theta * Theta
    sq = (T * T) @ T2.T - 2.0 * T @ (T2 * X_sv).T + jnp.sum(T2 * X_sv * X_sv, axis=1)[None, :]
    if same:
        sq = sq * (1.0 - jnp.eye(sq.shape[0], dtype=sq.dtype))
    sq = jnp.maximum(sq, 0.0)
    if p == 2:
        return jnp.exp(-sq)
    nz = sq > 0
    return jnp.exp(-jnp.where(nz, jnp.sqrt(jnp.where(nz, sq, 1.0)), 0.0))


def _labrbf_gram_np(T, X_sv, Theta, p: int = 1, block: int = 1024) -> np.ndarray:
    """Compute :func:`_labrbf_gram` in NumPy, in row blocks.

    The prediction path: no XLA compilation per input shape, bounded memory.
    """
    T, X_sv, Theta = (np.asarray(a, dtype=float) for a in (T, X_sv, Theta))
    out = np.empty((T.shape[0], X_sv.shape[0]))
    for s in range(0, T.shape[0], block):
        D = (T[s : s + block, None, :] - X_sv[None]) * Theta[None]
        sq = np.einsum("nmd,nmd->nm", D, D)
        out[s : s + block] = np.exp(-(sq if p == 2 else np.sqrt(sq)))
    return out


def krr_f1(K_tX: jax.Array, K_XX: jax.Array, y: jax.Array, lam: float) -> jax.Array:
    r"""Regression function :math:`f_1(t) = K(t, X)(K(X,X) + \lambda I)^{-1}Y`.

    He et al. (2023), eqs. 6 and 8. ``K_tX`` is ``(n_t, m)`` with entries
    :math:`\mathcal K(t_a, x_i)`; ``K_XX`` is ``(m, m)`` with :math:`\mathcal K(x_i, x_j)`.
    Uses a linear solve (LU; the matrix is not symmetric), never an explicit inverse.
    """
    m = K_XX.shape[0]
    return K_tX @ jnp.linalg.solve(K_XX + lam * jnp.eye(m, dtype=K_XX.dtype), y)


def krr_f2(K_Xt: jax.Array, K_XX: jax.Array, y: jax.Array, lam: float) -> jax.Array:
    r"""Regression function :math:`f_2(t) = K(X,t)^\top (K(X,X)^\top + \lambda I)^{-1}Y` (eq. 6).

    ``K_Xt`` is ``(m, n_t)`` with entries :math:`\mathcal K(x_i, t_b)`, which for LAB-RBF needs
    the bandwidth of :math:`t_b`.
    """
    m = K_XX.shape[0]
    return K_Xt.T @ jnp.linalg.solve(K_XX.T + lam * jnp.eye(m, dtype=K_XX.dtype), y)


def nearest_support(Z: jax.Array, Z_sv: jax.Array) -> jax.Array:
    """Index of the nearest support point (Euclidean, in the kernel's scaled units)."""
    d2 = jnp.sum(Z * Z, 1)[:, None] - 2 * Z @ Z_sv.T + jnp.sum(Z_sv * Z_sv, 1)[None, :]
    return jnp.argmin(d2, axis=1)
