"""bayeskern: Bayesian kernel learning on NumPyro and JAX.

Importing bayeskern turns on JAX's float64 mode (``jax_enable_x64``): kernel algebra
(Cholesky factors of Gram matrices, marginal likelihoods) needs it. Set the environment
variable ``BAYESKERN_X64=0`` before import to keep JAX in float32. The only other setting
made at import is the number of JAX CPU devices (:mod:`bayeskern.devices`), which JAX accepts
only before it starts. Importing changes neither matplotlib's backend nor BLAS threads: fits
and predictions limit BLAS to one thread while they run (``BAYESKERN_BLAS_THREADS``
overrides, :func:`bayeskern.devices.limit_blas`), and reports render their figures off
pyplot (:func:`bayeskern.plots.detached`).

The public names are loaded lazily (PEP 562 module ``__getattr__``, as in SciPy's SPEC 1):
``import bayeskern`` imports neither JAX nor NumPyro, so the command line's ``--help`` is
instant; ``bayeskern.GPRegressor`` imports what it needs on first use. The two JAX settings
are made when JAX is imported: at once if it already is, else right after its import (by
whoever imports it first, bayeskern or the user), before any array can exist.
"""

import importlib.util as _importlib_util
import os as _os
import sys as _sys
import types as _types

from bayeskern._lazy import lazy_getattr as _lazy_getattr
from bayeskern._version import __version__

#: public name -> the module that defines it
_LAZY = {
    **dict.fromkeys(
        [
            "CkRBFClassifier",
            "ConformalKernelClassifier",
            "GaBaSRClassifier",
            "GaBaSRRegressor",
            "GPClassifier",
            "GPRegressor",
            "KernelSVC",
            "LABRBFRegressor",
            "MkRBFClassifier",
            "VSKClassifier",
            "VSKFeatureExtractor",
            "VSKRegressor",
        ],
        "bayeskern.estimators",
    ),
    "report": "bayeskern.report",
    "compare_report": "bayeskern.report",
    "load_run": "bayeskern.runs",
    "save_run": "bayeskern.runs",
}
_SUBMODULES = ["datasets", "diagnostics", "experiments", "inference", "kernels", "learning"]

__all__ = [
    "GPRegressor",
    "GPClassifier",
    "GaBaSRRegressor",
    "GaBaSRClassifier",
    "VSKClassifier",
    "VSKRegressor",
    "VSKFeatureExtractor",
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
    "experiments",
    "inference",
    "__version__",
]


__getattr__ = _lazy_getattr(__name__, _LAZY)


class _Package(_types.ModuleType):
    """The package's module type: ``bayeskern.report`` stays the function.

    Importing the submodule :mod:`bayeskern.report` binds it as the package's attribute
    ``report`` (the import system does so after loading any submodule), which would hide the
    public function of the same name once the submodule is loaded; here the function is bound
    instead.
    """

    def __setattr__(self, name, value):
        if name == "report" and isinstance(value, _types.ModuleType):
            value = value.report
        super().__setattr__(name, value)


_sys.modules[__name__].__class__ = _Package


def __dir__():
    return sorted(set(globals()) | set(__all__) | set(_SUBMODULES))


def _configure_jax(jax) -> None:
    """JAX's float64 mode (unless ``BAYESKERN_X64=0``) and its CPU device count."""
    import scipy.linalg  # noqa: F401  (loads the LAPACK that jaxlib calls)

    if _os.environ.get("BAYESKERN_X64", "1") != "0":
        jax.config.update("jax_enable_x64", True)
    from bayeskern.devices import configure_cpu_devices

    configure_cpu_devices()


class _ConfigureJaxOnImport:
    """A ``sys.meta_path`` finder that runs :func:`_configure_jax` right after ``import jax``.

    It finds nothing itself: for ``jax`` it asks the finders after it for the module's spec and
    wraps that spec's ``exec_module``, then removes itself, so it acts once and only on JAX.
    """

    def find_spec(self, name, path=None, target=None):
        if name != "jax":
            return None
        if self in _sys.meta_path:
            _sys.meta_path.remove(self)
        spec = _importlib_util.find_spec(name)
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        loader, exec_module = spec.loader, spec.loader.exec_module

        def exec_then_configure(module):
            try:
                exec_module(module)
            finally:
                del loader.exec_module  # the loader's own method again
            _configure_jax(module)

        loader.exec_module = exec_then_configure
        return spec


if "jax" in _sys.modules:
    _configure_jax(_sys.modules["jax"])
elif not any(isinstance(f, _ConfigureJaxOnImport) for f in _sys.meta_path):
    _sys.meta_path.insert(0, _ConfigureJaxOnImport())
