"""Matérn and rational quadratic kernels, spectral densities (Bochner) and Periodic's cosine series.

References are independent of the code under test: scikit-learn's kernels, scipy's Bessel
functions (the rational quadratic density in closed form, the periodic coefficients), and the
kernel itself recovered from its density by numerical Fourier inversion.
"""

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from conftest import assert_close, f32_floor
from numpy.polynomial.hermite_e import hermegauss
from scipy import integrate
from scipy.special import gammaln, ive, kve
from sklearn.gaussian_process import kernels as skk

import bayeskern as bk
from bayeskern.kernels import (
    RBF,
    Laplacian,
    Linear,
    MahalanobisRBF,
    Matern32,
    Matern52,
    Periodic,
    RationalQuadratic,
    default_theta,
    get_kernel,
    kernel_from_config,
    name_leaves,
)


def tol(dtype) -> float:
    """Tolerance of the exact comparisons, by dtype (tinygp's habit)."""
    return 5e-4 if np.dtype(dtype) == np.float32 else 5e-7


TOL = tol(np.float64)


def _named(kernel, d=1):
    k = name_leaves(kernel)
    return k, default_theta(k, np.ones(d))


def _theta(k, d, **values):
    """Default theta of ``k`` with the given parameters of its single leaf replaced."""
    th = default_theta(k, np.ones(d))
    for p, v in values.items():
        th[k.leaves()[0]._site(p)] = jnp.asarray(v, dtype=float)
    return th


# --------------------------------------------------------------------------- the new kernels
@pytest.fixture
def X(rng):
    return rng.normal(size=(20, 3))


@pytest.mark.parametrize(
    ("ours", "ref"),
    [
        (Matern32(lengthscale=0.7), skk.Matern(length_scale=0.7, nu=1.5)),
        (Matern52(lengthscale=1.3), skk.Matern(length_scale=1.3, nu=2.5)),
        (Laplacian(lengthscale=0.9), skk.Matern(length_scale=0.9, nu=0.5)),
        (Matern32(lengthscale=[0.5, 1.0, 2.0]), skk.Matern(length_scale=[0.5, 1.0, 2.0], nu=1.5)),
        (Matern52(lengthscale=[2.0, 0.6, 1.0]), skk.Matern(length_scale=[2.0, 0.6, 1.0], nu=2.5)),
        (
            RationalQuadratic(lengthscale=0.8, alpha=0.3),
            skk.RationalQuadratic(length_scale=0.8, alpha=0.3),
        ),
        (
            RationalQuadratic(lengthscale=1.7, alpha=20.0),
            skk.RationalQuadratic(length_scale=1.7, alpha=20.0),
        ),
    ],
    ids=["m32", "m52", "laplacian", "m32-ard", "m52-ard", "rq-0.3", "rq-20"],
)
def test_gram_matches_sklearn(ours, ref, X, rng):
    X2 = rng.normal(size=(7, 3))
    assert_close(np.asarray(ours(X)), ref(X), rtol=0, atol=TOL)
    assert_close(np.asarray(ours(X, X2)), ref(X, X2), rtol=0, atol=TOL)


def test_rq_ard_is_rq_of_scaled_inputs(X):
    ls = np.array([0.5, 1.0, 3.0])
    K = RationalQuadratic(lengthscale=ls, alpha=1.5)(X)
    ref = skk.RationalQuadratic(length_scale=1.0, alpha=1.5)(X / ls)
    assert_close(np.asarray(K), ref, atol=TOL)


NEW = {  # the ARD variants of the isotropic ones follow the same code path as RBF's
    "m32": lambda: Matern32(),
    "m52-ard": lambda: Matern52(ard=True),
    "rq": lambda: RationalQuadratic(),
    "rq-ard": lambda: RationalQuadratic(ard=True),
    "rq-fixed-alpha": lambda: RationalQuadratic(alpha=2.0),
}
SAMPLED = {"lengthscale": np.array([0.6, 1.4, 0.9]), "alpha": 0.7}


