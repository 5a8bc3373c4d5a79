"""``bayeskern demo``: GaBaSR against the reference GP on the embedded Mauna Loa CO2 data.

Fits :class:`~bayeskern.GaBaSRRegressor` with its defaults and a hand-built GP (linear trend,
smooth term, quasi-periodic yearly term) on the months before 1994, saves both runs, prints
their held-out scores for 1994-2001 and writes one comparison report.
"""

from __future__ import annotations

import time
from pathlib import Path

from bayeskern.cli_io import UserError, _progress_shown_if_interactive

__all__ = ["cmd_demo", "DEMO_RUNS"]

#: the demo's models: display name -> run directory under --out
DEMO_RUNS = {"GaBaSR": "gabasr_run", "reference GP": "gp_run"}


def _demo_estimators(args) -> dict:
    """Return the demo's estimators: GaBaSR with its defaults and the hand-built CO2 GP.

    ``--quick``: tiny sampler settings for both (a smoke run, not a converged fit), those of
    the quick mode of the CO2 notebooks, so that a test run compiles each sampler once.
    """
    import bayeskern as bk

    common = dict(random_state=args.seed, progress_bar=not args.quiet)  # bars: see _fit_logged
    quick = dict(num_warmup=10, num_samples=10, num_chains=2) if args.quick else {}
    kernel = (
        bk.kernels.Linear() + bk.kernels.RBF() + bk.kernels.RBF() * bk.kernels.Periodic(period=1.0)
    )
    return {
        "GaBaSR": bk.GaBaSRRegressor(
            **common, **quick, **(dict(num_map_starts=1) if args.quick else {})
        ),
        "reference GP": bk.GPRegressor(kernel=kernel, **common, **quick),
    }


def cmd_demo(args) -> int:
    """Fit GaBaSR and the reference CO2 GP, save both runs, write the comparison report."""
    import bayeskern as bk
    from bayeskern.report import compare_report, held_out_predictions
    from bayeskern.runs import check_run_destination, save_run

    out = Path(args.out)
    if out.exists() and not out.is_dir():
        raise UserError(f"--out {args.out!r} exists and is not a directory")
    runs = {name: out / run for name, run in DEMO_RUNS.items()}
    for run in runs.values():  # before the fits, not after them
        check_run_destination(run)
    Xtr, ytr, Xte, yte = bk.datasets.co2_split()
    if args.quick:  # every third month: the exact models cost O(n^3) per gradient
        Xtr, ytr = Xtr[::3], ytr[::3]
    print(
        "bayeskern demo: Mauna Loa CO2 (train < 1994"
        + (", every third month" if args.quick else "")
        + ", test 1994-2001), GaBaSR against the reference GP"
    )
    estimators, fit_times = _demo_estimators(args), {}
    for name, est in estimators.items():
        what = (
            f"kernel {est.kernel!r}"
            if hasattr(est, "kernel")
            else "spectral-mixture kernel learned from the data"
        )
        print(f"fitting {name}: {type(est).__name__}, {what}")
        t0 = time.perf_counter()
        with _progress_shown_if_interactive():
            est.fit(Xtr, ytr)
        fit_times[name] = time.perf_counter() - t0
    meta = {"data": "co2 (embedded)", "target": "co2 [ppm]"}
    held = held_out_predictions(estimators, Xte, yte)  # once: printed and reported
    for name, est in estimators.items():
        m = held[name].metrics
        print(
            f"{name}: held-out 1994-2001 RMSE {m['rmse']:.2f} ppm, 95 % coverage "
            f"{m['coverage_95']:.2f}, NLPD {m['nlpd']:.2f}; fit {fit_times[name]:.0f} s; "
            f"{est.convergence_.verdict}"
        )
        save_run(
            est,
            runs[name],
            extra_meta={**meta, "fit_time_s": fit_times[name]},
            extra_arrays={"holdout_X": Xte, "holdout_y": yte},
        )
    path = compare_report(
        estimators,
        out / "report.html",
        X_test=Xte,
        y_test=yte,
        fit_times=fit_times,
        title="bayeskern demo: Mauna Loa CO2, GaBaSR and the reference GP",
        data_name="co2 (embedded)",
        target_name="co2 [ppm]",
        x_unit="year",
        held_out=held,
    )
    print(
        "runs saved to " + ", ".join(str(r) for r in runs.values()) + f"; report written to {path}"
    )
    return 0
