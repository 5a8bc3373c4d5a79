"""Gibbs chains in worker processes (``bayeskern.inference.processes``)."""

import math
import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest
from worker_targets import compile_and_time

from bayeskern.inference import gabasr_gibbs as gg
from bayeskern.inference import gibbs_processes as gp
from bayeskern.inference import processes


def test_chains_in_processes_are_the_sequential_chains():
    """The same keys and initial states: the same draws, to the last bit."""
    r = np.random.default_rng(0)
    X = r.uniform(-1, 1, (40, 1))
    y = (np.sin(3 * X[:, 0]) + r.normal(0, 0.3, 40) > 0).astype(float)
    kw = dict(task="classification", n_features=6, num_warmup=3, num_samples=4, num_chains=2)
    seq = gg.gibbs_sample(0, X, y, chain_method="sequential", **kw)
    par = gg.gibbs_sample(0, X, y, chain_method="processes", **kw)
    assert set(par.samples) == set(seq.samples) and set(par.sample_stats) == set(seq.sample_stats)
    for name in seq.samples:
        np.testing.assert_array_equal(par.samples[name], seq.samples[name], err_msg=name)
    for name in seq.sample_stats:
        np.testing.assert_array_equal(par.sample_stats[name], seq.sample_stats[name])


def test_auto_goes_to_processes_only_for_long_runs(monkeypatch):
    monkeypatch.setattr(gp, "can_start_processes", lambda: True)
    assert gp.auto_chain_method(455, 500, 1000, 4) == "processes"
    # breast_cancer's default fit (159 columns): its sweeps' fixed part counts too
    assert gp.auto_chain_method(455, 159, 1000, 4) == "processes"
    assert gp.auto_chain_method(150, 159, 1000, 4) == "processes"
    assert gp.auto_chain_method(455, 159, 200, 4) == "sequential"
    assert gp.auto_chain_method(40, 500, 40, 4) == "sequential"  # seconds of work
    assert gp.auto_chain_method(455, 500, 1000, 1) == "sequential"  # one chain
    assert gp.auto_chain_method(12_000, 500, 1000, 4) == "processes"
    monkeypatch.setattr(gp, "can_start_processes", lambda: False)
    assert gp.auto_chain_method(455, 500, 1000, 4) == "sequential"


def test_on_an_accelerator_the_chains_are_batched_not_processes(monkeypatch):
    """Worker processes would each claim the GPU: "auto" batches the chains, "processes" fails."""
    monkeypatch.setattr(gp, "can_start_processes", lambda: True)
    monkeypatch.setattr(gp.jax, "default_backend", lambda: "gpu")
    assert gp.auto_chain_method(12_000, 500, 1000, 4) == "vectorized"
    assert gp.auto_chain_method(12_000, 500, 1000, 1) == "sequential"
    X, y = np.zeros((10, 1)), np.arange(10.0) % 2
    with pytest.raises(ValueError, match="chain_method='processes'.*'gpu'"):
        gg.gibbs_sample(0, X, y, task="classification", n_features=2, chain_method="processes")


@pytest.mark.parametrize(
    ("cores", "chains", "expected"), [(2, 4, 2), (4, 3, 3), (2, 3, 1), (8, 4, 4)]
)
def test_every_process_gets_the_same_share_of_chains(monkeypatch, cores, chains, expected):
    monkeypatch.setattr(processes, "available_cores", lambda: cores)
    assert processes.process_count(chains) == expected


def test_an_error_in_a_worker_is_raised_here():
    with pytest.raises(ValueError, match="math domain error"):
        processes.map_in_processes(math.sqrt, [(4.0,), (-1.0,)])
    assert processes.map_in_processes(math.sqrt, [(4.0,), (9.0,)]) == [2.0, 3.0]


