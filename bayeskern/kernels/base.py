"""Kernel algebra: hyper-parameter specifications, composition and the one way to a Gram matrix.

A kernel in bayeskern is a small Python object that

* declares its hyper-parameters (:class:`Hyper`): a value fixed by the user, or a prior
  (in the standardized units the estimators work in) from which NumPyro samples;
* evaluates a **single pair of points** in :meth:`Kernel.evaluate` (pure JAX, the tinygp
  habit), from which :meth:`Kernel.gram` builds a matrix with two ``vmap``; ``kernel(X1,
  X2[, theta])`` (:meth:`Kernel.__call__`) is the one call that returns a Gram matrix, and
  ``gram``, ``prepare`` and ``gram_prepared`` are what a kernel implements for it and for
  the models' packed solver;
* may hold state learned from data (VSK, CkRBF, LAB-RBF, Xiong, spectral mixtures), which
  ``bayeskern.learning.fit_kernel(kernel, X, y)``, in the layer above, learns.

Hyper-parameter values travel as one flat ``theta`` dict keyed by NumPyro site names
``"<leaf name>_<parameter>"`` (``rbf_lengthscale``, ``rbf_1_lengthscale``), given once per
tree by :func:`name_leaves`. Every kernel class is a JAX pytree (:mod:`.pytree`), registered
by name for :func:`kernel_from_config` (:mod:`.registry`).
"""

from __future__ import annotations

import copy
import inspect
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax.typing import ArrayLike

from bayeskern.batching import batched_map

from .hyper import Hyper
from .pytree import register_fitted_pytree
from .registry import KERNEL_REGISTRY, kernel_from_config

__all__ = [
    "Hyper",
    "Kernel",
    "Sum",
    "Product",
    "name_leaves",
    "default_theta",
    "KERNEL_REGISTRY",
    "kernel_from_config",
    "register_fitted_pytree",
]


