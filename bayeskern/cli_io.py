"""What the command line reads, writes and shows: tables, their columns, the task, progress.

The commands of :mod:`bayeskern.cli` read CSV or Parquet tables (in chunks where asked),
choose the feature columns (``--features``, ``--drop``, ``--id``) and the task (``--task
auto`` says what it chose and why), write their outputs as CSV, Parquet or netCDF (to a
temporary name, then renamed), and show progress bars only on a terminal. A
:class:`UserError` is a mistake of the user's, printed as one line without a traceback.
Standard library only at import time, as the command line itself.
"""

from __future__ import annotations

import contextlib
import sys
import time
from pathlib import Path

__all__ = ["UserError", "TASKS", "MODELS", "MAX_INTEGER_CLASSES", "MAX_LABEL_CLASSES"]

TASKS = ("auto", "regression", "binary", "multiclass")
#: the deprecated --model values and the --task each stands for
MODELS = {"auto": "auto", "gp-regression": "regression", "gp-classification": "binary"}
#: --task auto: an integer-valued target with 3..MAX_INTEGER_CLASSES distinct values, each in at
#: least two rows, is multiclass; with more values (or a value seen once) it is a regression
MAX_INTEGER_CLASSES = 10
#: --task auto: a text/boolean/categorical target with more distinct labels than this (or than
#: half the rows) is refused: such a column is an identifier or free text, not classes
MAX_LABEL_CLASSES = 50


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
