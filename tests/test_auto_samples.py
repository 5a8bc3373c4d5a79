"""``num_samples="auto"``: NUTS draws blocks until the convergence criteria hold, up to a cap."""

import jax.numpy as jnp
import numpy as np
import numpyro
import numpyro.distributions as dist
import pytest

import bayeskern as bk
from bayeskern.inference import AUTO_BLOCK, run_nuts


def _model(y=None):
    mu = numpyro.sample("mu", dist.Normal(0.0, 5.0))
    s = numpyro.sample("s", dist.HalfNormal(2.0))
    numpyro.sample("y", dist.Normal(mu, s), obs=y)


Y = jnp.asarray(np.random.default_rng(0).normal(1.0, 2.0, 40))


def _run(**kw):
    kw = (
        dict(
            model_kwargs={"y": Y},
            rng_key=1,
            num_warmup=100,
            progress_bar=False,
            chain_method="sequential",
        )
        | kw
    )
    return run_nuts(_model, **kw)


def test_auto_stops_once_mixed_and_says_what_it_drew():
    idata = _run(num_samples="auto", num_chains=4)
    attrs = idata.posterior.attrs
    n = idata.posterior.sizes["draw"]
    assert n % AUTO_BLOCK == 0 and attrs["num_samples"] == n
    assert attrs["num_samples_capped"] == 0 and attrs["num_samples_requested"] == "auto"
    assert bk.diagnostics.convergence_report(idata, warn=False).mixed
    if n > AUTO_BLOCK:  # then the draws before the last block were not enough
        first = idata.isel(draw=slice(0, n - AUTO_BLOCK))
        assert not bk.diagnostics.convergence_report(first, warn=False).mixed


def test_judged_names_the_model_did_not_sample_are_skipped():
    idata = _run(num_samples="auto", num_chains=2, max_samples=40, judged=["mu", "absent"])
    assert idata.posterior.sizes["draw"] <= 40


def test_auto_continues_the_chains_and_stops_at_the_cap():
    # one chain never passes the R-hat criterion, so the run goes on to max_samples
    auto = _run(num_samples="auto", num_chains=1, max_samples=AUTO_BLOCK + 50)
    fixed = _run(num_samples=AUTO_BLOCK, num_chains=1)
    assert auto.posterior.sizes["draw"] == AUTO_BLOCK + 50
    assert auto.posterior.attrs["num_samples_capped"] == 1
    # the first block is the fixed-length run, draw for draw; the next block continues it
    np.testing.assert_array_equal(
        auto.posterior["mu"].values[:, :AUTO_BLOCK], fixed.posterior["mu"].values
    )
    tail = auto.posterior["mu"].values[0, AUTO_BLOCK:]
    assert len(np.unique(tail)) > 10 and not np.isin(tail, fixed.posterior["mu"].values).all()
    assert not bk.diagnostics.convergence_report(auto, warn=False).ok


@pytest.mark.parametrize("bad", [0, -5, 2.5, "many", True])
def test_bad_counts_are_refused_by_name(bad):
    with pytest.raises(ValueError, match="max_samples must be a positive integer"):
        _run(num_samples="auto", num_chains=2, max_samples=bad)
    with pytest.raises(
        ValueError,
        match=r"'num_samples' parameter of GPRegressor must be an int.* or a str among \{'auto'\}",
    ):
        bk.GPRegressor(num_samples=bad if bad != 2.5 else "x").fit(np.ones((3, 1)), [1, 2, 3])


def test_a_capped_run_says_so_in_its_verdict():
    auto = _run(num_samples="auto", num_chains=2, max_samples=20)
    verdict = bk.diagnostics.convergence_report(auto, warn=False).verdict
    assert "stopped at its cap of 20 draws per chain" in verdict


def _idata(chains):
    return bk.diagnostics.from_samples({"x": np.asarray(chains)})


def _ar1(n, phi=0.9, seed=0):
    """Four AR(1) chains of ``n`` draws: slow mixing, one stationary distribution."""
    e = np.random.default_rng(seed).standard_normal((4, n))
    x = np.zeros_like(e)
    for t in range(1, n):
        x[:, t] = phi * x[:, t - 1] + e[:, t]
    return x


