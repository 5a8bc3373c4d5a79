"""Bayesian VSK: GP classification with RBF vs VSK(RBF) on Wisconsin, compared by PSIS-LOO.

Not in the paper (Campi et al. 2021 is classical); this is bayeskern's use of the VSK: the
naive-Bayes scaling psi is learned on the standardized training data, and NUTS samples the RBF
length-scale, the psi weight w, the amplitude, the bias and the whitened latent function.
``compare_vsk`` fits both models and ranks them by PSIS-LOO; held-out accuracy, log loss and
Brier score on the paper's test set (341 rows) are reported beside it, because psi has seen
the training labels and LOO is then optimistic for the VSK.

The training set is a stratified subset of the paper's training split (seed 1992) to keep the
latent GP small on a shared 2-core CPU; every subset seed is reported.

Run:  .venv/bin/python benchmarks/papers/vsk_bayes.py            (n_train 120, seeds 0 1)
      .venv/bin/python benchmarks/papers/vsk_bayes.py --quick    (n_train 60, seed 0, short chains)
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from sklearn.model_selection import train_test_split
from vsk_wisconsin import split

from bayeskern import diagnostics
from bayeskern.experiments.vsk import compare_vsk

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: common.py
from common import machine, md_table, write_vsk_section  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--n-train", type=int, default=None)
    ap.add_argument("--seeds", type=int, nargs="*", default=None)
    args = ap.parse_args()
    n_train = args.n_train or (60 if args.quick else 120)
    seeds = args.seeds or ([0] if args.quick else [0, 1])
    draws = 100 if args.quick else 300
    Xtr_all, ytr_all, Xte, yte = split(1992)
    rows, t0 = [], time.time()
    for seed in seeds:
        Xtr, _, ytr, _ = train_test_split(
            Xtr_all, ytr_all, train_size=n_train, stratify=ytr_all, random_state=seed
        )
        ts = time.time()
        table = compare_vsk(
            Xtr,
            ytr,
            num_warmup=draws,
            num_samples=draws,
            num_chains=2,
            progress_bar=False,
            random_state=seed,
        )
        secs = time.time() - ts
        for name in ("plain", "vsk"):
            m = table.attrs["models"][name]
            met = diagnostics.classification_metrics(yte, m.predict_proba(Xte)[:, 1])
            post = m.idata_.posterior
            w = f"{float(post['vsk_weight'].median()):.2f}" if "vsk_weight" in post else "—"
            rows.append(
                [
                    seed,
                    name,
                    float(table.loc[name, "elpd_loo"]),
                    float(table.loc[name, "se"]),
                    int(table.loc[name, "rank"]),
                    met["accuracy"],
                    met["log_loss"],
                    met["brier"],
                    w,
                    f"{m.convergence_.max_rhat:.3f}",
                    f"{secs:.0f}",
                ]
            )
        print(rows[-2:], flush=True)
    wall = time.time() - t0
    cmd = ".venv/bin/python benchmarks/papers/vsk_bayes.py" + (" --quick" if args.quick else "")
    text = "\n\n".join(
        [
            "## Bayesian VSK — GPClassifier(RBF) vs GPClassifier(VSK(RBF)), Wisconsin\n\n"
            f"Command: `{cmd}`  \nMachine: {machine()}, shared with other jobs. Wall time: "
            f"{wall / 60:.1f} min. Training: stratified subset of {n_train} rows of the paper's "
            f"training split; test: the paper's 341 test rows. NUTS: 2 chains x {draws} warm-up "
            f"+ {draws} draws. No paper numbers (the paper has no Bayesian model).",
            md_table(
                [
                    "subset seed",
                    "kernel",
                    "elpd_loo",
                    "se",
                    "LOO rank",
                    "test accuracy",
                    "test log loss",
                    "test Brier",
                    "median w",
                    "max R-hat",
                    "seconds (both fits)",
                ],
                rows,
            ),
        ]
    )
    print(text)
    write_vsk_section("vsk_bayes", text)


if __name__ == "__main__":
    main()
