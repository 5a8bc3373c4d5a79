"""Checks after a fit: how much posterior mass falls on length-scales the basis misses.

:func:`check_basis` (a stationary term's Laplacian basis) and :func:`check_harmonics` (a
periodic term's cosine series) each return a :class:`BasisCheck`, whose message the
estimators turn into a warning.
"""

from __future__ import annotations

from dataclasses import dataclass

import jax
import jax.numpy as jnp
import numpy as np

from bayeskern.hsgp_basis import HARMONIC_TOL, Basis
from bayeskern.kernels.periodic import Periodic

__all__ = ["BasisCheck", "check_basis", "check_harmonics"]


def _periodic_theta(periodic: Periodic, lengthscale, period: float) -> dict:
    return {
        periodic._site("lengthscale"): jnp.asarray(lengthscale, dtype=float),
        periodic._site("period"): jnp.asarray(period, dtype=float),
    }


@dataclass(frozen=True)
class BasisCheck:
    """How much posterior mass a design's bases cannot resolve (:func:`check_basis`).

    Attributes
    ----------
    term : str
        The additive term's name.
    parameter : str
        The sample site checked (a length-scale).
    fraction_short, fraction_long : float
        Fractions of draws below the shortest / above the longest resolved length-scale.
    shortest, longest : float
        The resolved range (standardized units; the smallest over columns).
    quantiles : tuple of float
        The draws' 5 % and 95 % quantiles.
    """

    term: str
    parameter: str
    fraction_short: float
    fraction_long: float
    shortest: float
    longest: float
    quantiles: tuple[float, float]

    def message(self) -> str:
        """Return a sentence with the numbers, for a warning."""
        return (
            f"{self.parameter} (term {self.term}): {100 * self.fraction_short:.0f}% of "
            f"the posterior draws are shorter than the {self.shortest:.3g} the basis "
            f"resolves and {100 * self.fraction_long:.0f}% longer than {self.longest:.3g} "
            f"(standardized units; draws' 5-95% range {self.quantiles[0]:.3g}-"
            f"{self.quantiles[1]:.3g})"
        )


def check_basis(
    basis: Basis, lengthscale_draws, family: str, *, term: str = "", parameter: str = "lengthscale"
) -> BasisCheck:
    r"""Measure the posterior mass on length-scales the basis cannot resolve.

    A draw is unresolved when, in some column :math:`j`, :math:`\ell_j < k_m L_j/m_j` (too
    short for :math:`m_j` functions) or :math:`\ell_j > L_j/k_c` (too long for the box),
    Riutort-Mayol et al. (2023)'s relations (:data:`FAMILY_RULES`) solved for :math:`\ell`.

    Parameters
    ----------
    basis : Basis
    lengthscale_draws : (S,) or (S, d) array
        Posterior draws of the length-scale (standardized units).
    family : str
        Key of :data:`FAMILY_RULES`.
    term, parameter : str
        Names for the message.
    """
    ls = np.asarray(lengthscale_draws, dtype=float)
    ls = ls.reshape(len(ls), -1) if ls.ndim > 1 else ls[:, None]
    short, long = basis.lengthscale_range(family)
    too_short = np.any(ls < short[None, :], axis=1)
    too_long = np.any(ls > long[None, :], axis=1)
    q = np.quantile(ls.min(axis=1), [0.05, 0.95])
    return BasisCheck(
        term,
        parameter,
        float(np.mean(too_short)),
        float(np.mean(too_long)),
        float(short.min()),
        float(long.min()),
        (float(q[0]), float(q[1])),
    )


def check_harmonics(
    periodic: Periodic,
    n_harmonics: int,
    period: float,
    lengthscale_draws,
    *,
    term: str = "",
    tol: float = HARMONIC_TOL,
) -> BasisCheck:
    r"""Measure the posterior mass on periodic length-scales that :math:`J` harmonics miss.

    The shortest resolved length-scale is the smallest :math:`\ell` (on a log grid) at which
    the weight left out of the cosine series, :math:`1 - \sum_{j\le J} q_j`, is at most
    ``tol``; longer ones are all resolved (``longest`` is infinite).
    """
    grid = np.geomspace(1e-2, 1e2, 241)
    q = jax.vmap(
        lambda ell: periodic.cosine_coefficients(
            _periodic_theta(periodic, ell, period), n_harmonics
        )
    )(jnp.asarray(grid))
    ok = 1.0 - np.sum(np.asarray(q), axis=1) <= tol
    shortest = float(grid[np.argmax(ok)]) if ok.any() else float("inf")
    ls = np.asarray(lengthscale_draws, dtype=float).reshape(-1)
    qs = np.quantile(ls, [0.05, 0.95])
    return BasisCheck(
        term,
        periodic._site("lengthscale"),
        float(np.mean(ls < shortest)),
        0.0,
        shortest,
        float("inf"),
        (float(qs[0]), float(qs[1])),
    )
