r"""LAB-RBF regression: asymmetric KRR with trained local bandwidths and a Bayesian last layer.

:class:`LABRBFRegressor` is the method of He et al. (2023): the kernel
:class:`~bayeskern.kernels.labrbf.LABRBF` is trained by Algorithm 1 and predicts with
:math:`f_1` of eq. (6)/(8),

.. math:: f_1(t) = \beta + K(t, X_{sv})\,(K(X_{sv}, X_{sv}) + \lambda I)^{-1}(Y_{sv} - \beta).

The paper gives point predictions only. bayeskern adds a **Bayesian last layer**: with the
learned asymmetric features :math:`\phi(t) = [1, K(t, X_{sv})]` and the residuals
:math:`r_n = y_n - f_1(x_n)` of calibration rows held out from the bandwidth training
(``calibration_fraction``, 10 % by default: the residuals of the rows the bandwidths were
trained on are optimistic), the conjugate normal-inverse-gamma model (:mod:`bayeskern.blr`)

.. math:: r_n = \phi(x_n)^\top w + \varepsilon_n,\quad \varepsilon_n\sim N(0,\sigma^2),\quad
          w \mid \sigma^2 \sim N(0, \sigma^2/\lambda_0\, I),\quad
          \sigma^2 \sim \mathrm{InvGamma}(a_0, b_0)

is a Bayesian ridge whose prior is centred on the KRR weights (the correction :math:`w`
shrinks to 0), with :math:`\lambda_0` chosen by maximum evidence (Pena-Llamas et al. 2023, eq. 10).
The predictive distribution of a new observation is Student-t with :math:`2a_N` degrees of
freedom, location :math:`f_1(t) + \phi(t)^\top w_N` and scale
:math:`\sqrt{b_N/a_N\,(1 + \phi(t)^\top\Lambda_N^{-1}\phi(t))}`, exact (no sampling).
Exact i.i.d. posterior draws of :math:`(w, \sigma)` fill ``idata_`` so that ArviZ summaries,
LOO and WAIC work.
"""

from __future__ import annotations

import numbers

import numpy as np
from scipy import stats
from scipy.linalg import solve_triangular
from sklearn.base import BaseEstimator, RegressorMixin, _fit_context
from sklearn.utils._param_validation import Options, StrOptions
from sklearn.utils.validation import check_is_fitted

from bayeskern import blr, diagnostics
from bayeskern.devices import limit_blas
from bayeskern.estimators.base import BayesianEstimatorMixin
from bayeskern.estimators.params import NumberInterval, count, positive
from bayeskern.estimators.prediction import PredictiveRegressorMixin
from bayeskern.estimators.validation import validate_data
from bayeskern.kernels.labrbf import LABRBF
from bayeskern.learning import fit_kernel
from bayeskern.predictive import MixturePredictive
from bayeskern.runs import register_estimator

__all__ = ["LABRBFRegressor"]

#: LAB-RBF settings named in the estimator (the ones a user searches); the rest of
#: :class:`~bayeskern.kernels.labrbf.LABRBF`'s arguments go in ``kernel_params``
_NAMED = ("p", "max_support", "alpha", "theta0", "learning_rate", "n_iter_round", "n_iter_final")


def _nig_predictive_np(post: blr.NIGPosterior, Phi: np.ndarray):
    """Compute :func:`bayeskern.blr.nig_predictive` in NumPy/SciPy.

    Student-t ``(loc, scale, df)`` with loc :math:`\\phi^\\top w_N`,
    scale² :math:`\\frac{b_N}{a_N}(1+\\phi^\\top\\Lambda_N^{-1}
    \\phi)`, df :math:`2a_N` (no XLA compilation per number of rows).
    """
    L, w = np.asarray(post.L), np.asarray(post.w)
    v = solve_triangular(L, Phi.T, lower=True)
    scale2 = float(post.b) / float(post.a) * (1.0 + np.sum(v * v, axis=0))
    return Phi @ w, np.sqrt(scale2), 2.0 * float(post.a)