def test_projection_to_the_cap_follows_mixing_chains():
    """ESS grows with the draws and R-hat's excess shrinks as one over them: AR(1) chains
    (coefficient 0.9), measured at 300 and at 2 000 draws, against the projection."""
    x = _ar1(2000)
    early = bk.diagnostics.convergence_report(_idata(x[:, :300]), warn=False)
    late = bk.diagnostics.convergence_report(_idata(x), warn=False)
    rhat, ess = bk.diagnostics.projected_convergence(early.max_rhat, early.min_ess_bulk, 300, 2000)
    assert 0.6 < ess / late.min_ess_bulk < 1.6
    assert abs(rhat - late.max_rhat) < 0.01 and rhat < early.max_rhat
    # the formula itself
    r, n = bk.diagnostics.projected_convergence(1.1, 50.0, 500, 2000)
    assert n == 200.0 and r == pytest.approx(np.sqrt(1 + (1.1**2 - 1) / 4))


def test_auto_stop_says_why():
    from bayeskern.diagnostics import AUTO_PROJECT_FROM, auto_stop

    rng = np.random.default_rng(1)
    mixed = rng.standard_normal((4, 400))
    stuck = mixed + np.array([0.0, 0.0, 3.0, 3.0])[:, None]  # two chains in another mode
    assert auto_stop(_idata(mixed), 400, 2000) == "mixed"
    assert auto_stop(_idata(stuck), 400, 2000) == "projected"
    # before AUTO_PROJECT_FROM draws per chain nothing is projected; at the cap it stops
    short = stuck[:, : AUTO_PROJECT_FROM - 100]
    assert auto_stop(_idata(short), AUTO_PROJECT_FROM - 100, 2000) is None
    assert auto_stop(_idata(short), AUTO_PROJECT_FROM - 100, AUTO_PROJECT_FROM - 100) == "cap"
    # slow chains on their way (R-hat 1.06, ESS 66 at 300 draws; enough at the cap) go on
    slow = _ar1(300)
    assert not bk.diagnostics.convergence_report(_idata(slow), warn=False).mixed
    assert auto_stop(_idata(slow), 300, 2000) is None


def _two_modes(y=None):
    numpyro.sample(
        "x",
        dist.MixtureSameFamily(
            dist.Categorical(jnp.array([0.5, 0.5])), dist.Normal(jnp.array([-8.0, 8.0]), 1.0)
        ),
    )


def test_chains_stuck_in_two_modes_stop_early_and_say_so():
    """Four chains of a two-mode posterior (modes 16 standard deviations apart: no NUTS
    trajectory crosses) that start in both: R-hat stays far above 1.01, so
    ``num_samples="auto"`` stops once the projection to the cap misses by the margin, not at
    the cap, and the verdict says why."""
    from bayeskern.diagnostics import AUTO_PROJECT_FROM

    idata = run_nuts(
        _two_modes,
        model_kwargs={},
        rng_key=0,
        num_warmup=100,
        num_samples="auto",
        num_chains=4,
        progress_bar=False,
        chain_method="sequential",
        init_strategy=numpyro.infer.init_to_value(values={"x": 0.0}),
    )
    means = idata.posterior["x"].mean("draw").values
    assert (means < -4).any() and (means > 4).any()  # the precondition: both modes held
    attrs = idata.posterior.attrs
    assert attrs["num_samples_stop"] == "projected" and attrs["num_samples_capped"] == 0
    assert idata.posterior.sizes["draw"] == AUTO_PROJECT_FROM
    report = bk.diagnostics.convergence_report(idata, warn=False)
    assert not report.ok
    assert f"stopped at {AUTO_PROJECT_FROM} draws per chain" in report.verdict


def _model_with_start(y=None, start=None):
    _model(y)
    numpyro.deterministic("start_seen", start)


