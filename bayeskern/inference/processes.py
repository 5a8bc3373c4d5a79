"""Independent chains in separate processes, for samplers whose chains cannot share one.

Chains of a sampler are independent, so on a machine with several cores they can run at the
same time. Within one process that is JAX's job (``pmap``, ``shard_map``, ``vmap``), but
XLA:CPU (jax 0.10) hangs when the Gibbs sampler's sweeps — factorizations inside loops — run
on several CPU devices at once (:mod:`bayeskern.inference.gabasr_gibbs`). Separate Python
processes share nothing of XLA's runtime; each imports JAX and compiles its own programs,
which costs a few seconds per process, so this pays only for long runs
(:data:`PROCESS_WORK`).

Each worker is a new Python interpreter (never a ``fork``: a forked JAX runtime is not safe)
that runs a module-level function on its own arguments; arguments and results travel
pickled through its standard input and output.
"""

from __future__ import annotations

import multiprocessing
import os
import pickle
import subprocess
import sys
from collections.abc import Callable, Sequence
from subprocess import PIPE

__all__ = ["PROCESS_WORK", "can_start_processes", "map_in_processes", "process_count"]

#: the chains' sequential work (a sampler's own units: the Gibbs sampler's
#: ``chains * sweeps * n * P**2``) from which they go to processes: starting one (importing
#: JAX, compiling the sweep) costs a few seconds
PROCESS_WORK = 5e10


def _cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def can_start_processes() -> bool:
    """Return whether this process may start worker processes and has the cores to use them.

    Not inside a daemonic process (a ``multiprocessing`` pool's worker may not have children),
    and only with at least two CPU cores available to this process.
    """
    return _cores() >= 2 and not multiprocessing.current_process().daemon


def process_count(n_chains: int) -> int:
    """Return how many processes share ``n_chains`` chains.

    As many as cores, at most one per chain, and a number that divides the chains evenly
    (every process the same share).
    """
    return max(d for d in range(1, min(_cores(), n_chains) + 1) if n_chains % d == 0)


def map_in_processes(fn: Callable, args: Sequence[tuple], on_done: Callable | None = None) -> list:
    """Return ``[fn(*a) for a in args]``, each call in its own Python process.

    The workers are new interpreters (``python -c``, with this process's environment and
    ``sys.path``) that read ``(fn, a)`` pickled from their standard input and write the
    pickled result back, so nothing of this process is re-run in them (unlike
    ``multiprocessing``'s ``spawn``, which imports the caller's main script again: a script
    without an ``if __name__ == "__main__"`` guard would run twice). ``fn`` must be
    importable by name (a module-level function) and its arguments and result picklable;
    ``on_done()`` is called as each call finishes (a progress bar). An exception in a worker
    is raised here; on ``KeyboardInterrupt`` or any error the workers are killed before it
    propagates, so nothing keeps running.
    """
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
    workers = [
        subprocess.Popen([sys.executable, "-c", _SERVE], stdin=PIPE, stdout=PIPE, env=env)
        for _ in args
    ]
    try:
        for worker, a in zip(workers, args, strict=True):
            worker.stdin.write(pickle.dumps((fn, tuple(a)), protocol=pickle.HIGHEST_PROTOCOL))
            worker.stdin.close()
        results = []
        for worker in workers:
            payload = worker.stdout.read()
            code = worker.wait()
            try:
                ok, value = pickle.loads(payload)
            except Exception:  # noqa: BLE001 - no result: the worker died
                raise RuntimeError(
                    f"a worker process exited with code {code} without a result"
                ) from None
            if not ok:
                raise value
            results.append(value)
            if on_done is not None:
                on_done()
        return results
    finally:
        for worker in workers:
            if worker.poll() is None:
                worker.kill()
                worker.wait()


#: what a worker runs: ``_serve`` of this module
_SERVE = "from bayeskern.inference.processes import _serve; _serve()"


def _serve() -> None:
    """Worker side of :func:`map_in_processes`: read ``(fn, args)``, write ``(ok, value)``."""
    out = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)  # anything the work prints goes to stderr, not into the result
    fn, args = pickle.load(sys.stdin.buffer)
    try:
        result = (True, fn(*args))
    except Exception as err:  # noqa: BLE001 - handed to the caller
        try:
            pickle.dumps(err)
            result = (False, err)
        except Exception:  # noqa: BLE001
            result = (False, RuntimeError(f"{type(err).__name__}: {err}"))
    out.write(pickle.dumps(result, protocol=pickle.HIGHEST_PROTOCOL))
    out.close()
