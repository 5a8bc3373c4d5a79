"""Bayesian GP estimators: :class:`GPRegressor` and :class:`GPClassifier`.

NUTS samples the kernel hyper-parameters (and, for classification, the whitened latent
function); predictions average over the posterior draws, so intervals include the
hyper-parameter uncertainty that a maximum-marginal-likelihood (ML-II) fit ignores.
Any bayeskern kernel works, including the data-dependent ones (VSK, CkRBF, Xiong...), which
are fitted on the standardized training data before sampling.
"""

from __future__ import annotations

import warnings

import jax
import jax.numpy as jnp
import numpy as np
from scipy import special, stats
from sklearn.base import BaseEstimator, ClassifierMixin, RegressorMixin
from sklearn.utils import check_random_state, check_X_y

from bayeskern import diagnostics
from bayeskern.batching import batched_map, row_slices
from bayeskern.devices import limit_blas
from bayeskern.estimators.base import (
    BayesianEstimatorMixin,
    PredictiveRegressorMixin,
    Standardizer,
    check_numeric,
    flat_draws,
    map_draws,
    validate_binary,
)
from bayeskern.inference import run_nuts
from bayeskern.kernels import RBF, get_kernel, name_leaves, term_name
from bayeskern.laplace import probit_logit
from bayeskern.linalg import cholesky, triangular_inverse
from bayeskern.models.gp import (
    JITTER,
    classification_predictive,
    gp_classification,
    gp_classification_laplace,
    gp_regression,
    kernel_matrix,
    laplace_classification_loo,
    laplace_classification_predictive,
    predict_from_factors,
    prepare_kernel,
    regression_factors,
    regression_predictive,
    theta_from_draw,
)
from bayeskern.predictive import MixturePredictive, draw_seed, row_uniforms
from bayeskern.runs import register_estimator

__all__ = ["GPRegressor", "GPClassifier"]

_SAMPLER_DOC = """
    num_warmup, num_samples, num_chains : int
        NUTS settings (warm-up draws, kept draws per chain, chains).
    chain_method : {None, "parallel", "sequential", "vectorized"}
        ``None`` runs chains in parallel when there are enough devices.
    target_accept_prob : float
        NUTS target acceptance; raise to 0.9-0.99 when divergences are reported.
    init : {"map", "prior"}
        ``"map"`` (default): find the posterior mode by L-BFGS from four starts, start every
        chain from a draw of the Laplace approximation there and use the inverse Hessian at
        the mode as NUTS's dense inverse mass matrix (:func:`bayeskern.inference.run_nuts`);
        ``"prior"``: NumPyro's start at the prior median with an adapted mass matrix.
    dense_mass : bool
        With ``init="prior"``: adapt a dense mass matrix (helps correlated hyper-parameters).
    adapt_mass_matrix : bool
        With ``init="map"``: keep adapting the (dense) mass matrix in Stan's warm-up windows,
        starting from the inverse Hessian (default ``True``). Measured on CO2, seeds 0-2:
        6.4-6.9 leapfrog steps per draw and converged on every seed with adaptation; the
        inverse Hessian kept fixed needed 14-15 steps on two of the three seeds (the mode
        found was not where most of the posterior mass is).
    progress_bar : bool
        Show NumPyro's progress bar.
    random_state : int, numpy Generator or None
        Seed; the same int gives the same draws and predictions.
"""


