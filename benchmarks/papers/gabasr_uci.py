"""GaBaSR on the paper's UCI sets with default estimators (Pena-Llamas et al. 2023, Tables 3-4):
breast_cancer (AUC, stratified 80/20, 5 seeds), diabetes (R², 80/20, 5 seeds),
eeg_eye_state (AUC, stratified 80/20, fit time).

Run:  .venv/bin/python benchmarks/papers/gabasr_uci.py --data breast_cancer diabetes eeg_eye_state
      [--seeds 0 1 2 3 4] [--quick]
Writes benchmarks/results/gabasr_<data>.json.
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

from sklearn.model_selection import train_test_split  # noqa: E402

import bayeskern as bk  # noqa: E402
from bayeskern.estimators.gabasr import GaBaSRClassifier, GaBaSRRegressor  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: common.py
from common import RESULTS  # noqa: E402

TASK = {"breast_cancer": "clf", "diabetes": "reg", "eeg_eye_state": "clf"}


def run(name, seed, quick, sampler):
    X, y = bk.datasets.load_dataset(name)
    clf = TASK[name] == "clf"
    Xtr, Xte, ytr, yte = train_test_split(
        X, y, test_size=0.2, random_state=seed, stratify=y if clf else None
    )
    kw = dict(random_state=seed, progress_bar=False, sampler=sampler)
    if quick:
        kw.update(num_warmup=100, num_samples=100, num_chains=2)
    if sampler == "gibbs":
        kw.update(
            n_features=500 if name == "eeg_eye_state" else 250,
            num_warmup=0,
            num_samples=5,
            num_chains=1,
        )
    est = (GaBaSRClassifier if clf else GaBaSRRegressor)(**kw)
    t0 = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        est.fit(Xtr, ytr)
    fit_s = time.perf_counter() - t0
    out = {"data": name, "seed": seed, "sampler": sampler, "fit_s": fit_s, "n_train": len(Xtr)}
    if clf:
        p = est.predict_proba(Xte)[:, 1]
        out.update(bk.diagnostics.classification_metrics((yte == est.classes_[1]).astype(int), p))
    else:
        m = bk.diagnostics.regression_metrics(yte, est.predictive(Xte))
        out.update({k: m[k] for k in ("r2", "rmse", "nlpd", "coverage_90", "coverage_95")})
    if sampler == "nuts":
        rep = est.convergence_
        out.update(
            max_rhat=rep.max_rhat,
            min_ess_bulk=rep.min_ess_bulk,
            n_divergent=rep.n_divergent,
            n_draws=rep.n_draws,
            mean_leapfrog=float(est.idata_.sample_stats["n_steps"].mean()),
            s_per_ess=fit_s / max(rep.min_ess_bulk, 1e-9),
        )
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", nargs="+", default=list(TASK))
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--sampler", default="nuts")
    args = ap.parse_args()
    RESULTS.mkdir(exist_ok=True)
    for name in args.data:
        rows = []
        for s in args.seeds:
            r = run(name, s, args.quick, args.sampler)
            print(json.dumps(r), flush=True)
            rows.append(r)
        (RESULTS / f"gabasr_{name}_{args.sampler}.json").write_text(
            json.dumps({"rows": rows, "quick": args.quick, "load": os.getloadavg()}, indent=1)
        )


if __name__ == "__main__":
    main()
