"""The learned spectral density of a GaBaSR posterior, as Gaussian-mixture draws.

Each of the three GaBaSR models names its spectral parameters differently; this module
reads any of them into one form, mixture weights :math:`\\pi` and diagonal components
:math:`N(\\mu_k, \\mathrm{diag}\\,\\sigma_k^2)` per posterior draw, in angular frequency per
unit of the data's inputs, ready for
:meth:`bayeskern.kernels.SpectralMixture.from_draws`
(:func:`posterior_mixture_draws`).

For the exact model (the spectral-mixture GP of
:func:`bayeskern.models.gabasr.gabasr_exact_regression`) it also gives the density in
variance units along the first input column, in cycles per unit of that column, with a
pointwise posterior band (:func:`spectral_density_band`), and a summary of the components
found (:func:`mixture_components`). GaBaSR: Pena-Llamas et al. (2023); spectral-mixture
kernel: Wilson & Adams (2013).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import NamedTuple

import numpy as np

__all__ = [
    "posterior_mixture_draws",
    "exact_spectral_density",
    "frequency_grid",
    "DensityBand",
    "spectral_density_band",
    "mixture_components",
]


def posterior_mixture_draws(post: Mapping, x_scale) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Return the spectral mixture of every posterior draw, in the units of the inputs.

    * Exact model (:func:`bayeskern.models.gabasr.gabasr_exact_regression`, sites
      ``amplitude``, ``sigma0``, ``mu``, ``sigma``): weights
      :math:`\\pi_k = a_k^2/\\sum_j a_j^2`; component 0 at zero frequency with spreads
      ``sigma0`` in every column; component :math:`k \\ge 1` at ``mu[k-1]``, spread
      ``sigma[k-1]`` along the first column and ``sigma0`` along the others.
    * Random-feature model, NUTS (sites ``weights``, ``mu``, ``sigma``): as sampled.
    * Random-feature model, Gibbs (sites ``weights``, ``mu``, ``cov``): the square roots
      of the diagonals of the component covariances.

    Frequencies are divided by the input scale :math:`s` (standardized angular frequency
    :math:`\\to` radians per unit of :math:`x`): :math:`\\mu/s`, :math:`\\sigma/s`.

    Parameters
    ----------
    post : mapping
        The posterior (an ``xarray.Dataset`` or a dict), arrays ``(chain, draw, ...)``.
    x_scale : array, shape (d,)
        Scale of the input standardization.

    Returns
    -------
    weights : array, shape (S, K)
    means, scales : arrays, shape (S, K, d)
        ``S`` = chains × draws.
    """
    scale = np.asarray(x_scale)
    if "amplitude" in post and "weights" not in post:  # exact model
        a2 = np.asarray(post["amplitude"]) ** 2
        w = a2 / a2.sum(axis=-1, keepdims=True)
        s0 = np.asarray(post["sigma0"])  # (C, S, d)
        C, S_, d = s0.shape
        if "mu" in post:
            mu, sg = np.asarray(post["mu"]), np.asarray(post["sigma"])  # (C, S, K-1)
        else:
            mu = sg = np.zeros((C, S_, 0))
        m = np.zeros((C, S_, w.shape[-1], d))
        s = np.repeat(s0[:, :, None, :], w.shape[-1], axis=2)
        m[:, :, 1:, 0] = mu
        s[:, :, 1:, 0] = sg
    elif "sigma" in post:  # NUTS: diagonal components
        w = np.asarray(post["weights"])
        m = np.asarray(post["mu"])
        s = np.asarray(post["sigma"])
    else:  # Gibbs: full covariances, take their diagonals
        w = np.asarray(post["weights"])
        m = np.asarray(post["mu"])
        s = np.sqrt(np.diagonal(np.asarray(post["cov"]), axis1=-2, axis2=-1))
    w = w.reshape(-1, w.shape[-1])
    m = m.reshape(-1, *m.shape[-2:]) / scale
    s = s.reshape(-1, *s.shape[-2:]) / scale
    return w, m, s


# --------------------------------------------------------------------------- exact model
def _positive(name: str, value) -> float:
    """``value`` as a positive finite float, or a ``ValueError`` naming ``name``."""
    v = np.ravel(np.asarray(value, dtype=float))
    if v.size == 0 or not np.isfinite(v[0]) or v[0] <= 0:
        raise ValueError(f"{name} must be a positive finite number, got {value!r}")
    return float(v[0])


