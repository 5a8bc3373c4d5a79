"""Bayesian GP estimators: :class:`GPRegressor` and :class:`GPClassifier`.

NUTS samples the kernel hyper-parameters (and, for classification, the whitened latent
function); predictions average over the posterior draws, so intervals include the
hyper-parameter uncertainty that a maximum-marginal-likelihood (ML-II) fit ignores.
Any bayeskern kernel works, including the data-dependent ones (VSK, CkRBF, Xiong...), which
are fitted on the standardized training data before sampling.
"""

from __future__ import annotations

import json
import warnings
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np
from scipy import special, stats
from sklearn.base import BaseEstimator, ClassifierMixin, RegressorMixin, _fit_context
from sklearn.utils import check_random_state, check_X_y
from sklearn.utils._param_validation import StrOptions
from sklearn.utils.validation import check_is_fitted

from bayeskern import diagnostics
from bayeskern.batching import batched_map, row_slices
from bayeskern.blr import Stats, scan_feature_stats
from bayeskern.devices import limit_blas
from bayeskern.estimators.base import (
    BayesianEstimatorMixin,
    JointPredictiveMixin,
    PredictiveRegressorMixin,
    Standardizer,
    cached_jit,
    check_interval,
    check_numeric,
    data_unit_variables,
    flat_draws,
    kernel_state,
    map_draws,
    proba_interval,
    remember_last,
    restore_kernel,
    validate_classes,
)
from bayeskern.estimators.params import AUTO_COUNT_CONSTRAINTS, count
from bayeskern.hsgp import (
    MAX_COLUMNS,
    HSGPDesign,
    _split_periodic,
    build_design,
    check_basis,
    check_harmonics,
    hsgp_unsupported_reason,
    kernel_family,
    lengthscale_bounds,
)
from bayeskern.inference import AUTO_BLOCK, find_map, run_nuts
from bayeskern.inference.pg_basis import run_pg_basis
from bayeskern.inference.processes import can_start_processes
from bayeskern.kernels import RBF, Kernel, get_kernel, name_leaves, term_name
from bayeskern.laplace import SOFTMAX_MC_DRAWS, probit_logit
from bayeskern.linalg import cholesky, triangular_inverse
from bayeskern.models.gp import (
    JITTER,
    classification_predictive,
    gp_classification,
    gp_classification_laplace,
    gp_classification_softmax,
    gp_regression,
    kernel_matrix,
    laplace_classification_loo,
    laplace_classification_predictive,
    loo_and_fitted_rows,
    predict_from_factors,
    prepare_kernel,
    regression_factors,
    regression_predictive,
    softmax_classification_loo,
    softmax_classification_predictive,
    theta_from_draw,
)
from bayeskern.models.hsgp import (
    classification_variances,
    hsgp_classification,
    hsgp_factors,
    hsgp_loo_and_fitted,
    hsgp_predict,
    hsgp_regression,
)
from bayeskern.predictive import MixturePredictive, draw_seed, most_probable_class, row_uniforms
from bayeskern.programs import shared_jit
from bayeskern.runs import register_estimator

__all__ = ["GPRegressor", "GPClassifier"]

