"""GaBaSR's spectral-mixture GP on a Hilbert-space basis at 10^3-10^6 rows (defaults).

Every fit is ``GaBaSRRegressor()`` with default arguments (only ``random_state`` and
``progress_bar=False`` set): from 1 000 rows in one to three input columns that is the basis
form (``model_ == "hsgp"``). Cases, each runnable alone:

* ``co2_weekly``: the 1 807 weekly CO2 training weeks (< 1994), tested on the 418 weeks
  1994-2001 (held-out RMSE, 95 % coverage, NLPD).
* ``million``: 1-D synthetic, N = 10^6 (the generator of ``hsgp_scale.py``'s ``million``
  case), tested on 10^4 new rows; in a child process (its own peak RSS).

    .venv/bin/python benchmarks/scale/gabasr_hsgp.py co2_weekly|million [--seeds 0 1 2]

Writes the case's section of ``docs/results/gabasr_hsgp.md``.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
import warnings
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: common.py
from common import DOCS_RESULTS, ROOT, loadavg, machine, md_table, write_section  # noqa: E402

import bayeskern as bk  # noqa: E402

SCRIPT = Path(__file__).resolve().relative_to(ROOT)
PAGE = DOCS_RESULTS / "gabasr_hsgp.md"
HEADER = f"""# GaBaSR on a Hilbert-space basis: 10^3 to 10^6 rows

Written by `{SCRIPT}` (one section per case; rerun the command in a section to
reproduce it). Every fit is `GaBaSRRegressor()` with default arguments, only
`random_state` (= seed) and `progress_bar=False` set; every seed run is listed. Load is
`/proc/loadavg` (1, 5, 15 min) before → after the fit; peak RSS is `getrusage` of the
process that fitted.
"""


def million_data(n, seed):
    rng = np.random.default_rng(seed)
    X = rng.uniform(0, 10, size=(n, 1))
    return X, np.sin(2 * X[:, 0]) + 0.3 * np.sin(7 * X[:, 0]) + 0.2 * rng.normal(size=n)


def fit_and_score(X, y, Xte, yte, seed):
    """Default fit, timed, and its held-out metrics; one JSON-able record."""
    import resource

    load0 = loadavg()
    est = bk.GaBaSRRegressor(random_state=seed, progress_bar=False)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        t = time.perf_counter()
        est.fit(X, y)
        fit_s = time.perf_counter() - t
    load1 = loadavg()
    m = bk.diagnostics.regression_metrics(yte, est.predictive(Xte))
    c = est.convergence_
    return dict(
        seed=seed,
        n=len(X),
        model=est.model_,
        n_basis=int(getattr(est, "hsgp_basis_", None).size) if est.model_ == "hsgp" else None,
        fit_s=round(fit_s, 1),
        draws_per_chain=int(est.num_samples_),
        rmse=round(m["rmse"], 4),
        coverage_95=round(m["coverage_95"], 3),
        nlpd=round(m["nlpd"], 3),
        converged=bool(c.ok),
        max_rhat=round(float(c.max_rhat), 3),
        min_ess_bulk=round(float(c.min_ess_bulk)),
        divergences=int(c.n_divergent),
        mass_beyond=getattr(est, "basis_mass_beyond_", None),
        load=f"{load0} → {load1}",
        peak_rss_gb=round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e6, 2),
        warnings=[str(w.message)[:200] for w in caught],
    )


def table(recs):
    return md_table(
        [
            "seed",
            "rows",
            "model_ (M)",
            "fit s",
            "draws/chain",
            "RMSE",
            "95 % cov",
            "NLPD",
            "converged (R-hat / ESS / div.)",
            "peak RSS GB",
            "load",
        ],
        [
            [
                r["seed"],
                r["n"],
                f"{r['model']} ({r['n_basis']})",
                r["fit_s"],
                r["draws_per_chain"],
                r["rmse"],
                r["coverage_95"],
                r["nlpd"],
                f"{'yes' if r['converged'] else 'NO'} ({r['max_rhat']} / {r['min_ess_bulk']} / "
                f"{r['divergences']})",
                r["peak_rss_gb"],
                r["load"],
            ]
            for r in recs
        ],
    )


def case_co2_weekly(args):
    Xtr, ytr, Xte, yte = bk.datasets.co2_split(weekly=True)
    recs = []
    for seed in args.seeds:
        recs.append(fit_and_score(Xtr, ytr, Xte, yte, seed))
        print(json.dumps(recs[-1]), flush=True)
    body = (
        f"## co2_weekly\n\n`.venv/bin/python {SCRIPT} co2_weekly --seeds "
        f"{' '.join(map(str, args.seeds))}`, {time.strftime('%Y-%m-%d %H:%M')}, "
        f"{machine()}.\n\n{table(recs)}\n\nWarnings: "
        + "; ".join(sorted({w for r in recs for w in r["warnings"]}))
        + "\n"
    )
    write_section(PAGE, "co2_weekly", body, header=HEADER)


def case_million(args):
    recs = []
    for seed in args.seeds:
        out = subprocess.run(
            [sys.executable, __file__, "million-child", "--seeds", str(seed)],
            capture_output=True,
            text=True,
            check=True,
        )
        recs.append(json.loads(out.stdout.strip().splitlines()[-1]))
        print(json.dumps(recs[-1]), flush=True)
    body = (
        f"## million\n\n`.venv/bin/python {SCRIPT} million --seeds "
        f"{' '.join(map(str, args.seeds))}`, {time.strftime('%Y-%m-%d %H:%M')}, "
        f"{machine()}. Noise sd 0.2: an RMSE of 0.2 against the noisy test targets is "
        f"the floor.\n\n{table(recs)}\n\nWarnings: "
        + "; ".join(sorted({w for r in recs for w in r["warnings"]}))
        + "\n"
    )
    write_section(PAGE, "million", body, header=HEADER)


def million_child(args):
    seed = args.seeds[0]
    X, y = million_data(1_000_000, seed)
    Xte, yte = million_data(10_000, seed + 1)
    print(json.dumps(fit_and_score(X, y, Xte, yte, seed)), flush=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("case", choices=["co2_weekly", "million", "million-child"])
    ap.add_argument("--seeds", type=int, nargs="+", default=[0])
    args = ap.parse_args()
    {"co2_weekly": case_co2_weekly, "million": case_million, "million-child": million_child}[
        args.case
    ](args)


if __name__ == "__main__":
    main()
