"""GaBaSR against the RBF GP on one short-series split: paired test errors and PSIS-LOO.

Fits ``GaBaSRRegressor()`` and ``GPRegressor()`` with default arguments on the random 80/20
split of ``gabasr_defaults.py rdata`` (same seed, same rows) and prints one Markdown row per
series and seed: both RMSEs, the difference of the two mean squared errors over the test
points divided by its paired standard error, PSIS-LOO on the training rows, fit times and
convergence.

    .venv/bin/python benchmarks/defaults/gabasr_vs_gp_paired.py LakeHuron:2 Nile:2 lynx:1 lynx:2
"""

from __future__ import annotations

import argparse
import time
import warnings
from pathlib import Path

import numpy as np
from sklearn.model_selection import train_test_split

import bayeskern as bk

DATA = Path(__file__).resolve().parents[1] / "data" / "r_series"


def row(name: str, seed: int) -> str:
    X, y = np.loadtxt(DATA / f"{name}.csv", delimiter=",", skiprows=1, unpack=True)
    Xtr, Xte, ytr, yte = train_test_split(X[:, None], y, test_size=0.2, random_state=seed)
    res = {}
    for tag, est in (
        ("gabasr", bk.GaBaSRRegressor(random_state=seed, progress_bar=False)),
        ("gp", bk.GPRegressor(random_state=seed, progress_bar=False)),
    ):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            t0 = time.perf_counter()
            est.fit(Xtr, ytr)
            fit = time.perf_counter() - t0
        err = est.predict(Xte) - yte
        res[tag] = dict(
            fit=fit,
            err=err,
            elpd=float(bk.diagnostics.loo(est.idata_).elpd_loo),
            ok=est.convergence_.ok,
        )
    a, b = res["gabasr"], res["gp"]
    d = a["err"] ** 2 - b["err"] ** 2
    rmse = [float(np.sqrt(np.mean(r["err"] ** 2))) for r in (a, b)]
    z = d.mean() / (d.std(ddof=1) / np.sqrt(len(d)))
    return (
        f"| {name} | {seed} | {len(d)} | {rmse[0]:.4g} / {rmse[1]:.4g} | "
        f"{rmse[0] / rmse[1]:.2f} | {z:.2f} | {a['elpd']:.1f} / {b['elpd']:.1f} | "
        f"{a['fit']:.1f} s, {'yes' if a['ok'] else 'no'} | {b['fit']:.1f} s |"
    )


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("splits", nargs="+", help="SERIES:SEED, e.g. lynx:2")
    for split in ap.parse_args().splits:
        name, seed = split.split(":")
        print(row(name, int(seed)), flush=True)


if __name__ == "__main__":
    main()
