"""Every method through the command line: fit on a CSV, save, reload, predict, report with its
method panel; prediction files in CSV/Parquet/netCDF; PDF export.

GaBaSR, VSK and LAB-RBF fits cost 10-30 s each on a loaded 2-core machine, so they (and the
per-method browser screenshots) run in ``make test-slow``; the other methods run by default.
"""

import json
import os
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from test_report_browser import _render

import bayeskern as bk
from bayeskern.cli import main

TINY_CLI = [
    "--num-warmup",
    "10",
    "--num-samples",
    "10",
    "--num-chains",
    "1",
    "--quiet",
    "--holdout",
    "0.2",
    "--seed",
    "0",
]

#: method -> (data file, target, panel heading that must appear in the report)
CASES = {
    "conformal": ("clf.csv", "c", "Xiong kernel: conformal factor q(x)"),
    "ckrbf": ("reg.csv", "y", "CkRBF: clusters and per-cell bandwidths"),
    "labrbf": ("reg.csv", "y", "LAB-RBF: learned bandwidth map"),
    "vsk": ("clf.csv", "c", "VSK: scaling function ψ and conditioning"),
    "gabasr": ("reg.csv", "y", "GaBaSR: learned spectral density"),
}
SLOW = {"vsk", "gabasr", "labrbf"}


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory):
    d = tmp_path_factory.mktemp("methods")
    rng = np.random.default_rng(0)
    x1, x2 = rng.uniform(0, 5, 30), rng.normal(size=30)
    pd.DataFrame({"x1": x1, "x2": x2, "y": np.sin(x1) + 0.1 * x2}).to_csv(
        d / "reg.csv", index=False
    )
    pd.DataFrame({"x1": x1, "x2": x2, "c": np.where(x1 + 0.5 * x2 > 2.5, "yes", "no")}).to_csv(
        d / "clf.csv", index=False
    )
    pd.DataFrame({"x1": x1[:6], "x2": x2[:6]}).to_csv(d / "new.csv", index=False)
    return d


def _fit_report_predict(d, method):
    data, target, heading = CASES[method]
    run = d / f"run_{method}"
    assert (
        main(
            [
                "fit",
                str(d / data),
                "--target",
                target,
                "--out",
                str(run),
                "--method",
                method,
                *TINY_CLI,
            ]
        )
        == 0
    )
    assert main(["report", str(run), "--quiet"]) == 0
    html = (run / "report.html").read_text()
    assert f"<h2>{heading}</h2>" in html.replace("&#x27;", "'")
    assert "class='caption'" in html and "https://" not in html
    assert (
        main(
            [
                "predict",
                str(run),
                str(d / "new.csv"),
                "--out",
                str(d / f"{method}.csv"),
                "--draws",
                "4",
                "--quiet",
            ]
        )
        == 0
    )
    p = pd.read_csv(d / f"{method}.csv")
    assert len(p) == 6 and "draw_3" in p.columns
    if target == "c":
        assert set(p["prediction"]) <= {"yes", "no"} and np.allclose(p["p_no"] + p["p_yes"], 1)
    else:
        assert np.all(p["lower_0.9"] < p["mean"]) and np.all(p["mean"] < p["upper_0.9"])
    return run, p


@pytest.mark.parametrize(
    "method", [pytest.param(m, marks=pytest.mark.slow) if m in SLOW else m for m in CASES]
)
def test_each_method_fits_reports_and_predicts_from_the_cli(data_dir, method):
    run, p = _fit_report_predict(data_dir, method)
    cfg = json.loads((run / "config.json").read_text())
    expected = {
        "conformal": "GPClassifier",
        "ckrbf": "GPRegressor",
        "vsk": "GPClassifier",
        "labrbf": "LABRBFRegressor",
        "gabasr": "GaBaSRRegressor",
    }[method]
    assert cfg["estimator"] == expected
    # the reloaded run predicts exactly what the fitted one saved (kernel state round-trips)
    est = bk.load_run(run)
    X = pd.read_csv(data_dir / "new.csv")
    if hasattr(est, "predict_proba"):
        np.testing.assert_allclose(est.predict_proba(X)[:, 1], p["p_yes"], rtol=1e-10)
    else:
        np.testing.assert_allclose(est.predict(X), p["mean"], rtol=1e-10)
        lo, hi = est.predict_interval(X, 0.9)
        np.testing.assert_allclose(lo, p["lower_0.9"], rtol=1e-10)


def test_methods_that_do_not_fit_the_task_are_refused(data_dir, capsys):
    d = data_dir
    rc = main(
        [
            "fit",
            str(d / "reg.csv"),
            "--target",
            "y",
            "--out",
            str(d / "bad"),
            "--method",
            "conformal",
            *TINY_CLI,
        ]
    )
    assert rc == 2 and "classification only" in capsys.readouterr().err
    rc = main(
        [
            "fit",
            str(d / "clf.csv"),
            "--target",
            "c",
            "--out",
            str(d / "bad"),
            "--method",
            "labrbf",
            *TINY_CLI,
        ]
    )
    assert rc == 2 and "regression only" in capsys.readouterr().err
    assert not (d / "bad").exists()


