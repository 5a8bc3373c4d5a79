"""Independent chains in separate processes, for samplers whose chains cannot share one.

Chains of a sampler are independent, so on a machine with several cores they can run at the
same time. Within one process that is JAX's job (``pmap``, ``shard_map``, ``vmap``), but
XLA:CPU (jax 0.10) hangs when the Gibbs sampler's sweeps — factorizations inside loops — run
on several CPU devices at once (:mod:`bayeskern.inference.gabasr_gibbs`). Separate Python
processes share nothing of XLA's runtime; each imports JAX and compiles its own programs,
which costs a few seconds per process, so this pays only for long runs
(:data:`PROCESS_WORK`).

Each worker is a new Python interpreter (never a ``fork``: a forked JAX runtime is not safe)
that runs a module-level function on its own arguments; arguments and results travel as
``.npz`` and JSON files (no pickle, as for saved runs).
"""

from __future__ import annotations

import builtins
import importlib
import json
import multiprocessing
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TypeVar

import numpy as np
from tqdm.auto import tqdm

from bayeskern.devices import available_cores, limit_blas

T = TypeVar("T")

__all__ = [
    "PROCESS_WORK",
    "can_start_processes",
    "chain_outputs",
    "chain_parts",
    "compile_once",
    "map_chain_groups",
    "map_in_processes",
    "process_count",
    "write_npz",
]

#: the chains' sequential work (a sampler's own units: the Gibbs sampler's
#: ``chains * sweeps * (n + gibbs_processes.SWEEP_FIXED_ROWS) * P**2``) from which they go to
#: processes: starting one (importing JAX, loading the compiled sweep) costs a few seconds
PROCESS_WORK = 1e11


def can_start_processes() -> bool:
    """Return whether this process may start worker processes and has the cores to use them.

    Not inside a daemonic process (a ``multiprocessing`` pool's worker may not have children),
    and only with at least two CPU cores available to this process.
    """
    return available_cores() >= 2 and not multiprocessing.current_process().daemon


def process_count(n_chains: int) -> int:
    """Return how many processes share ``n_chains`` chains.

    As many as cores, at most one per chain, and a number that divides the chains evenly
    (every process the same share).
    """
    return max(d for d in range(1, min(available_cores(), n_chains) + 1) if n_chains % d == 0)


def map_in_processes(
    fn: Callable,
    args: Sequence[tuple],
    on_done: Callable | None = None,
    poll: Callable | None = None,
    compile_first: bool = False,
) -> list:
    """Return ``[fn(*a) for a in args]``, each call in its own Python process.

    The workers are new interpreters (``python -c``, with this process's environment and
    ``sys.path``), so nothing of this process is re-run in them (unlike ``multiprocessing``'s
    ``spawn``, which imports the caller's main script again: a script without an
    ``if __name__ == "__main__"`` guard would run twice). No pickle either way: ``fn`` is
    imported by its module and name, its arguments (NumPy arrays, or numbers, strings,
    ``None`` as JSON) and its result (an array or a dict of arrays) travel as ``.npz`` and
    JSON files in a temporary folder, read with ``allow_pickle=False``. ``on_done()`` is
    called as each call finishes (a progress bar), ``poll()`` about every 0.1 s while calls
    run (a caller that watches what the workers write). An exception in a worker is raised
    here as soon as that worker ends (as the same built-in exception type, else
    ``RuntimeError``); on ``KeyboardInterrupt`` or any error the workers are killed before it
    propagates, so nothing keeps running.

    ``compile_first``: the workers run the same programs, so only the first compiles them
    (where ``fn`` compiles through :func:`compile_once`); the others, started at the same
    time, prepare their inputs meanwhile, then load its programs from a JAX compilation
    cache in the temporary folder (or the user's ``JAX_COMPILATION_CACHE_DIR``). Two
    compilations on two cores at once each take about twice as long as one alone.
    """
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
    target = f"{fn.__module__}:{fn.__qualname__}"
    with tempfile.TemporaryDirectory(prefix="bayeskern-workers-") as tmp:
        folders = [Path(tmp) / str(i) for i in range(len(args))]
        for folder, a in zip(folders, args, strict=True):
            folder.mkdir()
            _write_args(folder, a)
        if compile_first:
            env.setdefault("JAX_COMPILATION_CACHE_DIR", str(Path(tmp) / "jax-cache"))
            env["JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS"] = "0"
            env["JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES"] = "0"
            env[_LEAD] = str(folders[0])
        workers = [
            subprocess.Popen([sys.executable, "-c", _SERVE, target, str(f)], env=env)
            for f in folders
        ]
        try:
            results, running = [None] * len(workers), set(range(len(workers)))
            while running:
                for i in sorted(running):
                    code = workers[i].poll()
                    if code is not None:
                        results[i] = _read_result(folders[i], code)
                        running.discard(i)
                        if on_done is not None:
                            on_done()
                if running:
                    if poll is not None:
                        poll()
                    time.sleep(0.1)
            return results
        finally:
            for worker in workers:
                if worker.poll() is None:
                    worker.kill()
                    worker.wait()


