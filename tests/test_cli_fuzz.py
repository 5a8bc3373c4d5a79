"""Fuzzing the command line with malformed files: exit status 2, one line on stderr, no traceback,
no partial output.

Most cases run in-process (``bayeskern.cli.main``) for speed, two in a real subprocess. The
hypothesis-generated inputs draw ``BAYESKERN_FUZZ_EXAMPLES`` examples (default 25; e.g.
``BAYESKERN_FUZZ_EXAMPLES=2000 pytest tests/test_cli_fuzz.py`` for a long run). The 1 GB
streaming test is ``slow``.
"""

import contextlib
import io
import os
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest
from conftest import SCRIPT
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bayeskern.cli import main

N_FUZZ = int(os.environ.get("BAYESKERN_FUZZ_EXAMPLES", "25"))
FUZZ = settings(
    max_examples=N_FUZZ,
    deadline=None,
    derandomize=N_FUZZ <= 25,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
TINY = ["--num-warmup", "10", "--num-samples", "10", "--num-chains", "1", "--quiet"]

GOOD = f"x1,{SCRIPT},y\n" + "".join(f"{0.1 * i},{(7 * i) % 5},{np.sin(i)}\n" for i in range(20))
#: name -> file content (bytes); every one is refused by `fit --target y`
MALFORMED = {
    "ragged.csv": b"x1,x2,y\n1,2,3\n4,5\n6,7,8,9,10\n",
    "semicolon.csv": GOOD.replace(",", ";").encode(),
    "latin1.csv": "x\xe9,x2,y\n1,2,3\n4,5,6\n".encode("latin-1"),
    "missing_target.csv": b"x1,x2\n1,2\n3,4\n",
    "target_nan.csv": b"x1,x2,y\n1,2,\n3,4,5\n6,7,8\n",
    "zero_bytes.csv": b"",
    "header_only.csv": b"x1,x2,y\n",
    "binary_junk.csv": bytes(np.random.default_rng(0).integers(0, 256, 4000, dtype=np.uint8)),
    "nul_byte.csv": b"x1,x2,y\n1,\x00,3\n4,5,6\n",
    "huge_field.csv": b"x1,x2,y\n" + b"9" * 2_000_000 + b",2,3\n4,5,6\n",
    "duplicate_columns.csv": b"x1,x1,y\n1,2,3\n4,5,6\n7,8,9\n",
    "unclosed_quote.csv": b'x1,x2,y\n"1,2,3\n4,5,6\n',
    "text_feature.csv": b"x1,x2,y\n1,a,3\n4,b,6\n",
    "inf_feature.csv": b"x1,x2,y\n1,inf,3\n4,5,6\n",
    "dir.csv": None,  # a directory
    "nonexistent.csv": "missing",
}
#: expected words in the message, per file
WHY = {
    "ragged.csv": "Expected 3 fields",
    "semicolon.csv": "--target column 'y' is not in",
    "latin1.csv": "not UTF-8",
    "missing_target.csv": "--target column 'y'",
    "target_nan.csv": "missing values",
    "zero_bytes.csv": "No columns to parse",
    "header_only.csv": "has no rows",
    "binary_junk.csv": "not UTF-8",
    "nul_byte.csv": "non-numeric",
    "huge_field.csv": "non-numeric",
    "duplicate_columns.csv": "duplicate column names ['x1']",
    "unclosed_quote.csv": "EOF inside string",
    "text_feature.csv": "non-numeric",
    "inf_feature.csv": "non-finite",
    "dir.csv": "not a regular file",
    "nonexistent.csv": "does not exist",
}


@pytest.fixture(scope="module")
def files(tmp_path_factory, tiny_gp_run):
    """The malformed files, next to the shared tiny run (features x1 and SCRIPT, conftest)."""
    d = tmp_path_factory.mktemp("fuzz")
    (d / "good.csv").write_text(GOOD)
    (d / "bom.csv").write_text("\ufeff" + GOOD, encoding="utf-8")
    for name, content in MALFORMED.items():
        if content is None:
            (d / name).mkdir()
        elif isinstance(content, bytes):  # the run's second feature is named SCRIPT
            (d / name).write_bytes(content.replace(b"x2", SCRIPT.encode()))
    (d / "run").symlink_to(tiny_gp_run / "run", target_is_directory=True)
    return d


def run_cli(argv, out_dir):
    """``main(argv)`` in-process: (exit status, stderr), checking the error contract."""
    before = set(os.listdir(out_dir))
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        rc = main([str(a) for a in argv])
    text = err.getvalue()
    if rc != 0:
        assert rc == 2, text
        lines = text.splitlines()
        assert len(lines) == 1 and lines[0].startswith("bayeskern: error: "), text
        assert "Traceback" not in text
        assert set(os.listdir(out_dir)) == before, "partial output left behind"
    return rc, text


@pytest.mark.parametrize("name", list(MALFORMED))
def test_fit_refuses_malformed_csv(files, tmp_path, name):
    rc, err = run_cli(
        ["fit", files / name, "--target", "y", "--out", tmp_path / "run", *TINY], tmp_path
    )
    assert rc == 2 and WHY[name] in err


@pytest.mark.parametrize(
    "name",
    [n for n in MALFORMED if n not in ("missing_target.csv", "target_nan.csv", "semicolon.csv")]
    + ["semicolon_features.csv"],
)
def test_predict_refuses_malformed_csv(files, tmp_path, name):
    if name == "semicolon_features.csv":  # wrong delimiter: the feature columns are not found
        (files / name).write_text("x1;x2\n1;2\n")
    rc, err = run_cli(
        ["predict", files / "run", files / name, "--out", tmp_path / "p.csv"], tmp_path
    )
    why = "lacks the feature columns" if name == "semicolon_features.csv" else WHY[name]
    assert rc == 2 and why in err


def test_bom_is_accepted(files, tmp_path):
    """A UTF-8 byte-order mark (Excel's "CSV UTF-8") is not part of the first column name."""
    rc, _ = run_cli(
        ["predict", files / "run", files / "bom.csv", "--out", tmp_path / "p.csv"], tmp_path
    )
    assert rc == 0 and len(pd.read_csv(tmp_path / "p.csv")) == 20


def test_bad_row_in_a_later_batch_leaves_no_partial_output(files, tmp_path):
    """Streaming: the error surfaces after earlier batches were predicted, and still nothing is
    written (the output goes to a temporary file that is removed)."""
    bad = files / "late_bad.csv"
    bad.write_text(f"x1,{SCRIPT}\n" + "1,2\n" * 30 + "1,oops\n")
    rc, err = run_cli(
        ["predict", files / "run", bad, "--out", tmp_path / "p.csv", "--batch-size", "7"], tmp_path
    )
    assert rc == 2 and "non-numeric" in err


@pytest.mark.parametrize("what", ["missing", "a_file", "empty_dir", "incomplete"])
def test_report_and_predict_refuse_non_runs(files, tmp_path, what):
    run = tmp_path / "r"
    if what == "a_file":
        run.write_text("not a run")
    elif what == "empty_dir":
        run.mkdir()
    elif what == "incomplete":
        run.mkdir()
        (run / "config.json").write_text("{}")
    for argv in (
        ["report", run, "--out", tmp_path / "r.html"],
        ["predict", run, files / "good.csv", "--out", tmp_path / "p.csv"],
    ):
        rc, err = run_cli(argv, tmp_path)
        assert rc == 2 and ("does not exist" in err or "incomplete" in err)


def test_fit_refuses_to_replace_a_directory_that_is_not_a_run(files, tmp_path):
    """A mistyped --out (e.g. the home directory) is never replaced by a run."""
    precious = tmp_path / "mine"
    precious.mkdir()
    (precious / "thesis.tex").write_text("keep me")
    rc, err = run_cli(
        ["fit", files / "good.csv", "--target", "y", "--out", precious, *TINY], tmp_path
    )
    assert rc == 2 and "not a run directory" in err
    assert (precious / "thesis.tex").read_text() == "keep me"


# --------------------------------------------------------------------------- hypothesis
csv_text = st.lists(
    st.lists(
        st.one_of(
            st.sampled_from(
                [
                    "x1",
                    "x2",
                    "y",
                    "1",
                    "-2.5",
                    "nan",
                    "inf",
                    "",
                    '"',
                    "1e308",
                    "1e999",
                    "\ufeff",
                    "é",
                ]
            ),
            st.text(max_size=6),
        ),
        min_size=0,
        max_size=5,
    ),
    max_size=8,
).map(lambda rows: "\n".join(",".join(r) for r in rows))


@FUZZ
@given(content=st.one_of(st.binary(max_size=3000), csv_text.map(str.encode)))
def test_fuzz_predict(files, tmp_path_factory, content):
    d = tmp_path_factory.mktemp("fz")
    (d / "in.csv").write_bytes(content)
    out = d / "o" / "p.csv"
    (d / "o").mkdir()
    rc, _ = run_cli(["predict", files / "run", d / "in.csv", "--out", out], d / "o")
    if rc == 0:  # a parseable file with finite x1, x2: a complete prediction, one row per row
        p = pd.read_csv(out)
        assert np.isfinite(p[["mean", "sd"]].to_numpy()).all()


@FUZZ
@given(content=st.one_of(st.binary(max_size=3000), csv_text.map(str.encode)))
def test_fuzz_fit(tmp_path_factory, content):
    d = tmp_path_factory.mktemp("fz")
    (d / "in.csv").write_bytes(content)
    (d / "o").mkdir()
    # --num-samples 0: whatever parses ends in the sampler-count error instead of a fit
    rc, _ = run_cli(
        [
            "fit",
            d / "in.csv",
            "--target",
            "y",
            "--out",
            d / "o" / "run",
            "--num-samples",
            "0",
            "--quiet",
        ],
        d / "o",
    )
    assert rc == 2


# --------------------------------------------------------------------------- real processes
def test_real_process_prints_one_line_and_no_traceback(files, tmp_path):
    for argv in (
        ["predict", files / "run", files / "ragged.csv", "--out", tmp_path / "p.csv"],
        ["fit", files / "binary_junk.csv", "--target", "y", "--out", tmp_path / "r"],
    )[: None if os.environ.get("BAYESKERN_FUZZ_EXAMPLES") else 1]:
        r = subprocess.run(
            [sys.executable, "-m", "bayeskern.cli", *map(str, argv)],
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert r.returncode == 2, r.stderr
        assert r.stderr.count("\n") == 1 and r.stderr.startswith("bayeskern: error:")
        assert "Traceback" not in r.stderr and r.stdout == ""
    assert sorted(os.listdir(tmp_path)) == []


# VmHWM (peak resident set of this process image, KiB); getrusage's ru_maxrss would include
# the parent's peak, which Linux carries over fork and exec
PEAK_RSS = """
import re, sys
from bayeskern.cli import main
rc = main(sys.argv[1:])
print(rc, re.search(r"VmHWM:\\s+(\\d+) kB", open("/proc/self/status").read()).group(1))
"""


@pytest.mark.slow
def test_one_gigabyte_file_is_streamed(files, tmp_path):
    """`predict` on a 1 GB CSV (1.1 M rows with a wide text column it ignores) streams it in
    batches of 5000 rows: the peak resident memory grows far less than the file size over a
    20-row file, and the output is complete.
    """
    big = tmp_path / "big.csv"
    pad = "z" * 900
    block = "".join(f"{0.001 * i},{i % 5},{pad}\n" for i in range(1000)).encode()
    n_blocks = (1 << 30) // len(block) + 1
    with open(big, "wb") as f:
        f.write(f"x1,{SCRIPT},note\n".encode())
        for _ in range(n_blocks):
            f.write(block)
    assert big.stat().st_size >= 1 << 30
    peaks = {}
    for name, path in (("small", files / "good.csv"), ("big", big)):
        r = subprocess.run(
            [
                sys.executable,
                "-c",
                PEAK_RSS,
                "predict",
                str(files / "run"),
                str(path),
                "--out",
                str(tmp_path / f"pred_{name}.csv"),
                "--quiet",
                "--batch-size",
                "5000",
            ],
            capture_output=True,
            text=True,
            timeout=1800,
        )
        rc, peaks[name] = map(int, r.stdout.split())
        assert rc == 0, r.stderr
    print(
        f"predict peak RSS: {peaks['small'] / 1024:.0f} MiB on 20 rows, "
        f"{peaks['big'] / 1024:.0f} MiB on the {big.stat().st_size / 2**20:.0f} MiB file"
    )
    # the 1 GiB file adds far less than its size: it is streamed, not held (let alone twice)
    assert peaks["big"] - peaks["small"] < 256 * 1024
    n = sum(1 for _ in open(tmp_path / "pred_big.csv")) - 1
    assert n == 1000 * n_blocks