class _GPBase(BayesianEstimatorMixin, BaseEstimator):
    def __init__(
        self,
        kernel=None,
        *,
        num_warmup: int = 500,
        num_samples: int = 500,
        num_chains: int = 4,
        chain_method: str | None = None,
        target_accept_prob: float = 0.8,
        init: str = "map",
        dense_mass: bool = False,
        adapt_mass_matrix: bool = True,
        progress_bar: bool = True,
        random_state=None,
    ):
        self.kernel = kernel
        self.num_warmup = num_warmup
        self.num_samples = num_samples
        self.num_chains = num_chains
        self.chain_method = chain_method
        self.target_accept_prob = target_accept_prob
        self.init = init
        self.dense_mass = dense_mass
        self.adapt_mass_matrix = adapt_mass_matrix
        self.progress_bar = progress_bar
        self.random_state = random_state

    # ---------------------------------------------------------------- shared fitting
    def _fit_kernel(self, Xs, y_for_kernel):
        kernel = get_kernel(self.kernel if self.kernel is not None else RBF())
        if not kernel.symmetric:
            raise TypeError(
                f"kernel {kernel!r} is asymmetric and cannot be a GP covariance; for LAB-RBF "
                "use bk.kernels.LABRBFFeatures or bk.LABRBFRegressor's Bayesian last layer"
            )
        return name_leaves(name_leaves(kernel).fit(Xs, y_for_kernel))

    def _dims(self):
        dims = {"amplitude": ["term"], "eta": ["obs"], "f": ["obs"], "y": ["obs"],
                "X": ["obs", "feature"]}
        for leaf in self.kernel_.leaves():
            for p, h in leaf.hyperparameters().items():
                if h.ard and h.value is None:
                    dims[leaf._site(p)] = ["feature"]
        return dims

    def _draw_map(self, name, per_draw):
        """Map ``per_draw(kernel_, x_scale)(draw, *args)`` over the posterior draws.

        One at a time (:func:`~bayeskern.batching.batched_map` with batch 1: a batch of
        draws would put batched LAPACK calls inside the loop, which hangs XLA:CPU), jitted
        once per fit and cached, so that repeated ``predict`` calls (batched prediction of
        many rows) do not recompile. The cache is keyed on the identity of the fitted
        ``kernel_`` and ``x_std_`` (new objects at every fit) and is dropped when pickling.
        """
        cache = self.__dict__.setdefault("_cache", {})
        hit = cache.get(name)
        if hit is None or hit[0] is not self.kernel_ or hit[1] is not self.x_std_:
            fn = per_draw(self.kernel_, self.x_std_.scale)
            jf = jax.jit(lambda d, *a: batched_map(lambda x: fn(x, *a), d, 1))
            hit = cache[name] = (self.kernel_, self.x_std_, jf)
        return hit[2]

    def _sample(self, model, Xs, y_model, y_observed, X):
        coords = self._coords(len(Xs))
        coords["term"] = [term_name(t) for t in self.kernel_.terms()]
        dims = self._dims()
        Xj = jnp.asarray(Xs)
        self.idata_, _ = run_nuts(
            model,
            model_kwargs=dict(X=Xj, y=jnp.asarray(y_model), kernel=self.kernel_,
                              x_scale=self.x_std_.scale,
                              prepared=prepare_kernel(self.kernel_, Xj, Xj, self.x_std_.scale)),
            rng_key=self._seed(),
            num_warmup=self.num_warmup,
            num_samples=self.num_samples,
            num_chains=self.num_chains,
            chain_method=self.chain_method,
            progress_bar=self.progress_bar,
            target_accept_prob=self.target_accept_prob,
            init=self.init,
            dense_mass=self.dense_mass,
            adapt_mass_matrix=self.adapt_mass_matrix or self.init != "map",
            dims=dims,
            coords=coords,
            observed={"y": y_observed},
        )
        diagnostics.add_group(self.idata_, "constant_data", {"X": X}, dims=dims, coords=coords,
                              sample_dims=False)
        diagnostics.set_attrs(self.idata_, model=type(self).__name__, kernel=repr(self.kernel_),
                              random_state=str(self.random_state))
        self._site_names = [v for v in self.idata_.posterior.data_vars if v != "f"]
        self.convergence_ = diagnostics.convergence_report(self.idata_,
                                                           warn=self.num_samples >= 100)

    def _draws(self, with_f: bool = False):
        return flat_draws(self.idata_, [v for v in self.idata_.posterior.data_vars
                                        if with_f or v != "f"])

    def sample_prior_predictive(self, X, y, n_draws: int = 100, random_state=None):
        """Draws of the observations at the rows of ``X`` under the prior alone.

        The same model as :meth:`fit` (``models/gp.py``), run forward with every
        hyper-parameter drawn from its prior (a prior predictive check, Gabry et al. 2019,
        "Visualization in Bayesian workflow"). ``y`` is used only as :meth:`fit` uses it
        before sampling: to standardize (regression) and to fit data-dependent kernels
        (VSK's ψ, CkRBF's cells...); the draws never see its values otherwise. Nothing on
        the estimator is changed.

        Returns an array ``(n_draws, n_rows)``: values in the units of ``y`` (regression) or
        class labels (classification).
        """
        from numpyro.infer import Predictive

        n_draws = int(n_draws)
        if n_draws < 1:
            raise ValueError(f"n_draws must be >= 1, got {n_draws}")
        classifier = isinstance(self, ClassifierMixin)
        check_numeric(X, y, y_numeric=not classifier)
        X, y = check_X_y(X, y, dtype=np.float64, ensure_min_samples=2, y_numeric=not classifier)
        xs = Standardizer.fit(X)
        if classifier:
            classes, y_fit = validate_binary(y)
        else:
            ys = Standardizer.fit(np.asarray(y, dtype=float))
            y_fit = ys.transform(np.asarray(y, dtype=float))
        kernel = self._fit_kernel(xs.transform(X), y_fit)
        model = gp_regression
        if classifier:
            model = gp_classification if self.inference == "latent" else gp_classification_laplace
        seed = self._seed() if random_state is None else \
            int(check_random_state(random_state).randint(0, 2**31 - 1))
        draws = Predictive(model, num_samples=n_draws)(
            jax.random.PRNGKey(seed), X=jnp.asarray(xs.transform(X)), kernel=kernel,
            x_scale=xs.scale)["y"]
        draws = np.asarray(draws)
        if classifier:
            return np.asarray(classes)[draws.astype(int)]
        return draws * ys.scale + ys.mean


