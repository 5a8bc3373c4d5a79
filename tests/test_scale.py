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
        np.testing.assert_allclose(np.asarray(u), np.asarray(v), rtol=tol, atol=tol, err_msg=name)


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
    np.testing.assert_allclose(
        float(nig_log_marginal(s, 2.0, 1.0, 1.0)),
        float(nig_log_marginal(dense, 2.0, 1.0, 1.0)),
        rtol=1e-12,
    )


def test_sharded_and_streamed_stats_equal_dense(data):
    X, y, omega, dense = data
    # one device here; the two-device run is in test_parallel.py
    _assert_stats_equal(sharded_feature_stats(X, y, rff_features, omega, chunk_size=64), dense)
    blocks = ((X[i : i + 200], y[i : i + 200]) for i in range(0, len(y), 200))
    _assert_stats_equal(stream_feature_stats(blocks, rff_features, omega, chunk_size=64), dense)
    half = add_stats(
        feature_stats(rff_features(jnp.asarray(X[:300]), omega), jnp.asarray(y[:300])),
        feature_stats(rff_features(jnp.asarray(X[300:]), omega), jnp.asarray(y[300:])),
    )
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
    _assert_stats_equal(s, feature_stats(rff_features(jnp.asarray(X), omega * 2.0), jnp.asarray(y)))


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
    est = bk.LABRBFRegressor(
        max_support=10,
        n_iter_round=20,
        n_iter_final=20,
        num_samples=10,
        num_chains=1,
        progress_bar=False,
        random_state=0,
    )
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
    out = _run_json(
        [
            sys.executable,
            "benchmarks/scale/scale_sharded.py",
            "--repeats",
            "1",
            "--out",
            str(tmp_path / "s.md"),
        ],
        timeout=1200,
    )
    vals = dict(ln.split(": ", 1) for ln in out.splitlines() if ": " in ln)
    assert int(vals["n"]) == 1_000_000 and int(vals["features"]) == 512
    assert float(vals["peak_rss_gb"]) < 4.0


@pytest.mark.slow
@pytest.mark.parametrize("model", ["gp", "gabasr"])
def test_million_row_prediction_under_2gb(model):
    out = _run_json(
        [
            sys.executable,
            "benchmarks/scale/scale_predict.py",
            "--model",
            model,
            "--draws",
            "10",
            "--warmup",
            "50",
            "--no-write",
        ],
        timeout=1800,
    )
    res = json.loads([ln for ln in out.splitlines() if ln.startswith("RESULT ")][-1][7:])
    assert res["n_new"] == 1_000_000 and res["all_finite"] and res["interval_ok"]
    assert res["peak_rss_gb"] < 2.0


