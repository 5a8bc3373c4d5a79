"""GaBaSRRegressor() with default arguments off CO2: a short 1-D series and diabetes.

* ``series``: a synthetic 133-row, one-column series (weekly period 7, quadratic trend, AR(1)
  noise; a period and a length unlike CO2's), last 20 % held out; reference
  ``bk.GPRegressor()`` (RBF) in the same run.
* ``rdata``: four short public 1-D series (``benchmarks/data/r_series``: mcycle 133 rows,
  lynx 114, Nile 100, LakeHuron 98), random 80/20 split per seed; reference
  ``bk.GPRegressor()`` (RBF) in the same run.
* ``clf``: ``GaBaSRClassifier()`` on breast_cancer and eeg_eye_state, stratified 80/20 split
  per seed: AUC, Brier, fit time.
* ``diabetes``: scikit-learn's diabetes, 80/20 splits with seeds 0-2; reference
  ``BayesianRidge`` on the same splits.

Run:  .venv/bin/python benchmarks/defaults/gabasr_defaults.py [series] [rdata] [clf] [diabetes]
      [--seeds 0 1 2]
Prints one JSON line per fit, with the 1-minute load average before and after.
"""

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")

import argparse  # noqa: E402
import json  # noqa: E402
import sys  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402
from sklearn.datasets import load_diabetes  # noqa: E402
from sklearn.linear_model import BayesianRidge  # noqa: E402
from sklearn.metrics import brier_score_loss, r2_score, roc_auc_score  # noqa: E402
from sklearn.model_selection import train_test_split  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: common.py
from common import timed_fit as _fit  # noqa: E402

import bayeskern as bk  # noqa: E402


def series(seed):
    rng = np.random.default_rng(seed)
    t = np.arange(133.0)
    e = np.zeros(133)
    for i in range(1, 133):
        e[i] = 0.6 * e[i - 1] + 0.3 * rng.normal()
    y = 10 + 0.02 * t + 2e-4 * t**2 + np.sin(2 * np.pi * t / 7) + e
    X = t[:, None]
    ntr = 106
    return _versus_gp("series133", seed, X[:ntr], y[:ntr], X[ntr:], y[ntr:])


def _versus_gp(data, seed, Xtr, ytr, Xte, yte):
    """Fit ``GaBaSRRegressor()`` and ``GPRegressor()`` with defaults; one row each."""
    out = []
    for name, est in (
        ("GaBaSRRegressor()", bk.GaBaSRRegressor(random_state=seed, progress_bar=False)),
        ("GPRegressor()", bk.GPRegressor(random_state=seed, progress_bar=False)),
    ):
        fit_s, load0 = _fit(est, Xtr, ytr)
        m = bk.diagnostics.regression_metrics(yte, est.predictive(Xte))
        row = dict(
            data=data,
            seed=seed,
            model=name,
            fit_s=round(fit_s, 1),
            rmse=m["rmse"],
            coverage_95=m["coverage_95"],
            nlpd=m["nlpd"],
            ok=bool(est.convergence_.ok),
            load_before=load0,
            load_after=os.getloadavg()[0],
        )
        if hasattr(est, "n_components_"):
            row["n_components"] = est.n_components_
        out.append(row)
    return out


def rdata(seed):
    out = []
    for path in sorted((Path(__file__).resolve().parents[1] / "data" / "r_series").glob("*.csv")):
        X, y = np.loadtxt(path, delimiter=",", skiprows=1, unpack=True)
        Xtr, Xte, ytr, yte = train_test_split(X[:, None], y, test_size=0.2, random_state=seed)
        out += _versus_gp(path.stem, seed, Xtr, ytr, Xte, yte)
    return out


CLF_DATA = ("breast_cancer", "eeg_eye_state")


def clf(seed):
    out = []
    for name in CLF_DATA:
        X, y = bk.datasets.load_dataset(name)
        Xtr, Xte, ytr, yte = train_test_split(X, y, test_size=0.2, stratify=y, random_state=seed)
        est = bk.GaBaSRClassifier(random_state=seed, progress_bar=False)
        fit_s, load0 = _fit(est, Xtr, ytr)
        p = est.predict_proba(Xte)[:, 1]
        yb = (yte == est.classes_[1]).astype(int)
        out.append(
            dict(
                data=name,
                seed=seed,
                model="GaBaSRClassifier()",
                sampler=est.sampler_,
                fit_s=round(fit_s, 1),
                auc=roc_auc_score(yb, p),
                brier=brier_score_loss(yb, p),
                ok=bool(est.convergence_.ok),
                load_before=load0,
                load_after=os.getloadavg()[0],
            )
        )
    return out


def diabetes(seed):
    X, y = load_diabetes(return_X_y=True)
    Xtr, Xte, ytr, yte = train_test_split(X, y, test_size=0.2, random_state=seed)
    est = bk.GaBaSRRegressor(random_state=seed, progress_bar=False)
    fit_s, load0 = _fit(est, Xtr, ytr)
    m = bk.diagnostics.regression_metrics(yte, est.predictive(Xte))
    br = r2_score(yte, BayesianRidge().fit(Xtr, ytr).predict(Xte))
    return [
        dict(
            data="diabetes",
            seed=seed,
            model="GaBaSRRegressor()",
            fit_s=round(fit_s, 1),
            r2=r2_score(yte, est.predict(Xte)),
            r2_bayesian_ridge=br,
            coverage_95=m["coverage_95"],
            nlpd=m["nlpd"],
            ok=bool(est.convergence_.ok),
            draws_per_chain=est.num_samples_,
            stop=est.idata_.posterior.attrs.get("num_samples_stop"),
            load_before=load0,
            load_after=os.getloadavg()[0],
        )
    ]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("which", nargs="*", default=["series", "rdata", "diabetes"])
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    args = ap.parse_args()
    for s in args.seeds:
        for w in args.which:
            for row in {"series": series, "rdata": rdata, "clf": clf, "diabetes": diabetes}[w](s):
                print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main()
