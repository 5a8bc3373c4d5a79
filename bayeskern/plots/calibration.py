"""Calibration plots with posterior uncertainty: reliability bands and LOO-PIT.

:func:`reliability_bands` and :func:`plot_reliability_band`: a reliability diagram whose
bins carry the interval, across posterior draws, of the bin's mean predicted probability;
:func:`plot_loo_pit`: the histogram and ECDF of leave-one-out PIT values.
"""

from __future__ import annotations

import numpy as np

from bayeskern.plots._figure import subplots

__all__ = ["reliability_bands", "plot_reliability_band", "plot_loo_pit"]


def _resample(p_draws: np.ndarray, log_w: np.ndarray) -> np.ndarray:
    """Per point, the draws resampled by the inverse CDF of its weights at common uniforms.

    The uniforms :math:`u_r = (r + 1/2)/S` are the same for every point, so with equal
    weights draw :math:`r` maps to draw :math:`r` for all points (the joint structure across
    points is kept), and with unequal weights each point's draws follow its own weights
    (systematic resampling; Kitagawa 1996).
    """
    S = p_draws.shape[0]
    cdf = np.cumsum(np.exp(log_w - log_w.max(axis=0)), axis=0)
    cdf /= cdf[-1]
    u = (np.arange(S) + 0.5) / S
    idx = np.stack(
        [np.minimum(np.searchsorted(cdf[:, i], u), S - 1) for i in range(p_draws.shape[1])], axis=1
    )
    return np.take_along_axis(p_draws, idx, axis=0)


def reliability_bands(y, p_draws, *, log_weights=None, n_bins: int = 10, prob: float = 0.9) -> dict:
    """Reliability diagram bins with posterior and posterior-predictive bands.

    Points are binned (equal width) by their predictive probability
    :math:`\\bar p_i = \\sum_s w_{is} p_{is}`; per bin :math:`b` and draw :math:`s` the mean
    :math:`\\bar p_{bs} = \\frac{1}{n_b}\\sum_{i \\in b} p_{is}`, and the central ``prob``
    interval of :math:`\\bar p_{bs}` over the draws (the model's uncertainty about the
    probability, ``lower``/``upper``). The consistency band of the observed frequency
    (Bröcker & Smith 2007, "Increasing the reliability of reliability diagrams", with the
    posterior in place of a point forecast): per draw, replicated outcomes
    :math:`\\tilde y_{is} \\sim \\mathrm{Bernoulli}(p_{is})` and their bin frequency
    :math:`\\frac{1}{n_b}\\sum_{i\\in b}\\tilde y_{is}`, whose central ``prob`` interval
    (``observed_lower``/``observed_upper``) holds the observed frequency with probability
    ``prob`` when the model is calibrated; a bin of a few points has a wide one.

    Parameters
    ----------
    y : array (n,)
        0/1 outcomes.
    p_draws : array (S, n)
        :math:`P(y_i = 1)` per posterior draw.
    log_weights : array (S, n), optional
        Normalized log weights of the draws per point (PSIS-LOO); the draws are then
        resampled per point (systematic resampling at common uniforms). ``None``: equal.
    n_bins : int
        Number of equal-width bins on [0, 1].
    prob : float
        Mass of the interval.

    Returns
    -------
    dict of arrays over the non-empty bins
        ``mean_predicted``, ``observed``, ``count``, ``lower``, ``upper``,
        ``observed_lower``, ``observed_upper`` (the replicated outcomes use a fixed seed: the
        same inputs give the same band).
    """
    y = np.asarray(y, dtype=float)
    P = np.asarray(p_draws, dtype=float)
    if P.ndim != 2 or P.shape[1] != y.shape[0]:
        raise ValueError(f"p_draws must have shape (draws, {y.shape[0]}), got {P.shape}")
    if log_weights is not None:
        P = _resample(P, np.asarray(log_weights, dtype=float))
    pbar = P.mean(axis=0)
    bins = np.minimum((pbar * n_bins).astype(int), n_bins - 1)
    y_rep = np.random.default_rng(0).random(P.shape) < P  # posterior-predictive outcomes
    q = [(1 - prob) / 2, (1 + prob) / 2]
    out = {
        k: []
        for k in (
            "mean_predicted",
            "observed",
            "count",
            "lower",
            "upper",
            "observed_lower",
            "observed_upper",
        )
    }
    for b in range(n_bins):
        m = bins == b
        if not m.any():
            continue
        lo, hi = np.quantile(P[:, m].mean(axis=1), q)
        rep_lo, rep_hi = np.quantile(y_rep[:, m].mean(axis=1), q)
        for k, v in zip(
            out, (pbar[m].mean(), y[m].mean(), int(m.sum()), lo, hi, rep_lo, rep_hi), strict=True
        ):
            out[k].append(v)
    return {k: np.asarray(v) for k, v in out.items()}


