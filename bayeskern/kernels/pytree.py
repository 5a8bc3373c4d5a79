"""Kernels as JAX pytrees: the leaves are their fitted floating-point arrays.

:func:`register_fitted_pytree` (called for every kernel class) registers a class whose
fitted arrays (attributes ending in ``_``) are the leaves and whose other attributes are
static data compared by value, so that a fitted kernel can be an argument of a jitted
function and ``jit`` recompiles only when that static part changes. A kernel's methods
can then meet tracers in its own leaves as well as in their inputs: :func:`array_module`
chooses between NumPy and ``jax.numpy`` for the kernels that compute concrete inputs in
NumPy.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np

__all__ = ["register_fitted_pytree"]


def is_traced(*arrays) -> bool:
    """Return whether any of ``arrays`` is a JAX tracer (inside a traced function)."""
    return any(isinstance(a, jax.core.Tracer) for a in arrays)


def array_module(*arrays):
    """Return ``numpy`` for concrete arrays, ``jax.numpy`` when any of them is traced.

    For kernels evaluated on concrete inputs on many shapes (the SVM route's folds, grids
    and new data; fitting a data-dependent kernel): op by op, JAX compiles every operation
    again for each new shape, where NumPy compiles nothing. Inside a traced model the
    operations are JAX's, as everywhere.
    """
    return jnp if is_traced(*arrays) else np


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
