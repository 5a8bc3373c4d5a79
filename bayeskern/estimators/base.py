"""The base of the Bayesian estimators: their mixin, standardization, the saved kernel.

Every Bayesian estimator in bayeskern

* validates its input in ``fit`` (scikit-learn's ``validate_data``; errors name the argument),
* standardizes ``X`` per column (and ``y`` for regression) and samples on that scale,
* stores an ArviZ ``InferenceData`` in ``idata_`` (posterior, sample_stats, log_likelihood,
  observed_data, constant_data) and a :class:`~bayeskern.diagnostics.ConvergenceReport` in
  ``convergence_``,
* saves and loads without pickle (:mod:`bayeskern.runs`).

The input checks live in :mod:`~bayeskern.estimators.validation`, the handling of posterior
draws in :mod:`~bayeskern.estimators.draws` and the prediction mixins in
:mod:`~bayeskern.estimators.prediction`; their public names are importable from here too.
"""

from __future__ import annotations

import numbers

import numpy as np
from sklearn.base import is_classifier
from sklearn.utils import check_random_state
from sklearn.utils.validation import check_is_fitted

from bayeskern import diagnostics
from bayeskern.batching import batched_map
from bayeskern.estimators.draws import (  # noqa: F401  (public here too)
    PREDICTIVE_MAX_VALUES,
    data_unit_variables,
    flat_draws,
    map_draws,
    proba_interval,
    thin_draws,
)
from bayeskern.estimators.params import SAMPLER_CONSTRAINTS
from bayeskern.estimators.prediction import (  # noqa: F401  (public here too)
    PREDICT_BLOCK_ELEMENTS,
    JointPredictiveMixin,
    PredictiveRegressorMixin,
    cached_jit,
    mixture_joint,
    remember_last,
)
from bayeskern.estimators.validation import (  # noqa: F401  (public here too)
    check_interval,
    check_numeric,
    validate_binary,
    validate_classes,
    validate_data,
)
from bayeskern.predictive import draw_seed, row_uniforms

__all__ = [
    "BayesianEstimatorMixin",
    "PredictiveRegressorMixin",
    "Standardizer",
    "flat_draws",
    "map_draws",
    "validate_binary",
    "validate_classes",
    "proba_interval",
    "check_interval",
    "batched_map",
    "thin_draws",
    "data_unit_variables",
    "PREDICTIVE_MAX_VALUES",
    "JointPredictiveMixin",
    "mixture_joint",
    "cached_jit",
    "remember_last",
]


class Standardizer:
    """Column centring and scaling; constant columns keep scale 1 (no division by zero)."""

    def __init__(self, mean, scale):
        self.mean = np.asarray(mean, dtype=float)
        self.scale = np.asarray(scale, dtype=float)

    @classmethod
    def fit(cls, A):
        """Return a standardizer with the column means and scales of ``A``."""
        A = np.asarray(A, dtype=float)
        scale = A.std(axis=0)
        scale = np.where(scale > 1e-12 * (1 + np.abs(A.mean(axis=0))), scale, 1.0)
        return cls(A.mean(axis=0), scale)

    def transform(self, A):
        """Return ``A`` centred and scaled column by column."""
        return (np.asarray(A, dtype=float) - self.mean) / self.scale


def kernel_state(kernel) -> dict[str, np.ndarray]:
    """Fitted arrays of every node of a kernel tree, keyed for :func:`restore_kernel`.

    Leaves by name (``kernel/<leaf name>/<attribute>``); fitted nodes that are not leaves
    (Conformal: its coefficients and expansion points) by tree path (``kernel@<path>/...``).
    The constructor arguments travel separately, as :meth:`Kernel.get_config`.
    """
    from bayeskern.kernels.base import kernel_nodes

    arrays = {}
    for leaf in kernel.leaves():
        for k, v in leaf.get_state().items():
            arrays[f"kernel/{leaf.name_}/{k}"] = v
    leaves = {id(leaf) for leaf in kernel.leaves()}
    for path, node in kernel_nodes(kernel):
        if id(node) not in leaves:
            for k, v in node.get_state().items():
                arrays[f"kernel@{path}/{k}"] = v
    return arrays


