r"""Convergence of MCMC chains as numbers: the report, and where chains continued would go.

:class:`ConvergenceReport` holds the verdict of :func:`bayeskern.diagnostics.convergence_report`
(which computes R-hat and ESS through ArviZ); :func:`projected_convergence` projects them to a
longer run, the arithmetic behind ``num_samples="auto"``'s early stop
(:func:`bayeskern.diagnostics.auto_stop`). Plain NumPy: no ArviZ here.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

__all__ = ["ConvergenceReport", "projected_convergence", "AUTO_MARGIN", "AUTO_PROJECT_FROM"]


@dataclass
class ConvergenceReport:
    """Convergence of an MCMC run, judged by the thresholds of Vehtari et al. (2021).

    ``ok`` is ``True`` when max R-hat ≤ ``rhat_max``, min bulk and tail ESS ≥ ``ess_min``
    (100 per chain by default) and there are no divergences. ``mixed`` is the first two
    criteria alone (what more draws can fix; divergences need another geometry). ``table``
    has one row per quantity, column ``judged`` False for the ones tabulated but not judged
    (``report_only`` of :func:`convergence_report`).
    """

    table: pd.DataFrame
    max_rhat: float
    min_ess_bulk: float
    min_ess_tail: float
    n_divergent: int
    n_draws: int
    tree_depth_hits: int
    ok: bool
    warnings: list[str] = field(default_factory=list)
    mixed: bool = False

    @property
    def verdict(self) -> str:
        """One plain-language sentence."""
        if self.ok and not self.warnings:
            return (
                f"Converged: max R-hat {self.max_rhat:.3f}, min bulk ESS "
                f"{self.min_ess_bulk:.0f}, no divergences."
            )
        head = "Converged, with caveats" if self.ok else "Not converged"
        return f"{head}: " + " ".join(self.warnings)

    def __str__(self) -> str:
        return self.verdict


#: ``num_samples="auto"``: how far the projection to the cap must fall short before a run
#: stops early, and the draws per chain it needs first (:func:`auto_stop`)
AUTO_MARGIN = 2.0
AUTO_PROJECT_FROM = 300


def projected_convergence(
    max_rhat: float, min_ess: float, draws: int, max_draws: int
) -> tuple[float, float]:
    r"""R-hat and ESS that chains continued to ``max_draws`` per chain can be expected to reach.

    For chains that sample one distribution, the ESS grows in proportion to the draws, and
    the split R-hat's excess :math:`\hat R^2 - 1` (the variance of the chain means over the
    within-chain variance, Vehtari et al. 2021, sec. 3) shrinks as one over the draws:

    .. math:: \mathrm{ESS}(m) = \mathrm{ESS}(n)\,\frac{m}{n}, \qquad
              \hat R(m) = \sqrt{1 + (\hat R(n)^2 - 1)\,\frac{n}{m}}

    for :math:`n` = ``draws`` and :math:`m` = ``max_draws``. Chains stuck in different modes
    keep their R-hat however long they run (the projection is optimistic about them); chains
    still forgetting their starts gain ESS faster than in proportion (pessimistic: hence the
    margin of :func:`auto_stop`).

    Parameters
    ----------
    max_rhat, min_ess
        The largest R-hat and the smallest bulk or tail ESS of the judged quantities now.
    draws, max_draws
        Draws per chain now and at the cap.

    Returns
    -------
    rhat, ess : float
        The projections at ``max_draws``.
    """
    ratio = max_draws / draws
    rhat = (
        float(np.sqrt(1.0 + max(max_rhat**2 - 1.0, 0.0) / ratio))
        if np.isfinite(max_rhat)
        else max_rhat
    )
    return rhat, float(min_ess * ratio)
