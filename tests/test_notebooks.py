"""Every notebook in notebooks/ runs end to end (tiny sampler settings via BAYESKERN_QUICK=1)."""

import os
from pathlib import Path

import pytest

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")

NOTEBOOKS = sorted((Path(__file__).parent.parent / "notebooks").glob("*.ipynb"))


def test_notebooks_have_no_stored_outputs():
    for path in NOTEBOOKS:
        nb = nbformat.read(path, as_version=4)
        for cell in nb.cells:
            assert not cell.get("outputs"), f"{path.name} has stored outputs; strip them"
            if cell.cell_type == "code":
                assert cell.get("execution_count") is None, \
                    f"{path.name} has execution counts; clear them"


def _execute(path, tmp_path, timeout):
    nb = nbformat.read(path, as_version=4)
    client = nbclient.NotebookClient(nb, timeout=timeout, kernel_name="python3",
                                     resources={"metadata": {"path": str(tmp_path)}})
    client.execute()
    assert os.path.isdir(tmp_path)


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_notebook_executes(path, tmp_path, monkeypatch):
    """Quick mode (``BAYESKERN_QUICK=1``: tiny sampler settings, the GaBaSR notebook on every
    third training month), in the default suite."""
    monkeypatch.setenv("BAYESKERN_QUICK", "1")
    monkeypatch.setenv("MPLBACKEND", "Agg")
    _execute(path, tmp_path, timeout=600)


@pytest.mark.slow
def test_gabasr_notebook_full_mode(tmp_path, monkeypatch):
    """The GaBaSR notebook's full analysis (all training months, 4 x (500 + 500) draws)."""
    monkeypatch.delenv("BAYESKERN_QUICK", raising=False)
    monkeypatch.setenv("MPLBACKEND", "Agg")
    _execute(next(p for p in NOTEBOOKS if p.stem == "gabasr_co2"), tmp_path, timeout=3600)
