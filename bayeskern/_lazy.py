"""Public names of a package imported on first use (PEP 562 module ``__getattr__``).

The shape of SciPy's SPEC 1 (``lazy_loader.attach``): a package lists which module defines
each public name, and importing the package imports none of them.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
from collections.abc import Callable

__all__ = ["lazy_getattr"]


def lazy_getattr(package: str, names: dict[str, str]) -> Callable[[str], object]:
    """Return a module ``__getattr__`` for ``package`` that imports on first use.

    A name in ``names`` (public name -> the module defining it) is imported from its module
    and bound on the package, so that later lookups skip ``__getattr__``; any other name is
    a submodule (``package.name``), imported when it exists; else ``AttributeError``.
    """

    def __getattr__(name: str):
        if name not in names:
            if name.startswith("__") or importlib.util.find_spec(f"{package}.{name}") is None:
                raise AttributeError(f"module {package!r} has no attribute {name!r}")
            return importlib.import_module(f"{package}.{name}")
        value = getattr(importlib.import_module(names[name]), name)
        setattr(sys.modules[package], name, value)
        return value

    return __getattr__
