"""Calibration without a hold-out: the PSIS-LOO predictive of a fitted Bayesian estimator.

The leave-one-out predictive of training point :math:`i` is

.. math:: p(\\tilde y_i \\mid y_{-i}) = \\int p(\\tilde y_i \\mid y_{-i}, \\theta)\\,
          p(\\theta \\mid y_{-i})\\,d\\theta \\approx \\sum_s w_{is}\\,
          p(\\tilde y_i \\mid y_{-i}, \\theta_s),

with :math:`w_{is} \\propto 1/p(y_i \\mid y_{-i}, \\theta_s)` the Pareto-smoothed importance
weights of the posterior draws :math:`\\theta_s` (Vehtari, Gelman & Gabry 2017). bayeskern's
Bayesian estimators store :math:`\\log p(y_i \\mid y_{-i}, \\theta_s)` as ``log_likelihood``
(the latent function integrated out), so the weights come from ``idata_`` alone.

* Regression: the LOO-PIT :math:`u_i = \\sum_s w_{is} F(y_i \\mid y_{-i}, \\theta_s)` (the
  weighted mixture CDF, i.e. ArviZ's ``loo_pit`` with its predictive-draw ECDF replaced by the
  exact component CDFs; Gelfand, Dey & Chang 1992) and the coverage of the central 50/90/95 %
  intervals of the weighted mixture. The per-draw component
  :math:`p(\\tilde y_i \\mid y_{-i}, \\theta_s) = N(y_i - [K_y^{-1}y]_i/[K_y^{-1}]_{ii},\\
  1/[K_y^{-1}]_{ii})` is the closed-form leave-one-out of exact GP regression (Rasmussen &
  Williams 2006, eq. 5.12).
* Binary classification: the LOO probability :math:`\\sum_s w_{is} P(y_i = 1 \\mid y_{-i},
  \\theta_s)`, where the per-draw probability is read off the stored log-likelihood of the
  observed label.

The Pareto smoothing is ArviZ's, through :func:`bayeskern.diagnostics.psis_smooth`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import jax.numpy as jnp
import numpy as np
from scipy import special, stats

from bayeskern import diagnostics
from bayeskern.estimators.base import flat_draws, map_draws
from bayeskern.estimators.gp import GPRegressor
from bayeskern.models.gp import regression_factors

__all__ = [
    "LOOCalibration",
    "psis_log_weights",
    "weighted_mixture_cdf",
    "weighted_mixture_quantile",
    "gp_loo_components",
    "loo_calibration",
    "PARETO_K_MAX",
]

#: Pareto k above which PSIS is unreliable for an observation (Vehtari et al. 2017/2024)
PARETO_K_MAX = 0.7
_PROBS = (0.5, 0.9, 0.95)


def psis_log_weights(idata) -> tuple[np.ndarray, np.ndarray]:
    """Return the normalized PSIS log weights ``(S, n)`` and Pareto k ``(n,)`` of ``idata``.

    Raw weights :math:`1/p(y_i \\mid \\cdot, \\theta_s)` from ``log_likelihood["y"]``,
    smoothed as ``arviz.loo_pit`` does (Vehtari, Gelman & Gabry 2017).
    """
    ll = np.asarray(idata.log_likelihood["y"], dtype=float)
    lw, k = diagnostics.psis_smooth(idata.posterior, -ll.reshape(-1, ll.shape[-1]).T)
    return lw.T, k


def weighted_mixture_cdf(y, loc, scale, log_w, df=None) -> np.ndarray:
    """Return :math:`\\sum_s w_{is} F((y_i - \\mu_{is})/\\sigma_{is})`, shape ``(n,)``.

    ``loc``, ``scale``, ``log_w`` are ``(S, n)``; ``log_w`` normalized over ``S``; ``df``
    (Student-t degrees of freedom) or ``None`` for Gaussian components.
    """
    z = (np.asarray(y, dtype=float) - loc) / scale
    cdf = special.ndtr(z) if df is None else stats.t.cdf(z, df)
    return np.sum(np.exp(log_w) * cdf, axis=0)


def weighted_mixture_quantile(q: float, loc, scale, log_w, df=None, n_iter: int = 100):
    """Return the ``q`` quantile of each weighted mixture, shape ``(n,)``, by bisection.

    The mixture CDF is monotone and its quantile lies between the smallest and largest
    component quantile, so bisection on that bracket converges (to ~1e-15 of its width in
    100 halvings).
    """
    comp = stats.norm if df is None else stats.t(df)
    qs = loc + scale * comp.ppf(q)
    lo, hi = qs.min(axis=0), qs.max(axis=0)
    for _ in range(n_iter):
        mid = 0.5 * (lo + hi)
        below = weighted_mixture_cdf(mid, loc, scale, log_w, df) < q
        lo, hi = np.where(below, mid, lo), np.where(below, hi, mid)
    return 0.5 * (lo + hi)


def gp_loo_components(est: GPRegressor) -> tuple[np.ndarray, np.ndarray]:
    """Per-draw leave-one-out predictive of an exact-GP :class:`~bayeskern.GPRegressor`.

    For draw :math:`s` with :math:`K_y = K_\\theta + \\sigma^2 I`:
    :math:`\\mu_{is} = y_i - [K_y^{-1}y]_i/[K_y^{-1}]_{ii}`,
    :math:`\\sigma^2_{is} = 1/[K_y^{-1}]_{ii}` (Rasmussen & Williams 2006, eq. 5.12), with
    :math:`[K_y^{-1}]_{ii}` the column sums of :math:`(L^{-1})^2`; in data units.

    Returns
    -------
    loc, scale : arrays, shape (S, n)
    """
    if getattr(est, "approximation_", "exact") != "exact":
        raise ValueError(
            f"est must be an exact GP regression, got approximation {est.approximation_!r}"
        )
    kernel, x_scale = est.kernel_, est.x_std_.scale
    X = jnp.asarray(est.x_std_.transform(np.asarray(est.idata_.constant_data["X"])))
    y = est.y_std_.transform(np.asarray(est.idata_.observed_data["y"]))

    def one(draw, Xt, yt):
        Linv, alpha, _ = regression_factors(kernel, draw, Xt, yt, x_scale)
        return jnp.sum(Linv * Linv, axis=0), alpha

    draws = flat_draws(est.idata_, [v for v in est.idata_.posterior.data_vars if v != "f"])
    d, alpha = (np.asarray(a) for a in map_draws(one, draws, X, jnp.asarray(y)))
    loc = (y - alpha / d) * est.y_std_.scale + est.y_std_.mean
    return loc, est.y_std_.scale / np.sqrt(d)


@dataclass
class LOOCalibration:
    """Leave-one-out calibration of a fitted Bayesian estimator (no rows held out).

    Attributes
    ----------
    kind : {"regression", "classification"}
    y : array (n,)
        Training targets (regression) or 0/1 labels (classification).
    pareto_k : array (n,)
        PSIS Pareto k per observation.
    metrics : dict
        Regression: LOO coverage and mean width of the central 50/90/95 % intervals, LOO
        RMSE of the LOO mean and NLPD. Classification:
        :func:`bayeskern.diagnostics.classification_metrics` of the LOO probabilities.
    pit : array (n,) or None
        Regression: the LOO-PIT values.
    proba : array (n,) or None
        Classification: the LOO probabilities :math:`P(y_i = 1 \\mid y_{-i})`.
    proba_draws, log_weights : arrays (S, n) or None
        Classification: per-draw LOO probabilities and their PSIS log weights (for bands).
    """

    kind: str
    y: np.ndarray
    pareto_k: np.ndarray
    metrics: dict = field(default_factory=dict)
    pit: np.ndarray | None = None
    proba: np.ndarray | None = None
    proba_draws: np.ndarray | None = None
    log_weights: np.ndarray | None = None

    @property
    def n_bad_k(self) -> int:
        """Number of observations with Pareto k above :data:`PARETO_K_MAX` (or not finite)."""
        return int(np.sum(~(self.pareto_k <= PARETO_K_MAX)))


def _regression(est, log_w, k) -> LOOCalibration:
    y = np.asarray(est.idata_.observed_data["y"], dtype=float)
    loc, scale = gp_loo_components(est)
    pit = weighted_mixture_cdf(y, loc, scale, log_w)
    w = np.exp(log_w)
    mean = np.sum(w * loc, axis=0)
    dens = special.logsumexp(log_w + stats.norm.logpdf(y, loc, scale), axis=0)
    metrics = {"rmse": float(np.sqrt(np.mean((y - mean) ** 2))), "nlpd": float(-dens.mean())}
    for p in _PROBS:
        lo = weighted_mixture_quantile((1 - p) / 2, loc, scale, log_w)
        hi = weighted_mixture_quantile((1 + p) / 2, loc, scale, log_w)
        metrics[f"coverage_{int(p * 100)}"] = float(np.mean((y >= lo) & (y <= hi)))
        metrics[f"width_{int(p * 100)}"] = float(np.mean(hi - lo))
    return LOOCalibration("regression", y, k, metrics, pit=pit)


def _labels01(est, y) -> np.ndarray:
    """Training labels as 0/1: as stored, or mapped through ``classes_``."""
    y = np.asarray(y)
    classes = np.asarray(est.classes_)
    if np.isin(y, classes).all() and not np.isin(y, [0, 1]).all():
        return (y == classes[1]).astype(int)
    return y.astype(int)


def _classification(est, idata, log_w, k) -> LOOCalibration:
    y01 = _labels01(est, idata.observed_data["y"])
    ll = np.asarray(idata.log_likelihood["y"], dtype=float)
    p_obs = np.exp(ll.reshape(-1, ll.shape[-1]))  # P(observed label | y_-i, theta_s)
    q = np.where(y01 == 1, p_obs, 1.0 - p_obs)
    proba = np.sum(np.exp(log_w) * q, axis=0)
    return LOOCalibration(
        "classification",
        y01,
        k,
        diagnostics.classification_metrics(y01, proba),
        proba=proba,
        proba_draws=q,
        log_weights=log_w,
    )


def loo_calibration(est) -> LOOCalibration:
    """Return the PSIS-LOO calibration of a fitted Bayesian estimator.

    Binary classifiers: any estimator whose ``idata_`` has ``log_likelihood`` and
    ``observed_data`` of the training labels. Regression: exact-GP
    :class:`~bayeskern.GPRegressor` (the per-draw LOO components need the model; the other
    regressors raise ``NotImplementedError``).

    Raises
    ------
    ValueError
        ``est`` has no ``idata_`` with ``log_likelihood`` and ``observed_data``, or is a
        classifier with more than two classes.
    NotImplementedError
        A regressor other than an exact-GP ``GPRegressor``.
    """
    idata = getattr(est, "idata_", None)
    if idata is None or not {"log_likelihood", "observed_data"} <= set(idata.groups()):
        raise ValueError(
            f"est ({type(est).__name__}) has no idata_ with log_likelihood and "
            "observed_data: fit a bayeskern Bayesian estimator first"
        )
    is_clf = hasattr(est, "predict_proba")
    if is_clf and len(est.classes_) != 2:
        raise ValueError(f"est has {len(est.classes_)} classes; LOO calibration is binary only")
    if not is_clf and not (
        isinstance(est, GPRegressor) and getattr(est, "approximation_", "exact") == "exact"
    ):
        raise NotImplementedError(
            f"LOO-PIT for {type(est).__name__} needs its per-draw leave-one-out predictive; "
            "only exact-GP GPRegressor provides it so far"
        )
    log_w, k = psis_log_weights(idata)
    return _classification(est, idata, log_w, k) if is_clf else _regression(est, log_w, k)
