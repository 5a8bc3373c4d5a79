r"""Xiong's data-dependent (conformal) kernel, learned by maximizing a Fisher ratio.

The kernel (Gu 2021, after Xiong, Swamy & Ahmad 2005 and
Xiong, Zhang & Chen 2007; section 3.1, eqs. 52-63) is a conformal transform of a base
kernel :math:`K_0`,

.. math:: K(x, z) = q(x)\, K_0(x, z)\, q(z), \qquad
          q(x) = \alpha_0 + \sum_{j=1}^{m} \alpha_j K_1(x, e_j),

where :math:`e_1..e_m` are the expansion points (all training points in Gu 2021, or a random
subset of them for large :math:`N`). On the training data :math:`K = Q K_0 Q` (eq. 54) with
:math:`Q = \mathrm{diag}(q)`, :math:`q = K_1\alpha` and :math:`K_1 = [1, K_1(x_i, e_j)]` of size
:math:`N \times (m+1)` (eq. 55).

:math:`\alpha` maximizes the Fisher scalar of the training data in the feature space of
:math:`K` (eqs. 56-60),

.. math:: J(\alpha) = \frac{\mathrm{tr}\,S_b}{\mathrm{tr}\,S_w}
          = \frac{\alpha^\top M_0 \alpha}{\alpha^\top N_0 \alpha},\quad
          M_0 = K_1^\top B_0 K_1,\ N_0 = K_1^\top W_0 K_1,

with :math:`B_0 = \mathrm{blockdiag}(K^0_{cc}/N_c) - K_0/N` and
:math:`W_0 = \mathrm{diag}(K_0) - \mathrm{blockdiag}(K^0_{cc}/N_c)` (eqs. 58-59, written here
with class masks so that the data need not be sorted by class; the same blocks give the
c-class Fisher scalar :math:`\mathrm{tr}\,S_b = \sum_c N_c\|m_c - m\|^2`,
:math:`\mathrm{tr}\,S_w = \sum_i \|\phi(x_i) - m_{c(i)}\|^2`). Two optimizers:

* ``"eigen"``: the top eigenvector of :math:`M_0\alpha = \lambda (N_0 + \mu I)\alpha`
  (eqs. 62-63) with :func:`scipy.linalg.eigh`;
* ``"gradient"``: Algorithm 1 of Gu (2021), :math:`\alpha \leftarrow \alpha + \eta(t)
  (M_0/J_2 - J_1 N_0/J_2^2)\alpha`, normalized, :math:`\eta(t) = \eta_0(1 - t/T)`, stopped
  when :math:`J` decreases. **Erratum**: the printed Algorithm 1 resets
  :math:`\alpha^0 = (1, 0, \dots, 0)` *inside* its loop, which would never move; here it is
  initialized once.

Both maximize the same objective :math:`J_\mu = \alpha^\top M_0\alpha / \alpha^\top(N_0 +
\mu I)\alpha`, so the eigen solution's :math:`J_\mu` is an upper bound of the gradient one's.
:math:`N_0` is singular whenever :math:`m + 1 > N - c` (always with all points as expansion
points, since :math:`K_1` has :math:`N + 1` columns), hence :math:`\mu > 0` by default.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from .base import Kernel
from .pytree import array_module, is_traced
from .stationary import RBF

__all__ = [
    "Conformal",
    "SquaredExponential",
    "check_class_labels",
]

_OPTIMIZERS = ("eigen", "gradient")


class SquaredExponential(RBF):
    r"""The :class:`~bayeskern.kernels.RBF` kernel with a matrix-form Gram.

    .. math:: k(x, z) = \exp\!\left(-\tfrac12 \|x - z\|^2 / \ell^2\right),\quad
              \|x - z\|^2 = \|x\|^2 + \|z\|^2 - 2x^\top z

    Same values and hyper-parameters as ``RBF`` (isotropic ``lengthscale`` only), but the
    Gram matrix costs one matrix product instead of an ``(n1, n2, d)`` tensor of differences,
    which matters for :math:`p \gg n` data (gene expression, the application of Gu 2021).
    """

    def __init__(self, lengthscale=None):
        super().__init__(lengthscale=lengthscale, ard=False)

    def gram(self, theta, X1, X2):
        """Return the RBF Gram matrix (in NumPy for concrete inputs: ``pytree.array_module``)."""
        ls = self._p(theta, "lengthscale")
        xp = array_module(X1, X2, ls)
        A = xp.asarray(X1) / xp.asarray(ls, dtype=X1.dtype)
        B = xp.asarray(X2) / xp.asarray(ls, dtype=X1.dtype)
        d2 = xp.sum(A * A, axis=1)[:, None] + xp.sum(B * B, axis=1)[None, :] - 2.0 * A @ B.T
        # rounding can make the squared distance of (near-)coincident points slightly negative
        return jnp.asarray(xp.exp(-0.5 * xp.maximum(d2, 0.0)))

    def diag(self, theta, X):
        """Return ones: the RBF is 1 on the diagonal."""
        return jnp.ones(X.shape[0], dtype=X.dtype)


def check_class_labels(y, n_samples: int) -> tuple[np.ndarray, np.ndarray]:
    """Validate class labels for the Fisher ratio; return ``(classes, codes)``.

    Raises a :class:`ValueError` naming ``y`` when it is missing, has the wrong length,
    a single class, or a class with fewer than two points (its within-class scatter, the
    denominator of eq. 56, would be identically zero).
    """
    if y is None:
        raise ValueError("y is required: the conformal kernel is learned from class labels")
    y = np.asarray(y)
    if y.ndim != 1 or len(y) != n_samples:
        raise ValueError(f"y must be a 1-d array of {n_samples} labels, got shape {y.shape}")
    classes, codes, counts = np.unique(y, return_inverse=True, return_counts=True)
    if len(classes) < 2:
        raise ValueError(
            f"y has a single class ({classes[0]!r}); the Fisher ratio needs two classes"
        )
    if counts.min() < 2:
        bad = classes[counts < 2]
        raise ValueError(
            f"y has fewer than 2 points in class(es) {bad.tolist()}; the within-class "
            "scatter of the Fisher ratio needs at least 2 points per class"
        )
    return classes, codes


class Conformal(Kernel):
    r"""Xiong's data-dependent kernel :math:`K(x,z) = q(x) K_0(x,z) q(z)` (Gu 2021, eqs. 52-63).

    :func:`bayeskern.learning.conformal.fit_conformal` learns :math:`\alpha` of the conformal
    factor :math:`q(x) = \alpha_0 + \sum_j \alpha_j K_1(x, e_j)` by maximizing the Fisher
    ratio of the training data (see the module docstring); afterwards the kernel is a pure JAX
    function. :math:`K_1` and :math:`\alpha` are fixed after the fit.

    Bayesian use: ``bk.GPClassifier(kernel=Conformal())`` fits :math:`\alpha` on the
    standardized training data with :math:`K_0` at its fixed value or default (length-scale 1
    standardized unit), then NUTS samples the base kernel's free hyper-parameters (e.g. the RBF
    length-scale) and the amplitude. **q does not change with the sampled length-scale**: it
    depends only on :math:`K_1` and :math:`\alpha`, which were learned once at the default.

    Parameters
    ----------
    base_kernel : Kernel, default ``RBF()``
        :math:`K_0`; its hyper-parameters are the kernel's (sampled when left free).
        In the fit it is evaluated at its fixed values / defaults.
    factor_kernel : Kernel, optional
        :math:`K_1`, evaluated at its fixed values / defaults (never sampled). Default: the
        Gaussian :math:`\exp(-\gamma_1\|x - z\|^2)` of eq. 53.
    gamma1 : float or "scale"
        :math:`\gamma_1` of the default factor kernel; ``"scale"`` is scikit-learn's
        :math:`1/(d\,\mathrm{Var}(X))` on the data of the fit.
    optimizer : {"eigen", "gradient"}
        Generalized eigenproblem (eq. 63) or the gradient ascent of Gu (2021, Algorithm 1).
    mu : float
        Relative regularization of eq. 63: the absolute :math:`\mu` is
        ``mu * trace(N0) / (m + 1)``, so it does not depend on the scale of the kernels.
        ``mu = 0`` requires a nonsingular :math:`N_0` (few expansion points); ``mu = inf``
        keeps :math:`q \equiv 1`, the base kernel (the fallback candidate of
        ``ConformalKernelClassifier(mu="auto")``).
    n_expansion : int, optional
        Number of expansion points :math:`e_j`, drawn at random from the training points
        (``random_state``); ``None`` uses all of them, as Gu (2021) does.
    eta0, n_iter, early_stop
        :math:`\eta_0`, :math:`T` and the early stop of the gradient ascent. Gu (2021) uses
        :math:`\eta_0 = 1`, but the length of a step is not scale-free: it grows with the
        number of expansion points (each column of :math:`K_1` adds to the gradient) and
        shrinks when the kernels are nearly constant. Measured on the 70 % training parts
        of WDBC, Wisconsin original and Pima (300-540 points, :math:`\gamma = 1/(3d)`):
        :math:`\eta_0 = 1` overshot and stopped after 2-4 steps; :math:`\eta_0 = 0.01`
        climbed for 8 (Wisconsin) to 1000 (WDBC, Pima) steps, hence the default. On the
        p >> n benchmark set the same default barely moves J (raise ``eta0`` there).
    random_state : int, optional
        Seed of the expansion-point subsample.

    Attributes
    ----------
    alpha_ : (m + 1,) coefficients, sign fixed so that most :math:`q(x_i) > 0` and scaled
        so that the root mean square of :math:`q(x_i)` is 1 (``K`` keeps the magnitude of
        ``K_0``, so an SVM's ``C`` keeps its meaning).
    expansion_ : (m, d) expansion points.
    gamma1_ : the :math:`\gamma_1` used (0-d array; ``nan`` with a user ``factor_kernel``).
    fisher_ratio_init_, fisher_ratio_ : :math:`J` (eq. 60, with ``mu``) before (q = 1) and
        after the optimization; ``raw_fisher_ratio_`` is the unregularized eq. 60 at the
        solution (``inf`` when :math:`\alpha` lies in the null space of :math:`N_0`).
    history_ : :math:`J_\mu` per accepted gradient step (gradient optimizer only).
    """

    def __init__(
        self,
        base_kernel=None,
        factor_kernel=None,
        gamma1="scale",
        optimizer: str = "eigen",
        mu: float = 1e-3,
        n_expansion=None,
        eta0: float = 0.01,
        n_iter: int = 1000,
        early_stop: bool = True,
        random_state=None,
    ):
        self.base_kernel = base_kernel
        self.factor_kernel = factor_kernel
        self.gamma1 = gamma1
        self.optimizer = optimizer
        self.mu = mu
        self.n_expansion = n_expansion
        self.eta0 = eta0
        self.n_iter = n_iter
        self.early_stop = early_stop
        self.random_state = random_state
        # the leaves are named in place by name_leaves, so the default must be one object
        self._base = RBF() if base_kernel is None else base_kernel

    # ----------------------------------------------------------------- tree structure
    def leaves(self):
        """Return the base kernel's leaves (only :math:`K_0` is sampled)."""
        # only K0's hyper-parameters are free; K1 and alpha are fitted, not sampled
        return self._base.leaves()

    def terms(self):
        """Return this kernel as its only term."""
        return [self]

    def children(self):
        """Return the base kernel :math:`K_0`."""
        return [self._base]

    def hyperparameters(self):
        """Return no hyper-parameters of its own (the base kernel's are its leaves')."""
        return {}

    # ----------------------------------------------------------------- fitting
    def _check_params(self):
        if not isinstance(self._base, Kernel):
            raise TypeError(f"base_kernel must be a bayeskern Kernel, got {self._base!r}")
        if self.factor_kernel is not None and not isinstance(self.factor_kernel, Kernel):
            raise TypeError(
                f"factor_kernel must be a bayeskern Kernel or None, got {self.factor_kernel!r}"
            )
        if self.optimizer not in _OPTIMIZERS:
            raise ValueError(f"optimizer must be one of {_OPTIMIZERS}, got {self.optimizer!r}")
        if not (np.isscalar(self.mu) and not isinstance(self.mu, str) and self.mu >= 0):
            raise ValueError(f"mu must be a non-negative number (inf: q = 1), got {self.mu!r}")
        if not (isinstance(self.gamma1, str) and self.gamma1 == "scale") and not (
            np.isscalar(self.gamma1) and not isinstance(self.gamma1, str) and self.gamma1 > 0
        ):
            raise ValueError(f"gamma1 must be a positive number or 'scale', got {self.gamma1!r}")
        if self.n_expansion is not None and not (
            isinstance(self.n_expansion, (int, np.integer)) and self.n_expansion >= 1
        ):
            raise ValueError(
                f"n_expansion must be a positive int or None, got {self.n_expansion!r}"
            )
        if not (np.isscalar(self.eta0) and self.eta0 > 0):
            raise ValueError(f"eta0 must be a positive number, got {self.eta0!r}")
        if not (isinstance(self.n_iter, (int, np.integer)) and self.n_iter >= 1):
            raise ValueError(f"n_iter must be a positive int, got {self.n_iter!r}")

    @property
    def is_fitted(self) -> bool:
        """Return ``True`` once fitted (and the base kernel too)."""
        return hasattr(self, "alpha_") and self._base.is_fitted

    # ----------------------------------------------------------------- evaluation
    def _factor(self) -> Kernel:
        if self.factor_kernel is not None:
            return self.factor_kernel
        # exp(-gamma1 |x - z|^2) is the RBF exp(-|x - z|^2 / (2 l^2)) with l = 1/sqrt(2 gamma1)
        if is_traced(self.gamma1_):  # the kernel is a jit argument
            return SquaredExponential(lengthscale=1.0 / jnp.sqrt(2.0 * self.gamma1_))
        return SquaredExponential(lengthscale=float(1.0 / np.sqrt(2.0 * self.gamma1_)))

    def _factor_gram(self, X):
        return self._factor()(X, jnp.asarray(self.expansion_))

    def factor(self, X) -> jax.Array:
        r"""Return the conformal factor (eq. 53).

        :math:`q(x) = \alpha_0 + \sum_j \alpha_j K_1(x, e_j)`.

        Parameters
        ----------
        X : (n, d) points, in the units the kernel was fitted on.
        """
        if not hasattr(self, "alpha_"):
            raise RuntimeError(
                "Conformal kernel is not fitted; call "
                "bayeskern.learning.fit_kernel(kernel, X, y) first"
            )
        X = jnp.atleast_2d(jnp.asarray(X))
        G = self._factor_gram(X)
        xp = array_module(G, self.alpha_)
        alpha = xp.asarray(self.alpha_)
        return jnp.asarray(alpha[0] + xp.asarray(G) @ alpha[1:])

    def evaluate(self, theta, x1, x2):
        """Return the kernel value for one pair of points."""
        q = self.factor(jnp.stack([x1, x2]))
        return q[0] * self._base.evaluate(theta, x1, x2) * q[1]

    def gram(self, theta, X1, X2):
        """:math:`K = Q_1 K_0(X_1, X_2) Q_2` (eq. 54), shape ``(n1, n2)``."""
        q1, K0, q2 = self.factor(X1), self._base.gram(theta, X1, X2), self.factor(X2)
        xp = array_module(q1, K0, q2)
        return jnp.asarray(xp.asarray(q1)[:, None] * xp.asarray(K0) * xp.asarray(q2)[None, :])

    def diag(self, theta, X):
        """Return :math:`q(x)^2 K_0(x, x)` for every row of ``X``."""
        return self.factor(X) ** 2 * self._base.diag(theta, X)

    def __repr__(self):
        return (
            f"Conformal(base_kernel={self._base!r}, optimizer={self.optimizer!r}, "
            f"mu={self.mu!r}, n_expansion={self.n_expansion!r})"
        )
