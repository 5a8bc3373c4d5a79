"""Scale (issue 9): chunked / sharded / streamed sufficient statistics equal the dense ones;
batched prediction equals unbatched; slow checks of peak memory at N = 10^6."""

import json
import pickle
import subprocess
import sys
import warnings
from pathlib import Path

import jax.numpy as jnp
import numpy as np
import pytest

import bayeskern as bk
from bayeskern.blr import feature_stats, nig_log_marginal, nig_posterior
from bayeskern.features import locally_stationary_features, rff_features
from bayeskern.sharding import (
    add_stats,
    chunked_feature_stats,
    predict_in_batches,
    sharded_feature_stats,
    stream_feature_stats,
)

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(517, 3))
    y = np.sin(X[:, 0]) + 0.1 * rng.normal(size=517)
    omega = jnp.asarray(rng.normal(size=(12, 3)))
    dense = feature_stats(rff_features(jnp.asarray(X), omega), jnp.asarray(y))
    return X, y, omega, dense


def _assert_stats_equal(a, b, tol=1e-10):
    for name, u, v in zip(a._fields, a, b, strict=True):
        np.testing.assert_allclose(np.asarray(u), np.asarray(v), rtol=tol, atol=tol,
                                   err_msg=name)


@pytest.mark.parametrize("chunk", [1, 64, 100, 517, 4096])
def test_chunked_stats_equal_dense(data, chunk):
    X, y, omega, dense = data
    s = chunked_feature_stats(X, y, rff_features, omega, chunk_size=chunk)
    _assert_stats_equal(s, dense)
    assert float(s.n) == len(y)  # padded rows are masked out of N


