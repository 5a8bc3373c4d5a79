"""Compiled programs shared across functions that lower alike (``bayeskern.programs``)."""

import contextlib

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import bayeskern as bk
from bayeskern import programs
from bayeskern.programs import clear_programs, shared_jit


@contextlib.contextmanager
def count_compilations():
    """Count XLA compilations (and persistent-cache loads) made inside the block."""
    seen = []

    def on_duration(event, duration, **kw):
        if event == "/jax/core/compile/backend_compile_duration":
            seen.append(kw.get("fun_name"))

    def on_event(event, **kw):
        if event == "/jax/compilation_cache/cache_hits":
            seen.append("persistent cache")

    jax.monitoring.register_event_duration_secs_listener(on_duration)
    jax.monitoring.register_event_listener(on_event)
    try:
        yield seen
    finally:
        jax.monitoring.unregister_event_duration_listener(on_duration)
        jax.monitoring.unregister_event_listener(on_event)


def _affine(scale):
    """A new closure per call: jax.jit alone would compile each one."""

    def f(a, b):
        return {"out": jnp.tanh(a * scale) @ b, "sum": (a + b).sum()}

    return f


def test_functions_that_lower_alike_share_one_compilation():
    clear_programs()
    a, b = jnp.ones((5, 5)), jnp.arange(25.0).reshape(5, 5)
    first, second = shared_jit(_affine(2.0)), shared_jit(_affine(2.0))
    first(a, b)
    a2, b2 = 2 * a, b + 1  # other values, same shapes
    with count_compilations() as seen:
        out = second(a2, b2)
    assert seen == []
    np.testing.assert_allclose(out["out"], np.tanh(4 * np.ones((5, 5))) @ (np.asarray(b) + 1))
    # another constant in the program, another program
    with count_compilations() as seen:
        out = shared_jit(_affine(3.0))(a, b)
    assert len(seen) == 1
    np.testing.assert_allclose(out["out"], np.tanh(3 * np.ones((5, 5))) @ np.asarray(b))


def test_closed_over_constants_are_each_functions_own():
    """Closed-over arrays are part of the program: embedded in its text (this JAX's default)
    or hoisted into hidden arguments (never shared); either way, not another function's."""
    clear_programs()
    x = jnp.ones(5000)
    c1, c2 = jnp.arange(5000.0), -jnp.arange(5000.0)
    np.testing.assert_allclose(shared_jit(lambda x: x + c1)(x), 1 + np.arange(5000.0))
    np.testing.assert_allclose(shared_jit(lambda x: x + c2)(x), 1 - np.arange(5000.0))


def test_unused_arguments_of_other_shapes_are_another_program():
    """JAX prunes an unused argument from the program text; its shape still counts."""
    clear_programs()
    for n in (3, 4):
        np.testing.assert_array_equal(
            shared_jit(lambda x, unused: x * 2)(jnp.ones(2), jnp.ones(n)), 2.0
        )


def test_each_function_keeps_its_own_output_structure():
    clear_programs()
    x = jnp.arange(3.0)
    one = shared_jit(lambda x: {"a": x * 2, "b": x + 1})(x)
    other = shared_jit(lambda x: {"p": x * 2, "q": x + 1})(x)
    assert set(one) == {"a", "b"} and set(other) == {"p", "q"}
    np.testing.assert_array_equal(other["q"], [1.0, 2.0, 3.0])


def test_a_new_signature_lowers_again_and_the_store_is_bounded(monkeypatch):
    clear_programs()
    monkeypatch.setattr(programs, "MAX_PROGRAMS", 3)
    f = shared_jit(lambda x: x * 2)
    for n in range(1, 7):
        np.testing.assert_array_equal(f(jnp.ones(n)), 2 * np.ones(n))
    assert len(programs._PROGRAMS) == 3
    assert f(jnp.ones(2, jnp.int32)).dtype == jnp.int32


def _data(seed, n=40):
    r = np.random.default_rng(seed)
    X = r.uniform(0, 5, (n, 1))
    return X, np.sin(X[:, 0]) + 0.1 * r.normal(size=n)


def test_a_second_fit_of_the_same_shape_compiles_no_sampling_program():
    """Two data sets of one shape (folds of a cross-validation): the second fit's NUTS
    programs come from the first fit's compilations, and its draws are those of a fit that
    compiled everything itself."""
    settings = dict(num_warmup=30, num_samples=30, num_chains=2, progress_bar=False, random_state=0)
    clear_programs()
    bk.GPRegressor(**settings).fit(*_data(0))
    with count_compilations() as seen:
        second = bk.GPRegressor(**settings).fit(*_data(1))
    assert not {"jit(each)", "jit(starts)", "persistent cache"} & set(seen), seen
    clear_programs()
    jax.clear_caches()
    alone = bk.GPRegressor(**settings).fit(*_data(1))
    for name in ("noise", "amplitude"):
        np.testing.assert_array_equal(
            second.idata_.posterior[name].values, alone.idata_.posterior[name].values
        )


@pytest.fixture(autouse=True)
def _empty_store():
    yield
    clear_programs()
