r"""Data-parallel sufficient statistics and batched prediction for large N.

The random-feature models (GaBaSR, Pena-Llamas et al. 2023, eq. 10; the Bayesian last layers of
LAB-RBF) see the data only through the sums over rows

.. math:: S = \Big(\sum_i \phi(x_i)\phi(x_i)^\top,\ \sum_i \phi(x_i) y_i,\ \sum_i y_i^2,\ N\Big)
          = (\Phi^\top\Phi,\ \Phi^\top y,\ y^\top y,\ N)

(:class:`bayeskern.blr.Stats`), from which :func:`bayeskern.blr.nig_posterior` and
:func:`bayeskern.blr.nig_log_marginal` give the normal-inverse-gamma posterior and evidence.
Sums split over any partition of the rows, so

* :func:`chunked_feature_stats` scans over row chunks (``lax.scan``): the ``N × M`` design
  :math:`\Phi` is never formed, memory is :math:`O(Nd + cM + M^2)` for chunk size :math:`c`;
* :func:`sharded_feature_stats` splits the rows over devices (``jax.shard_map`` on a 1-D
  mesh), scans each device's rows in chunks and adds the devices' statistics with
  ``lax.psum``;
* :func:`stream_feature_stats` adds statistics of blocks that arrive one at a time (files,
  a database cursor, Dask partitions), so N may exceed host memory.

Multi-host: call ``jax.distributed.initialize(coordinator_address, num_processes,
process_id)`` in every process before any other JAX call (on Slurm/TPU/GKE the arguments
are auto-detected), build the mesh over ``jax.devices()`` (all hosts' devices), put each
host's rows in a global array with ``jax.make_array_from_process_local_data(
NamedSharding(mesh, P("data")), local_rows)`` and call :func:`sharded_feature_stats` with
that mesh; the ``psum`` then runs across hosts and every process gets the same statistics.
(Not tested here: the test machine has one host; the single-host multi-device path is tested
with ``XLA_FLAGS=--xla_force_host_platform_device_count``.)
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh
from jax.sharding import PartitionSpec as P

from bayeskern.batching import row_slices
from bayeskern.blr import Stats, scan_feature_stats

__all__ = [
    "chunked_feature_stats",
    "sharded_feature_stats",
    "stream_feature_stats",
    "add_stats",
    "predict_in_batches",
]


def _check_xy(X, y, chunk_size):
    X = jnp.asarray(X)
    y = jnp.asarray(y)
    if X.ndim != 2:
        raise ValueError(f"X must be 2-D (n_rows, n_features), got shape {X.shape}")
    if y.shape != (X.shape[0],):
        raise ValueError(f"y must have shape ({X.shape[0]},) to match X, got {y.shape}")
    if (
        isinstance(chunk_size, bool)
        or not isinstance(chunk_size, (int, np.integer))
        or chunk_size < 1
    ):
        raise ValueError(f"chunk_size must be a positive integer, got {chunk_size!r}")
    return X, y


def _pad_rows(X, y, multiple):
    """Pad rows to a multiple of ``multiple``; the mask is 1 on real rows, 0 on padding."""
    n = X.shape[0]
    pad = (-n) % multiple
    mask = jnp.ones(n, dtype=X.dtype)
    if pad:
        X = jnp.concatenate([X, jnp.zeros((pad, X.shape[1]), X.dtype)])
        y = jnp.concatenate([y, jnp.zeros(pad, y.dtype)])
        mask = jnp.concatenate([mask, jnp.zeros(pad, X.dtype)])
    return X, y, mask


def _scan_stats(X, y, mask, params, featurize, chunk_size):
    """Sum :func:`feature_stats` over consecutive chunks of ``chunk_size`` rows.

    Padded rows carry mask 0 and contribute nothing (:func:`bayeskern.blr.scan_feature_stats`).
    """
    return scan_feature_stats(lambda xb: featurize(xb, params), (X,), y, chunk_size, mask)


@partial(jax.jit, static_argnames=("featurize", "chunk_size"))
def _chunked(X, y, mask, params, featurize, chunk_size):
    return _scan_stats(X, y, mask, params, featurize, chunk_size)


def chunked_feature_stats(X, y, featurize: Callable, params, *, chunk_size: int = 4096) -> Stats:
    r"""Accumulate the sufficient statistics over row chunks, without forming :math:`\Phi`.

    The statistics are :math:`(\Phi^\top\Phi, \Phi^\top y, y^\top y, N)`.

    .. math:: \Phi^\top\Phi = \sum_{c} \Phi_c^\top\Phi_c,\qquad \Phi_c = \mathrm{featurize}
              (X_c, \mathrm{params})

    (sums over rows; GaBaSR's evidence, Pena-Llamas et al. 2023, eq. 10, needs only these). Memory
    is :math:`O(Nd + \mathrm{chunk\_size}\cdot M + M^2)`.

    Parameters
    ----------
    X : (N, d) inputs; y : (N,) targets.
    featurize : ``featurize(X_chunk, params) -> (chunk, M)`` features, traceable by JAX
        (e.g. :func:`bayeskern.features.rff_features` with ``params = omega``). It is a
        static argument of the compiled function: pass the same function object each time
        to reuse the compilation (a new frequency set ``params`` does not recompile).
    params : array (or pytree) handed to ``featurize``.
    chunk_size : rows per chunk (the last chunk is zero-padded and masked).
    """
    X, y = _check_xy(X, y, chunk_size)
    chunk_size = int(min(chunk_size, max(X.shape[0], 1)))
    X, y, mask = _pad_rows(X, y, chunk_size)
    return _chunked(X, y, mask, params, featurize, chunk_size)


def data_mesh(devices=None) -> Mesh:
    """Return a 1-D mesh with axis ``"data"`` over ``devices``.

    The default is all of ``jax.devices()``, every host's devices after
    ``jax.distributed.initialize``.
    """
    devices = jax.devices() if devices is None else list(devices)
    return Mesh(np.asarray(devices), ("data",))


@partial(jax.jit, static_argnames=("featurize", "chunk_size", "mesh"))
def _sharded(X, y, mask, params, featurize, chunk_size, mesh):
    def local(Xl, yl, ml, p):
        s = _scan_stats(Xl, yl, ml, p, featurize, chunk_size)
        return jax.lax.psum(s, "data")

    f = jax.shard_map(
        local, mesh=mesh, in_specs=(P("data"), P("data"), P("data"), P()), out_specs=P()
    )
    return f(X, y, mask, params)


def sharded_feature_stats(
    X, y, featurize: Callable, params, *, chunk_size: int = 4096, mesh: Mesh | None = None
) -> Stats:
    r"""Sufficient statistics summed over row shards on several devices.

    The rows are split evenly over the ``"data"`` axis of ``mesh`` (default
    :func:`data_mesh`: every device); each device scans its rows in chunks
    (:func:`chunked_feature_stats`) and ``lax.psum`` adds the per-device sums,

    .. math:: \Phi^\top\Phi = \sum_{\text{device } k}\ \sum_{c \in k} \Phi_c^\top\Phi_c,

    so every device ends with the full statistics. With one device this is
    :func:`chunked_feature_stats`. Multi-host use: see the module docstring
    (``jax.distributed.initialize``, then a mesh over all hosts' devices).

    Parameters are those of :func:`chunked_feature_stats`, plus ``mesh`` (a 1-D
    ``jax.sharding.Mesh`` whose axis is named ``"data"``).
    """
    X, y = _check_xy(X, y, chunk_size)
    mesh = data_mesh() if mesh is None else mesh
    if mesh.axis_names != ("data",):
        raise ValueError(f"mesh must be 1-D with axis name 'data', got {mesh.axis_names}")
    n_dev = mesh.devices.size
    chunk_size = int(min(chunk_size, max(-(-X.shape[0] // n_dev), 1)))
    X, y, mask = _pad_rows(X, y, chunk_size * n_dev)
    return _sharded(X, y, mask, params, featurize, chunk_size, mesh)


def add_stats(a: Stats, b: Stats) -> Stats:
    """Sum of two statistics of disjoint row sets (statistics are additive over rows)."""
    return Stats(*(x + y for x, y in zip(a, b, strict=True)))


def stream_feature_stats(
    blocks: Iterable, featurize: Callable, params, *, chunk_size: int = 4096
) -> Stats:
    """Return the statistics of blocks ``(X_b, y_b)`` arriving one at a time.

    For out-of-core data: the sum over blocks of :func:`chunked_feature_stats`. Only one
    block is in memory at a time.
    """
    total = None
    for i, blk in enumerate(blocks):
        try:
            Xb, yb = blk
        except (TypeError, ValueError):
            raise ValueError(
                f"blocks must yield (X, y) pairs; block {i} is {type(blk)!r}"
            ) from None
        s = chunked_feature_stats(Xb, yb, featurize, params, chunk_size=chunk_size)
        total = s if total is None else add_stats(total, s)
    if total is None:
        raise ValueError("blocks is empty: no (X, y) block to accumulate")
    return total


def predict_in_batches(estimator, X, *, prob: float = 0.9, batch_size: int = 20_000):
    """Predictive mean, standard deviation and central ``prob`` interval for many rows.

    Calls ``estimator.predictive(X_b)`` (a :class:`~bayeskern.predictive.MixturePredictive`
    of shape draws × batch) on consecutive row batches and keeps only the four ``(N,)``
    summaries, so peak memory is :math:`O(S \\cdot \\mathrm{batch\\_size} + N)` rather than
    :math:`O(S N)` for :math:`S` posterior draws. The numbers equal the unbatched ones
    (each row's predictive distribution depends on that row only).

    Each batch reuses the per-draw factors kept from the fit; the interval's quantiles of the
    mixture are found by safeguarded Newton steps. Times and memory at :math:`10^6` rows:
    ``benchmarks/scale/scale_predict.py`` and the scale results page of the documentation.

    Returns
    -------
    dict with ``mean``, ``std``, ``lower``, ``upper`` (each ``(N,)``, data units).
    """
    if not hasattr(estimator, "predictive"):
        raise TypeError(f"estimator {type(estimator).__name__} has no predictive(X) method")
    if (
        isinstance(batch_size, bool)
        or not isinstance(batch_size, (int, np.integer))
        or batch_size < 1
    ):
        raise ValueError(f"batch_size must be a positive integer, got {batch_size!r}")
    if not 0.0 < prob < 1.0:
        raise ValueError(f"prob must be in (0, 1), got {prob}")
    n = len(X)
    out = {k: np.empty(n) for k in ("mean", "std", "lower", "upper")}
    for sl in row_slices(n, batch_size):
        pred = estimator.predictive(X[sl])
        out["mean"][sl] = pred.mean()
        out["std"][sl] = pred.std()
        out["lower"][sl], out["upper"][sl] = pred.interval(prob)
        del pred
    return out
