"""Hilbert-space GP (``GPRegressor(approximation="auto"|"hsgp")``) against exact, and at scale.

Every fit uses the estimator's DEFAULT arguments (only ``random_state`` and
``progress_bar=False`` are set; defaults are the product). Cases, each runnable alone:

* ``accuracy``: basis vs exact at N = 1 000 on (a) the last 1 000 weekly CO2 training weeks
  (< 1994) with the demo kernel, tested on the 418 weeks >= 1994, and (b) a 2-D smooth
  surface with RBF(): mean |mean_hsgp - mean_exact| / sd_exact, NLPD, 95 % coverage, fit times.
* ``co2``: all 1 807 weekly training weeks, demo kernel, ``approximation="auto"``.
* ``million``: 1-D synthetic, N = 10^6, ``GPRegressor()``; fit and ``predict(X, return_std=True)``
  on 10^6 rows in a child process (its own peak RSS).
* ``surface``: 2-D synthetic, N = 10^5, ``GPRegressor()``.
* ``classify``: 2-D synthetic classification, N = 20 000, ``GPClassifier()``; ``classify-exact``:
  its reference, the exact ``GPClassifier()`` on 1 000 of the rows (seeds kept across runs);
  ``classify-table`` rewrites the classify table from the recorded runs (no fit).

    .venv/bin/python benchmarks/scale/hsgp_scale.py accuracy|co2|million|surface|all [--seeds 0 1 2]
    .venv/bin/python benchmarks/scale/hsgp_scale.py all --seeds 0 --quick   # smoke test, temp dir

Writes the case's section of ``docs/results/hsgp_scale.md`` and its key of
``docs/results/hsgp_scale.json``; ``--quick`` (tiny N, 20 + 20 draws, one chain) writes to a
temporary directory instead.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: common.py
from common import DOCS_RESULTS, ROOT, loadavg, machine, md_table, write_section, write_text  # noqa: E402

import bayeskern as bk  # noqa: E402

K = bk.kernels
SCRIPT = Path(__file__).resolve().relative_to(ROOT)
HEADER = f"""# Hilbert-space GP: accuracy against exact, and scale

