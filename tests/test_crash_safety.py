"""Crash safety and hostile content: SIGTERM during `fit`, an interrupted `report`, tampered,
pickle-bearing or symlinked run files, hostile names in the HTML report, paths with ``..`` and
symbolic links given to the CLI.
"""

import contextlib
import io
import json
import signal
import subprocess
import sys
import threading
import time
import zipfile
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from conftest import DATA_NAME

import bayeskern as bk
from bayeskern.cli import main


@pytest.fixture(scope="module")
def d(tiny_gp_run):
    """The shared tiny run (conftest): a feature named SCRIPT, a data file named DATA_NAME."""
    return tiny_gp_run


def cli(argv):
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        rc = main([str(a) for a in argv])
    return rc, err.getvalue()


def copy_run(d, tmp_path):
    import shutil

    shutil.copytree(d / "run", tmp_path / "run")
    return tmp_path / "run"


def reseal(run):
    """Rewrite manifest.json to match the files (what an attacker can do too)."""
    from bayeskern.runs import FILES, _sha256

    (run / "manifest.json").write_text(json.dumps({f: _sha256(run / f) for f in FILES}))


# --------------------------------------------------------------------------- signals
def test_sigterm_in_process_unwinds_like_ctrl_c(d, tmp_path, monkeypatch):
    """SIGTERM arriving during the fit (sent to this very process) makes `main` return 143 with
    one line and leaves nothing behind; the previous SIGTERM handler is restored."""
    import os

    from bayeskern.estimators.gp import GPRegressor

    def fit_then_sigterm(self, X, y):
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(5)  # the handler interrupts this
        raise AssertionError("SIGTERM was not handled")

    monkeypatch.setattr(GPRegressor, "fit", fit_then_sigterm)
    before = signal.getsignal(signal.SIGTERM)
    rc, err = cli(["fit", d / DATA_NAME, "--target", "y", "--out", tmp_path / "run", "--quiet"])
    assert rc == 143 and err == "bayeskern: terminated; no partial output was written\n"
    assert list(tmp_path.iterdir()) == [] and signal.getsignal(signal.SIGTERM) is before


@pytest.mark.slow  # a real process: imports, compiles and samples before the signal
def test_sigterm_during_fit_exits_cleanly_without_output(d, tmp_path):
    """SIGTERM is handled like Ctrl-C: exit status 143, one line, no run directory, no
    temporary directory left behind."""
    out = tmp_path / "run"
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "bayeskern.cli",
            "fit",
            str(d / DATA_NAME),
            "--target",
            "y",
            "--out",
            str(out),
            "--num-warmup",
            "20000",
            "--num-samples",
            "20000",
            "--num-chains",
            "1",
        ],  # progress bar on (hidden in a log): steps return to Python
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    seen = []

    def read():
        for chunk in iter(lambda: proc.stdout.read1(4096), b""):
            seen.append(chunk)

    t = threading.Thread(target=read, daemon=True)
    t.start()
    deadline = time.time() + 240
    while b"fitting " not in b"".join(seen) and time.time() < deadline:  # the fit has started
        time.sleep(0.2)
    assert b"fitting " in b"".join(seen), b"".join(seen)[-500:]
    time.sleep(5)  # into the sampling: 20 000 + 20 000 steps take far longer
    proc.send_signal(signal.SIGTERM)
    proc.wait(timeout=120)
    t.join(timeout=10)
    err = b"".join(seen).decode(errors="replace")
    assert proc.returncode == 143, err[-500:]
    assert err.rstrip().splitlines()[-1].split("\r")[-1] == (
        "bayeskern: terminated; no partial output was written"
    )
    assert "Traceback" not in err
    assert not out.exists() and list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("previous", [True, False])
