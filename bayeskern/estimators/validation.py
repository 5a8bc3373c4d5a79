"""Input checks of the estimators: numeric data, class labels, interval probabilities.

Errors name the argument (``X``, ``y``, ``interval``) and say what is wrong.
"""

from __future__ import annotations

import numbers

import numpy as np
from sklearn.utils.validation import validate_data as _sk_validate_data

__all__ = [
    "check_numeric",
    "validate_data",
    "validate_classes",
    "validate_binary",
    "check_interval",
]


def _non_numeric(name: str, A) -> str | None:
    """Return a message naming ``name`` and its non-numeric columns/values, or ``None``."""
    if isinstance(A, str) or A is None:
        return None
    try:
        np.asarray(A, dtype=np.float64)
        return None
    except (TypeError, ValueError):
        pass
    columns = getattr(A, "columns", None)
    if columns is not None:  # a DataFrame: name the offending columns
        import pandas as pd

        bad = [
            str(c)
            for c in columns
            if pd.to_numeric(A[c], errors="coerce").isna().sum() > A[c].isna().sum()
        ]
        return (
            f"{name} has non-numeric column(s) {bad[:10]}: encode them as numbers first "
            "(for example sklearn.preprocessing.OneHotEncoder) or drop them"
        )
    flat = np.asarray(A, dtype=object).ravel()
    for v in flat:
        try:
            float(v)
        except (TypeError, ValueError):
            return (
                f"{name} contains a non-numeric value ({v!r}); encode text as numbers "
                "first (for example sklearn.preprocessing.OneHotEncoder)"
            )
    return f"{name} could not be converted to float64"


def check_numeric(X, y="no_validation", *, y_numeric: bool = False) -> None:
    """Refuse non-numeric input with an error naming the argument.

    The argument is ``X``, or ``y`` when it must be numeric; for a DataFrame the error
    also names its text columns.
    """
    msg = _non_numeric("X", X) or (_non_numeric("y", y) if y_numeric else None)
    if msg is not None:
        raise ValueError(msg)


def validate_data(estimator, X="no_validation", y="no_validation", **kwargs):
    """scikit-learn's ``validate_data``, with :func:`check_numeric`'s errors for text input."""
    y_numeric = kwargs.get("y_numeric", False)
    try:
        out = _sk_validate_data(estimator, X, y, **kwargs)
    except ValueError as e:
        if "convert" not in str(e) and "numeric" not in str(e):
            raise
        check_numeric(X, y, y_numeric=y_numeric)
        raise
    if y_numeric:  # scikit-learn lets a NumPy string y through
        check_numeric(None, y, y_numeric=True)
    return out


def validate_classes(y) -> tuple[np.ndarray, np.ndarray]:
    """Encode class labels as ``0 .. C-1`` (sorted classes); at least two classes."""
    classes, codes = np.unique(y, return_inverse=True)
    if len(classes) < 2:
        raise ValueError(
            f"y has a single class ({classes[0]!r}); a classifier needs at least two classes"
        )
    return classes, codes.astype(np.int32)


def validate_binary(y, multiclass_estimator: str | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Encode binary labels as 0/1; errors name ``y`` and say what is wrong.

    ``multiclass_estimator`` names the estimator to suggest for more than two classes.
    """
    classes, y01 = np.unique(y, return_inverse=True)
    if len(classes) < 2:
        raise ValueError(
            f"y has a single class ({classes[0]!r}); a binary classifier needs two classes"
        )
    if len(classes) > 2:
        hint = (
            f"use {multiclass_estimator}, which handles several classes"
            if multiclass_estimator
            else "use a one-vs-rest wrapper such as sklearn.multiclass.OneVsRestClassifier"
        )
        raise ValueError(
            f"y has {len(classes)} classes. Only binary classification is supported ({hint})"
        )
    return classes, y01.astype(np.int32)


def check_interval(interval) -> float:
    """Return ``interval`` as a float; a one-line error unless it is a number in (0, 1)."""
    if (
        isinstance(interval, bool)
        or not isinstance(interval, numbers.Real)
        or not 0.0 < float(interval) < 1.0
    ):
        raise ValueError(f"interval must be a number in (0, 1), got {interval!r}")
    return float(interval)
