"""Smoke test of benchmarks/peers/peer_gp_co2.py (issue 13, item 6): slow, run with ``-m slow``.

The peers (PyMC, nutpie, tinygp) are the ``bench`` extra; the test is skipped without them.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "benchmarks" / "peers" / "peer_gp_co2.py"


@pytest.mark.slow
def test_peer_gp_co2_quick(tmp_path):
    for mod in ("pymc", "nutpie", "tinygp"):
        pytest.importorskip(mod)
    out = tmp_path / "peers.md"
    # the log-density check covers every peer; the quick fits the two JAX samplers
    # (PyMC's C compilation makes its quick fit the slowest part)
    r = subprocess.run(
        [
            sys.executable,
            str(SCRIPT),
            "--quick",
            "--out",
            str(out),
            "--samplers",
            "tinygp",
            "bayeskern",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=1200,
    )
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert "worst relative difference" in r.stdout
    data = json.loads(out.with_suffix(".json").read_text())
    assert [row["sampler"] for row in data["rows"]] == ["tinygp", "bayeskern"]
    for row in data["rows"]:
        assert row["wall"] > 0 and row["min_ess_bulk"] > 0 and row["steps_per_draw"] >= 1
        assert 0 < row["metrics"]["rmse"] < 20
    assert "| bayeskern | GPRegressor(), default sampler |" in out.read_text()
    r = subprocess.run(
        [sys.executable, str(SCRIPT), "--check-only"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=1200,
    )
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert "PyMC (pymc and nutpie)" in r.stdout and "tinygp + NumPyro" in r.stdout


PEERS = ROOT / "benchmarks" / "peers"


def _quick_bayeskern_only(script: str, out: Path):
    """Run a peer script's smoke test with only bayeskern sampling; return its stdout and
    JSON. The model check against PyMC runs regardless (the scripts stop if it fails)."""
    for mod in ("pymc", "nutpie"):
        pytest.importorskip(mod)
    r = subprocess.run(
        [sys.executable, str(PEERS / script), "--quick", "--out", str(out)]
        + ["--samplers", "bayeskern"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=1200,
    )
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    return r.stdout, json.loads(out.with_suffix(".json").read_text())


@pytest.mark.slow
def test_peer_gabasr_co2_quick(tmp_path):
    """The PyMC spectral-mixture model equals GaBaSR's exact model (the script's log-density
    check stops it otherwise), and the report is written with bayeskern's row."""
    out = tmp_path / "peers_gabasr.md"
    stdout, data = _quick_bayeskern_only("peer_gabasr_co2.py", out)
    assert stdout.count("PyMC - bayeskern") == 3
    (row,) = data["rows"]
    assert row["sampler"] == "bayeskern" and row["min_ess_bulk"] > 0
    assert 0 < row["metrics"]["rmse"] < 5  # ppm, on the 1994-2001 months
    assert "| bayeskern | GaBaSRRegressor(), defaults |" in out.read_text()


@pytest.mark.slow
def test_peer_hsgp_pymc_quick(tmp_path):
    """PyMC's ``pm.gp.HSGP`` model equals the basis model of ``GPRegressor()`` (the script's
    check stops it otherwise), and the report is written with bayeskern's row."""
    stdout, data = _quick_bayeskern_only("peer_hsgp_pymc.py", tmp_path / "peers_hsgp.md")
    assert "worst relative difference" in stdout
    rows = [row for row in data["rows"] if row["sampler"] == "bayeskern"]
    assert len(rows) == 1 and rows[0]["min_ess_bulk"] > 0
    assert 0.15 < rows[0]["metrics"]["rmse"] < 0.3  # the noise sd is 0.2