def _sampled_theta(k, d=3):
    th = default_theta(k, np.ones(d))
    leaf = k.leaves()[0]
    for p, h in leaf.hyperparameters().items():
        if h.value is None:
            v = SAMPLED[p] if (p != "lengthscale" or h.ard) else 0.8
            th[leaf._site(p)] = jnp.asarray(v)
    return th


@pytest.mark.parametrize("name", list(NEW))
def test_psd_and_evaluate_gram_diag_prepared_agree(name, X):
    k = name_leaves(NEW[name]())
    th = _sampled_theta(k)
    K = np.asarray(k.gram(th, X, X))
    assert np.linalg.eigvalsh(K).min() > -1e-10
    assert_close(K, K.T, atol=1e-14)
    E = np.asarray(jax.vmap(lambda a: jax.vmap(lambda b: k.evaluate(th, a, b))(X))(X))
    assert_close(E, K, atol=1e-12)
    assert_close(np.asarray(k.diag(th, X)), np.diag(K), atol=1e-12)
    assert_close(np.diag(K), 1.0, atol=1e-12)
    # the per-fit cache: prepared with the fixed parameters only, then the sampled ones
    prepared = k.prepare(default_theta(k, np.ones(3)), X, X)
    assert_close(np.asarray(k.gram_prepared(th, prepared)), K, atol=1e-12)


@pytest.mark.parametrize("name", list(NEW))
def test_jit_round_trip_and_pytree(name, X):
    k = name_leaves(NEW[name]())
    th = _sampled_theta(k)
    f = jax.jit(lambda kern, t, A, B: kern.gram(t, A, B))
    assert_close(np.asarray(f(k, th, X, X[:5])), np.asarray(k.gram(th, X, X[:5])), atol=1e-13)
    g = jax.jit(lambda kern, t, w: kern.spectral_density(t, w))
    w = jnp.asarray(np.linspace(-2, 2, 15).reshape(5, 3))
    assert_close(np.asarray(g(k, th, w)), np.asarray(k.spectral_density(th, w)), rtol=1e-12)


@pytest.mark.parametrize("name", list(NEW))
def test_gradients_finite_at_coincident_points(name):
    k = name_leaves(NEW[name]())
    th = _sampled_theta(k)
    x = jnp.array([0.3, -1.0, 2.0])
    gx = jax.grad(lambda z: k.evaluate(th, z, x))(x)
    assert np.all(np.isfinite(gx)) and np.allclose(gx, 0.0)  # a maximum at coincidence
    Xd = jnp.stack([x, x, x + 0.5])  # a repeated row: distance exactly 0
    gth = jax.grad(lambda t: jnp.sum(k.gram(t, Xd, Xd)))(th)
    assert all(np.all(np.isfinite(np.asarray(v))) for v in gth.values())


def test_rq_alpha_validation_and_hyperparameters():
    for bad in (0.0, -1.0, [1.0, -2.0]):
        with pytest.raises(ValueError, match="alpha must be positive"):
            RationalQuadratic(alpha=bad)
    k = name_leaves(RationalQuadratic())
    assert set(default_theta(k, np.ones(2))) == {
        "rationalquadratic_lengthscale",
        "rationalquadratic_alpha",
    }
    h = RationalQuadratic(alpha=3.0).hyperparameters()["alpha"]
    assert h.value == 3.0 and not h.length
    # a fixed alpha is not divided by the input scale (it is not a length)
    th = default_theta(name_leaves(RationalQuadratic(alpha=3.0)), np.array([10.0, 10.0]))
    assert float(th["rationalquadratic_alpha"]) == 3.0