def restore_kernel(config: dict, arrays: dict):
    """Inverse of :meth:`Kernel.get_config` and :func:`kernel_state`: the named, fitted kernel.

    ``arrays`` may hold other entries; only the ``kernel/`` and ``kernel@`` ones are read.
    """
    from bayeskern.kernels.base import kernel_from_config, kernel_nodes, name_leaves

    kernel = name_leaves(kernel_from_config(config))
    for leaf in kernel.leaves():
        prefix = f"kernel/{leaf.name_}/"
        for k, v in arrays.items():
            if k.startswith(prefix):
                setattr(leaf, k[len(prefix) :], v)
    for path, node in kernel_nodes(kernel):
        prefix = f"kernel@{path}/"
        for k, v in arrays.items():
            if k.startswith(prefix):
                setattr(node, k[len(prefix) :], v)
    return kernel


def as_fitted_input(est, X):
    """``X`` as the estimator saw it in fit (a frame with its column names, if it had them).

    Internal calls on arrays taken from ``idata_`` then pass scikit-learn's feature-name
    check without its "X does not have valid feature names" warning.
    """
    names = getattr(est, "feature_names_in_", None)
    if names is None:
        return X
    import pandas as pd

    return pd.DataFrame(np.asarray(X, dtype=float), columns=list(names))


