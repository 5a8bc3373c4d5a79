"""Kernel algebra: hyper-parameter specifications, composition and the one ``gram``.

A kernel in bayeskern is a small Python object that

* declares its hyper-parameters (:class:`Hyper`): a value fixed by the user, or a prior
  (in the standardized units the estimators work in) from which NumPyro samples;
* evaluates a **single pair of points** in :meth:`Kernel.evaluate` (pure JAX, the tinygp
  habit), from which :meth:`Kernel.gram` builds a matrix with two ``vmap``;
* may learn from data in :meth:`Kernel.fit` (VSK, CkRBF, LAB-RBF, Xiong, spectral mixtures).
  ``fit`` returns a new fitted kernel; after it, evaluation is pure.

Hyper-parameter values travel as one flat ``theta`` dict whose keys are NumPyro site
names ``"<leaf name>_<parameter>"``, e.g. ``rbf_lengthscale`` or ``rbf_1_lengthscale``.
Leaf names are given once per kernel tree by :func:`name_leaves`, which copies the tree so
that the same object used twice gets two names.
"""

from __future__ import annotations

import copy
import importlib
import inspect
import math
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax.typing import ArrayLike

from bayeskern.batching import batched_map

__all__ = [
    "Hyper",
    "Kernel",
    "Sum",
    "Product",
    "gram",
    "name_leaves",
    "default_theta",
    "KERNEL_REGISTRY",
    "kernel_from_config",
    "register_learner",
    "learner",
    "register_fitted_pytree",
]

#: Kernel classes by name; :func:`kernel_from_config` rebuilds only these (no pickle, no eval).
KERNEL_REGISTRY: dict[str, type] = {}

#: Training functions by kernel class, registered by :mod:`bayeskern.learning` (the layer
#: above the kernels), so that a kernel holds fitted state and its ``fit`` needs no import of
#: the training code.
LEARNERS: dict[type, Callable] = {}


def register_learner(kernel_cls: type):
    """Register ``fn(kernel, X, y, **kwargs)`` as the training function of a class (decorator).

    Parameters
    ----------
    kernel_cls : type
        The kernel class, or a VSK scaling class (subclasses inherit its learner).

    Returns
    -------
    callable
        A decorator returning ``fn`` unchanged.
    """

    def register(fn):
        LEARNERS[kernel_cls] = fn
        return fn

    return register


def learner(kernel: Kernel) -> Callable:
    """Return the training function registered for ``kernel``'s class (:func:`register_learner`).

    Parameters
    ----------
    kernel : Kernel

    Returns
    -------
    callable
        ``fn(kernel, X, y, **kwargs)`` returning a fitted copy of ``kernel``.
    """
    for cls in type(kernel).__mro__:
        if cls in LEARNERS:
            return LEARNERS[cls]
    if "bayeskern.learning" not in sys.modules:
        # the package's training functions register themselves when bayeskern.learning (a
        # layer above the kernels) is imported; bayeskern's lazy import loads it on first need
        importlib.import_module("bayeskern.learning")
        return learner(kernel)
    raise RuntimeError(
        f"no training function is registered for {type(kernel).__name__} "
        "(register one with bayeskern.kernels.base.register_learner)"
    )


# --------------------------------------------------------------------------- pytrees
#: Classes registered by :func:`register_fitted_pytree`; their instances are pytree nodes.
_PYTREE_CLASSES: set[type] = set()


def _is_fitted_array(name: str, value) -> bool:
    """Return ``True`` for a fitted array that is a pytree leaf.

    Leaves are the attributes ending in ``_`` (``name_`` excepted) that hold a NumPy or JAX
    array (or NumPy scalar) of a floating or complex dtype. Integer, boolean and string
    arrays (column indices, counts, class labels, flags) describe the structure of the
    fitted kernel and are read by Python (``int(...)``, indexing, shapes), so they stay
    static data.
    """
    if not name.endswith("_") or name == "name_":
        return False
    if not isinstance(value, (np.ndarray, np.generic, jax.Array)):
        return False
    return np.dtype(value.dtype).kind in "fc"


def _is_node(value) -> bool:
    """Return ``True`` for a registered object, or a list/tuple made only of them."""
    if type(value) in _PYTREE_CLASSES:
        return True
    return (
        isinstance(value, (list, tuple))
        and len(value) > 0
        and all(type(v) in _PYTREE_CLASSES for v in value)
    )


class _Identity:
    """Compare and hash an object by identity (callables, unknown objects)."""

    __slots__ = ("obj",)

    def __init__(self, obj):
        self.obj = obj

    def __eq__(self, other):
        return isinstance(other, _Identity) and other.obj is self.obj

    def __hash__(self):
        return id(self.obj)


