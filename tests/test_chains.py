"""``bayeskern.inference.chains.Chains``: NumPyro's chains, one compiled program per fit."""

import jax
import jax.numpy as jnp
import numpy as np
import numpyro
import numpyro.distributions as dist
import pytest
from numpyro.infer import MCMC, hmc_util, init_to_uniform

from bayeskern.inference import AUTO_BLOCK, run_nuts
from bayeskern.inference.chains import Chains, _one_step_size_window
from bayeskern.inference.nuts_kernel import DataArgumentNUTS
from bayeskern.inference.start import model_functions


def _model(y=None):
    mu = numpyro.sample("mu", dist.Normal(0.0, 5.0))
    s = numpyro.sample("s", dist.HalfNormal(2.0))
    numpyro.deterministic("twice_mu", 2 * mu)
    numpyro.sample("y", dist.Normal(mu, s), obs=y)


Y = jnp.asarray(np.random.default_rng(0).normal(1.0, 2.0, 40))


@pytest.mark.parametrize("method", ["sequential", "vectorized"])
def test_chains_are_numpyros_chains(method):
    """Warm-up in blocks of 7, then two blocks of draws: the same draws and statistics as
    NumPyro's ``MCMC.run`` over the whole run, chain for chain (same keys, same starts)."""
    num_chains, num_warmup, num_samples = 2, 30, 20
    key = jax.random.PRNGKey(4)
    fns = model_functions(_model, {"y": Y}, jax.random.split(key, num_chains), init_to_uniform)

    def kernel():
        return DataArgumentNUTS(fns.potential_gen, fns.postprocess_gen)

    mcmc = MCMC(
        kernel(),
        num_warmup=num_warmup,
        num_samples=num_samples,
        num_chains=num_chains,
        chain_method=method,
        jit_model_args=True,
        progress_bar=False,
    )
    mcmc.run(key, fns.data, init_params=fns.starts, extra_fields=("num_steps",))
    ref = mcmc.get_samples(group_by_chain=True)
    ref_steps = mcmc.get_extra_fields(group_by_chain=True)["num_steps"]

    chains = Chains(
        kernel(),
        fns.postprocess_gen,
        fns.data,
        num_chains=num_chains,
        method=method,
        num_warmup=num_warmup,
        length=10,
    )
    state = chains.init(jax.random.split(key, num_chains), fns.starts)
    for count in (7, 7, 7, 9):
        state, _, _ = chains.advance(state, count, collect=False)
    state, first, stats = chains.advance(state, 10)
    state, second, stats2 = chains.advance(state, 10)
    for name in ("mu", "s", "twice_mu"):
        ours = np.concatenate([first[name], second[name]], axis=1)
        np.testing.assert_allclose(ours, ref[name], rtol=1e-9, atol=1e-12)
    np.testing.assert_array_equal(
        np.concatenate([stats["num_steps"], stats2["num_steps"]], axis=1), ref_steps
    )
    assert stats["diverging"].dtype == bool and stats["accept_prob"].shape == (2, 10)
    with pytest.raises(ValueError, match="count must be in 1..10"):
        chains.advance(state, 11)