@register_estimator
class GPRegressor(PredictiveRegressorMixin, RegressorMixin, _GPBase):  # noqa: D101 (__doc__ is an f-string)
    __doc__ = f"""Bayesian Gaussian-process regression (exact Gaussian marginal likelihood).

    The model (``models/gp.py``) on standardized data is

    .. math:: y \\sim N\\big(0,\\ \\textstyle\\sum_t a_t^2 k_t(X, X) + \\sigma^2 I\\big),\\quad
              a_t \\sim \\mathrm{{HalfNormal}}(1),\\ \\sigma \\sim \\mathrm{{HalfNormal}}(1),

    with each free kernel hyper-parameter under its kernel's prior (length-scales
    LogNormal(0, 1)). Predictions are the mixture over posterior draws of the Gaussian
    conditionals (Rasmussen & Williams 2006, eqs. 2.25-2.26) plus observation noise.

    Parameters
    ----------
    kernel : Kernel or str, default RBF()
        Any bayeskern kernel (``bk.kernels.Linear() + bk.kernels.RBF()``...) or a name
        (``"rbf"``, ``"linear+rbf*periodic"``). Values given explicitly are held fixed, in
        the units of ``X``; values left out are sampled.
    {_SAMPLER_DOC}
    Attributes
    ----------
    idata_ : arviz.InferenceData
        Posterior, sample_stats, log_likelihood (exact leave-one-out conditionals, so that
        PSIS-LOO is valid for this non-factorized model; Bürkner, Gabry & Vehtari 2021),
        observed_data and constant_data.
    convergence_ : ConvergenceReport
    kernel_ : the fitted, named kernel.
    """

    @limit_blas
    def fit(self, X, y):
        """Sample the posterior of the kernel hyper-parameters and the noise."""
        X, y = self._validate_fit(X, y, classifier=False)
        self.x_std_ = Standardizer.fit(X)
        self.y_std_ = Standardizer.fit(y)
        Xs, ys = self.x_std_.transform(X), self.y_std_.transform(y)
        self.kernel_ = self._fit_kernel(Xs, ys)
        self._sample(gp_regression, Xs, ys, y, X)
        self._add_loo_loglik(Xs, ys)
        return self

    def _add_loo_loglik(self, Xs, ys):
        """Exact LOO predictive log densities per draw (R&W eq. 5.12), original units."""
        kernel, x_scale = self.kernel_, self.x_std_.scale
        X, y = jnp.asarray(Xs), jnp.asarray(ys)
        prepared = prepare_kernel(kernel, X, X, x_scale)

        def one(draw):
            # mu_i = y_i - [K^-1 y]_i / [K^-1]_ii, var_i = 1 / [K^-1]_ii, with
            # diag(K^-1) = column sums of (L^-1)^2
            theta = theta_from_draw(kernel, draw, x_scale)
            K = kernel_matrix(kernel, theta, draw["amplitude"], prepared=prepared)
            L = cholesky(K + (draw["noise"] ** 2 + JITTER) * jnp.eye(X.shape[0]))
            A = triangular_inverse(L)
            d = jnp.sum(A * A, axis=0)
            mu = y - (A.T @ (A @ y)) / d
            return jax.scipy.stats.norm.logpdf(y, mu, 1.0 / jnp.sqrt(d))

        ll = np.asarray(map_draws(one, self._draws())) - np.log(self.y_std_.scale)
        n_chain = self.idata_.posterior.sizes["chain"]
        ll = ll.reshape(n_chain, -1, ll.shape[-1])
        diagnostics.add_group(self.idata_, "log_likelihood", {"y": ll}, dims={"y": ["obs"]},
                              coords={"obs": np.arange(ll.shape[-1])})

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
            out = map_draws(lambda d, Xt, yt: regression_factors(kernel, d, Xt, yt, x_scale),
                            draws, Xtr, ytr)
            # on the host: arrays sharded over the CPU devices (map_draws's pmap) would make
            # every later jitted call a multi-device computation
            out = tuple(np.asarray(a) for a in out)
            hit = cache["factors"] = (self.kernel_, self.x_std_, out)
        return hit[2]

    @limit_blas
    def predictive(self, X) -> MixturePredictive:
        """Posterior predictive distribution of new observations at ``X`` (data units)."""
        X = self._validate_predict(X)
        Xs = jnp.asarray(self.x_std_.transform(X))
        Xtr = jnp.asarray(self.x_std_.transform(np.asarray(self.idata_.constant_data["X"])))
        ytr = jnp.asarray(self.y_std_.transform(np.asarray(self.idata_.observed_data["y"])))
        draws = self._draws()
        factors = self._factors(draws, Xtr, ytr)
        if factors is None:  # too many draws x training points to keep: factor per chunk
            fn = self._draw_map("regression", lambda kernel, x_scale: (
                lambda d, Xt, yt, Xn: regression_predictive(kernel, d, Xt, yt, Xn, x_scale)))
            args = (draws, Xtr, ytr)
        else:
            fn = self._draw_map("regression_factors", lambda kernel, x_scale: (
                lambda d, Xt, Xn: (*predict_from_factors(kernel, d, (d["__Linv"], d["__alpha"]),
                                                         Xt, Xn, x_scale), d["__jitter"])))
            args = ({**draws, "__Linv": factors[0], "__alpha": factors[1],
                     "__jitter": factors[2]}, Xtr)
        locs, scales = [], []
        jitter_max = 0.0
        # rows per chunk bounded by the draws and by the (16 draws x N_train x rows) blocks
        for sl in _chunks(len(Xs), max(self.num_chains * self.num_samples, 16 * len(Xtr))):
            mean, var, noise2, jit = fn(*args, Xs[sl])
            locs.append(np.asarray(mean))
            scales.append(np.sqrt(np.asarray(var) + np.asarray(noise2)[:, None]))
            jitter_max = max(jitter_max, float(np.max(np.asarray(jit))))
        _report_jitter(jitter_max, self)
        loc = np.concatenate(locs, axis=1) * self.y_std_.scale + self.y_std_.mean
        scale = np.concatenate(scales, axis=1) * self.y_std_.scale
        return MixturePredictive(loc, scale)