Written by `{SCRIPT}` (one section per case; rerun the command in a section to
reproduce it). Every fit uses `GPRegressor`'s default arguments (4 chains, 200 warm-up
iterations, then blocks of 100 draws per chain until converged (`num_samples="auto"`),
`approximation="auto"`; the accuracy case sets `approximation` explicitly; the
classification cases use `GPClassifier`'s defaults: 200 warm-up iterations or sweeps, then
blocks of draws until converged (500 draws per chain before 2026-11-29: the runs of the
`classify-exact` reference are of that default)), with
only `random_state` (= seed) and `progress_bar=False` set. Every seed run is listed. Load is
`/proc/loadavg` (1, 5, 15 min) before → after the fit; peak RSS is `getrusage` of the
process that fitted.
"""
QUICK = dict(num_warmup=20, num_samples=20, num_chains=1)
SIZES = {
    False: dict(
        acc=1000,
        co2=None,
        million=1_000_000,
        million_pred=1_000_000,
        surface=100_000,
        classify=20_000,
        classify_exact=1_000,
        test=10_000,
    ),
    True: dict(
        acc=150,
        co2=1100,
        million=20_000,
        million_pred=20_000,
        surface=5_000,
        classify=2_000,
        classify_exact=150,
        test=500,
    ),
}


def demo_kernel():
    return K.Linear() + K.RBF() + K.RBF() * K.Periodic(period=1.0)


def surface_data(n, seed):
    rng = np.random.default_rng(seed)
    X = rng.uniform(-2, 2, size=(n, 2))
    f = np.sin(3 * X[:, 0]) + np.cos(2 * X[:, 1]) + 0.5 * X[:, 0] * X[:, 1]
    return X, f + 0.1 * rng.normal(size=n)


def classify_data(n, seed):
    """2-D synthetic classification: y ~ Bernoulli(sigmoid(2 f(x))), f of :func:`surface_data`."""
    rng = np.random.default_rng(seed)
    X = rng.uniform(-2, 2, size=(n, 2))
    f = np.sin(3 * X[:, 0]) + np.cos(2 * X[:, 1]) + 0.5 * X[:, 0] * X[:, 1]
    return X, (rng.uniform(size=n) < 1 / (1 + np.exp(-2 * f))).astype(int)


def million_data(n, seed):
    rng = np.random.default_rng(seed)
    X = rng.uniform(0, 10, size=(n, 1))
    return X, np.sin(2 * X[:, 0]) + 0.3 * np.sin(7 * X[:, 0]) + 0.2 * rng.normal(size=n)


def rss_gb():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e6  # KiB on Linux


def fit(est, X, y):
    """Fit, timed; returns the record of the fit (convergence, basis, load, warnings)."""
    load0 = loadavg()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        t = time.perf_counter()
        est.fit(X, y)
        fit_s = time.perf_counter() - t
    c = est.convergence_
    num = lambda v, d: None if not np.isfinite(v) else round(float(v), d)  # noqa: E731 (JSON)
    return dict(
        fit_s=round(fit_s, 2),
        n=len(X),
        approximation=getattr(est, "approximation_", "exact"),
        n_basis=getattr(est, "n_basis_", None),
        converged=bool(c.ok),
        max_rhat=num(c.max_rhat, 3),
        min_ess_bulk=num(c.min_ess_bulk, 1),
        min_ess_tail=num(c.min_ess_tail, 1),
        divergences=int(c.n_divergent),
        load_before=load0,
        load_after=loadavg(),
        peak_rss_gb=round(rss_gb(), 2),
        warnings=[str(w.message)[:300] for w in caught],
    )


def metrics(y, pred):
    m = bk.diagnostics.regression_metrics(y, pred)
    return {k: round(m[k], 4) for k in ("rmse", "coverage_95", "nlpd")}


def new(args, kernel=None, **kw):
    return bk.GPRegressor(kernel, progress_bar=False, **(QUICK if args.quick else {}), **kw)


def conv(r):
    return (
        f"{'yes' if r['converged'] else 'NO'} ({r['max_rhat']} / {r['min_ess_bulk']}"
        f" / {r['divergences']})"
    )


def basis(r):
    return (
        "exact"
        if r["approximation"] == "exact"
        else "hsgp " + ", ".join(f"{k}: {v}" for k, v in (r["n_basis"] or {}).items())
    )


def load(r):
    return f"{r['load_before']} → {r['load_after']}"


# ----------------------------------------------------------------------------- cases
def case_accuracy(args):
    n = SIZES[args.quick]["acc"]
    Xtr, ytr, Xte_c, yte_c = bk.datasets.co2_split(weekly=True)
    problems = {  # name: (data of a seed, kernel factory)
        "co2 (1-D, demo kernel)": (lambda s: (Xtr[-n:], ytr[-n:], Xte_c, yte_c), demo_kernel),
        "surface (2-D, RBF)": (lambda s: (*surface_data(n, s), *surface_data(500, s + 100)), K.RBF),
    }
    rows, raw = [], []
    for seed in args.seeds:
        for name, (make, kernel) in problems.items():
            X, y, Xte, yte = make(seed)
            rec = {"problem": name, "seed": seed}
            preds = {}
            for approx in ("exact", "hsgp"):
                est = new(args, kernel(), approximation=approx, random_state=seed)
                rec[approx] = fit(est, X, y)
                preds[approx] = est.predictive(Xte)
                rec[approx].update(metrics(yte, preds[approx]))
            rec["mean_diff_over_sd"] = round(
                float(
                    np.mean(
                        np.abs(preds["hsgp"].mean() - preds["exact"].mean()) / preds["exact"].std()
                    )
                ),
                4,
            )
            e, h = rec["exact"], rec["hsgp"]
            rows.append(
                [
                    name,
                    seed,
                    rec["mean_diff_over_sd"],
                    e["nlpd"],
                    h["nlpd"],
                    e["coverage_95"],
                    h["coverage_95"],
                    e["fit_s"],
                    h["fit_s"],
                    basis(h),
                    conv(e),
                    conv(h),
                    load(e),
                    load(h),
                ]
            )
            raw.append(rec)
            print(json.dumps(rec), flush=True)
    body = f"""## accuracy: basis against exact at N = {n}

CO2: the last {n} weekly training weeks (< 1994, contiguous, not thinned), kernel
`Linear() + RBF() + RBF() * Periodic(period=1.0)`, tested on the {len(yte_c)} weeks
1994-2001. Surface: f(x) = sin(3x₁) + cos(2x₂) + 0.5 x₁x₂ on [−2, 2]², noise sd 0.1, {n}
training and 500 test points drawn with the seed (test with seed + 100), kernel `RBF()`.
Both fits of a row run in the same process, exact first. |Δmean|/sd: mean over test points
of |mean_hsgp − mean_exact| / sd_exact (predictive sd). Targets: |Δmean|/sd ≤ 0.05, NLPD
and 95 % coverage within 0.02 of exact. Convergence: converged (max R-hat / min bulk ESS /
divergences).

