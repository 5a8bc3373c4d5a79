"""A default estimator on an embedded data set no issue names, against scikit-learn.

One 80/20 split (``train_test_split(X, y, test_size=0.2, random_state=seed)``, stratified
for classifiers), the estimator with its default arguments (only ``random_state=seed`` and
``progress_bar=False``; ``--kernel`` replaces the kernel), then on the same split
scikit-learn's GP (``C * RBF`` for classifiers; ARD ``C * RBF + White`` with
``normalize_y`` for regressors) and a linear model (logistic regression / BayesianRidge),
each on standardized columns. Prints one JSON line: fit seconds, held-out scores (AUC and
Brier, or R² and the 95 % interval coverage), convergence, draws per chain, the load before
and after the fit.

    .venv/bin/python benchmarks/defaults/other_data.py pima GPClassifier
    .venv/bin/python benchmarks/defaults/other_data.py boston GPRegressor
    .venv/bin/python benchmarks/defaults/other_data.py boston GPRegressor --kernel "RBF(ard=True)"
    .venv/bin/python benchmarks/defaults/other_data.py boston GaBaSRRegressor
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np
from sklearn.gaussian_process import GaussianProcessClassifier, GaussianProcessRegressor
from sklearn.gaussian_process.kernels import RBF, ConstantKernel, WhiteKernel
from sklearn.linear_model import BayesianRidge, LogisticRegression
from sklearn.metrics import brier_score_loss, r2_score, roc_auc_score
from sklearn.model_selection import train_test_split
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: common.py
from common import loadavg  # noqa: E402

import bayeskern as bk  # noqa: E402


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("data", help="an embedded data set (bayeskern datasets)")
    ap.add_argument("estimator", choices=["GPClassifier", "GPRegressor", "GaBaSRRegressor"])
    ap.add_argument("--kernel", help='a kernel of bayeskern.kernels, e.g. "RBF(ard=True)"')
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    X, y = bk.datasets.load_dataset(args.data)
    classify = args.estimator == "GPClassifier"
    Xtr, Xte, ytr, yte = train_test_split(
        X, y, test_size=0.2, random_state=args.seed, stratify=y if classify else None
    )
    kw = dict(random_state=args.seed, progress_bar=False)
    if args.kernel:
        kw["kernel"] = eval(args.kernel, vars(bk.kernels))  # noqa: S307 (the user's own text)
    out = dict(data=args.data, shape=list(X.shape), estimator=args.estimator, **kw)
    out["kernel"] = args.kernel
    load_before, t = loadavg(), time.perf_counter()
    est = getattr(bk, args.estimator)(**kw).fit(Xtr, ytr)
    out.update(fit_s=round(time.perf_counter() - t, 1), load=f"{load_before} -> {loadavg()}")
    if classify:
        p = est.predict_proba(Xte)[:, 1]
        out.update(auc=roc_auc_score(yte, p), brier=brier_score_loss(yte, p))
        peers = {
            "sklearn GPC C*RBF": GaussianProcessClassifier(ConstantKernel() * RBF()),
            "logistic regression": LogisticRegression(),
        }
    else:
        mean, sd = est.predict(Xte, return_std=True)
        out.update(r2=r2_score(yte, mean), cov95=float(np.mean(np.abs(yte - mean) <= 1.96 * sd)))
        ard = ConstantKernel() * RBF(np.ones(X.shape[1])) + WhiteKernel()
        peers = {
            "sklearn GPR ARD": GaussianProcessRegressor(ard, normalize_y=True, random_state=0),
            "BayesianRidge": BayesianRidge(),
        }
    out.update(
        ok=bool(est.convergence_.ok),
        verdict=str(est.convergence_),
        draws_per_chain=int(est.idata_.posterior.sizes["draw"]),
        route=getattr(est, "approximation_", getattr(est, "model_", None)),
    )
    for name, model in peers.items():
        t = time.perf_counter()
        model = make_pipeline(StandardScaler(), model).fit(Xtr, ytr)
        s = round(time.perf_counter() - t, 1)
        if classify:
            out[name] = dict(auc=roc_auc_score(yte, model.predict_proba(Xte)[:, 1]), fit_s=s)
        else:
            out[name] = dict(r2=r2_score(yte, model.predict(Xte)), fit_s=s)
    print(json.dumps(out, default=str))


if __name__ == "__main__":
    main()
