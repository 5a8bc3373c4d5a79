"""Test configuration: CPU, float64, headless plots, tiny sampler settings in notebooks."""

import os
import signal

os.environ.setdefault("BAYESKERN_QUICK", "1")
os.environ.setdefault("JAX_PLATFORMS", "cpu")
# One persistent XLA compilation cache per test run, shared by the xdist workers, notebook
# kernels and CLI subprocesses (they inherit the environment set here, in the controlling
# process): many tests compile the same programs (tiny GP fits of the same shapes). Every
# program is cached, however quick to compile: NumPyro's HMC initialization and the first
# call of each jnp operation run eagerly, one small XLA program per primitive (about 250 of
# them, 10 s, for the first tiny GP fit in a process), and every worker, notebook kernel and
# CLI subprocess would compile them again; with them cached, a fresh process's first tiny GP
# fit took 3.8 s instead of 15.7 s. Created fresh for every run and removed at its end, so no
# run reuses programs compiled by an earlier one.
_OWN_XLA_CACHE = None
if "JAX_COMPILATION_CACHE_DIR" not in os.environ and not os.environ.get("PYTEST_XDIST_WORKER"):
    _OWN_XLA_CACHE = __import__("tempfile").mkdtemp(prefix="bayeskern-test-xla-cache-")
    os.environ["JAX_COMPILATION_CACHE_DIR"] = _OWN_XLA_CACHE
    os.environ.setdefault("JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS", "0")
    os.environ.setdefault("JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES", "0")

# Compile for speed of compiling, not of running: the suite's tiny fits spend most of their time
# in XLA:CPU compiling (each new model's sampling loop, ~2 s), little in running what it
# compiled. Without XLA's newer fusion emitters and LLVM's optimization passes the programs
# compile about 3x faster; they compute the same operations, in ways that may differ in the
# last bits, which no test depends on. Set before JAX starts; a caller's own XLA_FLAGS stay.
FAST_COMPILE_FLAGS = (
    "--xla_cpu_use_fusion_emitters=false --xla_backend_optimization_level=0 "
    "--xla_llvm_disable_expensive_passes=true "
    "--xla_cpu_parallel_codegen_split_count=1"
)
if "xla_cpu_use_fusion_emitters" not in os.environ.get("XLA_FLAGS", ""):
    os.environ["XLA_FLAGS"] = f"{os.environ.get('XLA_FLAGS', '')} {FAST_COMPILE_FLAGS}".strip()

# A shell without job control starts its background jobs with SIGINT ignored (`make test &` in
# a script, some CI runners); every process started from them inherits that, and a Python
# started with SIGINT ignored installs no KeyboardInterrupt handler, so the tests that
# interrupt a child process would test the launcher rather than the package. This process
# takes Python's own handler back, and the processes it starts (xdist workers, their
# children) start with SIGINT at its default, as from a terminal.
if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

import matplotlib  # noqa: E402

matplotlib.use("Agg")

import jax  # noqa: E402

# float64 unless BAYESKERN_X64=0 (as for the package): `make test` runs the kernel tests once
# more that way, with the dtype-aware tolerances of tests/tolerances.py
jax.config.update("jax_enable_x64", os.environ.get("BAYESKERN_X64", "1") != "0")

import numpy as np  # noqa: E402
import pytest  # noqa: E402

#: float32's floor for the tolerances of the tests that run in both precisions (`make test`
#: runs the kernel tests once more with BAYESKERN_X64=0): float32 keeps 7 digits, and a Gram
#: entry or a density is a few operations away from its inputs
F32_RTOL, F32_ATOL = 1e-4, 1e-6


def assert_close(actual, desired, rtol=1e-7, atol=0.0, **kwargs):
    """``np.testing.assert_allclose`` with tolerances written for float64, raised to float32's
    floor when JAX runs in float32 (the shape of tinygp's ``tests/test_utils.py``)."""
    if not jax.config.jax_enable_x64:
        rtol, atol = max(rtol, F32_RTOL), max(atol, F32_ATOL)
    np.testing.assert_allclose(
        np.asarray(actual), np.asarray(desired), rtol=rtol, atol=atol, **kwargs
    )