{
        md_table(
            [
                "problem",
                "seed",
                "abs dmean/sd",
                "NLPD exact",
                "NLPD hsgp",
                "cov95 exact",
                "cov95 hsgp",
                "fit exact (s)",
                "fit hsgp (s)",
                "basis",
                "conv. exact",
                "conv. hsgp",
                "load exact",
                "load hsgp",
            ],
            rows,
        )
    }
"""
    return body, raw


def case_co2(args):
    Xtr, ytr, Xte, yte = bk.datasets.co2_split(weekly=True)
    if SIZES[args.quick]["co2"]:
        Xtr, ytr = Xtr[-SIZES[args.quick]["co2"] :], ytr[-SIZES[args.quick]["co2"] :]
    rows, raw = [], []
    for seed in args.seeds:
        est = new(args, demo_kernel(), random_state=seed)
        rec = {"seed": seed, **fit(est, Xtr, ytr)}
        rec.update(metrics(yte, est.predictive(Xte)))
        rows.append(
            [
                seed,
                rec["fit_s"],
                basis(rec),
                conv(rec),
                rec["rmse"],
                rec["coverage_95"],
                rec["nlpd"],
                rec["peak_rss_gb"],
                len(rec["warnings"]),
                load(rec),
            ]
        )
        raw.append(rec)
        print(json.dumps(rec), flush=True)
    body = f"""## co2: weekly Mauna Loa CO2, {len(Xtr)} training weeks

`GPRegressor(Linear() + RBF() + RBF() * Periodic(period=1.0))`, `approximation="auto"`
(what ran: column "basis"), trained on the weeks before 1994, tested on the {len(yte)} weeks
1994-2001. Target: fit ≤ 60 s, converged (max R-hat / min bulk ESS / divergences).

{
        md_table(
            [
                "seed",
                "fit (s)",
                "basis",
                "converged",
                "RMSE (ppm)",
                "cov95",
                "NLPD",
                "peak RSS (GB)",
                "warnings",
                "load",
            ],
            rows,
        )
    }
"""
    return body, raw


def million_child(args):
    """One seed of ``million`` (run in its own process): fit, held-out metrics, predict time."""
    sz, seed = SIZES[args.quick], args.seeds[0]
    X, y = million_data(sz["million"], seed)
    est = new(args, random_state=seed)
    rec = {"seed": seed, **fit(est, X, y)}
    rec["peak_rss_fit_gb"] = round(rss_gb(), 2)
    Xte, yte = million_data(sz["test"], seed + 1)
    rec.update(metrics(yte, est.predictive(Xte)))
    Xp = million_data(sz["million_pred"], seed + 2)[0]
    rec.update(predict_rows=len(Xp))
    t = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        est.predict(Xp, return_std=True)
    rec.update(predict_s=round(time.perf_counter() - t, 2), peak_rss_gb=round(rss_gb(), 2))
    print("RESULT " + json.dumps(rec), flush=True)


def case_million(args):
    sz, rows, raw = SIZES[args.quick], [], []
    for seed in args.seeds:
        cmd = [sys.executable, __file__, "million-child", "--seeds", str(seed)] + (
            ["--quick"] if args.quick else []
        )
        out = subprocess.run(cmd, capture_output=True, text=True)
        res = [ln for ln in out.stdout.splitlines() if ln.startswith("RESULT ")]
        if out.returncode or not res:
            rec = {"seed": seed, "error": f"rc {out.returncode}: {out.stderr[-2000:]}"}
            rows.append([seed] + ["failed"] + [""] * 8)
        else:
            rec = json.loads(res[-1][7:])
            rows.append(
                [
                    seed,
                    rec["fit_s"],
                    basis(rec),
                    conv(rec),
                    rec["peak_rss_fit_gb"],
                    rec["rmse"],
                    rec["coverage_95"],
                    rec["predict_s"],
                    rec["peak_rss_gb"],
                    load(rec),
                ]
            )
        raw.append(rec)
        print(json.dumps(rec), flush=True)
    body = f"""## million: 1-D synthetic, N = {sz["million"]:,}

x ~ U(0, 10), y = sin(2x) + 0.3 sin(7x) + 0.2 ε (seeded); `GPRegressor()` defaults. Each
seed runs in its own child process (peak RSS is its own; it includes the data). Held-out:
{sz["test"]:,} new points (noise sd 0.2 is the RMSE floor). Predict: `predict(X,
return_std=True)` on {sz["million_pred"]:,} new rows, one call.
Targets: fit ≤ 30 s, converged, peak RSS of the fit ≤ 2 GB, predict ≤ 60 s.