def test_names_config_and_exports(X):
    assert type(get_kernel("matern32")) is Matern32 and type(get_kernel("matern52")) is Matern52
    assert type(get_kernel("rq")) is RationalQuadratic
    assert type(get_kernel("rational_quadratic")) is RationalQuadratic
    k = get_kernel("matern52 + rq*periodic")
    assert [type(leaf).__name__ for leaf in k.leaves()] == [
        "Matern52",
        "RationalQuadratic",
        "Periodic",
    ]
    assert bk.kernels.Matern32 is Matern32 and "RationalQuadratic" in bk.kernels.__all__
    k = Matern32(lengthscale=0.4) + RationalQuadratic(lengthscale=1.1, alpha=0.5) * Matern52(
        lengthscale=[1.0, 2.0, 0.5]
    )
    k2 = kernel_from_config(k.get_config())
    assert_close(np.asarray(k2(X)), np.asarray(k(X)), atol=1e-14)


@pytest.mark.slow  # ~15 s of NUTS compilation; the config round trip above is the fast check
def test_saved_run_with_matern_and_rq_reloads(tmp_path, rng):
    from conftest import TINY

    X = rng.normal(size=(25, 2))
    y = np.sin(2 * X[:, 0]) + 0.1 * rng.normal(size=25)
    m = bk.GPRegressor(kernel=Matern32() + RationalQuadratic(), random_state=0, **TINY).fit(X, y)
    assert "rationalquadratic_alpha" in m.idata_.posterior
    m.save(tmp_path / "run")
    m2 = bk.load_run(tmp_path / "run")
    assert [type(leaf) for leaf in m2.kernel_.leaves()] == [Matern32, RationalQuadratic]
    assert_close(m2.predict(X[:5]), m.predict(X[:5]), rtol=1e-10)


# --------------------------------------------------------------------------- Bochner
STATIONARY = {
    "rbf": lambda ls: RBF(lengthscale=ls),
    "laplacian": lambda ls: Laplacian(lengthscale=ls),
    "m32": lambda ls: Matern32(lengthscale=ls),
    "m52": lambda ls: Matern52(lengthscale=ls),
}


def _kernel_1d(name):
    if name == "rq":  # alpha > 1/2: a finite density at 0 (integrable in any case)
        return RationalQuadratic(lengthscale=0.7, alpha=0.8)
    return STATIONARY[name](0.7)


def _density_fn(k, th):
    f = jax.jit(lambda w: k.spectral_density(th, w))
    return lambda w: np.asarray(f(jnp.asarray(w, dtype=float)))


@pytest.mark.parametrize("name", [*STATIONARY, "rq"])
def test_bochner_1d(name):
    """(2π)^-1 ∫ S(ω) cos(ωτ) dω = k(τ), by QUADPACK's Fourier integral on [0, ∞)."""
    k, th = _named(_kernel_1d(name))
    S = _density_fn(k, th)
    s1 = lambda w: float(S(np.array([[w]]))[0])  # noqa: E731
    total, _ = integrate.quad(s1, 0, np.inf, limit=200, epsabs=f32_floor(1e-11, 1e-7))
    assert total / np.pi == pytest.approx(1.0, abs=f32_floor(1e-8, 1e-5))
    if not jax.config.jax_enable_x64:
        # QUADPACK's Fourier integral (QAWF) extrapolates over cycles of the far tail, where a
        # float32 density is rounding noise; the 2-D test checks the transform in float32
        return
    taus = np.array([0.1, 0.5, 1.3, 2.7])
    exact = np.asarray(k.gram(th, jnp.asarray(taus[:, None]), jnp.zeros((1, 1))))[:, 0]
    for tau, ref in zip(taus, exact, strict=True):
        val, _ = integrate.quad(s1, 0, np.inf, weight="cos", wvar=tau, limlst=200)
        assert val / np.pi == pytest.approx(ref, abs=f32_floor(1e-8, 1e-5)), tau