def test_interrupted_report_leaves_previous_output_or_none(d, tmp_path, monkeypatch, previous):
    html = tmp_path / "r.html"
    if previous:
        html.write_text("previous complete report")
    real = Path.write_text

    def half_then_interrupt(self, text, *a, **k):
        real(self, text[: len(text) // 2], *a, **k)
        raise KeyboardInterrupt

    monkeypatch.setattr(Path, "write_text", half_then_interrupt)
    rc, err = cli(["report", d / "run", "--out", html, "--quiet"])
    monkeypatch.undo()
    assert rc == 130 and err.strip() == "bayeskern: interrupted; no partial output was written"
    assert [p.name for p in tmp_path.iterdir()] == (["r.html"] if previous else [])
    if previous:
        assert html.read_text() == "previous complete report"


# --------------------------------------------------------------------------- tampering
@pytest.mark.parametrize("target", ["config.json", "arrays.npz", "idata.nc"])
def test_tampered_run_files_are_refused(d, tmp_path, target):
    run = copy_run(d, tmp_path)
    with open(run / target, "ab") as f:
        f.write(b" ")
    for argv in (
        ["predict", run, d / "new.csv", "--out", tmp_path / "p.csv"],
        ["report", run, "--out", tmp_path / "r.html"],
    ):
        rc, err = cli(argv)
        assert rc == 2 and err.count("\n") == 1
        assert f"{target} does not match its checksum" in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run"]


def test_pickle_bearing_npz_is_refused_even_with_a_matching_manifest(d, tmp_path):
    run = copy_run(d, tmp_path)
    with np.load(run / "arrays.npz") as z:
        arrays = {k: z[k] for k in z.files}
    arrays["evil"] = np.array([{"__reduce__": "os.system"}], dtype=object)  # pickled on save
    np.savez(run / "arrays.npz", **arrays)
    with zipfile.ZipFile(run / "arrays.npz") as z:  # it really carries a pickled object array
        assert b"'descr': '|O'" in z.read("evil.npy")[:128]
    reseal(run)
    rc, err = cli(["predict", run, d / "new.csv", "--out", tmp_path / "p.csv"])
    assert rc == 2 and "unsafe content" in err and "allow_pickle=False" in err


@pytest.mark.parametrize("evil", ["os.system", "builtins.eval", "subprocess.Popen"])
def test_unregistered_estimator_names_are_refused(d, tmp_path, evil):
    run = copy_run(d, tmp_path)
    cfg = json.loads((run / "config.json").read_text())
    cfg["estimator"] = evil
    (run / "config.json").write_text(json.dumps(cfg))
    reseal(run)
    rc, err = cli(["report", run])
    assert rc == 2 and f"unknown estimator {evil!r}" in err


def test_symlinked_run_file_pointing_outside_is_refused(d, tmp_path):
    run = copy_run(d, tmp_path)
    outside = tmp_path / "outside.nc"
    (run / "idata.nc").rename(outside)
    (run / "idata.nc").symlink_to(outside)  # checksum still matches: the content is the same
    rc, err = cli(["predict", run, d / "new.csv", "--out", tmp_path / "p.csv"])
    assert rc == 2 and "idata.nc is a symbolic link" in err


# --------------------------------------------------------------------------- hostile names
def test_hostile_column_and_data_names_render_as_text(d, tmp_path):
    assert cli(["report", d / "run", "--out", tmp_path / "r.html", "--quiet"])[0] == 0
    html = (tmp_path / "r.html").read_text()
    import re

    assert "<script" not in html.lower()
    imgs = re.findall(r"<img[^>]*>", html, flags=re.I)  # only the report's own figures
    assert imgs and all(
        re.fullmatch(r'<img alt="[^"<>]*" src="data:image/png;base64,[^"]*">', t) for t in imgs
    )
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert "&lt;img src=x onerror=alert(2)&gt;" in html
    assert "default-src 'none'" in html  # Content-Security-Policy: nothing runs or loads


# --------------------------------------------------------------------------- paths
def test_out_with_dotdot_is_written_exactly_there(d, tmp_path):
    out = tmp_path / "a" / ".." / "p.csv"
    assert cli(["predict", d / "run", d / "new.csv", "--out", out, "--quiet"])[0] == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["p.csv"]  # no stray a/
    assert len(pd.read_csv(tmp_path / "p.csv")) == 5


def test_out_symlink_is_replaced_not_followed(d, tmp_path):
    """--out naming a symbolic link replaces the link; the file it pointed to is untouched."""
    victim = tmp_path / "victim.txt"
    victim.write_text("do not overwrite")
    (tmp_path / "w").mkdir()
    link = tmp_path / "w" / "p.csv"
    link.symlink_to(victim)
    assert cli(["predict", d / "run", d / "new.csv", "--out", link, "--quiet"])[0] == 0
    assert victim.read_text() == "do not overwrite"
    assert not link.is_symlink() and len(pd.read_csv(link)) == 5


def test_run_out_symlink_is_refused(d, tmp_path):
    """`fit --out` naming a symbolic link (to a directory elsewhere) is refused before fitting."""
    target = tmp_path / "elsewhere"
    target.mkdir()
    (tmp_path / "link").symlink_to(target)
    rc, err = cli(["fit", d / DATA_NAME, "--target", "y", "--out", tmp_path / "link"])
    assert rc == 2 and "not a run directory" in err
    assert list(target.iterdir()) == []


def test_loaded_run_never_unpickles(d, monkeypatch):
    """Loading a run does not call pickle at all."""
    import pickle

    def boom(*a, **k):
        raise AssertionError("pickle used")

    monkeypatch.setattr(pickle, "load", boom)
    monkeypatch.setattr(pickle, "loads", boom)
    est = bk.load_run(d / "run")
    assert np.isfinite(est.predict(pd.read_csv(d / "new.csv"))).all()
