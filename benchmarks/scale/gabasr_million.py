"""GaBaSRRegressor on 10^6 rows x 4 columns, M = 256 frequencies: fit through the estimator.

The large-data path of :class:`bayeskern.GaBaSRRegressor`: ``max_sample_rows`` rows (a random
subset) carry the spectral posterior (features model; ``--sampler``, default the paper's
Gibbs/MH sampler: NUTS on the features model with 256 frequencies was slow, 452 s
for 2 x (20 + 10) iterations on a 300-row subset, against 116 s for 2 x (100 + 100) Gibbs
sweeps on 2000 rows); every retained draw's weights
and noise are then conditioned on all 10^6 rows through sufficient statistics summed over
row chunks (``chunk_size``), so the 10^6 x 521 design (4.2 GB in float64) is never formed.

Reference in the same run: the same estimator fitted on the subset alone (what the full-data
conditioning adds), and the time of one chunked pass over all rows for one draw. Data:
``y = sin(3 x0) + 0.5 cos(2 x1) + 0.3 x2 x3 + 0.3 e``, x and e standard normal; 20 000
held-out rows. Reports fit time, peak RSS of the process (``resource.getrusage``, includes
the data), held-out RMSE, 95 % coverage, NLPD, R-hat/ESS on the subset posterior.

    .venv/bin/python benchmarks/scale/gabasr_million.py            # about 10 min on 2 cores
    .venv/bin/python benchmarks/scale/gabasr_million.py --n 100000  # a quick look
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from common import loadavg, machine, timed_fit, write_text  # noqa: E402

import bayeskern as bk  # noqa: E402


def data(n, seed):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 4))
    y = (
        np.sin(3 * X[:, 0])
        + 0.5 * np.cos(2 * X[:, 1])
        + 0.3 * X[:, 2] * X[:, 3]
        + 0.3 * rng.normal(size=n)
    )
    return X, y


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=1_000_000)
    ap.add_argument("--n-features", type=int, default=256)
    ap.add_argument("--max-sample-rows", type=int, default=2000)
    ap.add_argument("--sampler", default="gibbs")
    ap.add_argument("--num-warmup", type=int, default=200)
    ap.add_argument("--num-samples", type=int, default=100)
    ap.add_argument("--num-chains", type=int, default=2)
    ap.add_argument("--draws", type=int, default=20, help="num_conditioned_draws")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default="docs/results/gabasr_million")
    args = ap.parse_args()

    X, y = data(args.n, args.seed)
    Xte, yte = data(20_000, args.seed + 1)
    kw = dict(
        sampler=args.sampler,
        n_features=args.n_features,
        num_warmup=args.num_warmup,
        num_samples=args.num_samples,
        num_chains=args.num_chains,
        progress_bar=False,
        random_state=args.seed,
    )
    rows = {}
    for name, est in (
        (
            "all rows (subset posterior + full-data conditioning)",
            bk.GaBaSRRegressor(
                max_sample_rows=args.max_sample_rows, num_conditioned_draws=args.draws, **kw
            ),
        ),
        ("subset only (reference)", bk.GaBaSRRegressor(**kw)),
    ):
        Xf, yf = (X, y) if name.startswith("all") else (None, None)
        if Xf is None:  # the same rows the large-data fit sampled on
            sub = rows[next(iter(rows))]["_rows"]
            Xf, yf = X[sub], y[sub]
        fit_s, load0 = timed_fit(est, Xf, yf)
        t = time.perf_counter()
        m = bk.diagnostics.regression_metrics(yte, est.predictive(Xte))
        rows[name] = dict(
            fit_s=round(fit_s, 1),
            predict_20k_s=round(time.perf_counter() - t, 1),
            rows=len(Xf),
            sample_rows=int(est.n_sample_rows_),
            rmse=round(m["rmse"], 4),
            coverage_95=round(m["coverage_95"], 3),
            nlpd=round(m["nlpd"], 4),
            max_rhat=round(float(est.convergence_.max_rhat), 3),
            min_ess=round(float(est.convergence_.min_ess_bulk), 1),
            converged=bool(est.convergence_.ok),
            peak_rss_gb=round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e6, 2),
            load_before=round(load0, 2),
            load_after=round(os.getloadavg()[0], 2),
        )
        if name.startswith("all"):
            rows[name]["_rows"] = est._sample_rows(len(X))
        print(
            json.dumps({"model": name, **{k: v for k, v in rows[name].items() if k != "_rows"}}),
            flush=True,
        )
    # one chunked pass over all rows for one draw, timed (the unit of the conditioning cost)
    import jax
    import jax.numpy as jnp
    from bayeskern.models import gabasr as G

    est = bk.GaBaSRRegressor(n_features=args.n_features, random_state=args.seed)
    est._check_params()
    Z, B = est._setup(X)
    d0 = {"weights": jnp.full(4, 0.25), "mu": jnp.zeros((4, 4)), "sigma": jnp.ones((4, 4))}
    f = jax.jit(lambda Z_, y_, B_: G.design_stats(Z_, y_, d0, est.spec_, B_, 16384))
    args_ = (jnp.asarray(Z), jnp.asarray(y), jnp.asarray(B))
    jax.block_until_ready(f(*args_))
    ts = []
    for _ in range(3):
        t = time.perf_counter()
        jax.block_until_ready(f(*args_))
        ts.append(time.perf_counter() - t)
    pass_s = float(np.median(ts))
    print(json.dumps({"one_pass_s": round(pass_s, 2)}), flush=True)

    a, r = rows[next(iter(rows))], rows["subset only (reference)"]
    table = "\n".join(
        f"| {k} | {v['rows']:,} | {v['sample_rows']:,} | {v['fit_s']} | {v['peak_rss_gb']} | "
        f"{v['rmse']} | {v['coverage_95']} | {v['nlpd']} | {v['max_rhat']} / {v['min_ess']} |"
        for k, v in rows.items()
    )
    text = f"""# GaBaSR on 10⁶ rows through the estimator

