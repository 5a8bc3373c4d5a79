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