def _freeze(value):
    """Return a hashable key that compares ``value`` by value where that is well defined.

    Numbers, strings, ``None``, concrete arrays (by dtype, shape and bytes, so that ``nan``
    equals itself) and lists, tuples, dicts and sets of them compare by value; anything
    else (callables, random states, tracers) by identity.
    """
    if value is None or isinstance(value, (bool, int, str, bytes)):
        return (type(value).__name__, value)
    if isinstance(value, float):
        return ("float", "nan" if math.isnan(value) else value)
    if isinstance(value, np.generic):
        return (type(value).__name__, _freeze(value.item()))
    if isinstance(value, (np.ndarray, jax.Array)) and not isinstance(value, jax.core.Tracer):
        a = np.asarray(value)
        if a.dtype.kind != "O":
            return ("ndarray", a.dtype.str, a.shape, a.tobytes())
    elif isinstance(value, (list, tuple)):
        return (type(value).__name__, tuple(_freeze(v) for v in value))
    elif isinstance(value, dict):
        return ("dict", tuple((_freeze(k), _freeze(v)) for k, v in value.items()))
    elif isinstance(value, (set, frozenset)):
        return ("set", frozenset(_freeze(v) for v in value))
    return _Identity(value)


class _Alias:
    """Static marker: this attribute is the same object as attribute ``target``."""

    __slots__ = ("target",)

    def __init__(self, target: str):
        self.target = target


class _PytreeAux:
    """Static part of a flattened kernel: its class and every attribute that is not a leaf.

    Hashable and compared by value (:func:`_freeze`), so that ``jit`` reuses its
    compilation for a kernel whose fitted arrays alone changed.
    """

    __slots__ = ("cls", "order", "dynamic", "static", "_key")

    def __init__(self, cls, order, dynamic, static):
        self.cls = cls
        self.order = order
        self.dynamic = dynamic
        self.static = static
        self._key = (
            cls,
            order,
            dynamic,
            tuple(
                (k, ("alias", v.target) if isinstance(v, _Alias) else _freeze(v)) for k, v in static
            ),
        )

    def __eq__(self, other):
        return isinstance(other, _PytreeAux) and self._key == other._key

    def __hash__(self):
        return hash(self._key)

    def __repr__(self):
        return f"{self.cls.__name__}(static={[k for k, _ in self.static]})"


def _pytree_flatten_with_keys(obj):
    attrs = vars(obj)
    skip = obj._pytree_skip() if hasattr(obj, "_pytree_skip") else ()
    arrays, nodes, static = [], [], []
    seen: dict[int, str] = {}
    for name in sorted(attrs):
        if name in skip:
            continue
        value = attrs[name]
        if _is_fitted_array(name, value):
            arrays.append(name)
        elif _is_node(value):
            if id(value) in seen:  # e.g. Conformal's _base is its base_kernel
                static.append((name, _Alias(seen[id(value)])))
            else:
                seen[id(value)] = name
                nodes.append(name)
        else:
            static.append((name, value))
    dynamic = tuple(arrays + nodes)
    order = tuple(k for k in attrs if k not in skip)
    aux = _PytreeAux(type(obj), order, dynamic, tuple(static))
    return [(jax.tree_util.GetAttrKey(k), attrs[k]) for k in dynamic], aux


def _pytree_flatten(obj):
    children, aux = _pytree_flatten_with_keys(obj)
    return [c for _, c in children], aux


def _pytree_unflatten(aux: _PytreeAux, children):
    # no __init__: the children may be tracers (or placeholders) that validation would reject
    obj = object.__new__(aux.cls)
    values = dict(aux.static)
    values.update(zip(aux.dynamic, children, strict=True))
    for k, v in list(values.items()):
        if isinstance(v, _Alias):
            values[k] = values[v.target]
    obj.__dict__.update((k, values[k]) for k in aux.order)
    return obj


def register_fitted_pytree(cls: type) -> type:
    """Register ``cls`` as a JAX pytree node whose leaves are its fitted arrays.

    Children, in a fixed order: the fitted floating-point arrays (attributes ending in
    ``_``, sorted by name), then the attributes holding registered objects (kernels,
    scalings, or lists of them; sorted by name). Everything else -- constructor
    parameters, ``name_``, integer and boolean fitted arrays, Python numbers -- is static
    data, compared by value (by identity for callables), so that ``jax.jit`` recompiles
    only when it changes. Unflattening restores ``__dict__`` without calling ``__init__``.
    A class may define ``_pytree_skip()`` returning attribute names to leave out (state
    that it rebuilds from its leaves).

    Parameters
    ----------
    cls : type
        The class (called by :meth:`Kernel.__init_subclass__` for every kernel class).

    Returns
    -------
    type
        ``cls``, registered.
    """
    if cls not in _PYTREE_CLASSES:
        jax.tree_util.register_pytree_with_keys(
            cls, _pytree_flatten_with_keys, _pytree_unflatten, _pytree_flatten
        )
        _PYTREE_CLASSES.add(cls)
    return cls