{
        md_table(
            [
                "seed",
                "fit (s)",
                "basis",
                "converged",
                "peak RSS fit (GB)",
                "RMSE",
                "cov95",
                "predict (s)",
                "peak RSS (GB)",
                "load",
            ],
            rows,
        )
    }
"""
    return body, raw


def case_surface(args):
    sz, rows, raw = SIZES[args.quick], [], []
    for seed in args.seeds:
        X, y = surface_data(sz["surface"], seed)
        est = new(args, random_state=seed)
        rec = {"seed": seed, **fit(est, X, y)}
        Xte, yte = surface_data(sz["test"], seed + 1)
        rec.update(metrics(yte, est.predictive(Xte)))
        rows.append(
            [
                seed,
                rec["fit_s"],
                basis(rec),
                conv(rec),
                rec["rmse"],
                rec["coverage_95"],
                rec["nlpd"],
                rec["peak_rss_gb"],
                load(rec),
            ]
        )
        raw.append(rec)
        print(json.dumps(rec), flush=True)
    body = f"""## surface: 2-D synthetic, N = {sz["surface"]:,}

f(x) = sin(3x₁) + cos(2x₂) + 0.5 x₁x₂ on [−2, 2]², noise sd 0.1 (the RMSE floor), seeded;
`GPRegressor()` defaults; {sz["test"]:,} held-out points. Target: fit ≤ 60 s, converged.

{
        md_table(
            [
                "seed",
                "fit (s)",
                "basis",
                "converged",
                "RMSE",
                "cov95",
                "NLPD",
                "peak RSS (GB)",
                "load",
            ],
            rows,
        )
    }
"""
    return body, raw


def classify_metrics(est, Xte, yte):
    from sklearn.metrics import brier_score_loss, log_loss, roc_auc_score

    p = est.predict_proba(Xte)[:, 1]
    return dict(
        brier=round(float(brier_score_loss(yte, p)), 4),
        auc=round(float(roc_auc_score(yte, p)), 4),
        log_loss=round(float(log_loss(yte, p)), 4),
    )


def classify_fits(args, n, **params):
    """``GPClassifier(**params)`` on the first ``n`` rows of each seed's training set, held-out
    metrics."""
    sz, raw = SIZES[args.quick], []
    for seed in args.seeds:
        X, y = classify_data(sz["classify"], seed)
        Xte, yte = classify_data(sz["test"], seed + 1)
        est = bk.GPClassifier(
            progress_bar=False, random_state=seed, **params, **(QUICK if args.quick else {})
        )
        rec = {"seed": seed, **fit(est, X[:n], y[:n]), **classify_metrics(est, Xte, yte)}
        if "weights" in est.idata_.posterior:  # the basis weights, not in the verdict
            import arviz as az

            w = est.idata_.posterior[["weights"]]
            rec["weights_min_ess_bulk"] = round(float(az.ess(w)["weights"].min()), 1)
            rec["weights_max_rhat"] = round(float(az.rhat(w)["weights"].max()), 3)
        raw.append(rec)
        print(json.dumps(rec), flush=True)
    return raw


def case_classify_exact(args):
    """The reference fits; seeds run before (other commands) are kept, a seed run again replaced."""
    # "auto" would take the basis above 300 rows: the reference is the exact model
    raw = classify_fits(args, SIZES[args.quick]["classify_exact"], approximation="exact")
    js = (args.out_dir or DOCS_RESULTS) / "hsgp_scale.json"
    if js.exists():
        earlier = json.loads(js.read_text()).get("classify-exact", {}).get("runs", [])
        raw = sorted(
            [r for r in earlier if r["seed"] not in args.seeds] + raw, key=lambda r: r["seed"]
        )
    return classify_exact_section(args, raw), raw


def classify_exact_section(args, raw):
    return (
        '## classify-exact: the exact `GPClassifier(approximation="exact")` on '
        f"{SIZES[args.quick]['classify_exact']:,}"
        " rows of the classification case (its reference)\n\nEach seed's row is the record of"
        " the run that fitted it (seeds may come from separate commands).\n\n"
        + md_table(
            ["seed", "fit (s)", "converged", "Brier", "AUC", "log-loss", "load"],
            [
                [r["seed"], r["fit_s"], conv(r), r["brier"], r["auc"], r["log_loss"], load(r)]
                for r in raw
            ],
        )
        + "\n"
    )


def case_classify(args):
    return classify_section(args, classify_fits(args, SIZES[args.quick]["classify"]))


def classify_section(args, raw):
    """The classify section from its runs and the reference runs recorded in the JSON."""
    sz = SIZES[args.quick]
    js = (args.out_dir or DOCS_RESULTS) / "hsgp_scale.json"
    ref = {}
    if js.exists():
        ref = {
            r["seed"]: r
            for r in json.loads(js.read_text()).get("classify-exact", {}).get("runs", [])
        }
    rows = []
    for r in raw:
        e = ref.get(r["seed"], {})
        rows.append(
            [
                r["seed"],
                r["fit_s"],
                basis(r),
                conv(r),
                r["brier"],
                e.get("brier", "not run"),
                r["auc"],
                e.get("auc", "not run"),
                r["log_loss"],
                e.get("log_loss", "not run"),
                e.get("fit_s", "not run"),
                f"{r.get('weights_min_ess_bulk')} / {r.get('weights_max_rhat')}",
                load(r),
            ]
        )
    body = f"""## classify: `GPClassifier()` on a 2-D synthetic, N = {sz["classify"]:,}

