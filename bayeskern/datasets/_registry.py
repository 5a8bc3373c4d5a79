"""The embedded-file reader and the public loaders of the datasets (catalogue: ``_specs``)."""

from __future__ import annotations

import hashlib
import io
import json
from importlib import resources
from typing import Any

import numpy as np
import pandas as pd

from ._specs import _SPECS, _Spec

__all__ = ["DataIntegrityError", "co2_split", "describe", "list_datasets", "load_dataset"]

# Folder of the embedded files. A module attribute so that tests can point it elsewhere.
_DATA_DIR: Any = resources.files(__package__).joinpath("data")
_MANIFEST = "MANIFEST.json"
_REBUILD = "reinstall bayeskern, or rebuild the files with benchmarks/build_datasets.py"


class DataIntegrityError(RuntimeError):
    """An embedded data file does not match its manifest or its expected shape."""


def list_datasets() -> list[str]:
    """Names of the datasets that :func:`load_dataset` can load offline.

    Returns
    -------
    list of str
        Sorted dataset names.
    """
    return sorted(_SPECS)


def _spec(name: str) -> _Spec:
    if not isinstance(name, str) or name not in _SPECS:
        raise ValueError(
            f"name={name!r} is not a known dataset; known names: {', '.join(list_datasets())}"
        )
    return _SPECS[name]


def _read_embedded(file: str) -> pd.DataFrame:
    """Read ``data/<file>`` after checking its sha256 against ``data/MANIFEST.json``."""
    try:
        manifest = json.loads(_DATA_DIR.joinpath(_MANIFEST).read_bytes())
        expected = manifest[file]["sha256"]
    except FileNotFoundError as err:
        raise FileNotFoundError(f"embedded {_MANIFEST} is missing; {_REBUILD}") from err
    except (ValueError, KeyError, TypeError) as err:
        msg = f"embedded {_MANIFEST} is corrupt or lacks {file}; {_REBUILD}"
        raise DataIntegrityError(msg) from err
    try:
        raw = _DATA_DIR.joinpath(file).read_bytes()
    except FileNotFoundError as err:
        raise FileNotFoundError(f"embedded data file {file} is missing; {_REBUILD}") from err
    digest = hashlib.sha256(raw).hexdigest()
    if digest != expected:
        raise DataIntegrityError(
            f"embedded data file {file} is corrupt (sha256 {digest}, expected {expected}); "
            + _REBUILD
        )
    compression = "gzip" if file.endswith(".gz") else None
    return pd.read_csv(io.BytesIO(raw), compression=compression)


def _read_sklearn(loader: str) -> pd.DataFrame:
    import sklearn.datasets

    bunch = getattr(sklearn.datasets, loader)(as_frame=True)
    return bunch.frame


def _frame(spec: _Spec) -> pd.DataFrame:
    """Load and validate the frame of ``spec``: extra columns, features, target."""
    if spec.file is not None:
        frame = _read_embedded(spec.file)
        expected = [*spec.extra_columns, *spec.feature_names, spec.target]
    else:
        frame = _read_sklearn(spec.sklearn_loader)
        expected = [c for c in frame.columns if c != spec.target] + [spec.target]
    where = f"dataset {spec.name!r}"
    if list(frame.columns) != expected:
        raise DataIntegrityError(f"{where}: columns {list(frame.columns)}, expected {expected}")
    if len(frame) != spec.n_samples:
        raise DataIntegrityError(f"{where}: {len(frame)} rows, expected {spec.n_samples}")
    values = frame[expected[len(spec.extra_columns) :]]  # features and target
    if not all(pd.api.types.is_numeric_dtype(t) for t in values.dtypes):
        raise DataIntegrityError(f"{where}: non-numeric feature or target column")
    if not np.isfinite(values.to_numpy(dtype=np.float64)).all():
        raise DataIntegrityError(f"{where}: NaN or infinite values")
    if spec.task == "classification" and not set(frame[spec.target].unique()) <= {0, 1}:
        raise DataIntegrityError(f"{where}: target {spec.target!r} is not 0/1")
    features = expected[len(spec.extra_columns) : -1]
    frame.attrs.update(name=spec.name, target=spec.target, feature_names=features)
    return frame


