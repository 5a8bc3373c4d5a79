"""The warm-up length of the GP estimators and GaBaSR's: the same fit with several warm-ups.

Each case is fitted once per warm-up length, one after another in this process, everything
else at its default (``num_samples="auto"``: blocks of draws until the convergence criteria
hold). Cases:

* ``co2:SEED``: the CO2 protocol (train before 1994, test 1994-2001) with the demo's kernel
  ``Linear() + RBF() + RBF() * Periodic(period=1.0)``;
* ``Nile:SEED``, ``lynx:SEED``, ``LakeHuron:SEED``, ``mcycle:SEED``: the short public series of
  ``benchmarks/data/r_series``, random 80/20 split, default kernel;
* ``diabetes:SEED``: scikit-learn's diabetes (10 columns, exact GP), 80/20 split;
* ``synth:SEED``: 20 000 rows of a 1-D sine mixture (the Hilbert-space route), 80/20 split;
* ``breast_cancer:SEED``, ``iris:SEED``, ``wine:SEED``, ``pima:SEED``: ``GPClassifier()``
  (embedded Laplace; softmax for iris and wine), stratified 80/20 split.

``--estimator gabasr`` fits ``GaBaSRRegressor()`` (its own default kernel) on the regression
cases instead of ``GPRegressor``.

The first fit of a case in a process compiles its programs: compare fit times of the second
and later warm-up lengths, or the draws and leapfrog steps, which do not depend on it.

Run:  .venv/bin/python benchmarks/defaults/gp_warmup.py co2:0 Nile:0 ... [--warmup 500 200]
      [--estimator gp|gabasr]
Prints one JSON line per fit, with the 1-minute load average before and after.
"""

from __future__ import annotations

import argparse
import json
import os
import time
import warnings
from pathlib import Path

import numpy as np
from sklearn.datasets import load_breast_cancer, load_diabetes, load_iris, load_wine
from sklearn.metrics import log_loss
from sklearn.model_selection import train_test_split

import bayeskern as bk

SERIES = Path(__file__).resolve().parents[1] / "data" / "r_series"
CLASSIFICATION = {
    "breast_cancer": lambda: load_breast_cancer(return_X_y=True),
    "iris": lambda: load_iris(return_X_y=True),
    "wine": lambda: load_wine(return_X_y=True),
    "pima": lambda: bk.datasets.load_dataset("pima"),
}


def case(name: str, seed: int):
    """``(Xtr, ytr, Xte, yte, kernel)`` of one case (kernel None: the estimator's default)."""
    if name == "co2":
        k = bk.kernels
        return (*bk.datasets.co2_split(), k.Linear() + k.RBF() + k.RBF() * k.Periodic(period=1.0))
    if name == "diabetes":
        X, y = load_diabetes(return_X_y=True)
    elif name == "synth":
        r = np.random.default_rng(seed)
        X = r.uniform(0, 10, (20_000, 1))
        y = np.sin(2 * X[:, 0]) + 0.3 * np.cos(7 * X[:, 0]) + 0.2 * r.normal(size=len(X))
    else:
        X, y = np.loadtxt(SERIES / f"{name}.csv", delimiter=",", skiprows=1, unpack=True)
        X = X[:, None]
    Xtr, Xte, ytr, yte = train_test_split(X, y, test_size=0.2, random_state=seed)
    return Xtr, ytr, Xte, yte, None


def _timed_fit(est, X, y) -> tuple:
    """Fit ``est`` with warnings silenced; return it, the wall time and the load before/after."""
    load0 = os.getloadavg()[0]
    t = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        est.fit(X, y)
    return est, time.perf_counter() - t, [round(load0, 2), round(os.getloadavg()[0], 2)]


def fit(name: str, seed: int, warmup: int, estimator: str = "gp") -> dict:
    """One fit of a case with ``warmup`` iterations: time, sampler statistics, test metrics."""
    common = dict(num_warmup=warmup, random_state=seed, progress_bar=False)
    if name in CLASSIFICATION:
        X, y = CLASSIFICATION[name]()
        Xtr, Xte, ytr, yte = train_test_split(X, y, test_size=0.2, random_state=seed, stratify=y)
        est, wall, load = _timed_fit(bk.GPClassifier(**common), Xtr, ytr)
        p = est.predict_proba(Xte)
        metrics = dict(
            accuracy=round(float(np.mean(est.classes_[p.argmax(axis=1)] == yte)), 3),
            log_loss=round(float(log_loss(yte, p, labels=est.classes_)), 4),
        )
    else:
        Xtr, ytr, Xte, yte, kernel = case(name, seed)
        if estimator == "gabasr":
            est = bk.GaBaSRRegressor(**common)
        else:
            est = bk.GPRegressor(kernel=kernel, **common)
        est, wall, load = _timed_fit(est, Xtr, ytr)
        m = bk.diagnostics.regression_metrics(yte, est.predictive(Xte))
        metrics = {k: round(m[k], 3) for k in ("rmse", "coverage_95", "nlpd")}
    c = est.convergence_
    return dict(
        case=f"{name}:{seed}",
        estimator=type(est).__name__,
        warmup=warmup,
        fit_s=round(wall, 1),
        draws_per_chain=int(est.idata_.posterior.sizes["draw"]),
        leapfrog_per_draw=round(float(est.idata_.sample_stats["n_steps"].mean()), 1),
        max_rhat=round(c.max_rhat, 4),
        min_ess=round(min(c.min_ess_bulk, c.min_ess_tail)),
        divergences=int(c.n_divergent),
        converged=bool(c.ok),
        **metrics,
        load=load,
    )


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("cases", nargs="+", help="NAME:SEED, e.g. co2:0 lynx:2")
    ap.add_argument("--warmup", type=int, nargs="+", default=[500, 200])
    ap.add_argument("--estimator", choices=["gp", "gabasr"], default="gp")
    args = ap.parse_args(argv)
    for spec in args.cases:
        name, seed = spec.split(":")
        for w in args.warmup:
            print(json.dumps(fit(name, int(seed), w, args.estimator)), flush=True)


if __name__ == "__main__":
    main()