@pytest.fixture(scope="module")
def gp_run(data_dir):
    d = data_dir
    assert (
        main(["fit", str(d / "reg.csv"), "--target", "y", "--out", str(d / "run_gp"), *TINY_CLI])
        == 0
    )
    return d / "run_gp"


@pytest.mark.parametrize("ext", ["csv", "parquet", "nc"])
def test_predict_formats_streaming_and_seed(data_dir, gp_run, ext):
    d = data_dir
    big = pd.concat([pd.read_csv(d / "new.csv")] * 5, ignore_index=True)  # 30 rows
    big.to_csv(d / "big.csv", index=False)
    args = [
        "predict",
        str(gp_run),
        str(d / "big.csv"),
        "--interval",
        "0.8",
        "--draws",
        "3",
        "--quiet",
        "--seed",
        "7",
    ]
    out1, out2 = d / f"a.{ext}", d / f"b.{ext}"
    assert main([*args, "--out", str(out1), "--batch-size", "7"]) == 0
    assert main([*args, "--out", str(out2), "--batch-size", "7"]) == 0

    def read(p):
        if ext == "csv":
            return pd.read_csv(p)
        if ext == "parquet":
            return pd.read_parquet(p)
        import xarray as xr

        with xr.open_dataset(p) as ds:
            return ds.to_dataframe().reset_index(drop=True)

    a = read(out1)
    assert list(a.columns[:4]) == ["mean", "sd", "lower_0.8", "upper_0.8"]
    assert len(a) == 30 and "draw_2" in a.columns
    pd.testing.assert_frame_equal(a, read(out2))  # same seed, same numbers, draws included
    # batching changes nothing but the draws' stream; the summaries equal the Python API
    est = bk.load_run(gp_run)
    ref = bk.runs.predict_table(est, big, interval=0.8)
    # (quantiles are found by root finding to ~1e-9)
    np.testing.assert_allclose(a[ref.columns].to_numpy(), ref.to_numpy(), rtol=1e-7, atol=1e-8)
    lo, hi = est.predict_interval(big, 0.8)
    np.testing.assert_allclose(a["upper_0.8"], hi, rtol=1e-7, atol=1e-8)


def test_predict_rejects_unknown_output_extension(data_dir, gp_run, capsys):
    rc = main(
        [
            "predict",
            str(gp_run),
            str(data_dir / "new.csv"),
            "--out",
            str(data_dir / "p.xlsx"),
            "--quiet",
        ]
    )
    assert rc == 2 and "unknown extension '.xlsx'" in capsys.readouterr().err
    assert not (data_dir / "p.xlsx").exists()


def test_report_pdf(data_dir, gp_run, monkeypatch, capsys):
    from bayeskern.report import find_chromium

    # without a browser: a clear one-line error, the HTML is still written, no PDF
    monkeypatch.setenv("BAYESKERN_CHROMIUM", str(data_dir / "no-such-browser"))
    out = data_dir / "nopdf" / "r.html"
    assert main(["report", str(gp_run), "--out", str(out), "--pdf", "--quiet"]) == 2
    err = capsys.readouterr().err
    assert "needs headless Chromium" in err and out.exists()
    assert not out.with_suffix(".pdf").exists()
    monkeypatch.delenv("BAYESKERN_CHROMIUM")
    if find_chromium() is None:
        pytest.skip(
            "chromium is not installed (make test installs Debian's chromium when it "
            "can); PDF export itself not tested"
        )
    out = data_dir / "pdf" / "r.html"
    assert main(["report", str(gp_run), "--out", str(out), "--pdf", "--quiet"]) == 0
    pdf = out.with_suffix(".pdf").read_bytes()
    assert pdf[:5] == b"%PDF-" and len(pdf) > 20_000
    assert not [p for p in out.parent.iterdir() if p.name.endswith(".tmp")]


@pytest.mark.slow
@pytest.mark.parametrize("method", list(CASES))
def test_each_method_report_renders_in_chromium(data_dir, method, tmp_path):
    """One report per method rendered in headless Chromium: non-blank, sane size, offline."""
    run = data_dir / f"run_{method}"
    if not run.exists():
        _fit_report_predict(data_dir, method)
    img, external = _render(run / "report.html", tmp_path, height=9000)  # whole page
    keep = os.environ.get("BAYESKERN_REPORT_SCREENS")  # e.g. /tmp/report_screens
    if keep:
        Path(keep).mkdir(parents=True, exist_ok=True)
        shutil.copy(tmp_path / "shot.png", Path(keep) / f"{method}.png")
        shutil.copy(run / "report.html", Path(keep) / f"{method}.html")
    assert img.shape[0] >= 2000 and img.shape[1] >= 1000
    assert img[..., :3].std() > 0.05
    assert (img[..., :3].mean(axis=-1) < 0.5).mean() > 0.005
    assert not external, f"the report made network requests: {external[:5]}"
