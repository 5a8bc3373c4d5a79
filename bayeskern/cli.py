"""The ``bayeskern`` command line: demo, fit, predict, report, datasets.

User errors (bad files, missing columns, invalid options) print one line,
``bayeskern: error: ...``, and exit with status 2, without a traceback. Every output file is
written to a temporary name and renamed, so an interrupted command leaves no partial output.

This module imports only the standard library at import time; each command imports JAX,
NumPyro, pandas and the rest when it runs, so ``--help`` and ``--version`` are instant.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import time
from pathlib import Path

from bayeskern._version import __version__

__all__ = ["main"]

TASKS = ("auto", "regression", "binary", "multiclass")
#: the deprecated --model values and the --task each stands for
MODELS = {"auto": "auto", "gp-regression": "regression", "gp-classification": "binary"}
#: --task auto: an integer-valued target with 3..MAX_INTEGER_CLASSES distinct values, each in at
#: least two rows, is multiclass; with more values (or a value seen once) it is a regression
MAX_INTEGER_CLASSES = 10
#: --task auto: a text/boolean/categorical target with more distinct labels than this (or than
#: half the rows) is refused: such a column is an identifier or free text, not classes
MAX_LABEL_CLASSES = 50
#: --method: the Bayesian estimator used for (regression, classification); None = not offered
METHODS = {
    "gp": ("GPRegressor", "GPClassifier"),
    "vsk": ("GPRegressor", "GPClassifier"),  # GP with a VSK kernel
    "ckrbf": ("GPRegressor", "GPClassifier"),  # GP with a CkRBF kernel
    "conformal": (None, "GPClassifier"),  # GP with Xiong's conformal kernel (needs labels)
    "gabasr": ("GaBaSRRegressor", "GaBaSRClassifier"),
    "labrbf": ("LABRBFRegressor", None),  # LAB-RBF with its Bayesian last layer
}

#: classifiers of two classes only, and why
BINARY_ONLY = {
    "vsk": "the VSK kernel's naive-Bayes scaling",
    "gabasr": "GaBaSRClassifier's Pólya-Gamma likelihood",
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
        raise UserError(
            f"non-numeric feature columns in {path!r}: {bad} (leave them out with "
            "--drop or --id, or choose the features with --features)"
        )
    X = df[columns].to_numpy(dtype=float)
    if not np.all(np.isfinite(X)):
        rows = np.where(~np.all(np.isfinite(X), axis=1))[0][:5].tolist()
        raise UserError(f"{path!r} has missing or non-finite feature values (rows {rows} ...)")
    return X


def _names(option: str, text: str) -> list[str]:
    """Return the comma-separated column names given to ``option``, in order, once each."""
    names = list(dict.fromkeys(n.strip() for n in text.split(",") if n.strip()))
    if not names:
        raise UserError(f"{option} names no column")
    return names


def _feature_columns(args, columns) -> list[str]:
    """Return the feature columns of ``fit``: ``--features``, or all but ``--drop``/target/``--id``.

    Every named column must exist; the target and the ID column are never features.
    """
    where = f"is not in {args.data!r}; columns: {list(columns)[:20]}"
    if args.id is not None:
        if args.id not in columns:
            raise UserError(f"--id column {args.id!r} {where}")
        if args.id == args.target:
            raise UserError(f"--id names the target column {args.target!r}")
    option, named = "--drop", []
    if args.features is not None:
        option, named = "--features", _names("--features", args.features)
    elif args.drop is not None:
        named = _names("--drop", args.drop)
    missing = [c for c in named if c not in columns]
    if missing:
        raise UserError(f"{option}: column {missing[0]!r} {where}")
    for col, what in ((args.target, "the target column"), (args.id, "the --id column")):
        if col in named:
            raise UserError(f"{option} names {what} {col!r}, which is never a feature")
    if args.features is not None:
        return named
    feats = [c for c in columns if c not in (args.target, args.id, *named)]
    if not feats:
        raise UserError(
            f"{args.data!r} has no feature columns besides the target"
            + (" and those of --drop / --id" if named or args.id else "")
        )
    return feats


def _task(args, y) -> tuple[str, str | None]:
    """Return the task of ``fit`` and, for ``--task auto``, the reason it was chosen.

    ``auto``: a target with two distinct values is binary; text, boolean or categorical labels
    with more are multiclass (more than :data:`MAX_LABEL_CLASSES` labels, or than half the rows,
    is an error); numbers with a non-integer value are a regression; integers with at most
    :data:`MAX_INTEGER_CLASSES` distinct values, each in at least two rows, are multiclass, other
    integers a regression. An explicit task is checked against the target.
    """
    import numpy as np
    import pandas as pd

    col = f"target column {args.target!r}"
    counts = y.value_counts()
    counts = counts[counts > 0]  # a categorical column's unused categories are not values
    labels = counts.index.tolist()  # plain Python values, most frequent first
    k, numeric = (
        len(counts),
        (pd.api.types.is_numeric_dtype(y) and not pd.api.types.is_bool_dtype(y)),
    )
    task = args.task
    if task == "regression":
        if not numeric:
            raise UserError(
                f"--task regression needs a numeric target; {col} holds labels ({labels[0]!r}, ...)"
            )
        return task, None
    if k < 2:
        raise UserError(f"{col} has a single value, {labels[0]!r}: nothing to learn")
    if task == "binary" and k != 2:
        raise UserError(
            f"--task binary needs a target with 2 distinct values; {col} has {k} "
            "(use --task multiclass)"
        )
    if task == "multiclass" and k == 2:
        raise UserError(
            f"--task multiclass needs a target with 3 or more distinct values; "
            f"{col} has 2 (use --task binary)"
        )
    if task != "auto":
        return task, None
    if k == 2:
        hint = "; use --task regression to override" if numeric else ""
        return "binary", f"2 distinct values, {labels[0]!r} and {labels[1]!r}{hint}"
    if not numeric:
        if k > MAX_LABEL_CLASSES or k > len(y) / 2:
            raise UserError(
                f"{col} holds {k} distinct labels in {len(y)} rows (more than "
                f"{MAX_LABEL_CLASSES}, or than half the rows): an identifier or free "
                "text rather than classes; choose another --target, or set "
                "--task multiclass to fit them anyway"
            )
        return "multiclass", f"{y.dtype} labels with {k} distinct values"
    values = y.to_numpy(dtype=float)
    if not np.array_equal(values, np.round(values)):
        return "regression", "numeric target with non-integer values"
    what = f"integer target with {k} distinct values"
    if k <= MAX_INTEGER_CLASSES and counts.min() >= 2:
        return "multiclass", (f"{what}, each in at least 2 rows; use --task regression to override")
    why = (
        f"more than {MAX_INTEGER_CLASSES}"
        if k > MAX_INTEGER_CLASSES
        else f"{labels[-1]!r} occurs once"
    )
    return "regression", f"{what} ({why}); use --task multiclass to override"


def _resolve_task_option(args) -> None:
    """Map the deprecated ``--model`` onto ``--task`` (with a warning on stderr)."""
    if args.model is None:
        return
    task = MODELS[args.model]
    if args.task not in ("auto", task):
        raise UserError(
            f"--model {args.model} (deprecated) contradicts --task {args.task}; give --task only"
        )
    print(f"bayeskern: warning: --model is deprecated; use --task {task}", file=sys.stderr)
    args.task = task


def _interactive() -> bool:
    """Whether stdout and stderr are both terminals (else progress bars would litter a log)."""
    return sys.stdout.isatty() and sys.stderr.isatty()


@contextlib.contextmanager
def _progress_bars_off():
    """Silence tqdm's progress bars while NumPyro still steps its sampler from Python.

    With ``progress_bar=True`` NumPyro runs each sampler step from Python, so Ctrl-C and SIGTERM
    land mid-fit (its bar-less loop is one compiled program that only returns at the end); the
    bars are disabled, so a log file gets no carriage returns or terminal escape codes.
    """
    from tqdm import std

    original = std.tqdm.__dict__["__init__"]

    def init(self, *a, **kw):
        kw["disable"] = True
        original.__get__(self, type(self))(*a, **kw)

    std.tqdm.__init__ = init
    try:
        yield
    finally:
        std.tqdm.__init__ = original


def _progress_shown_if_interactive():
    """Progress bars on a terminal, none in a log (see :func:`_interactive`)."""
    return contextlib.nullcontext() if _interactive() else _progress_bars_off()


def _fit_logged(est, X, y, args) -> None:
    """``est.fit(X, y)`` with a plain line before and after (unless ``--quiet``).

    Progress bars are shown only on a terminal (see :func:`_interactive`).
    """
    if not args.quiet:
        p = est.get_params()
        chains = p.get("num_chains", 1)
        draws = (
            f"({p['num_warmup']} warm-up + {p['num_samples']} draws)"
            if "num_warmup" in p
            else f"{p.get('num_samples')} exact draws"
        )
        print(
            f"fitting {type(est).__name__} to {len(y)} rows x {X.shape[1]} features: {chains} "
            f"chain{'s' if chains != 1 else ''} x {draws}",
            flush=True,
        )
    t0 = time.perf_counter()
    with _progress_shown_if_interactive():
        est.fit(X, y)
    if not args.quiet:
        print(f"done in {time.perf_counter() - t0:.0f} s", flush=True)


def cmd_fit(args) -> int:
    import numpy as np
    import pandas as pd

    from bayeskern.runs import check_run_destination

    if args.features is not None and args.drop is not None:
        raise UserError(
            "--features and --drop cannot be used together (--features names the "
            "columns to use, --drop those to leave out)"
        )
    _resolve_task_option(args)
    check_run_destination(args.out)  # before the fit, not after it
    df = _read_table(args.data)
    if args.target not in df.columns:
        raise UserError(
            f"--target column {args.target!r} is not in {args.data!r}; columns: "
            f"{list(df.columns)[:20]}"
        )
    y = df[args.target]
    if y.isna().any():
        raise UserError(f"target column {args.target!r} has {int(y.isna().sum())} missing values")
    feats = _feature_columns(args, list(df.columns))
    X = _features(df, feats, args.data)
    task, why = _task(args, y)
    if why is not None and not args.quiet:
        print(f"task: {task} ({why})")
    est = _make_estimator(args, task != "regression", task=task)
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
    _fit_logged(est, pd.DataFrame(X, columns=[str(c) for c in feats]), y, args)
    from bayeskern.runs import save_run

    meta = {"data": str(args.data), "target": args.target, "task": task}
    if args.id is not None:
        meta["id_column"] = args.id
    save_run(est, args.out, extra_meta=meta, extra_arrays=holdout)
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
            f"expected a whole number or 'auto', got {text!r}"
        ) from None


def _make_estimator(args, classification: bool, *, task: str | None = None):
    """Return the estimator of ``--method`` for the task (see :data:`METHODS`).

    Binary and multiclass targets both go to the method's classifier.
    """
    import bayeskern as bk

    task = task or ("classification" if classification else "regression")
    if task == "multiclass" and args.method in BINARY_ONLY:
        raise UserError(
            f"--method {args.method} classifies two classes only "
            f"({BINARY_ONLY[args.method]}), but the task is multiclass (see --task): "
            "use --method gp, ckrbf or conformal"
        )
    name = METHODS[args.method][int(classification)]
    if name is None:
        other = "regression" if classification else "classification"
        raise UserError(
            f"--method {args.method} does {other} only, but the task is {task} (see --task)"
        )
    sampler = dict(num_chains=args.num_chains, progress_bar=not args.quiet, random_state=args.seed)
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
    import itertools

    import pandas as pd

    from bayeskern.runs import atomic_write, load_run, predict_table, run_metadata

    out_fmt = _output_format(args.out)
    if args.interval is not None and not 0 < args.interval < 1:
        raise UserError(f"--interval must be in (0, 1), got {args.interval}")
    if args.draws < 0:
        raise UserError(f"--draws must be >= 0, got {args.draws}")
    if args.batch_size < 1:
        raise UserError(f"--batch-size must be >= 1, got {args.batch_size}")
    est = load_run(args.run)
    feats = [str(c) for c in getattr(est, "feature_names_in_", [])]
    if not feats:
        feats = [f"x{j}" for j in range(est.n_features_in_)]
    # read once, streaming: the first batch is parsed (and checked) before anything is written
    chunks = _read_table(args.data, chunksize=args.batch_size)
    first = next(chunks)
    id_col = args.id if args.id is not None else run_metadata(args.run).get("id_column")
    if args.id is not None and args.id not in first.columns:
        raise UserError(
            f"--id column {args.id!r} is not in {args.data!r}; columns: {list(first.columns)[:20]}"
        )
    if id_col not in first.columns:  # the run's ID column, absent here: rows are not labelled
        id_col = None

    def table(i, chunk):
        out = predict_table(
            est,
            pd.DataFrame(_features(chunk, feats, args.data), columns=feats),
            interval=args.interval or 0.9,
            draws=args.draws,
            random_state=args.seed,
            row_offset=i * args.batch_size,
            class_intervals=args.interval is not None,
        )
        if id_col is not None:
            out.insert(0, id_col, chunk[id_col].to_numpy())
        return out

    frames = itertools.starmap(table, enumerate(itertools.chain([first], chunks)))
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
    report(
        est,
        out,
        X_test=arrays.get("holdout_X"),
        y_test=arrays.get("holdout_y"),
        data_name=state.get("data"),
        target_name=state.get("target"),
    )
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


class _HelpFormatter(argparse.ArgumentDefaultsHelpFormatter):
    """Show each option's default, except where there is none to show (``None``, a flag)."""

    def _get_help_string(self, action):
        if action.default is None or isinstance(action.default, bool):
            return action.help
        return super()._get_help_string(action)


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(
        prog="bayeskern",
        formatter_class=_HelpFormatter,
        description="Bayesian kernel learning: fit, predict with "
        "intervals, and report on saved runs.",
    )
    ap.add_argument("--version", action="version", version=f"bayeskern {__version__}")
    sub = ap.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def command(name, fn, help):
        p = sub.add_parser(
            name,
            help=help,
            description=help[0].upper() + help[1:] + ".",
            formatter_class=_HelpFormatter,
        )
        p.set_defaults(fn=fn)
        return p

    def seed(p, what):
        p.add_argument("--seed", type=int, default=0, help=f"random seed of {what}")

    def quiet(p):
        p.add_argument("--quiet", action="store_true", help="print nothing but errors")

    p = command(
        "demo",
        cmd_demo,
        "fit GaBaSR and a reference GP to the embedded CO2 data and "
        "write an HTML report comparing them",
    )
    p.add_argument("--out", default="bayeskern-demo", help="output directory")
    seed(p, "the samplers")
    p.add_argument(
        "--quick",
        action="store_true",
        help="smoke test: tiny sampler settings, every third training month",
    )
    quiet(p)

    p = command("fit", cmd_fit, "fit a model to a CSV/Parquet file and save the run")
    p.add_argument("data", help="CSV or Parquet file with a header row")
    p.add_argument("--target", required=True, help="name of the target column")
    p.add_argument("--out", required=True, help="run directory to write")
    p.add_argument(
        "--features",
        metavar="A,B,...",
        help="use only these columns as features (default: all but the target, --id and --drop)",
    )
    p.add_argument("--drop", metavar="C,D,...", help="use all columns but these (and the target)")
    p.add_argument(
        "--id",
        metavar="COLUMN",
        help="row-ID column: not a feature; recorded in the "
        "run, and 'predict' copies it into its output",
    )
    p.add_argument(
        "--task",
        choices=TASKS,
        default="auto",
        help="auto: binary for 2 distinct values; multiclass for text, boolean or "
        f"categorical labels, or for integers with at most {MAX_INTEGER_CLASSES} "
        "distinct values each in 2+ rows; else regression (the choice and its reason "
        "are printed)",
    )
    p.add_argument(
        "--model",
        choices=list(MODELS),
        help="deprecated alias of --task: gp-regression = regression, gp-classification = binary",
    )
    p.add_argument(
        "--method",
        choices=list(METHODS),
        default="gp",
        help="gp: Bayesian GP with --kernel; vsk / ckrbf / conformal: Bayesian GP with "
        "that data-dependent kernel (vsk and conformal wrap --kernel; conformal: "
        "classification only); gabasr: spectral-mixture kernel learning (NUTS); "
        "labrbf: LAB-RBF with a Bayesian last layer (regression only)",
    )
    p.add_argument(
        "--kernel",
        default="rbf",
        help="kernel name, e.g. rbf, 'linear+rbf*periodic'; base kernels: rbf, "
        "laplacian, matern32, matern52, rq (rational_quadratic), linear, periodic, "
        "mahalanobis; + adds, * multiplies",
    )
    p.add_argument("--n-clusters", type=int, default=2, help="cells of --method ckrbf")
    p.add_argument(
        "--num-warmup",
        type=_count,
        default=None,
        help="NUTS warm-up iterations per chain (default: the estimator's)",
    )
    p.add_argument(
        "--num-samples",
        type=_count,
        default=None,
        help="draws per chain, or 'auto' (default: the estimator's; GP and "
        "GaBaSR regression draw blocks until converged)",
    )
    p.add_argument("--num-chains", type=int, default=4, help="MCMC chains")
    p.add_argument(
        "--holdout",
        type=float,
        default=0.0,
        help="fraction of rows kept out for the report's calibration metrics",
    )
    seed(p, "the sampler and of --holdout")
    quiet(p)

    p = command("predict", cmd_predict, "posterior-predictive mean, sd and intervals for new rows")
    p.add_argument("run", help="run directory written by 'bayeskern fit'")
    p.add_argument("data", help="CSV or Parquet file with the feature columns")
    p.add_argument(
        "--out",
        required=True,
        help="file to write: .csv, .parquet or .nc (netCDF); the format follows the extension",
    )
    p.add_argument(
        "--interval",
        type=float,
        default=None,
        help="probability of the central interval (default: 0.9 for a regression's "
        "lower_/upper_ columns; classifiers: given, it adds p_<class>_lower/upper)",
    )
    p.add_argument(
        "--id",
        metavar="COLUMN",
        help="ID column copied first into the output "
        "(default: the run's --id, when the file has it)",
    )
    p.add_argument("--draws", type=int, default=0, help="also write this many predictive draws")
    p.add_argument("--batch-size", type=int, default=50_000, help="rows per streamed batch")
    seed(p, "the draws")
    quiet(p)

    p = command("report", cmd_report, "self-contained HTML uncertainty report of a saved run")
    p.add_argument("run", help="run directory")
    p.add_argument("--out", default=None, help="HTML file (default: RUN/report.html)")
    p.add_argument(
        "--pdf",
        action="store_true",
        help="also print the report to PDF next to the HTML (needs Chromium)",
    )
    quiet(p)

    command("datasets", cmd_datasets, "list the offline datasets")
    return ap