_SAMPLER_DOC = """
    num_warmup, num_samples, num_chains : int
        NUTS settings (warm-up draws, kept draws per chain, chains). Warm-up: 200 (the
        chains start near the posterior mode; ``GPRegressor`` adapts the step size and the
        mass in Stan's windows, ``GPClassifier`` the step size alone, see
        ``adapt_mass_matrix``). ``num_samples="auto"``
        (``GPRegressor``'s default; ``GPClassifier``'s is 500) draws blocks of 100 per chain
        until R-hat ≤ 1.01 and bulk and tail ESS ≥ 100 per chain (at most 2000 per chain,
        fewer when the draws so far project a miss at that cap;
        :func:`bayeskern.inference.run_nuts`); ``num_samples_`` is what was drawn.
    chain_method : {None, "parallel", "sequential", "vectorized", "processes"}
        ``None``: parallel when there is one device per chain, else vectorized on a GPU and
        sequential on a CPU (:func:`bayeskern.inference.choose_chain_method`); for the
        classifiers' Laplace route on a CPU, sequential or, for long fits, ``"processes"``:
        the chains one after another in one Python process per core (``GPClassifier``
        only).
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

    def _fit_kernel(self, Xs, y_for_kernel):
        kernel = get_kernel(self.kernel if self.kernel is not None else RBF())
        if not kernel.symmetric:
            raise TypeError(
                f"kernel {kernel!r} is asymmetric and cannot be a GP covariance; for LAB-RBF "
                "use bk.kernels.LABRBFFeatures or bk.LABRBFRegressor's Bayesian last layer"
            )
        return name_leaves(name_leaves(kernel).fit(Xs, y_for_kernel))

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
    ):
        """Run NUTS on ``model``; ``model_kwargs`` default to :meth:`_gp_kwargs`.

        ``data_at_mode``, ``rebuild``: as :func:`bayeskern.inference.run_nuts`;
        ``chain_method`` replaces the estimator's ``None`` (the estimator's own choice stands).
        """
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
            self._check_approximation_params()
            if self._resolve_approximation(kernel, xs.transform(X), warn=False) == "hsgp" and (
                not classifier or self.inference == "laplace"
            ):
                model = hsgp_classification if classifier else hsgp_regression
                extra = dict(
                    design=build_design(kernel, xs.transform(X), xs.scale, n_basis=self.n_basis)
                )
        seed = (
            self._seed()
            if random_state is None
            else int(check_random_state(random_state).randint(0, 2**31 - 1))
        )
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


#: ``approximation="auto"`` runs the exact GP up to this many rows (the CO2 demo's 425
#: rows stay exact), the Hilbert-space basis above when the kernel allows it
AUTO_EXACT_MAX_ROWS = 1000
#: the classifier's ``approximation="auto"`` runs the exact (embedded-Laplace) GP up to this
#: many rows, the basis (Pólya-Gamma Gibbs) above when the kernel allows it
CLASSIFIER_AUTO_EXACT_MAX_ROWS = 300
#: above this many rows, an exact fit chosen by ``"auto"`` (kernel without a basis) warns,
#: and so does every ``GPClassifier`` fit (its Laplace route has no basis form)
LARGE_EXACT_ROWS = 3000
#: the pilot basis resolves length-scales within this factor of the posterior mode's
PILOT_MARGIN = 2.0
#: the classifier's pilot margin: its pilot is the basis regression of the centred labels, and
#: the basis enters each Gibbs sweep as :math:`NM^2` (:math:`M` grows as the margin to the
#: power of the columns); the check after sampling refits where the posterior lies beyond
CLASSIFIER_PILOT_MARGIN = 1.5
#: most posterior-mode searches of the pilot (:meth:`GPRegressor._pilot_design`)
PILOT_ROUNDS = 3
#: fraction of posterior draws outside what the basis resolves above which a fit warns
BASIS_WARN_FRACTION = 0.05
#: the basis model's leave-one-out densities use at most this many rows × draws ...
LOO_MAX_POINTS = 5 * 10**7
#: ... and at most this many rows × draws × M² multiply-adds (the posterior-predictive group
#: is drawn at the same rows); a random subset of rows beyond, ...
LOO_MAX_WORK = 10**10
#: ... of at least this many rows (or all of them)
LOO_MIN_ROWS = 250
#: the basis model keeps its per-draw predictive at the LOO rows for the posterior-predictive
#: group up to this many draws × rows (two float64 arrays)
FITTED_MAX_POINTS = 2**24


def loo_rows(n: int, n_draws: int, M: int, seed: int, point_work: int | None = None) -> np.ndarray:
    r"""Rows at which a basis model's leave-one-out densities are computed.

    All :math:`n` rows, or a random subset (seeded) of
    :math:`\min(L_{pts}/S,\ \max(n_{min}, W/(SM^2)))` rows for :math:`S` draws and
    :math:`M` basis functions (:data:`LOO_MAX_POINTS`, :data:`LOO_MIN_ROWS`,
    :data:`LOO_MAX_WORK`); PSIS-LOO on a row subsample estimates the full sum
    (Magnusson et al. 2019). ``point_work``: the work per row and draw, :math:`M^2` (the
    latent variance) unless given.
    """
    work = M * M if point_work is None else point_work
    n_rows = int(
        min(n, LOO_MAX_POINTS // n_draws, max(LOO_MIN_ROWS, LOO_MAX_WORK // (n_draws * work)))
    )
    if n_rows >= n:
        return np.arange(n)
    rng = np.random.default_rng(seed)
    return np.sort(rng.choice(n, size=max(n_rows, 1), replace=False))


class _BasisMixin:
    """The Hilbert-space basis: choosing it, checking it, its fitted attributes (both GPs)."""

    # ------------------------------------------------------------ choosing the approximation
    #: ``approximation``, ``n_basis`` (and the regressor's ``chunk_size``)
    _BASIS_CONSTRAINTS: dict = {
        "approximation": [StrOptions({"auto", "exact", "hsgp"})],
        "n_basis": [count(1), "array-like", None],
    }

    def _check_approximation_params(self):
        """Check the entries of a sequence ``n_basis`` (the rest is ``_parameter_constraints``)."""
        nb = self.n_basis
        if nb is None or np.ndim(nb) == 0:
            return
        if len(nb) == 0 or not all(
            isinstance(v, (int, np.integer)) and not isinstance(v, bool) and v >= 1 for v in nb
        ):
            raise ValueError(
                "n_basis must be None, a positive int or a sequence of positive "
                f"ints (one per input column), got {nb!r}"
            )

    def _resolve_approximation(self, kernel, Xs, warn: bool = True) -> str:
        """Return ``"exact"`` or ``"hsgp"`` for ``approximation`` on these data."""
        n, d = Xs.shape
        if self.approximation == "exact":
            return "exact"
        reason = hsgp_unsupported_reason(kernel, d)
        if (
            self.n_basis is not None
            and reason is None
            and np.ndim(self.n_basis) == 1
            and len(self.n_basis) != d
        ):
            raise ValueError(f"n_basis has {len(self.n_basis)} entries but X has {d} columns")
        if self.approximation == "hsgp":
            if reason is not None:
                raise ValueError(
                    f"approximation='hsgp' cannot be used: {reason}. Use approximation='exact' "
                    "(any kernel, O(N^3) per leapfrog step), or a kernel made of Linear, RBF, "
                    "Laplacian, Matern32, Matern52, RationalQuadratic and Periodic(period=...) "
                    "terms on at most 3 columns"
                )
            return "hsgp"
        if n <= self._AUTO_EXACT_ROWS:
            return "exact"
        if reason is not None:
            if warn and n > LARGE_EXACT_ROWS:
                warnings.warn(
                    f"{type(self).__name__}: approximation='auto' runs the exact GP on {n} rows "
                    f"(O(N^3) per leapfrog step: slow) because the Hilbert-space basis cannot "
                    f"be used: {reason}",
                    UserWarning,
                    stacklevel=3,
                )
            return "exact"
        return "hsgp"

    # ------------------------------------------------------------------- the basis model
    def _basis_stats(self, design, Xs, ys) -> Stats:
        """Return :math:`(\\Phi^\\top\\Phi, \\Phi^\\top y, y^\\top y, N)`, one chunked pass."""
        chunk = getattr(self, "chunk_size", None) or max(256, 2**22 // max(design.size, 1))
        fn = shared_jit(lambda X, y: scan_feature_stats(design.features, (X,), y, chunk))
        return Stats(*(jnp.asarray(np.asarray(a)) for a in fn(jnp.asarray(Xs), jnp.asarray(ys))))

    def _pilot_design(self, design, Xs, ys, margin: float = PILOT_MARGIN):
        r"""Choose the basis around the posterior mode's length-scales, before sampling.

        The prior's length-scale range (:func:`bayeskern.hsgp.lengthscale_bounds`) is wide,
        and a basis built for all of it is large (a box for the longest length-scale, enough
        functions for the shortest) and still misses data whose length-scale lies below the
        prior's 5 % quantile. So: find the posterior mode on the current basis
        (:func:`~bayeskern.inference.find_map`, :math:`O(M^3)` per step like sampling), then
        build the basis for :math:`[\ell^*/c,\ c\,\ell^*]` (``margin`` :math:`c`,
        :data:`PILOT_MARGIN` by default)
        for every sampled length-scale; repeat while the mode lay outside what the basis it
        was found on resolves (at most :data:`PILOT_ROUNDS` times). The check after sampling
        (:meth:`_basis_checks`) still guards the posterior as a whole.
        """
        from numpyro.distributions.transforms import biject_to

        x_scale, seed = self.x_std_.scale, self._seed()
        for i in range(PILOT_ROUNDS):
            stats = self._basis_stats(design, Xs, ys)
            mode = find_map(
                hsgp_regression,
                dict(stats=stats, kernel=self.kernel_, design=design, x_scale=x_scale),
                (seed + 7919 * (i + 1)) % 2**31,
            )
            bounds, resolved = {}, True
            for _, spec, stationary, _ in self._stationary_parts(design):
                site = None if stationary is None else stationary._site("lengthscale")
                if site not in mode.z:
                    continue
                prior = stationary.hyperparameters()["lengthscale"].prior()
                ls = np.asarray(biject_to(prior.support)(mode.z[site]), dtype=float)
                bounds[site] = (ls / margin, ls * margin)
                check = check_basis(spec.basis, ls[None], kernel_family(stationary))
                resolved &= check.fraction_short == 0 and check.fraction_long == 0
            if not bounds:
                return design
            design = build_design(self.kernel_, Xs, x_scale, bounds=bounds)
            if resolved:
                break
        return design

    def _fit_on_basis(self, Xs, y_pilot, sample, margin: float = PILOT_MARGIN):
        """Choose the basis, run ``sample(design)`` on it and check it; refit once if needed.

        The automatic basis (``n_basis=None``) is built around the posterior mode's
        length-scales (:meth:`_pilot_design`, on ``y_pilot``); after sampling, where more than
        :data:`BASIS_WARN_FRACTION` of the draws of a length-scale lie beyond what the basis
        resolves, a warning says so and (automatic basis, first time) the fit is redone on a
        basis built for the posterior's range (:meth:`_posterior_bounds`). Returns what the
        last ``sample`` call returned.
        """
        x_scale = self.x_std_.scale
        design = build_design(self.kernel_, Xs, x_scale, n_basis=self.n_basis)
        if self.n_basis is None:
            design = self._pilot_design(design, Xs, y_pilot, margin)
        for attempt in range(2):
            out = sample(design)
            checks = self._basis_checks(design)
            bad = [
                c for c in checks if max(c.fraction_short, c.fraction_long) > BASIS_WARN_FRACTION
            ]
            if not bad:
                break
            refit = attempt == 0 and self.n_basis is None
            warnings.warn(
                f"{type(self).__name__}: the Hilbert-space basis ({design.size} functions) does "
                "not resolve part of the posterior: "
                + "; ".join(c.message() for c in bad)
                + (
                    ". Refitting once with a basis chosen from the posterior's length-scales."
                    if refit
                    else ". Give a larger n_basis, or approximation='exact'."
                ),
                UserWarning,
                stacklevel=4,
            )
            if not refit:
                break
            design = build_design(
                self.kernel_, Xs, x_scale, bounds=self._posterior_bounds(), growth=2
            )
        self.hsgp_design_, self.basis_checks_ = design, checks
        self._set_basis_attributes()
        diagnostics.set_attrs(self.idata_, basis_checks="; ".join(c.message() for c in checks))
        return out

    def _save_state(self):
        meta, arrays = super()._save_state()
        meta["approximation"] = getattr(self, "approximation_", "exact")
        if meta["approximation"] == "hsgp":
            meta["hsgp_design"] = self.hsgp_design_.to_config()
        return meta, arrays

    def _load_state(self, meta, arrays):
        super()._load_state(meta, arrays)
        self.approximation_ = meta.get("approximation", "exact")
        self.hsgp_design_ = self.n_basis_ = self.boundary_ = None
        if self.approximation_ == "hsgp":
            self.hsgp_design_ = HSGPDesign.from_config(meta["hsgp_design"])
            self._set_basis_attributes()
            self.basis_checks_ = self._basis_checks(self.hsgp_design_)

    def _set_basis_attributes(self):
        design, names = self.hsgp_design_, [term_name(t) for t in self.kernel_.terms()]
        self.n_basis_ = {
            n: list(t.basis.m)
            for n, t in zip(names, design.terms, strict=True)
            if t.basis is not None
        }
        self.boundary_ = {
            n: list(t.basis.L)
            for n, t in zip(names, design.terms, strict=True)
            if t.basis is not None
        }
        diagnostics.set_attrs(
            self.idata_, hsgp_design=json.dumps(design.to_config()), n_basis_total=int(design.size)
        )

    def _stationary_parts(self, design):
        """``(term, TermBasis, stationary leaf or None, Periodic or None)`` per basis term."""
        for term, spec in zip(self.kernel_.terms(), design.terms, strict=True):
            if spec.kind == "linear":
                continue
            split = _split_periodic(term)
            stationary, periodic = split if split is not None else (term, None)
            yield term, spec, stationary, periodic

    def _lengthscale_draws(self, leaf):
        site = leaf._site("lengthscale")
        if site in self.idata_.posterior:
            return site, self._draws_of(site)
        h = leaf.hyperparameters()["lengthscale"]
        value = h.fixed_standardized(self.x_std_.scale) if h.length else h.value
        return site, np.atleast_2d(np.asarray(value, dtype=float))

    def _draws_of(self, site):
        a = np.asarray(self.idata_.posterior[site])
        return a.reshape((-1,) + a.shape[2:])

    def _basis_checks(self, design) -> list:
        checks = []
        for term, spec, stationary, periodic in self._stationary_parts(design):
            if stationary is not None:
                site, ls = self._lengthscale_draws(stationary)
                checks.append(
                    check_basis(
                        spec.basis,
                        ls,
                        kernel_family(stationary),
                        term=term_name(term),
                        parameter=site,
                    )
                )
            if periodic is not None:
                _, ls = self._lengthscale_draws(periodic)
                checks.append(
                    check_harmonics(
                        periodic, spec.n_harmonics, spec.period, ls, term=term_name(term)
                    )
                )
        return checks

    def _posterior_bounds(self) -> dict:
        """Per length-scale site, the range to resolve in the refit, per column.

        The union of the prior's range (:func:`bayeskern.hsgp.lengthscale_bounds`) and the
        posterior's 2.5-97.5 % quantiles: the refitted basis only grows (more functions, a box
        at least as large, so predictions reach as far as before).
        """
        bounds = {}
        for leaf in self.kernel_.leaves():
            site = leaf._site("lengthscale")
            if site in self.idata_.posterior:
                d = self._draws_of(site)
                lo, up = lengthscale_bounds(leaf, self.x_std_.scale)
                bounds[site] = (
                    np.minimum(lo, np.quantile(d, 0.025, axis=0)),
                    np.maximum(up, np.quantile(d, 0.975, axis=0)),
                )
        return bounds

    def _warn_outside_box(self, Xs):
        outside = int(np.sum(~self.hsgp_design_.contains(Xs)))
        if outside:
            warnings.warn(
                f"{type(self).__name__}: {outside} of {len(Xs)} rows lie outside the box on "
                "which the Hilbert-space basis approximates the kernel; predictions there "
                "fall back towards the prior mean and are not those of the GP",
                UserWarning,
                stacklevel=5,
            )


@register_estimator
class GPRegressor(  # noqa: D101 (__doc__ is an f-string)
    JointPredictiveMixin, PredictiveRegressorMixin, RegressorMixin, _BasisMixin, _GPBase
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
    kernel : Kernel or str, default RBF()
        Any bayeskern kernel (``bk.kernels.Linear() + bk.kernels.RBF()``...) or a name
        (``"rbf"``, ``"linear+rbf*periodic"``). Values given explicitly are held fixed, in
        the units of ``X``; values left out are sampled.
    approximation : {{"auto", "exact", "hsgp"}}
        ``"exact"``: the exact marginal likelihood, :math:`O(N^3)` per leapfrog step, any
        kernel. ``"hsgp"``: the Hilbert-space basis, for 1-{MAX_COLUMNS} input columns and
        kernels whose additive terms are ``Linear``, a stationary kernel with a spectral
        density (RBF, Laplacian, Matern32, Matern52, RationalQuadratic), ``Periodic`` with a
        fixed period, or a stationary kernel times such a ``Periodic`` (one input column);
        anything else raises ``ValueError``. ``"auto"`` (default): exact up to
        {AUTO_EXACT_MAX_ROWS} rows or when the basis cannot represent the kernel, the basis
        otherwise. ``approximation_`` records what ran.
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
    chunk_size : int or None
        Rows per chunk of the one pass over the data that computes the basis statistics
        (``None``: about 4 million features per chunk).
    {_SAMPLER_DOC}
    Attributes
    ----------
    idata_ : arviz.InferenceData
        Posterior, sample_stats, log_likelihood, observed_data and constant_data. The
        log-likelihood holds the exact leave-one-out predictive densities of the model that
        ran, so that PSIS-LOO is valid for this non-factorized model (Bürkner, Gabry & Vehtari
        2021): of the exact GP, or of the basis model (closed form from the hat-matrix
        diagonal). Above {LOO_MAX_POINTS:.0e} rows × draws, or {LOO_MAX_WORK:.0e} rows × draws ×
        :math:`M^2` for the basis, they are computed on a random subset of rows (at least
        {LOO_MIN_ROWS}), recorded in ``posterior.attrs["loo_subsample"]``
        (the ``obs`` coordinates are the rows used). ``posterior.attrs`` also records
        ``approximation`` and, for the basis, ``hsgp_design`` (JSON).

        The posterior holds the sampled sites in standardized units (``rbf_lengthscale``,
        ``amplitude``, ``noise``...) and, for ``az.summary``, the same draws in data units:
        ``<leaf>_lengthscale_data_units`` and ``<leaf>_period_data_units`` (units of each
        column of ``X``, dims ``feature``), ``amplitude_data_units`` and ``noise_data_units``
        (units of ``y``) (:func:`bayeskern.estimators.base.data_unit_variables`).
        ``posterior_predictive`` holds ``y``: one replicated data set per posterior draw at
        the training rows of the log-likelihood (dims ``chain, draw, obs``; draws thinned
        when rows × draws exceed :data:`~bayeskern.estimators.base.PREDICTIVE_MAX_VALUES`,
        :func:`~bayeskern.estimators.base.thin_draws`), so that ``az.plot_ppc`` and
        ``az.compare`` work (``az.plot_loo_pit`` runs, but its replicates condition on
        every row: the exact LOO-PIT is :func:`bayeskern.loo_calibration.loo_calibration`'s);
        :meth:`add_predictions`
        adds ``predictions`` and ``predictions_constant_data`` for new rows. For joint
        sample paths and the latent covariance see :meth:`sample_y` and
        ``predict(X, return_cov=True)``.
    convergence_ : ConvergenceReport
    kernel_ : the fitted, named kernel.
    approximation_ : {{"exact", "hsgp"}}
        What ran.
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
        self.chunk_size = chunk_size

    _parameter_constraints: dict = {
        **_GPBase._parameter_constraints,
        **_BasisMixin._BASIS_CONSTRAINTS,
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
        self.hsgp_design_ = self.n_basis_ = self.boundary_ = None
        fitted = None
        if self.approximation_ == "hsgp":
            fitted = self._fit_hsgp(Xs, ys, y, X)
        else:
            self._sample(gp_regression, Xs, ys, y, X)
            fitted = self._add_loo_loglik(Xs, ys)
        diagnostics.set_attrs(self.idata_, approximation=self.approximation_)
        self._add_posterior_predictive(fitted)
        return self

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
        ll = np.concatenate(ll) - np.log(self.y_std_.scale)
        ll = ll.reshape(self.idata_.posterior.sizes["chain"], -1, ll.shape[-1])
        diagnostics.add_group(
            self.idata_, "log_likelihood", {"y": ll}, dims={"y": ["obs"]}, coords={"obs": rows}
        )
        if len(rows) < n:
            diagnostics.set_attrs(self.idata_, loo_subsample=int(len(rows)))
        if not keep:
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
        return partial(_latent_joint, self.kernel_, self.x_std_.scale)

    def _joint_args(self, Xs):
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
        if getattr(self, "approximation_", "exact") == "hsgp":
            loc, scale = self._predictive_hsgp(self.x_std_.transform(X))
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


#: the chains' sequential work (``chains * iterations * classes * n**3``; one class for two)
#: from which the embedded-Laplace classifiers run their chains in processes on a CPU
LAPLACE_PROCESS_WORK = 2e9


def _laplace_model(config: str, arrays: dict):
    """Rebuild the embedded-Laplace classifier's model and arguments in a worker process.

    The builder of :func:`bayeskern.inference.run_nuts`'s ``rebuild``: ``config`` holds the
    fitted kernel's :meth:`~bayeskern.kernels.Kernel.get_config` and the number of classes,
    ``arrays`` the standardized inputs ``X``, labels ``y``, column scales ``x_scale`` and the
    kernel's fitted arrays (:func:`bayeskern.estimators.base.kernel_state`).
    """
    c = json.loads(config)
    kernel = restore_kernel(c["kernel"], arrays)
    X, x_scale = jnp.asarray(arrays["X"]), np.asarray(arrays["x_scale"])
    kwargs = dict(
        X=X,
        y=jnp.asarray(arrays["y"]),
        kernel=kernel,
        x_scale=x_scale,
        prepared=prepare_kernel(kernel, X, X, x_scale),
        newton_start=jnp.asarray(arrays["newton_start"]),
    )
    if c["n_classes"] > 2:
        return gp_classification_softmax, kwargs | dict(n_classes=c["n_classes"])
    return gp_classification_laplace, kwargs


@register_estimator
class GPClassifier(ClassifierMixin, _BasisMixin, _GPBase):  # noqa: D101 (__doc__ is an f-string)
    __doc__ = f"""Bayesian GP classification: Bernoulli-logit (two classes) or softmax (more).

    Two classes:

    .. math:: f = b + g,\\ g \\sim GP\\big(0, \\textstyle\\sum_t a_t^2 k_t\\big),\\
              b \\sim N(0, 1.5^2),\\ y_i \\sim \\mathrm{{Bernoulli}}(\\sigma(f_i))

    ``predict_proba`` averages over posterior draws
    :math:`E[\\sigma(f_*)] \\approx \\sigma(\\mu_*/\\sqrt{{1 + \\pi v_*/8}})` per draw
    (MacKay 1992's probit approximation of the logistic-Gaussian integral).

    :math:`C > 2` classes: one latent function per class,

    .. math:: f_c = b_c + g_c,\\ g_c \\sim GP\\big(0, \\textstyle\\sum_t a_{{ct}}^2 k_t\\big),\\
              b_c \\sim N(0, 1.5^2),\\ p(y_i = c) = \\mathrm{{softmax}}(f_{{i\\cdot}})_c

    (Williams & Barber 1998; Rasmussen & Williams 2006, section 3.5). The kernel's
    hyper-parameters (length-scales...) are shared by the classes and the amplitudes
    :math:`a_{{ct}}` are per class: the classes' boundaries live on the same input scales,
    while how far each class's log-odds move stays free, and NUTS samples
    :math:`C\\times` terms + the kernel's parameters instead of :math:`C` times them. The
    latent functions are integrated out by the multi-class Laplace approximation (R&W
    Algorithm 3.3, :func:`bayeskern.laplace.softmax_log_marginal`) and ``predict_proba``
    averages, per draw, the softmax over Monte Carlo draws of the Gaussian latent predictive
    (R&W Algorithm 3.4, a fixed seed per draw), then over the draws.

    Parameters
    ----------
    kernel : Kernel or str, default RBF()
    inference : {{"laplace", "latent"}}
        ``"laplace"`` (default): NUTS samples the kernel hyper-parameters only; the latent
        function is integrated out by the embedded Laplace approximation (Margossian et al.
        2020; ``models/gp.py``, :mod:`bayeskern.laplace`) and the bias exactly. ``"latent"``:
        NUTS also samples the :math:`n` latent values in the whitened parameterization
        :math:`f = b + L\\eta` (exact, much slower; two classes only). Both are the same model.
        With ``chain_method=None`` on a CPU, the Laplace route runs its chains one after
        another, in one process per core when the fit is long enough to pay for starting
        them (on several CPU devices at once, jaxlib 0.10's Cholesky kernel can leave every
        thread of XLA:CPU's pool waiting, and the fit never ends).
    approximation : {{"auto", "exact", "hsgp"}}
        Two classes: ``"hsgp"`` puts the latent function on the Hilbert-space basis of
        ``GPRegressor`` (the kernels and 1-{MAX_COLUMNS} input columns it takes),
        :math:`f = b + \\Phi w`, :math:`w \\sim N(0, \\mathrm{{diag}}(s(\\theta)))` with the
        same priors, and samples it by Pólya-Gamma Gibbs (Polson, Scott & Windle 2013):
        :math:`\\omega \\mid f`, then the hyper-parameters given :math:`\\omega` with
        :math:`(b, w)` integrated out (random-walk Metropolis, adapted in the warm-up), then
        :math:`(b, w)` (:mod:`bayeskern.inference.pg_basis`), :math:`O(NM^2)` per sweep; its
        ``num_warmup`` and ``num_samples`` count sweeps, its chains run batched in one
        program (``chain_method``, ``init``, ``target_accept_prob`` and the mass settings
        are NUTS's and do not apply). ``"exact"``: the embedded Laplace
        route above, :math:`O(N^3)` per leapfrog step. ``"auto"`` (default): exact up to
        {CLASSIFIER_AUTO_EXACT_MAX_ROWS} rows, with more than two classes, with
        ``inference="latent"`` or when the basis cannot represent the kernel; the basis
        otherwise. ``approximation_`` records what ran.
    n_basis : int, sequence of int or None
        As ``GPRegressor``'s; the automatic basis is built around the length-scales of the
        basis regression of the centred labels at its mode, then checked against the
        posterior (and refitted once) as there. With the basis, ``hsgp_design_``,
        ``n_basis_``, ``boundary_`` and ``basis_checks_`` are set as ``GPRegressor``'s, the
        posterior holds ``bias`` and the basis ``weights`` (judged through the
        hyper-parameters, as latent values are), and the log-likelihood group the pointwise
        :math:`\\log\\sigma(\\pm f_i)` of each draw (a random subset of rows at large
        sizes, ``posterior.attrs["loo_subsample"]``).
    {_SAMPLER_DOC}
    """

    def __init__(
        self,
        kernel=None,
        *,
        inference: str = "laplace",
        num_warmup: int = 200,
        num_samples: int = 500,
        num_chains: int = 4,
        chain_method: str | None = None,
        target_accept_prob: float = 0.8,
        init: str = "map",
        dense_mass: bool = False,
        adapt_mass_matrix: bool | None = None,
        progress_bar: bool = True,
        random_state=None,
        approximation: str = "auto",
        n_basis=None,
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
        self.inference = inference
        self.approximation = approximation
        self.n_basis = n_basis

    _parameter_constraints: dict = {
        **_GPBase._parameter_constraints,
        **_BasisMixin._BASIS_CONSTRAINTS,
        "inference": [StrOptions({"laplace", "latent"})],
    }

    #: ``approximation="auto"`` runs the exact GP up to this many rows
    _AUTO_EXACT_ROWS = CLASSIFIER_AUTO_EXACT_MAX_ROWS

    @limit_blas
    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y):
        """Sample the kernel hyper-parameters.

        With ``inference="latent"``, also the latent function.
        """
        X, y = self._validate_fit(X, y, classifier=True)
        self._check_approximation_params()
        self.classes_, y01 = validate_classes(y)
        if len(self.classes_) > 2 and self.inference == "latent":
            raise ValueError(
                f"y has {len(self.classes_)} classes: inference='latent' handles "
                "two classes only; use inference='laplace' (the default)"
            )
        self.x_std_ = Standardizer.fit(X)
        Xs = self.x_std_.transform(X)
        self.kernel_ = self._fit_kernel(Xs, y01)
        self.approximation_ = self._classifier_approximation(Xs)
        self.hsgp_design_ = self.n_basis_ = self.boundary_ = None
        if self.approximation_ == "hsgp":
            self._fit_hsgp(Xs, y01, X)
            return self
        if len(y01) > LARGE_EXACT_ROWS:
            warnings.warn(
                f"GPClassifier: {len(y01)} rows. It factorizes the {len(y01)} x {len(y01)} "
                "kernel matrix at every leapfrog step, several times with the Laplace "
                "approximation (O(N^3)): at this size a fit takes hours. For thousands of rows, "
                "GaBaSRClassifier() (spectral features, cost linear in the rows), "
                "approximation='hsgp' (two classes, a kernel on at most 3 columns), or "
                "GPClassifier on a subset",
                UserWarning,
                stacklevel=3,
            )
        fitted = None
        if len(self.classes_) > 2:
            ll = self._fit_softmax(Xs, y01, X)
        elif self.inference == "latent":
            self._sample(gp_classification, Xs, y01, y01, X)
            # the Bernoulli likelihood factorizes given f: pointwise log-likelihood for LOO
            f = np.asarray(self.idata_.posterior["f"])
            ll = stats.bernoulli.logpmf(y01, jax.nn.sigmoid(f))
        else:
            kernel, x_scale = self.kernel_, self.x_std_.scale
            Xj, yj = jnp.asarray(Xs), jnp.asarray(y01)
            self._sample(
                gp_classification_laplace,
                Xs,
                y01,
                y01,
                X,
                model_kwargs=self._gp_kwargs(Xs, y01) | dict(newton_start=jnp.zeros(len(y01))),
                # each draw's mode search starts at the latent mode of the posterior mode
                data_at_mode=lambda v: dict(newton_start=v["f"]),
                **self._laplace_chains(Xs, y01, 2),
            )
            ll, mean, var = map_draws(
                lambda d: laplace_classification_loo(kernel, d, Xj, yj, x_scale),
                self._draws(with_f=True),
            )
            # the replicates' class-1 probabilities at the training rows, per draw, from the
            # LOO's factorization
            fitted = _class1_probability(mean, var)
            ll = np.asarray(ll).reshape(self.idata_.posterior.sizes["chain"], -1, ll.shape[-1])
        diagnostics.add_group(
            self.idata_,
            "log_likelihood",
            {"y": ll},
            dims={"y": ["obs"]},
            coords={"obs": np.arange(len(y01))},
        )
        self._add_posterior_predictive(fitted)
        return self

    # ------------------------------------------------------------------- the basis route
    def _classifier_approximation(self, Xs) -> str:
        """Return ``"exact"`` or ``"hsgp"`` (see ``approximation``)."""
        binary = len(self.classes_) == 2 and self.inference == "laplace"
        if not binary:
            if self.approximation == "hsgp":
                raise ValueError(
                    "approximation='hsgp' handles two classes with inference='laplace'; "
                    f"here y has {len(self.classes_)} classes and inference="
                    f"{self.inference!r}. Use approximation='exact'"
                )
            return "exact"
        return self._resolve_approximation(self.kernel_, Xs, warn=False)

    def _fit_hsgp(self, Xs, y01, X):
        """Pólya-Gamma Gibbs on the basis (``approximation``), with the basis checks."""
        kernel, x_scale = self.kernel_, self.x_std_.scale
        dims, coords = self._sample_coords(len(Xs))
        dims["weights"] = ["basis"]
        labels = (y01 - y01.mean()) / max(float(y01.std()), 1e-12)

        def sample(design):
            Psi = jnp.concatenate(
                [jnp.ones((len(Xs), 1)), design.features(jnp.asarray(Xs))], axis=1
            )
            self.idata_ = run_pg_basis(
                hsgp_classification,
                dict(kernel=kernel, design=design, x_scale=x_scale),
                Psi,
                y01,
                lambda draw: classification_variances(kernel, design, draw, x_scale),
                rng_key=self._seed(),
                num_warmup=self._warmup(),
                num_samples=self.num_samples,
                num_chains=self.num_chains,
                dims=dims,
                coords=coords,
                observed={"y": y01},
            )
            self._finish_sampling(X, dims, coords)
            return Psi

        Psi = self._fit_on_basis(Xs, labels, sample, CLASSIFIER_PILOT_MARGIN)
        diagnostics.set_attrs(self.idata_, approximation="hsgp")
        post = self.idata_.posterior
        bias, W = self._basis_draws()
        rows = loo_rows(len(Xs), len(bias), W.shape[1], self._seed(), point_work=W.shape[1])
        f = bias[:, None] + W @ np.asarray(Psi[rows, 1:]).T
        sign = 2.0 * y01[rows] - 1.0
        ll = -np.logaddexp(0.0, -sign * f)  # log sigmoid(+-f)
        diagnostics.add_group(
            self.idata_,
            "log_likelihood",
            {"y": ll.reshape(post.sizes["chain"], -1, len(rows))},
            dims={"y": ["obs"]},
            coords={"obs": rows},
        )
        if len(rows) < len(Xs):
            diagnostics.set_attrs(self.idata_, loo_subsample=int(len(rows)))
        fitted = special.expit(f) if f.size <= FITTED_MAX_POINTS else None
        self._add_posterior_predictive(fitted)

    def _basis_draws(self):
        """Return the bias ``(S,)`` and basis weights ``(S, M)`` of every posterior draw."""
        post = self.idata_.posterior
        bias = np.asarray(post["bias"]).reshape(-1)
        return bias, np.asarray(post["weights"]).reshape(len(bias), -1)

    def _latent_hsgp(self, X):
        r"""Per-draw latent values :math:`b + \Phi(X)w` at ``X`` and zero variances."""
        Xs = self.x_std_.transform(X)
        self._warn_outside_box(Xs)
        bias, W = self._basis_draws()
        W = jnp.asarray(W)
        f = np.empty((len(bias), len(Xs)))
        for sl in _chunks(len(Xs), max(len(bias), W.shape[1])):
            f[:, sl] = np.asarray(W @ self.hsgp_design_.features(jnp.asarray(Xs[sl])).T)
        return f + bias[:, None], np.zeros_like(f)

    def _multiclass(self) -> bool:
        return len(self.classes_) > 2

    def _adapts_mass(self) -> bool:
        """``adapt_mass_matrix``; ``None``: only for the latent route (see the docstring)."""
        if self.adapt_mass_matrix is None:
            return self.inference == "latent"
        return bool(self.adapt_mass_matrix)

    def _laplace_chains(self, Xs, y, n_classes: int) -> dict:
        """How the Laplace route's chains run when the user chose no ``chain_method``.

        On a CPU not one per device: jaxlib 0.10's LAPACK kernels hand their work to XLA:CPU's
        thread pool and wait for it, the pool's threads also run the devices' programs, and
        with chains on several devices at once every thread can end up waiting (the fit
        then blocks forever; so did two chains on two of four devices). So the chains run
        one after another, in one process per core (``"processes"``) when their work
        (:data:`LAPLACE_PROCESS_WORK`) pays for starting the processes, else in this one.
        Elsewhere JAX's default rule (:func:`bayeskern.inference.choose_chain_method`).
        Returns ``chain_method`` and ``rebuild`` for :meth:`_sample`.
        """
        try:
            config = json.dumps(dict(kernel=self.kernel_.get_config(), n_classes=n_classes))
        except TypeError:  # a kernel with a Python callable: not rebuilt in another process
            config = None
        rebuild = None
        if config is not None:
            arrays = dict(
                X=np.asarray(Xs),
                y=np.asarray(y),
                x_scale=np.asarray(self.x_std_.scale),
                newton_start=np.zeros((n_classes, len(y)) if n_classes > 2 else len(y)),
                **kernel_state(self.kernel_),
            )
            rebuild = ("bayeskern.estimators.gp:_laplace_model", config, arrays)
        if jax.default_backend() != "cpu":
            return dict(chain_method=None, rebuild=rebuild)
        warmup = self._warmup()
        # "auto" draws at least one block
        draws = AUTO_BLOCK if isinstance(self.num_samples, str) else self.num_samples
        work = (
            self.num_chains
            * (warmup + draws)
            * (n_classes if n_classes > 2 else 1)
            * float(len(y)) ** 3
        )
        processes = (
            rebuild is not None
            and self.num_chains > 1
            and work >= LAPLACE_PROCESS_WORK
            and can_start_processes()
        )
        return dict(chain_method="processes" if processes else "sequential", rebuild=rebuild)

    def _dims(self):
        dims = super()._dims()
        if self._multiclass():
            dims.update(amplitude=["class", "term"], f=["class", "obs"])
        return dims

    def _fit_softmax(self, Xs, y, X):
        """NUTS on the softmax model; returns the LA-LOO log-likelihood (chain, draw, n)."""
        Xj, yj = jnp.asarray(Xs), jnp.asarray(y)
        kernel, x_scale = self.kernel_, self.x_std_.scale
        self._sample(
            gp_classification_softmax,
            Xs,
            y,
            y,
            X,
            model_kwargs=self._gp_kwargs(Xs, y)
            | dict(
                n_classes=len(self.classes_), newton_start=jnp.zeros((len(self.classes_), len(y)))
            ),
            # each draw's mode search starts at the latent mode of the posterior mode
            data_at_mode=lambda v: dict(newton_start=v["f"]),
            **self._laplace_chains(Xs, y, len(self.classes_)),
        )
        ll = np.asarray(
            map_draws(
                lambda d: softmax_classification_loo(kernel, d, Xj, yj, x_scale, _draw_key(d)),
                self._softmax_draws(),
            )
        )
        return ll.reshape(self.idata_.posterior.sizes["chain"], -1, ll.shape[-1])

    def _softmax_draws(self):
        draws = self._draws(with_f=True)
        draws["__index"] = np.arange(len(draws["f"]))  # the Monte Carlo seed of each draw
        return draws

    def _softmax_predict(self, X, parts=(0, 1, 2), reduce=None):
        """Per draw: class probabilities (draws, n, C), latent mean and covariance.

        Only the outputs in ``parts`` are kept, each passed through ``reduce`` per row chunk
        (e.g. the mean over draws), so that what is kept, not draws × rows × C², bounds the
        memory.
        """
        X = self._validate_predict(X)
        Xs = jnp.asarray(self.x_std_.transform(X))
        Xtr = jnp.asarray(self.x_std_.transform(np.asarray(self.idata_.constant_data["X"])))
        ytr = jnp.asarray(np.asarray(self.idata_.observed_data["y"]), dtype=jnp.int32)
        fn = self._draw_map(
            "softmax",
            lambda kernel, x_scale: (
                lambda d, Xt, Xn: softmax_classification_predictive(
                    kernel, d, Xt, ytr, Xn, x_scale, _draw_key(d)
                )
            ),
        )
        draws = self._softmax_draws()
        C = len(self.classes_)
        keep = reduce or (lambda a: a)
        out = []
        for sl in _chunks(
            len(Xs), max(len(draws["f"]) * (2 * C + C * C), 16 * len(Xtr), SOFTMAX_MC_DRAWS * C)
        ):
            o = fn(draws, Xtr, Xs[sl])
            out.append([keep(np.asarray(o[k])) for k in parts])
        axis = 1 if reduce is None else 0
        return tuple(np.concatenate([o[j] for o in out], axis=axis) for j in range(len(parts)))

    @remember_last("latent")
    def _latent(self, X):
        """Per-draw latent mean and variance at ``X``, ``(draws, n)`` each (two classes)."""
        X = self._validate_predict(X)
        if getattr(self, "approximation_", "exact") == "hsgp":
            return self._latent_hsgp(X)
        Xs = jnp.asarray(self.x_std_.transform(X))
        Xtr = jnp.asarray(self.x_std_.transform(np.asarray(self.idata_.constant_data["X"])))
        if getattr(self, "inference", "latent") == "laplace":
            ytr = jnp.asarray(np.asarray(self.idata_.observed_data["y"]), dtype=float)  # 0/1
            fn = self._draw_map(
                "laplace",
                lambda kernel, x_scale: (
                    lambda d, Xt, Xn: laplace_classification_predictive(
                        kernel, d, Xt, ytr, Xn, x_scale
                    )
                ),
            )
            draws = self._draws(with_f=True)
        else:
            fn = self._draw_map(
                "classification",
                lambda kernel, x_scale: (
                    lambda d, Xt, Xn: classification_predictive(kernel, d, Xt, Xn, x_scale)
                ),
            )
            draws = self._draws()
        means, vars_ = [], []
        jitter_max = 0.0
        for sl in _chunks(
            len(Xs), max(self.idata_.posterior.sizes["draw"] * self.num_chains, 16 * len(Xtr))
        ):
            m, v, jit = fn(draws, Xtr, Xs[sl])
            means.append(np.asarray(m))
            vars_.append(np.asarray(v))
            jitter_max = max(jitter_max, float(np.max(np.asarray(jit))))
        _report_jitter(jitter_max, self)
        return np.concatenate(means, axis=1), np.concatenate(vars_, axis=1)

    def _proba_draws(self, X):
        """Return the per-draw :math:`P(y = 1)`, ``(draws, n)`` (two classes).

        MacKay's probit approximation :math:`\\sigma(\\mu_s/\\sqrt{1 + \\pi v_s/8})`.
        """
        return _class1_probability(*self._latent(X))

    def _class_proba_draws(self, X):
        """Return the per-draw class probabilities, ``(draws, n, C)``, latent integrated out.

        Two classes: :meth:`_proba_draws`; more: R&W Algorithm 3.4 per draw.
        """
        check_is_fitted(self)
        if self._multiclass():
            return self._softmax_predict(X, parts=(0,))[0]
        p1 = self._proba_draws(X)
        return np.stack([1.0 - p1, p1], axis=-1)

    @limit_blas
    def predict_proba(self, X):
        """Posterior predictive class probabilities, shape ``(n, C)``.

        :math:`\\frac1S\\sum_s p(y_* = c\\mid x_*, \\theta_s, y)` over the posterior draws.
        """
        check_is_fitted(self)
        if self._multiclass():
            return self._softmax_predict(X, parts=(0,), reduce=lambda p: p.mean(axis=0))[0]
        p1 = self._proba_draws(X).mean(axis=0)
        return np.column_stack([1.0 - p1, p1])

    @limit_blas
    def predict_proba_interval(self, X, interval: float = 0.9):
        """Equal-tailed posterior credible interval of each class probability.

        The :math:`(1 \\mp \\gamma)/2` quantiles, :math:`\\gamma` = ``interval``, over the
        posterior draws :math:`\\theta_s` of :math:`p(y_* = c\\mid x_*, \\theta_s, y)` (the
        latent function integrated out per draw; :func:`~bayeskern.estimators.base.proba_interval`).
        Returns ``(lower, upper)``, each ``(n, C)``.
        """
        check_is_fitted(self)
        check_interval(interval)  # before the work
        return proba_interval(self._class_proba_draws(X), interval)

    def predict(self, X):
        """Most probable class."""
        proba = self.predict_proba(X)  # checks fitted state before classes_ is read
        return most_probable_class(self.classes_, proba)

    @limit_blas
    def sample_posterior_predictive(
        self, X, n_draws: int = 200, random_state=None, row_offset: int = 0
    ):
        """Draw predictive labels, ``(n_draws, n)`` (class labels).

        Per point and draw a posterior draw :math:`s`, :math:`f \\sim N(\\mu_s, v_s)`, then a
        Bernoulli(σ(f)) label; with :math:`C > 2` classes :math:`f \\sim N(\\mu_s, \\Sigma_s)`
        (R&W Algorithm 3.4's moments) and a categorical label of probabilities
        :math:`\\mathrm{softmax}(f)`.

        The draws of row ``i`` depend only on the seed and on ``row_offset + i`` (counter-based,
        :func:`bayeskern.predictive.row_uniforms`), not on the other rows of ``X``.
        """
        check_is_fitted(self)
        if self._multiclass():
            m, cov = self._softmax_predict(X, parts=(1, 2))
        else:
            m, v = self._latent(X)
        seed = draw_seed(self._seed() if random_state is None else random_state)
        rows = row_offset + np.arange(m.shape[1])
        n_u = 3 if m.ndim == 2 else m.shape[2] + 2
        u = [row_uniforms(seed, rows, n_draws, k) for k in range(n_u)]
        idx = np.minimum((u[0] * m.shape[0]).astype(np.int64), m.shape[0] - 1)
        cols = np.broadcast_to(np.arange(m.shape[1]), idx.shape)
        if m.ndim == 2:
            f = m[idx, cols] + np.sqrt(v[idx, cols]) * special.ndtri(u[1])
            return self.classes_[(u[2] < special.expit(f)).astype(int)]
        C = m.shape[2]
        lam, vec = np.linalg.eigh(cov[idx, cols])  # Sigma_s may be singular
        z = special.ndtri(np.stack(u[1 : C + 1], axis=-1))
        f = m[idx, cols] + np.einsum(
            "...cd,...d->...c", vec * np.sqrt(np.maximum(lam, 0.0))[..., None, :], z
        )
        cdf = np.cumsum(special.softmax(f, axis=-1), axis=-1)
        return self.classes_[np.minimum(np.sum(cdf < u[C + 1][..., None], axis=-1), C - 1)]

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.classifier_tags.multi_class = True
        return tags


def _class1_probability(mean, var) -> np.ndarray:
    """Return :math:`P(y = 1)` for a latent :math:`f \\sim N(\\mu, v)`, elementwise.

    MacKay's probit approximation :math:`\\sigma(\\mu/\\sqrt{1 + \\pi v/8})` (MacKay 1992).
    """
    return np.asarray(jax.nn.sigmoid(probit_logit(mean, var)))


def _draw_key(draw):
    """Return the fixed Monte Carlo key of one posterior draw (from its index among the draws)."""
    return jax.random.fold_in(jax.random.PRNGKey(0), draw["__index"])


#: Largest size (bytes) of the per-draw prediction factors :math:`L^{-1}` kept after a fit
#: (draws x N_train^2 x 8 bytes; over: those factor per chunk of new points instead).
FACTOR_CACHE_BYTES = 2**29


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


@jax.jit
def _predict_draws(R, w, Phi):
    """:func:`~bayeskern.models.hsgp.hsgp_predict` for each draw's ``(R, w)``, one at a time."""
    return batched_map(lambda f: hsgp_predict(f[0], f[1], Phi), (R, w), 1)


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
