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


# the GaBaSR notebook fits several spectral-mixture models; it runs in `make test-slow`
SLOW = {"gabasr_co2"}


@pytest.mark.parametrize("path", [pytest.param(p, marks=[pytest.mark.slow] if p.stem in SLOW
                                               else []) for p in NOTEBOOKS],
                         ids=[p.stem for p in NOTEBOOKS])
def test_notebook_executes(path, tmp_path, monkeypatch):
    monkeypatch.setenv("BAYESKERN_QUICK", "1")
    monkeypatch.setenv("MPLBACKEND", "Agg")
    nb = nbformat.read(path, as_version=4)
    client = nbclient.NotebookClient(nb, timeout=600, kernel_name="python3",
                                     resources={"metadata": {"path": str(tmp_path)}})
    client.execute()
    assert os.path.isdir(tmp_path)
