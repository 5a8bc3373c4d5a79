"""CO2 protocol: bayeskern's GPRegressor vs scikit-learn's GaussianProcessRegressor.

Train on monthly means before 1994-01, test on 1994-01..2001-12 (96 months). The reference
is scikit-learn's documented CO2 kernel fitted by ML-II; bayeskern uses the kernel a user
would write, ``Linear() + RBF() + RBF() * Periodic(period=1.0)``, with every other
hyper-parameter under its prior, NUTS with 4 chains. Both run in this one process, so the
wall-time ratio is fair.

    .venv/bin/python benchmarks/papers/gp_co2.py [--seeds 0 1 2] [--quick]
"""

from __future__ import annotations

import argparse
import platform
import time

from sklearn.gaussian_process import GaussianProcessRegressor
from sklearn.gaussian_process.kernels import RBF as SkRBF
from sklearn.gaussian_process.kernels import ExpSineSquared, RationalQuadratic, WhiteKernel

import bayeskern as bk
from bayeskern.predictive import MixturePredictive


def sklearn_reference(Xtr, ytr, Xte, yte):
    """scikit-learn's CO2 example kernel (its documentation), ML-II fit."""
    kernel = (
        50.0**2 * SkRBF(length_scale=50.0)
        + 2.0**2 * SkRBF(length_scale=100.0) * ExpSineSquared(length_scale=1.0, periodicity=1.0)
        + 0.5**2 * RationalQuadratic(length_scale=1.0, alpha=1.0)
        + 0.1**2 * SkRBF(length_scale=0.1)
        + WhiteKernel(noise_level=0.1**2, noise_level_bounds=(1e-5, 1e5))
    )
    t = time.perf_counter()
    gp = GaussianProcessRegressor(kernel=kernel, normalize_y=False)
    gp.fit(Xtr, ytr - ytr.mean())
    wall = time.perf_counter() - t
    mu, sd = gp.predict(Xte, return_std=True)
    pred = MixturePredictive((mu + ytr.mean())[None], sd[None])
    return bk.diagnostics.regression_metrics(yte, pred), wall


def run(seed, quick):
    Xtr, ytr, Xte, yte = bk.datasets.co2_split()
    kernel = (
        bk.kernels.Linear() + bk.kernels.RBF() + bk.kernels.RBF() * bk.kernels.Periodic(period=1.0)
    )
    settings = dict(num_warmup=100, num_samples=100) if quick else {}
    t = time.perf_counter()
    gp = bk.GPRegressor(kernel=kernel, random_state=seed, progress_bar=False, **settings)
    gp.fit(Xtr, ytr)
    wall = time.perf_counter() - t
    m = bk.diagnostics.regression_metrics(yte, gp.predictive(Xte))
    conv = gp.convergence_
    return m, wall, conv


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--seeds", type=int, nargs="+", default=[0])
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args(argv)
    ref, ref_wall = sklearn_reference(*bk.datasets.co2_split())
    print(
        f"machine: {platform.machine()} {platform.processor() or ''}, "
        f"{__import__('os').cpu_count()} cores"
    )
    rows = [("sklearn GPR (ML-II)", "-", ref, ref_wall, None)]
    for s in args.seeds:
        m, wall, conv = run(s, args.quick)
        rows.append((f"bk.GPRegressor seed {s}", s, m, wall, conv))
    hdr = (
        "| model | RMSE | cov 95 | NLPD | CRPS | max R-hat | min ESS | div | wall s "
        "| ratio to sklearn |"
    )
    print(hdr)
    print("|" + "---|" * 10)
    for name, _, m, wall, conv in rows:
        rh = f"{conv.max_rhat:.3f}" if conv else "-"
        ess = f"{min(conv.min_ess_bulk, conv.min_ess_tail):.0f}" if conv else "-"
        div = str(conv.n_divergent) if conv else "-"
        print(
            f"| {name} | {m['rmse']:.2f} | {m['coverage_95']:.2f} | {m['nlpd']:.2f} | "
            f"{m['crps']:.2f} | {rh} | {ess} | {div} | {wall:.1f} | {wall / ref_wall:.1f} |"
        )
    return rows


if __name__ == "__main__":
    main()
