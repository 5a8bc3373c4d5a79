"""The command line's conventions: column selection and row IDs, --task, --version, help with
defaults, a fast --help (no JAX import), JAX configured lazily, log-friendly progress output,
class-probability intervals in predict."""

import argparse
import json
import os
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest

import bayeskern as bk
from bayeskern.cli import UserError, _task, build_parser, main

#: modules a --help or --version must not import (each takes 0.1 to 1.3 s)
HEAVY = ("jax", "numpyro", "arviz", "sklearn", "matplotlib", "pandas", "scipy", "numpy")


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    """CSV files; ``train.csv`` has 24 rows and 2 numeric features, the training shapes of
    conftest's ``tiny_gp_run``, so a tiny fit on it reuses that fit's compiled programs."""
    d = tmp_path_factory.mktemp("conventions")
    r = np.random.default_rng(0)
    a, b = r.uniform(0, 5, 24), r.normal(size=24)
    pd.DataFrame(
        {
            "rid": [f"r{i}" for i in range(24)],
            "a": a,
            "b": b,
            "note": ["t"] * 24,
            "y": np.sin(a) + 0.1 * b,
        }
    ).to_csv(d / "train.csv", index=False)
    pd.DataFrame({"rid": ["n0", "n1", "n2"], "a": a[:3], "b": b[:3]}).to_csv(
        d / "new.csv", index=False
    )
    pd.DataFrame({"a": a[:3], "b": b[:3]}).to_csv(d / "new_no_id.csv", index=False)
    pd.DataFrame({"a": a, "b": b, "c": (a > 2.5).astype(int)}).to_csv(d / "clf.csv", index=False)
    return d


def _run_cli_probe(argv):
    """Run ``main(argv)`` in a fresh interpreter; return (stdout, heavy modules imported)."""
    code = (
        "import sys\nfrom bayeskern.cli import main\ntry:\n    main(sys.argv[1:])\n"
        "except SystemExit as e:\n    assert e.code == 0, e.code\n"
        f"print('HEAVY', [m for m in {HEAVY!r} if m in sys.modules])"
    )
    r = subprocess.run(
        [sys.executable, "-c", code, *argv], capture_output=True, text=True, timeout=120, check=True
    )
    out, _, heavy = r.stdout.rpartition("HEAVY ")
    return out, eval(heavy)  # a list literal printed by the probe


@pytest.mark.parametrize(
    "argv",
    [["--help"], ["--version"], ["fit", "--help"], ["predict", "--help"], ["report", "--help"]],
)
def test_help_and_version_import_nothing_heavy(argv):
    out, heavy = _run_cli_probe(argv)
    assert heavy == []
    if argv == ["--version"]:
        assert out.strip() == f"bayeskern {bk.__version__}"
    else:
        assert out.startswith("usage: bayeskern")


def test_every_help_shows_defaults_without_noise():
    parser = build_parser()
    subs = parser._subparsers._group_actions[0].choices
    for name, sub in subs.items():
        text = " ".join(sub.format_help().split())  # unwrapped
        assert "default: None" not in text and "default: False" not in text, name
    fit = " ".join(subs["fit"].format_help().split())
    for shown in (
        "(default: auto)",
        "(default: gp)",
        "(default: rbf)",
        "MCMC chains (default: 4)",
        "deprecated alias of --task",
    ):
        assert shown in fit
    assert "(default: 50000)" in " ".join(subs["predict"].format_help().split())


_JAX_PROBE = """
import sys
{before}
import jax, jax.numpy as jnp
from bayeskern.devices import cpu_device_status
print(sys.argv[1], jnp.ones(1).dtype, jax.device_count(), cpu_device_status())
"""


