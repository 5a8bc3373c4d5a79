"""Shared helpers of the peer benchmarks (benchmarks/peer_*.py): timing, machine, results file.

Each benchmark runs in its own process; the functions it compares are timed interleaved
(A, B, A, B, ...) so that load changes on a shared machine hit both alike, and the median
over repeats is reported.
"""

from __future__ import annotations

import os
import platform
import re
import sys
import time
from pathlib import Path

import numpy as np

RESULTS = Path(__file__).resolve().parent / "results" / "peers.md"


def cpu_name() -> str:
    try:
        for ln in open("/proc/cpuinfo"):
            if ln.startswith("model name"):
                return ln.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def machine() -> str:
    return f"{os.cpu_count()}-core {cpu_name()}, no GPU"


def loadavg() -> str:
    try:
        return " ".join(open("/proc/loadavg").read().split()[:3])
    except OSError:
        return "n/a"


def interleaved_medians(fns: dict, repeats: int) -> dict:
    """Median wall time of each zero-argument callable, called in turn ``repeats`` times
    (each callable must block until its result is ready)."""
    times = {k: [] for k in fns}
    for _ in range(repeats):
        for k, f in fns.items():
            t = time.perf_counter()
            f()
            times[k].append(time.perf_counter() - t)
    return {k: float(np.median(v)) for k, v in times.items()}


def command() -> str:
    return "timeout 3600 .venv/bin/python " + " ".join(
        [os.path.relpath(sys.argv[0])] + sys.argv[1:])


def write_section(name: str, body: str) -> None:
    """Replace (or append) the section ``name`` of benchmarks/results/peers.md."""
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    text = RESULTS.read_text() if RESULTS.exists() else (
        "# Peer benchmarks\n\nWritten by `benchmarks/peer_*.py` (one process per benchmark, "
        "interleaved repeats, medians). Ratios are bayeskern time / peer time unless stated.\n")
    start, end = f"<!-- {name} -->", f"<!-- /{name} -->"
    block = f"{start}\n{body.strip()}\n{end}"
    pat = re.compile(re.escape(start) + ".*?" + re.escape(end), re.S)
    text = pat.sub(lambda _: block, text) if pat.search(text) else text.rstrip() + "\n\n" + block
    RESULTS.write_text(text.rstrip() + "\n")
    print(f"wrote section {name!r} of {RESULTS}")
