"""The shared base of the GP estimators.

The sampler settings, the kernel fit, NUTS, the prior predictive, and the helpers both
estimators use.
"""

from __future__ import annotations

import warnings

import jax
import jax.numpy as jnp
import numpy as np
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.utils import check_random_state, check_X_y
from sklearn.utils._param_validation import StrOptions

from bayeskern import diagnostics
from bayeskern.batching import batched_map, row_slices
from bayeskern.estimators.base import BayesianEstimatorMixin, Standardizer
from bayeskern.estimators.draws import data_unit_variables, flat_draws
from bayeskern.estimators.params import AUTO_COUNT_CONSTRAINTS
from bayeskern.estimators.prediction import cached_jit
from bayeskern.estimators.validation import check_numeric, validate_classes
from bayeskern.hsgp import build_design
from bayeskern.inference import check_factorizing_chain_method, run_nuts
from bayeskern.kernels import RBF, Kernel, get_kernel, name_leaves, term_name
from bayeskern.learning import fit_kernel
from bayeskern.models.gp import (
    gp_classification,
    gp_classification_laplace,
    gp_classification_softmax,
    gp_regression,
    prepare_kernel,
)
from bayeskern.models.hsgp import hsgp_classification, hsgp_regression

_SAMPLER_DOC = """
    num_warmup, num_samples, num_chains : int
        NUTS settings (warm-up draws, kept draws per chain, chains). Warm-up: 200 (the
        chains start near the posterior mode; ``GPRegressor`` adapts the step size and the
        mass in Stan's windows, ``GPClassifier`` the step size alone, see
        ``adapt_mass_matrix``). ``num_samples="auto"``
        (the default) draws blocks of 100 per chain
        until R-hat ≤ 1.01 and bulk and tail ESS ≥ 100 per chain (at most 2000 per chain,
        fewer when the draws so far project a miss at that cap;
        :func:`bayeskern.inference.run_nuts`); ``num_samples_`` is what was drawn.
    chain_method : {None, "parallel", "sequential", "vectorized", "processes"}
        ``None``: parallel when there is one device per chain, else vectorized on a GPU and
        sequential on a CPU (:func:`bayeskern.inference.choose_chain_method`); for the
        classifiers' Laplace route on a CPU, sequential or, for long fits, ``"processes"``:
        the chains one after another in one Python process per core (``GPClassifier``
        only). On a CPU, ``"vectorized"`` (and ``"parallel"`` for the classifiers' Laplace
        route) is refused with a ``ValueError``: batched factorizations can block XLA:CPU
        forever (:func:`bayeskern.inference.check_factorizing_chain_method`).
    target_accept_prob : float
        NUTS target acceptance; raise to 0.9-0.99 when divergences are reported.
    init : {"map", "prior"}
        ``"map"`` (default): find the posterior mode by L-BFGS from four starts, start every
        chain from a draw of the Laplace approximation there and use the inverse Hessian at
        the mode as NUTS's dense inverse mass matrix (:func:`bayeskern.inference.run_nuts`);
        ``"prior"``: NumPyro's start at the prior median with an adapted mass matrix.
    dense_mass : bool
        With ``init="prior"``: adapt a dense mass matrix (helps correlated hyper-parameters).
    adapt_mass_matrix : bool or None
        With ``init="map"``: keep adapting the (dense) mass matrix in Stan's warm-up windows,
        starting from the inverse Hessian, or keep the inverse Hessian and adapt the step
        size alone, over the whole warm-up. ``GPRegressor``'s default ``True``: a regression
        posterior's mode can lie away from most of its mass, and the inverse Hessian there
        then misjudges its scales. ``GPClassifier``'s default ``None``: ``False`` for the
        Laplace route, whose hyper-parameters (amplitudes on the softplus scale) the Laplace
        approximation at the mode describes well, ``True`` with ``inference="latent"``.
    progress_bar : bool
        Show NumPyro's progress bar.
    random_state : int, numpy Generator or None
        Seed; the same int gives the same draws and predictions.
"""


