"""Bayesian GP regression: :class:`GPRegressor` (exact or Hilbert-space marginal likelihood)."""

from __future__ import annotations

from functools import partial

import jax
import jax.numpy as jnp
import numpy as np
from sklearn.base import RegressorMixin, _fit_context
from sklearn.utils._param_validation import StrOptions

from bayeskern import diagnostics
from bayeskern.devices import limit_blas
from bayeskern.estimators.base import Standardizer
from bayeskern.estimators.draws import map_draws
from bayeskern.estimators.gp_base import (
    _SAMPLER_DOC,
    FACTOR_CACHE_BYTES,
    _chunks,
    _GPBase,
    _report_jitter,
)
from bayeskern.estimators.gp_basis import (
    AUTO_EXACT_MAX_ROWS,
    BASIS_WARN_FRACTION,
    LOO_MAX_POINTS,
    LOO_MAX_WORK,
    LOO_MIN_ROWS,
    _BasisMixin,
)
from bayeskern.estimators.gp_regressor_basis import _RegressorBasisMixin
from bayeskern.estimators.gp_regressor_inducing import DEFAULT_INDUCING, _RegressorInducingMixin
from bayeskern.estimators.params import count
from bayeskern.estimators.prediction import (
    JointPredictiveMixin,
    PredictiveRegressorMixin,
    remember_last,
)
from bayeskern.hsgp import MAX_COLUMNS
from bayeskern.linalg import cholesky, triangular_inverse
from bayeskern.models.gp import (
    JITTER,
    gp_regression,
    kernel_matrix,
    loo_and_fitted_rows,
    predict_from_factors,
    prepare_kernel,
    regression_factors,
    regression_predictive,
    theta_from_draw,
)
from bayeskern.predictive import MixturePredictive
from bayeskern.runs import register_estimator

__all__ = ["GPRegressor"]


