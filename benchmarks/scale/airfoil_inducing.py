"""``GPRegressor`` on many-column tables just above 1 000 rows: inducing points vs the exact GP.

airfoil (NASA's self-noise data, Brooks, Pope & Marcolini 1989; 1 503 rows × 5 columns) and
parkinsons (the Parkinson's telemonitoring voice measures, Tsanas et al. 2010; 5 875 rows ×
20 columns), both embedded in ``bayeskern.datasets``, have more than 1 000 rows and more than
3 columns, so ``approximation="auto"`` takes the inducing points. One seeded 80/20 split
(``--seed``); cases: scikit-learn's GP (ARD RBF + white noise, ML-II, on at most the first
2 000 training rows), ``GPRegressor()`` (defaults: inducing inputs moved at the mode),
``GPRegressor(optimize_inducing=0)`` (the k-means centres kept), and
``GPRegressor(approximation="exact")`` (``--exact``, minutes). Prints one JSON record per fit.

    .venv/bin/python benchmarks/scale/airfoil_inducing.py --seed 0 --exact
    .venv/bin/python benchmarks/scale/airfoil_inducing.py --data parkinsons --seed 0
"""

from __future__ import annotations

import argparse
import json
import os
import time
import warnings

import numpy as np
from sklearn.gaussian_process import GaussianProcessRegressor
from sklearn.gaussian_process import kernels as skk
from sklearn.model_selection import train_test_split
from sklearn.preprocessing import StandardScaler

import bayeskern as bk

#: scikit-learn's GP fits at most this many training rows (issue 21's reference protocol)
REF_ROWS = 2_000


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", choices=("airfoil", "parkinsons"), default="airfoil")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--exact", action="store_true", help="also the exact GP (minutes)")
    args = ap.parse_args()
    d = bk.datasets.load_dataset(args.data)
    X, y = (d.data, d.target) if hasattr(d, "data") else d
    X, y = np.asarray(X, float), np.asarray(y, float)
    Xtr, Xte, ytr, yte = train_test_split(X, y, test_size=0.2, random_state=args.seed)

    def record(name, t, pred, **extra):
        m = bk.metrics.regression_metrics(yte, pred)
        rec = dict(
            data=args.data,
            fit=name,
            seed=args.seed,
            fit_s=round(time.perf_counter() - t, 1),
            **extra,
        )
        rec.update({k: round(m[k], 4) for k in ("rmse", "nlpd", "coverage_95")})
        rec["load_after"] = round(os.getloadavg()[0], 2)
        print(json.dumps(rec), flush=True)

    print(json.dumps({"rows": Xtr.shape, "load_before": os.getloadavg()[0]}), flush=True)
    t = time.perf_counter()
    Xref, yref = Xtr[:REF_ROWS], ytr[:REF_ROWS]
    sx, my, sy = StandardScaler().fit(Xref), yref.mean(), yref.std()
    kernel = skk.ConstantKernel() * skk.RBF(np.ones(X.shape[1])) + skk.WhiteKernel(0.1)
    gp = GaussianProcessRegressor(kernel, random_state=0).fit(sx.transform(Xref), (yref - my) / sy)
    mu, sd = gp.predict(sx.transform(Xte), return_std=True)
    record(
        f"sklearn ARD ML-II ({len(yref)} rows)",
        t,
        bk.predictive.MixturePredictive((mu * sy + my)[None], (sd * sy)[None]),
    )
    fits = [
        ("GPRegressor()", {}),
        ("GPRegressor(optimize_inducing=0)", {"optimize_inducing": 0}),
    ]
    if args.exact:
        fits.append(("GPRegressor(approximation='exact')", {"approximation": "exact"}))
    for name, options in fits:
        t = time.perf_counter()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            est = bk.GPRegressor(random_state=0, progress_bar=False, **options).fit(Xtr, ytr)
        record(
            name,
            t,
            est.predictive(Xte),
            approximation=est.approximation_,
            converged=bool(est.convergence_.ok),
            draws_per_chain=int(est.num_samples_),
        )


if __name__ == "__main__":
    main()