class _GPBase(BayesianEstimatorMixin, BaseEstimator):
    _parameter_constraints: dict = {
        **BayesianEstimatorMixin._parameter_constraints,
        **AUTO_COUNT_CONSTRAINTS,
        "kernel": [Kernel, str, None],
        "init": [StrOptions({"map", "prior"})],
        "dense_mass": ["boolean", list],
        "adapt_mass_matrix": ["boolean", None],
    }

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

    #: ``num_samples="auto"``: blocks of draws until converged
    #: (:func:`bayeskern.inference.run_nuts`, :func:`bayeskern.inference.pg_basis.run_pg_basis`)
    _AUTO_COUNTS = True
    #: the warm-up that ``num_warmup="auto"`` means: the regressor's default
    AUTO_WARMUP = 200

    # ---------------------------------------------------------------- shared fitting
    def _warmup(self) -> int:
        """Warm-up draws per chain: ``num_warmup``, or :attr:`AUTO_WARMUP` for ``"auto"``."""
        return self.AUTO_WARMUP if self.num_warmup == "auto" else self.num_warmup

    def _adapts_mass(self) -> bool:
        """Whether the warm-up adapts the mass matrix (``adapt_mass_matrix``)."""
        return bool(self.adapt_mass_matrix)

    def _fit_kernel(self, Xs, y_for_kernel, ard: bool = False):
        """Return the fitted, named kernel: ``kernel``, or for ``None`` an RBF (``ard``)."""
        kernel = get_kernel(self.kernel if self.kernel is not None else RBF(ard=ard))
        if not kernel.symmetric:
            raise TypeError(
                f"kernel {kernel!r} is asymmetric and cannot be a GP covariance; for LAB-RBF "
                "use bk.kernels.LABRBFFeatures or bk.LABRBFRegressor's Bayesian last layer"
            )
        return name_leaves(fit_kernel(name_leaves(kernel), Xs, y_for_kernel))

    def _route_kernel(self, kernel, Xs, y_for_kernel, route: str):
        """Return ``kernel``, or the default kernel as the fit's ``route`` wants it.

        For ``kernel=None`` on the inducing points and several columns: an RBF with one
        length-scale per column.
        """
        if self.kernel is None and route == "inducing" and Xs.shape[1] > 1:
            return self._fit_kernel(Xs, y_for_kernel, ard=True)
        return kernel

    def _dims(self):
        dims = {
            "amplitude": ["term"],
            "eta": ["obs"],
            "f": ["obs"],
            "y": ["obs"],
            "X": ["obs", "feature"],
        }
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

        def make(kernel, x_scale):
            fn = per_draw(kernel, x_scale)
            return lambda d, *a: batched_map(lambda x: fn(x, *a), d, 1)

        return self._cached_jit(name, make)

    def _cached_jit(self, name, make):
        """``jax.jit(make(kernel_, x_std_.scale))``, cached per fit (see :meth:`_draw_map`)."""
        return cached_jit(
            self, name, lambda: make(self.kernel_, self.x_std_.scale), self.kernel_, self.x_std_
        )

    def _gp_kwargs(self, Xs, y_model) -> dict:
        """Return the exact GP models' arguments: inputs, targets, kernel, scale, prepared Gram."""
        Xj = jnp.asarray(Xs)
        return dict(
            X=Xj,
            y=jnp.asarray(y_model),
            kernel=self.kernel_,
            x_scale=self.x_std_.scale,
            prepared=prepare_kernel(self.kernel_, Xj, Xj, self.x_std_.scale),
        )

    def _sample(
        self,
        model,
        Xs,
        y_model,
        y_observed,
        X,
        model_kwargs=None,
        data_at_mode=None,
        chain_method=None,
        rebuild=None,
        refind_mode=False,
    ):
        """Run NUTS on ``model``; ``model_kwargs`` default to :meth:`_gp_kwargs`.

        ``data_at_mode``, ``refind_mode``, ``rebuild``: as :func:`bayeskern.inference.run_nuts`;
        ``chain_method`` replaces the estimator's ``None`` (the estimator's own choice stands).
        """
        check_factorizing_chain_method(self.chain_method, self.num_chains)
        if self.chain_method == "processes" and rebuild is None:
            raise ValueError(
                "chain_method='processes' is available for GPClassifier's Laplace route "
                "(inference='laplace', a kernel without Python callables) only; this fit runs "
                "its chains in this process: use None, 'parallel' or 'sequential'"
            )
        dims, coords = self._sample_coords(len(Xs))
        if model_kwargs is None:
            model_kwargs = self._gp_kwargs(Xs, y_model)
        self.idata_ = run_nuts(
            model,
            model_kwargs=model_kwargs,
            rng_key=self._seed(),
            num_warmup=self._warmup(),
            num_samples=self.num_samples,
            num_chains=self.num_chains,
            chain_method=self.chain_method if self.chain_method is not None else chain_method,
            progress_bar=self.progress_bar,
            target_accept_prob=self.target_accept_prob,
            init=self.init,
            dense_mass=self.dense_mass,
            adapt_mass_matrix=self._adapts_mass() or self.init != "map",
            dims=dims,
            coords=coords,
            observed={"y": y_observed},
            data_at_mode=data_at_mode,
            refind_mode=refind_mode,
            rebuild=rebuild,
        )
        self._finish_sampling(X, dims, coords)

    def _sample_coords(self, n: int):
        coords = self._coords(n)
        coords["term"] = [term_name(t) for t in self.kernel_.terms()]
        return self._dims(), coords

    def _finish_sampling(self, X, dims, coords):
        """Record the inputs, the settings, the convergence and the data-unit variables."""
        diagnostics.add_group(
            self.idata_, "constant_data", {"X": X}, dims=dims, coords=coords, sample_dims=False
        )
        diagnostics.set_attrs(
            self.idata_,
            model=type(self).__name__,
            kernel=repr(self.kernel_),
            random_state=str(self.random_state),
        )
        self._site_names = [v for v in self.idata_.posterior.data_vars if v != "f"]
        self.num_samples_ = self.idata_.posterior.sizes["draw"]
        self.convergence_ = diagnostics.convergence_report(
            self.idata_, warn=self.num_samples_ >= 100
        )
        y_std = getattr(self, "y_std_", None)
        data, dims = data_unit_variables(
            self.idata_.posterior,
            self.kernel_,
            self.x_std_.scale,
            None if y_std is None else y_std.scale,
        )
        diagnostics.add_variables(self.idata_, "posterior", data, dims=dims, coords=coords)

    def _draw_probabilities(self, X):
        """Class probabilities per posterior draw at ``X`` (classifiers).

        ``(draws, n)``: the class-1 probability with two classes; ``(draws, n, C)`` with more.
        """
        if len(self.classes_) > 2:
            return self._class_proba_draws(X)
        return self._proba_draws(X)

    def _draws(self, with_f: bool = False):
        return flat_draws(
            self.idata_,
            [
                v
                for v in self.idata_.posterior.data_vars
                if (with_f or v != "f") and not v.endswith(diagnostics.DATA_UNITS_SUFFIX)
            ],
        )

    def sample_prior_predictive(self, X, y, n_draws: int = 100, random_state=None):
        """Draws of the observations at the rows of ``X`` under the prior alone.

        The same model as :meth:`fit` (``models/gp.py``, or ``models/hsgp.py`` where the
        regressor's ``approximation`` picks the basis), run forward with every
        hyper-parameter drawn from its prior (a prior predictive check, Gabry et al. 2019,
        "Visualization in Bayesian workflow"). ``y`` is used only as :meth:`fit` uses it
        before sampling: to standardize (regression) and to fit data-dependent kernels
        (VSK's ψ, CkRBF's cells...); the draws never see its values otherwise. Nothing on
        the estimator is changed.

        Returns an array ``(n_draws, n_rows)``: values in the units of ``y`` (regression) or
        class labels (classification; with more than two classes from the softmax model,
        :math:`f_c \\sim N(0, K_c)` and labels :math:`\\sim \\mathrm{Categorical}
        (\\mathrm{softmax}(f))`).
        """
        from numpyro.infer import Predictive

        self._validate_params()
        n_draws = int(n_draws)
        if n_draws < 1:
            raise ValueError(f"n_draws must be >= 1, got {n_draws}")
        classifier = isinstance(self, ClassifierMixin)
        check_numeric(X, y, y_numeric=not classifier)
        X, y = check_X_y(X, y, dtype=np.float64, ensure_min_samples=2, y_numeric=not classifier)
        xs = Standardizer.fit(X)
        if classifier:
            classes, y_fit = validate_classes(y)
        else:
            ys = Standardizer.fit(np.asarray(y, dtype=float))
            y_fit = ys.transform(np.asarray(y, dtype=float))
        kernel = self._fit_kernel(xs.transform(X), y_fit)
        model, extra = gp_regression, {}
        if classifier and len(classes) > 2:
            model, extra = gp_classification_softmax, dict(n_classes=len(classes))
        else:
            if classifier:
                model = (
                    gp_classification if self.inference == "latent" else gp_classification_laplace
                )
        seed = (
            self._seed()
            if random_state is None
            else int(check_random_state(random_state).randint(0, 2**31 - 1))
        )
        if not (classifier and len(classes) > 2):
            self._check_approximation_params()
            route = self._resolve_approximation(kernel, xs.transform(X), warn=False)
            if route == "hsgp" and (not classifier or self.inference == "laplace"):
                model = hsgp_classification if classifier else hsgp_regression
                extra = dict(
                    design=build_design(kernel, xs.transform(X), xs.scale, n_basis=self.n_basis)
                )
            elif route == "inducing":
                model, extra = self._inducing_prior_model(xs.transform(X), seed)
                kernel = self._route_kernel(kernel, xs.transform(X), y_fit, route)
        draws = Predictive(model, num_samples=n_draws)(
            jax.random.PRNGKey(seed),
            X=jnp.asarray(xs.transform(X)),
            kernel=kernel,
            x_scale=xs.scale,
            **extra,
        )["y"]
        draws = np.asarray(draws)
        if classifier:
            return np.asarray(classes)[draws.astype(int)]
        return draws * ys.scale + ys.mean


#: Largest size (bytes) of the per-draw prediction factors :math:`L^{-1}` kept after a fit
#: (draws x N_train^2 x 8 bytes; over: those factor per chunk of new points instead).
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
        warnings.warn(
            f"{type(est).__name__}: Cholesky needed jitter {jitter:.1e} on some "
            "draws (ill-conditioned kernel matrix)",
            UserWarning,
            stacklevel=3,
        )
    est.max_jitter_ = max(getattr(est, "max_jitter_", 0.0), jitter)
    # recorded with the posterior too, so that the report and saved runs show it
    diagnostics.set_attrs(est.idata_, max_jitter=float(est.max_jitter_))
