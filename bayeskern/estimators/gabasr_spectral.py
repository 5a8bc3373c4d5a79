"""The spectral-mixture GP of the GaBaSR regressor: exact, or on a Hilbert-space basis.

Sampling it (``model_`` ``"exact"`` or ``"hsgp"``), the checks of the basis, the leave-one-out
densities, and its Gaussian predictive given a draw (``return_cov``, ``sample_y``).
"""

from __future__ import annotations

import warnings

import jax.numpy as jnp
import numpy as np

from bayeskern import diagnostics
from bayeskern.batching import row_slices
from bayeskern.estimators.draws import map_draws
from bayeskern.estimators.gp_basis import loo_rows
from bayeskern.estimators.prediction import cached_jit
from bayeskern.inference import run_nuts
from bayeskern.linalg import cholesky, gaussian_conditional
from bayeskern.models import gabasr as G
from bayeskern.models import gabasr_hsgp as GH
from bayeskern.models.hsgp import hsgp_loo_and_fitted, hsgp_predict
from bayeskern.predictive import MixturePredictive


class _SpectralGPMixin:
    """The spectral-mixture GP of :class:`~bayeskern.estimators.gabasr.GaBaSRRegressor`."""

    def _fit_exact(self, Z, ys, y, X):
        """Sample the spectral-mixture GP, exact or on the basis (``model_``)."""
        self._Ztrain, self._ytrain = Z, ys
        if self.model_ == "hsgp":
            model, kw = (
                GH.gabasr_hsgp_regression,
                dict(
                    stats=self._hsgp_stats(),
                    spec=self.exact_spec_,
                    basis=self.hsgp_basis_,
                    degree=self.trend_degree_,
                ),
            )
        else:
            model, kw = (
                G.gabasr_exact_regression,
                dict(
                    X=jnp.asarray(Z),
                    y=jnp.asarray(ys),
                    spec=self.exact_spec_,
                    prepared=G.prepare_exact(Z, G.polynomial_basis(Z, self.trend_degree_)),
                ),
            )
        coords = self._coords(len(X))
        self.idata_ = run_nuts(
            model,
            model_kwargs=kw,
            rng_key=self._seed(),
            num_warmup=self.num_warmup_,
            num_samples=self.num_samples_,
            num_chains=self.num_chains,
            chain_method=self.chain_method,
            progress_bar=self.progress_bar,
            target_accept_prob=self.target_accept_prob,
            init="map",
            num_map_starts=self.num_map_starts,
            coords=coords,
            adapt_mass_matrix=self.num_warmup_ >= 500,
            judged=list(self._EXACT_SITES),
            dims={
                "y": ["obs"],
                "trend_amp": ["trend"],
                "trend_amp_raw": ["trend"],
                "amplitude": ["component"],
                "mu": ["periodic"],
                "mu_offset": ["periodic"],
                "sigma": ["periodic"],
                "sigma0": ["feature"],
            },
            observed={"y": y},
        )
        self._store_inputs(X, coords)
        post = self.idata_.posterior
        self.num_samples_ = post.sizes["draw"]
        # peaks in cycles per unit of the first input column (the report's language)
        diagnostics.set_attrs(
            self.idata_,
            model_form=self.MODELS[self.model_],
            trend_degree=self.trend_degree_,
            peaks_cycles=str(
                np.round(
                    np.asarray(self.exact_spec_.peaks) / (2 * np.pi * self.x_scaler_.scale[0]), 4
                ).tolist()
            ),
        )
        self._finish(
            [v for v in ("noise", "trend_amp", "amplitude", "sigma0", "mu", "sigma") if v in post]
        )
        if self.model_ == "hsgp":
            self._check_basis()

    _EXACT_SITES = ("trend_amp", "amplitude", "sigma0", "mu", "sigma", "noise")

    # ------------------------------------------------------------------ basis form
    #: share of posterior draws with more than :attr:`BASIS_TOL` of their variance above the
    #: basis frequencies beyond which a fit warns
    BASIS_WARN_FRACTION = 0.05
    BASIS_TOL = 0.01

    def _check_basis(self):
        """Warn when the posterior puts spectral mass where the basis does not reach.

        :func:`~bayeskern.models.gabasr_hsgp.mass_beyond` per draw; stored as
        ``basis_mass_beyond_`` (the share of draws above :attr:`BASIS_TOL`).
        """
        frac = GH.mass_beyond(self._draws(self._EXACT_SITES), self.hsgp_basis_)
        self.basis_mass_beyond_ = float(np.mean(frac > self.BASIS_TOL))
        diagnostics.set_attrs(
            self.idata_,
            basis_mass_beyond=self.basis_mass_beyond_,
            n_basis=int(self.hsgp_basis_.size),
        )
        if self.basis_mass_beyond_ > self.BASIS_WARN_FRACTION:
            warnings.warn(
                f"GaBaSRRegressor: in {100 * self.basis_mass_beyond_:.0f} % of the posterior "
                f"draws more than {100 * self.BASIS_TOL:.0f} % of the spectral density lies "
                f"outside the frequencies of the basis ({self.hsgp_basis_.size} functions); "
                "the basis form may be inaccurate: refit with model='exact'",
                UserWarning,
                stacklevel=3,
            )

    def _warn_outside_box(self, Zn):
        outside = int(np.sum(~self.hsgp_basis_.contains(Zn)))
        if outside:
            warnings.warn(
                f"GaBaSRRegressor: {outside} of {len(Zn)} rows lie outside the box on which "
                "the Hilbert-space basis approximates the kernel; predictions there fall back "
                "towards the trend and are not those of the spectral-mixture GP (a larger "
                "hsgp_boundary, or model='exact')",
                UserWarning,
                stacklevel=4,
            )

    def _hsgp_stats(self):
        """Sufficient statistics of the training rows on the basis, cached per fit."""
        cache = self.__dict__.setdefault("_cache", {})
        hit = cache.get("hsgp_stats")
        if hit is None or hit[0] is not self._Ztrain:
            Z = self._Ztrain
            chunk = self.chunk_size if len(Z) > self.chunk_size else None
            hit = cache["hsgp_stats"] = (
                Z,
                GH.mixture_stats(Z, self._ytrain, self.hsgp_basis_, self.trend_degree_, chunk),
            )
        return hit[1]

    def _hsgp_map_draws(self, name: str, per_draw, *args):
        """``per_draw(draw, stats, *args, basis=...)`` over the posterior draws.

        :func:`~bayeskern.estimators.draws.map_draws`: one draw at a time, the draws split
        over the CPU devices, one compiled map per fit and shape.
        """
        basis = self.hsgp_basis_
        fn = cached_jit(
            self, name, lambda: lambda d, st, *a: per_draw(d, st, *a, basis=basis), basis
        )
        out = map_draws(fn, self._draws(self._EXACT_SITES), self._hsgp_stats(), *args)
        return tuple(map(np.asarray, out))

    def _hsgp_predict_std(self, Zn):
        """Per-draw mean and sd of a new observation on the basis (standardized units)."""
        Phi = GH.features(Zn, self.hsgp_basis_, self.trend_degree_)
        return (*self._hsgp_map_draws("hsgp_predict", _predict_one, Phi), None)

    def _add_hsgp_loo(self, Z, ys):
        """Store the basis model's LOO densities; return the predictive at their rows.

        All rows, or a subsample for large data (:func:`bayeskern.estimators.gp_basis.loo_rows`).
        """
        n_draws = len(self._draws(["noise"])["noise"])
        rows = loo_rows(len(Z), n_draws, self._hsgp_stats().Pty.shape[0], self._seed())
        Phi = GH.features(Z[rows], self.hsgp_basis_, self.trend_degree_)
        ll, loc, sd = self._hsgp_map_draws("hsgp_loo", _loo_one, Phi, ys[rows])
        n_chain = self.idata_.posterior.sizes["chain"]
        diagnostics.add_group(
            self.idata_,
            "log_likelihood",
            {"y": (ll - np.log(self.y_std_.scale)).reshape(n_chain, -1, len(rows))},
            dims={"y": ["obs"]},
            coords={"obs": rows},
        )
        if len(rows) < len(Z):
            diagnostics.set_attrs(self.idata_, loo_subsample=int(len(rows)))
        s, m = self.y_std_.scale, self.y_std_.mean
        return MixturePredictive(loc * s + m, sd * s)

    def _exact_predict_std(self, Zn, Z, ys):
        B = G.polynomial_basis(Z, self.trend_degree_)
        prepared = G.prepare_exact(Z, B)
        jZ, jB, jy = jnp.asarray(Z), jnp.asarray(B), jnp.asarray(ys)
        draws = self._draws(self._EXACT_SITES)
        locs, scales = [], []
        for sl in row_slices(len(Zn), 1024):
            Bn = G.polynomial_basis(Zn[sl], self.trend_degree_)
            loc, scale = map_draws(  # compiled once per shape, however often predict runs
                cached_jit(self, "exact_predictive", lambda: G.exact_predictive, self.idata_),
                draws,
                prepared,
                jZ,
                jB,
                jy,
                jnp.asarray(Zn[sl]),
                jnp.asarray(Bn),
            )
            locs.append(np.asarray(loc))
            scales.append(np.asarray(scale))
        S = len(next(iter(draws.values())))
        cat = lambda a: np.concatenate(a, axis=1) if a else np.zeros((S, 0))  # noqa: E731
        return cat(locs), cat(scales), None

    def _standardize_x(self, X):
        return self.x_scaler_.transform(X)

    def _joint_fn(self):
        if self.model_ == "hsgp":
            basis = self.hsgp_basis_
            return lambda draw, stats, Phi: _hsgp_joint(draw, basis, stats, Phi)
        return _exact_joint

    def _joint_args(self, Zn):
        """Draws and arguments of :meth:`_joint_fn` (the spectral-mixture GP only)."""
        if not self._spectral_gp:
            raise ValueError(
                "return_cov and sample_y need the spectral-mixture GP (model_ "
                "'exact' or 'hsgp'); the random-feature model's predictive given "
                "a draw is Student-t, not Gaussian"
            )
        if self.model_ == "hsgp":
            self._warn_outside_box(Zn)
            return self._draws(self._EXACT_SITES), (
                self._hsgp_stats(),
                GH.features(Zn, self.hsgp_basis_, self.trend_degree_),
            )
        Z = self._Ztrain
        B, Bn = (G.polynomial_basis(A, self.trend_degree_) for A in (Z, Zn))
        return self._draws(self._EXACT_SITES), (
            G.prepare_exact(Z, B),
            jnp.asarray(Z),
            jnp.asarray(B),
            jnp.asarray(self._ytrain),
            jnp.asarray(Zn),
            jnp.asarray(Bn),
        )


