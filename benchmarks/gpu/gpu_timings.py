"""Default fits on a GPU: which chain method, and what a GPU buys at each size.

Each case runs in its own child process (a fresh JAX, its own compile), with a wall-clock budget;
a case that does not finish in its budget is recorded as such, not dropped. Every fit uses the
estimator's default arguments except ``random_state=0``, ``progress_bar=False`` and, where the
case says so, ``chain_method``. One seed per case (the device time is short); held-out metrics
on data the fit did not see.

    python benchmarks/gpu/gpu_timings.py --out results.json [--budget 420] [--cases a b ...]
    python benchmarks/gpu/gpu_timings.py --render benchmarks/results/gpu_h200.json

``--render`` writes ``docs/results/gpu.md`` from the rows of one or more runs (the JSON written
by ``--out``, each row tagged with its ``run``), next to the 2-core CPU figures of the same cases
from the other results pages.

Cases (``NAME_CHAINMETHOD``):

* ``million``: 1-D synthetic, N = 10^6 (``approximation="auto"`` -> Hilbert-space basis), then
  ``predict(X, return_std=True)`` on 10^6 new rows.
* ``co2gp``: Mauna Loa CO2 monthly (425 training months), the demo kernel, exact GP.
* ``exact2000``: 1-D synthetic, N = 2000, ``approximation="exact"``.
* ``surface``: 2-D synthetic, N = 10^5 (Hilbert-space basis).
* ``gabasr``: ``GaBaSRRegressor()`` on CO2 (the exact spectral-mixture model).
* ``co2weekly``: weekly Mauna Loa CO2 (1 807 training weeks), the demo kernel,
  ``approximation="auto"`` (Hilbert-space basis).
* ``gabasrweekly``: ``GaBaSRRegressor()`` on weekly CO2 (``model="auto"``: the spectral
  mixture on a Hilbert-space basis).
* ``bcgibbs`` and ``eeg``: ``GaBaSRClassifier()`` (the Gibbs sampler) on breast_cancer (455
  training rows) and eeg_eye_state (11 984), stratified 80/20 split, seed 0; chain method
  ``auto`` is the estimator's default (``chain_method=None``).
* ``bcgp``: ``GPClassifier()`` on breast_cancer, the same split.
* ``iris`` and ``wine``: ``GPClassifier()`` with three classes (the multi-class embedded
  Laplace), stratified 70/30 split, seed 0; held-out log-loss and accuracy.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import time
from pathlib import Path

CASES = [
    "surface_vectorized",
    "co2weekly_vectorized",
    "gabasrweekly_vectorized",
    "million_sequential",
    "co2gp_vectorized",
    "co2gp_sequential",
    "gabasr_vectorized",
    "exact2000_vectorized",
    "million_vectorized",
]
#: classification cases (held-out AUC and Brier score in place of RMSE and coverage)
CLASSIFY = ("bcgibbs", "eeg", "bcgp")
#: three-class cases (held-out log-loss and accuracy)
MULTICLASS = ("iris", "wine")
#: the longest each case may run (s), compilation included
LIMITS = {
    "million": 90,
    "co2gp": 120,
    "exact2000": 120,
    "surface": 100,
    "gabasr": 200,
    "co2weekly": 270,
    "gabasrweekly": 200,
    "bcgibbs": 150,
    "eeg": 240,
    "bcgp": 150,
    "iris": 150,
    "wine": 150,
}


def synthetic_1d(n, seed):
    import numpy as np

    rng = np.random.default_rng(seed)
    X = rng.uniform(0, 10, size=(n, 1))
    return X, np.sin(2 * X[:, 0]) + 0.3 * np.sin(7 * X[:, 0]) + 0.2 * rng.normal(size=n)


def surface(n, seed):
    import numpy as np

    rng = np.random.default_rng(seed)
    X = rng.uniform(-2, 2, size=(n, 2))
    f = np.sin(3 * X[:, 0]) + np.cos(2 * X[:, 1]) + 0.5 * X[:, 0] * X[:, 1]
    return X, f + 0.1 * rng.normal(size=n)


def child(case: str, quick: bool = False) -> dict:
    """Fit one case; return its row (``quick``: a smoke run, 1/100 of the rows, 20 + 20 draws)."""
    import jax
    import numpy as np

    import bayeskern as bk

    name, method = case.split("_")
    K = bk.kernels
    common = dict(
        random_state=0, progress_bar=False, chain_method=None if method == "auto" else method
    )
    if quick:
        common.update(num_warmup=20, num_samples=20, num_chains=2)
    scale = 100 if quick else 1
    if name == "million":
        X, y = synthetic_1d(1_000_000 // scale, 0)
        Xt, yt = synthetic_1d(10_000, 1)
        est = bk.GPRegressor(**common)
    elif name == "exact2000":
        X, y = synthetic_1d(2000 // scale * 10, 0)
        Xt, yt = synthetic_1d(2000, 1)
        est = bk.GPRegressor(approximation="exact", **common)
    elif name == "surface":
        X, y = surface(100_000 // scale, 0)
        Xt, yt = surface(10_000, 1)
        est = bk.GPRegressor(**common)
    elif name == "co2gp":
        X, y, Xt, yt = bk.datasets.co2_split()
        kernel = K.Linear() + K.RBF() + K.RBF() * K.Periodic(period=1.0)
        est = bk.GPRegressor(kernel=kernel, **common)
    elif name == "gabasr":
        X, y, Xt, yt = bk.datasets.co2_split()
        est = bk.GaBaSRRegressor(**common, **(dict(num_map_starts=1) if quick else {}))
    elif name == "co2weekly":
        X, y, Xt, yt = bk.datasets.co2_split(weekly=True)
        X, y = X[::scale], y[::scale]
        kernel = K.Linear() + K.RBF() + K.RBF() * K.Periodic(period=1.0)
        est = bk.GPRegressor(kernel=kernel, **common)
    elif name == "gabasrweekly":
        X, y, Xt, yt = bk.datasets.co2_split(weekly=True)
        X, y = X[::scale], y[::scale]
        est = bk.GaBaSRRegressor(**common, **(dict(num_map_starts=1) if quick else {}))
    elif name in CLASSIFY:
        from sklearn.model_selection import train_test_split

        Xa, ya = bk.datasets.load_dataset("eeg_eye_state" if name == "eeg" else "breast_cancer")
        X, Xt, y, yt = train_test_split(Xa, ya, test_size=0.2, stratify=ya, random_state=0)
        if quick:
            X, y = X[::10], y[::10]
            common.pop("num_chains")
        est = (bk.GPClassifier if name == "bcgp" else bk.GaBaSRClassifier)(**common)
    elif name in MULTICLASS:
        from sklearn.datasets import load_iris, load_wine
        from sklearn.model_selection import train_test_split

        Xa, ya = (load_iris if name == "iris" else load_wine)(return_X_y=True)
        X, Xt, y, yt = train_test_split(Xa, ya, test_size=0.3, stratify=ya, random_state=0)
        est = bk.GPClassifier(**common)
    else:
        raise ValueError(f"unknown case {case!r}")
    t0 = time.perf_counter()
    est.fit(X, y)
    fit_s = time.perf_counter() - t0
    if name in CLASSIFY:
        from sklearn.metrics import brier_score_loss, roc_auc_score

        p = est.predict_proba(Xt)[:, 1]
        yb = (yt == est.classes_[1]).astype(int)
        scores = dict(auc=float(roc_auc_score(yb, p)), brier=float(brier_score_loss(yb, p)))
        scores["sampler"] = getattr(est, "sampler_", "nuts")
    elif name in MULTICLASS:
        from sklearn.metrics import accuracy_score, log_loss

        p = est.predict_proba(Xt)
        scores = dict(
            log_loss=float(log_loss(yt, p)), accuracy=float(accuracy_score(yt, p.argmax(1)))
        )
    else:
        mean, sd = est.predict(Xt, return_std=True)
        scores = dict(
            rmse=float(np.sqrt(np.mean((mean - yt) ** 2))),
            cov95=float(np.mean(np.abs(yt - mean) <= 1.96 * sd)),
        )
    row = dict(
        case=case,
        n=len(X),
        fit_s=round(fit_s, 2),
        **scores,
        converged=bool(est.convergence_.ok),
        verdict=est.convergence_.verdict[:160],
        device=str(jax.devices()[0].device_kind),
        backend=jax.default_backend(),
    )
    if name == "million":
        Xp, _ = synthetic_1d(1_000_000 // scale, 2)
        t0 = time.perf_counter()
        est.predict(Xp, return_std=True)
        row["predict_1e6_s"] = round(time.perf_counter() - t0, 2)
    return row


#: the same fits on the project's 2-core CPU machine (default arguments, default chain method
#: "parallel" on 4 virtual CPU devices), from the results pages named
CPU = {
    "million": ("21.6-26.1 s (3 seeds)", "hsgp_scale.md"),
    "co2gp": ("126 s (make demo, 2026-11-25)", "gabasr_speed.md"),
    "gabasr": ("144.6 s seed 0 (2026-11-28; 285 s on 2026-11-25)", "gabasr_speed.md"),
    "exact2000": ("about an hour (O(N^3) per gradient; not run)", "performance.md"),
    "surface": ("67-87 s (3 seeds)", "hsgp_scale.md"),
    "co2weekly": ("did not finish in 20 min (seed 0)", "hsgp_scale.md"),
    "gabasrweekly": ("176-244 s (3 seeds, each 3-4 divergences)", "gabasr_hsgp.md"),
    "bcgibbs": ("107-115 s (processes, 2026-11-27)", "gabasr.md"),
    "eeg": ("986 s (processes, 2026-11-27)", "gabasr.md"),
    "bcgp": ("131 s (processes, 2026-11-28; 277 s on 2026-11-27)", "gp_classifier_multiclass.md"),
    "iris": ("90.0 s seed 0 (processes, 2026-11-28)", "gp_classifier_multiclass.md"),
    "wine": ("107.6 s seed 0 (processes, 2026-11-28)", "gp_classifier_multiclass.md"),
}


def _misses(verdict: str) -> list[str]:
    """The failed criteria named in a convergence verdict, without the advice."""
    return re.findall(r"max R-hat [\d.]+|min ESS bulk \d+ / tail \d+|\d+ divergen\w+", verdict)


def _table(rows: list[dict], scores: tuple[tuple[str, str], ...]) -> list[str]:
    """Markdown table of ``rows`` with the held-out ``scores`` (key, header) as columns."""
    head = ["case", "N", "chains", "fit (s)", *(h for _, h in scores), "convergence"]
    out = [
        "| " + " | ".join(head + ["2-core CPU fit", "run"]) + " |",
        "|" + "---|" * (len(head) + 2),
    ]
    for r in rows:
        name, method = r["case"].split("_")
        cpu, page = CPU[name]
        if "fit_s" in r:
            verdict = r["verdict"].split(":")[0]
            cells = [
                str(r["n"]),
                method,
                f"{r['fit_s']:.1f}",
                *(f"{r[k]:.4f}" if k == "brier" else f"{r[k]:.3f}" for k, _ in scores),
                verdict + ("" if r["converged"] else " (" + ", ".join(_misses(r["verdict"])) + ")"),
            ]
        else:
            cells = ["", method, r["status"], *([""] * len(scores)), ""]
        out.append(
            f"| {name} | " + " | ".join(cells) + f" | {cpu} ([{page}]({page})) | "
            f"{r.get('run', '')} |"
        )
    return out


def render(paths: list[Path]) -> str:
    """The markdown results page of the rows in ``paths``."""
    rows = sorted(
        (r for p in paths for r in json.loads(Path(p).read_text())), key=lambda r: r["case"]
    )
    regress = [r for r in rows if r["case"].split("_")[0] not in CLASSIFY + MULTICLASS]
    multi = [r for r in rows if r["case"].split("_")[0] in MULTICLASS]
    classify = [r for r in rows if r["case"].split("_")[0] in CLASSIFY]
    out = [
        "# GPU: default fits on one NVIDIA H200",
        "",
        "Written by `benchmarks/gpu/gpu_timings.py --render "
        + " ".join(str(p) for p in paths)
        + "` from the rows its runs wrote. Each case ran in",
        "its own process (compilation included in the fit time), default arguments except",
        "`random_state=0`, `progress_bar=False` and the chain method named (`auto`: the",
        "estimator's default); one seed per case (device time was 15 minutes per session);",
        "held-out metrics on rows the fit did not see. Software there: JAX 0.11.2 with CUDA 13,",
        "NumPyro 0.22.0, float64. The 2-core CPU column is the same fit on the project's CPU",
        "machine, from the page named (another day, another machine: a ratio between the",
        "columns is indicative). The code changed between runs (the run column dates each row).",
        "",
        "## Regression",
        "",
        *_table(regress, (("rmse", "held-out RMSE"), ("cov95", "95 % coverage"))),
    ]
    if classify:
        out += [
            "",
            "## Classification",
            "",
            *_table(classify, (("auc", "held-out AUC"), ("brier", "Brier"))),
        ]
    if multi:
        out += [
            "",
            "## Three classes",
            "",
            *_table(multi, (("log_loss", "held-out log-loss"), ("accuracy", "accuracy"))),
        ]
    pred = [r for r in rows if "predict_1e6_s" in r]
    if pred:
        out += [
            "",
            "`predict(X, return_std=True)` on 10^6 new rows after the million-row fit: "
            + ", ".join(f"{r['predict_1e6_s']:.1f} s ({r['case'].split('_')[1]})" for r in pred)
            + ".",
        ]
    return "\n".join(out) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument(
        "--render",
        type=Path,
        nargs="+",
        default=None,
        help="write docs/results/gpu.md from these JSON files and exit",
    )
    ap.add_argument("--budget", type=float, default=420.0, help="seconds for all cases")
    ap.add_argument("--cases", nargs="+", default=CASES)
    ap.add_argument("--quick", action="store_true", help="smoke run (see child)")
    ap.add_argument("--child", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.render:
        page = Path(__file__).resolve().parents[2] / "docs" / "results" / "gpu.md"
        page.write_text(render(args.render))
        print(f"wrote {page}")
        return
    if args.out is None:
        ap.error("--out is required (or --render)")
    if args.child:
        print("ROW " + json.dumps(child(args.child, args.quick)), flush=True)
        return
    start, rows = time.perf_counter(), []
    stamp = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    for case in args.cases:
        limit = LIMITS[case.split("_")[0]]
        left = args.budget - (time.perf_counter() - start)
        if left < 30:
            rows.append(dict(case=case, status=f"not run: {left:.0f} s of the budget left"))
            args.out.write_text(json.dumps(rows, indent=1))
            continue
        t0 = time.perf_counter()
        try:
            p = subprocess.run(
                [
                    sys.executable,
                    __file__,
                    "--out",
                    "-",
                    "--child",
                    case,
                    *(["--quick"] if args.quick else []),
                ],
                capture_output=True,
                text=True,
                timeout=min(limit, left),
            )
            found = [ln[4:] for ln in p.stdout.splitlines() if ln.startswith("ROW ")]
            row = (
                json.loads(found[0])
                if found
                else dict(case=case, status=f"failed (rc {p.returncode}): {p.stderr[-800:]}")
            )
        except subprocess.TimeoutExpired:
            row = dict(case=case, status=f"did not finish in {min(limit, left):.0f} s")
        row["wall_s"] = round(time.perf_counter() - t0, 1)
        row["run"] = stamp
        rows.append(row)
        print(json.dumps(row), flush=True)
        args.out.write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
