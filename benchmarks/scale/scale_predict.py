"""Batched prediction: predictive mean, sd and 90 % interval for 10^6 new rows, peak RSS < 2 GB.

Fits a small model (N_train rows, short NUTS run), then calls
``bayeskern.sharding.predict_in_batches`` on ``--n-new`` rows. Each model runs in its own
process (``--model both`` starts one subprocess per model) so that the peak RSS
(``resource.getrusage``) is that model's. Appends to benchmarks/results/scaling_predict.md
unless ``--no-write``; prints one ``RESULT {...}`` JSON line.

    timeout 3600 .venv/bin/python benchmarks/scale/scale_predict.py --model both

The GP run used to hang inside XLA:CPU after 10-40 batches; fixed by
``bayeskern.batching.batched_map`` (lax.map without a remainder batch).
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time
import warnings
from pathlib import Path

import numpy as np


def _rss_gb():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024**2


def run_one(args):
    import bayeskern as bk
    from bayeskern.sharding import predict_in_batches

    rng = np.random.default_rng(args.seed)
    X = rng.uniform(-3, 3, size=(args.n_train, 2))
    y = np.sin(X[:, 0]) + 0.5 * np.cos(X[:, 1]) + 0.1 * rng.normal(size=args.n_train)
    sampler = dict(
        num_warmup=args.warmup,
        num_samples=args.draws,
        num_chains=1,
        progress_bar=False,
        random_state=args.seed,
    )
    if args.model == "gp":
        est = bk.GPRegressor(**sampler)
    else:
        est = bk.GaBaSRRegressor(n_features=64, n_components=4, **sampler)
    t = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        est.fit(X, y)
    fit_s = time.perf_counter() - t
    rss_fit = _rss_gb()
    Xn = rng.uniform(-3, 3, size=(args.n_new, 2))
    t = time.perf_counter()
    out = predict_in_batches(est, Xn, prob=0.9, batch_size=args.batch)
    pred_s = time.perf_counter() - t
    f = np.sin(Xn[:, 0]) + 0.5 * np.cos(Xn[:, 1])
    res = dict(
        model=args.model,
        n_train=args.n_train,
        n_new=args.n_new,
        draws=args.draws,
        batch=args.batch,
        fit_s=fit_s,
        predict_s=pred_s,
        rss_after_fit_gb=rss_fit,
        peak_rss_gb=_rss_gb(),
        rmse_vs_truth=float(np.sqrt(np.mean((out["mean"] - f) ** 2))),
        all_finite=bool(all(np.all(np.isfinite(v)) for v in out.values())),
        interval_ok=bool(np.all(out["lower"] < out["upper"])),
        load=open("/proc/loadavg").read().split()[:3],
    )
    print("RESULT " + json.dumps(res))
    return res


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", choices=["gp", "gabasr", "both"], default="both")
    ap.add_argument("--n-new", type=int, default=1_000_000)
    ap.add_argument("--n-train", type=int, default=300)
    ap.add_argument("--draws", type=int, default=20, help="posterior draws (1 chain)")
    ap.add_argument("--warmup", type=int, default=100)
    ap.add_argument("--batch", type=int, default=5_000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--no-write", action="store_true")
    ap.add_argument("--out", default="benchmarks/results/scaling_predict.md")
    args = ap.parse_args()
    if args.model != "both" and args.no_write:
        run_one(args)
        return
    results = []
    for model in ("gp", "gabasr") if args.model == "both" else (args.model,):
        cmd = [sys.executable, __file__, "--model", model, "--no-write"] + [
            f"--{k.replace('_', '-')}={v}"
            for k, v in vars(args).items()
            if k in ("n_new", "n_train", "draws", "warmup", "batch", "seed")
        ]
        proc = subprocess.run(cmd, capture_output=True, text=True)
        if proc.returncode != 0:
            sys.exit(f"{model} failed:\n{proc.stderr[-3000:]}")
        line = [ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")][-1]
        results.append(json.loads(line[7:]))
        print(line)
    if args.no_write:
        return
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: common.py
    from common import machine

    lines = [
        f"## Batched prediction of {args.n_new:,} new rows (mean, sd, 90 % interval)",
        "",
        f"Command: `timeout 3600 .venv/bin/python {' '.join(sys.argv)}`  ",
        f"Machine: {machine()}; one process per model; "
        f"`predict_in_batches(batch_size={args.batch})`; {args.draws} posterior draws "
        f"(1 chain, {args.warmup} warm-up), {args.n_train} training rows.",
        "",
        "| model | fit s | predict s | peak RSS GB (whole process) | RSS after fit GB | "
        "RMSE vs noise-free truth | finite | load avg at end |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in results:
        lines.append(
            f"| {r['model']} | {r['fit_s']:.1f} | {r['predict_s']:.1f} | "
            f"{r['peak_rss_gb']:.2f} | {r['rss_after_fit_gb']:.2f} | "
            f"{r['rmse_vs_truth']:.3f} | {r['all_finite']} | {' '.join(r['load'])} |"
        )
    with open(args.out, "a") as f:
        f.write("\n".join(lines) + "\n\n")
    print(f"appended to {args.out}")


if __name__ == "__main__":
    main()
