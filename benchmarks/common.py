"""Shared helpers of the benchmark scripts: results files, machine line, timing, data scaling.

The scripts live in ``benchmarks/papers/`` (paper reproductions), ``benchmarks/peers/`` (peer
libraries), ``benchmarks/scale/`` (large N) and ``benchmarks/defaults/`` (default settings) and
import this module after putting ``benchmarks/`` on ``sys.path``::

    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: common.py
    from common import RESULTS, write_section

Every results file is written under ``benchmarks/results/`` (:data:`RESULTS`), atomically
(a temporary sibling renamed into place), so an interrupted run never leaves half a file.

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
import warnings
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
DOCS_RESULTS = ROOT / "docs" / "results"

#: the two marker styles of the sectioned results files: ``<!-- name:start -->`` ...
#: ``<!-- name:end -->`` (vsk.md, conformal.md) and ``<!-- name -->`` ... ``<!-- /name -->``
#: (peers.md)
START_END = ("<!-- {}:start -->", "<!-- {}:end -->")
OPEN_CLOSE = ("<!-- {} -->", "<!-- /{} -->")

PEERS_HEADER = (
    "# Peer benchmarks\n\nWritten by `benchmarks/peers/peer_*.py` (one process per benchmark, "
    "interleaved repeats, medians). Ratios are bayeskern time / peer time unless stated.\n"
)

VSK_HEADER = """\
# VSK (variably scaled kernels) — reproduction of Campi, Marchetti & Perracchione (2021)

Every section below is written by the script named in it; rerun that command to reproduce
it. Paper numbers are copied from Fig. 1 and Tables 1-5 of Campi et al. (2021).
"""


# ----------------------------------------------------------------------------- results files
def write_text(path: str | Path, text: str) -> Path:
    """Write ``text`` to ``path`` atomically, creating the folder; returns the path."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text)
    tmp.replace(path)  # never leave a half-written results file
    return path


def write_section(
    path: str | Path, name: str, body: str, header: str = "", markers: tuple[str, str] = START_END
) -> None:
    """Replace (or append) the section ``name`` of the Markdown file ``path``.

    The section is the text between the two ``markers`` (formatted with ``name``); the rest
    of the file (hand-written notes, other scripts' sections) is kept. A missing file starts
    with ``header``.
    """
    path = Path(path)
    old = path.read_text() if path.exists() else header
    start, end = (m.format(name) for m in markers)
    block = f"{start}\n{body.strip()}\n{end}"
    pattern = re.compile(re.escape(start) + ".*?" + re.escape(end), re.S)
    if pattern.search(old):
        new = pattern.sub(lambda _: block, old)
    else:
        new = (old.rstrip() + "\n\n" if old.strip() else "") + block
    write_text(path, new.rstrip() + "\n")
    print(f"wrote section {name!r} of {path}")


def write_peers_section(name: str, body: str) -> None:
    """Replace (or append) the section ``name`` of ``benchmarks/results/peers.md``."""
    write_section(RESULTS / "peers.md", name, body, header=PEERS_HEADER, markers=OPEN_CLOSE)


def write_vsk_section(name: str, body: str) -> None:
    """Replace (or append) the section ``name`` of ``benchmarks/results/vsk.md``."""
    write_section(RESULTS / "vsk.md", name, body, header=VSK_HEADER)


def md_table(header: list[str], rows: list[list]) -> str:
    """A Markdown table; floats printed with 3 decimals."""
    fmt = lambda v: f"{v:.3f}" if isinstance(v, float) else str(v)  # noqa: E731
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(fmt(v) for v in r) + " |" for r in rows]
    return "\n".join(lines)


# ----------------------------------------------------------------------------- machine, timing
def cpu_name() -> str:
    try:
        for ln in open("/proc/cpuinfo"):
            if ln.startswith("model name"):
                return ln.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def accelerators() -> str:
    """The accelerators JAX runs on here, e.g. ``1 x NVIDIA H200``, or ``no GPU``."""
    import jax

    kinds = [d.device_kind for d in jax.devices() if d.platform != "cpu"]
    if not kinds:
        return "no GPU"
    return ", ".join(f"{kinds.count(k)} x {k}" for k in sorted(set(kinds)))


def machine() -> str:
    """The machine line of every results page: cores, CPU model and accelerators."""
    return f"{os.cpu_count()}-core {cpu_name()}, {accelerators()}"


def loadavg() -> str:
    try:
        return " ".join(open("/proc/loadavg").read().split()[:3])
    except OSError:
        return "n/a"


def timed_fit(est, X, y) -> tuple[float, float]:
    """Fit ``est`` on ``X, y`` with its warnings silenced; return the wall seconds and the
    1-minute load average just before."""
    load0 = os.getloadavg()[0]
    t = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        est.fit(X, y)
    return time.perf_counter() - t, load0


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
        [os.path.relpath(sys.argv[0])] + sys.argv[1:]
    )


# ----------------------------------------------------------------------------- data
def r2(y, f):
    return 1.0 - np.sum((y - f) ** 2) / np.sum((y - np.mean(y)) ** 2)


def minmax(Xtr, *others):
    """Scale every column to [-1, 1] on the training rows; the same map for ``others``."""
    lo, hi = Xtr.min(0), Xtr.max(0)
    half = np.where(hi > lo, (hi - lo) / 2, 1.0)
    mid = (hi + lo) / 2
    return [(A - mid) / half for A in (Xtr, *others)]
