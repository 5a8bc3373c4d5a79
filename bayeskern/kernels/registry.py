"""Registries of kernel classes: by name, and their training functions.

:data:`KERNEL_REGISTRY` lets :func:`kernel_from_config` rebuild a saved kernel without pickle;
:data:`LEARNERS` maps a kernel class to the training function that fits it
(:func:`register_learner`, :func:`learner`).
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable

import numpy as np

# bayeskern.kernels.base imports this module, so the kernel class is named in docstrings only.

__all__ = ["KERNEL_REGISTRY", "LEARNERS", "kernel_from_config", "learner", "register_learner"]

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


def learner(kernel) -> Callable:
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


def kernel_from_config(config: dict, state: dict[str, np.ndarray] | None = None):
    """Rebuild a kernel from :meth:`Kernel.get_config` (and fitted ``state``) without pickle.

    Returns
    -------
    Kernel
        An instance of the class named in ``config``, with ``state`` set on it.
    """
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