@pytest.mark.parametrize(
    "case, before, env, expect",
    [
        # import bayeskern imports no JAX, and JAX is configured when it is imported later
        ("lazy", "import bayeskern; assert 'jax' not in sys.modules", {}, ("float64", 3)),
        ("submodule", "from bayeskern.kernels import RBF", {}, ("float64", 3)),
        ("jax-first", "import jax.numpy\nimport bayeskern", {}, ("float64", 3)),
        # an explicit choice made before importing bayeskern wins
        (
            "explicit",
            "import jax; jax.config.update('jax_num_cpu_devices', 2)\nimport bayeskern",
            {},
            ("float64", 2),
        ),
        (
            "opt-out",
            "import bayeskern",
            {"BAYESKERN_X64": "0", "BAYESKERN_CPU_DEVICES": "0"},
            ("float32", 1),
        ),
    ],
)
def test_import_configures_jax_before_it_starts(case, before, env, expect):
    environ = {
        k: v
        for k, v in os.environ.items()
        if k not in ("JAX_ENABLE_X64", "XLA_FLAGS", "JAX_NUM_CPU_DEVICES")
    }
    environ.update({"BAYESKERN_CPU_DEVICES": "3", **env})
    r = subprocess.run(
        [sys.executable, "-c", _JAX_PROBE.format(before=before), case],
        env=environ,
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    )
    name, dtype, count, *status = r.stdout.split()
    assert (name, dtype, int(count)) == (case, *expect), " ".join(status)


def test_public_names_load_lazily():
    assert set(bk.__all__) <= set(dir(bk))
    for name in bk.__all__:
        assert getattr(bk, name) is not None
    assert bk.GPRegressor is bk.estimators.GPRegressor
    code = "import bayeskern as bk; print(bk.runs.predict_table.__name__, bk.plots.__name__)"
    r = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=300, check=True
    )
    assert r.stdout.split() == ["predict_table", "bayeskern.plots"]  # submodules load too
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        bk.nope  # noqa: B018


def test_report_function_survives_its_submodule_import():
    """``bk.report`` is the function even when :mod:`bayeskern.report` was imported first."""
    code = (
        "import bayeskern.report; from bayeskern.report import render_report; "
        "import bayeskern as bk; print(bk.report.__module__, bk.report.__name__, "
        "bk.compare_report.__name__)"
    )
    r = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=300, check=True
    )
    assert r.stdout.split() == ["bayeskern.report", "report", "compare_report"]


_REGISTRIES = """
import sys
import numpy as np
from bayeskern.kernels import RBF, VSK
from bayeskern.learning import fit_kernel
from bayeskern.runs import load_run
X = np.random.default_rng(0).normal(size=(20, 2))
fit_kernel(VSK(RBF(), scaling="naive_bayes"), X, (X[:, 0] > 0).astype(int))
print(type(load_run(sys.argv[1])).__name__)
"""


def test_registries_fill_on_first_need(tiny_gp_run):
    """Without the package's eager imports, load_run still finds its estimator class."""
    r = subprocess.run(
        [sys.executable, "-c", _REGISTRIES, str(tiny_gp_run / "run")],
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    )
    assert r.stdout.split() == ["GPRegressor"]


def _args(task="auto", target="y"):
    return argparse.Namespace(task=task, target=target)


@pytest.mark.parametrize(
    "y, task, reason",
    [
        ([0.5, 1.25, 2.0, 3.0], "regression", "non-integer values"),
        (["a", "b", "a", "b"], "binary", "2 distinct values, 'a' and 'b'"),
        ([True, False, True, False], "binary", "2 distinct values"),
        (
            [0, 1, 2] * 4,
            "multiclass",
            "integer target with 3 distinct values, each in at least 2 "
            "rows; use --task regression to override",
        ),
        ([0.0, 1.0, 2.0] * 4, "multiclass", "integer target with 3 distinct values"),
        (["setosa", "versicolor", "virginica"] * 4, "multiclass", "labels with 3 distinct values"),
        ([0, 1, 2] * 4 + [3], "regression", "3 occurs once); use --task multiclass to override"),
        (list(range(11)) * 3, "regression", "11 distinct values (more than 10)"),
    ],
)
def test_auto_task_rules(y, task, reason):
    got, why = _task(_args(), pd.Series(y))
    assert got == task and reason in why


