"""The inducing-point route of the GP regressor.

Its inducing inputs, its fit, leave-one-out densities and predictions
(:class:`~bayeskern.estimators.gp.GPRegressor` with ``approximation_ == "inducing"``; the
model is ``models/sgpr.py``).
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from bayeskern import diagnostics
from bayeskern.batching import batched_map, row_slices
from bayeskern.estimators.gp_base import FACTOR_CACHE_BYTES, _chunks
from bayeskern.estimators.gp_basis import FITTED_MAX_POINTS, loo_rows
from bayeskern.models.gp import theta_from_draw
from bayeskern.models.hsgp import hsgp_loo_and_fitted
from bayeskern.models.sgpr import sgpr_factors, sgpr_features, sgpr_predict, sgpr_regression
from bayeskern.predictive import MixturePredictive

__all__ = [
    "choose_inducing",
    "optimize_inducing",
    "InducingSearch",
    "DEFAULT_INDUCING",
    "KMEANS_MAX_ROWS",
]

#: inducing inputs when ``n_inducing=None`` (all rows when there are fewer)
DEFAULT_INDUCING = 100
#: k-means runs on a seeded random subset of at most this many rows
KMEANS_MAX_ROWS = 50_000


def choose_inducing(Xs, m: int, seed: int) -> np.ndarray:
    """Return ``m`` inducing inputs: k-means centres of the rows (all rows when ``m >= n``).

    Lloyd's algorithm from k-means++ seeds (scikit-learn's ``KMeans``, one start), on a seeded
    random subset of at most :data:`KMEANS_MAX_ROWS` rows; centres spread the inducing inputs
    over where the data lie, as Hensman et al. (2013) and GPflow's examples choose them.
    """
    from sklearn.cluster import KMeans

    Xs = np.asarray(Xs, dtype=float)
    n = len(Xs)
    if m >= n:
        return Xs.copy()
    rng = np.random.default_rng(seed)
    sub = Xs if n <= KMEANS_MAX_ROWS else Xs[rng.choice(n, KMEANS_MAX_ROWS, replace=False)]
    return KMeans(m, n_init=1, random_state=seed % 2**31).fit(sub).cluster_centers_


class InducingSearch(NamedTuple):
    """Where :func:`optimize_inducing` ended."""

    Z: jax.Array  # (M, d) inducing inputs, standardized
    z: dict  # unconstrained hyper-parameters
    log_density_start: float
    log_density: float


def optimize_inducing(model, model_kwargs: dict, at_mode: dict, max_iter: int) -> InducingSearch:
    r"""Move the inducing inputs ``model_kwargs["Z"]`` to raise Titsias's bound at the mode.

    Titsias (2009, §3) treats the inducing inputs as variational parameters: the collapsed
    bound :math:`\mathcal F(\theta, Z) \le \log p(y \mid \theta)` holds for every
    :math:`Z`, so maximizing it over :math:`Z` tightens the approximation. Here L-BFGS
    (at most ``max_iter`` iterations, SciPy's L-BFGS-B) maximizes the log posterior density
    :math:`\mathcal F(\theta, Z) + \log p(\theta)` over :math:`Z` and the unconstrained
    hyper-parameters together, from ``Z`` and the mode ``at_mode`` (constrained values, as
    :func:`bayeskern.inference.run_nuts` passes its ``data_at_mode``); the hyper-parameters
    are then sampled with :math:`Z` fixed there (as in Lalchand et al. 2022's sparse GP with
    sampled hyper-parameters).

    Returns
    -------
    InducingSearch
        ``Z`` and ``z`` (the unconstrained hyper-parameters) where the search ended, and the
        log density before and after; the starting point itself where the search did not
        raise the density or met a non-finite value.
    """
    import scipy.optimize
    from jax.flatten_util import ravel_pytree
    from numpyro.infer.util import get_transforms, potential_energy

    transforms = get_transforms(model, (), model_kwargs, at_mode)
    z0 = {k: t.inv(jnp.asarray(at_mode[k])) for k, t in transforms.items()}
    data = {k: v for k, v in model_kwargs.items() if k in ("X", "y")}
    static = {k: v for k, v in model_kwargs.items() if k not in ("X", "y", "Z")}
    flat0, unravel = ravel_pytree((z0, jnp.asarray(model_kwargs["Z"])))

    def objective(flat, data):
        z, Z = unravel(flat)
        return potential_energy(model, (), {**static, **data, "Z": Z}, z)

    value_and_grad = jax.jit(jax.value_and_grad(objective))

    def fun(flat):
        v, g = value_and_grad(jnp.asarray(flat), data)
        return float(v), np.asarray(g, dtype=float)

    start = fun(np.asarray(flat0))[0]
    if max_iter < 1:  # SciPy's L-BFGS-B takes a step even with maxiter=0
        return InducingSearch(jnp.asarray(model_kwargs["Z"]), z0, -start, -start)
    res = scipy.optimize.minimize(
        fun, np.asarray(flat0), jac=True, method="L-BFGS-B", options=dict(maxiter=max_iter)
    )
    if not (np.isfinite(res.fun) and np.all(np.isfinite(res.x)) and res.fun < start):
        return InducingSearch(jnp.asarray(model_kwargs["Z"]), z0, -start, -start)
    z, Z = unravel(jnp.asarray(res.x))
    return InducingSearch(Z, z, -start, -float(res.fun))


class _RegressorInducingMixin:
    """The inducing-point route of the GP regressor (``approximation_ == "inducing"``)."""

    def _inducing_chunk(self) -> int:
        """Rows per chunk of the pass over the data: ``chunk_size`` or ~4 million entries."""
        M = len(self.inducing_points_)
        return getattr(self, "chunk_size", None) or max(256, 2**22 // max(M, 1))

    def _n_inducing(self) -> int:
        """``n_inducing``, or :data:`DEFAULT_INDUCING` for ``None``."""
        return int(self.n_inducing if self.n_inducing is not None else DEFAULT_INDUCING)

    def _fit_inducing(self, Xs, ys, y, X):
        Z = choose_inducing(Xs, self._n_inducing(), self._seed())
        self.inducing_points_ = Z * self.x_std_.scale + self.x_std_.mean
        kwargs = dict(
            X=jnp.asarray(Xs),
            y=jnp.asarray(ys),
            kernel=self.kernel_,
            x_scale=self.x_std_.scale,
            Z=jnp.asarray(Z),
            chunk_size=self._inducing_chunk(),
        )
        moved = {}

        def at_mode(values):
            # the chains run on inducing inputs moved at the mode (init="map" only)
            moved["search"] = optimize_inducing(
                sgpr_regression, kwargs, values, self.optimize_inducing
            )
            return {"Z": moved["search"].Z}

        self._sample(
            sgpr_regression,
            Xs,
            ys,
            y,
            X,
            model_kwargs=kwargs,
            data_at_mode=at_mode if self.optimize_inducing and self.init == "map" else None,
            refind_mode=True,
        )
        search = {}
        if "search" in moved:
            Z = np.asarray(moved["search"].Z)
            self.inducing_points_ = Z * self.x_std_.scale + self.x_std_.mean
            search = dict(
                inducing_log_density_kmeans=moved["search"].log_density_start,
                inducing_log_density_moved=moved["search"].log_density,
            )
        diagnostics.set_attrs(self.idata_, n_inducing=len(Z), **search)
        return self._add_inducing_loo(Xs, ys)

    def _inducing_prior_model(self, Xs, seed: int):
        """``(model, extra arguments)`` of a prior predictive check on the inducing points."""
        return sgpr_regression, dict(Z=jnp.asarray(choose_inducing(Xs, self._n_inducing(), seed)))

    def _inducing_Z(self):
        return jnp.asarray(self.x_std_.transform(self.inducing_points_))

    def _inducing_factor_fn(self):
        """Jitted per-draw :func:`~models.sgpr.sgpr_factors` on the training data, cached."""

        def make(kernel, x_scale):
            chunk = self._inducing_chunk()
            return lambda d, X, y, Z: batched_map(
                lambda x: sgpr_factors(kernel, x, X, y, Z, x_scale, chunk), d, 1
            )

        return self._cached_jit("inducing_factors", make)

    def _factor_blocks(self, draws):
        """Yield ``(slice, draws, factors)`` over blocks of ``draws`` that fit the budget.

        Each block's factors (:func:`~models.sgpr.sgpr_factors`, :math:`2M^2 + M + 1`
        numbers per draw) take at most ``FACTOR_CACHE_BYTES``; each costs one
        :math:`O(NM^2)` pass over the training rows per draw.
        """
        n_draws = len(next(iter(draws.values())))
        data = self.idata_
        Xtr = jnp.asarray(self.x_std_.transform(np.asarray(data.constant_data["X"])))
        ytr = jnp.asarray(self.y_std_.transform(np.asarray(data.observed_data["y"])))
        fn, Z = self._inducing_factor_fn(), self._inducing_Z()
        for sl in row_slices(n_draws, self._factor_budget()):
            sub = {k: v[sl] for k, v in draws.items()}
            yield sl, sub, tuple(np.asarray(a) for a in fn(sub, Xtr, ytr, Z))

    def _factor_budget(self) -> int:
        """Draws whose factors fit ``FACTOR_CACHE_BYTES``."""
        M = len(self.inducing_points_)
        return max(1, FACTOR_CACHE_BYTES // (8 * (2 * M * M + M + 1)))

    def _prediction_factors(self):
        """``(draws, factors)`` of the draws predictions mix over, computed once per fit.

        Every posterior draw when their factors fit ``FACTOR_CACHE_BYTES``, else that many
        draws evenly spaced over the flattened chains (``predictive`` then has fewer
        components than the posterior has draws).
        """
        cache = self.__dict__.setdefault("_cache", {})
        hit = cache.get("inducing_factor_values")
        if hit is None or hit[0] is not self.idata_:
            draws = self._draws()
            n_draws = len(next(iter(draws.values())))
            keep = self._factor_budget()
            if keep < n_draws:
                pick = np.linspace(0, n_draws - 1, keep).round().astype(int)
                draws = {k: v[pick] for k, v in draws.items()}
            _, sub, factors = next(self._factor_blocks(draws))
            hit = cache["inducing_factor_values"] = (self.idata_, (sub, factors))
        return hit[1]

    def _add_inducing_loo(self, Xs, ys) -> MixturePredictive | None:
        """LOO log densities per draw of the model :math:`y \\sim N(0, Q + \\sigma^2 I)`.

        Closed form from the hat-matrix diagonal (:func:`~models.hsgp.hsgp_loo_and_fitted`
        on the whitened features :math:`(L_z^{-1}K_{zx})^\\top`,
        :func:`~models.sgpr.sgpr_factors`), at
        :func:`~bayeskern.estimators.gp_basis.loo_rows` (a random subset on large data);
        returns the predictive of a new observation at those rows, as
        ``GPRegressor._add_hsgp_loo``.
        """
        draws = self._draws()
        n_draws, n, M = len(next(iter(draws.values()))), len(Xs), len(self.inducing_points_)
        rows = loo_rows(n, n_draws, M, self._seed(), point_work=2 * M * M)
        Xr, yr = jnp.asarray(Xs[rows]), jnp.asarray(ys[rows])
        loo = self._cached_jit(
            "inducing_loo",
            lambda kernel, x_scale: (
                lambda d, f, X, y, Z: batched_map(
                    lambda a: _loo_one(kernel, x_scale, X, y, Z, *a), (d, f), 1
                )
            ),
        )
        keep = n_draws * len(rows) <= FITTED_MAX_POINTS
        ll, loc, scale = [], [], []
        Z = self._inducing_Z()
        for _, sub, f in self._factor_blocks(draws):
            out = [np.asarray(a) for a in loo(sub, f, Xr, yr, Z)]
            ll.append(out[0])
            if keep:
                loc.append(out[1])
                scale.append(np.sqrt(out[2]))
        return self._record_loo(ll, rows, n, loc, scale)

    def _predictive_inducing(self, Xs):
        """Per-draw predictive mean and standard deviation (standardized) at ``Xs``."""
        draws, f = self._prediction_factors()
        n_draws = len(next(iter(draws.values())))
        fn = self._cached_jit(
            "inducing_predict",
            lambda kernel, x_scale: (
                lambda d, f, Z, Xn: batched_map(
                    lambda a: _predict_one(kernel, x_scale, Z, Xn, *a), (d, f), 1
                )
            ),
        )
        loc, scale = np.empty((n_draws, len(Xs))), np.empty((n_draws, len(Xs)))
        Z = self._inducing_Z()
        for sl in _chunks(len(Xs), max(16, len(Z)), budget=2**22):
            mean, var = fn(draws, f, Z, jnp.asarray(Xs[sl]))
            loc[:, sl], scale[:, sl] = np.asarray(mean), np.sqrt(np.asarray(var))
        return loc, scale

    def _inducing_joint(self):
        """``joint(draw, Z, Xn) -> (mean, cov)`` of the latent :math:`f` for one draw."""
        kernel, x_scale = self.kernel_, self.x_std_.scale

        def joint(d, Z, Xn):
            f = (d["__Lz"], d["__R"], d["__w"], d["__nv"])
            return sgpr_predict(kernel, d, f, Z, Xn, x_scale, joint=True)

        return joint

    def _inducing_joint_args(self, Xs):
        draws, f = self._prediction_factors()
        named = dict(zip(("__Lz", "__R", "__w", "__nv"), f, strict=True))
        return {**draws, **named}, (self._inducing_Z(), jnp.asarray(Xs))

    def _save_state(self):
        meta, arrays = super()._save_state()
        if meta["approximation"] == "inducing":
            arrays["inducing/points"] = np.asarray(self.inducing_points_)
        return meta, arrays

    def _load_state(self, meta, arrays):
        super()._load_state(meta, arrays)
        self.inducing_points_ = None
        if self.approximation_ == "inducing":
            self.inducing_points_ = np.asarray(arrays["inducing/points"])


def _loo_one(kernel, x_scale, X, y, Z, d, f):
    """One draw's LOO log densities, latent means and predictive variances at rows ``X``."""
    Lz, R, w, nv = f
    theta = theta_from_draw(kernel, d, x_scale)
    A_T, resid = sgpr_features(kernel, theta, d["amplitude"], Z, X, Lz)
    ll, mean, var = hsgp_loo_and_fitted(R, w, nv, A_T, y)
    return ll, mean, var + resid + nv


def _predict_one(kernel, x_scale, Z, Xn, d, f):
    mean, var = sgpr_predict(kernel, d, f, Z, Xn, x_scale)
    return mean, var + f[3]