class _Terminated(KeyboardInterrupt):
    """SIGTERM, turned into an exception so that it unwinds like Ctrl-C.

    Temporary files are removed, nothing partial is left.
    """


def _on_sigterm(signum, frame):
    raise _Terminated


#: XLA option of the command's own process: XLA:CPU's older fusion emitters, which compile
#: faster and, for these models, run faster too (the same draws); see :func:`configure_xla`
CLI_XLA_FLAGS = "--xla_cpu_use_fusion_emitters=false"


def configure_xla() -> None:
    """Add :data:`CLI_XLA_FLAGS` to ``XLA_FLAGS`` unless the environment already chooses it.

    The command owns its process, so it may choose how XLA compiles (a library imported into
    a user's session does not: :mod:`bayeskern` leaves ``XLA_FLAGS`` alone). Effective only
    before JAX starts its backend, which the command does after parsing its arguments.
    """
    flags = os.environ.get("XLA_FLAGS", "")
    if "xla_cpu_use_fusion_emitters" not in flags:
        os.environ["XLA_FLAGS"] = f"{flags} {CLI_XLA_FLAGS}".strip()


def main(argv=None) -> int:
    """Entry point of the ``bayeskern`` command.

    Exit status: 0 on success, 2 on a user error (one line on stderr, no traceback unless
    ``BAYESKERN_DEBUG`` is set), 130 on SIGINT and 143 on SIGTERM (no partial output). Sets
    :data:`CLI_XLA_FLAGS` for its process first (:func:`configure_xla`).
    """
    import signal

    configure_xla()
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
