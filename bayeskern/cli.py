"""The ``bayeskern`` command line: demo, fit, predict, report, datasets.

User errors (bad files, missing columns, invalid options) print one line,
``bayeskern: error: ...``, and exit with status 2, without a traceback. Every output file is
written to a temporary name and renamed, so an interrupted command leaves no partial output.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

__all__ = ["main"]

MODELS = {"gp-regression": "GPRegressor", "gp-classification": "GPClassifier"}
#: --method: the Bayesian estimator used for (regression, classification); None = not offered
METHODS = {
    "gp": ("GPRegressor", "GPClassifier"),
    "vsk": ("GPRegressor", "GPClassifier"),  # GP with a VSK kernel
    "ckrbf": ("GPRegressor", "GPClassifier"),  # GP with a CkRBF kernel
    "conformal": (None, "GPClassifier"),  # GP with Xiong's conformal kernel (needs labels)
    "gabasr": ("GaBaSRRegressor", "GaBaSRClassifier"),
    "labrbf": ("LABRBFRegressor", None),  # LAB-RBF with its Bayesian last layer
}


class UserError(Exception):
    """An error in what the user asked for: reported in one line, exit status 2."""


def _read_table(path: str, *, chunksize: int | None = None):
    """Read the table in ``path`` (CSV, ``.tsv`` or Parquet) as a ``DataFrame``.

    With ``chunksize``, an iterator of ``DataFrame`` batches of at most that many rows, read
    once, streaming.

    Every problem (missing file, not a regular file, not UTF-8, unparsable, duplicate column
    names, no rows) is a :class:`UserError` naming the file, also when met in a later batch.
    """
    p = Path(path)
    if not p.exists():
        raise UserError(f"data file {path!r} does not exist")
    if not p.is_file():
        raise UserError(f"data file {path!r} is not a regular file")
    batches = _iter_table(p, path, chunksize)
    first = next(batches, None)
    if first is None or len(first) == 0:
        raise UserError(f"data file {path!r} has no rows")
    if chunksize is None:
        return first
    import itertools

    return itertools.chain([first], batches)


def _iter_table(p: Path, path: str, chunksize: int | None):
    import pandas as pd

    try:
        if p.suffix.lower() in (".parquet", ".pq"):
            if chunksize:
                import pyarrow.parquet as pq

                yield from (b.to_pandas() for b in pq.ParquetFile(p).iter_batches(chunksize))
            else:
                yield pd.read_parquet(p)
            return
        kw = dict(sep="\t" if p.suffix.lower() == ".tsv" else ",", encoding="utf-8-sig")
        _check_header(p, path, kw["sep"])
        if chunksize:
            yield from pd.read_csv(p, chunksize=chunksize, **kw)
        else:
            yield pd.read_csv(p, **kw)
    except UserError:
        raise
    except UnicodeDecodeError:
        raise UserError(f"data file {path!r} is not UTF-8 text") from None
    except ImportError as e:
        raise UserError(f"reading {path!r} needs an optional package: {e}") from None
    except Exception as e:  # pandas raises many parser error types
        msg = str(e).splitlines()[0] if str(e) else type(e).__name__
        raise UserError(f"cannot parse {path!r}: {msg}") from None


def _check_header(p: Path, path: str, sep: str) -> None:
    """Refuse duplicate column names (pandas would silently rename them ``x.1``)."""
    import collections
    import csv

    with open(p, encoding="utf-8-sig", newline="") as f:
        header = next(csv.reader(f, delimiter=sep), [])
    dup = sorted(c for c, n in collections.Counter(header).items() if n > 1)
    if dup:
        raise UserError(f"data file {path!r} has duplicate column names {dup[:10]}")


def _features(df, columns, path):
    import numpy as np
    import pandas as pd

    missing = [c for c in columns if c not in df.columns]
    if missing:
        raise UserError(f"{path!r} lacks the feature columns {missing} used in fitting")
    bad = [c for c in columns if not pd.api.types.is_numeric_dtype(df[c])]
    if bad:
        raise UserError(f"non-numeric feature columns in {path!r}: {bad}")
    X = df[columns].to_numpy(dtype=float)
    if not np.all(np.isfinite(X)):
        rows = np.where(~np.all(np.isfinite(X), axis=1))[0][:5].tolist()
        raise UserError(f"{path!r} has missing or non-finite feature values (rows {rows} ...)")
    return X


def cmd_fit(args) -> int:
    import numpy as np
    import pandas as pd

    from bayeskern.runs import check_run_destination

    check_run_destination(args.out)  # before the fit, not after it
    df = _read_table(args.data)
    if args.target not in df.columns:
        raise UserError(f"--target column {args.target!r} is not in {args.data!r}; columns: "
                        f"{list(df.columns)[:20]}")
    y = df[args.target]
    if y.isna().any():
        raise UserError(f"target column {args.target!r} has {int(y.isna().sum())} missing values")
    feats = [c for c in df.columns if c != args.target]
    if not feats:
        raise UserError(f"{args.data!r} has no feature columns besides the target")
    X = _features(df, feats, args.data)
    model = args.model
    if model == "auto":
        model = "gp-classification" if y.nunique() == 2 else "gp-regression"
    if model == "gp-regression" and not pd.api.types.is_numeric_dtype(y):
        raise UserError(f"target column {args.target!r} is not numeric; use --model "
                        "gp-classification for labels")
    est = _make_estimator(args, model == "gp-classification")
    y = y.to_numpy()
    holdout = {}
    if args.holdout:
        if not 0 < args.holdout < 0.9:
            raise UserError("--holdout must be a fraction in (0, 0.9)")
        rng = np.random.default_rng(args.seed)
        idx = rng.permutation(len(y))
        n_test = max(1, int(round(args.holdout * len(y))))
        test, train = idx[:n_test], idx[n_test:]
        holdout = {"holdout_X": X[test], "holdout_y": y[test]}
        X, y = X[train], y[train]
    est.fit(pd.DataFrame(X, columns=[str(c) for c in feats]), y)
    from bayeskern.runs import save_run

    save_run(est, args.out, extra_meta={"data": str(args.data), "target": args.target},
             extra_arrays=holdout)
    if not args.quiet:
        print(f"saved run to {args.out}: {est.convergence_.verdict}")
    return 0


def _count(text: str):
    """Parse a sampler count on the command line: a whole number or ``auto``."""
    if text == "auto":
        return text
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected a whole number or 'auto', got {text!r}") from None


def _make_estimator(args, classification: bool):
    """Return the estimator of ``--method`` for the task (see :data:`METHODS`)."""
    import bayeskern as bk

    task = "classification" if classification else "regression"
    name = METHODS[args.method][int(classification)]
    if name is None:
        other = "regression" if classification else "classification"
        raise UserError(f"--method {args.method} does {other} only, but the target needs "
                        f"{task} (set --model to choose the task)")
    sampler = dict(num_chains=args.num_chains, progress_bar=not args.quiet,
                   random_state=args.seed)
    if args.num_samples is not None:  # else the estimator's default
        sampler["num_samples"] = args.num_samples
    if args.method == "labrbf":  # exact conjugate draws: no warm-up
        return bk.LABRBFRegressor(**sampler)
    if args.num_warmup is not None:
        sampler["num_warmup"] = args.num_warmup
    if args.method == "gabasr":
        return getattr(bk, name)(**sampler)
    kernel = bk.kernels.get_kernel(args.kernel)
    if args.method == "vsk":
        kernel = bk.kernels.VSK(kernel, scaling="naive_bayes" if classification else "linear")
    elif args.method == "ckrbf":
        kernel = bk.kernels.CkRBF(n_clusters=args.n_clusters)
    elif args.method == "conformal":
        kernel = bk.kernels.Conformal(base_kernel=kernel)
    return getattr(bk, name)(kernel=kernel, **sampler)


def cmd_predict(args) -> int:
    import pandas as pd

    from bayeskern.runs import atomic_write, load_run, predict_table

    out_fmt = _output_format(args.out)
    est = load_run(args.run)
    if not 0 < args.interval < 1:
        raise UserError(f"--interval must be in (0, 1), got {args.interval}")
    if args.draws < 0:
        raise UserError(f"--draws must be >= 0, got {args.draws}")
    if args.batch_size < 1:
        raise UserError(f"--batch-size must be >= 1, got {args.batch_size}")
    feats = [str(c) for c in getattr(est, "feature_names_in_", [])]
    if not feats:
        feats = [f"x{j}" for j in range(est.n_features_in_)]
    # read once, streaming: the first batch is parsed (and checked) before anything is written
    chunks = _read_table(args.data, chunksize=args.batch_size)
    frames = (predict_table(est, pd.DataFrame(_features(c, feats, args.data), columns=feats),
                            interval=args.interval, draws=args.draws, random_state=args.seed,
                            row_offset=i * args.batch_size)
              for i, c in enumerate(chunks))
    atomic_write(args.out, lambda tmp: _WRITERS[out_fmt](tmp, frames), suffix=Path(args.out).suffix)
    if not args.quiet:
        print(f"wrote predictions to {args.out}")
    return 0


def _output_format(path: str) -> str:
    ext = Path(path).suffix.lower()
    fmt = {".csv": "csv", ".parquet": "parquet", ".pq": "parquet", ".nc": "netcdf"}.get(ext)
    if fmt is None:
        raise UserError(f"--out {path!r}: unknown extension {ext!r}; use .csv, .parquet or .nc")
    return fmt


def _write_csv(tmp, frames) -> None:
    for i, out in enumerate(frames):
        out.to_csv(tmp, mode="w" if i == 0 else "a", header=i == 0, index=False)


def _write_parquet(tmp, frames) -> None:
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError as e:  # pragma: no cover - pyarrow is a dependency of the test set
        raise UserError(f"writing Parquet needs pyarrow: {e}") from None
    writer = None
    try:
        for out in frames:
            table = pa.Table.from_pandas(out, preserve_index=False)
            if writer is None:
                writer = pq.ParquetWriter(tmp, table.schema)
            writer.write_table(table.cast(writer.schema))
    finally:
        if writer is not None:
            writer.close()


def _write_netcdf(tmp, frames) -> None:
    """Write one variable per column along an unlimited ``row`` dimension, appended per batch.

    Written with h5netcdf, a runtime dependency; readable by xarray and netCDF4.
    """
    import h5netcdf

    with h5netcdf.File(tmp, "w") as nc:
        nc.dimensions = {"row": None}
        start = 0
        for out in frames:
            stop = start + len(out)
            nc.resize_dimension("row", stop)
            for col in out.columns:
                v = out[col].to_numpy()
                text = v.dtype.kind in "OUS"
                if col not in nc.variables:
                    nc.create_variable(col, ("row",), dtype=str if text else v.dtype)
                nc.variables[col][start:stop] = v.astype(str) if text else v
            start = stop


_WRITERS = {"csv": _write_csv, "parquet": _write_parquet, "netcdf": _write_netcdf}


def cmd_report(args) -> int:
    from bayeskern.report import report
    from bayeskern.runs import load_run, read_run

    est = load_run(args.run)
    config, arrays, _ = read_run(args.run)
    out = args.out or str(Path(args.run) / "report.html")
    state = config.get("state", {})
    report(est, out, X_test=arrays.get("holdout_X"), y_test=arrays.get("holdout_y"),
           data_name=state.get("data"), target_name=state.get("target"))
    if not args.quiet:
        print(f"wrote report to {out}")
    if args.pdf:
        from bayeskern.report import export_pdf

        try:
            pdf = export_pdf(out, Path(out).with_suffix(".pdf"))
        except RuntimeError as e:
            raise UserError(str(e)) from None
        if not args.quiet:
            print(f"wrote PDF to {pdf}")
    return 0


def cmd_datasets(args) -> int:
    import bayeskern as bk

    for name in bk.datasets.list_datasets():
        d = bk.datasets.describe(name)
        used = "; ".join(d["used_by"]) if isinstance(d["used_by"], list) else d["used_by"]
        print(f"{name:20s} {d['task']:15s} {d['n_samples']:6d} x {d['n_features']:<3d} {used}")
    return 0


#: the demo's models: display name -> run directory under --out
DEMO_RUNS = {"GaBaSR": "gabasr_run", "reference GP": "gp_run"}


def _demo_estimators(args) -> dict:
    """Return the demo's estimators: GaBaSR with its defaults and the hand-built CO2 GP.

    ``--quick``: tiny sampler settings for both (a smoke run, not a converged fit).
    """
    import bayeskern as bk

    common = dict(random_state=args.seed, progress_bar=not args.quiet)
    quick = dict(num_warmup=20, num_samples=20, num_chains=2) if args.quick else {}
    kernel = bk.kernels.Linear() + bk.kernels.RBF() + bk.kernels.RBF() * bk.kernels.Periodic(
        period=1.0)
    return {"GaBaSR": bk.GaBaSRRegressor(**common, **quick,
                                         **(dict(num_map_starts=1) if args.quick else {})),
            "reference GP": bk.GPRegressor(kernel=kernel, **common, **quick)}


def cmd_demo(args) -> int:
    """Fit GaBaSR and the reference CO2 GP, save both runs, write the comparison report."""
    import time

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
    print("bayeskern demo: Mauna Loa CO2 (train < 1994, test 1994-2001), GaBaSR against the "
          "reference GP")
    estimators, fit_times = _demo_estimators(args), {}
    for name, est in estimators.items():
        what = (f"kernel {est.kernel!r}" if hasattr(est, "kernel")
                else "spectral-mixture kernel learned from the data")
        print(f"fitting {name}: {type(est).__name__}, {what}")
        t0 = time.perf_counter()
        est.fit(Xtr, ytr)
        fit_times[name] = time.perf_counter() - t0
    meta = {"data": "co2 (embedded)", "target": "co2 [ppm]"}
    held = held_out_predictions(estimators, Xte, yte)  # once: printed and reported
    for name, est in estimators.items():
        m = held[name].metrics
        print(f"{name}: held-out 1994-2001 RMSE {m['rmse']:.2f} ppm, 95 % coverage "
              f"{m['coverage_95']:.2f}, NLPD {m['nlpd']:.2f}; fit {fit_times[name]:.0f} s; "
              f"{est.convergence_.verdict}")
        save_run(est, runs[name], extra_meta={**meta, "fit_time_s": fit_times[name]},
                 extra_arrays={"holdout_X": Xte, "holdout_y": yte})
    path = compare_report(estimators, out / "report.html", X_test=Xte, y_test=yte,
                          fit_times=fit_times, title="bayeskern demo: Mauna Loa CO2, GaBaSR "
                          "and the reference GP", data_name="co2 (embedded)",
                          target_name="co2 [ppm]", x_unit="year", held_out=held)
    print("runs saved to " + ", ".join(str(r) for r in runs.values())
          + f"; report written to {path}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="bayeskern", description="Bayesian kernel learning: fit, "
                                 "predict with intervals, and report on saved runs.")
    sub = ap.add_subparsers(dest="command", required=True, metavar="COMMAND")

    p = sub.add_parser("demo", help="fit GaBaSR and a reference GP to the embedded CO2 data and "
                       "write an HTML report comparing them")
    p.add_argument("--out", default="bayeskern-demo", help="output directory")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--quick", action="store_true", help="tiny sampler settings (smoke test)")
    p.add_argument("--quiet", action="store_true")
    p.set_defaults(fn=cmd_demo)

    p = sub.add_parser("fit", help="fit a model to a CSV/Parquet file and save the run")
    p.add_argument("data", help="CSV or Parquet file with a header row")
    p.add_argument("--target", required=True, help="name of the target column")
    p.add_argument("--out", required=True, help="run directory to write")
    p.add_argument("--method", choices=list(METHODS), default="gp",
                   help="gp: Bayesian GP with --kernel; vsk / ckrbf / conformal: Bayesian GP with "
                   "that data-dependent kernel (vsk and conformal wrap --kernel); gabasr: "
                   "spectral-mixture kernel learning (NUTS); labrbf: LAB-RBF with a Bayesian "
                   "last layer (regression only)")
    p.add_argument("--model", choices=["auto", *MODELS], default="auto",
                   help="the task: auto (classification for a two-valued target), "
                   "gp-regression or gp-classification (any --method)")
    p.add_argument("--kernel", default="rbf",
                   help="kernel name, e.g. rbf, 'linear+rbf*periodic'; base kernels: rbf, "
                   "laplacian, matern32, matern52, rq (rational_quadratic), linear, periodic, "
                   "mahalanobis; + adds, * multiplies")
    p.add_argument("--n-clusters", type=int, default=2, help="cells of --method ckrbf")
    p.add_argument("--num-warmup", type=_count, default=None,
                   help="NUTS warm-up iterations per chain (default: the estimator's)")
    p.add_argument("--num-samples", type=_count, default=None,
                   help="draws per chain, or 'auto' (default: the estimator's; GP and "
                   "GaBaSR regression draw blocks until converged)")
    p.add_argument("--num-chains", type=int, default=4)
    p.add_argument("--holdout", type=float, default=0.0,
                   help="fraction of rows kept out for the report's calibration metrics")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--quiet", action="store_true")
    p.set_defaults(fn=cmd_fit)

    p = sub.add_parser("predict", help="posterior-predictive mean, sd and intervals for new rows")
    p.add_argument("run", help="run directory written by 'bayeskern fit'")
    p.add_argument("data", help="CSV or Parquet file with the feature columns")
    p.add_argument("--out", required=True, help="file to write: .csv, .parquet or .nc "
                   "(netCDF); the format follows the extension")
    p.add_argument("--interval", type=float, default=0.9)
    p.add_argument("--draws", type=int, default=0, help="also write this many predictive draws")
    p.add_argument("--batch-size", type=int, default=50_000, help="rows per streamed batch")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--quiet", action="store_true")
    p.set_defaults(fn=cmd_predict)

    p = sub.add_parser("report", help="self-contained HTML uncertainty report of a saved run")
    p.add_argument("run", help="run directory")
    p.add_argument("--out", default=None, help="HTML file (default RUN/report.html)")
    p.add_argument("--pdf", action="store_true",
                   help="also print the report to PDF next to the HTML (needs Chromium)")
    p.add_argument("--quiet", action="store_true")
    p.set_defaults(fn=cmd_report)

    p = sub.add_parser("datasets", help="list the offline datasets")
    p.set_defaults(fn=cmd_datasets)
    return ap


class _Terminated(KeyboardInterrupt):
    """SIGTERM, turned into an exception so that it unwinds like Ctrl-C.

    Temporary files are removed, nothing partial is left.
    """


def _on_sigterm(signum, frame):
    raise _Terminated


def main(argv=None) -> int:
    """Entry point of the ``bayeskern`` command.

    Exit status: 0 on success, 2 on a user error (one line on stderr, no traceback unless
    ``BAYESKERN_DEBUG`` is set), 130 on SIGINT and 143 on SIGTERM (no partial output).
    """
    import signal

    args = build_parser().parse_args(argv)
    try:
        previous = signal.signal(signal.SIGTERM, _on_sigterm)
    except ValueError:  # not the main thread: signals are not ours to handle
        previous = _Terminated
    try:
        return args.fn(args)
    except (UserError, ValueError, TypeError, OSError, FloatingPointError) as e:
        # RunError is a ValueError; OSError covers unreadable / unwritable paths
        if os.environ.get("BAYESKERN_DEBUG"):
            raise
        msg = str(e).splitlines()[0] if str(e) else type(e).__name__
        print(f"bayeskern: error: {msg}", file=sys.stderr)
        return 2
    except KeyboardInterrupt as e:
        what = "terminated" if isinstance(e, _Terminated) else "interrupted"
        print(f"bayeskern: {what}; no partial output was written", file=sys.stderr)
        return 143 if isinstance(e, _Terminated) else 130
    finally:
        if previous is not _Terminated:
            signal.signal(signal.SIGTERM, previous if previous is not None else signal.SIG_DFL)


if __name__ == "__main__":  # pragma: no cover
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    sys.exit(main())
