"""Kernel algebra, positive semi-definiteness, and agreement with scikit-learn's kernels."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from conftest import assert_close, f32_floor
from sklearn.gaussian_process import kernels as skk
from sklearn.metrics.pairwise import laplacian_kernel

import bayeskern as bk
from bayeskern.kernels import (
    RBF,
    Laplacian,
    Linear,
    MahalanobisRBF,
    Periodic,
    default_theta,
    get_kernel,
    kernel_from_config,
    name_leaves,
    safe_norm,
)
from bayeskern.learning import fit_kernel

TOL = 1e-10


@pytest.fixture
def X(rng):
    return rng.normal(size=(25, 3))


def test_rbf_matches_sklearn(X):
    K = np.asarray(RBF(lengthscale=0.7)(X))
    assert_close(K, skk.RBF(0.7)(X), atol=TOL)


def test_laplacian_matches_sklearn_l2_form(X):
    # sklearn's laplacian_kernel uses the L1 norm; ours is exp(-||x-y||_2 / l)
    K = np.asarray(Laplacian(lengthscale=2.0)(X))
    d = np.sqrt(((X[:, None] - X[None]) ** 2).sum(-1))
    assert_close(K, np.exp(-d / 2.0), atol=TOL)
    assert not np.allclose(K, laplacian_kernel(X, gamma=0.5))


def test_periodic_matches_exp_sine_squared(rng):
    x = rng.uniform(0, 5, size=(20, 1))
    K = np.asarray(Periodic(period=1.3, lengthscale=0.8)(x))
    assert_close(K, skk.ExpSineSquared(0.8, 1.3)(x), atol=TOL)


def test_linear_is_dot_product(X):
    assert_close(np.asarray(Linear()(X)), X @ X.T, atol=TOL)


def test_mahalanobis_with_identity_is_rbf_and_learns_covariance(X):
    K = MahalanobisRBF(lengthscale=0.9, covariance=np.eye(3))(X)
    assert_close(np.asarray(K), np.asarray(RBF(lengthscale=0.9)(X)), atol=TOL)
    k = fit_kernel(MahalanobisRBF(lengthscale=1.0), X)
    assert_close(k.precision_, np.linalg.inv(np.cov(X, rowvar=False)), rtol=1e-6)


def test_fit_kernel_walks_the_tree_and_returns_learning_free_kernels(X):
    rbf, per = RBF(), Periodic()
    assert fit_kernel(rbf, X) is rbf  # nothing to learn: the kernel itself
    tree = rbf * MahalanobisRBF() + Linear() * (per + MahalanobisRBF(lengthscale=2.0))
    assert not tree.is_fitted
    fitted = fit_kernel(tree, X)
    assert fitted.is_fitted and not tree.is_fitted  # a fitted copy; the input is untouched
    maha = [k for k in fitted.leaves() if isinstance(k, MahalanobisRBF)]
    assert len(maha) == 2 and all(k.is_fitted for k in maha)
    assert fitted.k1.k1 is rbf and fitted.k2.k2.k1 is per
    assert_close(np.asarray(fitted(X)), np.asarray(name_leaves(fitted)(X)), atol=TOL)


def test_fit_kernel_rejects_what_it_cannot_fit():
    class _Unfitted(RBF):  # a kernel class fit_kernel does not know, not fitted
        @property
        def is_fitted(self):
            return False

    with pytest.raises(TypeError, match="_Unfitted"):
        fit_kernel(_Unfitted(), np.zeros((3, 1)))
    with pytest.raises(TypeError, match="str"):
        fit_kernel("rbf", np.zeros((3, 1)))


def test_sum_and_product_algebra(X):
    k1, k2 = RBF(lengthscale=0.5), Periodic(period=2.0, lengthscale=1.0)
    assert_close(np.asarray((k1 + k2)(X)), np.asarray(k1(X) + k2(X)), atol=TOL)
    assert_close(np.asarray((k1 * k2)(X)), np.asarray(k1(X) * k2(X)), atol=TOL)
    assert_close(np.asarray((2.0 * k1)(X)), 2 * np.asarray(k1(X)), atol=TOL)
    assert sum([k1]) is k1  # 0 + k returns k, so sum() works


@pytest.mark.parametrize(
    "kernel", [RBF(), Laplacian(), Linear(), Periodic(), RBF() * Periodic(), Linear() + RBF()]
)
def test_gram_is_symmetric_psd(kernel, X):
    K = np.asarray(kernel(X))
    assert_close(K, K.T, atol=TOL)
    assert np.linalg.eigvalsh(K).min() > -f32_floor(1e-8) * max(1.0, np.abs(K).max())


def test_leaf_names_are_unique_and_copy_shared_objects():
    r = RBF()
    k = name_leaves(Linear() + r + r * Periodic())
    assert [leaf.name_ for leaf in k.leaves()] == ["linear", "rbf", "rbf_1", "periodic"]
    assert r.name_ is None  # the user's object is not modified
    assert [bk.kernels.term_name(t) for t in k.terms()] == ["linear", "rbf", "rbf_1*periodic"]


def test_batched_gram_equals_direct(rng):
    X1, X2 = rng.normal(size=(103, 2)), rng.normal(size=(7, 2))
    k = name_leaves(RBF())
    theta = default_theta(k, np.ones(2))
    assert_close(
        np.asarray(k(X1, X2, theta, batch_size=10)),
        np.asarray(k.gram(theta, X1, X2)),
        atol=TOL,
    )


def test_jit_and_grad_roundtrip(X):
    k = name_leaves(RBF() + Laplacian())
    theta = default_theta(k, np.ones(3))
    f = jax.jit(lambda th: k.gram(th, X, X).sum())
    assert np.isclose(f(theta), np.asarray(k.gram(theta, X, X)).sum())
    g = jax.grad(f)(theta)
    assert all(np.all(np.isfinite(v)) for v in g.values())


def test_safe_norm_gradient_at_zero():
    g = jax.grad(lambda x: safe_norm(x))(jnp.zeros(3))
    assert np.all(np.isfinite(g))
    lap = name_leaves(Laplacian())
    th = default_theta(lap, np.ones(2))
    x = jnp.ones(2)
    assert np.all(np.isfinite(jax.grad(lambda z: lap.evaluate(th, z, x))(x)))


def test_get_kernel_names_and_errors():
    k = get_kernel("linear + rbf*periodic")
    assert [type(leaf).__name__ for leaf in k.leaves()] == ["Linear", "RBF", "Periodic"]
    with pytest.raises(ValueError, match="unknown kernel name 'foo'"):
        get_kernel("rbf+foo")
    with pytest.raises(ValueError, match="kernel"):
        get_kernel(3)


def test_config_roundtrip_without_pickle(X):
    k = Linear() + RBF(lengthscale=0.4) * Periodic(period=1.0)
    k2 = kernel_from_config(k.get_config())
    assert_close(np.asarray(k2(X)), np.asarray(k(X)), atol=TOL)
    with pytest.raises(ValueError, match="unknown kernel class"):
        kernel_from_config({"class": "os.system", "params": {}})


def test_mismatched_columns_error(rng):
    with pytest.raises(ValueError, match="columns"):
        RBF()(rng.normal(size=(3, 2)), rng.normal(size=(3, 3)))
