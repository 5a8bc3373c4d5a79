"""GaBaSR on Mauna Loa CO2 (Pena-Llamas et al. 2023, Table 4 protocol as in the issue):
train < 1994-01, test 1994-01..2001-12, GaBaSRRegressor() with its defaults (or the --set
arguments), 3 seeds.

Run:  .venv/bin/python benchmarks/papers/gabasr_co2.py [--seeds 0 1 2] [--quick] [--ls] [--peers]
      [--set NAME=JSON ...]
``--peers``: in the same process, scikit-learn's GP with its documented CO2 kernel (ML-II,
once: it has no seed) and ``bk.GPRegressor`` with the demo kernel (per seed, defaults), from
``gp_co2.py``; one JSON line each, with the ratio of fit times to GaBaSR's.
Writes benchmarks/results/gabasr_co2.json (merged into gabasr.md by gabasr_report.py).
"""

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import argparse  # noqa: E402
import json  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
import warnings  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402

import bayeskern as bk  # noqa: E402
from bayeskern.estimators.gabasr import GaBaSRRegressor  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: common.py
sys.path.insert(0, str(Path(__file__).resolve().parent))  # gp_co2.py (--peers)
from common import RESULTS  # noqa: E402


def run(seed, quick, sampler, extra):
    Xtr, ytr, Xte, yte = bk.datasets.co2_split()
    kw = dict(random_state=seed, progress_bar=False, sampler=sampler, **extra)
    if quick:
        kw.update(num_warmup=100, num_samples=100, num_chains=2)
    if sampler == "gibbs":
        kw.setdefault("n_features", 128)
        kw.setdefault("num_warmup", 5)
        kw.setdefault("num_samples", 20)
    est = GaBaSRRegressor(**kw)
    t0 = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        est.fit(Xtr, ytr)
    fit_s = time.perf_counter() - t0
    pred = est.predictive(Xte)
    m = bk.diagnostics.regression_metrics(yte, pred)
    out = {
        "seed": seed,
        "sampler": sampler,
        "fit_s": fit_s,
        **{
            k: m[k]
            for k in ("rmse", "mse", "r2", "nlpd", "coverage_95", "coverage_90", "crps")
            if k in m
        },
    }
    out["mse"] = m["rmse"] ** 2
    rep = est.convergence_
    out.update(
        max_rhat=rep.max_rhat,
        min_ess_bulk=rep.min_ess_bulk,
        n_divergent=rep.n_divergent,
        n_draws=rep.n_draws,
        ok=bool(rep.ok),
    )
    if "n_steps" in est.idata_.sample_stats:
        out["mean_leapfrog"] = float(est.idata_.sample_stats["n_steps"].mean())
    out["s_per_ess"] = fit_s / max(rep.min_ess_bulk, 1e-9)
    out["in_sample_mse"] = float(np.mean((est.predict(Xtr) - ytr) ** 2))
    return out


def _peer_row(model, seed, m, wall, conv, ratio=None):
    row = dict(
        model=model,
        seed=seed,
        fit_s=wall,
        load=os.getloadavg()[0],
        **{k: m[k] for k in ("rmse", "nlpd", "coverage_95", "crps") if k in m},
    )
    if conv is not None:
        row.update(ok=bool(conv.ok), max_rhat=conv.max_rhat, n_divergent=conv.n_divergent)
    if ratio is not None:
        row["fit_time_ratio_to_gabasr"] = ratio
    return row


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--sampler", default="nuts")
    ap.add_argument("--ls", action="store_true", help="locally stationary variant")
    ap.add_argument("--tag", default="")
    ap.add_argument("--peers", action="store_true")
    ap.add_argument(
        "--set",
        nargs="+",
        default=[],
        metavar="NAME=JSON",
        help="GaBaSRRegressor arguments other than the defaults, e.g. "
        "target_accept_prob=0.8 (values parsed as JSON)",
    )
    args = ap.parse_args()
    extra = {"locally_stationary": True} if args.ls else {}
    for item in args.set:
        name, _, value = item.partition("=")
        extra[name] = json.loads(value)
    rows, peers = [], []
    if args.peers:
        import gp_co2

        m, wall = gp_co2.sklearn_reference(*bk.datasets.co2_split())
        peers.append(_peer_row("sklearn GPR (ML-II, CO2 example kernel)", None, m, wall, None))
        print(json.dumps(peers[-1]), flush=True)
    for s in args.seeds:
        r = run(s, args.quick, args.sampler, extra)
        print(json.dumps(r), flush=True)
        rows.append(r)
        if args.peers:
            m, wall, conv = gp_co2.run(s, args.quick)
            peers.append(
                _peer_row("bk.GPRegressor (demo kernel)", s, m, wall, conv, ratio=wall / r["fit_s"])
            )
            print(json.dumps(peers[-1]), flush=True)
    RESULTS.mkdir(exist_ok=True)
    name = f"gabasr_co2{args.tag}{'_ls' if args.ls else ''}_{args.sampler}.json"
    (RESULTS / name).write_text(
        json.dumps(
            {
                "rows": rows,
                "peers": peers,
                "quick": args.quick,
                "cmd": "benchmarks/papers/gabasr_co2.py",
                "load": os.getloadavg(),
            },
            indent=1,
        )
    )


if __name__ == "__main__":
    main()
