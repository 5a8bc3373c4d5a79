"""Cross-validation as a user writes it: each fold's fit time and compilations, defaults.

Five-fold ``KFold(shuffle=True, random_state=0)`` over one of the short embedded series,
``GPRegressor()`` and ``GaBaSRRegressor()`` with default arguments (only ``random_state=0``
and ``progress_bar=False``), the folds fitted one after another in one process, as
``cross_val_score`` does. Per fold: training rows, fit seconds, XLA compilations during the
fit (``jax.monitoring``; programs found in memory, ``bayeskern.programs.shared_jit``, are not
compiled again), test RMSE and convergence. The first fold pays for compiling; later folds of
the same shapes reuse its programs where they lower to the same program.

    .venv/bin/python benchmarks/defaults/cv_folds.py lynx mcycle

Writes the section ``cv_folds`` of ``docs/results/performance.md``.
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings
from pathlib import Path

import jax
import numpy as np
from sklearn.model_selection import KFold

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: common.py
from common import DOCS_RESULTS, command, loadavg, machine, md_table, write_section  # noqa: E402

import bayeskern as bk  # noqa: E402

DATA = Path(__file__).resolve().parents[1] / "data" / "r_series"
COMPILED: list[str] = []


def _on_duration(event, duration, **kw):
    if event == "/jax/core/compile/backend_compile_duration":
        COMPILED.append(kw.get("fun_name", "?"))


def rows(name: str) -> list[list]:
    X, y = np.loadtxt(DATA / f"{name}.csv", delimiter=",", skiprows=1, unpack=True)
    X = X[:, None]
    out = []
    for tag, make in (("GPRegressor()", bk.GPRegressor), ("GaBaSRRegressor()", bk.GaBaSRRegressor)):
        folds = KFold(5, shuffle=True, random_state=0).split(X)
        for i, (tr, te) in enumerate(folds):
            COMPILED.clear()
            est = make(random_state=0, progress_bar=False)
            load = loadavg()
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                t0 = time.perf_counter()
                est.fit(X[tr], y[tr])
                fit = time.perf_counter() - t0
            rmse = float(np.sqrt(np.mean((est.predict(X[te]) - y[te]) ** 2)))
            out.append(
                [
                    name,
                    tag,
                    i + 1,
                    len(tr),
                    f"{fit:.1f}",
                    len(COMPILED),
                    rmse,
                    "yes" if est.convergence_.ok else "no",
                    f"{load} → {loadavg()}",
                ]
            )
            print(out[-1], flush=True)
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("series", nargs="+", choices=["lynx", "mcycle", "Nile", "LakeHuron"])
    args = ap.parse_args()
    jax.monitoring.register_event_duration_secs_listener(_on_duration)
    table = [r for name in args.series for r in rows(name)]
    header = [
        "series",
        "estimator",
        "fold",
        "train rows",
        "fit (s)",
        "compilations",
        "RMSE",
        "converged",
        "load",
    ]
    totals = {}
    for r in table:
        totals[(r[0], r[1])] = totals.get((r[0], r[1]), 0.0) + float(r[4])
    summary = "\n".join(f"- {s}, {e}: the five fits {t:.1f} s" for (s, e), t in totals.items())
    body = (
        "## Cross-validation: five folds in one process\n\n"
        f"{__doc__.split(chr(10) + chr(10))[1]}\n\n{md_table(header, table)}\n\n{summary}\n\n"
        f"Machine: {machine()}.\n\nReproduce: `{command()}`"
    )
    write_section(DOCS_RESULTS / "performance.md", "cv_folds", body)


if __name__ == "__main__":
    main()
