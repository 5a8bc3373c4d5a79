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

import numbers

import jax
import jax.numpy as jnp
import numpy as np
from sklearn.utils import check_random_state
from sklearn.utils.validation import check_is_fitted
from sklearn.utils.validation import validate_data as _sk_validate_data

from bayeskern import diagnostics
from bayeskern.batching import batched_map, pad_rows
from bayeskern.inference import check_sampler_counts

__all__ = ["BayesianEstimatorMixin", "PredictiveRegressorMixin", "Standardizer", "flat_draws",
           "map_draws", "validate_binary", "validate_classes", "proba_interval",
           "check_interval",
           "batched_map"]


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

        bad = [str(c) for c in columns
               if pd.to_numeric(A[c], errors="coerce").isna().sum() > A[c].isna().sum()]
        return (f"{name} has non-numeric column(s) {bad[:10]}: encode them as numbers first "
                "(for example sklearn.preprocessing.OneHotEncoder) or drop them")
    flat = np.asarray(A, dtype=object).ravel()
    for v in flat:
        try:
            float(v)
        except (TypeError, ValueError):
            return (f"{name} contains a non-numeric value ({v!r}); encode text as numbers "
                    "first (for example sklearn.preprocessing.OneHotEncoder)")
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


def map_draws(fn, draws: dict, *args, batch_size: int = 1):
    """Apply ``fn(draw, *args)`` to every posterior draw.

    With :func:`~bayeskern.batching.batched_map`, the draws split over the CPU devices
    (``pmap``, one share per device, see :mod:`bayeskern.devices`) when there are several.

    ``batch_size`` stays 1 for bodies with linear algebra: batches of draws put batched
    LAPACK calls (Cholesky, triangular solves) inside ``lax.map``'s loop, and that blocks
    forever in XLA:CPU (jax 0.10.2), with or without a remainder batch: measured on the GP's
    leave-one-out body, 2000 draws in batches of 16 hung, one at a time never did
    (``tests/test_batched_map.py``).
    """
    jdraws = {k: jnp.asarray(v) for k, v in draws.items()}
    n = jax.tree_util.tree_leaves(jdraws)[0].shape[0]
    n_dev = min(jax.local_device_count(), n)

    def per_device(d, *a):
        return batched_map(lambda x: fn(x, *a), d, batch_size)

    if n_dev < 2:
        return jax.jit(per_device)(jdraws, *args)
    padded, _ = pad_rows(jdraws, n_dev)
    m = jax.tree_util.tree_leaves(padded)[0].shape[0]
    shards = jax.tree_util.tree_map(
        lambda a: a.reshape((n_dev, m // n_dev) + a.shape[1:]), padded)
    out = jax.pmap(per_device, in_axes=(0,) + (None,) * len(args))(shards, *args)
    return jax.tree_util.tree_map(lambda a: a.reshape((m,) + a.shape[2:])[:n], out)


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
        hint = (f"use {multiclass_estimator}, which handles several classes" if
                multiclass_estimator else
                "use a one-vs-rest wrapper such as sklearn.multiclass.OneVsRestClassifier")
        raise ValueError(
            f"y has {len(classes)} classes. Only binary classification is supported ({hint})"
        )
    return classes, y01.astype(np.int32)


def check_interval(interval) -> float:
    """Return ``interval`` as a float; a one-line error unless it is a number in (0, 1)."""
    if isinstance(interval, bool) or not isinstance(interval, numbers.Real) \
            or not 0.0 < float(interval) < 1.0:
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
    #: whether ``num_warmup`` and ``num_samples`` may be ``"auto"``
    _AUTO_COUNTS = False

    def _validate_fit(self, X, y, *, classifier: bool):
        check_sampler_counts(self.num_warmup, self.num_samples, self.num_chains,
                             auto=self._AUTO_COUNTS)
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

    # ------------------------------------------------------------------ saving (no pickle)
    def _save_state(self) -> tuple[dict, dict]:
        """Fitted state as JSON-able ``meta`` and a dict of arrays (see bayeskern.runs)."""
        check_is_fitted(self)
        meta = {"n_features_in": int(self.n_features_in_),
                "kernel": self.kernel_.get_config() if hasattr(self, "kernel_") else None}
        arrays = {"x_mean": self.x_std_.mean, "x_scale": self.x_std_.scale}
        if hasattr(self, "y_std_"):
            arrays.update(y_mean=self.y_std_.mean, y_scale=self.y_std_.scale)
        if hasattr(self, "classes_"):
            arrays["classes"] = np.asarray(self.classes_)
        if hasattr(self, "feature_names_in_"):
            meta["feature_names_in"] = [str(c) for c in self.feature_names_in_]
        for leaf in getattr(self, "kernel_", None).leaves() if hasattr(self, "kernel_") else []:
            for k, v in leaf.get_state().items():
                arrays[f"kernel/{leaf.name_}/{k}"] = v
        # fitted nodes that are not leaves (Conformal: alpha, expansion points), by tree path
        if hasattr(self, "kernel_"):
            from bayeskern.kernels.base import kernel_nodes

            leaves = {id(leaf) for leaf in self.kernel_.leaves()}
            for path, node in kernel_nodes(self.kernel_):
                if id(node) not in leaves:
                    for k, v in node.get_state().items():
                        arrays[f"kernel@{path}/{k}"] = v
        return meta, arrays

    def _load_state(self, meta: dict, arrays: dict) -> None:
        """Inverse of :meth:`_save_state`."""
        from bayeskern.kernels.base import kernel_from_config, name_leaves

        self.n_features_in_ = meta["n_features_in"]
        if "feature_names_in" in meta:
            self.feature_names_in_ = np.asarray(meta["feature_names_in"], dtype=object)
        self.x_std_ = Standardizer(arrays["x_mean"], arrays["x_scale"])
        if "y_mean" in arrays:
            self.y_std_ = Standardizer(arrays["y_mean"], arrays["y_scale"])
        if "classes" in arrays:
            self.classes_ = arrays["classes"]
        if meta.get("kernel") is not None:
            self.kernel_ = name_leaves(kernel_from_config(meta["kernel"]))
            for leaf in self.kernel_.leaves():
                prefix = f"kernel/{leaf.name_}/"
                for k, v in arrays.items():
                    if k.startswith(prefix):
                        setattr(leaf, k[len(prefix):], v)
            from bayeskern.kernels.base import kernel_nodes

            for path, node in kernel_nodes(self.kernel_):
                prefix = f"kernel@{path}/"
                for k, v in arrays.items():
                    if k.startswith(prefix):
                        setattr(node, k[len(prefix):], v)
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

    def sample_posterior_predictive(self, X, n_draws: int = 200, random_state=None,
                                    row_offset: int = 0):
        """Posterior predictive draws ``(n_draws, n)`` at ``X`` (marginal per point).

        The draws of row ``i`` depend only on the seed and on ``row_offset + i`` (counter-based,
        :func:`bayeskern.predictive.row_uniforms`), not on the other rows of ``X``.
        """
        seed = self._seed() if random_state is None else random_state
        return self.predictive(X).sample(n_draws, seed, row_offset=row_offset)