class BayesianEstimatorMixin:
    """Common behaviour of the NUTS-based estimators (sampler settings, validation, save)."""

    # ------------------------------------------------------------------ validation
    #: the sampler arguments; each estimator adds its own (scikit-learn's format)
    _parameter_constraints: dict = dict(SAMPLER_CONSTRAINTS)
    #: whether ``num_warmup`` and ``num_samples`` may be ``"auto"``
    _AUTO_COUNTS = False

    def _validate_fit(self, X, y, *, classifier: bool):
        # a new fit starts a new cache (compiled maps, prediction factors, the last
        # predictive): nothing computed for an earlier fit is kept
        self._cache = {}
        X, y = validate_data(
            self, X, y, dtype=np.float64, ensure_min_samples=2, y_numeric=not classifier
        )
        if not classifier:
            y = np.asarray(y, dtype=float)
        return X, y

    def _validate_predict(self, X):
        check_is_fitted(self)
        return validate_data(self, X, reset=False, dtype=np.float64)

    def _seed(self) -> int:
        """Return an int seed from ``random_state`` (``None``: a fresh one, as scikit-learn)."""
        rs = self.random_state
        if isinstance(rs, numbers.Integral):
            return int(rs)
        return int(check_random_state(rs).randint(0, 2**31 - 1))

    def _coords(self, n_obs):
        names = getattr(self, "feature_names_in_", None)
        if names is None:
            names = [f"x{j}" for j in range(self.n_features_in_)]
        return {"feature": [str(n) for n in names], "obs": np.arange(n_obs)}

    def _store_inputs(self, X, coords, group="constant_data"):
        """Store the input rows ``X`` (obs, feature; no draw dims) in ``group`` of ``idata_``."""
        diagnostics.add_group(
            self.idata_,
            group,
            {"X": X},
            dims={"X": ["obs", "feature"]},
            coords=coords,
            sample_dims=False,
        )

    # ------------------------------------------------------------------ diagnostics
    def summary(self, var_names=None):
        """ArviZ summary table of the posterior."""
        check_is_fitted(self)
        return diagnostics.summary(self.idata_, var_names)

    def loo(self):
        """PSIS-LOO of the fitted model (pointwise log-likelihood in the data's units)."""
        check_is_fitted(self)
        return diagnostics.loo(self.idata_)

    # ------------------------------------------------------------------ posterior predictive
    def _replicates(self, X, draws, seed: int, stream: int, row_offset: int = 0):
        """Replicated observations at ``X``, one per posterior draw in ``draws``.

        ``draws`` are flat indices over (chain, draw). A regressor draws from component
        :math:`s` of :meth:`predictive`; a classifier from Bernoulli(:math:`p_s`) with
        :math:`p_s` the draw's class-1 probability (``_draw_probabilities``), or with more
        than two classes from Categorical(:math:`p_s`), encoded as ``observed_data["y"]``
        is. When the predictive mixes fewer components :math:`S'` than there are posterior
        draws :math:`S` (LAB-RBF's one Student-t law, GaBaSR
        conditioned on all rows), draw :math:`j` uses component
        :math:`\\lfloor jS'/S\\rfloor`. Returns ``(len(draws), n)``.
        """
        if not is_classifier(self):
            pred = self.predictive(X)
            return self._sample_replicates(pred, draws, seed, stream, row_offset)
        P = np.asarray(self._draw_probabilities(X))
        return self._class_replicates(P, draws, seed, stream, row_offset)

    def _class_replicates(self, P, draws, seed: int, stream: int, row_offset: int = 0):
        """One label per posterior draw in ``draws`` from a classifier's per-draw ``P``.

        ``P``: ``(draws, n)`` class-1 probabilities or ``(draws, n, C)``, as
        ``_draw_probabilities`` returns them (see :meth:`_replicates`).
        """
        post = self.idata_.posterior
        n_total = post.sizes["chain"] * post.sizes["draw"]
        comp = np.asarray(draws) * P.shape[0] // n_total
        rows = row_offset + np.arange(P.shape[1])
        u = row_uniforms(seed, rows, len(comp), stream)
        if P.ndim == 3:  # several classes: the class whose cumulative probability passes u
            y01 = np.minimum(
                (u[..., None] >= np.cumsum(P[comp], axis=-1)).sum(axis=-1), P.shape[-1] - 1
            ).astype(np.int64)
        else:
            y01 = (u < P[comp]).astype(np.int64)
        observed = np.asarray(self.idata_.observed_data["y"])
        n_classes = P.shape[-1] if P.ndim == 3 else 2
        if (
            np.issubdtype(observed.dtype, np.number)
            and np.isin(observed, np.arange(n_classes)).all()
        ):
            return y01
        return np.asarray(self.classes_)[y01]

    def _sample_replicates(self, pred, draws, seed: int, stream: int, row_offset: int = 0):
        """One replicate per posterior draw in ``draws`` from a regressor's ``pred``."""
        post = self.idata_.posterior
        comp = np.asarray(draws) * pred.loc.shape[0] // (post.sizes["chain"] * post.sizes["draw"])
        return pred.sample_components(comp, seed, row_offset=row_offset, stream=stream)

    def _predictive_group(self, X, draws, seed: int, stream: int) -> np.ndarray:
        """:meth:`_replicates` in row blocks, shaped ``(chain, kept draws, n)``."""
        post = self.idata_.posterior
        n, step = len(X), max(256, PREDICT_BLOCK_ELEMENTS // max(1, len(draws)))
        parts = [
            self._replicates(as_fitted_input(self, X[sl]), draws, seed, stream, row_offset=sl.start)
            for sl in (slice(a, a + step) for a in range(0, max(n, 1), step))
        ]
        out = np.concatenate(parts, axis=1)
        return out.reshape(post.sizes["chain"], -1, out.shape[-1])

    def _add_posterior_predictive(self, fitted=None) -> None:
        """Store ``posterior_predictive`` ``y``: replicated data at the training inputs.

        The rows of the ``log_likelihood`` group (all rows unless it was subsampled), so that
        ArviZ's LOO-PIT pairs each replicate with its log density; posterior draws thinned
        by :func:`thin_draws`. Seeded by ``random_state``. ``fitted``: a regressor's
        predictive at the rows of the ``log_likelihood`` group, one component per draw,
        computed with its LOO from the same factorization
        (:func:`bayeskern.models.gp.loo_and_fitted_rows`,
        :func:`bayeskern.models.hsgp.hsgp_loo_and_fitted`), or a classifier's per-draw class
        probabilities there (:func:`bayeskern.models.gp.laplace_classification_loo`);
        otherwise :meth:`predictive` (or ``_draw_probabilities``) is called at the training
        inputs.
        """
        idata = self.idata_
        rows = (
            np.arange(idata.constant_data.sizes["obs"])
            if "log_likelihood" not in idata.groups()
            else np.asarray(idata.log_likelihood["obs"])
        )
        X = (
            np.asarray(idata.constant_data["X"])[rows]
            if "constant_data" in idata.groups()
            else None
        )
        post = idata.posterior
        draws = thin_draws(post.sizes["chain"], post.sizes["draw"], len(rows))
        clf = is_classifier(self)
        width = None if fitted is None else (fitted if clf else fitted.loc).shape[1]
        if width == len(rows):
            replicates = self._class_replicates if clf else self._sample_replicates
            y = replicates(fitted, draws, self._seed(), stream=2)
            y = y.reshape(post.sizes["chain"], -1, y.shape[-1])
        else:
            y = self._predictive_group(X, draws, self._seed(), stream=2)
        diagnostics.add_group(
            idata, "posterior_predictive", {"y": y}, dims={"y": ["obs"]}, coords={"obs": rows}
        )
        diagnostics.add_coords(
            idata, "posterior_predictive", draw=np.asarray(post["draw"])[draws[: y.shape[1]]]
        )
        diagnostics.set_attrs(idata, posterior_predictive_draws=int(y.shape[1]))

    def add_predictions(self, X, n_draws: int | None = None, random_state=None):
        """Add ``predictions`` and ``predictions_constant_data`` groups for new inputs ``X``.

        PyMC's ``sample_posterior_predictive(..., predictions=True,
        extend_inferencedata=True)``: for posterior draw :math:`s` one draw
        :math:`\\tilde y^{(s)} \\sim p(\\tilde y \\mid \\theta_s, \\mathcal D)` at each
        row of ``X`` (marginal per row; Gelman et al. 2013, ch. 6), in the units of ``y``
        (regression) or encoded as ``observed_data["y"]`` is (classification: the labels,
        or their codes ``0 .. C-1`` into ``classes_``), dims ``(chain, draw, obs)``;
        ``X`` itself goes to ``predictions_constant_data``. A later call replaces both
        groups.

        Parameters
        ----------
        X : array-like (n, n_features)
        n_draws : int or None
            Posterior draws used, at most (evenly thinned within each chain,
            :func:`thin_draws`; at least one per chain); ``None``: all, up to
            :data:`PREDICTIVE_MAX_VALUES` values.
        random_state : int, Generator or None
            Seed of the draws (``None``: the estimator's ``random_state``).

        Returns
        -------
        arviz.InferenceData
            ``idata_``, extended.
        """
        check_is_fitted(self)
        if n_draws is not None and (
            isinstance(n_draws, bool) or not isinstance(n_draws, numbers.Integral) or n_draws < 1
        ):
            raise ValueError(f"n_draws must be None or a positive int, got {n_draws!r}")
        X = self._validate_predict(X)
        post = self.idata_.posterior
        draws = thin_draws(post.sizes["chain"], post.sizes["draw"], len(X), n_draws)
        seed = draw_seed(self._seed() if random_state is None else random_state)
        y = self._predictive_group(X, draws, seed, stream=3)
        coords = self._coords(len(X))
        diagnostics.add_group(
            self.idata_, "predictions", {"y": y}, dims={"y": ["obs"]}, coords=coords
        )
        diagnostics.add_coords(
            self.idata_, "predictions", draw=np.asarray(post["draw"])[draws[: y.shape[1]]]
        )
        self._store_inputs(X, coords, "predictions_constant_data")
        return self.idata_

    # ------------------------------------------------------------------ saving (no pickle)
    def _save_state(self) -> tuple[dict, dict]:
        """Fitted state as JSON-able ``meta`` and a dict of arrays (see bayeskern.runs)."""
        check_is_fitted(self)
        meta = {
            "n_features_in": int(self.n_features_in_),
            "kernel": self.kernel_.get_config() if hasattr(self, "kernel_") else None,
        }
        arrays = {"x_mean": self.x_std_.mean, "x_scale": self.x_std_.scale}
        if hasattr(self, "y_std_"):
            arrays.update(y_mean=self.y_std_.mean, y_scale=self.y_std_.scale)
        if hasattr(self, "classes_"):
            arrays["classes"] = np.asarray(self.classes_)
        if hasattr(self, "feature_names_in_"):
            meta["feature_names_in"] = [str(c) for c in self.feature_names_in_]
        if hasattr(self, "kernel_"):
            arrays.update(kernel_state(self.kernel_))
        return meta, arrays

    def _load_state(self, meta: dict, arrays: dict) -> None:
        """Inverse of :meth:`_save_state`."""
        self.n_features_in_ = meta["n_features_in"]
        if "feature_names_in" in meta:
            self.feature_names_in_ = np.asarray(meta["feature_names_in"], dtype=object)
        self.x_std_ = Standardizer(arrays["x_mean"], arrays["x_scale"])
        if "y_mean" in arrays:
            self.y_std_ = Standardizer(arrays["y_mean"], arrays["y_scale"])
        if "classes" in arrays:
            self.classes_ = arrays["classes"]
        if meta.get("kernel") is not None:
            self.kernel_ = restore_kernel(meta["kernel"], arrays)
        self._cache = {}
        if self._AUTO_COUNTS:  # the draws per chain that "auto" (or the user) gave
            self.num_samples_ = int(self.idata_.posterior.sizes["draw"])
        self.convergence_ = diagnostics.convergence_report(self.idata_, warn=False)

    def save(self, path) -> None:
        """Save the fitted run (netCDF + JSON, no pickle); see :func:`bayeskern.runs.save_run`."""
        from bayeskern.runs import save_run

        save_run(self, path)

    def __getstate__(self):
        # cached jitted closures are rebuilt on demand; they do not pickle
        state = self.__dict__.copy()
        state.pop("_cache", None)
        return state

    def _sklearn_tags_common(self, tags):
        tags.non_deterministic = self.random_state is None
        return tags