def test_data_at_mode_hands_the_chains_values_computed_at_the_posterior_mode():
    """``data_at_mode`` (used by the classifiers to start every draw's Newton iterations at the
    mode's latent values): the chains run on the values it computes from the posterior mode,
    here the mode's ``mu`` itself, instead of the ``model_kwargs`` given."""
    idata = run_nuts(
        _model_with_start,
        model_kwargs={"y": Y, "start": jnp.zeros(())},
        rng_key=1,
        num_warmup=30,
        num_samples=30,
        num_chains=2,
        progress_bar=False,
        chain_method="sequential",
        init="map",
        data_at_mode=lambda v: {"start": v["mu"]},
    )
    seen = idata.posterior["start_seen"].values
    assert np.ptp(seen) == 0.0  # one value for every draw of every chain
    assert abs(float(seen.flat[0]) - float(Y.mean())) < 0.1  # the mode of mu (flat-ish prior)


def test_gp_classifier_takes_auto_samples():
    """``GPClassifier(num_samples="auto")`` draws blocks until the criteria hold (its default
    stays 500); a wrong count is refused by name as for the regressor."""
    rng = np.random.default_rng(3)
    X = rng.uniform(-2, 2, (40, 1))
    y = (X[:, 0] + 0.5 * rng.standard_normal(40) > 0).astype(int)
    est = bk.GPClassifier(
        num_warmup=100, num_samples="auto", num_chains=2, progress_bar=False, random_state=0
    ).fit(X, y)
    attrs = est.idata_.posterior.attrs
    assert est.num_samples_ % AUTO_BLOCK == 0 and attrs["num_samples"] == est.num_samples_
    assert attrs["num_samples_requested"] == "auto"
    assert (
        attrs["num_samples_capped"] == 1
        or bk.diagnostics.convergence_report(est.idata_, warn=False).mixed
    )
    with pytest.raises(
        ValueError,
        match=r"'num_samples' parameter of GPClassifier must be an int.* or a str among \{'auto'\}",
    ):
        bk.GPClassifier(num_samples="many").fit(X, y)


def _run_nuts_argument(monkeypatch, est, name):
    """The value of ``run_nuts``'s argument ``name`` when ``est`` fits (nothing is sampled)."""
    import bayeskern.estimators.gp_base as gp_module

    class Seen(Exception):
        pass

    def record(model, **kw):
        raise Seen(kw[name])

    monkeypatch.setattr(gp_module, "run_nuts", record)
    X = np.linspace(0, 1, 12)[:, None]
    y = (X[:, 0] > 0.5).astype(int)
    with pytest.raises(Seen) as seen:
        est.set_params(progress_bar=False).fit(X, y)
    return seen.value.args[0]


@pytest.mark.parametrize(
    ("cls", "default"), [(bk.GPRegressor, 200), (bk.GPClassifier, 200)], ids=["reg", "clf"]
)
def test_auto_warmup_is_the_default_warmup(cls, default, monkeypatch):
    """``num_warmup="auto"`` runs the warm-up of the default arguments, whatever class."""
    import inspect

    assert inspect.signature(cls).parameters["num_warmup"].default == default
    assert _run_nuts_argument(monkeypatch, cls(num_warmup="auto"), "num_warmup") == default


@pytest.mark.parametrize(
    ("make", "adapts"),
    [
        (lambda: bk.GPRegressor(), True),
        (lambda: bk.GPClassifier(), False),
        (lambda: bk.GPClassifier(inference="latent"), True),
        (lambda: bk.GPClassifier(adapt_mass_matrix=True), True),
        (lambda: bk.GPClassifier(inference="latent", adapt_mass_matrix=False), False),
        (lambda: bk.GPRegressor(adapt_mass_matrix=False), False),
        (lambda: bk.GPClassifier(init="prior"), True),
    ],
    ids=["reg", "clf", "clf-latent", "clf-asked", "latent-asked", "reg-asked", "clf-prior"],
)
def test_which_fits_adapt_the_mass_matrix(make, adapts, monkeypatch):
    """The classifier's Laplace route keeps the inverse Hessian at the mode by default; the
    regressor and the latent route adapt the mass; a value the user passes is what runs
    (``init="prior"`` has no Hessian to keep: always adapted)."""
    assert _run_nuts_argument(monkeypatch, make(), "adapt_mass_matrix") is adapts
