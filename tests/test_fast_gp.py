"""The fast exact GP of issue 13: the one-Cholesky gradient, the per-fit kernel caches, the
embedded Laplace gradient, the CPU devices, and the hang-prone XLA:CPU paths.

Every fast path is checked against the plain computation it replaces: ``jax.grad`` of the
Cholesky log density of the Gram matrix evaluated from the raw inputs.
"""

from __future__ import annotations

import json
import subprocess
import sys

import jax
import jax.numpy as jnp
import numpy as np
import numpyro.distributions as dist
import pytest
from bayeskern.models.gp import JITTER, gp_regression, kernel_matrix, prepare_kernel
from numpyro.infer.util import log_density

import bayeskern as bk
from bayeskern.kernels import name_leaves
from bayeskern.kernels.base import default_theta
from bayeskern.laplace import laplace_log_marginal, laplace_mode
from bayeskern.learning import fit_kernel
from bayeskern.linalg import (
    cholesky_inverse,
    distinct_pairs,
    expand_pairs,
    gaussian_logpdf,
    triangular_inverse,
)

K_ = bk.kernels


def _random_spd(rng, n):
    A = rng.normal(size=(n, n))
    return A @ A.T / n + 0.5 * np.eye(n)


def test_gaussian_logpdf_value_and_gradient_match_jax():
    rng = np.random.default_rng(0)
    for n in (1, 7, 90):  # 90 > the 64 block of the triangular recursions
        K, y = jnp.asarray(_random_spd(rng, n)), jnp.asarray(rng.normal(size=n))

        @jax.jit
        def ref(K, y):
            return dist.MultivariateNormal(jnp.zeros(y.shape[0]), covariance_matrix=K).log_prob(y)

        fast = jax.jit(jax.value_and_grad(gaussian_logpdf, argnums=1))
        slow = jax.jit(jax.value_and_grad(ref))
        (fv, fg), (rv, rg) = fast(y, K), slow(K, y)
        np.testing.assert_allclose(fv, rv, rtol=1e-12)
        # symmetric perturbations: the gradient w.r.t. a symmetric K is defined up to its
        # antisymmetric part; compare directional derivatives along symmetric directions
        for _ in range(2):
            D = rng.normal(size=(n, n))
            D = jnp.asarray(D + D.T)
            np.testing.assert_allclose(jnp.sum(fg * D), jnp.sum(rg * D), rtol=1e-8)
        np.testing.assert_allclose(
            jax.jit(jax.grad(gaussian_logpdf))(y, K), jax.jit(jax.grad(ref, 1))(K, y), rtol=1e-8
        )


def test_triangular_and_cholesky_inverse():
    rng = np.random.default_rng(1)
    for n in (3, 64, 150):
        K = _random_spd(rng, n)
        L = np.linalg.cholesky(K)
        np.testing.assert_allclose(triangular_inverse(jnp.asarray(L)) @ L, np.eye(n), atol=1e-10)
        np.testing.assert_allclose(
            cholesky_inverse(jnp.asarray(L)), np.linalg.inv(K), rtol=1e-8, atol=1e-10
        )


def test_distinct_pairs_expand_to_the_kernel_matrix_with_its_gradient():
    """A stationary kernel through the distinct differences equals the dense evaluation.

    On a regular grid with gaps (a monthly series with missing months) and on 2-D inputs
    with repeated rows, in value and in the gradient of a Gaussian log density.
    """
    rng = np.random.default_rng(3)
    grid = np.delete(np.arange(40.0), [5, 6, 17])[:, None] / 12
    X2 = np.repeat(rng.normal(size=(10, 2)), 2, axis=0)
    for X in (grid, X2):
        n = len(X)
        pairs = distinct_pairs(X)
        assert pairs.tau.shape[0] < n * (n + 1) // 2  # repeats were merged
        y = jnp.asarray(rng.normal(size=n))
        tau = jnp.asarray(X[:, None, :] - X[None, :, :])

        def k(tau, ell):
            return jnp.exp(-0.5 * jnp.sum((tau / ell) ** 2, axis=-1)) * jnp.cos(3.0 * tau[..., 0])

        def logp(ell, dense, tau=tau, pairs=pairs, y=y, n=n):
            K = k(tau, ell) if dense else expand_pairs(k(pairs.tau, ell), pairs)
            return gaussian_logpdf(y, K + 0.1 * jnp.eye(n))

        grad = jax.jit(jax.grad(logp), static_argnums=1)  # compiled once per X and path
        for ell in (0.3, 1.7):
            np.testing.assert_allclose(
                expand_pairs(k(pairs.tau, ell), pairs), k(tau, ell), rtol=1e-13, atol=1e-15
            )
            np.testing.assert_allclose(grad(ell, False), grad(ell, True), rtol=1e-9)