def _kernel_2d(name, ard):
    ls = np.array([0.6, 1.5]) if ard else 0.8
    if name == "rq":  # alpha = 4.5: the density is smooth enough at 0 for the trapezoid rule
        return RationalQuadratic(lengthscale=ls, alpha=4.5)
    return STATIONARY[name](ls)


@pytest.mark.parametrize("ard", [False, True], ids=["iso", "ard"])
@pytest.mark.parametrize("name", [*STATIONARY, "rq"])
def test_bochner_2d(name, ard):
    """Fourier inversion in 2-D, through a Gaussian window for the heavy Matérn tails.

    ``(2π)^-2 ∫ S(ω) e^{-ε²|ω|²/2} cos(ωᵀτ) dω`` is the kernel smoothed by a Gaussian of
    standard deviation ε in τ, ``E k(τ + ε z)``, z ~ N(0, I): the left side by the trapezoid
    rule on the quadrant (S is even in each coordinate), the right side by Gauss-Hermite.
    The total mass, (2π)^-2 ∫ S = 1, without a window: radially by QUADPACK, trapezoid in angle.
    """
    k, th = _named(_kernel_2d(name, ard), d=2)
    S = _density_fn(k, th)
    eps, R, h = 0.2, 40.0, 0.08  # the window is e^-32 at R
    w1 = np.arange(0.0, R + h / 2, h)
    wt = np.full(w1.size, h)
    wt[0] = h / 2
    W1, W2 = np.meshgrid(w1, w1, indexing="ij")
    Sw = S(np.stack([W1.ravel(), W2.ravel()], axis=1)).reshape(W1.shape)
    Sw = Sw * np.exp(-0.5 * eps**2 * (W1**2 + W2**2)) * np.outer(wt, wt)
    z, zw = hermegauss(40)
    Z1, Z2 = np.meshgrid(z, z, indexing="ij")
    ZW = np.outer(zw, zw) / (2 * np.pi)
    for tau in ([1.0, -0.6], [1.5, 0.3], [0.4, 1.2]):
        lhs = 4 * np.sum(Sw * np.outer(np.cos(w1 * tau[0]), np.cos(w1 * tau[1]))) / (2 * np.pi) ** 2
        pts = np.stack([tau[0] + eps * Z1.ravel(), tau[1] + eps * Z2.ravel()], axis=1)
        kv = np.asarray(k.gram(th, jnp.asarray(pts), jnp.zeros((1, 2))))[:, 0]
        assert lhs == pytest.approx(np.sum(ZW.ravel() * kv), abs=f32_floor(1e-8, 1e-5)), tau
    phi = 2 * np.pi * np.arange(64) / 64
    dirs = np.stack([np.cos(phi), np.sin(phi)], axis=1)
    radial, _ = integrate.quad_vec(
        lambda r: r * S(r * dirs), 0, np.inf, epsabs=f32_floor(1e-12, 1e-7), limit=200
    )
    assert np.mean(radial) * 2 * np.pi / (2 * np.pi) ** 2 == pytest.approx(
        1.0, abs=f32_floor(1e-8, 1e-5)
    )


def test_known_densities_and_ard_substitution():
    """RBF and Matérn densities at a few points against the formulas written out here."""
    w = np.array([[0.0, 0.0], [0.5, -1.0], [2.0, 0.3]])
    ls = np.array([0.7, 1.9])
    k, th = _named(RBF(lengthscale=ls), 2)
    ref = 2 * np.pi * np.prod(ls) * np.exp(-0.5 * np.sum((ls * w) ** 2, axis=1))
    assert_close(np.asarray(k.spectral_density(th, w)), ref, rtol=1e-13)
    for cls, nu in ((Laplacian, 0.5), (Matern32, 1.5), (Matern52, 2.5)):
        k, th = _named(cls(lengthscale=ls), 2)
        c = 4 * np.pi * math.gamma(nu + 1) * (2 * nu) ** nu / math.gamma(nu)
        ref = c * np.prod(ls) * (2 * nu + np.sum((ls * w) ** 2, axis=1)) ** (-(nu + 1))
        assert_close(np.asarray(k.spectral_density(th, w)), ref, rtol=1e-13)
    # an isotropic length-scale equals the same value repeated per column
    k1, th1 = _named(Matern52(lengthscale=0.8), 2)
    k2, th2 = _named(Matern52(lengthscale=[0.8, 0.8]), 2)
    assert_close(
        np.asarray(k1.spectral_density(th1, w)), np.asarray(k2.spectral_density(th2, w)), rtol=1e-14
    )


