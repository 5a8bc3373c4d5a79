"""Saving/loading runs without pickle, the CLI, and the HTML report."""

import json
import shutil
import subprocess
import sys
import textwrap

import numpy as np
import pandas as pd
import pytest
from conftest import TINY

import bayeskern as bk
from bayeskern.cli import main


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory):
    """CSV files of 30 rows and 2 features: with a 20 % hold-out, a regression fit has the
    shapes of conftest's ``tiny_gp_run`` and reuses its compiled programs."""
    d = tmp_path_factory.mktemp("cli")
    rng = np.random.default_rng(0)
    x1, x2 = rng.uniform(0, 5, 30), rng.normal(size=30)
    pd.DataFrame({"x1": x1, "x2": x2, "y": np.sin(x1) + 0.1 * x2}).to_csv(
        d / "train.csv", index=False
    )
    pd.DataFrame({"x1": x1[:7], "x2": x2[:7]}).to_csv(d / "new.csv", index=False)
    pd.DataFrame({"x1": x1, "x2": x2, "c": (x1 > 2.5).astype(int)}).to_csv(
        d / "clf.csv", index=False
    )
    return d


@pytest.fixture(scope="module")
def run(data_dir):
    """A GP regression fitted by ``bayeskern fit`` (tiny sampler settings, 20 % held out)."""
    assert (
        main(
            [
                "fit",
                str(data_dir / "train.csv"),
                "--target",
                "y",
                "--out",
                str(data_dir / "run"),
                "--num-warmup",
                "10",
                "--num-samples",
                "10",
                "--num-chains",
                "1",
                "--quiet",
                "--holdout",
                "0.2",
            ]
        )
        == 0
    )
    return data_dir / "run"


def test_fit_predict_report_roundtrip(data_dir, run, capsys):
    d = data_dir
    assert sorted(p.name for p in run.iterdir()) == [
        "arrays.npz",
        "config.json",
        "idata.nc",
        "manifest.json",
    ]
    assert (
        main(
            [
                "predict",
                str(run),
                str(d / "new.csv"),
                "--out",
                str(d / "p.csv"),
                "--interval",
                "0.8",
                "--draws",
                "3",
                "--quiet",
            ]
        )
        == 0
    )
    p = pd.read_csv(d / "p.csv")
    assert list(p.columns[:4]) == ["mean", "sd", "lower_0.8", "upper_0.8"] and len(p) == 7
    assert np.all(p["lower_0.8"] < p["mean"]) and np.all(p["mean"] < p["upper_0.8"])
    # the same run and seed give identical predictions
    main(
        [
            "predict",
            str(run),
            str(d / "new.csv"),
            "--out",
            str(d / "p2.csv"),
            "--draws",
            "3",
            "--interval",
            "0.8",
            "--quiet",
        ]
    )
    pd.testing.assert_frame_equal(p, pd.read_csv(d / "p2.csv"))
    # streaming in small batches gives the same numbers, predictive draws included
    main(
        [
            "predict",
            str(run),
            str(d / "new.csv"),
            "--out",
            str(d / "p3.csv"),
            "--interval",
            "0.8",
            "--draws",
            "3",
            "--batch-size",
            "3",
            "--quiet",
        ]
    )
    pd.testing.assert_frame_equal(pd.read_csv(d / "p3.csv"), p)
    # another seed gives other draws (the draws are random, not fixed by the row)
    main(
        [
            "predict",
            str(run),
            str(d / "new.csv"),
            "--out",
            str(d / "p4.csv"),
            "--interval",
            "0.8",
            "--draws",
            "3",
            "--seed",
            "1",
            "--quiet",
        ]
    )
    assert not np.allclose(pd.read_csv(d / "p4.csv")["draw_0"], p["draw_0"])
    assert main(["report", str(run), "--out", str(d / "r.html"), "--quiet"]) == 0
    html = (d / "r.html").read_text()
    assert "Convergence" in html and "data:image/png;base64" in html
    assert "mean leapfrog steps per draw" in html
    assert "http://" not in html and "https://" not in html  # nothing to fetch


