"""Shared helpers of the VSK benchmark scripts (seed 000): Markdown sections, machine line."""

from __future__ import annotations

import os
import platform
import re
import sys
from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "results" / "vsk.md"
MACHINE = f"2-core CPU, no GPU ({platform.processor() or platform.machine()}, " \
          f"{os.cpu_count()} logical cores visible), Python {sys.version.split()[0]}"

HEADER = """# VSK (variably scaled kernels) — reproduction of Campi, Marchetti & Perracchione (2021)

Seed: `../shared/seeds/000_5b352147a932b0e0.txt`. Every section below is written by the
script named in it; rerun that command to reproduce it. Paper numbers are copied from the
seed's Fig. 1 and Tables 1-5.
"""


def write_section(name: str, text: str) -> None:
    """Replace (or append) the section ``name`` of ``benchmarks/results/vsk.md`` atomically."""
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    old = RESULTS.read_text() if RESULTS.exists() else HEADER
    start, end = f"<!-- {name}:start -->", f"<!-- {name}:end -->"
    block = f"{start}\n{text.strip()}\n{end}"
    pattern = re.compile(re.escape(start) + ".*?" + re.escape(end), re.S)
    if pattern.search(old):
        new = pattern.sub(lambda _: block, old)
    else:
        new = old.rstrip() + "\n\n" + block + "\n"
    tmp = RESULTS.with_suffix(".md.tmp")
    tmp.write_text(new)
    tmp.replace(RESULTS)


def md_table(header: list[str], rows: list[list]) -> str:
    """A Markdown table; floats printed with 3 decimals."""
    fmt = lambda v: f"{v:.3f}" if isinstance(v, float) else str(v)  # noqa: E731
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(fmt(v) for v in r) + " |" for r in rows]
    return "\n".join(lines)
