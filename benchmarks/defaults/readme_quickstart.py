"""Time the README's quick start as a user pastes it: its first Python block, a fresh process.

The block after the README's "## Quick start" heading is written to a file in a new temporary
folder and run there by this interpreter in a new process (imports, fit, predictions, saved
run and report included), ``--repeats`` times one after another. Prints one JSON line per
run: wall time, exit status, the block's own output (the convergence verdict) and the
1-minute load average before and after.

Run:  .venv/bin/python benchmarks/defaults/readme_quickstart.py [--repeats 3]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from common import loadavg, machine  # noqa: E402

README = Path(__file__).resolve().parents[2] / "README.md"


def quick_start_code(readme: str) -> str:
    """Return the first ```python block after the "## Quick start" heading."""
    section = readme.split("## Quick start", 1)[1]
    return section.split("```python\n", 1)[1].split("```", 1)[0]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    code = quick_start_code(README.read_text())
    for run in range(args.repeats):
        with tempfile.TemporaryDirectory(prefix="bayeskern-quickstart-") as tmp:
            (Path(tmp) / "quickstart.py").write_text(code)
            before = loadavg()
            t = time.perf_counter()
            done = subprocess.run(
                [sys.executable, "quickstart.py"], cwd=tmp, capture_output=True, text=True
            )
            wall = time.perf_counter() - t
            made = sorted(p.name for p in Path(tmp).iterdir())
        out = dict(
            run=run,
            wall_s=round(wall, 1),
            returncode=done.returncode,
            printed=done.stdout.strip().splitlines()[-1:] if done.stdout else [],
            files=made,
            load_before=before,
            load_after=loadavg(),
            machine=machine(),
        )
        if done.returncode:
            out["stderr_tail"] = done.stderr[-2000:]
        print(json.dumps(out), flush=True)


if __name__ == "__main__":
    main()
