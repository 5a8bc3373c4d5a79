"""Test configuration: CPU, float64, headless plots, tiny sampler settings in notebooks."""

import os

os.environ.setdefault("BAYESKERN_QUICK", "1")
os.environ.setdefault("JAX_PLATFORMS", "cpu")

import matplotlib  # noqa: E402

matplotlib.use("Agg")

import jax  # noqa: E402

jax.config.update("jax_enable_x64", True)

import numpy as np  # noqa: E402
import pytest  # noqa: E402

#: sampler settings for tests: enough to exercise the code, far from converged
TINY = dict(num_warmup=20, num_samples=20, num_chains=1, progress_bar=False)


@pytest.fixture
def rng():
    return np.random.default_rng(0)


#: the slowest test files run first, so that with `pytest -n 2 --dist loadfile` the other worker
#: works through the many short files meanwhile instead of waiting for them at the end
FIRST = ("test_notebooks.py", "test_gp.py", "test_runs_cli.py", "test_report_methods.py")


def pytest_collection_modifyitems(items):
    rank = {name: i for i, name in enumerate(FIRST)}
    items.sort(key=lambda item: rank.get(item.path.name, len(FIRST)))
