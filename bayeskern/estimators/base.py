"""Shared machinery of the Bayesian estimators: validation, standardization, draws, saving.

Every Bayesian estimator in bayeskern

* validates its input in ``fit`` (scikit-learn's ``validate_data``; errors name the argument),
* standardizes ``X`` per column (and ``y`` for regression) and samples on that scale,
* stores an ArviZ ``InferenceData`` in ``idata_`` (posterior, sample_stats, log_likelihood,
  observed_data, constant_data) and a :class:`~bayeskern.diagnostics.ConvergenceReport` in
  ``convergence_``,
* saves and loads without pickle (:mod:`bayeskern.runs`).
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import numbers
import weakref
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np
from sklearn.base import is_classifier
from sklearn.utils import check_random_state
from sklearn.utils.validation import check_is_fitted
from sklearn.utils.validation import validate_data as _sk_validate_data

from bayeskern import diagnostics
from bayeskern.batching import batched_map, pad_rows
from bayeskern.estimators.params import SAMPLER_CONSTRAINTS
from bayeskern.predictive import draw_seed, row_uniforms
from bayeskern.programs import shared_jit

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


def flat_draws(idata, var_names) -> dict[str, np.ndarray]:
    """Posterior draws as arrays with chains and draws flattened into one leading axis."""
    post = idata.posterior
    out = {}
    for v in var_names:
        a = np.asarray(post[v])
        out[v] = a.reshape((-1,) + a.shape[2:])
    return out


def _non_numeric(name: str, A) -> str | None:
    """Return a message naming ``name`` and its non-numeric columns/values, or ``None``."""
    if isinstance(A, str) or A is None:
        return None
    try:
        np.asarray(A, dtype=np.float64)
        return None
    except (TypeError, ValueError):
        pass
    columns = getattr(A, "columns", None)
    if columns is not None:  # a DataFrame: name the offending columns
        import pandas as pd

        bad = [
            str(c)
            for c in columns
            if pd.to_numeric(A[c], errors="coerce").isna().sum() > A[c].isna().sum()
        ]
        return (
            f"{name} has non-numeric column(s) {bad[:10]}: encode them as numbers first "
            "(for example sklearn.preprocessing.OneHotEncoder) or drop them"
        )
    flat = np.asarray(A, dtype=object).ravel()
    for v in flat:
        try:
            float(v)
        except (TypeError, ValueError):
            return (
                f"{name} contains a non-numeric value ({v!r}); encode text as numbers "
                "first (for example sklearn.preprocessing.OneHotEncoder)"
            )
    return f"{name} could not be converted to float64"


def check_numeric(X, y="no_validation", *, y_numeric: bool = False) -> None:
    """Refuse non-numeric input with an error naming the argument.

    The argument is ``X``, or ``y`` when it must be numeric; for a DataFrame the error
    also names its text columns.
    """
    msg = _non_numeric("X", X) or (_non_numeric("y", y) if y_numeric else None)
    if msg is not None:
        raise ValueError(msg)


def validate_data(estimator, X="no_validation", y="no_validation", **kwargs):
    """scikit-learn's ``validate_data``, with :func:`check_numeric`'s errors for text input."""
    y_numeric = kwargs.get("y_numeric", False)
    try:
        out = _sk_validate_data(estimator, X, y, **kwargs)
    except ValueError as e:
        if "convert" not in str(e) and "numeric" not in str(e):
            raise
        check_numeric(X, y, y_numeric=y_numeric)
        raise
    if y_numeric:  # scikit-learn lets a NumPy string y through
        check_numeric(None, y, y_numeric=True)
    return out


#: compiled draw maps, per function (weakly held: an entry goes when its function does), then
#: per (devices, number of arguments, batch size)
_DRAW_MAPS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _draw_map(fn, n_dev: int, n_args: int, batch_size: int):
    """``jax.jit`` of ``fn`` mapped over draws, the draws split over ``n_dev`` devices.

    Cached per ``fn``: a function defined once (a module-level function, a method's function
    kept on a fitted estimator) compiles once per shape, however often it is mapped. The cached
    program refers to ``fn`` weakly, so the entry is freed with ``fn``; a closure made per call
    is compiled per call, as before.
    """
    try:
        per_fn = _DRAW_MAPS.setdefault(fn, {})
        ref = weakref.ref(fn)
    except TypeError:  # not weakly referable: compiled for this call only
        per_fn, ref = {}, lambda: fn
    key = (n_dev, n_args, batch_size)
    if key not in per_fn:

        def per_device(d, *a):
            f = ref()
            return batched_map(lambda x: f(x, *a), d, batch_size)

        if n_dev > 1:  # one share of the draws per device: jit of shard_map, no pmap cache
            P = jax.sharding.PartitionSpec
            mesh = jax.sharding.Mesh(np.array(jax.local_devices()[:n_dev]), ("draws",))
            per_device = jax.shard_map(
                per_device,
                mesh=mesh,
                in_specs=(P("draws"),) + (P(),) * n_args,
                out_specs=P("draws"),
                check_vma=False,
            )
        per_fn[key] = shared_jit(per_device)
    return per_fn[key]


def map_draws(fn, draws: dict, *args, batch_size: int = 1):
    """Apply ``fn(draw, *args)`` to every posterior draw.

    With :func:`~bayeskern.batching.batched_map`, the draws split over the CPU devices (one
    share per device, ``jax.shard_map`` under ``jax.jit``; see :mod:`bayeskern.devices`) when
    there are several. The compiled map is cached per ``fn`` (:func:`_draw_map`): pass a
    function defined once, with the data as ``args``, and repeated calls on arrays of the same
    shapes do not compile again.

    ``batch_size`` stays 1 for bodies with linear algebra: batches of draws put batched
    LAPACK calls (Cholesky, triangular solves) inside ``lax.map``'s loop, and that can
    block forever in XLA:CPU, with or without a remainder batch, where one draw at a time
    does not (``tests/test_batched_map.py``).
    """
    jdraws = {k: jnp.asarray(v) for k, v in draws.items()}
    n = jax.tree_util.tree_leaves(jdraws)[0].shape[0]
    n_dev = min(jax.local_device_count(), n)
    mapped = _draw_map(fn, n_dev, len(args), batch_size)
    if n_dev < 2:
        return mapped(jdraws, *args)
    padded, _ = pad_rows(jdraws, n_dev)
    return jax.tree_util.tree_map(lambda a: a[:n], mapped(padded, *args))


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


def validate_classes(y) -> tuple[np.ndarray, np.ndarray]:
    """Encode class labels as ``0 .. C-1`` (sorted classes); at least two classes."""
    classes, codes = np.unique(y, return_inverse=True)
    if len(classes) < 2:
        raise ValueError(
            f"y has a single class ({classes[0]!r}); a classifier needs at least two classes"
        )
    return classes, codes.astype(np.int32)


def validate_binary(y, multiclass_estimator: str | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Encode binary labels as 0/1; errors name ``y`` and say what is wrong.

    ``multiclass_estimator`` names the estimator to suggest for more than two classes.
    """
    classes, y01 = np.unique(y, return_inverse=True)
    if len(classes) < 2:
        raise ValueError(
            f"y has a single class ({classes[0]!r}); a binary classifier needs two classes"
        )
    if len(classes) > 2:
        hint = (
            f"use {multiclass_estimator}, which handles several classes"
            if multiclass_estimator
            else "use a one-vs-rest wrapper such as sklearn.multiclass.OneVsRestClassifier"
        )
        raise ValueError(
            f"y has {len(classes)} classes. Only binary classification is supported ({hint})"
        )
    return classes, y01.astype(np.int32)