def test_posterior_and_evidence_from_chunks_equal_dense(data):
    X, y, omega, dense = data
    s = chunked_feature_stats(X, y, rff_features, omega, chunk_size=50)
    p1, p2 = nig_posterior(dense, 2.0, 1.0, 1.0), nig_posterior(s, 2.0, 1.0, 1.0)
    for u, v in zip(p1, p2, strict=True):
        np.testing.assert_allclose(np.asarray(u), np.asarray(v), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(float(nig_log_marginal(s, 2.0, 1.0, 1.0)),
                               float(nig_log_marginal(dense, 2.0, 1.0, 1.0)), rtol=1e-12)


def test_sharded_and_streamed_stats_equal_dense(data):
    X, y, omega, dense = data
    # one device here; the two-device run is in test_parallel.py
    _assert_stats_equal(sharded_feature_stats(X, y, rff_features, omega, chunk_size=64), dense)
    blocks = ((X[i:i + 200], y[i:i + 200]) for i in range(0, len(y), 200))
    _assert_stats_equal(stream_feature_stats(blocks, rff_features, omega, chunk_size=64), dense)
    half = add_stats(feature_stats(rff_features(jnp.asarray(X[:300]), omega), jnp.asarray(y[:300])),
                     feature_stats(rff_features(jnp.asarray(X[300:]), omega), jnp.asarray(y[300:])))
    _assert_stats_equal(half, dense)


def test_chunked_stats_with_other_features(data):
    """Any traceable featurize works (here the locally stationary features of GaBaSR)."""
    X, y, omega, _ = data
    v = omega[:2] * 0.5

    def phi(Xc, p):
        return locally_stationary_features(Xc, p[0], p[1])[0]

    dense = feature_stats(phi(jnp.asarray(X), (omega, v)), jnp.asarray(y))
    _assert_stats_equal(chunked_feature_stats(X, y, phi, (omega, v), chunk_size=77), dense)


def test_new_frequencies_do_not_recompile(data):
    X, y, omega, _ = data
    from bayeskern.sharding import _chunked

    chunked_feature_stats(X, y, rff_features, omega, chunk_size=64)
    before = _chunked._cache_size()
    s = chunked_feature_stats(X, y, rff_features, omega * 2.0, chunk_size=64)
    assert _chunked._cache_size() == before
    _assert_stats_equal(s, feature_stats(rff_features(jnp.asarray(X), omega * 2.0),
                                         jnp.asarray(y)))


def test_bad_input_names_the_argument(data):
    X, y, omega, _ = data
    with pytest.raises(ValueError, match="chunk_size"):
        chunked_feature_stats(X, y, rff_features, omega, chunk_size=0)
    with pytest.raises(ValueError, match="y must have shape"):
        chunked_feature_stats(X, y[:-1], rff_features, omega)
    with pytest.raises(ValueError, match="X must be 2-D"):
        chunked_feature_stats(X[:, 0], y, rff_features, omega)
    with pytest.raises(ValueError, match="blocks is empty"):
        stream_feature_stats(iter([]), rff_features, omega)
    with pytest.raises(ValueError, match="batch_size"):
        predict_in_batches(bk.GPRegressor(), X, batch_size=0)
    with pytest.raises(TypeError, match="predictive"):
        predict_in_batches(object(), X)


# --------------------------------------------------------------------------- prediction
_TINY = dict(num_warmup=20, num_samples=10, num_chains=1, progress_bar=False, random_state=0)


@pytest.fixture(scope="module")
def reg_data():
    rng = np.random.default_rng(1)
    X = rng.uniform(-3, 3, size=(40, 2))
    y = np.sin(X[:, 0]) + 0.1 * rng.normal(size=40)
    Xn = rng.uniform(-3, 3, size=(101, 2))
    return X, y, Xn


def _fit(est, X, y):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return est.fit(X, y)


def _check_batched(est, Xn):
    out = predict_in_batches(est, Xn, prob=0.8, batch_size=17)
    pred = est.predictive(Xn)
    lo, hi = pred.interval(0.8)
    np.testing.assert_allclose(out["mean"], pred.mean(), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(out["std"], pred.std(), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(out["lower"], lo, rtol=1e-8, atol=1e-10)
    np.testing.assert_allclose(out["upper"], hi, rtol=1e-8, atol=1e-10)
    assert np.all(out["lower"] < out["mean"]) and np.all(out["mean"] < out["upper"])


@pytest.fixture(scope="module")
def gp(reg_data):
    X, y, _ = reg_data
    return _fit(bk.GPRegressor(**_TINY), X, y)


def test_gp_batched_prediction_equals_unbatched(gp, reg_data):
    _check_batched(gp, reg_data[2])


def test_random_feature_model_batched_prediction_equals_unbatched(reg_data):
    """LAB-RBF's Bayesian last layer: an NIG posterior on learned features."""
    X, y, Xn = reg_data
    est = bk.LABRBFRegressor(max_support=10, n_iter_round=20, n_iter_final=20, num_samples=10,
                             num_chains=1, progress_bar=False, random_state=0)
    _check_batched(_fit(est, X, y), Xn)


@pytest.mark.slow  # ~15-30 s of compilation: make test-slow
def test_gp_prediction_cache_follows_refit(gp, reg_data):
    """The compiled per-draw predictor is cached per fit: a refit must not reuse it."""
    X, y, Xn = reg_data
    est = pickle.loads(pickle.dumps(gp))  # a copy; pickling drops the cache
    est.predict(Xn)  # fills the cache
    assert "_cache" in est.__dict__
    _fit(est, X[:30], -y[:30])
    clean = pickle.loads(pickle.dumps(est))  # same fitted state, no cache
    np.testing.assert_allclose(est.predict(Xn), clean.predict(Xn), rtol=1e-12)
    assert not np.allclose(est.predict(Xn), gp.predict(Xn))


# --------------------------------------------------------------------------- slow: 10^6 rows
def _run_json(cmd, timeout):
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.stdout


@pytest.mark.slow
def test_million_rows_sufficient_statistics_bounded_memory(tmp_path):
    out = _run_json([sys.executable, "benchmarks/scale/scale_sharded.py", "--repeats", "1",
                     "--out", str(tmp_path / "s.md")], timeout=1200)
    vals = dict(ln.split(": ", 1) for ln in out.splitlines() if ": " in ln)
    assert int(vals["n"]) == 1_000_000 and int(vals["features"]) == 512
    assert float(vals["peak_rss_gb"]) < 4.0


@pytest.mark.slow
@pytest.mark.parametrize("model", ["gp", "gabasr"])
def test_million_row_prediction_under_2gb(model):
    out = _run_json([sys.executable, "benchmarks/scale/scale_predict.py", "--model", model,
                     "--draws", "10", "--warmup", "50", "--no-write"], timeout=1800)
    res = json.loads([ln for ln in out.splitlines() if ln.startswith("RESULT ")][-1][7:])
    assert res["n_new"] == 1_000_000 and res["all_finite"] and res["interval_ok"]
    assert res["peak_rss_gb"] < 2.0


def test_gp_cached_factors_equal_per_chunk_factoring(gp, reg_data, monkeypatch):
    """Prediction from the per-draw factors kept after the fit equals factoring per chunk
    (the path taken when the factors exceed ``FACTOR_CACHE_BYTES``)."""
    from bayeskern.estimators import gp as gp_module

    Xn = reg_data[2]
    cached = gp.predictive(Xn)
    fresh = pickle.loads(pickle.dumps(gp))  # no cache
    monkeypatch.setattr(gp_module, "FACTOR_CACHE_BYTES", 0)
    direct = fresh.predictive(Xn)
    assert "factors" not in fresh.__dict__.get("_cache", {})
    np.testing.assert_allclose(cached.loc, direct.loc, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(cached.scale, direct.scale, rtol=1e-9, atol=1e-12)
