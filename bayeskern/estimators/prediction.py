"""Prediction mixins of the Bayesian regressors and the caches behind them.

Predictions in row blocks, the last predictive remembered per ``X``, jitted programs cached
per fit, and the joint Gaussian predictive (``return_cov``, ``sample_y``).
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import numbers
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np

from bayeskern.predictive import draw_seed
from bayeskern.programs import shared_jit

__all__ = [
    "PREDICT_BLOCK_ELEMENTS",
    "REMEMBER_ELEMENTS",
    "remember_last",
    "PredictiveRegressorMixin",
    "cached_jit",
    "mixture_joint",
    "JointPredictiveMixin",
]


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
