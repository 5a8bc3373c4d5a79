"""Specification of one kernel hyper-parameter: a fixed value, or a prior to sample from."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import jax.numpy as jnp
import numpy as np

__all__ = ["Hyper"]


@dataclass(frozen=True)
class Hyper:
    """Specification of one kernel hyper-parameter.

    Parameters
    ----------
    value
        A value fixed by the user, **in the units of the data passed to the estimator**, or
        ``None`` to sample it from ``prior``.
    prior
        Zero-argument callable returning a NumPyro distribution in *standardized* units
        (inputs scaled to unit standard deviation per column).
    default
        Value (standardized units) used when the kernel is evaluated without sampling.
    length
        ``True`` when the parameter is a length in the units of ``X`` (length-scale,
        period): a fixed value is divided by the per-column scale of ``X``.
    ard
        ``True`` for one value per input column (automatic relevance determination).
    """

    value: Any
    prior: Callable[[], Any]
    default: float
    length: bool = False
    ard: bool = False

    def fixed_standardized(self, x_scale: np.ndarray) -> jnp.ndarray:
        """Return the fixed value in standardized units (a vector when it is a length)."""
        v = jnp.asarray(self.value, dtype=float)
        if self.length:
            return v / jnp.asarray(x_scale, dtype=float)
        return v
