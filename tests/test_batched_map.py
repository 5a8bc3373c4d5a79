"""``bayeskern.batching``: ``lax.map`` in batches without the remainder branch that hangs
XLA:CPU, and the row slices of batched prediction."""

import subprocess
import sys
import textwrap

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from bayeskern.batching import batched_map, row_slices


@pytest.mark.parametrize("n_items, batch", [(20, 16), (32, 16), (3, 16), (1, 1), (7, 3)])
def test_equals_lax_map_on_pytrees(n_items, batch):
    rng = np.random.default_rng(n_items)
    xs = {"a": jnp.asarray(rng.normal(size=(n_items, 3))), "b": jnp.arange(n_items)}

    def f(x):
        return jnp.sum(x["a"] ** 2) * x["b"], x["a"][::-1]

    got = jax.jit(lambda xs: batched_map(f, xs, batch))(xs)
    want = jax.vmap(f)(xs)
    for g, w in zip(got, want, strict=True):
        assert g.shape == w.shape
        np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=1e-14)


@pytest.mark.parametrize("n_rows, block", [(25, 10), (30, 10), (4, 10)])
def test_blocks_equal_one_call(n_rows, block):
    rng = np.random.default_rng(n_rows)
    X, Z = jnp.asarray(rng.normal(size=(n_rows, 2))), jnp.asarray(rng.normal(size=(7, 2)))

    def f(B):
        return jnp.exp(-jnp.sum((B[:, None, :] - Z[None]) ** 2, axis=-1))

    got = np.asarray(batched_map(f, X, block, blocks=True))
    assert got.shape == (n_rows, 7)
    # equal up to rounding: XLA may fuse a (10, 7) block differently from the whole (n, 7)
    np.testing.assert_allclose(got, np.asarray(f(X)), rtol=1e-14, atol=1e-15)


def test_row_slices_cover_the_rows_once():
    assert row_slices(0, 3) == []
    assert row_slices(7, 3) == [slice(0, 3), slice(3, 6), slice(6, 7)]
    assert np.array_equal(
        np.concatenate([np.arange(10)[s] for s in row_slices(10, 4)]), np.arange(10)
    )


def test_lu_body_with_a_remainder_batch_does_not_hang():
    """Regression: 20 items in batches of 16 through ``jnp.linalg.inv`` of 100x100 matrices.
    With plain ``lax.map`` this blocked forever within 300 calls on jax 0.10.2 (XLA:CPU,
    measured: hung in 3 of 3 runs); GP fits hung in their LOO step the same way."""
    code = textwrap.dedent("""
        import jax, jax.numpy as jnp, numpy as np
        jax.config.update("jax_enable_x64", True)
        from bayeskern.batching import batched_map
        rng = np.random.default_rng(0)
        A = rng.normal(size=(20, 100, 100))
        S = jnp.asarray(A @ A.transpose(0, 2, 1) / 100 + np.eye(100))
        g = jax.jit(lambda S: batched_map(jnp.linalg.inv, S, 16))
        # one BLAS thread, as every bayeskern fit/predict runs (devices.limit_blas): import no
        # longer caps BLAS, and multi-threaded OpenBLAS spin-waits on these small LU calls
        # (measured on a busy machine: 61 s instead of 5.6 s for this loop), which is a
        # different slowness from the hang this test guards against
        from threadpoolctl import threadpool_limits
        from bayeskern.devices import blas_threads
        with threadpool_limits(blas_threads(), user_api="blas"):
            for i in range(300):
                out = np.asarray(g(S + i * 1e-3))
        np.testing.assert_allclose(out[0] @ np.asarray(S[0] + 0.299), np.eye(100), atol=1e-8)
        print("done")
    """)
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=240)
    assert proc.returncode == 0 and proc.stdout.strip() == "done", proc.stderr[-2000:]
