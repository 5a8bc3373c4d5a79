r"""Variably scaled kernels (VSK) and their scaling functions.

Campi, Marchetti & Perracchione, *Learning via variably scaled kernels*, Adv. Comput. Math.
47:51 (2021). A scaling function
:math:`\psi:\Omega\subseteq\mathbb{R}^n\to\Lambda\subseteq\mathbb{R}^m` augments every point,
:math:`\Psi(x) = (x, \psi(x))`, and the VSK is the base kernel on the augmented points
(Definition 2, eq. 2.4):

.. math:: \kappa^\Psi(x, y) = \kappa\big((x, \psi(x)), (y, \psi(y))\big).

For the two kernels the paper studies this splits into an :math:`x` block and a
:math:`\psi` block (Theorems 3 and 6), which is how :class:`VSK` evaluates it, with a
weight :math:`w \ge 0` on the :math:`\psi` block:

* ``form="product"`` (Gaussian VSK, Theorem 3): :math:`K^\Psi = K \circ K^\psi`,
  :math:`K^\psi_{ij} = \exp(-\tfrac12 w^2 \|\psi(x_i) - \psi(x_j)\|^2)`;
* ``form="sum"`` (linear VSK, Theorem 6): :math:`K^\Psi = K + K^\psi`,
  :math:`K^\psi_{ij} = w^2\, \psi(x_i)^\top \psi(x_j)`.

With an RBF base of length-scale :math:`\ell` and :math:`w = 1/\ell` the product form *is*
Definition 2 evaluated literally; with ``w`` free it is the VSK of a Gaussian whose shape
differs on the two blocks. :math:`w = 0` (or :math:`\psi \equiv 0` in the product form) gives
back the base kernel (Remark 3). Any base kernel works: the product form is then a Schur
product of two positive-definite kernels, hence positive definite.

Scaling functions (section 5): :class:`NaiveBayesScaling` (the SVM-VSK choice
:math:`\psi(x) = P(y=+1\mid x)` of a Gaussian naive-Bayes classifier, section 5.1, optionally
trained on extra a-priori data as in section 6.1), :class:`ParametricScaling` (least-squares fit
of a user model :math:`\mathcal{M}(x,\beta)`, eq. 5.1), :class:`CallableScaling` (any fixed
user function), :class:`ColumnScaling` (extra covariate columns, section 6.2), and lists of
these (stacked into a multi-dimensional :math:`\psi`). Their fitted state and JAX
``transform`` live in :mod:`bayeskern.kernels.vsk_scaling` (exported here too); the fits
(``GaussianNB``, least squares) live in :mod:`bayeskern.learning.vsk`, and the VSK's own fit
in :func:`bayeskern.learning.fit_vsk`.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import numpyro.distributions as dist

from . import vsk_scaling
from .base import Hyper, Kernel, name_leaves
from .stationary import RBF, Linear
from .vsk_scaling import (  # noqa: F401  (re-exported: the scalings are public here too)
    CallableScaling,
    ColumnScaling,
    LinearModelScaling,
    NaiveBayesScaling,
    ParametricScaling,
    Scaling,
    StackedScaling,
    make_scaling,
)

__all__ = ["VSK", *vsk_scaling.__all__]


def _weight_prior():
    # HalfNormal keeps mass near w = 0 (the plain kernel, Remark 3) while allowing the
    # ψ block to dominate: at w = 3 a ψ gap of 0.5 already halves the kernel value.
    return dist.HalfNormal(3.0)


class VSK(Kernel):
    r"""Variably scaled kernel :math:`\kappa^\Psi(x,y) = \kappa((x,\psi(x)), (y,\psi(y)))`.

    Campi et al. (2021), Definition 2 (eq. 2.4); evaluated in block form (Theorem 3 for
    ``form="product"``, Theorem 6 for ``form="sum"``):

    .. math:: K^\Psi = K \circ \exp\!\big(-\tfrac12 w^2 D_\psi\big)\quad\text{or}\quad
              K^\Psi = K + w^2\, \Psi_\psi \Psi_\psi^\top,

    where :math:`K` is the base kernel on the ``columns`` of ``X``,
    :math:`(D_\psi)_{ij} = \|\psi(x_i) - \psi(x_j)\|^2` and :math:`\Psi_\psi` stacks the
    :math:`\psi(x_i)`. :func:`~bayeskern.learning.fit_vsk` learns :math:`\psi` (naive Bayes on
    the training data by default); the base kernel's hyper-parameters and the weight
    :math:`w` stay free for NUTS, e.g. ``bk.GPClassifier(kernel=VSK(RBF()))`` samples the RBF
    length-scale and :math:`w` (sites ``vsk_rbf_lengthscale``, ``vsk_weight``). The GP
    estimators pass standardized ``X`` (and 0/1 labels) to the fit.

    Parameters
    ----------
    base : Kernel, default RBF()
        Kernel on the ``x`` block; may itself be a composite or data-dependent kernel.
    scaling : str, Scaling, callable or list, default "naive_bayes"
        The scaling function :math:`\psi` (see :func:`make_scaling`).
    weight : float or None
        :math:`w \ge 0`, fixed; ``None`` samples it (prior HalfNormal(3), default 1).
    form : {"product", "sum"} or None
        Gaussian (Hadamard) or linear (sum) VSK; ``None`` picks ``"sum"`` for a
        :class:`~bayeskern.kernels.Linear` base and ``"product"`` otherwise.
    columns : list of int, optional
        Columns of ``X`` forming the ``x`` block (all by default); columns used only as
        covariates of a :class:`ColumnScaling` are left out here.
    """

    def __init__(self, base=None, scaling="naive_bayes", weight=None, form=None, columns=None):
        self.base = base
        self.scaling = scaling
        self.weight = weight
        self.form = form
        self.columns = columns

    # -------------------------------------------------------------- structure
    def _base(self) -> Kernel:
        base = RBF() if self.base is None else self.base
        if not isinstance(base, Kernel):
            raise TypeError(f"VSK: base must be a bayeskern Kernel, got {type(base).__name__}")
        return base

    def _form(self) -> str:
        if self.form is None:
            return "sum" if isinstance(self._base(), Linear) else "product"
        if self.form not in ("product", "sum"):
            raise ValueError(f"VSK: form must be 'product' or 'sum', got {self.form!r}")
        return self.form

    def _inner(self) -> Kernel:
        """Return the base kernel with leaves named ``<vsk name>_<leaf name>`` (its theta keys)."""
        inner = name_leaves(getattr(self, "base_", None) or self._base())
        for leaf in inner.leaves():
            leaf.name_ = f"{self.name_}_{leaf.name_}"
        return inner

    def hyperparameters(self):
        """Return the base kernel's hyper-parameters (prefixed by leaf name) and ``weight``."""
        hyper = {}
        inner = name_leaves(self._base())
        for leaf in inner.leaves():
            for p, h in leaf.hyperparameters().items():
                hyper[f"{leaf.name_}_{p}"] = h
        if self.weight is not None and not (np.isscalar(self.weight) and self.weight >= 0):
            raise ValueError(
                f"VSK: weight must be a non-negative number or None, got {self.weight!r}"
            )
        hyper["weight"] = Hyper(self.weight, _weight_prior, 1.0)
        return hyper

    def _x_columns(self, d: int) -> np.ndarray:
        if self.columns is None:
            return np.arange(d)
        cols = np.atleast_1d(np.asarray(self.columns))
        if cols.dtype.kind not in "iu" or cols.ndim != 1 or len(cols) == 0:
            raise TypeError(
                f"VSK: columns must be a non-empty list of int indices, got {self.columns!r}"
            )
        if cols.min() < -d or cols.max() >= d:
            raise ValueError(f"VSK: columns {cols.tolist()} out of range for X with {d} columns")
        return cols % d

    @property
    def is_fitted(self) -> bool:
        """Return ``True`` once fitted (:func:`bayeskern.learning.fit_vsk`)."""
        return hasattr(self, "scaling_") or hasattr(self, "nb_theta_") or hasattr(self, "lin_coef_")

    def _pytree_skip(self) -> tuple[str, ...]:
        """Leave ``scaling_`` out of the pytree when it is rebuilt from the ``nb_*`` arrays.

        Otherwise the scaling object would keep the concrete arrays while the leaves are
        perturbed or traced (:func:`~bayeskern.kernels.base.register_fitted_pytree`).
        """
        s = self.__dict__.get("scaling_")
        rebuilt = (
            type(s) is NaiveBayesScaling
            and hasattr(self, "nb_theta_")
            or type(s) is LinearModelScaling
            and hasattr(self, "lin_coef_")
        )
        return ("scaling_",) if rebuilt and s.columns is None else ()

    def _fitted_scaling(self) -> Scaling:
        s = self.__dict__.get("scaling_")
        if s is None and hasattr(self, "lin_coef_"):  # restored: scaling="linear"
            s = LinearModelScaling()
            s.coef_, s.n_outputs_ = self.lin_coef_, 1  # no np.asarray: may be a tracer
            self.scaling_ = s
        if s is None:  # restored from saved arrays (default naive-Bayes scaling only)
            s = NaiveBayesScaling()
            for name in ("classes_", "theta_", "var_", "class_log_prior_"):
                setattr(s, name, getattr(self, f"nb_{name}"))
            s.n_outputs_ = 1
            self.scaling_ = s
        return s

    def _check_fitted(self):
        if not self.is_fitted:
            raise RuntimeError(
                "VSK kernel is not fitted: call bayeskern.learning.fit_kernel(kernel, X, y) "
                "first (the estimators do it), so that the scaling function is learned"
            )

    # -------------------------------------------------------------- evaluation
    def psi(self, X) -> jax.Array:
        """Return the learned scaling function :math:`\\psi(X)`, shape ``(n, m)``."""
        self._check_fitted()
        return self._fitted_scaling().transform(jnp.asarray(X))

    def augment(self, X, weight: float = 1.0) -> jax.Array:
        """:math:`\\Psi(X) = (X_{\\text{columns}}, w\\,\\psi(X))`, shape ``(n, d' + m)``."""
        X = jnp.asarray(X)
        return jnp.concatenate([X[:, self.x_columns_], weight * self.psi(X)], axis=1)

    def _base_theta(self, theta, inner):
        """Theta of the inner base kernel; vectors over all columns are cut to ``columns``."""
        out = {}
        d = int(self.n_features_)
        cut = len(self.x_columns_) != d
        for leaf in inner.leaves():
            for p in leaf.hyperparameters():
                v = theta[leaf._site(p)]
                if cut and jnp.ndim(v) == 1 and v.shape[0] == d:
                    v = v[self.x_columns_]
                out[leaf._site(p)] = v
        return out

    def block_grams(self, theta, X1, X2):
        """``(K, K_psi)``: the base Gram on the ``x`` block and the ψ-block Gram."""
        self._check_fitted()
        inner = self._inner()
        X1, X2 = jnp.asarray(X1), jnp.asarray(X2)
        w = self._p(theta, "weight")
        K = inner.gram(
            self._base_theta(theta, inner), X1[:, self.x_columns_], X2[:, self.x_columns_]
        )
        P1, P2 = w * self.psi(X1), w * self.psi(X2)
        if self._form() == "sum":
            return K, P1 @ P2.T
        d2 = jnp.sum((P1[:, None, :] - P2[None, :, :]) ** 2, axis=-1)
        return K, jnp.exp(-0.5 * d2)

    def gram(self, theta, X1, X2):
        """Return the Gram matrix (sum or Hadamard product of the two blocks)."""
        K, Kpsi = self.block_grams(theta, X1, X2)
        return K + Kpsi if self._form() == "sum" else K * Kpsi

    def evaluate(self, theta, x1, x2):
        """Return the kernel value for one pair of points."""
        return self.gram(theta, x1[None], x2[None])[0, 0]

    def diag(self, theta, X):
        """Return the kernel's diagonal for every row of ``X``."""
        inner = self._inner()
        X = jnp.asarray(X)
        kd = inner.diag(self._base_theta(theta, inner), X[:, self.x_columns_])
        if self._form() == "sum":
            P = self._p(theta, "weight") * self.psi(X)
            return kd + jnp.sum(P * P, axis=1)
        return kd

    def get_config(self):
        """Return the JSON configuration (named scalings only)."""
        if not isinstance(self.scaling, str):
            raise TypeError(
                "VSK with a custom scaling object or callable cannot be saved "
                "without pickle; only scaling='naive_bayes' is saved"
            )
        if self.scaling not in ("naive_bayes", "linear"):
            raise TypeError(
                "only VSK(scaling='naive_bayes') or VSK(scaling='linear') can be "
                "saved without pickle"
            )
        return super().get_config()