@register_estimator
class GPRegressor(  # noqa: D101 (__doc__ is an f-string)
    JointPredictiveMixin,
    PredictiveRegressorMixin,
    RegressorMixin,
    _RegressorInducingMixin,
    _RegressorBasisMixin,
    _BasisMixin,
    _GPBase,
):
    __doc__ = f"""Bayesian Gaussian-process regression (exact or Hilbert-space marginal likelihood).

    The model (``models/gp.py``) on standardized data is

    .. math:: y \\sim N\\big(0,\\ \\textstyle\\sum_t a_t^2 k_t(X, X) + \\sigma^2 I\\big),\\quad
              a_t \\sim \\mathrm{{HalfNormal}}(1),\\ \\sigma \\sim \\mathrm{{HalfNormal}}(1),

    with each free kernel hyper-parameter under its kernel's prior (length-scales
    LogNormal(0, 1)). Predictions are the mixture over posterior draws of the Gaussian
    conditionals (Rasmussen & Williams 2006, eqs. 2.25-2.26) plus observation noise.

    With ``approximation="hsgp"`` the same model (same priors and sample sites) has
    :math:`k_t(X, X)` replaced by a Hilbert-space basis expansion :math:`\\Phi_t S_t \\Phi_t^\\top`
    (Solin & Särkkä 2020; Riutort-Mayol et al. 2023; :mod:`bayeskern.hsgp`,
    ``models/hsgp.py``) whose weights are integrated out: the data enter through
    :math:`\\Phi^\\top\\Phi`, :math:`\\Phi^\\top y`, :math:`y^\\top y`, computed once in row
    chunks, and each leapfrog step costs :math:`O(M^3)` whatever the number of rows.

    Parameters
    ----------
    kernel : Kernel, str or None
        Any bayeskern kernel (``bk.kernels.Linear() + bk.kernels.RBF()``...) or a name
        (``"rbf"``, ``"linear+rbf*periodic"``). Values given explicitly are held fixed, in
        the units of ``X``; values left out are sampled. ``None`` (default): ``RBF()``, and
        ``RBF(ard=True)`` (one length-scale per column) when the fit takes the inducing
        points on several columns: the thousands of rows that route is for identify a
        scale per column, and a shared one ignores that columns matter unequally.
    approximation : {{"auto", "exact", "hsgp", "inducing"}}
        ``"exact"``: the exact marginal likelihood, :math:`O(N^3)` per leapfrog step, any
        kernel. ``"hsgp"``: the Hilbert-space basis, for 1-{MAX_COLUMNS} input columns and
        kernels whose additive terms are ``Linear``, a stationary kernel with a spectral
        density (RBF, Laplacian, Matern32, Matern52, RationalQuadratic), ``Periodic`` with a
        fixed period, or a stationary kernel times such a ``Periodic`` (one input column);
        anything else raises ``ValueError``. ``"inducing"``: any kernel on any number of
        columns, the likelihood replaced by Titsias (2009)'s collapsed bound on
        ``n_inducing`` inducing inputs (``models/sgpr.py``; the hyper-parameters sampled
        on it as in Lalchand et al. 2022), :math:`O(NM^2)` per leapfrog step.
        ``"auto"`` (default): exact up to {AUTO_EXACT_MAX_ROWS} rows, above them the basis
        where it can represent the kernel, the inducing points otherwise.
        ``approximation_`` records what ran.
    n_basis : int, sequence of int or None
        Basis functions per input column of every stationary term (``None``: chosen from the
        length-scale priors by Riutort-Mayol et al. 2023's relations,
        :func:`bayeskern.hsgp.choose_basis`). After an automatic fit the posterior's
        length-scales are checked against what the basis resolves
        (:func:`bayeskern.hsgp.check_basis`); when more than
        {int(100 * BASIS_WARN_FRACTION)} % of the draws fall outside, a warning gives the
        numbers and the model is refitted once with a larger basis that also covers the
        posterior's 2.5-97.5 % length-scale range (caps doubled; the basis only grows). With
        ``n_basis`` given the warning comes without the refit. Predicting outside the box
        of the basis (beyond :math:`L_j` from the centre of the training range) warns.
    n_inducing : int or None
        Inducing inputs of ``approximation="inducing"`` (``None``: {DEFAULT_INDUCING}, or every
        row when there are fewer): k-means centres of the standardized rows
        (:func:`~bayeskern.estimators.gp_regressor_inducing.choose_inducing`), moved at the
        posterior mode by ``optimize_inducing``, and fixed before sampling. With :math:`M` of them
        every leapfrog step costs :math:`O(NM^2)`; the bound equals the exact likelihood
        when they are the rows themselves. Predictions mix over the posterior draws whose
        factors (:math:`2M^2 + M + 1` numbers each) fit {FACTOR_CACHE_BYTES // 2**20} MiB,
        evenly spaced when there are more.
    optimize_inducing : int
        With the inducing points and ``init="map"``: L-BFGS iterations that move the
        inducing inputs, with the hyper-parameters, to maximize the log posterior density
        under Titsias (2009)'s bound from the posterior mode found on the k-means centres
        (:func:`~bayeskern.estimators.gp_regressor_inducing.optimize_inducing`; each costs
        one :math:`O(NM^2)` gradient); the mode is then found again on the moved inputs and
        the chains start there. ``0`` keeps the k-means centres.
    chunk_size : int or None
        Rows per chunk of the one pass over the data that computes the basis statistics, or
        (inducing points) the bound at every leapfrog step (``None``: about 4 million
        features per chunk).
    {_SAMPLER_DOC}
    Attributes
    ----------
    idata_ : arviz.InferenceData
        Posterior, sample_stats, log_likelihood, observed_data and constant_data. The
        log-likelihood holds the exact leave-one-out predictive densities of the model that
        ran, so that PSIS-LOO is valid for this non-factorized model (Bürkner, Gabry & Vehtari
        2021): of the exact GP, or of the basis model (closed form from the hat-matrix
        diagonal; of the inducing-point model :math:`N(0, Q + \\sigma^2 I)` the same way).
        Above {LOO_MAX_POINTS:.0e} rows × draws, or {LOO_MAX_WORK:.0e} rows × draws ×
        :math:`M^2` for the basis and inducing points, they are computed on a random subset
        of rows (at least {LOO_MIN_ROWS}), recorded in ``posterior.attrs["loo_subsample"]``
        (the ``obs`` coordinates are the rows used). ``posterior.attrs`` also records
        ``approximation`` and, for the basis, ``hsgp_design`` (JSON).

        The posterior holds the sampled sites in standardized units (``rbf_lengthscale``,
        ``amplitude``, ``noise``...) and, for ``az.summary``, the same draws in data units:
        ``<leaf>_lengthscale_data_units`` and ``<leaf>_period_data_units`` (units of each
        column of ``X``, dims ``feature``), ``amplitude_data_units`` and ``noise_data_units``
        (units of ``y``) (:func:`bayeskern.estimators.base.data_unit_variables`).
        ``posterior_predictive`` holds ``y``: one replicated data set per posterior draw at
        the training rows of the log-likelihood (dims ``chain, draw, obs``; draws thinned
        when rows × draws exceed :data:`~bayeskern.estimators.draws.PREDICTIVE_MAX_VALUES`,
        :func:`~bayeskern.estimators.base.thin_draws`), so that ``az.plot_ppc`` and
        ``az.compare`` work (``az.plot_loo_pit`` runs, but its replicates condition on
        every row: the exact LOO-PIT is :func:`bayeskern.loo_calibration.loo_calibration`'s);
        :meth:`add_predictions`
        adds ``predictions`` and ``predictions_constant_data`` for new rows. For joint
        sample paths and the latent covariance see :meth:`sample_y` and
        ``predict(X, return_cov=True)``.
    convergence_ : ConvergenceReport
    kernel_ : the fitted, named kernel.
    approximation_ : {{"exact", "hsgp", "inducing"}}
        What ran.
    inducing_points_ : ndarray (M, n_features) or None
        The inducing inputs in the units of ``X`` (``approximation_ == "inducing"``).
    n_basis_, boundary_ : dict or None
        With the basis: per additive term (by name), the basis functions per column and the
        half-widths :math:`L_j` of the box (standardized units); ``None`` for exact fits.
    hsgp_design_ : HSGPDesign or None
        The whole basis (:class:`bayeskern.hsgp.HSGPDesign`).
    basis_checks_ : list of BasisCheck
        With the basis: the posterior mass outside what the basis resolves, per length-scale.
    """

    def __init__(
        self,
        kernel=None,
        *,
        approximation: str = "auto",
        n_basis=None,
        n_inducing: int | None = None,
        optimize_inducing: int = 100,
        chunk_size: int | None = None,
        num_warmup: int = 200,
        num_samples: int | str = "auto",
        num_chains: int = 4,
        chain_method: str | None = None,
        target_accept_prob: float = 0.8,
        init: str = "map",
        dense_mass: bool = False,
        adapt_mass_matrix: bool = True,
        progress_bar: bool = True,
        random_state=None,
    ):
        super().__init__(
            kernel,
            num_warmup=num_warmup,
            num_samples=num_samples,
            num_chains=num_chains,
            chain_method=chain_method,
            target_accept_prob=target_accept_prob,
            init=init,
            dense_mass=dense_mass,
            adapt_mass_matrix=adapt_mass_matrix,
            progress_bar=progress_bar,
            random_state=random_state,
        )
        self.approximation = approximation
        self.n_basis = n_basis
        self.n_inducing = n_inducing
        self.optimize_inducing = optimize_inducing
        self.chunk_size = chunk_size

    _parameter_constraints: dict = {
        **_GPBase._parameter_constraints,
        **_BasisMixin._BASIS_CONSTRAINTS,
        "approximation": [StrOptions({"auto", "exact", "hsgp", "inducing"})],
        "n_inducing": [count(1), None],
        "optimize_inducing": [count(0)],
        "chunk_size": [count(1), None],
    }

    #: ``approximation="auto"`` runs the exact GP up to this many rows
    _AUTO_EXACT_ROWS = AUTO_EXACT_MAX_ROWS

    @limit_blas
    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y):
        """Sample the posterior of the kernel hyper-parameters and the noise."""
        X, y = self._validate_fit(X, y, classifier=False)
        self._check_approximation_params()
        self.x_std_ = Standardizer.fit(X)
        self.y_std_ = Standardizer.fit(y)
        Xs, ys = self.x_std_.transform(X), self.y_std_.transform(y)
        self.kernel_ = self._fit_kernel(Xs, ys)
        self.approximation_ = self._resolve_approximation(self.kernel_, Xs)
        self.kernel_ = self._route_kernel(self.kernel_, Xs, ys, self.approximation_)
        self.hsgp_design_ = self.n_basis_ = self.boundary_ = self.inducing_points_ = None
        fitted = None
        if self.approximation_ == "hsgp":
            fitted = self._fit_hsgp(Xs, ys, y, X)
        elif self.approximation_ == "inducing":
            fitted = self._fit_inducing(Xs, ys, y, X)
        else:
            self._sample(gp_regression, Xs, ys, y, X)
            fitted = self._add_loo_loglik(Xs, ys)
        diagnostics.set_attrs(self.idata_, approximation=self.approximation_)
        self._add_posterior_predictive(fitted)
        return self

    @limit_blas
    def predict(self, X, return_std: bool = False, return_cov: bool = False):
        """Posterior predictive mean, with its standard deviation or the latent covariance.

        The exact GP averages the per-draw Gaussian predictives; the Hilbert-space basis
        model reads the same mixture mean and standard deviation off the weights' posterior
        moments (:meth:`_hsgp_moments`), in blocks of rows, so that predicting 10^6 rows
        costs one :math:`M \\times M` product per row block, not one per draw; its latent
        covariance is :math:`\\Phi G \\Phi^\\top`. Parameters and returns as
        :meth:`bayeskern.estimators.base.JointPredictiveMixin.predict`: ``return_std`` is
        of a new observation (noise included), ``return_cov`` of the latent :math:`f`.
        """
        if return_cov or getattr(self, "approximation_", "exact") != "hsgp":
            return super().predict(X, return_std=return_std, return_cov=return_cov)
        Xs = self.x_std_.transform(self._validate_predict(X))
        self._warn_outside_box(Xs)
        w_bar, G, nu_bar = (jnp.asarray(a) for a in self._hsgp_moments())
        design = self.hsgp_design_
        mean, var = np.empty(len(Xs)), np.empty(len(Xs))
        for sl in _chunks(len(Xs), 1, budget=2**22 // max(16, design.size)):
            m, v = _mixture_moments(design.features(jnp.asarray(Xs[sl])), w_bar, G, nu_bar)
            mean[sl], var[sl] = np.asarray(m), np.asarray(v)
        mean = mean * self.y_std_.scale + self.y_std_.mean
        return (mean, np.sqrt(np.maximum(var, 0.0)) * self.y_std_.scale) if return_std else mean

    def _standardize_x(self, X):
        return self.x_std_.transform(X)

    def _joint_fn(self):
        if getattr(self, "approximation_", "exact") == "inducing":
            return self._inducing_joint()
        return partial(_latent_joint, self.kernel_, self.x_std_.scale)

    def _joint_args(self, Xs):
        if getattr(self, "approximation_", "exact") == "inducing":
            return self._inducing_joint_args(Xs)
        draws, Xtr, ytr = self._training_draws()
        return draws, (Xtr, ytr, jnp.asarray(Xs))

    def _latent_moments(self, Xs):
        """Mixture mean and covariance of the latent :math:`f` at ``Xs`` (standardized).

        The basis model: :math:`\\Phi\\bar w` and :math:`\\Phi G\\Phi^\\top`
        (:meth:`_hsgp_moments`); the exact GP: :func:`~bayeskern.estimators.base.mixture_joint`.
        """
        if getattr(self, "approximation_", "exact") != "hsgp":
            return super()._latent_moments(Xs)
        self._warn_outside_box(Xs)
        w_bar, G, _ = self._hsgp_moments()
        Phi = np.asarray(self.hsgp_design_.features(jnp.asarray(Xs)))
        return Phi @ w_bar, Phi @ G @ Phi.T

    def _latent_paths(self, Xs, n_samples, rng):
        """Joint paths; the basis model draws :math:`w = \\bar w_s + R_s^\\top z`.

        Then :math:`f = \\Phi w`, since draw :math:`s`'s weights are
        :math:`N(\\bar w_s, R_s^\\top R_s)`.
        """
        if getattr(self, "approximation_", "exact") != "hsgp":
            return super()._latent_paths(Xs, n_samples, rng)
        self._warn_outside_box(Xs)
        draws = self._draws()
        pick = rng.integers(len(next(iter(draws.values()))), size=n_samples)
        R, w, _ = (
            np.asarray(a)
            for a in self._hsgp_factor_fn()(
                {k: v[pick] for k, v in draws.items()}, self._hsgp_stats
            )
        )
        # w ~ N(w_s, R_s^T R_s)
        W = w + np.einsum("sij,si->sj", R, rng.standard_normal(w.shape))
        return np.asarray(self.hsgp_design_.features(jnp.asarray(Xs))) @ W.T

    def _training_draws(self):
        """Posterior draws with their cached prediction factors, and the training data.

        Returns ``(draws, Xtr, ytr)`` standardized; ``draws`` holds ``__Linv``, ``__alpha``,
        ``__jitter`` (:meth:`_factors`) when they fit in memory.
        """
        Xtr = jnp.asarray(self.x_std_.transform(np.asarray(self.idata_.constant_data["X"])))
        ytr = jnp.asarray(self.y_std_.transform(np.asarray(self.idata_.observed_data["y"])))
        draws = self._draws()
        factors = self._factors(draws, Xtr, ytr)
        if factors is not None:
            draws = {**draws, "__Linv": factors[0], "__alpha": factors[1], "__jitter": factors[2]}
        return draws, Xtr, ytr

    def _add_loo_loglik(self, Xs, ys) -> MixturePredictive:
        """Exact LOO predictive log densities per draw (R&W eq. 5.12), original units.

        Returns the predictive of a new observation at each training input from the same
        factorization (:func:`bayeskern.models.gp.loo_and_fitted_rows`), which the
        ``posterior_predictive`` group draws from.
        """
        kernel, x_scale = self.kernel_, self.x_std_.scale
        X, y = jnp.asarray(Xs), jnp.asarray(ys)
        prepared = prepare_kernel(kernel, X, X, x_scale)

        def one(draw):
            theta = theta_from_draw(kernel, draw, x_scale)
            K = kernel_matrix(kernel, theta, draw["amplitude"], prepared=prepared)
            A = triangular_inverse(
                cholesky(K + (draw["noise"] ** 2 + JITTER) * jnp.eye(X.shape[0]))
            )
            return loo_and_fitted_rows(A, A.T @ (A @ y), y, draw["noise"])

        ll, loc, sd = map(np.asarray, map_draws(one, self._draws()))
        fitted = MixturePredictive(
            loc * self.y_std_.scale + self.y_std_.mean, sd * self.y_std_.scale
        )
        ll = ll - np.log(self.y_std_.scale)
        n_chain = self.idata_.posterior.sizes["chain"]
        ll = ll.reshape(n_chain, -1, ll.shape[-1])
        diagnostics.add_group(
            self.idata_,
            "log_likelihood",
            {"y": ll},
            dims={"y": ["obs"]},
            coords={"obs": np.arange(ll.shape[-1])},
        )
        return fitted

    def _factors(self, draws, Xtr, ytr):
        """Return the per-draw :math:`L^{-1}` and :math:`\\alpha` (:func:`regression_factors`).

        Computed once per fit and cached when they take at most ``FACTOR_CACHE_BYTES``; ``None``
        when they would take more (prediction then factors per chunk of new points).
        """
        n_draws, n = len(next(iter(draws.values()))), len(Xtr)
        if n_draws * n * n * 8 > FACTOR_CACHE_BYTES:
            return None
        cache = self.__dict__.setdefault("_cache", {})
        hit = cache.get("factors")
        if hit is None or hit[0] is not self.kernel_ or hit[1] is not self.x_std_:
            kernel, x_scale = self.kernel_, self.x_std_.scale
            out = map_draws(
                lambda d, Xt, yt: regression_factors(kernel, d, Xt, yt, x_scale), draws, Xtr, ytr
            )
            # on the host: arrays sharded over the CPU devices (map_draws's pmap) would make
            # every later jitted call a multi-device computation
            out = tuple(np.asarray(a) for a in out)
            hit = cache["factors"] = (self.kernel_, self.x_std_, out)
        return hit[2]

    @remember_last("predictive")
    @limit_blas
    def predictive(self, X) -> MixturePredictive:
        """Posterior predictive distribution of new observations at ``X`` (data units)."""
        X = self._validate_predict(X)
        if getattr(self, "approximation_", "exact") in ("hsgp", "inducing"):
            route = {"hsgp": self._predictive_hsgp, "inducing": self._predictive_inducing}
            loc, scale = route[self.approximation_](self.x_std_.transform(X))
            return MixturePredictive(
                loc * self.y_std_.scale + self.y_std_.mean, scale * self.y_std_.scale
            )
        Xs = jnp.asarray(self.x_std_.transform(X))
        draws, Xtr, ytr = self._training_draws()
        if "__Linv" not in draws:  # too many draws x training points to keep: factor per chunk
            fn = self._draw_map(
                "regression",
                lambda kernel, x_scale: (
                    lambda d, Xt, yt, Xn: regression_predictive(kernel, d, Xt, yt, Xn, x_scale)
                ),
            )
            args = (draws, Xtr, ytr)
        else:
            fn = self._draw_map(
                "regression_factors",
                lambda kernel, x_scale: (
                    lambda d, Xt, Xn: (
                        *predict_from_factors(
                            kernel, d, (d["__Linv"], d["__alpha"]), Xt, Xn, x_scale
                        ),
                        d["__jitter"],
                    )
                ),
            )
            args = (draws, Xtr)
        locs, scales = [], []
        jitter_max = 0.0
        # rows per chunk bounded by the draws and by the (16 draws x N_train x rows) blocks
        for sl in _chunks(
            len(Xs), max(self.idata_.posterior.sizes["draw"] * self.num_chains, 16 * len(Xtr))
        ):
            mean, var, noise2, jit = fn(*args, Xs[sl])
            locs.append(np.asarray(mean))
            scales.append(np.sqrt(np.asarray(var) + np.asarray(noise2)[:, None]))
            jitter_max = max(jitter_max, float(np.max(np.asarray(jit))))
        _report_jitter(jitter_max, self)
        loc = np.concatenate(locs, axis=1) * self.y_std_.scale + self.y_std_.mean
        scale = np.concatenate(scales, axis=1) * self.y_std_.scale
        return MixturePredictive(loc, scale)


def _latent_joint(kernel, x_scale, draw, Xt, yt, Xn):
    """Mean and covariance of the latent :math:`f` at ``Xn`` for one posterior draw.

    :math:`\\mu = K_*^\\top\\alpha`, :math:`\\Sigma = K_{**} - (L^{-1}K_*)^\\top
    (L^{-1}K_*)` (Rasmussen & Williams 2006, eqs. 2.23-2.24), from the draw's cached factors
    (``__Linv``, ``__alpha``) or from :func:`regression_factors`.
    """
    if "__Linv" in draw:
        Linv, alpha = draw["__Linv"], draw["__alpha"]
    else:
        Linv, alpha, _ = regression_factors(kernel, draw, Xt, yt, x_scale)
    theta = theta_from_draw(kernel, draw, x_scale)
    Ks = kernel_matrix(kernel, theta, draw["amplitude"], Xt, Xn)
    V = Linv @ Ks
    return Ks.T @ alpha, kernel_matrix(kernel, theta, draw["amplitude"], Xn, Xn) - V.T @ V


@jax.jit
def _mixture_moments(Phi, w_bar, G, nu_bar):
    """Return :math:`\\Phi\\bar w` and :math:`\\mathrm{diag}(\\Phi G\\Phi^\\top) + \\bar\\nu`."""
    return Phi @ w_bar, jnp.sum((Phi @ G) * Phi, axis=1) + nu_bar
