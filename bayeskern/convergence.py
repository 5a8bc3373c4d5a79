r"""Convergence of MCMC chains as numbers: the report, and where chains continued would go.

:class:`ConvergenceReport` holds the verdict of :func:`bayeskern.diagnostics.convergence_report`
(which computes R-hat and ESS through ArviZ), and :func:`convergence_messages` its warnings,
which name where divergent transitions sit (:func:`divergence_sites`) and which chain stays
apart from the others (:func:`chain_apart`);
:func:`projected_convergence` projects R-hat and ESS to a longer run, the arithmetic behind
``num_samples="auto"``'s early stop (:func:`bayeskern.diagnostics.auto_stop`). Plain NumPy:
no ArviZ here.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

__all__ = [
    "ConvergenceReport",
    "chain_apart",
    "convergence_messages",
    "divergence_sites",
    "projected_convergence",
    "AUTO_MARGIN",
    "AUTO_PROJECT_FROM",
]


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


def _element_labels(name: str, shape: tuple) -> list[str]:
    """Return ``name[i,j]`` for every element of a variable of trailing ``shape``.

    ``name`` alone for a scalar; in C order, as the columns of ``reshape(..., -1)``.
    """
    return [
        name + (f"[{','.join(map(str, index))}]" if index else "") for index in np.ndindex(shape)
    ]


def divergence_sites(draws, diverging, *, tail: float = 0.05, most: int = 3) -> list[str]:
    r"""Name the parameters whose divergent draws sit in a tail of their posterior.

    Each divergent draw's value of a scalar element :math:`\theta_j` is placed in the
    element's marginal posterior (all draws of all chains) by its mid-rank quantile

    .. math:: q = \frac{\#\{s : \theta_j^{(s)} < x\} + \tfrac12\,\#\{s : \theta_j^{(s)} = x\}}{S}.

    An element whose median :math:`q` over the divergent draws is below ``tail`` or above
    ``1 - tail`` is named, the most extreme first: divergences that gather at one end of a
    parameter's range mark the region whose curvature the step size cannot follow, as in the
    funnel of a hierarchical scale (Betancourt & Girolami 2015; Betancourt 2017, section 6.2;
    the divergence pair plots of Gabry et al. 2019 show the same by eye).

    Parameters
    ----------
    draws : dict of str to array, shape (chain, draw, ...)
        Posterior draws by variable; each trailing element is judged on its own.
    diverging : array of bool, shape (chain, draw)
    tail : float, default 0.05
    most : int, default 3
        How many elements to name at most.

    Returns
    -------
    list of str
        ``"name[i] high (quantile 1.00 at the divergent draws; value 4.3)"`` and the like;
        empty when there is no divergence or none sits in a tail.
    """
    if not 0 < tail < 0.5:
        raise ValueError(f"tail must lie between 0 and 0.5, got {tail}")
    diverging = np.asarray(diverging, dtype=bool)
    if not diverging.any():
        return []
    found = []
    for name, arr in draws.items():
        arr = np.asarray(arr, dtype=float)
        if arr.shape[:2] != diverging.shape:
            continue
        flat = arr.reshape(diverging.size, -1)
        div, srt = flat[diverging.ravel()], np.sort(flat, axis=0)
        for j, label in enumerate(_element_labels(name, arr.shape[2:])):
            below = np.searchsorted(srt[:, j], div[:, j], "left")  # then + half the ties:
            q = (below + np.searchsorted(srt[:, j], div[:, j], "right")) / (2 * len(srt))
            q_med, x_med = np.median(q), np.median(div[:, j])
            if tail <= q_med <= 1 - tail:
                continue
            side = "high" if q_med > 0.5 else "low"
            found.append(
                (
                    -abs(q_med - 0.5),
                    f"{label} {side} (quantile {q_med:.2f} at the divergent draws; "
                    f"value {x_med:.3g})",
                )
            )
    return [text for _, text in sorted(found)[:most]]


def chain_apart(draws) -> str | None:
    r"""Name the chain that stays furthest from the others, and in which parameter.

    For every scalar element of ``draws`` and every chain :math:`c`, the distance of the
    chain's mean from the mean of the other chains' draws, in units of the pooled
    within-chain standard deviation :math:`\sqrt{W}` of the split-:math:`\hat R` of
    Vehtari et al. (2021):

    .. math:: z_c = \frac{|\bar\theta_c - \bar\theta_{-c}|}{\sqrt{W}}.

    The element and chain of the largest :math:`z_c` are the ones a trace plot would show
    apart: a chain stuck in another mode or region, or one that has not reached the others.

    Parameters
    ----------
    draws : dict of str to array, shape (chain, draw, ...)
        At least two chains of at least two draws.

    Returns
    -------
    str or None
        ``"chain 2 in trend_amp[0] (mean 4.1; the other chains 1.2, within-chain sd 0.3)"``;
        ``None`` with fewer than two chains, or when every chain agrees exactly.
    """
    best = None
    for name, arr in draws.items():
        arr = np.asarray(arr, dtype=float)
        if arr.ndim < 2 or arr.shape[0] < 2 or arr.shape[1] < 2:
            continue
        flat = arr.reshape(arr.shape[0], arr.shape[1], -1)
        means = flat.mean(axis=1)  # (chain, element)
        others = (means.sum(axis=0) - means) / (len(means) - 1)
        sd = np.sqrt(flat.var(axis=1, ddof=1).mean(axis=0))
        with np.errstate(divide="ignore", invalid="ignore"):
            z = np.where(sd > 0, np.abs(means - others) / sd, 0.0)
        if not np.isfinite(z).any():  # draws that are not numbers: nothing to compare
            continue
        c, j = np.unravel_index(np.nanargmax(z), z.shape)
        if z[c, j] > 0 and (best is None or z[c, j] > best[0]):
            label = _element_labels(name, arr.shape[2:])[j]
            best = (
                z[c, j],
                f"chain {c} in {label} (mean {means[c, j]:.3g}; the other chains "
                f"{others[c, j]:.3g}, within-chain sd {sd[j]:.2g})",
            )
    return None if best is None else best[1]


def convergence_messages(
    *,
    n_chains: int,
    draws_per_chain: int,
    max_rhat: float,
    min_bulk: float,
    min_tail: float,
    rhat_max: float,
    ess_min: float,
    n_divergent: int,
    tree_depth_hits: int,
    capped: bool = False,
    projected_cap: int | None = None,
    divergent_at: list[str] | None = None,
    apart: str | None = None,
    target_accept: float | None = None,
) -> list[str]:
    """Return the warnings of :class:`ConvergenceReport`: each missed criterion and its fix.

    The criteria of Vehtari et al. (2021): R-hat at most ``rhat_max`` (at least two chains),
    bulk and tail ESS at least ``ess_min``; then no divergent transitions and no draw at the
    maximum tree depth. ``capped``: ``num_samples="auto"`` reached its cap unconverged;
    ``projected_cap``: it stopped early because :func:`projected_convergence` at that cap
    misses the criteria by more than :data:`AUTO_MARGIN`; ``divergent_at``: where the divergent
    transitions sit (:func:`divergence_sites`); ``apart``: the chain furthest from the others
    (:func:`chain_apart`), named when R-hat misses; ``target_accept``: the NUTS target
    acceptance the run used, so that the fix for divergences names a higher one (half the
    rejection rate: 0.8 → 0.9, 0.9 → 0.95, 0.95 → 0.975).
    """
    msgs = []
    if n_chains < 2:
        msgs.append("R-hat needs at least 2 chains; run num_chains >= 4 to judge convergence.")
    elif np.isnan(max_rhat) or np.isnan(min_bulk) or np.isnan(min_tail):
        msgs.append(
            f"R-hat or ESS cannot be computed from {draws_per_chain} draws per chain "
            "(too few draws, or draws that never change): run longer (num_warmup, "
            "num_samples)."
        )
    elif not max_rhat <= rhat_max:
        where = f"; furthest apart: {apart}" if apart else ""
        msgs.append(
            f"max R-hat {max_rhat:.3f} > {rhat_max}{where}: run longer (num_warmup, "
            "num_samples) or reparameterize."
        )
    if not np.isnan(min_bulk + min_tail) and not (min_bulk >= ess_min and min_tail >= ess_min):
        msgs.append(
            f"min ESS bulk {min_bulk:.0f} / tail {min_tail:.0f} < {ess_min:.0f}: "
            "increase num_samples."
        )
    if capped:
        msgs.append(
            f"num_samples='auto' stopped at its cap of {draws_per_chain} draws per "
            "chain before R-hat and ESS met the criteria."
        )
    if projected_cap is not None:
        at_cap = projected_convergence(
            max_rhat, min(min_bulk, min_tail), draws_per_chain, projected_cap
        )
        msgs.append(
            f"num_samples='auto' stopped at {draws_per_chain} draws per chain: at the rate "
            f"so far the chains would reach R-hat {at_cap[0]:.3f} and ESS {at_cap[1]:.0f} at "
            f"the cap of {projected_cap}, short of the criteria by more than "
            f"{AUTO_MARGIN:g}x; more draws will not fix this (reparameterize, tighten the "
            "priors or simplify the model)."
        )
    if n_divergent:
        n_draws = n_chains * draws_per_chain
        where = f", at {'; '.join(divergent_at)}" if divergent_at else ""
        if target_accept is None:
            raise_to = "raise target_accept_prob (e.g. 0.95)"
        else:
            used = float(target_accept)
            raise_to = (
                f"raise target_accept_prob above the {used:g} used "
                f"(e.g. {1.0 - (1.0 - used) / 2:.4g})"
            )
        msgs.append(
            f"{n_divergent} divergent transitions ({100 * n_divergent / n_draws:.1f} %){where}: "
            f"{raise_to} or use tighter priors."
        )
    if tree_depth_hits:
        msgs.append(
            f"{tree_depth_hits} draws hit the maximum tree depth: raise max_tree_depth or use "
            "dense_mass=True."
        )
    return msgs