def f32_floor(tol: float, floor: float = F32_ATOL) -> float:
    """A tolerance written for float64, raised to ``floor`` when JAX runs in float32."""
    return tol if jax.config.jax_enable_x64 else max(tol, floor)


#: sampler settings for tests: enough to exercise the code, far from converged
TINY = dict(num_warmup=20, num_samples=20, num_chains=1, progress_bar=False)


@pytest.fixture
def rng():
    return np.random.default_rng(0)


@pytest.fixture(autouse=True, scope="module")
def _release_compiled_programs():
    """Drop JAX's in-memory compiled programs after every test file.

    A pytest worker otherwise keeps every program the suite has compiled (thousands, several
    GB) for its whole life, and XLA's CPU code memory does not survive that: workers died with
    a segmentation fault inside a compile or a cache read late in the run (JAX issue #27201;
    MaxText clears the caches per test module for the same reason). Programs a later file needs
    again come back from the persistent compilation cache above, without recompiling.
    """
    yield
    jax.clear_caches()
    __import__("bayeskern.programs").programs.clear_programs()
    __import__("gc").collect()


#: the slowest test files run first, so that with `pytest -n 2 --dist loadfile` the other worker
#: works through the many short files meanwhile instead of waiting for them at the end
FIRST = (
    "test_notebooks.py",
    "test_runs_cli.py",
    "test_gp.py",
    "test_report_methods.py",
    "test_estimator_checks.py",
    "test_bad_input.py",
    "test_vsk.py",
    "test_gabasr_gibbs.py",
    "test_kernel_properties.py",
    "test_ckrbf.py",
    "test_conformal.py",
)


def pytest_collection_modifyitems(items):
    rank = {name: i for i, name in enumerate(FIRST)}
    items.sort(key=lambda item: rank.get(item.path.name, len(FIRST)))


#: hostile names used by the hardening tests (tests/test_cli_fuzz.py, test_crash_safety.py, ...)
SCRIPT = "<script>alert(1)</script>"
DATA_NAME = "<img src=x onerror=alert(2)>.csv"  # a legal file name on Linux


@pytest.fixture(scope="session")
def tiny_gp_run(tmp_path_factory):
    """A directory with ``run/``: a GP regression fitted by ``bayeskern fit`` (tiny sampler
    settings, 20 % held out) on features ``x1`` and :data:`SCRIPT` with six duplicated rows, read
    from a file named :data:`DATA_NAME`; ``train.csv`` (the same rows, plain name) and
    ``new.csv`` (5 rows of features). One fit per pytest worker, shared by the hardening tests.

    Its training shapes (24 rows x 2 features, 1 chain x (10 + 10) draws) are those of the CLI
    regression fits in test_runs_cli.py, test_cli_conventions.py and test_report_methods.py:
    whichever fits first compiles the programs, the others find them in the compilation cache.
    """
    import pandas as pd

    from bayeskern.cli import main

    d = tmp_path_factory.mktemp("tiny_gp_run")
    r = np.random.default_rng(0)
    x1, x2 = r.uniform(0, 5, 24), r.normal(size=24)
    x1, x2 = np.r_[x1, x1[:6]], np.r_[x2, x2[:6]]
    df = pd.DataFrame({"x1": x1, SCRIPT: x2, "y": np.sin(x1) + 0.1 * x2})
    df.to_csv(d / DATA_NAME, index=False)
    df.to_csv(d / "train.csv", index=False)
    df.drop(columns="y").iloc[:5].to_csv(d / "new.csv", index=False)
    assert (
        main(
            [
                "fit",
                str(d / DATA_NAME),
                "--target",
                "y",
                "--out",
                str(d / "run"),
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
    return d


def pytest_sessionfinish(session, exitstatus):
    if _OWN_XLA_CACHE is not None:
        __import__("shutil").rmtree(_OWN_XLA_CACHE, ignore_errors=True)
