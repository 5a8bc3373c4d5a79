"""Compiled programs take the data as inputs: a second data set of the same shape compiles
nothing new (``bayeskern.inference.start.split_data``, ``run_nuts``)."""

import os
import subprocess
import sys
import textwrap

import jax.numpy as jnp
import numpy as np

from bayeskern.inference.start import split_data

SCRIPT = textwrap.dedent("""
    import os, sys
    import jax
    jax.config.update("jax_enable_x64", True)
    import numpy as np, numpyro, numpyro.distributions as dist
    from bayeskern.inference import run_nuts

    def model(x, y=None, *, degree):
        w = numpyro.sample("w", dist.Normal(0, 1).expand([degree + 1]).to_event(1))
        s = numpyro.sample("s", dist.HalfNormal(1.0))
        mean = sum(w[k] * x ** k for k in range(degree + 1))
        numpyro.sample("y", dist.Normal(mean, s), obs=y)

    cache = os.environ["JAX_COMPILATION_CACHE_DIR"]
    counts = []
    for seed in (0, 1):
        r = np.random.default_rng(seed)
        x = r.uniform(-1, 1, 30)
        y = 1 + 2 * x + r.normal(0, 0.3, 30)
        run_nuts(model, model_kwargs=dict(x=x, y=y, degree=1), rng_key=0, num_warmup=20,
                 num_samples=20, num_chains=1, progress_bar=False, init=sys.argv[1])
        counts.append(len(os.listdir(cache)))
    print(counts[0], counts[1])
""")


def test_split_data_separates_arrays_and_puts_them_back():
    kw = dict(X=np.ones((3, 2)), y=jnp.zeros(3), n=4, name="a", nested=(np.arange(2), None))
    data, bind = split_data(kw)
    assert len(data) == 3
    back = bind(data)
    assert back["n"] == 4 and back["name"] == "a" and back["nested"][1] is None
    assert back["X"] is kw["X"] and back["nested"][0] is kw["nested"][0]
    other = bind([2 * d for d in data])
    np.testing.assert_array_equal(other["X"], 2 * kw["X"])


def test_a_second_data_set_of_the_same_shape_compiles_nothing(tmp_path):
    """Every program of a NUTS fit (start values, mode search, initial state, sampling loop)
    is found in JAX's persistent compilation cache when only the data's values change."""
    for init in ("map", "prior"):
        cache = tmp_path / init
        env = {
            **os.environ,
            "JAX_COMPILATION_CACHE_DIR": str(cache),
            "JAX_PLATFORMS": "cpu",
            "JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS": "0",
            "JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES": "0",
        }
        out = subprocess.run(
            [sys.executable, "-c", SCRIPT, init],
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert out.returncode == 0, out.stderr
        first, second = map(int, out.stdout.split()[-2:])
        assert first > 0
        assert second == first, f"init={init}: {second - first} programs compiled again"