def chain_outputs(draws: dict, stats: dict) -> dict:
    """Return a worker's result for :func:`map_chain_groups`: ``draws/``, ``stats/`` arrays."""
    return {
        **{f"draws/{k}": v for k, v in draws.items()},
        **{f"stats/{k}": v for k, v in stats.items()},
    }


def map_chain_groups(
    fn: Callable,
    jobs: Sequence[tuple],
    num_chains: int,
    progress_bar: bool = False,
    poll: Callable | None = None,
    compile_first: bool = False,
) -> tuple[dict, dict]:
    """Run a sampler's groups of chains, one :func:`map_in_processes` call each.

    ``fn(*job)`` runs one group (every group the same number of chains) and returns
    :func:`chain_outputs`, chains first. Returns the draws and the statistics of all groups
    joined along the chain axis, in the order of ``jobs``; the progress bar counts chains.
    ``poll``, ``compile_first``: as :func:`map_in_processes`.
    """
    bar = tqdm(total=num_chains, desc="chains", disable=not progress_bar)
    with bar:
        outs = map_in_processes(
            fn,
            jobs,
            on_done=lambda: bar.update(num_chains // len(jobs)),
            poll=poll,
            compile_first=compile_first,
        )
    return chain_parts({k: np.concatenate([o[k] for o in outs]) for k in outs[0]})


def chain_parts(outputs: dict) -> tuple[dict, dict]:
    """Split :func:`chain_outputs` back into its draws and statistics."""
    return tuple(
        {k.split("/", 1)[1]: v for k, v in outputs.items() if k.startswith(part)}
        for part in ("draws/", "stats/")
    )


def write_npz(path: Path, arrays: dict) -> None:
    """Write ``arrays`` to ``path`` (``.npz``) whole or not at all: a reader never sees half."""
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "wb") as f:
        np.savez(f, **{k: np.asarray(v) for k, v in arrays.items()})
    tmp.replace(path)


def _write_args(folder: Path, args: tuple) -> None:
    arrays = {f"a{i}": v for i, v in enumerate(args) if isinstance(v, np.ndarray)}
    np.savez(folder / "args.npz", **arrays)
    plain = [None if f"a{i}" in arrays else v for i, v in enumerate(args)]
    (folder / "args.json").write_text(json.dumps({"values": plain, "arrays": sorted(arrays)}))


def _read_args(folder: Path) -> list:
    spec = json.loads((folder / "args.json").read_text())
    with np.load(folder / "args.npz", allow_pickle=False) as npz:
        return [
            npz[f"a{i}"] if f"a{i}" in spec["arrays"] else v for i, v in enumerate(spec["values"])
        ]


def _read_result(folder: Path, code: int):
    error = folder / "error.json"
    if error.exists():
        err = json.loads(error.read_text())
        kind = getattr(builtins, err["type"], None)
        if isinstance(kind, type) and issubclass(kind, Exception):
            raise kind(err["message"])
        raise RuntimeError(f"{err['type']}: {err['message']}")
    path = folder / "result.npz"
    if not path.exists():
        raise RuntimeError(f"a worker process exited with code {code} without a result")
    with np.load(path, allow_pickle=False) as npz:
        out = {k: npz[k] for k in npz.files}
    return out["__array__"] if list(out) == ["__array__"] else out


#: what a worker runs: ``_serve`` of this module, with the target and the folder as arguments
_SERVE = "from bayeskern.inference.processes import _serve; _serve()"

#: environment variable naming the folder of the worker that compiles first
_LEAD = "BAYESKERN_COMPILE_LEAD"


#: the folder of the call this worker process serves (None outside a worker)
_FOLDER: Path | None = None


def compile_once(compile_fn: Callable[[], T]) -> T:
    """Return ``compile_fn()``, compiled by one worker of a ``compile_first`` call only.

    In the first worker of ``map_in_processes(..., compile_first=True)`` it compiles and
    then tells the others; in the others it waits until then (or until the first worker
    ends) and loads the same programs from the shared JAX compilation cache. Anywhere else
    it simply calls ``compile_fn``.
    """
    lead = os.environ.get(_LEAD)
    if lead is None or _FOLDER is None:
        return compile_fn()
    lead = Path(lead)
    if _FOLDER == lead:
        out = compile_fn()
        (lead / "compiled").touch()
        return out
    while not any((lead / f).exists() for f in ("compiled", "result.npz", "error.json")):
        time.sleep(0.05)  # the caller kills this worker if the first one dies
    return compile_fn()


def _serve() -> None:
    """Worker side of :func:`map_in_processes`: run ``module:function`` on the folder's args."""
    global _FOLDER
    target, folder = sys.argv[1], Path(sys.argv[2])
    _FOLDER = folder
    module, name = target.split(":")
    try:
        args = _read_args(folder)
        # BLAS limited as in the caller's fit (bayeskern.devices.limit_blas): several
        # worker processes with multi-threaded OpenBLAS spin-waiting would share the cores
        result = limit_blas(getattr(importlib.import_module(module), name))(*args)
        write_npz(
            folder / "result.npz", result if isinstance(result, dict) else {"__array__": result}
        )
    except Exception as err:  # noqa: BLE001 - handed to the caller
        message = {"type": type(err).__name__, "message": str(err)}
        (folder / "error.json").write_text(json.dumps(message))
