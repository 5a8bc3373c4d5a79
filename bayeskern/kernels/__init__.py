"""Kernels: pure JAX point-pair functions, composable with ``+`` and ``*``.

Base kernels: :class:`RBF`, :class:`Laplacian`, :class:`Matern32`, :class:`Matern52`,
:class:`RationalQuadratic`, :class:`Linear`, :class:`Periodic`, :class:`MahalanobisRBF`.
Data-dependent kernels (fitted on the training data by the estimators, through
:func:`bayeskern.learning.fit_kernel`, then pure) live in their own modules and are exported
here; they hold the fitted state, the training functions live in :mod:`bayeskern.learning`.
"""

from .base import (
    KERNEL_REGISTRY,
    Constant,
    Hyper,
    Kernel,
    Product,
    Sum,
    default_theta,
    kernel_from_config,
    name_leaves,
    term_name,
)

# isort: split
# The stationary kernels first: import order is KERNEL_REGISTRY's order.
from .stationary import (
    RBF,
    Laplacian,
    Linear,
    MahalanobisRBF,
    Matern32,
    Matern52,
    Periodic,
    RationalQuadratic,
    safe_norm,
)

# isort: split
from .ckrbf import CkRBF
from .conformal import Conformal
from .labrbf import LABRBF, LABRBFFeatures
from .spectral import SpectralMixture
from .vsk import VSK

__all__ = [
    "Kernel",
    "Hyper",
    "Sum",
    "Product",
    "Constant",
    "RBF",
    "Laplacian",
    "Matern32",
    "Matern52",
    "RationalQuadratic",
    "Linear",
    "Periodic",
    "MahalanobisRBF",
    "VSK",
    "CkRBF",
    "LABRBF",
    "LABRBFFeatures",
    "Conformal",
    "SpectralMixture",
    "name_leaves",
    "term_name",
    "default_theta",
    "kernel_from_config",
    "KERNEL_REGISTRY",
    "safe_norm",
    "get_kernel",
]

_BY_NAME = {
    "rbf": RBF,
    "laplacian": Laplacian,
    "matern32": Matern32,
    "matern52": Matern52,
    "rq": RationalQuadratic,
    "rational_quadratic": RationalQuadratic,
    "linear": Linear,
    "periodic": Periodic,
    "mahalanobis": MahalanobisRBF,
    "mahalanobis_rbf": MahalanobisRBF,
}


def get_kernel(spec) -> Kernel:
    """Return a kernel from an instance or a name such as ``"rbf"`` or ``"linear+rbf"``.

    Names are combined with ``+`` (sum) and ``*`` (product, binding tighter).
    """
    if isinstance(spec, Kernel):
        return spec
    if not isinstance(spec, str) or not spec.strip():
        raise ValueError(f"kernel must be a Kernel or a kernel name, got {spec!r}")
    total = None
    for term in spec.lower().replace(" ", "").split("+"):
        prod = None
        for name in term.split("*"):
            if name not in _BY_NAME:
                raise ValueError(f"kernel: unknown kernel name {name!r}; known: {sorted(_BY_NAME)}")
            k = _BY_NAME[name]()
            prod = k if prod is None else prod * k
        total = prod if total is None else total + prod
    return total