class Kernel:
    """Base class of all kernels.

    Subclasses implement :meth:`evaluate` for one pair of points (or override :meth:`gram`
    for kernels that are cheaper as matrices) and :meth:`hyperparameters`.
    ``k1 + k2`` and ``k1 * k2`` build :class:`Sum` and :class:`Product` nodes.

    Every kernel class is a JAX pytree (:func:`register_fitted_pytree`): its leaves are the
    fitted floating-point arrays, of itself and of the kernels it is built from, so that a
    fitted kernel can be an argument of a jitted function,
    ``jax.jit(lambda k, th, A, B: k.gram(th, A, B))(kernel, theta, X1, X2)``.
    """

    #: set by :func:`name_leaves`
    name_: str | None = None
    #: ``True`` for kernels that are not symmetric in their arguments (LAB-RBF).
    symmetric: bool = True

    def __init_subclass__(cls, **kw):
        super().__init_subclass__(**kw)
        KERNEL_REGISTRY[cls.__name__] = cls
        register_fitted_pytree(cls)

    # ----------------------------------------------------------------- hyper-parameters
    def hyperparameters(self) -> dict[str, Hyper]:
        """Hyper-parameters of this leaf kernel, by parameter name."""
        return {}

    def leaves(self) -> list[Kernel]:
        """Return the leaf kernels of this tree, left to right."""
        return [self]

    def children(self) -> list[Kernel]:
        """Return the kernels this node is built from (none for a leaf; :func:`kernel_nodes`)."""
        return []

    def terms(self) -> list[Kernel]:
        """Return the additive terms of this kernel.

        A :class:`Sum` flattens; anything else is one term.
        """
        return [self]

    def _site(self, param: str) -> str:
        if self.name_ is None:
            raise RuntimeError("kernel leaves are not named; call bayeskern.kernels.name_leaves")
        return f"{self.name_}_{param}"

    def _p(self, theta: dict, param: str):
        """Return the value of ``param`` of this leaf in ``theta``."""
        return theta[self._site(param)]

    # ----------------------------------------------------------------- evaluation
    def evaluate(self, theta: dict, x1: jax.Array, x2: jax.Array) -> jax.Array:
        """Kernel value for one pair of points ``x1``, ``x2`` of shape ``(d,)``."""
        raise NotImplementedError

    def gram(self, theta: dict, X1: jax.Array, X2: jax.Array) -> jax.Array:
        """Gram matrix ``K[i, j] = k(X1[i], X2[j])`` of shape ``(n1, n2)``."""
        row = jax.vmap(self.evaluate, in_axes=(None, None, 0))
        return jax.vmap(row, in_axes=(None, 0, None))(theta, X1, X2)

    def diag(self, theta: dict, X: jax.Array) -> jax.Array:
        """``k(x_i, x_i)`` for every row of ``X``."""
        return jax.vmap(self.evaluate, in_axes=(None, 0, 0))(theta, X, X)

    # ----------------------------------------------------------------- spectral density
    def has_spectral_density(self) -> bool:
        """Return ``True`` when :meth:`spectral_density` is implemented for this kernel.

        ``False`` here; ``True`` for the stationary kernels (RBF, Laplacian, Matern32,
        Matern52, RationalQuadratic) and for sums of them.
        """
        return False

    def spectral_density(self, theta: dict, omega: jax.Array) -> jax.Array:
        r"""Return the spectral density :math:`S(\omega)` at each row of ``omega``.

        Bochner's theorem: a stationary unit-variance kernel is
        :math:`k(\tau) = (2\pi)^{-d} \int S(\omega)\, e^{i\omega^\top\tau}\, d\omega`
        (NumPyro's ``contrib.hsgp`` convention), so :math:`(2\pi)^{-d}\int S = k(0)`.
        Hilbert-space approximations weigh their basis functions by :math:`S` at the square
        roots of the Laplacian's eigenvalues (Solin & Särkkä 2020).

        Parameters
        ----------
        theta : dict
            Hyper-parameters by NumPyro site name, in the units of ``1 / omega``.
        omega : jax.Array of shape (m, d)
            Angular frequencies.

        Returns
        -------
        jax.Array of shape (m,)

        Raises
        ------
        NotImplementedError
            Here, for kernels without a spectral density (see :meth:`has_spectral_density`).
        """
        raise NotImplementedError(
            f"{type(self).__name__} has no spectral density: a Hilbert-space approximation "
            "needs a stationary kernel with one (RBF, Laplacian, Matern32, Matern52, "
            "RationalQuadratic, sums of them, or their product with Periodic); "
            'approximation="exact" works for any kernel'
        )

    # ----------------------------------------------------------------- work done once per fit
    def is_constant(self) -> bool:
        """Return ``True`` when no hyper-parameter of this kernel (or one it wraps) is sampled.

        Its Gram matrix is then the same at every posterior draw.
        """
        return all(
            h.value is not None
            for k in [self, *self.leaves()]
            for h in k.hyperparameters().values()
        )

    def prepare(self, theta: dict, X1: jax.Array, X2: jax.Array):
        """Compute the parts of ``gram(theta, X1, X2)`` that the sampled parameters leave alone.

        Everything that does not depend on the sampled hyper-parameters, computed once per
        fit instead of once per leapfrog step.

        ``theta`` needs only the fixed hyper-parameters (e.g. :func:`default_theta`); the
        result is a pytree for :meth:`gram_prepared`. A kernel with nothing to sample is
        constant: its whole Gram matrix is the cache. Subclasses cache what they can
        (squared distances, the sin² matrix of a fixed period, fitted feature maps); the
        default keeps the inputs, so that ``gram_prepared`` is ``gram``.
        """
        if self.is_constant():
            return self.gram(theta, X1, X2)
        return (X1, X2)

    def gram_prepared(self, theta: dict, prepared) -> jax.Array:
        """``gram(theta, X1, X2)`` from ``prepared = prepare(theta, X1, X2)``."""
        if self.is_constant():
            return prepared
        return self.gram(theta, *prepared)

    def pairwise_prepared(self) -> bool:
        """Return ``True`` when :meth:`prepare`'s arrays run over pairs of points.

        That is, when their leading axes are ``(n1, n2, ...)`` and :meth:`gram_prepared`
        works elementwise over them.

        The models then keep only the lower triangle of a symmetric Gram matrix, packed into
        one axis of :math:`n(n+1)/2` pairs, and do half the elementwise work per leapfrog
        step (:func:`bayeskern.models.gp.prepare_kernel`).
        """
        return self.is_constant()

    def __call__(
        self,
        X1: ArrayLike,
        X2: ArrayLike | None = None,
        theta: dict | None = None,
        *,
        batch_size: int = 4096,
    ) -> jax.Array:
        r"""Return the Gram matrix :math:`K_{ij} = k(x_i, x'_j)` of the rows of ``X1`` and ``X2``.

        The one way to a Gram matrix: ``kernel(X)``, ``kernel(X1, X2)``, or at given
        hyper-parameter values ``kernel(X1, X2, theta)``. Without ``theta`` every
        hyper-parameter is at its fixed value or default (:func:`default_theta` with unit
        scales: no standardization is applied, so a fixed length-scale is used as given).
        Inside the models the same evaluation runs at sampled values, through the packed
        caches of :mod:`bayeskern.models.gp_kernel`.

        Parameters
        ----------
        X1 : array, shape (n1, d)
        X2 : array, shape (n2, d), optional
            ``X1`` when omitted; the kernel then sees one array twice, so kernels that
            symmetrize :math:`K(X, X)` against rounding can do so.
        theta : dict, optional
            Hyper-parameter values by NumPyro site name (``"rbf_lengthscale"``, ...), in the
            units of ``X``.
        batch_size : int, default 4096
            Rows of ``X1`` per block (:func:`~bayeskern.batching.batched_map`), so that the
            intermediate arrays of large inputs stay bounded; the result is ``(n1, n2)``.

        Returns
        -------
        jax.Array of shape (n1, n2)
        """
        same = X2 is None or X2 is X1
        X1 = jnp.atleast_2d(jnp.asarray(X1, dtype=float))
        X2 = X1 if same else jnp.atleast_2d(jnp.asarray(X2, dtype=float))
        if X1.shape[1] != X2.shape[1]:
            raise ValueError(f"X1 has {X1.shape[1]} columns but X2 has {X2.shape[1]}")
        k = self if self.leaves()[0].name_ is not None else name_leaves(self)
        if theta is None:
            theta = default_theta(k, np.ones(X1.shape[1]))
        return batched_map(lambda b: k.gram(theta, b, X2), X1, batch_size, blocks=True)

    # ----------------------------------------------------------------- data-dependent kernels
    def __getattr__(self, name):  # reached only for a missing attribute
        hint = "; kernels are fitted by bayeskern.learning.fit_kernel(kernel, X, y)"
        raise AttributeError(
            f"{type(self).__name__!r} object has no attribute {name!r}"
            + (hint if name == "fit" else "")
        )

    @property
    def is_fitted(self) -> bool:
        """Return ``True`` when the data-dependent parts are learned (base kernels have none).

        :func:`bayeskern.learning.fit_kernel` learns them and returns a fitted copy.
        """
        return True

    # ----------------------------------------------------------------- algebra
    def __add__(self, other):
        if isinstance(other, (int, float)) and other == 0:
            return self
        return Sum(self, _as_kernel(other))

    __radd__ = __add__

    def __mul__(self, other):
        return Product(self, _as_kernel(other))

    __rmul__ = __mul__

    # ----------------------------------------------------------------- config (no pickle)
    def get_params(self, deep: bool = True) -> dict[str, Any]:
        """Return the constructor arguments, read from the attributes of the same name.

        ``deep`` is accepted for scikit-learn's ``clone`` (an estimator with a kernel
        parameter, e.g. ``KernelSVC(kernel=RBF())``, in ``cross_validate`` or
        ``GridSearchCV``); child kernels are returned as they are either way.
        """
        sig = inspect.signature(type(self).__init__)
        return {
            name: getattr(self, name)
            for name, p in sig.parameters.items()
            if name != "self" and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)
        }

    def get_state(self) -> dict[str, np.ndarray]:
        """Fitted arrays (attributes ending in ``_`` holding arrays) for saving."""
        return {
            k: np.asarray(v)
            for k, v in vars(self).items()
            if k.endswith("_") and k != "name_" and isinstance(v, (np.ndarray, jax.Array))
        }

    def get_config(self) -> dict[str, Any]:
        """JSON-serializable description: class name and constructor arguments."""
        params = {}
        for k, v in self.get_params().items():
            if isinstance(v, Kernel):
                v = {"__kernel__": v.get_config()}
            elif isinstance(v, np.ndarray):
                v = v.tolist()
            elif callable(v):
                raise TypeError(
                    f"{type(self).__name__}.{k} is a Python callable and cannot be saved "
                    "without pickle; use a built-in option to save this run"
                )
            params[k] = v
        return {"class": type(self).__name__, "params": params}

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self.get_params().items() if v is not None)
        return f"{type(self).__name__}({args})"


