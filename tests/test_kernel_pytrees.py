"""Kernels are JAX pytrees: fitted arrays are leaves, everything else is static (issue 15)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from conftest import assert_close

import bayeskern  # noqa: F401  (enables float64)
from bayeskern.kernels import (
    KERNEL_REGISTRY,
    LABRBF,
    RBF,
    VSK,
    CkRBF,
    Conformal,
    Constant,
    Kernel,
    LABRBFFeatures,
    Laplacian,
    Linear,
    MahalanobisRBF,
    Matern32,
    Matern52,
    Periodic,
    Product,
    RationalQuadratic,
    SpectralMixture,
    Sum,
    default_theta,
    name_leaves,
)
from bayeskern.kernels.conformal import SquaredExponential
from bayeskern.kernels.vsk import Scaling
from bayeskern.learning import fit_kernel

RNG = np.random.default_rng(0)
X = RNG.standard_normal((16, 2))
Y_CLASS = (X[:, 0] + 0.3 * RNG.standard_normal(16) > 0).astype(int)
Y_REG = np.sin(2 * X[:, 0]) + 0.1 * X[:, 1]
XT = RNG.standard_normal((5, 2))
FAST_LABRBF = dict(
    max_support=8, n_init_support=4, n_iter_round=5, n_iter_final=10, eval_every=5, batch_size=8
)

#: one cheap fitted instance per kernel class (several for classes with distinct code paths)
BUILDERS = {
    "Constant": lambda: Constant(2.0),
    "RBF": lambda: RBF(),
    "Laplacian": lambda: Laplacian(ard=True),
    "Matern32": lambda: Matern32(),
    "Matern52": lambda: Matern52(ard=True),
    "RationalQuadratic": lambda: RationalQuadratic(alpha=2.0),
    "Linear": lambda: Linear(),
    "Periodic": lambda: Periodic(),
    "MahalanobisRBF": lambda: fit_kernel(MahalanobisRBF(), X),
    "SquaredExponential": lambda: SquaredExponential(),
    "Sum": lambda: RBF() + fit_kernel(MahalanobisRBF(), X),
    "Product": lambda: Periodic() * fit_kernel(MahalanobisRBF(), X),
    "CkRBF": lambda: fit_kernel(CkRBF(n_clusters=2), X),
    "CkRBF-gmm": lambda: fit_kernel(CkRBF(n_clusters=2, partition="gmm"), X),
    "Conformal": lambda: fit_kernel(Conformal(RBF(lengthscale=1.0), random_state=0), X, Y_CLASS),
    "Conformal-mahalanobis": lambda: fit_kernel(
        Conformal(fit_kernel(MahalanobisRBF(), X), random_state=0), X, Y_CLASS
    ),
    "LABRBF": lambda: fit_kernel(LABRBF(**FAST_LABRBF), X, Y_REG),
    "LABRBFFeatures": lambda: fit_kernel(
        LABRBFFeatures(LABRBF(**FAST_LABRBF, theta0=1.0)), X, Y_REG
    ),
    "SpectralMixture": lambda: fit_kernel(SpectralMixture(n_components=2), X, Y_REG),
    "VSK": lambda: fit_kernel(VSK(RBF()), X, Y_CLASS),
    "VSK-mahalanobis-linear": lambda: fit_kernel(VSK(MahalanobisRBF(), scaling="linear"), X, Y_REG),
}


@pytest.fixture(scope="module")
def fitted():
    """Named fitted kernels and their default ``theta``, built once per module."""
    out = {}
    for name, build in BUILDERS.items():
        k = name_leaves(build())
        out[name] = (k, default_theta(k, np.ones(X.shape[1])))
    return out


def _perturb(tree, factor):
    """Scale leaf ``i`` by ``factor ** (i + 1)`` (distinct factors: no cancellation)."""
    leaves, treedef = jax.tree.flatten(tree)
    return jax.tree.unflatten(
        treedef, [jnp.asarray(a) * factor ** (i + 1) for i, a in enumerate(leaves)]
    )


def _fitted_arrays(obj, seen=None) -> list:
    """Floating fitted arrays of ``obj`` and of the kernels and scalings it holds."""
    seen = set() if seen is None else seen
    if id(obj) in seen:
        return []
    seen.add(id(obj))
    skip = obj._pytree_skip() if hasattr(obj, "_pytree_skip") else ()
    out = []
    for name, v in vars(obj).items():
        if name in skip:
            continue
        if isinstance(v, (Kernel, Scaling)):
            out += _fitted_arrays(v, seen)
        elif (
            isinstance(v, (list, tuple)) and v and all(isinstance(e, (Kernel, Scaling)) for e in v)
        ):
            for e in v:
                out += _fitted_arrays(e, seen)
        elif (
            name.endswith("_")
            and name != "name_"
            and isinstance(v, (np.ndarray, np.generic, jax.Array))
            and np.dtype(v.dtype).kind in "fc"
        ):
            out.append(v)
    return out


def test_every_kernel_class_is_covered():
    """Every public kernel class of the package has an instance in this module."""
    public = {
        n
        for n, c in KERNEL_REGISTRY.items()
        if c.__module__.startswith("bayeskern.") and not n.startswith("_")
    }
    covered = {type(build()).__name__ for build in BUILDERS.values()}
    assert public <= covered, public - covered


@pytest.mark.parametrize("name", list(BUILDERS))
def test_flatten_unflatten_round_trip(fitted, name):
    """Flatten then unflatten rebuilds an equivalent kernel with the same Gram matrix."""
    k, theta = fitted[name]
    leaves, treedef = jax.tree.flatten(k)
    k2 = jax.tree.unflatten(treedef, leaves)
    assert type(k2) is type(k)
    assert k2 is not k
    assert jax.tree.structure(k2) == treedef
    np.testing.assert_array_equal(
        np.asarray(k2.gram(theta, X, XT)), np.asarray(k.gram(theta, X, XT))
    )


@pytest.mark.parametrize("name", list(BUILDERS))
def test_leaves_are_the_fitted_arrays(fitted, name):
    """The leaves are exactly the floating fitted arrays, no constructor parameter."""
    k, _ = fitted[name]
    leaves = jax.tree.leaves(k)
    expected = _fitted_arrays(k)
    assert len(leaves) == len(expected)
    assert {id(a) for a in leaves} == {id(a) for a in expected}
    # the fitted arrays that get_state saves are among them
    state = {
        n
        for n, v in vars(k).items()
        if n.endswith("_")
        and n != "name_"
        and isinstance(v, (np.ndarray, jax.Array))
        and np.dtype(v.dtype).kind in "fc"
    }
    paths = {jax.tree_util.keystr(p) for p, _ in jax.tree_util.tree_leaves_with_path(k)}
    assert {f".{n}" for n in state} <= paths


@pytest.mark.parametrize("name", list(BUILDERS))
def test_jit_with_kernel_argument_matches_eager_and_does_not_recompile(fitted, name):
    """A jitted Gram with the kernel as an argument equals the eager one, traced once."""
    k, theta = fitted[name]
    traces = []

    def gram(kernel, th, A, B):
        traces.append(1)
        return kernel.gram(th, A, B)

    jitted = jax.jit(gram)
    X1, X2 = jnp.asarray(X), jnp.asarray(XT)
    assert_close(jitted(k, theta, X1, X2), k.gram(theta, X1, X2), rtol=1e-9, atol=1e-12)
    # new values of the fitted arrays and of theta, same shapes: no new trace
    kp, thp = _perturb(k, 1.001), _perturb(theta, 1.05)
    assert_close(jitted(kp, thp, X1, X2), kp.gram(thp, X1, X2), rtol=1e-9, atol=1e-12)
    # SpectralMixture's fitted arrays set only the priors and defaults of theta
    if jax.tree.leaves(k) and not isinstance(k, SpectralMixture):
        assert not np.allclose(
            jitted(kp, theta, X1, X2), jitted(k, theta, X1, X2), rtol=1e-12, atol=0
        ), "the leaves must reach the Gram matrix"
    assert len(traces) == 1


def test_separately_fitted_kernels_share_one_compilation():
    """Two kernels fitted on different data (same shapes) have equal tree structures."""
    a = name_leaves(fit_kernel(CkRBF(n_clusters=2), X))
    b = name_leaves(fit_kernel(CkRBF(n_clusters=2), X + 1.0))
    assert jax.tree.structure(a) == jax.tree.structure(b)
    c = name_leaves(fit_kernel(CkRBF(n_clusters=2, gamma=0.5), X))
    assert jax.tree.structure(a) != jax.tree.structure(c)


def test_static_data_with_nan_compares_equal():
    """A ``nan`` fitted scalar (static) does not make a kernel's structure unequal to itself."""
    k = fit_kernel(Conformal(random_state=0), X, Y_CLASS)
    k.fisher_ratio_ = float("nan")
    assert jax.tree.structure(k) == jax.tree.structure(_perturb(k, 2.0))


def test_shared_child_is_restored_once():
    """Conformal's base kernel (also its ``base_kernel`` parameter) is one child, one object."""
    k = fit_kernel(Conformal(fit_kernel(MahalanobisRBF(), X), random_state=0), X, Y_CLASS)
    assert len(jax.tree.leaves(k)) == len(_fitted_arrays(k))
    k2 = jax.tree.unflatten(jax.tree.structure(k), jax.tree.leaves(k))
    assert k2._base is k2.base_kernel


def test_sum_and_product_children_are_their_operands():
    """``Sum``/``Product`` leaves are those of their operands, left to right."""
    m1, m2 = fit_kernel(MahalanobisRBF(), X), fit_kernel(MahalanobisRBF(), 2 * X)
    for k in (m1 + m2, m1 * m2):
        assert isinstance(k, (Sum, Product))
        leaves = jax.tree.leaves(k)
        assert [id(a) for a in leaves] == [id(m1.precision_), id(m2.precision_)]