def load_dataset(
    name: str, *, return_frame: bool = False
) -> tuple[np.ndarray, np.ndarray] | pd.DataFrame:
    """Load a dataset offline, from the package's embedded files or from scikit-learn.

    Parameters
    ----------
    name : str
        One of :func:`list_datasets`.
    return_frame : bool, default False
        If True, return a :class:`pandas.DataFrame` instead of arrays.

    Returns
    -------
    X : ndarray of shape (n_samples, n_features), float64
        Returned when ``return_frame`` is False, with ``y``. Columns in the order of
        ``describe(name)["feature_names"]``.
    y : ndarray of shape (n_samples,)
        float64 for regression, int64 with values 0/1 for classification (the meaning of each
        label is in ``describe(name)["labels"]``).
    frame : pandas.DataFrame
        Returned when ``return_frame`` is True. Its columns are, in order: the metadata columns
        ``describe(name)["extra_columns"]`` (e.g. ``date`` for co2, ``ID`` for
        wisconsin_original; usually none), the features ``describe(name)["feature_names"]``,
        and last the target column ``describe(name)["target"]``. ``frame.attrs`` holds
        ``name``, ``target`` and ``feature_names`` too. ``X`` is
        ``frame[feature_names].to_numpy(float)`` and ``y`` is ``frame[target]``.

    Raises
    ------
    ValueError
        If ``name`` is not a known dataset.
    FileNotFoundError
        If an embedded file is missing.
    DataIntegrityError
        If an embedded file does not match its sha256 in ``data/MANIFEST.json`` or the loaded
        table does not have the expected columns, row count, finite numeric values and labels.

    Examples
    --------
    >>> from bayeskern.datasets import load_dataset
    >>> X, y = load_dataset("airfoil")
    >>> X.shape, y.shape
    ((1503, 5), (1503,))
    """
    spec = _spec(name)
    frame = _frame(spec)
    if return_frame:
        return frame
    X = frame[frame.attrs["feature_names"]].to_numpy(dtype=np.float64)
    y_dtype = np.int64 if spec.task == "classification" else np.float64
    y = frame[spec.target].to_numpy(dtype=y_dtype)
    return X, y


def describe(name: str) -> dict[str, Any]:
    """Describe a dataset: size, columns, source, licence, citation and who uses it.

    Parameters
    ----------
    name : str
        One of :func:`list_datasets`.

    Returns
    -------
    dict
        With keys

        - ``name`` (str), ``task`` (``"regression"`` or ``"classification"``);
        - ``n_samples``, ``n_features`` (int): the shape of ``X``;
        - ``feature_names`` (list of str): the columns of ``X``, in order;
        - ``target`` (str): the target column of the frame;
        - ``labels`` (dict int -> str): meaning of 0 and 1 for classification, else empty;
        - ``extra_columns`` (list of str): frame columns that are neither features nor target;
        - ``source``, ``licence``, ``citation`` (str): where the data come from, under what
          terms, and what to cite;
        - ``used_by`` (list of str): the papers / bayeskern methods that use it, e.g.
          ``"LAB-RBF (He et al. 2023) Table 1"``;
        - ``file`` (str or None): the embedded file in ``bayeskern/datasets/data/``, None when
          the data come from scikit-learn;
        - ``notes`` (str): preprocessing and caveats.

    Raises
    ------
    ValueError
        If ``name`` is not a known dataset.
    """
    spec = _spec(name)
    features = list(spec.feature_names)
    if spec.sklearn_loader is not None:  # names come from scikit-learn, read them once here
        features = list(_frame(spec).attrs["feature_names"])
    return {
        "name": spec.name,
        "task": spec.task,
        "n_samples": spec.n_samples,
        "n_features": len(features),
        "feature_names": features,
        "target": spec.target,
        "labels": dict(spec.labels),
        "extra_columns": list(spec.extra_columns),
        "source": spec.source,
        "licence": spec.licence,
        "citation": spec.citation,
        "used_by": list(spec.used_by),
        "file": spec.file,
        "notes": spec.notes,
    }


def co2_split(*, weekly: bool = False) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Mauna Loa CO2 split by the benchmark protocol: train before 1994, test 1994..2001.

    Parameters
    ----------
    weekly : bool, default False
        False: the monthly means (``load_dataset("co2")``), 425 training months before
        1994-01 and the 96 test months 1994-01..2001-12. True: the weekly record
        (``load_dataset("co2_weekly")``), 1807 training weeks before 1994-01-01 and the 418
        test weeks 1994-01-01..2001-12-29.

    Returns
    -------
    X_train : ndarray of shape (425, 1), or (1807, 1) when ``weekly``
        Decimal years before 1994: ``year + (month - 1) / 12`` for months,
        ``year + (day of year - 1) / days in the year`` for weeks.
    y_train : ndarray of shape (425,), or (1807,)
        CO2 in ppm (monthly or weekly means).
    X_test : ndarray of shape (96, 1), or (418, 1)
        Every month (week) from January 1994 to December 2001, none missing.
    y_test : ndarray of shape (96,), or (418,)
        CO2 in ppm.

    Raises
    ------
    ValueError
        If ``weekly`` is not a bool.
    """
    if not isinstance(weekly, (bool, np.bool_)):
        raise ValueError(f"weekly must be True or False, got {weekly!r}")
    name, start, n_test = ("co2_weekly", "1994-01-01", 418) if weekly else ("co2", "1994-01", 96)
    frame = load_dataset(name, return_frame=True)
    train = frame["date"] < start
    test = (frame["date"] >= start) & (frame["date"] < "2002")
    X = frame[["time"]].to_numpy(dtype=np.float64)
    y = frame["co2"].to_numpy(dtype=np.float64)
    if test.sum() != n_test:
        unit = "weeks" if weekly else "months"
        raise DataIntegrityError(
            f"{name}: {int(test.sum())} test {unit} in 1994..2001, expected {n_test}"
        )
    return X[train], y[train], X[test], y[test]
