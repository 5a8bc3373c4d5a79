"""Registry of kernel classes by name, for rebuilding a saved kernel without pickle.

:data:`KERNEL_REGISTRY` lets :func:`kernel_from_config` rebuild a saved kernel from its
configuration and fitted state. The training functions that fit a kernel live in the layer
above, :mod:`bayeskern.learning`.
"""

from __future__ import annotations

import numpy as np

# bayeskern.kernels.base imports this module, so the kernel class is named in docstrings only.

__all__ = ["KERNEL_REGISTRY", "kernel_from_config"]

#: Kernel classes by name; :func:`kernel_from_config` rebuilds only these (no pickle, no eval).
KERNEL_REGISTRY: dict[str, type] = {}


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