def test_expand_pairs_turns_a_non_finite_value_into_a_nan_matrix():
    """A non-finite kernel value spreads to the whole matrix (under jit and vmap alike).

    The matrix is then NaN, so its Cholesky factorization fails and NUTS rejects the step,
    rather than a matrix with a few infinite entries reaching the sampler.
    """
    pairs = distinct_pairs(np.arange(6.0)[:, None])
    values = jnp.linspace(1.0, 0.1, pairs.tau.shape[0])
    bad = values.at[2].set(jnp.inf)
    expand = jax.jit(expand_pairs)
    assert np.isfinite(expand(values, pairs)).all()
    assert np.isnan(expand(bad, pairs)).all()
    both = jax.vmap(expand_pairs, in_axes=(0, None))(jnp.stack([values, bad]), pairs)
    np.testing.assert_array_equal(both[0], expand(values, pairs))
    assert np.isnan(both[1]).all()


def _kernels(X, y):
    """Every kernel family, fitted to (X, y) where it learns from data."""
    return {
        "rbf": K_.RBF(),
        "rbf_ard": K_.RBF(ard=True),
        "laplacian": K_.Laplacian(),
        "linear+periodic": K_.Linear() + K_.Periodic(period=1.0),
        "periodic_free": K_.Periodic(),
        "mahalanobis": K_.MahalanobisRBF(),
        "product": K_.RBF() * K_.Periodic(period=2.0) + K_.Laplacian(),
        "spectral": K_.SpectralMixture(n_components=2),
        "vsk": fit_kernel(K_.VSK(K_.RBF(), scaling="linear"), X, y),
        "ckrbf": fit_kernel(K_.CkRBF(n_clusters=2), X, y),
        "conformal": K_.Conformal(K_.RBF(lengthscale=1.0), random_state=0),
    }


def _labels(y):
    """Binary targets for fitting the data-dependent kernels (Conformal needs classes)."""
    return (y > np.median(y)).astype(int)


@pytest.mark.parametrize(
    "name",
    [
        "rbf",
        "rbf_ard",
        "laplacian",
        "linear+periodic",
        "periodic_free",
        "mahalanobis",
        "product",
        "spectral",
        "vsk",
        "ckrbf",
        "conformal",
    ],
)
def test_fast_log_density_and_gradient_equal_plain_cholesky(name):
    """gp_regression with the per-fit caches and the custom VJP equals jax.grad of the plain
    Cholesky likelihood of the Gram computed from X, at random parameter values, to 1e-8."""
    rng = np.random.default_rng(2)
    X = rng.normal(size=(40, 2))
    y = np.sin(X[:, 0]) + 0.1 * rng.normal(size=40)
    _check_fast_equals_plain(X, y, name, distinct=False)


@pytest.mark.parametrize("name", ["linear+periodic", "product", "rbf"])
def test_inputs_on_a_grid_evaluate_the_kernel_once_per_distinct_pair(name):
    """A series on a regular grid (here of step 1/8, exact in binary, with a constant second
    column) repeats its lags: the cache keeps the distinct rows only, and the log density
    and its gradient are those of the plain Cholesky likelihood, as for scattered inputs."""
    rng = np.random.default_rng(5)
    X = np.c_[np.arange(40) / 8.0, np.zeros(40)]
    y = np.sin(2 * np.pi * X[:, 0]) + 0.1 * rng.normal(size=40)
    _check_fast_equals_plain(X, y, name, distinct=True)