def data_unit_variables(posterior, kernel, x_scale, y_scale=None) -> tuple[dict, dict]:
    """Restate the sampled length hyper-parameters (and amplitudes, noise) in data units.

    The sampler works on inputs standardized per column (:math:`\\tilde x_j = (x_j -
    m_j)/s_j`) and, for regression, on :math:`\\tilde y = (y - m_y)/s_y`. A length
    :math:`\\tilde\\ell` (length-scale, period: parameters with ``Hyper.length``) is
    :math:`\\ell_j = \\tilde\\ell\\, s_j` in the units of column :math:`j` (so one value
    per column even for an isotropic kernel, dims ``feature``); with ``y_scale`` the
    amplitudes :math:`a_t` and the noise :math:`\\sigma` become :math:`a_t s_y` and
    :math:`\\sigma s_y`. Returns ``(arrays (chain, draw, ...), dims)`` named
    ``<site>_data_units`` (:data:`~bayeskern.diagnostics.DATA_UNITS_SUFFIX`).
    """
    suffix = diagnostics.DATA_UNITS_SUFFIX
    x_scale = np.asarray(x_scale, dtype=float)
    data, dims = {}, {}
    for leaf in kernel.leaves():
        for p, h in leaf.hyperparameters().items():
            site = leaf._site(p)
            if h.length and site in posterior:
                a = np.asarray(posterior[site])
                data[site + suffix] = (a[..., None] if a.ndim == 2 else a) * x_scale
                dims[site + suffix] = ["feature"]
    for site in ("amplitude", "noise") if y_scale is not None else ():
        if site in posterior:
            data[site + suffix] = np.asarray(posterior[site]) * float(np.squeeze(y_scale))
            dims[site + suffix] = list(posterior[site].dims[2:])
    return data, dims


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


