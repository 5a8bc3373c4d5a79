"""What :class:`~bayeskern.GaBaSRRegressor` and :class:`~bayeskern.GaBaSRClassifier` share.

Parameter checks, the data set-up (:mod:`bayeskern.models.gabasr_setup`), the two samplers
(Laplace-whitened NUTS, :mod:`bayeskern.inference.whitening`; the paper's Gibbs sweep,
:mod:`bayeskern.inference.gabasr_gibbs`), the convergence judgement and the saved state;
the learned spectral density is read by :mod:`~bayeskern.estimators.gabasr_density`. The
numerical work lives in those modules; this is glue.
"""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np
from sklearn.base import BaseEstimator
from sklearn.utils._param_validation import StrOptions
from sklearn.utils.validation import check_is_fitted
from threadpoolctl import threadpool_limits

from bayeskern import diagnostics
from bayeskern.estimators.base import BayesianEstimatorMixin, Standardizer
from bayeskern.estimators.draws import flat_draws
from bayeskern.estimators.gabasr_density import _SpectralDensityMixin
from bayeskern.estimators.params import count
from bayeskern.estimators.validation import validate_binary
from bayeskern.hsgp import Basis
from bayeskern.inference import as_key, check_factorizing_chain_method
from bayeskern.inference.gabasr_gibbs import GibbsPrior, gibbs_sample
from bayeskern.inference.gibbs_predict import predict_proba, predict_regression
from bayeskern.inference.whitening import laplace_whitening, map_point, run_whitened_nuts
from bayeskern.models import gabasr as G
from bayeskern.models.gabasr_setup import (
    MEAN_FUNCTIONS,
    RobustScaler1,
    feature_spec,
    mean_basis,
    probe_points,
    spec_arrays,
    spec_from_arrays,
)

PARAMS_DOC = """
    Parameters
    ----------
    sampler : {"auto", "nuts", "gibbs"}, default "auto"
        ``"nuts"``: the reparameterized NumPyro model; ``"gibbs"``: the paper's Gibbs/MH
        sampler (``num_warmup`` and ``num_samples`` then count sweeps; convergence judged on
        the log evidence or log-likelihood, noise, weight prior precision and predictive
        mean at five inputs, not on the label-switching component parameters). ``"auto"``:
        ``"nuts"`` for regression, ``"gibbs"`` for classification (NUTS does not mix on the
        free-floating mixture under a Bernoulli likelihood: its trajectories saturate the
        tree depth). The sampler used is ``sampler_``.
    locally_stationary : bool, default False
        Use the locally stationary kernel (eq. 6) with a second DP mixture for the envelope.
    n_features : int, default 64
        Number of random frequencies :math:`M` (:math:`2M` feature columns). With
        ``locally_stationary`` it is the number of :math:`(\\omega, v)` pairs.
    n_components : int, default 4
        Truncation level :math:`K` of the stick-breaking DP (NUTS); :math:`M/K` frequencies
        per component. Unused components get weights near zero.
    mean_function : {"zero", "constant", "linear", "poly2"}
        Trend columns, integrated out in the evidence: constant and linear coefficients with
        the paper's vague prior, quadratic ones (``"poly2"``: :math:`[1, x, x^2]`, squares
        per column) with :math:`N(0, 1)` in standardized units
        (:func:`bayeskern.models.gabasr.trend_precision`). Default ``"poly2"`` for
        regression: a stationary kernel reverts to the mean function away from the data,
        so the mean function decides the extrapolated trend; a linear mean under-predicts
        any accelerating series (CO2: the GaBaSR results page of the documentation), and
        on data without curvature the unit-normal prior shrinks the squares towards
        zero. ``"linear"`` for classification (logits).
    input_transform : {"robust", "standard"}, default "robust"
        Median/IQR scaling clipped to ±8 robust units, or mean/sd scaling.
    num_warmup, num_samples, num_chains : int
        Sampler settings.
    chain_method : {None, "parallel", "sequential", "vectorized", "processes"}
        NUTS: ``None`` as :func:`bayeskern.inference.choose_chain_method` (parallel with one
        device per chain, else vectorized on a GPU and sequential on a CPU;
        ``"vectorized"`` is refused on a CPU, where batched factorizations can block XLA:CPU,
        :func:`bayeskern.inference.check_factorizing_chain_method`). Gibbs:
        ``"sequential"`` runs the chains one after the other, ``"processes"`` shares the same
        chains out to one process per core, ``None`` chooses ``"processes"`` for long runs
        (:func:`bayeskern.inference.gabasr_gibbs.gibbs_sample`, ``chain_method="auto"``);
        ``"vectorized"`` and ``"parallel"`` are refused (factorizations inside its loops,
        batched or pmapped, can hang XLA:CPU).
    target_accept_prob : float, default 0.8
    map_steps : int, default 30
        Maximum Newton steps of the MAP run that initializes and preconditions NUTS
        (0: the Laplace approximation is taken at the periodogram initialization).
    progress_bar : bool
    random_state : int, Generator or None
        Seeds the base draws, the MAP run and the sampler.
"""


