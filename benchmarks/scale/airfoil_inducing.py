"""``GPRegressor`` on airfoil (1 503 rows × 5 columns): the inducing points against the exact GP.

airfoil (NASA's self-noise data, Brooks, Pope & Marcolini 1989; embedded in
``bayeskern.datasets``) is just above the 1 000 rows where ``approximation="auto"`` leaves
the exact GP, and has more than 3 columns, so ``"auto"`` takes the inducing points. One
seeded 80/20 split (``--seed``); cases: scikit-learn's GP (ARD RBF + white noise, ML-II),
``GPRegressor()`` and ``GPRegressor(RBF(ard=True))`` with defaults (inducing points), and
``GPRegressor(approximation="exact")`` (``--exact``, minutes). Prints one JSON record per fit.

    .venv/bin/python benchmarks/scale/airfoil_inducing.py --seed 0 --exact
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


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--exact", action="store_true", help="also the exact GP (minutes)")
    args = ap.parse_args()
    d = bk.datasets.load_dataset("airfoil")
    X, y = (d.data, d.target) if hasattr(d, "data") else d
    X, y = np.asarray(X, float), np.asarray(y, float)
    Xtr, Xte, ytr, yte = train_test_split(X, y, test_size=0.2, random_state=args.seed)

    def record(name, t, pred, **extra):
        m = bk.metrics.regression_metrics(yte, pred)
        rec = dict(fit=name, seed=args.seed, fit_s=round(time.perf_counter() - t, 1), **extra)
        rec.update({k: round(m[k], 4) for k in ("rmse", "nlpd", "coverage_95")})
        rec["load_after"] = round(os.getloadavg()[0], 2)
        print(json.dumps(rec), flush=True)

    print(json.dumps({"rows": Xtr.shape, "load_before": os.getloadavg()[0]}), flush=True)
    t = time.perf_counter()
    sx, my, sy = StandardScaler().fit(Xtr), ytr.mean(), ytr.std()
    kernel = skk.ConstantKernel() * skk.RBF(np.ones(X.shape[1])) + skk.WhiteKernel(0.1)
    gp = GaussianProcessRegressor(kernel, random_state=0).fit(sx.transform(Xtr), (ytr - my) / sy)
    mu, sd = gp.predict(sx.transform(Xte), return_std=True)
    record(
        "sklearn ARD ML-II",
        t,
        bk.predictive.MixturePredictive((mu * sy + my)[None], (sd * sy)[None]),
    )
    fits = [
        ("GPRegressor()", {}),
        ("GPRegressor(RBF(ard=True))", {"kernel": bk.kernels.RBF(ard=True)}),
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