#: most values (rows x draws) stored in a ``posterior_predictive`` or ``predictions`` group
#: (2**24 float64: 128 MiB); beyond, :func:`thin_draws` keeps fewer posterior draws
PREDICTIVE_MAX_VALUES = 2**24


def thin_draws(
    n_chain: int,
    n_draw: int,
    n_rows: int,
    n_draws: int | None = None,
    max_values: int | None = None,
) -> np.ndarray:
    """Flat indices of the posterior draws kept for a predictive group.

    All :math:`C \\times D` draws when they fit, else :math:`k = \\max(1,
    \\lfloor K / C\\rfloor)` evenly spaced draws of each chain, with :math:`K =
    \\min(n_{draws}, \\lfloor V / n_{rows}\\rfloor)` and :math:`V` = ``max_values``
    (default :data:`PREDICTIVE_MAX_VALUES`): the
    stored values stay below :math:`V` (or :math:`C \\cdot n_{rows}`) whatever the rows.
    Every chain keeps the same draws, so the group stays ``(chain, draw, obs)``.
    """
    max_values = PREDICTIVE_MAX_VALUES if max_values is None else max_values
    total = n_chain * n_draw if n_draws is None else min(n_chain * n_draw, int(n_draws))
    total = min(total, max_values // max(n_rows, 1))
    per_chain = max(1, total // n_chain)
    keep = np.unique(np.linspace(0, n_draw - 1, per_chain).round().astype(np.int64))
    return (np.arange(n_chain)[:, None] * n_draw + keep[None, :]).ravel()


def check_interval(interval) -> float:
    """Return ``interval`` as a float; a one-line error unless it is a number in (0, 1)."""
    if (
        isinstance(interval, bool)
        or not isinstance(interval, numbers.Real)
        or not 0.0 < float(interval) < 1.0
    ):
        raise ValueError(f"interval must be a number in (0, 1), got {interval!r}")
    return float(interval)


def proba_interval(draws: np.ndarray, interval) -> tuple[np.ndarray, np.ndarray]:
    r"""Equal-tailed credible interval of class probabilities over posterior draws.

    With :math:`p^{(s)}_{ic}` the probability of class :math:`c` at point :math:`i` under
    posterior draw :math:`s` (the latent function integrated out), the bounds are the
    :math:`(1 - \gamma)/2` and :math:`(1 + \gamma)/2` quantiles over :math:`s`
    (Gelman et al. 2013, "Bayesian Data Analysis", section 2.3), :math:`\gamma` = ``interval``.

    Parameters
    ----------
    draws : (S, n, C) per-draw class probabilities.
    interval : float in (0, 1), the posterior mass inside the interval.

    Returns
    -------
    lower, upper : (n, C) arrays.
    """
    check_interval(interval)
    q = np.quantile(draws, [(1.0 - interval) / 2.0, (1.0 + interval) / 2.0], axis=0)
    return q[0], q[1]


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
        diagnostics.add_group(
            self.idata_,
            "predictions_constant_data",
            {"X": X},
            dims={"X": ["obs", "feature"]},
            coords=coords,
            sample_dims=False,
        )
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


#: most draws x rows elements of one block of :meth:`PredictiveRegressorMixin.predict`
#: (each predictive array of a block then takes at most 64 MB)
PREDICT_BLOCK_ELEMENTS = 2**23


#: most elements (draws x rows, summed over the arrays) of a result that :func:`remember_last`
#: keeps
REMEMBER_ELEMENTS = 2**23


def _content_key(X):
    """Return a key for the values (and column names) of ``X``, or ``None`` if it has none."""
    try:
        values = X.to_numpy() if hasattr(X, "to_numpy") else np.asarray(X)
        if values.dtype == object:
            return None
        values = np.ascontiguousarray(values)
    except (TypeError, ValueError):
        return None
    columns = tuple(map(str, X.columns)) if hasattr(X, "columns") else None
    digest = hashlib.blake2b(values.tobytes(), digest_size=16).digest()
    return type(X).__name__, columns, values.shape, values.dtype.str, digest


def _arrays(out) -> list:
    if isinstance(out, tuple):
        return [a for o in out for a in _arrays(o)]
    if isinstance(out, np.ndarray):
        return [out]
    return [a for a in (out.loc, out.scale, out.df) if a is not None]  # a MixturePredictive


def _own_copy(out):
    """Return the same read-only arrays in a new container (a new ``MixturePredictive``)."""
    if isinstance(out, tuple):
        return tuple(_own_copy(o) for o in out)
    return out if isinstance(out, np.ndarray) else dataclasses.replace(out)


def remember_last(name: str):
    """Wrap a method ``f(self, X)`` of a fitted estimator to keep its last result for one ``X``.

    ``predict``, ``predict_interval``, ``sample_posterior_predictive``, the metrics and the
    report each ask for the predictive distribution at the same new points, and an exact GP
    computes it from a factorization per posterior draw each time. The last result (a
    :class:`~bayeskern.predictive.MixturePredictive`, an array or a tuple of arrays; at most
    :data:`REMEMBER_ELEMENTS` elements) is kept under ``name`` in the fit's cache (``_cache``,
    which each fit starts anew and pickling drops) with a hash of ``X``'s values, its shape,
    type and column names, and the fitted ``idata_``; another ``X`` or a new fit computes it
    again. The kept arrays are read-only, so a caller cannot change what the next one gets.
    Same numbers as without it.

    Parameters
    ----------
    name : str
        The cache entry (one per method).

    Returns
    -------
    callable
        A decorator for the method.
    """

    def wrap(method):
        @functools.wraps(method)
        def remembered(self, X):
            # the fit's own cache (predictions must not add attributes: scikit-learn's
            # check_dict_unchanged); without one, nothing is kept
            cache = self.__dict__.get("_cache")
            if cache is None:
                return method(self, X)
            key = _content_key(X)
            hit = cache.get(name)
            if key is not None and hit is not None and hit[0] is self.idata_ and hit[1] == key:
                return _own_copy(hit[2])
            out = method(self, X)
            arrays = _arrays(out)
            if key is not None and sum(a.size for a in arrays) <= REMEMBER_ELEMENTS:
                for a in arrays:
                    a.setflags(write=False)
                cache[name] = (self.idata_, key, out)
                return _own_copy(out)
            return out

        return remembered

    return wrap


class PredictiveRegressorMixin:
    """``predict``, ``predict_interval`` and ``sample_posterior_predictive`` of a regressor.

    All are read off the Bayesian regressor's ``predictive(X)`` (a
    :class:`~bayeskern.predictive.MixturePredictive`).
    """

    def _by_row_blocks(self, X, summarize):
        """Apply ``summarize`` to :meth:`predictive` of consecutive row blocks of ``X``.

        The predictive holds draws x rows arrays; blocks of at most
        :data:`PREDICT_BLOCK_ELEMENTS` // draws rows keep that bounded, so predicting
        millions of rows needs memory for one block, not for draws x all rows. Returns the
        per-row outputs of ``summarize`` (a tuple of arrays) concatenated over blocks.
        """
        if not hasattr(X, "iloc"):
            X = np.asarray(X) if not hasattr(X, "shape") else X
        take = (lambda sl: X.iloc[sl]) if hasattr(X, "iloc") else (lambda sl: X[sl])
        n = len(X)
        first = min(n, 256)
        pred = self.predictive(take(slice(0, first)))
        pieces = [summarize(pred)]
        step = max(1, PREDICT_BLOCK_ELEMENTS // max(1, pred.loc.shape[0]))
        for start in range(first, n, step):
            pieces.append(summarize(self.predictive(take(slice(start, start + step)))))
        return tuple(np.concatenate(parts) for parts in zip(*pieces, strict=True))

    def predict(self, X, return_std: bool = False):
        """Posterior predictive mean (and standard deviation with ``return_std=True``).

        Computed in blocks of rows (:meth:`_by_row_blocks`), so memory does not grow with
        draws x rows.
        """
        mean, std = self._by_row_blocks(X, lambda pred: (pred.mean(), pred.std()))
        return (mean, std) if return_std else mean

    def predict_interval(self, X, prob: float = 0.9):
        """Central posterior predictive interval ``(lower, upper)`` with probability ``prob``.

        Computed in blocks of rows, like :meth:`predict`.
        """
        return self._by_row_blocks(X, lambda pred: pred.interval(prob))

    def sample_posterior_predictive(
        self, X, n_draws: int = 200, random_state=None, row_offset: int = 0
    ):
        """Posterior predictive draws ``(n_draws, n)`` at ``X`` (marginal per point).

        The draws of row ``i`` depend only on the seed and on ``row_offset + i`` (counter-based,
        :func:`bayeskern.predictive.row_uniforms`), not on the other rows of ``X``.
        """
        seed = self._seed() if random_state is None else random_state
        return self.predictive(X).sample(n_draws, seed, row_offset=row_offset)


def cached_jit(est, name: str, make, *keys):
    """``shared_jit(make())`` cached on ``est`` under ``name`` while ``keys`` are the same objects.

    The keys are fitted objects (``idata_``, ``kernel_``...) that a new fit replaces, so a
    refit traces again (and compiles only a program no earlier fit compiled,
    :func:`bayeskern.programs.shared_jit`) and repeated predictions do not; the cache is
    dropped when pickling.
    """
    cache = est.__dict__.setdefault("_cache", {})
    hit = cache.get(name)
    if (
        hit is None
        or len(hit[0]) != len(keys)
        or any(a is not b for a, b in zip(hit[0], keys, strict=True))
    ):
        hit = cache[name] = (keys, shared_jit(make()))
    return hit[1]


def mixture_joint(joint, draws: dict, *args):
    """Mixture mean and covariance over posterior draws of per-draw joint Gaussians.

    With ``joint(draw, *args) = (mu_s, Sigma_s)``: :math:`\\bar\\mu = \\frac1S\\sum_s
    \\mu_s` and :math:`\\frac1S\\sum_s(\\Sigma_s + \\mu_s\\mu_s^\\top) -
    \\bar\\mu\\bar\\mu^\\top` (law of total covariance). One draw at a time
    (``lax.scan``), so memory holds one :math:`n \\times n` sum.
    """
    first = jax.tree_util.tree_map(lambda a: a[0], draws)
    n = jax.eval_shape(joint, first, *args)[0].shape[0]

    def add(carry, draw):
        mean, cov = joint(draw, *args)
        return (carry[0] + mean, carry[1] + cov + jnp.outer(mean, mean)), None

    (m, c), _ = jax.lax.scan(add, (jnp.zeros(n), jnp.zeros((n, n))), draws)
    S = jax.tree_util.tree_leaves(draws)[0].shape[0]
    return m / S, c / S - jnp.outer(m / S, m / S)


class JointPredictiveMixin:
    """``predict(X, return_cov=True)`` and ``sample_y`` from per-draw Gaussian latents.

    For regressors whose predictive given posterior draw :math:`s` is Gaussian, with latent
    mean :math:`\\mu_s` and covariance :math:`\\Sigma_s` over the rows of ``X``
    (Rasmussen & Williams 2006, eqs. 2.23-2.24). Subclasses give ``_joint_fn()``, a
    jittable ``joint(draw, *args) -> (mu_s, Sigma_s)`` in standardized units, and
    ``_joint_args(Xs) -> (draws, args)``; results are returned in the units of ``y``.
    """

    def predict(self, X, return_std: bool = False, return_cov: bool = False):
        """Posterior predictive mean, with its standard deviation or the latent covariance.

        Parameters
        ----------
        X : array-like (n, n_features)
        return_std : bool
            Also return the standard deviation of a new **observation** (noise included):
            :math:`\\mathrm{sd}_i^2 = \\frac1S\\sum_s (v_{s,i} + \\sigma_s^2 +
            \\mu_{s,i}^2) - \\bar\\mu_i^2`.
        return_cov : bool
            Also return the ``(n, n)`` posterior-predictive covariance of the **latent**
            function :math:`f` (noise excluded, as scikit-learn's
            ``GaussianProcessRegressor`` without a ``WhiteKernel``), the mixture over draws
            :math:`\\frac1S\\sum_s \\Sigma_s + \\mathrm{Cov}_s[\\mu_s]` (law of total
            covariance, :func:`mixture_joint`). So ``diag(cov)`` plus the mean noise
            variance equals ``std**2``. At most one of ``return_std`` and ``return_cov``.

        Returns
        -------
        mean : (n,)
        std : (n,), only with ``return_std``
        cov : (n, n), only with ``return_cov``
        """
        if return_std and return_cov:
            raise ValueError(
                "return_std and return_cov cannot both be True (at most one, as "
                "in scikit-learn's GaussianProcessRegressor)"
            )
        if not return_cov:
            return super().predict(X, return_std=return_std)
        X = self._validate_predict(X)
        mean, cov = self._latent_moments(self._standardize_x(X))
        s = float(np.squeeze(self.y_std_.scale))
        return mean * s + self.y_std_.mean, cov * s * s

    def _latent_moments(self, Xs):
        draws, args = self._joint_args(Xs)
        fn = cached_jit(
            self, "mixture_joint", lambda: partial(mixture_joint, self._joint_fn()), self.idata_
        )
        return tuple(np.asarray(a) for a in fn(draws, *args))

    def sample_y(self, X, n_samples: int = 1, random_state=None):
        """Joint draws of the latent function at the rows of ``X``, ``(n, n_samples)``.

        As scikit-learn's ``GaussianProcessRegressor.sample_y``, integrating over the
        hyper-parameter posterior: for each sample a posterior draw :math:`s` uniformly,
        then :math:`f \\sim N(\\mu_s, \\Sigma_s)` jointly over the rows, with the full
        conditional covariance of that draw (Rasmussen & Williams 2006, eqs. 2.23-2.24).
        Noise-free sample paths in the units of ``y``; their covariance over many samples
        is ``predict(X, return_cov=True)[1]``.

        Parameters
        ----------
        X : array-like (n, n_features)
        n_samples : int
            Sample paths.
        random_state : int, Generator or None
            Seed (``None``: the estimator's ``random_state``); the same seed gives the
            same paths.

        Returns
        -------
        ndarray (n, n_samples)
        """
        if (
            isinstance(n_samples, bool)
            or not isinstance(n_samples, numbers.Integral)
            or n_samples < 1
        ):
            raise ValueError(f"n_samples must be a positive int, got {n_samples!r}")
        X = self._validate_predict(X)
        rng = np.random.default_rng(
            draw_seed(self._seed() if random_state is None else random_state)
        )
        F = self._latent_paths(self._standardize_x(X), n_samples, rng)
        return F * float(np.squeeze(self.y_std_.scale)) + self.y_std_.mean

    def _latent_paths(self, Xs, n_samples: int, rng) -> np.ndarray:
        """``(n, n_samples)`` paths: per sample a draw, then ``multivariate_normal``."""
        draws, args = self._joint_args(Xs)
        fn = cached_jit(self, "joint", self._joint_fn, self.idata_)
        pick = rng.integers(len(next(iter(draws.values()))), size=n_samples)
        out = np.empty((len(Xs), n_samples))
        for s in np.unique(pick):
            cols = np.flatnonzero(pick == s)
            mean, cov = (np.asarray(a) for a in fn({k: v[s] for k, v in draws.items()}, *args))
            # eigh: the conditional covariance may be singular to rounding (scikit-learn's
            # sample_y draws the same way)
            out[:, cols] = rng.multivariate_normal(
                mean, cov, size=len(cols), method="eigh", check_valid="ignore"
            ).T
        return out
