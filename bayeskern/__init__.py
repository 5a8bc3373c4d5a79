"""bayeskern: Bayesian kernel learning on NumPyro and JAX.

Importing bayeskern turns on JAX's float64 mode (``jax_enable_x64``): kernel algebra
(Cholesky factors of Gram matrices, marginal likelihoods) needs it. Set the environment
variable ``BAYESKERN_X64=0`` before import to keep JAX in float32. The only other setting
made at import is the number of JAX CPU devices (:mod:`bayeskern.devices`), which JAX accepts
only before it starts. Importing changes neither matplotlib's backend nor BLAS threads: fits
and predictions limit BLAS to one thread while they run (``BAYESKERN_BLAS_THREADS``
overrides, :func:`bayeskern.devices.limit_blas`), and reports render their figures off
pyplot (:func:`bayeskern.plots.detached`).
"""

import os as _os

import jax as _jax
import scipy.linalg as _scipy_linalg  # noqa: F401  (loads the LAPACK that jaxlib calls)

if _os.environ.get("BAYESKERN_X64", "1") != "0":
    _jax.config.update("jax_enable_x64", True)

# one CPU device per MCMC chain, before anything initializes JAX's backend (bayeskern.devices)
from bayeskern.devices import configure_cpu_devices as _configure_cpu_devices  # noqa: E402

_configure_cpu_devices()

from bayeskern import datasets, diagnostics, inference, kernels, learning  # noqa: E402, F401
from bayeskern._version import __version__  # noqa: E402
from bayeskern.estimators import (  # noqa: E402
    CkRBFClassifier,
    ConformalKernelClassifier,
    GaBaSRClassifier,
    GaBaSRRegressor,
    GPClassifier,
    GPRegressor,
    KernelSVC,
    LABRBFRegressor,
    MkRBFClassifier,
    VSKClassifier,
    VSKFeatureExtractor,
    VSKRegressor,
    compare_vsk,
)
from bayeskern.report import compare_report, report  # noqa: E402
from bayeskern.runs import load_run, save_run  # noqa: E402

__all__ = [
    "GPRegressor",
    "GPClassifier",
    "GaBaSRRegressor",
    "GaBaSRClassifier",
    "VSKClassifier",
    "VSKRegressor",
    "VSKFeatureExtractor",
    "compare_vsk",
    "CkRBFClassifier",
    "MkRBFClassifier",
    "LABRBFRegressor",
    "ConformalKernelClassifier",
    "KernelSVC",
    "report",
    "compare_report",
    "load_run",
    "save_run",
    "kernels",
    "datasets",
    "diagnostics",
    "inference",
    "__version__",
]
