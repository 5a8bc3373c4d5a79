"""Posterior predictive distributions as equal-weight mixtures over posterior draws.

For a Bayesian model the predictive distribution of a new observation is
:math:`p(y_* \\mid \\mathcal D) \\approx \\frac1S \\sum_s p(y_* \\mid \\theta_s)`. For GP
regression each component is Gaussian; for the normal-inverse-gamma random-feature models
(GaBaSR, Bayesian last layers) it is Student-t. :class:`MixturePredictive` gives the mean,
standard deviation, exact mixture quantiles (safeguarded Newton on the mixture CDF, so intervals
carry no Monte Carlo noise), log density (for NLPD) and draws.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import special, stats

__all__ = ["MixturePredictive", "row_uniforms", "draw_seed", "most_probable_class"]

_GOLDEN = np.uint64(0x9E3779B97F4A7C15)


def most_probable_class(classes, P) -> np.ndarray:
    """Return the classifiers' decision from class probabilities ``P`` (n, C).

    Two classes: ``classes[1]`` where :math:`P_{i1} \\ge 0.5` (a tie goes to the second
    class); more: the class of largest probability (the first of equal ones).
    """
    P = np.asarray(P)
    pick = (P[:, 1] >= 0.5).astype(int) if P.shape[1] == 2 else np.argmax(P, axis=1)
    return np.asarray(classes)[pick]


def draw_seed(random_state) -> int:
    """Return an integer seed from ``random_state``.

    ``None`` → 0, an int, or a NumPy ``Generator``, from which one 63-bit integer is drawn.
    """
    if random_state is None:
        return 0
    if isinstance(random_state, np.random.Generator):
        return int(random_state.integers(2**63))
    if (
        isinstance(random_state, bool)
        or not isinstance(random_state, (int, np.integer))
        or random_state < 0
    ):
        raise ValueError(
            f"random_state must be a non-negative int, a numpy Generator or "
            f"None, got {random_state!r}"
        )
    return int(random_state)


def row_uniforms(seed: int, rows, n_draws: int, stream: int = 0) -> np.ndarray:
    """Return counter-based uniforms on (0, 1), shape ``(n_draws, len(rows))``.

    They are a function of ``(seed, row, draw, stream)`` only.

    Each value is SplitMix64 (Steele, Lea & Flood 2014) of the counter
    :math:`c = ((\\text{row} \\cdot n_{\\text{draws}} + j) \\cdot 4 + \\text{stream})` mixed
    with the seed, scaled as :math:`(\\lfloor z / 2^{11} \\rfloor + 1/2)\\, 2^{-53}`. Used
    so that predictive draws of a row are the same whatever the batch it is predicted in.
    """
    rows = np.asarray(rows, dtype=np.uint64)
    j = np.arange(n_draws, dtype=np.uint64)[:, None]
    z = ((rows[None, :] * np.uint64(n_draws) + j) * np.uint64(4) + np.uint64(stream)) ^ np.uint64(
        seed * 0x9E3779B97F4A7C15 % 2**64
    )
    z = z + _GOLDEN
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    z = z ^ (z >> np.uint64(31))
    return ((z >> np.uint64(11)).astype(np.float64) + 0.5) * 2.0**-53


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
            df = np.asarray(self.df, dtype=float)
            if df.ndim != self.loc.ndim:  # one df per draw
                df = df.reshape((-1,) + (1,) * (self.loc.ndim - 1))
            self.df = np.broadcast_to(df, self.loc.shape)
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
            comp_var = comp_var * np.where(
                self.df > 2, self.df / np.maximum(self.df - 2, 1e-12), np.inf
            )
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

    def _cdf_pdf(self, x, cols):
        """Component CDFs and densities at ``x`` (per point) for the points ``cols``."""
        loc, scale = self.loc[:, cols], self.scale[:, cols]
        z = (x - loc) / scale
        if self.df is None:
            return special.ndtr(z), np.exp(-0.5 * z * z) / (np.sqrt(2 * np.pi) * scale)
        df = self.df[:, cols]
        logc = (
            special.gammaln(0.5 * (df + 1)) - special.gammaln(0.5 * df) - 0.5 * np.log(np.pi * df)
        )
        return special.stdtr(df, z), np.exp(logc - 0.5 * (df + 1) * np.log1p(z * z / df)) / scale

    def quantile(self, q: float, tol: float = 1e-12) -> np.ndarray:
        """Mixture quantile :math:`F^{-1}(q)`, :math:`F(y) = \\frac1S\\sum_s F_s(y)`.

        Safeguarded Newton on :math:`F(y) - q` inside a bracket that always holds the root
        (a bisection step whenever Newton leaves it), iterated per point until the step is
        below ``tol`` × (1 + :math:`|y|`): a handful of CDF evaluations instead of dozens of
        bisection steps, and each point's answer depends on that point only (so batched
        prediction gives the same numbers as unbatched).
        """
        if not 0.0 < q < 1.0:
            raise ValueError(f"q must be in (0, 1), got {q}")
        if self.df is None:
            comp = self.loc + self.scale * special.ndtri(q)
        else:
            comp = self.loc + self.scale * stats.t.ppf(q, self.df)
        # F(min_s comp_s) <= q <= F(max_s comp_s): every component CDF is monotone
        lo, hi = comp.min(axis=0), comp.max(axis=0)
        x = comp.mean(axis=0)
        step = hi - lo  # the step before last (rtsafe's dxold)
        active = np.flatnonzero(hi > lo)
        for _ in range(200):
            if active.size == 0:
                break
            xa, la, ha, sa = x[active], lo[active], hi[active], step[active]
            F, f = self._cdf_pdf(xa, active)
            F, f = F.mean(axis=0) - q, f.mean(axis=0)
            la, ha = np.where(F < 0, xa, la), np.where(F < 0, ha, xa)
            with np.errstate(divide="ignore", invalid="ignore"):
                xn = xa - F / f
            # bisect when Newton leaves the bracket or does not halve the step (Numerical
            # Recipes' rtsafe): a mixture CDF has plateaus where plain Newton oscillates
            bisect = ~((xn > la) & (xn < ha)) | (np.abs(2 * F) > np.abs(sa * f))
            xn = np.where(F == 0, xa, np.where(bisect, 0.5 * (la + ha), xn))
            sa = np.abs(xn - xa)
            done = (sa <= tol * (1 + np.abs(xa))) | (ha - la <= tol * (1 + np.abs(xa)))
            x[active], lo[active], hi[active], step[active] = xn, la, ha, sa
            active = active[~done]
        return x

    def interval(self, prob: float = 0.9) -> tuple[np.ndarray, np.ndarray]:
        """Central predictive interval with probability ``prob``."""
        if not 0.0 < prob < 1.0:
            raise ValueError(f"interval must be in (0, 1), got {prob}")
        a = (1.0 - prob) / 2.0
        return self.quantile(a), self.quantile(1.0 - a)

    def sample(self, n_draws: int, random_state=None, row_offset: int = 0) -> np.ndarray:
        """Return ``n_draws`` predictive draws per point, ``(n_draws, n)``.

        For each point and draw, pick a posterior draw :math:`s` uniformly, then sample its
        component (marginal draws, independent across points).

        The randomness of point ``i`` comes from :func:`row_uniforms` at row
        ``row_offset + i``, so the draws of a row do not depend on which other rows are
        predicted with it (batched prediction writes the same draws as unbatched).
        """
        seed = draw_seed(random_state)
        rows = row_offset + np.arange(self.loc.shape[1])
        S = self.loc.shape[0]
        idx = np.minimum((row_uniforms(seed, rows, n_draws, 0) * S).astype(np.int64), S - 1)
        u = row_uniforms(seed, rows, n_draws, 1)
        cols = np.broadcast_to(np.arange(self.loc.shape[1]), idx.shape)
        z = special.ndtri(u) if self.df is None else special.stdtrit(self.df[idx, cols], u)
        return self.loc[idx, cols] + self.scale[idx, cols] * z

    def sample_components(
        self, components, random_state=None, row_offset: int = 0, stream: int = 2
    ) -> np.ndarray:
        """Return one draw from each listed component, ``(len(components), n)``.

        :math:`y_{ji} = \\mu_{s_j i} + \\sigma_{s_j i} z_{ji}` with :math:`s_j` =
        ``components[j]`` and :math:`z` standard normal (or Student-t with the component's
        degrees of freedom) by inversion of :func:`row_uniforms` at row ``row_offset + i``
        and ``stream``: the replicated data of posterior draw :math:`s_j`, the draws a
        posterior predictive check compares with the data (Gelman, Meng & Stern 1996).
        """
        seed = draw_seed(random_state)
        comp = np.asarray(components, dtype=np.int64)
        rows = row_offset + np.arange(self.loc.shape[1])
        u = row_uniforms(seed, rows, len(comp), stream)
        z = special.ndtri(u) if self.df is None else special.stdtrit(self.df[comp], u)
        return self.loc[comp] + self.scale[comp] * z

    def subset(self, sl) -> MixturePredictive:
        """Return the mixture restricted to points ``sl``."""
        return MixturePredictive(
            self.loc[:, sl], self.scale[:, sl], None if self.df is None else self.df[:, sl]
        )