Machine: {machine()}; load at the end: {loadavg()}.

`GaBaSRRegressor(sampler="{args.sampler}", n_features={args.n_features},
max_sample_rows={args.max_sample_rows},
num_conditioned_draws={args.draws}, num_warmup={args.num_warmup},
num_samples={args.num_samples}, num_chains={args.num_chains}, random_state={args.seed})`
on N = {args.n:,} rows × 4 columns ({2 * args.n_features} Fourier columns + 9 trend columns);
held-out: 20 000 rows. The spectral posterior is sampled on the subset; the weights and
noise of {args.draws} draws are conditioned on all rows with chunked sufficient statistics.
The convergence columns judge the subset posterior (label-invariant quantities, Gibbs).
The noise standard deviation is 0.3, so an RMSE of 0.30 is the floor. Peak RSS is the
whole process's so far (the second row includes the first fit); the data are 0.04 GB.

| fit | rows | rows sampled on | fit (s) | peak RSS (GB) | RMSE | 95 % cov. | NLPD | R-hat / ESS |
|---|---|---|---|---|---|---|---|---|
{table}

One chunked pass over all {args.n:,} rows for one draw (statistics of the
{2 * args.n_features + 9}-column design): {pass_s:.1f} s (median of 3). The conditioning
costs one such pass per conditioned draw (the fit spreads the draws over the CPU devices;
this pass ran on one); the fit of the subset posterior is the rest.
Conditioning on all rows changes RMSE {r["rmse"]} → {a["rmse"]} and NLPD {r["nlpd"]} →
{a["nlpd"]} against the subset-only fit.

Reproduce: `.venv/bin/python benchmarks/scale/gabasr_million.py`
"""
    write_text(args.out + ".md", text)
    write_text(
        args.out + ".json",
        json.dumps(
            {
                "args": vars(args),
                "one_pass_s": pass_s,
                "fits": {
                    k: {kk: vv for kk, vv in v.items() if kk != "_rows"} for k, v in rows.items()
                },
            },
            indent=1,
        ),
    )


if __name__ == "__main__":
    main()
