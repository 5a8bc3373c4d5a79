"""Bad input for every public estimator: each case gives a clear error or a documented behaviour.

The validation cases fail before any sampling, so they cost nothing; the cases that must fit
(constant feature, duplicated rows, string labels, pandas column names) share one small hostile
data set and one tiny fit per estimator. The NUTS/Gibbs estimators other than the GPs fit in the
slow suite only. The README section "Bad and hostile inputs" points at these tests.
"""

import functools
import warnings

import numpy as np
import pandas as pd
import pytest

import bayeskern as bk

S = dict(num_warmup=10, num_samples=10, num_chains=1, progress_bar=False, random_state=0)

#: estimator name -> (factory, is_classifier, binary_only, runs NUTS/Gibbs (slow to fit))
ESTIMATORS = {
    "GPRegressor": (lambda: bk.GPRegressor(**S), False, False, True),
    "GPClassifier": (lambda: bk.GPClassifier(**S), True, False, True),
    "GaBaSRRegressor": (
        lambda: bk.GaBaSRRegressor(n_features=8, n_components=2, map_steps=5, **S),
        False,
        False,
        True,
    ),
    "GaBaSRClassifier": (
        lambda: bk.GaBaSRClassifier(n_features=8, n_components=2, map_steps=5, **S),
        True,
        True,
        True,
    ),
    "LABRBFRegressor": (
        lambda: bk.LABRBFRegressor(
            max_support=8,
            n_iter_round=10,
            n_iter_final=10,
            num_samples=10,
            num_chains=1,
            progress_bar=False,
            random_state=0,
        ),
        False,
        False,
        True,
    ),
    "VSKRegressor": (lambda: bk.VSKRegressor(), False, False, False),
    "VSKClassifier": (lambda: bk.VSKClassifier(), True, True, False),
    "CkRBFClassifier": (lambda: bk.CkRBFClassifier(random_state=0), True, False, False),
    "MkRBFClassifier": (lambda: bk.MkRBFClassifier(random_state=0), True, False, False),
    "ConformalKernelClassifier": (
        lambda: bk.ConformalKernelClassifier(random_state=0, n_iter=20),
        True,
        False,
        False,
    ),
    "KernelSVC": (lambda: bk.KernelSVC(kernel=bk.kernels.RBF(lengthscale=1.0)), True, False, False),
}
#: fitted in the slow suite only (GPClassifier covers the GP fit path here; the shared tiny run
#: of conftest, fitted through the CLI from a DataFrame with hostile names, covers GPRegressor)
SLOW_FIT = {"GPRegressor", "GaBaSRRegressor", "GaBaSRClassifier", "LABRBFRegressor"}

rng = np.random.default_rng(0)
X = rng.normal(size=(24, 2))
Y_REG = X[:, 0] + 0.1 * rng.normal(size=24)
Y_CLF = (X[:, 0] > 0).astype(int)


def _y(name):
    return Y_CLF if ESTIMATORS[name][1] else Y_REG


def _with(X, i, j, v):
    X = X.copy()
    X[i, j] = v
    return X


#: case -> (X, y or None for the estimator's own y, expected error message)
VALIDATION = {
    "nan_in_X": (_with(X, 3, 1, np.nan), None, "Input X contains NaN"),
    "inf_in_X": (_with(X, 3, 1, np.inf), None, "Input X contains infinity"),
    "str_column": (
        np.array([[1.0, "b"]] * 24, dtype=object),
        None,
        r"X contains a non-numeric value \('b'\)",
    ),
    "str_dataframe_column": (
        pd.DataFrame({"dose": X[:, 0], "site": ["a", "b"] * 12}),
        None,
        r"X has non-numeric column\(s\) \['site'\]",
    ),
    "1d_X": (X[:, 0], None, "Expected 2D array"),
    "empty": (X[:0], "empty", r"0 sample\(s\)"),
    "one_sample": (X[:1], "one", r"1 sample\(s\)"),
    "nan_in_y": (X, "nan", "Input y contains NaN"),
}


@pytest.mark.parametrize("case", list(VALIDATION))
@pytest.mark.parametrize("name", list(ESTIMATORS))
def test_invalid_input_gives_a_clear_error(name, case):
    Xc, yspec, msg = VALIDATION[case]
    y = _y(name)
    y = (
        {"empty": y[:0], "one": y[:1], "nan": np.where(np.arange(24) == 2, np.nan, y)}.get(yspec, y)
        if isinstance(yspec, str)
        else y
    )
    with pytest.raises(ValueError, match=msg):
        ESTIMATORS[name][0]().fit(Xc, y)


CLASSIFIERS = [n for n, v in ESTIMATORS.items() if v[1]]
REGRESSORS = [n for n, v in ESTIMATORS.items() if not v[1]]


@pytest.mark.parametrize("name", REGRESSORS)
def test_text_target_of_a_regressor_names_y(name):
    with pytest.raises(ValueError, match=r"y contains a non-numeric value \('a'\)"):
        ESTIMATORS[name][0]().fit(X, np.array(["a", "b"] * 12))


@pytest.mark.parametrize("name", CLASSIFIERS)
def test_one_class(name):
    """One class: an error naming y, except MkRBF, which (like scikit-learn allows in
    ``check_classifiers_one_label``) fits and predicts that class."""
    y = np.zeros(24, dtype=int)
    if name == "MkRBFClassifier":
        assert set(ESTIMATORS[name][0]().fit(X, y).predict(X)) == {0}
        return
    with pytest.raises(ValueError, match="class"):
        ESTIMATORS[name][0]().fit(X, y)


