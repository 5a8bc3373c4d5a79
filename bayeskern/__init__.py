"""bayeskern: Bayesian kernel learning on NumPyro and JAX.

Importing bayeskern turns on JAX's float64 mode (``jax_enable_x64``): kernel algebra
(Cholesky factors of Gram matrices, marginal likelihoods) needs it. Set the environment
variable ``BAYESKERN_X64=0`` before import to keep JAX in float32.
"""

import os as _os

import jax as _jax

if _os.environ.get("BAYESKERN_X64", "1") != "0":
    _jax.config.update("jax_enable_x64", True)

from bayeskern import datasets, diagnostics, inference, kernels  # noqa: E402
from bayeskern.estimators import GPClassifier, GPRegressor  # noqa: E402
from bayeskern.report import report  # noqa: E402
from bayeskern.runs import load_run, save_run  # noqa: E402

__version__ = "0.1.0"

__all__ = [
    "GPRegressor",
    "GPClassifier",
    "report",
    "load_run",
    "save_run",
    "kernels",
    "datasets",
    "diagnostics",
    "inference",
    "__version__",
]
