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


def _solve_body(draw, X, y):
    """One draw's GP solve: a Cholesky inside the map (the bodies map_draws is used for)."""
    K = draw["a"] ** 2 * jnp.exp(-0.5 * (X[:, None] - X[None]) ** 2 / draw["l"] ** 2)
    L = jnp.linalg.cholesky(K + 0.1 * jnp.eye(len(X)))
    return jax.scipy.linalg.cho_solve((L, True), y), jnp.sum(jnp.log(jnp.diag(L)))


@pytest.mark.parametrize("n_draws", [1, 7, 40])
def test_map_draws_equals_a_loop_over_draws(n_draws):
    # 7 and 40 draws over the devices: a remainder share padded and cut off again
    from bayeskern.estimators.base import map_draws

    rng = np.random.default_rng(n_draws)
    X, y = jnp.asarray(rng.normal(size=12)), jnp.asarray(rng.normal(size=12))
    draws = {"a": rng.uniform(0.5, 2, n_draws), "l": rng.uniform(0.5, 2, n_draws)}
    alpha, logdet = map_draws(_solve_body, draws, X, y)
    for i in range(n_draws):
        a, ld = _solve_body({k: v[i] for k, v in draws.items()}, X, y)
        np.testing.assert_allclose(alpha[i], a, rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(logdet[i], ld, rtol=1e-12)


def test_map_draws_compiles_once_per_function_and_frees_it_with_the_function():
    import gc
    import weakref

    from bayeskern.estimators.base import map_draws

    traces = []

    def body(draw, X, y):
        traces.append(1)  # runs when traced, not when the compiled map runs
        return _solve_body(draw, X, y)

    rng = np.random.default_rng(0)
    draws = {"a": rng.uniform(0.5, 2, 9), "l": rng.uniform(0.5, 2, 9)}
    X, y = jnp.asarray(rng.normal(size=12)), jnp.asarray(rng.normal(size=12))
    first = map_draws(body, draws, X, y)
    n = len(traces)
    assert n >= 1
    # new values, same shapes: the compiled map is reused
    second = map_draws(body, {k: v[::-1] for k, v in draws.items()}, X + 1.0, y)
    assert len(traces) == n
    assert not np.allclose(first[1], second[1])
    # the cache holds the function weakly: its programs go with it
    ref = weakref.ref(body)
    del body
    gc.collect()
    assert ref() is None
