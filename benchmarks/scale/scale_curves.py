"""Scaling curves (log-log): sufficient-statistic NIG fit time vs N and vs M, exact GP
log-likelihood + gradient time vs N. Writes benchmarks/results/scaling.png and scaling.md.

* statistics fit: ``chunked_feature_stats`` (RFF, d = 4) + NIG posterior + log evidence; vs N
  at M = 256 frequencies (512 features), vs M at N = 10^5. Expected slopes: 1 in N,
  about 2 in M (the N·(2M)² Gram sums dominate the (2M)³ Cholesky).
* GP: value and gradient of the ``gp_regression`` potential (as in peer_gp_tinygp.py), ARD
  RBF, d = 3. Expected slope 3 at large N (Cholesky), 2 below.

Median of ``--repeats`` after one compile call; one process; load average recorded.

    timeout 3600 .venv/bin/python benchmarks/scale/scale_curves.py
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
from bayeskern.models.gp import gp_regression

import bayeskern  # noqa: F401
from bayeskern.blr import nig_log_marginal, nig_posterior
from bayeskern.features import rff_features
from bayeskern.kernels import RBF, name_leaves
from bayeskern.learning import fit_kernel
from bayeskern.sharding import chunked_feature_stats

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: common.py
from common import RESULTS, command, loadavg, machine, write_text  # noqa: E402


def _median(f, repeats):
    f()  # compile
    ts = []
    for _ in range(repeats):
        t = time.perf_counter()
        f()
        ts.append(time.perf_counter() - t)
    return float(np.median(ts))


def stats_time(n, m, repeats, d=4, chunk=8192):
    rng = np.random.default_rng(0)
    X = jnp.asarray(rng.normal(size=(n, d)))
    y = jnp.asarray(rng.normal(size=n))
    om = jnp.asarray(rng.normal(size=(m, d)))

    def f():
        s = chunked_feature_stats(X, y, rff_features, om, chunk_size=chunk)
        jax.block_until_ready((nig_posterior(s, 1.0, 1.0, 1.0), nig_log_marginal(s, 1.0, 1.0, 1.0)))

    return _median(f, repeats)


def gp_time(n, repeats, d=3):
    from numpyro.infer.util import initialize_model

    rng = np.random.default_rng(0)
    X = rng.normal(size=(n, d))
    y = np.sin(X[:, 0]) + 0.1 * rng.normal(size=n)
    kernel = name_leaves(fit_kernel(name_leaves(RBF(ard=True)), X, y))
    info = initialize_model(
        jax.random.PRNGKey(0),
        gp_regression,
        model_kwargs=dict(X=jnp.asarray(X), y=jnp.asarray(y), kernel=kernel, x_scale=np.ones(d)),
    )
    vg = jax.jit(jax.value_and_grad(info.potential_fn))
    z = info.param_info.z
    return _median(lambda: jax.block_until_ready(vg(z)), repeats)


def slope(x, t):
    return float(np.polyfit(np.log(x), np.log(t), 1)[0])


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--ns", type=int, nargs="+", default=[10_000, 30_000, 100_000, 300_000])
    ap.add_argument("--ms", type=int, nargs="+", default=[32, 64, 128, 256, 512])
    ap.add_argument("--gp-ns", type=int, nargs="+", default=[250, 500, 1000, 2000, 4000])
    args = ap.parse_args()
    load0 = loadavg()
    tn = [stats_time(n, 256, args.repeats) for n in args.ns]
    print("stats vs N:", dict(zip(args.ns, tn, strict=True)))
    tm = [stats_time(100_000, m, args.repeats) for m in args.ms]
    print("stats vs M:", dict(zip(args.ms, tm, strict=True)))
    tg = [gp_time(n, args.repeats) for n in args.gp_ns]
    print("GP vs N:", dict(zip(args.gp_ns, tg, strict=True)))
    load1 = loadavg()

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(1, 3, figsize=(13, 3.8))
    panels = [
        (args.ns, tn, "N (rows)", "NIG fit from chunked statistics, M = 256 freq."),
        (args.ms, tm, "M (frequencies; features = 2M)", "NIG fit, N = 10^5"),
        (args.gp_ns, tg, "N (rows)", "exact GP log-lik + gradient, d = 3"),
    ]
    slopes = []
    for a, (x, t, xl, title) in zip(ax, panels, strict=True):
        s = slope(x, t)
        slopes.append(s)
        a.loglog(x, t, "o-", label=f"measured (slope {s:.2f})")
        a.set_xlabel(xl)
        a.set_ylabel("seconds (median)")
        a.set_title(title, fontsize=10)
        a.grid(True, which="both", alpha=0.3)
        a.legend(fontsize=8)
    fig.suptitle(f"bayeskern scaling · {machine()} · load {load0} → {load1}", fontsize=9)
    fig.tight_layout()
    out = RESULTS / "scaling.png"
    fig.savefig(out, dpi=120)
    print("wrote", out, "slopes", slopes)

    rows = [
        f"| stats fit vs N (M = 256) | {n:,} | {t:.3f} |" for n, t in zip(args.ns, tn, strict=True)
    ]
    rows += [
        f"| stats fit vs M (N = 10^5) | M = {m} | {t:.3f} |"
        for m, t in zip(args.ms, tm, strict=True)
    ]
    rows += [
        f"| GP log-lik + grad vs N | {n:,} | {t:.3f} |" for n, t in zip(args.gp_ns, tg, strict=True)
    ]
    md = "\n".join(
        [
            "# Scaling curves",
            "",
            f"`{command()}` · {machine()} · load average {load0} at start, {load1} at end; "
            f"median of {args.repeats} after a compile call. Figure: `scaling.png`.",
            "",
            f"Log-log slopes: statistics vs N {slopes[0]:.2f} (expected 1), vs M {slopes[1]:.2f} "
            f"(expected ≤ 2), GP vs N {slopes[2]:.2f} (expected → 3).",
            "",
            "| curve | size | seconds |",
            "|---|---|---|",
            *rows,
            "",
        ]
    )
    write_text(RESULTS / "scaling.md", md)


if __name__ == "__main__":
    main()
