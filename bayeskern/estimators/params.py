"""scikit-learn parameter constraints shared by the estimators (``_parameter_constraints``).

Each estimator declares its arguments in scikit-learn's format
(:mod:`sklearn.utils._param_validation`) and ``fit`` checks them first
(``sklearn.base._fit_context``), raising ``InvalidParameterError`` (a ``ValueError`` and a
``TypeError``) that names the argument and the estimator. What a constraint cannot say
(rules across arguments) stays in the estimators, each with its own message.
"""

from __future__ import annotations

import numbers

import numpy as np
from sklearn.utils._param_validation import Interval, StrOptions

__all__ = ["NumberInterval", "count", "positive", "non_negative", "SAMPLER_CONSTRAINTS"]


class NumberInterval(Interval):
    """:class:`~sklearn.utils._param_validation.Interval` that refuses ``True`` and ``False``.

    scikit-learn's interval takes a bool for an int (``bool`` subclasses ``int``); a flag
    given where a count or a scale is expected is a mistake, refused by name.
    """

    def is_satisfied_by(self, val):
        """Return whether ``val`` is a number (not a bool) in the interval."""
        return not isinstance(val, (bool, np.bool_)) and super().is_satisfied_by(val)


def count(low: int = 1, high: int | None = None) -> NumberInterval:
    """Return the constraint of an integer in ``[low, high]`` (``high=None``: unbounded)."""
    closed = "left" if high is None else "both"
    return NumberInterval(numbers.Integral, low, high, closed=closed)


def positive() -> NumberInterval:
    """Return the constraint of a finite real number > 0."""
    return NumberInterval(numbers.Real, 0, None, closed="neither")


def non_negative() -> NumberInterval:
    """Return the constraint of a finite real number >= 0."""
    return NumberInterval(numbers.Real, 0, None, closed="left")


#: the sampler arguments the Bayesian estimators share; ``num_warmup`` and ``num_samples``
#: take ``"auto"`` only where the estimator adds it (``_AUTO_COUNTS``)
SAMPLER_CONSTRAINTS: dict = {
    "num_warmup": [count(0)],
    "num_samples": [count(1)],
    "num_chains": [count(1)],
    "chain_method": [StrOptions({"parallel", "sequential", "vectorized", "processes"}), None],
    "target_accept_prob": [NumberInterval(numbers.Real, 0, 1, closed="neither")],
    "progress_bar": ["boolean"],
    "random_state": ["random_state"],
}

#: ``num_warmup`` and ``num_samples`` of the estimators that choose them (``"auto"``)
AUTO_COUNT_CONSTRAINTS: dict = {
    "num_warmup": [count(0), StrOptions({"auto"})],
    "num_samples": [count(1), StrOptions({"auto"})],
}