def _check_fast_equals_plain(X, y, name, distinct):
    kernel = name_leaves(fit_kernel(name_leaves(_kernels(X, y)[name]), X, _labels(y)))
    Xj, yj, x_scale = jnp.asarray(X), jnp.asarray(y), jnp.ones(2)
    prepared = prepare_kernel(kernel, Xj, Xj, x_scale)
    assert (prepared.distinct is not None) == distinct
    if distinct:  # at most the 40 lags among the 820 pairs (fewer: a period folds lags)
        assert prepared.distinct.tau.shape[0] <= 40

    def plain(X, y=None, *, kernel, x_scale):
        import numpyro
        from bayeskern.models.gp import _hyper

        theta, amplitude = _hyper(kernel, x_scale)
        noise = numpyro.sample("noise", dist.HalfNormal(1.0))
        K = kernel_matrix(kernel, theta, amplitude, X, X)  # from the raw inputs
        K = K + (noise**2 + JITTER) * jnp.eye(X.shape[0])
        numpyro.sample(
            "y", dist.MultivariateNormal(jnp.zeros(X.shape[0]), covariance_matrix=K), obs=y
        )

    from numpyro import handlers

    tr = handlers.trace(handlers.seed(gp_regression, 0)).get_trace(
        Xj, yj, kernel=kernel, x_scale=x_scale, prepared=prepared
    )
    sites = {k: v for k, v in tr.items() if v["type"] == "sample" and not v["is_observed"]}
    for trial in range(3):
        key = jax.random.PRNGKey(trial)
        # random values: the prior draws perturbed on the unconstrained scale
        params = {}
        for k, v in sites.items():
            key, sub = jax.random.split(key)
            t = dist.biject_to(v["fn"].support)
            u = t.inv(v["value"]) + 0.3 * jax.random.normal(sub, jnp.shape(v["value"]))
            params[k] = t(u)

        def lp(p, model, **kw):
            return log_density(model, (Xj, yj), dict(kernel=kernel, x_scale=x_scale, **kw), p)[0]

        fast_v, fast_g = jax.value_and_grad(lp)(params, gp_regression, prepared=prepared)
        ref_v, ref_g = jax.value_and_grad(lp)(params, plain)
        np.testing.assert_allclose(fast_v, ref_v, rtol=1e-10)
        for k in params:
            np.testing.assert_allclose(fast_g[k], ref_g[k], rtol=1e-8, atol=1e-8, err_msg=k)


def test_prepared_gram_equals_gram_for_cross_and_symmetric_inputs():
    rng = np.random.default_rng(3)
    X, Xn = rng.normal(size=(25, 2)), rng.normal(size=(9, 2))
    y = X[:, 0] + 0.1 * rng.normal(size=25)
    for name, k in _kernels(X, y).items():
        kernel = name_leaves(fit_kernel(name_leaves(k), X, _labels(y)))

        theta = default_theta(kernel, jnp.ones(2))
        amp = jnp.linspace(0.5, 1.5, len(kernel.terms()))
        for A, B in ((X, X), (X, Xn)):
            Aj, Bj = jnp.asarray(A), (jnp.asarray(A) if B is A else jnp.asarray(B))
            prep = prepare_kernel(kernel, Aj, Bj, jnp.ones(2))
            np.testing.assert_allclose(
                kernel_matrix(kernel, theta, amp, Aj, Bj, prepared=prep),
                kernel_matrix(kernel, theta, amp, Aj, Bj),
                rtol=1e-12,
                atol=1e-12,
                err_msg=name,
            )