def test_a_fixed_mass_adapts_the_step_size_over_the_whole_warmup():
    """With the mass matrix fixed (``adapt_mass_matrix=False``) the chains are NumPyro's with
    one adaptation window: the step size's dual averaging runs over all 160 warm-up
    iterations. NumPyro's own schedule (Stan's windows) would restart it at the ends of its
    mass-matrix windows and keep the average of the last 50 iterations: other chains."""
    num_chains, num_warmup, num_samples = 2, 160, 10
    key = jax.random.PRNGKey(6)
    fns = model_functions(_model, {"y": Y}, jax.random.split(key, num_chains), init_to_uniform)

    def kernel():
        return DataArgumentNUTS(fns.potential_gen, fns.postprocess_gen, adapt_mass_matrix=False)

    def numpyro_step_sizes():
        mcmc = MCMC(
            kernel(),
            num_warmup=num_warmup,
            num_samples=num_samples,
            num_chains=num_chains,
            chain_method="sequential",
            jit_model_args=True,
            progress_bar=False,
        )
        mcmc.run(key, fns.data, init_params=fns.starts, extra_fields=("adapt_state.step_size",))
        return mcmc.get_extra_fields(group_by_chain=True)["adapt_state.step_size"]

    stan_windows = numpyro_step_sizes()
    with _one_step_size_window(True):
        one_window = numpyro_step_sizes()
    assert len(hmc_util.build_adaptation_schedule(num_warmup)) > 2  # NumPyro's own again

    chains = Chains(
        kernel(),
        fns.postprocess_gen,
        fns.data,
        num_chains=num_chains,
        method="sequential",
        num_warmup=num_warmup,
        length=num_warmup,
    )
    state = chains.init(jax.random.split(key, num_chains), fns.starts)
    state, _, _ = chains.advance(state, num_warmup, collect=False)
    _, _, stats = chains.advance(state, num_samples)
    ours = stats["adapt_state.step_size"]
    np.testing.assert_allclose(ours, one_window, rtol=1e-9)
    assert np.all(np.abs(ours[:, 0] / stan_windows[:, 0] - 1) > 1e-3)


def _count_transitions_traced(monkeypatch):
    traced = []
    original = DataArgumentNUTS.sample

    def sample(self, *a, **k):
        traced.append(1)
        return original(self, *a, **k)

    monkeypatch.setattr(DataArgumentNUTS, "sample", sample)
    return traced


def test_one_program_for_warmup_and_every_block(monkeypatch):
    """A run that goes on block after block (one chain never passes R-hat, so it continues to
    its cap) traces the NUTS transition as often as a run of one block: once."""
    traced = _count_transitions_traced(monkeypatch)
    kw = dict(model_kwargs={"y": Y}, rng_key=1, num_warmup=50, num_chains=1, progress_bar=False)
    run_nuts(_model, num_samples=AUTO_BLOCK, **kw)
    one_block = len(traced)
    traced.clear()
    idata = run_nuts(_model, num_samples="auto", max_samples=3 * AUTO_BLOCK, **kw)
    assert idata.posterior.sizes["draw"] == 3 * AUTO_BLOCK
    assert len(traced) == one_block == 1


def test_progress_bar_steps_give_the_same_draws():
    """With a progress bar the program returns every tenth of a block (the bar moves, Ctrl-C
    lands); the chains are the same, to the last bit."""
    kw = dict(model_kwargs={"y": Y}, rng_key=2, num_warmup=40, num_samples=30, num_chains=2)
    quiet = run_nuts(_model, progress_bar=False, chain_method="sequential", **kw)
    shown = run_nuts(_model, progress_bar=True, chain_method="sequential", **kw)
    for name in ("mu", "s"):
        np.testing.assert_array_equal(quiet.posterior[name].values, shown.posterior[name].values)
    np.testing.assert_array_equal(
        quiet.sample_stats["n_steps"].values, shown.sample_stats["n_steps"].values
    )


def test_parallel_with_fewer_devices_than_chains_shares_them_out():
    """``chain_method="parallel"`` with 5 chains on the test run's CPU devices (1, or 4 when
    bayeskern chose them): the chains split evenly over as many devices as divide their
    number (here one, the chains one after another) and are the sequential run's chains."""
    kw = dict(model_kwargs={"y": Y}, rng_key=5, num_warmup=20, num_samples=20, num_chains=5)
    par = run_nuts(_model, progress_bar=False, chain_method="parallel", **kw)
    seq = run_nuts(_model, progress_bar=False, chain_method="sequential", **kw)
    assert par.posterior.attrs["chain_method"] == "parallel"
    np.testing.assert_allclose(par.posterior["mu"].values, seq.posterior["mu"].values, rtol=1e-8)