def test_loaded_run_predicts_like_the_original(tmp_path, rng):
    X = rng.normal(size=(30, 2))
    y = X[:, 0] ** 2 + 0.1 * rng.normal(size=30)
    k = bk.kernels.RBF(ard=True) + bk.kernels.MahalanobisRBF()
    m = bk.GPRegressor(kernel=k, random_state=1, **TINY).fit(X, y)
    m.save(tmp_path / "r")
    m2 = bk.load_run(tmp_path / "r")
    np.testing.assert_allclose(m2.predict(X[:5]), m.predict(X[:5]), rtol=1e-10)
    c = bk.GPClassifier(random_state=1, **TINY).fit(X, np.where(y > 1, "a", "b"))
    c.save(tmp_path / "c")
    np.testing.assert_allclose(
        bk.load_run(tmp_path / "c").predict_proba(X), c.predict_proba(X), rtol=1e-10
    )


def test_tampered_or_incomplete_runs_are_refused(run, tmp_path):
    tampered = tmp_path / "run_t"
    shutil.copytree(run, tampered)  # the shared run stays intact
    cfg = tampered / "config.json"
    cfg.write_text(cfg.read_text().replace('"GPRegressor"', '"GPClassifier"'))
    with pytest.raises(bk.runs.RunError, match="checksum"):
        bk.load_run(tampered)
    (tampered / "idata.nc").unlink()
    with pytest.raises(bk.runs.RunError, match="incomplete"):
        bk.load_run(tampered)
    with pytest.raises(bk.runs.RunError, match="does not exist"):
        bk.load_run(tmp_path / "nope")


@pytest.mark.parametrize(
    "args, msg",
    [
        (["fit", "{d}/train.csv", "--target", "nope", "--out", "{d}/x"], "--target column 'nope'"),
        (["fit", "{d}/missing.csv", "--target", "y", "--out", "{d}/x"], "does not exist"),
        (["fit", "{d}/text.csv", "--target", "y", "--out", "{d}/x"], "non-numeric feature columns"),
        (["fit", "{d}/nan.csv", "--target", "y", "--out", "{d}/x"], "missing values"),
        (["fit", "{d}/empty.csv", "--target", "y", "--out", "{d}/x"], "no rows"),
        (
            ["fit", "{d}/train.csv", "--target", "y", "--out", "{d}/x", "--kernel", "foo"],
            "unknown kernel name",
        ),
        (
            ["fit", "{d}/train.csv", "--target", "y", "--out", "{d}/x", "--num-samples", "0"],
            "num_samples",
        ),
        (["predict", "{d}/nope", "{d}/new.csv", "--out", "{d}/p.csv"], "does not exist"),
    ],
)
def test_cli_user_errors_exit_2_with_one_line(data_dir, capsys, args, msg):
    d = data_dir
    pd.DataFrame({"x": ["a", "b", "c"], "y": [1.0, 2.0, 3.0]}).to_csv(d / "text.csv", index=False)
    pd.DataFrame({"x": [1.0, 2.0, 3.0], "y": [1.0, None, 3.0]}).to_csv(d / "nan.csv", index=False)
    (d / "empty.csv").write_text("x,y\n")
    out = d / "err"
    out.mkdir(exist_ok=True)
    rc = main(
        [
            a.format(d=d).replace(f"{d}/x", f"{out}/x").replace(f"{d}/p.csv", f"{out}/p.csv")
            for a in args
        ]
    )
    err = capsys.readouterr().err.strip()
    assert rc == 2
    assert err.startswith("bayeskern: error:") and msg in err and "\n" not in err
    assert list(out.iterdir()) == []  # no partial output


