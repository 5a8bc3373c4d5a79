"""One JAX CPU device per core, so that MCMC chains run in parallel.

JAX puts all CPU cores behind one device by default, so NumPyro's ``chain_method="parallel"``
(one chain per device, ``pmap``) falls back to running the chains one after another. The
number of CPU devices can only be chosen before JAX initializes its backend (before the first
array is created or the first function is compiled), so :mod:`bayeskern` calls
:func:`configure_cpu_devices` when it is imported, and it does something only when that is
still possible and nobody else has chosen:

* JAX's backend is not initialized yet (import bayeskern before doing anything with JAX);
* neither ``XLA_FLAGS=--xla_force_host_platform_device_count=...`` nor
  ``jax.config.jax_num_cpu_devices`` was set (your choice wins);
* ``BAYESKERN_CPU_DEVICES`` is not ``0`` (set it to a number to choose the count, or to
  ``0`` to leave JAX's default alone).

It then asks for ``max(4, cores)`` CPU devices, so that the four default chains of every
estimator run at once and the operating system shares the cores between them (measured on
2 cores: one round of 4 chains on 4 devices is faster than two rounds on 2). These are
virtual devices of the one CPU: computations that do not use them explicitly run on the
first, as before.

If JAX was initialized first (for example a notebook that ran JAX code before importing
bayeskern), nothing changes: there is one CPU device and the chains of a fit run one after
another (``chain_method="sequential"``) — correct, with the same draws for the same seed,
only slower. :func:`cpu_device_status` says which case applies.
"""

from __future__ import annotations

import os
import re

import jax

__all__ = ["configure_cpu_devices", "cpu_device_status"]

_STATUS = "not configured"


def _cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def configure_cpu_devices() -> str:
    """Ask JAX for one CPU device per chain when that is still possible (see the module).

    Returns a sentence saying what was done; :func:`cpu_device_status` repeats it later.
    """
    global _STATUS
    from jax._src import xla_bridge

    wanted = os.environ.get("BAYESKERN_CPU_DEVICES", "")
    if wanted.strip() == "0":
        _STATUS = "left alone: BAYESKERN_CPU_DEVICES=0"
    elif re.search(r"--xla_force_host_platform_device_count=", os.environ.get("XLA_FLAGS", "")):
        _STATUS = "left alone: XLA_FLAGS sets the CPU device count"
    elif jax.config.jax_num_cpu_devices != -1:
        _STATUS = "left alone: jax_num_cpu_devices was set"
    elif xla_bridge.backends_are_initialized():
        _STATUS = ("not possible: JAX was initialized before bayeskern was imported, so chains "
                   "run one after another; import bayeskern first to run them in parallel")
    else:
        n = int(wanted) if wanted.strip().isdigit() else max(4, _cores())
        jax.config.update("jax_num_cpu_devices", n)
        _STATUS = f"{n} CPU devices for {_cores()} cores"
    return _STATUS


def cpu_device_status() -> str:
    """Say what :func:`configure_cpu_devices` did at import, in one sentence."""
    return _STATUS
