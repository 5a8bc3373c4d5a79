"""Conjugate Bayesian linear regression and the predictive mixture against dense references."""

import jax.numpy as jnp
import numpy as np
import pytest
from scipy import stats

from bayeskern import blr
from bayeskern.features import locally_stationary_features, rff_features
from bayeskern.predictive import MixturePredictive

LAM, A0, B0 = 0.7, 2.0, 1.5


def _problem(rng, n=12, m=4):
    Phi = rng.normal(size=(n, m))
    y = Phi @ rng.normal(size=m) + 0.3 * rng.normal(size=n)
    return Phi, y


def test_evidence_equals_multivariate_t(rng):
    # integrating w ~ N(0, s2/LAM I) and s2 ~ IG(A0, B0) gives a multivariate t
    Phi, y = _problem(rng)
    st = blr.feature_stats(jnp.asarray(Phi), jnp.asarray(y))
    ours = float(blr.nig_log_marginal(st, LAM, A0, B0))
    shape = B0 / A0 * (np.eye(len(y)) + Phi @ Phi.T / LAM)
    ref = stats.multivariate_t(np.zeros(len(y)), shape, df=2 * A0).logpdf(y)
    assert ours == pytest.approx(ref, rel=1e-10)


def test_predictive_equals_conditional_multivariate_t(rng):
    Phi, y = _problem(rng)
    phi_new = rng.normal(size=(1, Phi.shape[1]))
    st = blr.feature_stats(jnp.asarray(Phi), jnp.asarray(y))
    loc, scale, df = blr.nig_predictive(blr.nig_posterior(st, LAM, A0, B0), jnp.asarray(phi_new))
    # conditional of the joint multivariate t of (y, y_new)
    F = np.vstack([Phi, phi_new])
    S = B0 / A0 * (np.eye(len(F)) + F @ F.T / LAM)
    n = len(y)
    Sxx, Sxs, Sss = S[:n, :n], S[:n, n:], S[n:, n:]
    sol = np.linalg.solve(Sxx, Sxs)
    mean = sol.T @ y
    df_c = 2 * A0 + n
    q = y @ np.linalg.solve(Sxx, y)
    scale_c = np.sqrt((2 * A0 + q) / df_c * (Sss - Sxs.T @ sol))
    assert float(df) == pytest.approx(df_c)
    np.testing.assert_allclose(np.asarray(loc), mean.ravel(), rtol=1e-9)
    np.testing.assert_allclose(np.asarray(scale), scale_c.ravel(), rtol=1e-9)


@pytest.mark.parametrize("M, tol", [(200, 0.25), (2000, 0.08), (20000, 0.025)])
def test_random_features_converge_to_rbf(rng, M, tol):
    X = rng.normal(size=(30, 2))
    omega = rng.normal(size=(M, 2))  # spectral density of the unit RBF kernel
    Phi = np.asarray(rff_features(jnp.asarray(X), jnp.asarray(omega)))
    K = np.exp(-0.5 * ((X[:, None] - X[None]) ** 2).sum(-1))
    err = np.abs(Phi @ Phi.T - K)
    assert err.max() < tol and err.mean() < tol / 3


def test_locally_stationary_features_estimate_product_kernel(rng):
    X = rng.uniform(-2, 2, size=(15, 1))
    omega, v = rng.normal(size=(300, 1)), 0.5 * rng.normal(size=(300, 1))
    p, m = locally_stationary_features(jnp.asarray(X), jnp.asarray(omega), jnp.asarray(v))
    K = np.asarray(p @ m.T)
    s, d = (X + X.T) / 2, X - X.T
    exact = np.exp(-0.5 * 0.25 * s**2) * np.exp(-0.5 * d**2)
    assert np.abs(K - exact).max() < 0.08


def test_mixture_quantiles_moments_and_density():
    loc = np.array([[0.0, 1.0], [2.0, 1.0]])
    scale = np.array([[1.0, 0.5], [1.0, 0.5]])
    mix = MixturePredictive(loc, scale)
    np.testing.assert_allclose(mix.mean(), [1.0, 1.0])
    np.testing.assert_allclose(mix.var(), [2.0, 0.25])
    q = mix.quantile(0.9)
    np.testing.assert_allclose(mix.cdf(q), 0.9, atol=1e-7)
    assert q[1] == pytest.approx(stats.norm(1, 0.5).ppf(0.9), abs=1e-7)
    dens = 0.5 * (stats.norm(0, 1).pdf(0.3) + stats.norm(2, 1).pdf(0.3))
    assert mix.logpdf([0.3, 1.0])[0] == pytest.approx(np.log(dens))
    t = MixturePredictive(loc, scale, df=np.array([3.0, 3.0]))
    assert t.quantile(0.95)[1] == pytest.approx(stats.t(3, 1, 0.5).ppf(0.95), abs=1e-7)


def test_mixture_rejects_nan():
    with pytest.raises(FloatingPointError, match="non-finite"):
        MixturePredictive(np.array([[np.nan]]), np.array([[1.0]]))
