"""Bayesian CkRBF: GP classification with the cluster-based RBF kernel vs RBF and Mahalanobis RBF.

Each kernel is the ``kernel=`` of ``bk.GPClassifier`` (Bernoulli-logit, whitened latent GP):
CkRBF(n_clusters=2) with gamma ~ LogNormal(-ln d, 1), RBF and MahalanobisRBF with
length-scale ~ LogNormal(0, 1), amplitude ~ HalfNormal(1), bias ~ Normal(0, 1.5), all sampled
by NUTS. For each split seed: a stratified random training subset of ``--n-train`` rows (GP
classification is O(n^3) per gradient), the rest held out. Reported: PSIS-LOO elpd on the
training set (``bk.diagnostics.compare``), held-out accuracy / AUC / log-loss / Brier,
convergence (max R-hat, min ESS, divergences) and wall time.

Usage::

    .venv/bin/python benchmarks/papers/ckrbf_bayes.py                  # pima, seeds 0 1
    .venv/bin/python benchmarks/papers/ckrbf_bayes.py --quick          # 100 rows, 100+100 draws

Writes ``benchmarks/results/ckrbf_bayes.md``, which ``ckrbf_paper.py`` appends to ``ckrbf.md``.
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings
from pathlib import Path

import pandas as pd
from sklearn.model_selection import train_test_split

import bayeskern as bk
from bayeskern import diagnostics
from bayeskern.estimators.ckrbf import loo_against_baselines

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: common.py
from common import RESULTS, machine, write_text  # noqa: E402


def run(dataset, seed, n_train, warmup, samples, chains):
    X, y = bk.datasets.load_dataset(dataset)
    Xtr, Xte, ytr, yte = train_test_split(X, y, train_size=n_train, stratify=y, random_state=seed)
    t0 = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        table, fitted = loo_against_baselines(
            Xtr,
            ytr,
            n_clusters=2,
            num_warmup=warmup,
            num_samples=samples,
            num_chains=chains,
            random_state=seed,
            progress_bar=False,
        )
    total = time.perf_counter() - t0
    rows = []
    for name, est in fitted.items():
        p = est.predict_proba(Xte)[:, 1]
        m = diagnostics.classification_metrics(yte, p)
        c = est.convergence_
        rows.append(
            dict(
                dataset=dataset,
                seed=seed,
                kernel=name,
                elpd_loo=float(table.loc[name, "elpd_loo"]),
                loo_rank=int(table.loc[name, "rank"]),
                test_accuracy=m["accuracy"],
                test_auc=m["auc"],
                test_log_loss=m["log_loss"],
                test_brier=m["brier"],
                max_rhat=c.max_rhat,
                min_ess_bulk=c.min_ess_bulk,
                divergences=c.n_divergent,
            )
        )
    df = pd.DataFrame(rows)
    df["wall_s_all_three"] = total
    return df


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--dataset", default="pima")
    ap.add_argument("--seeds", nargs="+", type=int, default=[0, 1])
    ap.add_argument("--n-train", type=int, default=200)
    ap.add_argument("--warmup", type=int, default=300)
    ap.add_argument("--samples", type=int, default=300)
    ap.add_argument("--chains", type=int, default=2)
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args(argv)
    if args.quick:
        args.n_train, args.warmup, args.samples, args.chains = 100, 100, 100, 1
    frames = [
        run(args.dataset, s, args.n_train, args.warmup, args.samples, args.chains)
        for s in args.seeds
    ]
    df = pd.concat(frames, ignore_index=True)
    pd.set_option("display.width", 200)
    print(df.round(3).to_string(index=False))
    if args.quick:
        return
    cmd = (
        f".venv/bin/python benchmarks/papers/ckrbf_bayes.py --dataset {args.dataset} --seeds "
        f"{' '.join(map(str, args.seeds))} --n-train {args.n_train} --warmup {args.warmup} "
        f"--samples {args.samples} --chains {args.chains}"
    )
    md = [
        "## Bayesian CkRBF (GP classification, NUTS) vs RBF and Mahalanobis-RBF GPs",
        "",
        f"`{args.dataset}`: {args.n_train} training rows (stratified, per seed), the rest held "
        f"out; {args.chains} chains x ({args.warmup} warm-up + {args.samples}) draws. "
        f"elpd_loo: PSIS-LOO on the training rows (higher is better). {machine()}, "
        "shared machine.",
        "",
        "```",
        cmd,
        "```",
        "",
        "| seed | kernel | elpd_loo (rank) | test accuracy | test AUC | test log-loss | "
        "max R-hat | min bulk ESS | divergences | wall s (3 GPs) |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in df.itertuples():
        md.append(
            f"| {r.seed} | {r.kernel} | {r.elpd_loo:.1f} ({r.loo_rank}) | "
            f"{r.test_accuracy:.3f} | {r.test_auc:.3f} | {r.test_log_loss:.3f} | "
            f"{r.max_rhat:.3f} | {r.min_ess_bulk:.0f} | {r.divergences} | "
            f"{r.wall_s_all_three:.0f} |"
        )
    write_text(RESULTS / "ckrbf_bayes.md", "\n".join(md) + "\n")
    print(f"wrote {RESULTS / 'ckrbf_bayes.md'}")


if __name__ == "__main__":
    main()
