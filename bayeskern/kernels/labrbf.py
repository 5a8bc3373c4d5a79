r"""LAB-RBF: locally adaptive bandwidth RBF kernels and asymmetric kernel ridge regression.

He, He, Shi, Huang & Suykens, "Enhancing kernel flexibility via learning asymmetric
locally-adaptive kernels" (2023, arXiv:2310.05236).

Every support point :math:`x_i` carries its own bandwidth vector :math:`\theta_i`
(He et al. 2023, eq. 1; the authors' public code uses the non-squared form, ``p = 1``):

.. math:: \mathcal K(t, x_i) = \exp\!\left(-\|\theta_i \odot (t - x_i)\|_2^{\,p}\right),
          \qquad p \in \{1, 2\},

so :math:`\mathcal K(x_i, x_j) \ne \mathcal K(x_j, x_i)` in general. The asymmetric KRR of
Theorem 1 (eq. 6) gives two regression functions,

.. math:: f_1(t) = K(t, X)\,(K(X, X) + \lambda I)^{-1} Y, \qquad
          f_2(t) = K(X, t)^\top (K(X, X)^\top + \lambda I)^{-1} Y,

with :math:`[K(X, X)]_{ij} = \mathcal K(x_i, x_j)` (bandwidth of the *column* point). Only
:math:`f_1` needs no bandwidth at the test point (He et al. 2023, eq. 8); bayeskern also
evaluates :math:`f_2` by giving a test point the bandwidth of its nearest support point, the
piecewise-constant bandwidth function that footnote 1 of He et al. (2023) alludes to.

The bandwidths are trained to minimise the squared error of :math:`f_1` on the training
points outside the support set (eq. 9) by minibatch Adam (optax), and the support set grows
by the :math:`k` worst-fit training points per round (Algorithm 1). See :class:`LABRBF` for
the defaults and the measurements behind them. This module holds the kernel (its fitted state
and Gram matrices); the training loop is :mod:`bayeskern.learning.labrbf`.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
import numpyro.distributions as dist

from .base import Hyper, Kernel
from .labrbf_gram import (  # noqa: F401  (re-exported: public functions of the kernel)
    _gram_fast,
    _labrbf_gram,
    _labrbf_gram_np,
    krr_f1,
    krr_f2,
    nearest_support,
)
from .stationary import safe_norm

__all__ = [
    "LABRBF",
    "LABRBFFeatures",
    "krr_f1",
    "krr_f2",
    "nearest_support",
]


# --------------------------------------------------------------------------- kernel
class LABRBF(Kernel):
    r"""Locally adaptive bandwidth RBF kernel, trained by Algorithm 1 of He et al. (2023).

    .. math:: \mathcal K(t, x_i) = \exp\!\left(-\|\theta_i \odot (t - x_i)\|_2^{\,p}\right)

    The fit (:func:`bayeskern.learning.labrbf.fit_labrbf`) scales every input column to
    :math:`[-1, 1]` and the labels to :math:`[-1, 1]` (as the paper does, section 4.1),
    chooses the initial support set, and trains one bandwidth vector per support point by
    minimising the squared error of :math:`f_1` (eq. 9) on minibatches of the remaining
    training points with Adam; after each round of ``n_iter_round`` steps it adds the
    ``n_add`` training points with the largest squared residual to the support set
    (Algorithm 1), until ``max_support``; a final phase of ``n_iter_final`` Adam steps (and
    optionally ``sgd_iter`` SGD steps, the paper's Appendix D) follows. The kernel is
    asymmetric (``symmetric = False``): use it with asymmetric KRR
    (:class:`bayeskern.estimators.labrbf.LABRBFRegressor`), or wrap it in
    :class:`LABRBFFeatures` for a GP.

    Defaults and why (the measurements behind them, on airfoil and the paper's synthetic
    functions: the LAB-RBF results page of the documentation, ``benchmarks/results/labrbf.md``):

    * ``p = 1``: the authors' code runs the non-squared form; the squared form scored lower
      on held-out airfoil data and overfits from the authors' fixed initial bandwidth.
    * ``max_support = "auto"``: a third of the training rows, at most 300 (Appendix E,
      n = 200: 66). The paper finds 30-70 % of the rows best on its synthetic functions
      (Fig. 4) and uses 200 on airfoil, where 200, 300 and 400 support points score alike;
      300 bounds the cost of the m x m solve of every step.
    * ``min_bandwidth = "auto"``: every bandwidth is kept at or above
      :func:`~bayeskern.learning.labrbf.bandwidth_floor`, :math:`0.1^{1/p}` over the median
      distance between training rows, where a kernel column is still 10 % below 1 at the
      median distance. Without the floor the bandwidths drifted to 1e-20 on small data and
      :math:`K + \lambda I` became nearly singular (constant columns); the ``theta0`` grid
      starts at the floor too.
    * ``theta0 = "auto"``: a scalar bandwidth chosen on a log grid
      :math:`\sqrt{30/d}\cdot 2^{-8..3}` (around the authors' initial value) by the error of
      :math:`f_1` on the training points outside the initial support; it scored at least as
      well as the authors' :math:`\sqrt{30/d}` on held-out airfoil data and adapts to
      ``p = 2``. It usually picks wide kernels, which Adam then narrows locally.
    * ``alpha`` (:math:`\lambda`) ``= 1e-3``, Adam ``learning_rate = 1e-2``, ``batch_size =
      128``, ``n_iter_round = 500``, ``n_iter_final = 5000``, gradient-norm clipping at 10 and
      new support points starting from the mean bandwidth, as in the authors' code; the support
      grows by :math:`\max(10, \lfloor m/10\rfloor)` points per round (their rule) unless
      ``n_add``, from ``max_support // 2`` initial points (sorted by label).
    * ``dtype = "float32"`` for the training steps (faster on CPU); the dual coefficients are
      recomputed in float64 after training. Training pads the support set to
      ``max_support`` and the data to fixed shapes so that one XLA program serves all rounds.
    * Early stopping on a validation split barely changed held-out R² on airfoil, so it is
      off by default. With validation rows (``validation_index``, or ``early_stopping``) the
      fit keeps the untrained model (global bandwidth, initial support) when the trained one
      has the larger validation error (``trained_``, ``validation_mse_``): on noisy data
      (diabetes) training made test R² negative.

    Parameters
    ----------
    p : {1, 2}
        Exponent of the norm (1: Laplacian form of the authors' code; 2: the paper's eq. 1).
    max_support : int or "auto"
        Maximum number of support points (``"auto"``: a third of the training rows, at most
        300); clipped to half the training rows for tiny data.
    n_init_support : int or None
        Initial support size; default half the (resolved) ``max_support``.
    support_init : {"sorted_y", "uniform"}
        Initial support: evenly spaced ranks of ``y`` or uniform random.
    n_add : int or None
        Points added per round (``None``: :math:`\max(10, \lfloor m/10\rfloor)`).
    alpha : float or "auto"
        Ridge :math:`\lambda` of the asymmetric KRR; ``"auto"`` picks it from
        {1e-3, 1e-2, 0.1, 1} jointly with ``theta0`` (useful for noisy labels: with
        :math:`\lambda = 10^{-3}` f1 nearly interpolates the noisy support labels).
    theta0 : "auto" or float
        Initial bandwidth (all entries), in units of the :math:`[-1,1]`-scaled inputs.
    learning_rate, batch_size, n_iter_round, n_iter_final : Adam settings.
    sgd_iter, sgd_learning_rate : optional SGD phase after Adam.
    tol : float
        Error tolerance :math:`\epsilon` of Algorithm 1: stop growing the support when every
        squared residual (scaled labels) is below it.
    early_stopping, validation_fraction, n_iter_no_change : hold out a fraction of the
        training rows; in the final phase keep the bandwidths with the best validation error
        and stop after ``n_iter_no_change`` evaluations without improvement.
    eval_every : int
        Steps per jitted chunk (validation and non-finite checks happen between chunks).
    dtype : {"float32", "float64"}
        Precision of the training steps.
    min_bandwidth : "auto" or float
        Floor of every bandwidth during training, in the :math:`[-1, 1]` units
        (``"auto"``: :func:`~bayeskern.learning.labrbf.bandwidth_floor`; ``0`` for none, the
        paper's algorithm).
    random_state : int or None
        Seed of the minibatch order and of the validation split.
    progress_bar : bool
        Show a tqdm bar over the rounds.
    """

    symmetric = False

    def __init__(
        self,
        p: int = 1,
        max_support="auto",
        n_init_support: int | None = None,
        support_init: str = "sorted_y",
        n_add: int | None = None,
        alpha: float = 1e-3,
        theta0="auto",
        learning_rate: float = 1e-2,
        batch_size: int = 128,
        n_iter_round: int = 500,
        n_iter_final: int = 5000,
        sgd_iter: int = 0,
        sgd_learning_rate: float = 1e-3,
        tol: float = 0.0,
        early_stopping: bool = False,
        validation_fraction: float = 0.1,
        n_iter_no_change: int = 10,
        eval_every: int = 100,
        dtype: str = "float32",
        min_bandwidth="auto",
        random_state: int | None = 0,
        progress_bar: bool = False,
    ):
        self.p = p
        self.max_support = max_support
        self.n_init_support = n_init_support
        self.support_init = support_init
        self.n_add = n_add
        self.alpha = alpha
        self.theta0 = theta0
        self.learning_rate = learning_rate
        self.batch_size = batch_size
        self.n_iter_round = n_iter_round
        self.n_iter_final = n_iter_final
        self.sgd_iter = sgd_iter
        self.sgd_learning_rate = sgd_learning_rate
        self.tol = tol
        self.early_stopping = early_stopping
        self.validation_fraction = validation_fraction
        self.n_iter_no_change = n_iter_no_change
        self.eval_every = eval_every
        self.dtype = dtype
        self.min_bandwidth = min_bandwidth
        self.random_state = random_state
        self.progress_bar = progress_bar

    # ----------------------------------------------------------------- validation
    def _check_params(self, n: int):
        def pos_int(name, v, minimum=1):
            if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < minimum:
                raise ValueError(f"{name} must be an integer >= {minimum}, got {v!r}")

        def pos_float(name, v, allow_zero=False):
            ok = isinstance(v, (int, float, np.floating)) and math.isfinite(v)
            if not ok or v < 0 or (v == 0 and not allow_zero):
                kind = ">= 0" if allow_zero else "> 0"
                raise ValueError(f"{name} must be a finite number {kind}, got {v!r}")

        if self.p not in (1, 2):
            raise ValueError(f"p must be 1 or 2, got {self.p!r}")
        if self.max_support != "auto":
            pos_int("max_support", self.max_support)
        if not (isinstance(self.min_bandwidth, str) and self.min_bandwidth == "auto"):
            pos_float("min_bandwidth", self.min_bandwidth, allow_zero=True)
        if self.n_init_support is not None:
            pos_int("n_init_support", self.n_init_support)
            if self.max_support != "auto" and self.n_init_support > self.max_support:
                raise ValueError(
                    f"max_support={self.max_support} is below n_init_support="
                    f"{self.n_init_support}: the support set only grows"
                )
        if self.n_add is not None:
            pos_int("n_add", self.n_add)
        if self.support_init not in ("sorted_y", "uniform"):
            raise ValueError(
                f"support_init must be 'sorted_y' or 'uniform', got {self.support_init!r}"
            )
        if not (isinstance(self.alpha, str) and self.alpha == "auto"):
            pos_float("alpha", self.alpha)
        if not (isinstance(self.theta0, str) and self.theta0 == "auto"):
            pos_float("theta0", self.theta0)
        pos_float("learning_rate", self.learning_rate)
        pos_float("sgd_learning_rate", self.sgd_learning_rate)
        pos_float("tol", self.tol, allow_zero=True)
        pos_int("batch_size", self.batch_size)
        pos_int("n_iter_round", self.n_iter_round, 0)
        pos_int("n_iter_final", self.n_iter_final, 0)
        pos_int("sgd_iter", self.sgd_iter, 0)
        pos_int("n_iter_no_change", self.n_iter_no_change)
        pos_int("eval_every", self.eval_every)
        if not 0.0 < self.validation_fraction < 1.0:
            raise ValueError(
                f"validation_fraction must be in (0, 1), got {self.validation_fraction!r}"
            )
        if self.dtype not in ("float32", "float64"):
            raise ValueError(f"dtype must be 'float32' or 'float64', got {self.dtype!r}")
        if n < 4:
            raise ValueError(f"LAB-RBF needs at least 4 training rows, got {n}")

    @property
    def is_fitted(self) -> bool:
        """Return ``True`` once trained (:func:`bayeskern.learning.labrbf.fit_labrbf`)."""
        return hasattr(self, "bandwidths_")

    def _require_fitted(self):
        if not self.is_fitted:
            raise RuntimeError(
                "this LABRBF kernel is not fitted; call "
                "bayeskern.learning.fit_labrbf(kernel, X, y) first"
            )

    # ----------------------------------------------------------------- evaluation
    def scale(self, X) -> jax.Array:
        """Return the inputs in the kernel's :math:`[-1, 1]` units (ranges of the fitted data)."""
        self._require_fitted()
        return (jnp.asarray(X) - self.center_) / self.half_range_

    def _support_gram(self, X, bandwidth_scale=1.0) -> jax.Array:
        r""":math:`K(X, X_{sv})`, the matrix of eq. (8): ``(n, m)``, bandwidths of the support."""
        self._require_fitted()
        Th = jnp.asarray(self.bandwidths_) * bandwidth_scale
        return _labrbf_gram(self.scale(X), jnp.asarray(self.support_), Th, self.p)

    def bandwidth_at(self, X) -> jax.Array:
        """Bandwidth function :math:`\\theta(x)`: that of the nearest support point ``(n, d)``."""
        self._require_fitted()
        return jnp.asarray(self.bandwidths_)[nearest_support(self.scale(X), self.support_)]

    def evaluate(self, theta, x1, x2):
        """:math:`\\mathcal K(x_1, x_2)` with the bandwidth :math:`\\theta(x_2)`."""
        return self.gram(theta, x1[None, :], x2[None, :])[0, 0]

    def gram(self, theta, X1, X2):
        r"""``K[a, b] = exp(-||theta(x2_b) * (x1_a - x2_b)||^p)`` (asymmetric)."""
        Z1, Z2 = self.scale(X1), self.scale(X2)
        Th = self.bandwidth_at(X2)
        D = (Z1[:, None, :] - Z2[None, :, :]) * Th[None, :, :]
        r = jnp.sum(D * D, -1) if self.p == 2 else safe_norm(D)
        return jnp.exp(-r)

    def diag(self, theta, X):
        """Return ones: the kernel is 1 on the diagonal."""
        return jnp.ones(jnp.asarray(X).shape[0])

    def _support_gram_np(self, X) -> np.ndarray:
        """NumPy :meth:`_support_gram` (prediction path)."""
        self._require_fitted()
        Z = (np.asarray(X, dtype=float) - self.center_) / self.half_range_
        return _labrbf_gram_np(Z, self.support_, self.bandwidths_, self.p)

    def predict_f1(self, X) -> np.ndarray:
        """:math:`f_1` of eq. (6)/(8) at the rows of ``X``, in the units of the fitted ``y``."""
        return self.intercept_ + self._support_gram_np(X) @ self.dual_coef_

    def loo_residuals(self) -> np.ndarray:
        r"""Leave-one-out residuals :math:`y_i - f_1^{(-i)}(x_i)` of the support points.

        With :math:`A = K(X_{sv}, X_{sv}) + \lambda I` and :math:`c = A^{-1}(Y - \beta)`,
        :math:`y_i - f_1^{(-i)}(x_i) = c_i / (A^{-1})_{ii}`: the identity of symmetric KRR
        holds for the asymmetric system too, because :math:`f_1` without point :math:`i`
        solves :math:`A c' = Y'` with :math:`y'_i = f_1^{(-i)}(x_i)` and :math:`c'_i = 0`
        (the intercept :math:`\beta` is held fixed). Units of the fitted ``y``.
        """
        self._require_fitted()
        Zsv = self.support_
        A = _labrbf_gram_np(Zsv, Zsv, self.bandwidths_, self.p) + self.alpha_ * np.eye(len(Zsv))
        return self.dual_coef_ / np.diag(np.linalg.inv(A))

    def predict_f2(self, X) -> np.ndarray:
        r"""Return :math:`f_2` of eq. (6) at the rows of ``X``.

        :math:`f_2` is :math:`\beta + K(X_{sv}, t)^\top(K(X_{sv},X_{sv})^\top
        + \lambda I)^{-1}(Y - \beta)`, with the test point's bandwidth :math:`\theta(t)` taken
        from its nearest support point (exact for support points).
        """
        self._require_fitted()
        Zsv, Th = self.support_, self.bandwidths_
        Kxx = _labrbf_gram_np(Zsv, Zsv, Th, self.p)
        Z = (np.asarray(X, dtype=float) - self.center_) / self.half_range_
        d2 = (Z * Z).sum(1)[:, None] - 2 * Z @ Zsv.T + (Zsv * Zsv).sum(1)[None, :]
        Tt = Th[np.argmin(d2, axis=1)]
        D = (Zsv[:, None, :] - Z[None, :, :]) * Tt[None, :, :]
        sq = np.einsum("mnd,mnd->mn", D, D)
        Kxt = np.exp(-(sq if self.p == 2 else np.sqrt(sq)))
        # Y_sv recovered from eq. (8): Y - beta = (K + lambda I) coef
        y_c = Kxx @ self.dual_coef_ + self.alpha_ * self.dual_coef_
        v = np.linalg.solve(Kxx.T + self.alpha_ * np.eye(len(Zsv)), y_c)
        return self.intercept_ + Kxt.T @ v


class LABRBFFeatures(Kernel):
    r"""Positive semi-definite kernel on the learned LAB-RBF features (for GP models).

    With :math:`\phi(t) = [\mathcal K(t, x_1), \dots, \mathcal K(t, x_m)]` the asymmetric
    features of a trained :class:`LABRBF` (He et al. 2023, eq. 1, support :math:`x_i`, bandwidths
    :math:`s\,\theta_i`),

    .. math:: k(t, t') = \phi(t)^\top\phi(t') / c,

    where :math:`c` is the mean of :math:`\|\phi(x_n)\|^2` over the fitted data (so the mean
    prior variance is one amplitude²). A GP with this kernel is Bayesian ridge regression on
    the learned features, the Bayesian last layer of LAB-RBF: ``bk.GPRegressor(kernel=
    LABRBFFeatures())`` trains the bandwidths in its ``fit`` (Algorithm 1) and samples amplitude,
    noise and the global bandwidth multiplier :math:`s` with NUTS.

    Parameters
    ----------
    labrbf : LABRBF or None
        The (unfitted) kernel to train; default ``LABRBF()``.
    bandwidth_scale : float or None
        :math:`s`; ``None`` samples it, prior LogNormal(0, 0.3) (within about ×2 of the
        trained bandwidths).
    """

    def __init__(self, labrbf: LABRBF | None = None, bandwidth_scale=None):
        self.labrbf = labrbf
        self.bandwidth_scale = bandwidth_scale

    def hyperparameters(self):
        """Return the hyper-parameter ``bandwidth_scale``."""
        return {
            "bandwidth_scale": Hyper(self.bandwidth_scale, lambda: dist.LogNormal(0.0, 0.3), 1.0)
        }

    @property
    def is_fitted(self) -> bool:
        """Return ``True`` once trained (:func:`bayeskern.learning.fit_labrbf_features`)."""
        return hasattr(self, "bandwidths_")

    def _phi(self, theta, X):
        s = self._p(theta, "bandwidth_scale") if self.name_ is not None and theta else 1.0
        Z = (jnp.asarray(X) - self.center_) / self.half_range_
        return _labrbf_gram(
            Z, jnp.asarray(self.support_), jnp.asarray(self.bandwidths_) * s, int(self.p_)
        )

    def gram(self, theta, X1, X2):
        """Return the Gram matrix of the normalized features."""
        return self._phi(theta, X1) @ self._phi(theta, X2).T / self.feature_norm_

    def diag(self, theta, X):
        """Return the squared feature norms, normalized."""
        P = self._phi(theta, X)
        return jnp.sum(P * P, axis=1) / self.feature_norm_

    def evaluate(self, theta, x1, x2):
        """Return the kernel value for one pair of points."""
        return self.gram(theta, x1[None, :], x2[None, :])[0, 0]