def _hsgp_joint(draw, basis, stats, Phi):
    r"""Latent mean and covariance at new features ``Phi`` of the basis model, one draw.

    :math:`\Phi_*\bar w` and :math:`\Phi_*R^\top R\Phi_*^\top`
    (:func:`bayeskern.models.gabasr_hsgp.mixture_factors`).
    """
    R, w, _ = GH.mixture_factors(draw, basis, stats)
    V = R @ Phi.T
    return Phi @ w, V.T @ V


def _predict_one(draw, stats, Phi, *, basis):
    """One draw's latent mean and predictive sd at the rows ``Phi`` (sd with the noise).

    :func:`bayeskern.models.gabasr_hsgp.mixture_factors`, then
    :func:`bayeskern.models.hsgp.hsgp_predict`.
    """
    R, w, nv = GH.mixture_factors(draw, basis, stats)
    mean, var = hsgp_predict(R, w, Phi)
    return mean, jnp.sqrt(var + nv)


def _loo_one(draw, stats, Phi, y, *, basis):
    """One draw's LOO log densities, latent means and predictive sds at the rows ``Phi``.

    :func:`bayeskern.models.gabasr_hsgp.mixture_factors`, then
    :func:`bayeskern.models.hsgp.hsgp_loo_and_fitted`; the sd adds the noise variance.
    """
    R, w, nv = GH.mixture_factors(draw, basis, stats)
    ll, mean, var = hsgp_loo_and_fitted(R, w, nv, Phi, y)
    return ll, mean, jnp.sqrt(var + nv)


def _exact_joint(draw, prepared, Z, B, ys, Zn, Bn):
    """Latent mean and covariance at ``Zn`` of the exact model for one draw.

    :math:`\\mu = K_*^\\top\\alpha`, :math:`\\Sigma = K_{**} - (L^{-1}K_*)^\\top
    (L^{-1}K_*)` with the spectral-mixture-plus-trend kernel (Rasmussen & Williams 2006,
    eqs. 2.23-2.24; :func:`bayeskern.models.gabasr.exact_cross`).
    """
    L = cholesky(G.exact_covariance(draw, prepared))
    Ks, _ = G.exact_cross(draw, Z, B, Zn, Bn)
    return gaussian_conditional(L, Ks, G.exact_cross(draw, Zn, Bn, Zn, Bn)[0], ys)
