"""GPClassifier: embedded Laplace (default) against the exact latent sampler, same model.

Issue 13, item 4. For each data set (stratified 80/20 split, seed 0, inputs as given):
``bk.GPClassifier()`` (``inference="laplace"``: NUTS over the kernel hyper-parameters, the
latent function integrated by a Newton-mode Laplace approximation) and
``bk.GPClassifier(inference="latent")`` (NUTS over the hyper-parameters, the bias and the
whitened latent vector). Reported: fit wall time, convergence, leapfrog steps per draw, test
AUC and Brier score, and the agreement of the test-set predictive probabilities: the largest
and mean |p_laplace - p_latent| against their Monte Carlo standard error
(sqrt(se_laplace^2 + se_latent^2), se = sd over draws of the per-draw probability / sqrt(ESS)).

    timeout 7200 .venv/bin/python benchmarks/papers/gp_classifier_laplace.py \
        [--data breast_cancer pima]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import warnings
from pathlib import Path

import numpy as np
from sklearn.metrics import brier_score_loss, roc_auc_score
from sklearn.model_selection import train_test_split

import bayeskern as bk

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: common.py
from common import DOCS_RESULTS, machine, write_text  # noqa: E402

OUT = DOCS_RESULTS / "gp_classifier_laplace.md"


def run(name, seed):
    X, y = bk.datasets.load_dataset(name)
    Xtr, Xte, ytr, yte = train_test_split(X, y, test_size=0.2, stratify=y, random_state=seed)
    rows = {}
    for inference in ("laplace", "latent"):
        est = bk.GPClassifier(inference=inference, random_state=seed, progress_bar=False)
        t = time.perf_counter()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            est.fit(Xtr, ytr)
        wall = time.perf_counter() - t
        P = est._proba_draws(Xte)
        p = est.predict_proba(Xte)[:, 1]
        ess = float(np.nanmin(est.convergence_.table["ess_bulk"]))
        yb = (yte == est.classes_[1]).astype(int)
        rows[inference] = dict(
            wall=wall, ok=bool(est.convergence_.ok), verdict=est.convergence_.verdict,
            steps=float(est.idata_.posterior.attrs.get("mean_steps_per_draw", np.nan)),
            auc=float(roc_auc_score(yb, p)), brier=float(brier_score_loss(yb, p)), p=p,
            se=P.std(axis=0) / np.sqrt(max(ess, 1.0)), load=os.getloadavg())
        print(name, inference, {k: v for k, v in rows[inference].items()
                                if k not in ("p", "se")}, flush=True)
    d = np.abs(rows["laplace"]["p"] - rows["latent"]["p"])
    se = np.sqrt(rows["laplace"]["se"] ** 2 + rows["latent"]["se"] ** 2)
    agree = dict(max_abs=float(d.max()), mean_abs=float(d.mean()),
                 frac_within_3se=float(np.mean(d <= 3 * se + 1e-12)),
                 median_se=float(np.median(se)))
    print(name, "agreement", agree, flush=True)
    for r in rows.values():
        del r["p"], r["se"]
    return dict(data=name, seed=seed, n_train=len(ytr), d=X.shape[1], rows=rows, agree=agree)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", nargs="+", default=["breast_cancer", "pima"])
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--no-write", action="store_true")
    args = ap.parse_args()
    res = [run(name, args.seed) for name in args.data]
    if args.no_write:
        return
    lines = ["## GPClassifier: embedded Laplace (default) vs exact latent sampler", "",
             "Command: `timeout 7200 .venv/bin/python benchmarks/papers/gp_classifier_laplace.py "
             f"--data {' '.join(args.data)}`  ", f"Machine: {machine()}; defaults "
             "(4 chains x (500 + 500)); stratified 80/20 split, seed "
             f"{args.seed}.", "",
             "| data | n train x d | inference | fit s | converged | steps/draw | AUC | Brier "
             "| load (1 min) |", "|---|---|---|---|---|---|---|---|---|"]
    for r in res:
        for inf, row in r["rows"].items():
            lines.append(f"| {r['data']} | {r['n_train']} x {r['d']} | {inf} | "
                         f"{row['wall']:.1f} | {row['ok']} | {row['steps']:.1f} | "
                         f"{row['auc']:.4f} | {row['brier']:.4f} | {row['load'][0]:.1f} |")
    lines += ["", "Agreement of the test-set predictive probabilities (MC se from the per-draw "
              "probabilities and the minimum bulk ESS of each fit):", "",
              "| data | max abs diff | mean abs diff | median MC se of the diff | "
              "share within 3 se |", "|---|---|---|---|---|"]
    for r in res:
        a = r["agree"]
        lines.append(f"| {r['data']} | {a['max_abs']:.4f} | {a['mean_abs']:.4f} | "
                     f"{a['median_se']:.4f} | {a['frac_within_3se']:.3f} |")
    OUT.parent.mkdir(parents=True, exist_ok=True)
    write_text(OUT, "\n".join(lines) + "\n")
    write_text(OUT.with_suffix(".json"), json.dumps(res, indent=1))
    print(f"wrote {OUT}")


if __name__ == "__main__":
    main()
