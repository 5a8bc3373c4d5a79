"""Where GaBaSR's exact model is hard to sample: per-site R-hat and ESS, and the funnel between
a periodic component's frequency and its spread, on the CO2 protocol.

One `GaBaSRRegressor()` fit per seed (defaults, except ``num_samples``: a fixed number of
draws per chain, so that runs compare at equal length), then:

- fit time, leapfrog steps per draw, step size, and ``az.summary``'s R-hat and ESS per site;
- for each periodic component k, the posterior sd of its frequency ``mu[k]`` within sixths of
  its spread ``sigma[k]`` (a funnel shows as an sd that grows with the spread).

Run:  .venv/bin/python benchmarks/defaults/gabasr_geometry.py [--seeds 0 1] [--draws 200]
Prints one table per seed; nothing is written.
"""

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import argparse  # noqa: E402
import time  # noqa: E402
import warnings  # noqa: E402

import numpy as np  # noqa: E402

import bayeskern as bk  # noqa: E402
from bayeskern import diagnostics  # noqa: E402


def funnel_rows(post, k: int, bins: int = 6):
    """(spread range, sd of the frequency) within ``bins`` quantile bins of ``sigma[k]``."""
    s = np.asarray(post["sigma"])[..., k].ravel()
    m = np.asarray(post["mu"])[..., k].ravel()
    edges = np.quantile(s, np.linspace(0, 1, bins + 1))
    return [
        (lo, hi, float(m[(s >= lo) & (s <= hi)].std()))
        for lo, hi in zip(edges[:-1], edges[1:], strict=True)
    ]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1])
    ap.add_argument("--draws", type=int, default=200)
    args = ap.parse_args()
    Xtr, ytr, _, _ = bk.datasets.co2_split()
    for seed in args.seeds:
        est = bk.GaBaSRRegressor(random_state=seed, progress_bar=False, num_samples=args.draws)
        t0 = time.perf_counter()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            est.fit(Xtr, ytr)
        fit_s = time.perf_counter() - t0
        ss = est.idata_.sample_stats
        print(
            f"seed {seed}: fit {fit_s:.1f} s, {args.draws} draws per chain, "
            f"{float(ss['n_steps'].mean()):.2f} leapfrog steps per draw, "
            f"step size {float(ss['step_size'].mean()):.3f}, load {os.getloadavg()[0]:.2f}"
        )
        sites = [
            v for v in ("amplitude", "sigma0", "mu", "sigma", "noise") if v in est.idata_.posterior
        ]
        summary = diagnostics.summary(est.idata_, var_names=sites)
        print(summary[["mean", "sd", "ess_bulk", "ess_tail", "r_hat"]].to_string())
        post = est.idata_.posterior
        for k in range(np.asarray(post["sigma"]).shape[-1] if "sigma" in post else 0):
            print(f"component {k + 1}: sd of mu[{k}] within sixths of sigma[{k}]")
            for lo, hi, sd in funnel_rows(post, k):
                print(f"  sigma {lo:.3f}-{hi:.3f}: sd(mu) {sd:.3f}")


if __name__ == "__main__":
    main()