def test_compile_first_lets_one_worker_compile_before_the_others():
    """The followers' compilation starts only once the first worker's has ended (they then
    read its programs from the shared cache); outside a worker ``compile_once`` just runs."""
    lead, *others = processes.map_in_processes(
        compile_and_time, [(1.0,), (0.0,), (0.0,)], compile_first=True
    )
    for start, _ in others:
        assert start >= lead[1]
    # without compile_first the three run at once
    lead, *others = processes.map_in_processes(compile_and_time, [(2.5,), (0.0,), (0.0,)])
    assert min(start for start, _ in others) < lead[1]
    assert processes.compile_once(lambda: 7) == 7


def test_processes_is_refused_for_nuts():
    import bayeskern as bk

    with pytest.raises(ValueError, match="chain_method='processes' is for the Gibbs sampler"):
        bk.GaBaSRRegressor(chain_method="processes").fit(np.arange(10.0)[:, None], np.arange(10.0))


@pytest.mark.parametrize(("n_classes", "num_samples"), [(2, 10), (3, 10), (2, "auto")])
def test_laplace_classifier_chains_in_processes_are_the_sequential_chains(
    n_classes, num_samples, monkeypatch
):
    """``GPClassifier``'s NUTS chains shared out to processes (the model rebuilt there from
    JSON and arrays): the draws and sampler statistics of the sequential chains. With
    ``num_samples="auto"`` (blocks of 10 here, a stop rule met at 30 draws) the workers hand
    over each block and this process stops them at the same draw as the sequential run."""
    import bayeskern as bk
    from bayeskern.inference import nuts

    monkeypatch.setattr(nuts, "AUTO_BLOCK", 10)  # read here; the workers get it as an argument
    monkeypatch.setattr(
        nuts, "_auto_stop", lambda idata, judged, taken, cap: "mixed" if taken >= 30 else None
    )
    r = np.random.default_rng(0)
    X = r.normal(size=(30, 2))
    y = np.digitize(X[:, 0] + 0.5 * r.normal(size=30), [-0.4, 0.4][: n_classes - 1])
    kw = dict(
        num_warmup=15, num_samples=num_samples, num_chains=2, random_state=0, progress_bar=False
    )
    seq = bk.GPClassifier(chain_method="sequential", **kw).fit(X, y)
    assert seq.num_samples_ == (30 if num_samples == "auto" else 10)
    par = bk.GPClassifier(chain_method="processes", **kw).fit(X, y)
    assert par.idata_.posterior.attrs["chain_method"] == "processes"
    assert set(par.idata_.posterior.data_vars) == set(seq.idata_.posterior.data_vars)
    for name in seq.idata_.posterior.data_vars:
        np.testing.assert_allclose(
            par.idata_.posterior[name], seq.idata_.posterior[name], rtol=1e-9, err_msg=name
        )
    for name in ("n_steps", "diverging", "step_size"):
        np.testing.assert_array_equal(par.idata_.sample_stats[name], seq.idata_.sample_stats[name])
    np.testing.assert_allclose(par.predict_proba(X), seq.predict_proba(X), rtol=1e-9)


def test_auto_stop_lets_workers_draw_a_block_only_after_judging_the_last(tmp_path):
    """``num_samples="auto"`` with the chains in processes: after each block a worker waits for
    the calling process's decision on it (``go-<block>`` or ``stop.json``), so that no worker
    draws a block past the stop; the decision is the draws judged so far."""
    from bayeskern.inference.nuts_processes import AutoStop
    from bayeskern.inference.processes import chain_outputs, write_npz

    judged = []

    def decide(taken, draws, stats):
        judged.append((taken, draws["x"].shape))
        return "mixed" if taken >= 20 else None

    stop = AutoStop(block=10, max_samples=100, decide=decide)
    stop.folder, stop.groups = tmp_path, 2
    for group in (0, 1):
        block = {"x": np.full((1, 10), float(group))}, {"num_steps": np.ones((1, 10))}
        write_npz(tmp_path / f"{group}-0.npz", chain_outputs(*block))
        stop()  # judged only once both groups have written block 0
    assert judged == [(10, (2, 10))] and stop.draws is None
    assert AutoStop.wait(tmp_path, block=0) == math.inf  # go on: block 1 may be drawn
    assert not (tmp_path / "go-1").exists()
    for group in (0, 1):
        write_npz(tmp_path / f"{group}-1.npz", chain_outputs(*block))
    stop()
    assert judged[-1] == (20, (2, 20)) and stop.reason == "mixed"
    assert AutoStop.wait(tmp_path, block=1) == 20 == AutoStop.wait(tmp_path)
    assert not (tmp_path / "go-1").exists()