@pytest.mark.parametrize(
    ("noise", "log_a"), [(0.5, 0.4), (0.02, 2.5)], ids=["overlap", "separated"]
)
def test_laplace_marginal_gradient_matches_finite_differences(noise, log_a):
    """The implicit (R&W Algorithm 5.1) gradient of the Laplace log marginal likelihood, also
    where the classes separate and the mode's probabilities saturate (W near 0)."""
    rng = np.random.default_rng(4)
    n = 30
    X = rng.normal(size=(n, 1))
    y = jnp.asarray((X[:, 0] + noise * rng.normal(size=n) > 0).astype(float))

    def K_of(log_l, log_a):
        d2 = (X - X.T) ** 2
        return jnp.exp(2 * log_a) * jnp.exp(-0.5 * d2 / jnp.exp(2 * log_l)) + 1e-6 * jnp.eye(n)

    def f(p):
        return laplace_log_marginal(K_of(p[0], p[1]), y)

    p = jnp.array([0.2, log_a])
    g = jax.grad(f)(p)

    # differences of the value at a mode converged to rounding (tol=0): the default stop leaves
    # errors of a few 1e-9 in the value, which h = 1e-5 turns into differences of order 1e-4
    def f_converged(p):
        return laplace_mode(K_of(p[0], p[1]), y, tol=0.0).log_marginal

    assert abs(float(f(p) - f_converged(p))) < 1e-7
    h = 1e-5
    fd = jnp.array(
        [(f_converged(p + h * e) - f_converged(p - h * e)) / (2 * h) for e in jnp.eye(2)]
    )
    np.testing.assert_allclose(g, fd, rtol=1e-6)
    mode = laplace_mode(K_of(*p), y)
    assert bool(mode.converged)


def test_import_gives_one_cpu_device_per_chain_and_says_so():
    code = (
        "import json, bayeskern as bk, jax; print(json.dumps({'n': jax.local_device_count(),"
        " 'status': bk.devices.cpu_device_status()}))"
    )
    out = {}
    for env in ({}, {"BAYESKERN_CPU_DEVICES": "3"}):
        r = subprocess.run(
            [sys.executable, "-c", code],
            capture_output=True,
            text=True,
            timeout=300,
            env={**__import__("os").environ, **env},
        )
        assert r.returncode == 0, r.stderr[-2000:]
        out[json.dumps(env)] = json.loads(r.stdout.strip().splitlines()[-1])
    default = out["{}"]
    assert default["n"] >= 4 and "CPU devices" in default["status"]
    assert out['{"BAYESKERN_CPU_DEVICES": "3"}']["n"] == 3
    # JAX initialized first: bayeskern cannot change the device count, and says so
    r = subprocess.run(
        [sys.executable, "-c", "import jax; jax.devices(); " + code],
        capture_output=True,
        text=True,
        timeout=300,
    )
    late = json.loads(r.stdout.strip().splitlines()[-1])
    assert late["n"] == 1 and "initialized before bayeskern" in late["status"]


def test_parallel_laplace_chains_do_not_hang():
    """A default 4-chain 3-class ``GPClassifier`` fit on the CPU finishes.

    jaxlib 0.10's Cholesky kernel hands its work to XLA:CPU's thread pool (one thread per
    device) and waits; with the chains on the four devices at once, every pool thread ended
    up waiting and this fit blocked forever (2 of 2 tries), so the Laplace classifiers' chains
    run one after another on a CPU. In a subprocess with a timeout: a hang fails the test
    instead of stopping the suite.
    """
    code = """
import numpy as np, bayeskern as bk
from sklearn.datasets import load_iris
X, y = load_iris(return_X_y=True)
est = bk.GPClassifier(num_warmup=10, num_samples=10, num_chains=4, random_state=0,
                      progress_bar=False).fit(X[::2], y[::2])
print("chains", est.idata_.posterior.sizes["chain"])
"""
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=240)
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.strip().splitlines()[-1] == "chains 4"