register_fitted_pytree(Kernel)


def _as_kernel(obj) -> Kernel:
    if isinstance(obj, Kernel):
        return obj
    if isinstance(obj, (int, float)):
        return Constant(float(obj))
    raise TypeError(f"cannot combine a kernel with {type(obj).__name__}")


class Constant(Kernel):
    """Constant kernel :math:`k(x, x') = c`."""

    def __init__(self, value: float = 1.0):
        self.value = value

    def evaluate(self, theta, x1, x2):
        return jnp.asarray(self.value, dtype=x1.dtype)

    def gram(self, theta, X1, X2):
        return jnp.full((X1.shape[0], X2.shape[0]), self.value, dtype=X1.dtype)


class _Binary(Kernel):
    op: Callable

    def __init__(self, k1: Kernel, k2: Kernel):
        self.k1 = k1
        self.k2 = k2

    def leaves(self):
        return self.k1.leaves() + self.k2.leaves()

    def children(self):
        return [self.k1, self.k2]

    @property
    def symmetric(self):  # type: ignore[override]
        return self.k1.symmetric and self.k2.symmetric

    def evaluate(self, theta, x1, x2):
        return self.op(self.k1.evaluate(theta, x1, x2), self.k2.evaluate(theta, x1, x2))

    def gram(self, theta, X1, X2):
        return self.op(self.k1.gram(theta, X1, X2), self.k2.gram(theta, X1, X2))

    def diag(self, theta, X):
        return self.op(self.k1.diag(theta, X), self.k2.diag(theta, X))

    def prepare(self, theta, X1, X2):
        return (self.k1.prepare(theta, X1, X2), self.k2.prepare(theta, X1, X2))

    def gram_prepared(self, theta, prepared):
        return self.op(
            self.k1.gram_prepared(theta, prepared[0]), self.k2.gram_prepared(theta, prepared[1])
        )

    def pairwise_prepared(self):
        return self.k1.pairwise_prepared() and self.k2.pairwise_prepared()

    @property
    def is_fitted(self):
        return self.k1.is_fitted and self.k2.is_fitted

    def get_state(self):
        return {}