# --------------------------------------------------------------------------- rational quadratic
def _rq_closed_form(alpha, ls, w):
    """S(ω) = (2π)^{d/2} Πℓ α^α/Γ(α) · 2 (q/2α)^{p/2} K_p(√(2αq)), p = α - d/2, q = |ℓω|²."""
    w = np.atleast_2d(w)
    d = w.shape[1]
    ls = np.broadcast_to(np.asarray(ls, dtype=float), (d,))
    q = np.sum((ls * w) ** 2, axis=1)
    p, z = alpha - d / 2, np.sqrt(2 * alpha * q)
    log = (
        d / 2 * np.log(2 * np.pi)
        + np.sum(np.log(ls))
        + alpha * np.log(alpha)
        - gammaln(alpha)
        + np.log(2)
        + p / 2 * np.log(q / (2 * alpha))
        + np.log(kve(p, z))
        - z
    )
    return np.exp(log)


@pytest.mark.parametrize("d", [1, 2, 3])
def test_rq_density_matches_bessel_closed_form(d, rng):
    # scipy's K_p overflows near 0 for a large order: large α is test_rq_density_tends_to_rbf
    for alpha in (0.05, 0.3, 0.5, 1.0, 2.5, 30.0):
        ls = rng.uniform(0.3, 2.0, size=d)
        dirs = rng.normal(size=(40, d))
        dirs /= np.linalg.norm(dirs, axis=1, keepdims=True)
        w = dirs * np.logspace(-4, 1.5, 40)[:, None]
        k, th = _named(RationalQuadratic(lengthscale=ls, alpha=alpha), d)
        ours = np.asarray(k.spectral_density(th, w))
        ref = _rq_closed_form(alpha, ls, w)
        keep = ref > 1e-250  # far tails underflow in the closed form first
        assert keep.sum() >= 30
        assert_close(ours[keep], ref[keep], rtol=1e-9, err_msg=f"alpha={alpha}")


def test_rq_density_gradients_match_closed_form():
    w = np.array([[0.3, -0.2], [1.0, 0.7], [2.5, 1.0]])

    def ours(alpha, ls):
        k = name_leaves(RationalQuadratic(ard=True))
        th = {"rationalquadratic_lengthscale": ls, "rationalquadratic_alpha": alpha}
        return k.spectral_density(th, jnp.asarray(w))

    alpha, ls = 1.7, np.array([0.8, 1.3])  # the finite differences in float64, in either mode
    ja, jl = jax.jit(jax.jacfwd(ours, argnums=(0, 1)))(alpha, jnp.asarray(ls))
    e = 1e-6
    fa = (_rq_closed_form(alpha + e, ls, w) - _rq_closed_form(alpha - e, ls, w)) / (2 * e)
    assert_close(np.asarray(ja), fa, rtol=1e-6)
    for j in range(2):
        dl = np.zeros(2)
        dl[j] = e
        fl = (_rq_closed_form(alpha, ls + dl, w) - _rq_closed_form(alpha, ls - dl, w)) / (2 * e)
        assert_close(np.asarray(jl[:, j]), fl, rtol=1e-6)