def test_cli_classification_and_help(data_dir):
    d = data_dir
    # TINY's counts: the classifier of test_loaded_run_predicts_like_the_original, compiled once
    assert (
        main(
            [
                "fit",
                str(d / "clf.csv"),
                "--target",
                "c",
                "--out",
                str(d / "crun"),
                "--num-warmup",
                "20",
                "--num-samples",
                "20",
                "--num-chains",
                "1",
                "--quiet",
            ]
        )
        == 0
    )
    assert json.loads((d / "crun" / "config.json").read_text())["estimator"] == "GPClassifier"
    assert (
        main(
            ["predict", str(d / "crun"), str(d / "new.csv"), "--out", str(d / "cp.csv"), "--quiet"]
        )
        == 0
    )
    assert list(pd.read_csv(d / "cp.csv").columns) == ["prediction", "p_0", "p_1"]
    # label draws do not depend on the batch size either
    for name, extra in (("cd1.csv", []), ("cd2.csv", ["--batch-size", "2"])):
        main(
            [
                "predict",
                str(d / "crun"),
                str(d / "new.csv"),
                "--out",
                str(d / name),
                "--draws",
                "4",
                "--quiet",
                *extra,
            ]
        )
    pd.testing.assert_frame_equal(pd.read_csv(d / "cd1.csv"), pd.read_csv(d / "cd2.csv"))
    out = subprocess.run(
        [sys.executable, "-m", "bayeskern.cli", "--help"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    for cmd in ("demo", "fit", "predict", "report", "datasets"):
        assert cmd in out


@pytest.fixture(scope="module")
def demo_out(tmp_path_factory):
    """``bayeskern demo --quick`` once per module: its output directory and what it printed."""
    import contextlib
    import io

    out = tmp_path_factory.mktemp("demo") / "demo"
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        assert main(["demo", "--quick", "--quiet", "--out", str(out)]) == 0
    return out, buf.getvalue()


def test_demo_quick(demo_out):
    out, printed = demo_out
    assert sorted(p.name for p in out.iterdir()) == ["gabasr_run", "gp_run", "report.html"]
    g, gp = bk.load_run(out / "gabasr_run"), bk.load_run(out / "gp_run")
    assert type(g).__name__ == "GaBaSRRegressor" and g.model_ == "exact"
    assert type(gp).__name__ == "GPRegressor" and g.n_features_in_ == gp.n_features_in_ == 1
    assert g.get_params()["num_map_starts"] == 1 and gp.idata_.posterior.sizes["chain"] == 2
    lines = printed.splitlines()
    for name in ("GaBaSR", "reference GP"):  # one line per model: metrics and verdict
        line = [ln for ln in lines if ln.startswith(f"{name}: held-out")]
        assert len(line) == 1 and "RMSE" in line[0] and "95 % coverage" in line[0]
        assert "converged" in line[0].lower()
    assert str(out / "report.html") in lines[-1]
    html = (out / "report.html").read_text()
    for section in (
        "Models compared",
        "Held-out accuracy and calibration",
        "Forecasts",
        "Leave-one-out cross-validation (PSIS-LOO)",
        "SE of the difference",
        "Convergence and fit time",
        "GaBaSR: learned spectral density",
        "Components found",
        "period (year)",
        "coherence length",
        "reference GP",
        "coverage of the 95 % interval",
    ):
        assert section in html, section
    # forecasts, spectral density, each model's trace plots of its worst-mixed quantities
    assert html.count("data:image/png;base64") == 4
    assert html.count("trace plots of the quantities with the smallest ESS") == 2
    assert "http://" not in html and "https://" not in html
    assert not list(out.glob(".*"))  # no temporary files left


def test_compare_report_from_saved_runs(demo_out, tmp_path):
    from bayeskern.report import compare_report, held_out_predictions, render_compare_report
    from bayeskern.runs import read_run

    out, _ = demo_out
    gp_name = "GP <script>alert(1)</script>"
    ests = {"GaBaSR": bk.load_run(out / "gabasr_run"), gp_name: bk.load_run(out / "gp_run")}
    config, arrays, _ = read_run(out / "gp_run")
    X, y = arrays["holdout_X"], arrays["holdout_y"]
    times = {gp_name: config["state"]["fit_time_s"]}
    path = compare_report(
        ests, tmp_path / "c.html", X_test=X, y_test=y, fit_times=times, title="<b>x</b>"
    )
    html = path.read_text()
    assert "&lt;b&gt;x&lt;/b&gt;" in html and "<b>x</b>" not in html
    assert "<script" not in html and "GP &lt;script&gt;" in html
    assert "not recorded" in html  # GaBaSR's fit time is not stored in a run
    assert "cycles per unit of x" in html
    bad = [
        ({}, X, y, None, "estimators must be a non-empty dict"),
        ({"x": object()}, X, y, None, r"estimators\['x'\] must be a fitted"),
        (ests, X[:, 0], y, None, "X_test must be a finite 2-D array"),
        (ests, np.c_[X, X], y, None, "X_test has 2 columns"),
        (ests, X, y[:-1], None, "y_test must be"),
        (ests, X, y, {"nope": 1.0}, "fit_times must map"),
        (ests, X, y, {"GaBaSR": -1.0}, "fit_times must map"),
        (ests, X, y, [1.0], "fit_times must be a dict"),
        (ests, [["a"]] * len(y), y, None, "X_test must be numeric"),
    ]
    for e, Xb, yb, ft, msg in bad:
        with pytest.raises(ValueError, match=msg):
            render_compare_report(e, X_test=Xb, y_test=yb, fit_times=ft)
    # one predictive call on held-out rows and forecast grid together, split: the same numbers
    held = held_out_predictions(ests, X, y)
    direct = bk.diagnostics.regression_metrics(y, ests["GaBaSR"].predictive(X))
    assert held["GaBaSR"].metrics == pytest.approx(direct, rel=1e-10)
    grid = held[gp_name].grid
    np.testing.assert_allclose(
        held[gp_name].forecast.mean(), ests[gp_name].predictive(grid).mean(), rtol=1e-10
    )
    with pytest.raises(ValueError, match="held_out must be"):
        render_compare_report(ests, X_test=X, y_test=y, held_out={"GaBaSR": held["GaBaSR"]})
    with pytest.raises(ValueError, match="est must be a GaBaSRRegressor fitted with the spectral"):
        bk.plots.gabasr.plot_spectral_density_band(ests[gp_name])


def test_demo_refuses_bad_out_before_fitting(tmp_path, capsys):
    (tmp_path / "file").write_text("x")
    assert main(["demo", "--quick", "--out", str(tmp_path / "file")]) == 2
    assert "--out" in capsys.readouterr().err
    (tmp_path / "d" / "gp_run").mkdir(parents=True)
    (tmp_path / "d" / "gp_run" / "mine.txt").write_text("keep")
    assert main(["demo", "--quick", "--out", str(tmp_path / "d")]) == 2
    assert "gp_run" in capsys.readouterr().err
    assert sorted(p.name for p in (tmp_path / "d").iterdir()) == ["gp_run"]


def test_interrupted_fit_leaves_no_partial_output(data_dir, tmp_path):
    """SIGINT during `bayeskern fit` leaves no run directory (writes are atomic)."""
    import fcntl
    import os
    import pty
    import select
    import signal
    import struct
    import termios
    import time

    d = data_dir
    out = tmp_path / "interrupted"
    # one chain with a progress bar: NumPyro then steps the sampler from Python, so the
    # interrupt lands mid-fit (far more warm-up than the test waits for); the hold-out gives
    # the data the shape of the fixture `run`'s, whose start-value programs are then cached
    # (the child shares the persistent compilation cache). The bar is shown on a
    # terminal only, so the child's stdout and stderr are a pseudo-terminal. NumPyro turns the
    # bar off when it sees CI or PYTEST_XDIST_WORKER in the environment: not for this child.
    env = {k: v for k, v in os.environ.items() if k not in ("CI", "PYTEST_XDIST_WORKER")}
    term, child_term = pty.openpty()
    # a terminal of 100 columns (a new pseudo-terminal has 0: tqdm would draw empty bars)
    fcntl.ioctl(child_term, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 100, 0, 0))
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "bayeskern.cli",
            "fit",
            str(d / "train.csv"),
            "--target",
            "y",
            "--out",
            str(out),
            "--num-warmup",
            "1000000",
            "--num-samples",
            "100",
            "--num-chains",
            "1",
            "--holdout",
            "0.2",
        ],
        stdout=child_term,
        stderr=child_term,
        env={**env, "PYTHONUNBUFFERED": "1", "PYTHONFAULTHANDLER": "1"},
    )
    os.close(child_term)

    def read(seconds):
        if not select.select([term], [], [], seconds)[0]:
            return b""
        try:
            return os.read(term, 4096)
        except OSError:  # the child closed the terminal
            return b""

    # wait for the sampler's progress bar (the fit has started)
    seen, deadline = b"", time.monotonic() + 300
    while b"warmup" not in seen and b"Running chain" not in seen:
        assert time.monotonic() < deadline and proc.poll() is None, seen.decode(errors="replace")
        seen += read(1.0)
    proc.send_signal(signal.SIGINT)
    # read while waiting: a child that kept sampling would block on a full terminal
    deadline = time.monotonic() + 120
    while proc.poll() is None and time.monotonic() < deadline:
        seen += read(0.2)
    if proc.poll() is None:  # show where the child is: faulthandler dumps on SIGABRT
        proc.send_signal(signal.SIGABRT)
        deadline = time.monotonic() + 60
        while proc.poll() is None and time.monotonic() < deadline:
            seen += read(0.2)
        proc.kill()
        pytest.fail("no exit within 120 s of SIGINT:\n" + seen.decode(errors="replace")[-20000:])
    while chunk := read(0.1):
        seen += chunk
    os.close(term)
    assert proc.returncode != 0
    assert "Traceback" not in seen.decode(errors="replace")
    assert not out.exists()
    assert not any(p.name.startswith(".interrupted") for p in tmp_path.iterdir())


