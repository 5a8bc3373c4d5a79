"""The Hilbert-space basis route of the GP regressor.

The fit, the leave-one-out densities and the predictions from the weights' posterior
(:class:`~bayeskern.estimators.gp.GPRegressor`).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from bayeskern import diagnostics
from bayeskern.batching import batched_map, row_slices
from bayeskern.blr import Stats
from bayeskern.estimators.gp_base import FACTOR_CACHE_BYTES, _chunks
from bayeskern.estimators.gp_basis import FITTED_MAX_POINTS, loo_rows
from bayeskern.models.hsgp import hsgp_factors, hsgp_loo_and_fitted, hsgp_predict, hsgp_regression
from bayeskern.predictive import MixturePredictive
from bayeskern.programs import shared_jit


class _RegressorBasisMixin:
    """The basis route of the GP regressor (``approximation_ == "hsgp"``)."""

    def _fit_hsgp(self, Xs, ys, y, X):
        x_scale = self.x_std_.scale

        def sample(design):
            stats = self._basis_stats(design, Xs, ys)
            self._sample(
                hsgp_regression,
                Xs,
                ys,
                y,
                X,
                model_kwargs=dict(stats=stats, kernel=self.kernel_, design=design, x_scale=x_scale),
            )
            return stats

        self._hsgp_stats = self._fit_on_basis(Xs, ys, sample)
        return self._add_hsgp_loo(Xs, ys)

    def _hsgp_factor_fn(self):
        """Jitted per-draw :func:`hsgp_factors`, cached for the current basis."""
        cache = self.__dict__.setdefault("_cache", {})
        hit = cache.get("hsgp_factor_fn")
        if hit is None or hit[0] is not self.hsgp_design_:
            kernel, design, x_scale = self.kernel_, self.hsgp_design_, self.x_std_.scale
            fn = shared_jit(
                lambda d, st: batched_map(
                    lambda x: hsgp_factors(kernel, design, x, st, x_scale), d, 1
                )
            )
            hit = cache["hsgp_factor_fn"] = (design, fn)
        return hit[1]

    def _hsgp_draw_blocks(self, draws):
        """Blocks of draws whose factors (draws × M² floats) fit ``FACTOR_CACHE_BYTES``."""
        n_draws, M = len(next(iter(draws.values()))), self.hsgp_design_.size
        size = max(1, min(n_draws, FACTOR_CACHE_BYTES // (8 * (M * M + M + 1))))
        return row_slices(n_draws, size)

    def _add_hsgp_loo(self, Xs, ys) -> MixturePredictive | None:
        """LOO predictive log densities of the basis model per draw (:func:`hsgp_loo`).

        Returns the predictive of a new observation at the same rows, per draw, from the same
        factors (:func:`~bayeskern.models.hsgp.hsgp_loo_and_fitted`), which the
        ``posterior_predictive`` group draws from; ``None`` above :data:`FITTED_MAX_POINTS`
        draws × rows (the group then calls :meth:`predictive` in blocks).
        """
        draws = self._draws()
        n_draws, n = len(next(iter(draws.values()))), len(Xs)
        rows = loo_rows(n, n_draws, self.hsgp_design_.size, self._seed())
        Phi = self.hsgp_design_.features(jnp.asarray(Xs[rows]))
        yj = jnp.asarray(ys[rows])
        factors = self._hsgp_factor_fn()
        loo = shared_jit(
            lambda R, w, nv, P, yy: batched_map(
                lambda f: hsgp_loo_and_fitted(f[0], f[1], f[2], P, yy), (R, w, nv), 1
            )
        )
        keep = n_draws * len(rows) <= FITTED_MAX_POINTS
        ll, loc, scale = [], [], []
        for sl in self._hsgp_draw_blocks(draws):
            R, w, nv = factors({k: v[sl] for k, v in draws.items()}, self._hsgp_stats)
            out = [np.asarray(a) for a in loo(R, w, nv, Phi, yj)]
            ll.append(out[0])
            if keep:
                loc.append(out[1])
                scale.append(np.sqrt(out[2] + np.asarray(nv)[:, None]))
        return self._record_loo(ll, rows, n, loc, scale)

    def _record_loo(self, ll, rows, n, loc, scale) -> MixturePredictive | None:
        """Store the per-draw LOO densities (blocks of draws, standardized) at ``rows``.

        Returns the fitted predictive from the blocks ``loc``, ``scale`` (``None`` when
        they are empty: too many draws × rows to keep).
        """
        ll = np.concatenate(ll) - np.log(self.y_std_.scale)
        ll = ll.reshape(self.idata_.posterior.sizes["chain"], -1, ll.shape[-1])
        diagnostics.add_group(
            self.idata_, "log_likelihood", {"y": ll}, dims={"y": ["obs"]}, coords={"obs": rows}
        )
        if len(rows) < n:
            diagnostics.set_attrs(self.idata_, loo_subsample=int(len(rows)))
        if not loc:
            return None
        return MixturePredictive(
            np.concatenate(loc) * self.y_std_.scale + self.y_std_.mean,
            np.concatenate(scale) * self.y_std_.scale,
        )

    def _hsgp_moments(self):
        r"""Return the posterior moments of the basis weights over all draws, cached per fit.

        With draw :math:`s`'s weight posterior :math:`N(\bar w_s, R_s^\top R_s)` and noise
        variance :math:`\nu_s` (:func:`~bayeskern.models.hsgp.hsgp_factors`), the
        predictive mixture :math:`\frac1S\sum_s N(\phi^\top\bar w_s,\
        \phi^\top R_s^\top R_s\phi + \nu_s)` has mean :math:`\phi^\top\bar w` and
        variance :math:`\phi^\top G\phi + \bar\nu`, with :math:`\bar w` the mean of the
        :math:`\bar w_s`, :math:`G = \frac1S\sum_s (R_s^\top R_s + \bar w_s\bar w_s^\top)
        - \bar w\bar w^\top` and :math:`\bar\nu` the mean noise variance (the law of total
        variance). Returns ``(w_bar, G, nu_bar)``: prediction then costs :math:`O(M^2)` per
        row, whatever the number of draws.
        """
        cache = self.__dict__.setdefault("_cache", {})
        hit = cache.get("hsgp_moments")
        if hit is None or hit[0] is not self.hsgp_design_:
            draws = self._draws()
            n_draws = len(next(iter(draws.values())))
            factors = self._hsgp_factor_fn()
            reduce = shared_jit(
                lambda R, w, nv: (
                    jnp.einsum("sij,sik->jk", R, R) + w.T @ w,
                    jnp.sum(w, 0),
                    jnp.sum(nv),
                )
            )
            RR = w_sum = nv_sum = 0.0
            for sl in self._hsgp_draw_blocks(draws):
                a, b, c = reduce(*factors({k: v[sl] for k, v in draws.items()}, self._hsgp_stats))
                RR, w_sum, nv_sum = RR + np.asarray(a), w_sum + np.asarray(b), nv_sum + float(c)
            w_bar = w_sum / n_draws
            G = RR / n_draws - np.outer(w_bar, w_bar)
            hit = cache["hsgp_moments"] = (self.hsgp_design_, (w_bar, G, nv_sum / n_draws))
        return hit[1]

    def _predictive_hsgp(self, Xs):
        design = self.hsgp_design_
        self._warn_outside_box(Xs)
        draws = self._draws()
        n_draws = len(next(iter(draws.values())))
        blocks = self._hsgp_draw_blocks(draws)
        cache = self.__dict__.setdefault("_cache", {})
        hit = cache.get("hsgp_factors_all")
        factors = self._hsgp_factor_fn()
        if len(blocks) == 1 and (hit is None or hit[0] is not self.hsgp_design_):
            hit = cache["hsgp_factors_all"] = (
                self.hsgp_design_,
                tuple(np.asarray(a) for a in factors(draws, self._hsgp_stats)),
            )
        loc, scale = np.empty((n_draws, len(Xs))), np.empty((n_draws, len(Xs)))
        rows = _chunks(len(Xs), max(16, design.size), budget=2**22)
        for sl_d in blocks:
            R, w, nv = (
                hit[1]
                if len(blocks) == 1
                else factors({k: v[sl_d] for k, v in draws.items()}, self._hsgp_stats)
            )
            for sl in rows:
                Phi = design.features(jnp.asarray(Xs[sl]))
                mean, var = _predict_draws(R, w, Phi)
                loc[sl_d, sl] = np.asarray(mean)
                scale[sl_d, sl] = np.sqrt(np.asarray(var) + np.asarray(nv)[:, None])
        return loc, scale

    def _save_state(self):
        meta, arrays = super()._save_state()
        if meta["approximation"] == "hsgp":
            arrays.update(
                {f"hsgp/{k}": np.asarray(v) for k, v in self._hsgp_stats._asdict().items()}
            )
        return meta, arrays

    def _load_state(self, meta, arrays):
        super()._load_state(meta, arrays)
        if self.approximation_ == "hsgp":
            self._hsgp_stats = Stats(*(jnp.asarray(arrays[f"hsgp/{k}"]) for k in Stats._fields))


@jax.jit
def _predict_draws(R, w, Phi):
    """:func:`~bayeskern.models.hsgp.hsgp_predict` for each draw's ``(R, w)``, one at a time."""
    return batched_map(lambda f: hsgp_predict(f[0], f[1], Phi), (R, w), 1)