@pytest.mark.parametrize(
    "y, task, msg",
    [
        ([f"id{i}" for i in range(60)], "auto", "60 distinct labels in 60 rows"),
        (["a", "b", "c", "d"], "auto", "4 distinct labels in 4 rows"),
        ([1.0] * 5, "auto", "single value"),
        ([0, 1, 2] * 3, "binary", "--task binary needs a target with 2 distinct values"),
        ([0, 1] * 4, "multiclass", "--task multiclass needs a target with 3 or more distinct"),
        (["a", "b"] * 3, "regression", "--task regression needs a numeric target"),
    ],
)
def test_task_errors_say_why(y, task, msg):
    with pytest.raises(UserError, match=msg.replace("(", r"\(")):
        _task(_args(task), pd.Series(y))


def test_explicit_task_is_kept():
    assert _task(_args("regression"), pd.Series([0, 1, 2] * 4)) == ("regression", None)
    assert _task(_args("multiclass"), pd.Series([0, 1, 2] * 4)) == ("multiclass", None)


def test_unused_categories_are_not_values():
    """A categorical target's declared but unused categories do not count as classes."""
    y = pd.Series(pd.Categorical(["a", "b"] * 4, categories=["a", "b", "c"]))
    assert _task(_args(), y)[0] == "binary"
    with pytest.raises(UserError, match="single value"):
        _task(_args(), pd.Series(pd.Categorical(["a"] * 4, categories=["a", "b"])))