@pytest.mark.parametrize("name", CLASSIFIERS)
def test_three_classes(name):
    """Binary-only methods refuse three classes and point to one-vs-rest (or to GPClassifier);
    the SVM-based ones are multi-class through libsvm's one-vs-one, GPClassifier through its
    softmax likelihood."""
    y = np.arange(24) % 3
    est = ESTIMATORS[name][0]()
    if ESTIMATORS[name][2]:
        with pytest.raises(ValueError, match="(?i)binary.*OneVsRest|OneVsRest.*binary|3 classes"):
            est.fit(X, y)
    else:
        assert set(est.fit(X, y).predict(X)) <= {0, 1, 2}


def hostile_frame():
    """Pandas input whose column names are HTML, with a constant column and duplicated rows."""
    Xd = np.vstack([X, X[:4]])
    Xd = np.column_stack([Xd, np.full(len(Xd), 3.0)])
    return pd.DataFrame(Xd, columns=["<b>x</b>", "x 2", "const"]), np.arange(len(Xd)) % 24


@functools.cache  # one fit per estimator for the whole module
def _fit_hostile(name):
    df, idx = hostile_frame()
    y = _y(name)[idx]
    if ESTIMATORS[name][1]:
        y = np.where(y == 1, "yes", "no")  # string labels, mapped through classes_
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # tiny sampler settings do not converge
        est = ESTIMATORS[name][0]().fit(df, y)
    return est, df, y


@pytest.mark.parametrize(
    "name", [pytest.param(n, marks=pytest.mark.slow) if n in SLOW_FIT else n for n in ESTIMATORS]
)
def test_constant_feature_duplicates_string_labels_pandas_names(name):
    est, df, y = _fit_hostile(name)
    pred = est.predict(df.iloc[:5])
    if ESTIMATORS[name][1]:
        assert set(est.classes_) == {"no", "yes"} and set(pred) <= {"no", "yes"}
        if hasattr(est, "predict_proba"):
            p = est.predict_proba(df.iloc[:5])
            assert np.isfinite(p).all()
            np.testing.assert_allclose(p.sum(axis=1), 1.0)
    else:
        assert np.isfinite(np.asarray(pred, dtype=float)).all()
    assert list(est.feature_names_in_) == list(df.columns)
    with pytest.raises(ValueError, match="feature names"):  # renamed columns are caught
        est.predict(df.rename(columns={"x 2": "other"}).iloc[:5])
    # Bayesian: the names are the InferenceData's feature coords. LAB-RBF's posterior is over
    # its last layer (its "feature" coords are intercept, sv0, ...): "input_feature" there
    if hasattr(est, "idata_"):
        dim = "input_feature" if name == "LABRBFRegressor" else "feature"
        feats = [
            list(map(str, g.coords[dim].values))
            for g in (getattr(est.idata_, k) for k in est.idata_.groups())
            if dim in g.coords
        ]
        assert feats and all(f == list(df.columns) for f in feats)


@pytest.fixture(scope="module")
def gp_regressor(tiny_gp_run):
    return bk.load_run(tiny_gp_run / "run")


def test_predict_on_200k_rows_is_batched_and_finite(gp_regressor):
    Xbig = pd.DataFrame(
        np.random.default_rng(1).normal(size=(200_000, 2)),
        columns=list(gp_regressor.feature_names_in_),
    )
    pred = gp_regressor.predictive(Xbig)
    m, s = pred.mean(), pred.std()
    assert m.shape == s.shape == (200_000,)
    assert np.isfinite(m).all() and np.isfinite(s).all() and (s > 0).all()
    # the same rows predicted alone give the same numbers (the batching changes nothing)
    np.testing.assert_allclose(gp_regressor.predict(Xbig.iloc[-3:]), m[-3:], rtol=1e-9)


def _ill_conditioned():
    """Every row three times, one feature at scale 1e9 and one at 1e-9: a singular, badly
    scaled Gram matrix for every kernel method."""
    Xi = np.repeat(np.column_stack([X[:8, 0] * 1e9, X[:8, 1] * 1e-9]), 3, axis=0)
    return Xi, np.repeat(Y_REG[:8], 3), np.repeat(Y_CLF[:8], 3)


@pytest.mark.parametrize(
    "name",
    [  # the GP's ill-conditioning: tests/test_numerics.py
        pytest.param(n, marks=pytest.mark.slow) if n in SLOW_FIT | {"GPClassifier"} else n
        for n in ESTIMATORS
    ],
)
def test_ill_conditioned_inputs_predict_finite_or_raise(name):
    """No silent NaN: an ill-conditioned problem gives finite predictions or a clear error."""
    Xi, yr, yc = _ill_conditioned()
    y = yc if ESTIMATORS[name][1] else yr
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            est = ESTIMATORS[name][0]().fit(Xi, y)
            pred = est.predict_proba(Xi) if hasattr(est, "predict_proba") else est.predict(Xi)
    except (ValueError, FloatingPointError, np.linalg.LinAlgError) as e:
        assert str(e), "an error must say what went wrong"
        return
    assert np.isfinite(np.asarray(pred, dtype=float)).all()