def _exact_draws(post: Mapping) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Flattened draws of the exact model along input column 0.

    Returns ``amplitude`` (S, K), ``sigma0`` (S,) of column 0, ``mu`` and ``sigma``
    (S, K - 1; zero columns when the model has the smooth component only), standardized
    angular units.
    """
    if "amplitude" not in post or "sigma0" not in post or "weights" in post:
        raise ValueError(
            "post must be the posterior of GaBaSR's exact model (sites "
            "'amplitude', 'sigma0', 'mu', 'sigma'); got variables "
            f"{sorted(post)}"
        )
    a = np.asarray(post["amplitude"], dtype=float)
    a = a.reshape(-1, a.shape[-1])
    s0 = np.asarray(post["sigma0"], dtype=float)
    s0 = s0.reshape(-1, s0.shape[-1])[:, 0]
    if "mu" in post:
        mu = np.asarray(post["mu"], dtype=float).reshape(len(a), -1)
        sg = np.asarray(post["sigma"], dtype=float).reshape(len(a), -1)
    else:
        mu = sg = np.zeros((len(a), 0))
    return a, s0, mu, sg


def _cycles(sigma0, mu, sigma, x_scale) -> tuple[np.ndarray, np.ndarray]:
    r"""Centres :math:`|\mu_k'|` and spreads :math:`\sigma_k'` (S, K) in cycles per unit of x.

    Component 0 (zero frequency, spread ``sigma0``) first; standardized angular frequency
    :math:`\omega` becomes :math:`\omega/(2\pi s_x)`.
    """
    c = 2 * np.pi * _positive("x_scale", x_scale)
    s0 = np.ravel(sigma0)
    locs = np.abs(np.column_stack([np.zeros(len(s0)), np.reshape(mu, (len(s0), -1))])) / c
    sds = np.column_stack([s0, np.reshape(sigma, (len(s0), -1))]) / c
    return locs, sds


def exact_spectral_density(
    frequency, amplitude, sigma0, mu, sigma, *, x_scale, y_scale=1.0
) -> np.ndarray:
    """Spectral density of exact-model draws along input column 0, in variance units.

    The stationary part of the exact GaBaSR kernel (Pena-Llamas et al. 2023), the
    spectral-mixture kernel of Wilson & Adams (2013),
    :math:`k(\\tau) = a_0^2 e^{-\\frac12\\sigma_0^2\\tau^2}
    + \\sum_{k\\ge1} a_k^2 e^{-\\frac12\\sigma_k^2\\tau^2}\\cos(\\mu_k\\tau)`, is the Fourier
    transform of the two-sided density

    .. math:: S(f) = s_y^2\\Big[a_0^2 N(f\\mid 0, \\sigma_0'^2) + \\sum_{k\\ge1} \\frac{a_k^2}{2}
              \\big(N(f\\mid \\mu_k', \\sigma_k'^2) + N(f\\mid -\\mu_k', \\sigma_k'^2)\\big)\\Big],

    with frequencies in cycles per unit of the input, :math:`\\mu_k' = \\mu_k/(2\\pi s_x)`,
    :math:`\\sigma_k' = \\sigma_k/(2\\pi s_x)` (standardized angular frequency :math:`\\omega`
    to cycles per data unit: :math:`\\omega/(2\\pi s_x)`). It integrates to the stationary
    variance, :math:`\\int S(f)\\,df = s_y^2\\sum_k a_k^2`.

    Parameters
    ----------
    frequency : array, shape (F,)
        Frequencies in cycles per unit of input column 0 (any sign).
    amplitude : array, shape (S, K)
        Component amplitudes :math:`a_k` (standardized target units), component 0 first.
    sigma0 : array, shape (S,)
        Spread of the zero-frequency component along column 0 (standardized angular).
    mu, sigma : arrays, shape (S, K - 1)
        Centres and spreads of the periodic components (standardized angular).
    x_scale : float
        Scale :math:`s_x` of the standardization of input column 0.
    y_scale : float, default 1.0
        Scale :math:`s_y` of the target standardization (1: standardized variance).

    Returns
    -------
    array, shape (S, F)
        :math:`S(f)` per draw, variance per (cycle per unit of x).
    """
    sy2 = _positive("y_scale", y_scale) ** 2
    f = np.asarray(frequency, dtype=float)
    if f.ndim != 1 or not np.all(np.isfinite(f)):
        raise ValueError(f"frequency must be a 1-D array of finite values, shape {f.shape}")
    a2 = np.atleast_2d(np.asarray(amplitude, dtype=float)) ** 2 * sy2
    locs, sds = _cycles(sigma0, mu, sigma, x_scale)
    if locs.shape != a2.shape:
        raise ValueError(
            f"amplitude has {a2.shape[1]} components but mu has "
            f"{locs.shape[1] - 1} periodic ones (expected {a2.shape[1] - 1})"
        )
    out = np.zeros((len(a2), f.size))
    for k in range(a2.shape[1]):  # K is small; (S, F) per component
        m, s = locs[:, k : k + 1], sds[:, k : k + 1]
        both = np.exp(-0.5 * ((f - m) / s) ** 2) + np.exp(-0.5 * ((f + m) / s) ** 2)
        out += a2[:, k : k + 1] * both / (2 * np.sqrt(2 * np.pi) * s)
    return out


def frequency_grid(post: Mapping, x_scale, *, n: int = 400) -> np.ndarray:
    """Frequencies (cycles per unit of input column 0) at which to draw the density.

    ``n`` even points on :math:`[0, 1.25 f_{\\max}]`, :math:`f_{\\max}` the 99th percentile
    over draws of the largest :math:`|\\mu_k'| + 4\\sigma_k'`, plus 101 points across the
    1st-99th percentile range of :math:`|\\mu_k'| \\pm 4\\sigma_k'` of each component (so
    that a narrow peak is resolved whatever ``n``).

    Parameters
    ----------
    post : mapping
        Posterior of the exact model (arrays ``(chain, draw, ...)``).
    x_scale : float or array
        Scale of the input standardization (its first entry is column 0's).
    n : int, default 400
        Points of the even grid.

    Returns
    -------
    array
        Sorted, distinct, non-negative frequencies.
    """
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 2:
        raise ValueError(f"n must be an integer >= 2, got {n!r}")
    _, s0, mu, sg = _exact_draws(post)
    locs, sds = _cycles(s0, mu, sg, x_scale)
    lo = np.clip(np.percentile(locs - 4 * sds, 1, axis=0), 0, None)
    hi = np.percentile(locs + 4 * sds, 99, axis=0)
    parts = [np.linspace(0, 1.25 * hi.max(), n)]
    parts += [np.linspace(a, b, 101) for a, b in zip(lo, hi, strict=True)]
    return np.unique(np.concatenate(parts))


class DensityBand(NamedTuple):
    """Pointwise posterior summary of a spectral density (:func:`spectral_density_band`).

    Attributes
    ----------
    frequency : array, shape (F,)
        Cycles per unit of input column 0.
    lower, median, upper : arrays, shape (F,)
        Pointwise quantiles :math:`(1 - b)/2`, 0.5, :math:`(1 + b)/2` of the density.
    band : float
        The central probability :math:`b`.
    """

    frequency: np.ndarray
    lower: np.ndarray
    median: np.ndarray
    upper: np.ndarray
    band: float


def spectral_density_band(
    post: Mapping, x_scale, frequency=None, *, y_scale=1.0, band: float = 0.9, n_grid: int = 400
) -> DensityBand:
    """Median and central ``band`` of the exact model's spectral density over the draws.

    Every posterior draw gives a density :math:`S^{(s)}(f)`
    (:func:`exact_spectral_density`: :math:`\\sum_k a_k^2 N(f\\mid\\pm\\mu_k',
    \\sigma_k'^2)`, the zero-frequency component :math:`N(f\\mid 0, \\sigma_0'^2)`); the band
    is pointwise in :math:`f`: the quantiles of :math:`\\{S^{(s)}(f)\\}_s` at each frequency.

    Parameters
    ----------
    post : mapping
        Posterior of the exact model (``xarray.Dataset`` or dict, arrays
        ``(chain, draw, ...)``; sites ``amplitude``, ``sigma0``, ``mu``, ``sigma``).
    x_scale : float or array
        Scale of the input standardization (its first entry is column 0's).
    frequency : array, optional
        Cycles per unit of input column 0; default :func:`frequency_grid`.
    y_scale : float, default 1.0
        Scale of the target standardization: the density is in target units squared per
        (cycle per unit of x).
    band : float, default 0.9
        Central probability of the band, in (0, 1).
    n_grid : int, default 400
        Points of the default grid.

    Returns
    -------
    DensityBand
    """
    if not 0 < band < 1:
        raise ValueError(f"band must be in (0, 1), got {band!r}")
    a, s0, mu, sg = _exact_draws(post)
    f = frequency_grid(post, x_scale, n=n_grid) if frequency is None else frequency
    dens = exact_spectral_density(f, a, s0, mu, sg, x_scale=x_scale, y_scale=y_scale)
    lo, med, hi = np.quantile(dens, [(1 - band) / 2, 0.5, (1 + band) / 2], axis=0)
    return DensityBand(np.asarray(f, dtype=float), lo, med, hi, float(band))


def _quantiles(v: np.ndarray, band: float) -> tuple[float, float, float]:
    """(median, lower, upper) of ``v`` with a central ``band``."""
    q = np.quantile(v, [0.5, (1 - band) / 2, (1 + band) / 2])
    return float(q[0]), float(q[1]), float(q[2])


def mixture_components(post: Mapping, x_scale, *, band: float = 0.9) -> list[dict]:
    """Summarize the components of the exact model's spectral mixture over the draws.

    Component 0 is the smooth (zero-frequency) one; the periodic components are ordered by
    frequency within each draw (component 1 is the lowest frequency of every draw), which
    undoes label switching between chains. For each, over the draws:

    * ``frequency`` :math:`|\\mu_k|/(2\\pi s_x)` in cycles per unit of x, and ``period``
      :math:`2\\pi s_x/|\\mu_k|` in units of x (NaN for component 0);
    * ``share`` :math:`a_k^2/\\sum_j a_j^2` of the stationary variance (the polynomial trend
      is not part of the mixture);
    * ``length`` :math:`\\ell_k = s_x/\\sigma_k` in units of x: the component's correlation
      is :math:`\\cos(2\\pi\\tau/P_k)\\, e^{-\\tau^2/(2\\ell_k^2)}`, so its oscillation stays
      coherent over lags of about :math:`\\ell_k` (the envelope is :math:`e^{-1/2}` at
      :math:`\\tau = \\ell_k`); for component 0 the squared-exponential length-scale.

    Parameters
    ----------
    post, x_scale
        As for :func:`frequency_grid`.
    band : float, default 0.9
        Central probability of the intervals.

    Returns
    -------
    list of dict
        One per component: ``component`` (int), ``kind`` (``"smooth"`` or
        ``"periodic"``), and ``frequency``, ``period``, ``share``, ``length``, each a tuple
        ``(median, lower, upper)``.
    """
    if not 0 < band < 1:
        raise ValueError(f"band must be in (0, 1), got {band!r}")
    sx = _positive("x_scale", x_scale)
    a, s0, mu, sg = _exact_draws(post)
    order = np.argsort(np.abs(mu), axis=1)
    mu = np.take_along_axis(np.abs(mu), order, axis=1)
    sg = np.take_along_axis(sg, order, axis=1)
    a2 = a**2
    a2 = np.column_stack([a2[:, :1], np.take_along_axis(a2[:, 1:], order, axis=1)])
    share = a2 / a2.sum(axis=1, keepdims=True)
    nan = (float("nan"),) * 3
    out = [
        {
            "component": 0,
            "kind": "smooth",
            "frequency": (0.0, 0.0, 0.0),
            "period": nan,
            "share": _quantiles(share[:, 0], band),
            "length": _quantiles(sx / s0, band),
        }
    ]
    for k in range(mu.shape[1]):
        out.append(
            {
                "component": k + 1,
                "kind": "periodic",
                "frequency": _quantiles(mu[:, k] / (2 * np.pi * sx), band),
                "period": _quantiles(2 * np.pi * sx / mu[:, k], band),
                "share": _quantiles(share[:, k + 1], band),
                "length": _quantiles(sx / sg[:, k], band),
            }
        )
    return out


#: least number of grid points per resolution in :func:`significant_peaks`
GRID_PER_RESOLUTION = 4
#: least distance of a line from another, in resolutions :math:`2\pi/\mathrm{span}`
LINE_SEPARATION = 3


def significant_peaks(
    x: np.ndarray,
    r: np.ndarray,
    *,
    w_min: float,
    w_max: float,
    max_peaks: int = 3,
    fap: float = 1e-3,
    n_grid: int = 4000,
) -> np.ndarray:
    r"""Significant spectral lines of a residual series by iterative pre-whitening.

    At each step the periodogram of the current residual :math:`r`,

    .. math:: z(\omega) = \frac{\mathrm{RSS}_0 - \mathrm{RSS}(\omega)}
              {\mathrm{med}_{|\omega'-\omega| \le 10\Delta}[\mathrm{RSS}_0 -
              \mathrm{RSS}(\omega')] / \ln 2},

    is the drop of the residual sum of squares when :math:`a\cos\omega x + b\sin\omega x` is
    fitted by least squares (Lomb 1976; Scargle 1982), relative to its running median over
    :math:`\pm 10` resolutions :math:`\Delta = 2\pi/\mathrm{span}` (the local continuum:
    under locally white noise :math:`z(\omega) \sim \mathrm{Exp}(1)`, whose median is
    :math:`\ln 2`; smooth red-noise variation raises the continuum, not :math:`z`). The
    highest local maximum of :math:`z` inside :math:`(w_{min}, w_{max})` is kept when (with
    :math:`z` the smaller of the ratios to the continuum and to the white level
    :math:`\mathrm{RSS}_0/n`, and at least :data:`LINE_SEPARATION` resolutions from zero
    frequency and from the lines already found) its false-alarm probability
    :math:`1 - (1 - e^{-z})^{M}`, :math:`M = (w_{max} - w_{min}) / (2\pi/\mathrm{span})`
    independent frequencies (Horne & Baliunas 1986), is below ``fap``; the fitted sinusoid is
    then removed and the search repeats, up to ``max_peaks`` lines.

    Parameters
    ----------
    x : (n,) input column; r : (n,) residuals (detrended targets).
    w_min, w_max : angular-frequency search band (radians per unit of ``x``).
    max_peaks : int
        Most lines returned.
    fap : float
        False-alarm probability of a kept line.
    n_grid : int
        Least grid size of the search; raised to :data:`GRID_PER_RESOLUTION` points per
        resolution :math:`2\pi/\mathrm{span}` (a line's peak is about one resolution wide,
        and a coarser grid steps over it).

    Returns
    -------
    (p,) angular frequencies, ``p <= max_peaks``, in the order found (strongest first);
    empty when no line is significant, the band is empty, or there are fewer than 8 rows.
    """
    x = np.asarray(x, float)
    r = np.asarray(r, float) - np.mean(r)
    n = len(x)
    span = float(np.ptp(x)) if n else 0.0
    if n < 8 or span <= 0 or not w_max > w_min or max_peaks < 1:
        return np.zeros(0)
    n_indep = max((w_max - w_min) * span / (2 * np.pi), 1.0)
    n_grid = max(n_grid, int(np.ceil(GRID_PER_RESOLUTION * n_indep)))
    grid = np.linspace(w_min, w_max, n_grid)
    peaks: list[float] = []
    for _ in range(max_peaks):
        rss0 = float(r @ r)
        if rss0 <= 1e-12 * n:
            break
        z = np.empty(n_grid)
        for sl in np.array_split(np.arange(n_grid), max(1, n_grid * n // 2_000_000)):
            ph = np.outer(grid[sl], x)
            c, s = np.cos(ph), np.sin(ph)
            cc, ss, cs = (c * c).sum(1), (s * s).sum(1), (c * s).sum(1)
            cr, sr = c @ r, s @ r
            det = np.maximum(cc * ss - cs**2, 1e-300)
            z[sl] = (ss * cr**2 - 2 * cs * cr * sr + cc * sr**2) / det
        # against the local continuum (running median over +-10 resolutions, over ln 2, the
        # median of Exp(1)), not the total residual variance: smooth (red-noise) residual
        # variation, which the zero-frequency component models, must not count as a line
        half = max(1, int(round(10 * n_grid / n_indep)))
        step = max(1, half // 8)
        padded = np.pad(z, half, mode="reflect")
        windows = np.lib.stride_tricks.sliding_window_view(padded, 2 * half + 1)[::step]
        continuum = np.repeat(np.median(windows, axis=1), step)[:n_grid] / np.log(2.0)
        # a line must stand out both from the white-noise level and from the continuum
        z = np.minimum(z / (2 * rss0 / n), z / np.maximum(continuum, 1e-300))
        # a line is a local maximum of the periodogram inside the band: the highest point
        # at an edge of the band is the flank of something outside it
        local = np.zeros(n_grid, bool)
        local[1:-1] = (z[1:-1] >= z[:-2]) & (z[1:-1] >= z[2:])
        z = np.where(local, z, 0.0)
        # nor is one within LINE_SEPARATION resolutions of a line already found (leakage of
        # an amplitude-modulated line) or of zero frequency (the smooth component's centre)
        for q in (0.0, *peaks):
            z[np.abs(grid - q) < LINE_SEPARATION * (2 * np.pi / span)] = 0.0
        i = int(np.argmax(z))
        if z[i] <= 0.0 or -np.expm1(n_indep * np.log1p(-np.exp(-z[i]))) > fap:
            break
        w = float(grid[i])
        A = np.column_stack([np.cos(w * x), np.sin(w * x)])
        r = r - A @ np.linalg.lstsq(A, r, rcond=None)[0]
        peaks.append(w)
    return np.asarray(peaks)