def test_gp_cached_factors_equal_per_chunk_factoring(gp, reg_data, monkeypatch):
    """Prediction from the per-draw factors kept after the fit equals factoring per chunk
    (the path taken when the factors exceed ``FACTOR_CACHE_BYTES``)."""
    from bayeskern.estimators import gp_regressor

    Xn = reg_data[2]
    cached = gp.predictive(Xn)
    fresh = pickle.loads(pickle.dumps(gp))  # no cache
    monkeypatch.setattr(gp_regressor, "FACTOR_CACHE_BYTES", 0)
    direct = fresh.predictive(Xn)
    assert "factors" not in fresh.__dict__.get("_cache", {})
    np.testing.assert_allclose(cached.loc, direct.loc, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(cached.scale, direct.scale, rtol=1e-9, atol=1e-12)


# ------------------------------------------------------------- GaBaSR's evidence in chunks
def test_scan_stats_value_and_gradient_equal_dense(data):
    """Chunked statistics inside a trace: same evidence and same gradient as the dense ones."""
    import jax

    from bayeskern.blr import scan_feature_stats

    X, y, omega, dense = data
    jX, jy = jnp.asarray(X), jnp.asarray(y)

    def evidence(om, chunk):
        s = (
            feature_stats(rff_features(jX, om), jy)
            if chunk is None
            else scan_feature_stats(lambda xc: rff_features(xc, om), (jX,), jy, chunk)
        )
        return nig_log_marginal(s, 2.0, 1.0, 1.0)

    v0, g0 = jax.value_and_grad(evidence)(omega, None)
    v1, g1 = jax.jit(jax.value_and_grad(evidence), static_argnums=1)(omega, 100)
    np.testing.assert_allclose(float(v1), float(v0), rtol=1e-12)
    np.testing.assert_allclose(np.asarray(g1), np.asarray(g0), rtol=1e-9, atol=1e-9)


def test_gabasr_model_evidence_in_chunks_equals_dense():
    """``gabasr_regression(chunk_size=...)``: the same log density and gradient (eq. 10)."""
    import jax
    from bayeskern.models import gabasr as G
    from numpyro.infer.util import initialize_model

    rng = np.random.default_rng(3)
    X = jnp.asarray(rng.normal(size=(301, 2)))
    y = jnp.asarray(np.sin(X[:, 0]) + 0.1 * rng.normal(size=301))
    B = jnp.concatenate([jnp.ones((301, 1)), X], axis=1)
    spec = G.make_spec(0, 2, n_components=2, n_per_component=4)
    out = []
    for chunk in (None, 64):
        info = initialize_model(
            jax.random.PRNGKey(0),
            G.gabasr_regression,
            model_kwargs=dict(X=X, y=y, spec=spec, mean_basis=B, chunk_size=chunk),
        )
        out.append(jax.value_and_grad(info.potential_fn)(info.param_info.z))
    (v0, g0), (v1, g1) = out
    np.testing.assert_allclose(float(v1), float(v0), rtol=1e-11)
    for k in g0:
        np.testing.assert_allclose(np.asarray(g1[k]), np.asarray(g0[k]), rtol=1e-8, atol=1e-8)


@pytest.mark.parametrize("sampler", ["nuts", "gibbs"])
def test_gabasr_subset_posterior_conditioned_on_all_rows(sampler, tmp_path):
    """``max_sample_rows``: spectral draws from a subset, weights and noise from every row.

    The cached per-draw posteriors (chunked statistics over all 700 rows) must give the
    predictive of Pena-Llamas et al. (2023), eq. (10), computed densely on all rows for the same
    draws; a saved run must predict the same numbers.
    """
    from bayeskern.models import gabasr as G

    rng = np.random.default_rng(0)
    X = rng.normal(size=(700, 2))
    y = np.sin(2 * X[:, 0]) + 0.3 * X[:, 1] + 0.1 * rng.normal(size=700)
    Xn = rng.normal(size=(25, 2))
    m = bk.GaBaSRRegressor(
        sampler=sampler,
        max_sample_rows=120,
        chunk_size=128,
        num_conditioned_draws=6,
        n_features=8,
        num_warmup=10,
        num_samples=5,
        num_chains=2,
        map_steps=2,
        progress_bar=False,
        random_state=0,
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        m.fit(X, y)
    assert m.model_ == "features" and m.n_sample_rows_ == 120
    np.testing.assert_array_equal(m.conditioned_draws_, [0, 2, 4, 5, 7, 9])
    pred = m.predictive(Xn)
    assert pred.loc.shape == (6, 25) and np.all(np.isfinite(pred.loc))
    # the same draws conditioned densely on all rows
    Z, Zn = m.x_scaler_.transform(X), m.x_scaler_.transform(Xn)
    ys = m.y_std_.transform(y)
    B, Bn = (jnp.asarray(G_) for G_ in (m._basis(Z), m._basis(Zn)))
    if sampler == "gibbs":
        from bayeskern.inference.gabasr_gibbs import predict_regression

        loc = predict_regression(
            m.gibbs_samples_,
            Z,
            ys,
            Zn,
            mean_basis=B,
            mean_basis_new=Bn,
            draws=jnp.asarray(m.conditioned_draws_),
        )[0]
    else:
        draws = {k: v[m.conditioned_draws_] for k, v in m._draws(list(m._FEATURE_SITES)).items()}
        loc = np.stack(
            [
                np.asarray(
                    G.regression_predictive(
                        {k: jnp.asarray(v[i]) for k, v in draws.items()},
                        jnp.asarray(Z),
                        jnp.asarray(ys),
                        jnp.asarray(Zn),
                        spec=m.spec_,
                        mean_basis=B,
                        mean_new=Bn,
                    )[0]
                )
                for i in range(len(m.conditioned_draws_))
            ]
        )
    np.testing.assert_allclose(pred.loc, loc * m.y_std_.scale + m.y_std_.mean, rtol=1e-8, atol=1e-8)
    path = tmp_path / "run"
    bk.save_run(m, path)
    m2 = bk.load_run(path)
    np.testing.assert_allclose(m2.predictive(Xn).loc, pred.loc, rtol=1e-10, atol=1e-10)


def test_gabasr_large_data_arguments_are_checked():
    X, y = np.random.default_rng(0).normal(size=(30, 1)), np.arange(30.0)
    for kw, name in (
        (dict(max_sample_rows=5), "max_sample_rows"),
        (dict(max_sample_rows=2.5), "max_sample_rows"),
        (dict(chunk_size=0), "chunk_size"),
        (dict(num_conditioned_draws=0), "num_conditioned_draws"),
        (dict(model="exact", max_sample_rows=20), "max_sample_rows"),
    ):
        with pytest.raises(ValueError, match=name):
            bk.GaBaSRRegressor(**kw).fit(X, y)
