"""Tests of :mod:`bayeskern.random`: exact draws against reference moments and distributions."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import stats

import bayeskern  # noqa: F401  (float64)
from bayeskern import random as bkr

KEY = jax.random.PRNGKey(0)


CS = np.array([0.0, 0.7, 3.0, 12.0])
N = 10000


@pytest.fixture(scope="module")
def pg_draws():
    return np.asarray(bkr.polya_gamma(KEY, jnp.repeat(jnp.asarray(CS), N))).reshape(4, N)


def test_polya_gamma_moments(pg_draws):
    assert np.all(pg_draws > 0)
    for c, wc in zip(CS, pg_draws, strict=True):
        if c == 0:
            mean, var = 0.25, 1.0 / 24.0
        else:
            mean = np.tanh(c / 2) / (2 * c)
            var = (np.sinh(c) - c) / (4 * c**3 * np.cosh(c / 2) ** 2)
        assert abs(wc.mean() - mean) < 4 * np.sqrt(var / N), c
        assert abs(wc.var() / var - 1) < 0.08, c


def test_polya_gamma_matches_its_series_representation(pg_draws):
    """PG(1, c) = sum_k g_k / (2 pi^2 ((k - 1/2)^2 + c^2 / (4 pi^2))), g_k ~ Exp(1)
    (Polson, Scott & Windle 2013, eq. 1): two-sample Kolmogorov-Smirnov against 200 terms
    (the tail beyond them has mean < 1e-3 of the whole)."""
    rng = np.random.default_rng(0)
    k = np.arange(1, 201)
    for c, draws in zip(CS, pg_draws, strict=True):
        ref = rng.exponential(size=(4000, 200)) / (
            2 * np.pi**2 * ((k - 0.5) ** 2 + c**2 / (4 * np.pi**2))
        )
        assert stats.ks_2samp(draws, ref.sum(1)).pvalue > 1e-3, c


def test_gamma_moments_and_distribution():
    shapes = np.array([0.3, 1.0, 7.5, 60.0])
    n = 10000
    g = np.asarray(bkr.gamma(KEY, jnp.repeat(jnp.asarray(shapes), n))).reshape(4, n)
    for a, ga in zip(shapes, g, strict=True):
        assert abs(ga.mean() - a) < 4 * np.sqrt(a / n), a
        assert abs(ga.var() / a - 1) < 0.08, a
        assert stats.kstest(ga, stats.gamma(a).cdf).pvalue > 1e-3, a


def test_wishart_mean_and_bartlett_diagonal():
    rng = np.random.default_rng(0)
    d, df = 3, 6.5
    B = rng.normal(size=(d, d))
    V = B @ B.T + d * np.eye(d)
    L = jnp.asarray(np.linalg.cholesky(V))
    keys = jax.random.split(KEY, 3000)
    C = jax.vmap(lambda k: bkr.wishart_cholesky(k, df, L))(keys)
    W = np.asarray(C @ jnp.swapaxes(C, -1, -2))
    np.testing.assert_allclose(W.mean(0), df * V, rtol=0.1, atol=0.1 * np.abs(V).max())
    # each diagonal entry: W_ii / V_ii ~ chi^2_df
    for i in range(d):
        assert stats.kstest(W[:, i, i] / V[i, i], stats.chi2(df).cdf).pvalue > 1e-3, i


def test_niw_posterior_against_centred_form():
    """Murphy (2007) eqs. 250-254 written with raw sums equal the textbook centred form."""
    rng = np.random.default_rng(0)
    d = 3
    x = rng.normal(size=(7, d)) + 2.0
    m0, k0, nu0, Psi0 = rng.normal(size=d), 0.1, d + 2.0, np.eye(d) * 0.5
    mn, kn, nun, Psin = bkr.niw_posterior(7.0, x.sum(0), x.T @ x, m0, k0, nu0, Psi0)
    xb = x.mean(0)
    S = (x - xb).T @ (x - xb)
    ref = Psi0 + S + k0 * 7 / (k0 + 7) * np.outer(xb - m0, xb - m0)
    np.testing.assert_allclose(mn, (k0 * m0 + 7 * xb) / (k0 + 7), rtol=1e-12)
    assert kn == k0 + 7 and nun == nu0 + 7
    np.testing.assert_allclose(Psin, ref, rtol=1e-10)


def test_normal_inverse_wishart_moments():
    """E[Lambda] = nu Psi^-1 and E[mu] = m, Cov[mu] = Psi / (kappa (nu - d - 1))."""
    d, kappa, nu = 2, 2.0, 7.0
    m = jnp.asarray([1.0, -0.5])
    Psi = jnp.asarray([[2.0, 0.3], [0.3, 1.0]])
    keys = jax.random.split(KEY, 4000)
    mu, U = jax.vmap(lambda k: bkr.normal_inverse_wishart(k, m, kappa, nu, Psi))(keys)
    Lam = np.asarray(U @ jnp.swapaxes(U, -1, -2))
    np.testing.assert_allclose(Lam.mean(0), nu * np.linalg.inv(Psi), rtol=0.06, atol=0.05)
    np.testing.assert_allclose(np.asarray(mu).mean(0), m, atol=0.03)
    np.testing.assert_allclose(
        np.cov(np.asarray(mu).T), Psi / (kappa * (nu - d - 1)), rtol=0.12, atol=0.01
    )
    assert np.allclose(np.triu(np.asarray(U[0]), 1), 0)


def test_bad_arguments_name_the_argument():
    with pytest.raises(ValueError, match="a must be"):
        bkr.gamma(KEY, jnp.asarray([1.0, 0.0]))
    with pytest.raises(ValueError, match="df must be"):
        bkr.wishart_cholesky(KEY, 1.5, jnp.eye(3))
    with pytest.raises(ValueError, match="scale_chol"):
        bkr.wishart_cholesky(KEY, 5.0, jnp.ones(3))
    with pytest.raises(TypeError, match="c must be"):
        bkr.polya_gamma(KEY, jnp.arange(3))