def test_chain_methods_that_block_xla_cpu_are_refused(monkeypatch):
    """Chains batched into one program (``"vectorized"``) put the models' Cholesky
    factorizations into batched LAPACK calls, which blocked XLA:CPU forever (a 4-chain
    ``GPRegressor`` and ``GPClassifier`` on 455 rows, 2 cores); so do the Laplace
    classifier's chains on several CPU devices (``"parallel"``). The estimators refuse both
    before any work, naming the argument; one chain, or another method, passes. Worker
    processes (``"processes"``) are refused, with the routes that have them, where the
    chains cannot be rebuilt in another process."""
    from bayeskern.inference import check_factorizing_chain_method

    X = np.random.default_rng(0).normal(size=(12, 2))
    y = (X[:, 0] > 0).astype(int)
    tiny = dict(num_warmup=5, num_samples=5, num_chains=2, progress_bar=False)
    refused = [
        bk.GPRegressor(chain_method="vectorized", **tiny).fit,
        bk.GPClassifier(chain_method="vectorized", **tiny).fit,
        bk.GaBaSRRegressor(sampler="nuts", chain_method="vectorized", **tiny).fit,
    ]
    for fit in refused:
        with pytest.raises(ValueError, match="chain_method='vectorized' can block XLA:CPU"):
            fit(X, y)
    monkeypatch.setattr(jax, "local_device_count", lambda: 4)
    with pytest.raises(ValueError, match="chain_method='parallel' can block XLA:CPU"):
        bk.GPClassifier(chain_method="parallel", **tiny).fit(X, y)
    for est in (bk.GPRegressor, lambda **kw: bk.GPClassifier(inference="latent", **kw)):
        with pytest.raises(ValueError, match="chain_method='processes' is available for"):
            est(chain_method="processes", **tiny).fit(X, y)
    check_factorizing_chain_method("parallel", 4)  # a GP regression on CPU devices is fine
    for method, chains in (("vectorized", 1), ("sequential", 4), (None, 4)):
        check_factorizing_chain_method(method, chains, parallel=True)
    monkeypatch.setattr(jax, "local_device_count", lambda: 1)
    check_factorizing_chain_method("parallel", 4, parallel=True)  # pmap falls back: no block


def test_draw_maps_and_map_search_do_not_hang():
    """The XLA:CPU paths that once hung (batched LAPACK in loops) finish: 400 posterior draws
    through the LOO and prediction maps of a fitted GP, in a subprocess with a timeout (a
    short warm-up: the number of draws matters here, not their quality)."""
    code = """
import numpy as np, bayeskern as bk
rng = np.random.default_rng(0)
X = rng.uniform(-2, 2, size=(60, 1)); y = np.sin(2 * X[:, 0]) + 0.1 * rng.normal(size=60)
est = bk.GPRegressor(num_warmup=10, num_samples=100, num_chains=4, progress_bar=False,
                     random_state=0).fit(X, y)
for _ in range(3):
    est.predictive(rng.uniform(-2, 2, size=(2000, 1)))
print("ok", est.idata_.log_likelihood["y"].shape)
"""
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600)
    assert r.returncode == 0 and "ok" in r.stdout, r.stderr[-2000:]


def test_classifier_amplitudes_are_half_normal_sampled_on_the_softplus_scale():
    """``SoftplusHalfNormal`` is HalfNormal's density with softplus as its map from the
    unconstrained space; the classifiers' models use it for their amplitudes, the
    regression model keeps the exponential."""
    from bayeskern.models.gp import (
        SoftplusHalfNormal,
        gp_classification_laplace,
        gp_classification_softmax,
    )
    from numpyro import handlers
    from numpyro.distributions import biject_to, transforms

    a = jnp.array([1e-3, 0.4, 2.0, 6.0])
    np.testing.assert_allclose(
        SoftplusHalfNormal(1.3).log_prob(a), dist.HalfNormal(1.3).log_prob(a), rtol=1e-14
    )
    to_a = biject_to(SoftplusHalfNormal(1.3).support)
    assert isinstance(to_a, transforms.SoftplusTransform)
    u = jnp.array([-4.0, 0.0, 5.0])
    np.testing.assert_allclose(to_a(u), jnp.log1p(jnp.exp(u)), rtol=1e-14)

    kernel = name_leaves(bk.kernels.RBF())
    X = jnp.asarray(np.random.default_rng(0).normal(size=(6, 2)))
    common = dict(kernel=kernel, x_scale=np.ones(2))

    def amplitude_transform(model, **kw):
        tr = handlers.trace(handlers.seed(model, 0)).get_trace(X, None, **common, **kw)
        t = biject_to(tr["amplitude"]["fn"].support)
        while isinstance(t, transforms.IndependentTransform):  # the vector's event dims
            t = t.base_transform
        return t

    assert isinstance(amplitude_transform(gp_classification_laplace), transforms.SoftplusTransform)
    assert isinstance(
        amplitude_transform(gp_classification_softmax, n_classes=3), transforms.SoftplusTransform
    )
    assert isinstance(amplitude_transform(gp_regression), transforms.ExpTransform)
