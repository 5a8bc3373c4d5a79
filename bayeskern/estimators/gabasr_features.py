"""The random-feature model of the GaBaSR regressor.

Its draws conditioned on all rows (for large data), its predictive (Student-t given a draw)
and its leave-one-out densities.
"""

from __future__ import annotations

import warnings

import jax
import jax.numpy as jnp
import numpy as np

from bayeskern.estimators.draws import map_draws
from bayeskern.estimators.gp_basis import AUTO_EXACT_MAX_ROWS
from bayeskern.estimators.prediction import cached_jit
from bayeskern.hsgp import MAX_COLUMNS
from bayeskern.inference.gibbs_predict import predict_regression, regression_posteriors
from bayeskern.models import gabasr as G
from bayeskern.predictive import MixturePredictive


class _FeaturesModelMixin:
    """The random-feature model of :class:`~bayeskern.estimators.gabasr.GaBaSRRegressor`."""

    _FEATURE_SITES = ("weights", "mu", "sigma", "v_weights", "v_mu", "v_sigma", "snr")

    def _wide(self, n: int, d: int) -> str:
        """``model="auto"`` on more rows than the exact form and columns than the basis takes.

        Returns ``"features"`` and warns: NUTS on the random-feature model's free frequencies
        (a mean and a spread per component and column) can run every draw to the tree-depth
        limit on many columns.
        """
        warnings.warn(
            f"{type(self).__name__}: model='auto' fits the random-feature model with NUTS on "
            f"{n} rows x {d} columns (the basis form takes at most {MAX_COLUMNS} "
            f"columns, the exact form at most exact_max_n={self.exact_max_n} rows). With many "
            "columns its trajectories can reach NUTS's tree-depth limit (1023 leapfrog steps) "
            "at every draw: this fit can take hours. Faster: GPRegressor() (above "
            f"{AUTO_EXACT_MAX_ROWS} rows on this many columns it samples on inducing points), "
            "or LABRBFRegressor() (a point fit with intervals)",
            UserWarning,
            stacklevel=4,
        )
        return "features"

    def _subsampled(self, n: int) -> bool:
        return self.max_sample_rows is not None and n > self.max_sample_rows

    def _sample_rows(self, n: int) -> np.ndarray | None:
        """Rows the spectral posterior is sampled on: ``None`` (all) or a random subset."""
        if not self._subsampled(n):
            return None
        rng = np.random.default_rng(self._seed())
        return np.sort(rng.choice(n, self.max_sample_rows, replace=False))

    def _condition_on_all_rows(self):
        """Condition the weights and noise of ``num_conditioned_draws`` draws on every row.

        Used when the spectral posterior was sampled on ``max_sample_rows`` rows: for each
        retained draw :math:`\\theta_s` (evenly spaced over the flattened chains) the NIG
        posterior :math:`p(w, \\sigma^2 \\mid \\theta_s, y_{1:N})` of Pena-Llamas et al.
        (2023), eq. (10), is computed from the sufficient statistics of all :math:`N` rows,
        summed over chunks of ``chunk_size`` rows (:func:`bayeskern.blr.scan_feature_stats`;
        the ``N × M`` design is never formed). Predictions mix over these draws.
        """
        Z, ys = self._Ztrain, self._ytrain
        B = self._basis(Z)
        jZ, jy = jnp.asarray(Z), jnp.asarray(ys)
        jB = None if B is None else jnp.asarray(B)
        post = self.idata_.posterior
        S = post.sizes["chain"] * post.sizes["draw"]
        idx = np.unique(
            np.linspace(0, S - 1, min(S, self.num_conditioned_draws)).round().astype(int)
        )
        self.conditioned_draws_ = idx
        if self.sampler_ == "gibbs":
            posts = regression_posteriors(
                self.gibbs_samples_,
                jZ,
                jy,
                mean_basis=jB,
                chunk_size=self.chunk_size,
                draws=jnp.asarray(idx),
            )
        else:
            draws = {k: v[idx] for k, v in self._draws(self._FEATURE_SITES).items()}
            spec, chunk = self.spec_, self.chunk_size
            posts = map_draws(
                lambda d: G.regression_posterior(
                    d, jZ, jy, spec=spec, mean_basis=jB, chunk_size=chunk
                ),
                draws,
            )
        # host arrays: the device-sharded outputs of map_draws do not go back into pmap
        self._posteriors_ = jax.tree.map(np.asarray, posts)

    def _predict_std(self, Zn, Z, ys):
        if getattr(self, "model_", "features") == "exact":
            return self._exact_predict_std(Zn, Z, ys)
        if getattr(self, "model_", "features") == "hsgp":
            self._warn_outside_box(Zn)
            return self._hsgp_predict_std(Zn)
        B, Bn = self._basis(Z), self._basis(Zn)
        jB = None if B is None else jnp.asarray(B)
        jBn = None if Bn is None else jnp.asarray(Bn)
        posts = getattr(self, "_posteriors_", None)
        idx = None if posts is None else jnp.asarray(self.conditioned_draws_)
        if self.sampler_ == "gibbs":
            return predict_regression(
                self.gibbs_samples_,
                Z,
                ys,
                Zn,
                mean_basis=jB,
                mean_basis_new=jBn,
                posteriors=posts,
                draws=idx,
            )
        spec = self.spec_
        draws = self._draws(list(self._FEATURE_SITES))
        if posts is None:

            def make():
                jZ, jy = jnp.asarray(Z), jnp.asarray(ys)
                return lambda d, Xn, Bn_: G.regression_predictive(
                    d, jZ, jy, Xn, spec=spec, mean_basis=jB, mean_new=Bn_
                )

        else:  # conditioned on all rows at fit time (max_sample_rows)
            draws = {k: v[np.asarray(idx)] for k, v in draws.items()}
            draws.update({f"post_{k}": v for k, v in posts._asdict().items()})

            def make():
                return lambda d, Xn, Bn_: G.regression_predictive(
                    d,
                    None,
                    None,
                    Xn,
                    spec=spec,
                    mean_new=Bn_,
                    post=type(posts)(*(d[f"post_{k}"] for k in posts._fields)),
                )

        # one function per fit, so map_draws compiles once per shape however often predict runs
        fn = cached_jit(self, "features_predictive", make, self.idata_)
        loc, scale, df = map_draws(fn, draws, jnp.asarray(Zn), jBn)
        return np.asarray(loc), np.asarray(scale), np.asarray(df)

    def _add_loo(self, Z, ys):
        """Store the pointwise LOO; the exact model also returns its predictive at ``Z``."""
        self._Ztrain, self._ytrain = Z, ys
        if self.model_ == "hsgp":
            return self._add_hsgp_loo(Z, ys)
        if self.model_ == "exact":
            prepared = G.prepare_exact(Z, G.polynomial_basis(Z, self.trend_degree_))
            jy = jnp.asarray(ys)
            ll, loc, sd = map(
                np.asarray,
                map_draws(
                    cached_jit(self, "exact_fitted_rows", lambda: G.exact_fitted_rows, self.idata_),
                    self._draws(self._EXACT_SITES),
                    prepared,
                    jy,
                ),
            )
            self._store_log_likelihood(ll - np.log(self.y_std_.scale))
            s, m = self.y_std_.scale, self.y_std_.mean
            return MixturePredictive(loc * s + m, sd * s)
        if self.sampler_ == "gibbs":
            return  # the Gibbs draws carry no per-draw LOO here (see predictive())
        spec, B = self.spec_, self._basis(Z)
        jB = None if B is None else jnp.asarray(B)
        fn = lambda d: G.regression_loo(
            d,
            jnp.asarray(Z),
            jnp.asarray(ys),
            spec=spec,  # noqa
            mean_basis=jB,
        )
        draws = self._draws(list(self._FEATURE_SITES))
        self._store_log_likelihood(np.asarray(map_draws(fn, draws)) - np.log(self.y_std_.scale))
