"""The GaBaSR Gibbs chains in worker processes (``chain_method="processes"``).

XLA:CPU hangs when the Gibbs sweeps run on several CPU devices at once, so on a CPU the chains
of a long run go to separate Python processes (:mod:`bayeskern.inference.processes`): each
rebuilds the kernel from its settings as JSON, runs its share of the chains of
``"sequential"`` (same keys, same compiled loop: the same draws) and hands them back.
:func:`auto_chain_method` decides when the chains' work pays for starting the processes.
"""

from __future__ import annotations

import json

import jax
import jax.numpy as jnp
import numpy as np

from bayeskern.inference.gibbs_kernel import GaBaSRGibbs, compiled_chain
from bayeskern.inference.gibbs_sweep import SweepConfig
from bayeskern.inference.processes import (
    PROCESS_WORK,
    can_start_processes,
    chain_outputs,
    compile_once,
    map_chain_groups,
    process_count,
)
from bayeskern.models.gabasr import GibbsPrior

__all__ = ["SWEEP_FIXED_ROWS", "auto_chain_method", "chains_in_process", "run_in_processes"]


def chains_in_process(config: str, num_warmup: int, num_samples: int, keys, X, y, mean_basis):
    """Run the chains of ``keys`` one after another: a worker of ``chain_method="processes"``.

    The same chains as the ``"sequential"`` method (same initial states, same compiled
    loop). ``config`` is the :class:`SweepConfig` as JSON (:func:`config_json`). Returns
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
    states = [kernel.init(jnp.asarray(k), num_warmup, None, (), data) for k in keys]
    run = compile_once(  # one worker compiles, the others load its program
        lambda: compiled_chain(kernel, num_warmup, num_samples, False).lower(states[0]).compile()
    )
    per_chain = [run(st)[1:] for st in states]
    return chain_outputs(*jax.tree.map(lambda *a: np.stack(a), *per_chain))


def config_json(config: SweepConfig) -> str:
    """``config`` as JSON for a worker process (no pickle)."""
    return json.dumps({**config._asdict(), "prior": config.prior._asdict()})


#: rows whose :math:`n P^2` work equals a sweep's fixed part (the sequential frequency moves
#: and mixture steps, whose cost does not grow with the rows), from CPU timings of sweeps of
#: one design width at several row counts (docs/results/gabasr.md)
SWEEP_FIXED_ROWS = 1000


def auto_chain_method(n: int, n_columns: int, sweeps: int, num_chains: int) -> str:
    """Return ``"processes"`` when the chains' work pays for starting processes.

    A sweep costs a fixed part (its sequential moves, each a few small operations) plus a
    part growing as :math:`n P^2` for :math:`P` design columns (the Pólya-Gamma weights'
    products, the rank-updated evidence); with the fixed part counted as
    :data:`SWEEP_FIXED_ROWS` rows, the chains' work ``num_chains * sweeps * (n +
    SWEEP_FIXED_ROWS) * P**2`` is compared with
    :data:`bayeskern.inference.processes.PROCESS_WORK`. On an accelerator (JAX's default
    backend is not the CPU) the chains are batched into one program instead
    (``"vectorized"``): processes would each claim the device.
    """
    if jax.default_backend() != "cpu":
        return "vectorized" if num_chains > 1 else "sequential"
    work = float(num_chains) * sweeps * (n + SWEEP_FIXED_ROWS) * n_columns**2
    if num_chains > 1 and work >= PROCESS_WORK and can_start_processes():
        return "processes"
    return "sequential"


def run_in_processes(kernel, key, data, num_warmup, num_samples, num_chains, progress_bar):
    """Run the chains of ``"sequential"``, shared out to :func:`process_count` processes."""
    keys = np.asarray(jax.random.split(key, num_chains) if num_chains > 1 else key[None])
    X, y, B = (None if data[k] is None else np.asarray(data[k]) for k in ("X", "y", "mean_basis"))
    config = config_json(kernel.config)
    groups = np.array_split(keys, process_count(num_chains))
    samples, stats = map_chain_groups(
        chains_in_process,
        [(config, num_warmup, num_samples, g, X, y, B) for g in groups],
        num_chains,
        progress_bar,
        compile_first=True,
    )
    return samples, stats, None