y ~ Bernoulli(σ(2f(x))), f of the surface case, x uniform on [−2, 2]², seeded;
{sz["test"]:,} held-out points (seed + 1). Reference: the exact `GPClassifier()` fitted on the
first {sz["classify_exact"]:,} training rows of the same seed (case `classify-exact`, run
separately: its fits take long and would load the machine during the timed fit;
`approximation="exact"`, since `"auto"` takes the basis above 300 rows). Target:
converged, fit ≤ 180 s, held-out Brier and AUC at least as good as the reference's.
Convergence is judged on the hyper-parameters and the bias; the basis weights (the latent
function's coefficients, like the exact route's latent values) are listed apart: their
smallest bulk ESS and largest R-hat over the M weights.

{
        md_table(
            [
                "seed",
                "fit (s)",
                "basis",
                "converged",
                "Brier",
                "Brier exact 1k",
                "AUC",
                "AUC exact 1k",
                "log-loss",
                "log-loss exact 1k",
                "fit exact 1k (s)",
                "weights: min ESS / max R-hat",
                "load",
            ],
            rows,
        )
    }
"""
    return body, raw


CASES = {
    "accuracy": case_accuracy,
    "co2": case_co2,
    "million": case_million,
    "surface": case_surface,
    "classify-exact": case_classify_exact,
    "classify": case_classify,
}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("case", choices=[*CASES, "all", "million-child", "classify-table"])
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument(
        "--quick",
        action="store_true",
        help="tiny N, 20 + 20 draws, one chain; writes to a temporary directory",
    )
    ap.add_argument("--out-dir", type=Path, default=None)
    args = ap.parse_args()
    if args.case == "million-child":
        return million_child(args)
    if args.case == "classify-table":  # both tables again, from the recorded runs (no fit)
        out = args.out_dir or DOCS_RESULTS
        data = json.loads((out / "hsgp_scale.json").read_text())
        for case, section in (
            ("classify-exact", classify_exact_section),
            ("classify", lambda a, raw: classify_section(a, raw)[0]),
        ):
            rec = data[case]
            args.seeds = [r["seed"] for r in rec["runs"]]
            write_section(
                out / "hsgp_scale.md",
                case,
                f"{section(args, rec['runs'])}\nMachine: {rec['machine']}.\n\n"
                f"Reproduce: `{rec['command']}`",
                header=HEADER,
            )
        return None
    out = args.out_dir or (
        Path(tempfile.mkdtemp(prefix="hsgp_scale_")) if args.quick else DOCS_RESULTS
    )
    if args.case == "all":  # one process per case: each peak RSS is its case's own
        for case in CASES:
            subprocess.run(
                [
                    sys.executable,
                    __file__,
                    case,
                    "--seeds",
                    *map(str, args.seeds),
                    "--out-dir",
                    str(out),
                ]
                + (["--quick"] if args.quick else []),
                check=True,
            )
        return
    body, raw = CASES[args.case](args)
    cmd = f".venv/bin/python {SCRIPT} {args.case} --seeds {' '.join(map(str, args.seeds))}"
    write_section(
        out / "hsgp_scale.md",
        args.case,
        f"{body}\nMachine: {machine()}.\n\nReproduce: `{cmd}`"
        + (" (QUICK smoke run: not results)" if args.quick else ""),
        header=HEADER,
    )
    js = out / "hsgp_scale.json"
    data = json.loads(js.read_text()) if js.exists() else {}
    data[args.case] = {"command": cmd, "machine": machine(), "quick": args.quick, "runs": raw}
    write_text(js, json.dumps(data, indent=1))


if __name__ == "__main__":
    main()
