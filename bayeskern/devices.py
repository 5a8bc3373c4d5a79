"""One JAX CPU device per core, so that MCMC chains run in parallel.

JAX puts all CPU cores behind one device by default, so NumPyro's ``chain_method="parallel"``
(one chain per device, ``pmap``) falls back to running the chains one after another. The
number of CPU devices can only be chosen before JAX initializes its backend (before the first
array is created or the first function is compiled), so :mod:`bayeskern` calls
:func:`configure_cpu_devices` when it is imported (or, if JAX is not imported yet, right after
JAX's import), and it does something only when that is still possible and nobody else has
chosen:

* JAX's backend is not initialized yet (import bayeskern before doing anything with JAX);
* neither ``XLA_FLAGS=--xla_force_host_platform_device_count=...`` nor
  ``jax.config.jax_num_cpu_devices`` was set (your choice wins);
* ``BAYESKERN_CPU_DEVICES`` is not ``0`` (set it to a number to choose the count, or to
  ``0`` to leave JAX's default alone).

It then asks for ``max(4, cores)`` CPU devices, so that the four default chains of every
estimator run at once and the operating system shares the cores between them, in one round
rather than in rounds of as many chains as there are cores. These are
virtual devices of the one CPU: computations that do not use them explicitly run on the
first, as before.

If JAX was initialized first (for example a notebook that ran JAX code before importing
bayeskern), nothing changes: there is one CPU device and the chains of a fit run one after
another (``chain_method="sequential"``) — correct, with the same draws for the same seed,
only slower. :func:`cpu_device_status` says which case applies.

This is the one setting bayeskern makes when it is imported (besides JAX's float64 mode, see
:mod:`bayeskern`): it has to happen before JAX starts, so it cannot wait for a fit. Everything
else is scoped to the call that needs it: BLAS threads are limited inside each fit and
predict (:func:`limit_blas`), and the report renders its figures without touching
matplotlib's backend.
"""

from __future__ import annotations

import functools
import os
import re

from threadpoolctl import threadpool_limits

__all__ = [
    "available_cores",
    "configure_cpu_devices",
    "cpu_device_status",
    "blas_threads",
    "limit_blas",
    "release_pmap_programs",
]

_STATUS = "not configured"


def available_cores() -> int:
    """Return the number of CPU cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def configure_cpu_devices() -> str:
    """Ask JAX for one CPU device per chain when that is still possible (see the module).

    Returns a sentence saying what was done; :func:`cpu_device_status` repeats it later.
    """
    global _STATUS
    import jax  # here, not at the top: bayeskern configures JAX when it is imported
    from jax._src import xla_bridge

    wanted = os.environ.get("BAYESKERN_CPU_DEVICES", "")
    if wanted.strip() == "0":
        _STATUS = "left alone: BAYESKERN_CPU_DEVICES=0"
    elif re.search(r"--xla_force_host_platform_device_count=", os.environ.get("XLA_FLAGS", "")):
        _STATUS = "left alone: XLA_FLAGS sets the CPU device count"
    elif jax.config.jax_num_cpu_devices != -1:
        _STATUS = "left alone: jax_num_cpu_devices was set"
    elif xla_bridge.backends_are_initialized():
        _STATUS = (
            "not possible: JAX was initialized before bayeskern was imported, so chains "
            "run one after another; import bayeskern first to run them in parallel"
        )
    else:
        n = int(wanted) if wanted.strip().isdigit() else max(4, available_cores())
        jax.config.update("jax_num_cpu_devices", n)
        _STATUS = f"{n} CPU devices for {available_cores()} cores"
    return _STATUS


def cpu_device_status() -> str:
    """Say what :func:`configure_cpu_devices` did at import, in one sentence."""
    return _STATUS


def blas_threads() -> int:
    """BLAS threads that bayeskern's fits and predictions use: ``$BAYESKERN_BLAS_THREADS``, else 1.

    MCMC does many small factorizations; multi-threaded OpenBLAS spin-waits on them, which on
    a busy machine makes each factorization many times slower than on one thread.

    Returns
    -------
    int
        The thread limit.
    """
    return int(os.environ.get("BAYESKERN_BLAS_THREADS", "1"))


def limit_blas(fn):
    """Wrap ``fn`` to run with BLAS limited to :func:`blas_threads` threads.

    The limit (``threadpoolctl.threadpool_limits``) holds only while ``fn`` runs; the
    process's own setting is restored afterwards, so importing or using bayeskern leaves BLAS
    as the user configured it.

    Parameters
    ----------
    fn : callable
        A fit or predict method (or any function doing linear algebra).

    Returns
    -------
    callable
        ``fn`` wrapped, with its name, docstring and signature.
    """

    @functools.wraps(fn)
    def limited(*args, **kwargs):
        with threadpool_limits(blas_threads(), user_api="blas"):
            return fn(*args, **kwargs)

    return limited


def release_pmap_programs() -> None:
    """Let JAX free the compiled programs of ``pmap``-ed functions that are no longer used.

    JAX (0.10) memoizes every function given to ``jax.pmap`` in a cache whose entry refers
    back to its own key (``jax._src.pmap._cached_shard_map``), so neither the function nor its
    compiled programs are ever freed. NumPyro's parallel chains and bayeskern's per-device
    maps over posterior draws ``pmap`` a new closure at every fit and prediction, so without
    this a process keeps every fit's sampler programs. Each compiled XLA:CPU program holds
    memory mappings, and once a process reaches the kernel's limit on them
    (``vm.max_map_count``) XLA crashes inside a compile: a grid search of default fits in one
    process was enough (docs/results/performance.md, "Long sessions"). bayeskern empties that
    cache after each of its ``pmap`` calls. A ``pmap``-ed function of your own that is still
    in use is traced again at its next call. Does nothing where JAX has no such cache.
    """
    try:
        from jax._src import pmap as _pmap

        clear = _pmap._cached_shard_map.cache_clear
    except (ImportError, AttributeError):
        return
    clear()
