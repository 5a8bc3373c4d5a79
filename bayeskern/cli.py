"""The ``bayeskern`` command line: demo, fit, predict, report, datasets.

User errors (bad files, missing columns, invalid options) print one line,
``bayeskern: error: ...``, and exit with status 2, without a traceback. Every output file is
written to a temporary name and renamed, so an interrupted command leaves no partial output.

This module imports only the standard library at import time; each command imports JAX,
NumPyro, pandas and the rest when it runs, so ``--help`` and ``--version`` are instant.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from bayeskern._version import __version__
from bayeskern.cli_demo import cmd_demo
from bayeskern.cli_io import (
    _WRITERS,
    MAX_INTEGER_CLASSES,
    MODELS,
    TASKS,
    UserError,
    _feature_columns,
    _features,
    _fit_logged,
    _output_format,
    _read_table,
    _resolve_task_option,
    _task,
)

__all__ = ["main"]

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


def _redeliver_interrupt(unraisable) -> bool:
    """Raise again, in the main thread, an interrupt that Python could only print.

    A signal handler runs wherever the main thread next checks for signals, which may be a
    garbage-collector callback (JAX registers one) or a finalizer: there an exception cannot
    propagate, Python prints "Exception ignored in ..." and the fit goes on. Such an
    interrupt is signalled to the main thread again from another thread a moment later
    (``_thread.interrupt_main``; raised from this hook it would be swallowed again), and
    again if that lands in a callback too. Returns whether ``unraisable`` was one.
    """
    import _thread
    import signal
    import threading

    if not (unraisable.exc_type and issubclass(unraisable.exc_type, KeyboardInterrupt)):
        return False
    signum = signal.SIGTERM if issubclass(unraisable.exc_type, _Terminated) else signal.SIGINT
    timer = threading.Timer(0.01, _thread.interrupt_main, args=(signum,))
    timer.daemon = True
    timer.start()
    return True


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
    ``BAYESKERN_DEBUG`` is set), 130 on SIGINT and 143 on SIGTERM (no partial output), also
    when the signal lands in a garbage-collector callback (:func:`_redeliver_interrupt`).
    Sets :data:`CLI_XLA_FLAGS` for its process first (:func:`configure_xla`).
    """
    import signal

    configure_xla()
    args = build_parser().parse_args(argv)
    try:
        previous = signal.signal(signal.SIGTERM, _on_sigterm)
    except ValueError:  # not the main thread: signals are not ours to handle
        previous = _Terminated
    hook = sys.unraisablehook
    if previous is not _Terminated:
        sys.unraisablehook = lambda u: _redeliver_interrupt(u) or hook(u)
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
        sys.unraisablehook = hook
        if previous is not _Terminated:
            signal.signal(signal.SIGTERM, previous if previous is not None else signal.SIG_DFL)


if __name__ == "__main__":  # pragma: no cover
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    sys.exit(main())