def plot_reliability_band(
    y, p_draws, *, log_weights=None, n_bins: int = 10, prob: float = 0.9, ax=None
):
    """Reliability diagram with the posterior and posterior-predictive bands of each bin.

    See :func:`reliability_bands`: the interval of the bin's mean probability is drawn as a
    horizontal bar (an uncertainty of the predicted probability, the x axis), the consistency
    band of the observed frequency as a vertical grey bar (where a calibrated model puts the
    bin's observed frequency), the bin counts as labels.
    """
    if ax is None:
        _, ax = subplots(figsize=(5, 5), layout="constrained")
    t = reliability_bands(y, p_draws, log_weights=log_weights, n_bins=n_bins, prob=prob)
    c = t["mean_predicted"]
    ax.plot([0, 1], [0, 1], "k--", lw=0.8, label="perfect calibration")
    ax.vlines(
        c,
        t["observed_lower"],
        t["observed_upper"],
        color="0.6",
        lw=6,
        alpha=0.5,
        label=f"{int(round(prob * 100))} % posterior-predictive band of the frequency",
    )
    ax.errorbar(
        c,
        t["observed"],
        xerr=[c - t["lower"], t["upper"] - c],
        fmt="o-",
        color="C0",
        capsize=3,
        label=f"model, {int(round(prob * 100))} % posterior band",
    )
    for x, f, n in zip(c, t["observed"], t["count"], strict=True):
        ax.annotate(str(n), (x, f), fontsize=6, xytext=(2, 2), textcoords="offset points")
    ax.set_xlim(-0.02, 1.02)
    ax.set_ylim(-0.02, 1.02)
    ax.set_xlabel("predicted probability")
    ax.set_ylabel("observed frequency")
    ax.legend(fontsize=8)
    return ax


def plot_loo_pit(pit, *, bins: int = 10):
    """Histogram and ECDF of LOO-PIT values, the ECDF with a 95 % Kolmogorov-Smirnov band.

    Calibrated predictions give uniform PIT values (Gelfand, Dey & Chang 1992); the band
    :math:`\\pm 1.358/\\sqrt n` holds the ECDF of :math:`n` uniforms with probability 0.95
    (asymptotic; it ignores the dependence of LOO-PIT values).
    """
    pit = np.sort(np.asarray(pit, dtype=float))
    fig, (ax_h, ax_e) = subplots(1, 2, figsize=(10, 4), layout="constrained")
    ax_h.hist(pit, bins=bins, range=(0, 1), density=True, color="C0", alpha=0.7, edgecolor="w")
    ax_h.axhline(1.0, color="k", ls="--", lw=0.8)
    ax_h.set_xlabel("LOO-PIT value")
    ax_h.set_ylabel("density")
    n = len(pit)
    grid = np.linspace(0, 1, 201)
    half = 1.358 / np.sqrt(max(n, 1))
    ax_e.fill_between(
        grid,
        np.clip(grid - half, 0, 1),
        np.clip(grid + half, 0, 1),
        color="0.85",
        label="95 % band of uniform ECDFs",
    )
    ax_e.step(pit, np.arange(1, n + 1) / n, where="post", color="C0", label="LOO-PIT ECDF")
    ax_e.plot([0, 1], [0, 1], "k--", lw=0.8)
    ax_e.set_xlabel("LOO-PIT value")
    ax_e.set_ylabel("ECDF")
    ax_e.legend(fontsize=8)
    return fig
