"""MixturePredictive: exact quantiles (safeguarded Newton) and counter-based row draws."""

import numpy as np
import pytest
from scipy import stats

from bayeskern.predictive import MixturePredictive, row_uniforms


@pytest.mark.parametrize("df", [None, 1.5, 4.0])
@pytest.mark.parametrize("q", [0.025, 0.5, 0.95])
def test_quantile_inverts_the_mixture_cdf(df, q):
    rng = np.random.default_rng(0)
    n = 2000
    # far-apart components make plateaus in the mixture CDF, where plain Newton oscillates
    loc = rng.normal(size=(20, n)) * rng.uniform(0.1, 5, size=(1, n))
    scale = rng.uniform(0.01, 2, size=(20, n))
    m = MixturePredictive(loc, scale, None if df is None else np.full(20, df))
    x = m.quantile(q)
    np.testing.assert_allclose(m.cdf(x), q, atol=1e-9)
    # each point's quantile depends on that point only
    part = np.concatenate([m.subset(slice(i, i + 37)).quantile(q) for i in range(0, n, 37)])
    np.testing.assert_allclose(part, x, rtol=1e-13, atol=1e-13)


def test_quantile_of_one_component_is_its_quantile():
    m = MixturePredictive(np.full((3, 4), 2.0), np.full((3, 4), 0.5))
    np.testing.assert_allclose(m.quantile(0.9), stats.norm(2.0, 0.5).ppf(0.9), rtol=1e-12)


def test_row_uniforms_are_uniform_and_counter_based():
    u = row_uniforms(7, np.arange(50_000), 8, 0)
    assert u.shape == (8, 50_000) and 0 < u.min() and u.max() < 1
    assert stats.kstest(u.ravel(), "uniform").pvalue > 1e-3
    np.testing.assert_array_equal(row_uniforms(7, np.arange(10, 20), 8, 0), u[:, 10:20])
    assert not np.allclose(row_uniforms(8, np.arange(10), 8, 0), u[:, :10])
    assert not np.allclose(row_uniforms(7, np.arange(10), 8, 1), u[:, :10])


@pytest.mark.parametrize("df", [None, 3.0])
def test_sample_is_batch_independent_and_follows_the_mixture(df):
    rng = np.random.default_rng(1)
    loc = rng.normal(size=(5, 3))
    m = MixturePredictive(loc, np.full((5, 3), 0.3), None if df is None else np.full(5, df))
    d = m.sample(20_000, 3)
    comp = stats.norm if df is None else stats.t(df)
    for i in range(3):  # the draws of each point follow its predictive mixture

        def cdf(y, i=i):
            return comp.cdf((np.asarray(y)[:, None] - loc[:, i]) / 0.3).mean(axis=1)

        assert stats.kstest(d[:, i], cdf).pvalue > 1e-3
    np.testing.assert_array_equal(
        m.subset(slice(1, 3)).sample(50, 3, row_offset=1), m.sample(50, 3)[:, 1:]
    )
