"""Spectral-mixture kernel: the kernel object behind GaBaSR's learned spectral density.

By Bochner's theorem (Pena-Llamas et al. 2023, eq. 1) a stationary kernel is the Fourier transform
of a spectral density. For a Gaussian mixture :math:`\\rho(\\omega) = \\sum_k \\pi_k
N(\\omega\\mid\\mu_k, \\mathrm{diag}\\,\\sigma_k^2)` (symmetrized, the kernel being real) it is
exactly

.. math:: \\kappa(\\tau) = \\sum_k \\pi_k \\exp\\big(-\\tfrac12\\|\\sigma_k\\odot\\tau\\|^2\\big)
          \\cos(\\mu_k^\\top\\tau), \\qquad \\tau = x - x',

the spectral-mixture kernel of Wilson & Adams (2013) in angular frequency. GaBaSR
(Pena-Llamas et al. 2023, section 3.2) learns :math:`(\\pi, \\mu, \\sigma)` with a Dirichlet-process
prior and uses random Fourier features of :math:`\\rho` (eq. 4); :class:`SpectralMixture` gives the
exact kernel (for tests: random features converge to it), the learned density with its
posterior band (:meth:`SpectralMixture.from_draws`), and a kernel usable in
:class:`bayeskern.GPRegressor` whose components are initialized from the periodogram.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import numpyro.distributions as dist

from .base import Hyper, Kernel

__all__ = [
    "SpectralMixture",
    "spectral_mixture_kernel",
    "mixture_density",
    "periodogram_peaks",
    "density_peaks",
    "chain_peaks",
]


def spectral_mixture_kernel(tau, weights, means, scales):
    """:math:`\\sum_k \\pi_k e^{-\\frac12\\|\\sigma_k\\odot\\tau\\|^2}\\cos(\\mu_k^\\top\\tau)`.

    ``tau`` (..., d); ``weights`` (K,), ``means`` and ``scales`` (K, d).
    """
    tau = jnp.asarray(tau)[..., None, :]
    env = jnp.exp(-0.5 * jnp.sum((scales * tau) ** 2, axis=-1))
    return jnp.sum(weights * env * jnp.cos(jnp.sum(means * tau, axis=-1)), axis=-1)


def mixture_density(omega, weights, means, scales):
    """Return the symmetrized 1-D mixture density at ``omega`` (n,); parameters (K,).

    The density is :math:`\\tfrac12\\sum_k\\pi_k[N(\\omega\\mid\\mu_k,
    \\sigma_k^2) + N(\\omega\\mid-\\mu_k, \\sigma_k^2)]`.
    """
    omega = np.asarray(omega, float)[:, None]
    pdf = 0.5 * (_npdf(omega, means, scales) + _npdf(omega, -means, scales))
    return pdf @ weights


def _npdf(x, m, s):
    return np.exp(-0.5 * ((x - m) / s) ** 2) / (np.sqrt(2 * np.pi) * s)


def periodogram_peaks(
    x: np.ndarray, r: np.ndarray, n_peaks: int, w_min: float, w_max: float, n_grid: int = 4000
) -> np.ndarray:
    """Angular frequencies of the ``n_peaks`` highest Lomb-Scargle peaks of residuals ``r``.

    Peaks closer than ``2 w_min`` to one another are merged (one component per spectral
    line); used to initialize the component means for 1-D inputs.
    """
    from scipy.signal import lombscargle

    grid = np.linspace(w_min, w_max, n_grid)
    power = lombscargle(np.asarray(x, float), np.asarray(r, float) - np.mean(r), grid)
    is_peak = np.r_[False, (power[1:-1] > power[:-2]) & (power[1:-1] >= power[2:]), False]
    order = np.argsort(-np.where(is_peak, power, -np.inf))
    peaks: list[float] = []
    for i in order:
        if not is_peak[i] or len(peaks) == n_peaks:
            break
        if all(abs(grid[i] - q) > 2 * w_min for q in peaks):
            peaks.append(float(grid[i]))
    return np.asarray(peaks)


class SpectralMixture(Kernel):
    """Gaussian spectral-mixture kernel (exact), fixed or learned.

    .. math:: k(x, x') = \\sum_k \\pi_k \\exp\\big(-\\tfrac12\\|\\sigma_k\\odot(x-x')\\|^2\\big)
              \\cos\\big(\\mu_k^\\top(x-x')\\big)

    Parameters
    ----------
    n_components : int, default 3
        Number of mixture components :math:`K` (used when the components are learned).
    weights : (K,) array, optional
        Mixture weights :math:`\\pi_k`.
    means : (K, d) array, optional
        Component means :math:`\\mu_k` (angular frequency, radians per unit of ``x``).
    scales : (K, d) array, optional
        Component standard deviations :math:`\\sigma_k` (same units; an RBF of length-scale
        :math:`\\ell` is one component with :math:`\\mu = 0,\\ \\sigma = 1/\\ell`).

    Notes
    -----
    With all three arrays given, the kernel is that fixed mixture: ``k(X1, X2)`` evaluates it
    as given (classical use, in the units of ``X``) and :meth:`spectral_density` returns it.
    Without them the kernel is data-dependent: :func:`bayeskern.learning.fit_spectral_mixture`
    (called by :class:`~bayeskern.GPRegressor` on standardized inputs) places the components at the
    highest Lomb-Scargle peaks of the detrended targets (first column), and the GP samples
    each component's weight (``HalfNormal(1)``), mean (normal around the fitted peak, width
    one spectral resolution :math:`2\\pi/\\mathrm{span}`) and spread (log-normal around one
    resolution) in standardized units.
    """

    def __init__(self, n_components: int = 3, weights=None, means=None, scales=None):
        self.n_components = n_components
        self.weights = weights
        self.means = means
        self.scales = scales

    # ---------------------------------------------------------------- fixed / fitted arrays
    def _fixed(self):
        if self.weights is None or self.means is None or self.scales is None:
            return None
        w = np.atleast_1d(np.asarray(self.weights, float))
        m = np.asarray(self.means, float).reshape(len(w), -1)
        s = np.asarray(self.scales, float).reshape(len(w), -1)
        if np.any(w < 0) or np.any(s <= 0):
            raise ValueError("SpectralMixture: weights must be >= 0 and scales > 0")
        return w, m, s

    @property
    def is_fitted(self) -> bool:
        """Return ``True`` with fixed components or once fitted."""
        return self._fixed() is not None or hasattr(self, "means_")

    def hyperparameters(self) -> dict[str, Hyper]:
        """Return the mixture's hyper-parameters (none with fixed components)."""
        fx = self._fixed()
        if fx is not None:
            # fixed components: nothing to sample (values already in the units of X)
            return {}
        if not hasattr(self, "means_"):
            raise RuntimeError("SpectralMixture without fixed components must be fitted first")
        res = self.resolution_  # no float(): a tracer when the kernel is a jit argument
        hp = {}
        for k in range(int(self.n_components)):
            m = jnp.asarray(self.means_[k])
            s = jnp.asarray(self.scales_[k])
            hp[f"weight_{k}"] = Hyper(None, lambda: dist.HalfNormal(1.0), 1.0)
            hp[f"mean_{k}"] = Hyper(
                None, lambda m=m: dist.Normal(m, res).to_event(1), self.means_[k]
            )
            hp[f"scale_{k}"] = Hyper(
                None, lambda s=s: dist.LogNormal(jnp.log(s), 1.0).to_event(1), self.scales_[k]
            )
        return hp

    def _params(self, theta):
        fx = self._fixed()
        if fx is not None:
            return tuple(jnp.asarray(a) for a in fx)
        K = int(self.n_components)
        w = jnp.stack([self._p(theta, f"weight_{k}") for k in range(K)])
        m = jnp.stack(
            [jnp.broadcast_to(self._p(theta, f"mean_{k}"), self.means_[k].shape) for k in range(K)]
        )
        s = jnp.stack(
            [
                jnp.broadcast_to(self._p(theta, f"scale_{k}"), self.scales_[k].shape)
                for k in range(K)
            ]
        )
        return w, m, s

    def evaluate(self, theta, x1, x2):
        """Return the kernel value for one pair of points."""
        w, m, s = self._params(theta)
        return spectral_mixture_kernel(x1 - x2, w, m, s)

    def gram(self, theta, X1, X2):
        """Return the Gram matrix."""
        w, m, s = self._params(theta)
        return spectral_mixture_kernel(X1[:, None, :] - X2[None, :, :], w, m, s)

    def diag(self, theta, X):
        """Return the total weight for every row of ``X``."""
        w, _, _ = self._params(theta)
        return jnp.full(X.shape[0], jnp.sum(w), dtype=X.dtype)

    # ---------------------------------------------------------------- spectral density
    @classmethod
    def from_draws(
        cls, weights, means, scales, *, n_draws: int = 200, seed: int = 0
    ) -> SpectralMixture:
        """Return the posterior-mean mixture of posterior draws of a spectral mixture.

        Parameters
        ----------
        weights : array, shape (S, K)
            Mixture weights of each of ``S`` draws.
        means, scales : arrays, shape (S, K, d)
            Component means and standard deviations, angular frequency in the units of ``x``.
        n_draws : int
            Draws kept (a random subset without replacement, in order).
        seed : int
            Seed of the subset.

        Returns
        -------
        SpectralMixture
            The kept draws pooled into one fixed mixture (weights divided by the number of
            draws), with the draws in ``draws_weights_``, ``draws_means_``, ``draws_scales_``
            for :meth:`spectral_density_band`.
        """
        w, m, s = np.asarray(weights), np.asarray(means), np.asarray(scales)
        idx = np.random.default_rng(seed).choice(len(w), size=min(n_draws, len(w)), replace=False)
        idx.sort()
        w, m, s = w[idx], m[idx], s[idx]
        S, K = w.shape
        k = cls(K * S, (w / S).ravel(), m.reshape(S * K, -1), s.reshape(S * K, -1))
        k.draws_weights_, k.draws_means_, k.draws_scales_ = w, m, s
        return k

    @classmethod
    def from_estimator(cls, est, n_draws: int = 200, seed: int = 0) -> SpectralMixture:
        """Return the learned mixture of a fitted GaBaSR estimator: ``est.spectral_mixture(...)``.

        Kept for compatibility; the estimator reads its own posterior
        (:meth:`bayeskern.GaBaSRRegressor.spectral_mixture`) and calls :meth:`from_draws`.
        """
        return est.spectral_mixture(n_draws=n_draws, seed=seed)

    def _grid(self, omega_grid, dim):
        if omega_grid is not None:
            return np.asarray(omega_grid, float)
        w, m, s = self._fixed()
        hi = float(np.max(np.abs(m[:, dim]) + 4 * s[:, dim]))
        return np.linspace(0.0, hi, 512)

    def spectral_density(self, omega_grid=None, dim: int = 0):
        """Symmetrized mixture density along input column ``dim`` at ``omega_grid``."""
        w, m, s = self._fixed()
        grid = self._grid(omega_grid, dim)
        return mixture_density(grid, w, m[:, dim], s[:, dim])

    def spectral_density_band(self, omega_grid=None, band: float = 0.9, dim: int = 0):
        """``(grid, mean, lower, upper)``: posterior mean density and central ``band``.

        Needs posterior draws (:meth:`from_draws`); a fixed mixture returns a band of
        zero width.
        """
        grid = self._grid(omega_grid, dim)
        if not hasattr(self, "draws_weights_"):
            dens = self.spectral_density(grid, dim)
            return grid, dens, dens, dens
        per = np.stack(
            [
                mixture_density(grid, w, m[:, dim], s[:, dim])
                for w, m, s in zip(
                    self.draws_weights_, self.draws_means_, self.draws_scales_, strict=True
                )
            ]
        )
        a = (1 - band) / 2
        return grid, per.mean(0), np.quantile(per, a, axis=0), np.quantile(per, 1 - a, axis=0)

    def get_state(self):
        """Return the fitted arrays for saving."""
        return {
            k: np.asarray(v)
            for k, v in vars(self).items()
            if k.endswith("_") and k != "name_" and isinstance(v, (np.ndarray, jax.Array))
        }


def density_peaks(density: np.ndarray, min_height: float = 0.0) -> np.ndarray:
    """Return the indices of the local maxima of a density on a grid.

    Index :math:`i` is a peak when :math:`\\rho_i > \\rho_{i-1}` and
    :math:`\\rho_i \\ge \\rho_{i+1}` (an end point when it exceeds its one neighbour), and
    it is kept when :math:`\\rho_i \\ge h \\max_j \\rho_j`, :math:`h` = ``min_height``.

    Parameters
    ----------
    density : array, shape (n,)
        Density on an increasing grid, ``n >= 2``.
    min_height : float
        Smallest height kept, relative to the highest value.

    Returns
    -------
    array of int
        Increasing indices.
    """
    dens = np.asarray(density)
    top = dens.max()
    peak = np.r_[
        dens[0] > dens[1], (dens[1:-1] > dens[:-2]) & (dens[1:-1] >= dens[2:]), dens[-1] > dens[-2]
    ]
    return np.flatnonzero(peak & (dens >= min_height * top))


def chain_peaks(
    pooled: SpectralMixture, chains, *, dim: int = 0, min_height: float = 0.05, n_grid: int = 1024
):
    """Which spectral peaks each chain holds: the local maxima of each chain's density.

    On a grid of ``n_grid`` angular frequencies from 0 to the default upper end of
    ``pooled`` (all chains together: :math:`\\max_k |\\mu_k| + 4\\sigma_k` along ``dim``),
    the density :math:`\\bar\\rho_c(\\omega)` of every chain's mixture, and its peaks at least
    ``min_height`` times that chain's highest (:func:`density_peaks`). The density does not
    change when the components are relabelled, so chains that hold the same peaks explored
    the same mode even when their component R-hat is large.

    Parameters
    ----------
    pooled : SpectralMixture
        The mixture of all chains (fixes the grid).
    chains : sequence of SpectralMixture
        One mixture per chain.
    dim : int
        Input column.
    min_height : float
        Smallest peak kept, relative to the chain's highest.
    n_grid : int
        Grid size.

    Returns
    -------
    pandas.DataFrame
        One row per (chain, peak): ``chain``, ``frequency`` (cycles per unit,
        :math:`\\omega/2\\pi`), ``height`` (density relative to the chain's highest peak).
    """
    import pandas as pd

    hi = pooled._grid(None, dim)[-1]
    grid = np.linspace(0.0, hi, n_grid)
    rows = []
    for c, mixture in enumerate(chains):
        dens = mixture.spectral_density(grid, dim=dim)
        top = dens.max()
        for i in density_peaks(dens, min_height):
            rows.append((c, grid[i] / (2 * np.pi), dens[i] / top))
    return pd.DataFrame(rows, columns=["chain", "frequency", "height"])