@pytest.mark.parametrize("method", ["vsk", "gabasr"])
def test_binary_only_methods_refuse_multiclass_naming_the_option(method, tmp_path, capsys):
    """A multi-class target with a two-class method: a one-line error naming --method and
    --task (exit status 2) before anything is fitted or written."""
    data = tmp_path / "three.csv"
    pd.DataFrame({"x": np.arange(12.0), "y": np.arange(12) % 3}).to_csv(data, index=False)
    out = tmp_path / "run"
    assert main(["fit", str(data), "--target", "y", "--method", method, "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert f"--method {method} classifies two classes only" in err and "--task" in err
    assert not out.exists()


def _fit(files, out, *extra):
    return main(
        [
            "fit",
            str(files / "train.csv"),
            "--target",
            "y",
            "--out",
            str(out),
            "--num-warmup",
            "10",
            "--num-samples",
            "10",
            "--num-chains",
            "1",
            *extra,
        ]
    )


def test_fit_with_columns_and_id_logs_plain_lines(files, tmp_path, capsys):
    """A fit through main() with stdout captured (not a terminal): the task and its reason,
    plain progress lines, no carriage return or escape code; the ID column is recorded and
    echoed first by predict."""
    run = tmp_path / "run"
    assert _fit(files, run, "--drop", "note", "--id", "rid") == 0
    cap = capsys.readouterr()
    assert "\r" not in cap.out + cap.err and "\x1b" not in cap.out + cap.err
    lines = cap.out.splitlines()
    assert lines[0] == "task: regression (numeric target with non-integer values)"
    assert lines[1] == (
        "fitting GPRegressor to 24 rows x 2 features: 1 chain x (10 warm-up + 10 draws)"
    )
    assert lines[2].startswith("done in ") and lines[2].endswith(" s")
    assert list(bk.load_run(run).feature_names_in_) == ["a", "b"]
    assert bk.runs.run_metadata(run) == {
        "data": str(files / "train.csv"),
        "target": "y",
        "task": "regression",
        "id_column": "rid",
    }
    tables = []
    for data, extra in (("new.csv", []), ("new_no_id.csv", []), ("new.csv", ["--id", "b"])):
        out = tmp_path / f"p{len(tables)}.csv"
        assert (
            main(["predict", str(run), str(files / data), "--out", str(out), "--quiet", *extra])
            == 0
        )
        tables.append(pd.read_csv(out))
    regression = ["mean", "sd", "lower_0.9", "upper_0.9"]
    assert list(tables[0].columns) == ["rid", *regression]
    assert list(tables[0]["rid"]) == ["n0", "n1", "n2"]
    assert list(tables[1].columns) == regression  # the file has no rid: nothing to echo
    assert list(tables[2].columns) == ["b", *regression]  # --id overrides the run's
    np.testing.assert_allclose(tables[2]["b"], pd.read_csv(files / "new.csv")["b"])
    pd.testing.assert_frame_equal(tables[0][regression], tables[1])
    # --features: only these columns
    assert _fit(files, tmp_path / "run_a", "--features", "a", "--quiet") == 0
    assert list(bk.load_run(tmp_path / "run_a").feature_names_in_) == ["a"]


@pytest.mark.parametrize(
    "extra, msg",
    [
        (["--features", "a", "--drop", "note"], "--features and --drop cannot be used together"),
        (["--id", "nope"], "--id column 'nope' is not in"),
        (["--id", "y"], "--id names the target column 'y'"),
        (["--drop", "note,y"], "--drop names the target column 'y'"),
        (["--drop", "zz"], "--drop: column 'zz' is not in"),
        (["--features", "a,y"], "--features names the target column 'y'"),
        (["--features", "a,zz"], "--features: column 'zz' is not in"),
        (["--features", "a,rid", "--id", "rid"], "--features names the --id column 'rid'"),
        (["--features", " , "], "--features names no column"),
        ([], "non-numeric feature columns in"),  # rid and note: the message suggests --drop / --id
        (
            ["--drop", "note", "--id", "rid", "--task", "binary"],
            "--task binary needs a target with 2 distinct values",
        ),
        (
            [
                "--drop",
                "note",
                "--id",
                "rid",
                "--model",
                "gp-classification",
                "--task",
                "regression",
            ],
            "--model gp-classification (deprecated) contradicts --task regression",
        ),
    ],
)
def test_column_and_task_errors_are_one_line(files, tmp_path, capsys, extra, msg):
    assert _fit(files, tmp_path / "run", *extra) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("bayeskern: error:") and msg in err and "\n" not in err
    assert list(tmp_path.iterdir()) == []


def test_method_without_a_classifier_names_method(files, tmp_path, capsys):
    rc = main(
        [
            "fit",
            str(files / "clf.csv"),
            "--target",
            "c",
            "--out",
            str(tmp_path / "r"),
            "--method",
            "labrbf",
        ]
    )
    cap = capsys.readouterr()
    assert rc == 2 and cap.out.startswith("task: binary (2 distinct values, ")
    assert cap.err.strip() == (
        "bayeskern: error: --method labrbf does regression only, but the "
        "task is binary (see --task)"
    )


def test_deprecated_model_maps_to_task(capsys):
    from bayeskern.cli import _resolve_task_option

    for model, task in (("gp-regression", "regression"), ("gp-classification", "binary")):
        args = argparse.Namespace(model=model, task="auto")
        _resolve_task_option(args)
        assert args.task == task
        assert capsys.readouterr().err == (
            f"bayeskern: warning: --model is deprecated; use --task {task}\n"
        )


class _Probabilities:
    """A fitted classifier's prediction interface with fixed probabilities of 3 classes."""

    classes_ = np.array(["x", "y", "z"])

    def predict_proba(self, X):
        return np.array([[0.2, 0.5, 0.3], [0.6, 0.1, 0.3]])


class _ProbabilityIntervals(_Probabilities):
    """The same, with fixed intervals: the probabilities -/+ 0.1."""

    def predict_proba_interval(self, X, interval=0.9):
        self.interval = interval
        p = self.predict_proba(X)
        return p - 0.1, p + 0.1


def test_predict_table_writes_class_probability_intervals():
    est = _ProbabilityIntervals()
    t = bk.runs.predict_table(est, np.zeros((2, 1)), interval=0.8, class_intervals=True)
    assert est.interval == 0.8
    assert list(t.columns) == ["prediction"] + [
        f"p_{c}{s}" for c in "xyz" for s in ("", "_lower_0.8", "_upper_0.8")
    ]
    assert list(t["prediction"]) == ["y", "x"]
    np.testing.assert_allclose(t["p_z_upper_0.8"], [0.4, 0.4])
    np.testing.assert_allclose(t["p_x_lower_0.8"], [0.1, 0.5])
    plain = bk.runs.predict_table(est, np.zeros((2, 1)))
    assert list(plain.columns) == ["prediction", "p_x", "p_y", "p_z"]
    with pytest.raises(ValueError, match="interval: _Probabilities gives no class-probability"):
        bk.runs.predict_table(_Probabilities(), np.zeros((2, 1)), class_intervals=True)


@pytest.mark.skipif(
    not hasattr(bk.GPClassifier, "predict_proba_interval"),
    reason="needs the multiclass classifiers of branch i23-multiclass",
)
def test_multiclass_end_to_end(tmp_path, capsys):
    """A 3-class integer target (every third iris flower): auto picks multiclass, GPClassifier
    fits it, and predict writes a probability and its interval per class. The rows and sampler
    counts of tests/test_multiclass.py's iris fit: the compiled programs are shared."""
    from sklearn.datasets import load_iris

    X, label = load_iris(return_X_y=True)
    X, label = X[::3], label[::3]
    table = pd.DataFrame(X, columns=["x1", "x2", "x3", "x4"]).assign(species=label)
    table.to_csv(tmp_path / "iris.csv", index=False)
    assert (
        main(
            [
                "fit",
                str(tmp_path / "iris.csv"),
                "--target",
                "species",
                "--out",
                str(tmp_path / "run"),
                "--num-warmup",
                "20",
                "--num-samples",
                "20",
                "--num-chains",
                "1",
            ]
        )
        == 0
    )
    assert capsys.readouterr().out.startswith(
        "task: multiclass (integer target with 3 distinct values, each in at least 2 rows"
    )
    config = json.loads((tmp_path / "run" / "config.json").read_text())
    assert config["estimator"] == "GPClassifier" and config["state"]["task"] == "multiclass"
    assert (
        main(
            [
                "predict",
                str(tmp_path / "run"),
                str(tmp_path / "iris.csv"),
                "--out",
                str(tmp_path / "p.csv"),
                "--interval",
                "0.8",
                "--quiet",
            ]
        )
        == 0
    )
    p = pd.read_csv(tmp_path / "p.csv")
    probs = p[["p_0", "p_1", "p_2"]].to_numpy()
    np.testing.assert_allclose(probs.sum(axis=1), 1.0, rtol=1e-8)
    for c in range(3):
        assert np.all(p[f"p_{c}_lower_0.8"] <= p[f"p_{c}"] + 1e-12)
        assert np.all(p[f"p_{c}"] <= p[f"p_{c}_upper_0.8"] + 1e-12)
    assert (p["prediction"] == label).mean() > 0.8


def test_the_command_chooses_xla_fusion_emitters_unless_told(monkeypatch):
    """The command's own process compiles with XLA:CPU's older fusion emitters; a choice in
    the environment wins, other XLA flags are kept."""
    from bayeskern import cli

    monkeypatch.delenv("XLA_FLAGS", raising=False)
    cli.configure_xla()
    assert os.environ["XLA_FLAGS"] == cli.CLI_XLA_FLAGS
    monkeypatch.setenv("XLA_FLAGS", "--xla_force_host_platform_device_count=2")
    cli.configure_xla()
    assert (
        os.environ["XLA_FLAGS"] == "--xla_force_host_platform_device_count=2 " + cli.CLI_XLA_FLAGS
    )
    monkeypatch.setenv("XLA_FLAGS", "--xla_cpu_use_fusion_emitters=true")
    cli.configure_xla()
    assert os.environ["XLA_FLAGS"] == "--xla_cpu_use_fusion_emitters=true"
