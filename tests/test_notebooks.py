"""The notebooks in notebooks/: stored with the outputs of a full run, and still running.

``make notebooks`` (``docs/execute_notebooks.py``) runs each notebook top to bottom with the full
sampler settings and stores its outputs, which the repository and the built docs show. Here each
notebook is run again in quick mode (``BAYESKERN_QUICK=1``: tiny sampler settings, the GaBaSR
notebook on every third training month), one after another in one kernel from an emptied
namespace, and every code cell must produce the kinds of output that are stored for it: a figure
where a figure is stored, no error anywhere. A notebook that breaks, or whose stored figures no
longer come from its code, fails CI.
"""

import copy
import os
from pathlib import Path

import pytest

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")
run_sync = pytest.importorskip("jupyter_core.utils").run_sync  # nbclient's own event loop

#: gp_co2 last: its GP is the reference GP of `bayeskern demo --quick` (same kernel, data and
#: sampler settings), which tests/test_runs_cli.py fits early on the other pytest worker, so by
#: then its programs are in the run's shared compilation cache
NOTEBOOKS = sorted(
    (Path(__file__).parent.parent / "notebooks").glob("*.ipynb"),
    key=lambda p: (p.stem == "gp_co2", p.stem),
)


def _kinds(cell) -> set:
    """The kinds of output a code cell produced: ``figure``, ``table``, ``error``.

    Text (progress, timings, numbers) varies between runs and is not compared.
    """
    kinds = set()
    for out in cell.get("outputs", []):
        if out.get("output_type") == "error":
            kinds.add("error")
        data = out.get("data", {})
        if "image/png" in data or "image/svg+xml" in data:
            kinds.add("figure")
        if "text/html" in data:
            kinds.add("table")
    return kinds


def _code_cells(nb):
    return [c for c in nb.cells if c.cell_type == "code"]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_notebook_is_stored_with_the_outputs_of_one_full_run(path):
    nb = nbformat.read(path, as_version=4)
    meta = nb.metadata.get("bayeskern_executed")
    assert meta, f"{path.name} has no stored run: run `make notebooks NB={path.stem}`"
    assert {"date", "machine", "seconds"} <= set(meta)
    cells = _code_cells(nb)
    counts = [c.get("execution_count") for c in cells]
    assert counts == list(range(1, len(cells) + 1)), (
        f"{path.name}: not executed top to bottom in one kernel ({counts})"
    )
    kinds = [_kinds(c) for c in cells]
    assert not any("error" in k for k in kinds), f"{path.name}: a stored cell shows an error"
    assert any("figure" in k for k in kinds), f"{path.name}: no figure stored"


def _execute(nb, tmp_path, timeout, km=None):
    client = nbclient.NotebookClient(
        nb,
        km=km,
        timeout=timeout,
        kernel_name="python3",
        resources={"metadata": {"path": str(tmp_path)}},
    )
    client.execute()
    if km is not None:
        client.kc.stop_channels()
    return nb


#: run first in the shared kernel before each notebook: the user namespace emptied (``%reset``),
#: every figure closed, the notebook's own folder made the working directory; binds no name
PRELUDE = """%reset -f
__import__("matplotlib.pyplot").pyplot.close("all")
__import__("os").chdir({path!r})"""


@pytest.fixture(scope="module")
def kernel():
    """One Jupyter kernel for the quick runs of all the notebooks, as a reader who opens them
    one after another in a running Jupyter server has: each notebook starts from an empty
    namespace (`PRELUDE`) but finds the modules its predecessors imported and the programs JAX
    compiled for them, so the kernel's start, the imports and the common programs are paid once.
    The kernel's environment: quick mode (``BAYESKERN_QUICK=1``) and its own inline figure
    backend, as when the outputs were stored (Agg would show nothing)."""
    from jupyter_client.manager import AsyncKernelManager  # the kind nbclient drives

    env = {**os.environ, "BAYESKERN_QUICK": "1"}
    env.pop("MPLBACKEND", None)
    km = AsyncKernelManager(kernel_name="python3")
    run_sync(km.start_kernel)(env=env)
    yield km
    run_sync(km.shutdown_kernel)(now=True)


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_notebook_executes_and_makes_its_stored_outputs(path, tmp_path, kernel):
    """Quick mode, in the default suite: each cell's kinds of output are the stored ones."""
    if not run_sync(kernel.is_alive)():  # an earlier notebook crashed it: start a fresh one
        run_sync(kernel.restart_kernel)(now=True)
    stored = nbformat.read(path, as_version=4)
    fresh = copy.deepcopy(stored)
    fresh.cells.insert(0, nbformat.v4.new_code_cell(PRELUDE.format(path=str(tmp_path))))
    _execute(fresh, tmp_path, timeout=600, km=kernel)
    prelude, *cells = _code_cells(fresh)
    assert not prelude.outputs, f"the prelude printed {prelude.outputs}"
    for i, (old, new) in enumerate(zip(_code_cells(stored), cells, strict=True)):
        assert "error" not in _kinds(new), f"{path.name}, code cell {i + 1}: error"
        assert _kinds(new) == _kinds(old), (
            f"{path.name}, code cell {i + 1}: a fresh run gives {sorted(_kinds(new))}, the "
            f"stored output has {sorted(_kinds(old))}; run `make notebooks NB={path.stem}`"
        )


def test_kinds_tell_figures_errors_and_tables_apart():
    cell = nbformat.v4.new_code_cell("x")
    assert _kinds(cell) == set()
    cell.outputs = [
        nbformat.v4.new_output("display_data", data={"image/png": "iVBOR"}),
        nbformat.v4.new_output("stream", text="fit took 3 s\n"),
    ]
    assert _kinds(cell) == {"figure"}
    cell.outputs.append(
        nbformat.v4.new_output("error", ename="ValueError", evalue="x", traceback=[])
    )
    cell.outputs.append(
        nbformat.v4.new_output("execute_result", data={"text/html": "<table>"}, execution_count=1)
    )
    assert _kinds(cell) == {"figure", "error", "table"}


@pytest.mark.slow
def test_gabasr_notebook_full_mode(tmp_path, monkeypatch):
    """The GaBaSR notebook's full analysis (all training months, 4 x (500 + 500) draws)."""
    monkeypatch.delenv("BAYESKERN_QUICK", raising=False)
    monkeypatch.setenv("MPLBACKEND", "Agg")
    path = next(p for p in NOTEBOOKS if p.stem == "gabasr_co2")
    _execute(nbformat.read(path, as_version=4), tmp_path, timeout=3600)
