"""Posterior predictive distributions as equal-weight mixtures over posterior draws.

For a Bayesian model the predictive distribution of a new observation is
:math:`p(y_* \\mid \\mathcal D) \\approx \\frac1S \\sum_s p(y_* \\mid \\theta_s)`. For GP
regression each component is Gaussian; for the normal-inverse-gamma random-feature models
(GaBaSR, Bayesian last layers) it is Student-t. :class:`MixturePredictive` gives the mean,
standard deviation, exact mixture quantiles (by bisection on the mixture CDF, so intervals
carry no Monte Carlo noise), log density (for NLPD) and draws.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import special, stats

__all__ = ["MixturePredictive"]


@dataclass
class MixturePredictive:
    """Equal-weight mixture of location-scale components, one per posterior draw.

    Attributes
    ----------
    loc, scale : (S, n)
        Component location and scale for each draw ``s`` and point ``i``.
    df : (S,) or (S, n) or None
        Student-t degrees of freedom; ``None`` for Gaussian components.
    """

    loc: np.ndarray
    scale: np.ndarray
    df: np.ndarray | None = None

    def __post_init__(self):
        self.loc = np.asarray(self.loc, dtype=float)
        self.scale = np.asarray(self.scale, dtype=float)
        if self.df is not None:
            self.df = np.broadcast_to(np.asarray(self.df, dtype=float).reshape(
                (-1,) + (1,) * (self.loc.ndim - 1)), self.loc.shape)
        if not (np.all(np.isfinite(self.loc)) and np.all(np.isfinite(self.scale))):
            raise FloatingPointError(
                "the predictive distribution has non-finite values; the kernel matrix is "
                "probably ill-conditioned (see the jitter reported by the estimator)"
            )

    def _dist(self):
        if self.df is None:
            return stats.norm(self.loc, self.scale)
        return stats.t(self.df, self.loc, self.scale)

    def mean(self) -> np.ndarray:
        """Mixture mean, :math:`\\frac1S\\sum_s \\mu_s`."""
        return self.loc.mean(axis=0)

    def var(self) -> np.ndarray:
        """Mixture variance, :math:`\\frac1S\\sum_s(\\sigma_s^2+\\mu_s^2) - \\bar\\mu^2`."""
        comp_var = self.scale**2
        if self.df is not None:
            comp_var = comp_var * np.where(self.df > 2, self.df / np.maximum(self.df - 2, 1e-12),
                                           np.inf)
        m = self.mean()
        return np.maximum((comp_var + self.loc**2).mean(axis=0) - m**2, 0.0)

    def std(self) -> np.ndarray:
        """Mixture standard deviation."""
        return np.sqrt(self.var())

    def cdf(self, y) -> np.ndarray:
        """Mixture CDF at ``y`` (shape ``(n,)``): the probability integral transform."""
        return self._dist().cdf(np.asarray(y, dtype=float)).mean(axis=0)

    def logpdf(self, y) -> np.ndarray:
        """Log mixture density at ``y``, :math:`\\log\\frac1S\\sum_s p(y\\mid\\theta_s)`."""
        lp = self._dist().logpdf(np.asarray(y, dtype=float))
        return special.logsumexp(lp, axis=0) - np.log(lp.shape[0])

    def quantile(self, q: float, tol: float = 1e-9) -> np.ndarray:
        """Mixture quantile by bisection on the CDF (exact up to ``tol`` × the spread)."""
        if not 0.0 < q < 1.0:
            raise ValueError(f"q must be in (0, 1), got {q}")
        d = self._dist()
        lo = (self.loc - 40 * self.scale).min(axis=0)
        hi = (self.loc + 40 * self.scale).max(axis=0)
        if self.df is not None:
            lo = np.minimum(lo, d.ppf(q).min(axis=0))
            hi = np.maximum(hi, d.ppf(q).max(axis=0))
        for _ in range(200):
            mid = 0.5 * (lo + hi)
            below = d.cdf(mid).mean(axis=0) < q
            lo = np.where(below, mid, lo)
            hi = np.where(below, hi, mid)
            if np.all(hi - lo <= tol * (1 + np.abs(mid))):
                break
        return 0.5 * (lo + hi)

    def interval(self, prob: float = 0.9) -> tuple[np.ndarray, np.ndarray]:
        """Central predictive interval with probability ``prob``."""
        if not 0.0 < prob < 1.0:
            raise ValueError(f"interval must be in (0, 1), got {prob}")
        a = (1.0 - prob) / 2.0
        return self.quantile(a), self.quantile(1.0 - a)

    def sample(self, n_draws: int, rng: np.random.Generator) -> np.ndarray:
        """``n_draws`` predictive draws per point ``(n_draws, n)``: pick a posterior draw, then
        sample its component (marginal draws, independent across points)."""
        S = self.loc.shape[0]
        idx = rng.integers(0, S, size=n_draws)
        z = (rng.standard_normal((n_draws,) + self.loc.shape[1:]) if self.df is None
             else rng.standard_t(self.df[idx]))
        return self.loc[idx] + self.scale[idx] * z

    def subset(self, sl) -> "MixturePredictive":
        """The mixture restricted to points ``sl``."""
        return MixturePredictive(self.loc[:, sl], self.scale[:, sl],
                                 None if self.df is None else self.df[:, sl])