def test_interrupt_swallowed_by_a_gc_callback_is_raised_again(tmp_path):
    """A SIGINT whose KeyboardInterrupt lands in a garbage-collector callback (JAX registers
    one; Python can only print an exception there) still ends the command with status 130."""
    script = tmp_path / "swallowed.py"
    script.write_text(
        textwrap.dedent(
            """
            import argparse, gc, sys, time
            import bayeskern.cli as cli

            fired = []

            def callback(phase, info):  # the handler's exception, raised where it is ignored
                if phase == "start" and not fired:
                    fired.append(time.monotonic())
                    raise KeyboardInterrupt

            def command(args):  # a long computation that collects garbage
                end = time.monotonic() + 60
                while time.monotonic() < end:
                    gc.collect()
                return 0

            class Parser:
                def parse_args(self, argv):
                    return argparse.Namespace(fn=command)

            cli.build_parser = Parser
            gc.callbacks.append(callback)
            status = cli.main([])
            print(f"seconds {time.monotonic() - fired[0]:.2f}")
            sys.exit(status)
            """
        )
    )
    res = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120)
    assert res.returncode == 130, res.stderr
    assert "interrupted; no partial output" in res.stderr
    assert "Exception ignored" not in res.stderr
    assert float(res.stdout.split()[-1]) < 10


def test_cli_sampler_counts_default_to_the_estimators_and_take_auto():
    from bayeskern.cli import _make_estimator, build_parser

    parser = build_parser()
    base = ["fit", "data.csv", "--target", "y", "--out", "run"]
    args = parser.parse_args(base)
    assert args.num_samples is None and args.num_warmup is None
    gp = _make_estimator(args, classification=False)
    assert gp.num_samples == bk.GPRegressor().num_samples == "auto"
    gab = _make_estimator(parser.parse_args(base + ["--method", "gabasr"]), False)
    assert (gab.num_warmup, gab.num_samples) == ("auto", "auto")
    clf = _make_estimator(args, classification=True)
    assert clf.num_samples == bk.GPClassifier().num_samples
    args = parser.parse_args(base + ["--num-samples", "auto", "--num-warmup", "30"])
    assert (args.num_samples, args.num_warmup) == ("auto", 30)
    with pytest.raises(SystemExit):
        parser.parse_args(base + ["--num-samples", "many"])