@register_estimator
class GPClassifier(ClassifierMixin, _GPBase):  # noqa: D101 (__doc__ is an f-string)
    __doc__ = f"""Bayesian binary GP classification (Bernoulli-logit likelihood).

    .. math:: f = b + g,\\ g \\sim GP\\big(0, \\textstyle\\sum_t a_t^2 k_t\\big),\\
              b \\sim N(0, 1.5^2),\\ y_i \\sim \\mathrm{{Bernoulli}}(\\sigma(f_i))

    ``predict_proba`` averages over posterior draws
    :math:`E[\\sigma(f_*)] \\approx \\sigma(\\mu_*/\\sqrt{{1 + \\pi v_*/8}})` per draw
    (MacKay 1992's probit approximation of the logistic-Gaussian integral).

    Parameters
    ----------
    kernel : Kernel or str, default RBF()
    inference : {{"laplace", "latent"}}
        ``"laplace"`` (default): NUTS samples the kernel hyper-parameters only; the latent
        function is integrated out by the embedded Laplace approximation (Margossian et al.
        2020; ``models/gp.py``, :mod:`bayeskern.laplace`) and the bias exactly. ``"latent"``:
        NUTS also samples the :math:`n` latent values in the whitened parameterization
        :math:`f = b + L\\eta` (exact, much slower). Both are the same model.
    {_SAMPLER_DOC}
    """

    def __init__(self, kernel=None, *, inference: str = "laplace", num_warmup: int = 500,
                 num_samples: int = 500, num_chains: int = 4, chain_method: str | None = None,
                 target_accept_prob: float = 0.8, init: str = "map", dense_mass: bool = False,
                 adapt_mass_matrix: bool = True, progress_bar: bool = True,
                 random_state=None):
        super().__init__(kernel, num_warmup=num_warmup, num_samples=num_samples,
                         num_chains=num_chains, chain_method=chain_method,
                         target_accept_prob=target_accept_prob, init=init,
                         dense_mass=dense_mass, adapt_mass_matrix=adapt_mass_matrix,
                         progress_bar=progress_bar, random_state=random_state)
        self.inference = inference

    @limit_blas
    def fit(self, X, y):
        """Sample the kernel hyper-parameters.

        With ``inference="latent"``, also the latent function.
        """
        if self.inference not in ("laplace", "latent"):
            raise ValueError(f"inference must be 'laplace' or 'latent', got {self.inference!r}")
        X, y = self._validate_fit(X, y, classifier=True)
        self.classes_, y01 = validate_binary(y)
        self.x_std_ = Standardizer.fit(X)
        Xs = self.x_std_.transform(X)
        self.kernel_ = self._fit_kernel(Xs, y01)
        if self.inference == "latent":
            self._sample(gp_classification, Xs, y01, y01, X)
            # the Bernoulli likelihood factorizes given f: pointwise log-likelihood for LOO
            f = np.asarray(self.idata_.posterior["f"])
            ll = stats.bernoulli.logpmf(y01, jax.nn.sigmoid(f))
        else:
            self._sample(gp_classification_laplace, Xs, y01, y01, X)
            kernel, x_scale = self.kernel_, self.x_std_.scale
            Xj, yj = jnp.asarray(Xs), jnp.asarray(y01)
            ll = np.asarray(map_draws(
                lambda d: laplace_classification_loo(kernel, d, Xj, yj, x_scale),
                self._draws(with_f=True)))
            ll = ll.reshape(self.idata_.posterior.sizes["chain"], -1, ll.shape[-1])
        diagnostics.add_group(self.idata_, "log_likelihood", {"y": ll}, dims={"y": ["obs"]},
                              coords={"obs": np.arange(len(y01))})
        return self

    def _latent(self, X):
        X = self._validate_predict(X)
        Xs = jnp.asarray(self.x_std_.transform(X))
        Xtr = jnp.asarray(self.x_std_.transform(np.asarray(self.idata_.constant_data["X"])))
        if getattr(self, "inference", "latent") == "laplace":
            ytr = jnp.asarray(np.asarray(self.idata_.observed_data["y"]), dtype=float)  # 0/1
            fn = self._draw_map("laplace", lambda kernel, x_scale: (
                lambda d, Xt, Xn: laplace_classification_predictive(kernel, d, Xt, ytr, Xn,
                                                                    x_scale)))
            draws = self._draws(with_f=True)
        else:
            fn = self._draw_map("classification", lambda kernel, x_scale: (
                lambda d, Xt, Xn: classification_predictive(kernel, d, Xt, Xn, x_scale)))
            draws = self._draws()
        means, vars_ = [], []
        jitter_max = 0.0
        for sl in _chunks(len(Xs), max(self.num_chains * self.num_samples, 16 * len(Xtr))):
            m, v, jit = fn(draws, Xtr, Xs[sl])
            means.append(np.asarray(m))
            vars_.append(np.asarray(v))
            jitter_max = max(jitter_max, float(np.max(np.asarray(jit))))
        _report_jitter(jitter_max, self)
        return np.concatenate(means, axis=1), np.concatenate(vars_, axis=1)

    def _proba_draws(self, X):
        """Return the per-draw :math:`P(y = 1)`, ``(draws, n)``.

        MacKay's probit approximation :math:`\\sigma(\\mu_s/\\sqrt{1 + \\pi v_s/8})`.
        """
        m, v = self._latent(X)
        return np.asarray(jax.nn.sigmoid(probit_logit(m, v)))

    @limit_blas
    def predict_proba(self, X):
        """Posterior predictive class probabilities, shape ``(n, 2)``."""
        p1 = self._proba_draws(X).mean(axis=0)
        return np.column_stack([1.0 - p1, p1])

    def predict(self, X):
        """Most probable class."""
        p1 = self.predict_proba(X)[:, 1]  # checks fitted state before classes_ is read
        return self.classes_[(p1 >= 0.5).astype(int)]

    @limit_blas
    def sample_posterior_predictive(self, X, n_draws: int = 200, random_state=None,
                                    row_offset: int = 0):
        """Draw predictive labels, ``(n_draws, n)`` (class labels).

        Per point and draw a posterior draw :math:`s`, :math:`f \\sim N(\\mu_s, v_s)`, then a
        Bernoulli(σ(f)) label.

        The draws of row ``i`` depend only on the seed and on ``row_offset + i`` (counter-based,
        :func:`bayeskern.predictive.row_uniforms`), not on the other rows of ``X``.
        """
        m, v = self._latent(X)
        seed = draw_seed(self._seed() if random_state is None else random_state)
        rows = row_offset + np.arange(m.shape[1])
        u = [row_uniforms(seed, rows, n_draws, k) for k in range(3)]
        idx = np.minimum((u[0] * m.shape[0]).astype(np.int64), m.shape[0] - 1)
        cols = np.broadcast_to(np.arange(m.shape[1]), idx.shape)
        f = m[idx, cols] + np.sqrt(v[idx, cols]) * special.ndtri(u[1])
        return self.classes_[(u[2] < special.expit(f)).astype(int)]

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.classifier_tags.multi_class = False
        return tags


