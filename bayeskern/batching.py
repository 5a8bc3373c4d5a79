"""Batching over rows: the one helper module that splits work into batches.

Two forms, one padding rule:

* :func:`row_slices`: consecutive slices for Python loops that call a predictor batch by
  batch (peak memory bounded by the batch, e.g. :func:`bayeskern.sharding.predict_in_batches`);
* :func:`batched_map`: ``jax.lax.map`` in batches inside a traced function, the leading axis
  padded (:func:`pad_rows`) to a multiple of the batch size, item by item or block by block
  (:meth:`bayeskern.kernels.Kernel.__call__`).

Batching never changes a number: each row's result depends only on that row, and the
padding rows are dropped.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

__all__ = ["row_slices", "pad_rows", "batched_map"]


def row_slices(n: int, size: int) -> list[slice]:
    """Consecutive slices of at most ``size`` rows covering ``range(n)`` (none when ``n = 0``).

    Parameters
    ----------
    n : int
        Number of rows.
    size : int
        Rows per slice, at least 1.

    Returns
    -------
    list of slice
    """
    return [slice(i, min(i + size, n)) for i in range(0, n, size)]


def pad_rows(xs, multiple: int):
    """Pad the leading axis of every leaf of ``xs`` to a multiple of ``multiple``.

    The last row is repeated; nothing is added when the length is already a multiple.

    Parameters
    ----------
    xs : pytree of arrays
        Leaves share their leading dimension ``n``.
    multiple : int
        Target multiple, at least 1.

    Returns
    -------
    (pytree, int)
        The padded pytree and the original ``n``.
    """
    n = jax.tree_util.tree_leaves(xs)[0].shape[0]
    pad = -n % multiple
    if pad:
        xs = jax.tree_util.tree_map(
            lambda a: jnp.concatenate([a, jnp.repeat(a[-1:], pad, axis=0)]), xs
        )
    return xs, n


def batched_map(f, xs, batch_size: int = 16, *, blocks: bool = False):
    """``jax.lax.map`` of ``f`` over the leading axis of ``xs``, in batches of ``batch_size``.

    With ``blocks=False``, ``f`` maps one item and the result equals ``lax.map(f, xs)``
    (``lax.map``'s own ``batch_size``, which vectorizes ``f`` within a batch). With
    ``blocks=True``, ``f`` maps a whole block of ``batch_size`` rows (its leading axis), the
    blocks run one after another and their results are concatenated; a single block is one
    call ``f(xs)``.

    The leading axis is padded to a multiple of ``batch_size`` (:func:`pad_rows`) and the
    padding's results dropped. The padding avoids ``lax.map``'s remainder branch: on XLA:CPU
    (jax 0.10.2) a jitted ``lax.map`` whose batch size does not divide the number of items,
    over a body with an LU factorization (``inv``, ``solve``), blocks forever in
    ``BlockUntilReady`` within a few hundred calls (all threads idle); with no remainder it
    does not (``tests/test_batched_map.py``).

    Parameters
    ----------
    f : callable
        Function of one item (a pytree slice of ``xs``), or of one block with ``blocks``.
    xs : pytree of arrays
        Leaves share their leading dimension.
    batch_size : int
        Items per batch (or rows per block).
    blocks : bool
        Whether ``f`` takes blocks of rows.

    Returns
    -------
    pytree of arrays
        ``f``'s outputs stacked (or, with ``blocks``, concatenated) along the leading axis.
    """
    if blocks:
        if jax.tree_util.tree_leaves(xs)[0].shape[0] <= batch_size:
            return f(xs)
        xp, n = pad_rows(xs, batch_size)
        n_blocks = jax.tree_util.tree_leaves(xp)[0].shape[0] // batch_size
        xb = jax.tree_util.tree_map(lambda a: a.reshape((n_blocks, batch_size) + a.shape[1:]), xp)
        out = jax.lax.map(f, xb)
        return jax.tree_util.tree_map(
            lambda a: a.reshape((n_blocks * batch_size,) + a.shape[2:])[:n], out
        )
    xp, n = pad_rows(xs, batch_size)
    out = jax.lax.map(f, xp, batch_size=batch_size)
    return jax.tree_util.tree_map(lambda a: a[:n], out) if xp is not xs else out
