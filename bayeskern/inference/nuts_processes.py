"""The chains of one NUTS fit shared out to worker processes (``chain_method="processes"``).

Each worker rebuilds the model from JSON and arrays (a builder named by module and function,
as saved runs are), runs its share of the chains of ``"sequential"`` (same keys, starts and
mass matrix) and hands back the draws; with ``num_samples="auto"`` the workers write each
block to a shared folder and :class:`AutoStop`, in the calling process, decides on the same
draws, block for block, as a run in one process would.
"""

from __future__ import annotations

import importlib
import json
import os
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
from numpyro.infer import init_to_median

from bayeskern.inference.nuts_kernel import nuts_chains, transition_counts
from bayeskern.inference.processes import (
    chain_outputs,
    chain_parts,
    map_chain_groups,
    process_count,
    write_npz,
)
from bayeskern.inference.start import model_functions

__all__ = ["AutoStop", "chains_in_process", "run_in_processes"]


def run_in_processes(
    rebuild,
    overrides,
    settings,
    keys,
    init_params,
    inverse_mass,
    counts: dict,
    progress_bar,
    stop=None,
):
    """Run the chains of ``"sequential"``, shared out to :func:`process_count` processes.

    Every worker gets its chains' keys and starts, the inverse mass matrix, the data the
    chains run on (``overrides``: the arrays ``data_at_mode`` replaced) and ``counts``
    (``num_warmup``, ``num_samples``, ``length``); the draws and statistics come back chains
    first, in chain order. ``stop``: an :class:`AutoStop` for ``num_samples="auto"``, which
    reads the blocks the workers write into a shared folder and tells them when to stop.
    """
    builder, config, arrays = rebuild
    keys = np.asarray(keys)
    named = {
        **{f"data/{k}": np.asarray(v) for k, v in arrays.items()},
        **{f"override/{k}": np.asarray(v) for k, v in overrides.items()},
    }
    if inverse_mass is not None:
        named["inverse_mass"] = np.asarray(inverse_mass)
    groups = np.array_split(np.arange(len(keys)), process_count(len(keys)))
    with tempfile.TemporaryDirectory(prefix="bayeskern-blocks-") as folder:
        jobs = []
        for group, chains in enumerate(groups):
            mine = {
                **named,
                "keys": keys[chains],
                **{f"init/{k}": np.asarray(v)[chains] for k, v in init_params.items()},
            }
            spec = dict(builder=builder, config=config, settings=settings, **counts)
            if stop is not None:
                spec.update(
                    folder=folder, group=group, block=stop.block, max_samples=stop.max_samples
                )
            jobs.append((json.dumps(spec), json.dumps(list(mine)), *mine.values()))
        if stop is not None:
            stop.folder, stop.groups = Path(folder), len(groups)
        samples, stats = map_chain_groups(chains_in_process, jobs, len(keys), progress_bar, stop)
        if stop is None:
            return samples, stats
        stop()  # the blocks that the last worker to end wrote
    if stop.draws is None:
        raise RuntimeError("the worker processes ended before the draws met the stop rule")
    return tuple({k: v[:, : stop.draws] for k, v in d.items()} for d in (samples, stats))