@register_estimator
class LABRBFRegressor(
    PredictiveRegressorMixin, BayesianEstimatorMixin, RegressorMixin, BaseEstimator
):
    r"""Asymmetric kernel ridge regression with locally adaptive bandwidths (LAB-RBF).

    He et al. (2023), Algorithm 1 + eq. (8), with a conjugate Bayesian last layer on the
    learned features for calibrated predictive intervals (module docstring).
    A full GP on the learned LAB-RBF features, with priors on its amplitude, bandwidth scale
    and noise: ``bk.GPRegressor(kernel=bk.kernels.LABRBFFeatures())``.

    **Cross-fitted models (the default).** ``n_estimators = 3`` LAB-RBF models are trained,
    each on all training rows except its own calibration block of ``calibration_fraction``
    (10 %) of the rows; the blocks are disjoint. The point prediction is the mean of their
    :math:`f_1`, so every training row enters it (each row is seen by at least two of the
    three models); the Bayesian last layer is fitted on the *held-out* residuals of the
    blocks (30 % of the rows), each from the model that did not see the row, so the
    intervals are calibrated. Why: with one model, the rows held out for the intervals are
    lost to the point prediction, and the training of one model is itself noisy (random
    seeds on the same rows differ). Averaging cross-fitted models recovers the rows and
    damps that noise (the numbers are on the results pages). It costs ``n_estimators``
    trainings.

    **Stopping rule.** Each model's calibration block also decides, once, whether its trained
    bandwidths are kept or the untrained model (one global bandwidth, ``theta0``/``alpha`` from
    the grid) is used: the trained one is kept unless it has the larger squared error on the
    block. A two-way choice barely biases the block's residuals, so the intervals stay
    calibrated. Why: on noisy data Algorithm 1 fits the noise, and then the trained model
    predicts worse than the untrained one; where it predicts better it is kept.

    Parameters
    ----------
    p : {1, 2}
        Exponent of the norm in :math:`\exp(-\|\theta_i\odot(t-x_i)\|^p)` (1: the authors'
        code, default; see :class:`~bayeskern.kernels.labrbf.LABRBF`).
    max_support : int or "auto"
        Support points per model; ``"auto"`` (default) is a third of the training rows of a
        model, at most 300.
    alpha : float or "auto"
        Ridge :math:`\lambda` of the asymmetric KRR (scikit-learn's ``KernelRidge`` name).
        Default ``"auto"``: chosen from {1e-3, 1e-2, 0.1, 1} jointly with the initial
        bandwidth by the error of :math:`f_1` on the training rows outside the initial
        support (before training; the paper's fixed 1e-3 nearly interpolates noisy labels).
    theta0 : "auto" or float
        Initial bandwidth (``"auto"``: chosen on a grid by the error of :math:`f_1`).
    learning_rate, n_iter_round, n_iter_final
        Adam step size, steps per round of Algorithm 1 and in the final phase.
    kernel_params : dict or None
        Any other argument of :class:`~bayeskern.kernels.labrbf.LABRBF` (``n_init_support``,
        ``support_init``, ``n_add``, ``batch_size``, ``sgd_iter``, ``sgd_learning_rate``,
        ``tol``, ``early_stopping``, ``validation_fraction``, ``n_iter_no_change``,
        ``eval_every``, ``dtype``, ``min_bandwidth``), as in ``KernelRidge(kernel_params=...)``.
    n_estimators : int
        Number of cross-fitted LAB-RBF models averaged for the point prediction (default 3).
    calibration_fraction : float
        Fraction of the rows in each model's held-out calibration block (default 0.1; the
        blocks together hold ``n_estimators * calibration_fraction`` of the rows). ``0``
        trains every model on every row, as the paper does, and fits the last layer on the
        training residuals: over-confident (training residuals are smaller than those of new
        rows).
    prior_precision : "auto" or float
        :math:`\lambda_0` of the last layer; ``"auto"`` maximises the evidence on a grid.
    a0, b0 : float
        Inverse-gamma prior of the noise variance (standardized units), 1e-3 as in
        Pena-Llamas et al. (2023).
    num_samples, num_chains : int
        Exact posterior draws of the last layer stored in ``idata_`` (independent draws, so
        every "chain" is a valid check of the others).
    progress_bar : bool
        tqdm bar over the rounds of Algorithm 1.
    random_state : int, numpy Generator or None
        Seed of the calibration blocks, minibatches and posterior draws.

    A grid a user would search: ``{"alpha": [1e-3, 1e-2, 1e-1], "max_support": [100, 200,
    300]}`` (``p`` and ``learning_rate`` rarely matter; the training is long, so search
    little).

    Attributes
    ----------
    kernels_ : list of fitted :class:`~bayeskern.kernels.labrbf.LABRBF`, one per model;
        ``kernel_`` is the first.
    support_vectors_ : (m, d) support points of all models, data units.
    support_index_ : (m,) their rows in the training data.
    bandwidths_ : (m, d) :math:`\theta_i` in data units:
        :math:`\mathcal K(t, x_i) = \exp(-\|\theta_i \odot (t - x_i)\|^p)` for raw inputs.
    n_support_ : int, all models together.
    calibration_index_ : rows whose held-out residuals fit the last layer.
    history_ : dict of per-round support size and training / validation MSE (first model).
    posterior_ : :class:`bayeskern.blr.NIGPosterior` of the last layer (standardized units).
    prior_precision_ : float
    idata_ : ArviZ ``InferenceData`` (posterior ``noise``, ``weights``, ``weight_norm``,
        in the units of ``y``; log_likelihood, observed_data and posterior_predictive of
        the last-layer rows: ``y`` there is the held-out residual of the LAB-RBF models,
        replicated as :math:`\phi^\top w_s + \sigma_s z` per draw).
        :meth:`add_predictions` adds ``predictions`` of ``y`` itself at new rows, drawn
        from :meth:`predictive`.
    convergence_ : :class:`bayeskern.diagnostics.ConvergenceReport`

    Examples
    --------
    >>> import bayeskern as bk
    >>> X, y = bk.datasets.load_dataset("airfoil")
    >>> est = LABRBFRegressor(random_state=0).fit(X[:1200], y[:1200])  # doctest: +SKIP
    >>> lo, hi = est.predict_interval(X[1200:], 0.9)  # doctest: +SKIP
    """

    _parameter_constraints: dict = {
        # the last layer's draws are exact: of the sampler arguments only these
        **{
            k: BayesianEstimatorMixin._parameter_constraints[k]
            for k in ("num_samples", "num_chains", "progress_bar", "random_state")
        },
        "p": [Options(numbers.Integral, {1, 2})],
        "max_support": [count(1), StrOptions({"auto"})],
        "alpha": [positive(), StrOptions({"auto"})],
        "theta0": [positive(), StrOptions({"auto"})],
        "learning_rate": [positive()],
        "n_iter_round": [count(0)],
        "n_iter_final": [count(0)],
        "kernel_params": [dict, None],
        "n_estimators": [count(1)],
        "calibration_fraction": [NumberInterval(numbers.Real, 0, 1, closed="left")],
        "prior_precision": [positive(), StrOptions({"auto"})],
        "a0": [positive()],
        "b0": [positive()],
    }

    def __init__(
        self,
        *,
        p: int = 1,
        max_support="auto",
        alpha="auto",
        theta0="auto",
        learning_rate: float = 1e-2,
        n_iter_round: int = 500,
        n_iter_final: int = 5000,
        kernel_params: dict | None = None,
        n_estimators: int = 3,
        calibration_fraction: float = 0.1,
        prior_precision="auto",
        a0: float = 1e-3,
        b0: float = 1e-3,
        num_samples: int = 250,
        num_chains: int = 4,
        progress_bar: bool = True,
        random_state=None,
    ):
        self.p = p
        self.max_support = max_support
        self.alpha = alpha
        self.theta0 = theta0
        self.learning_rate = learning_rate
        self.n_iter_round = n_iter_round
        self.n_iter_final = n_iter_final
        self.kernel_params = kernel_params
        self.n_estimators = n_estimators
        self.calibration_fraction = calibration_fraction
        self.prior_precision = prior_precision
        self.a0 = a0
        self.b0 = b0
        self.num_samples = num_samples
        self.num_chains = num_chains
        self.progress_bar = progress_bar
        self.random_state = random_state

    # ------------------------------------------------------------------ fit
    def _make_kernel(self, seed: int) -> LABRBF:
        extra = dict(self.kernel_params or {})
        clash = sorted(set(extra) & set(_NAMED + ("random_state", "progress_bar")))
        if clash:
            raise ValueError(
                f"kernel_params must not repeat the estimator's own parameters "
                f"{clash}; set them directly"
            )
        kw = {name: getattr(self, name) for name in _NAMED}
        try:
            return LABRBF(**kw, **extra, random_state=seed, progress_bar=self.progress_bar)
        except TypeError as e:
            raise ValueError(f"kernel_params has an argument LABRBF does not take: {e}") from None

    @limit_blas
    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y):
        """Train the cross-fitted LAB-RBF models (Algorithm 1) and the Bayesian last layer."""
        X, y = validate_data(self, X, y, dtype=np.float64, ensure_min_samples=4, y_numeric=True)
        y = np.asarray(y, dtype=float)
        ne, cf = self.n_estimators, self.calibration_fraction
        if ne * cf > 0.5:
            raise ValueError(f"n_estimators * calibration_fraction must be <= 0.5, got {ne} * {cf}")
        seed = self._seed()
        n, E = len(y), int(self.n_estimators)
        # Disjoint calibration blocks, one per model: each residual of the last layer comes
        # from the model that did not see the row (the residuals of training rows are
        # optimistic, so intervals from them are too narrow).
        n_cal = int(round(self.calibration_fraction * n))
        perm = np.random.default_rng(seed).permutation(n)
        if self.calibration_fraction > 0 and n_cal >= 2 and n - E * n_cal >= 4:
            blocks = [np.sort(perm[j * n_cal : (j + 1) * n_cal]) for j in range(E)]
        else:
            blocks = [np.zeros(0, dtype=int)] * E
        self.kernels_ = []
        for j, cal in enumerate(blocks):
            # the block is never trained on; it only says whether the trained bandwidths beat
            # the untrained global one (a two-way choice: its residuals stay honest)
            kernel, val = self._make_kernel(seed + j), (cal if len(cal) else None)
            self.kernels_.append(fit_kernel(kernel, X, y, validation_index=val))
        self._set_fitted_views()
        self.support_vectors_ = X[self.support_index_]
        self.n_iter_ = int(sum(k.n_iter_ for k in self.kernels_))

        # Bayesian last layer on the held-out calibration rows. Without them
        # (calibration_fraction = 0, tiny data) it uses the training rows outside the
        # support, whose residuals are optimistic. (Leave-one-out residuals of the support
        # points, LABRBF.loo_residuals, are far too wide: the learned kernels are narrow.)
        self.y_scale_ = float(np.std(y)) if np.std(y) > 0 else 1.0
        if len(blocks[0]):
            rows = np.concatenate(blocks)
            r = np.concatenate(
                [y[c] - k.predict_f1(X[c]) for k, c in zip(self.kernels_, blocks, strict=True)]
            )
        else:
            rows = np.setdiff1d(np.arange(n), self.support_index_)
            rows = rows if len(rows) else np.arange(n)
            r = y[rows] - self.predict_krr_(X[rows])
        order = np.argsort(rows)
        rows, r = rows[order], r[order]
        self.calibration_index_ = rows if len(blocks[0]) else np.zeros(0, dtype=int)
        Phi = self._features(X[rows])
        r = r / self.y_scale_
        # sufficient statistics in NumPy (blr.feature_stats would compile per row count)
        st = blr.Stats(Phi.T @ Phi, Phi.T @ r, r @ r, float(len(r)))
        if isinstance(self.prior_precision, str):
            grid = 10.0 ** np.arange(-3.0, 6.5, 0.5)
            ev = [float(blr.nig_log_marginal(st, g, self.a0, self.b0)) for g in grid]
            ev = np.where(np.isfinite(ev), ev, -np.inf)
            self.prior_precision_ = float(grid[int(np.argmax(ev))])
        else:
            self.prior_precision_ = float(self.prior_precision)
        self.posterior_ = blr.nig_posterior(st, self.prior_precision_, self.a0, self.b0)
        if not all(np.all(np.isfinite(np.asarray(a))) for a in self.posterior_):
            raise FloatingPointError(
                "the Bayesian last layer is not finite (ill-conditioned features); "
                "set a larger prior_precision"
            )
        self._build_idata(Phi, r * self.y_scale_, rows, seed)
        return self

    def _set_fitted_views(self):
        """Data-unit views of the fitted kernels (support points, bandwidths, f1 terms)."""
        ks = self.kernels_
        self.kernel_ = ks[0]
        self.support_index_ = np.concatenate([k.support_index_ for k in ks])
        self.bandwidths_ = np.vstack([k.bandwidths_ / k.half_range_ for k in ks])
        self.dual_coef_ = np.concatenate([k.dual_coef_ for k in ks]) / len(ks)
        self.intercept_ = float(np.mean([float(k.intercept_) for k in ks]))
        self.n_support_ = len(self.support_index_)
        self.theta0_ = float(np.mean([float(k.theta0_) for k in ks]))
        self.history_ = getattr(ks[0], "history_", None)

    def predict_krr_(self, X) -> np.ndarray:
        """Mean of the models' :math:`f_1` (no input validation; internal)."""
        return np.mean([k.predict_f1(X) for k in self.kernels_], axis=0)

    def _features(self, X):
        """Last-layer features :math:`[1, K_1(x, X_{sv,1}), \\dots, K_E(x, X_{sv,E})]/E`."""
        K = np.hstack([k._support_gram_np(X) for k in self.kernels_]) / len(self.kernels_)
        return np.hstack([np.ones((len(K), 1)), K])

    def _build_idata(self, Phi, resid, rows, seed):
        post = self.posterior_
        rng = np.random.default_rng(seed)
        S = self.num_chains * self.num_samples
        a, b = float(post.a), float(post.b)
        sigma2 = b / rng.gamma(a, 1.0, size=S)  # InvGamma(a, b)
        L = np.asarray(post.L)
        z = rng.standard_normal((S, L.shape[0]))
        # w = w_N + sigma L^{-T} z has covariance sigma^2 Lambda_N^{-1}
        W = (
            np.asarray(post.w)
            + np.sqrt(sigma2)[:, None] * solve_triangular(L, z.T, lower=True, trans="T").T
        )
        noise = np.sqrt(sigma2) * self.y_scale_
        W = W * self.y_scale_
        shape = (self.num_chains, self.num_samples)
        names = ["intercept"] + [f"sv{i}" for i in range(self.n_support_)]
        samples = {
            "noise": noise.reshape(shape),
            "weights": W.reshape(shape + (W.shape[1],)),
            "weight_norm": np.linalg.norm(W[:, 1:], axis=1).reshape(shape),
        }
        idata = diagnostics.from_samples(
            samples, dims={"weights": ["feature"]}, coords={"feature": names}
        )
        mu = W @ Phi.T  # (S, n_rows)
        ll = stats.norm.logpdf(resid[None, :], mu, noise[:, None])
        diagnostics.add_group(
            idata,
            "log_likelihood",
            {"y": ll.reshape(shape + (-1,))},
            dims={"y": ["obs"]},
            coords={"obs": rows},
        )
        diagnostics.add_group(
            idata,
            "observed_data",
            {"y": resid},
            dims={"y": ["obs"]},
            coords={"obs": rows},
            sample_dims=False,
        )
        # replicated residuals, one per exact draw (w_s, sigma_s): y_rep = phi^T w_s + sigma_s z
        y_rep = mu + noise[:, None] * rng.standard_normal(mu.shape)
        diagnostics.add_group(
            idata,
            "posterior_predictive",
            {"y": y_rep.reshape(shape + (-1,))},
            dims={"y": ["obs"]},
            coords={"obs": rows},
        )
        diagnostics.set_attrs(
            idata,
            inference="exact NIG draws (Bayesian last layer)",
            random_seed=seed,
            model="LABRBFRegressor",
            prior_precision=self.prior_precision_,
        )
        # the inputs' names (pandas columns) too, though the posterior is over the basis
        diagnostics.add_coords(idata, "posterior", input_feature=self._coords(0)["feature"])
        self.idata_ = idata
        self.convergence_ = diagnostics.convergence_report(
            idata, var_names=["noise", "weight_norm"], warn=False
        )

    # ------------------------------------------------------------------ predict
    def _check_X(self, X):
        check_is_fitted(self)
        return validate_data(self, X, reset=False, dtype=np.float64)

    @limit_blas
    def predict_krr(self, X, regressor: str = "f1") -> np.ndarray:
        """Return the paper's point prediction, averaged over the models.

        ``"f1"`` (eq. 8) or ``"f2"`` (eq. 6, test bandwidth from the nearest support point).
        """
        if regressor not in ("f1", "f2"):
            raise ValueError(f"regressor must be 'f1' or 'f2', got {regressor!r}")
        X = self._check_X(X)
        if regressor == "f1":
            return self.predict_krr_(X)
        return np.mean([k.predict_f2(X) for k in self.kernels_], axis=0)

    @limit_blas
    def predictive(self, X) -> MixturePredictive:
        r"""Student-t posterior predictive of new observations (one exact component).

        Location :math:`\bar f_1(t) + \phi(t)^\top w_N`. The last layer is fitted on the
        held-out residuals of *single* models, so its squared scale :math:`s^2(t)` estimates
        the error of one model; the mean of the models errs less by their spread
        :math:`a(t) = \frac1E\sum_j (f_{1,j}(t) - \bar f_1(t))^2`, exactly
        (ambiguity decomposition, Krogh & Vedelsby 1995:
        :math:`(\bar f - y)^2 = \frac1E\sum_j (f_j - y)^2 - a`). The scale used is
        :math:`\sqrt{\max(s^2(t) - a(t),\ s^2(t)/E)}` (the floor: errors of the models
        are not negatively correlated). Without the correction, the intervals are those of one
        model, too wide for the mean, which errs less.
        """
        X = self._check_X(X)
        Phi = self._features(X)
        loc, scale, df = _nig_predictive_np(self.posterior_, Phi)
        F = np.stack([k.predict_f1(X) for k in self.kernels_])
        loc = F.mean(axis=0) + self.y_scale_ * loc
        s2 = (self.y_scale_ * scale) ** 2
        scale = np.sqrt(np.maximum(s2 - F.var(axis=0), s2 / len(F)))
        return MixturePredictive(loc[None, :], scale[None, :], np.asarray([df]))

    # ------------------------------------------------------------------ saving (no pickle)
    _SCALARS = ("intercept_", "y_scale_", "prior_precision_", "n_support_", "theta0_", "n_iter_")

    def _save_state(self) -> tuple[dict, dict]:
        """Fitted state for :func:`bayeskern.runs.save_run` (JSON metadata + arrays)."""
        check_is_fitted(self)
        meta = {
            "n_features_in": int(self.n_features_in_),
            "kernels": [k.get_config() for k in self.kernels_],
            "history": self.history_,
            **{k: getattr(self, k) for k in self._SCALARS},
        }
        if hasattr(self, "feature_names_in_"):
            meta["feature_names_in"] = [str(c) for c in self.feature_names_in_]
        arrays = {
            f"kernel{j}/{k}": v
            for j, kern in enumerate(self.kernels_)
            for k, v in kern.get_state().items()
        }
        arrays.update(
            {f"posterior/{k}": np.asarray(v) for k, v in self.posterior_._asdict().items()}
        )
        arrays["support_vectors"] = self.support_vectors_
        arrays["calibration_index"] = self.calibration_index_
        return meta, arrays

    def _load_state(self, meta: dict, arrays: dict) -> None:
        """Inverse of :meth:`_save_state`."""
        from bayeskern.kernels.base import kernel_from_config

        self.n_features_in_ = meta["n_features_in"]
        if "feature_names_in" in meta:
            self.feature_names_in_ = np.asarray(meta["feature_names_in"], dtype=object)
        self.kernels_ = []
        for j, config in enumerate(meta["kernels"]):
            pre = f"kernel{j}/"
            state = {k[len(pre) :]: v for k, v in arrays.items() if k.startswith(pre)}
            self.kernels_.append(kernel_from_config(config, state))
        self._set_fitted_views()
        for k in self._SCALARS:
            setattr(self, k, meta[k])
        self.history_ = meta["history"]
        self.posterior_ = blr.NIGPosterior(
            *(arrays[f"posterior/{f}"] for f in blr.NIGPosterior._fields)
        )
        self.support_vectors_ = arrays["support_vectors"]
        self.calibration_index_ = arrays["calibration_index"]
        self.convergence_ = diagnostics.convergence_report(
            self.idata_, var_names=["noise", "weight_norm"], warn=False
        )

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        return self._sklearn_tags_common(tags)
