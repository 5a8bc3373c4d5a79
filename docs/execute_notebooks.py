"""Execute the notebooks in full mode and store their outputs (``make notebooks``).

The documentation renders the stored outputs (``nb_execution_mode = "off"`` in ``conf.py``):
the notebooks are long MCMC runs. This script runs each notebook top to bottom in a fresh
kernel with the full sampler settings (``BAYESKERN_QUICK`` unset), writes it back with its
outputs, and records in the notebook's metadata when, where and with which bayeskern it ran.
``tests/test_notebooks.py`` re-runs every notebook in quick mode and checks that each code cell
still produces the kinds of output that are stored (figures where figures are stored, no
errors), so a stored output cannot outlive the code that made it unnoticed.

    .venv/bin/python docs/execute_notebooks.py [NAME ...]     # default: every notebook
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import nbclient
import nbformat

ROOT = Path(__file__).resolve().parents[1]


def machine() -> str:
    """The CPU model and core count of this machine, e.g. ``2-core Intel(R) Xeon(R) ...``."""
    name = platform.processor() or platform.machine()
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                name = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return f"{os.cpu_count()}-core {name}"


def execute(path: Path, timeout: int = 7200) -> float:
    """Run ``path`` in a fresh kernel (full mode) and store it with its outputs; return seconds."""
    import bayeskern

    env_quick = os.environ.pop("BAYESKERN_QUICK", None)
    try:
        nb = nbformat.read(path, as_version=4)
        t0 = time.perf_counter()
        with tempfile.TemporaryDirectory() as tmp:  # files the notebook writes stay out of git
            nbclient.NotebookClient(
                nb, timeout=timeout, kernel_name="python3", resources={"metadata": {"path": tmp}}
            ).execute()
        seconds = time.perf_counter() - t0
    finally:
        if env_quick is not None:
            os.environ["BAYESKERN_QUICK"] = env_quick
    commit = subprocess.run(
        ["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True, text=True
    ).stdout.strip()
    nb.metadata["bayeskern_executed"] = {
        "date": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "machine": machine(),
        "bayeskern": bayeskern.__version__,
        "commit": commit,
        "seconds": round(seconds, 1),
        "load": open("/proc/loadavg").read().split()[:3]
        if os.path.exists("/proc/loadavg")
        else None,
    }
    tmp = path.with_suffix(".ipynb.tmp")
    nbformat.write(nb, tmp)
    tmp.replace(path)  # nothing half-written
    return seconds


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("names", nargs="*", help="notebook names without .ipynb (default: all)")
    args = ap.parse_args(argv)
    paths = sorted((ROOT / "notebooks").glob("*.ipynb"))
    if args.names:
        known = {p.stem: p for p in paths}
        missing = [n for n in args.names if n not in known]
        if missing:
            ap.error(f"no notebook named {', '.join(missing)} (have: {', '.join(known)})")
        paths = [known[n] for n in args.names]
    for path in paths:
        print(f"{path.name}: running ...", flush=True)
        print(f"{path.name}: {execute(path):.0f} s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
