"""Saving and loading fitted runs without pickle, atomically, with a checksum manifest.

A run directory holds

* ``idata.nc`` — the ArviZ ``InferenceData`` (netCDF),
* ``config.json`` — estimator class and parameters (kernels as configurations), the fitted
  scalers, labels, feature names, package versions,
* ``arrays.npz`` — the remaining fitted arrays (data-dependent kernel state, held-out rows),
  read with ``allow_pickle=False``,
* ``manifest.json`` — SHA-256 of each of the files above.

Everything is written into a temporary sibling directory and renamed into place, so an
interrupted save leaves either the previous complete run or none. Loading verifies the
manifest and rebuilds only registered estimator and kernel classes: no pickle, no ``eval``.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import shutil
import tempfile
from pathlib import Path

import numpy as np

__all__ = [
    "save_run",
    "load_run",
    "atomic_write",
    "RunError",
    "ESTIMATORS",
    "register_estimator",
    "predict_table",
    "check_run_destination",
    "run_metadata",
    "RUN_METADATA",
]

FILES = ("idata.nc", "config.json", "arrays.npz")

#: Estimator classes that :func:`load_run` may rebuild, by class name.
ESTIMATORS: dict[str, type] = {}


class RunError(ValueError):
    """A run directory that does not exist, is incomplete, or fails its manifest."""


def register_estimator(cls):
    """Class decorator: allow :func:`load_run` to rebuild ``cls``."""
    ESTIMATORS[cls.__name__] = cls
    return cls


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _resolved(path) -> Path:
    """``path`` with its parent resolved (``..`` and symbolic links), its last component kept.

    Writing then renames onto exactly the named entry: a symbolic link at that name is replaced,
    never followed to wherever it points.
    """
    path = Path(path)
    return path.parent.resolve() / path.name


def _umask_mode(mode: int) -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mode & ~mask


def atomic_write(path, write_fn, *, suffix="") -> None:
    """Call ``write_fn(tmp_path)`` then rename the temporary file onto ``path``.

    The temporary file sits in the same directory (same file system), so the rename is
    atomic: readers see the old file or the new one, never a half-written one.
    """
    path = _resolved(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=suffix + ".tmp")
    os.close(fd)
    try:
        write_fn(Path(tmp))
        os.chmod(tmp, _umask_mode(0o666))
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _versions() -> dict:
    import arviz
    import jax
    import numpyro
    import sklearn

    from bayeskern._version import __version__

    return {
        "bayeskern": __version__,
        "jax": jax.__version__,
        "numpyro": numpyro.__version__,
        "arviz": arviz.__version__,
        "numpy": np.__version__,
        "scikit-learn": sklearn.__version__,
        "python": platform.python_version(),
    }


def _jsonable_params(est) -> dict:
    from bayeskern.kernels.base import Kernel

    out = {}
    for k, v in est.get_params(deep=False).items():
        if isinstance(v, Kernel):
            v = {"__kernel__": v.get_config()}
        elif isinstance(v, (np.integer, np.floating)):
            v = v.item()
        elif not (v is None or isinstance(v, (bool, int, float, str, list, dict))):
            raise TypeError(f"parameter {k}={v!r} cannot be saved without pickle")
        out[k] = v
    return out


def save_run(
    est, path, *, extra_meta: dict | None = None, extra_arrays: dict | None = None
) -> Path:
    """Save a fitted Bayesian estimator to the directory ``path`` (atomically)."""
    from bayeskern import diagnostics

    if not hasattr(est, "idata_"):
        raise ValueError("only fitted estimators can be saved (call fit first)")
    meta, arrays = est._save_state()
    meta.update(extra_meta or {})
    arrays.update(extra_arrays or {})
    config = {
        "estimator": type(est).__name__,
        "params": _jsonable_params(est),
        "state": meta,
        "versions": _versions(),
    }
    path = check_run_destination(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=path.parent, prefix=f".{path.name}.tmp-"))
    try:
        diagnostics.save_idata(est.idata_, tmp / "idata.nc")
        (tmp / "config.json").write_text(json.dumps(config, indent=2, default=_json_default))
        np.savez(tmp / "arrays.npz", **{k: _plain_array(k, v) for k, v in arrays.items()})
        manifest = {f: _sha256(tmp / f) for f in FILES}
        os.chmod(tmp, _umask_mode(0o777))
        (tmp / "manifest.json").write_text(json.dumps(manifest, indent=2))
        backup = None
        if path.exists():
            backup = path.with_name(f".{path.name}.old-{os.getpid()}")
            os.replace(path, backup)
        os.replace(tmp, path)
        if backup is not None:
            shutil.rmtree(backup, ignore_errors=True)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return path


def check_run_destination(path) -> Path:
    """Return the resolved run directory ``path`` if :func:`save_run` may write it.

    Raises ``RunError`` otherwise.

    A new path, an empty directory or an earlier run (it has ``manifest.json``) may be replaced;
    anything else (a file, a symbolic link, a directory with other content) is refused, so a
    mistyped ``--out`` never deletes user files.
    """
    path = _resolved(path)
    if path.is_symlink() or (
        path.exists()
        and not (path / "manifest.json").is_file()
        and (not path.is_dir() or any(path.iterdir()))
    ):
        raise RunError(
            f"run directory {str(path)!r}: the path exists and is not a run "
            "directory; refusing to replace it (choose a new --out)"
        )
    return path


def _plain_array(name, v) -> np.ndarray:
    """``v`` as an array that loads with ``allow_pickle=False`` (text labels become unicode)."""
    a = np.asarray(v)
    if a.dtype == object:
        if not all(isinstance(x, str) for x in a.ravel()):
            raise TypeError(
                f"cannot save {name!r} without pickle: an object array whose "
                "entries are not all strings"
            )
        a = a.astype(str)
    return a


def _json_default(o):
    if isinstance(o, np.ndarray):
        return o.tolist()
    if isinstance(o, (np.integer, np.floating, np.bool_)):
        return o.item()
    raise TypeError(f"cannot save {type(o).__name__} in config.json")


def _verified(path, files=FILES) -> Path:
    """``path`` as a ``Path``, once the run's files are there and ``files`` match the manifest."""
    path = Path(path)
    if not path.is_dir():
        raise RunError(f"run directory {str(path)!r} does not exist")
    missing = [f for f in FILES + ("manifest.json",) if not (path / f).is_file()]
    if missing:
        raise RunError(f"run directory {str(path)!r} is incomplete: missing {', '.join(missing)}")
    linked = [f for f in FILES + ("manifest.json",) if (path / f).is_symlink()]
    if linked:
        raise RunError(
            f"run directory {str(path)!r}: {', '.join(linked)} is a symbolic link; "
            "a run's files must be regular files inside it"
        )
    try:
        manifest = json.loads((path / "manifest.json").read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise RunError(f"run directory {str(path)!r}: manifest.json is unreadable ({e})") from None
    for f in files:
        if manifest.get(f) != _sha256(path / f):
            raise RunError(
                f"run directory {str(path)!r}: {f} does not match its checksum in "
                "manifest.json (modified or corrupted)"
            )
    return path


def read_run(path) -> tuple[dict, dict, object]:
    """Verify a run directory and return ``(config, arrays, idata)``."""
    from bayeskern import diagnostics

    path = _verified(path)
    try:
        config = json.loads((path / "config.json").read_text())
        with np.load(path / "arrays.npz", allow_pickle=False) as z:
            arrays = {k: z[k] for k in z.files}
    except ValueError as e:  # JSON errors; object (pickled) arrays refused by allow_pickle=False
        raise RunError(
            f"run directory {str(path)!r}: unreadable or unsafe content ({str(e).splitlines()[0]})"
        ) from None
    return config, arrays, diagnostics.load_idata(path / "idata.nc")


#: what ``bayeskern fit`` records about a run besides the estimator (:func:`run_metadata`)
RUN_METADATA = ("data", "target", "task", "id_column")


def run_metadata(path) -> dict:
    """Return what ``bayeskern fit`` recorded about the run in ``path``, without loading it.

    Returns
    -------
    dict
        The recorded entries among :data:`RUN_METADATA`: the data file, the target column, the
        task (``regression``, ``binary`` or ``multiclass``) and the row-ID column (``--id``).
        A run saved from Python holds those passed to :func:`save_run` as ``extra_meta``.
    """
    path = _verified(path, ("config.json",))
    try:
        state = json.loads((path / "config.json").read_text())["state"]
    except (ValueError, KeyError, TypeError) as e:
        raise RunError(f"run directory {str(path)!r}: config.json is unreadable ({e})") from None
    return {k: state[k] for k in RUN_METADATA if k in state}


def load_run(path):
    """Rebuild a fitted estimator from a run directory written by :func:`save_run`."""
    import importlib
    import sys

    from bayeskern.kernels.base import kernel_from_config

    config, arrays, idata = read_run(path)
    name = config.get("estimator")
    if name not in ESTIMATORS and "bayeskern.estimators" not in sys.modules:
        # the package's estimator classes register themselves when bayeskern.estimators (a
        # layer above this module) is imported; bayeskern's lazy import loads it on first need
        importlib.import_module("bayeskern.estimators")
    if name not in ESTIMATORS:
        raise RunError(f"run directory {str(path)!r}: unknown estimator {name!r}")
    params = {}
    for k, v in config["params"].items():
        if isinstance(v, dict) and "__kernel__" in v:
            v = kernel_from_config(v["__kernel__"])
        params[k] = v
    est = ESTIMATORS[name](**params)
    est.idata_ = idata
    est._load_state(config["state"], arrays)
    return est


def predict_table(
    est,
    X,
    *,
    interval: float = 0.9,
    draws: int = 0,
    random_state=None,
    row_offset: int = 0,
    class_intervals: bool = False,
):
    """Posterior-predictive summary of a fitted (or loaded) estimator as a ``DataFrame``.

    Regression: columns ``mean``, ``sd``, ``lower_<interval>``, ``upper_<interval>`` (the
    central interval, quantiles :math:`(1 \\mp p)/2` of the predictive mixture over posterior
    draws) and, with ``draws > 0``, ``draw_0 ... draw_{draws-1}``: predictive draws
    (marginal per row). Classification: ``prediction`` (the most probable class), ``p_<class>``
    per class (the posterior-mean class probability, Rasmussen & Williams 2006, eq. 3.25) and,
    with ``class_intervals``, ``p_<class>_lower_<interval>`` and ``p_<class>_upper_<interval>``
    after it: the central interval of that probability over the posterior, from the
    estimator's ``predict_proba_interval(X, interval=interval)``; then optional label draws.
    The same ``random_state`` (an int) gives the same draws, and the draws of row ``i`` depend
    only on it and on ``row_offset + i``: a table predicted in batches (``bayeskern predict
    --batch-size``, each batch with its ``row_offset``) has the same draws as one predicted at
    once.
    """
    import pandas as pd

    from bayeskern.predictive import most_probable_class

    if not 0 < interval < 1:
        raise ValueError(f"interval must be in (0, 1), got {interval}")
    if isinstance(draws, bool) or not isinstance(draws, (int, np.integer)) or draws < 0:
        raise ValueError(f"draws must be a non-negative int, got {draws!r}")
    a = (1 - interval) / 2
    tag = f"{interval:g}"
    if hasattr(est, "predict_proba"):
        p = est.predict_proba(X)
        if class_intervals and not hasattr(est, "predict_proba_interval"):
            raise ValueError(
                f"interval: {type(est).__name__} gives no class-probability "
                "intervals (it has no predict_proba_interval)"
            )
        lo, hi = (
            est.predict_proba_interval(X, interval=interval) if class_intervals else (None, None)
        )
        cols = {"prediction": most_probable_class(est.classes_, p)}  # as est.predict decides
        for j, c in enumerate(est.classes_):
            cols[f"p_{c}"] = p[:, j]
            if class_intervals:
                cols[f"p_{c}_lower_{tag}"], cols[f"p_{c}_upper_{tag}"] = lo[:, j], hi[:, j]
        out = pd.DataFrame(cols)
        if draws:
            lab = est.sample_posterior_predictive(
                X, draws, random_state=random_state, row_offset=row_offset
            )
            out = pd.concat(
                [out, pd.DataFrame(lab.T, columns=[f"draw_{i}" for i in range(draws)])], axis=1
            )
        return out
    pred = est.predictive(X)
    out = pd.DataFrame(
        {
            "mean": pred.mean(),
            "sd": pred.std(),
            f"lower_{tag}": pred.quantile(a),
            f"upper_{tag}": pred.quantile(1 - a),
        }
    )
    if draws:
        d = pred.sample(draws, random_state, row_offset=row_offset)
        out = pd.concat(
            [out, pd.DataFrame(d.T, columns=[f"draw_{i}" for i in range(draws)])], axis=1
        )
    return out.astype(np.float64)