class _GaBaSRBase(_SpectralDensityMixin, BayesianEstimatorMixin, BaseEstimator):
    _task = "regression"
    #: what ``sampler="auto"`` resolves to (``sampler_``)
    _AUTO_SAMPLER = "nuts"

    _parameter_constraints: dict = {
        **BayesianEstimatorMixin._parameter_constraints,
        "sampler": [StrOptions({"auto", "nuts", "gibbs"})],
        "locally_stationary": ["boolean"],
        "n_features": [count(1)],
        "n_components": [count(1), StrOptions({"auto"})],
        "mean_function": [StrOptions(set(MEAN_FUNCTIONS))],
        "input_transform": [StrOptions({"robust", "standard"})],
        "map_steps": [count(0)],
    }

    def __init__(
        self,
        *,
        sampler: str = "auto",
        locally_stationary: bool = False,
        n_features: int = 64,
        n_components: int = 4,
        mean_function: str = "poly2",
        input_transform: str = "robust",
        num_warmup: int = 500,
        num_samples: int = 500,
        num_chains: int = 4,
        chain_method: str | None = None,
        target_accept_prob: float = 0.8,
        map_steps: int = 30,
        progress_bar: bool = True,
        random_state=None,
    ):
        self.sampler = sampler
        self.locally_stationary = locally_stationary
        self.n_features = n_features
        self.n_components = n_components
        self.mean_function = mean_function
        self.input_transform = input_transform
        self.num_warmup = num_warmup
        self.num_samples = num_samples
        self.num_chains = num_chains
        self.chain_method = chain_method
        self.target_accept_prob = target_accept_prob
        self.map_steps = map_steps
        self.progress_bar = progress_bar
        self.random_state = random_state

    # ------------------------------------------------------------------ validation
    def _check_params(self):
        """Resolve ``sampler_``; refuse what no single constraint can say."""
        self.sampler_ = self._AUTO_SAMPLER if self.sampler == "auto" else self.sampler
        if self.sampler_ != "gibbs" and self.chain_method == "processes":
            raise ValueError(
                "chain_method='processes' is for the Gibbs sampler; NUTS chains run in one "
                "process (None, 'parallel', 'vectorized' or 'sequential')"
            )
        if self.sampler_ == "gibbs" and self.chain_method in ("vectorized", "parallel"):
            # vmapped LAPACK calls inside the sweep's loops can hang XLA:CPU, and pmapped
            # chains can stall on CPU devices
            raise ValueError(
                f"chain_method={self.chain_method!r} is not available with the "
                "Gibbs sampler (factorizations inside its loops, batched or "
                "pmapped over CPU devices, can hang XLA:CPU); use None or "
                "'sequential'"
            )
        if self.sampler_ != "gibbs":
            check_factorizing_chain_method(self.chain_method, self.num_chains)
        if self._n_components_features() > self.n_features:
            raise ValueError(
                f"n_components ({self.n_components}) must not exceed n_features ({self.n_features})"
            )

    def _n_components_features(self) -> int:
        """Return the truncation level of the random-feature model (``"auto"``: 4)."""
        return 4 if isinstance(self.n_components, str) else int(self.n_components)

    # ------------------------------------------------------------------ shared set-up
    def _setup(self, X):
        self.x_scaler_ = RobustScaler1.fit(X, robust=self.input_transform == "robust")
        Z = self.x_scaler_.transform(X)
        self.spec_, self.freq_scale_ = feature_spec(
            self._seed(),
            Z,
            n_features=self.n_features,
            n_components=self._n_components_features(),
            locally_stationary=self.locally_stationary,
        )
        return Z, self._basis(Z)

    def _basis(self, Z):
        return mean_basis(Z, self.mean_function)

    def _probe(self, Z):
        """Return a few training points spread along the first column (for ``f_probe``)."""
        return probe_points(Z, self.mean_function)

    def _count(self, name: str) -> int:
        """Return a sampler count as used (the resolved ``num_warmup_`` / ``num_samples_``)."""
        return getattr(self, name + "_", getattr(self, name))

    # ------------------------------------------------------------------ samplers
    def _map_values(self, model, init, kw):
        """Constrained site values at the MAP point of ``model``."""
        whitened, self.map_value_ = laplace_whitening(
            model, init, kw, rng_key=as_key(self._seed() + 1), map_steps=self.map_steps
        )
        return map_point(whitened)

    def _observed(self, y):
        """``y`` as the model observes it: the 0/1 codes of a classifier (as ``GPClassifier``).

        So that ``observed_data`` and ``posterior_predictive`` are numbers ArviZ can plot.
        """
        return validate_binary(y)[1] if self._task == "classification" else y

    def _nuts(self, model, kw, init, var_names, y_observed, X):
        y_observed = self._observed(y_observed)
        self.idata_, self.map_value_ = run_whitened_nuts(
            model,
            kw,
            init,
            laplace_key=as_key(self._seed() + 1),
            rng_key=self._seed(),
            map_steps=self.map_steps,
            X=X,
            y_observed=y_observed,
            coords=self._coords(len(X)),
            dims={"f_probe": ["probe"], "y": ["obs"]},
            num_warmup=self._count("num_warmup"),
            num_samples=self._count("num_samples"),
            num_chains=self.num_chains,
            chain_method=self.chain_method,
            progress_bar=self.progress_bar,
            target_accept_prob=self.target_accept_prob,
        )
        self._finish(var_names)

    #: the three models behind the two samplers, by name (``model_description_``)
    MODELS = {
        "exact": "collapsed spectral-mixture GP (exact evidence; NUTS)",
        "hsgp": "collapsed spectral-mixture GP on a Hilbert-space basis (NUTS)",
        "nuts": "random-feature DP mixture, truncated stick-breaking with fixed base draws (NUTS)",
        "gibbs": "random-feature DP mixture, Chinese restaurant process with free "
        "frequencies (Gibbs/Metropolis-Hastings, Pena-Llamas et al. 2023, section 3.2)",
    }

    @property
    def _spectral_gp(self) -> bool:
        """Whether the fitted model is the spectral-mixture GP (exact or on a basis)."""
        return getattr(self, "model_", None) in ("exact", "hsgp")

    def _finish(self, var_names, report_only=(), fitted=None):
        key = self.model_ if self._spectral_gp else self.sampler_
        self.model_description_ = self.MODELS[key]
        diagnostics.set_attrs(self.idata_, model_description=self.model_description_)
        diagnostics.set_attrs(
            self.idata_,
            model=type(self).__name__,
            random_state=str(self.random_state),
            locally_stationary=int(self.locally_stationary),
            n_features=self.n_features,
            mean_function=self.mean_function,
        )
        var_names = [v for v in var_names if v in self.idata_.posterior]
        self.convergence_vars_ = var_names
        self.convergence_report_only_ = [v for v in report_only if v in self.idata_.posterior]
        self.convergence_ = diagnostics.convergence_report(
            self.idata_,
            var_names=var_names,
            warn=self.idata_.posterior.sizes["draw"] >= 100,
            report_only=self.convergence_report_only_,
        )
        if self._task == "classification":  # the regressor's predictive needs its fit's end
            self._add_posterior_predictive(fitted)

    def _draw_probabilities(self, X):
        """Class-1 probability per posterior draw at ``X``, ``(draws, n)`` (classifier)."""
        return self._proba_draws(self.x_scaler_.transform(X))

    def _gibbs(self, Zs, target, B, y_observed, X):
        res = gibbs_sample(
            as_key(self._seed()),
            Zs,
            target,
            task=self._task,
            n_features=self.n_features,
            locally_stationary=bool(self.locally_stationary),
            num_warmup=self._count("num_warmup"),
            num_samples=self._count("num_samples"),
            num_chains=self.num_chains,
            prior=GibbsPrior(),
            mean_basis=B,
            progress_bar=self.progress_bar,
            chain_method=self.chain_method or "auto",
        )
        rows = res.samples.pop("log_lik_rows", None)  # classification: recorded by the chains
        self.gibbs_samples_ = res.samples
        self.gibbs_wall_time_ = res.wall_time
        samples = {k: v for k, v in res.samples.items() if k not in ("z", "z_v")}
        self.idata_ = diagnostics.from_samples(samples, sample_stats=res.sample_stats)
        diagnostics.set_attrs(
            self.idata_,
            sampler="gibbs",
            num_warmup=self._count("num_warmup"),
            num_samples=self._count("num_samples"),
            num_chains=self.num_chains,
        )
        # the data, as the NUTS path stores it (a saved Gibbs run is reloaded from these)
        coords = self._coords(len(X))
        diagnostics.add_group(
            self.idata_,
            "observed_data",
            {"y": self._observed(y_observed)},
            dims={"y": ["obs"]},
            coords=coords,
            sample_dims=False,
        )
        self._store_inputs(X, coords)
        self._add_gibbs_probe(Zs, target, B)
        fitted = None
        if rows is not None:  # log p(y_i | draw): the class-1 probability of each draw follows
            ll = rows.reshape(-1, rows.shape[-1])
            self._store_log_likelihood(ll)
            fitted = np.where(np.asarray(target) == 1, np.exp(ll), -np.expm1(ll))
        self._finish(
            list(self._GIBBS_JUDGED),
            report_only=("alpha", "n_components", "weights", "mu"),
            fitted=fitted,
        )

    #: what a Gibbs run is judged on: quantities that do not change when the components are
    #: relabelled (the log evidence or log-likelihood, the noise, the weight prior precision,
    #: the predictive mean at five training inputs). Component parameters (``mu``,
    #: ``weights``) switch labels between and within chains, so their R-hat is tabulated
    #: (``convergence_.table``, ``judged`` False) but not judged; so are the DP
    #: concentration ``alpha`` and the number of occupied components, which are
    #: label-invariant but move slowly and do not enter the predictions given the
    #: frequencies.
    _GIBBS_JUDGED = ("log_marginal", "log_lik", "noise", "prior_precision", "f_probe")

    def _add_gibbs_probe(self, Z, target, B):
        """``f_probe`` (predictive mean, or class-1 probability) at five training inputs."""
        P, Bp = self._probe(Z)
        if self._task == "regression":
            f = predict_regression(
                self.gibbs_samples_,
                Z,
                target,
                P,
                mean_basis=None if B is None else jnp.asarray(B),
                mean_basis_new=Bp,
            )[0]
        else:
            f = predict_proba(self.gibbs_samples_, P, mean_basis_new=Bp)
        post = self.idata_.posterior
        f = np.asarray(f).reshape(post.sizes["chain"], post.sizes["draw"], -1)
        data = {k: np.asarray(post[k]) for k in post.data_vars}
        attrs = dict(post.attrs)
        data["f_probe"] = f
        diagnostics.add_group(self.idata_, "posterior", data, dims={"f_probe": ["probe"]})
        diagnostics.set_attrs(self.idata_, **attrs)

    def _draws(self, names):
        return flat_draws(self.idata_, [n for n in names if n in self.idata_.posterior])

    def _store_log_likelihood(self, ll):
        """Store pointwise log densities ``(chains × draws, n)`` as ``log_likelihood``."""
        n_chain = self.idata_.posterior.sizes["chain"]
        diagnostics.add_group(
            self.idata_,
            "log_likelihood",
            {"y": ll.reshape(n_chain, -1, ll.shape[-1])},
            dims={"y": ["obs"]},
            coords={"obs": np.arange(ll.shape[-1])},
        )

    # ------------------------------------------------------------------ runs and reports
    def _save_state(self) -> tuple[dict, dict]:
        """Fitted state for :func:`bayeskern.runs.save_run` (JSON metadata + arrays)."""
        check_is_fitted(self)
        sc = self.x_scaler_
        meta = {"n_features_in": int(self.n_features_in_)}
        arrays = {}
        if hasattr(self, "feature_names_in_"):
            meta["feature_names_in"] = [str(c) for c in self.feature_names_in_]
        if hasattr(self, "y_std_"):
            arrays.update(y_mean=self.y_std_.mean, y_scale=self.y_std_.scale)
        if hasattr(self, "classes_"):
            arrays["classes"] = np.asarray(self.classes_)
        spec_none, spec = spec_arrays(self.spec_)
        meta.update(
            clip=sc.clip,
            convergence_vars=list(self.convergence_vars_),
            convergence_report_only=list(getattr(self, "convergence_report_only_", [])),
            sampler=self.sampler_,
            full_bayes=bool(getattr(self, "full_bayes_", True)),
            spec_none=spec_none,
        )
        meta["model"] = getattr(self, "model_", "features")
        meta["n_sample_rows"] = int(
            getattr(self, "n_sample_rows_", len(self.idata_.constant_data["X"]))
        )
        if self._spectral_gp:
            meta.update(
                trend_degree=int(self.trend_degree_),
                exact_resolution=float(self.exact_spec_.resolution),
            )
            if meta["model"] == "hsgp":
                b = self.hsgp_basis_
                meta["hsgp_basis"] = dict(
                    m=list(b.m), L=list(b.L), center=list(b.center), truncate=b.truncate
                )
            arrays.update(
                {
                    "exact/peaks": np.asarray(self.exact_spec_.peaks),
                    "exact/log_sigma0": np.asarray(self.exact_spec_.log_sigma0),
                }
            )
            if self.exact_spec_.sigma0_gamma is not None:
                arrays["exact/sigma0_gamma"] = np.asarray(self.exact_spec_.sigma0_gamma)
        arrays.update(x_center=sc.center, x_scale=sc.scale, freq_scale=self.freq_scale_)
        arrays.update(spec)
        for name in ("spectral_map_", "gibbs_samples_"):
            arrays.update(
                {f"{name}/{k}": np.asarray(v) for k, v in getattr(self, name, {}).items()}
            )
        return meta, arrays

    def _load_state(self, meta: dict, arrays: dict) -> None:
        """Inverse of :meth:`_save_state`."""
        self.n_features_in_ = meta["n_features_in"]
        if "feature_names_in" in meta:
            self.feature_names_in_ = np.asarray(meta["feature_names_in"], dtype=object)
        if "y_mean" in arrays:
            self.y_std_ = Standardizer(arrays["y_mean"], arrays["y_scale"])
        if "classes" in arrays:
            self.classes_ = arrays["classes"]
        self.x_scaler_ = RobustScaler1(arrays["x_center"], arrays["x_scale"], meta["clip"])
        self.freq_scale_ = arrays["freq_scale"]
        if meta.get("model", "features") in ("exact", "hsgp") and self._task == "regression":
            self.model_ = meta["model"]
            if self.model_ == "hsgp":
                self.hsgp_basis_ = Basis(**meta["hsgp_basis"])
            self.trend_degree_ = meta["trend_degree"]
            self.exact_spec_ = G.ExactSpec(
                jnp.asarray(arrays["exact/peaks"]),
                meta["exact_resolution"],
                jnp.asarray(arrays["exact/log_sigma0"]),
                jnp.asarray(arrays["exact/sigma0_gamma"])
                if "exact/sigma0_gamma" in arrays
                else None,
            )
            self.n_components_ = len(arrays["exact/peaks"]) + 1
        elif self._task == "regression":
            self.model_ = "features"
        self.spec_ = spec_from_arrays(arrays, meta["spec_none"])
        for name in ("spectral_map_", "gibbs_samples_"):
            d = {k.split("/", 1)[1]: v for k, v in arrays.items() if k.startswith(f"{name}/")}
            if d:
                setattr(self, name, d)
        self.full_bayes_ = meta["full_bayes"]
        self.sampler_ = meta.get(
            "sampler", self._AUTO_SAMPLER if self.sampler == "auto" else self.sampler
        )
        self.model_description_ = self.MODELS[self.model_ if self._spectral_gp else self.sampler_]
        self.convergence_vars_ = meta["convergence_vars"]
        self.convergence_report_only_ = meta.get("convergence_report_only", [])
        self.convergence_ = diagnostics.convergence_report(
            self.idata_,
            var_names=self.convergence_vars_,
            warn=False,
            report_only=self.convergence_report_only_,
        )
        self._Ztrain = self.x_scaler_.transform(np.asarray(self.idata_.constant_data["X"]))
        if hasattr(self, "y_std_"):
            self._ytrain = self.y_std_.transform(np.asarray(self.idata_.observed_data["y"]))
        self.n_sample_rows_ = meta.get("n_sample_rows", len(self._Ztrain))
        if self.n_sample_rows_ < len(self._Ztrain):  # regressor with max_sample_rows
            with threadpool_limits(1, user_api="blas"):
                self._condition_on_all_rows()  # recomputed, not saved (S x M^2 numbers)