def chains_in_process(spec: str, names: str, *arrays):
    """Run the chains of ``keys`` one after another: a worker of ``chain_method="processes"``.

    The chains of ``"sequential"`` (same keys, starts and mass matrix; the model rebuilt by
    ``rebuild``'s builder). Returns ``draws/<site>`` and ``stats/<name>`` arrays, chains first.
    """
    s = json.loads(spec)
    named = dict(zip(json.loads(names), arrays, strict=True))
    part = lambda prefix: {k[len(prefix) :]: v for k, v in named.items() if k.startswith(prefix)}  # noqa: E731
    module, name = s["builder"].split(":")
    model, model_kwargs = getattr(importlib.import_module(module), name)(s["config"], part("data/"))
    model_kwargs = {**model_kwargs, **{k: jnp.asarray(v) for k, v in part("override/").items()}}
    keys = jnp.asarray(named["keys"])
    functions = model_functions(model, model_kwargs, keys[:1], init_to_median(num_samples=15))
    num_warmup, length, folder = s["num_warmup"], s["length"], s.get("folder")
    chains = nuts_chains(
        functions,
        s["settings"],
        named.get("inverse_mass"),
        num_chains=len(keys),
        method="sequential",
        num_warmup=num_warmup,
        length=length,
    )
    state = chains.init(keys, {k: jnp.asarray(v) for k, v in part("init/").items()})
    for count in transition_counts(num_warmup, length):
        state, _, _ = chains.advance(state, count, collect=False)
    # num_samples="auto" (a folder): blocks until the caller's stop, written after each block
    total, step = (s["num_samples"], length) if folder is None else (s["max_samples"], s["block"])
    blocks, taken = [], 0
    while taken < total and (folder is None or taken < AutoStop.read(folder)):
        count = min(step, total - taken)
        state, draws, stats = chains.advance(state, count)
        blocks.append((draws, stats))
        taken += count
        if folder is not None:
            write_npz(
                Path(folder) / f"{s['group']}-{len(blocks) - 1}.npz", chain_outputs(draws, stats)
            )
            # the next block only once the caller has judged this one: a block drawn past
            # the stop would hold up the fit's end by a whole block
            AutoStop.wait(folder, block=len(blocks) - 1)
    draws, stats = jax.tree.map(lambda *b: np.concatenate(b, axis=1), *blocks)
    if folder is not None:  # every worker returns the draws the caller decided on
        keep = int(AutoStop.wait(folder))
        draws, stats = jax.tree.map(lambda a: a[:, :keep], (draws, stats))
    return chain_outputs(draws, stats)


class AutoStop:
    """The calling side of ``num_samples="auto"`` with the chains in worker processes.

    Each worker writes every block of its chains' draws to ``folder`` as ``<group>-<block>.npz``
    and waits for the decision on it. Called while the workers run, this reads each block once
    every group has written it, joins the chains and asks ``decide(taken, draws, stats)``
    whether to stop (a reason, kept as ``reason``, or ``None``: go on); then it writes
    ``stop.json`` with the number of draws to keep (``draws``), or ``go-<block>`` to let the
    workers draw the next block. The decision uses the same draws, block for block, as in one
    process, so the result does not depend on which worker is ahead, and no worker draws a
    block past the stop (the fit would wait for it).
    """

    def __init__(self, block: int, max_samples: int, decide: Callable):
        self.block, self.max_samples, self.decide = block, max_samples, decide
        self.folder, self.groups = None, 0
        self.parts, self.draws, self.reason = [], None, None

    @staticmethod
    def read(folder) -> float:
        """Return the draws the caller decided to keep (``inf`` while undecided)."""
        path = Path(folder) / "stop.json"
        return json.loads(path.read_text())["draws"] if path.exists() else float("inf")

    @staticmethod
    def wait(folder, block: int | None = None) -> float:
        """Wait for the caller's decision and return the draws to keep (``inf``: go on).

        With ``block``, until the caller has judged that block (it goes on or stops); without,
        until it stops (a worker that has drawn all it may).
        """
        parent = os.getppid()
        go_on = None if block is None else Path(folder) / f"go-{block}"
        while (keep := AutoStop.read(folder)) == float("inf"):
            if go_on is not None and go_on.exists():
                return keep
            if os.getppid() != parent:  # the caller is gone: nobody will decide
                raise RuntimeError("the process that started this worker has ended")
            time.sleep(0.02)
        return keep

    def __call__(self) -> None:
        """Judge each block all groups wrote: ``stop.json`` on a stop, else ``go-<block>``."""
        while self.draws is None:
            paths = [self.folder / f"{g}-{len(self.parts)}.npz" for g in range(self.groups)]
            if not all(p.exists() for p in paths):
                return
            groups = []
            for path in paths:
                with np.load(path, allow_pickle=False) as npz:
                    groups.append({k: npz[k] for k in npz.files})
            self.parts.append({k: np.concatenate([g[k] for g in groups]) for k in groups[0]})
            draws, stats = chain_parts(
                {k: np.concatenate([p[k] for p in self.parts], axis=1) for k in self.parts[0]}
            )
            taken = next(iter(stats.values())).shape[1]
            # the cap ends the run whatever ``decide`` says: a worker at the cap waits for it
            self.reason = self.decide(taken, draws, stats) or (
                "cap" if taken >= self.max_samples else None
            )
            if self.reason:
                self.draws = taken
                tmp = self.folder / "stop.json.tmp"
                tmp.write_text(json.dumps(dict(draws=taken)))
                tmp.replace(self.folder / "stop.json")
            else:  # the workers may draw the next block
                (self.folder / f"go-{len(self.parts) - 1}").touch()