class Sum(_Binary):
    """Sum kernel :math:`k(x,x') = k_1(x,x') + k_2(x,x')`."""

    op = staticmethod(jnp.add)

    def terms(self):
        """Return the additive terms of both operands."""
        return self.k1.terms() + self.k2.terms()

    def has_spectral_density(self):
        """Return ``True`` when both operands have a spectral density."""
        return self.k1.has_spectral_density() and self.k2.has_spectral_density()

    def spectral_density(self, theta, omega):
        r"""Return :math:`S_1(\omega) + S_2(\omega)`: the transform is linear.

        The models give each additive term its own amplitude, so they evaluate the terms'
        densities one by one; this is the density of the unweighted sum.
        """
        for k in (self.k1, self.k2):
            if not k.has_spectral_density():
                return k.spectral_density(theta, omega)  # raises, naming that operand
        return self.k1.spectral_density(theta, omega) + self.k2.spectral_density(theta, omega)

    def __repr__(self):
        return f"{self.k1!r} + {self.k2!r}"


class Product(_Binary):
    """Product kernel :math:`k(x,x') = k_1(x,x')\\,k_2(x,x')` (a Schur product: PSD if both are)."""

    op = staticmethod(jnp.multiply)

    def spectral_density(self, theta, omega):
        """Raise :class:`NotImplementedError`: a product's density is a convolution.

        A stationary kernel times :class:`~bayeskern.kernels.Periodic` is approximated from
        the stationary factor's :meth:`spectral_density` and the periodic factor's
        :meth:`~bayeskern.kernels.Periodic.cosine_coefficients` instead.
        """
        raise NotImplementedError(
            f"Product ({self!r}) has no spectral density: a Hilbert-space approximation "
            "needs a stationary kernel with one (RBF, Laplacian, Matern32, Matern52, "
            "RationalQuadratic, sums of them), or such a kernel times Periodic, which is "
            "approximated from the factors (spectral_density and "
            'Periodic.cosine_coefficients); approximation="exact" works for any kernel'
        )

    def __repr__(self):
        return f"({self.k1!r}) * ({self.k2!r})"