@dataclass(frozen=True)
class Hyper:
    """Specification of one kernel hyper-parameter.

    Parameters
    ----------
    value
        A value fixed by the user, **in the units of the data passed to the estimator**, or
        ``None`` to sample it from ``prior``.
    prior
        Zero-argument callable returning a NumPyro distribution in *standardized* units
        (inputs scaled to unit standard deviation per column).
    default
        Value (standardized units) used when the kernel is evaluated without sampling.
    length
        ``True`` when the parameter is a length in the units of ``X`` (length-scale,
        period): a fixed value is divided by the per-column scale of ``X``.
    ard
        ``True`` for one value per input column (automatic relevance determination).
    """

    value: Any
    prior: Callable[[], Any]
    default: float
    length: bool = False
    ard: bool = False

    def fixed_standardized(self, x_scale: np.ndarray) -> jnp.ndarray:
        """Return the fixed value in standardized units (a vector when it is a length)."""
        v = jnp.asarray(self.value, dtype=float)
        if self.length:
            return v / jnp.asarray(x_scale, dtype=float)
        return v


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

    def __call__(self, X1: ArrayLike, X2: ArrayLike | None = None) -> jax.Array:
        """Gram matrix with every hyper-parameter at its fixed value or default.

        Convenience for classical (non-Bayesian) use; no standardization is applied, so a
        fixed length-scale is used as given.
        """
        k = name_leaves(self)
        X1 = jnp.atleast_2d(jnp.asarray(X1, dtype=float))
        X2 = None if X2 is None else jnp.atleast_2d(jnp.asarray(X2, dtype=float))
        return gram(k, X1, X2, default_theta(k, np.ones(X1.shape[1])))

    # ----------------------------------------------------------------- data-dependent kernels
    def fit(self, X: np.ndarray, y: np.ndarray | None = None) -> Kernel:
        """Learn data-dependent parts of the kernel; the base kernels learn nothing."""
        return self

    @property
    def is_fitted(self) -> bool:
        """Return ``True`` when the data-dependent parts are learned (base kernels have none)."""
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

    def fit(self, X, y=None):
        return type(self)(self.k1.fit(X, y), self.k2.fit(X, y))

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


def gram(
    kernel: Kernel,
    X1: ArrayLike,
    X2: ArrayLike | None = None,
    theta: dict | None = None,
    *,
    batch_size: int = 4096,
) -> jax.Array:
    """Gram matrix of ``kernel`` between the rows of ``X1`` and ``X2``.

    Rows of ``X1`` are processed in blocks of ``batch_size``
    (:func:`~bayeskern.batching.batched_map`) so that the intermediate arrays of large inputs
    stay bounded; the result itself is ``(n1, n2)``.
    ``theta`` defaults to :func:`default_theta` with unit scales. With ``X2`` omitted (or the
    same object as ``X1``) the kernel sees one array twice, so kernels that symmetrize
    ``K(X, X)`` against rounding can do so.
    """
    same = X2 is None or X2 is X1
    X1 = jnp.atleast_2d(jnp.asarray(X1))
    X2 = X1 if same else jnp.atleast_2d(jnp.asarray(X2))
    if X1.shape[1] != X2.shape[1]:
        raise ValueError(f"X1 has {X1.shape[1]} columns but X2 has {X2.shape[1]}")
    if kernel.leaves() and kernel.leaves()[0].name_ is None:
        kernel = name_leaves(kernel)
    if theta is None:
        theta = default_theta(kernel, np.ones(X1.shape[1]))
    return batched_map(lambda b: kernel.gram(theta, b, X2), X1, batch_size, blocks=True)


def kernel_from_config(config: dict, state: dict[str, np.ndarray] | None = None) -> Kernel:
    """Rebuild a kernel from :meth:`Kernel.get_config` (and fitted ``state``) without pickle."""
    name = config.get("class")
    if name not in KERNEL_REGISTRY:
        raise ValueError(f"unknown kernel class {name!r} in saved configuration")
    params = {}
    for k, v in config.get("params", {}).items():
        if isinstance(v, dict) and "__kernel__" in v:
            v = kernel_from_config(v["__kernel__"])
        params[k] = v
    kernel = KERNEL_REGISTRY[name](**params)
    for k, v in (state or {}).items():
        setattr(kernel, k, np.asarray(v))
    return kernel
