"""bayeskern: Bayesian kernel learning on NumPyro and JAX.

Importing bayeskern turns on JAX's float64 mode (``jax_enable_x64``): kernel algebra
(Cholesky factors of Gram matrices, marginal likelihoods) needs it. Set the environment
variable ``BAYESKERN_X64=0`` before import to keep JAX in float32. It also limits BLAS to
one thread per process (``BAYESKERN_BLAS_THREADS`` overrides): see the comment below.
"""

import os as _os

import jax as _jax
import scipy.linalg as _scipy_linalg  # noqa: F401  (loads the LAPACK that jaxlib calls)
from threadpoolctl import threadpool_limits as _threadpool_limits

if _os.environ.get("BAYESKERN_X64", "1") != "0":
    _jax.config.update("jax_enable_x64", True)

# one CPU device per MCMC chain, before anything initializes JAX's backend (bayeskern.devices)
from bayeskern.devices import configure_cpu_devices as _configure_cpu_devices  # noqa: E402

_configure_cpu_devices()

# MCMC does many small factorizations; multi-threaded OpenBLAS spin-waits on them and, on a
# busy machine, measured 100x slower (425 x 425 Cholesky: 700 ms vs 8 ms). One BLAS thread
# per process by default; set BAYESKERN_BLAS_THREADS to change it.
_threadpool_limits(int(_os.environ.get("BAYESKERN_BLAS_THREADS", "1")), user_api="blas")

from bayeskern import datasets, diagnostics, inference, kernels  # noqa: E402
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
from bayeskern.report import report  # noqa: E402
from bayeskern.runs import load_run, save_run  # noqa: E402

__version__ = "0.1.0"

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
    "load_run",
    "save_run",
    "kernels",
    "datasets",
    "diagnostics",
    "inference",
    "__version__",
]