#: Largest size (bytes) of the per-draw prediction factors :math:`L^{-1}` kept after a fit
#: (draws x N_train^2 x 8): 20 draws of 300 rows take 14 MB, 2000 draws of 425 rows 2.9 GB
#: (over: those factor per chunk of new points instead).
FACTOR_CACHE_BYTES = 2**29


def _chunks(n: int, n_draws: int, budget: int = 2**25):
    """Return slices over ``n`` new points keeping draws × points within ``budget`` floats.

    One empty slice when ``n = 0``, so that the results still concatenate.
    """
    return row_slices(n, max(256, budget // max(n_draws, 1))) or [slice(0, 0)]


def _report_jitter(jitter: float, est) -> None:
    if not np.isfinite(jitter):
        raise FloatingPointError(
            f"{type(est).__name__}: the kernel matrix is not positive definite even with "
            "jitter 1e-2 × its mean diagonal; check the kernel (duplicated points with zero "
            "noise, or an invalid kernel)"
        )
    if jitter > 1e-6:
        warnings.warn(f"{type(est).__name__}: Cholesky needed jitter {jitter:.1e} on some "
                      "draws (ill-conditioned kernel matrix)", UserWarning, stacklevel=3)
    est.max_jitter_ = max(getattr(est, "max_jitter_", 0.0), jitter)
    # recorded with the posterior too, so that the report and saved runs show it
    diagnostics.set_attrs(est.idata_, max_jitter=float(est.max_jitter_))