def test_laplace_classifier_goes_to_processes_only_for_long_fits(monkeypatch):
    import bayeskern as bk
    from bayeskern.estimators import gp_laplace as gp_module
    from bayeskern.estimators.base import Standardizer
    from bayeskern.kernels import name_leaves

    monkeypatch.setattr(gp_module, "can_start_processes", lambda: True)

    def method(n, n_classes, **params):
        est = bk.GPClassifier(**params)
        est.kernel_ = name_leaves(bk.kernels.RBF())
        est.x_std_ = Standardizer(np.zeros(4), np.ones(4))
        return est._laplace_chains(np.zeros((n, 4)), np.zeros(n, int), n_classes)["chain_method"]

    assert method(105, 3) == "processes"  # iris: 4 chains x 1 000 iterations
    assert method(455, 2) == "processes"  # breast_cancer
    assert method(75, 3, num_warmup=20, num_samples=20) == "sequential"  # seconds of work
    assert method(455, 2, num_chains=1) == "sequential"
    assert method(455, 2, num_samples="auto") == "processes"  # blocks judged here
    assert method(75, 3, num_warmup=20, num_samples="auto") == "sequential"
    monkeypatch.setattr(gp_module, "can_start_processes", lambda: False)
    assert method(455, 2) == "sequential"
    monkeypatch.setattr(gp_module.jax, "default_backend", lambda: "gpu")
    assert method(455, 2) is None  # JAX's rule: batched on the accelerator


def test_nuts_in_processes_needs_a_model_it_can_rebuild():
    import numpyro
    import numpyro.distributions as dist

    import bayeskern as bk
    from bayeskern.inference import run_nuts

    X, y = np.arange(10.0)[:, None], np.arange(10.0)
    # the estimator says which routes have worker processes; run_nuts names its argument
    with pytest.raises(ValueError, match="chain_method='processes' is available for GPClass"):
        bk.GPRegressor(chain_method="processes").fit(X, y)
    with pytest.raises(ValueError, match="chain_method='processes' needs a model that can be"):
        run_nuts(
            lambda: numpyro.sample("m", dist.Normal()),
            model_kwargs={},
            rng_key=0,
            num_chains=2,
            chain_method="processes",
        )


INTERRUPTED = """
import time
from bayeskern.inference.processes import map_in_processes
map_in_processes(time.sleep, [(120,), (120,)])
"""


def _children(pid):
    path = f"/proc/{pid}/task/{pid}/children"
    with open(path) as f:
        return [int(c) for c in f.read().split()]


@pytest.mark.skipif(
    not os.path.exists(f"/proc/{os.getpid()}/task/{os.getpid()}/children"),
    reason="needs Linux's /proc",
)
def test_ctrl_c_stops_the_workers():
    """Ctrl-C in the caller leaves no worker running."""
    caller = subprocess.Popen([sys.executable, "-c", INTERRUPTED])
    try:
        deadline = time.monotonic() + 60
        while len(workers := _children(caller.pid)) < 2:
            assert time.monotonic() < deadline, "the workers did not start"
            time.sleep(0.2)
        time.sleep(1.0)
        caller.send_signal(signal.SIGINT)
        assert caller.wait(timeout=60) != 0
    finally:
        caller.kill()
    for pid in workers:
        assert not os.path.exists(f"/proc/{pid}"), f"worker {pid} still runs"
