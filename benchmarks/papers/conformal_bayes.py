"""Bayesian use of Xiong's data-dependent kernel: GP classification, NUTS, LOO vs the base kernel.

``bk.GPClassifier(kernel=Conformal())`` learns the conformal factor q (eigen optimizer, package
defaults) on the standardized training data, then samples the RBF length-scale of the base
kernel, the amplitude, the bias and the whitened latent function with NUTS; q stays fixed.
The reference is the same model with the base kernel alone, ``RBF()``. For each seed: a
stratified subsample of ``wisconsin_original`` (``--n-train`` training rows, 200 test rows,
``random_state=seed``); the models are compared by PSIS-LOO on the training data
(``bk.diagnostics.compare``) and by held-out accuracy, log loss and Brier score.

    .venv/bin/python benchmarks/papers/conformal_bayes.py             # seeds 0 1, 2 chains x 300
    .venv/bin/python benchmarks/papers/conformal_bayes.py --quick     # seed 0, 1 chain x 100
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
from sklearn.model_selection import train_test_split
from threadpoolctl import threadpool_limits

import bayeskern as bk
from bayeskern.kernels import RBF
from bayeskern.kernels.conformal import Conformal

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: common.py
from common import RESULTS, machine, write_section  # noqa: E402


def run(seed: int, n_train: int, settings: dict) -> dict:
    X, y = bk.datasets.load_dataset("wisconsin_original")
    Xtr, Xte, ytr, yte = train_test_split(
        X, y, train_size=n_train, test_size=200, stratify=y, random_state=seed
    )
    out = {"seed": seed}
    fits = {}
    for name, kernel in [("conformal", Conformal()), ("rbf", RBF())]:
        t = time.perf_counter()
        gp = bk.GPClassifier(kernel=kernel, random_state=seed, progress_bar=False, **settings)
        gp.fit(Xtr, ytr)
        wall = time.perf_counter() - t
        p = gp.predict_proba(Xte)[:, 1]
        m = bk.diagnostics.classification_metrics(yte, p)
        ls = np.asarray(gp.idata_.posterior["rbf_lengthscale"]).ravel()
        out[name] = {
            **m,
            "wall_s": wall,
            "max_rhat": gp.convergence_.max_rhat,
            "ok": gp.convergence_.ok,
            "lengthscale": float(np.median(ls)),
        }
        fits[name] = gp
    table = bk.diagnostics.compare(fits)
    for name in fits:
        out[name]["elpd_loo"] = float(table.loc[name, "elpd_loo"])
        out[name]["se"] = float(table.loc[name, "se"])
    out["elpd_diff"] = (
        float(table.loc["rbf", "elpd_diff"])
        if table.index[0] == "conformal"
        else -float(table.loc["conformal", "elpd_diff"])
    )
    out["dse"] = float(table["dse"].max())
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1])
    ap.add_argument("--n-train", type=int, default=150)
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args(argv)
    settings = dict(num_warmup=300, num_samples=300, num_chains=2, chain_method="sequential")
    if args.quick:
        args.seeds = [0]
        settings = dict(num_warmup=100, num_samples=100, num_chains=1)
    rows = []
    t0 = time.perf_counter()
    with threadpool_limits(1, user_api="blas"):
        for seed in args.seeds:
            r = run(seed, args.n_train, settings)
            rows.append(r)
            print(r, flush=True)
    total = time.perf_counter() - t0
    lines = [
        "## Bayesian use: GPClassifier(kernel=Conformal()) vs GPClassifier(kernel=RBF())\n",
        f"Command: `.venv/bin/python benchmarks/papers/conformal_bayes.py"
        f"{' --quick' if args.quick else ''}`  \nMachine: {machine()} (shared), NUTS "
        f"{settings['num_chains']} chain(s) x {settings['num_samples']} draws after "
        f"{settings['num_warmup']} warm-up; wisconsin_original, {args.n_train} training and "
        f"200 test rows per seed; total wall time {total:.0f} s.\n",
        "elpd_loo: PSIS-LOO on the training rows (higher is better); Δelpd = conformal − RBF "
        "(its standard error in brackets). Test metrics on the 200 held-out rows.\n",
        "| seed | model | elpd_loo (se) | Δelpd (se) | test accuracy | log loss | Brier | "
        "median length-scale | max R-hat | wall s |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        for name in ("conformal", "rbf"):
            m = r[name]
            diff = f"{r['elpd_diff']:+.2f} ({r['dse']:.2f})" if name == "conformal" else ""
            lines.append(
                f"| {r['seed']} | {name} | {m['elpd_loo']:.2f} ({m['se']:.2f}) | {diff} | "
                f"{m['accuracy']:.4f} | {m['log_loss']:.4f} | {m['brier']:.4f} | "
                f"{m['lengthscale']:.3g} | {m['max_rhat']:.3f} | {m['wall_s']:.0f} |"
            )
    text = "\n".join(lines)
    print(text)
    write_section(RESULTS / "conformal.md", "bayes", text)


if __name__ == "__main__":
    main()
