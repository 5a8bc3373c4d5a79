"""When ``num_samples="auto"`` stops: fits run to the cap, judged again after every block.

Each case is fitted once with ``num_samples=2000`` (the cap of ``"auto"``; every other
argument at its default, so the chains are those ``"auto"`` would continue block by block),
then cut after every block of 100 draws per chain. Each cut prints the largest R-hat and the
smallest bulk and tail ESS of the quantities ``"auto"`` judges, the divergences so far, and
:func:`bayeskern.diagnostics.auto_stop`'s decision there. A case's line gives the first
cut at which the chains mixed and the first at which ``"auto"`` stops (``"projected"``: the
rule that ends runs projected to miss the criteria at the cap).

Cases: ``NAME:SEED`` for the short public series of ``benchmarks/data/r_series`` (mcycle,
lynx, Nile, LakeHuron; random 80/20 split with that seed) or ``diabetes:SEED``
(scikit-learn's diabetes, 80/20 split).

Run:  .venv/bin/python benchmarks/defaults/auto_stop_cuts.py gabasr|gp CASE [CASE ...]
Prints one JSON line per case, with the 1-minute load average before and after.
"""

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")

import argparse  # noqa: E402
import json  # noqa: E402
import sys  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402
from sklearn.datasets import load_diabetes  # noqa: E402
from sklearn.model_selection import train_test_split  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: common.py
from common import timed_fit  # noqa: E402

import bayeskern as bk  # noqa: E402
from bayeskern.inference import AUTO_BLOCK, AUTO_MAX_SAMPLES  # noqa: E402

SERIES = Path(__file__).resolve().parents[1] / "data" / "r_series"


def _data(case):
    name, seed = case.split(":")
    if name == "diabetes":
        X, y = load_diabetes(return_X_y=True)
    else:
        t, y = np.loadtxt(SERIES / f"{name}.csv", delimiter=",", skiprows=1, unpack=True)
        X = t[:, None]
    Xtr, _, ytr, _ = train_test_split(X, y, test_size=0.2, random_state=int(seed))
    return int(seed), Xtr, ytr


def run(estimator, case):
    seed, X, y = _data(case)
    make = bk.GaBaSRRegressor if estimator == "gabasr" else bk.GPRegressor
    est = make(random_state=seed, progress_bar=False, num_samples=AUTO_MAX_SAMPLES)
    fit_s, load0 = timed_fit(est, X, y)
    post = est.idata_.posterior
    judged = None  # as the estimators pass them to run_nuts
    if estimator == "gabasr":
        judged = [v for v in est._EXACT_SITES if v in post]
    cuts, mixed_at, stop_at = [], None, None
    for n in range(AUTO_BLOCK, post.sizes["draw"] + 1, AUTO_BLOCK):
        cut = est.idata_.isel(draw=slice(0, n))
        r = bk.diagnostics.convergence_report(cut, var_names=judged, warn=False)
        why = bk.diagnostics.auto_stop(cut, n, AUTO_MAX_SAMPLES, judged)
        cuts.append(
            [
                n,
                round(r.max_rhat, 4),
                round(r.min_ess_bulk),
                round(r.min_ess_tail),
                r.n_divergent,
                why,
            ]
        )
        mixed_at = mixed_at or (n if r.mixed else None)
        stop_at = stop_at or (n if why else None)
    return dict(
        estimator=estimator,
        case=case,
        fit_s=round(fit_s, 1),
        leapfrog_per_draw=float(post.attrs["mean_steps_per_draw"]),
        mixed_at=mixed_at,
        auto_stops_at=stop_at,
        auto_stop=next(c[-1] for c in cuts if c[-1]) if stop_at else None,
        cuts=cuts,
        load_before=load0,
        load_after=os.getloadavg()[0],
    )


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("estimator", choices=["gabasr", "gp"])
    ap.add_argument("cases", nargs="+")
    args = ap.parse_args()
    for case in args.cases:
        print(json.dumps(run(args.estimator, case)), flush=True)


if __name__ == "__main__":
    main()
