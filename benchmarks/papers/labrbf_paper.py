"""LAB-RBF (He et al. 2023) reproduction: Tables 1-2 (airfoil, parkinsons) and Appendix E.

Protocol (He et al. 2023, section 4.1): random 80/20 train/test splits, features and labels
scaled to [-1, 1] with the training ranges (the LAB-RBF kernel does this itself), R² on the
test set. Every seed is reported. Baseline: RBF kernel ridge regression with (gamma, lambda)
tuned on a 20 % hold-out of the training rows (the same grid for every split). LAB-RBF: the
estimator's f1 (the paper's predictor, eq. 8) and the mean and calibration of its Bayesian last
layer.

Usage::

    .venv/bin/python benchmarks/papers/labrbf_paper.py                 # everything (about 30 min)
    .venv/bin/python benchmarks/papers/labrbf_paper.py --part real --seeds 0 1 2 3 4
    .venv/bin/python benchmarks/papers/labrbf_paper.py --quick         # 2 seeds, short training

Results: ``benchmarks/results/labrbf.md`` (+ ``labrbf_<part>.json`` and ``labrbf_sin.png``).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from pathlib import Path

import numpy as np
from sklearn.kernel_ridge import KernelRidge
from sklearn.model_selection import GridSearchCV, ShuffleSplit, train_test_split
from threadpoolctl import threadpool_limits

import bayeskern  # noqa: F401
from bayeskern import diagnostics
from bayeskern.datasets import load_dataset
from bayeskern.estimators.labrbf import LABRBFRegressor

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: common.py
from common import RESULTS, machine, minmax, r2  # noqa: E402

#: paper numbers (He et al. 2023: Table 1 mean ± sd over 50 splits; Table 2 support points)
PAPER = {
    "airfoil": {
        "rbf_krr": "0.8634 ± 0.0248",
        "labrbf": "0.9608 ± 0.0079",
        "n_sv": 200,
        "target": 0.95,
    },
    "parkinsons": {
        "rbf_krr": "0.8919 ± 0.0091",
        "labrbf": "0.9950 ± 0.0009",
        "n_sv": 110,
        "target": 0.99,
    },
}
#: LAB-RBF support budget per data set (issue targets: <= 200 and <= 350)
MAX_SUPPORT = {"airfoil": 200, "parkinsons": 150}
#: the paper's algorithm: no bandwidth floor, one model (the estimator's defaults since issue
#: 14 differ: benchmarks/defaults/defaults_kernel_learners.py); these settings reproduce labrbf.md
PAPER_KW = {"min_bandwidth": 0.0}


def rbf_krr(Xtr, ytr, Xte, yte, seed):
    """RBF KRR, (gamma, alpha) tuned on a 20 % hold-out of the training rows."""
    Xtr_s, Xte_s = minmax(Xtr, Xte)
    ytr_s, yte_s = minmax(ytr[:, None], yte[:, None])
    ytr_s, yte_s = ytr_s[:, 0], yte_s[:, 0]
    grid = {"gamma": 2.0 ** np.arange(-3, 8), "alpha": [1e-5, 1e-4, 1e-3, 1e-2, 1e-1]}
    cv = ShuffleSplit(n_splits=1, test_size=0.2, random_state=seed)
    t = time.perf_counter()
    search = GridSearchCV(KernelRidge(kernel="rbf"), grid, cv=cv, scoring="r2").fit(Xtr_s, ytr_s)
    t_search = time.perf_counter() - t
    t = time.perf_counter()
    model = KernelRidge(kernel="rbf", **search.best_params_).fit(Xtr_s, ytr_s)
    t_fit = time.perf_counter() - t
    t = time.perf_counter()
    f = model.predict(Xte_s)
    t_pred = time.perf_counter() - t
    return {
        "r2": r2(yte_s, f),
        "gamma": search.best_params_["gamma"],
        "alpha": search.best_params_["alpha"],
        "tune_s": t_search,
        "fit_s": t_fit,
        "predict_s": t_pred,
    }


def labrbf(Xtr, ytr, Xte, yte, seed, quick, **kw):
    """Fit LABRBFRegressor; test R² of f1 / f2, calibration of the Bayesian last layer."""
    est = LABRBFRegressor(
        random_state=seed,
        progress_bar=False,
        **({"n_iter_round": 100, "n_iter_final": 500} if quick else {}),
        **kw,
    )
    t, c = time.perf_counter(), time.process_time()
    est.fit(Xtr, ytr)
    t_fit, c_fit = time.perf_counter() - t, time.process_time() - c
    t = time.perf_counter()
    f1 = est.predict_krr(Xte)
    t_pred = time.perf_counter() - t
    m = diagnostics.regression_metrics(yte, est.predictive(Xte))
    return {
        "r2_f1": r2(yte, f1),
        "r2_f2": r2(yte, est.predict_krr(Xte, "f2")),
        "r2_bayes": m["r2"],
        "coverage_90": m["coverage_90"],
        "coverage_95": m["coverage_95"],
        "nlpd": m["nlpd"],
        "n_support": est.n_support_,
        "theta0": est.theta0_,
        "fit_s": t_fit,
        "fit_cpu_s": c_fit,
        "predict_s": t_pred,
        "rhat": est.convergence_.max_rhat,
    }, est


def part_real(seeds, quick, datasets=("airfoil", "parkinsons")):
    rows = []
    for name in datasets:
        X, y = load_dataset(name)
        for seed in seeds:
            Xtr, Xte, ytr, yte = train_test_split(X, y, test_size=0.2, random_state=seed)
            # the paper's protocol: bandwidths trained on every training row
            paper, _ = labrbf(
                Xtr,
                ytr,
                Xte,
                yte,
                seed,
                quick,
                max_support=MAX_SUPPORT[name],
                calibration_fraction=0.0,
                n_estimators=1,
                kernel_params=PAPER_KW,
            )
            # the default estimator: 10 % of the rows calibrate the Bayesian last layer
            bayes, _ = labrbf(
                Xtr,
                ytr,
                Xte,
                yte,
                seed,
                quick,
                max_support=MAX_SUPPORT[name],
                n_estimators=1,
                kernel_params=PAPER_KW,
            )
            base = rbf_krr(Xtr, ytr, Xte, yte, seed)
            row = {
                "data": name,
                "seed": seed,
                **paper,
                **{f"cal_{k}": v for k, v in bayes.items()},
                **{f"krr_{k}": v for k, v in base.items()},
            }
            rows.append(row)
            print(
                json.dumps(
                    {k: (round(v, 4) if isinstance(v, float) else v) for k, v in row.items()}
                ),
                flush=True,
            )
    return rows


# ----------------------------------------------------------------------------- Appendix E
def cherkassky(name, n, rng):
    """He et al. (2023), Appendix E: test functions (Cherkassky et al. 1996) and the Fig. 1 toy."""
    if name == "f1":
        X = rng.uniform(-2, 2, (n, 2))
        f = (1 + np.sin(2 * X[:, 0] + 3 * X[:, 1])) / (3.5 + np.sin(X[:, 0] - X[:, 1]))
    elif name == "f2":
        X = rng.uniform(-1, 1, (n, 6))
        f = (
            10 * np.sin(np.pi * X[:, 0] * X[:, 1])
            + 20 * (X[:, 2] - 0.5) ** 2
            + 5 * X[:, 3]
            + 10 * X[:, 4]
        )
    elif name == "f3":
        X = rng.uniform(-0.25, 0.25, (n, 4))
        f = np.exp(2 * np.pi * X[:, 0] * np.sin(X[:, 3]) + np.sin(X[:, 1] * X[:, 2]))
    elif name == "sin":
        X = rng.uniform(0, 2.5, (n, 1))
        f = np.sin(2 * X[:, 0] ** 3)
    else:
        raise ValueError(name)
    return X, f


def part_synthetic(seeds, quick):
    """200 training / 800 test points, noise variance = n x target variance (Appendix E)."""
    rows = []
    for name, noise in (("sin", 0.4), ("f1", 0.1), ("f2", 0.1), ("f3", 0.1)):
        for seed in seeds:
            rng = np.random.default_rng(seed)
            X, f = cherkassky(name, 1000, rng)
            y = f + np.sqrt(noise * np.var(f)) * rng.standard_normal(len(f))
            Xtr, ytr, Xte, fte = X[:200], y[:200], X[200:], f[200:]
            # RSSE = 1 - R² against the noise-free target on the 800 test points
            res, est = labrbf(
                Xtr,
                ytr,
                Xte,
                fte,
                seed,
                quick,
                max_support=100,
                kernel_params=dict(PAPER_KW, n_init_support=60),
                calibration_fraction=0.0,
                n_estimators=1,
            )
            base = rbf_krr(Xtr, ytr, Xte, fte, seed)
            rows.append(
                {
                    "data": name,
                    "seed": seed,
                    "rsse_labrbf": 1 - res["r2_f1"],
                    "rsse_krr": 1 - base["r2"],
                    "fit_s": res["fit_s"],
                }
            )
            print(json.dumps(rows[-1]), flush=True)
            if name == "sin" and seed == seeds[0]:
                import matplotlib

                matplotlib.use("Agg")
                from bayeskern.plots.labrbf import plot_bandwidths

                ax, _ = plot_bandwidths(est, Xtr, ytr)
                ax.set_title("LAB-RBF on y = sin(2x^3) + noise: learned bandwidths")
                ax.figure.tight_layout()
                ax.figure.savefig(RESULTS / "labrbf_sin.png", dpi=120)
    return rows


# ----------------------------------------------------------------------------- report
def fmt(v, d=4):
    return f"{v:.{d}f}"


def write_markdown(command):
    out = [
        "# LAB-RBF (He et al. 2023) reproduction",
        "",
        f"Machine: {machine()} (shared with other jobs while measured; CPU seconds "
        f"are the process time of all threads). Python {platform.python_version()}. "
        f"Command: `{command}`",
        "",
    ]
    real = RESULTS / "labrbf_real.json"
    if real.exists():
        rows = json.loads(real.read_text())
        out += [
            "## Real data (He et al. 2023, Tables 1-2): test R², 80/20 splits",
            "",
            "Two LAB-RBF fits per split. 'paper protocol' (`calibration_fraction=0`): the "
            "bandwidths are trained on every training row, R² of f1 (the paper's predictor, "
            "eq. 8) and of f2 (eq. 6, test bandwidth from the nearest support point). "
            "'default estimator' (`calibration_fraction=0.1`): 10 % of the training rows "
            "are held out from the bandwidth training to fit the Bayesian last layer; R² "
            "of its predictive mean, coverage of its central 90 % / 95 % intervals, NLPD "
            "on the test rows. RBF KRR: (gamma, lambda) tuned on a 20 % hold-out of the "
            "training rows, inputs and labels scaled to [-1, 1].",
            "",
            "| data | seed | f1 R² | f2 R² | #SV | fit s (CPU s) | predict s | default: "
            "mean R² | cov 90 | cov 95 | NLPD | fit s | RBF KRR R² | KRR gamma, lambda | "
            "KRR tune + fit s | KRR predict s |",
            "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
        ]
        for r in rows:
            out.append(
                f"| {r['data']} | {r['seed']} | {fmt(r['r2_f1'])} | {fmt(r['r2_f2'])} | "
                f"{r['n_support']} | {r['fit_s']:.1f} ({r['fit_cpu_s']:.1f}) | "
                f"{r['predict_s']:.3f} | {fmt(r['cal_r2_bayes'])} | "
                f"{fmt(r['cal_coverage_90'], 3)} | {fmt(r['cal_coverage_95'], 3)} | "
                f"{fmt(r['cal_nlpd'], 3)} | {r['cal_fit_s']:.1f} | "
                f"{fmt(r['krr_r2'])} | {r['krr_gamma']:g}, {r['krr_alpha']:g} | "
                f"{r['krr_tune_s'] + r['krr_fit_s']:.1f} | {r['krr_predict_s']:.3f} |"
            )
        out += [
            "",
            "| data | LAB-RBF f1 R² (mean ± sd) | paper LAB-RBF (#SV) | RBF KRR R² | "
            "paper RBF KRR | target (all seeds) | met | default cov 90 (mean) | fit s median |",
            "|---|---|---|---|---|---|---|---|---|",
        ]
        for name in PAPER:
            rs = [r for r in rows if r["data"] == name]
            if not rs:
                continue
            a = np.array([r["r2_f1"] for r in rs])
            b = np.array([r["krr_r2"] for r in rs])
            cov = np.mean([r["cal_coverage_90"] for r in rs])
            ok = np.all(a >= PAPER[name]["target"])
            out.append(
                f"| {name} | {a.mean():.4f} ± {a.std(ddof=1) if len(a) > 1 else 0:.4f} "
                f"(min {a.min():.4f}, {rs[0]['n_support']} SV) | {PAPER[name]['labrbf']} "
                f"({PAPER[name]['n_sv']}) | {b.mean():.4f} ± "
                f"{b.std(ddof=1) if len(b) > 1 else 0:.4f} | {PAPER[name]['rbf_krr']} | "
                f"≥ {PAPER[name]['target']} | {'yes' if ok else 'no'} | {cov:.3f} | "
                f"{np.median([r['fit_s'] for r in rs]):.1f} |"
            )
        out.append("")
    syn = RESULTS / "labrbf_synthetic.json"
    if syn.exists():
        rows = json.loads(syn.read_text())
        out += [
            "## Appendix E synthetic functions: test RSSE = 1 − R² (lower is better)",
            "",
            "200 training / 800 test points, noise variance 0.4 (sin) or 0.1 (f1-f3) × "
            "target variance, RSSE against the noise-free target; LAB-RBF with 100 support "
            "points (50 %, inside the 30-70 % range the paper recommends). The paper shows "
            "these only as curves (Figs. 4-5), no table to compare with.",
            "",
            "| function | seed | LAB-RBF f1 | RBF KRR (tuned) | LAB-RBF fit s |",
            "|---|---|---|---|---|",
        ]
        for r in rows:
            out.append(
                f"| {r['data']} | {r['seed']} | {fmt(r['rsse_labrbf'])} | "
                f"{fmt(r['rsse_krr'])} | {r['fit_s']:.1f} |"
            )
        out += [
            "",
            "**Missed.** On these small noisy problems LAB-RBF (default settings) is far "
            "worse than a tuned RBF KRR, unlike the paper's Figs. 4-5. With 100 support "
            "points and lambda = 1e-3, f1 nearly interpolates the noisy support labels, the "
            "bandwidths are fitted to only 100 other noisy rows, and the dynamic strategy "
            "adds the worst-fit rows, i.e. the noisiest ones, to the support. Measured on "
            "the worst splits (RSSE, default -> variant): f1 seed 3: `alpha='auto'` 1.26 -> "
            "1.26; + early stopping on 20 % validation rows 0.87; + no dynamic growth "
            "(`n_init_support=max_support`) 0.47; sin seed 3: `alpha='auto'` 0.94, + early "
            "stopping 0.19, + no growth 0.36 (RBF KRR: 0.05 and 0.06). The real data sets "
            "(low noise, thousands of rows) do not show the problem.",
            "",
            "![learned bandwidths on sin(2x^3)](labrbf_sin.png)",
            "",
        ]
    (RESULTS / "labrbf.md").write_text("\n".join(out) + "\n")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--part", choices=["real", "synthetic", "all"], default="all")
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4])
    ap.add_argument("--data", nargs="+", default=["airfoil", "parkinsons"])
    ap.add_argument("--quick", action="store_true", help="2 seeds, short training")
    args = ap.parse_args(argv)
    seeds = args.seeds[:2] if args.quick else args.seeds
    RESULTS.mkdir(parents=True, exist_ok=True)
    command = "python benchmarks/papers/labrbf_paper.py " + " ".join(argv or sys.argv[1:])
    # one BLAS thread: the m x m solves are small and multi-threaded OpenBLAS busy-waits
    with threadpool_limits(limits=1, user_api="blas"):
        if args.part in ("real", "all"):
            rows = part_real(seeds, args.quick, tuple(args.data))
            (RESULTS / "labrbf_real.json").write_text(json.dumps(rows, indent=1))
        if args.part in ("synthetic", "all"):
            rows = part_synthetic(seeds, args.quick)
            (RESULTS / "labrbf_synthetic.json").write_text(json.dumps(rows, indent=1))
    write_markdown(command.strip())
    print((RESULTS / "labrbf.md").read_text())


if __name__ == "__main__":
    os.environ.setdefault("TQDM_DISABLE", "1")
    main()
