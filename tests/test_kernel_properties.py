"""Property-based tests (hypothesis) of every kernel: symmetry, positive semi-definiteness
(including duplicated points and tiny / huge input scales), finite values, finite gradients with
respect to the inputs and the hyper-parameters; the asymmetric LAB-RBF kernel's own properties.

The default profile draws a few dozen examples per property; ``HYPOTHESIS_PROFILE=thorough``
(used by ``make test-slow``) draws many more.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from conftest import assert_close, f32_floor
from hypothesis import example, given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from bayeskern.kernels import (
    RBF,
    VSK,
    CkRBF,
    Conformal,
    Laplacian,
    Linear,
    MahalanobisRBF,
    Periodic,
    SpectralMixture,
)
from bayeskern.kernels.labrbf_gram import _labrbf_gram as labrbf_gram
from bayeskern.learning import fit_kernel

# the default suite is deterministic (same examples on every machine, CI included); the
# thorough profile of `make test-slow` explores new random examples on every run
settings.register_profile("default", max_examples=20, deadline=None, derandomize=True)
settings.register_profile("thorough", max_examples=500, deadline=None)
settings.load_profile(__import__("os").environ.get("HYPOTHESIS_PROFILE", "default"))


@st.composite
def inputs(draw, min_rows=2, max_rows=10, max_dim=3):
    """Points in R^d at a random scale 10^e (e in [-3, 3]), some rows duplicated."""
    # few distinct shapes: every new shape costs a JAX compilation
    n = draw(st.sampled_from(sorted({min_rows, (min_rows + max_rows) // 2, max_rows})))
    d = draw(st.sampled_from(sorted({1, max_dim})))
    base = draw(arrays(np.float64, (n, d), elements=st.floats(-1, 1, allow_subnormal=False)))
    scale = 10.0 ** draw(st.integers(-3, 3))
    X = base * scale
    n_dup = draw(st.integers(0, n // 2))
    X[:n_dup] = X[n - n_dup :] if n_dup else X[:0]
    return X


positive = st.floats(1e-2, 1e2)


def fixed_kernels(ls, period):
    return {
        "rbf": RBF(lengthscale=ls),
        "laplacian": Laplacian(lengthscale=ls),
        "linear": Linear(),
        "periodic": Periodic(period=period, lengthscale=ls),
        "rbf*periodic+linear": RBF(lengthscale=ls) * Periodic(period=period, lengthscale=ls)
        + Linear(),
        "spectral_mixture": SpectralMixture(
            n_components=2,
            weights=[0.3, 0.7],
            means=[[0.0], [1.0 / period]],
            scales=[[1.0 / ls], [0.5 / ls]],
        ),
    }


def assert_symmetric_psd(K, name):
    K = np.asarray(K)
    assert np.isfinite(K).all(), f"{name}: non-finite Gram entries"
    assert_close(K, K.T, atol=f32_floor(1e-10) * max(1.0, np.abs(K).max()), err_msg=name)
    lam_min = np.linalg.eigvalsh((K + K.T) / 2).min()
    assert lam_min >= -f32_floor(1e-8) * max(1.0, np.abs(K).max()) * len(K), (
        f"{name}: min eig {lam_min}"
    )


@given(X=inputs(max_dim=1), ls=positive, period=positive)
def test_fixed_kernels_symmetric_psd_finite(X, ls, period):
    for name, k in fixed_kernels(ls, period).items():
        assert_symmetric_psd(k(X), name)


#: fixed kernels whose fixed values may be traced (the spectral mixture's must be concrete)
TRACEABLE = ("rbf", "laplacian", "linear", "periodic", "rbf*periodic+linear")


@jax.jit
def _traced_input_gradients(Z, ls, period):
    """d sum K(Z, Z) / dZ of the :data:`TRACEABLE` fixed kernels, compiled once per shape of
    ``Z`` (op by op, every example took 0.1 s)."""
    kernels = fixed_kernels(ls, period)
    return {name: jax.grad(lambda Z, k=kernels[name]: jnp.sum(k(Z)))(Z) for name in TRACEABLE}


@given(X=inputs(max_dim=1), ls=positive, period=positive)
def test_fixed_kernels_have_finite_input_gradients(X, ls, period):
    grads = _traced_input_gradients(jnp.asarray(X), ls, period)
    for name, k in fixed_kernels(ls, period).items():
        if name not in TRACEABLE:
            grads[name] = jax.grad(lambda Z, k=k: jnp.sum(k(Z)))(jnp.asarray(X))
    assert set(grads) == set(fixed_kernels(ls, period))
    for name, g in grads.items():
        assert np.isfinite(np.asarray(g)).all(), name


@jax.jit
def _hyperparameter_gradients(X, ls, period):
    """Gradients of sum K(X, X) with respect to the hyper-parameters, compiled once per shape
    of ``X``."""
    return {
        "rbf": jax.grad(lambda s: jnp.sum(RBF(lengthscale=s)(X)))(ls),
        "laplacian": jax.grad(lambda s: jnp.sum(Laplacian(lengthscale=s)(X)))(ls),
        "periodic": jax.grad(
            lambda s, p: jnp.sum(Periodic(period=p, lengthscale=s)(X)), argnums=(0, 1)
        )(ls, period),
    }


@given(X=inputs(), ls=positive, period=positive)
def test_hyperparameter_gradients_are_finite(X, ls, period):
    grads = _hyperparameter_gradients(jnp.asarray(X), ls, period)
    for name, g in grads.items():
        assert np.isfinite(np.asarray(g)).all(), name


@given(X=inputs(min_rows=4), ls=positive)
@example(X=np.array([[2.7e-90], [0.0], [0.0], [0.0]]), ls=1.0)  # variance below float32's range
def test_mahalanobis_rbf_fitted_covariance_is_psd(X, ls):
    # a singular sample covariance (duplicated rows, d > n) is regularized, never non-PSD
    k = fit_kernel(MahalanobisRBF(lengthscale=ls), X)
    assert_symmetric_psd(k(X), "mahalanobis")


@st.composite
def labelled(draw):
    X = draw(inputs(min_rows=6, max_rows=12))
    n = len(X)
    y = np.array([i % 2 for i in range(n)])
    rng = np.random.default_rng(draw(st.integers(0, 2**16)))
    return X + 1e-9 * rng.normal(size=X.shape) * max(1.0, np.abs(X).max()), rng.permutation(y)


#: failures hypothesis found on a fresh machine (kept as fixed examples): CkRBF on rows of
#: size 1e-9 (two nearly singular cells: K(X) was symmetric only to 2e-7), and Conformal on
#: rows equal to rounding (N0 = 0: the Fisher ratio is 0/0)
TINY_ROWS = np.array(
    [
        [3.45584192e-10, 8.21618144e-10, 3.30437076e-10],
        [-1.30315723e-09, 9.05355867e-10, 4.46374572e-10],
        [-5.36953235e-10, 5.81118104e-10, 3.64572396e-10],
        [2.94132497e-10, 2.84222413e-11, 5.46712987e-10],
        [-7.36454087e-10, -1.62909948e-10, -4.82119313e-10],
        [5.98846213e-10, 3.97221075e-11, -2.92456751e-10],
    ]
)


@settings(max_examples=max(5, settings.default.max_examples // 4))
@given(data=labelled())
@example(data=(TINY_ROWS, np.array([1, 1, 0, 0, 0, 1])))
@example(data=(np.ones((6, 1)), np.array([1, 1, 0, 0, 1, 0])))
def test_data_dependent_kernels_symmetric_psd(data):
    X, y = data
    fitted = {
        "vsk": fit_kernel(VSK(RBF(lengthscale=1.0)), X, y),
        "ckrbf": fit_kernel(CkRBF(n_clusters=2), X),
        "conformal": fit_kernel(Conformal(RBF(lengthscale=1.0), random_state=0), X, y),
    }
    for name, k in fitted.items():
        assert_symmetric_psd(k(X), name)


# --------------------------------------------------------------- asymmetric LAB-RBF kernel
#: the LAB-RBF Gram matrix and the gradient of its sum with respect to the bandwidths,
#: compiled once per shape and exponent ``p``
_labrbf_gram = jax.jit(labrbf_gram, static_argnums=3)
_labrbf_bandwidth_gradient = jax.jit(
    jax.grad(lambda T, Th, p: jnp.sum(labrbf_gram(T, T, Th, p)), argnums=1), static_argnums=2
)


@given(T=inputs(min_rows=3, max_rows=8), data=st.data(), p=st.sampled_from([1, 2]))
def test_labrbf_documented_properties(T, data, p):
    m, d = len(T), T.shape[1]
    Theta = data.draw(arrays(np.float64, (m, d), elements=st.floats(1e-3, 1e2)))
    K = np.asarray(_labrbf_gram(jnp.asarray(T), jnp.asarray(T), jnp.asarray(Theta), p))
    assert np.isfinite(K).all()
    assert ((K > 0) | np.isclose(K, 0)).all() and (
        K <= 1 + f32_floor(1e-12)
    ).all()  # values in [0, 1]
    assert_close(np.diag(K), 1.0)  # K(x_i, x_i) = 1
    # one bandwidth shared by every support point: the symmetric (isotropic / ARD) kernel,
    # positive semi-definite for p = 2 (an RBF) and p = 1 (a Laplacian)
    Ks = np.asarray(
        _labrbf_gram(
            jnp.asarray(T), jnp.asarray(T), jnp.broadcast_to(jnp.asarray(Theta[0]), (m, d)), p
        )
    )
    assert_symmetric_psd(Ks, f"labrbf equal bandwidths p={p}")
    # gradient-safe at coincident points (T contains duplicates and t_a = x_a)
    g = _labrbf_bandwidth_gradient(jnp.asarray(T), jnp.asarray(Theta), p)
    assert np.isfinite(np.asarray(g)).all()


def test_labrbf_is_asymmetric_for_different_bandwidths():
    T = jnp.array([[0.0], [1.0]])
    K = np.asarray(labrbf_gram(T, T, jnp.array([[1.0], [3.0]]), 2))
    assert not np.isclose(K[0, 1], K[1, 0])  # the documented asymmetry: column bandwidth


@pytest.mark.parametrize("bad", [np.nan, np.inf])
def test_non_finite_inputs_give_non_finite_or_error_never_silent(bad):
    # the kernels themselves are pure functions; estimators reject non-finite X (see
    # tests/test_gp.py). Here: a NaN in X must not produce a finite-looking Gram.
    X = np.array([[0.0], [bad]])
    K = np.asarray(RBF(lengthscale=1.0)(X))
    assert not np.isfinite(K[1]).all()