def name_leaves(kernel: Kernel) -> Kernel:
    """Return a deep copy of ``kernel`` whose leaves carry unique names.

    The name of a leaf is its lower-case class name, with ``_1``, ``_2``... appended for
    repeats, in left-to-right order: ``Linear() + RBF() + RBF() * Periodic()`` has leaves
    ``linear``, ``rbf``, ``rbf_1``, ``periodic``.
    """
    if not isinstance(kernel, Kernel):
        raise TypeError(f"kernel must be a bayeskern kernel, got {type(kernel).__name__}")
    k = _unshare(copy.deepcopy(kernel), set())
    seen: dict[str, int] = {}
    for leaf in k.leaves():
        base = type(leaf).__name__.lower()
        n = seen.get(base, 0)
        seen[base] = n + 1
        leaf.name_ = base if n == 0 else f"{base}_{n}"
    return k


def _unshare(node: Kernel, seen: set) -> Kernel:
    """Copy every object that appears twice in the tree, so each leaf can have its own name."""
    if id(node) in seen:
        node = copy.deepcopy(node)
    seen.add(id(node))
    if isinstance(node, _Binary):
        node.k1 = _unshare(node.k1, seen)
        node.k2 = _unshare(node.k2, seen)
    return node


def kernel_nodes(kernel: Kernel, path: str = "0"):
    """Return every node of a kernel tree as ``(path, node)``, depth first.

    The root has path ``"0"``, the children of node ``p`` have paths ``p.0``, ``p.1``...
    (used to save fitted state of nodes that are not leaves, e.g.
    :class:`~bayeskern.kernels.Conformal`).
    """
    out = [(path, kernel)]
    for i, child in enumerate(kernel.children()):
        out += kernel_nodes(child, f"{path}.{i}")
    return out


def term_name(term: Kernel) -> str:
    """Readable name of an additive term: its leaf names joined by ``*``."""
    return "*".join(leaf.name_ or type(leaf).__name__.lower() for leaf in term.leaves())


def default_theta(kernel: Kernel, x_scale: np.ndarray) -> dict[str, jax.Array]:
    """Every hyper-parameter at its fixed value (standardized) or its default."""
    theta = {}
    for leaf in kernel.leaves():
        for p, h in leaf.hyperparameters().items():
            if h.value is not None:
                theta[leaf._site(p)] = h.fixed_standardized(x_scale)
            else:
                theta[leaf._site(p)] = jnp.asarray(h.default, dtype=float)
    return theta
