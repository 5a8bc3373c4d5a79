"""Architecture checks: the import layering of bayeskern, and an import without side effects.

The layers, from the bottom up (:data:`LAYERS`); a module imports only modules of its own
layer or of the layers below it, and no import cycle exists, counting imports inside
functions (a lazy import is still a dependency):

0. foundation: ``_version``, ``devices``, ``linalg``, ``batching``, ``programs``, and
   ``datasets`` (which stands apart: it imports nothing else from bayeskern);
1. ``kernels``: fitted state and pure JAX Gram matrices; no models, no plotting;
2. features and learning code: ``features`` (random Fourier features), ``blr``, ``laplace``,
   ``learning`` (kernel training loops);
3. ``models`` (``bayeskern.models``, the plain NumPyro functions in ``models/``);
4. ``diagnostics``: the one place that talks to ArviZ;
5. inference and its results: ``inference`` (NUTS), ``gabasr_gibbs`` (the custom sampler),
   ``predictive``, ``sharding``, ``runs``;
6. ``estimators``: scikit-learn glue;
7. ``experiments``: the papers' studies (tuning-ease curves, the VSK grid and sweeps);
8. ``plots`` and ``report``: report panels are found through the registry in
   ``bayeskern.plots.panels``, so nothing below imports plotting code;
9. the package itself (``bayeskern/__init__.py``, the public API) and ``cli``.
"""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

#: (layer name, module prefixes), bottom first
LAYERS = [
    (
        "foundation",
        [
            "bayeskern._version",
            "bayeskern._lazy",
            "bayeskern.devices",
            "bayeskern.linalg",
            "bayeskern.batching",
            "bayeskern.datasets",
            "bayeskern.random",
            "bayeskern.programs",
        ],
    ),
    ("kernels", ["bayeskern.kernels"]),
    (
        "features/learning",
        [
            "bayeskern.features",
            "bayeskern.blr",
            "bayeskern.laplace",
            "bayeskern.laplace_softmax",
            "bayeskern.learning",
            "bayeskern.hsgp",
            "bayeskern.hsgp_basis",
            "bayeskern.hsgp_design",
            "bayeskern.hsgp_checks",
        ],
    ),
    ("models", ["bayeskern.models"]),
    ("diagnostics", ["bayeskern.diagnostics", "bayeskern.convergence", "bayeskern.metrics"]),
    (
        "inference",
        ["bayeskern.inference", "bayeskern.predictive", "bayeskern.sharding", "bayeskern.runs"],
    ),
    ("estimators", ["bayeskern.estimators"]),
    ("experiments", ["bayeskern.experiments"]),
    (
        "plots/report",
        [
            "bayeskern.plots",
            "bayeskern.report",
            "bayeskern.report_calibration",
            "bayeskern.report_classical",
            "bayeskern.report_compare",
            "bayeskern.report_html",
            "bayeskern.report_priors",
            "bayeskern.loo_calibration",
        ],
    ),
    ("api/cli", ["bayeskern.cli", "bayeskern.cli_io", "bayeskern.cli_demo"]),
]
TOP = len(LAYERS) - 1  # the package __init__ (the public API) sits with the CLI


def _modules() -> dict[str, Path]:
    """Module name -> file, for ``bayeskern/`` and ``models/`` (installed as bayeskern.models)."""
    mods = {}
    for folder, package in (("bayeskern", "bayeskern"), ("models", "bayeskern.models")):
        for path in sorted((ROOT / folder).rglob("*.py")):
            parts = [package, *path.relative_to(ROOT / folder).with_suffix("").parts]
            if parts[-1] == "__init__":
                parts = parts[:-1]
            mods[".".join(parts)] = path
    return mods


def _known(name: str, mods) -> str | None:
    """The longest prefix of ``name`` that is one of our modules."""
    while name and name not in mods:
        name = name.rpartition(".")[0]
    return name or None


def import_edges(mods=None) -> list[tuple[str, str, str]]:
    """``(importer, imported, "file:line")`` for every import of a bayeskern module.

    Imports anywhere in a file count (inside functions too); relative imports are resolved;
    ``from package import name`` is an edge to the submodule ``package.name`` when that is a
    module, else to ``package`` itself.
    """
    mods = _modules() if mods is None else mods
    edges = []
    for mod, path in mods.items():
        is_pkg = path.name == "__init__.py"
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = mod.split(".") if is_pkg else mod.split(".")[:-1]
                    base = base[: len(base) - (node.level - 1)]
                    base = ".".join(base + ([node.module] if node.module else []))
                else:
                    base = node.module
                targets = [f"{base}.{a.name}" for a in node.names]
            else:
                continue
            where = f"{path.relative_to(ROOT)}:{node.lineno}"
            for t in targets:
                t = _known(t, mods)
                if t is not None and t != mod:
                    edges.append((mod, t, where))
    return edges