def test_log_gamma_ratio_matches_scipy():
    """α log α - α - log Γ(α) by Stirling's series past α = 10 equals the direct form."""
    from bayeskern.kernels.rational_quadratic import _log_gamma_ratio

    a = np.geomspace(0.05, 1e6, 200)
    direct = a * np.log(a) - a - gammaln(a)  # float64: cancellation costs ~1e-16 * α log α
    ours = np.asarray(_log_gamma_ratio(jnp.asarray(a)))
    assert_close((ours - direct) / np.maximum(1, a), np.zeros_like(a), atol=f32_floor(3e-14, 1e-5))


def test_rq_density_tends_to_rbf():
    w = np.stack([np.linspace(0, 4, 30), np.linspace(1, -2, 30)], axis=1)
    kr, thr = _named(RBF(lengthscale=0.9), 2)
    rbf = np.asarray(kr.spectral_density(thr, w))
    errs = []
    for alpha in (1e2, 1e4):
        k, th = _named(RationalQuadratic(lengthscale=0.9, alpha=alpha), 2)
        errs.append(np.max(np.abs(np.asarray(k.spectral_density(th, w)) - rbf)) / rbf.max())
    assert errs[1] < 1e-3 and errs[1] < errs[0] / 50  # O(1/α)


def test_rq_density_infinite_at_zero_only_when_alpha_small():
    w0 = np.zeros((1, 2))
    k, th = _named(RationalQuadratic(lengthscale=1.0, alpha=0.8), 2)  # alpha <= d/2
    assert not np.isfinite(np.asarray(k.spectral_density(th, w0))[0])
    k, th = _named(RationalQuadratic(lengthscale=1.0, alpha=3.0), 2)
    # S(0) = (2π)^{d/2} α^{d/2} Γ(α - d/2) / Γ(α) for α > d/2
    ref = 2 * np.pi * 3.0 * math.gamma(2.0) / math.gamma(3.0)
    assert float(k.spectral_density(th, w0)[0]) == pytest.approx(ref, rel=f32_floor(1e-10, 1e-5))


# --------------------------------------------------------------------------- sums, errors
def test_sum_density_is_the_sum():
    k = name_leaves(RBF(lengthscale=0.5) + Matern32(lengthscale=[1.0, 2.0]))
    th = default_theta(k, np.ones(2))
    w = jnp.asarray(np.random.default_rng(1).normal(size=(9, 2)))
    parts = [t.spectral_density(th, w) for t in k.terms()]
    assert_close(np.asarray(k.spectral_density(th, w)), np.asarray(parts[0] + parts[1]), rtol=1e-14)


def test_has_spectral_density():
    yes = [
        RBF(),
        Laplacian(),
        Matern32(),
        Matern52(ard=True),
        RationalQuadratic(),
        RBF() + Matern52(),
        Laplacian() + RationalQuadratic() + RBF(),
    ]
    no = [
        Linear(),
        Periodic(),
        MahalanobisRBF(),
        RBF() * Periodic(),
        RBF() + Linear(),
        Periodic() + RBF(),
        RBF() * Matern32(),
    ]
    assert all(k.has_spectral_density() for k in yes)
    assert not any(k.has_spectral_density() for k in no)


@pytest.mark.parametrize(
    ("kernel", "named"),
    [
        (Linear(), "Linear"),
        (Periodic(), "Periodic"),
        (RBF() + Linear(), "Linear"),
        (RBF() * Periodic(), "Product"),
    ],
)
def test_no_density_raises_naming_the_kernel(kernel, named):
    k, th = _named(kernel, 1)
    with pytest.raises(NotImplementedError, match=rf"{named}.*no spectral density.*exact"):
        k.spectral_density(th, jnp.ones((3, 1)))


def test_bad_omega_shape():
    k, th = _named(RBF(lengthscale=[1.0, 2.0]), 2)
    with pytest.raises(ValueError, match="omega"):
        k.spectral_density(th, jnp.ones(3))
    with pytest.raises(ValueError, match="omega has 3 columns"):
        k.spectral_density(th, jnp.ones((4, 3)))


