"""Targets for worker processes in the tests of :mod:`bayeskern.inference.processes`.

A worker imports its target's module by name; this one imports no JAX, so a worker that runs
one of these starts in a fraction of a second, not the seconds a test module's imports take.
"""

import time

import numpy as np

from bayeskern.inference import processes


def compile_and_time(seconds):
    """A 'compilation' of ``seconds`` through ``compile_once``: its start and end times."""

    def compile_fn():
        start = time.time()
        time.sleep(seconds)
        return start, time.time()

    return np.array(processes.compile_once(compile_fn))