def layer_of(mod: str) -> int:
    """Index in :data:`LAYERS` of a module (the longest matching prefix)."""
    if mod == "bayeskern":
        return TOP
    best = None
    for i, (_, prefixes) in enumerate(LAYERS):
        for p in prefixes:
            if (mod == p or mod.startswith(p + ".")) and (best is None or len(p) > best[1]):
                best = (i, len(p))
    if best is None:
        raise AssertionError(f"module {mod} has no layer: add it to LAYERS in {__file__}")
    return best[0]


def upward_imports(edges) -> list[str]:
    """Messages for the edges that import from a higher layer, or datasets leaving its box."""
    bad = []
    for a, b, where in edges:
        la, lb = layer_of(a), layer_of(b)
        if lb > la:
            bad.append(f"{a} ({LAYERS[la][0]}) imports {b} ({LAYERS[lb][0]}) at {where}")
        elif a.startswith("bayeskern.datasets") and not b.startswith("bayeskern.datasets"):
            bad.append(f"{a} (datasets stands apart) imports {b} at {where}")
    return bad


def import_cycles(edges) -> list[str]:
    """One message per import cycle found (depth-first search), naming its edges."""
    graph: dict[str, list[tuple[str, str]]] = {}
    for a, b, where in edges:
        graph.setdefault(a, []).append((b, where))
    state, stack, cycles = {}, [], []

    def visit(node):
        state[node] = "open"
        stack.append(node)
        for nxt, where in graph.get(node, []):
            if state.get(nxt) == "open":
                loop = stack[stack.index(nxt) :] + [nxt]
                cycles.append(" -> ".join(loop) + f" (closing edge at {where})")
            elif nxt not in state:
                visit(nxt)
        stack.pop()
        state[node] = "done"

    for node in sorted(graph):
        if node not in state:
            visit(node)
    return cycles


def test_every_module_has_a_layer():
    for mod in _modules():
        layer_of(mod)


def test_no_upward_import():
    bad = upward_imports(import_edges())
    assert not bad, "imports against the layering:\n" + "\n".join(bad)


def test_no_import_cycle():
    cycles = import_cycles(import_edges())
    assert not cycles, "import cycles:\n" + "\n".join(cycles)


def test_checks_name_the_offending_edge():
    edges = [
        ("bayeskern.kernels.vsk", "bayeskern.plots.vsk", "k.py:3"),
        ("bayeskern.plots.vsk", "bayeskern.kernels.vsk", "p.py:5"),
    ]
    assert upward_imports(edges) == [
        "bayeskern.kernels.vsk (kernels) imports bayeskern.plots.vsk (plots/report) at k.py:3"
    ]
    assert import_cycles(edges) == [
        "bayeskern.kernels.vsk -> bayeskern.plots.vsk -> bayeskern.kernels.vsk "
        "(closing edge at p.py:5)"
    ]


def test_edges_include_lazy_and_relative_imports():
    edges = {(a, b) for a, b, _ in import_edges()}
    assert ("bayeskern.kernels.ckrbf", "bayeskern.kernels.base") in edges  # from .base import
    assert ("bayeskern.cli_demo", "bayeskern.report") in edges  # inside a function


_PROBE = """
import json, matplotlib, scipy.linalg, threadpoolctl
def blas():
    return sorted((i["filepath"], i["num_threads"]) for i in threadpoolctl.threadpool_info()
                  if i["user_api"] == "blas")
before = (matplotlib.get_backend(), blas())
import bayeskern
for name in bayeskern.__all__:  # the public names load lazily: load them all (JAX included)
    getattr(bayeskern, name)
print(json.dumps({"before": before, "after": (matplotlib.get_backend(), blas())}))
"""


@pytest.mark.parametrize("backend", ["svg", "pdf"])
def test_import_keeps_matplotlib_backend_and_blas_threads(backend):
    env = {
        **os.environ,
        "MPLBACKEND": backend,
        "OPENBLAS_NUM_THREADS": "2",
        "BAYESKERN_CPU_DEVICES": "0",
    }
    env.pop("BAYESKERN_BLAS_THREADS", None)
    out = subprocess.run(
        [sys.executable, "-c", _PROBE],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    )
    res = json.loads(out.stdout.strip().splitlines()[-1])
    assert res["before"][0] == backend
    assert res["after"] == res["before"], "import bayeskern changed the backend or BLAS threads"


