"""The learned spectral density of the GaBaSR estimators.

Its posterior band on a frequency grid, the mixture of one draw as a kernel, and the modes the
chains found.
"""

from __future__ import annotations

from sklearn.utils.validation import check_is_fitted

from bayeskern.kernels.spectral import SpectralMixture, chain_peaks
from bayeskern.models.gabasr_spectrum import posterior_mixture_draws


class _SpectralDensityMixin:
    """Read the spectral density off the posterior draws of a fitted GaBaSR estimator."""

    def spectral_density(self, omega_grid=None, *, band: float = 0.9, n_draws: int = 200):
        """Learned spectral density on ``omega_grid`` (angular frequency, data units).

        Returns ``(omega_grid, mean, lower, upper)``: the posterior mean of
        :math:`\\rho(\\omega) = \\sum_k\\pi_k N(\\omega\\mid\\mu_k, \\sigma_k^2)` and a central
        ``band`` interval, along the first input column (1-D marginal of the mixture). With
        the Gibbs sampler the mixture of the sampled components is used.
        """
        check_is_fitted(self)
        sm = self.spectral_mixture(n_draws=n_draws)
        return sm.spectral_density_band(omega_grid, band=band)

    def spectral_mixture(
        self, n_draws: int = 200, seed: int = 0, *, posterior=None
    ) -> SpectralMixture:
        """Return the learned mixture as a kernel, in the units of ``X``.

        Frequencies are divided by the input scale (standardized angular frequency → radians
        per unit of ``x``, :func:`bayeskern.models.gabasr_spectrum.posterior_mixture_draws`).
        Posterior draws are kept in ``draws_*_`` (thinned to ``n_draws``) for
        :meth:`~bayeskern.kernels.SpectralMixture.spectral_density_band`; the kernel itself is
        the posterior-mean mixture (all draws pooled, weights averaged).

        Parameters
        ----------
        n_draws : int
            Posterior draws kept.
        seed : int
            Seed of the thinning.
        posterior : xarray.Dataset, optional
            A subset of ``idata_.posterior`` (e.g. one chain, :meth:`chain_modes`); default
            all of it.

        Returns
        -------
        SpectralMixture
        """
        check_is_fitted(self)
        post = self.idata_.posterior if posterior is None else posterior
        w, m, s = posterior_mixture_draws(post, self.x_scaler_.scale)
        return SpectralMixture.from_draws(w, m, s, n_draws=n_draws, seed=seed)

    def chain_modes(self, *, dim: int = 0, min_height: float = 0.05, n_draws: int = 100):
        """Which spectral peaks each chain holds: a per-chain mode summary.

        For every chain, the local maxima of that chain's posterior-mean spectral density
        :math:`\\bar\\rho_c(\\omega) = \\frac1S\\sum_s\\sum_k\\pi_k^{(s)}
        N(\\omega\\mid\\mu_k^{(s)}, \\sigma_k^{(s)2})` along input column ``dim``, keeping those
        at least ``min_height`` times the chain's highest
        (:func:`bayeskern.kernels.spectral.chain_peaks`). The density is invariant to the
        labelling of the components, so chains that hold the same peaks explored the same
        mode even when their component R-hat is large; chains that disagree here have not.

        Returns
        -------
        pandas.DataFrame
            One row per (chain, peak): ``chain``, ``frequency`` (cycles per unit of column
            ``dim``), ``height`` (density relative to the chain's highest peak).
        """
        check_is_fitted(self)
        post = self.idata_.posterior
        pooled = self.spectral_mixture(n_draws=n_draws, posterior=post)
        chains = [
            self.spectral_mixture(n_draws=n_draws, posterior=post.isel(chain=[c]))
            for c in range(post.sizes["chain"])
        ]
        return chain_peaks(pooled, chains, dim=dim, min_height=min_height)
