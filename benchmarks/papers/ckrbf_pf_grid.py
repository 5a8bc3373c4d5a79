"""P_f(α) AUC of C2RBF vs RBF and mRBF on a libsvm-style grid, several CV seeds
(Czarnecki & Tabor 2014, §5).

The paper's P_f AUC depends on the grid, which the paper does not give. This script repeats
the comparison on the grid of the libsvm guide (C = 2^-5, 2^-3, ..., 2^15;
gamma = 2^-15, 2^-13, ..., 2^3; 110 points) for the kernels that keep C's usual scale:
RBF exp(-gamma ||x-y||^2) and the normalized CkRBF (``normalize=True``) with k = 1 (mRBF) and
k = 2, 3 (clustering on all rows, as in the paper), over several 10-fold CV split seeds.
(The paper's un-normalized formula multiplies C by about 1e5 on [0, 1]-scaled data, which
makes most of this grid too slow for libsvm.)

Usage::

    .venv/bin/python benchmarks/papers/ckrbf_pf_grid.py --datasets pima wisconsin_original \
        --seeds 0 1 2

Writes ``benchmarks/results/ckrbf_pf_grid.md`` (appended to ``ckrbf.md`` by ckrbf_paper.py).
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
from sklearn.exceptions import ConvergenceWarning
from sklearn.metrics.pairwise import euclidean_distances
from sklearn.model_selection import StratifiedKFold
from sklearn.preprocessing import MinMaxScaler

import bayeskern as bk
from bayeskern.experiments.tuning import pf_table, precomputed_grid_scores
from bayeskern.kernels.ckrbf import CkRBF
from bayeskern.learning import fit_kernel

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: common.py
from common import RESULTS, write_text  # noqa: E402

CS = [2.0**i for i in range(-5, 16, 2)]
GAMMAS = [2.0**i for i in range(-15, 4, 2)]


def factors(X, k):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        return fit_kernel(CkRBF(n_clusters=k, normalize=True, random_state=0), X).factors(X)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--datasets", nargs="+", default=["pima", "wisconsin_original"])
    ap.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    ap.add_argument("--max-iter", type=int, default=10**6)
    args = ap.parse_args(argv)
    rows = []
    for name in args.datasets:
        X, y = bk.datasets.load_dataset(name)
        X = MinMaxScaler().fit_transform(X)
        models = {
            "RBF": (0.0, euclidean_distances(X, squared=True)),
            "mRBF-norm": factors(X, 1),
            "C2RBF-norm": factors(X, 2),
            "C3RBF-norm": factors(X, 3),
        }
        for seed in args.seeds:
            cv = StratifiedKFold(10, shuffle=True, random_state=seed)
            scores, walls, capped = {}, {}, {}
            for m, f in models.items():
                t0 = time.perf_counter()
                with warnings.catch_warnings(record=True) as caught:
                    warnings.simplefilter("always", ConvergenceWarning)
                    scores[m] = precomputed_grid_scores(
                        f, y, CS, GAMMAS, cv=cv, max_iter=args.max_iter
                    )
                walls[m] = time.perf_counter() - t0
                capped[m] = sum(issubclass(w.category, ConvergenceWarning) for w in caught)
            t = pf_table(scores)
            tn = pf_table(scores, normalize=True)
            for m in models:
                rows.append(
                    dict(
                        dataset=name,
                        seed=seed,
                        kernel=m,
                        best=t.loc[m, "best"],
                        auc=t.loc[m, "pf_auc"],
                        auc_norm=tn.loc[m, "pf_auc"],
                        alpha_min=t.loc[m, "alpha_min"],
                        capped=capped[m],
                        wall=walls[m],
                    )
                )
                print(rows[-1], flush=True)
    df = pd.DataFrame(rows)
    cmd = (
        ".venv/bin/python benchmarks/papers/ckrbf_pf_grid.py --datasets "
        f"{' '.join(args.datasets)} --seeds {' '.join(map(str, args.seeds))}"
    )
    md = [
        "## P_f AUC on a libsvm-style grid (normalized kernels, several CV seeds)",
        "",
        "C ∈ {2^-5, 2^-3, …, 2^15}, γ ∈ {2^-15, 2^-13, …, 2^3} (110 points), 10-fold CV, "
        "features in [0, 1], clustering on all rows. `-norm`: `normalize=True`. AUC over "
        "α ∈ [α_min, 1], α_min = worst score of the four kernels for that seed.",
        "",
        "```",
        cmd,
        "```",
        "",
        "| dataset | seed | kernel | best accuracy | P_f AUC | P_f AUC / (1 − α_min) | "
        "α_min | capped fits | wall s |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in df.itertuples():
        md.append(
            f"| {r.dataset} | {r.seed} | {r.kernel} | {r.best:.3f} | {r.auc:.3f} | "
            f"{r.auc_norm:.3f} | {r.alpha_min:.3f} | {r.capped} | {r.wall:.0f} |"
        )
    md.append("")
    mean = df.groupby(["dataset", "kernel"], sort=False)[["best", "auc"]].agg(["mean", "std"])
    md.append("Mean ± sd over seeds:\n")
    md.append("| dataset | kernel | best accuracy | P_f AUC |")
    md.append("|---|---|---|---|")
    for (d, k), r in mean.iterrows():
        md.append(
            f"| {d} | {k} | {r[('best', 'mean')]:.3f} ± {r[('best', 'std')]:.3f} | "
            f"{r[('auc', 'mean')]:.3f} ± {r[('auc', 'std')]:.3f} |"
        )
    write_text(RESULTS / "ckrbf_pf_grid.md", "\n".join(md) + "\n")
    print(f"wrote {RESULTS / 'ckrbf_pf_grid.md'}")
    return np.asarray(df["auc"])


if __name__ == "__main__":
    main()