def test_limit_blas_scopes_the_limit():
    import threadpoolctl

    from bayeskern.devices import limit_blas

    def blas():
        return [
            i["num_threads"] for i in threadpoolctl.threadpool_info() if i["user_api"] == "blas"
        ]

    with threadpoolctl.threadpool_limits(2, user_api="blas"):
        outside = blas()
        inside = limit_blas(blas)()
        assert blas() == outside
    assert inside and all(n == 1 for n in inside)


def test_every_package_is_installed():
    """``pyproject.toml`` lists every package folder, so a wheel (not only an editable
    install) holds the whole library (``bayeskern.learning`` was once missing)."""
    import tomllib

    listed = set(
        tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"]
    )
    found = {
        ".".join(("bayeskern", *p.parent.relative_to(ROOT / "bayeskern").parts))
        for p in (ROOT / "bayeskern").rglob("__init__.py")
    } | {"bayeskern.models"}
    found = {f.rstrip(".") for f in found}
    assert found - listed == set(), f"packages missing from pyproject.toml: {found - listed}"


def test_models_folder_refuses_a_second_copy_under_its_folder_name():
    """``models/`` is installed as ``bayeskern.models``; imported from the repository root as
    ``models`` it would load a second copy of every model module, so it refuses with the right
    name, and the installed package still imports."""
    out = subprocess.run(
        [sys.executable, "-c", "import models"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode != 0
    assert "ImportError" in out.stderr and "import bayeskern.models" in out.stderr
    import bayeskern.models

    assert Path(bayeskern.models.__file__).resolve() == ROOT / "models" / "__init__.py"


def test_kernels_hold_state_and_training_is_in_learning():
    """No class of ``bayeskern.kernels`` (kernels, VSK scalings) has a ``fit``: the training
    functions live in :mod:`bayeskern.learning`, looked up in a table written there, not
    registered by decorators in a kernel-layer registry."""
    import importlib
    import inspect

    import bayeskern.kernels.registry as registry

    assert not hasattr(registry, "LEARNERS")
    assert not hasattr(registry, "register_learner") and not hasattr(registry, "learner")
    with_fit = []
    for mod in _modules():
        if not mod.startswith("bayeskern.kernels"):
            continue
        module = importlib.import_module(mod)
        for name, cls in vars(module).items():
            if inspect.isclass(cls) and cls.__module__ == mod and "fit" in vars(cls):
                with_fit.append(f"{mod}.{name}")
    assert not with_fit, f"kernel-layer classes with a fit method: {with_fit}"
    # old code that calls kernel.fit is told where the training went
    from bayeskern.kernels import CkRBF

    with pytest.raises(AttributeError, match=r"no attribute 'fit'; .*learning\.fit_kernel"):
        CkRBF().fit([[0.0]])
    with pytest.raises(AttributeError, match=r"no attribute 'other'$"):
        _ = CkRBF().other


def test_one_public_way_to_a_gram_matrix():
    """``kernel(X1, X2[, theta])`` is the one public call that returns a Gram matrix: no
    module of the package exports a ``gram`` function (the kernels' ``gram`` / ``prepare``
    methods are what a kernel implements, not a second call)."""
    import importlib
    import re

    import numpy as np

    import bayeskern.kernels as kernels

    exported = [
        f"{mod}.{name}"
        for mod in _modules()
        for name in getattr(importlib.import_module(mod), "__all__", [])
        if re.search(r"(^|_)gram(_|$)", name)
    ]
    assert not exported, exported
    assert not hasattr(kernels, "gram")
    X = np.random.default_rng(0).normal(size=(5, 2))
    k = kernels.RBF(lengthscale=0.7) + kernels.Periodic(period=1.5)
    theta = kernels.default_theta(kernels.name_leaves(k), np.ones(2))
    named = kernels.name_leaves(k)
    np.testing.assert_allclose(named(X, X, theta), named.gram(theta, X, X), rtol=1e-12)
    np.testing.assert_allclose(k(X), named.gram(theta, X, X), rtol=1e-12)


#: the most lines a module of ``bayeskern/`` or ``models/`` may have: a longer one holds
#: more than one concern and is split
MAX_MODULE_LINES = 500


def test_no_module_over_the_line_limit():
    sizes = {
        str(p.relative_to(ROOT)): len(p.read_text().splitlines())
        for folder in ("bayeskern", "models")
        for p in (ROOT / folder).rglob("*.py")
    }
    assert len(sizes) > 100
    assert not {p: n for p, n in sizes.items() if n > MAX_MODULE_LINES}