# --------------------------------------------------------------------------- Periodic
@pytest.mark.parametrize("ls", [0.5, 1.0, 2.0])
def test_periodic_cosine_series_reproduces_the_kernel(ls):
    period = 1.7
    k, th = _named(Periodic(period=period, lengthscale=ls), 1)
    n = Periodic.n_harmonics_for(ls, tol=1e-10)
    q = np.asarray(k.cosine_coefficients(th, n))
    # positive; in float32 the last of the tail round to 0
    assert q.shape == (n + 1,) and np.all(q > 0 if jax.config.jax_enable_x64 else q >= 0)
    assert_close(q[0], ive(0, 1 / ls**2), rtol=1e-13)
    # absolute accuracy: the DFT of a function bounded by 1, rounding ~1e-16
    assert_close(q[1:], 2 * ive(np.arange(1, n + 1), 1 / ls**2), rtol=1e-12, atol=1e-15)
    tau = np.linspace(-2 * period, 2 * period, 301)
    series = np.cos(2 * np.pi * np.outer(tau, np.arange(n + 1)) / period) @ q
    exact = np.asarray(k.gram(th, jnp.asarray(tau[:, None]), jnp.zeros((1, 1))))[:, 0]
    assert np.max(np.abs(series - exact)) < f32_floor(1e-8, 1e-5)
    if jax.config.jax_enable_x64:  # in float32 the sum's rounding is larger than 1e-10
        # one harmonic fewer misses the tolerance: the error is the dropped sum, at τ = 0
        assert 1.0 - np.sum(q[:-1]) > 1e-10


def test_periodic_coefficients_small_lengthscale_and_gradient():
    k = name_leaves(Periodic(period=1.0))
    for ls in (0.02, 0.1):  # I_j(1/ℓ²) overflows a double for ℓ = 0.02; the scaled form does not
        th = default_theta(k, np.ones(1))
        th["periodic_lengthscale"] = jnp.asarray(ls)
        n = Periodic.n_harmonics_for(ls, 1e-12)
        q = np.asarray(k.cosine_coefficients(th, n))
        assert np.all(np.isfinite(q)) and np.sum(q) == pytest.approx(
            1.0, abs=f32_floor(1e-11, 1e-4)
        )
        assert_close(
            q[:20], np.r_[1, 2 * np.ones(19)] * ive(np.arange(20), ls**-2), rtol=1e-10, atol=1e-15
        )

    def coef(ls):
        th = default_theta(k, np.ones(1))
        th["periodic_lengthscale"] = ls
        return k.cosine_coefficients(th, 12)

    g = np.asarray(jax.jacfwd(coef)(0.8))
    e = 1e-6
    fd = (ive(np.arange(13), (0.8 + e) ** -2) - ive(np.arange(13), (0.8 - e) ** -2)) / (2 * e)
    fd[1:] *= 2
    assert_close(g, fd, rtol=1e-6, atol=1e-12)


def test_periodic_argument_errors():
    k, th = _named(Periodic(), 1)
    for bad in (-1, 1.5, True, "3"):
        with pytest.raises(ValueError, match="n_harmonics"):
            k.cosine_coefficients(th, bad)
    assert k.cosine_coefficients(th, 0).shape == (1,)
    with pytest.raises(ValueError, match="lengthscale"):
        Periodic.n_harmonics_for(0.0)
    for bad in (0.0, 1.0, -1e-3):
        with pytest.raises(ValueError, match="tol"):
            Periodic.n_harmonics_for(1.0, bad)
    # fewer harmonics for a looser tolerance and a longer length-scale
    assert Periodic.n_harmonics_for(1.0, 1e-4) < Periodic.n_harmonics_for(1.0, 1e-12)
    assert Periodic.n_harmonics_for(2.0) < Periodic.n_harmonics_for(0.5)
