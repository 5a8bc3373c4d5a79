"""Locally stationary versus stationary GaBaSR on a series whose frequency drifts.

Synthetic series (Pena-Llamas et al. 2023 motivate the locally stationary kernel in section
3.3, eq. 6): :math:`y = \\sin(\\theta(x)) + \\varepsilon`, :math:`\\theta(x) = 2x + 0.25x^2` on
:math:`x \\in [0, 10]` (instantaneous angular frequency :math:`\\theta'(x) = 2 + 0.5x`, drifting
from 2 to 7 rad per unit), :math:`\\varepsilon \\sim N(0, 0.1^2)`, ``n`` points uniform on the
interval, random 75/25 train/test split per seed. Both estimators use the same settings
(``n_features``, sampler counts); only ``locally_stationary`` differs.

Run:  .venv/bin/python benchmarks/papers/gabasr_ls_synthetic.py [--seeds 0 1 2] [--n 200]
          [--sampler gibbs]
Writes benchmarks/results/gabasr_ls_synthetic_<sampler>.json and prints one JSON row per fit.
"""

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import argparse  # noqa: E402
import json  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
import warnings  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402

import bayeskern as bk  # noqa: E402
from bayeskern.estimators.gabasr import GaBaSRRegressor  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: common.py
from common import RESULTS  # noqa: E402


def drifting_series(n: int, seed: int, noise: float = 0.1, curvature: float = 0.25):
    """``(X, y)`` with :math:`y = \\sin(2x + c x^2) + N(0, \\mathrm{noise}^2)`, x ~ U(0, 10)
    (instantaneous angular frequency :math:`2 + 2cx`; ``c = curvature``)."""
    rng = np.random.default_rng(seed)
    x = np.sort(rng.uniform(0.0, 10.0, n))
    y = np.sin(2.0 * x + curvature * x**2) + noise * rng.normal(size=n)
    return x[:, None], y


def split(n: int, seed: int, test_frac: float = 0.25):
    rng = np.random.default_rng(1000 + seed)
    idx = rng.permutation(n)
    k = int(round(test_frac * n))
    return idx[k:], idx[:k]


def run(seed, n, settings, curvature=0.25):
    X, y = drifting_series(n, seed, curvature=curvature)
    tr, te = split(n, seed)
    rows = []
    for ls in (False, True):
        est = GaBaSRRegressor(
            locally_stationary=ls, random_state=seed, progress_bar=False, **settings
        )
        t0 = time.perf_counter()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            est.fit(X[tr], y[tr])
        fit_s = time.perf_counter() - t0
        m = bk.diagnostics.regression_metrics(y[te], est.predictive(X[te]))
        rep = getattr(est, "convergence_", None)
        if rep is None:  # the Gibbs sampler: judge on its permutation-invariant scalars
            names = [v for v in ("log_marginal", "noise", "alpha") if v in est.idata_.posterior]
            rep = bk.diagnostics.convergence_report(est.idata_, var_names=names, warn=False)
        rows.append(
            {
                "seed": seed,
                "curvature": curvature,
                "locally_stationary": ls,
                "fit_s": round(fit_s, 1),
                "rmse": m["rmse"],
                "nlpd": m["nlpd"],
                "coverage_95": m["coverage_95"],
                "max_rhat": rep.max_rhat,
                "n_divergent": int(rep.n_divergent),
                "load": os.getloadavg()[0],
            }
        )
        print(json.dumps(rows[-1]), flush=True)
    return rows


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--n", type=int, default=200)
    ap.add_argument("--n-features", type=int, default=64)
    ap.add_argument("--warmup", type=int, default=200)
    ap.add_argument("--samples", type=int, default=200)
    ap.add_argument("--chains", type=int, default=2)
    ap.add_argument("--sampler", choices=["nuts", "gibbs"], default="nuts")
    ap.add_argument(
        "--curvature",
        type=float,
        default=0.25,
        help="c in sin(2x + c x^2): the frequency drifts from 2 to 2 + 20c",
    )
    args = ap.parse_args()
    settings = dict(
        n_features=args.n_features,
        num_warmup=args.warmup,
        num_samples=args.samples,
        num_chains=args.chains,
        sampler=args.sampler,
    )
    rows = [r for s in args.seeds for r in run(s, args.n, settings, args.curvature)]
    RESULTS.mkdir(exist_ok=True)
    out = RESULTS / f"gabasr_ls_synthetic_{args.sampler}_c{args.curvature:g}.json"
    out.write_text(
        json.dumps(
            {"rows": rows, "settings": settings, "n": args.n, "load": os.getloadavg()}, indent=1
        )
    )


if __name__ == "__main__":
    main()
