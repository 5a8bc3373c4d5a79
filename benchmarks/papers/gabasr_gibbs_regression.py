"""GaBaSR Gibbs sampler on regression: CO2 (paper protocol) and diabetes (80/20, 5 seeds).

Both use the sampler directly (``bayeskern.inference.gabasr_gibbs.gibbs_sample``) with the
defaults of ``GibbsPrior()``, inputs standardized on the training rows, ``y`` standardized,
and a linear mean basis ``[1, x]`` (the default regression mean function of
``GaBaSRRegressor``). The predictive is the Student-t mixture over draws (``predict_regression`` ->
``MixturePredictive``), scored by ``bk.diagnostics.regression_metrics`` on held-out data.

* co2: train before 1994-01, test 1994-01..2001-12 (96 months); seeds 0 1 2.
* diabetes: scikit-learn's 442 x 10, ``train_test_split(test_size=0.2, random_state=seed)``,
  seeds 0..4.

    .venv/bin/python benchmarks/papers/gabasr_gibbs_regression.py [--quick]
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import numpy as np
from sklearn.model_selection import train_test_split

import bayeskern as bk
from bayeskern.inference import gabasr_gibbs as gg
from bayeskern.predictive import MixturePredictive

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: common.py
from common import RESULTS, machine, write_text  # noqa: E402


def fit_predict(seed, Xtr, ytr, Xte, M, warmup, samples, chains):
    mx, sx = Xtr.mean(0), Xtr.std(0)
    my, sy = ytr.mean(), ytr.std()
    Ztr, Zte = (Xtr - mx) / sx, (Xte - mx) / sx
    btr, bte = np.c_[np.ones(len(Ztr)), Ztr], np.c_[np.ones(len(Zte)), Zte]
    t0, c0 = time.perf_counter(), time.process_time()
    res = gg.gibbs_sample(
        seed,
        Ztr,
        (ytr - my) / sy,
        task="regression",
        n_features=M,
        num_warmup=warmup,
        num_samples=samples,
        num_chains=chains,
        mean_basis=btr,
    )
    loc, scale, df = gg.predict_regression(
        res.samples, Ztr, (ytr - my) / sy, Zte, mean_basis=btr, mean_basis_new=bte
    )
    wall = (time.perf_counter() - t0, time.process_time() - c0, os.getloadavg()[0])
    pred = MixturePredictive(loc * sy + my, scale * sy, df)
    lm = res.samples["log_marginal"]
    rhat = (
        bk.diagnostics.summary(
            bk.diagnostics.from_samples({"log_marginal": lm}), var_names=["log_marginal"]
        )["r_hat"].iloc[0]
        if chains > 1
        else float("nan")
    )
    return pred, wall, res, float(rhat)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="fewer sweeps and seeds")
    ap.add_argument("--M", type=int, default=100)
    ap.add_argument("--out", default=str(RESULTS / "gabasr_gibbs_regression.md"))
    args = ap.parse_args()
    warmup, samples, chains = (30, 30, 2) if args.quick else (200, 200, 2)
    M = args.M
    lines = [
        f"Gibbs sampler, M = {M} frequencies, {chains} chains x ({warmup} warm-up + {samples} "
        "recorded sweeps), linear mean basis, default GibbsPrior; wall time includes "
        "compilation and prediction.",
        "",
        "| data | seed | RMSE | R² | NLPD | cov. 95 % | R-hat(log ml) | accept | K | wall s | "
        "CPU s | load avg |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    print("\n".join(lines[2:]), flush=True)
    Xtr, ytr, Xte, yte = bk.datasets.co2_split()
    for seed in [0] if args.quick else [0, 1, 2]:
        pred, wall, res, rhat = fit_predict(seed, Xtr, ytr, Xte, M, warmup, samples, chains)
        m = bk.diagnostics.regression_metrics(yte, pred)
        line = (
            f"| co2 | {seed} | {m['rmse']:.3f} ppm | {m['r2']:.4f} | {m['nlpd']:.3f} | "
            f"{m['coverage_95']:.3f} | {rhat:.3f} | "
            f"{res.sample_stats['accept_rate'].mean():.2f} | "
            f"{np.median(res.samples['n_components']):.0f} | {wall[0]:.1f} | {wall[1]:.1f} | "
            f"{wall[2]:.1f} |"
        )
        lines.append(line)
        print(line, flush=True)
    X, y = bk.datasets.load_dataset("diabetes")
    for seed in [0] if args.quick else [0, 1, 2, 3, 4]:
        Xa, Xb, ya, yb = train_test_split(X, y, test_size=0.2, random_state=seed)
        pred, wall, res, rhat = fit_predict(seed, Xa, ya, Xb, M, warmup, samples, chains)
        m = bk.diagnostics.regression_metrics(yb, pred)
        line = (
            f"| diabetes | {seed} | {m['rmse']:.2f} | {m['r2']:.4f} | {m['nlpd']:.3f} | "
            f"{m['coverage_95']:.3f} | {rhat:.3f} | "
            f"{res.sample_stats['accept_rate'].mean():.2f} | "
            f"{np.median(res.samples['n_components']):.0f} | {wall[0]:.1f} | {wall[1]:.1f} | "
            f"{wall[2]:.1f} |"
        )
        lines.append(line)
        print(line, flush=True)
    text = "\n".join(
        [
            f"### Regression with the Gibbs sampler ({'quick' if args.quick else 'full'} run)",
            "",
            f"Machine: {machine()}, float64. Command: "
            f"`.venv/bin/python benchmarks/papers/gabasr_gibbs_regression.py"
            f"{' --quick' if args.quick else ''}{'' if M == 100 else f' --M {M}'}`",
            "",
            *lines,
            "",
        ]
    )
    write_text(args.out, text)


if __name__ == "__main__":
    main()
