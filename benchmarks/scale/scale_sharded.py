"""N = 10^6 rows, M = 256 random Fourier frequencies (512 features): NIG fit with bounded memory.

The design matrix Phi (10^6 x 512 float64 = 4.1 GB) is never formed: the sufficient
statistics are accumulated over row chunks (bayeskern.sharding), optionally over several
host devices (--devices 2 forces two XLA CPU devices, one per core, and shards the rows).
The only O(N) arrays are X (N x d) and y, generated chunk by chunk.

Reports: time of the first fit (with compilation), the median time per GaBaSR-style sweep
(new frequency set -> statistics -> NIG posterior + log marginal likelihood), peak RSS
(``resource.getrusage``), the load average, and writes benchmarks/results/scaling_sharded.md.

    timeout 1800 .venv/bin/python benchmarks/scale/scale_sharded.py --devices 2
"""

from __future__ import annotations

import argparse
import os
import sys

ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
ap.add_argument("--n", type=int, default=1_000_000)
ap.add_argument("--m", type=int, default=256, help="frequencies (features = 2 m)")
ap.add_argument("--d", type=int, default=4)
ap.add_argument("--chunk", type=int, default=8192)
ap.add_argument("--devices", type=int, default=1, help="forced XLA host devices")
ap.add_argument("--repeats", type=int, default=3)
ap.add_argument("--seed", type=int, default=0)
ap.add_argument("--out", default="benchmarks/results/scaling_sharded.md")
args = ap.parse_args()
if args.devices > 1:
    os.environ["XLA_FLAGS"] = f"--xla_force_host_platform_device_count={args.devices}"
os.environ.setdefault("JAX_PLATFORMS", "cpu")

import platform  # noqa: E402
import resource  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

import bayeskern  # noqa: E402,F401  (float64, one BLAS thread)
from bayeskern.blr import nig_log_marginal, nig_posterior  # noqa: E402
from bayeskern.features import rff_features  # noqa: E402
from bayeskern.sharding import chunked_feature_stats, sharded_feature_stats  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: common.py
from common import accelerators, cpu_name  # noqa: E402


def peak_rss_gb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024**2  # kB -> GB (Linux)


def make_data(n, d, seed, block=100_000):
    """y = sin(x0) + 0.5 cos(2 x1) + noise, generated block by block into X and y."""
    rng = np.random.default_rng(seed)
    X = np.empty((n, d))
    y = np.empty(n)
    for i in range(0, n, block):
        j = min(i + block, n)
        X[i:j] = rng.normal(size=(j - i, d))
        y[i:j] = np.sin(X[i:j, 0]) + 0.5 * np.cos(2 * X[i:j, 1]) + 0.1 * rng.normal(size=j - i)
    return X, y


def fit(X, y, omega):
    if args.devices > 1:
        s = sharded_feature_stats(X, y, rff_features, omega, chunk_size=args.chunk)
    else:
        s = chunked_feature_stats(X, y, rff_features, omega, chunk_size=args.chunk)
    post = nig_posterior(s, 1.0, 1.0, 1.0)
    lml = nig_log_marginal(s, 1.0, 1.0, 1.0)
    jax.block_until_ready((post, lml))
    return post, float(lml)


def main():
    load0 = open("/proc/loadavg").read().split()[:3]
    X, y = make_data(args.n, args.d, args.seed)
    rss_data = peak_rss_gb()
    Xj, yj = jnp.asarray(X), jnp.asarray(y)
    del X, y
    rng = np.random.default_rng(args.seed + 1)
    omegas = [jnp.asarray(rng.normal(size=(args.m, args.d))) for _ in range(args.repeats + 1)]
    t = time.perf_counter()
    post, lml0 = fit(Xj, yj, omegas[0])
    t_first = time.perf_counter() - t
    sweeps, lmls = [], []
    for om in omegas[1:]:
        t = time.perf_counter()
        _, lml = fit(Xj, yj, om)
        sweeps.append(time.perf_counter() - t)
        lmls.append(lml)
    load1 = open("/proc/loadavg").read().split()[:3]
    res = dict(
        n=args.n,
        m=args.m,
        features=2 * args.m,
        d=args.d,
        chunk=args.chunk,
        devices=jax.local_device_count(),
        first_fit_s=t_first,
        sweep_median_s=float(np.median(sweeps)),
        sweeps_s=sweeps,
        peak_rss_gb=peak_rss_gb(),
        rss_after_data_gb=rss_data,
        dense_phi_gb=args.n * 2 * args.m * 8 / 1e9,
        log_marginal=[lml0] + lmls,
        w_norm=float(jnp.linalg.norm(post.w)),
        load_start=load0,
        load_end=load1,
    )
    for k, v in res.items():
        print(f"{k}: {v}")
    machine = f"{platform.machine()} {os.cpu_count()} cores ({cpu_name()}), {accelerators()}"
    cmd = " ".join(["timeout 1800 .venv/bin/python", *sys.argv])
    lines = [
        f"## N = {args.n:,}, M = {args.m} frequencies ({2 * args.m} features), d = {args.d}, "
        f"{res['devices']} device(s)",
        "",
        f"Command: `{cmd}`  ",
        f"Machine: {machine}; load average at start {' '.join(load0)}, end {' '.join(load1)}.",
        "",
        "| quantity | value |",
        "|---|---|",
        f"| first fit (compile + stats + posterior + log ML) | {t_first:.1f} s |",
        f"| GaBaSR-style sweep (new frequencies -> stats -> posterior + log ML), median of "
        f"{len(sweeps)} | {res['sweep_median_s']:.1f} s "
        f"({', '.join(f'{s:.1f}' for s in sweeps)}) |",
        f"| peak RSS of the process | {res['peak_rss_gb']:.2f} GB |",
        f"| RSS after generating X, y (N x d) | {rss_data:.2f} GB |",
        f"| a dense Phi would need | {res['dense_phi_gb']:.1f} GB |",
        "| log marginal likelihood per sweep | "
        f"{', '.join(f'{v:.1f}' for v in res['log_marginal'])} |",
        "",
    ]
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    with open(args.out, "a") as f:
        f.write("\n".join(lines) + "\n")
    print(f"appended to {args.out}")


if __name__ == "__main__":
    main()
